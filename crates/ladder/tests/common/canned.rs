//! An upstream that misbehaves on purpose: a few-line std server on 127.0.0.1 that reads each request's head
//! and writes back fixed bytes (a whole response: status line, headers, body) and closes, or, with no answer
//! set, holds the connection open without a word. The answer can be changed while it runs, so one ladder
//! process can meet several kinds of failure.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a silent connection is held at most (past any test's upstream timeout).
const SILENT_FOR: Duration = Duration::from_secs(5);

pub struct Canned {
    pub addr: SocketAddr,
    answer: Arc<Mutex<Option<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

/// A response with `status`, a JSON content type and `body`, closing the connection.
pub fn response(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl Canned {
    /// Serves `answer` (None: silence) until dropped.
    pub fn start(answer: Option<Vec<u8>>) -> Canned {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let (answer, stop) = (Arc::new(Mutex::new(answer)), Arc::new(AtomicBool::new(false)));
        let (answer_for, stop_for) = (answer.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            while !stop_for.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let answer = answer_for.lock().unwrap_or_else(PoisonError::into_inner).clone();
                        let stop = stop_for.clone();
                        std::thread::spawn(move || serve(stream, answer, &stop));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Canned { addr, answer, stop, accept: Some(accept) }
    }

    /// What LADDER_UPSTREAM_URL is set to.
    pub fn url(&self) -> String {
        format!("http://{}/upstream", self.addr)
    }

    /// The answer for connections accepted from now on.
    pub fn set(&self, answer: Option<Vec<u8>>) {
        *self.answer.lock().unwrap_or_else(PoisonError::into_inner) = answer;
    }
}

/// Reads the head (the ladder's GET has no body), then answers or stays silent.
fn serve(mut stream: TcpStream, answer: Option<Vec<u8>>, stop: &AtomicBool) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    match answer {
        Some(bytes) => {
            let _ = stream.write_all(&bytes);
        }
        None => {
            let until = Instant::now() + SILENT_FOR;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for Canned {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}
