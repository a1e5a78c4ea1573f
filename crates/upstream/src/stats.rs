//! What the service has served: requests to `/upstream` and TCP connections accepted. Each worker counts in
//! its own [`Counters`] (its own cache line, so workers never contend on a counter the request path bumps);
//! `/stats` sums them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One worker's counts.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Counters {
    requests: AtomicU64,
    connections: AtomicU64,
}

impl Counters {
    pub fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }
}

/// Every worker's [`Counters`], registered as the workers start.
#[derive(Debug, Default)]
pub struct Stats {
    workers: Mutex<Vec<Arc<Counters>>>,
}

/// The sums `/stats` answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub requests: u64,
    pub connections: u64,
}

impl Stats {
    /// A new worker's counters, counted in every total from now on.
    pub fn register(&self) -> Arc<Counters> {
        let counters = Arc::new(Counters::default());
        self.lock().push(counters.clone());
        counters
    }

    pub fn totals(&self) -> Totals {
        let workers = self.lock();
        let sum = |field: fn(&Counters) -> &AtomicU64| workers.iter().map(|c| field(c).load(Ordering::Relaxed)).sum();
        Totals { requests: sum(|c| &c.requests), connections: sum(|c| &c.connections) }
    }

    /// The list stays whole even if a thread panicked holding the lock (a push cannot leave it half-done).
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Counters>>> {
        self.workers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Totals {
    /// `{"requests":N,"connections":M}`.
    pub fn to_json(self) -> String {
        format!(r#"{{"requests":{},"connections":{}}}"#, self.requests, self.connections)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_sum_every_worker() {
        let stats = Stats::default();
        let (a, b) = (stats.register(), stats.register());
        a.request();
        a.request();
        b.request();
        b.connection();
        assert_eq!(stats.totals(), Totals { requests: 3, connections: 1 });
        assert_eq!(stats.totals().to_json(), r#"{"requests":3,"connections":1}"#);
    }
}
