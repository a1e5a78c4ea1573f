//! compare binary: parse, then run the comparison, serve as the floor, or re-render a report. Exit codes:
//! 0 done, 1 failed (missing prerequisites, an error), 2 done but some cell failed its checks (VOID) or has
//! no valid closed-loop run,
//! 64 bad arguments, 130 interrupted.

use std::io::Write;
use std::net::TcpListener;
use std::process::ExitCode;

use clap::Parser;
use compare::cli::{Cli, Cmd, FloorArgs, ReportArgs, RunArgs};
use compare::{floor, process, records, report, run};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(64);
        }
        Err(e) => e.exit(), // --help, --version
    };
    let result = match cli.command {
        Some(Cmd::Floor(args)) => serve_floor(&args),
        Some(Cmd::Report(args)) => rerender(&args),
        Some(Cmd::Calibrate(args)) => return compare::calibrate::command(&args),
        Some(Cmd::Images(args)) => return compare::images::command(&args),
        None => return compare(&cli.run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compare: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve_floor(args: &FloorArgs) -> anyhow::Result<()> {
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&args.body) {
        eprintln!("config error: --body is not JSON: {e}");
        std::process::exit(64);
    }
    let listener = TcpListener::bind((args.hostname.as_str(), args.port))?;
    let port = listener.local_addr()?.port();
    println!("floor listening on http://{}:{port}", args.hostname);
    std::io::stdout().flush()?;
    floor::run(listener, floor::response(args.body.as_bytes()))?;
    Ok(())
}

fn rerender(args: &ReportArgs) -> anyhow::Result<()> {
    let records = records::read_jsonl(&args.files)?;
    let md = args.out.clone().unwrap_or_else(|| args.files[0].with_extension("md"));
    let text = report::write_outputs(&records, &md)?;
    print_report(&text);
    eprintln!("compare: wrote {}", md.display());
    Ok(())
}

/// The summary on stdout; a closed pipe (`compare | head`) is not an error, the files are written anyway.
fn print_report(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Keeps compare itself (readiness polls, /proc reads) off the server's cores.
fn pin_self(cores: &str) -> anyhow::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    for core in compare::procfs::parse_cores(cores)? {
        set.set(core);
    }
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

fn compare(args: &RunArgs) -> ExitCode {
    let exe = std::env::current_exe().unwrap_or_else(|_| "compare".into());
    let cfg = match args.resolve(std::env::args().collect(), exe) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("config error: {e:#}");
            return ExitCode::from(64);
        }
    };
    if let Err(e) = pin_self(&cfg.loader_cores) {
        eprintln!("warning: could not pin compare to cores {}: {e}", cfg.loader_cores);
    }
    process::install_panic_hook();
    if let Err(e) = process::install_signal_handler() {
        eprintln!("compare: installing the signal handler: {e:#}");
        return ExitCode::FAILURE;
    }
    match run::run(&cfg) {
        Ok(done) => {
            print_report(&done.markdown);
            eprintln!("compare: wrote {} and {}", done.jsonl.display(), done.md.display());
            if !done.problems.is_empty() {
                eprintln!("compare: {} cell(s) without a valid measurement:", done.problems.len());
                for p in &done.problems {
                    eprintln!("  - {p}");
                }
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) if process::interrupted() => {
            eprintln!(
                "compare: interrupted ({e:#}); the records so far are in the .jsonl (`compare report` renders them)"
            );
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("compare: {e:#}");
            ExitCode::FAILURE
        }
    }
}
