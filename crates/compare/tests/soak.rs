//! `--soak`: a leaking server must be flagged and a sound one must not. The leaky server is a real HTTP server
//! (common's Python hello server) that answers hello-bare exactly like flight-rs but keeps 64 KiB for every
//! request it serves (at 200 req/s about 12 MiB a second, far above the detector's thresholds); rust
//! (flight-rs) is soaked beside it, at the same time and under the same fixed rate. Both go through
//! compare's check first, so the leak is the only difference between them.

mod common;

use compare::records::{self, Kind};
use compare::report::soak::{self, Verdict};

#[test]
fn soak_flags_a_leaking_server_and_not_a_sound_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let leaky = common::hello_server_target(dir.path(), "leaky", &[("KEEP_BYTES", "65536")]);
    let out = dir.path().join("out");
    let (server, loader) = common::cores();
    let run = common::compare_into(&common::bin_dir(), &out)
        .args(["--workloads", "hello-bare", "--runtimes", "rust", "--connections", "4", "--warmup", "1s"])
        .args(["--soak", "12s", "--soak-interval", "1s", "--soak-rate", "200"])
        .args(["--server-cores", &server, "--loader-cores", &loader])
        .args(["--target", &leaky])
        .output()
        .expect("run compare");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");

    let jsonl: Vec<_> = common::jsonl_files(&out);
    assert_eq!(jsonl.len(), 1);
    let v = common::validator();
    for line in std::fs::read_to_string(&jsonl[0]).expect("jsonl").lines() {
        common::assert_valid(&v, &serde_json::from_str(line).expect("JSON line"));
    }
    let recs = records::read_jsonl(&jsonl).expect("records");
    assert!(
        recs.iter().all(|r| matches!(r.kind, Kind::Check | Kind::Soak)),
        "a soak runs checks and soak samples only"
    );
    for rt in ["rust", "leaky"] {
        let samples: Vec<_> = recs.iter().filter(|r| r.runtime == rt && r.kind == Kind::Soak).collect();
        assert_eq!(samples.len(), 12, "{rt}: one sample per second of the soak");
        assert!(samples.iter().all(|r| !r.void), "{rt}: {:?}", samples.iter().find_map(|r| r.void_reason.clone()));
        assert!(samples.windows(2).all(|w| w[0].elapsed_s < w[1].elapsed_s), "{rt}: samples in time order");
        assert!(samples.iter().all(|r| r.rate == Some(200.0) && r.rss_after_kib.is_some() && r.latency_us.is_some()));
    }

    // Side by side: each server's soak began before the other's ended.
    let span = |rt: &str| {
        let at: Vec<&str> =
            recs.iter().filter(|r| r.runtime == rt && r.kind == Kind::Soak).map(|r| r.started_at.as_str()).collect();
        (at.iter().min().copied().unwrap_or_default(), at.iter().max().copied().unwrap_or_default())
    };
    let (rust_span, leaky_span) = (span("rust"), span("leaky"));
    assert!(rust_span.0 < leaky_span.1 && leaky_span.0 < rust_span.1, "not at once: {rust_span:?} {leaky_span:?}");

    let cells = soak::summarize(&recs, "hello-bare");
    let cell = |rt: &str| cells.iter().find(|c| c.runtime == rt).expect("a soak cell");
    let (rust, leaky) = (cell("rust"), cell("leaky"));
    assert_eq!(rust.trend.verdict, Verdict::Flat, "{:?}", rust.trend);
    assert_eq!(leaky.trend.verdict, Verdict::Growing, "{:?}", leaky.trend);
    assert!(leaky.trend.slope_kib_per_h > 100.0 * rust.trend.slope_kib_per_h.abs().max(1.0), "{leaky:?} {rust:?}");

    let md = std::fs::read_to_string(jsonl[0].with_extension("md")).expect("the Markdown");
    assert!(md.contains("## hello-bare: soak"), "{md}");
    assert!(md.contains("| leaky | growing |") && md.contains("| rust | flat |"), "{md}");
    assert!(!md.contains("\n## hello-bare\n"), "no comparison table for a soak:\n{md}");
    let (rss_svg, p99_svg) = soak::svg_paths(&jsonl[0].with_extension("md"), "hello-bare");
    for svg in [rss_svg, p99_svg] {
        let text = std::fs::read_to_string(&svg).unwrap_or_else(|e| panic!("{}: {e}", svg.display()));
        assert!(text.contains("<path d=\"M") && text.contains("leaky") && text.ends_with("</svg>\n"));
    }
}
