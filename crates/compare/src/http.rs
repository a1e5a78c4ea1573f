//! A minimal blocking HTTP/1.1 client for readiness polls, probes and priming requests: one request per
//! connection (`Connection: close`), bodies framed by Content-Length, chunked encoding or the close. Load
//! itself always comes from loadgen.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// A complete response; header names are lowercase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Sends one request to 127.0.0.1:`port` and reads the whole response. `body` is sent with the given
/// content type; methods other than GET/HEAD get `Content-Length: 0` without one, as servers expect.
pub fn request(
    port: u16,
    method: &str,
    target: &str,
    body: Option<(&str, &[u8])>,
    timeout: Duration,
) -> io::Result<Response> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
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
    stream.write_all(&out)?;
    read_response(&mut stream, method == "HEAD")
}

fn read_response(stream: &mut impl Read, head_only: bool) -> io::Result<Response> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16384];
    // The head, and whatever of the body came with it.
    let (status, headers, head_len) = loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(bad(if buf.is_empty() { "connection closed before a response" } else { "truncated head" }));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut slots = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Response::new(&mut slots);
        match parsed.parse(&buf).map_err(|e| bad(format!("bad response head: {e}")))? {
            httparse::Status::Partial => continue,
            httparse::Status::Complete(len) => {
                let status = parsed.code.ok_or_else(|| bad("no status code"))?;
                let headers = parsed
                    .headers
                    .iter()
                    .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
                    .collect::<Vec<_>>();
                break (status, headers, len);
            }
        }
    };
    let mut response = Response { status, headers, body: Vec::new() };
    let rest = buf.split_off(head_len);
    if head_only || status == 204 || status == 304 || (100..200).contains(&status) {
        return Ok(response);
    }
    let chunked = response.header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = response.header("content-length").map(|v| v.trim().parse::<usize>());
    response.body = if chunked {
        read_chunked(stream, rest)?
    } else if let Some(length) = length {
        let length = length.map_err(|_| bad("bad content-length"))?;
        read_exact_len(stream, rest, length)?
    } else {
        let mut body = rest;
        stream.read_to_end(&mut body)?;
        body
    };
    Ok(response)
}

fn read_exact_len(stream: &mut impl Read, mut body: Vec<u8>, length: usize) -> io::Result<Vec<u8>> {
    let mut chunk = [0u8; 16384];
    while body.len() < length {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(bad(format!("body ended after {} of {length} bytes", body.len())));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(body)
}

fn read_chunked(stream: &mut impl Read, mut raw: Vec<u8>) -> io::Result<Vec<u8>> {
    let mut chunk = [0u8; 16384];
    let mut body = Vec::new();
    let mut pos = 0;
    loop {
        // Parse what we have; read more when a chunk is incomplete.
        if let Some(eol) = find_crlf(&raw[pos..]) {
            let line = String::from_utf8_lossy(&raw[pos..pos + eol]).into_owned();
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16).map_err(|_| bad(format!("bad chunk size {line:?}")))?;
            let start = pos + eol + 2;
            if size == 0 {
                return Ok(body); // trailers, if any, are not needed
            }
            if raw.len() >= start + size + 2 {
                body.extend_from_slice(&raw[start..start + size]);
                pos = start + size + 2;
                continue;
            }
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(bad("chunked body ended early"));
        }
        raw.extend_from_slice(&chunk[..n]);
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> io::Result<Response> {
        read_response(&mut &raw[..], false)
    }

    #[test]
    fn content_length() {
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
    fn truncated() {
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab").is_err());
        assert!(parse(b"").is_err());
    }
}
