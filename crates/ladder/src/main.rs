//! ladder-rs binary: parse config, then serve until SIGTERM/SIGINT, or run `seed`.

use ladder::config::{Command, Config};

fn main() {
    let config: Config = serve::parse_or_exit("LADDER");
    serve::init_tracing();
    if let Some(Command::Seed(args)) = &config.command {
        ladder::seed::main(args);
    }
    let settings = config.resolve().unwrap_or_else(|e| serve::exit_config(&e));
    let limits = config.serve.limits();
    let (addr, workers) = (settings.addr, limits.workers);
    let db = settings.db.path.display().to_string();
    let postgres = if settings.postgres.is_some() { "Postgres set" } else { "no DATABASE_URL" };
    let shared = ladder::Shared::new(settings, limits.body_limit).unwrap_or_else(|e| {
        eprintln!("ladder-rs: {e}");
        std::process::exit(1)
    });
    let banner = move |url| format!("ladder-rs listening on {url} ({workers} workers, database {db}, {postgres})");
    serve::serve_until_signal("ladder-rs", addr, limits, banner, ladder::service_factory(shared));
}
