//! SQL injection against scribe-rs, end to end: a real PostgreSQL (testkit) with a seeded `notes` table, scribe-rs
//! in this process, raw HTTP/1.1 over TCP. Every position a client controls that reaches SQL is tried with every
//! input of the corpus, and every answer is checked against an oracle of what the documented API must return.
//!
//! The corpus (`corpus()`): classic tautologies (`' OR 1=1--`), stacked queries (`; DROP TABLE`, DELETE,
//! UPDATE, TRUNCATE, CREATE, COPY), comments, quotes of every kind (single, double, backtick, dollar quoting,
//! `E''`, `U&''`), Unicode quotes (U+2018/2019/201C/201D/02BC/FF07), backslashes, NUL, identifiers of 55, 56,
//! 63, 64 and 1000 characters, `"` identifier-quoting breaks, UNION SELECT, pg_sleep(5) timing probes, error-
//! based probes (`CAST(version() AS int)`), type juggling (`01`, `+1`, `1e0`, `[1]`, `{"$gt":0}`, `NaN`,
//! 2^31, full-width digits), CR LF, and plain identifiers (`SELECT`, `union`, `pg_sleep`, `_`).
//!
//! Positions (`injection_corpus_changes_nothing_it_should_not`), each input raw where the request line allows
//! it and percent-encoded always:
//! * path segments: component, subcomponent and id, with GET (by id, /all, history), POST (/all, create), PUT
//!   and DELETE (drop, truncate, delete by id; on a sacrificial `victim` table);
//! * every filter form the parser accepts (crates/scribe/src/query.rs): `filter` as JSON and in bracket form,
//!   for its keys (column, dotted JSON path) and values; `filter2` with `contains` and `is one of`, in JSON and
//!   bracket form, for keys, values and the operator; `groupBy`; `timeMachine` key and timestamp (JSON, bracket
//!   and bare); `parents`, `children`, `referenceComponent`, `referencePath`; the same in JSON bodies (`filter`
//!   as an object and as a string, `filter2`, `groupBy`, GET-by-id options);
//! * record values on create (`data` strings and keys, `created_by`), and the bearer token of POST /sql.
//!
//! What it proves, and the figure reached on its last run: 137 inputs x (21 path positions, in each of the
//! input's raw and encoded forms, + 49 query and body positions + 2 record values + 2 token spellings) = 11332
//! requests (4809 answered 200, 6254 400, 264 401, 5 404): 0 5xx, 0 answers that differ from the oracle (so 0
//! extra rows: every 200 has exactly the rows the API's semantics give, e.g. `filter[data.title]=' OR '1'='1`
//! returns only the note whose title is that string, `filter2` `contains` `' OR 1=1--` only the note tagged
//! so), the slowest request 31 ms against the 4 s that a pg_sleep(5) would take, no injected response header,
//! no version() or /etc/passwd text in any body. Afterwards the public tables are exactly the seeded ones plus the
//! `<name>`/`<name>_history` pairs that POST/PUT with a *valid* component name create by design (scribe-rs
//! creates a component's table on its first write; the oracle computes which names are valid identifiers
//! of at most 55 characters), `notes` and its history are byte-for-byte unchanged (md5 of every row), the
//! victim table lost exactly the rows whose ids the integer-parsing inputs name, and every created table
//! holds exactly the rows its successful creates wrote (25 valid names created 25 table pairs).
//!
//! `sqlmap_finds_nothing_injectable`: Debian's sqlmap (`apt-get install sqlmap`, 1.7.2 on bookworm), bounded
//! (`--batch --level 1 --risk 1 --dbms PostgreSQL`, 10 s request timeout, no retries), 11 runs against query
//! parameters (filter, filter2 JSON with injection inside it, timeMachine, children, referenceComponent /
//! referencePath), path segments (custom `*` markers on component, subcomponent and id) and JSON bodies (a
//! list query, a create): fails if it reports an injection point or does not finish its tests; afterwards only
//! the `sink` table its creates name is new and `notes` is unchanged. Last run: nothing injectable, 17 s. With
//! `any_of` in query.rs changed to interpolate its values, sqlmap reports the parameter (boolean, error and
//! time-based), so the run is not vacuous. A missing sqlmap fails the test with the package name, as the
//! deployment tools do; the README's test command must install it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::http::{Response, enc, request_bytes, send_raw};
use testkit::{Postgres, Redis};

const SCHEMAS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../schemas");
const SQL_TOKEN: &str = "sql-injection-suite token, never sent by any request";
const T0: &str = "2026-11-29T20:00:00Z";
/// The timing probes ask for pg_sleep(5): an answer this slow means one ran.
const SLOW: Duration = Duration::from_secs(4);
/// Text that only an injected query could put in a body.
const LEAKS: [&str; 3] = ["x86_64-pc-linux", "root:x:0:0", "SCRAM-SHA-256$"];

// ------------------------------------------------------------------------------------------------------------
// The stack
// ------------------------------------------------------------------------------------------------------------

/// scribe-rs in this process on its own database and Redis. Dropped in field order: server, Redis, Postgres.
struct Stack {
    addr: SocketAddr,
    /// Shut down gracefully when dropped (serve::Server's own Drop).
    _server: serve::Server,
    _redis: Redis,
    pg: Postgres,
    db: &'static str,
}

