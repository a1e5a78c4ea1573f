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
    let signals =
        serve::ShutdownSignal::install().unwrap_or_else(|e| fail(&format!("cannot install signal handlers: {e}")));
    let listeners =
        serve::bind_reuseport(addr, limits.workers).unwrap_or_else(|e| fail(&format!("cannot listen on {addr}: {e}")));
    let bound = listeners.first().and_then(|l| l.local_addr().ok()).unwrap_or(addr);
    let banner = format!(
        "flight-rs listening on http://{bound} (profile {}, {} workers, {} routes)",
        app.settings().profile.as_str(),
        limits.workers,
        app.routes()
    );
    let ready = move || {
        println!("{banner}");
        signals.wait();
    };
    if let Err(e) = serve::run(listeners, limits, move || app.service(), ready) {
        fail(&format!("server failed: {e}"));
    }
    tracing::info!("flight-rs stopped");
}

fn fail(message: &str) -> ! {
    eprintln!("flight-rs: {message}");
    std::process::exit(1)
}
