//! `loadgen capacity` against a server whose capacity is known by construction: it answers one request per
//! service time, in arrival order, on a virtual clock (each answer is due one service time after the later of
//! its arrival and the previous answer's due time), so it serves exactly 1/service requests per second in the
//! long run whatever the connections, and a late wake-up of one answer does not slow the next. Under a
//! uniform schedule below that rate nothing queues; above it the queue grows until every connection waits.
//! The search must land below that rate and close to it, and its JSON must match the schema.

mod common;

use std::time::Duration;

use common::*;
use loadgen::capacity::search;
use loadgen::cli::CapacityArgs;
use serde_json::Value;

const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas/loadgen/capacity.schema.json");
/// The server's service time: at most 1000 responses per second.
const SERVICE: Duration = Duration::from_millis(1);

fn capacity_args(list: &[&str]) -> CapacityArgs {
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        capacity: CapacityArgs,
    }
    let argv = std::iter::once("capacity").chain(list.iter().copied());
    <Wrap as clap::Parser>::try_parse_from(argv).unwrap_or_else(|e| panic!("{list:?}: {e}")).capacity
}

/// One answer per `SERVICE`, in arrival order, on a virtual clock (`Server::serial`).
fn serial_server() -> Server {
    Server::serial(SERVICE)
}

#[test]
fn the_search_lands_below_a_known_capacity_and_close_to_it() {
    let server = serial_server();
    let url = server.url("/");
    let args = capacity_args(&[
        "--p99",
        "20ms",
        "--start",
        "100",
        "-d",
        "1s",
        "--warmup",
        "300ms",
        "-c",
        "32",
        "--timeout",
        "1s",
        &url,
    ]);
    let mut out = Vec::new();
    let settings = args.settings().unwrap_or_else(|e| panic!("{e}"));
    let found = search(&settings, vec!["loadgen".into(), "capacity".into()], &mut out).expect("search");
    let text = String::from_utf8_lossy(&out);
    let ceiling = 1.0 / SERVICE.as_secs_f64();
    let rps = found.capacity_rps.unwrap_or_else(|| panic!("no capacity found:\n{text}"));
    assert!(!found.loader_bound, "loader-bound against a 1000 req/s server:\n{text}");
    assert!(
        rps <= ceiling && rps >= ceiling * 0.7,
        "capacity {rps} for a server that serves at most {ceiling}:\n{text}"
    );
    // Doubling from 100 then bisecting: the bracket closed to 5%.
    let decided = found.steps.iter().filter(|s| !s.retried);
    let fail = decided.filter(|s| s.verdict == "fail").map(|s| s.rate).fold(f64::INFINITY, f64::min);
    assert!(fail > rps && (fail - rps) / rps <= 0.05 + 1e-9, "bracket {rps}..{fail}:\n{text}");
    assert_eq!(found.steps.len(), text.lines().count(), "one line per step:\n{text}");
    assert!(found.steps.iter().all(|s| (s.verdict == "pass") == s.why.is_empty()), "{:?}", found.steps);
    // Every failure was tried twice (--retries 1): a retried step is followed by the same rate.
    for pair in found.steps.windows(2).filter(|w| w[0].retried) {
        assert!(pair[0].verdict == "fail" && pair[1].rate == pair[0].rate, "{pair:?}");
    }
    assert!(found.summary().starts_with(&format!("capacity: {rps:.0} req/s at p99 20.00ms (")), "{}", found.summary());
    // What the server did at that rate: responses per second, close to the rate asked and never above the
    // server's ceiling (beyond a second's edge effects).
    let achieved = found.achieved_rps().unwrap_or_else(|| panic!("no achieved rate:\n{text}"));
    assert!(achieved >= rps * 0.95 && achieved <= ceiling * 1.02, "achieved {achieved} at {rps}:\n{text}");
    assert_eq!(found.engine, expected_engine(&args.run));

    let raw = std::fs::read_to_string(SCHEMA_PATH).expect("schema");
    let schema: Value = serde_json::from_str(&raw).expect("schema is JSON");
    let validator = jsonschema::draft202012::new(&schema).expect("valid schema");
    let instance = serde_json::to_value(&found).expect("serialize");
    let errors: Vec<String> =
        validator.iter_errors(&instance).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "the result does not match the schema:\n{}", errors.join("\n"));
}

/// Far above a server's capacity every connection is busy and the sends that come due can only wait: the
/// loader must not wake for each of them (at 200k req/s asked, one every 5 µs), or it burns its core on the
/// server's behalf and a capacity search calls the step loader-bound instead of failed. Nearly all of them
/// are still waiting at the end.
#[test]
fn an_overloaded_server_is_its_own_limit_not_the_loaders() {
    let server = serial_server();
    let url = server.url("/");
    let ran = run(&["-R", "200000", "-c", "8", "-t", "1", "-d", "1s", "--warmup", "200ms", "--timeout", "5s", &url]);
    let report = ran.report;
    let open = report.open_loop.as_ref().expect("open-loop figures");
    assert!(open.missed_sends > 100_000, "the schedule ran far ahead of the server: {open:?}");
    assert!(report.latency.p50_us > 100_000, "those still waiting count their waits: {:?}", report.latency);
    assert!(report.responses < 2_000, "the server serves at most 1000 req/s: {}", report.responses);
    let busy: Vec<f64> = report.cpu.threads.iter().map(|t| t.busy_pct).collect();
    assert!(!report.cpu.saturated, "the loader called itself saturated waiting on a slow server: {busy:?}");
}

#[test]
fn the_binary_prints_the_summary_last_and_writes_the_json() {
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("capacity.json");
    let exit = loadgen_bin(&[
        "capacity",
        "--p99",
        "1s",
        "--start",
        "100",
        "--max",
        "200",
        // 1 s steps: a 30 ms stall of the machine costs 3% of a step's requests, under the 5% a step may miss.
        "-d",
        "1s",
        "--warmup",
        "100ms",
        "-c",
        "4",
        "--json",
        json.to_str().expect("utf-8 path"),
        &server.url("/"),
    ]);
    assert_eq!(exit.code, Some(0), "{exit:?}");
    let last = exit.stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("capacity: at least 200 req/s at p99 1.00s (") && last.ends_with(" achieved; --max)"),
        "{}",
        exit.stdout
    );
    let found: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json parses");
    assert_eq!(found["capacity_rps"].as_f64(), Some(200.0));
    assert_eq!(found["reached_max"], Value::Bool(true));
    assert_eq!((found["step_s"].as_f64(), found["warmup_s"].as_f64()), (Some(1.0), Some(0.1)));
    assert_eq!(found["steps"].as_array().map(Vec::len), Some(2), "100 then 200: {found}");
}

#[test]
fn capacity_refuses_what_it_cannot_search() {
    let server = Server::routes();
    let url = server.url("/");
    for (args, says) in [
        (vec!["capacity", &url], "needs an objective"),
        (vec!["capacity", "--p99", "5ms", "-R", "100", &url], "leave out -R"),
        (vec!["capacity", "--p99", "5ms", "--start", "0", &url], "--start"),
        (vec!["capacity", "--p99", "5ms", "--max", "10", &url], "--max"),
        (vec!["capacity", "--p99", "soon", &url], "invalid duration"),
    ] {
        let exit = loadgen_bin(&args);
        exit.assert_bad_input(&format!("{args:?}"));
        assert!(exit.stderr.contains(says), "{args:?}: {:?} lacks {says:?}", exit.stderr);
    }
    assert_eq!(server.requests(), 0, "nothing was sent");
}
