//! compare binary: parse, then run the comparison, serve as the floor, re-render a report, calibrate,
//! measure images or export runs' figures. Exit codes: 0 done, 1 failed (missing prerequisites, an error), 2
//! done but some cell failed its checks (VOID) or has no valid closed-loop run, 64 bad arguments, 130
//! interrupted; `compare calibrate` has its own (see its module).

use std::process::ExitCode;

use clap::Parser;
use compare::cli::{Cli, Cmd};
use compare::{budget, calibrate, export, floor, images, measure_flags, report, run};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(64);
        }
        Err(e) => e.exit(), // --help, --version
    };
    match cli.command {
        Some(Cmd::Floor(args)) => floor::command(&args),
        Some(Cmd::Report(args)) => report::command::command(&args),
        Some(Cmd::Verdict(args)) => report::verdicts::command(&args),
        Some(Cmd::Claims(args)) => report::claims::command(&args),
        Some(Cmd::Calibrate(args)) => calibrate::command(&args),
        Some(Cmd::Images(args)) => images::command(&args),
        Some(Cmd::Export(args)) => export::command(&args),
        Some(Cmd::Budget(args)) => budget::command(&args),
        Some(Cmd::Reap) => compare::system::process::reap(),
        None => match measure_flags::resolve_or_exit(|argv, exe| cli.run.resolve(argv, exe)) {
            Ok(cfg) => run::command(&cfg),
            Err(code) => code,
        },
    }
}
