//! One worker thread: its own mio event loop, its own connections, its own histograms. Sockets are
//! registered once (edge-triggered) for read and write, so a request costs a write and a read, never an
//! epoll_ctl; buffers are per connection and reused, so a request allocates nothing.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::assertions::Assertions;
use crate::cli::Schedule;
use crate::http1::ResponseParser;
use crate::source::{Cursor, Rng, Source};
use crate::stats::{WorkerStats, new_histogram, thread_cpu_us};
use crate::timer::SendTimer;

/// How often timeouts and reconnect backoffs are checked: the timeout's resolution.
const SWEEP_EVERY: Duration = Duration::from_millis(5);
/// A send later than this after its scheduled time counts as late.
const LATE_AFTER: Duration = Duration::from_millis(1);
/// Wait before retrying a connection that failed to connect, so a dead server is not hammered in a tight loop.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(10);
const READ_BUF: usize = 16 * 1024;

/// What the run-wide state hands each worker.
pub struct Shared {
    pub source: Source,
    pub assertions: Assertions,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub index: usize,
    pub connections: usize,
    pub pin: Option<usize>,
    pub addr: SocketAddr,
    pub timeout: Duration,
    pub pipeline: usize,
    /// Open loop: this worker's share of the rate, requests per second.
    pub rate: Option<f64>,
    pub schedule: Schedule,
    pub seed: u64,
    pub measure_from: Instant,
    pub end: Instant,
}

/// Once a second, what this worker did in that second (for --jsonl and the progress line).
#[derive(Debug)]
pub struct Tick {
    pub second: u64,
    pub responses: u64,
    pub errors: u64,
    pub latency: Histogram<u64>,
}

struct Sent {
    intended: Instant,
    written: Instant,
    head: bool,
}

struct Conn {
    stream: Option<TcpStream>,
    connected: bool,
    established_once: bool,
    connect_started: Instant,
    retry_at: Option<Instant>,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: Vec<u8>,
    rpos: usize,
    rlen: usize,
    parser: ResponseParser,
    pending: VecDeque<Sent>,
    body: Vec<u8>,
    head_ok: bool,
    /// In the open loop's free list.
    listed_free: bool,
}

impl Conn {
    fn new(pipeline: usize) -> Self {
        Conn {
            stream: None,
            connected: false,
            established_once: false,
            connect_started: Instant::now(),
            retry_at: None,
            wbuf: Vec::with_capacity(512),
            wpos: 0,
            rbuf: vec![0; READ_BUF],
            rpos: 0,
            rlen: 0,
            parser: ResponseParser::default(),
            pending: VecDeque::with_capacity(pipeline),
            body: Vec::new(),
            head_ok: true,
            listed_free: false,
        }
    }
}

struct Worker<'a> {
    plan: Plan,
    shared: &'a Shared,
    poll: Poll,
    conns: Vec<Conn>,
    cursor: Cursor,
    stats: WorkerStats,
    measuring: bool,
    open_loop: bool,
    /// Open loop: connections with room for another request.
    free: Vec<usize>,
    /// Open loop: intended send times waiting for a free connection (at most one per connection).
    backlog: VecDeque<Instant>,
    next_send: Instant,
    rng: Rng,
    responses_total: u64,
    checked_counter: u64,
    interval: Histogram<u64>,
    interval_responses: u64,
    interval_errors: u64,
    last_error: Option<String>,
    /// Open loop only: wakes the loop at the next send time (see `timer`).
    send_timer: Option<SendTimer>,
}

