use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Logs go to stderr (stdout carries only the "listening" line, so scripts can read it). The level comes from
/// RUST_LOG, default `info`.
pub fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
