//! The self-contained HTML report beside the Markdown, from the recorded fixture (tests/fixtures/hello-bare.jsonl):
//! its text holds the Markdown's tables, run metadata and void reasons with the chart inline and nothing linked,
//! and a real browser (Debian's headless Chromium, from scripts/install-test-deps.sh) renders it: the DOM holds
//! the tables and the `<svg>`, and the screenshot shows the coloured chart.

mod common;

use std::collections::HashSet;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use compare::system::process::Spawned;

/// How long one headless Chromium run may take before it is killed (it takes well under a second here).
const BROWSER_LIMIT: Duration = Duration::from_secs(60);

/// Text the Markdown shows that the page must show too: runtime names, figures, metadata, a void cell's and a
/// void run's reasons, the "same work" line and the open-loop table.
const SHOWN: &[&str] = &[
    "compare: rust, bun, node and floor on 1 workload, 1 run",
    "machine: Test CPU, 2 CPUs, Linux 6.0 (host fixture)",
    "compare --workloads hello-bare --runs 2 --startup-runs 2",
    "Same work: every runtime answers from its route table",
    "110,000 (100,000–120,000)",
    "6.30 (6.00–6.60)",
    "flight-rs 0.1.0",
    "1 of 1 probes differ from rust",
    "Open loop at 40,000 req/s",
    "39,990",
    "bun closed round 2: unexpected statuses 500: 1",
];

/// `compare report` on a copy of the fixture in a temp dir: the dir, the page's path, the Markdown.
fn report() -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let jsonl = dir.path().join("20261129T120000Z-fixture.jsonl");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hello-bare.jsonl"), &jsonl)
        .expect("copy fixture");
    let out = Command::new(common::compare_exe()).arg("report").arg(&jsonl).output().expect("run compare report");
    assert!(out.status.success(), "compare report failed: {}", String::from_utf8_lossy(&out.stderr));
    let md = std::fs::read_to_string(jsonl.with_extension("md")).expect("markdown written");
    let html = jsonl.with_extension("html");
    assert!(html.is_file(), "{} not written beside the Markdown", html.display());
    (dir, html, md)
}

#[test]
fn page_is_self_contained_and_shows_the_markdown() {
    let (_dir, path, md) = report();
    let page = std::fs::read_to_string(&path).expect("html");
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<meta charset=\"utf-8\">"), "{page}");
    assert!(
        page.contains(
            "<title>compare: rust, bun, node and floor on 1 workload, 1 run (20261129T120000Z-fixture)</title>"
        ),
        "{page}"
    );
    for external in ["src=", "href=\"http", "<img", "<link", "<script", "url(", "@import", "<?xml"] {
        assert!(!page.contains(external), "the page holds {external:?}: {page}");
    }
    // Each chart the Markdown links is inline; each Markdown table row is a table row.
    assert_eq!(md.matches("![").count(), 3, "the two overviews' charts and the workload's: {md}");
    assert_eq!(page.matches("<svg xmlns=\"http://www.w3.org/2000/svg\"").count(), 3, "{page}");
    assert!(page.contains("<title>Every workload against rust</title>"), "{page}");
    assert!(page.contains("<title>Bun against Node</title>"), "{page}");
    assert!(page.contains("<title>hello-bare: throughput and CPU per response</title>"), "{page}");
    let rows = md.lines().filter(|l| l.starts_with('|') && !l.starts_with("|---")).count();
    assert_eq!(page.matches("<tr>").count(), rows, "{page}");
    for runtime in ["rust", "bun", "node", "floor"] {
        assert!(page.contains(&format!("<tr><td>{runtime}</td>")), "no {runtime} row: {page}");
    }
    for text in SHOWN {
        assert!(md.contains(text), "the Markdown lacks {text:?}: {md}");
        assert!(page.contains(text), "the page lacks {text:?}: {page}");
    }
    // Figures right-aligned, names not.
    assert!(page.contains("<td>rust</td><td>flight-rs 0.1.0</td><td style=\"text-align: right\">110,000"), "{page}");
}

