//! How to start one server: program, arguments, environment and working directory, or a server already
//! running to attach to. `plan::runtimes` writes one per runtime and workload; `run::server` starts it.

use std::path::PathBuf;

/// How to start one server. `{port}` in `args` and env values is replaced by the port it is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Not started at all: a server already listening on this port, with its pid when known (`--target`).
    pub attach: Option<(u16, Option<u32>)>,
    /// stdout into /dev/null rather than the log (a request log that writes a line per request would fill
    /// the disk); stderr still goes to the log.
    pub discard_stdout: bool,
    /// The server speaks HTTPS with a certificate this CA signed: readiness polls and probes connect with TLS
    /// and verify it.
    pub tls_ca: Option<PathBuf>,
}

impl ServerSpec {
    pub fn new(name: &str, program: PathBuf) -> ServerSpec {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        ServerSpec {
            name: name.to_string(),
            program,
            args: Vec::new(),
            env: Vec::new(),
            cwd,
            attach: None,
            discard_stdout: false,
            tls_ca: None,
        }
    }
}
