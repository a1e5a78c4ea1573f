//! Where requests come from: the URL's path, a path template whose variables are drawn from lists, or a file
//! of raw requests to replay. Each worker renders the next request into its connection's reusable write
//! buffer: no allocation per request once buffers have grown.

use std::path::{Path, PathBuf};

use crate::settings::{Pick, RequestSettings};
use crate::target::Target;

/// Splitmix64: tiny, fast, and the same sequence on every platform and crate version (reproducible runs).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * n as f64) as usize % n.max(1)
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug)]
enum Part {
    Literal(String),
    Var(usize),
}

#[derive(Debug)]
enum Kind {
    /// One request, pre-rendered.
    Fixed(Rendered),
    /// `<method> <template>` with variables filled per request, then ` HTTP/1.1\r\n<headers>\r\n<body>`.
    Template { parts: Vec<Part>, values: Vec<Vec<String>>, pick: Pick, rest: Rendered },
    /// Raw requests, replayed in order.
    Replay(Vec<Rendered>),
}

/// Request bytes, and where a `Connection: close` header goes when the request is the last of its
/// connection (`--requests-per-conn`): before the blank line that ends the head. None when the request names
/// its own Connection header, which is then sent as given.
#[derive(Debug)]
struct Rendered {
    bytes: Vec<u8>,
    close_at: Option<usize>,
}

impl Rendered {
    /// `bytes` whose head ends (blank line included) at `head_end`, unless `own_connection`.
    fn new(bytes: Vec<u8>, head_end: usize, own_connection: bool) -> Rendered {
        Rendered { bytes, close_at: (!own_connection).then(|| head_end - 2) }
    }

    fn write(&self, out: &mut Vec<u8>, close: bool) {
        match self.close_at.filter(|_| close) {
            Some(at) => {
                out.extend_from_slice(&self.bytes[..at]);
                out.extend_from_slice(b"Connection: close\r\n");
                out.extend_from_slice(&self.bytes[at..]);
            }
            None => out.extend_from_slice(&self.bytes),
        }
    }
}

#[derive(Debug)]
pub struct Source {
    kind: Kind,
    method_is_head: bool,
    pub description: String,
}

/// Per-worker position in the source: its own random stream and round-robin counters.
#[derive(Debug)]
pub struct Cursor {
    rng: Rng,
    counters: Vec<usize>,
    replay: usize,
}

impl Source {
    pub fn cursor(&self, seed: u64, worker: usize) -> Cursor {
        let vars = match &self.kind {
            Kind::Template { values, .. } => values.len(),
            _ => 0,
        };
        // Workers start at different offsets so round-robin threads do not send the same sequence in lockstep.
        Cursor {
            rng: Rng::new(seed ^ (worker as u64).wrapping_mul(0xA24B_AED4_963E_E407)),
            counters: vec![worker; vars],
            replay: worker,
        }
    }

    /// Appends the next request to `out`, with `Connection: close` when `close` (the last request of its
    /// connection); returns whether it is a HEAD request (its response has no body).
    pub fn write_next(&self, cursor: &mut Cursor, out: &mut Vec<u8>, close: bool) -> bool {
        match &self.kind {
            Kind::Fixed(request) => {
                request.write(out, close);
                self.method_is_head
            }
            Kind::Template { parts, values, pick, rest } => {
                for part in parts {
                    match part {
                        Part::Literal(s) => out.extend_from_slice(s.as_bytes()),
                        Part::Var(i) => {
                            let list = &values[*i];
                            let index = match pick {
                                Pick::Random => cursor.rng.below(list.len()),
                                Pick::RoundRobin => {
                                    let at = cursor.counters[*i] % list.len();
                                    cursor.counters[*i] = at + 1;
                                    at
                                }
                            };
                            out.extend_from_slice(list[index].as_bytes());
                        }
                    }
                }
                rest.write(out, close);
                self.method_is_head
            }
            Kind::Replay(requests) => {
                let request = &requests[cursor.replay % requests.len()];
                cursor.replay = cursor.replay.wrapping_add(1);
                request.write(out, close);
                request.bytes.starts_with(b"HEAD ")
            }
        }
    }
}

