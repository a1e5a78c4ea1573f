//! Bytes through the proxy: megabytes of random data arrive whole and in order both ways, small pipelined
//! writes each take the delay once (they are not serialized behind each other's delay), and a destination
//! that stops reading stops the proxy reading its source.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{IO_DEADLINE, connect, echo_server, proxy};
use rand::RngCore;

#[test]
fn megabytes_of_random_bytes_arrive_whole_and_in_order_both_ways() {
    const SIZE: usize = 4 << 20;
    let proxy = proxy(echo_server(), Duration::from_millis(2));
    let mut client = connect(proxy.local_addr());
    let mut sent = vec![0u8; SIZE];
    rand::rng().fill_bytes(&mut sent);
    let mut writer = client.try_clone().expect("clone the client");
    let to_send = sent.clone();
    let writing = std::thread::spawn(move || {
        writer.write_all(&to_send).expect("write through the proxy");
        // The end of stream goes through too: the echo server answers it with its own once it echoed all.
        writer.shutdown(Shutdown::Write).expect("half-close");
    });
    let mut received = Vec::with_capacity(SIZE);
    client.read_to_end(&mut received).expect("read the echo to its end");
    writing.join().expect("writer");
    assert_eq!(received.len(), SIZE, "every byte came back, then the end of stream");
    assert!(received == sent, "the bytes came back identical and in order");
    let report = proxy.join();
    assert_eq!((report.accepted, report.to_upstream, report.to_client), (1, SIZE as u64, SIZE as u64));
    assert_eq!(report.connections[0].end, delay_proxy::End::Closed);
}

#[test]
fn pipelined_small_writes_each_take_the_delay_once() {
    let rtt = Duration::from_millis(20);
    let proxy = proxy(echo_server(), rtt);
    let mut client = connect(proxy.local_addr());
    let mut writer = client.try_clone().expect("clone the client");
    let writing = std::thread::spawn(move || {
        let mut sent_at = Vec::with_capacity(100);
        for i in 0..100u8 {
            sent_at.push(Instant::now());
            writer.write_all(&[i]).expect("write one byte");
            std::thread::sleep(Duration::from_micros(100));
        }
        sent_at
    });
    let mut arrived_at = Vec::with_capacity(100);
    let mut buffer = [0u8; 100];
    while arrived_at.len() < 100 {
        let n = client.read(&mut buffer).expect("read the echo");
        assert!(n > 0, "the echo ended early");
        for (offset, byte) in buffer[..n].iter().enumerate() {
            assert_eq!(usize::from(*byte), arrived_at.len() + offset, "bytes in order");
        }
        let now = Instant::now();
        arrived_at.extend(std::iter::repeat_n(now, n));
    }
    let sent_at = writing.join().expect("writer");
    let delays: Vec<Duration> = sent_at.iter().zip(&arrived_at).map(|(sent, arrived)| *arrived - *sent).collect();
    let (shortest, longest) = (delays.iter().min().expect("delays"), delays.iter().max().expect("delays"));
    let span = arrived_at[99] - sent_at[0];
    eprintln!(
        "100 one-byte writes over {:?}: each back in {shortest:?}..{longest:?}, all in {span:?}",
        sent_at[99] - sent_at[0]
    );
    assert!(*shortest >= rtt, "a byte came back in {shortest:?}, under the {rtt:?} round trip");
    // Serialized delays would put the last byte 100 one-way delays after the first; each byte's own delay
    // stays at the round trip plus scheduling noise.
    assert!(*longest < rtt + Duration::from_millis(10), "a byte took {longest:?} for a {rtt:?} round trip");
}

#[test]
fn a_destination_that_stops_reading_stops_the_proxy_reading_its_source() {
    let queue_limit = 64 * 1024;
    let upstream = TcpListener::bind("127.0.0.1:0").expect("bind the upstream");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let settings = delay_proxy::Settings {
        queue_limit,
        ..delay_proxy::Settings::new(upstream.local_addr().expect("addr"), Duration::from_millis(2))
    };
    let proxy = delay_proxy::spawn(listener, settings).expect("start the proxy");
    let mut client = connect(proxy.local_addr());
    let (mut server, _) = upstream.accept().expect("the proxy connects to the upstream");
    server.set_read_timeout(Some(IO_DEADLINE)).expect("read timeout");

    // The upstream reads nothing: the client's writes must stall once the kernel buffers on the way and the
    // proxy's 64 KiB queue are full, where a proxy reading without bound would take all it is given.
    client.set_nonblocking(true).expect("nonblocking");
    let chunk = vec![7u8; 64 * 1024];
    let (mut written, mut stalled_since) = (0usize, None::<Instant>);
    while written < 256 << 20 {
        match client.write(&chunk) {
            Ok(n) => (written, stalled_since) = (written + n, None),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let since = *stalled_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(500) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("write: {e}"),
        }
    }
    eprintln!("writes stalled after {written} bytes");
    assert!(written < 64 << 20, "{written} bytes taken from a client whose upstream reads nothing");

    // Everything taken is still delivered once the upstream reads.
    client.shutdown(Shutdown::Write).expect("half-close");
    let mut received = 0usize;
    let mut buffer = vec![0u8; 256 * 1024];
    loop {
        match server.read(&mut buffer).expect("read at the upstream") {
            0 => break,
            n => {
                assert!(buffer[..n].iter().all(|b| *b == 7));
                received += n;
            }
        }
    }
    assert_eq!(received, written, "every byte the client wrote reached the upstream, then the end of stream");
}

/// Connecting needs no upstream answer: a client connected to a listening upstream through the proxy can
/// write at once, before the proxy's own connect finished.
#[test]
fn bytes_written_before_the_upstream_connect_completes_are_delivered() {
    let proxy = proxy(echo_server(), Duration::from_millis(1));
    let mut client: TcpStream = connect(proxy.local_addr());
    client.write_all(b"early").expect("write at once");
    let mut echoed = [0u8; 5];
    client.read_exact(&mut echoed).expect("echo");
    assert_eq!(&echoed, b"early");
}
