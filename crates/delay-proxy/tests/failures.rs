//! When a side fails, nothing hangs: an upstream that is down closes the client's connection within the delay
//! and a little; an upstream that ends its stream (or is killed) is seen by the client after the bytes before
//! it; a client that goes away closes the upstream's connection.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{IO_DEADLINE, connect, proxy};

/// Within this of the delay, a close has to have reached the other side.
const PROMPTLY: Duration = Duration::from_secs(1);

/// Reads until the end of stream or a reset: what came, and whether it ended with a reset.
fn read_to_close(stream: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return (received, false),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (received, true),
            Err(e) => panic!("read ended with {e} instead of an end of stream or a reset (a hang hits the timeout)"),
        }
    }
}

/// An upstream that accepts one connection and hands its socket to the test.
fn one_connection_upstream() -> (std::net::SocketAddr, mpsc::Receiver<TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the upstream");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            stream.set_read_timeout(Some(IO_DEADLINE)).expect("read timeout");
            let _ = tx.send(stream);
        }
    });
    (addr, rx)
}

#[test]
fn an_upstream_that_is_down_closes_the_client_connection_promptly() {
    let rtt = Duration::from_millis(10);
    let down = std::net::SocketAddr::from(([127, 0, 0, 1], testkit::free_port()));
    let proxy = proxy(down, rtt);
    let mut client = connect(proxy.local_addr());
    let started = Instant::now();
    let _ = client.write_all(b"anyone there?");
    let (received, _) = read_to_close(&mut client);
    let took = started.elapsed();
    assert!(received.is_empty());
    assert!(took < rtt + PROMPTLY, "closed after {took:?}");
    let report = proxy.join();
    assert!(
        matches!(&report.connections[0].end, delay_proxy::End::Unreachable(why) if why.contains("refused")),
        "{report}"
    );
}

#[test]
fn an_upstream_end_of_stream_follows_its_data_and_the_half_close_passes_through() {
    let (upstream, accepted) = one_connection_upstream();
    let proxy = proxy(upstream, Duration::from_millis(4));
    let mut client = connect(proxy.local_addr());
    let mut server = accepted.recv_timeout(IO_DEADLINE).expect("the proxy connects to the upstream");
    server.write_all(b"last words").expect("upstream writes");
    server.shutdown(Shutdown::Write).expect("upstream half-closes");
    let (received, reset) = read_to_close(&mut client);
    assert_eq!((received.as_slice(), reset), (&b"last words"[..], false), "the data, then a plain end of stream");
    // The other way is still open: the client can answer, and its own end of stream follows.
    client.write_all(b"reply").expect("client writes after the upstream's half-close");
    client.shutdown(Shutdown::Write).expect("client half-closes");
    let (received, reset) = read_to_close(&mut server);
    assert_eq!((received.as_slice(), reset), (&b"reply"[..], false));
    let report = proxy.join();
    assert_eq!(report.connections[0].end, delay_proxy::End::Closed, "{report}");
    assert_eq!((report.to_upstream, report.to_client), (5, 10));
}

#[test]
fn a_killed_upstream_is_seen_by_the_client_promptly() {
    let mut redis = testkit::Redis::start();
    let rtt = Duration::from_millis(10);
    let proxy = proxy(std::net::SocketAddr::from(([127, 0, 0, 1], redis.port())), rtt);
    let mut client = connect(proxy.local_addr());
    client.write_all(b"PING\r\n").expect("ping");
    let mut pong = [0u8; 7];
    client.read_exact(&mut pong).expect("pong");
    assert_eq!(&pong, b"+PONG\r\n");
    let killed = Instant::now();
    redis.kill();
    let (received, _) = read_to_close(&mut client);
    let took = killed.elapsed();
    assert!(received.is_empty());
    assert!(took < rtt + PROMPTLY, "the client saw the upstream go after {took:?}");
}

#[test]
fn a_client_that_goes_away_closes_the_upstream_connection() {
    let (upstream, accepted) = one_connection_upstream();
    let proxy = proxy(upstream, Duration::from_millis(10));
    let mut client = connect(proxy.local_addr());
    let mut server = accepted.recv_timeout(IO_DEADLINE).expect("the proxy connects to the upstream");
    client.write_all(b"bye").expect("write");
    let gone = Instant::now();
    drop(client);
    let (received, _) = read_to_close(&mut server);
    let took = gone.elapsed();
    assert_eq!(received, b"bye", "the bytes before the close arrive first");
    assert!(took < PROMPTLY, "the upstream saw the client go after {took:?}");
}

#[test]
fn a_client_reset_resets_the_upstream_connection() {
    let (upstream, accepted) = one_connection_upstream();
    let proxy = proxy(upstream, Duration::from_millis(10));
    let client = connect(proxy.local_addr());
    let mut server = accepted.recv_timeout(IO_DEADLINE).expect("the proxy connects to the upstream");
    // SO_LINGER 0: the close sends an RST instead of a FIN.
    rustix::net::sockopt::set_socket_linger(&client, Some(Duration::ZERO)).expect("linger 0");
    let gone = Instant::now();
    drop(client);
    let (_, reset) = read_to_close(&mut server);
    let took = gone.elapsed();
    assert!(reset, "the upstream saw a reset");
    assert!(took < PROMPTLY, "the upstream saw the reset after {took:?}");
    let report = proxy.join();
    assert_eq!(report.connections[0].end, delay_proxy::End::Reset, "{report}");
}