impl Stack {
    fn start(db: &'static str) -> Stack {
        let pg = Postgres::start();
        let database_url = pg.create_database(db);
        let redis = Redis::start();
        let redis_url = format!("redis://127.0.0.1:{}/1", redis.port());
        let args = [
            "scribe-rs",
            "--database-url",
            &database_url,
            "--redis-url",
            &redis_url,
            "--schema-dir",
            SCHEMAS,
            "--sql-token",
            SQL_TOKEN,
        ];
        let config = <scribe::Config as clap::Parser>::try_parse_from(args).expect("scribe-rs flags parse");
        let settings = config.resolve().expect("scribe-rs config resolves");
        // The database was created above, so scribe-rs's own ensure_database has nothing to do.
        let shared = scribe::Shared::new(settings).expect("scribe-rs state");
        let listeners = serve::bind_reuseport("127.0.0.1:0".parse().expect("an address"), 1).expect("bind");
        let limits = serve::Limits { workers: 1, shutdown_timeout: Duration::from_secs(2), ..Default::default() };
        let server = scribe::start(shared, listeners, limits).expect("scribe-rs starts");
        Stack { addr: server.local_addr(), _server: server, _redis: redis, pg, db }
    }

    fn psql(&self, sql: &str) -> String {
        self.pg.psql(self.db, sql)
    }

    fn tables(&self) -> BTreeSet<String> {
        self.psql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// md5 over every row of a table, in id order: any change to any row changes it.
    fn digest(&self, table: &str) -> String {
        self.psql(&format!("SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY id), '')) FROM \"{table}\" t"))
    }

    fn ids(&self, table: &str) -> Vec<i64> {
        let out = self.psql(&format!("SELECT id FROM \"{table}\" ORDER BY id"));
        out.lines().map(|l| l.parse().expect("an id")).collect()
    }

    fn count(&self, table: &str) -> usize {
        self.psql(&format!("SELECT count(*) FROM \"{table}\"")).parse().expect("a count")
    }

    fn create(&self, component: &str, data: &Value, by: i64) {
        let res = raw(self.addr, "POST", format!("/{component}").as_bytes(), &[], Some(&envelope(data, by)));
        assert_eq!(res.status, 200, "seeding {component}: {}", res.text());
    }
}

fn envelope(data: &Value, by: impl Into<Value>) -> Vec<u8> {
    let by = by.into();
    json!({"data": data, "date_created": T0, "date_modified": T0, "created_by": by, "modified_by": 1})
        .to_string()
        .into_bytes()
}

/// One request, byte for byte (a body goes with any method, GET included, as scribe-rs reads one).
fn raw(addr: SocketAddr, method: &str, target: &[u8], headers: &[(&str, &[u8])], body: Option<&[u8]>) -> Response {
    let body = body.filter(|b| !b.is_empty());
    let mut fields = headers.to_vec();
    if body.is_some() || matches!(method, "POST" | "PUT") {
        fields.push(("Content-Type", b"application/json"));
    }
    send_raw(addr, &request_bytes(method, target, &fields, body))
        .unwrap_or_else(|e| panic!("{method} {}: {e}", String::from_utf8_lossy(target)))
}

// ------------------------------------------------------------------------------------------------------------
// The seed and the oracle: what the documented API answers, computed from the seed without the server
// ------------------------------------------------------------------------------------------------------------

struct Seed {
    id: i64,
    created_by: i64,
    data: Value,
}

fn seed() -> Vec<Seed> {
    let rows = [
        (1, json!({"title": "alpha", "ids": [1, 2], "owner": {"name": "ann"}, "n": 1, "tags": ["x"]})),
        (2, json!({"title": "beta", "ids": [2, 3], "owner": {"name": "bob"}, "n": 2, "tags": ["y"]})),
        // Rows whose values are themselves injection text: the filters must match them exactly, nothing more.
        (
            2,
            json!({"title": "' OR '1'='1", "ids": [3], "owner": {"name": "o'brien \"q\" \\ ; --"}, "n": 3,
            "tags": ["' OR 1=1--"]}),
        ),
        (
            3,
            json!({"title": "Robert'); DROP TABLE notes;--", "ids": [], "owner": {"name": "\u{2019}"}, "n": 4,
            "tags": []}),
        ),
    ];
    rows.into_iter().enumerate().map(|(i, (by, data))| Seed { id: i as i64 + 1, created_by: by, data }).collect()
}

const COLUMNS: [&str; 6] = ["id", "data", "date_created", "date_modified", "created_by", "modified_by"];
const EXISTING: [&str; 4] = ["notes", "notes_history", "victim", "victim_history"];

#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// 200 with exactly these rows, by id, in order.
    Rows(Vec<i64>),
    /// 400.
    Bad,
    /// 400, or 200 with no rows (a value Postgres may or may not take as a timestamp).
    EmptyOrBad,
    /// 200 with this many entries (array items, or the rows in all groups of a groupBy object).
    Count(usize),
    /// Exactly this status.
    Status(u16),
}

