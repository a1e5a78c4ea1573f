//! A wake-up at an exact instant inside a mio poll. epoll's own timeout has millisecond resolution (mio rounds
//! a shorter wait up to 1 ms), so a loop that waits for its next due time with the poll timeout alone wakes up
//! to a millisecond late: loadgen's open-loop sends would then report that lateness as the server's latency,
//! and delay-proxy would turn a 0.5 ms one-way delay into 1 ms or more. A timerfd in the same poll fires with
//! nanosecond resolution and no timer slack, for one `timerfd_settime` per new due time.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create, timerfd_settime,
};

/// A one-shot monotonic timerfd registered for reading under the caller's token.
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
        // A zero it_value would disarm the timer; callers handle what is already due before polling.
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

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};

    const TIMER: Token = Token(7);

    /// Polls until the timer's event or a generous deadline, returning when it fired.
    fn wait_for_timer(poll: &mut Poll, deadline: Instant) -> Option<Instant> {
        let mut events = Events::with_capacity(4);
        while Instant::now() < deadline {
            poll.poll(&mut events, Some(deadline.saturating_duration_since(Instant::now()))).expect("poll");
            if events.iter().any(|e| e.token() == TIMER) {
                return Some(Instant::now());
            }
        }
        None
    }

    #[test]
    fn fires_no_earlier_than_armed_and_again_after_rearming() {
        let mut poll = Poll::new().expect("poll");
        let mut timer = DueTimer::new(poll.registry(), TIMER).expect("timerfd");
        for wait in [Duration::from_micros(300), Duration::from_millis(2)] {
            let now = Instant::now();
            let at = now + wait;
            timer.arm(at, now).expect("arm");
            let fired = wait_for_timer(&mut poll, now + Duration::from_secs(5)).expect("the timer never fired");
            assert!(fired >= at, "fired {:?} early", at - fired);
            timer.fired();
        }
    }

    #[test]
    fn an_instant_already_past_still_fires() {
        let mut poll = Poll::new().expect("poll");
        let mut timer = DueTimer::new(poll.registry(), TIMER).expect("timerfd");
        let now = Instant::now();
        timer.arm(now, now + Duration::from_millis(1)).expect("arm");
        assert!(wait_for_timer(&mut poll, now + Duration::from_secs(5)).is_some(), "a past instant disarmed it");
    }
}
