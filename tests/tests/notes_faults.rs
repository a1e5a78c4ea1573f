//! Notes service under faults (issue #8): scribe-rs runs as the real binary (`target/<profile>/scribe-rs`, so it
//! can be SIGKILLed and started again on the same port) against a real Postgres cluster and a real redis-server
//! (testkit), while several client threads write notes. Each write carries a unique token in `data.body`; every
//! operation is logged with when it was sent and answered and what came back: acknowledged (2xx), failed for sure
//! (4xx, or the connection refused so nothing was sent) or unknown (5xx, timeout, connection cut). After the
//! fault and recovery, [`check_history`] reads every note and its history back and holds them against the log.
//! crates/scribe/tests/faults.rs proves single faults one request at a time; this file is the concurrent,
//! Jepsen-style suite.
//!
//! How scribe-rs stores history (store.rs), which defines "no gaps, no duplicates": each note has exactly one row
//! in `notes_history`, whose `patches` is a JSON array: the creation patch, then one patch per committed update,
//! appended in the update's transaction under `SELECT … FOR UPDATE`. `GET /notes/{id}/history` answers the current
//! row, then the older versions rebuilt by applying the patches backwards. So a note's history is complete when
//! it has one history row, as many versions as patches (the rebuild did not stop at a patch that no longer
//! applies), its oldest version is a create, every other version is an update sent to that id, and no token
//! appears twice anywhere.
//!
//! Promises, the test that proves each, and the figures of one run of this file on the 2-core dev VM (tests in
//! parallel, a benchmark soak beside them; each test prints its figures, see them with `--no-capture`):
//!
//! * Postgres crashing (`pg_ctl stop -m immediate`, down 3 s) under 6 writers loses no acknowledged write, applies
//!   no unknown write twice, leaves every history contiguous, and keeps real-time order:
//!   `postgres_crash_loses_no_acknowledged_write`. 3725 ops, 2435 acknowledged, 732 unknown (0 applied),
//!   195 refused with 400, 1 crash survived, 0 lost; 704 notes with 2435 versions read back.
//! * During that outage every answer is a 503 with Retry-After and none hangs (DB timeout 1000 ms, bound 3 s);
//!   /healthz names postgres within 2 s and is 200 again after the restart: same test. 765 answers in the 3 s
//!   outage, slowest 25 ms; /healthz named postgres 1 ms after the stop returned (the stop took 124 ms), 200
//!   again 21 ms after Postgres was back (its restart took 292 ms).
//! * scribe-rs SIGKILLed under 6 writers and started again on the same port: the same history guarantees:
//!   `scribe_sigkill_loses_no_acknowledged_write`. 3530 ops, 2741 acknowledged, 6 cut in flight (unknown,
//!   0 applied), 273 refused while down (never sent, none applied), 0 lost; listening again 30 ms after the
//!   spawn, /healthz 200 16 ms later.
//! * Redis killed, then frozen (SIGSTOP), under 4 clients (notes CRUD, reads, and creates in new components,
//!   whose schema lookup goes to Redis): every answer 2xx (400 for the invalid ones) within 1 s, with the Redis
//!   timeout at 100 ms; /healthz names redis within 2 s and recovers:
//!   `notes_crud_keeps_answering_when_redis_dies_or_freezes`. 2959 ops, all answered, 0 lost; slowest 160 ms
//!   with Redis dead, 201 ms frozen; /healthz named redis 143 ms after the kill, 101 ms after the freeze.
//! * A table lock held from psql exhausts the pool (1 worker, 2 pooled connections and the reader's one,
//!   statement timeout 500 ms, pool wait 1000 ms): queued requests get 503 with Retry-After within 2 s, none
//!   of their writes is applied, everything is 200 again right after the release, and no connection leaks:
//!   `pool_exhaustion_answers_503_and_recovers_without_leaks`. 27 answers during the lock, slowest 1004 ms;
//!   first 200 4 ms after the release; scribe's connections 2 before, 3 after (pool 2 + 1 reader).
//!
//! Finding (fixed in crates/scribe/src/store.rs): a statement cancelled by `statement_timeout` (SQLSTATE 57014)
//! was answered 500 "internal error" without Retry-After, so under a held lock half the queued requests got 500
//! and the other half 503. Postgres' "not now" states (class 57: statement timeout and shutdown/startup; class
//! 08; lock_timeout 55P03; too_many_connections 53300) are now 503 with Retry-After like an unreachable Postgres.
//!
//! Left out: network partitions and packet loss (loopback only, no netem), clock faults, Postgres failover to a
//! replica, faults combined at once, and deletes in the workload (a deleted note takes its history with it, so
//! the checker could not tell a lost write from a deleted one).

use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::http::{Conn, Response, request_bytes};
use testkit::process::{Guard, wait_for_exit};
use testkit::wait::until;
use testkit::{Postgres, Redis};

/// Every client request, connect to last byte: nothing in this file can wait longer than this on scribe-rs.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);
/// SCRIBE_APP_DB_TIMEOUT_MS: pool wait, connect and recycle.
const DB_TIMEOUT_MS: u64 = 1000;
/// SCRIBE_APP_REDIS_TIMEOUT_MS.
const REDIS_TIMEOUT_MS: u64 = 100;
const WRITERS: usize = 6;
const T0: &str = "2026-11-30T05:00:00Z";

// ------------------------------------------------------------------------------------------------------------
// The scribe-rs binary
// ------------------------------------------------------------------------------------------------------------