/// Why the request flags give no source of requests. Each message is one line for the user and names the
/// flag; a read error is quoted in it, so it is not also a `source` (a chain printer would say it twice).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("invalid method {method:?}")]
    InvalidMethod { method: String },
    #[error("cannot read --body-file {}: {error}", path.display())]
    BodyFileUnreadable { path: PathBuf, error: std::io::Error },
    #[error("header {raw:?} is not `Name: value`")]
    HeaderNotNameValue { raw: String },
    #[error("invalid header {raw:?}")]
    InvalidHeader { raw: String },
    #[error("--var {spec:?} is not NAME=@FILE or NAME=a,b")]
    VarNotNameValues { spec: String },
    #[error("--var name {name:?} must be letters, digits or _")]
    BadVarName { name: String },
    #[error("--var {name} given twice")]
    VarGivenTwice { name: String },
    #[error("cannot read --var {name} file {file}: {error}")]
    VarFileUnreadable { name: String, file: String, error: std::io::Error },
    #[error("--var {name} has no values")]
    VarWithoutValues { name: String },
    #[error("--var {name} value {value:?} contains whitespace or control characters")]
    BadVarValue { name: String, value: String },
    #[error("--var {name} is not used by --path {template:?}")]
    VarNotUsed { name: String, template: String },
    #[error("--var needs --path with {{name}} placeholders")]
    VarWithoutPath,
    #[error("--path {template:?} must start with / and contain no spaces")]
    BadPath { template: String },
    #[error("--path {template:?}: unclosed {{")]
    UnclosedBrace { template: String },
    #[error("--path {template:?} uses {{{name}}} but no --var {name}=… was given")]
    UnknownVar { template: String, name: String },
    #[error("cannot read --replay {}: {error}", path.display())]
    ReplayUnreadable { path: PathBuf, error: std::io::Error },
    /// `request` counts from 1, as the user counts the file's requests.
    #[error("--replay {}: request {request} is not a complete HTTP/1.1 request head", path.display())]
    ReplayIncompleteHead { path: PathBuf, request: usize },
    #[error("--replay {}: request {request} has an invalid Content-Length", path.display())]
    ReplayBadContentLength { path: PathBuf, request: usize },
    #[error("--replay {}: request {request} body is shorter than its Content-Length", path.display())]
    ReplayShortBody { path: PathBuf, request: usize },
    #[error("--replay {}: no requests in the file", path.display())]
    ReplayEmpty { path: PathBuf },
}

/// Builds the source from the request settings, reading any files they name.
pub fn build(requests: &RequestSettings, target: &Target) -> Result<Source, SourceError> {
    let method = requests.method.to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(SourceError::InvalidMethod { method: requests.method.clone() });
    }
    let body = match &requests.body_file {
        Some(path) => {
            Some(std::fs::read(path).map_err(|error| SourceError::BodyFileUnreadable { path: path.clone(), error })?)
        }
        None => None,
    };
    let mut headers = format!("Host: {}\r\n", target.host_header);
    let mut own_connection = false;
    for raw in &requests.headers {
        let (name, value) = raw.split_once(':').ok_or_else(|| SourceError::HeaderNotNameValue { raw: raw.clone() })?;
        let (name, value) = (name.trim(), value.trim());
        let bad = |s: &str| s.bytes().any(|b| b == b'\r' || b == b'\n');
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') || bad(value) {
            return Err(SourceError::InvalidHeader { raw: raw.clone() });
        }
        own_connection |= name.eq_ignore_ascii_case("connection");
        if name.eq_ignore_ascii_case("host") {
            headers = headers.replacen(&format!("Host: {}\r\n", target.host_header), "", 1);
        }
        headers.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = &body {
        headers.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    let mut rest = format!(" HTTP/1.1\r\n{headers}\r\n").into_bytes();
    let rest_head_end = rest.len();
    if let Some(body) = &body {
        rest.extend_from_slice(body);
    }
    let method_is_head = method == "HEAD";

    if let Some(path) = &requests.replay {
        let requests = read_replay(path)?;
        let description = format!("replay {} ({} requests)", path.display(), requests.len());
        return Ok(Source { kind: Kind::Replay(requests), method_is_head: false, description });
    }
    if let Some(template) = &requests.path {
        let (names, values) = read_vars(&requests.vars)?;
        let parts = parse_template(template, &names)?;
        for (i, name) in names.iter().enumerate() {
            if !parts.iter().any(|p| matches!(p, Part::Var(v) if *v == i)) {
                return Err(SourceError::VarNotUsed { name: name.clone(), template: template.clone() });
            }
        }
        let mut parts = parts;
        parts.insert(0, Part::Literal(format!("{method} ")));
        let description = format!("template {template} ({})", describe_vars(&names, &values));
        let rest = Rendered::new(rest, rest_head_end, own_connection);
        return Ok(Source {
            kind: Kind::Template { parts, values, pick: requests.pick, rest },
            method_is_head,
            description,
        });
    }
    if !requests.vars.is_empty() {
        return Err(SourceError::VarWithoutPath);
    }
    let mut request = format!("{method} {}", target.path).into_bytes();
    let head_end = request.len() + rest_head_end;
    request.extend_from_slice(&rest);
    let request = Rendered::new(request, head_end, own_connection);
    Ok(Source { kind: Kind::Fixed(request), method_is_head, description: format!("url {}", target.path) })
}

