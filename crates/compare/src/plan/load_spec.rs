//! How loadgen loads a workload: the request source and the per-response assertions, as loadgen's arguments.

use std::path::PathBuf;

use crate::plan::tls::ClientTls;

/// How loadgen loads a workload: the request source and the per-response assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    pub method: String,
    /// The URL's path, or with `vars` a `{var}` template.
    pub path: String,
    pub vars: Vec<String>,
    pub body_file: Option<PathBuf>,
    pub headers: Vec<String>,
    pub connections: u32,
    /// Statuses every response must have (`--expect-status`): 200, plus `also_ok`.
    pub expect_status: Vec<u16>,
    pub expect_body_file: Option<PathBuf>,
    pub expect_contains: Option<String>,
    /// Headers every response must carry (`--expect-header`, `Name: value`).
    pub expect_headers: Vec<String>,
    /// HTTPS with the pinned parameters; None: cleartext.
    pub tls: Option<ClientTls>,
    /// Close and reconnect after this many requests (`--requests-per-conn`); None: keep-alive.
    pub requests_per_conn: Option<u32>,
    /// HTTP/2 with this many streams per connection (`--http2 --streams N`); None: HTTP/1.1.
    pub http2_streams: Option<u32>,
    /// How `vars` values are picked: at random (seeded, the same sequence on every runtime), or in order
    /// (`round_robin`), each list walking on by one per request.
    pub round_robin: bool,
}

impl LoadSpec {
    pub fn get(path: &str, connections: u32) -> LoadSpec {
        LoadSpec {
            method: "GET".into(),
            path: path.into(),
            vars: Vec::new(),
            body_file: None,
            headers: Vec::new(),
            connections,
            expect_status: vec![200],
            expect_body_file: None,
            expect_contains: None,
            expect_headers: Vec::new(),
            tls: None,
            requests_per_conn: None,
            http2_streams: None,
            round_robin: false,
        }
    }

    /// loadgen's request-source and assertion arguments, ending with the URL.
    pub fn loadgen_args(&self, port: u16) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        if let Some(tls) = &self.tls {
            a.extend(tls.loadgen_args());
        }
        if let Some(n) = self.requests_per_conn {
            a.extend(["--requests-per-conn".to_string(), n.to_string()]);
        }
        if let Some(n) = self.http2_streams {
            a.extend(["--http2".to_string(), "--streams".to_string(), n.to_string()]);
        }
        let mut push = |xs: &[&str]| a.extend(xs.iter().map(|x| x.to_string()));
        if self.method != "GET" {
            push(&["-m", &self.method]);
        }
        let url = if self.vars.is_empty() {
            format!("{scheme}://127.0.0.1:{port}{}", self.path)
        } else {
            let pick = if self.round_robin { "round-robin" } else { "random" };
            push(&["--path", &self.path, "--pick", pick, "--seed", "1"]);
            for v in &self.vars {
                push(&["--var", v]);
            }
            format!("{scheme}://127.0.0.1:{port}/")
        };
        if let Some(f) = &self.body_file {
            push(&["--body-file", &f.to_string_lossy()]);
        }
        for h in &self.headers {
            push(&["-H", h]);
        }
        let statuses = self.expect_status.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
        push(&["--expect-status", &statuses]);
        if let Some(f) = &self.expect_body_file {
            push(&["--expect-body-file", &f.to_string_lossy()]);
        }
        if let Some(c) = &self.expect_contains {
            push(&["--expect-contains", c]);
        }
        for h in &self.expect_headers {
            push(&["--expect-header", h]);
        }
        push(&[&url]);
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_specs_become_loadgen_flags_statuses_paths_and_tls() {
        let mut spec = LoadSpec::get("/v1/metadata/{id}?region={region}", 128);
        spec.vars = vec!["id=@ids.txt".into(), "region=ja,en".into()];
        spec.expect_status.push(404);
        let args = spec.loadgen_args(4000);
        assert_eq!(args.last().map(String::as_str), Some("http://127.0.0.1:4000/"));
        assert!(args.windows(2).any(|w| w[0] == "--expect-status" && w[1] == "200,404"));
        assert!(args.windows(2).any(|w| w[0] == "--path" && w[1] == "/v1/metadata/{id}?region={region}"));
        let hello = LoadSpec::get("/api/hello", 100).loadgen_args(1);
        assert_eq!(hello, ["--expect-status", "200", "http://127.0.0.1:1/api/hello"]);
        let mut churn = LoadSpec::get("/api/hello", 100);
        churn.tls = Some(ClientTls::new("/w/ca.pem".into(), true));
        churn.requests_per_conn = Some(1);
        let args = churn.loadgen_args(2).join(" ");
        assert!(args.starts_with("--cacert /w/ca.pem --tls-version 1.3"), "{args}");
        assert!(
            args.ends_with("--tls-resume on --requests-per-conn 1 --expect-status 200 https://127.0.0.1:2/api/hello")
        );
    }
}
