//! The raw HTTP/1.1 client every test uses: requests go out byte for byte as written (malformed ones included),
//! responses are framed by loadgen's fuzzed parser ([`loadgen::http1::ResponseParser`]: Content-Length, chunked
//! with extensions and trailers, close-delimited, 1xx skipped, no body for HEAD, 204 and 304), and every socket
//! has read and write timeouts, so no test can hang on a server that stops answering.
//!
//! [`send_raw`] / [`request`] / [`get`] take one connection per request; [`Conn`] keeps one open for
//! pipelining, half-written requests and watching the server close it.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use loadgen::http1::{ParseError, ResponseParser};

/// Upper bound on any single socket read or write (change it per connection with [`Conn::set_timeout`]).
pub const IO_TIMEOUT: Duration = Duration::from_secs(15);

/// One response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Names lower-cased, values with surrounding whitespace trimmed (lossy UTF-8), in the order received;
    /// repeated headers stay separate.
    pub headers: Vec<(String, String)>,
    /// The final head exactly as received: status line, header lines and the empty line.
    pub head: Vec<u8>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every value of a header, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
    }

    /// True when any value of `name`, split on commas, equals `token` (case-insensitive).
    pub fn header_has_token(&self, name: &str, token: &str) -> bool {
        self.header_all(name).iter().flat_map(|v| v.split(',')).any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// The head's header lines as sent, split on CR LF only (a bare CR or LF stays inside its line), without
    /// the status line and the empty line.
    pub fn head_lines(&self) -> Vec<&[u8]> {
        let mut lines: Vec<&[u8]> = Vec::new();
        let mut rest = self.head.as_slice();
        while let Some(at) = rest.windows(2).position(|w| w == b"\r\n") {
            lines.push(&rest[..at]);
            rest = &rest[at + 2..];
        }
        if !rest.is_empty() {
            lines.push(rest); // a head that ended in bare LFs
        }
        lines.into_iter().skip(1).filter(|line| !line.is_empty()).collect()
    }

    /// Every value of a header as raw bytes (trimmed), read from [`Response::head_lines`]: values that are not
    /// UTF-8 stay exact.
    pub fn raw_header_all(&self, name: &str) -> Vec<&[u8]> {
        self.head_lines()
            .into_iter()
            .filter_map(|line| {
                let colon = line.iter().position(|b| *b == b':')?;
                line[..colon].eq_ignore_ascii_case(name.as_bytes()).then(|| line[colon + 1..].trim_ascii())
            })
            .collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics (showing status and body) when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): status {} {:?}", self.status, self.text()))
    }

    /// Asserts the status and returns the body text (for messages).
    pub fn expect_status(&self, status: u16, what: &str) -> String {
        assert_eq!(self.status, status, "{what}: expected {status}, got {} {:?}", self.status, self.text());
        self.text()
    }
}

/// A client connection: what the server sent beyond one response stays buffered for the next (pipelining).
/// After an error mid-response the connection is out of step; open a new one. Plain TCP, or TLS with
/// [`Conn::open_tls`] (the same calls then speak through rustls).
pub struct Conn {
    stream: Transport,
    /// Received and not yet parsed: the start of the next response.
    buf: Vec<u8>,
    /// Every read and write must be done by then ([`Conn::open_within`]).
    deadline: Option<Instant>,
}