fn describe_vars(names: &[String], values: &[Vec<String>]) -> String {
    names.iter().zip(values).map(|(n, v)| format!("{n}: {} values", v.len())).collect::<Vec<_>>().join(", ")
}

/// `NAME=@FILE` (one value per non-empty line) or `NAME=a,b,c`.
fn read_vars(raw: &[String]) -> Result<(Vec<String>, Vec<Vec<String>>), SourceError> {
    let mut names = Vec::new();
    let mut values = Vec::new();
    for spec in raw {
        let (name, list) = spec.split_once('=').ok_or_else(|| SourceError::VarNotNameValues { spec: spec.clone() })?;
        let named = || name.to_string();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(SourceError::BadVarName { name: named() });
        }
        if names.iter().any(|n| n == name) {
            return Err(SourceError::VarGivenTwice { name: named() });
        }
        let list: Vec<String> = match list.strip_prefix('@') {
            Some(file) => std::fs::read_to_string(file)
                .map_err(|error| SourceError::VarFileUnreadable { name: named(), file: file.to_string(), error })?
                .lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect(),
            None => list.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect(),
        };
        if list.is_empty() {
            return Err(SourceError::VarWithoutValues { name: named() });
        }
        if let Some(bad) = list.iter().find(|v| v.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control())) {
            return Err(SourceError::BadVarValue { name: named(), value: bad.clone() });
        }
        names.push(name.to_string());
        values.push(list);
    }
    Ok((names, values))
}

fn parse_template(template: &str, names: &[String]) -> Result<Vec<Part>, SourceError> {
    if !template.starts_with('/') || template.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
        return Err(SourceError::BadPath { template: template.to_string() });
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = rest[open..]
            .find('}')
            .map(|c| open + c)
            .ok_or_else(|| SourceError::UnclosedBrace { template: template.to_string() })?;
        if open > 0 {
            parts.push(Part::Literal(rest[..open].to_string()));
        }
        let name = &rest[open + 1..close];
        let index = names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| SourceError::UnknownVar { template: template.to_string(), name: name.to_string() })?;
        parts.push(Part::Var(index));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest.to_string()));
    }
    Ok(parts)
}

