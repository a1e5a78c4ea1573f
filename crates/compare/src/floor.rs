//! The "floor" runtime: the least an HTTP/1.1 server can do per request on this machine. It answers every
//! request with the same pre-serialized bytes, so its req/s and CPU-µs per response are the practical limit
//! the real servers are measured against (the kernel's TCP path plus the loader), not a competitor.
//!
//! One thread, one mio `Poll`, edge-triggered sockets registered once for read and write. Per connection a
//! fixed read buffer: complete request heads (`\r\n\r\n`) are counted and each one owes one copy of the
//! response, written with `writev` straight from the shared response bytes. Nothing is allocated per request.
//! While output is owed and the socket will not take it, nothing more is read: a client that pipelines
//! without reading stalls itself instead of growing our buffers.
//!
//! It is served by compare itself (`compare floor`, which the comparison execs like any runtime) rather than
//! by a binary of its own: it exists only as compare's baseline, and one binary means nothing more to build,
//! find or keep in step.

use std::io::{self, IoSlice, Read, Write};
use std::process::ExitCode;

use clap::Args;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

#[derive(Debug, Clone, Args)]
pub struct FloorArgs {
    #[arg(long, env = "COMPARE_FLOOR_PORT", default_value_t = 3000)]
    pub port: u16,
    #[arg(long, env = "COMPARE_FLOOR_HOSTNAME", default_value = "127.0.0.1")]
    pub hostname: String,
    /// The JSON body every response carries.
    #[arg(long, env = "COMPARE_FLOOR_BODY", default_value = "{}")]
    pub body: String,
}

/// `compare floor`: 64 when --body is not JSON, 1 when the port cannot be served; else it serves forever.
pub fn command(args: &FloorArgs) -> ExitCode {
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&args.body) {
        eprintln!("config error: --body is not JSON: {e}");
        return ExitCode::from(64);
    }
    let serve = || -> io::Result<()> {
        let listener = std::net::TcpListener::bind((args.hostname.as_str(), args.port))?;
        let port = listener.local_addr()?.port();
        println!("floor listening on http://{}:{port}", args.hostname);
        io::stdout().flush()?;
        run(listener, response(args.body.as_bytes()))
    };
    match serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compare: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Big enough for a deep pipeline of benchmark requests per read; also the largest request head accepted.
const READ_BUF: usize = 32 * 1024;
/// Responses handed to one `writev`.
const MAX_IOV: usize = 64;
const LISTENER: Token = Token(usize::MAX);

/// `HTTP/1.1 200 OK` with a JSON content type, the exact length, and `body`.
pub fn response(body: &[u8]) -> Vec<u8> {
    let mut out =
        format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len())
            .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Serves `listener` forever, answering every request with `response`. Returns only when setting up the
/// event loop fails or polling fails for good.
pub fn run(listener: std::net::TcpListener, response: Vec<u8>) -> io::Result<()> {
    if response.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "the floor's response must not be empty"));
    }
    listener.set_nonblocking(true)?;
    let mut listener = TcpListener::from_std(listener);
    let mut poll = Poll::new()?;
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut events = Events::with_capacity(1024);
    let mut conns = Slab::default();
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for event in events.iter() {
            if event.token() == LISTENER {
                accept_all(&listener, &poll, &mut conns);
                continue;
            }
            let id = event.token().0;
            let Some(conn) = conns.get_mut(id) else { continue };
            if event.is_readable() || event.is_read_closed() {
                conn.drained = false;
            }
            if event.is_read_closed() {
                // Data and FIN may have arrived together: read until 0 instead of trusting a short read.
                conn.peer_closed = true;
            }
            if event.is_error() || !conn.drive(&response) {
                // Dropping the stream closes it, which also removes it from the epoll set.
                conns.remove(id);
            }
        }
    }
}

