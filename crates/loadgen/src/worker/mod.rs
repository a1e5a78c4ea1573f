//! One worker thread: its own connections, its own histograms and its own I/O engine (`engine`). The worker
//! decides what is sent and when (closed loop, or the open loop's schedule), parses what comes back, keeps the
//! per-request timers and counts everything; the engine only moves bytes. Buffers are per connection and
//! reused, so a request allocates nothing.
//!
//! The engine hands events to the worker inside [`Engine::wait`], where the worker cannot call the engine back.
//! So a connection the worker gives up on during a wait is marked (`doomed`) and closed right after it, and
//! bytes queued during a wait are written right after it: the same loop turn, before the next wait.
//!
//! What is particular to a protocol lives in child modules (`http1`, `http2`) as more `impl State` blocks, so
//! they share `State`'s private fields; this file is the loop, the connection lifecycle and the counting.

mod http1;
mod http2;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::assertions::Assertions;
use crate::conn::{After, Conn, Sent};
use crate::engine::{Engine, Event};
use crate::handshake::{Failure, Handshake};
use crate::hdr_log::Recorder;
use crate::open_loop::OpenLoop;
use crate::rate::{Rate, Schedule};
use crate::request_log::Record;
use crate::source::{Cursor, Rng, Source};
use crate::stats::{Http2Counts, Http2Settings, TlsStats, WorkerStats, new_histogram, process_cpu_us, thread_cpu_us};

/// How often timeouts and reconnect backoffs are checked: the timeout's resolution.
const SWEEP_EVERY: Duration = Duration::from_millis(5);
/// A send later than this after its scheduled time counts as late.
const LATE_AFTER: Duration = Duration::from_millis(1);
/// Wait before retrying a connection that failed to connect, so a dead server is not hammered in a tight loop.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(10);

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
    pub rate: Option<Rate>,
    /// How long a ramping rate takes to go from its start to its end, from `measure_from`.
    pub ramp: Option<Duration>,
    pub schedule: Schedule,
    pub seed: u64,
    pub measure_from: Instant,
    pub end: Instant,
    /// `--log-requests`: log every Nth response (0: no log), at most `log_max` of them.
    pub log_every: u64,
    pub log_max: usize,
    /// The run-wide number of this worker's first connection (the log's `conn`).
    pub first_conn: usize,
    /// Close a connection after this many responses and open another (the last request says so).
    pub requests_per_conn: Option<u64>,
    /// The engine speaks TLS: handshakes are counted.
    pub tls: bool,
    /// Speak HTTP/2 (`pipeline` is then the streams per connection).
    pub http2: bool,
}

/// Once a second, what this worker did in that second (for --jsonl and the progress line).
#[derive(Debug)]
pub struct Tick {
    pub second: u64,
    pub responses: u64,
    pub errors: u64,
    /// Open loop: sends the schedule called for in that second.
    pub scheduled: u64,
    pub latency: Histogram<u64>,
}

/// What a worker sends while it runs, besides the stats it returns at the end: its seconds (for `--jsonl` and
/// the progress line) and its intervals (`--hdr-log`).
pub struct Feeds {
    pub ticks: Option<Sender<Tick>>,
    pub hdr_log: Option<Recorder>,
}

/// Everything but the engine: what the engine's events are handed to.
struct State<'a> {
    plan: Plan,
    shared: &'a Shared,
    conns: Vec<Conn>,
    cursor: Cursor,
    stats: WorkerStats,
    measuring: bool,
    /// Open loop (`-R`): its schedule, backlog and free connections; None in closed loop.
    open_loop: Option<OpenLoop>,
    checked_counter: u64,
    /// Responses counted towards `--log-every`.
    log_counter: u64,
    interval: Histogram<u64>,
    interval_responses: u64,
    interval_errors: u64,
    interval_scheduled: u64,
    /// `--hdr-log`: every latency the report's histogram gets goes here too.
    hdr_log: Option<Recorder>,
    last_error: Option<String>,
    /// Connections given up on, to close after the wait.
    doomed: Vec<usize>,
    /// Connections with bytes to write after the wait.
    to_flush: Vec<usize>,
    /// HTTP/2: the next request as `source` renders it (HTTP/1.1 bytes), before the client frames it.
    rendered: Vec<u8>,
    /// HTTP/2: streams that ended during the client's `receive` (which holds the connection's client), so
    /// their connections take new requests after it.
    streams_ended: u64,
    /// HTTP/2, over the whole run (warmup included: connections are usually opened then): what each
    /// connection spoke, the server's SETTINGS as they stood last, and the stream count it capped us at.
    negotiated: std::collections::BTreeMap<String, u64>,
    server_settings: Option<Http2Settings>,
    capped_at: Option<u32>,
}

