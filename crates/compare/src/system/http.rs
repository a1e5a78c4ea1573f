//! compare's one HTTP client, blocking and for a few requests at a time: readiness polls, probes, priming
//! requests and seeding, in cleartext or over TLS (rustls, with the run's pinned parameters), HTTP/1.1 or h2c.
//! Responses are framed by loadgen's parser ([`loadgen::http1`], the one the load itself is measured
//! with): Content-Length, chunked or close-delimited bodies, no body for HEAD, 204 and 304, interim 1xx
//! responses skipped; h2c by loadgen's HTTP/2 client ([`loadgen::h2`]), for the servers of an h2c workload that
//! take nothing else (node:http2's cleartext server). Load itself always comes from loadgen.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;

use loadgen::http1::ResponseParser;

/// A complete response; header names are lowercase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The server closes the connection after this response.
    pub close: bool,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// One connection, reusable while the server keeps it open; every read and write under a timeout.
pub struct Conn<S = TcpStream> {
    stream: S,
    /// Bytes read and not yet parsed.
    buf: Vec<u8>,
    parser: ResponseParser,
}

impl Conn {
    /// Connects to the first address of `authority` (`host:port`) that answers.
    pub fn connect(authority: &str, timeout: Duration) -> io::Result<Conn> {
        let mut last = None;
        for addr in authority.to_socket_addrs()? {
            match Conn::connect_addr(addr, timeout) {
                Ok(conn) => return Ok(conn),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{authority}: no address"))))
    }

    fn connect_addr(addr: SocketAddr, timeout: Duration) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(Conn::over(stream))
    }
}

impl<S: Read + Write> Conn<S> {
    fn over(stream: S) -> Conn<S> {
        Conn { stream, buf: Vec::new(), parser: ResponseParser::default() }
    }

    /// Sends one request (head and body, as given) and reads its whole response.
    pub fn exchange(&mut self, request: &[u8], head_request: bool) -> io::Result<Response> {
        self.stream.write_all(request)?;
        self.read_response(head_request)
    }

    fn read_response(&mut self, head_request: bool) -> io::Result<Response> {
        let mut head: Option<(u16, Vec<(String, String)>)> = None;
        let mut body = Vec::new();
        let mut chunk = [0u8; 16384];
        loop {
            let mut on_head = |status: u16, headers: &[httparse::Header<'_>]| {
                let headers = headers
                    .iter()
                    .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
                    .collect();
                head = Some((status, headers));
            };
            let (used, done) = self
                .parser
                .parse(&self.buf, head_request, &mut on_head, Some(&mut body))
                .map_err(|e| bad(format!("bad response: {e}")))?;
            self.buf.drain(..used);
            let done = match done {
                Some(done) => Some(done),
                None => {
                    let n = self.stream.read(&mut chunk)?;
                    if n > 0 {
                        self.buf.extend_from_slice(&chunk[..n]);
                        continue;
                    }
                    self.parser.eof().map_err(|e| bad(format!("bad response: {e}")))?
                }
            };
            let Some(done) = done else { return Err(bad("connection closed before a response")) };
            let (status, headers) = head.take().unwrap_or((done.status, Vec::new()));
            return Ok(Response { status, headers, body, close: done.close });
        }
    }
}

/// Where a server listens on 127.0.0.1, and how to speak to it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub port: u16,
    /// HTTPS with this client configuration; None: cleartext.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Cleartext HTTP/2 by prior knowledge instead of HTTP/1.1 (ignored with TLS).
    pub h2c: bool,
}

impl Endpoint {
    pub fn cleartext(port: u16) -> Endpoint {
        Endpoint { port, tls: None, h2c: false }
    }
}