/// Runs the worker until `plan.end`; returns what it measured after `plan.measure_from`.
pub fn run(plan: Plan, shared: Arc<Shared>, ticks: Option<Sender<Tick>>) -> io::Result<(WorkerStats, Option<String>)> {
    if let Some(cpu) = plan.pin {
        core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
    }
    let open_loop = plan.rate.is_some();
    let poll = Poll::new()?;
    let send_timer = if open_loop { Some(SendTimer::new(poll.registry())?) } else { None };
    let mut worker = Worker {
        poll,
        send_timer,
        conns: (0..plan.connections).map(|_| Conn::new(plan.pipeline)).collect(),
        cursor: shared.source.cursor(plan.seed, plan.index),
        stats: WorkerStats::new(open_loop),
        measuring: false,
        open_loop,
        free: Vec::with_capacity(plan.connections),
        backlog: VecDeque::with_capacity(plan.connections),
        next_send: Instant::now(),
        rng: Rng::new(plan.seed.wrapping_add(0x5851_F42D_4C95_7F2D).wrapping_mul(plan.index as u64 + 1)),
        responses_total: 0,
        checked_counter: 0,
        interval: new_histogram(),
        interval_responses: 0,
        interval_errors: 0,
        last_error: None,
        shared: &shared,
        plan,
    };
    worker.event_loop(ticks)?;
    Ok((worker.stats, worker.last_error))
}

