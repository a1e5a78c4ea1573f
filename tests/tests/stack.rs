//! The compose stack, checked from the host over the ports docker-compose.yml publishes (flight-rs 3000,
//! scribe-rs 1337, metadata-rs 3001): a smoke test of each server, the bench profile's loadgen run end to end,
//! a PostgreSQL outage under a concurrent writer, `compare images` on the images just built, and flight-rs
//! recreated with deploy/compose/tls.yml: HTTPS from a certificate made as deploy/compose/README.md says.
//!
//! scripts/compose-check.sh builds the images, starts the stack and the bench profile, waits for every health
//! check, then runs these tests one by one, by name, in the order its `stack_order` gives (the bench check
//! after the smoke checks: see the comment there). They are ignored by default so that a workspace `cargo test`
//! does not run them against a stack that is not there, and they fail, never skip, when it is not: a missing
//! variable below, or a port nothing listens on, is a failure that says so.
//!
//! What they need to drive the engine comes from the script, through the environment:
//! - `COMPOSE_CHECK_COMPOSE`: the compose command line (`docker-compose --no-ansi`), split on spaces; it runs in
//!   the workspace root with the script's `DOCKER_HOST` and `COMPOSE_PROJECT_NAME`;
//! - `COMPOSE_CHECK_ENGINE`: the engine's CLI (`podman`), for a container's logs and exit code and a volume's
//!   mount point;
//! - `COMPOSE_PROJECT_NAME`: compose's project, which names the containers and volumes;
//! - `COMPOSE_CHECK_COMPARE`: the compare binary that `compare images` runs from.
//!
//! One test at a time (`--test-threads 1`): the outage stops PostgreSQL, which scribe-rs and the bench run
//! need. Each check prints `ok   what` or `FAIL what: why`, as the script's own checks do, and a test fails at
//! its end when any of its checks did, so one broken answer does not hide the others.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::http::{Conn, Response, request_bytes};
use testkit::process::{Guard, wait_for_exit};
use testkit::workspace::root;

const FLIGHT: u16 = 3000;
const SCRIBE: u16 = 1337;
const METADATA: u16 = 3001;

/// A request's whole budget, connect to last byte (the script's curl had `--max-time 10`).
const REQUEST: Duration = Duration::from_secs(10);

// ------------------------------------------------------------------------------------------------------------
// The stack: environment, engine commands, HTTP
// ------------------------------------------------------------------------------------------------------------

const RUN_BY: &str = "these tests check the compose stack that scripts/compose-check.sh starts, and it runs them \
                      (`KEEP_UP=1 bash scripts/compose-check.sh` leaves the stack up; tests/README.md says how to \
                      rerun them against it)";

fn env(name: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| panic!("{name} is not set: {RUN_BY}"))
}

/// How to reach the stack's engine, from the variables the script sets.
struct Stack {
    compose: Vec<String>,
    engine: String,
    project: String,
}

/// What a command printed, and how it ended (`None`: killed at its deadline).
struct Ran {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// The end of what it printed, for a failure message.
    fn tail(&self, lines: usize) -> String {
        let all = format!("{}{}", self.stdout, self.stderr);
        let kept: Vec<&str> = all.lines().filter(|l| !l.trim().is_empty()).collect();
        let how = match self.status {
            Some(s) => s.to_string(),
            None => "killed at its deadline".into(),
        };
        format!("{how}: {}", kept[kept.len().saturating_sub(lines)..].join(" | "))
    }
}

impl Stack {
    fn from_env() -> Stack {
        let compose: Vec<String> = env("COMPOSE_CHECK_COMPOSE").split_whitespace().map(String::from).collect();
        Stack { compose, engine: env("COMPOSE_CHECK_ENGINE"), project: env("COMPOSE_PROJECT_NAME") }
    }

    fn compose(&self, args: &[&str], within: Duration) -> Ran {
        self.compose_with(args, &[], within)
    }

    /// [`Stack::compose`] with `envs` added to its environment (compose interpolates them into the file).
    fn compose_with(&self, args: &[&str], envs: &[(&str, &Path)], within: Duration) -> Ran {
        let mut cmd = Command::new(&self.compose[0]);
        cmd.args(&self.compose[1..]).args(args);
        for (name, value) in envs {
            cmd.env(name, value);
        }
        run(cmd, within)
    }

    fn engine(&self, args: &[&str], within: Duration) -> Ran {
        let mut cmd = Command::new(&self.engine);
        cmd.args(args);
        run(cmd, within)
    }
}

