//! metadata-rs binary: parse config, then serve until SIGTERM/SIGINT, or run `gen-data` / `bench-lookup`.

use metadata::config::{Command, Config};

fn main() {
    let config: Config = serve::parse_or_exit("METADATA");
    serve::init_tracing();
    match &config.command {
        Some(Command::GenData(args)) => metadata::gen_data::main(args),
        Some(Command::BenchLookup(args)) => metadata::bench_lookup::main(args),
        None => {}
    }
    let settings = config.resolve().unwrap_or_else(|e| serve::exit_config(&e));
    let limits = config.serve.limits();
    let (addr, workers) = (settings.addr, limits.workers);
    let cache = match &settings.redis {
        Some(r) => format!("Redis cache, ttl {} s", r.ttl.as_secs()),
        None => "no cache".to_string(),
    };
    let db = settings.db.path.display().to_string();
    let banner = move |url| format!("metadata-rs listening on {url} ({workers} workers, database {db}, {cache})");
    serve::serve_until_signal("metadata-rs", addr, limits, banner, metadata::service_factory(settings));
}
