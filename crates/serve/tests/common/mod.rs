//! Raw HTTP/1.1 over blocking sockets, so tests control every byte (partial heads, oversized heads, pipelining,
//! bodies never sent) and can watch a connection close. Every socket has a read and write timeout, so no test
//! can hang on a server that stops answering.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::convert::Infallible;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serve::{Limits, Request, Response, Server};
use tower::Service;

/// Upper bound on any single socket read or write in the tests.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Short limits so timeout tests run in about a second each.
pub fn test_limits() -> Limits {
    Limits {
        workers: 1,
        header_timeout: Duration::from_secs(1),
        keep_alive_timeout: Duration::from_secs(1),
        io_timeout: Duration::from_secs(3),
        max_header_bytes: 8192,
        body_limit: 1024,
        shutdown_timeout: Duration::from_secs(2),
        peer_addr: false,
    }
}

/// Binds `limits.workers` SO_REUSEPORT listeners on 127.0.0.1:0 and starts the server on them.
pub fn start<F, S>(limits: Limits, make_service: F) -> Server
where
    F: Fn() -> S + Send + Sync + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
    S::Future: 'static,
{
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("valid address");
    let listeners = serve::bind_reuseport(addr, limits.workers).expect("bind 127.0.0.1:0");
    Server::start(listeners, limits, make_service).expect("server starts")
}

/// `{"path": "<request path>"}` for every request.
pub async fn hello(req: Request) -> Result<Response, Infallible> {
    Ok(serve::json(http::StatusCode::OK, &serde_json::json!({ "path": req.uri().path() })))
}

/// A GET request head with a Host header and nothing else.
pub fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")
}

/// One parsed response.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    /// Names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }
}

/// A client connection: a blocking socket behind a buffer that persists across responses (pipelining).
pub struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    pub fn try_connect(addr: SocketAddr) -> io::Result<Client> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Client { reader: BufReader::new(stream) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.reader.get_ref().local_addr().expect("socket has a local address")
    }

    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let stream = self.reader.get_mut();
        stream.write_all(bytes)?;
        stream.flush()
    }

    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.try_send(bytes.as_ref()).expect("write request");
    }

    /// Sends one request and reads one response.
    pub fn request(&mut self, raw: impl AsRef<[u8]>) -> RawResponse {
        self.send(raw);
        self.read_response().expect("read response")
    }

    /// Reads one response, framed by Transfer-Encoding: chunked, Content-Length, or the end of the connection.
    pub fn read_response(&mut self) -> io::Result<RawResponse> {
        self.reader.get_ref().set_read_timeout(Some(IO_TIMEOUT))?;
        let status_line = self.read_line()?;
        if status_line.is_empty() {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before a response"));
        }
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        if !version.starts_with("HTTP/1.") {
            return Err(invalid(format!("bad status line {status_line:?}")));
        }
        let status: u16 =
            parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| invalid(format!("bad status {status_line:?}")))?;

        let mut headers = Vec::new();
        loop {
            let line = self.read_line()?;
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        let mut response = RawResponse { status, headers, body: Vec::new() };

        let chunked =
            response.header("transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        if chunked {
            response.body = self.read_chunked()?;
        } else if let Some(len) = response.header("content-length") {
            let len: usize = len.parse().map_err(|_| invalid(format!("bad content-length {len:?}")))?;
            let mut body = vec![0; len];
            self.reader.read_exact(&mut body)?;
            response.body = body;
        } else if !(status < 200 || status == 204 || status == 304) {
            self.reader.read_to_end(&mut response.body)?;
        }
        Ok(response)
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line()?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size, 16).map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
            if size == 0 {
                // Trailers, if any, end with an empty line.
                while !self.read_line()?.is_empty() {}
                return Ok(body);
            }
            let start = body.len();
            body.resize(start + size, 0);
            self.reader.read_exact(&mut body[start..])?;
            if !self.read_line()?.is_empty() {
                return Err(invalid("chunk not followed by CRLF".into()));
            }
        }
    }

    /// One line without its CRLF; empty at end of stream.
    fn read_line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }

    /// Like [`Client::wait_closed`], but returns how many bytes arrived before the close (`None`: still open).
    pub fn drain_until_closed(&mut self, within: Duration) -> Option<usize> {
        let start = Instant::now();
        let mut total = 0;
        loop {
            let remaining = within.saturating_sub(start.elapsed());
            if remaining.is_zero() {
                return None;
            }
            self.reader.get_ref().set_read_timeout(Some(remaining.max(Duration::from_millis(1)))).expect("timeout");
            match self.reader.fill_buf() {
                Ok([]) => return Some(total),
                Ok(data) => {
                    let n = data.len();
                    total += n;
                    self.reader.consume(n);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Some(total),
            }
        }
    }

    /// Waits up to `within` for the server to close the connection (EOF or reset), discarding anything it sends
    /// meanwhile. Returns how long that took, or `None` if the connection was still open at the deadline.
    pub fn wait_closed(&mut self, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        loop {
            let remaining = within.saturating_sub(start.elapsed());
            if remaining.is_zero() {
                return None;
            }
            let timeout = remaining.max(Duration::from_millis(1));
            self.reader.get_ref().set_read_timeout(Some(timeout)).expect("set read timeout");
            match self.reader.fill_buf() {
                Ok([]) => return Some(start.elapsed()),
                Ok(data) => {
                    let n = data.len();
                    self.reader.consume(n);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Reset, aborted: closed all the same.
                Err(_) => return Some(start.elapsed()),
            }
        }
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}