/// scribe-rs as a child process on a fixed loopback port, so it can be SIGKILLed and started again on that same
/// port. Killed when dropped (testkit's Guard), so no test leaves it running.
struct ScribeProcess {
    child: Option<Guard>,
    addr: SocketAddr,
    env: Vec<(String, String)>,
    /// Working directory and stderr log (appended across restarts).
    dir: tempfile::TempDir,
}

impl ScribeProcess {
    /// `extra` overrides or adds SCRIBE_APP_* variables.
    fn start(database_url: &str, redis_port: u16, extra: &[(&str, &str)]) -> ScribeProcess {
        let port = testkit::free_port();
        let schemas = testkit::workspace::root().join("schemas");
        let mut env: Vec<(String, String)> = [
            ("SCRIBE_APP_HOSTNAME", "127.0.0.1".to_string()),
            ("SCRIBE_APP_PORT", port.to_string()),
            ("SCRIBE_APP_WORKERS", "2".to_string()),
            ("SCRIBE_APP_POOL_SIZE", "4".to_string()),
            ("SCRIBE_APP_DB_TIMEOUT_MS", DB_TIMEOUT_MS.to_string()),
            ("SCRIBE_APP_REDIS_TIMEOUT_MS", REDIS_TIMEOUT_MS.to_string()),
            ("SCRIBE_APP_SCHEMA_DIR", schemas.to_str().expect("a UTF-8 workspace path").to_string()),
            ("DATABASE_URL", database_url.to_string()),
            ("REDIS_URL", format!("redis://127.0.0.1:{redis_port}/1")),
            ("RUST_LOG", "warn".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (key, value) in extra {
            env.retain(|(k, _)| k != key);
            env.push((key.to_string(), value.to_string()));
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let dir = tempfile::tempdir().expect("a temp dir for scribe-rs");
        let mut scribe = ScribeProcess { child: None, addr, env, dir };
        scribe.spawn();
        scribe
    }

    /// Starts the binary and waits for its listening line; returns how long that took.
    fn spawn(&mut self) -> Duration {
        let started = Instant::now();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("stderr.log"))
            .expect("open scribe-rs's log");
        let mut command = Command::new(testkit::workspace::binary("scribe-rs"));
        command.env_clear().current_dir(self.dir.path()).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(log);
        for (k, v) in &self.env {
            command.env(k, v);
        }
        let mut child = Guard(command.spawn().expect("spawn scribe-rs"));
        let stdout = child.0.stdout.take().expect("scribe-rs's stdout");
        let line = testkit::first_line(stdout, Duration::from_secs(15)).unwrap_or_else(|| {
            let exited = child.0.try_wait().ok().flatten();
            panic!("scribe-rs printed no listening line within 15 s (exited: {exited:?}); {}", self.log_tail())
        });
        let expected = format!("scribe-rs listening on http://{}", self.addr);
        assert!(line.starts_with(&expected), "{line:?} should start with {expected:?}");
        self.child = Some(child);
        started.elapsed()
    }

    /// SIGKILL, as the OOM killer or a node failure would: no graceful shutdown, in-flight requests cut.
    fn sigkill(&mut self) {
        let mut child = self.child.take().expect("scribe-rs is running");
        child.0.kill().expect("SIGKILL scribe-rs");
        wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("scribe-rs gone within 5 s of SIGKILL");
    }

    /// The end of scribe-rs's stderr, for failure messages.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!("scribe-rs stderr (last lines):\n{}", lines[lines.len().saturating_sub(15)..].join("\n"))
    }
}

// ------------------------------------------------------------------------------------------------------------
// A client with a hard deadline
// ------------------------------------------------------------------------------------------------------------

/// The body as JSON, `Null` when it is not (a half-started server's answer is judged by its status).
fn json_or_null(reply: &Response) -> Value {
    serde_json::from_slice(&reply.body).unwrap_or(Value::Null)
}

fn retry_after(reply: &Response) -> bool {
    reply.header("retry-after").is_some()
}

#[derive(Debug)]
enum CallError {
    /// Nothing listened: the request was never sent, so it certainly did not happen.
    Refused,
    /// Timed out, reset, cut short: the request may or may not have happened.
    Broken(String),
}

/// One request on a new connection (`Connection: close`), answered in full within `timeout` or an error.
fn call(
    addr: SocketAddr,
    method: &str,
    target: &str,
    body: Option<&str>,
    timeout: Duration,
) -> Result<Response, CallError> {
    let broken = |what: &str, e: std::io::Error| CallError::Broken(format!("{what}: {e}"));
    let mut conn = match Conn::open_within(addr, timeout) {
        Ok(conn) => conn,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err(CallError::Refused),
        Err(e) => return Err(broken("connect", e)),
    };
    let json: &[(&str, &[u8])] = if body.is_some() { &[("Content-Type", b"application/json")] } else { &[] };
    conn.write(&request_bytes(method, target.as_bytes(), json, body.map(str::as_bytes)))
        .map_err(|e| broken("write", e))?;
    let reply = match conn.next_response(false) {
        Ok(Some(reply)) => reply,
        Ok(None) => return Err(CallError::Broken("connection closed before a complete head".into())),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            return Err(CallError::Broken(format!("no complete answer within {timeout:?}")));
        }
        Err(e) => return Err(broken("read", e)),
    };
    // scribe-rs frames every answer by Content-Length.
    if let Some(coding) = reply.header("transfer-encoding") {
        return Err(CallError::Broken(format!("unexpected transfer-encoding {coding:?}")));
    }
    Ok(reply)
}

