//! `--db-rtt`: delay proxies (crates/delay-proxy) between the servers and the PostgreSQL and Redis compare
//! uses, one per database and round trip, started once for the whole run on the database cores (their CPU is
//! charged to no runtime, and recorded beside the databases'). A server started for a cell at round trip R
//! gets its database URLs rewritten to R's proxies; nothing else about the server changes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::run::deps::{Database, Dependency, Deps};
use crate::settings::Config;
use crate::system::process::Spawned;

/// One proxy: the `host:port` it fronts and the loopback port it listens on.
struct Proxy {
    upstream: String,
    port: u16,
    rtt: Duration,
    proc: Spawned,
}

/// Every proxy of the run, stopped when dropped.
pub struct DbProxies {
    proxies: Vec<Proxy>,
}

/// The byte range of `url`'s `host:port` (`scheme://[user[:password]@]host:port[/…]`).
fn authority(url: &str) -> Option<std::ops::Range<usize>> {
    let start = url.find("://")? + 3;
    let end = url[start..].find(['/', '?']).map_or(url.len(), |i| start + i);
    let host_start = url[start..end].rfind('@').map_or(start, |i| start + i + 1);
    url[host_start..end].contains(':').then_some(host_start..end)
}

impl DbProxies {
    /// One proxy per round trip for each database `deps` serves, when `--db-rtt` was given and a workload
    /// waits on a database.
    pub fn start(cfg: &Config, deps: Option<&Deps>) -> anyhow::Result<Option<DbProxies>> {
        let Some(deps) = deps else { return Ok(None) };
        if cfg.db_rtt.is_empty() || !cfg.workloads.iter().any(|w| w.waits_on_database()) {
            return Ok(None);
        }
        let program = cfg.paths.delay_proxy();
        let mut upstreams = Vec::new();
        for url in deps.postgres_url().into_iter().chain([deps.redis_url()]) {
            let range = authority(&url).with_context(|| format!("no host:port in {url}"))?;
            upstreams.push(url[range].to_string());
        }
        let mut proxies = Vec::new();
        for &rtt in &cfg.db_rtt {
            for upstream in &upstreams {
                let mut cmd = Command::new("taskset");
                cmd.args(["-c", cfg.db_cores.as_str()]).arg(&program);
                cmd.args(["--listen", "127.0.0.1:0", "--upstream", upstream, "--rtt"]);
                cmd.arg(format!("{}us", rtt.as_micros()));
                cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
                let mut proc =
                    Spawned::spawn(cmd, "delay-proxy").with_context(|| format!("starting {}", program.display()))?;
                let port = listening_port(&mut proc).with_context(|| format!("delay-proxy for {upstream}"))?;
                proxies.push(Proxy { upstream: upstream.clone(), port, rtt, proc });
            }
        }
        Ok(Some(DbProxies { proxies }))
    }

    /// `url` through the proxy at `rtt` for its server; unchanged when there is none.
    pub fn route(&self, url: &str, rtt: Duration) -> String {
        let Some(range) = authority(url) else { return url.to_string() };
        match self.proxies.iter().find(|p| p.rtt == rtt && p.upstream == url[range.clone()]) {
            Some(p) => format!("{}127.0.0.1:{}{}", &url[..range.start], p.port, &url[range.end..]),
            None => url.to_string(),
        }
    }

    /// The proxies as servers a run measures and watches (all of them: only the cell's own carries load).
    pub fn measured(&self) -> Vec<Database> {
        self.proxies.iter().map(|p| Database { kind: Dependency::DbProxy, pid: p.proc.pid() }).collect()
    }
}

/// The port from the proxy's first line, `listening 127.0.0.1:PORT`; a proxy that exits first fails.
fn listening_port(proc: &mut Spawned) -> anyhow::Result<u16> {
    let stdout = proc.take_stdout().context("stdout not piped")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let Some(addr) = line.trim().strip_prefix("listening ") else {
        bail!("exited without saying where it listens ({:?})", line.trim());
    };
    let port = addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
    port.with_context(|| format!("no port in {addr:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxied_authority_is_the_urls_host_and_port() {
        let at = |url: &str| authority(url).map(|r| url[r].to_string());
        assert_eq!(at("postgres://postgres@127.0.0.1:5432/compare_ladder").as_deref(), Some("127.0.0.1:5432"));
        assert_eq!(at("postgres://u:p@db:6/x?sslmode=disable").as_deref(), Some("db:6"));
        assert_eq!(at("redis://127.0.0.1:6390/4").as_deref(), Some("127.0.0.1:6390"));
        assert_eq!(at("redis://127.0.0.1:6390").as_deref(), Some("127.0.0.1:6390"));
        assert_eq!(at("redis://localhost/4"), None);
        assert_eq!(at("no url"), None);
    }
}