/// Runs `cmd` in the workspace root (compose finds docker-compose.yml there), killing it at `within`. Output
/// goes to files rather than pipes, so a chatty command cannot block on a full pipe while it is waited for.
fn run(mut cmd: Command, within: Duration) -> Ran {
    let what = format!("{cmd:?}");
    let out = tempfile::tempfile().expect("a temp file for stdout");
    let err = tempfile::tempfile().expect("a temp file for stderr");
    cmd.current_dir(root()).stdin(Stdio::null());
    cmd.stdout(out.try_clone().expect("dup stdout file")).stderr(err.try_clone().expect("dup stderr file"));
    let mut child = Guard(cmd.spawn().unwrap_or_else(|e| panic!("{what} does not start: {e} ({RUN_BY})")));
    let status = wait_for_exit(&mut child.0, within);
    drop(child); // kills it when it outlived its deadline
    let read = |mut file: std::fs::File| {
        use std::io::{Read, Seek};
        let mut text = String::new();
        let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
        text
    };
    Ran { status, stdout: read(out), stderr: read(err) }
}

/// One request on a connection of its own, all of it within `within`.
fn call(port: u16, method: &str, target: &str, body: Option<&str>, within: Duration) -> io::Result<Response> {
    let mut conn = Conn::open_within(SocketAddr::from(([127, 0, 0, 1], port)), within)?;
    let headers: &[(&str, &[u8])] = if body.is_some() { &[("Content-Type", b"application/json")] } else { &[] };
    conn.write(&request_bytes(method, target.as_bytes(), headers, body.map(str::as_bytes)))?;
    conn.read_response()
}

/// [`call`] as the checks want it: a port nothing listens on ends the test at once (the stack is not up);
/// any other failure is an answer with status 0 and the error as its body, as curl's `000`, so the check
/// that reads it fails with that text.
fn http(port: u16, method: &str, target: &str, body: Option<&str>) -> Response {
    match call(port, method, target, body, REQUEST) {
        Ok(answer) => answer,
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            panic!("nothing listens on 127.0.0.1:{port} ({method} {target}): the compose stack is not up; {RUN_BY}")
        }
        Err(e) => Response { status: 0, headers: Vec::new(), head: Vec::new(), body: format!("no answer: {e}").into() },
    }
}

/// `status body` for a failure message (the body cut at `max` bytes).
fn shown(r: &Response, max: usize) -> String {
    let text = r.text();
    let cut = text.char_indices().nth(max).map_or(text.as_str(), |(at, _)| &text[..at]);
    format!("{} {cut}", r.status)
}

fn json_of(r: &Response) -> Value {
    serde_json::from_slice(&r.body).unwrap_or(Value::Null)
}

// ------------------------------------------------------------------------------------------------------------
// Checks, reported one line each
// ------------------------------------------------------------------------------------------------------------

#[derive(Default)]
struct Checks {
    failed: Vec<String>,
}

impl Checks {
    /// Prints `ok   what` or `FAIL what: why`; `why` is only worked out for a failure.
    fn check(&mut self, what: &str, ok: bool, why: impl FnOnce() -> String) -> bool {
        if ok {
            println!("ok   {what}");
        } else {
            let why = why();
            println!("FAIL {what}: {why}");
            self.failed.push(format!("{what}: {why}"));
        }
        ok
    }

    fn finish(self) {
        assert!(self.failed.is_empty(), "{} check(s) failed:\n  {}", self.failed.len(), self.failed.join("\n  "));
    }
}

// ------------------------------------------------------------------------------------------------------------
// Smoke of each server
// ------------------------------------------------------------------------------------------------------------

