//! What the proxy carried: bytes each way per connection and in total, printed by the binary at shutdown.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Connections listed one by one in a [`Report`]; past this only the totals grow, so a workload that opens
/// connections without end cannot grow the proxy's memory with it.
pub const LISTED_CONNECTIONS: usize = 10_000;

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Both ends of stream passed through.
    Closed,
    /// Aborted: a side reset or vanished while the other still had something to say.
    Reset,
    /// The upstream could not be connected to (the client's connection was closed).
    Unreachable(String),
    /// Still open when the proxy stopped.
    Open,
}

#[derive(Debug, Clone)]
pub struct ConnectionReport {
    pub client: SocketAddr,
    /// Bytes written to the upstream (read from the client).
    pub to_upstream: u64,
    /// Bytes written to the client (read from the upstream).
    pub to_client: u64,
    pub lasted: Duration,
    pub end: End,
}

impl fmt::Display for ConnectionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = match &self.end {
            End::Closed => "closed".to_string(),
            End::Reset => "reset".to_string(),
            End::Unreachable(why) => format!("upstream unreachable: {why}"),
            End::Open => "open at shutdown".to_string(),
        };
        write!(
            f,
            "{}: {} bytes to upstream, {} bytes to client, {:.3} s, {end}",
            self.client,
            self.to_upstream,
            self.to_client,
            self.lasted.as_secs_f64()
        )
    }
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The first [`LISTED_CONNECTIONS`] connections to end, in the order they ended.
    pub connections: Vec<ConnectionReport>,
    pub accepted: u64,
    pub to_upstream: u64,
    pub to_client: u64,
}

impl Report {
    pub fn add(&mut self, connection: ConnectionReport) {
        self.accepted += 1;
        self.to_upstream += connection.to_upstream;
        self.to_client += connection.to_client;
        if self.connections.len() < LISTED_CONNECTIONS {
            self.connections.push(connection);
        }
    }

    /// Another worker's report added to this one.
    pub fn merge(&mut self, other: Report) {
        self.accepted += other.accepted;
        self.to_upstream += other.to_upstream;
        self.to_client += other.to_client;
        let room = LISTED_CONNECTIONS.saturating_sub(self.connections.len());
        self.connections.extend(other.connections.into_iter().take(room));
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} connections, {} bytes to upstream, {} bytes to client",
            self.accepted, self.to_upstream, self.to_client
        )?;
        for connection in &self.connections {
            writeln!(f, "  {connection}")?;
        }
        let unlisted = self.accepted.saturating_sub(self.connections.len() as u64);
        if unlisted > 0 {
            writeln!(f, "  ({unlisted} more not listed)")?;
        }
        Ok(())
    }
}