/// A file of raw HTTP/1.1 requests, back to back; bodies need Content-Length. Bare `\n` line ends are
/// accepted in heads and written out as CRLF.
fn read_replay(path: &Path) -> Result<Vec<Rendered>, SourceError> {
    let raw = std::fs::read(path).map_err(|error| SourceError::ReplayUnreadable { path: path.into(), error })?;
    let mut requests = Vec::new();
    let mut at = 0;
    while at < raw.len() {
        while at < raw.len() && (raw[at] == b'\r' || raw[at] == b'\n') {
            at += 1;
        }
        if at >= raw.len() {
            break;
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        let head_len = match req.parse(&raw[at..]) {
            Ok(httparse::Status::Complete(n)) => n,
            _ => return Err(SourceError::ReplayIncompleteHead { path: path.into(), request: requests.len() + 1 }),
        };
        let body_len = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .map(|h| std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<usize>().ok()))
            .unwrap_or(Some(0))
            .ok_or_else(|| SourceError::ReplayBadContentLength { path: path.into(), request: requests.len() + 1 })?;
        let mut out = format!("{} {} HTTP/1.1\r\n", req.method.unwrap_or("GET"), req.path.unwrap_or("/")).into_bytes();
        let own_connection = req.headers.iter().any(|h| h.name.eq_ignore_ascii_case("connection"));
        for h in req.headers.iter() {
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(h.value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        let head_end = out.len();
        let body_start = at + head_len;
        if raw.len() < body_start + body_len {
            return Err(SourceError::ReplayShortBody { path: path.into(), request: requests.len() + 1 });
        }
        out.extend_from_slice(&raw[body_start..body_start + body_len]);
        requests.push(Rendered::new(out, head_end, own_connection));
        at = body_start + body_len;
    }
    if requests.is_empty() {
        return Err(SourceError::ReplayEmpty { path: path.into() });
    }
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_stable_and_spreads() {
        let mut rng = Rng::new(1);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        let mut again = Rng::new(1);
        assert_eq!(first, (0..3).map(|_| again.next_u64()).collect::<Vec<_>>());
        let mut hits = [0usize; 4];
        for _ in 0..4000 {
            hits[rng.below(4)] += 1;
        }
        assert!(hits.iter().all(|&h| h > 800), "{hits:?}");
    }

    #[test]
    fn the_last_request_of_a_connection_says_connection_close() {
        let target = crate::target::parse("http://127.0.0.1:1/x").unwrap_or_else(|e| panic!("{e}"));
        let settings = |headers: &[&str]| RequestSettings {
            method: "POST".into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            body_file: None,
            path: None,
            vars: Vec::new(),
            pick: Pick::Random,
            replay: None,
        };
        let render = |source: &Source, close: bool| {
            let mut out = Vec::new();
            source.write_next(&mut source.cursor(1, 0), &mut out, close);
            String::from_utf8(out).unwrap_or_else(|e| panic!("{e}"))
        };
        let source = build(&settings(&["X-A: 1"]), &target).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(render(&source, false), "POST /x HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-A: 1\r\n\r\n");
        assert_eq!(
            render(&source, true),
            "POST /x HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-A: 1\r\nConnection: close\r\n\r\n"
        );
        let own = build(&settings(&["Connection: keep-alive"]), &target).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(render(&own, true), render(&own, false));
    }

    #[test]
    fn path_templates_split_into_parts_and_refuse_unknown_or_open_names() {
        let names = vec!["id".to_string(), "region".to_string()];
        let parts = parse_template("/v1/{id}?region={region}", &names).expect("valid");
        assert_eq!(parts.len(), 4);
        let unknown = parse_template("/v1/{nope}", &names).err();
        assert!(matches!(&unknown, Some(SourceError::UnknownVar { name, .. }) if name == "nope"), "{unknown:?}");
        assert_eq!(
            unknown.map(|e| e.to_string()).as_deref(),
            Some("--path \"/v1/{nope}\" uses {nope} but no --var nope=… was given")
        );
        let open = parse_template("/v1/{id", &names).err();
        assert_eq!(open.map(|e| e.to_string()).as_deref(), Some("--path \"/v1/{id\": unclosed {"));
        assert!(matches!(parse_template("v1", &names), Err(SourceError::BadPath { .. })));
    }

    #[test]
    fn replay_files_that_are_not_requests_name_the_request() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let replay = |text: &str| {
            let path = dir.path().join("replay.txt");
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            read_replay(&path).err().map(|e| (e.to_string().replace(&path.display().to_string(), "FILE"), e))
        };
        let short = replay("GET / HTTP/1.1\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nab");
        assert!(matches!(short, Some((_, SourceError::ReplayShortBody { request: 2, .. }))), "{short:?}");
        assert_eq!(
            short.map(|s| s.0).as_deref(),
            Some("--replay FILE: request 2 body is shorter than its Content-Length")
        );
        assert!(matches!(replay("\r\n"), Some((_, SourceError::ReplayEmpty { .. }))));
        assert!(matches!(replay("GARBAGE\n"), Some((_, SourceError::ReplayIncompleteHead { request: 1, .. }))));
    }
}
