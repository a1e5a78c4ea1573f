//! Ports for servers started as child processes, which bind them after we chose them.

use std::hash::{BuildHasher, RandomState};
use std::net::{Ipv4Addr, TcpListener};

/// Where chosen ports start: above the well-known and common service ports.
const LOWEST: u16 = 16384;

/// A port nothing listens on right now, for a child process to bind a moment later. It is chosen below the
/// kernel's ephemeral range (`ip_local_port_range`), where no outgoing connection takes a local port: a port
/// from binding `:0` is an ephemeral one, and with thousands of client connections opening beside it (the
/// hardening tests hold 5,000) one took it before the server bound it (a Node peer's `listen` failed with
/// EADDRINUSE in a clean-clone CI run). Falls back to an ephemeral port when the range leaves no room below.
pub fn free_port() -> std::io::Result<u16> {
    let below = ephemeral_low().unwrap_or(32768);
    if below > LOWEST + 1024 {
        let span = u64::from(below - LOWEST);
        let seed = RandomState::new();
        for attempt in 0..64u32 {
            let port = LOWEST + (seed.hash_one((std::process::id(), attempt)) % span) as u16;
            if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(port);
            }
        }
    }
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).and_then(|l| l.local_addr()).map(|a| a.port())
}

/// The first port of the kernel's ephemeral range.
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_free_and_below_the_ephemeral_range() {
        let port = free_port().expect("a port");
        let low = ephemeral_low().expect("this kernel's ephemeral range");
        assert!((LOWEST..low).contains(&port), "{port} outside {LOWEST}..{low}");
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("still free");
    }
}