#[test]
#[ignore = "needs the compose stack up: scripts/compose-check.sh runs it"]
fn flight_rs_answers_hello_and_healthz() {
    let mut checks = Checks::default();
    let r = http(FLIGHT, "GET", "/api/hello", None);
    checks.check(
        "flight-rs GET /api/hello",
        r.status == 200 && r.body == br#"{"message":"Hello from Flight!"}"#,
        || shown(&r, 200),
    );
    let r = http(FLIGHT, "GET", "/healthz", None);
    checks
        .check("flight-rs /healthz", r.status == 200 && r.text().contains(r#""profile":"default""#), || shown(&r, 200));
    checks.finish();
}

fn note_body(title: &str) -> String {
    json!({
        "data": {"title": title},
        "date_created": "2026-12-01T00:00:00Z",
        "date_modified": "2026-12-01T00:00:00Z",
        "created_by": 1,
        "modified_by": 1,
    })
    .to_string()
}

/// The id of the note in scribe-rs's answer (`[{"id": …, …}]`), as it goes into a path.
fn note_id(r: &Response) -> Option<String> {
    match &json_of(r)[0]["id"] {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

fn note_title(r: &Response) -> Option<String> {
    json_of(r)[0]["data"]["title"].as_str().map(String::from)
}

#[test]
#[ignore = "needs the compose stack up: scripts/compose-check.sh runs it"]
fn scribe_rs_notes_round_trip() {
    let mut checks = Checks::default();
    let r = http(SCRIBE, "GET", "/healthz", None);
    checks.check(
        "scribe-rs /healthz (postgres and redis ok)",
        r.status == 200 && r.body == br#"{"status":"ok","postgres":"ok","redis":"ok"}"#,
        || shown(&r, 200),
    );
    let r = http(SCRIBE, "POST", "/notes", Some(&note_body("smoke-1")));
    let id = note_id(&r).filter(|_| r.status == 200);
    let Some(id) = id else {
        checks.check("scribe-rs POST /notes", false, || shown(&r, 200));
        return checks.finish();
    };
    checks.check(&format!("scribe-rs POST /notes (id {id})"), true, String::new);
    let r = http(SCRIBE, "GET", &format!("/notes/{id}"), None);
    checks.check(
        &format!("scribe-rs GET /notes/{id}"),
        r.status == 200 && note_title(&r).as_deref() == Some("smoke-1"),
        || shown(&r, 200),
    );
    let r = http(SCRIBE, "PUT", &format!("/notes/{id}"), Some(&note_body("smoke-2")));
    checks.check(
        &format!("scribe-rs PUT /notes/{id}"),
        r.status == 200 && note_title(&r).as_deref() == Some("smoke-2"),
        || shown(&r, 200),
    );
    let r = http(SCRIBE, "GET", &format!("/notes/{id}/history"), None);
    let titles: Vec<String> = json_of(&r)
        .as_array()
        .map(|versions| versions.iter().map(|v| v["data"]["title"].as_str().unwrap_or("?").to_string()).collect())
        .unwrap_or_default();
    checks.check(
        &format!("scribe-rs GET /notes/{id}/history (current, then the older version)"),
        r.status == 200 && titles == ["smoke-2", "smoke-1"],
        || shown(&r, 300),
    );
    checks.finish();
}

#[test]
#[ignore = "needs the compose stack up: scripts/compose-check.sh runs it"]
fn metadata_rs_serves_the_seeded_dataset() {
    let stack = Stack::from_env();
    let mut checks = Checks::default();
    let volume = format!("{}_metadata-data", stack.project);
    let inspect = stack.engine(&["volume", "inspect", "--format", "{{.Mountpoint}}", &volume], Duration::from_secs(30));
    assert!(inspect.ok(), "{} volume inspect {volume}: {}", stack.engine, inspect.tail(3));
    let ids = Path::new(inspect.stdout.trim()).join("sample_ids.txt");
    let id = std::fs::read_to_string(&ids).ok().and_then(|text| text.lines().next().map(str::to_string));
    let Some(id) = id.filter(|id| !id.trim().is_empty()) else {
        checks.check("metadata-seed sample ids", false, || format!("no {} in the metadata-data volume", ids.display()));
        return checks.finish();
    };
    checks.check("metadata-seed wrote the dataset and its sample ids", true, String::new);
    let r = http(METADATA, "GET", &format!("/v1/metadata/{id}?region=ja"), None);
    checks.check(
        &format!("metadata-rs GET /v1/metadata/{id}"),
        r.status == 200 && json_of(&r)["id"] == id.as_str(),
        || shown(&r, 200),
    );
    let r = http(METADATA, "GET", "/v1/metadata/nope", None);
    checks.check("metadata-rs unknown id: 404", r.status == 404, || format!("{} (want 404)", r.status));
    let r = http(METADATA, "GET", "/healthz", None);
    checks.check("metadata-rs /healthz", r.status == 200, || shown(&r, 200));
    checks.finish();
}

// ------------------------------------------------------------------------------------------------------------
// The bench profile, end to end
// ------------------------------------------------------------------------------------------------------------

/// A row of bench.sh's summary with every run ok: `workload server req/s … N/N ok` (a failed run ends the
/// row in `FAILED`).
fn ok_row(line: &str) -> Option<(&str, &str)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [workload, server, rate, ..] = fields[..] else { return None };
    let known_workload = ["hello", "notes", "metadata"].iter().any(|w| workload.starts_with(w))
        && workload.chars().all(|c| c.is_ascii_lowercase() || c == '-');
    let numeric = !rate.is_empty() && rate.chars().all(|c| c.is_ascii_digit() || c == '.');
    (known_workload
        && ["rust", "bun", "node"].contains(&server)
        && numeric
        && fields.len() >= 5
        && line.ends_with(" ok"))
    .then_some((workload, server))
}

/// The script has the bench profile's servers up and healthy; loadgen runs alone, detached, then is waited
/// for: deploy/podman/check.override.yml says why not `run` (and shortens the run); attached `up` breaks in
/// docker-compose 1.29's log printer against podman's API.
#[test]
#[ignore = "needs the compose stack up: scripts/compose-check.sh runs it"]
fn bench_profile_loadgen_loads_every_server() {
    let stack = Stack::from_env();
    let mut checks = Checks::default();
    // --force-recreate: a loadgen container left by an earlier run (KEEP_UP) would keep its old output.
    let up = stack.compose(
        &[
            "-f",
            "docker-compose.yml",
            "-f",
            "deploy/podman/check.override.yml",
            "--profile",
            "bench",
            "up",
            "-d",
            "--no-deps",
            "--force-recreate",
            "loadgen",
        ],
        Duration::from_secs(120),
    );
    assert!(up.ok(), "bench profile: loadgen up -d: {}", up.tail(3));
    let container = format!("{}_loadgen_1", stack.project);
    let waited = stack.engine(&["wait", &container], Duration::from_secs(300));
    let code = waited.stdout.lines().last().unwrap_or("").trim().to_string();
    let logs = stack.engine(&["logs", &container], Duration::from_secs(30));
    let out = format!("{}{}", logs.stdout, logs.stderr);
    // The whole table (and, after a failure, every line that names one) goes to the log: the reports volume is
    // gone after `down -v`.
    if let Some(at) = out.find("\nworkload ") {
        print!("{}", &out[at + 1..]);
    }
    if code != "0" {
        let named = ["fail", "error", "timeout", "void", "mismatch"];
        for line in out.lines().filter(|l| named.iter().any(|n| l.to_ascii_lowercase().contains(n))).take(20) {
            println!("{line}");
        }
        checks.check("bench profile: loadgen", false, || {
            let why = if code.is_empty() { waited.tail(2) } else { format!("exit {code}") };
            let last: Vec<&str> = out.lines().rev().take(5).collect();
            format!("{why}: {}", last.into_iter().rev().collect::<Vec<_>>().join(" | "))
        });
        return checks.finish();
    }
    let mut rows: Vec<(&str, &str)> = out.lines().filter_map(ok_row).collect();
    rows.sort_unstable();
    rows.dedup();
    checks.check("bench profile: loadgen loaded all 10 servers without an error", rows.len() >= 10, || {
        let last: Vec<&str> = out.lines().rev().take(12).collect();
        format!("{} of 10 rows ok: {}", rows.len(), last.into_iter().rev().collect::<Vec<_>>().join(" | "))
    });
    checks.finish();
}

// ------------------------------------------------------------------------------------------------------------
// PostgreSQL goes away under writes and comes back
// ------------------------------------------------------------------------------------------------------------

/// One note at a time, for as long as it runs: every write scribe-rs acknowledged (200), with its title.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<(String, String)>>>,
    /// 200 answers without a note id in them: acknowledged, but nothing to read back.
    odd: Arc<Mutex<Vec<String>>>,
    thread: Option<JoinHandle<u32>>,
}

impl Writer {
    fn start() -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let odd = Arc::new(Mutex::new(Vec::new()));
        let (s, a, o) = (Arc::clone(&stop), Arc::clone(&acked), Arc::clone(&odd));
        let thread = std::thread::spawn(move || {
            let mut sent = 0;
            while !s.load(Ordering::Relaxed) {
                sent += 1;
                let title = format!("outage-{sent}");
                match call(SCRIBE, "POST", "/notes", Some(&note_body(&title)), Duration::from_secs(5)) {
                    Ok(r) if r.status == 200 => match note_id(&r) {
                        Some(id) => a.lock().expect("acked list").push((id, title)),
                        None => o.lock().expect("odd list").push(shown(&r, 200)),
                    },
                    // Refused writes (503 while PostgreSQL is away) are what the outage should give.
                    _ => {}
                }
                // About the pace of the script's curl loop: a write in flight all the time, without flooding
                // 2 cores with 503s while PostgreSQL is away.
                std::thread::sleep(Duration::from_millis(10));
            }
            sent
        });
        Writer { stop, acked, odd, thread: Some(thread) }
    }

    /// Stops it: how many writes it sent.
    fn stop(&mut self) -> u32 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().map_or(0, |t| t.join().unwrap_or(0))
    }
}

