//! An independent model of metadata-rs's HTTP contract: for one request (method and raw target) and the
//! database as the test reads it, the status, body and extra headers the server must answer with.
//!
//! It is written from the contract, the way the JavaScript peers state it (`decodeURIComponent`,
//! `new URLSearchParams(query).get("region")`, `JSON.parse`, `JSON.stringify`), and shares no code with the
//! server: its own percent-decoding, its own JSON parser (over UTF-16 code units, as JavaScript sees strings),
//! its own string escaping. Where metadata-rs is stricter than the peers on purpose, the rule is written here
//! and marked `Departure` (rows the peers answer 200 for and metadata-rs calls malformed).

// Each test binary uses a different part of the model.
#![allow(dead_code)]

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension};

pub const NOT_FOUND: &str = r#"{"error":"not found"}"#;
pub const METHOD_NOT_ALLOWED: &str = r#"{"error":"method not allowed"}"#;
pub const MALFORMED_ID: &str = r#"{"error":"malformed id"}"#;
pub const BAD_REGION: &str = r#"{"error":"region must be a language tag like en or zh-TW"}"#;
pub const MALFORMED_STORED: &str = r#"{"error":"stored metadata is malformed"}"#;
pub const UNAVAILABLE: &str = r#"{"error":"database unavailable"}"#;
pub const HEALTH_OK: &str = r#"{"status":"ok","sqlite":"ok","redis":"disabled"}"#;
pub const HEALTH_DOWN: &str = r#"{"status":"unavailable","sqlite":"down","redis":"disabled"}"#;

/// What the contract answers. Every answer is `application/json` with a Content-Length; for HEAD the body is
/// left off but the Content-Length is the GET body's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub status: u16,
    pub body: String,
    pub allow: Option<&'static str>,
    pub retry_after: Option<&'static str>,
}

impl Expected {
    fn new(status: u16, body: impl Into<String>) -> Expected {
        Expected { status, body: body.into(), allow: None, retry_after: None }
    }

    fn method_not_allowed() -> Expected {
        Expected { allow: Some("GET, HEAD"), ..Expected::new(405, METHOD_NOT_ALLOWED) }
    }

    fn unavailable() -> Expected {
        Expected { retry_after: Some("1"), ..Expected::new(503, UNAVAILABLE) }
    }
}

/// The answer to `method target`; `db` is `None` while the database cannot be opened.
pub fn answer(db: Option<&Connection>, method: &str, target: &str) -> Expected {
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, query),
        None => (target, ""),
    };
    let read = method == "GET" || method == "HEAD";
    if let Some(raw_id) = path.strip_prefix("/v1/metadata/") {
        if raw_id.is_empty() || raw_id.contains('/') {
            return Expected::new(404, NOT_FOUND);
        }
        if !read {
            return Expected::method_not_allowed();
        }
        let Some(id) = decode_uri_component(raw_id) else { return Expected::new(400, MALFORMED_ID) };
        let region = if query.is_empty() { None } else { search_param(query, "region") };
        return lookup(db, &id, region);
    }
    if path == "/healthz" {
        if !read {
            return Expected::method_not_allowed();
        }
        let healthy =
            db.is_some_and(|c| c.query_row("SELECT 1 FROM videos LIMIT 1", [], |_| Ok(())).optional().is_ok());
        return if healthy { Expected::new(200, HEALTH_OK) } else { Expected::new(503, HEALTH_DOWN) };
    }
    Expected::new(404, NOT_FOUND)
}

fn lookup(db: Option<&Connection>, id: &str, region: Option<String>) -> Expected {
    let region = region.filter(|r| !r.is_empty()).unwrap_or_else(|| "en".to_string());
    // /^[A-Za-z0-9-]{1,35}$/ over the decoded string.
    if region.chars().count() > 35 || !region.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Expected::new(400, BAD_REGION);
    }
    let Some(db) = db else { return Expected::unavailable() };
    let sql = "SELECT channel, duration_s, views, locales FROM videos WHERE id = ?1";
    let row = db.query_row(sql, [id], |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?]));
    match row.optional() {
        Ok(Some(row)) => render(id, &region, row).unwrap_or_else(|| Expected::new(500, MALFORMED_STORED)),
        Ok(None) => Expected::new(404, "null"),
        Err(_) => Expected::unavailable(),
    }
}

