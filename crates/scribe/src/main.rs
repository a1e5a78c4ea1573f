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
    let setup = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot start a runtime: {e}")));
    if let Err(e) = setup.block_on(scribe::ensure_database(&shared.settings)) {
        tracing::warn!(
            error = %e,
            "could not ensure the database exists; serving 503 and trying again every second until it does"
        );
        // Not only once: a server started before its Postgres (compose restarting the database, a pod that
        // comes up first) would otherwise answer 503 for good when the database is new and empty.
        let settings = shared.settings.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
                if setup.block_on(scribe::ensure_database(&settings)).is_ok() {
                    tracing::info!(database = %settings.database_name, "database ensured");
                    return;
                }
            }
        });
    }
    let (addr, workers) = (shared.settings.addr, limits.workers);
    let database = shared.settings.database_name.clone();
    let banner = |url| format!("scribe-rs listening on {url} ({workers} workers, database {database})");
    serve::serve_until_signal("scribe-rs", addr, limits, banner, move || shared.service());
}

fn fail(message: &str) -> ! {
    eprintln!("scribe-rs: {message}");
    std::process::exit(1)
}