impl Drop for Writer {
    /// A failed check mid-outage still ends the writer, rather than leaving it posting to the stack.
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts PostgreSQL again if the test ends (a failed check) while it is stopped, so the stack a KEEP_UP run
/// leaves is whole.
struct PostgresStopped<'a>(&'a Stack, bool);

impl PostgresStopped<'_> {
    fn start(&mut self) -> Ran {
        self.1 = false;
        self.0.compose(&["start", "postgres"], Duration::from_secs(120))
    }
}

impl Drop for PostgresStopped<'_> {
    fn drop(&mut self) {
        if self.1 {
            let _ = self.start();
        }
    }
}

/// While PostgreSQL is away scribe-rs answers 503 with Retry-After and /healthz names postgres; afterwards,
/// every write it acknowledged reads back with what was written.
#[test]
#[ignore = "needs the compose stack up: scripts/compose-check.sh runs it"]
fn postgres_outage_loses_no_acknowledged_write() {
    let stack = Stack::from_env();
    let mut checks = Checks::default();
    // Fails now, while nothing is stopped, if the stack is not up.
    let before = http(SCRIBE, "GET", "/healthz", None);
    assert_eq!(before.status, 200, "scribe-rs /healthz before the outage: {}", shown(&before, 200));
    let mut writer = Writer::start();
    std::thread::sleep(Duration::from_secs(1));
    let stop = stack.compose(&["stop", "postgres"], Duration::from_secs(120));
    let mut postgres = PostgresStopped(&stack, true);
    assert!(stop.ok(), "compose stop postgres: {}", stop.tail(3));

    let r = http(SCRIBE, "GET", "/notes/1", None);
    let retry_after = r.header("retry-after").unwrap_or("").to_string();
    checks.check(
        &format!("postgres stopped: scribe-rs GET /notes/1 is 503 with Retry-After: {retry_after}"),
        r.status == 503 && !retry_after.is_empty(),
        || format!("{} retry-after={retry_after} (want 503 with Retry-After)", r.status),
    );
    let r = http(SCRIBE, "POST", "/notes", Some(&note_body("during-outage")));
    checks.check("postgres stopped: a write is refused with 503, not acknowledged", r.status == 503, || {
        format!("{} (want 503)", shown(&r, 200))
    });
    let r = http(SCRIBE, "GET", "/healthz", None);
    checks.check(
        "postgres stopped: /healthz is 503 naming postgres",
        r.status == 503 && json_of(&r)["postgres"] == "unavailable",
        || shown(&r, 200),
    );

    let start = postgres.start();
    assert!(start.ok(), "compose start postgres: {}", start.tail(3));
    let deadline = Instant::now() + Duration::from_secs(90);
    while http(SCRIBE, "GET", "/healthz", None).status != 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    // Writes after the recovery count too: they must not be lost either.
    std::thread::sleep(Duration::from_secs(1));
    let sent = writer.stop();
    let r = http(SCRIBE, "GET", "/healthz", None);
    checks
        .check("postgres started again: /healthz is 200", r.status == 200, || format!("{} after 90 s", shown(&r, 200)));

    let acked = std::mem::take(&mut *writer.acked.lock().expect("acked list"));
    let odd = std::mem::take(&mut *writer.odd.lock().expect("odd list"));
    checks.check("outage: every acknowledged write named its note", odd.is_empty(), || {
        format!("{} answers of 200 without an id, first: {}", odd.len(), odd[0])
    });
    let lost: Vec<String> = acked
        .iter()
        .filter_map(|(id, title)| {
            let r = http(SCRIBE, "GET", &format!("/notes/{id}"), None);
            (note_title(&r).as_deref() != Some(title.as_str())).then(|| format!("{id} ({title}): {}", shown(&r, 120)))
        })
        .collect();
    checks.check(
        &format!("outage: all {} acknowledged writes read back ({sent} sent)", acked.len()),
        !acked.is_empty() && lost.is_empty(),
        || {
            format!(
                "{} of {} not read back: {}",
                lost.len(),
                acked.len(),
                lost.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
            )
        },
    );
    let r = http(SCRIBE, "POST", "/notes", Some(&note_body("after-outage")));
    checks.check("postgres started again: writes are acknowledged", r.status == 200, || shown(&r, 200));
    checks.finish();
}

