//! Many connections from one loader thread: `-c 1024` (and 2,048) on one thread, every connection
//! established, on both engines; the open-file limit raised when the soft one is too low (said on stderr
//! once), and a clear error, before anything starts, when the hard one is.

mod common;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use common::*;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(usize::MAX);
const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// A tiny server for many connections: one thread, one mio poll, `ok` to every bodiless request. (The
/// common test server's thread per connection would start thousands of threads.) Stops when dropped.
struct ManyServer {
    port: u16,
    accepted: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

struct Peer {
    stream: TcpStream,
    /// Request bytes not yet answered (a head split across reads).
    unread: Vec<u8>,
    /// Answers the socket did not take yet.
    unsent: Vec<u8>,
}

impl ManyServer {
    fn start() -> ManyServer {
        let mut listener = TcpListener::bind("127.0.0.1:0".parse().expect("address")).expect("bind");
        // mio listens with std's backlog of 128: 2,048 connects at once would overflow it, and those the
        // kernel dropped would wait for their SYN's retransmission (1 s, then 3 s), past the run.
        rustix::net::listen(&listener, 4096).expect("listen with room for every connect");
        let port = listener.local_addr().expect("local addr").port();
        let (accepted, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let (counter, stopping) = (accepted.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut poll = Poll::new().expect("poll");
            poll.registry().register(&mut listener, LISTENER, Interest::READABLE).expect("register");
            let mut events = Events::with_capacity(1024);
            let mut peers: HashMap<usize, Peer> = HashMap::new();
            let mut next = 0;
            while !stopping.load(Ordering::SeqCst) {
                if poll.poll(&mut events, Some(Duration::from_millis(20))).is_err() {
                    continue;
                }
                for event in &events {
                    if event.token() == LISTENER {
                        while let Ok((mut stream, _)) = listener.accept() {
                            let interest = Interest::READABLE | Interest::WRITABLE;
                            poll.registry().register(&mut stream, Token(next), interest).expect("register");
                            peers.insert(next, Peer { stream, unread: Vec::new(), unsent: Vec::new() });
                            counter.fetch_add(1, Ordering::SeqCst);
                            next += 1;
                        }
                        continue;
                    }
                    let Some(peer) = peers.get_mut(&event.token().0) else { continue };
                    if !serve(peer) {
                        peers.remove(&event.token().0);
                    }
                }
            }
        });
        ManyServer { port, accepted, stop, thread: Some(thread) }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

/// Reads what arrived, answers each complete head, writes what the socket takes; false once the peer is gone.
fn serve(peer: &mut Peer) -> bool {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match peer.stream.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => peer.unread.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    while let Some(end) = peer.unread.windows(4).position(|w| w == b"\r\n\r\n") {
        peer.unread.drain(..end + 4);
        peer.unsent.extend_from_slice(ANSWER);
    }
    while !peer.unsent.is_empty() {
        match peer.stream.write(&peer.unsent) {
            Ok(n) => drop(peer.unsent.drain(..n)),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break, // a WRITABLE event comes back here
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

impl Drop for ManyServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// 1,024 and then 2,048 connections, one thread, a second each: every one established and answered.
#[test]
fn one_thread_holds_thousands_of_connections() {
    let server = ManyServer::start();
    let url = server.url();
    let mut asked = 0;
    for connections in ["1024", "2048"] {
        let ran = run(&["-t", "1", "-c", connections, "-d", "1s", "--warmup", "300ms", "--timeout", "5s", &url]);
        let r = &ran.report;
        ran.assert_no_errors();
        let n: u64 = connections.parse().expect("a number");
        asked += n;
        assert_eq!((r.connections.asked, r.connections.established, r.connections.failed), (n, n, 0), "-c {n}");
        assert!(r.responses >= n, "-c {n}: {} responses in a second", r.responses);
        assert!(ran.failures().is_empty(), "-c {n}: {:?}", ran.failures());
        ran.assert_returned_promptly();
    }
    assert!(server.accepted.load(Ordering::SeqCst) >= asked, "the server saw every connection");
}

/// The limits a shell running the binary sets: `ulimit -S -n SOFT` (and -H for the hard one) before `exec`.
fn loadgen_under_ulimit(ulimit: &str, args: &[&str]) -> Exit {
    let script = format!("ulimit {ulimit} && exec \"$0\" \"$@\"");
    let binary = testkit::workspace::binary("loadgen");
    let binary = binary.to_str().expect("utf-8 path");
    let mut list = vec!["-c", script.as_str(), binary];
    list.extend_from_slice(args);
    run_command("sh", &list)
}

#[test]
fn a_low_soft_limit_is_raised_and_said_once() {
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum.unwrap_or(u64::MAX);
    if hard < 2_000 {
        eprintln!("skipped: this machine's hard open-file limit ({hard}) is under what 1,024 connections need");
        return;
    }
    let server = ManyServer::start();
    let exit = loadgen_under_ulimit(
        "-S -n 256",
        &["-t", "1", "-c", "1024", "-d", "500ms", "--warmup", "200ms", "--no-progress", &server.url()],
    );
    assert_eq!(exit.code, Some(0), "{exit:?}");
    let raised: Vec<&str> = exit.stderr_lines().into_iter().filter(|l| l.contains("RLIMIT_NOFILE")).collect();
    assert_eq!(raised.len(), 1, "{:?}", exit.stderr);
    assert!(raised[0].starts_with("loadgen: raised the open-file limit (RLIMIT_NOFILE) from 256 to "), "{raised:?}");
    assert!(exit.stdout.contains("1024 connections"), "{}", exit.stdout);
}

#[test]
fn a_hard_limit_too_low_is_bad_input_before_anything_starts() {
    let server = ManyServer::start();
    let exit = loadgen_under_ulimit("-n 512", &["-c", "1024", "-d", "1s", "--no-progress", &server.url()]);
    exit.assert_bad_input("-c 1024 under a hard limit of 512");
    assert!(
        exit.stderr.contains("1024 connections need about ")
            && exit.stderr.contains("hard limit (RLIMIT_NOFILE) is 512"),
        "{}",
        exit.stderr
    );
    assert!(exit.elapsed < Duration::from_secs(5), "took {:?}", exit.elapsed);
    assert_eq!(server.accepted.load(Ordering::SeqCst), 0, "nothing connected");
}
