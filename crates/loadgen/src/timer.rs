//! The open-loop send clock. epoll's timeout has millisecond resolution (mio rounds a shorter wait up to 1 ms),
//! so a worker that waits for its next send time with the poll timeout alone sends up to a millisecond late
//! whenever no response happens to wake it first, and that lateness lands in the latency it reports for the
//! server (latency is measured from the intended send time). A timerfd in the same poll wakes the loop at the
//! intended time with nanosecond resolution, for one `timerfd_settime` per send.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create, timerfd_settime,
};

pub struct SendTimer {
    fd: OwnedFd,
    armed_for: Option<Instant>,
}

impl SendTimer {
    /// The poll token of the timer; connection tokens are indices, far below it.
    pub const TOKEN: Token = Token(usize::MAX - 1);

    pub fn new(registry: &Registry) -> io::Result<SendTimer> {
        let fd = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC)?;
        registry.register(&mut SourceFd(&fd.as_raw_fd()), Self::TOKEN, Interest::READABLE)?;
        Ok(SendTimer { fd, armed_for: None })
    }

    /// Fires at `at` (relative to `now`); re-arming for the same instant costs nothing.
    pub fn arm(&mut self, at: Instant, now: Instant) -> io::Result<()> {
        if self.armed_for == Some(at) {
            return Ok(());
        }
        // A zero it_value would disarm the timer; a send that is already due is handled before polling.
        let wait = at.saturating_duration_since(now).max(Duration::from_nanos(1));
        let spec = Itimerspec {
            it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: Timespec { tv_sec: wait.as_secs() as _, tv_nsec: wait.subsec_nanos() as _ },
        };
        timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec)?;
        self.armed_for = Some(at);
        Ok(())
    }

    /// After the timer's event: consume the expiration so the next one raises a new edge.
    pub fn fired(&mut self) {
        let mut expirations = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut expirations);
        self.armed_for = None;
    }
}