/// GET /healthz: (status, body).
fn health(addr: SocketAddr) -> Option<(u16, Value)> {
    call(addr, "GET", "/healthz", None, CLIENT_TIMEOUT).ok().map(|r| (r.status, json_or_null(&r)))
}

fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

// ------------------------------------------------------------------------------------------------------------
// The workload and its log
// ------------------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Create,
    Update(i64),
    /// A create the notes schema rejects (a numeric title): must answer 400 and never appear.
    Invalid,
    Read(i64),
    /// A create in a component never seen before: its schema lookup goes to Redis.
    Fresh,
}

impl Kind {
    fn is_write(self) -> bool {
        matches!(self, Kind::Create | Kind::Update(_) | Kind::Invalid)
    }
}

#[derive(Debug)]
enum Outcome {
    /// 2xx, with the JSON answered (`[row]` for writes).
    Acked(Value),
    /// 4xx: did not happen.
    Failed,
    /// The connection was refused: never sent.
    NotSent,
    /// 5xx, timeout, connection cut: may or may not have happened.
    Unknown(String),
}

#[derive(Debug)]
struct Op {
    client: usize,
    token: String,
    kind: Kind,
    invoked: Instant,
    completed: Instant,
    status: Option<u16>,
    retry_after: bool,
    outcome: Outcome,
}

impl Op {
    fn latency(&self) -> Duration {
        self.completed - self.invoked
    }

    fn timed_out(&self) -> bool {
        matches!(&self.outcome, Outcome::Unknown(why) if why.starts_with("no complete answer"))
    }

    fn describe(&self) -> String {
        format!(
            "client {} {:?} {} → {} in {} ms",
            self.client,
            self.kind,
            self.token,
            self.status.map_or_else(|| format!("{:?}", self.outcome), |s| s.to_string()),
            ms(self.latency())
        )
    }
}

/// A note write carrying `token` in `data.body` (and as the title, unless `valid` is false: then the title is a
/// number, which notes.schema.json rejects).
fn note_body(token: &str, client: usize, valid: bool) -> String {
    let title = if valid { json!(token) } else { json!(5) };
    let by = client as i64 + 1;
    json!({
        "data": {"title": title, "body": token, "tags": ["notes-faults", format!("client-{client}")]},
        "date_created": T0, "date_modified": T0, "created_by": by, "modified_by": by,
    })
    .to_string()
}

/// xorshift64*: the workload's choices, seeded per client (no dependency needed for this).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
}

/// Sets the flag when dropped, so client threads stop even when the fault script panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `clients` client threads against `addr` while `fault` (on this thread) injects faults; when it returns
/// the clients stop. Returns every client's log and what `fault` returned.
fn run_clients<R>(addr: SocketAddr, clients: usize, fresh: bool, fault: impl FnOnce() -> R) -> (Vec<Op>, R) {
    let stop = AtomicBool::new(false);
    let ids = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|client| {
                let (stop, ids) = (&stop, &ids);
                scope.spawn(move || client_loop(addr, client, fresh, stop, ids))
            })
            .collect();
        let result = {
            let _stop = StopOnDrop(&stop);
            fault()
        };
        let ops = handles.into_iter().flat_map(|h| h.join().expect("a client thread panicked")).collect();
        (ops, result)
    })
}

/// One client: creates (25%), invalid creates (5%), reads (10%), fresh components (5% when `fresh`), and
/// updates of notes whose creation was acknowledged (half of them on the first four, so updates contend).
fn client_loop(addr: SocketAddr, client: usize, fresh: bool, stop: &AtomicBool, ids: &Mutex<Vec<i64>>) -> Vec<Op> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((client as u64 + 1) * 0x0001_0000_0001_B3F1));
    let mut ops = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let token = format!("nf-c{client}-{n}");
        let known = {
            let ids = ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match ids.len() {
                0 => None,
                len if rng.below(2) == 0 => Some(ids[rng.below(len.min(4))]),
                len => Some(ids[rng.below(len)]),
            }
        };
        let kind = match (rng.below(100), known) {
            (_, None) => Kind::Create,
            (0..25, _) => Kind::Create,
            (25..30, _) => Kind::Invalid,
            (30..40, Some(id)) => Kind::Read(id),
            (40..45, _) if fresh => Kind::Fresh,
            (_, Some(id)) => Kind::Update(id),
        };
        let (method, target, body) = match kind {
            Kind::Create => ("POST", "/notes".to_string(), Some(note_body(&token, client, true))),
            Kind::Invalid => ("POST", "/notes".to_string(), Some(note_body(&token, client, false))),
            Kind::Update(id) => ("PUT", format!("/notes/{id}"), Some(note_body(&token, client, true))),
            Kind::Read(id) => ("GET", format!("/notes/{id}"), None),
            Kind::Fresh => ("POST", format!("/nf_fresh_{client}_{n}"), Some(note_body(&token, client, true))),
        };
        let invoked = Instant::now();
        let result = call(addr, method, &target, body.as_deref(), CLIENT_TIMEOUT);
        let completed = Instant::now();
        let (status, retry_after, outcome) = match result {
            Ok(reply) if (200..300).contains(&reply.status) => {
                let answer = json_or_null(&reply);
                let answer = if kind.is_write() { answer.get(0).cloned().unwrap_or(answer) } else { answer };
                (Some(reply.status), retry_after(&reply), Outcome::Acked(answer))
            }
            Ok(reply) if (400..500).contains(&reply.status) => {
                (Some(reply.status), retry_after(&reply), Outcome::Failed)
            }
            Ok(reply) => (
                Some(reply.status),
                retry_after(&reply),
                Outcome::Unknown(format!("status {} {}", reply.status, String::from_utf8_lossy(&reply.body))),
            ),
            Err(CallError::Refused) => (None, false, Outcome::NotSent),
            Err(CallError::Broken(why)) => (None, false, Outcome::Unknown(why)),
        };
        if let (Kind::Create, Outcome::Acked(row)) = (kind, &outcome)
            && let Some(id) = row.get("id").and_then(Value::as_i64)
        {
            ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(id);
        }
        let acked = matches!(outcome, Outcome::Acked(_));
        ops.push(Op { client, token, kind, invoked, completed, status, retry_after, outcome });
        if !acked {
            // As a client honouring Retry-After would, a little: keeps a dead dependency from becoming a busy loop.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    ops
}