impl Conn {
    /// Connects with [`IO_TIMEOUT`] on connect, reads and writes, and Nagle off.
    pub fn open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream: Transport::Plain(stream), buf: Vec::new(), deadline: None })
    }

    /// [`Conn::open`], then a TLS handshake trusting only `ca_pem` (ALPN `http/1.1`, server name `localhost`
    /// unless `server_name` says otherwise). The handshake is done when this returns.
    pub fn open_tls(addr: SocketAddr, client: &crate::tls::Client) -> io::Result<Conn> {
        let tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        tcp.set_read_timeout(Some(IO_TIMEOUT))?;
        tcp.set_write_timeout(Some(IO_TIMEOUT))?;
        tcp.set_nodelay(true)?;
        let mut tls = rustls::StreamOwned::new(client.connection()?, tcp);
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock)?;
        }
        Ok(Conn { stream: Transport::Tls(Box::new(tls)), buf: Vec::new(), deadline: None })
    }

    /// The TLS session of a [`Conn::open_tls`] connection (None for plain TCP).
    pub fn tls(&self) -> Option<&rustls::ClientConnection> {
        match &self.stream {
            Transport::Plain(_) => None,
            Transport::Tls(tls) => Some(&tls.conn),
        }
    }

    /// Like [`Conn::open`], but everything on this connection (connect, writes, reads) must be done within
    /// `within`: past it, an error of kind `TimedOut`.
    pub fn open_within(addr: SocketAddr, within: Duration) -> io::Result<Conn> {
        let deadline = Instant::now() + within;
        let stream = TcpStream::connect_timeout(&addr, within)?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream: Transport::Plain(stream), buf: Vec::new(), deadline: Some(deadline) })
    }

    /// The time left before the deadline, as a socket timeout (`None`: no deadline).
    fn time_left(&self) -> io::Result<Option<Duration>> {
        let Some(deadline) = self.deadline else { return Ok(None) };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "past the connection's deadline"));
        }
        Ok(Some(left))
    }

    /// [`Conn::open`], panicking when the connection fails.
    pub fn connect(addr: SocketAddr) -> Conn {
        Conn::open(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    /// The socket, for options and timeouts of its own.
    pub fn stream(&self) -> &TcpStream {
        self.stream.tcp()
    }

    /// The socket itself, for a test that drives it by hand (nothing was read from it yet, or what was is
    /// dropped; a TLS session is dropped with it).
    pub fn into_stream(self) -> TcpStream {
        match self.stream {
            Transport::Plain(tcp) => tcp,
            Transport::Tls(tls) => tls.sock,
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.stream().local_addr().expect("a connected socket has a local address")
    }

    /// Read and write timeout from now on.
    pub fn set_timeout(&self, timeout: Duration) {
        self.stream().set_read_timeout(Some(timeout)).expect("set read timeout");
        self.stream().set_write_timeout(Some(timeout)).expect("set write timeout");
    }

    /// Writes bytes as they are (a partial request, a malformed one, several pipelined).
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        if let Some(left) = self.time_left()? {
            self.stream().set_write_timeout(Some(left))?;
        }
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// [`Conn::write`], panicking when the write fails.
    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.write(bytes.as_ref()).expect("write the request");
    }

    /// Sends one request and reads its response (no body expected when it is a HEAD request).
    pub fn request(&mut self, bytes: impl AsRef<[u8]>) -> Response {
        let bytes = bytes.as_ref();
        self.send(bytes);
        self.read_for(is_head(bytes)).unwrap_or_else(|e| panic!("{:?}: no response: {e}", first_line(bytes)))
    }

    /// The next response, to a request that was not HEAD. An error of kind `UnexpectedEof` when the server
    /// closed the connection first.
    pub fn read_response(&mut self) -> io::Result<Response> {
        self.read_for(false)
    }

    /// The next response, to a HEAD request: its head only, whatever Content-Length says.
    pub fn read_head_response(&mut self) -> io::Result<Response> {
        self.read_for(true)
    }

    /// The next response (`head_request`: it answers HEAD), or `None` when the server closed the connection
    /// cleanly before sending any byte of one.
    pub fn next_response(&mut self, head_request: bool) -> io::Result<Option<Response>> {
        let mut parser = ResponseParser::default();
        let (mut status, mut headers, mut head, mut body) = (0, Vec::new(), None, Vec::new());
        let mut consumed_any = false;
        loop {
            if head.is_none() {
                head = final_head(&self.buf).map(|range| self.buf[range].to_vec());
            }
            let mut on_head = |code: u16, fields: &[httparse::Header<'_>]| {
                status = code;
                headers = fields
                    .iter()
                    .map(|h| {
                        let value = String::from_utf8_lossy(h.value.trim_ascii()).into_owned();
                        (h.name.to_ascii_lowercase(), value)
                    })
                    .collect();
            };
            let (used, done) =
                parser.parse(&self.buf, head_request, &mut on_head, Some(&mut body)).map_err(parse_error)?;
            self.buf.drain(..used);
            consumed_any |= used > 0;
            if let Some(done) = done {
                debug_assert_eq!(done.status, status);
                return Ok(Some(Response { status, headers, head: head.unwrap_or_default(), body }));
            }
            if self.fill()? == 0 {
                if !consumed_any && self.buf.is_empty() && parser.idle() {
                    return Ok(None);
                }
                return match parser.eof().map_err(parse_error)? {
                    Some(_) => Ok(Some(Response { status, headers, head: head.unwrap_or_default(), body })),
                    None => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-head")),
                };
            }
        }
    }

    fn read_for(&mut self, head_request: bool) -> io::Result<Response> {
        self.next_response(head_request)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before a response"))
    }

    /// Everything the server sends until it closes the connection, what was buffered first. A reset or a
    /// read timeout ends it too, keeping what arrived.
    pub fn read_until_close(&mut self) -> Vec<u8> {
        while matches!(self.fill(), Ok(n) if n > 0) {}
        std::mem::take(&mut self.buf)
    }

    /// Waits up to `within` for the server to close the connection (EOF or reset), discarding anything it
    /// sends meanwhile. How long that took, or `None` if it was still open at the deadline.
    pub fn wait_closed(&mut self, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        self.drain_until_closed(within).map(|_| start.elapsed())
    }

    /// Like [`Conn::wait_closed`], but returns how many bytes arrived before the close (`None`: still open).
    pub fn drain_until_closed(&mut self, within: Duration) -> Option<usize> {
        let start = Instant::now();
        let mut total = std::mem::take(&mut self.buf).len();
        let mut chunk = [0u8; 16 * 1024];
        let closed = loop {
            let remaining = within.saturating_sub(start.elapsed());
            if remaining.is_zero() {
                break None;
            }
            self.stream().set_read_timeout(Some(remaining.max(Duration::from_millis(1)))).expect("set read timeout");
            match self.stream.read(&mut chunk) {
                Ok(0) => break Some(total),
                Ok(n) => total += n,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Reset, aborted: closed all the same.
                Err(_) => break Some(total),
            }
        };
        let _ = self.stream().set_read_timeout(Some(IO_TIMEOUT));
        closed
    }

    /// One read into the buffer: how many bytes came (0 at end of stream).
    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some(left) = self.time_left()? {
                self.stream().set_read_timeout(Some(left))?;
            }
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Where the final (non-1xx) head in `buf` lies, once it is all there.
fn final_head(buf: &[u8]) -> Option<std::ops::Range<usize>> {
    let mut at = 0;
    loop {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut res = httparse::Response::new(&mut fields);
        let httparse::Status::Complete(n) = res.parse(&buf[at..]).ok()? else { return None };
        match res.code {
            Some(code) if (100..200).contains(&code) && code != 101 => at += n,
            _ => return Some(at..at + n),
        }
    }
}

fn parse_error(e: ParseError) -> io::Error {
    let kind = if e == ParseError::Truncated { io::ErrorKind::UnexpectedEof } else { io::ErrorKind::InvalidData };
    io::Error::new(kind, e)
}

fn is_head(request: &[u8]) -> bool {
    request.starts_with(b"HEAD ")
}

/// The request line, for failure messages.
pub fn first_line(request: &[u8]) -> String {
    let end = request.iter().position(|b| *b == b'\r' || *b == b'\n').unwrap_or(request.len()).min(300);
    String::from_utf8_lossy(&request[..end]).into_owned()
}

/// The bytes of one request: the request line, `Host: test`, `Connection: close`, `headers` byte for byte,
/// then the body with its Content-Length. POST, PUT and PATCH without a body get `Content-Length: 0` unless
/// `headers` carries one.
pub fn request_bytes(method: &str, target: &[u8], headers: &[(&str, &[u8])], body: Option<&[u8]>) -> Vec<u8> {
    let mut raw = Vec::with_capacity(256 + body.map_or(0, <[u8]>::len));
    raw.extend_from_slice(method.as_bytes());
    raw.push(b' ');
    raw.extend_from_slice(target);
    raw.extend_from_slice(b" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (name, value) in headers {
        raw.extend_from_slice(name.as_bytes());
        raw.extend_from_slice(b": ");
        raw.extend_from_slice(value);
        raw.extend_from_slice(b"\r\n");
    }
    let has_length = headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-length"));
    match body {
        Some(body) => raw.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes()),
        None if !has_length && matches!(method, "POST" | "PUT" | "PATCH") => {
            raw.extend_from_slice(b"Content-Length: 0\r\n");
        }
        None => {}
    }
    raw.extend_from_slice(b"\r\n");
    raw.extend_from_slice(body.unwrap_or_default());
    raw
}

/// Sends raw bytes on a new connection and reads one response. Write errors are ignored when a response
/// arrives anyway (a server may answer 413 or 431 and close before reading everything).
pub fn send_raw(addr: SocketAddr, bytes: &[u8]) -> io::Result<Response> {
    let mut conn = Conn::open(addr)?;
    let written = conn.write(bytes);
    match conn.read_for(is_head(bytes)) {
        Ok(res) => Ok(res),
        Err(e) => Err(written.err().unwrap_or(e)),
    }
}

/// [`send_raw`], panicking (with the request line) when no response comes.
pub fn send(addr: SocketAddr, bytes: &[u8]) -> Response {
    send_raw(addr, bytes).unwrap_or_else(|e| panic!("{:?} to {addr}: {e}", first_line(bytes)))
}

/// One request ([`request_bytes`]); a body gets `Content-Type: application/json` unless `headers` names one.
pub fn try_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> io::Result<Response> {
    let mut fields: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
    if body.is_some() && !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
        fields.push(("Content-Type", b"application/json"));
    }
    send_raw(addr, &request_bytes(method, target.as_bytes(), &fields, body))
}

