//! The `frameworks` group end to end on the debug builds: Fastify and Express on Node and Bun, Koa and the real
//! Flight on Bun, the compiled Bun peers and PHP, each on the workloads it serves beside rust, with real
//! PostgreSQL, Redis, php-fpm and nginx. Every cell must pass its check (its answers are rust's) and count; each
//! record names what ran (framework and engine versions, the compiled executables' inputs), and the report says
//! what each stack runs per request. No figure is asserted.

mod common;

use compare::plan::runtimes::{FRAMEWORKS, Runtime};
use compare::plan::workloads::Workload;
use compare::records::{self, Kind};

const WORKLOADS: [Workload; 5] = [
    Workload::HelloBare,
    Workload::HelloDefault,
    Workload::LadderValidate,
    Workload::LadderPostgres,
    Workload::Metadata,
];

#[test]
fn every_framework_runtime_passes_its_checks_and_counts_on_what_it_serves() {
    let bin_dir = common::bin_dir();
    for bin in ["flight-rs", "ladder-rs", "metadata-rs", "loadgen"] {
        assert!(bin_dir.join(bin).is_file(), "{bin} not built in {}: `cargo build --workspace`", bin_dir.display());
    }
    let out = tempfile::tempdir().expect("temp dir");
    let (server, loader) = common::cores();
    let workloads: Vec<&str> = WORKLOADS.iter().map(|w| w.name()).collect();
    let run = common::compare_into(&bin_dir, out.path())
        .args(["--workloads", &workloads.join(","), "--runtimes", "rust,frameworks"])
        .args(["--quick", "--duration", "1s", "--warmup", "500ms", "--startup-runs", "1", "--connections", "32"])
        .args(["--server-cores", &server, "--loader-cores", &loader, "--db-cores", &loader])
        .output()
        .expect("run compare");
    let stderr = String::from_utf8_lossy(&run.stderr);
    // Missing peers, php-fpm or nginx: compare's own message names the install step.
    assert!(run.status.success(), "compare failed ({}):\n{stderr}", run.status);

    let jsonl = common::jsonl_files(out.path());
    assert_eq!(jsonl.len(), 1, "{jsonl:?}");
    let v = common::validator();
    for line in std::fs::read_to_string(&jsonl[0]).expect("jsonl").lines() {
        common::assert_valid(&v, &serde_json::from_str(line).expect("JSON line"));
    }
    let recs = records::read_jsonl(&jsonl).expect("records");
    let md = std::fs::read_to_string(jsonl[0].with_extension("md")).expect("markdown");
    for w in WORKLOADS {
        for rt in FRAMEWORKS.into_iter().filter(|rt| rt.serves(w)) {
            let (workload, runtime) = (w.name(), rt.name());
            let of =
                |k: Kind| recs.iter().filter(move |r| r.workload == workload && r.runtime == runtime && r.kind == k);
            let voids = common::voids(&recs, workload, runtime);
            assert!(voids.is_empty(), "{workload} {runtime}: {voids:#?}\n{stderr}");
            assert_eq!(of(Kind::Check).count(), 1, "{workload} {runtime} check");
            assert_eq!(of(Kind::Closed).count(), 1, "{workload} {runtime} closed runs");
            assert!(of(Kind::Closed).all(|r| r.req_per_s.is_some_and(|x| x > 0.0)), "{workload} {runtime}");
            let version = of(Kind::Closed).find_map(|r| r.runtime_version.clone()).unwrap_or_default();
            assert!(version.contains(expected_version(rt)), "{workload} {runtime}: version {version:?}");
            assert!(md.contains(&format!("- {runtime}")) || md.contains(&format!(", {runtime}")), "{runtime} noted");
        }
    }
    // Every compiled executable was built once, with its inputs' hash beside it.
    let built: Vec<String> = std::fs::read_dir(bin_dir.join("bun-compiled"))
        .expect("bun-compiled")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for exe in ["flight-hello-bun", "flight-app-bun-bytecode", "ladder-server-bun", "metadata-server-bun-bytecode"] {
        assert!(built.contains(&exe.to_string()) && built.contains(&format!("{exe}.inputs")), "{exe} in {built:?}");
    }
}

/// What each runtime's version must say.
fn expected_version(rt: Runtime) -> &'static str {
    match rt {
        Runtime::FastifyNode => "fastify 5.12.8 on node",
        Runtime::FastifyBun => "fastify 5.12.8 on bun",
        Runtime::ExpressNode => "express 5.3.0 on node",
        Runtime::ExpressBun => "express 5.3.0 on bun",
        Runtime::KoaBun => "koa 3.3.0 on bun",
        Runtime::FlightBun => "flight 2.0.2 on bun",
        Runtime::BunCompiled => "bun build --compile, inputs",
        Runtime::BunBytecode => "bun build --compile --bytecode, inputs",
        Runtime::Php => "php-fpm 8.2.",
        _ => "",
    }
}