struct Worker<'a, E> {
    engine: E,
    state: State<'a>,
}

/// Runs the worker until `plan.end` on the engine `make_engine` builds (on this thread, after pinning it);
/// returns what it measured after `plan.measure_from`.
pub fn run<E: Engine>(
    plan: Plan,
    shared: Arc<Shared>,
    feeds: Feeds,
    make_engine: impl FnOnce(&Plan) -> io::Result<E>,
) -> io::Result<(WorkerStats, Option<String>)> {
    if let Some(cpu) = plan.pin {
        core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
    }
    let engine = make_engine(&plan)?;
    let open_loop = plan.rate.map(|rate| {
        let rng = Rng::new(plan.seed.wrapping_add(0x5851_F42D_4C95_7F2D).wrapping_mul(plan.index as u64 + 1));
        OpenLoop::new((rate, plan.ramp, plan.schedule), plan.measure_from, Instant::now(), rng, plan.connections)
    });
    let state = State {
        conns: (0..plan.connections).map(|_| Conn::new(plan.pipeline)).collect(),
        cursor: shared.source.cursor(plan.seed, plan.index),
        stats: fresh_stats(&plan),
        measuring: false,
        open_loop,
        checked_counter: 0,
        log_counter: 0,
        interval: new_histogram(),
        interval_responses: 0,
        interval_errors: 0,
        interval_scheduled: 0,
        hdr_log: feeds.hdr_log,
        last_error: None,
        doomed: Vec::with_capacity(plan.connections),
        to_flush: Vec::with_capacity(plan.connections),
        rendered: Vec::new(),
        streams_ended: 0,
        negotiated: std::collections::BTreeMap::new(),
        server_settings: None,
        capped_at: None,
        shared: &shared,
        plan,
    };
    let mut worker = Worker { engine, state };
    worker.event_loop(feeds.ticks)?;
    Ok((worker.state.stats, worker.state.last_error))
}

