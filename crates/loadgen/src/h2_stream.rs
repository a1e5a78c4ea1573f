//! The HTTP/2 client's streams: each open stream's record (where its response stands, its flow-control
//! windows, the request body still waiting for window) and the table of them, kept apart from `h2` because
//! this is the state that flow control works on, and it reads on its own: nothing here parses frames or
//! reports events, it only answers what `h2::Client` asks (which stream is this id, how much body may go now).
//!
//! Records are reused: a closed stream goes to a spare list with its body buffer, so opening a stream in steady
//! state allocates nothing.

use crate::h2_frame as frame;

/// Where a stream's response stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Response {
    /// No final head yet (1xx heads may have come).
    #[default]
    Head,
    /// The final head came: DATA, then END_STREAM or trailers.
    Body,
}

/// A receive window, the connection's or a stream's: what the server may still send, and what it sent since
/// our last WINDOW_UPDATE.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RecvWindow {
    window: i64,
    unacked: u32,
}

impl RecvWindow {
    pub(crate) fn new(size: u32) -> RecvWindow {
        RecvWindow { window: i64::from(size), unacked: 0 }
    }

    /// Sets what the server may send (what it sent unacknowledged stays counted).
    pub(crate) fn set(&mut self, size: u32) {
        self.window = i64::from(size);
    }

    /// Counts `flow` bytes received; false, counting nothing, when they exceed the window.
    pub(crate) fn take(&mut self, flow: u32) -> bool {
        if i64::from(flow) > self.window {
            return false;
        }
        self.window -= i64::from(flow);
        self.unacked += flow;
        true
    }

    /// Once half of `size` (the window we advertised) has been received, writes the WINDOW_UPDATE for
    /// `stream` (0: the connection) that gives it back; true when it did. The data is handed over at once, so
    /// received means consumed, and the server never stalls on us.
    pub(crate) fn replenish(&mut self, stream: u32, size: u32, out: &mut Vec<u8>) -> bool {
        if self.unacked < size / 2 || self.unacked == 0 {
            return false;
        }
        frame::write_window_update(out, stream, self.unacked);
        self.window += i64::from(self.unacked);
        self.unacked = 0;
        true
    }
}

/// One open stream. Closed ones go back to `Streams::spare` with their buffer.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    pub(crate) id: u32,
    /// A HEAD request: no body whatever `content-length` says.
    pub(crate) head_request: bool,
    pub(crate) response: Response,
    pub(crate) status: u16,
    pub(crate) content_length: Option<u64>,
    pub(crate) body_len: u64,
    /// What we may still send on it (can go negative when the server lowers its initial window).
    pub(crate) send_window: i64,
    /// What the server may still send on it.
    pub(crate) recv: RecvWindow,
    /// Request body bytes waiting for window, from `body_at` on.
    body: Vec<u8>,
    body_at: usize,
    /// END_STREAM sent: the request is complete.
    pub(crate) local_closed: bool,
}

impl Stream {
    /// The response has no body whatever its `content-length` says (a HEAD request, 204, 304).
    pub(crate) fn bodiless(&self) -> bool {
        self.head_request || self.status == 204 || self.status == 304
    }

    /// Writes as much of `data` (the rest of the stream's body) as its and the connection's windows and the
    /// frame size allow, END_STREAM on the frame that ends it; returns the bytes sent.
    fn send(&mut self, conn_window: &mut i64, max_frame: usize, data: &[u8], out: &mut Vec<u8>) -> usize {
        let mut sent = 0;
        while sent < data.len() {
            let room = self.send_window.min(*conn_window).min(max_frame as i64);
            if room <= 0 {
                break;
            }
            let n = (data.len() - sent).min(room as usize);
            let last = sent + n == data.len();
            frame::write_data(out, self.id, if last { frame::END_STREAM } else { 0 }, &data[sent..sent + n]);
            self.send_window -= n as i64;
            *conn_window -= n as i64;
            sent += n;
            self.local_closed = last;
        }
        sent
    }
}

/// What the table knows of a stream id.
pub(crate) enum Known {
    Open(usize),
    /// Ours, and over: frames on it are ignored (they were in flight).
    Closed,
    /// Never opened (or the server's, and it may not open any): a frame on it is a protocol error.
    Idle,
}

