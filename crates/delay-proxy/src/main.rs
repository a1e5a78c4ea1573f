//! delay-proxy binary: parse, bind, print `listening ADDRESS` on stdout, proxy until SIGTERM or SIGINT, then
//! print what was carried on stderr. Exit codes: 0 stopped by a signal, 1 could not start, 64 bad arguments.

use std::io::Write;
use std::process::ExitCode;

use delay_proxy::cli::Cli;

fn main() -> ExitCode {
    let cli: Cli = serve::parse_or_exit("DELAY_PROXY");
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("delay-proxy: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    // Before the listening line: a parent that signals right after reading it stops the proxy cleanly.
    let signal = serve::ShutdownSignal::install(false).map_err(|e| format!("cannot install signal handlers: {e}"))?;
    // serve's listener: a backlog of 4096 where std's is 128, so a pool opening hundreds of connections at
    // once has no SYN dropped (and retried a second later, which a benchmark would read as latency).
    let listener = serve::bind_reuseport(cli.listen, 1)
        .and_then(|mut listeners| listeners.pop().ok_or_else(|| std::io::Error::other("no listener")))
        .map_err(|e| format!("cannot listen on {}: {e}", cli.listen))?;
    let proxy = delay_proxy::spawn(listener, cli.settings()).map_err(|e| format!("cannot start: {e}"))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening {}", proxy.local_addr()).and_then(|()| stdout.flush()).map_err(|e| e.to_string())?;
    eprintln!(
        "delay-proxy: {} -> {}, {:?} round trip added ({:?} each way)",
        proxy.local_addr(),
        cli.upstream,
        cli.rtt,
        cli.settings().one_way()
    );
    signal.wait(|| {});
    eprint!("delay-proxy: {}", proxy.join());
    Ok(())
}
