//! One connection slot of a worker: its socket's state as the worker sees it (connecting, handshaking, ready,
//! given up on), its reusable write and read buffers, its response parser (HTTP/1.1) or HTTP/2 client, and the
//! requests it has outstanding. The worker (`worker`) drives it; the engine only knows the slot's number.

use std::collections::VecDeque;
use std::time::Instant;

use crate::h2;
use crate::http1::ResponseParser;

/// A request written (or queued for writing) on a connection, waiting for its response.
pub struct Sent {
    /// When the request was due: the open loop's schedule, or the write in closed loop.
    pub intended: Instant,
    pub written: Instant,
    /// A HEAD request: its response has no body whatever its headers say.
    pub head: bool,
    /// HTTP/2: its stream (0 over HTTP/1.1, where responses come in the order of `pending`).
    pub stream: u32,
}

/// What happens to a connection the worker gave up on, once the engine has closed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Connect again at once (a reconnect).
    Reconnect,
    /// Connect again after the worker's reconnect backoff (the connect itself failed).
    Backoff,
    /// The backoff is over: connect again (not counted as a reconnect: it never connected).
    Retry,
}

pub struct Conn {
    /// The engine has a socket for this slot (connecting or connected).
    pub open: bool,
    /// TLS: the TCP connect is done and the handshake under way.
    pub handshaking: bool,
    /// Ready for requests (with TLS: the handshake is done).
    pub connected: bool,
    pub established_once: bool,
    pub connect_started: Instant,
    pub retry_at: Option<Instant>,
    /// Given up on during an engine wait: closed right after it.
    pub doomed: Option<After>,
    pub wbuf: Vec<u8>,
    pub wpos: usize,
    /// In the worker's list of connections to write after the wait.
    pub flush_listed: bool,
    /// Response bytes received and not yet consumed by the parser (a partial head or chunk line).
    pub rbuf: Vec<u8>,
    pub parser: ResponseParser,
    pub pending: VecDeque<Sent>,
    pub body: Vec<u8>,
    pub head_ok: bool,
    /// Requests queued on this connection since it was opened (for `--requests-per-conn`).
    pub sent: u64,
    /// HTTP/2: the connection's client (None over HTTP/1.1, and until the connection is ready). Boxed: it is
    /// large, and a slot of an HTTP/1.1 run should not carry it.
    pub h2: Option<Box<h2::Client>>,
    /// HTTP/2: the stream whose response the assertions check (one at a time per connection; `head_ok` and
    /// `body` are its).
    pub checking: Option<u32>,
}

impl Conn {
    pub fn new(pipeline: usize) -> Self {
        Conn {
            open: false,
            handshaking: false,
            connected: false,
            established_once: false,
            connect_started: Instant::now(),
            retry_at: None,
            doomed: None,
            wbuf: Vec::with_capacity(512),
            wpos: 0,
            flush_listed: false,
            rbuf: Vec::new(),
            parser: ResponseParser::default(),
            pending: VecDeque::with_capacity(pipeline),
            body: Vec::new(),
            head_ok: true,
            sent: 0,
            h2: None,
            checking: None,
        }
    }

    /// A new socket is about to be connected in this slot: nothing of the previous one carries over (its
    /// outstanding requests were counted when it was given up on).
    pub fn reset_for_connect(&mut self) {
        self.connected = false;
        self.handshaking = false;
        self.sent = 0;
        self.retry_at = None;
        self.connect_started = Instant::now();
        self.wbuf.clear();
        self.wpos = 0;
        self.rbuf.clear();
        self.parser.reset();
        self.pending.clear();
        self.h2 = None;
        self.checking = None;
    }

    /// Room for another request: under the pipeline depth (HTTP/2: the streams asked for, and what the server
    /// allows at once) and, with `--requests-per-conn`, under the connection's last request.
    pub fn has_room(&self, pipeline: usize, requests_per_conn: Option<u64>) -> bool {
        self.pending.len() < pipeline
            && requests_per_conn.is_none_or(|n| self.sent < n)
            && self.h2.as_ref().is_none_or(|client| client.can_open())
    }

    /// Ready and not given up on: a request queued now will be written. HTTP/2: once the server's SETTINGS
    /// arrived, so no stream is opened past a limit the client has not heard of yet.
    pub fn usable(&self) -> bool {
        self.connected
            && self.doomed.is_none()
            && self.h2.as_ref().is_none_or(|client| client.counts().settings_received > 0)
    }
}
