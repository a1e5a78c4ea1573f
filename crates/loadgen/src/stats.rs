//! What one worker thread counts. Plain fields owned by the thread (no atomics, no channels per request);
//! merged once at the end.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

/// Latencies are recorded in microseconds, from 1 µs to 1 hour, 3 significant digits.
pub const LATENCY_MAX_US: u64 = 3_600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts; failure would be a programming error.
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).unwrap_or_else(|e| unreachable!("histogram bounds: {e}"))
}

/// Socket and protocol errors, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Errors {
    /// Connection attempts that failed (refused, unreachable, reset during connect).
    pub connect: u64,
    /// Reads that failed (reset, …).
    pub read: u64,
    /// Writes that failed (broken pipe, …).
    pub write: u64,
    /// Requests with no complete response within `--timeout`.
    pub timeout: u64,
    /// Responses that were not valid HTTP/1.1.
    pub parse: u64,
    /// Connections the server closed with a request outstanding.
    pub closed: u64,
    /// Responses that failed an assertion (status, body, header…).
    pub assertion: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.by_kind().iter().map(|(_, n)| n).sum()
    }

    /// Each count with its name, in report order (for text summaries and records).
    pub fn by_kind(&self) -> [(&'static str, u64); 7] {
        [
            ("connect", self.connect),
            ("read", self.read),
            ("write", self.write),
            ("timeout", self.timeout),
            ("parse", self.parse),
            ("closed", self.closed),
            ("assertion", self.assertion),
        ]
    }

    pub fn add(&mut self, other: &Errors) {
        self.connect += other.connect;
        self.read += other.read;
        self.write += other.write;
        self.timeout += other.timeout;
        self.parse += other.parse;
        self.closed += other.closed;
        self.assertion += other.assertion;
    }
}

/// Everything a worker measured in the measured window (warmup excluded).
#[derive(Debug, Clone)]
pub struct WorkerStats {
    /// Complete responses.
    pub responses: u64,
    /// Responses per status code.
    pub status: BTreeMap<u16, u64>,
    pub errors: Errors,
    /// Response bytes read (heads and bodies).
    pub bytes_read: u64,
    /// Request bytes written.
    pub bytes_written: u64,
    /// Connections opened again after a close (server `Connection: close`, timeout, error).
    pub reconnects: u64,
    /// Connections this worker was asked to keep open.
    pub connections_asked: u64,
    /// Of those, how many were established at least once.
    pub connections_established: u64,
    /// Requests still outstanding when the run ended (not counted as responses or errors).
    pub in_flight_at_end: u64,
    /// Open loop: requests whose send was later than their scheduled time by more than a millisecond.
    pub late_sends: u64,
    /// Open loop: requests the schedule called for.
    pub scheduled: u64,
    /// Open loop: scheduled requests never sent because every connection was busy and the backlog (one per
    /// connection) was full. Sending them later would be a burst to catch up, which distorts the load.
    pub missed_sends: u64,
    /// Assertions checked (on every response or every Nth).
    pub assertions_checked: u64,
    /// Latency in µs: closed loop from the write; open loop from the intended send time.
    pub latency: Histogram<u64>,
    /// Open loop only: latency in µs from the actual write (what a closed-loop tool would report).
    pub latency_from_write: Option<Histogram<u64>>,
    /// The worker thread's CPU time over the measured window, µs.
    pub cpu_user_us: u64,
    pub cpu_sys_us: u64,
    /// The whole process's CPU time over the window, µs (recorded by worker 0 only): it includes threads no
    /// worker's own clock sees, such as io_uring's io-wq workers.
    pub process_cpu_us: Option<u64>,
    /// The CPU this worker was pinned to, if any.
    pub pinned_cpu: Option<usize>,
    /// `--log-requests`: this worker's logged responses, and how many its cap left out.
    pub request_log: Vec<crate::request_log::Record>,
    pub not_logged: u64,
}

impl WorkerStats {
    pub fn new(open_loop: bool) -> Self {
        WorkerStats {
            responses: 0,
            status: BTreeMap::new(),
            errors: Errors::default(),
            bytes_read: 0,
            bytes_written: 0,
            reconnects: 0,
            connections_asked: 0,
            connections_established: 0,
            in_flight_at_end: 0,
            late_sends: 0,
            scheduled: 0,
            missed_sends: 0,
            assertions_checked: 0,
            latency: new_histogram(),
            latency_from_write: open_loop.then(new_histogram),
            cpu_user_us: 0,
            cpu_sys_us: 0,
            process_cpu_us: None,
            pinned_cpu: None,
            request_log: Vec::new(),
            not_logged: 0,
        }
    }
}

/// CPU time of the calling thread so far, (user µs, system µs), from /proc/thread-self/stat (no unsafe
/// getrusage binding needed; same clock-tick resolution).
pub fn thread_cpu_us() -> (u64, u64) {
    stat_cpu_us("/proc/thread-self/stat")
}

/// CPU time of the whole process so far (every thread, live or exited), user + system µs.
pub fn process_cpu_us() -> u64 {
    let (user, sys) = stat_cpu_us("/proc/self/stat");
    user + sys
}

/// utime and stime of a /proc/…/stat file, µs.
fn stat_cpu_us(path: &str) -> (u64, u64) {
    let Ok(stat) = std::fs::read_to_string(path) else { return (0, 0) };
    // The command name may contain spaces; the fields after its closing parenthesis are fixed.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return (0, 0) };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, so utime (14) and stime (15) are at indexes 11 and 12.
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let per_tick_us = 1_000_000 / clock_ticks_per_second();
    (ticks(11) * per_tick_us, ticks(12) * per_tick_us)
}

/// USER_HZ: 100 on every Linux ABI this runs on (it is fixed by the kernel ABI, not the config HZ).
fn clock_ticks_per_second() -> u64 {
    100
}