// ------------------------------------------------------------------------------------------------------------
// compare images
// ------------------------------------------------------------------------------------------------------------

/// `compare images` against the images the script just built, read from the JSON it writes: every image has a
/// size, and each server image started once and answered.
#[test]
#[ignore = "needs the compose stack up: scripts/compose-check.sh runs it"]
fn compare_images_measures_every_image() {
    let stack = Stack::from_env();
    let compare = env("COMPOSE_CHECK_COMPARE");
    assert!(Path::new(&compare).is_file(), "COMPOSE_CHECK_COMPARE={compare}: no such file (cargo build -p compare)");
    let out_dir = tempfile::tempdir().expect("a temp dir for compare's records");
    let out_arg = out_dir.path().to_str().expect("a UTF-8 temp dir").to_string();
    let mut cmd = Command::new(&compare);
    cmd.args(["images", "--docker", &stack.engine, "--runs", "1", "--out-dir", &out_arg]);
    let ran = run(cmd, Duration::from_secs(300));
    assert!(ran.ok(), "{compare} images: {}", ran.tail(8));

    // compare writes each result into a folder of its own, `<out-dir>/<UTC stamp>/`.
    let records: Vec<_> = std::fs::read_dir(out_dir.path())
        .expect("compare's out dir")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .flat_map(|folder| std::fs::read_dir(folder).into_iter().flatten().filter_map(|e| e.ok().map(|e| e.path())))
        .filter(|p| p.to_string_lossy().ends_with("-images.json"))
        .collect();
    assert_eq!(records.len(), 1, "compare images wrote {records:?} into {out_arg}, not one *-images.json");
    let text = std::fs::read_to_string(&records[0]).expect("compare's JSON record");
    let report: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", records[0].display()));
    let engine =
        report["engine"]["Ok"].as_str().unwrap_or_else(|| panic!("compare images had no engine: {}", report["engine"]));
    println!("compare images with {compare}, engine {engine}");

    let mut checks = Checks::default();
    let results = report["results"].as_array().cloned().unwrap_or_default();
    for name in ["flight-rs", "scribe-rs", "metadata-rs", "loadgen", "peers"] {
        let Some(r) = results.iter().find(|r| r["spec"]["name"] == name) else {
            checks.check(&format!("compare images: {name}"), false, || "not in the report".into());
            continue;
        };
        let server = !r["spec"]["port"].is_null();
        let size = r["size_bytes"].as_u64();
        let starts: Vec<f64> =
            r["start_ms"].as_array().map(|s| s.iter().filter_map(Value::as_f64).collect()).unwrap_or_default();
        let errors = r["errors"].as_array().map_or(0, Vec::len);
        let base = if r["standin"].is_string() { "stand-in" } else { "official" };
        let mib = size.map_or("no".into(), |b| format!("{:.1}", b as f64 / (1024.0 * 1024.0)));
        let started = if server { format!(", started in {starts:.0?} ms") } else { String::new() };
        checks.check(
            &format!("compare images: {name} {mib} MiB ({base} base){started}"),
            size.is_some() && errors == 0 && (!server || starts.len() == 1),
            || format!("size {size:?}, {} start(s) (want {}), errors {}", starts.len(), u8::from(server), r["errors"]),
        );
    }
    checks.finish();
}