/// [`try_request`], panicking when no response comes.
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Response {
    try_request(addr, method, target, headers, body).unwrap_or_else(|e| panic!("{method} {target}: {e}"))
}

pub fn get(addr: SocketAddr, target: &str) -> Response {
    request(addr, "GET", target, &[], None)
}

/// Percent-encodes everything but RFC 3986 unreserved characters (as encodeURIComponent, roughly).
pub fn enc(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() * 3);
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What a [`Conn`] reads and writes through.
enum Transport {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Transport {
    fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(tcp) => tcp,
            Transport::Tls(tls) => &tls.sock,
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(tcp) => tcp.read(buf),
            // A server that closes without close_notify (most do, after a response with Connection: close)
            // ends the stream like a plain close would.
            Transport::Tls(tls) => match tls.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                other => other,
            },
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(tcp) => tcp.write(buf),
            Transport::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(tcp) => tcp.flush(),
            Transport::Tls(tls) => tls.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server that answers every connection with `reply` (then closes), recording nothing.
    fn serve_once(reply: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(reply);
            }
        });
        addr
    }

    #[test]
    fn pipelined_responses_keep_their_heads_and_bodies() {
        let addr = serve_once(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n\
              3;e=1\r\nabc\r\n0\r\nT: x\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nnoHTTP/1.1 200 OK\r\n\r\nrest",
        );
        let mut conn = Conn::connect(addr);
        conn.send(b"GET / HTTP/1.1\r\n\r\n");
        let first = conn.read_response().expect("first");
        assert_eq!((first.status, first.body.as_slice(), first.header("x-a")), (200, &b"abc"[..], Some("1")));
        assert!(first.head.starts_with(b"HTTP/1.1 200 OK\r\n") && first.head.ends_with(b"chunked\r\n\r\n"));
        assert_eq!(first.head_lines(), vec![&b"X-A: 1"[..], b"Transfer-Encoding: chunked"]);
        let second = conn.read_response().expect("second");
        assert_eq!((second.status, second.text().as_str()), (404, "no"));
        let third = conn.read_response().expect("close-delimited");
        assert_eq!(third.text(), "rest");
        assert!(conn.next_response(false).expect("clean end").is_none());
    }

    #[test]
    fn bare_lf_stays_visible_in_the_raw_head() {
        let addr = serve_once(b"HTTP/1.1 200 OK\r\nX-A: a\nX-Injected: b\r\nContent-Length: 0\r\n\r\n");
        let res = send_raw(addr, b"GET / HTTP/1.1\r\n\r\n").expect("a response");
        assert_eq!(res.header("x-injected"), Some("b"), "httparse reads a bare LF as a line end");
        assert_eq!(res.head_lines()[0], b"X-A: a\nX-Injected: b", "the raw line still shows it");
        assert_eq!(res.raw_header_all("x-a"), vec![&b"a\nX-Injected: b"[..]]);
    }

    #[test]
    fn truncated_and_malformed_responses_are_errors() {
        let cut = send_raw(serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc"), b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(cut.expect_err("cut short").kind(), io::ErrorKind::UnexpectedEof);
        let bad = send_raw(serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\na"), b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(bad.expect_err("bad length").kind(), io::ErrorKind::InvalidData);
        let head = send_raw(serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), b"HEAD / HTTP/1.1\r\n\r\n");
        assert!(head.expect("HEAD").body.is_empty());
    }

    #[test]
    fn request_bytes_frames_bodies() {
        let post = request_bytes("POST", b"/x", &[("X-Raw", b"\xff")], None);
        assert_eq!(
            post,
            b"POST /x HTTP/1.1\r\nHost: test\r\nConnection: close\r\nX-Raw: \xff\r\nContent-Length: 0\r\n\r\n"
        );
        let put = request_bytes("PUT", b"/y", &[], Some(b"{}"));
        assert!(put.ends_with(b"Content-Length: 2\r\n\r\n{}"));
    }
}