/// The 200 body, or `None` for a malformed row.
fn render(id: &str, region: &str, [channel, duration, views, locales]: [Value; 4]) -> Option<Expected> {
    // Departure: the peers print whatever SQLite returns; metadata-rs holds the columns to their declared
    // types (TEXT channel, INTEGER views, INTEGER or REAL duration) and calls anything else malformed.
    let channel = match channel {
        Value::Text(t) => Some(t),
        Value::Null => None,
        _ => return None,
    };
    let seconds = match duration {
        Value::Integer(i) => i,
        Value::Real(f) if f.is_finite() => f.trunc() as i64,
        Value::Null => 0,
        _ => return None,
    };
    let views = match views {
        Value::Integer(i) => Some(i),
        Value::Null => None,
        _ => return None,
    };
    // JSON.parse(null) is null, which is not an object.
    let Value::Text(text) = locales else { return None };
    let Json::Object(locales) = Json::parse(&text)? else { return None };

    let wanted = utf16(region);
    let en = utf16("en");
    let own = |key: &[u16]| locales.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v); // the last duplicate wins
    let has_region = own(&wanted).is_some();
    let locale = own(&wanted).or_else(|| own(&en));
    let text = |field: &str| match locale {
        Some(Json::Object(fields)) => {
            fields.iter().rev().find(|(k, _)| *k == utf16(field)).and_then(|(_, v)| match v {
                Json::String(s) => Some(s.clone()),
                _ => None,
            })
        }
        _ => None,
    };
    let (title, description) = (text("title"), text("description"));
    let trending = has_region && views.is_some_and(|v| v > 500_000);
    let opt = |s: Option<&[u16]>| s.map_or_else(|| "null".to_string(), stringify);
    let body = format!(
        r#"{{"id":{},"channel":{},"title":{},"description":{},"duration":"{}","views":{},"trending":{trending}}}"#,
        stringify(&utf16(id)),
        opt(channel.as_deref().map(utf16).as_deref()),
        opt(title.as_deref()),
        opt(description.as_deref()),
        duration_text(seconds),
        views.map_or_else(|| "null".to_string(), |v| v.to_string()),
    );
    Some(Expected::new(200, body))
}

/// M:SS, or H:MM:SS from an hour up; negative counts as 0.
pub fn duration_text(seconds: i64) -> String {
    let s = seconds.max(0);
    let (h, m, sec) = (s / 3600, s % 3600 / 60, s % 60);
    if h > 0 { format!("{h}:{m:02}:{sec:02}") } else { format!("{m}:{sec:02}") }
}

// ------------------------------------------------------------------------------------------------------------
// URLs
// ------------------------------------------------------------------------------------------------------------

/// `decodeURIComponent` as ECMA-262 defines it: each `%XX` run must spell one well-formed UTF-8 sequence (no
/// overlong forms, no surrogates, nothing above U+10FFFF); `None` where JavaScript throws a URIError.
pub fn decode_uri_component(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let hex_at = |i: usize| -> Option<u32> {
        if bytes.get(i) != Some(&b'%') {
            return None;
        }
        let h = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
        u32::from_str_radix(h, 16).ok().filter(|_| h.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            out.push(char::from(bytes[i]));
            i += 1;
            continue;
        }
        let lead = hex_at(i)?;
        i += 3;
        let (extra, min, mut cp) = match lead {
            0x00..=0x7F => (0, 0, lead),
            0xC0..=0xDF => (1, 0x80, lead & 0x1F),
            0xE0..=0xEF => (2, 0x800, lead & 0x0F),
            0xF0..=0xF7 => (3, 0x10000, lead & 0x07),
            _ => return None,
        };
        for _ in 0..extra {
            let b = hex_at(i)?;
            if b & 0xC0 != 0x80 {
                return None;
            }
            cp = cp << 6 | (b & 0x3F);
            i += 3;
        }
        if cp < min {
            return None; // overlong
        }
        out.push(char::from_u32(cp)?); // None for surrogates and above U+10FFFF
    }
    Some(out)
}

