//! The open loop's pacing: when sends come due (the schedule of `rate`), which of them wait for a connection
//! (the backlog), and which connections have room for one (the free list). The worker asks it what to send
//! next and tells it which connections can take a request; it knows nothing of sockets.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::rate::{Rate, Schedule};
use crate::source::Rng;

/// What came due in one call of [`OpenLoop::come_due`], counted only inside the measured window.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// Sends the schedule called for.
    pub scheduled: u64,
    /// Of those, sends dropped because the backlog was full.
    pub missed: u64,
}

pub struct OpenLoop {
    rate: Rate,
    ramp: Option<Duration>,
    schedule: Schedule,
    /// The start of the measured window: a ramp's clock starts there, and only sends due after it count.
    measure_from: Instant,
    rng: Rng,
    next_send: Instant,
    /// Intended send times waiting for a free connection (at most one per connection).
    backlog: VecDeque<Instant>,
    /// Connections with room for another request, and which slots are in that list.
    free: Vec<usize>,
    listed: Vec<bool>,
}

impl OpenLoop {
    /// A schedule whose first send is due at `start`, for `connections` slots.
    pub fn new(
        (rate, ramp, schedule): (Rate, Option<Duration>, Schedule),
        measure_from: Instant,
        start: Instant,
        rng: Rng,
        connections: usize,
    ) -> OpenLoop {
        OpenLoop {
            rate,
            ramp,
            schedule,
            measure_from,
            rng,
            next_send: start,
            backlog: VecDeque::with_capacity(connections),
            free: Vec::with_capacity(connections),
            listed: vec![false; connections],
        }
    }

    /// Moves every send time that has come by `now` into the backlog (or counts it missed). `measuring`: the
    /// window has begun, so sends due in it are counted.
    pub fn come_due(&mut self, now: Instant, measuring: bool) -> Due {
        let mut due = Due::default();
        while self.next_send <= now {
            let counted = measuring && self.next_send >= self.measure_from;
            if counted {
                due.scheduled += 1;
            }
            if self.backlog.len() < self.listed.len() {
                self.backlog.push_back(self.next_send);
            } else if measuring {
                due.missed += 1;
            }
            // A ramp changes the rate send by send: each gap is drawn at the rate of its own start.
            let elapsed = self.next_send.saturating_duration_since(self.measure_from).as_secs_f64();
            let rate = self.rate.at(elapsed, self.ramp);
            let gap = match self.schedule {
                Schedule::Uniform => 1.0 / rate,
                Schedule::Poisson => -self.rng.unit().ln() / rate,
            };
            self.next_send += Duration::from_secs_f64(gap);
        }
        due
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

    /// The oldest send waiting and a free connection to send it on, both taken out of their lists; connections
    /// for which `usable` says no are dropped from the free list on the way. None when either list is empty.
    pub fn take(&mut self, usable: impl Fn(usize) -> bool) -> Option<(usize, Instant)> {
        while let Some(&intended) = self.backlog.front() {
            let i = self.free.pop()?;
            self.listed[i] = false;
            if !usable(i) {
                continue;
            }
            self.backlog.pop_front();
            return Some((i, intended));
        }
        None
    }

    /// When the worker must wake to send: the next send's time while a connection is free to take it. With
    /// every connection busy, a send that comes due can only wait, and `come_due` catches up on all of them
    /// at the next wake (a response, a connect, the sweep). Waking for each would spend the loader's CPU on an
    /// overloaded server's behalf (a wake every 10 µs at 100k req/s asked) and make a search call the loader,
    /// not the server, the limit.
    pub fn wake_at(&self) -> Option<Instant> {
        (!self.free.is_empty()).then_some(self.next_send)
    }
}