/// A query-string value as scribe-rs reads it: JSON when it parses, else the string.
fn loose(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

fn values_of(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(list) => list.clone(),
        other => vec![other.clone()],
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(list) => list.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// Postgres's text for a jsonb value (`jsonb::text`): keys ordered by length then bytes, `, ` and `: `.
fn jsonb_text(v: &Value) -> String {
    match v {
        Value::Array(list) => format!("[{}]", list.iter().map(jsonb_text).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| (a.len(), a.as_bytes()).cmp(&(b.len(), b.as_bytes())));
            let pairs: Vec<String> =
                keys.iter().map(|k| format!("{}: {}", Value::String((*k).clone()), jsonb_text(&map[*k]))).collect();
            format!("{{{}}}", pairs.join(", "))
        }
        other => other.to_string(),
    }
}

/// jsonb equality of scalars: numbers by value.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// jsonb `@>`.
fn json_contains(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(xs), Value::Array(ys)) => ys.iter().all(|y| xs.iter().any(|x| json_contains(x, y))),
        (Value::Object(m), Value::Object(n)) => n.iter().all(|(k, v)| m.get(k).is_some_and(|w| json_contains(w, v))),
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => false,
        _ => json_eq(a, b),
    }
}

/// The column of a filter key, if it is one the table has; `Err` = 400.
fn column_of(key: &str) -> Result<(String, Vec<&str>), Expect> {
    let mut parts = key.split('.');
    let column = parts.next().unwrap_or_default().to_ascii_lowercase();
    if column.is_empty() || !column.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(Expect::Bad);
    }
    if !COLUMNS.contains(&column.as_str()) {
        return Err(Expect::Bad);
    }
    let keys: Vec<&str> = parts.collect();
    if !keys.is_empty() && column != "data" || keys.iter().any(|k| k.contains('\0')) {
        return Err(Expect::Bad);
    }
    Ok((column, keys))
}

/// `data -> k1 -> … -> kn` (objects only; anything else is SQL NULL).
fn walk<'a>(data: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(data, |at, k| at.as_object()?.get(*k))
}

/// `key IN texts` as scribe-rs's `any_of` means it.
fn any_of(seed: &[Seed], key: &str, texts: &[String]) -> Expect {
    if texts.is_empty() {
        return Expect::Rows(Vec::new());
    }
    let lower = key.to_ascii_lowercase();
    if lower == "date_created" || lower == "date_modified" {
        return if texts.iter().any(|t| t == T0) {
            Expect::Rows(seed.iter().map(|r| r.id).collect())
        } else {
            Expect::EmptyOrBad
        };
    }
    let (column, keys) = match column_of(key) {
        Ok(found) => found,
        Err(e) => return e,
    };
    if texts.iter().any(|t| t.contains('\0')) {
        return Expect::Bad;
    }
    let text_of = |row: &Seed| -> Option<String> {
        match column.as_str() {
            "id" => Some(row.id.to_string()),
            "created_by" => Some(row.created_by.to_string()),
            "modified_by" => Some("1".into()),
            "data" if keys.is_empty() => Some(jsonb_text(&row.data)),
            "data" => match walk(&row.data, &keys)? {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                v @ (Value::Array(_) | Value::Object(_)) => Some(jsonb_text(v)),
                v => Some(v.to_string()),
            },
            _ => None,
        }
    };
    Expect::Rows(seed.iter().filter(|r| text_of(r).is_some_and(|t| texts.contains(&t))).map(|r| r.id).collect())
}

/// `key @> value` as scribe-rs's `contains` means it.
fn contains(seed: &[Seed], key: &str, value: &Value) -> Expect {
    let list = values_of(value);
    if list.is_empty() {
        return Expect::Rows(Vec::new());
    }
    let (column, keys) = match column_of(key) {
        Ok(found) => found,
        Err(e) => return e,
    };
    if column != "data" || list.iter().any(has_nul) {
        return Expect::Bad;
    }
    let list = Value::Array(list);
    Expect::Rows(
        seed.iter().filter(|r| walk(&r.data, &keys).is_some_and(|v| json_contains(v, &list))).map(|r| r.id).collect(),
    )
}

fn texts(value: &Value) -> Vec<String> {
    values_of(value).iter().map(as_text).collect()
}

/// A whole `filter` object (keys in order; an empty value list short-circuits to no rows).
fn filter_object(seed: &[Seed], filter: &Value) -> Expect {
    let Value::Object(map) = filter else { return Expect::Bad };
    let mut rows: Vec<i64> = seed.iter().map(|r| r.id).collect();
    for (key, value) in map {
        match any_of(seed, key, &texts(value)) {
            Expect::Rows(ids) => rows.retain(|id| ids.contains(id)),
            other => return other,
        }
    }
    Expect::Rows(rows)
}

/// Path segment rules of scribe-rs's `Table::new`: the table a component path names, if it is valid.
fn table_of(segments: &[&str]) -> Option<String> {
    let valid = |s: &&str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    let name = segments.join("_").to_ascii_lowercase();
    // Names ending in `_history` are reserved for history tables.
    (segments.iter().all(valid) && name.len() <= 63 - "_history".len() && !name.ends_with("_history")).then_some(name)
}

