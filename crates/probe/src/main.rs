//! probe binary: `probe URL [--timeout-ms N] [--cacert FILE | --insecure]`. Exit 0 when the answer is 2xx, else 1
//! with one line on stderr.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match probe::parse_args(&args).and_then(|probe| probe.run()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(probe::Error::Help) => {
            println!("{}", probe::USAGE);
            ExitCode::SUCCESS
        }
        Err(e) => {
            let url = args.iter().find(|a| !a.starts_with('-') && a.contains("://"));
            match url {
                Some(url) => eprintln!("probe: GET {url}: {e}"),
                None => eprintln!("probe: {e}"),
            }
            // Docker reserves exit 2 in health checks: every failure, usage errors included, is 1.
            ExitCode::from(1)
        }
    }
}
