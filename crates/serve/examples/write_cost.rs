//! What one response's write costs the writing thread, per body size, two ways: hyper's default (`writev` of
//! the head and the body as they are) and serve's coalescing (both copied into one buffer, then one `send`).
//! The difference is the kernel's per-iovec and per-call cost against a user-space copy; the size where the copy
//! starts to cost more is where `IdleIo` stops coalescing (serve's connection.rs, `COALESCE_MAX`).
//!
//!   cargo run --release -p serve --example write_cost [-- ROUNDS [MILLIS_PER_CELL]]
//!
//! One loopback TCP connection, a reader thread draining it, the writer timed by its own on-CPU time
//! (/proc/thread-self/schedstat, nanoseconds: blocking on a full socket and the host's steal are not counted).
//! The methods alternate within each round, the sizes too, so drift shows up as spread, not as a difference.
//! Prints a Markdown table: medians over rounds, (min–max).

use std::io::{IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A typical response head of the workspace's servers (status line, date, content type and length).
const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 00000\r\n\
date: Fri, 04 Dec 2026 16:00:00 GMT\r\n\r\n";
const SIZES: [usize; 9] = [32, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536];

#[derive(Clone, Copy, PartialEq)]
enum Method {
    Writev,
    Coalesce,
}

fn on_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat (Linux only)");
    stat.split_whitespace().next().and_then(|v| v.parse().ok()).expect("schedstat's first field")
}

/// Writes `head` + `body` whole, as hyper's flush loop would (a short write continues where it stopped).
fn write_one(stream: &mut TcpStream, method: Method, head: &[u8], body: &[u8], scratch: &mut Vec<u8>) {
    match method {
        Method::Writev => {
            let mut done = 0;
            let total = head.len() + body.len();
            while done < total {
                let n = if done < head.len() {
                    stream.write_vectored(&[IoSlice::new(&head[done..]), IoSlice::new(body)])
                } else {
                    stream.write(&body[done - head.len()..])
                }
                .expect("write");
                done += n;
            }
        }
        Method::Coalesce => {
            scratch.clear();
            scratch.extend_from_slice(head);
            scratch.extend_from_slice(body);
            stream.write_all(scratch).expect("write");
        }
    }
}

/// Nanoseconds of writer CPU per response for one cell.
fn cell(stream: &mut TcpStream, method: Method, size: usize, millis: u64, scratch: &mut Vec<u8>) -> f64 {
    let body = vec![b'x'; size];
    let deadline = Instant::now() + Duration::from_millis(millis);
    let start = on_cpu_ns();
    let mut responses = 0u64;
    while !responses.is_multiple_of(256) || Instant::now() < deadline {
        write_one(stream, method, HEAD, &body, scratch);
        responses += 1;
    }
    (on_cpu_ns() - start) as f64 / responses as f64
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(7, |v| v.parse().expect("ROUNDS: a number"));
    let millis: u64 = args.next().map_or(300, |v| v.parse().expect("MILLIS_PER_CELL: a number"));

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut writer = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    writer.set_nodelay(true).expect("nodelay");
    let (mut reader, _) = listener.accept().expect("accept");
    let drain = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        while reader.read(&mut buf).is_ok_and(|n| n > 0) {}
    });

    let mut scratch = Vec::with_capacity(HEAD.len() + SIZES[SIZES.len() - 1]);
    let mut results = vec![(Vec::new(), Vec::new()); SIZES.len()];
    for round in 0..rounds {
        for (i, &size) in SIZES.iter().enumerate() {
            // Alternate which method goes first, so neither always follows the other's cache state.
            let order = if (round + i) % 2 == 0 {
                [Method::Writev, Method::Coalesce]
            } else {
                [Method::Coalesce, Method::Writev]
            };
            for method in order {
                let ns = cell(&mut writer, method, size, millis, &mut scratch);
                match method {
                    Method::Writev => results[i].0.push(ns),
                    Method::Coalesce => results[i].1.push(ns),
                }
            }
        }
        eprintln!("write_cost: round {}/{rounds}", round + 1);
    }
    drop(writer);
    drain.join().expect("reader");

    println!("| body bytes | writev (head, body) ns | copy + send ns | copy ÷ writev |");
    println!("|---|---|---|---|");
    for (i, size) in SIZES.iter().enumerate() {
        let (writev, coalesce) = &mut results[i];
        let range = |v: &[f64]| {
            format!("({:.0}–{:.0})", v.iter().copied().fold(f64::MAX, f64::min), v.iter().copied().fold(0.0, f64::max))
        };
        let (w_range, c_range) = (range(writev), range(coalesce));
        let (w, c) = (median(writev), median(coalesce));
        println!("| {size} | {w:.0} {w_range} | {c:.0} {c_range} | {:.3} |", c / w);
    }
}
