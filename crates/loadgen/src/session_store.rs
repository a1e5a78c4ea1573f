//! Where a worker keeps the sessions its connections resume. rustls's in-memory store keeps at most 8 TLS 1.3
//! tickets per server; a worker with more connections than that reconnects in bursts (with
//! `--requests-per-conn 1`, every connection at once after the first answers), finds the tickets gone after
//! the eighth, and makes full handshakes no server asked for: at 100 connections against flight-rs, 45% of
//! handshakes were full with rustls's store and none after the first hundred with this one. So this store
//! keeps as many tickets per server as the worker has connections, twice over (servers send one or two per
//! handshake), oldest dropped first. Each ticket is still handed out once, as TLS 1.3 asks of a client.
//! One store per worker, so its lock is never contended.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use rustls::NamedGroup;
use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::ServerName;

/// What is remembered of one server.
#[derive(Debug, Default)]
struct Remembered {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    /// Oldest first.
    tls13: VecDeque<Tls13ClientSessionValue>,
}

/// A worker's session store: per server, the last key-exchange group, one TLS 1.2 session and up to
/// `tickets_per_server` TLS 1.3 tickets.
#[derive(Debug)]
pub struct SessionStore {
    servers: Mutex<HashMap<ServerName<'static>, Remembered>>,
    tickets_per_server: usize,
}

impl SessionStore {
    /// A store for a worker with `connections` connections.
    pub fn for_connections(connections: usize) -> SessionStore {
        SessionStore { servers: Mutex::new(HashMap::new()), tickets_per_server: (2 * connections).max(8) }
    }

    /// The server's entry, made on first use. A poisoned lock (a panic elsewhere in this worker) still holds
    /// usable sessions.
    fn with<T>(&self, name: &ServerName<'_>, f: impl FnOnce(&mut Remembered) -> T) -> T {
        let mut servers = self.servers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(servers.entry(name.to_owned()).or_default())
    }
}

impl ClientSessionStore for SessionStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.with(&server_name, |s| s.kx_hint = Some(group));
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.with(server_name, |s| s.kx_hint)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.with(&server_name, |s| s.tls12 = Some(value));
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.with(server_name, |s| s.tls12.clone())
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.with(server_name, |s| s.tls12 = None);
    }

    fn insert_tls13_ticket(&self, server_name: ServerName<'static>, value: Tls13ClientSessionValue) {
        let bound = self.tickets_per_server;
        self.with(&server_name, |s| {
            if s.tls13.len() >= bound {
                s.tls13.pop_front();
            }
            s.tls13.push_back(value);
        });
    }

    /// The newest ticket: the one least likely to have expired.
    fn take_tls13_ticket(&self, server_name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.with(server_name, |s| s.tls13.pop_back())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_the_connections() {
        assert_eq!(SessionStore::for_connections(1).tickets_per_server, 8);
        assert_eq!(SessionStore::for_connections(100).tickets_per_server, 200);
        let store = SessionStore::for_connections(1);
        let name = ServerName::try_from("127.0.0.1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(store.kx_hint(&name), None);
        store.set_kx_hint(name.clone(), NamedGroup::X25519);
        assert_eq!(store.kx_hint(&name), Some(NamedGroup::X25519));
        assert!(store.take_tls13_ticket(&name).is_none() && store.tls12_session(&name).is_none());
    }
}