// ------------------------------------------------------------------------------------------------------------
// HTTPS: flight-rs with deploy/compose/tls.yml
// ------------------------------------------------------------------------------------------------------------

/// Runs openssl in `dir`, failing the test with what it printed when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("openssl does not start: {e} (scripts/install-test-deps.sh installs it)"));
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "openssl {args:?}: {printed}");
}

/// deploy/compose/README.md#https's recipe, command for command: a CA (ca.pem, ca.key) and the servers' key and
/// certificate signed by it (key.pem, cert.pem), ECDSA P-256, for localhost, 127.0.0.1, ::1 and the three
/// service names; then the key made readable by the containers' group (gid 65532) and no one else. The chgrp
/// needs root, as the README's `sudo` says (this script's engine is root's podman).
fn make_certificate(dir: &Path) {
    let words = |line: &str| -> Vec<String> { line.split_whitespace().map(String::from).collect() };
    let run = |args: Vec<String>| openssl(dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let p256 = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    let mut ca = words(&format!("req -x509 {p256} -days 365 -keyout ca.key -out ca.pem -subj"));
    ca.push("/CN=rust-baselines local CA".into());
    run(ca);
    run(words(&format!("req -new {p256} -subj /CN=localhost -keyout key.pem -out server.csr")));
    let extensions = [
        "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1,DNS:flight-rs,DNS:scribe-rs,DNS:metadata-rs",
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature",
        "extendedKeyUsage=serverAuth",
    ];
    std::fs::write(dir.join("server.ext"), extensions.join("\n") + "\n").expect("write server.ext");
    run(words("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -days 90 -extfile server.ext -out cert.pem"));
    let key = dir.join("key.pem");
    std::os::unix::fs::chown(&key, None, Some(65532))
        .unwrap_or_else(|e| panic!("chgrp 65532 {}: {e} (needs root)", key.display()));
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o640)).expect("chmod 0640 key.pem");
}

/// One GET over TLS to flight-rs's published port: the protocol version and ALPN protocol the handshake
/// settled on, and the answer.
fn https_get(client: &testkit::tls::Client, target: &str) -> io::Result<(String, String, Response)> {
    let mut conn = Conn::open_tls(SocketAddr::from(([127, 0, 0, 1], FLIGHT)), client)?;
    let tls = conn.tls().expect("a TLS connection");
    let version = tls.protocol_version().map_or("none".to_string(), |v| format!("{v:?}"));
    let alpn = tls.alpn_protocol().map_or("none".to_string(), |p| String::from_utf8_lossy(p).into_owned());
    conn.write(&request_bytes("GET", target.as_bytes(), &[], None))?;
    Ok((version, alpn, conn.read_response()?))
}