impl Worker<'_> {
    fn event_loop(&mut self, ticks: Option<Sender<Tick>>) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        for i in 0..self.conns.len() {
            self.connect(i);
        }
        let mut cpu_at_start = (0, 0);
        let mut next_sweep = Instant::now() + SWEEP_EVERY;
        let mut next_tick = self.plan.measure_from + Duration::from_secs(1);
        let mut second = 0;
        loop {
            let now = Instant::now();
            if now >= self.plan.end {
                break;
            }
            if !self.measuring && now >= self.plan.measure_from {
                // Warmup over: everything counted so far is discarded.
                self.stats = WorkerStats::new(self.open_loop);
                self.interval.reset();
                (self.interval_responses, self.interval_errors) = (0, 0);
                cpu_at_start = thread_cpu_us();
                self.measuring = true;
            }
            if self.open_loop {
                self.schedule(now);
                self.dispatch();
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SWEEP_EVERY;
            }
            if self.measuring && now >= next_tick {
                second += 1;
                if let Some(ticks) = &ticks {
                    let latency = std::mem::replace(&mut self.interval, new_histogram());
                    let _ = ticks.send(Tick {
                        second,
                        responses: self.interval_responses,
                        errors: self.interval_errors,
                        latency,
                    });
                }
                (self.interval_responses, self.interval_errors) = (0, 0);
                next_tick += Duration::from_secs(1);
            }
            let mut wait = next_sweep.saturating_duration_since(now).min(self.plan.end.saturating_duration_since(now));
            if self.open_loop {
                wait = wait.min(self.next_send.saturating_duration_since(now));
                if let Some(timer) = &mut self.send_timer {
                    timer.arm(self.next_send, now)?;
                }
            }
            if !self.measuring {
                wait = wait.min(self.plan.measure_from.saturating_duration_since(now));
            }
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                if event.token() == SendTimer::TOKEN {
                    if let Some(timer) = &mut self.send_timer {
                        timer.fired();
                    }
                    continue;
                }
                let i = event.token().0;
                if i >= self.conns.len() {
                    continue;
                }
                if event.is_writable() || event.is_write_closed() || event.is_error() {
                    self.on_writable(i);
                }
                if event.is_readable() || event.is_read_closed() {
                    self.on_readable(i, event.is_read_closed());
                }
            }
        }
        let (user, sys) = thread_cpu_us();
        self.stats.cpu_user_us = user.saturating_sub(cpu_at_start.0);
        self.stats.cpu_sys_us = sys.saturating_sub(cpu_at_start.1);
        self.stats.pinned_cpu = self.plan.pin;
        self.stats.connections_asked = self.conns.len() as u64;
        self.stats.connections_established = self.conns.iter().filter(|c| c.established_once).count() as u64;
        self.stats.in_flight_at_end = self.conns.iter().map(|c| c.pending.len() as u64).sum();
        Ok(())
    }

    fn connect(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        conn.connected = false;
        conn.retry_at = None;
        conn.connect_started = Instant::now();
        conn.wbuf.clear();
        conn.wpos = 0;
        conn.rpos = 0;
        conn.rlen = 0;
        conn.parser.reset();
        conn.pending.clear();
        match TcpStream::connect(self.plan.addr) {
            Ok(mut stream) => {
                let _ = stream.set_nodelay(true);
                match self.poll.registry().register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE) {
                    Ok(()) => conn.stream = Some(stream),
                    Err(e) => self.connect_failed(i, &e),
                }
            }
            Err(e) => self.connect_failed(i, &e),
        }
    }

    fn connect_failed(&mut self, i: usize, e: &io::Error) {
        if self.measuring {
            self.stats.errors.connect += 1;
        }
        self.interval_errors += 1;
        self.last_error = Some(format!("connect to {}: {e}", self.plan.addr));
        let conn = &mut self.conns[i];
        if let Some(mut stream) = conn.stream.take() {
            let _ = self.poll.registry().deregister(&mut stream);
        }
        conn.retry_at = Some(Instant::now() + RECONNECT_BACKOFF);
    }

    /// Drops the connection and opens a new one (counted as a reconnect).
    fn reconnect(&mut self, i: usize) {
        if let Some(mut stream) = self.conns[i].stream.take() {
            let _ = self.poll.registry().deregister(&mut stream);
        }
        if self.measuring {
            self.stats.reconnects += 1;
        }
        self.conns[i].listed_free = false;
        self.free.retain(|&f| f != i);
        self.connect(i);
    }

    fn on_writable(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let Some(stream) = conn.stream.as_mut() else { return };
        if !conn.connected {
            // A non-blocking connect finished: it worked if there is no socket error and a peer.
            match stream.take_error() {
                Ok(None) if stream.peer_addr().is_ok() => {}
                Ok(Some(e)) | Err(e) => return self.connect_failed(i, &e),
                Ok(None) => return, // not connected yet (spurious wakeup)
            }
            conn.connected = true;
            conn.established_once = true;
            if self.open_loop {
                self.mark_free(i);
            } else {
                for _ in 0..self.plan.pipeline {
                    self.queue_request(i, Instant::now());
                }
            }
        }
        self.flush(i);
    }

    /// Renders the next request into the connection's write buffer and records it as sent.
    fn queue_request(&mut self, i: usize, intended: Instant) {
        let conn = &mut self.conns[i];
        if conn.wpos == conn.wbuf.len() {
            conn.wbuf.clear();
            conn.wpos = 0;
        }
        let head = self.shared.source.write_next(&mut self.cursor, &mut conn.wbuf);
        conn.pending.push_back(Sent { intended, written: Instant::now(), head });
    }

    fn flush(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let Some(stream) = conn.stream.as_mut() else { return };
        while conn.wpos < conn.wbuf.len() {
            match stream.write(&conn.wbuf[conn.wpos..]) {
                Ok(0) => return self.fail(i, FailKind::Write, "write returned 0".into()),
                Ok(n) => {
                    conn.wpos += n;
                    if self.measuring {
                        self.stats.bytes_written += n as u64;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return, // the writable edge will call again
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(i, FailKind::Write, e.to_string()),
            }
        }
    }

    /// `peer_closed`: the event also reported the peer's FIN, which arrives with no later edge of its own,
    /// so the socket must be read to EOF now (a close-delimited body ends there).
    fn on_readable(&mut self, i: usize, peer_closed: bool) {
        loop {
            let conn = &mut self.conns[i];
            let Some(stream) = conn.stream.as_mut() else { return };
            if !conn.connected {
                return;
            }
            if conn.rlen == conn.rbuf.len() {
                // Full: move what is unparsed to the front, or grow for a large head or body chunk.
                if conn.rpos > 0 {
                    conn.rbuf.copy_within(conn.rpos..conn.rlen, 0);
                    conn.rlen -= conn.rpos;
                    conn.rpos = 0;
                } else {
                    let grown = conn.rbuf.len() * 2;
                    conn.rbuf.resize(grown, 0);
                }
            }
            let space = conn.rbuf.len() - conn.rlen;
            match stream.read(&mut conn.rbuf[conn.rlen..]) {
                Ok(0) => return self.on_eof(i),
                Ok(n) => {
                    conn.rlen += n;
                    if self.measuring {
                        self.stats.bytes_read += n as u64;
                    }
                    if !self.parse(i) {
                        return;
                    }
                    // A short read drained the socket; the next edge brings more. No EAGAIN syscall needed,
                    // unless the peer already closed: then no further edge comes and EOF must be read now.
                    if n < space && !peer_closed {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(i, FailKind::Read, e.to_string()),
            }
        }
    }

    /// Parses what is buffered; returns false when the connection was dropped meanwhile.
    fn parse(&mut self, i: usize) -> bool {
        let shared = self.shared;
        let assertions = &shared.assertions;
        loop {
            let conn = &mut self.conns[i];
            if conn.rpos == conn.rlen {
                conn.rpos = 0;
                conn.rlen = 0;
                return true;
            }
            let Some(front) = conn.pending.front() else {
                let what = "response bytes with no request outstanding".to_string();
                self.fail(i, FailKind::Parse, what);
                return false;
            };
            let head = front.head;
            // Decide per response whether assertions look at it (every Nth).
            if conn.parser.idle() {
                conn.head_ok = true;
                conn.body.clear();
            }
            let check = assertions.any() && self.checked_counter.is_multiple_of(assertions.every);
            let keep_body = check && assertions.needs_body();
            let mut head_ok = conn.head_ok;
            let outcome = {
                let mut on_head = |_status: u16, headers: &[httparse::Header<'_>]| {
                    if check && assertions.needs_headers() {
                        head_ok = assertions.headers_ok(headers);
                    }
                };
                let body = if keep_body { Some(&mut conn.body) } else { None };
                conn.parser.parse(&conn.rbuf[conn.rpos..conn.rlen], head, &mut on_head, body)
            };
            conn.head_ok = head_ok;
            match outcome {
                Ok((used, None)) => {
                    conn.rpos += used;
                    if conn.rpos == conn.rlen {
                        conn.rpos = 0;
                        conn.rlen = 0;
                    }
                    return true;
                }
                Ok((used, Some(done))) => {
                    conn.rpos += used;
                    if !self.on_response(i, done, check) {
                        return false;
                    }
                }
                Err(e) => {
                    self.fail(i, FailKind::Parse, e.to_string());
                    return false;
                }
            }
        }
    }

    /// Records a complete response; returns false when the connection was closed (server asked).
    fn on_response(&mut self, i: usize, done: crate::http1::Done, checked: bool) -> bool {
        let now = Instant::now();
        let conn = &mut self.conns[i];
        let Some(sent) = conn.pending.pop_front() else { return false };
        self.responses_total += 1;
        if checked {
            self.checked_counter = 0;
        }
        self.checked_counter += 1;
        if self.measuring {
            let us = |from: Instant| (now.saturating_duration_since(from).as_micros() as u64).max(1);
            self.stats.responses += 1;
            *self.stats.status.entry(done.status).or_insert(0) += 1;
            self.stats.latency.saturating_record(us(sent.intended));
            if let Some(h) = &mut self.stats.latency_from_write {
                h.saturating_record(us(sent.written));
            }
            self.interval.saturating_record(us(sent.intended));
            self.interval_responses += 1;
            if checked {
                self.stats.assertions_checked += 1;
                let assertions = &self.shared.assertions;
                if !(conn.head_ok && assertions.response_ok(done.status, done.body_len, &conn.body)) {
                    self.stats.errors.assertion += 1;
                    self.interval_errors += 1;
                }
            }
        }
        if done.close {
            // Requests pipelined behind this one are lost with the connection.
            let lost = conn.pending.len() as u64;
            if self.measuring && lost > 0 {
                self.stats.errors.closed += lost;
            }
            self.reconnect(i);
            return false;
        }
        if self.open_loop {
            self.mark_free(i);
            self.dispatch();
        } else {
            self.queue_request(i, now);
            self.flush(i);
        }
        self.conns[i].stream.is_some()
    }

    fn on_eof(&mut self, i: usize) {
        match self.conns[i].parser.eof() {
            Ok(Some(done)) => {
                // A close-delimited body ended: a complete response; on_response reopens the connection.
                self.conns[i].rpos = self.conns[i].rlen;
                let every = self.shared.assertions.every;
                let checked = self.shared.assertions.any() && self.checked_counter.is_multiple_of(every);
                let mut done = done;
                done.close = true; // on_response reopens the connection
                self.on_response(i, done, checked);
            }
            Ok(None) if self.conns[i].pending.is_empty() => self.reconnect(i), // idle keep-alive closed by server
            Ok(None) | Err(_) => self.fail(i, FailKind::Closed, "server closed the connection mid-request".into()),
        }
    }

    fn fail(&mut self, i: usize, kind: FailKind, why: String) {
        if self.measuring {
            let e = &mut self.stats.errors;
            match kind {
                FailKind::Read => e.read += 1,
                FailKind::Write => e.write += 1,
                FailKind::Parse => e.parse += 1,
                FailKind::Closed => e.closed += 1,
                FailKind::Timeout => e.timeout += 1,
            }
        }
        self.interval_errors += 1;
        self.last_error = Some(why);
        self.reconnect(i);
    }

    /// Per-request timeouts, connect timeouts and reconnect backoffs.
    fn sweep(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let conn = &self.conns[i];
            if let Some(at) = conn.retry_at {
                if now >= at {
                    self.connect(i);
                }
                continue;
            }
            if conn.stream.is_some() && !conn.connected && now.duration_since(conn.connect_started) > self.plan.timeout
            {
                let e = io::Error::new(io::ErrorKind::TimedOut, "connect timed out");
                self.connect_failed(i, &e);
                continue;
            }
            if conn.pending.front().is_some_and(|s| now.duration_since(s.written) > self.plan.timeout) {
                // Close and reopen: a late response must not be mistaken for the next request's.
                let why = format!("no response within {:?}", self.plan.timeout);
                self.fail(i, FailKind::Timeout, why);
            }
        }
    }

    fn mark_free(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if conn.connected && !conn.listed_free && conn.pending.len() < self.plan.pipeline {
            conn.listed_free = true;
            self.free.push(i);
        }
    }

    /// Open loop: moves every send time that has come into the backlog (or counts it missed).
    fn schedule(&mut self, now: Instant) {
        let Some(rate) = self.plan.rate else { return };
        while self.next_send <= now {
            if self.next_send >= self.plan.measure_from && self.measuring {
                self.stats.scheduled += 1;
            }
            if self.backlog.len() < self.conns.len() {
                self.backlog.push_back(self.next_send);
            } else if self.measuring {
                self.stats.missed_sends += 1;
            }
            let gap = match self.plan.schedule {
                Schedule::Uniform => 1.0 / rate,
                Schedule::Poisson => -self.rng.unit().ln() / rate,
            };
            self.next_send += Duration::from_secs_f64(gap);
        }
    }

    /// Open loop: sends backlogged requests on free connections.
    fn dispatch(&mut self) {
        while let Some(&intended) = self.backlog.front() {
            let Some(i) = self.free.pop() else { return };
            self.conns[i].listed_free = false;
            if !self.conns[i].connected {
                continue;
            }
            self.backlog.pop_front();
            if self.measuring && Instant::now().saturating_duration_since(intended) > LATE_AFTER {
                self.stats.late_sends += 1;
            }
            self.queue_request(i, intended);
            self.flush(i);
            self.mark_free(i);
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum FailKind {
    Read,
    Write,
    Parse,
    Closed,
    Timeout,
}
