//! Polling with a deadline, for conditions a test cannot be told about (a server dropping its connections,
//! a dependency coming back).

use std::time::{Duration, Instant};

/// How often a condition is polled.
const EVERY: Duration = Duration::from_millis(20);

/// Polls `done` until it is true or `within` passes: how long it took, or `None`.
pub fn until(within: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let started = Instant::now();
    eventually(within, || done().then(|| started.elapsed()))
}

/// Polls `f` until it returns `Some` or `within` passes (`f` runs at least once).
pub fn eventually<T>(within: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = f() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(EVERY);
    }
}
