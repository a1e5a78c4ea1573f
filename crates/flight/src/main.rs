//! flight-rs binary: parse config, init tracing, bind, serve until SIGTERM/SIGINT.

use flight::{App, Config};

fn main() {
    let config: Config = serve::parse_or_exit("FLIGHT");
    let serve_args = config.serve.clone();
    let settings = config.resolve().unwrap_or_else(|e| serve::exit_config(&e.to_string()));
    serve::init_tracing();
    let app = App::new(settings).unwrap_or_else(|e| serve::exit_config(&e.to_string()));
    let limits = app.limits(serve_args.limits());
    let (addr, workers) = (app.settings().addr, limits.workers);
    let (profile, routes) = (app.settings().profile.as_str(), app.routes());
    let banner = |url| format!("flight-rs listening on {url} (profile {profile}, {workers} workers, {routes} routes)");
    serve::serve_until_signal("flight-rs", addr, limits, banner, move || app.service());
    tracing::info!("flight-rs stopped");
}