/// `parents` / `children` / `referencePath` field rule.
fn valid_field(field: &str) -> bool {
    !field.is_empty() && field.len() <= 63 && field.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

// ------------------------------------------------------------------------------------------------------------
// The corpus
// ------------------------------------------------------------------------------------------------------------

fn corpus() -> Vec<String> {
    let sleep = "pg_sleep(5)";
    let mut out: Vec<String> = [
        // Classic tautologies.
        "' OR 1=1--",
        "' OR '1'='1",
        "\" OR \"1\"=\"1",
        "1 OR 1=1",
        "1' OR '1'='1' --",
        "' OR ''='",
        "admin'--",
        "') OR ('1'='1",
        "1) OR (1=1",
        "' OR 1=1#",
        "' OR 1=1/*",
        "'/**/OR/**/1=1--",
        "1'||'1",
        // Stacked queries.
        "1; DROP TABLE notes",
        "1; DROP TABLE notes;--",
        "'; DROP TABLE notes;--",
        "\"; DROP TABLE notes;--",
        "1); DROP TABLE notes;--",
        "notes; DROP TABLE victim",
        "x\"; DROP TABLE notes; --",
        "1; DELETE FROM notes",
        "1; UPDATE notes SET data='{}'",
        "1; TRUNCATE notes",
        "1; CREATE TABLE pwned(id int)",
        "1; INSERT INTO notes(data) VALUES ('{}')",
        "$$; DROP TABLE notes; $$",
        "1; COPY notes TO '/tmp/pwned'",
        "'; COMMIT; DROP TABLE notes;--",
        "'; SET statement_timeout=0;--",
        // Comments.
        "--",
        "/*",
        "*/",
        "/**/",
        "1--",
        "notes--",
        "notes/**/",
        "-- -",
        // Quotes of every kind.
        "'",
        "''",
        "\"",
        "\"\"",
        "`",
        "\u{b4}",
        "\\'",
        "\\\"",
        "'\\''",
        "E'\\''",
        "$$",
        "$tag$",
        "U&'\\0027'",
        "'||chr(39)||'",
        // Unicode quotes.
        "\u{2018}",
        "\u{2019}",
        "\u{201c}",
        "\u{201d}",
        "\u{2bc}",
        "\u{ff07}",
        "\u{ff02}",
        "\u{2032}' OR 1=1--",
        // Backslashes and NUL.
        "\\",
        "\\\\",
        "\\x27",
        "\\u0027",
        "\0",
        "1\0",
        "notes\0",
        "'\0--",
        "\\0",
        // Identifier-quoting breaks.
        "notes\"",
        "\"notes\"",
        "notes\"--",
        "notes\" WHERE 1=1--",
        "id\"",
        "data\" OR 1=1 --",
        "\"\"\"",
        "x\"\"y",
        // UNION.
        "1 UNION SELECT 1,2,3,4,5,6",
        "' UNION SELECT NULL,NULL,NULL,NULL,NULL,NULL--",
        "1 UNION ALL SELECT * FROM notes--",
        "' UNION SELECT usename, passwd FROM pg_shadow--",
        "0 UNION SELECT table_name FROM information_schema.tables",
        // Error-based probes.
        "1 AND 1=CAST((SELECT version()) AS int)",
        "' AND 1=CAST(pg_read_file('/etc/passwd') AS int)--",
        // Type juggling.
        "1",
        "01",
        "+1",
        "-1",
        "0",
        "1.0",
        "1e0",
        "0x1",
        "true",
        "null",
        "[]",
        "{}",
        "[1]",
        "[1,2]",
        "[\"1\"]",
        "{\"$gt\":0}",
        "{\"$ne\":null}",
        "2147483648",
        "-2147483649",
        "99999999999999999999",
        "NaN",
        "Infinity",
        "1::int",
        "'1'::int",
        "\u{ff11}",
        "\u{661}",
        // CR LF.
        "%0d%0aSet-Cookie:injected=1",
        "\r\nX-Injected: yes",
        // Plain identifiers: valid component names (their tables are created on write, by design).
        "SELECT",
        "union",
        "pg_sleep",
        "_",
        "__proto__",
        "drop_table_notes",
        "information_schema",
        "Robert",
        "..",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    // Timing probes.
    for probe in [
        "1; SELECT {s}",
        "1' AND {s} IS NOT NULL--",
        "';SELECT {s};--",
        "1 AND 1=(SELECT 1 FROM {s})",
        "(SELECT {s})",
        "1||{s}",
        "'||{s}||'",
        "\"||{s}||\"",
        "$$||{s}||$$",
        "notes\"; SELECT {s};--",
        "1; SELECT CASE WHEN (1=1) THEN {s} ELSE pg_sleep(0) END--",
        "1 WAITFOR DELAY '0:0:5'--",
    ] {
        out.push(probe.replace("{s}", sleep));
    }
    // Long identifiers: 55 is the longest table name (room for `_history`), 63 Postgres's limit.
    for n in [55, 56, 63, 64, 1000] {
        out.push("a".repeat(n));
    }
    out
}

/// The corpus must not name what already exists or a route word, else an input would legitimately reach a
/// real table or another route, and the oracle below would have to know every such case.
fn assert_corpus_is_clean(corpus: &[String], seed: &[Seed]) {
    let words = ["all", "history", "sql", "healthz"];
    let data_keys: BTreeSet<&str> = seed
        .iter()
        .flat_map(|r| r.data.as_object().map(|m| m.keys().map(String::as_str).collect::<Vec<_>>()))
        .flatten()
        .collect();
    for p in corpus {
        let lower = p.to_ascii_lowercase();
        assert!(!words.contains(&lower.as_str()), "{p:?} is a route word");
        assert!(!data_keys.contains(p.as_str()), "{p:?} is a key of the seeded data");
        for segments in [vec![p.as_str()], vec!["notes", p], vec!["victim", p]] {
            if let Some(table) = table_of(&segments) {
                assert!(!EXISTING.contains(&table.as_str()), "{p:?} names the existing table {table}");
            }
        }
    }
}

/// A path segment as it can be sent: raw when the request line allows it, and percent-encoded always.
fn segment_forms(p: &str) -> Vec<String> {
    let mut forms = Vec::new();
    if !p.is_empty() && p.bytes().all(|b| b > 0x20 && b != 0x7f && !b"/?#".contains(&b)) {
        forms.push(p.to_string());
    }
    let encoded = enc(p);
    if !forms.contains(&encoded) {
        forms.push(encoded);
    }
    forms
}

// ------------------------------------------------------------------------------------------------------------
// Running the corpus
// ------------------------------------------------------------------------------------------------------------

struct Runner {
    addr: SocketAddr,
    sent: usize,
    slowest: (Duration, String),
    failures: Vec<String>,
    statuses: BTreeMap<u16, usize>,
}

impl Runner {
    fn send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &[u8])],
        body: Option<&[u8]>,
    ) -> (Response, String) {
        let what = format!(
            "{method} {target}{}",
            body.map(|b| format!(" {}", String::from_utf8_lossy(b))).unwrap_or_default()
        );
        let started = Instant::now();
        let res = raw(self.addr, method, target.as_bytes(), headers, body);
        let took = started.elapsed();
        self.sent += 1;
        *self.statuses.entry(res.status).or_default() += 1;
        if took > self.slowest.0 {
            self.slowest = (took, what.clone());
        }
        if took > SLOW {
            // A pg_sleep that ran is conclusive, and every further probe would cost seconds: stop here.
            let shown: Vec<&String> = self.failures.iter().take(20).collect();
            panic!("{what}: took {took:?}, a pg_sleep ran; failures so far: {shown:#?}");
        }
        if res.status >= 500 {
            self.failures.push(format!("{what}: {} {}", res.status, res.text()));
        }
        let body = res.text();
        for leak in LEAKS {
            if body.contains(leak) {
                self.failures.push(format!("{what}: the body shows {leak:?}: {body}"));
            }
        }
        if res.headers.iter().any(|(n, _)| n == "set-cookie" || n.contains("injected")) {
            self.failures.push(format!("{what}: injected header in {:?}", res.headers));
        }
        (res, what)
    }

    fn expect(&mut self, method: &str, target: &str, body: Option<&[u8]>, expect: &Expect) -> Response {
        let (res, what) = self.send(method, target, &[], body);
        if let Err(why) = matches(&res, expect) {
            self.failures.push(format!("{what}: expected {expect:?}, {why}"));
        }
        res
    }
}

