//! scribe's list parameters (`filter`, `filter2`, bracket and JSON forms, query string and body) and the WHERE
//! clause built from them.
//!
//! Input: `[flags] query… [0xFF body…]`. The query is the bytes before the first 0xFF (a byte no UTF-8 text
//! has), read as UTF-8 with replacement characters; the body, when present and JSON, is the request body of
//! `POST /…/all`. `flags % 4` parameters are bound before the WHERE clause's own, to check its numbering is
//! relative to what is already bound.
//!
//! Invariants, when `where_clause` answers SQL:
//! * the SQL has exactly the shape the builder promises, so nothing the client sent is in it except column
//!   names: conditions joined by ` AND `, each `COL = ANY($n::text[]::timestamptz[])` (timestamp columns),
//!   `EXPR = ANY($n::text[])` or `EXPR @> $n::jsonb`, where `EXPR` is `("col")::text` or `"col"` followed by
//!   ` -> $n::text`… and at most one final ` ->> $n::text`;
//! * every column is `[a-z0-9_]+` inside double quotes, and is the lower-cased first dotted segment of the
//!   filter key it came from, in the order of the keys (`filter`'s, then `filter2`'s);
//! * placeholders are numbered consecutively from the first unbound parameter, each used once, and there is
//!   exactly one parameter per placeholder, of the type its cast names (it serializes as that type), so every
//!   value the client sent travels as a bind parameter.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use scribe::query::{ListParams, Params, Where, get_path, where_clause};
use serde_json::Value;
use tokio_postgres::types::Type;

/// A recursive-descent reader for the only SQL shapes `where_clause` may produce.
struct Sql<'a> {
    rest: &'a str,
    sql: &'a str,
    columns: Vec<&'a str>,
    placeholders: Vec<(usize, Type)>,
}

impl<'a> Sql<'a> {
    fn fail(&self, what: &str) -> ! {
        let at = self.sql.len() - self.rest.len();
        panic!("unexpected SQL at byte {at} ({what}): {:?}", self.sql)
    }

    fn eat(&mut self, lit: &str) -> bool {
        match self.rest.strip_prefix(lit) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, lit: &str) {
        if !self.eat(lit) {
            self.fail(lit)
        }
    }

    fn column(&mut self) {
        self.expect("\"");
        let len = self.rest.bytes().take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_').count();
        if len == 0 {
            self.fail("a column name");
        }
        self.columns.push(&self.rest[..len]);
        self.rest = &self.rest[len..];
        self.expect("\"");
    }

    fn placeholder(&mut self, ty: Type) {
        self.expect("$");
        let len = self.rest.bytes().take_while(u8::is_ascii_digit).count();
        let n = self.rest[..len].parse::<usize>().unwrap_or_else(|_| self.fail("a placeholder number"));
        self.rest = &self.rest[len..];
        self.placeholders.push((n, ty));
    }

    /// `("col")::text`, or `"col"` with JSON keys.
    fn expr(&mut self) {
        if self.eat("(") {
            self.column();
            self.expect(")::text");
            return;
        }
        self.column();
        loop {
            if self.eat(" ->> ") {
                self.placeholder(Type::TEXT);
                self.expect("::text");
                return;
            }
            if !self.eat(" -> ") {
                return;
            }
            self.placeholder(Type::TEXT);
            self.expect("::text");
        }
    }

    fn condition(&mut self) {
        let timestamp = ["\"date_created\" = ANY($", "\"date_modified\" = ANY($"];
        if timestamp.iter().any(|t| self.rest.starts_with(t)) {
            self.column();
            self.expect(" = ANY(");
            self.placeholder(Type::TEXT_ARRAY);
            self.expect("::text[]::timestamptz[])");
            return;
        }
        self.expr();
        if self.eat(" = ANY(") {
            self.placeholder(Type::TEXT_ARRAY);
            self.expect("::text[])");
        } else if self.eat(" @> ") {
            self.placeholder(Type::JSONB);
            self.expect("::jsonb");
        } else {
            self.fail("` = ANY(` or ` @> `");
        }
    }

    fn read(sql: &'a str) -> Sql<'a> {
        let mut reader = Sql { rest: sql, sql, columns: Vec::new(), placeholders: Vec::new() };
        reader.condition();
        while reader.eat(" AND ") {
            reader.condition();
        }
        if !reader.rest.is_empty() {
            reader.fail("end of SQL");
        }
        reader
    }
}

/// The columns the filters name, in order: the lower-cased first segment of each key.
fn expected_columns(p: &ListParams) -> Vec<String> {
    [&p.filter, &p.filter2]
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(|map| map.keys())
        .map(|key| key.split('.').next().unwrap_or_default().to_ascii_lowercase())
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let [flags, rest @ ..] = data else { return };
    let (query, body) = match rest.iter().position(|&b| b == 0xFF) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let query = String::from_utf8_lossy(query);
    let body: Option<Value> = body.and_then(|b| serde_json::from_slice(b).ok());
    let Ok(params) = ListParams::parse(Some(&query), body.as_ref()) else { return };

    // groupBy is applied to rows with get_path; any path on any value must be safe.
    if let (Some(group_by), Some(body)) = (&params.group_by, &body) {
        let _ = get_path(group_by, body);
    }

    let bound = usize::from(flags % 4);
    let mut binds = Params::new();
    for i in 0..bound {
        binds.push(Box::new(format!("already bound {i}")));
    }
    let Ok(clause) = where_clause(&params, &mut binds) else { return };
    let sql = match clause {
        Where::Nothing | Where::Sql(None) => return,
        Where::Sql(Some(sql)) => sql,
    };

    let reader = Sql::read(&sql);
    let expected = expected_columns(&params);
    assert_eq!(reader.columns, expected, "columns are not the filter keys' first segments: {sql:?}");
    let numbers: Vec<usize> = reader.placeholders.iter().map(|(n, _)| *n).collect();
    let want: Vec<usize> = (bound + 1..=bound + numbers.len()).collect();
    assert_eq!(numbers, want, "placeholders are not consecutive from ${}: {sql:?}", bound + 1);
    assert_eq!(binds.len(), bound + numbers.len(), "parameters without a placeholder: {sql:?}");
    for (n, ty) in &reader.placeholders {
        let mut out = BytesMut::new();
        if let Err(e) = binds[n - 1].to_sql_checked(ty, &mut out) {
            panic!("${n} does not serialize as {ty}: {e} ({sql:?})");
        }
    }
});