#[test]
fn headless_chromium_renders_the_tables_and_the_chart() {
    let (dir, path, _md) = report();
    let browser = chromium();
    let url = format!("file://{}", path.display());
    let started = Instant::now();

    let dom_path = dir.path().join("dom.html");
    run_browser(&browser, dir.path(), "dom", &["--dump-dom".into(), url.clone()], &dom_path);
    let dom = std::fs::read_to_string(&dom_path).expect("dumped DOM");
    assert!(dom.contains("<svg") && dom.contains("<table>"), "no table or svg in the DOM: {dom}");
    for text in SHOWN {
        assert!(dom.contains(text), "the DOM lacks {text:?}: {dom}");
    }

    let png = dir.path().join("shot.png");
    let args = [format!("--screenshot={}", png.display()), "--window-size=1280,2000".into(), url];
    run_browser(&browser, dir.path(), "screenshot", &args, &dir.path().join("screenshot.out"));
    let (width, height, pixels) = rgb_pixels(&png);
    assert_eq!((width, height), (1280, 2000));
    let total = pixels.len();
    let inked = pixels.iter().filter(|p| p.iter().any(|&c| c < 240)).count();
    // The chart's bars: saturated colours (text and table rules are grey).
    let coloured: Vec<&[u8; 3]> =
        pixels.iter().filter(|p| p.iter().max().unwrap_or(&0) - p.iter().min().unwrap_or(&0) > 80).collect();
    let distinct: HashSet<&[u8; 3]> = pixels.iter().collect();
    let hues: HashSet<[u8; 3]> = coloured.iter().map(|p| p.map(|c| c >> 6)).collect();
    eprintln!(
        "screenshot: {inked} of {total} pixels inked, {} coloured, {} distinct colours, {} coarse hues; browser \
         {:.1?} in all",
        coloured.len(),
        distinct.len(),
        hues.len(),
        started.elapsed()
    );
    assert!(inked * 50 > total, "the screenshot is (nearly) blank: {inked} of {total} pixels not white");
    assert!(distinct.len() > 16, "the screenshot has {} distinct colours", distinct.len());
    assert!(coloured.len() > 2000 && hues.len() >= 2, "no coloured chart in the screenshot: {} pixels", coloured.len());
}

/// Debian's headless Chromium on PATH; a failure naming the install script when it is missing.
fn chromium() -> PathBuf {
    let found = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|d| d.join("chromium-headless-shell")).find(|p| p.is_file()));
    found.flatten().unwrap_or_else(|| {
        panic!(
            "chromium-headless-shell not found on PATH: install it with `bash scripts/install-test-deps.sh` \
             (Debian's package chromium-headless-shell)"
        )
    })
}

/// One headless run against a fresh profile, its stdout to `stdout`, killed (with everything it started) if
/// it takes longer than BROWSER_LIMIT.
fn run_browser(browser: &Path, dir: &Path, name: &str, args: &[String], stdout: &Path) {
    let profile = dir.join(format!("profile-{name}"));
    let log = dir.join(format!("{name}.log"));
    let mut cmd = Command::new(browser);
    cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(stdout).expect("stdout file"))
        .stderr(File::create(&log).expect("log file"));
    let mut child = Spawned::spawn(cmd, name).unwrap_or_else(|e| panic!("starting {}: {e}", browser.display()));
    let status = child.wait_timeout(BROWSER_LIMIT).expect("waiting for chromium");
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    match status {
        None => {
            child.kill();
            panic!("chromium ({name}) still running after {BROWSER_LIMIT:?}, killed:\n{}", log_text());
        }
        Some(s) => assert!(s.success(), "chromium ({name}) failed with {s}:\n{}", log_text()),
    }
}

/// The PNG's size and its pixels as RGB (alpha dropped: the screenshot is opaque).
fn rgb_pixels(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let file = File::open(path).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", path.display()));
    let mut decoder = png::Decoder::new(BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("buffer size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let channels = info.color_type.samples();
    assert!(channels >= 3, "screenshot is {:?}, not colour", info.color_type);
    let pixels = buf[..info.buffer_size()].chunks_exact(channels).map(|p| [p[0], p[1], p[2]]).collect();
    (info.width, info.height, pixels)
}
