//! The open loop's pacing: when sends come due (the schedule of `rate`), which of them wait for a connection
//! (the backlog), and which connections have room for one (the free list). The worker asks it what to send
//! next and tells it which connections can take a request; it knows nothing of sockets.
//!
//! A send that comes due while every connection is busy waits, however many wait, and goes out on the next
//! connection that frees up, oldest first; its latency still counts from its intended time. So the latency
//! includes the queue an overloaded server builds, as a client population that keeps arriving would see it
//! (wrk2's idea). The backlog costs no memory per send: it is the stretch of the schedule between two cursors
//! over the same deterministic sequence of send times (the Poisson gaps come from a seeded generator, so a
//! second copy of it draws the same gaps). `due` runs ahead to the present, counting what came due; `sent`
//! follows behind, yielding each waiting send's intended time when a connection takes it. Two cursors are a
//! few dozen bytes whether 10 or 12 million sends wait (200k req/s asked for 60 s of a server that stalled);
//! a queue of u32 µs offsets would hold 48 MB for those.

use std::time::{Duration, Instant};

use crate::rate::{Rate, Schedule};
use crate::source::Rng;

/// One pass over the schedule's send times, in order.
#[derive(Debug, Clone)]
struct Arrivals {
    rate: Rate,
    ramp: Option<Duration>,
    schedule: Schedule,
    /// The start of the measured window, where a ramp's clock starts.
    measure_from: Instant,
    rng: Rng,
    /// The send time this cursor is at (not passed yet).
    next: Instant,
    /// Send times passed so far.
    passed: u64,
}

impl Arrivals {
    /// Passes the current send time and returns it.
    fn pass(&mut self) -> Instant {
        let at = self.next;
        // A ramp changes the rate send by send: each gap is drawn at the rate of its own start.
        let elapsed = at.saturating_duration_since(self.measure_from).as_secs_f64();
        let rate = self.rate.at(elapsed, self.ramp);
        let gap = match self.schedule {
            Schedule::Uniform => 1.0 / rate,
            Schedule::Poisson => -self.rng.unit().ln() / rate,
        };
        self.next += Duration::from_secs_f64(gap);
        self.passed += 1;
        at
    }
}

pub struct OpenLoop {
    /// Ahead: every send due by the last `come_due`.
    due: Arrivals,
    /// Behind: the oldest send not taken yet. The sends between the two cursors are the backlog.
    sent: Arrivals,
    /// Connections with room for another request, and which slots are in that list.
    free: Vec<usize>,
    listed: Vec<bool>,
}

impl OpenLoop {
    /// A schedule whose first send is due at `start`, for `connections` slots; `rng` draws Poisson gaps.
    pub fn new(
        (rate, ramp, schedule): (Rate, Option<Duration>, Schedule),
        measure_from: Instant,
        start: Instant,
        rng: Rng,
        connections: usize,
    ) -> OpenLoop {
        let due = Arrivals { rate, ramp, schedule, measure_from, rng, next: start, passed: 0 };
        OpenLoop { sent: due.clone(), due, free: Vec::with_capacity(connections), listed: vec![false; connections] }
    }

    /// Every send due by `now` joins the backlog; returns how many of them fall in the measured window
    /// (`measuring`: it has begun).
    pub fn come_due(&mut self, now: Instant, measuring: bool) -> u64 {
        let mut scheduled = 0;
        while self.due.next <= now {
            let at = self.due.pass();
            if measuring && at >= self.due.measure_from {
                scheduled += 1;
            }
        }
        scheduled
    }

    /// Sends due and not taken yet.
    pub fn waiting(&self) -> u64 {
        self.due.passed - self.sent.passed
    }

    /// Connection `i` has room for a request (listing it twice is harmless).
    pub fn offer(&mut self, i: usize) {
        if !self.listed[i] {
            self.listed[i] = true;
            self.free.push(i);
        }
    }

    /// Connection `i` can no longer take requests (it is being closed).
    pub fn withdraw(&mut self, i: usize) {
        if self.listed[i] {
            self.listed[i] = false;
            self.free.retain(|&f| f != i);
        }
    }

    /// The oldest send waiting (its intended time) and a free connection to send it on, both taken out of
    /// their lists; connections for which `usable` says no are dropped from the free list on the way. None
    /// when nothing waits or no connection is free.
    pub fn take(&mut self, usable: impl Fn(usize) -> bool) -> Option<(usize, Instant)> {
        while self.waiting() > 0 {
            let i = self.free.pop()?;
            self.listed[i] = false;
            if usable(i) {
                return Some((i, self.sent.pass()));
            }
        }
        None
    }

