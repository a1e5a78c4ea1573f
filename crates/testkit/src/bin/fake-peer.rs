//! fake-peer: a tiny HTTP/1.1 server for tests that need a real process answering like a hello peer, one
//! chosen request excepted. It serves `{"message":"Hello from Flight!"}` to every bodiless GET and a 500 to
//! request number `--fail-at` (counted over all connections, from 1), so a test can prove that a single bad
//! answer voids a run. A process of its own, not a thread in the test, so its CPU and RSS are measured as a
//! server's are.
//!
//! ```text
//! fake-peer --port 8080 [--fail-at 200]
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const HELLO: &str = r#"{"message":"Hello from Flight!"}"#;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let Some(port) = flag("--port").and_then(|p| p.parse::<u16>().ok()) else {
        eprintln!("usage: fake-peer --port PORT [--fail-at N]");
        std::process::exit(64);
    };
    let fail_at = match flag("--fail-at").map(|n| n.parse::<u64>()) {
        None => u64::MAX,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("fake-peer: --fail-at: {e}");
            std::process::exit(64);
        }
    };
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap_or_else(|e| {
        eprintln!("fake-peer: bind 127.0.0.1:{port}: {e}");
        std::process::exit(1);
    });
    let served = Arc::new(AtomicU64::new(0));
    for stream in listener.incoming().flatten() {
        let served = Arc::clone(&served);
        std::thread::spawn(move || serve(stream, &served, fail_at));
    }
}

/// Answers each request on one connection until the client closes it.
fn serve(mut stream: TcpStream, served: &AtomicU64, fail_at: u64) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // Requests are bodiless GETs: one per blank line.
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            let n = served.fetch_add(1, Ordering::SeqCst) + 1;
            let (status, body) = if n == fail_at { ("500 Internal Server Error", "{}") } else { ("200 OK", HELLO) };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(response.as_bytes()).is_err() {
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