/// `new URLSearchParams(query).get(name)`: pairs split on `&`, name and value on the first `=`, `+` is a
/// space, `%XX` decodes (a `%` without two hex digits stays), invalid UTF-8 becomes U+FFFD; the first match.
pub fn search_param(query: &str, name: &str) -> Option<String> {
    let form_decode = |s: &str| {
        let bytes = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let hex = bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
            match (bytes[i], hex) {
                (b'+', _) => out.push(b' '),
                (b'%', Some(h)) => {
                    out.push(u8::from_str_radix(std::str::from_utf8(h).expect("hex is ASCII"), 16).expect("hex"));
                    i += 2;
                }
                (b, _) => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    query.split('&').filter(|p| !p.is_empty()).find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (form_decode(k) == name).then(|| form_decode(v))
    })
}

// ------------------------------------------------------------------------------------------------------------
// JSON, as JavaScript sees it
// ------------------------------------------------------------------------------------------------------------

/// A parsed JSON value; strings are UTF-16 code units (lone surrogates and all), numbers are not kept.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool,
    Number,
    String(Vec<u16>),
    Array,
    /// Members in order, duplicates kept (a lookup takes the last, as JSON.parse does).
    Object(Vec<(Vec<u16>, Json)>),
}

impl Json {
    /// `JSON.parse`: the whole text must be one value with optional whitespace around it; `None` where
    /// JavaScript throws a SyntaxError.
    pub fn parse(text: &str) -> Option<Json> {
        let mut p = Parser { s: text.as_bytes(), i: 0 };
        let v = p.value()?;
        p.ws();
        (p.i == p.s.len()).then_some(v)
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while matches!(self.s.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        let ok = self.s[self.i..].starts_with(lit.as_bytes());
        if ok {
            self.i += lit.len();
        }
        ok
    }

    fn value(&mut self) -> Option<Json> {
        self.ws();
        match *self.s.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.eat("}") {
                    return Some(Json::Object(members));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.ws();
                    if !self.eat(":") {
                        return None;
                    }
                    members.push((key, self.value()?));
                    self.ws();
                    if self.eat("}") {
                        return Some(Json::Object(members));
                    }
                    if !self.eat(",") {
                        return None;
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.ws();
                if self.eat("]") {
                    return Some(Json::Array);
                }
                loop {
                    self.value()?;
                    self.ws();
                    if self.eat("]") {
                        return Some(Json::Array);
                    }
                    if !self.eat(",") {
                        return None;
                    }
                }
            }
            b'"' => self.string().map(Json::String),
            b't' => self.eat("true").then_some(Json::Bool),
            b'f' => self.eat("false").then_some(Json::Bool),
            b'n' => self.eat("null").then_some(Json::Null),
            _ => self.number(),
        }
    }

    /// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? — any magnitude (1e400 is Infinity, not an error).
    fn number(&mut self) -> Option<Json> {
        let digits = |p: &mut Self| {
            let start = p.i;
            while p.s.get(p.i).is_some_and(u8::is_ascii_digit) {
                p.i += 1;
            }
            p.i - start
        };
        self.eat("-");
        if !self.eat("0") && digits(self) == 0 {
            return None;
        }
        if self.eat(".") && digits(self) == 0 {
            return None;
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if !self.eat("+") {
                self.eat("-");
            }
            if digits(self) == 0 {
                return None;
            }
        }
        Some(Json::Number)
    }

    fn string(&mut self) -> Option<Vec<u16>> {
        if !self.eat("\"") {
            return None;
        }
        let mut out = Vec::new();
        loop {
            let rest = std::str::from_utf8(&self.s[self.i..]).ok()?;
            let c = rest.chars().next()?;
            self.i += c.len_utf8();
            match c {
                '"' => return Some(out),
                '\\' => {
                    let e = *self.s.get(self.i)?;
                    self.i += 1;
                    let unit = match e {
                        b'"' => 0x22,
                        b'\\' => 0x5C,
                        b'/' => 0x2F,
                        b'b' => 0x08,
                        b'f' => 0x0C,
                        b'n' => 0x0A,
                        b'r' => 0x0D,
                        b't' => 0x09,
                        b'u' => {
                            let h = std::str::from_utf8(self.s.get(self.i..self.i + 4)?).ok()?;
                            self.i += 4;
                            u16::from_str_radix(h, 16).ok().filter(|_| h.bytes().all(|b| b.is_ascii_hexdigit()))?
                        }
                        _ => return None,
                    };
                    out.push(unit);
                }
                c if (c as u32) < 0x20 => return None,
                c => out.extend(c.encode_utf16(&mut [0; 2]).iter()),
            }
        }
    }
}

pub fn utf16(s: &str) -> Vec<u16> {
    s.encode_utf16().collect()
}

/// `JSON.stringify` of a string (ES2019 well-formed): `"` `\` and the short escapes, other controls and lone
/// surrogates as lower-case `\uxxxx`, everything else as it is, in UTF-8.
pub fn stringify(units: &[u16]) -> String {
    let mut out = String::from("\"");
    for c in char::decode_utf16(units.iter().copied()) {
        match c {
            Ok('"') => out.push_str("\\\""),
            Ok('\\') => out.push_str("\\\\"),
            Ok('\u{8}') => out.push_str("\\b"),
            Ok('\u{c}') => out.push_str("\\f"),
            Ok('\n') => out.push_str("\\n"),
            Ok('\r') => out.push_str("\\r"),
            Ok('\t') => out.push_str("\\t"),
            Ok(c) if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            Ok(c) => out.push(c),
            Err(lone) => out.push_str(&format!("\\u{:04x}", lone.unpaired_surrogate())),
        }
    }
    out.push('"');
    out
}

// ------------------------------------------------------------------------------------------------------------
// Checking a server against the model
// ------------------------------------------------------------------------------------------------------------

/// Sends `method target` to the server on a fresh connection (methods other than GET and HEAD with an empty
/// body) and says how its answer differs from the model's, if it does: status, content type, body, the
/// Allow and Retry-After headers, and framing (a Content-Length that counts the body; HEAD: the GET body's).
pub fn difference(addr: std::net::SocketAddr, db: Option<&Connection>, method: &str, target: &str) -> Option<String> {
    let want = answer(db, method, target);
    let body = (method != "GET" && method != "HEAD").then_some(&b""[..]);
    let got = crate::common::request(addr, method, target, &[], body);
    let head = method == "HEAD";
    let mut diffs = Vec::new();
    if got.status != want.status {
        diffs.push(format!("status {} (want {})", got.status, want.status));
    }
    if got.header("content-type") != Some("application/json") {
        diffs.push(format!("content-type {:?}", got.header("content-type")));
    }
    let want_body = if head { "" } else { want.body.as_str() };
    if got.body != want_body.as_bytes() {
        diffs.push(format!("body {:?} (want {want_body:?})", got.text()));
    }
    for (name, value) in [("allow", want.allow), ("retry-after", want.retry_after)] {
        if got.header(name) != value {
            diffs.push(format!("{name} {:?} (want {value:?})", got.header(name)));
        }
    }
    if let Some(te) = got.header("transfer-encoding") {
        diffs.push(format!("transfer-encoding {te:?} (want a content-length)"));
    }
    let length = want.body.len().to_string();
    if got.header("content-length") != Some(length.as_str()) {
        diffs.push(format!("content-length {:?} (want {length})", got.header("content-length")));
    }
    (!diffs.is_empty()).then(|| format!("{method} {target}: {}", diffs.join("; ")))
}

/// Asserts the server answers every request as the model does, listing every difference on failure.
pub fn assert_agrees(addr: std::net::SocketAddr, db: Option<&Connection>, requests: &[(&str, String)]) {
    let diffs: Vec<String> = requests.iter().filter_map(|(m, t)| difference(addr, db, m, t)).collect();
    assert!(
        diffs.is_empty(),
        "{} of {} requests differ from the model:\n{}",
        diffs.len(),
        requests.len(),
        diffs.join("\n")
    );
}
