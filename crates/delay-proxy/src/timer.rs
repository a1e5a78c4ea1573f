//! The worker's wake-up for the next due segment. epoll's own timeout has millisecond resolution (mio rounds a
//! shorter wait up to 1 ms), which would turn a 0.5 ms one-way delay into 1 ms or more and double a 1 ms
//! round trip; a timerfd in the same poll fires with nanosecond resolution and no timer slack.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create, timerfd_settime,
};

pub struct DueTimer {
    fd: OwnedFd,
    armed_for: Option<Instant>,
}

impl DueTimer {
    pub fn new(registry: &Registry, token: Token) -> io::Result<DueTimer> {
        let fd = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC)?;
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(DueTimer { fd, armed_for: None })
    }

    /// Fires at `at` or later, never earlier: the wait is measured from `now`, read before the timer is set.
    /// Arming again for the same instant costs no system call.
    pub fn arm(&mut self, at: Instant, now: Instant) -> io::Result<()> {
        if self.armed_for == Some(at) {
            return Ok(());
        }
        // A zero it_value would disarm the timer; the worker handles what is already due before polling.
        let wait = at.saturating_duration_since(now).max(Duration::from_nanos(1));
        let spec = Itimerspec {
            it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: Timespec { tv_sec: wait.as_secs() as _, tv_nsec: wait.subsec_nanos() as _ },
        };
        timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec)?;
        self.armed_for = Some(at);
        Ok(())
    }

    /// After the timer's event: consumes the expiration so the next one raises a new edge.
    pub fn fired(&mut self) {
        let mut expirations = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut expirations);
        self.armed_for = None;
    }
}
