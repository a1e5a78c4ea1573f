//! The open-loop send clock: oskit's timerfd ([`DueTimer`]) under the poll token loadgen's epoll engine keeps
//! for it. Without it a worker waiting for its next send time with epoll's millisecond timeout alone would send
//! up to a millisecond late whenever no response woke it first, and that lateness would land in the latency it
//! reports for the server (latency is measured from the intended send time).

use std::io;
use std::time::Instant;

use mio::{Registry, Token};
use oskit::timer::DueTimer;

pub struct SendTimer(DueTimer);

impl SendTimer {
    /// The poll token of the timer; connection tokens are indices, far below it.
    pub const TOKEN: Token = Token(usize::MAX - 1);

    pub fn new(registry: &Registry) -> io::Result<SendTimer> {
        DueTimer::new(registry, Self::TOKEN).map(SendTimer)
    }

    /// Fires at `at` (relative to `now`); re-arming for the same instant costs nothing.
    pub fn arm(&mut self, at: Instant, now: Instant) -> io::Result<()> {
        self.0.arm(at, now)
    }

    /// After the timer's event: consume the expiration so the next one raises a new edge.
    pub fn fired(&mut self) {
        self.0.fired();
    }
}
