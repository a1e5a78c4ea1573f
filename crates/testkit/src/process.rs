//! Child processes in tests: killed when the test fails before they exit, waited on with a deadline.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// Kills the child if a test fails before it exits.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The child's exit status, or `None` if it is still running after `within`.
pub fn wait_for_exit(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}
