//! flight-rs binary: parse config, init tracing, bind, serve until SIGTERM/SIGINT.

use flight::{App, Config};

fn main() {
    let config: Config = serve::parse_or_exit("FLIGHT");
    let serve_args = config.serve.clone();
    let settings = config.resolve().unwrap_or_else(|e| serve::exit_config(&e.to_string()));
    serve::init_tracing();
    let app = App::new(settings).unwrap_or_else(|e| serve::exit_config(&e.to_string()));
    let limits = app.limits(serve_args.limits());
    let addr = app.settings().addr;
    let listeners = serve::bind_reuseport(addr, limits.workers).unwrap_or_else(|e| {
        eprintln!("flight-rs: cannot listen on {addr}: {e}");
        std::process::exit(1);
    });
    let bound = listeners.first().and_then(|l| l.local_addr().ok()).unwrap_or(addr);
    println!(
        "flight-rs listening on http://{bound} (profile {}, {} workers, {} routes)",
        app.settings().profile.as_str(),
        limits.workers,
        app.routes()
    );
    let workers = limits.workers;
    if let Err(e) = serve::run(listeners, limits, move || app.service(), serve::shutdown_signal()) {
        eprintln!("flight-rs: server failed: {e}");
        std::process::exit(1);
    }
    tracing::info!(workers, "flight-rs stopped");
}
