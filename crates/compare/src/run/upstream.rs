//! compare's upstream service for the upstream workloads (crates/upstream): one process per workload at that
//! workload's delay, pinned with the databases (so its CPU lands on no server core and is charged to no
//! runtime), one worker, ready before any runtime starts.

use std::time::Duration;

use anyhow::Context;

use crate::plan::server_spec::ServerSpec;
use crate::run::server::Server;
use crate::run::setup::Bench;
use crate::settings::Config;

/// The path the handlers GET.
const PATH: &str = "/upstream";

/// Starts the service answering after `delay` and waits for its first 200.
pub fn start(cfg: &Config, bench: &Bench, delay: Duration) -> anyhow::Result<Server> {
    let mut spec = ServerSpec::new("upstream", cfg.paths.upstream());
    let delay = format!("{}us", delay.as_micros());
    spec.args =
        ["--hostname", "127.0.0.1", "--port", "{port}", "--delay", &delay, "--workers", "1"].map(String::from).to_vec();
    let mut server = Server::start(&spec, cfg.db_cores.as_str(), &bench.logdir).context("starting the upstream")?;
    if let Err(e) = server.wait_ready("/healthz", bench.ready_timeout) {
        server.stop();
        return Err(e.context("the upstream service"));
    }
    Ok(server)
}

/// What the ladder servers' `LADDER_UPSTREAM_URL` is set to.
pub fn url(server: &Server) -> String {
    format!("http://127.0.0.1:{}{PATH}", server.port)
}
