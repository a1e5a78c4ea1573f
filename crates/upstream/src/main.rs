//! upstream binary: parse config, then serve until SIGTERM/SIGINT.

use upstream::Config;

fn main() {
    let config: Config = serve::parse_or_exit("UPSTREAM");
    serve::init_tracing();
    let settings = config.settings();
    let limits = config.serve.limits();
    let (addr, workers, delay) = (settings.addr, limits.workers, settings.delay);
    let banner = move |url| format!("upstream listening on {url} ({workers} workers, delay {delay:?})");
    serve::serve_until_signal("upstream", addr, limits, banner, upstream::service_factory(settings));
}
