//! loadgen binary: parse, run (or merge), print, exit 0 (passed), 1 (run failed its checks), 2 (bad input).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use loadgen::capacity::{Capacity, CapacityArgs};
use loadgen::cli::{Cli, Command};
use loadgen::report::Report;

fn main() -> ExitCode {
    let parsed = Cli::command().try_get_matches().and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => {
            let text = e.to_string();
            let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
            let mut line = lines.next().unwrap_or("invalid arguments").trim_start_matches("error: ").to_string();
            // "the following required arguments were not provided:" names them on the next line.
            if line.ends_with(':')
                && let Some(next) = lines.next()
            {
                line = format!("{line} {next}");
            }
            return input_error(&line);
        }
    };
    match cli.command {
        Some(Command::Capacity(mut args)) => {
            // A capacity step's length and warmup, unless given: 5 s after 1 s (a run's defaults are 10 s
            // after none, which would make a search of a dozen steps take minutes).
            let given = |id: &str| {
                matches.subcommand_matches("capacity").and_then(|m| m.value_source(id))
                    != Some(ValueSource::DefaultValue)
            };
            if !given("duration") {
                args.run.duration = std::time::Duration::from_secs(5);
            }
            if !given("warmup") {
                args.run.warmup = std::time::Duration::from_secs(1);
            }
            capacity(&args)
        }
        Some(Command::LogChart { log, svg, bucket }) => {
            let records = match loadgen::request_log::read(&log) {
                Ok(r) => r,
                Err(e) => return input_error(&e),
            };
            if bucket.is_zero() {
                return input_error("--bucket must be more than zero");
            }
            let title = format!("{}: {} responses, latency from the intended send time", log.display(), records.len());
            match std::fs::write(&svg, loadgen::log_chart::svg(&records, bucket, &title)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("loadgen: cannot write {}: {e}", svg.display());
                    ExitCode::from(1)
                }
            }
        }
        Some(Command::Merge { reports, json, latency }) => {
            let mut loaded = Vec::with_capacity(reports.len());
            for path in &reports {
                match loadgen::merge::read_report(path) {
                    Ok(r) => loaded.push(r),
                    Err(e) => return input_error(&format!("{e:#}")),
                }
            }
            match loadgen::merge::merge(loaded) {
                Ok(merged) => finish(&merged, json.as_deref(), latency, Vec::new()),
                Err(e) => input_error(&e.to_string()),
            }
        }
        None => {
            let command: Vec<String> = std::env::args().collect();
            match loadgen::run(&cli.run, command) {
                Ok(report) => {
                    let failures = loadgen::failures(&report, &cli.run);
                    finish(&report, cli.run.json.as_deref(), cli.run.latency, failures)
                }
                Err(loadgen::RunError::Io(e)) => {
                    eprintln!("loadgen: {e}");
                    ExitCode::from(1)
                }
                Err(e) => input_error(&e.to_string()),
            }
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
    let json = args.run.json.as_deref();
    let json_to_stdout = json.is_some_and(|p| p.as_os_str() == "-");
    let mut text: Box<dyn Write> =
        if json_to_stdout { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout()) };
    let command: Vec<String> = std::env::args().collect();
    let found: Capacity = match loadgen::capacity::search(args, command, &mut text) {
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
