//! `compare budget`, the performance gate, end to end on the debug flight-rs and loadgen: `--update` measures
//! and writes a budget and its profile; the gate passes on the same binary and fails (exit 1, the grown
//! functions listed) on a budget set below what the binary costs; bad budget files and missing tools are
//! refused with what is wrong; every run leaves its record. The figures of a debug build are not the committed budget's (that one is the
//! release build's, bench/budget.toml); what is tested here is the gate's behaviour.

mod common;

use std::path::Path;
use std::process::{Command, Output};

/// `compare budget --file FILE`, its record written into a `records` folder beside the file.
fn budget(file: &Path, extra: &[&str]) -> Output {
    let (server, loader) = common::cores();
    Command::new(common::compare_exe())
        .arg("budget")
        .arg("--file")
        .arg(file)
        .arg("--out-dir")
        .arg(records(file))
        .arg("--bin-dir")
        .arg(common::bin_dir())
        .args(["--server-cores", &server, "--loader-cores", &loader])
        .args(extra)
        .output()
        .expect("run compare budget")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn records(file: &Path) -> std::path::PathBuf {
    file.with_file_name("records")
}

const CELLS: &str = "[[cell]]\nserver = \"flight-rs\"\nworkload = \"hello-bare\"\ninstructions = 1\nallocations = 0.0\n\
syscalls = 0.0\n\n[[cell]]\nserver = \"loadgen\"\nworkload = \"hello-bare\"\ninstructions = 1\nallocations = 0.0\n\
syscalls = 0.0\n";

#[test]
fn update_then_the_gate_passes_the_same_binary_and_fails_a_budget_below_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("budget.toml");
    std::fs::write(&file, CELLS).expect("write the budget");
    let out = budget(&file, &["--update", "--rounds", "1"]);
    assert!(out.status.success(), "--update failed:\n{}", text(&out));
    let written = std::fs::read_to_string(&file).expect("budget rewritten");
    assert!(!written.contains("instructions = 1\n"), "figures measured:\n{written}");
    let profile = std::fs::read_to_string(dir.path().join("budget.profile.tsv")).expect("profile written");
    assert!(profile.lines().any(|l| l.starts_with("flight-rs/hello-bare\t")), "{profile}");
    assert!(profile.lines().any(|l| l.starts_with("loadgen/hello-bare\t")), "{profile}");

    // A debug build's counts move with timing where a release build's do not (loadgen's allocations per request
    // were 0.18 and 0.24 in two runs beside other tests): the tolerances one round wrote are widened, as the
    // test is of the gate's behaviour, not of a debug build's repeatability.
    let written = written
        .replace("tolerance = \"2%\"", "tolerance = \"10%\"")
        .replace("allocations_tolerance = 0.05", "allocations_tolerance = 0.50")
        .replace("syscalls_tolerance = 0.05", "syscalls_tolerance = 0.50");
    std::fs::write(&file, &written).expect("write the widened budget");
    let out = budget(&file, &[]);
    assert_eq!(out.status.code(), Some(0), "the same binary is within its budget:\n{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("| flight-rs/hello-bare |"), "{}", text(&out));

    // flight-rs's instructions budget cut by a third and one allocation per response fewer allowed: over both,
    // re-measured, and for each figure the functions that grew named.
    let cells = compare::budget::file::read(&file).expect("budget reads");
    let flight = &cells[0];
    assert!(flight.allocations >= 1.0, "hello-bare allocates per response:\n{written}");
    let cut = flight.instructions * 2 / 3;
    let tight = written
        .replacen(&format!("instructions = {}\n", flight.instructions), &format!("instructions = {cut}\n"), 1)
        .replacen(
            &format!("allocations = {:.2}\n", flight.allocations),
            &format!("allocations = {:.2}\n", flight.allocations - 1.0),
            1,
        );
    assert!(tight.matches("_tolerance = 0.50").count() == 4 && tight.contains(&format!("= {cut}\n")), "{tight}");
    std::fs::write(&file, tight).expect("write the tight budget");
    let out = budget(&file, &[]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "over budget:\n{all}");
    assert!(all.contains("**over budget**: instructions +"), "{all}");
    assert!(all.contains(", allocations +"), "about one per response over: {all}");
    assert!(all.contains("flight-rs/hello-bare round 3"), "an over-budget cell is measured three times:\n{all}");
    // The same binary as the profile's: the budget moved, not the code, so what grew is noise or nothing;
    // each figure over budget still gets its section.
    assert!(all.contains("own instructions per response grew"), "{all}");
    assert!(all.contains("allocations per response grew"), "{all}");
    // Each run's record: the update's, the pass's and this failure's, which keeps what was printed.
    let written: Vec<_> = std::fs::read_dir(records(&file))
        .expect("records")
        .flatten()
        .flat_map(|folder| std::fs::read_dir(folder.path()).expect("a run's folder").flatten())
        .map(|f| f.path())
        .filter(|f| f.to_string_lossy().ends_with("-budget.md"))
        .collect();
    assert_eq!(written.len(), 3, "{written:?}");
    let failing =
        written.iter().map(|f| std::fs::read_to_string(f).expect("record")).find(|t| t.contains("over budget"));
    let failing = failing.expect("the failing run's record");
    assert!(failing.starts_with("# compare budget: 1 of 2 cells over budget: flight-rs/hello-bare\n"), "{failing}");
    assert!(failing.contains("allocations per response grew") && failing.contains("round 3"), "{failing}");
}

#[test]
fn a_bad_budget_file_is_refused_with_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("budget.toml");
    for (bad, want) in [
        (CELLS.replacen("hello-bare", "hello-bear", 1), "line 3: unknown workload \"hello-bear\""),
        (CELLS.replacen("\"flight-rs\"", "\"node\"", 1), "line 2: unknown server \"node\" for hello-bare"),
        (CELLS.replacen("syscalls = 0.0", "tolerance = \"two\"\nsyscalls = 0.0", 1), "line 6: tolerance \"two\""),
        (CELLS.replacen("allocations = 0.0", "allocations = -2.0", 1), "line 5: allocations must be a non-negative"),
    ] {
        std::fs::write(&file, bad).expect("write");
        let out = budget(&file, &[]);
        assert_eq!(out.status.code(), Some(64), "{}", text(&out));
        assert!(text(&out).contains(want), "want {want:?}:\n{}", text(&out));
    }
}

#[test]
fn without_valgrind_or_strace_it_fails_saying_what_is_missing_and_measures_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("budget.toml");
    std::fs::write(&file, CELLS).expect("write");
    // A PATH with taskset and the shell's tools but neither valgrind nor strace.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    for tool in ["taskset", "sh"] {
        let found = ["/usr/bin", "/bin"].iter().map(|d| Path::new(d).join(tool)).find(|p| p.is_file());
        std::os::unix::fs::symlink(found.expect(tool), bin.join(tool)).expect("link");
    }
    let out = Command::new(common::compare_exe())
        .args(["budget", "--file"])
        .arg(&file)
        .env("PATH", &bin)
        .output()
        .expect("run compare budget");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(
            "missing valgrind (Debian: valgrind), callgrind_control (Debian: valgrind), strace (Debian: strace)"
        ),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&file).expect("file"), CELLS, "nothing written");
}