// ------------------------------------------------------------------------------------------------------------
// The checker
// ------------------------------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Tally {
    ops: usize,
    writes: usize,
    acknowledged: usize,
    failed: usize,
    not_sent: usize,
    unknown: usize,
    unknown_applied: usize,
    lost: usize,
    notes: usize,
    versions: usize,
    slowest: Duration,
}

impl Tally {
    fn summary(&self) -> String {
        format!(
            "{} ops, {} writes: {} acknowledged, {} failed (4xx), {} never sent (refused), {} unknown of which {} \
             applied; {} lost; {} notes with {} versions; slowest answer {} ms",
            self.ops,
            self.writes,
            self.acknowledged,
            self.failed,
            self.not_sent,
            self.unknown,
            self.unknown_applied,
            self.lost,
            self.notes,
            self.versions,
            ms(self.slowest)
        )
    }
}

/// Reads every note and its history back after recovery and holds them against the log: every acknowledged
/// write is there exactly once and reads back identical; no failed or unsent write is there; every unknown write
/// is there at most once; every history is complete (see the file's doc); and for two writes to one note where
/// the first was acknowledged before the second was sent, history has them in that order. Panics listing the
/// violations; returns the counts.
fn check_history(addr: SocketAddr, pg: &Postgres, db: &str, ops: &[Op]) -> Tally {
    let read = |target: &str| -> Value {
        let reply = call(addr, "GET", target, None, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("GET {target} after recovery: {e:?}"));
        assert_eq!(reply.status, 200, "GET {target} after recovery: {}", String::from_utf8_lossy(&reply.body));
        json_or_null(&reply)
    };
    let mut problems: Vec<String> = Vec::new();
    let rows = read("/notes/all");
    let rows = rows.as_array().unwrap_or_else(|| panic!("/notes/all is not an array: {rows}"));

    // What Postgres holds: one history row per note, and how many patches it has.
    let listing = pg.psql(
        db,
        "SELECT foreignkey, count(*), sum(json_array_length(patches)) FROM notes_history GROUP BY 1 ORDER BY 1",
    );
    let mut stored: HashMap<i64, (i64, i64)> = HashMap::new();
    for line in listing.lines().filter(|l| !l.is_empty()) {
        let fields: Vec<i64> = line.split('|').map(|f| f.parse().expect("an integer from psql")).collect();
        stored.insert(fields[0], (fields[1], fields[2]));
    }

    // token → (note id, position from the oldest version, that version).
    let mut found: HashMap<String, (i64, usize, Value)> = HashMap::new();
    let mut chains: Vec<(i64, Vec<String>)> = Vec::new();
    let mut versions_total = 0;
    for row in rows {
        let id = row["id"].as_i64().unwrap_or_else(|| panic!("a row without an id: {row}"));
        let history = read(&format!("/notes/{id}/history"));
        let versions = history.as_array().unwrap_or_else(|| panic!("history of {id} is not an array: {history}"));
        versions_total += versions.len();
        if versions.first() != Some(row) {
            problems.push(format!(
                "note {id}: history's newest version {:?} is not the current row {row}",
                versions.first()
            ));
        }
        match stored.get(&id) {
            Some(&(1, patches)) if patches == versions.len() as i64 => {}
            Some(&(rows, patches)) => problems.push(format!(
                "note {id}: {rows} history rows with {patches} patches, but history rebuilt {} versions",
                versions.len()
            )),
            None => problems.push(format!("note {id} has no history row")),
        }
        let mut chain = Vec::new();
        for (position, version) in versions.iter().rev().enumerate() {
            let token = version["data"]["body"].as_str().unwrap_or_default().to_string();
            if version["id"] != json!(id) {
                problems.push(format!("note {id}: a version carries id {}", version["id"]));
            }
            if let Some((other, _, _)) = found.insert(token.clone(), (id, position, version.clone())) {
                problems.push(format!("token {token:?} appears twice (notes {other} and {id}): applied twice"));
            }
            chain.push(token);
        }
        chains.push((id, chain));
    }
    let ids: HashSet<i64> = rows.iter().filter_map(|r| r["id"].as_i64()).collect();
    for fk in stored.keys().filter(|fk| !ids.contains(fk)) {
        problems.push(format!("history row for note {fk}, which /notes/all does not list"));
    }

    let by_token: HashMap<&str, &Op> =
        ops.iter().filter(|op| op.kind.is_write()).map(|op| (op.token.as_str(), op)).collect();
    for (id, chain) in &chains {
        for (position, token) in chain.iter().enumerate() {
            let Some(op) = by_token.get(token.as_str()) else {
                problems.push(format!("note {id} version {position}: token {token:?} was never written"));
                continue;
            };
            let expected = if position == 0 { Kind::Create } else { Kind::Update(*id) };
            if op.kind != expected {
                problems.push(format!("note {id} version {position} is {}, expected a {expected:?}", op.describe()));
            }
        }
        // Real-time order: a write acknowledged before another was sent must be older in history.
        for (i, older) in chain.iter().enumerate() {
            for newer in &chain[i + 1..] {
                let (Some(older), Some(newer)) = (by_token.get(older.as_str()), by_token.get(newer.as_str())) else {
                    continue;
                };
                if matches!(newer.outcome, Outcome::Acked(_)) && newer.completed < older.invoked {
                    problems.push(format!(
                        "note {id}: {} is older in history than {}, which was acknowledged before it was sent",
                        older.describe(),
                        newer.describe()
                    ));
                }
            }
        }
    }

    let mut tally = Tally { ops: ops.len(), notes: rows.len(), versions: versions_total, ..Tally::default() };
    for op in ops {
        tally.slowest = tally.slowest.max(op.latency());
        if !op.kind.is_write() {
            continue;
        }
        tally.writes += 1;
        let here = found.get(&op.token);
        match (&op.outcome, here) {
            (Outcome::Acked(row), Some((id, position, version))) => {
                tally.acknowledged += 1;
                if version != row {
                    problems.push(format!("{}: answered {row}, history holds {version}", op.describe()));
                }
                let in_place = match op.kind {
                    Kind::Create => row["id"] == json!(id) && *position == 0,
                    Kind::Update(target) => target == *id && *position > 0,
                    _ => false,
                };
                if !in_place {
                    problems.push(format!("{} is at note {id} version {position}", op.describe()));
                }
                if op.kind == Kind::Create {
                    // Reads back identical: as created when never updated, else as its history's newest version.
                    let current = read(&format!("/notes/{id}"));
                    let chain_len = chains.iter().find(|(n, _)| n == id).map_or(0, |(_, c)| c.len());
                    let expected = if chain_len == 1 { Some(row) } else { rows.iter().find(|r| r["id"] == json!(id)) };
                    if current.get(0) != expected || current.as_array().map(Vec::len) != Some(1) {
                        problems.push(format!("{}: GET /notes/{id} answered {current}", op.describe()));
                    }
                }
            }
            (Outcome::Acked(_), None) => {
                tally.acknowledged += 1;
                tally.lost += 1;
                problems.push(format!("LOST: {} was acknowledged but is nowhere", op.describe()));
            }
            (Outcome::Failed, here) => {
                tally.failed += 1;
                if here.is_some() {
                    problems.push(format!("{} failed, yet it is in note {:?}", op.describe(), here.map(|h| h.0)));
                }
            }
            (Outcome::NotSent, here) => {
                tally.not_sent += 1;
                if here.is_some() {
                    problems.push(format!("{} was never sent, yet it is there", op.describe()));
                }
            }
            (Outcome::Unknown(_), here) => {
                tally.unknown += 1;
                tally.unknown_applied += usize::from(here.is_some());
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} history violations (of {} ops), first ones:\n{}",
        problems.len(),
        ops.len(),
        problems.iter().take(15).cloned().collect::<Vec<_>>().join("\n")
    );
    assert_eq!(tally.lost, 0);
    tally
}

/// Waits until /healthz is 200 again (both dependencies ok).
fn wait_healthy(scribe: &ScribeProcess, within: Duration) -> Duration {
    until(within, || health(scribe.addr).is_some_and(|(status, _)| status == 200)).unwrap_or_else(|| {
        panic!("/healthz not 200 within {within:?}: {:?}; {}", health(scribe.addr), scribe.log_tail())
    })
}

/// How /healthz names a dependency: `"ok"` or `"unavailable"`.
fn named(addr: SocketAddr, dependency: &str, word: &str) -> bool {
    health(addr).is_some_and(|(_, body)| body[dependency] == word)
}

// ------------------------------------------------------------------------------------------------------------
// Scenario 1: Postgres crashes under load
// ------------------------------------------------------------------------------------------------------------

struct PgOutage {
    stop_took: Duration,
    down_at: Instant,
    restart_began: Instant,
    named_after: Duration,
    restart_took: Duration,
    healthy_after: Duration,
}

#[test]
fn postgres_crash_loses_no_acknowledged_write() {
    let mut pg = Postgres::start();
    let db = "nf_pg_crash";
    let url = pg.create_database(db);
    let redis = Redis::start();
    let scribe = ScribeProcess::start(&url, redis.port(), &[]);
    wait_healthy(&scribe, Duration::from_secs(10));

    let (ops, outage) = run_clients(scribe.addr, WRITERS, false, || {
        std::thread::sleep(Duration::from_millis(2500));
        let stop_began = Instant::now();
        pg.stop_immediate();
        let down_at = Instant::now();
        let named_after = until(Duration::from_secs(2), || named(scribe.addr, "postgres", "unavailable"))
            .unwrap_or_else(|| {
                panic!("/healthz did not name postgres within 2 s of the crash: {:?}", health(scribe.addr))
            });
        sleep_until(down_at + Duration::from_secs(3));
        let restart_began = Instant::now();
        pg.restart();
        let restart_took = restart_began.elapsed();
        let healthy_after = wait_healthy(&scribe, Duration::from_secs(15));
        std::thread::sleep(Duration::from_millis(2500));
        PgOutage { stop_took: down_at - stop_began, down_at, restart_began, named_after, restart_took, healthy_after }
    });

    // During the outage (sent after Postgres was gone, answered before it was started again): every answer a
    // fast 503 with Retry-After. The invalid creates are refused before any database work: 400.
    let during: Vec<&Op> = ops
        .iter()
        .filter(|op| op.invoked >= outage.down_at && op.completed <= outage.restart_began && op.kind != Kind::Invalid)
        .collect();
    assert!(during.len() >= 20, "only {} requests during the outage", during.len());
    let slowest = during.iter().map(|op| op.latency()).max().unwrap_or_default();
    for op in &during {
        assert!(
            op.status == Some(503) && op.retry_after && op.latency() < Duration::from_secs(3),
            "during the Postgres outage every answer must be a 503 with Retry-After within 3 s: {}; {}",
            op.describe(),
            scribe.log_tail()
        );
    }
    let hung: Vec<String> = ops.iter().filter(|op| op.timed_out()).map(Op::describe).collect();
    assert!(hung.is_empty(), "requests without an answer within {CLIENT_TIMEOUT:?}: {hung:?}");
    let not_503: Vec<String> = ops
        .iter()
        .filter(|op| op.status.is_some_and(|s| s >= 500) && !(op.status == Some(503) && op.retry_after))
        .map(Op::describe)
        .collect();
    assert!(not_503.is_empty(), "5xx answers other than 503 + Retry-After: {not_503:?}; {}", scribe.log_tail());

    let tally = check_history(scribe.addr, &pg, db, &ops);
    assert!(tally.acknowledged > 50, "too little was acknowledged to mean anything: {tally:?}");
    eprintln!(
        "postgres crash: {}; stop took {} ms, /healthz named postgres {} ms after, {} answers during the \
         3 s outage, slowest {} ms; restart took {} ms, /healthz ok {} ms after",
        tally.summary(),
        ms(outage.stop_took),
        ms(outage.named_after),
        during.len(),
        ms(slowest),
        ms(outage.restart_took),
        ms(outage.healthy_after)
    );
}

// ------------------------------------------------------------------------------------------------------------
// Scenario 1b: scribe-rs starts before Postgres, and its database does not exist yet
// ------------------------------------------------------------------------------------------------------------

/// compose found it (scripts/compose-check.sh): scribe-rs creates its database at startup, and when Postgres
/// was not there yet it used to try only once, so on a new cluster it answered 503 for good after Postgres came
/// up. It now keeps trying every second until the database is there.
#[test]
fn scribe_started_before_postgres_creates_its_database_when_postgres_arrives() {
    let mut pg = Postgres::start();
    let db = "nf_late_database";
    let url = pg.url(db);
    pg.stop_immediate();
    let redis = Redis::start();
    let scribe = ScribeProcess::start(&url, redis.port(), &[]);
    assert!(
        until(Duration::from_secs(3), || named(scribe.addr, "postgres", "unavailable")).is_some(),
        "/healthz should name postgres while it is down: {:?}",
        health(scribe.addr)
    );
    pg.restart();
    let healthy_after = wait_healthy(&scribe, Duration::from_secs(10));
    let reply = call(scribe.addr, "POST", "/notes", Some(&note_body("late-db", 0, true)), CLIENT_TIMEOUT);
    let status = reply.as_ref().map(|r| r.status).ok();
    assert_eq!(status, Some(200), "a write once the database exists: {reply:?}; {}", scribe.log_tail());
    assert_eq!(pg.psql("postgres", &format!("SELECT count(*) FROM pg_database WHERE datname = '{db}'")), "1");
    eprintln!("late database: /healthz ok {} ms after Postgres was back", ms(healthy_after));
}

// ------------------------------------------------------------------------------------------------------------
// Scenario 2: scribe-rs is SIGKILLed under load and started again on the same port
// ------------------------------------------------------------------------------------------------------------

#[test]
fn scribe_sigkill_loses_no_acknowledged_write() {
    let pg = Postgres::start();
    let db = "nf_sigkill";
    let url = pg.create_database(db);
    let redis = Redis::start();
    let mut scribe = ScribeProcess::start(&url, redis.port(), &[]);
    wait_healthy(&scribe, Duration::from_secs(10));
    let addr = scribe.addr;

    let (ops, (killed_at, restarted_took, serving_after)) = run_clients(addr, WRITERS, false, || {
        std::thread::sleep(Duration::from_millis(2500));
        let killed_at = Instant::now();
        scribe.sigkill();
        std::thread::sleep(Duration::from_secs(1));
        let restarted_took = scribe.spawn();
        let serving_after = wait_healthy(&scribe, Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(2500));
        (killed_at, restarted_took, serving_after)
    });

    let hung: Vec<String> = ops.iter().filter(|op| op.timed_out()).map(Op::describe).collect();
    assert!(hung.is_empty(), "requests without an answer within {CLIENT_TIMEOUT:?}: {hung:?}");
    let errors: Vec<String> = ops.iter().filter(|op| op.status.is_some_and(|s| s >= 500)).map(Op::describe).collect();
    assert!(errors.is_empty(), "5xx with Postgres up the whole time: {errors:?}; {}", scribe.log_tail());
    let cut = ops.iter().filter(|op| op.invoked < killed_at && op.completed >= killed_at).count();
    let refused = ops.iter().filter(|op| matches!(op.outcome, Outcome::NotSent)).count();
    assert!(refused > 0, "no request met the dead port: the kill window was missed");

    let tally = check_history(addr, &pg, db, &ops);
    assert!(tally.acknowledged > 50, "too little was acknowledged to mean anything: {tally:?}");
    eprintln!(
        "scribe-rs SIGKILL: {}; {cut} requests in flight at the kill, {refused} refused while down; \
         restarted on the same port in {} ms, /healthz ok {} ms after",
        tally.summary(),
        ms(restarted_took),
        ms(serving_after)
    );
}

// ------------------------------------------------------------------------------------------------------------
// Redis killed, then frozen, under load
// ------------------------------------------------------------------------------------------------------------

#[test]
fn notes_crud_keeps_answering_when_redis_dies_or_freezes() {
    let pg = Postgres::start();
    let db = "nf_redis";
    let url = pg.create_database(db);
    let mut redis = Redis::start();
    let scribe = ScribeProcess::start(&url, redis.port(), &[]);
    wait_healthy(&scribe, Duration::from_secs(10));
    let addr = scribe.addr;

    let (ops, windows) = run_clients(addr, 4, true, || {
        std::thread::sleep(Duration::from_millis(1500));
        let killed_at = Instant::now();
        redis.kill();
        let kill_named = until(Duration::from_secs(2), || named(addr, "redis", "unavailable"))
            .unwrap_or_else(|| panic!("/healthz did not name redis within 2 s of its death: {:?}", health(addr)));
        sleep_until(killed_at + Duration::from_millis(2500));
        let restarted_at = Instant::now();
        redis.restart();
        let back_after_kill = wait_healthy(&scribe, Duration::from_secs(10));
        std::thread::sleep(Duration::from_secs(1));
        let frozen_at = Instant::now();
        redis.freeze();
        let freeze_named = until(Duration::from_secs(2), || named(addr, "redis", "unavailable"))
            .unwrap_or_else(|| panic!("/healthz did not name redis within 2 s of its freeze: {:?}", health(addr)));
        sleep_until(frozen_at + Duration::from_millis(2500));
        let thawed_at = Instant::now();
        redis.thaw();
        let back_after_thaw = wait_healthy(&scribe, Duration::from_secs(10));
        std::thread::sleep(Duration::from_secs(1));
        [(killed_at, restarted_at, kill_named, back_after_kill), (frozen_at, thawed_at, freeze_named, back_after_thaw)]
    });

    let budget = Duration::from_secs(1);
    for op in &ops {
        let expected =
            if op.kind == Kind::Invalid { op.status == Some(400) } else { op.status.is_some_and(|s| s < 300) };
        assert!(
            expected && op.latency() < budget,
            "with Redis dead or frozen notes CRUD must answer 2xx within {budget:?}: {}; {}",
            op.describe(),
            scribe.log_tail()
        );
    }
    let figures: Vec<String> = windows
        .iter()
        .zip(["killed", "frozen"])
        .map(|((from, to, named_after, back_after), what)| {
            let inside: Vec<&Op> = ops.iter().filter(|op| op.invoked >= *from && op.completed <= *to).collect();
            let fresh = inside.iter().filter(|op| op.kind == Kind::Fresh).count();
            let slowest = inside.iter().map(|op| op.latency()).max().unwrap_or_default();
            assert!(inside.len() >= 20 && fresh > 0, "too few requests while Redis was {what}: {}", inside.len());
            format!(
                "Redis {what}: {} answers ({fresh} in new components), slowest {} ms, /healthz named redis after {} \
                 ms, ok again {} ms after it returned",
                inside.len(),
                ms(slowest),
                ms(*named_after),
                ms(*back_after)
            )
        })
        .collect();
    let tally = check_history(addr, &pg, db, &ops);
    assert_eq!(tally.unknown + tally.not_sent, 0, "every write answered: {tally:?}");
    eprintln!("redis faults: {}; {}", tally.summary(), figures.join("; "));
}

// ------------------------------------------------------------------------------------------------------------
// Pool exhaustion: a table lock from psql
// ------------------------------------------------------------------------------------------------------------

/// scribe-rs's connections to `db` (psql's own sessions excluded).
fn scribe_connections(pg: &Postgres, db: &str) -> i64 {
    pg.psql(
        db,
        &format!(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '{db}' AND backend_type = 'client backend' \
             AND application_name <> 'psql'"
        ),
    )
    .parse()
    .expect("a count from psql")
}

#[test]
fn pool_exhaustion_answers_503_and_recovers_without_leaks() {
    const POOL: i64 = 2;
    // The one worker's connections: its pool, and its pipelined connection for reads by id.
    const CONNECTIONS: i64 = POOL + 1;
    const LOCK_SECS: u64 = 5;
    let pg = Postgres::start();
    let db = "nf_pool";
    let url = pg.create_database(db);
    let redis = Redis::start();
    // One worker with two pooled connections; statements give up after 500 ms, pool waits after 1000 ms.
    let scribe = ScribeProcess::start(
        &url,
        redis.port(),
        &[("SCRIBE_APP_WORKERS", "1"), ("SCRIBE_APP_POOL_SIZE", "2"), ("SCRIBE_APP_STATEMENT_TIMEOUT_MS", "500")],
    );
    let addr = scribe.addr;
    let send = |method: &str, target: &str, body: Option<String>| {
        let started = Instant::now();
        let result = call(addr, method, target, body.as_deref(), CLIENT_TIMEOUT);
        (result, started.elapsed())
    };
    for i in 0..3 {
        let (reply, _) = send("POST", "/notes", Some(note_body(&format!("nf-seed-{i}"), 0, true)));
        let reply = reply.expect("a seed write is answered");
        assert_eq!(reply.status, 200, "seed write: {}", String::from_utf8_lossy(&reply.body));
    }
    // Open the reader's connection (reads by id) and pooled ones (the seeds' writes).
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..5 {
                    let _ = send("GET", "/notes/1/history", None);
                }
            });
        }
    });
    let before = scribe_connections(&pg, db);
    assert!((1..=CONNECTIONS).contains(&before), "{before} connections before the lock, pool size {POOL} + 1 reader");

    let mut holder = Guard(
        Command::new(testkit::find_binary("psql"))
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres"])
            .args(["-p", &pg.port().to_string(), "-d", db, "-c"])
            .arg(format!("BEGIN; LOCK TABLE notes IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep({LOCK_SECS}); COMMIT;"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start psql holding the lock"),
    );
    let locked = until(Duration::from_secs(5), || {
        pg.psql(
            db,
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
             WHERE c.relname = 'notes' AND l.mode = 'AccessExclusiveLock' AND l.granted",
        ) == "1"
    });
    assert!(locked.is_some(), "psql did not get the lock within 5 s");
    let locked_at = Instant::now();

    // 8 clients for 2.5 s: every request either waits for a pooled connection or blocks on the lock.
    let answers: Vec<(String, Result<Response, CallError>, Duration)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|client| {
                scope.spawn(move || {
                    let mut answers = Vec::new();
                    let mut n = 0;
                    while locked_at.elapsed() < Duration::from_millis(2500) {
                        n += 1;
                        let token = format!("nf-lock-{client}-{n}");
                        let (method, target, body) = match n % 4 {
                            0 => ("POST", "/notes".to_string(), Some(note_body(&token, client, true))),
                            1 => ("PUT", "/notes/2".to_string(), Some(note_body(&token, client, true))),
                            2 => ("GET", "/notes/1".to_string(), None),
                            _ => ("GET", "/notes/all".to_string(), None),
                        };
                        let (result, took) = send(method, &target, body);
                        answers.push((format!("{method} {target}"), result, took));
                    }
                    answers
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a lock client panicked")).collect()
    });
    assert!(locked_at.elapsed() < Duration::from_secs(LOCK_SECS), "the lock was released before the checks");
    let slowest = answers.iter().map(|(_, _, took)| *took).max().unwrap_or_default();
    for (what, result, took) in &answers {
        let fine = matches!(result, Ok(reply) if reply.status == 503 && retry_after(reply));
        assert!(
            fine && *took < Duration::from_millis(2000),
            "with the pool exhausted {what} must answer 503 + Retry-After within 2 s: {:?} in {} ms; {}",
            result.as_ref().map(|r| (r.status, String::from_utf8_lossy(&r.body).into_owned())),
            ms(*took),
            scribe.log_tail()
        );
    }

    let exited = wait_for_exit(&mut holder.0, Duration::from_secs(LOCK_SECS + 10)).expect("psql releases the lock");
    assert!(exited.success(), "the psql holding the lock failed: {exited:?}");
    let recovered =
        until(Duration::from_secs(5), || matches!(send("GET", "/notes/1", None).0, Ok(reply) if reply.status == 200))
            .unwrap_or_else(|| panic!("no 200 within 5 s of the lock's release; {}", scribe.log_tail()));
    // Full recovery: a burst of every kind of request, all 2xx and prompt.
    for i in 0..20 {
        let token = format!("nf-after-{i}");
        let (method, target, body) = match i % 4 {
            0 => ("POST", "/notes".to_string(), Some(note_body(&token, 0, true))),
            1 => ("PUT", "/notes/2".to_string(), Some(note_body(&token, 0, true))),
            2 => ("GET", "/notes/1/history".to_string(), None),
            _ => ("GET", "/notes/all".to_string(), None),
        };
        let (result, took) = send(method, &target, body);
        let reply = result.unwrap_or_else(|e| panic!("{method} {target} after the lock: {e:?}"));
        assert_eq!(reply.status, 200, "{method} {target} after the lock: {}", String::from_utf8_lossy(&reply.body));
        assert!(took < Duration::from_secs(1), "{method} {target} took {} ms after the lock", ms(took));
    }
    let written_during = pg.psql(db, "SELECT count(*) FROM notes WHERE data ->> 'body' LIKE 'nf-lock-%'");
    let history_during = pg.psql(db, "SELECT count(*) FROM notes_history WHERE patches::text LIKE '%nf-lock-%'");
    assert_eq!((written_during.as_str(), history_during.as_str()), ("0", "0"), "writes answered 503 were applied");
    assert_eq!(pg.psql(db, "SELECT count(*) FROM notes"), "8", "3 seeds and 5 creates after the lock");
    let after = scribe_connections(&pg, db);
    assert!(after <= CONNECTIONS, "{after} connections after recovery, pool size {POOL} + 1 reader: leaked");
    let health = health(addr).expect("/healthz answers");
    assert_eq!(health.0, 200, "/healthz after the lock: {}", health.1);
    eprintln!(
        "pool exhaustion: {} answers during the {LOCK_SECS} s lock, all 503 + Retry-After, slowest {} ms; first 200 \
         {} ms after the release; connections before {before}, after {after} (pool {POOL} + 1 reader)",
        answers.len(),
        ms(slowest),
        ms(recovered)
    );
}