/// Recreates flight-rs as docker-compose.yml has it (plain HTTP, health-checked) when the test ends, however
/// it ends, so the stack a KEEP_UP run leaves is the documented one.
struct PlainFlight<'a>(&'a Stack, bool);

impl PlainFlight<'_> {
    fn restore(&mut self) -> Ran {
        self.1 = false;
        self.0.compose(&["up", "-d", "--no-deps", "--force-recreate", "flight-rs"], Duration::from_secs(120))
    }
}

impl Drop for PlainFlight<'_> {
    fn drop(&mut self) {
        if self.1 {
            let _ = self.restore();
        }
    }
}

/// Waits until `service`'s container is running and its health check says healthy, as compose-check.sh's
/// `wait_healthy` waits for the whole stack (deploy/podman/healthcheck-ticker.sh runs the checks): Ok with the
/// check's command as the engine has it, or Err naming the state it stayed in, its checks' last output and
/// its last log lines.
fn wait_healthy(stack: &Stack, service: &str, within: Duration) -> Result<String, String> {
    let container = format!("{}_{service}_1", stack.project);
    let state_format = "{{.State.Status}} {{if .Config.Healthcheck}}{{.State.Health.Status}}{{else}}-{{end}}";
    let deadline = Instant::now() + within;
    let state = loop {
        let state = stack.engine(&["inspect", "--format", state_format, &container], REQUEST).stdout.trim().to_string();
        if state == "running healthy" {
            let test = stack.engine(&["inspect", "--format", "{{json .Config.Healthcheck.Test}}", &container], REQUEST);
            return Ok(test.stdout.trim().to_string());
        }
        if Instant::now() >= deadline {
            break state;
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    let checks =
        stack.engine(&["inspect", "--format", "{{range .State.Health.Log}}{{.Output}}{{end}}", &container], REQUEST);
    let logs = stack.engine(&["logs", "--tail", "5", &container], REQUEST);
    let said: Vec<&str> = checks.stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    Err(format!(
        "{container} is {state:?}, not \"running healthy\", after {} s; its last checks said: {}; its log: {}",
        within.as_secs(),
        said[said.len().saturating_sub(2)..].join(" | "),
        logs.tail(5)
    ))
}

/// flight-rs recreated with deploy/compose/tls.yml as shipped and a certificate made by the README's recipe
/// becomes healthy (its health check is `probe https://127.0.0.1:3000/healthz --insecure`), answers over
/// TLS 1.3 and 1.2 with ALPN http/1.1, verified against the recipe's CA under the name localhost, and plain
/// HTTP on its port gets no HTTP answer; then it is recreated without the override and is healthy again.
#[test]
#[ignore = "needs the compose stack up: scripts/compose-check.sh runs it"]
fn flight_rs_serves_https_with_the_tls_override() {
    let stack = Stack::from_env();
    let mut checks = Checks::default();
    // Declared before the guard, so the files outlive the container that mounts them.
    let dir = tempfile::tempdir().expect("a temp dir for the certificate");
    make_certificate(dir.path());
    let ca = std::fs::read_to_string(dir.path().join("ca.pem")).expect("ca.pem");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let envs = [("TLS_CERT_FILE", cert.as_path()), ("TLS_KEY_FILE", key.as_path())];

    let mut plain = PlainFlight(&stack, true);
    let up = stack.compose_with(
        &[
            "-f",
            "docker-compose.yml",
            "-f",
            "deploy/compose/tls.yml",
            "up",
            "-d",
            "--no-deps",
            "--force-recreate",
            "flight-rs",
        ],
        &envs,
        Duration::from_secs(120),
    );
    assert!(up.ok(), "flight-rs up -d with deploy/compose/tls.yml: {}", up.tail(3));

    // Healthy by its own health check, which must be the HTTPS one: the plain-HTTP check cannot pass here.
    let healthy = wait_healthy(&stack, "flight-rs", Duration::from_secs(90));
    checks.check(
        "flight-rs with tls.yml: healthy, checked by probe https://127.0.0.1:3000/healthz --insecure",
        healthy
            .as_ref()
            .is_ok_and(|test| test.contains("https://127.0.0.1:3000/healthz") && test.contains("--insecure")),
        || match &healthy {
            Ok(test) => format!("healthy, but its health check is {test}"),
            Err(why) => why.clone(),
        },
    );
    if healthy.is_err() {
        return checks.finish();
    }

    let client = testkit::tls::Client::new(&ca);
    let tls13 = https_get(&client, "/healthz");
    checks.check(
        &format!("flight-rs with tls.yml: https://localhost:{FLIGHT}/healthz 200 over TLS 1.3, ALPN http/1.1"),
        tls13.as_ref().is_ok_and(|(v, a, r)| {
            r.status == 200 && r.text().contains(r#""profile":"default""#) && v == "TLSv1_3" && a == "http/1.1"
        }),
        || match &tls13 {
            Ok((v, a, r)) => format!("{} over {v}, ALPN {a} (want 200 over TLSv1_3, ALPN http/1.1)", shown(r, 200)),
            Err(e) => e.to_string(),
        },
    );
    let tls12 = https_get(&testkit::tls::Client::tls12(&ca), "/api/hello");
    checks.check(
        "flight-rs with tls.yml: GET /api/hello over TLS 1.2 too",
        tls12.as_ref().is_ok_and(|(v, a, r)| v == "TLSv1_2" && a == "http/1.1" && r.status == 200),
        || match &tls12 {
            Ok((v, a, r)) => format!("{} over {v}, ALPN {a}", shown(r, 200)),
            Err(e) => e.to_string(),
        },
    );

    // HTTP/2 by ALPN (#46): the same answer as over HTTP/1.1.
    let addr = SocketAddr::from(([127, 0, 0, 1], FLIGHT));
    let h2 = testkit::h2::send_tls(addr, &client, &[testkit::h2::Req::get("/api/hello")]);
    checks.check(
        "flight-rs with tls.yml: GET /api/hello over HTTP/2 (ALPN h2), the same answer as over HTTP/1.1",
        h2.as_ref().is_ok_and(|exchange| {
            let over_h1 = tls12.as_ref().map(|(_, _, r)| r.body.clone()).unwrap_or_default();
            exchange.alpn.as_deref() == Some(&b"h2"[..])
                && exchange.responses.first().is_some_and(|r| r.status == 200 && r.body == over_h1)
        }),
        || match &h2 {
            Ok(exchange) => {
                format!("ALPN {:?}, {:?}", exchange.alpn, exchange.responses.first().map(|r| shown(r, 200)))
            }
            Err(e) => e.to_string(),
        },
    );

    // Plain HTTP to the HTTPS port: no HTTP answer, and the connection is closed.
    let plain_http = Conn::open(SocketAddr::from(([127, 0, 0, 1], FLIGHT))).and_then(|mut conn| {
        conn.write(&request_bytes("GET", b"/healthz", &[], None))?;
        conn.set_timeout(Duration::from_secs(5));
        let bytes = conn.read_until_close();
        Ok((bytes, conn.drain_until_closed(Duration::from_millis(100)).is_some()))
    });
    checks.check(
        "flight-rs with tls.yml: plain HTTP to its port gets no HTTP answer and is closed",
        plain_http.as_ref().is_ok_and(|(bytes, closed)| *closed && !bytes.starts_with(b"HTTP/")),
        || match &plain_http {
            Ok((bytes, closed)) => {
                let start = String::from_utf8_lossy(&bytes[..bytes.len().min(60)]);
                format!("{} bytes back ({start:?}), closed: {closed}", bytes.len())
            }
            Err(e) => e.to_string(),
        },
    );

    let restored = plain.restore();
    assert!(restored.ok(), "flight-rs up -d without the override: {}", restored.tail(3));
    let healthy = wait_healthy(&stack, "flight-rs", Duration::from_secs(90));
    checks.check(
        "flight-rs recreated without tls.yml: healthy again, checked over plain HTTP",
        healthy.as_ref().is_ok_and(|test| test.contains("http://127.0.0.1:3000/healthz")),
        || match &healthy {
            Ok(test) => format!("healthy, but its health check is {test}"),
            Err(why) => why.clone(),
        },
    );
    let r = http(FLIGHT, "GET", "/healthz", None);
    checks.check("flight-rs recreated without tls.yml: plain HTTP /healthz 200 again", r.status == 200, || {
        shown(&r, 200)
    });
    let h2c = testkit::h2::send(SocketAddr::from(([127, 0, 0, 1], FLIGHT)), &[testkit::h2::Req::get("/healthz")]);
    checks.check(
        "flight-rs without tls.yml: /healthz 200 over h2c (prior knowledge) on the same port",
        h2c.as_ref().is_ok_and(|exchange| exchange.responses.first().is_some_and(|r| r.status == 200)),
        || match &h2c {
            Ok(exchange) => format!("{:?}", exchange.responses.first().map(|r| shown(r, 200))),
            Err(e) => e.to_string(),
        },
    );
    checks.finish();
}
