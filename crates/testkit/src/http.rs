//! A blocking raw HTTP/1.1 client for tests: every socket has read and write timeouts, so no test can hang on
//! a server that stops answering, and requests go out byte for byte as written (bad input included).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Upper bound on any single socket read or write.
pub const IO_TIMEOUT: Duration = Duration::from_secs(15);

/// One parsed response.
#[derive(Debug)]
pub struct Res {
    pub status: u16,
    /// Names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Res {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts the status and returns the body text (for messages).
    pub fn expect_status(&self, status: u16, what: &str) -> String {
        assert_eq!(self.status, status, "{what}: expected {status}, got {} {:?}", self.status, self.text());
        self.text()
    }
}

/// Sends raw bytes on a new connection and reads one response. Write errors are ignored when a response
/// arrives anyway (a server may answer 413 and close before reading a body).
pub fn send_raw(addr: SocketAddr, bytes: &[u8]) -> io::Result<Res> {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let written = writer.write_all(bytes).and_then(|()| writer.flush());
    let mut reader = BufReader::new(stream);
    // A response to HEAD carries a Content-Length but no body.
    match read_response(&mut reader, bytes.starts_with(b"HEAD ")) {
        Ok(res) => Ok(res),
        Err(e) => Err(written.err().unwrap_or(e)),
    }
}

/// One request with `Connection: close`; a JSON body gets `Content-Type: application/json`.
pub fn try_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> io::Result<Res> {
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    send_raw(addr, &bytes)
}

pub fn request(addr: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Res {
    try_request(addr, method, target, headers, body).unwrap_or_else(|e| panic!("{method} {target}: {e}"))
}

pub fn get(addr: SocketAddr, target: &str) -> Res {
    request(addr, "GET", target, &[], None)
}

fn read_response(reader: &mut BufReader<TcpStream>, head: bool) -> io::Result<Res> {
    let status_line = read_line(reader)?;
    if status_line.is_empty() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before a response"));
    }
    let mut parts = status_line.splitn(3, ' ');
    if !parts.next().unwrap_or_default().starts_with("HTTP/1.") {
        return Err(invalid(format!("bad status line {status_line:?}")));
    }
    let status: u16 =
        parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| invalid(format!("bad status {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader)?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut res = Res { status, headers, body: Vec::new() };
    let chunked = res.header("transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if head {
        return Ok(res);
    }
    if chunked {
        loop {
            let line = read_line(reader)?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size, 16).map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
            if size == 0 {
                while !read_line(reader)?.is_empty() {}
                break;
            }
            let start = res.body.len();
            res.body.resize(start + size, 0);
            reader.read_exact(&mut res.body[start..])?;
            if !read_line(reader)?.is_empty() {
                return Err(invalid("chunk not followed by CRLF".into()));
            }
        }
    } else if let Some(len) = res.header("content-length") {
        let len: usize = len.parse().map_err(|_| invalid(format!("bad content-length {len:?}")))?;
        res.body = vec![0; len];
        reader.read_exact(&mut res.body)?;
    } else if !(status < 200 || status == 204 || status == 304) {
        reader.read_to_end(&mut res.body)?;
    }
    Ok(res)
}

fn read_line(reader: &mut BufReader<TcpStream>) -> io::Result<String> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
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