impl<E: Engine> Worker<'_, E> {
    fn event_loop(&mut self, ticks: Option<Sender<Tick>>) -> io::Result<()> {
        for i in 0..self.state.conns.len() {
            self.connect(i);
        }
        // Worker 0 also reads the process's CPU over the window: it includes threads the kernel starts for the
        // process (io_uring's io-wq workers), which no worker's own clock sees.
        let track_process = self.state.plan.index == 0;
        let mut cpu_at_start = (0, 0);
        let mut process_at_start = 0;
        let mut next_sweep = Instant::now() + SWEEP_EVERY;
        let mut next_tick = self.state.plan.measure_from + Duration::from_secs(1);
        let mut second = 0;
        loop {
            self.settle();
            let now = Instant::now();
            let s = &mut self.state;
            if !s.measuring && now >= s.plan.measure_from {
                s.start_measuring();
                cpu_at_start = thread_cpu_us();
                if track_process {
                    process_at_start = process_cpu_us();
                }
            }
            // Sends due by now (by the end, at the end) are counted before the second that ends here is.
            s.schedule(now.min(s.plan.end));
            if s.measuring && now >= next_tick {
                second += 1;
                s.end_second(second, ticks.as_ref());
                next_tick += Duration::from_secs(1);
            }
            if let Some(hdr_log) = &mut s.hdr_log {
                hdr_log.close_ended(now);
            }
            // After the tick: the window's last whole second ends exactly at `end` and gets its line too.
            if now >= s.plan.end {
                break;
            }
            self.dispatch();
            if now >= next_sweep {
                self.state.sweep(now);
                next_sweep = now + SWEEP_EVERY;
            }
            self.settle();
            let s = &mut self.state;
            let mut wake_at = next_sweep.min(s.plan.end);
            if !s.measuring {
                wake_at = wake_at.min(s.plan.measure_from);
            }
            if let Some(hdr_log) = &s.hdr_log {
                wake_at = wake_at.min(hdr_log.next_end());
            }
            // Open loop: wake for the next send only while a connection is free to take it (`OpenLoop::wake_at`
            // says why).
            let send_at = s.open_loop.as_ref().and_then(OpenLoop::wake_at);
            self.engine.wait(wake_at, send_at, &mut |i, event| s.on_event(i, event))?;
        }
        let s = &mut self.state;
        s.count_unsent();
        if let Some(hdr_log) = s.hdr_log.take() {
            hdr_log.finish();
        }
        let (user, sys) = thread_cpu_us();
        s.stats.cpu_user_us = user.saturating_sub(cpu_at_start.0);
        s.stats.cpu_sys_us = sys.saturating_sub(cpu_at_start.1);
        if track_process {
            s.stats.process_cpu_us = Some(process_cpu_us().saturating_sub(process_at_start));
        }
        s.stats.pinned_cpu = s.plan.pin;
        s.stats.connections_asked = s.conns.len() as u64;
        s.stats.connections_established = s.conns.iter().filter(|c| c.established_once).count() as u64;
        s.stats.in_flight_at_end = s.conns.iter().map(|c| c.pending.len() as u64).sum();
        if let Some(h2) = &mut s.stats.http2 {
            h2.negotiated = std::mem::take(&mut s.negotiated);
            h2.server_settings = s.server_settings;
            h2.capped_at = s.capped_at;
        }
        Ok(())
    }

    /// Closes what was given up on (and reopens it or schedules its retry), then writes what was queued.
    fn settle(&mut self) {
        while let Some(i) = self.state.doomed.pop() {
            let Some(after) = self.state.conns[i].doomed.take() else { continue };
            self.engine.close(i);
            let conn = &mut self.state.conns[i];
            conn.open = false;
            conn.connected = false;
            if let Some(open_loop) = &mut self.state.open_loop {
                open_loop.withdraw(i);
            }
            match after {
                After::Reconnect => {
                    if self.state.measuring {
                        self.state.stats.reconnects += 1;
                    }
                    self.connect(i);
                }
                After::Backoff => conn.retry_at = Some(Instant::now() + RECONNECT_BACKOFF),
                After::Retry => self.connect(i),
            }
        }
        while let Some(i) = self.state.to_flush.pop() {
            self.state.conns[i].flush_listed = false;
            self.flush(i);
        }
    }

    fn connect(&mut self, i: usize) {
        let conn = &mut self.state.conns[i];
        conn.reset_for_connect();
        match self.engine.connect(i) {
            Ok(()) => conn.open = true,
            Err(e) => self.state.connect_failed(i, &e),
        }
    }

    /// Writes what the connection has queued, as far as the socket takes it.
    fn flush(&mut self, i: usize) {
        let conn = &mut self.state.conns[i];
        if !conn.connected || conn.doomed.is_some() {
            return;
        }
        while conn.wpos < conn.wbuf.len() {
            match self.engine.write(i, &conn.wbuf[conn.wpos..]) {
                Ok(0) => return self.state.fail(i, FailKind::Write, "write returned 0".into()),
                Ok(n) => {
                    conn.wpos += n;
                    if self.state.measuring {
                        self.state.stats.bytes_written += n as u64;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return, // Writable calls again
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.state.fail(i, FailKind::Write, e.to_string()),
            }
        }
        conn.wbuf.clear();
        conn.wpos = 0;
    }

    /// Open loop: sends backlogged requests on free connections.
    fn dispatch(&mut self) {
        let s = &mut self.state;
        loop {
            let conns = &s.conns;
            let Some((i, intended)) = s.open_loop.as_mut().and_then(|o| o.take(|i| conns[i].usable())) else {
                return;
            };
            if s.measuring && Instant::now().saturating_duration_since(intended) > LATE_AFTER {
                s.stats.late_sends += 1;
            }
            s.queue_request(i, intended);
            s.mark_free(i);
        }
    }
}

impl State<'_> {
    /// One engine event for connection `i`; false when the connection is (now) given up on.
    fn on_event(&mut self, i: usize, event: Event<'_>) -> bool {
        if self.conns[i].doomed.is_some() {
            return false;
        }
        match event {
            Event::Connected => self.on_ready(i),
            Event::Handshaking => self.conns[i].handshaking = true,
            Event::Secured(handshake) => {
                self.record_handshake(i, &handshake);
                if self.plan.http2 && handshake.alpn != "h2" {
                    self.wrong_protocol(i, handshake.alpn);
                } else {
                    self.on_ready(i);
                }
            }
            Event::TlsFailed(failure) => self.tls_failed(i, &failure),
            Event::ConnectFailed(e) => self.connect_failed(i, &e),
            Event::Writable => self.list_flush(i),
            Event::Data(bytes) => self.on_data(i, bytes),
            Event::Eof => self.on_eof(i),
            Event::ReadFailed(e) => self.fail(i, FailKind::Read, e.to_string()),
            Event::WriteFailed(e) => self.fail(i, FailKind::Write, e.to_string()),
        }
        self.conns[i].doomed.is_none()
    }

    /// Connection `i` takes requests now (TCP connected; with TLS, the handshake done).
    fn on_ready(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        conn.connected = true;
        conn.handshaking = false;
        conn.established_once = true;
        if self.measuring {
            self.stats.connections_opened += 1;
        }
        if self.plan.http2 {
            return self.start_h2(i);
        }
        if self.open_loop.is_some() {
            self.mark_free(i);
        } else {
            for _ in 0..self.plan.pipeline {
                self.queue_request(i, Instant::now());
            }
        }
    }

    /// What the handshake negotiated and how long it took from the connect.
    fn record_handshake(&mut self, i: usize, handshake: &Handshake) {
        if let (true, Some(tls)) = (self.measuring, &mut self.stats.tls) {
            let us = self.conns[i].connect_started.elapsed().as_micros() as u64;
            tls.record(handshake, us);
        }
    }

    /// A TLS failure: during the handshake, retried after the connect backoff (a server that refuses every
    /// handshake is not hammered); after it, the connection is reopened at once.
    fn tls_failed(&mut self, i: usize, failure: &Failure) {
        if self.measuring {
            self.stats.errors.tls += 1;
            if let Some(tls) = &mut self.stats.tls {
                tls.failed(&failure.reason);
            }
        }
        self.interval_errors += 1;
        self.last_error = Some(format!("TLS with {}: {}", self.plan.addr, failure.detail));
        let after = if self.conns[i].connected { After::Reconnect } else { After::Backoff };
        self.doom(i, after);
    }

    fn list_flush(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if !conn.flush_listed && conn.wpos < conn.wbuf.len() {
            conn.flush_listed = true;
            self.to_flush.push(i);
        }
    }

    /// Gives connection `i` up: it is closed after this turn's wait, then reopened or retried.
    fn doom(&mut self, i: usize, after: After) {
        let conn = &mut self.conns[i];
        if conn.doomed.is_none() {
            conn.doomed = Some(after);
            self.doomed.push(i);
        }
    }

    fn connect_failed(&mut self, i: usize, e: &io::Error) {
        if self.measuring {
            self.stats.errors.connect += 1;
        }
        self.interval_errors += 1;
        self.last_error = Some(format!("connect to {}: {e}", self.plan.addr));
        self.doom(i, After::Backoff);
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
        self.doom(i, After::Reconnect);
    }

    /// Renders the next request into the connection's write buffer, records it as sent and lists the
    /// connection for writing. With `--requests-per-conn`, nothing past the connection's last request, which
    /// says `Connection: close`.
    fn queue_request(&mut self, i: usize, intended: Instant) {
        if self.conns[i].h2.is_some() {
            return self.queue_h2_request(i, intended);
        }
        let conn = &mut self.conns[i];
        let close = match self.plan.requests_per_conn {
            Some(n) if conn.sent >= n => return,
            Some(n) => conn.sent + 1 == n,
            None => false,
        };
        conn.sent += 1;
        let head = self.shared.source.write_next(&mut self.cursor, &mut conn.wbuf, close);
        conn.pending.push_back(Sent { intended, written: Instant::now(), head, stream: 0 });
        self.list_flush(i);
    }

    /// Response bytes: parsed straight from the engine's buffer; only an unfinished tail is kept.
    fn on_data(&mut self, i: usize, bytes: &[u8]) {
        if self.measuring {
            self.stats.bytes_read += bytes.len() as u64;
        }
        let mut kept = std::mem::take(&mut self.conns[i].rbuf);
        let parsed = if kept.is_empty() {
            let used = self.consume(i, bytes);
            if let Some(used) = used {
                kept.extend_from_slice(&bytes[used..]);
            }
            used
        } else {
            kept.extend_from_slice(bytes);
            let used = self.consume(i, &kept);
            if let Some(used) = used {
                kept.drain(..used);
            }
            used
        };
        if parsed.is_none() {
            kept.clear();
        }
        self.conns[i].rbuf = kept;
    }

    /// Hands `buf` to connection `i`'s protocol; returns how much it consumed, or None when the connection was
    /// given up on meanwhile.
    fn consume(&mut self, i: usize, buf: &[u8]) -> Option<usize> {
        if self.conns[i].h2.is_some() { self.receive_h2(i, buf) } else { self.parse(i, buf) }
    }

    /// Counts a complete response (status, latency, the request log, assertions), whatever its protocol.
    fn record_response(&mut self, i: usize, sent: &Sent, status: u16, body_len: u64, checked: bool) {
        let now = Instant::now();
        let conn = &self.conns[i];
        if checked {
            self.checked_counter = 0;
        }
        self.checked_counter += 1;
        if self.measuring {
            let us = |from: Instant| (now.saturating_duration_since(from).as_micros() as u64).max(1);
            let latency_us = us(sent.intended);
            self.stats.responses += 1;
            *self.stats.status.entry(status).or_insert(0) += 1;
            self.stats.latency.saturating_record(latency_us);
            if let Some(h) = &mut self.stats.latency_from_write {
                h.saturating_record(us(sent.written));
            }
            self.interval.saturating_record(latency_us);
            if let Some(hdr_log) = &mut self.hdr_log {
                hdr_log.record(latency_us);
            }
            self.interval_responses += 1;
            if self.plan.log_every > 0 {
                self.log_counter += 1;
                if self.log_counter.is_multiple_of(self.plan.log_every) {
                    if self.stats.request_log.len() < self.plan.log_max {
                        let since = |t: Instant| t.saturating_duration_since(self.plan.measure_from).as_micros() as u64;
                        self.stats.request_log.push(Record {
                            intended_us: since(sent.intended),
                            sent_us: since(sent.written),
                            latency_us,
                            status,
                            body_bytes: body_len,
                            conn: (self.plan.first_conn + i) as u32,
                        });
                    } else {
                        self.stats.not_logged += 1;
                    }
                }
            }
            if checked {
                self.stats.assertions_checked += 1;
                let assertions = &self.shared.assertions;
                if !(conn.head_ok && assertions.response_ok(status, body_len, &conn.body)) {
                    self.stats.errors.assertion += 1;
                    self.interval_errors += 1;
                }
            }
        }
    }

    fn on_eof(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if conn.h2.as_ref().is_some_and(|client| client.counts().settings_received == 0) {
            // h2c to a server that does not speak it: closed on the preface without an answer.
            return self.wrong_protocol(i, "a close before any SETTINGS");
        }
        match conn.parser.eof() {
            Ok(Some(mut done)) => {
                // A close-delimited body ended: a complete response, and the connection is reopened.
                conn.rbuf.clear();
                let every = self.shared.assertions.every;
                let checked = self.shared.assertions.any() && self.checked_counter.is_multiple_of(every);
                done.close = true;
                self.on_response(i, done, checked);
            }
            Ok(None) if conn.pending.is_empty() => self.doom(i, After::Reconnect), // idle keep-alive closed
            Ok(None) | Err(_) => self.fail(i, FailKind::Closed, "server closed the connection mid-request".into()),
        }
    }

    /// Per-request timeouts, connect timeouts and reconnect backoffs.
    fn sweep(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let conn = &mut self.conns[i];
            if conn.doomed.is_some() {
                continue;
            }
            if let Some(at) = conn.retry_at {
                if now >= at {
                    conn.retry_at = None;
                    self.doom(i, After::Retry);
                }
                continue;
            }
            if conn.open && !conn.connected && now.duration_since(conn.connect_started) > self.plan.timeout {
                if conn.handshaking {
                    self.tls_failed(i, &Failure::new("handshake timed out"));
                } else {
                    let e = io::Error::new(io::ErrorKind::TimedOut, "connect timed out");
                    self.connect_failed(i, &e);
                }
                continue;
            }
            if conn.h2.is_some() {
                self.cancel_late_streams(i, now);
                continue;
            }
            if conn.pending.front().is_some_and(|s| now.duration_since(s.written) > self.plan.timeout) {
                // Close and reopen: a late response must not be mistaken for the next request's.
                let why = format!("no response within {:?}", self.plan.timeout);
                self.fail(i, FailKind::Timeout, why);
            }
        }
    }

    /// Warmup over: everything counted so far is discarded.
    fn start_measuring(&mut self) {
        self.stats = fresh_stats(&self.plan);
        self.interval.reset();
        (self.interval_responses, self.interval_errors, self.interval_scheduled) = (0, 0, 0);
        self.measuring = true;
    }

    /// Second `second` of the window is over: its counts go to `ticks` (when someone follows them) and the
    /// next second starts from zero.
    fn end_second(&mut self, second: u64, ticks: Option<&Sender<Tick>>) {
        if let Some(ticks) = ticks {
            let latency = std::mem::replace(&mut self.interval, new_histogram());
            let _ = ticks.send(Tick {
                second,
                responses: self.interval_responses,
                errors: self.interval_errors,
                scheduled: self.interval_scheduled,
                latency,
            });
        }
        (self.interval_responses, self.interval_errors, self.interval_scheduled) = (0, 0, 0);
    }

    /// Open loop: lists connection `i` as free when it can take another request.
    fn mark_free(&mut self, i: usize) {
        let conn = &self.conns[i];
        if conn.usable()
            && conn.has_room(self.plan.pipeline, self.plan.requests_per_conn)
            && let Some(open_loop) = &mut self.open_loop
        {
            open_loop.offer(i);
        }
    }

    /// Open loop: the sends that have come due join the backlog (and the window's counts).
    fn schedule(&mut self, now: Instant) {
        let Some(open_loop) = &mut self.open_loop else { return };
        let scheduled = open_loop.come_due(now, self.measuring);
        self.stats.scheduled += scheduled;
        self.interval_scheduled += scheduled;
    }

    /// Open loop, the window over: the sends still waiting for a connection were due and never answered.
    /// Dropping them would hide the slowest part of an overloaded run (they waited longest for what they did
    /// not get), so each is counted (`missed_sends`) and its wait until the window's end goes into the latency
    /// as a lower bound of what it would have been. Not into the per-second lines: their last second is sent.
    fn count_unsent(&mut self) {
        let Some(open_loop) = &mut self.open_loop else { return };
        if !self.measuring {
            return;
        }
        let end = self.plan.end;
        for intended in open_loop.drain() {
            self.stats.missed_sends += 1;
            let waited = (end.saturating_duration_since(intended).as_micros() as u64).max(1);
            self.stats.latency.saturating_record(waited);
            // The interval log holds what the report's histogram holds: these go in its last interval.
            if let Some(hdr_log) = &mut self.hdr_log {
                hdr_log.record(waited);
            }
        }
    }
}

/// Stats with nothing counted yet (TLS counts only when the engine speaks TLS).
fn fresh_stats(plan: &Plan) -> WorkerStats {
    let mut stats = WorkerStats::new(plan.rate.is_some());
    stats.tls = plan.tls.then(TlsStats::default);
    stats.http2 = plan.http2.then(Http2Counts::default);
    stats
}

#[derive(Debug, Clone, Copy)]
enum FailKind {
    Read,
    Write,
    Parse,
    Closed,
    Timeout,
}
