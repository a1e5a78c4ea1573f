//! The probe binary against real sockets on 127.0.0.1: the exit code and the stderr line a health check sees.

use std::io::{BufRead, BufReader, Write};
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
