//! Shared by compare's integration tests: where the binaries are, a bench on this machine's cores, and the
//! record schema.

#![allow(dead_code)] // each test file uses part of it

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use compare::run::setup::{Bench, Timing};
use compare::system::cores::Cores;
use serde_json::Value;

pub const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas/compare/record.schema.json");

/// The directory cargo built this package's binaries into (target/debug in `cargo test`).
pub fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_compare")).parent().expect("bin dir").to_path_buf()
}

pub fn compare_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_compare"))
}

/// The comparison, run with the binaries in `bin_dir` and its results written to `out_dir`.
pub fn compare_into(bin_dir: &Path, out_dir: &Path) -> Command {
    let mut cmd = Command::new(compare_exe());
    cmd.arg("--bin-dir").arg(bin_dir).arg("--out-dir").arg(out_dir);
    cmd
}

/// loadgen next to compare; a clear failure (never a skip) when it is not built.
pub fn loadgen() -> PathBuf {
    let path = bin_dir().join("loadgen");
    assert!(
        path.is_file(),
        "{} not found: build it with `cargo build -p loadgen` (`cargo test --workspace` builds it)",
        path.display()
    );
    path
}

/// Server on CPU 0, loader on CPU 1 when there is one.
pub fn cores() -> (String, String) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    ("0".into(), if cpus > 1 { "1".into() } else { "0".into() })
}

pub fn bench(logdir: &Path, duration: Duration) -> Bench {
    let (server, loader) = cores();
    let cores = (Cores::parse(&server).expect("cores"), Cores::parse(&loader).expect("cores"));
    let timing = Timing { warmup: Duration::ZERO, duration, request_timeout: Duration::from_secs(5) };
    Bench::new(loadgen(), (&cores.0, &cores.1), timing, logdir.to_path_buf())
}

pub fn validator() -> jsonschema::Validator {
    let raw = std::fs::read_to_string(SCHEMA_PATH).unwrap_or_else(|e| panic!("reading {SCHEMA_PATH}: {e}"));
    let schema: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{SCHEMA_PATH} is not JSON: {e}"));
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{SCHEMA_PATH} is not a valid schema: {e}"))
}

pub fn assert_valid(v: &jsonschema::Validator, instance: &Value) {
    let errors: Vec<String> = v.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "record does not match the schema:\n{}\n{instance}", errors.join("\n"));
}

pub fn meta() -> compare::records::RunMeta {
    let (server, loader) = cores();
    compare::records::RunMeta {
        run_id: "20260101T000000Z-test".into(),
        command: vec!["compare".into(), "--test".into()],
        machine: compare::records::machine_info(),
        layout: compare::records::Layout { server_cores: server, loader_cores: loader.clone(), db_cores: loader },
        provenance: None,
    }
}

/// Every void record of one cell, as `kind round: reason` lines (empty when the cell counted).
pub fn voids(recs: &[compare::records::Record], workload: &str, runtime: &str) -> Vec<String> {
    recs.iter()
        .filter(|r| r.workload == workload && r.runtime == runtime && r.void)
        .map(|r| format!("{} {}: {}", r.kind.as_str(), r.round, r.void_reason.as_deref().unwrap_or("")))
        .collect()
}

/// The files of the one result folder compare wrote into `out_dir` (`<out_dir>/<UTC stamp>/`); fails when
/// anything else is there.
pub fn result_files(out_dir: &Path) -> Vec<PathBuf> {
    let list = |dir: &Path| -> Vec<PathBuf> {
        let mut files: Vec<_> = std::fs::read_dir(dir).expect("out dir").flatten().map(|e| e.path()).collect();
        files.sort();
        files
    };
    let folders = list(out_dir);
    assert!(folders.len() == 1 && folders[0].is_dir(), "one stamped folder in {}: {folders:?}", out_dir.display());
    list(&folders[0])
}

/// The JSONL record files compare wrote into `out_dir`'s result folder.
pub fn jsonl_files(out_dir: &Path) -> Vec<PathBuf> {
    result_files(out_dir).into_iter().filter(|p| p.extension().is_some_and(|x| x == "jsonl")).collect()
}

/// A real HTTP/1.1 server (Python's standard library, keep-alive, a thread per connection) that answers
/// hello-bare exactly as flight-rs does, so it passes compare's check. Two knobs, as environment variables:
/// `KEEP_BYTES` retains that many bytes per request served (a leak), and `SERVICE_MS` serves requests one at
/// a time, each holding a lock for that long, so its capacity is known by construction (1000 / SERVICE_MS
/// req/s).
const HELLO_SERVER: &str = r#"
import http.server, os, socketserver, threading, time

BODY = b'{"message":"Hello from Flight!"}'
KEEP = int(os.environ.get("KEEP_BYTES", "0"))
SERVICE_S = float(os.environ.get("SERVICE_MS", "0")) / 1000.0
kept = []
one_at_a_time = threading.Lock()

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle on, the body waits for the client's delayed ACK
    # (40 ms), which would be the server's capacity, not SERVICE_MS.
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path != "/api/hello":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if KEEP:
            kept.append(b"x" * KEEP)  # the leak: never released
        if SERVICE_S:
            with one_at_a_time:
                time.sleep(SERVICE_S)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

Server(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"#;

/// `--target NAME=cmd:…` for common's Python hello server, its script written into `dir`, `env` its knobs.
pub fn hello_server_target(dir: &Path, name: &str, env: &[(&str, &str)]) -> String {
    let script = dir.join(format!("{name}.py"));
    std::fs::write(&script, HELLO_SERVER).expect("write the Python hello server");
    let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{name}=cmd:exec env {} python3 '{}'", vars.join(" "), script.display())
}