fn ids_of(rows: &Value) -> Option<Vec<i64>> {
    rows.as_array()?.iter().map(|r| r.get("id").and_then(Value::as_i64)).collect()
}

fn matches(res: &Response, expect: &Expect) -> Result<(), String> {
    let got = || format!("got {} {}", res.status, res.text().chars().take(300).collect::<String>());
    let json = || serde_json::from_slice::<Value>(&res.body).map_err(|_| got());
    match expect {
        Expect::Bad | Expect::Status(_) => {
            let want = if let Expect::Status(s) = expect { *s } else { 400 };
            if res.status != want {
                return Err(got());
            }
        }
        Expect::EmptyOrBad if res.status == 400 => {}
        Expect::EmptyOrBad => {
            if res.status != 200 || json()? != json!([]) {
                return Err(got());
            }
        }
        Expect::Rows(ids) => {
            if res.status != 200 || ids_of(&json()?).as_ref() != Some(ids) {
                return Err(got());
            }
        }
        Expect::Count(n) => {
            let value = json()?;
            let count = match &value {
                Value::Array(list) => list.len(),
                Value::Object(groups) => groups.values().filter_map(Value::as_array).map(Vec::len).sum(),
                _ => usize::MAX,
            };
            if res.status != 200 || count != *n {
                return Err(got());
            }
        }
    }
    Ok(())
}