fn accept_all(listener: &TcpListener, poll: &Poll, conns: &mut Slab) {
    loop {
        match listener.accept() {
            Ok((mut stream, _)) => {
                // Responses are whole and small: never hold one back waiting for an ACK.
                let _ = stream.set_nodelay(true);
                let id = conns.next_id();
                // A socket that cannot be registered is dropped (closed); the others keep being served.
                if poll.registry().register(&mut stream, Token(id), Interest::READABLE | Interest::WRITABLE).is_ok() {
                    conns.insert(Conn::new(stream));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                ) => {}
            // Out of descriptors or memory: stop accepting for this wakeup rather than spin; the next
            // connection attempt wakes us again.
            Err(_) => return,
        }
    }
}

/// Connections by token, reusing freed slots so tokens stay small and nothing grows per connection churn.
#[derive(Default)]
struct Slab {
    slots: Vec<Option<Conn>>,
    free: Vec<usize>,
}

impl Slab {
    fn next_id(&self) -> usize {
        self.free.last().copied().unwrap_or(self.slots.len())
    }

    fn insert(&mut self, conn: Conn) {
        match self.free.pop() {
            Some(id) => self.slots[id] = Some(conn),
            None => self.slots.push(Some(conn)),
        }
    }

    fn get_mut(&mut self, id: usize) -> Option<&mut Conn> {
        self.slots.get_mut(id).and_then(Option::as_mut)
    }

    fn remove(&mut self, id: usize) {
        if let Some(slot) = self.slots.get_mut(id)
            && slot.take().is_some()
        {
            self.free.push(id);
        }
    }
}

struct Conn {
    stream: TcpStream,
    buf: Box<[u8]>,
    /// Unparsed input is `buf[start..end]`; the head terminator is searched for from `scan` on, so bytes
    /// already searched are not searched again when a head arrives in pieces.
    start: usize,
    end: usize,
    scan: usize,
    /// Body bytes of the last request still to discard.
    skip: usize,
    /// Responses owed, and how much of the first one is already written.
    pending: usize,
    offset: usize,
    /// The socket is known to have nothing more to read until the next readable edge.
    drained: bool,
    /// The peer sent FIN (EPOLLRDHUP): keep reading until 0 even after a short read.
    peer_closed: bool,
    /// Input that cannot be framed arrived: answer what is owed for the requests before it, then close.
    closing: bool,
}

enum Flush {
    Done,
    Blocked,
    Failed,
}

impl Conn {
    fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            buf: vec![0; READ_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            scan: 0,
            skip: 0,
            pending: 0,
            offset: 0,
            drained: false,
            peer_closed: false,
            closing: false,
        }
    }

    /// Writes what is owed, then reads and parses, until the socket would block. Edge-triggered: returning
    /// before a `WouldBlock` (or a read known to have drained the socket) could wait forever. `false` closes.
    fn drive(&mut self, response: &[u8]) -> bool {
        loop {
            match self.flush(response) {
                Flush::Done => {}
                // The writable edge brings us back; input stays unread meanwhile (backpressure).
                Flush::Blocked => return true,
                Flush::Failed => return false,
            }
            if self.closing {
                return false;
            }
            if self.drained {
                return true;
            }
            if self.end == self.buf.len() {
                if self.start == 0 {
                    return false; // a head larger than the whole buffer
                }
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.scan -= self.start;
                self.start = 0;
            }
            let space = self.buf.len() - self.end;
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return false,
                Ok(n) => {
                    self.end += n;
                    // A short read emptied the socket (TCP); skipping the read that would only say EAGAIN
                    // saves a syscall per request. New data raises a new edge.
                    self.drained = n < space && !self.peer_closed;
                    self.closing = !self.parse();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.drained = true;
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// Counts complete request heads in the buffer, skipping declared bodies. `false`: unframeable input.
    fn parse(&mut self) -> bool {
        loop {
            if self.skip > 0 {
                let take = self.skip.min(self.end - self.start);
                self.start += take;
                self.skip -= take;
                if self.skip > 0 {
                    break;
                }
            }
            let from = self.scan.max(self.start);
            match find_head_end(&self.buf[from..self.end]) {
                Some(at) => {
                    let head_end = from + at + 4;
                    match body_length(&self.buf[self.start..head_end]) {
                        Some(len) => self.skip = len,
                        None => return false,
                    }
                    self.pending += 1;
                    self.start = head_end;
                    self.scan = head_end;
                }
                None => {
                    // The terminator may straddle this read and the next: rescan the last three bytes.
                    self.scan = self.end.saturating_sub(3).max(self.start);
                    break;
                }
            }
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.scan = 0;
        }
        true
    }

    fn flush(&mut self, response: &[u8]) -> Flush {
        while self.pending > 0 {
            let count = self.pending.min(MAX_IOV);
            let written = if count == 1 {
                self.stream.write(&response[self.offset..])
            } else {
                let mut slices = [IoSlice::new(response); MAX_IOV];
                slices[0] = IoSlice::new(&response[self.offset..]);
                self.stream.write_vectored(&slices[..count])
            };
            match written {
                Ok(0) => return Flush::Failed,
                Ok(n) => {
                    // Measured in whole responses from the start of the first owed one.
                    let total = self.offset + n;
                    self.pending -= total / response.len();
                    self.offset = total % response.len();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Flush::Blocked,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Flush::Failed,
            }
        }
        Flush::Done
    }
}

fn find_head_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|w| w == b"\r\n\r\n")
}

/// The body length a head declares: `Some(0)` without Content-Length, `None` when the body cannot be
/// framed here (a malformed length, or Transfer-Encoding, which the benchmarks never send).
fn body_length(head: &[u8]) -> Option<usize> {
    const CONTENT_LENGTH: &[u8] = b"content-length:";
    const TRANSFER_ENCODING: &[u8] = b"transfer-encoding:";
    let mut len = 0;
    for line in head.split(|&b| b == b'\n').skip(1) {
        if line.len() >= CONTENT_LENGTH.len() && line[..CONTENT_LENGTH.len()].eq_ignore_ascii_case(CONTENT_LENGTH) {
            let value = line[CONTENT_LENGTH.len()..].trim_ascii();
            if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
                return None;
            }
            len = std::str::from_utf8(value).ok()?.parse().ok()?;
        } else if line.len() >= TRANSFER_ENCODING.len()
            && line[..TRANSFER_ENCODING.len()].eq_ignore_ascii_case(TRANSFER_ENCODING)
        {
            return None;
        }
    }
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Shutdown, SocketAddr};
    use std::time::Duration;

    fn start(body: &[u8]) -> (SocketAddr, Vec<u8>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let resp = response(body);
        let served = resp.clone();
        // Blocks forever; the thread ends with the test process.
        std::thread::spawn(move || run(listener, served));
        (addr, resp)
    }

    fn connect(addr: SocketAddr) -> std::net::TcpStream {
        let stream = std::net::TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        stream.set_write_timeout(Some(Duration::from_secs(20))).expect("timeout");
        stream
    }

    #[test]
    fn response_has_exact_length() {
        assert_eq!(
            response(b"{\"a\":1}"),
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n{\"a\":1}".to_vec()
        );
    }

    #[test]
    fn pipelined_requests_get_one_response_each() {
        let (addr, resp) = start(b"{\"message\":\"floor\"}");
        let mut requests = Vec::new();
        for _ in 0..5 {
            requests.extend_from_slice(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
        }
        // A body that contains a head terminator: counted as a request only if the body were not skipped.
        requests.extend_from_slice(b"POST /b HTTP/1.1\r\nHost: x\r\nCONTENT-LENGTH: 6\r\n\r\na\r\n\r\nb");
        for _ in 0..4 {
            requests.extend_from_slice(b"GET /c HTTP/1.1\r\nHost: x\r\n\r\n");
        }
        let mut stream = connect(addr);
        stream.set_nodelay(true).expect("nodelay");
        // Small pieces, so heads (and the terminator) are split across reads.
        for piece in requests.chunks(7) {
            stream.write_all(piece).expect("write");
            std::thread::sleep(Duration::from_millis(1));
        }
        stream.shutdown(Shutdown::Write).expect("shutdown");
        let mut got = Vec::new();
        // Ends only when the server closes after our EOF, so extra responses would show up too.
        stream.read_to_end(&mut got).expect("read");
        assert_eq!(got, resp.repeat(10));
    }

    #[test]
    fn bad_framing_closes_the_connection() {
        let (addr, resp) = start(b"{}");
        let mut stream = connect(addr);
        stream.write_all(b"GET / HTTP/1.1\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello").expect("write");
        let mut got = Vec::new();
        stream.read_to_end(&mut got).expect("read");
        assert_eq!(got, resp);
    }

    #[test]
    fn a_burst_with_a_slow_reader_loses_nothing() {
        // A 1 KiB body makes the owed output (~30 MB) far larger than any socket buffer, so the server's
        // writes block and it must stop reading and resume later without losing a response.
        let (addr, resp) = start(&[b'x'; 1024]);
        let request: &[u8] = b"GET /burst HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        let count = (1 << 20) / request.len();
        let stream = connect(addr);
        let mut writer = stream.try_clone().expect("clone");
        let burst = request.repeat(count);
        let sender = std::thread::spawn(move || {
            writer.write_all(&burst).expect("write burst");
            writer.shutdown(Shutdown::Write).expect("shutdown");
        });
        let mut reader = stream;
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0usize;
        let mut reads = 0usize;
        loop {
            if reads < 40 {
                std::thread::sleep(Duration::from_millis(10));
            }
            let n = reader.read(&mut buf[..if reads < 40 { 1024 } else { 64 * 1024 }]).expect("read");
            if n == 0 {
                break;
            }
            // Every byte must be where the stream of identical responses puts it.
            for (i, &b) in buf[..n].iter().enumerate() {
                assert_eq!(b, resp[(total + i) % resp.len()], "byte {}", total + i);
            }
            total += n;
            reads += 1;
        }
        sender.join().expect("sender");
        assert_eq!(total, count * resp.len());
    }

    #[test]
    fn body_length_framing() {
        assert_eq!(body_length(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Some(0));
        assert_eq!(body_length(b"POST / HTTP/1.1\r\ncontent-length:  12 \r\n\r\n"), Some(12));
        assert_eq!(body_length(b"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"), None);
        assert_eq!(body_length(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), None);
    }
}