/// Sends one request to 127.0.0.1:`port` on a connection of its own (`Connection: close`) and reads the
/// whole response. `body` is sent with the given content type; methods other than GET/HEAD get
/// `Content-Length: 0` without one, as servers expect. `headers` go out as given.
pub fn request(
    endpoint: &Endpoint,
    method: &str,
    target: &str,
    body: Option<(&str, &[u8])>,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> io::Result<Response> {
    let port = endpoint.port;
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match body {
        Some((content_type, bytes)) => {
            head.push_str(&format!("Content-Type: {content_type}\r\nContent-Length: {}\r\n", bytes.len()))
        }
        None if method != "GET" && method != "HEAD" => head.push_str("Content-Length: 0\r\n"),
        None => {}
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if let Some((_, bytes)) = body {
        out.extend_from_slice(bytes);
    }
    let mut conn = Conn::connect_addr(SocketAddr::from((Ipv4Addr::LOCALHOST, port)), timeout)?;
    let head_request = method == "HEAD";
    match &endpoint.tls {
        None if endpoint.h2c => h2c_exchange(conn.stream, &out),
        None => conn.exchange(&out, head_request),
        Some(config) => {
            let name = ServerName::IpAddress(Ipv4Addr::LOCALHOST.into());
            let tls = rustls::ClientConnection::new(config.clone(), name).map_err(io::Error::other)?;
            // The handshake runs inside the first write, under the socket's timeouts.
            Conn::over(rustls::StreamOwned::new(tls, conn.stream)).exchange(&out, head_request)
        }
    }
}

/// One request (`request`: its HTTP/1.1 bytes, which loadgen's client converts) as stream 1 of a new h2c
/// connection, read until that stream ends; bounded by the socket's timeouts.
fn h2c_exchange(mut stream: TcpStream, request: &[u8]) -> io::Result<Response> {
    use loadgen::h2::{Client, Config, Event};
    let mut client = Client::new(Config::default());
    let mut out = Vec::new();
    client.start(&mut out);
    let id = client.open(&mut out, request).map_err(|e| bad(format!("h2c request: {e}")))?;
    let (mut status, mut headers, mut body, mut done) = (0, Vec::new(), Vec::new(), None);
    let mut input = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    while done.is_none() {
        stream.write_all(&out)?;
        out.clear();
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(bad("the server closed the h2c connection before answering"));
        }
        input.extend_from_slice(&chunk[..n]);
        let used = client
            .receive(&input, &mut out, &mut |event| match event {
                Event::Head { stream, status: s, headers: fields } if stream == id => {
                    status = s;
                    headers = fields
                        .iter()
                        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).trim().to_string()))
                        .collect();
                }
                Event::Data { stream, bytes } if stream == id => body.extend_from_slice(bytes),
                Event::Done { stream, .. } if stream == id => done = Some(Ok(())),
                Event::Reset { stream, code } if stream == id => {
                    done = Some(Err(bad(format!("h2c stream reset ({})", loadgen::h2_frame::error_name(code)))));
                }
                Event::Unprocessed { stream } if stream == id => done = Some(Err(bad("h2c stream not processed"))),
                _ => {}
            })
            .map_err(|e| bad(e.to_string()))?;
        input.drain(..used);
    }
    done.unwrap_or(Ok(()))?;
    Ok(Response { status, headers, body, close: true })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "connection" whose reads come from `raw`; writes go nowhere.
    struct Canned<'a>(&'a [u8]);

    impl Read for Canned<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            self.0.read(out)
        }
    }

    impl Write for Canned<'_> {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn parse(raw: &[u8]) -> io::Result<Response> {
        Conn::over(Canned(raw)).read_response(false)
    }

    #[test]
    fn a_content_length_body_is_read_to_its_length() {
        let r = parse(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}junk")
            .expect("parses");
        assert_eq!(
            (r.status, r.body.as_slice(), r.header("content-type")),
            (200, &b"{}"[..], Some("application/json"))
        );
    }

    #[test]
    fn chunked_and_close_delimited() {
        let r = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n")
            .expect("parses");
        assert_eq!(r.body, b"abcde");
        let r = parse(b"HTTP/1.0 404 Not Found\r\n\r\nnull").expect("parses");
        assert_eq!((r.status, r.body.as_slice()), (404, &b"null"[..]));
    }

    #[test]
    fn a_truncated_or_empty_answer_is_an_error() {
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab").is_err());
        assert!(parse(b"").is_err());
    }
}