/// Reads and lists: nothing here may write.
fn read_positions(run: &mut Runner, seed: &[Seed], p: &str) {
    let all: Vec<i64> = seed.iter().map(|r| r.id).collect();
    let e = enc(p);
    let get = |run: &mut Runner, target: String, expect: Expect| {
        run.expect("GET", &target, None, &expect);
    };
    // Path segments.
    for seg in segment_forms(p) {
        let component = table_of(&[&seg]).map_or(Expect::Bad, |_| Expect::Rows(Vec::new()));
        for target in [format!("/{seg}/all"), format!("/{seg}/1"), format!("/{seg}/1/history")] {
            get(run, target, component.clone());
        }
        run.expect("POST", &format!("/{seg}/all"), Some(b"{}"), &component);
        let sub = table_of(&["notes", &seg]).map_or(Expect::Bad, |_| Expect::Rows(Vec::new()));
        for target in [format!("/notes/{seg}/all"), format!("/notes/{seg}/1"), format!("/notes/{seg}/1/history")] {
            get(run, target, sub.clone());
        }
        run.expect("POST", &format!("/notes/{seg}/all"), Some(b"{}"), &sub);
        let id = seg.parse::<i32>().ok().map(i64::from);
        let by_id = id.map_or(Expect::Bad, |n| Expect::Rows(all.iter().copied().filter(|i| *i == n).collect()));
        get(run, format!("/notes/{seg}"), by_id.clone());
        let history = id.map_or(Expect::Bad, |n| Expect::Count(usize::from(all.contains(&n))));
        get(run, format!("/notes/{seg}/history"), history);
        get(run, format!("/notes/drafts/{seg}"), id.map_or(Expect::Bad, |_| Expect::Rows(Vec::new())));
    }
    // filter: values on every kind of key, in bracket (JSON-parsed) and JSON (string) form.
    for key in ["id", "created_by", "data.title", "data.owner.name", "data.n", "data.tags", "date_created"] {
        get(run, format!("/notes/all?filter[{key}]={e}"), any_of(seed, key, &texts(&loose(p))));
        let filter = enc(&json!({ key: p }).to_string());
        get(run, format!("/notes/all?filter={filter}"), any_of(seed, key, &[p.to_string()]));
    }
    // filter: keys.
    let bracket_key = p.trim_end_matches(']');
    get(run, format!("/notes/all?filter[{e}]=1"), any_of(seed, bracket_key, &["1".into()]));
    get(run, format!("/notes/all?filter={}", enc(&json!({ p: [1] }).to_string())), any_of(seed, p, &["1".into()]));
    let path_key = format!("data.{bracket_key}");
    get(run, format!("/notes/all?filter[data.{e}]=alpha"), any_of(seed, &path_key, &["alpha".into()]));
    // filter2: values, operators and keys, JSON and bracket form.
    for key in ["data.ids", "data.tags", "data"] {
        let spec = enc(&json!({ key: ["contains", p] }).to_string());
        get(run, format!("/notes/all?filter2={spec}"), contains(seed, key, &loose(p)));
        get(run, format!("/notes/all?filter2[{key}]=contains&filter2[{key}]={e}"), contains(seed, key, &loose(p)));
    }
    for key in ["id", "data.title"] {
        let spec = enc(&json!({ key: ["is one of", p] }).to_string());
        get(run, format!("/notes/all?filter2={spec}"), any_of(seed, key, &texts(&loose(p))));
        let target = format!("/notes/all?filter2[{key}]=is%20one%20of&filter2[{key}]={e}");
        get(run, target, any_of(seed, key, &texts(&loose(p))));
    }
    get(run, format!("/notes/all?filter2={}", enc(&json!({"data.ids": [p, [1]]}).to_string())), Expect::Bad);
    get(run, format!("/notes/all?filter2[data.ids]={e}&filter2[data.ids]=[1]"), Expect::Bad);
    let spec = enc(&json!({ p: ["contains", [1]] }).to_string());
    get(run, format!("/notes/all?filter2={spec}"), contains(seed, p, &json!([1])));
    let spec = enc(&json!({ p: ["is one of", [1]] }).to_string());
    get(run, format!("/notes/all?filter2={spec}"), any_of(seed, p, &["1".into()]));
    let spec = enc(&json!({ format!("data.{p}"): ["contains", [1]] }).to_string());
    get(run, format!("/notes/all?filter2={spec}"), contains(seed, &format!("data.{p}"), &json!([1])));
    // groupBy and timeMachine never reach SQL, but take the same inputs.
    get(run, format!("/notes/all?groupBy={e}"), Expect::Count(all.len()));
    let later = "2030-01-01T00:00:00Z";
    let tm = enc(&json!({"key": p, "timestamp": later}).to_string());
    get(run, format!("/notes/all?timeMachine={tm}"), Expect::Count(all.len()));
    get(run, format!("/notes/all?timeMachine[key]={e}&timeMachine[timestamp]={later}"), Expect::Count(all.len()));
    let tm = enc(&json!({"key": "date_modified", "timestamp": p}).to_string());
    get(run, format!("/notes/all?timeMachine={tm}"), Expect::Bad);
    let bare = match loose(p) {
        Value::Object(m)
            if m.get("key").is_some_and(Value::is_string) && m.get("timestamp").is_some_and(Value::is_string) =>
        {
            Expect::Count(all.len())
        }
        _ => Expect::Rows(all.clone()),
    };
    get(run, format!("/notes/all?timeMachine={e}"), bare);
    // GET-by-id options, in the query and in a body.
    let walk = if valid_field(p) { Expect::Rows(vec![1]) } else { Expect::Bad };
    let reference = table_of(&[p]).map_or(Expect::Bad, |_| Expect::Rows(Vec::new()));
    let reference_path = if valid_field(p) { Expect::Rows(Vec::new()) } else { Expect::Bad };
    get(run, format!("/notes/1?parents={e}"), walk.clone());
    get(run, format!("/notes/1?children={e}"), walk.clone());
    get(run, format!("/notes/1?referenceComponent={e}"), reference.clone());
    get(run, format!("/notes/1?referenceComponent=notes&referencePath={e}"), reference_path.clone());
    for (field, expect) in [("parents", &walk), ("children", &walk), ("referenceComponent", &reference)] {
        run.expect("GET", "/notes/1", Some(json!({ field: p }).to_string().as_bytes()), expect);
    }
    // List options in a JSON body.
    let body = |v: Value| v.to_string().into_bytes();
    run.expect(
        "POST",
        "/notes/all",
        Some(&body(json!({"filter": {"data.title": p}}))),
        &any_of(seed, "data.title", &[p.into()]),
    );
    run.expect("POST", "/notes/all", Some(&body(json!({"filter": { p: [1] }}))), &any_of(seed, p, &["1".into()]));
    let as_string = serde_json::from_str::<Value>(p).map_or(Expect::Bad, |v| filter_object(seed, &v));
    run.expect("POST", "/notes/all", Some(&body(json!({ "filter": p }))), &as_string);
    let filter2 = json!({"filter2": {"data.ids": ["contains", p]}});
    run.expect("POST", "/notes/all", Some(&body(filter2)), &contains(seed, "data.ids", &loose(p)));
    run.expect("POST", "/notes/all", Some(&body(json!({ "groupBy": p }))), &Expect::Count(all.len()));
    // The raw SQL route's token.
    if !p.contains(['\r', '\n', '\0']) {
        let query = br#"{"query":"SELECT 1"}"#;
        for value in [format!("Bearer {p}"), p.to_string()] {
            let (res, what) = run.send("POST", "/sql", &[("Authorization", value.as_bytes())], Some(query));
            if res.status != 401 {
                run.failures.push(format!("{what} with Authorization {value:?}: {} {}", res.status, res.text()));
            }
        }
    }
}