    /// When the worker must wake to send: the oldest send not taken (the next to come due when nothing
    /// waits), while a connection is free to take it. With every connection busy, a send that comes due can
    /// only wait, and `come_due` catches up on all of them at the next wake (a response, a connect, the
    /// sweep). Waking for each would spend the loader's CPU on an overloaded server's behalf (a wake every
    /// 10 µs at 100k req/s asked) and make a search call the loader, not the server, the limit.
    pub fn wake_at(&self) -> Option<Instant> {
        (!self.free.is_empty()).then_some(self.sent.next)
    }

    /// The run is over: the intended times of the sends still waiting, oldest first (emptying the backlog).
    pub fn drain(&mut self) -> impl Iterator<Item = Instant> + '_ {
        let left = self.waiting();
        (0..left).map(|_| self.sent.pass())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_loop(rate: f64, schedule: Schedule, connections: usize) -> (OpenLoop, Instant) {
        let start = Instant::now();
        let rates = (Rate::steady(rate), None, schedule);
        (OpenLoop::new(rates, start, start, Rng::new(7), connections), start)
    }

    #[test]
    fn sends_wait_without_bound_and_leave_oldest_first_at_their_intended_times() {
        let (mut o, start) = open_loop(1000.0, Schedule::Uniform, 2);
        // 100 ms at 1000/s with no connection free: 101 sends due (0 ms through 100 ms), all waiting.
        assert_eq!(o.come_due(start + Duration::from_millis(100), true), 101);
        assert_eq!(o.waiting(), 101);
        assert_eq!(o.wake_at(), None, "no connection free: no wake for the sends");
        assert_eq!(o.take(|_| true), None);
        o.offer(1);
        o.offer(1);
        assert_eq!(o.wake_at(), Some(start), "the oldest waiting send");
        assert_eq!(o.take(|_| true), Some((1, start)));
        assert_eq!(o.take(|_| true), None, "listing a slot twice gave it once");
        o.offer(0);
        o.offer(1);
        o.withdraw(1);
        let (i, at) = o.take(|_| true).expect("slot 0 is free");
        assert_eq!(i, 0);
        assert!(at.duration_since(start).abs_diff(Duration::from_millis(1)) < Duration::from_micros(1));
        let rest: Vec<Instant> = o.drain().collect();
        assert_eq!(rest.len(), 99);
        assert!(rest.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(o.waiting(), 0);
    }

    #[test]
    fn an_unusable_connection_is_skipped_and_the_send_keeps_waiting() {
        let (mut o, start) = open_loop(100.0, Schedule::Uniform, 3);
        assert_eq!(o.come_due(start, true), 1);
        o.offer(0);
        o.offer(2);
        assert_eq!(o.take(|i| i != 2), Some((0, start)));
        assert_eq!(o.waiting(), 0);
    }

    #[test]
    fn the_backlog_replays_the_poisson_gaps_that_came_due() {
        let (mut o, start) = open_loop(10_000.0, Schedule::Poisson, 1);
        let mut due = Vec::new();
        let mut now = start;
        for _ in 0..50 {
            now += Duration::from_micros(300);
            o.come_due(now, true);
            o.offer(0);
            if let Some((_, at)) = o.take(|_| true) {
                due.push(at);
            }
        }
        due.extend(o.drain());
        // One send per loop turn at most, the rest drained: every due send exactly once, in order, none after now.
        assert!(due.len() > 100, "{} sends due in 15 ms at 10k/s", due.len());
        assert!(due.windows(2).all(|w| w[0] <= w[1]) && due.iter().all(|&t| t <= now));
        let gaps: Vec<Duration> = due.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().collect::<std::collections::BTreeSet<_>>().len() > 10, "Poisson gaps vary");
    }

    #[test]
    fn sends_before_the_window_are_not_counted_in_it() {
        let start = Instant::now();
        let window = start + Duration::from_millis(10);
        let rates = (Rate::steady(1000.0), None, Schedule::Uniform);
        let mut o = OpenLoop::new(rates, window, start, Rng::new(1), 1);
        assert_eq!(o.come_due(window - Duration::from_nanos(1), false), 0, "warmup sends count nowhere");
        assert_eq!(o.waiting(), 10, "but they wait like any other");
        assert_eq!(o.come_due(window + Duration::from_millis(4), true), 5, "10 through 14 ms");
        assert_eq!(o.waiting(), 15);
    }
}
