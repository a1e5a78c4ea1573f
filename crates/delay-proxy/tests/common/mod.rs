//! What the proxy's tests share: an echo server of their own behind it, a proxy in-process, round trips.

#![allow(dead_code)] // each test binary uses its own part

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Every read and write in the tests gives up after this: a proxy that hangs fails the test, not CI.
pub const IO_DEADLINE: Duration = Duration::from_secs(10);

/// An echo server on a free loopback port: each connection's bytes come back as they arrive, and its end of
/// stream is answered with one (a half-close, so anything still in flight is echoed first).
pub fn echo_server() -> SocketAddr {
    let listener = listener();
    listener.set_nonblocking(false).expect("blocking accepts");
    let addr = listener.local_addr().expect("echo address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || echo(stream));
        }
    });
    addr
}

fn echo(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buffer = [0u8; 64 * 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if stream.write_all(&buffer[..n]).is_err() {
                    return;
                }
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

/// A proxy in this process in front of `upstream`.
pub fn proxy(upstream: SocketAddr, rtt: Duration) -> delay_proxy::Proxy {
    delay_proxy::spawn(listener(), delay_proxy::Settings::new(upstream, rtt)).expect("start the proxy")
}

/// A loopback listener on a free port with the backlog the binary has (std's 128 would drop the SYNs of a
/// thousand connections opened at once, each then retried a second later).
pub fn listener() -> TcpListener {
    let mut listeners = serve::bind_reuseport(SocketAddr::from(([127, 0, 0, 1], 0)), 1).expect("bind 127.0.0.1:0");
    listeners.pop().expect("one listener")
}

/// A client connection to `addr` whose reads and writes give up after [`IO_DEADLINE`].
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    stream.set_read_timeout(Some(IO_DEADLINE)).expect("read timeout");
    stream.set_write_timeout(Some(IO_DEADLINE)).expect("write timeout");
    stream
}

/// `count` ping-pongs of 16 bytes on `stream` (to an echo server), each one's round trip. The first, which
/// also waits for the proxy's connect to the upstream, is not counted.
pub fn round_trips(stream: &mut TcpStream, count: usize) -> Vec<Duration> {
    let ping = *b"ping-0123456789\n";
    let mut pong = [0u8; 16];
    let mut times = Vec::with_capacity(count);
    for i in 0..=count {
        let started = Instant::now();
        stream.write_all(&ping).expect("write the ping");
        stream.read_exact(&mut pong).expect("read the pong");
        assert_eq!(pong, ping);
        if i > 0 {
            times.push(started.elapsed());
        }
    }
    times
}

pub fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