#[test]
fn injection_corpus_changes_nothing_it_should_not() {
    let stack = Stack::start("sqli");
    let seed = seed();
    for row in &seed {
        stack.create("notes", &row.data, row.created_by);
    }
    for k in 1..=6 {
        stack.create("victim", &json!({ "k": k }), 1);
    }
    let corpus = corpus();
    assert_corpus_is_clean(&corpus, &seed);
    let tables_before = stack.tables();
    assert_eq!(tables_before, EXISTING.iter().map(|t| t.to_string()).collect(), "the seeded tables");
    let notes_before = (stack.digest("notes"), stack.digest("notes_history"));
    let mut run = Runner {
        addr: stack.addr,
        sent: 0,
        slowest: (Duration::ZERO, String::new()),
        failures: Vec::new(),
        statuses: BTreeMap::new(),
    };

    // 1. Deletes, while only the seeded tables exist; ids on the sacrificial `victim` table.
    let mut victim: Vec<i64> = (1..=6).collect();
    for p in &corpus {
        for seg in segment_forms(p) {
            let component = table_of(&[&seg]).map_or(Expect::Bad, |_| Expect::Rows(Vec::new()));
            run.expect("DELETE", &format!("/{seg}"), None, &component);
            run.expect("DELETE", &format!("/{seg}/all"), None, &component);
            let sub = table_of(&["victim", &seg]).map_or(Expect::Bad, |_| Expect::Rows(Vec::new()));
            run.expect("DELETE", &format!("/victim/{seg}/all"), None, &sub);
            run.expect("DELETE", &format!("/victim/{seg}/1"), None, &sub);
            let by_id = if seg.parse::<i64>().is_ok() {
                match seg.parse::<i32>() {
                    Ok(n) => {
                        victim.retain(|id| *id != i64::from(n));
                        Expect::Rows(Vec::new())
                    }
                    Err(_) => Expect::Bad,
                }
            } else {
                sub
            };
            run.expect("DELETE", &format!("/victim/{seg}"), None, &by_id);
        }
    }
    assert_eq!(stack.tables(), tables_before, "deletes of invalid or absent names dropped or made nothing");

    // 2. Reads and lists.
    for p in &corpus {
        read_positions(&mut run, &seed, p);
    }
    assert_eq!(stack.tables(), tables_before, "no read created or dropped a table");

    // 3. Writes: component / subcomponent / id segments, then record values.
    let mut created: BTreeMap<String, usize> = BTreeMap::new();
    for p in &corpus {
        for seg in segment_forms(p) {
            for segments in [vec![seg.as_str()], vec!["notes", seg.as_str()]] {
                let path = segments.join("/");
                let table = table_of(&segments);
                let expect = if table.is_some() { Expect::Count(1) } else { Expect::Bad };
                let res = run.expect("POST", &format!("/{path}"), Some(&envelope(&json!({"title": "w"}), 1)), &expect);
                if let (Some(table), 200) = (table, res.status) {
                    *created.entry(table).or_default() += 1;
                }
                run.expect("PUT", &format!("/{path}/1"), Some(&envelope(&json!({"title": "w2"}), 1)), &expect);
            }
            let put = match seg.parse::<i32>() {
                Ok(n) if victim.contains(&i64::from(n)) => Expect::Rows(vec![i64::from(n)]),
                Ok(_) => Expect::Status(404),
                Err(_) => Expect::Bad,
            };
            run.expect("PUT", &format!("/victim/{seg}"), Some(&envelope(&json!({"k": "updated"}), 1)), &put);
        }
    }
    let mut sink_rows = 0;
    for p in &corpus {
        let data = json!({"title": p, "list": [p], "nested": { "k": p }, "key": { p: 1 }});
        let expect = if has_nul(&data) { Expect::Bad } else { Expect::Count(1) };
        let res = run.expect("POST", "/sink", Some(&envelope(&data, 1)), &expect);
        if res.status == 200 {
            sink_rows += 1;
            let row = serde_json::from_slice::<Value>(&res.body).expect("JSON");
            let id = row[0]["id"].as_i64().expect("an id");
            let (back, what) = run.send("GET", &format!("/sink/{id}"), &[], None);
            let stored = serde_json::from_slice::<Value>(&back.body).ok();
            if stored.as_ref().map(|s| &s[0]["data"]) != Some(&data) {
                run.failures.push(format!("{what}: stored {stored:?}, sent {data}"));
            }
        }
        let by = loose(p);
        let valid_by = by.as_i64().is_some_and(|n| i32::try_from(n).is_ok());
        let res = run.expect(
            "POST",
            "/sink",
            Some(&envelope(&json!({}), by)),
            &if valid_by { Expect::Count(1) } else { Expect::Bad },
        );
        sink_rows += usize::from(res.status == 200);
    }

    // The database afterwards.
    let mut expected_tables = tables_before.clone();
    for table in created.keys().map(String::as_str).chain(["sink"]) {
        expected_tables.insert(table.to_string());
        expected_tables.insert(format!("{table}_history"));
    }
    let tables_after = stack.tables();
    let unexpected: Vec<&String> = tables_after.symmetric_difference(&expected_tables).collect();
    let figure = format!(
        "{} inputs, {} requests, {} tables created by valid names, statuses {:?}, slowest {:?} ({})",
        corpus.len(),
        run.sent,
        created.len(),
        run.statuses,
        run.slowest.0,
        run.slowest.1
    );
    println!("sql injection: {figure}");
    let shown: Vec<&String> = run.failures.iter().take(30).collect();
    assert!(run.failures.is_empty(), "{figure}: {} failures, first ones:\n{shown:#?}", run.failures.len());
    assert!(unexpected.is_empty(), "tables not explained by valid component names: {unexpected:?}");
    assert_eq!((stack.digest("notes"), stack.digest("notes_history")), notes_before, "notes changed");
    assert_eq!(stack.ids("victim"), victim, "the victim table lost exactly the rows named by integer ids");
    assert_eq!(stack.count("sink"), sink_rows, "one sink row per successful create");
    for (table, n) in &created {
        assert_eq!(stack.count(table), *n, "{table} holds what its creates wrote");
    }
}

