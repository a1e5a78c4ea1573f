//! What a proxy does: where it connects, how much round trip it adds, and how it bounds what it holds.

use std::net::SocketAddr;
use std::time::Duration;

/// Bytes one direction of one connection may hold before the proxy stops reading its source: enough for a
/// database's large answers to keep flowing (1 MiB per 20 ms one way is 52 MB/s per connection at 40 ms),
/// small enough that a peer that stops reading cannot make the proxy buffer without end.
pub const DEFAULT_QUEUE_LIMIT: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct Settings {
    /// Every accepted connection gets one of its own to this address.
    pub upstream: SocketAddr,
    /// The round trip added: half on the way to the upstream, half on the way back. Zero is a plain proxy.
    pub rtt: Duration,
    /// Event-loop threads, each serving the connections it accepted (1 is plenty for a database's pool).
    pub threads: usize,
    /// See [`DEFAULT_QUEUE_LIMIT`].
    pub queue_limit: usize,
}

impl Settings {
    /// One thread and the default queue limit.
    pub fn new(upstream: SocketAddr, rtt: Duration) -> Settings {
        Settings { upstream, rtt, threads: 1, queue_limit: DEFAULT_QUEUE_LIMIT }
    }

    /// The delay of each direction.
    pub fn one_way(&self) -> Duration {
        self.rtt / 2
    }
}