/// The streams of one connection: the open ones in id order (ids only grow, so a lookup is a binary search),
/// the spare records, and the next id to use.
#[derive(Debug)]
pub(crate) struct Streams {
    pub(crate) live: Vec<Stream>,
    /// The receive window each stream starts with (our SETTINGS_INITIAL_WINDOW_SIZE).
    recv_window: u32,
    spare: Vec<Stream>,
    /// Streams with request body waiting for window.
    blocked: usize,
    next_id: u32,
}

impl Streams {
    pub(crate) fn new(recv_window: u32) -> Streams {
        Streams { live: Vec::new(), recv_window, spare: Vec::new(), blocked: 0, next_id: 1 }
    }

    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// The id the next stream gets: 1, 3, 5…
    pub(crate) fn next_id(&self) -> u32 {
        self.next_id
    }

    pub(crate) fn find(&self, id: u32) -> Known {
        if id.is_multiple_of(2) || id >= self.next_id {
            return Known::Idle;
        }
        match self.live.binary_search_by_key(&id, |s| s.id) {
            Ok(i) => Known::Open(i),
            Err(_) => Known::Closed,
        }
    }

    /// Records stream `next_id` (its HEADERS already written): our windows for it, and as much of `body` as
    /// the server's windows allow written to `out`, the rest kept until `send_blocked` can send it.
    pub(crate) fn open(
        &mut self,
        head_request: bool,
        send_window: u32,
        body: &[u8],
        conn_window: &mut i64,
        max_frame: usize,
        out: &mut Vec<u8>,
    ) {
        let mut stream = self.spare.pop().unwrap_or_default();
        stream.id = self.next_id;
        stream.head_request = head_request;
        stream.response = Response::Head;
        stream.status = 0;
        stream.content_length = None;
        stream.body_len = 0;
        stream.send_window = i64::from(send_window);
        stream.recv = RecvWindow::new(self.recv_window);
        stream.body.clear();
        stream.body_at = 0;
        stream.local_closed = body.is_empty();
        if !body.is_empty() {
            let sent = stream.send(conn_window, max_frame, body, out);
            if sent < body.len() {
                stream.body.extend_from_slice(&body[sent..]);
                self.blocked += 1;
            }
        }
        self.live.push(stream);
        self.next_id += 2;
    }

    /// Forgets stream `i`, keeping its record (and body buffer) for the next `open`.
    pub(crate) fn close(&mut self, i: usize) {
        let stream = self.live.remove(i);
        if stream.body_at < stream.body.len() {
            self.blocked -= 1;
        }
        self.spare.push(stream);
    }

    /// Closes the lowest open stream above `last` (a GOAWAY's last stream id) and returns its id.
    pub(crate) fn close_first_above(&mut self, last: u32) -> Option<u32> {
        let from = self.live.partition_point(|s| s.id <= last);
        let stream = self.live.get(from)?.id;
        self.close(from);
        Some(stream)
    }

    /// Moves every open stream's send window by `delta` (the server changed SETTINGS_INITIAL_WINDOW_SIZE,
    /// §6.9.2), possibly below zero; false when one would exceed 2^31-1.
    pub(crate) fn shift_send_windows(&mut self, delta: i64) -> bool {
        for s in &mut self.live {
            s.send_window += delta;
            if s.send_window > i64::from(frame::MAX_WINDOW) {
                return false;
            }
        }
        true
    }

    /// Sends the request body that waited for window, oldest stream first, as far as the windows now allow.
    pub(crate) fn send_blocked(&mut self, conn_window: &mut i64, max_frame: usize, out: &mut Vec<u8>) {
        if self.blocked == 0 {
            return;
        }
        for stream in &mut self.live {
            if *conn_window <= 0 {
                break;
            }
            if stream.body_at >= stream.body.len() {
                continue;
            }
            let body = std::mem::take(&mut stream.body);
            let from = stream.body_at;
            stream.body_at += stream.send(conn_window, max_frame, &body[from..], out);
            stream.body = body;
            if stream.body_at == stream.body.len() {
                stream.body.clear();
                stream.body_at = 0;
                self.blocked -= 1;
            }
        }
    }
}