// ------------------------------------------------------------------------------------------------------------
// sqlmap
// ------------------------------------------------------------------------------------------------------------

/// One bounded sqlmap run; returns its output.
fn sqlmap(home: &Path, args: &[&str]) -> String {
    let out = Command::new("sqlmap")
        .env("HOME", home)
        .args(["--batch", "--level", "1", "--risk", "1", "--dbms", "PostgreSQL", "--flush-session"])
        .args(["--timeout", "10", "--retries", "0", "--disable-coloring", "--answers", "inject inside=Y"])
        .arg("--output-dir")
        .arg(home.join("out"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("sqlmap could not run ({e}): it is Debian's `sqlmap` package (apt-get install sqlmap)")
        });
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "sqlmap {args:?} failed: {text}");
    text
}

#[test]
fn sqlmap_finds_nothing_injectable() {
    let stack = Stack::start("sqlmap");
    for row in seed() {
        stack.create("notes", &row.data, row.created_by);
    }
    let tables_before = stack.tables();
    let notes_before = stack.digest("notes");
    let home = tempfile::tempdir().expect("a temp dir");
    let base = format!("http://{}", stack.addr);
    let url = |target: String| vec!["-u".to_string(), format!("{base}{target}")];
    let post = |target: &str, body: String| vec!["-u".to_string(), format!("{base}{target}"), "--data".into(), body];
    let record = String::from_utf8(envelope(&json!({"title": "t"}), 1)).expect("UTF-8");
    let runs: Vec<Vec<String>> = vec![
        url("/notes/all?filter%5Bdata.title%5D=alpha&filter%5Bid%5D=1&groupBy=title".into()),
        url(format!("/notes/all?filter2={}", enc(r#"{"data.ids":["contains",[1]]}"#))),
        url(format!("/notes/all?filter2={}", enc(r#"{"id":["is one of",[1]]}"#))),
        url(format!("/notes/all?timeMachine={}", enc(&json!({"key": "date_modified", "timestamp": T0}).to_string()))),
        url("/notes/1?children=parent".into()),
        url("/notes/1?referenceComponent=notes&referencePath=ids".into()),
        url("/notes*/1*".into()),
        url("/notes/drafts*/all".into()),
        url("/notes/1*/history".into()),
        post("/notes/all", r#"{"filter":{"data.title":"alpha"},"filter2":{"data.ids":["contains",[1]]}}"#.into()),
        post("/sink", record),
    ];
    let started = Instant::now();
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let text = sqlmap(home.path(), &args);
        assert!(
            !text.contains("identified the following injection point"),
            "sqlmap {args:?} found an injection:\n{text}"
        );
        assert!(
            text.contains("do not appear to be injectable") || text.contains("does not seem to be injectable"),
            "sqlmap {args:?} did not finish its tests:\n{text}"
        );
    }
    println!("sqlmap: {} runs, nothing injectable, {:?}", runs.len(), started.elapsed());
    // Only the table a valid create names: sqlmap's records went to `sink` (and its history).
    let mut expected = tables_before;
    expected.extend(["sink".to_string(), "sink_history".to_string()]);
    assert_eq!(stack.tables(), expected, "sqlmap's probes created or dropped no other table");
    assert_eq!(stack.digest("notes"), notes_before, "sqlmap's probes changed no row");
}
