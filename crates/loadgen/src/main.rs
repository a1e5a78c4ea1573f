//! loadgen binary: parse, run (or merge), print, exit 0 (passed), 1 (run failed its checks), 2 (bad input).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use loadgen::cli::{Cli, Command};
use loadgen::report::Report;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
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
    if let Some(path) = json {
        let body = match serde_json::to_string_pretty(report) {
            Ok(b) => b,
            Err(e) => return input_error(&format!("cannot serialize the report: {e}")),
        };
        let written =
            if json_to_stdout { writeln!(std::io::stdout(), "{body}") } else { std::fs::write(path, body + "\n") };
        if let Err(e) = written {
            eprintln!("loadgen: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("loadgen: run failed: {}", failures.join("; "));
        ExitCode::from(1)
    }
}

fn input_error(message: &str) -> ExitCode {
    eprintln!("loadgen: {message}");
    ExitCode::from(2)
}
