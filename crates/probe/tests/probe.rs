//! The probe binary against real sockets on 127.0.0.1: the exit code and the stderr line a health check sees.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

fn probe(args: &[&str]) -> Output {
    Command::new(testkit::workspace::binary("probe")).args(args).output().expect("the probe binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Serves one connection: reads the request head, hands it to the test, then lets `answer` write the reply.
fn serve_once(answer: impl FnOnce(&mut TcpStream) + Send + 'static) -> (u16, mpsc::Receiver<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().expect("bound address").port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept the probe");
        let mut head = Vec::new();
        let mut reader = BufReader::new(stream.try_clone().expect("clone the socket"));
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).expect("read the request") == 0 || line == "\r\n" {
                break;
            }
            head.push(line.trim_end().to_string());
        }
        let _ = tx.send(head);
        answer(&mut stream);
    });
    (port, rx)
}

fn reply(status_and_rest: &'static str) -> impl FnOnce(&mut TcpStream) + Send + 'static {
    move |s: &mut TcpStream| {
        let _ = s.write_all(status_and_rest.as_bytes());
    }
}

#[test]
fn a_200_exits_0_after_one_well_formed_get() {
    let (port, head) = serve_once(reply("HTTP/1.1 200 OK\r\ncontent-length: 15\r\n\r\n{\"status\":\"ok\"}"));
    let out = probe(&[&format!("http://127.0.0.1:{port}/healthz")]);
    assert!(out.status.success(), "exit {:?}, stderr {}", out.status, stderr(&out));
    assert!(out.stderr.is_empty() && out.stdout.is_empty());
    let head = head.recv_timeout(Duration::from_secs(5)).expect("the server saw a request");
    assert_eq!(head[0], "GET /healthz HTTP/1.1");
    assert!(head.contains(&format!("Host: 127.0.0.1:{port}")), "{head:?}");
    assert!(head.contains(&"Connection: close".to_string()), "{head:?}");
}

#[test]
fn any_2xx_passes_even_when_the_status_line_arrives_in_pieces() {
    let (port, _head) = serve_once(|s: &mut TcpStream| {
        s.write_all(b"HTTP/1.1 2").expect("write");
        s.flush().expect("flush");
        thread::sleep(Duration::from_millis(50));
        s.write_all(b"04 No Content\r\n\r\n").expect("write");
    });
    let out = probe(&[&format!("http://127.0.0.1:{port}/"), "--timeout-ms", "5000"]);
    assert!(out.status.success(), "stderr {}", stderr(&out));
}

#[test]
fn a_503_exits_1_naming_the_status() {
    let (port, _head) = serve_once(reply("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"));
    let out = probe(&[&format!("http://127.0.0.1:{port}/healthz")]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("status 503 Service Unavailable"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
fn a_404_and_a_redirect_fail_too() {
    for status in ["404 Not Found", "301 Moved Permanently"] {
        let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
        let (port, _head) = serve_once(move |s: &mut TcpStream| {
            let _ = s.write_all(answer.as_bytes());
        });
        let out = probe(&[&format!("http://127.0.0.1:{port}/")]);
        assert_eq!(out.status.code(), Some(1), "{status}");
    }
}

#[test]
fn no_listener_exits_1() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        listener.local_addr().expect("bound address").port()
    };
    let out = probe(&[&format!("http://127.0.0.1:{port}/healthz")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot connect"), "{}", stderr(&out));
}

#[test]
fn a_server_that_never_answers_fails_within_the_timeout() {
    // Accepted by the kernel (backlog) but never answered: connect succeeds, the read must time out.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().expect("bound address").port();
    let started = Instant::now();
    let out = probe(&[&format!("http://127.0.0.1:{port}/healthz"), "--timeout-ms", "300"]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no answer within 300 ms"), "{}", stderr(&out));
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(3), "took {took:?}");
    drop(listener);
}

#[test]
fn a_server_that_accepts_then_stalls_mid_line_fails_within_the_timeout() {
    let (port, _head) = serve_once(|s: &mut TcpStream| {
        let _ = s.write_all(b"HTTP/1.1 200");
        thread::sleep(Duration::from_secs(3));
    });
    let started = Instant::now();
    let out = probe(&[&format!("http://127.0.0.1:{port}/"), "--timeout-ms=400"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}

#[test]
fn closing_without_an_answer_or_answering_garbage_exits_1() {
    let (port, _head) = serve_once(|_s: &mut TcpStream| {});
    let out = probe(&[&format!("http://127.0.0.1:{port}/")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("connection closed before a status line"), "{}", stderr(&out));

    let (port, _head) = serve_once(reply("SSH-2.0-OpenSSH_9.2\r\n"));
    let out = probe(&[&format!("http://127.0.0.1:{port}/")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not an HTTP/1.x status line"), "{}", stderr(&out));
}

#[test]
fn usage_errors_exit_1_never_2() {
    for args in [&[][..], &["localhost:3000/healthz"], &["http://127.0.0.1:1/", "--timeout-ms", "soon"]] {
        let out = probe(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&out).lines().count(), 1, "{args:?}: {}", stderr(&out));
    }
    let out = probe(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("usage: probe"));
}

// ------------------------------------------------------------------------------------------------------------
// https://: a rustls server in the test, with a throwaway CA and certificate (crates/certs)
// ------------------------------------------------------------------------------------------------------------

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

type TlsStream = StreamOwned<ServerConnection, TcpStream>;

/// A fresh CA and server certificate for `names`, written to a temp dir (ca.pem, cert.pem = leaf + CA).
struct Pki {
    bundle: certs::Bundle,
    files: certs::Files,
    _dir: tempfile::TempDir,
}

impl Pki {
    fn new(names: &[&str]) -> Pki {
        let bundle = certs::Bundle::generate(names).expect("generate a certificate");
        let dir = tempfile::tempdir().expect("a temp dir");
        let files = bundle.write(dir.path()).expect("write the certificate");
        Pki { bundle, files, _dir: dir }
    }

    fn ca(&self) -> &str {
        self.files.ca.to_str().expect("a UTF-8 temp path")
    }

    /// The servers' configuration as serve builds it: this certificate, ALPN http/1.1, `versions` only.
    fn server(&self, versions: &[&'static rustls::SupportedProtocolVersion]) -> Arc<ServerConfig> {
        let chain = CertificateDer::pem_slice_iter(self.bundle.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("the chain's PEM");
        let key = PrivateKeyDer::from_pem_slice(self.bundle.key_pem.as_bytes()).expect("the key's PEM");
        let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_protocol_versions(versions)
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("a usable certificate and key");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

const BOTH: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

/// What the server saw of one connection: the negotiated version and ALPN protocol and the request head, or
/// why the handshake or the request failed on its side.
#[derive(Debug)]
struct Seen {
    version: String,
    alpn: String,
    head: Vec<String>,
}

/// Serves one TLS connection: the handshake and the request head, which it reports, then `answer`.
fn serve_tls_once(
    config: Arc<ServerConfig>,
    answer: impl FnOnce(&mut TlsStream) + Send + 'static,
) -> (u16, mpsc::Receiver<Result<Seen, String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().expect("bound address").port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (sock, _) = listener.accept().expect("accept the probe");
        sock.set_read_timeout(Some(Duration::from_secs(10))).expect("a read timeout");
        let conn = ServerConnection::new(config).expect("a server connection");
        let mut tls = StreamOwned::new(conn, sock);
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match tls.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                Ok(_) => return drop(tx.send(Err("closed before a request".into()))),
                Err(e) => return drop(tx.send(Err(e.to_string()))),
            }
        }
        let name = |p: Option<&[u8]>| p.map_or("none".into(), |p| String::from_utf8_lossy(p).into_owned());
        let version = tls.conn.protocol_version().map_or("none".into(), |v| format!("{v:?}"));
        let alpn = name(tls.conn.alpn_protocol());
        let head = String::from_utf8_lossy(&head).lines().filter(|l| !l.is_empty()).map(String::from).collect();
        let _ = tx.send(Ok(Seen { version, alpn, head }));
        answer(&mut tls);
        tls.conn.send_close_notify();
        let _ = tls.flush();
    });
    (port, rx)
}

fn tls_reply(status_and_rest: &'static str) -> impl FnOnce(&mut TlsStream) + Send + 'static {
    move |s: &mut TlsStream| {
        let _ = s.write_all(status_and_rest.as_bytes());
    }
}

const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 15\r\nconnection: close\r\n\r\n{\"status\":\"ok\"}";

fn seen(rx: &mpsc::Receiver<Result<Seen, String>>) -> Result<Seen, String> {
    rx.recv_timeout(Duration::from_secs(5)).expect("the server reports the connection")
}

#[test]
fn https_with_cacert_exits_0_after_a_tls_1_3_handshake_with_alpn_http_1_1() {
    let pki = Pki::new(certs::LOOPBACK_NAMES);
    let (port, rx) = serve_tls_once(pki.server(BOTH), tls_reply(OK));
    let out = probe(&[&format!("https://127.0.0.1:{port}/healthz"), "--cacert", pki.ca()]);
    assert!(out.status.success(), "exit {:?}, stderr {}", out.status, stderr(&out));
    assert!(out.stderr.is_empty() && out.stdout.is_empty());
    let seen = seen(&rx).expect("a request");
    assert_eq!((seen.version.as_str(), seen.alpn.as_str()), ("TLSv1_3", "http/1.1"));
    assert_eq!(seen.head[0], "GET /healthz HTTP/1.1");
    assert!(seen.head.contains(&format!("Host: 127.0.0.1:{port}")), "{:?}", seen.head);
}

#[test]
fn a_chain_file_ending_with_its_ca_works_as_cacert_and_tls_1_2_works_too() {
    let pki = Pki::new(certs::LOOPBACK_NAMES);
    let (port, rx) = serve_tls_once(pki.server(&[&rustls::version::TLS12]), tls_reply(OK));
    let chain = pki.files.chain.to_str().expect("a UTF-8 temp path");
    let out = probe(&[&format!("https://localhost:{port}/"), &format!("--cacert={chain}")]);
    assert!(out.status.success(), "exit {:?}, stderr {}", out.status, stderr(&out));
    let seen = seen(&rx).expect("a request");
    assert_eq!((seen.version.as_str(), seen.alpn.as_str()), ("TLSv1_2", "http/1.1"));
    assert!(seen.head.contains(&format!("Host: localhost:{port}")), "{:?}", seen.head);
}

#[test]
fn a_certificate_from_another_ca_exits_1_naming_the_problem() {
    // Every throwaway CA has the same name, so webpki finds the other one and its signature does not match.
    let (server, other) = (Pki::new(certs::LOOPBACK_NAMES), Pki::new(certs::LOOPBACK_NAMES));
    let (port, rx) = serve_tls_once(server.server(BOTH), tls_reply(OK));
    let out = probe(&[&format!("https://127.0.0.1:{port}/healthz"), "--cacert", other.ca()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("TLS: invalid peer certificate: BadSignature (a CA in --cacert has"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    // The server never got a request: the probe refused the handshake.
    assert!(seen(&rx).is_err());

    // The server's own certificate alone is no CA file: nothing in it issued the certificate.
    let leaf = server.bundle.chain_pem.strip_suffix(&server.bundle.ca_pem).expect("the chain ends with its CA");
    let leaf_file = server.files.ca.with_file_name("leaf.pem");
    std::fs::write(&leaf_file, leaf).expect("write the leaf");
    let (port, _rx) = serve_tls_once(server.server(BOTH), tls_reply(OK));
    let out = probe(&[&format!("https://127.0.0.1:{port}/"), "--cacert", leaf_file.to_str().expect("UTF-8")]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("TLS: invalid peer certificate: UnknownIssuer (no CA in --cacert issued it)"), "{err}");
}

#[test]
fn a_certificate_for_another_name_exits_1_and_insecure_accepts_it() {
    let pki = Pki::new(&["flight.example.invalid"]);
    let (port, _rx) = serve_tls_once(pki.server(BOTH), tls_reply(OK));
    let out = probe(&[&format!("https://127.0.0.1:{port}/healthz"), "--cacert", pki.ca()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("certificate not valid for name \"127.0.0.1\""), "{err}");

    // --insecure: neither the name nor the issuer is checked, the handshake still happens.
    let (port, rx) = serve_tls_once(pki.server(BOTH), tls_reply(OK));
    let out = probe(&[&format!("https://127.0.0.1:{port}/healthz"), "--insecure"]);
    assert!(out.status.success(), "exit {:?}, stderr {}", out.status, stderr(&out));
    assert_eq!(seen(&rx).expect("a request").version, "TLSv1_3");
}

#[test]
fn over_tls_a_503_still_exits_1_naming_the_status() {
    let pki = Pki::new(certs::LOOPBACK_NAMES);
    let (port, _rx) = serve_tls_once(
        pki.server(BOTH),
        tls_reply("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"),
    );
    let out = probe(&[&format!("https://127.0.0.1:{port}/healthz"), "--insecure"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("status 503 Service Unavailable"), "{}", stderr(&out));
}

#[test]
fn an_https_url_against_a_plain_http_server_exits_1() {
    // What a plain HTTP/1.1 server does with a ClientHello: a 400, then close.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().expect("bound address").port();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept the probe");
        let mut hello = [0u8; 512];
        let _ = s.read(&mut hello);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    });
    let out = probe(&[&format!("https://127.0.0.1:{port}/healthz"), "--insecure"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("the answer is not TLS"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");

    // And one that closes without a word.
    let (port, _head) = serve_once(|_s: &mut TcpStream| {});
    let out = probe(&[&format!("https://127.0.0.1:{port}/"), "--insecure"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("connection closed during the TLS handshake"), "{}", stderr(&out));
}

#[test]
fn https_without_cacert_or_insecure_exits_1_with_one_line() {
    let out = probe(&["https://127.0.0.1:1/healthz"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "probe: GET https://127.0.0.1:1/healthz: https:// needs --cacert FILE (the CA to verify the server \
         against) or --insecure (any certificate)\n"
    );
    // A CA file that cannot be read, or holds no certificate, is named before any connection.
    let out = probe(&["https://127.0.0.1:1/", "--cacert", "/nonexistent/ca.pem"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--cacert /nonexistent/ca.pem: "), "{}", stderr(&out));
    let dir = tempfile::tempdir().expect("a temp dir");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").expect("write an empty file");
    let out = probe(&["https://127.0.0.1:1/", "--cacert", empty.to_str().expect("a UTF-8 temp path")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no PEM certificate in it"), "{}", stderr(&out));
    let out = probe(&["http://127.0.0.1:1/", "--insecure"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("are for https:// URLs"), "{}", stderr(&out));
}

#[test]
fn a_server_that_never_finishes_the_handshake_fails_within_the_timeout() {
    // Reads the ClientHello and never answers it.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().expect("bound address").port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept the probe");
        let mut hello = [0u8; 5];
        let _ = s.read_exact(&mut hello);
        let _ = tx.send(hello);
        thread::sleep(Duration::from_secs(5));
    });
    let started = Instant::now();
    let out = probe(&[&format!("https://127.0.0.1:{port}/healthz"), "--insecure", "--timeout-ms", "400"]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no answer within 400 ms"), "{}", stderr(&out));
    assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(3), "took {took:?}");
    // A TLS handshake record (22) was what it got.
    assert_eq!(rx.recv_timeout(Duration::from_secs(1)).expect("the ClientHello")[0], 22);
}

#[test]
fn a_server_that_stalls_after_the_handshake_fails_within_the_timeout() {
    let pki = Pki::new(certs::LOOPBACK_NAMES);
    let (port, _rx) = serve_tls_once(pki.server(BOTH), |_s: &mut TlsStream| thread::sleep(Duration::from_secs(5)));
    let started = Instant::now();
    let out = probe(&[&format!("https://127.0.0.1:{port}/"), "--cacert", pki.ca(), "--timeout-ms=600"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no answer within 600 ms"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
}
