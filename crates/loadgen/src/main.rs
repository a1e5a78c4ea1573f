//! loadgen binary: parse, run (or search, merge, chart), print, exit 0 (passed), 1 (run failed its checks),
//! 2 (bad input).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use loadgen::capacity::Capacity;
use loadgen::cli::{self, CapacityArgs, Command, RunArgs};
use loadgen::report::Report;

fn main() -> ExitCode {
    let cli = match cli::from_command_line() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => return input_error(&cli::error_line(&e)),
    };
    match cli.command {
        Some(Command::Capacity(args)) => capacity(&args),
        Some(Command::LogChart { log, svg, bucket }) => log_chart(&log, &svg, bucket),
        Some(Command::Merge { reports, json, latency }) => merge(&reports, json.as_deref(), latency),
        None => run(&cli.run),
    }
}

/// A run: the text on stdout (stderr when `--json -` takes stdout), then the JSON.
fn run(args: &RunArgs) -> ExitCode {
    let settings = match args.settings() {
        Ok(settings) => settings,
        Err(e) => return input_error(&e.to_string()),
    };
    let command: Vec<String> = std::env::args().collect();
    match loadgen::run(&settings, command) {
        Ok(report) => {
            let failures = loadgen::failures(&report, settings.allow_failures);
            finish(&report, settings.output.json.as_deref(), settings.output.latency, failures)
        }
        Err(loadgen::RunError::Io(e)) => {
            eprintln!("loadgen: {e}");
            ExitCode::from(1)
        }
        Err(e) => input_error(&e.to_string()),
    }
}

/// `loadgen merge`: the reports added up, printed and written like a run's.
fn merge(reports: &[PathBuf], json: Option<&Path>, latency: bool) -> ExitCode {
    let mut loaded = Vec::with_capacity(reports.len());
    for path in reports {
        match loadgen::merge::read_report(path) {
            Ok(r) => loaded.push(r),
            Err(e) => return input_error(&format!("{e:#}")),
        }
    }
    match loadgen::merge::merge(loaded) {
        Ok(merged) => finish(&merged, json, latency, Vec::new()),
        Err(e) => input_error(&e.to_string()),
    }
}

/// `loadgen log-chart`: a `--log-requests` file drawn as an SVG.
fn log_chart(log: &Path, svg: &Path, bucket: Duration) -> ExitCode {
    let records = match loadgen::request_log::read(log) {
        Ok(r) => r,
        Err(e) => return input_error(&e.to_string()),
    };
    if bucket.is_zero() {
        return input_error("--bucket must be more than zero");
    }
    let title = format!("{}: {} responses, latency from the intended send time", log.display(), records.len());
    match std::fs::write(svg, loadgen::log_chart::svg(&records, bucket, &title)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen: cannot write {}: {e}", svg.display());
            ExitCode::from(1)
        }
    }
}

fn finish(report: &Report, json: Option<&Path>, latency: bool, failures: Vec<String>) -> ExitCode {
    let text = loadgen::render::text(report, latency);
    let json_to_stdout = json.is_some_and(|p| p.as_os_str() == "-");
    if json_to_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if let Some(path) = json
        && let Err(code) = write_json(path, report, "report")
    {
        return code;
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("loadgen: run failed: {}", failures.join("; "));
        ExitCode::from(1)
    }
}

/// `loadgen capacity`: the steps and the summary line on stdout (stderr when `--json -` takes stdout), then
/// the JSON. Exit 0 when a rate met the objective, 1 when none did, 2 on bad input.
fn capacity(args: &CapacityArgs) -> ExitCode {
    let search = match args.settings() {
        Ok(search) => search,
        Err(e) => return input_error(&e.to_string()),
    };
    let json = search.run.output.json.as_deref();
    let json_to_stdout = json.is_some_and(|p| p.as_os_str() == "-");
    let mut text: Box<dyn Write> =
        if json_to_stdout { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout()) };
    let command: Vec<String> = std::env::args().collect();
    let found: Capacity = match loadgen::capacity::search(&search, command, &mut text) {
        Ok(found) => found,
        Err(loadgen::RunError::Io(e)) => {
            eprintln!("loadgen: {e}");
            return ExitCode::from(1);
        }
        Err(e) => return input_error(&e.to_string()),
    };
    let _ = writeln!(text, "{}", found.summary());
    if let Some(path) = json
        && let Err(code) = write_json(path, &found, "result")
    {
        return code;
    }
    if found.capacity_rps.is_some() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// `--json PATH` (`-` for stdout): the value, pretty-printed. Err is the exit code to end with.
fn write_json(path: &Path, value: &impl serde::Serialize, what: &str) -> Result<(), ExitCode> {
    let body =
        serde_json::to_string_pretty(value).map_err(|e| input_error(&format!("cannot serialize the {what}: {e}")))?;
    let written =
        if path.as_os_str() == "-" { writeln!(std::io::stdout(), "{body}") } else { std::fs::write(path, body + "\n") };
    written.map_err(|e| {
        eprintln!("loadgen: cannot write {}: {e}", path.display());
        ExitCode::from(1)
    })
}

fn input_error(message: &str) -> ExitCode {
    eprintln!("loadgen: {message}");
    ExitCode::from(2)
}
