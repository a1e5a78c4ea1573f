//! HTTP/2 requests for tests, through hyper's client: an implementation independent of the servers' (hyper's
//! server side is the same project, but the client is a separate state machine) and of loadgen's. Prior
//! knowledge (h2c) in cleartext, ALPN `h2` over TLS. Blocking, like [`crate::http`], and bounded by the same
//! [`IO_TIMEOUT`], so no test hangs on a server that stops answering.
//!
//! [`same_over_h2`] is the check every server's tests make: each request answered over HTTP/2 as over HTTP/1.1,
//! the same status, headers and body bytes, without the headers HTTP/2 forbids.

use std::io;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::http::{IO_TIMEOUT, Response};

/// One request: a method, a target (path and query), extra headers and an optional body. `:authority` is
/// `test`, as [`crate::http::request_bytes`]'s Host.
#[derive(Debug, Clone, Copy)]
pub struct Req<'a> {
    pub method: &'a str,
    pub target: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Option<&'a [u8]>,
}

impl<'a> Req<'a> {
    pub fn get(target: &'a str) -> Req<'a> {
        Req { method: "GET", target, headers: &[], body: None }
    }
}

/// What a connection negotiated and the answers it got.
#[derive(Debug)]
pub struct Exchange {
    /// The TLS ALPN protocol the server selected; None in cleartext (or when it selected none).
    pub alpn: Option<Vec<u8>>,
    /// One answer per request, in the order given. `head` is empty: HTTP/2 has no text head.
    pub responses: Vec<Response>,
}

/// Sends `requests` concurrently, as streams of one cleartext HTTP/2 connection (prior knowledge).
pub fn send(addr: SocketAddr, requests: &[Req<'_>]) -> io::Result<Exchange> {
    runtime()?.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        exchange(stream, None, requests).await
    })
}

/// The same over TLS, offering ALPN `h2` and `http/1.1` with `client`'s trust and groups. An error when the
/// server selects anything but `h2`.
pub fn send_tls(addr: SocketAddr, client: &crate::tls::Client, requests: &[Req<'_>]) -> io::Result<Exchange> {
    let config = client.config_with_alpn(&[b"h2", b"http/1.1"]);
    runtime()?.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let name = rustls::pki_types::ServerName::try_from("localhost").map_err(io::Error::other)?;
        let tls = tokio_rustls::TlsConnector::from(config).connect(name, stream).await?;
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        if alpn.as_deref() != Some(b"h2") {
            return Err(io::Error::other(format!(
                "the server selected ALPN {:?}, not h2",
                alpn.as_deref().map(String::from_utf8_lossy)
            )));
        }
        exchange(tls, alpn, requests).await
    })
}

/// One GET over cleartext HTTP/2, panicking when no answer comes.
pub fn get(addr: SocketAddr, target: &str) -> Response {
    let mut exchange = send(addr, &[Req::get(target)]).unwrap_or_else(|e| panic!("h2 GET {target}: {e}"));
    exchange.responses.remove(0)
}

fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

async fn exchange<T>(io: T, alpn: Option<Vec<u8>>, requests: &[Req<'_>]) -> io::Result<Exchange>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let work = async {
        let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .map_err(io::Error::other)?;
        let driver = tokio::spawn(conn);
        let mut pending = Vec::with_capacity(requests.len());
        for req in requests {
            let mut builder = http::Request::builder()
                .method(req.method)
                .uri(format!("http://test{}", req.target))
                .version(http::Version::HTTP_2);
            for (name, value) in req.headers {
                builder = builder.header(*name, *value);
            }
            let body = Full::new(Bytes::copy_from_slice(req.body.unwrap_or_default()));
            let request = builder.body(body).map_err(io::Error::other)?;
            let mut sender = sender.clone();
            pending.push(tokio::spawn(async move {
                let response = sender.send_request(request).await.map_err(io::Error::other)?;
                let (parts, body) = response.into_parts();
                let body = body.collect().await.map_err(io::Error::other)?.to_bytes().to_vec();
                let headers = parts
                    .headers
                    .iter()
                    .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).trim().to_string()))
                    .collect();
                Ok::<_, io::Error>(Response { status: parts.status.as_u16(), headers, head: Vec::new(), body })
            }));
        }
        let mut responses = Vec::with_capacity(pending.len());
        for task in pending {
            responses.push(task.await.map_err(io::Error::other)??);
        }
        driver.abort();
        Ok(Exchange { alpn, responses })
    };
    tokio::time::timeout(IO_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "no HTTP/2 answer within the IO timeout")))
}

/// Headers HTTP/2 forbids in a message (RFC 9113 §8.2.2).
const CONNECTION_SPECIFIC: [&str; 5] = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

/// Sends each request over HTTP/1.1 (one connection each, [`crate::http::request`]) and all of them as streams
/// of one HTTP/2 connection, and compares each pair with [`differences`]. Returns every difference, one per
/// line.
pub fn same_over_h2(addr: SocketAddr, requests: &[Req<'_>], volatile: &[&str]) -> Result<(), String> {
    let h2 = send(addr, requests).map_err(|e| format!("HTTP/2 to {addr}: {e}"))?;
    let mut found = Vec::new();
    for (req, over_h2) in requests.iter().zip(&h2.responses) {
        let over_h1 = crate::http::request(addr, req.method, req.target, req.headers, req.body);
        found.extend(differences(&format!("{} {}", req.method, req.target), &over_h1, over_h2, volatile));
    }
    if found.is_empty() { Ok(()) } else { Err(found.join("\n")) }
}

/// How an answer over HTTP/2 differs from one over HTTP/1.1, `what` naming it in each line: status, body bytes,
/// and headers (every name and value, in any order) but `date`, the connection-specific ones HTTP/1.1 may
/// carry, and those named in `volatile`, whose values change per request (a session cookie, a rate-limit
/// count): of those only the names must match. A connection-specific header in the HTTP/2 answer is a
/// difference too. Empty: the same answer.
pub fn differences(what: &str, over_h1: &Response, over_h2: &Response, volatile: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    if over_h1.status != over_h2.status {
        found.push(format!("{what}: status {} over HTTP/1.1, {} over HTTP/2", over_h1.status, over_h2.status));
    }
    if over_h1.body != over_h2.body {
        let start = |body: &[u8]| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        found.push(format!(
            "{what}: body of {} bytes {:?} over HTTP/1.1, of {} bytes {:?} over HTTP/2",
            over_h1.body.len(),
            start(&over_h1.body),
            over_h2.body.len(),
            start(&over_h2.body)
        ));
    }
    for (name, _) in &over_h2.headers {
        if CONNECTION_SPECIFIC.contains(&name.as_str()) {
            found.push(format!("{what}: HTTP/2 answer carries {name}"));
        }
    }
    let comparable = |response: &Response| {
        let mut fields: Vec<(String, String)> = response
            .headers
            .iter()
            .filter(|(name, _)| name != "date" && !CONNECTION_SPECIFIC.contains(&name.as_str()))
            .map(|(name, value)| {
                let value = if volatile.contains(&name.as_str()) { String::new() } else { value.clone() };
                (name.clone(), value)
            })
            .collect();
        fields.sort();
        fields
    };
    let (h1_fields, h2_fields) = (comparable(over_h1), comparable(over_h2));
    if h1_fields != h2_fields {
        found.push(format!("{what}: headers {h1_fields:?} over HTTP/1.1, {h2_fields:?} over HTTP/2"));
    }
    found
}
