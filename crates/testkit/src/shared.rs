//! One instance of something slow to start (a PostgreSQL cluster) shared by the tests of one test binary, and
//! stopped when the last test using it lets go: statics are never dropped, so a plain static would leave it
//! running after the tests.

use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Holds a `Weak` to the instance: alive while some test holds the `Arc` that [`Shared::get_or_start`] gave it.
#[derive(Debug)]
pub struct Shared<T> {
    slot: Mutex<Weak<T>>,
}

impl<T> Shared<T> {
    pub const fn new() -> Shared<T> {
        Shared { slot: Mutex::new(Weak::new()) }
    }

    /// The running instance, or a new one from `start` when no test holds one.
    pub fn get_or_start(&self, start: impl FnOnce() -> T) -> Arc<T> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = slot.upgrade() {
            return running;
        }
        let started = Arc::new(start());
        *slot = Arc::downgrade(&started);
        started
    }
}

impl<T> Default for Shared<T> {
    fn default() -> Shared<T> {
        Shared::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_instance_while_held_a_new_one_after() {
        static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let shared: Shared<usize> = Shared::new();
        let start = || STARTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let first = shared.get_or_start(start);
        let again = shared.get_or_start(start);
        assert!(Arc::ptr_eq(&first, &again));
        drop((first, again));
        assert_eq!(*shared.get_or_start(start), 1, "started again once nobody held it");
    }
}
