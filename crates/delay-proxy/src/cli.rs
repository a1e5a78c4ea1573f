//! The binary's command line. Each flag can also come from the environment (`DELAY_PROXY_RTT`, …) through
//! `serve::parse_or_exit`, which exits 64 with one line on a bad value.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::Parser;

use crate::settings::Settings;

/// A TCP proxy that adds a round trip (half each way) between its clients and one upstream.
#[derive(Debug, Parser)]
#[command(name = "delay-proxy", version)]
pub struct Cli {
    /// Address to listen on; port 0 picks a free one, printed on stdout as `listening ADDRESS`.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Where each accepted connection is proxied to (HOST:PORT, resolved once at start).
    #[arg(long, value_parser = parse_upstream)]
    pub upstream: SocketAddr,
    /// Round trip added: half on the way to the upstream, half back (`1ms`, `500us`, `40ms`; `0ms` for none).
    #[arg(long, value_parser = textfmt::parse_duration)]
    pub rtt: Duration,
    /// Event-loop threads (each keeps the connections it accepted).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
}

impl Cli {
    pub fn settings(&self) -> Settings {
        Settings { threads: usize::from(self.threads), ..Settings::new(self.upstream, self.rtt) }
    }
}

/// `127.0.0.1:5432`, or `localhost:5432` resolved to its first address.
fn parse_upstream(raw: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = raw.parse() {
        return Ok(addr);
    }
    let resolved = raw.to_socket_addrs().map_err(|e| format!("invalid upstream {raw:?} (HOST:PORT): {e}"))?;
    resolved.into_iter().next().ok_or_else(|| format!("upstream {raw:?} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_takes_the_workspace_duration_syntax_and_the_round_trip_is_split() {
        let cli =
            Cli::try_parse_from(["delay-proxy", "--upstream", "127.0.0.1:5432", "--rtt", "500us"]).expect("parses");
        assert_eq!(cli.rtt, Duration::from_micros(500));
        assert_eq!(cli.settings().one_way(), Duration::from_micros(250));
        assert_eq!(cli.listen, "127.0.0.1:0".parse().expect("addr"));
        assert!(Cli::try_parse_from(["delay-proxy", "--upstream", "127.0.0.1:5432", "--rtt", "ten"]).is_err());
        assert!(Cli::try_parse_from(["delay-proxy", "--upstream", "nowhere", "--rtt", "1ms"]).is_err());
        assert!(Cli::try_parse_from(["delay-proxy", "--rtt", "1ms"]).is_err(), "--upstream is required");
    }
}
