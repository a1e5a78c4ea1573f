//! scribe-rs binary: parse config, init tracing, ensure the database, bind, serve until SIGTERM/SIGINT.

use scribe::{Config, Shared};

fn main() {
    let config: Config = serve::parse_or_exit("SCRIBE_APP");
    let serve_args = config.serve.clone();
    let settings = config.resolve().unwrap_or_else(|e| serve::exit_config(&e));
    serve::init_tracing();
    let shared = Shared::new(settings).unwrap_or_else(|e| serve::exit_config(&e.to_string()));
    let mut limits = serve_args.limits();
    limits.body_limit = shared.settings.payload_limit;
    let setup = tokio::runtime::Builder::new_current_thread().enable_all().build();
    match setup.map(|rt| rt.block_on(scribe::ensure_database(&shared.settings))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not ensure the database exists; serving 503 until Postgres is reachable")
        }
        Err(e) => fail(&format!("cannot start a runtime: {e}")),
    }
    let addr = shared.settings.addr;
    let signals =
        serve::ShutdownSignal::install().unwrap_or_else(|e| fail(&format!("cannot install signal handlers: {e}")));
    let listeners =
        serve::bind_reuseport(addr, limits.workers).unwrap_or_else(|e| fail(&format!("cannot listen on {addr}: {e}")));
    let bound = listeners.first().and_then(|l| l.local_addr().ok()).unwrap_or(addr);
    let banner = format!(
        "scribe-rs listening on http://{bound} ({} workers, database {})",
        limits.workers, shared.settings.database_name
    );
    let ready = move || {
        println!("{banner}");
        signals.wait();
    };
    if let Err(e) = serve::run(listeners, limits, move || shared.service(), ready) {
        fail(&format!("server failed: {e}"));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("scribe-rs: {message}");
    std::process::exit(1)
}
