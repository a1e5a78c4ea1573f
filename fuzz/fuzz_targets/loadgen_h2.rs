//! loadgen's HTTP/2 client (`loadgen::h2`) on arbitrary server bytes.
//!
//! Input: `[setup] [k] [k × u16 split points] [stream…]`. `setup`: bits 0-2 the number of streams opened
//! before any byte arrives (0 to 7), bit 3 windows of 65,535 instead of 2^30-1 (so replenishing happens), bit
//! 4 a larger SETTINGS_MAX_FRAME_SIZE, bits 5-7 pick each stream's request in turn (GET, HEAD, a POST whose
//! 100 KiB body outgrows the initial windows and waits for WINDOW_UPDATEs, a request with a large header).
//! The split points cut the stream into reads.
//!
//! Invariants:
//! * no panic, and `receive` consumes whole frames only: what it leaves is one incomplete frame;
//! * the events make sense per stream: only opened streams, a head before data, `Done`'s body_len is the data
//!   handed out, nothing after a stream ended (Done, Reset, StreamError, Unprocessed), Unprocessed only above
//!   a GOAWAY's last stream, and `in_flight` is what was opened and has not ended;
//! * an error sticks: every later call returns it;
//! * what the client writes is bounded by what it read (plus the request bodies it queued);
//! * the client does not depend on how the bytes arrive: in one read, at the fuzzer's split points, in
//!   512-byte reads and one byte per read it reports the same events and writes the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::h2::{Client, Config, ConnError, Event, ServerSettings};
use loadgen::h2_frame::{FrameHeader, HEADER_LEN};

/// Everything the client told its caller, in order, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Settings(ServerSettings),
    Head(u32, u16, Vec<(String, Vec<u8>)>),
    Data(u32, Vec<u8>),
    Done(u32, u16, u64),
    Reset(u32, u32),
    StreamError(u32, u32, &'static str),
    GoAway(u32, u32, Vec<u8>),
    Unprocessed(u32),
    Failed(ConnError),
    /// Bytes left unconsumed at the end (an incomplete frame).
    Leftover(usize),
}

fn own(event: Event<'_>) -> Ev {
    match event {
        Event::Settings(s) => Ev::Settings(s),
        Event::Head { stream, status, headers } => {
            Ev::Head(stream, status, headers.iter().map(|h| (h.name.to_string(), h.value.to_vec())).collect())
        }
        Event::Data { stream, bytes } => Ev::Data(stream, bytes.to_vec()),
        Event::Done { stream, status, body_len } => Ev::Done(stream, status, body_len),
        Event::Reset { stream, code } => Ev::Reset(stream, code),
        Event::StreamError { stream, code, reason } => Ev::StreamError(stream, code, reason),
        Event::GoAway { last_stream, code, debug } => Ev::GoAway(last_stream, code, debug.to_vec()),
        Event::Unprocessed { stream } => Ev::Unprocessed(stream),
    }
}

const POST_BODY: usize = 100 * 1024;

fn config(setup: u8) -> Config {
    let small = setup & 0x08 != 0;
    Config {
        stream_window: if small { 65_535 } else { (1 << 30) - 1 },
        connection_window: if small { 65_535 } else { (1 << 30) - 1 },
        max_frame_size: if setup & 0x10 != 0 { 32_768 } else { 16_384 },
        ..Config::default()
    }
}

fn request(kind: u8) -> Vec<u8> {
    match kind % 4 {
        0 => b"GET /a HTTP/1.1\r\nHost: fuzz\r\nUser-Agent: loadgen\r\n\r\n".to_vec(),
        1 => b"HEAD /b HTTP/1.1\r\nHost: fuzz\r\nConnection: keep-alive\r\n\r\n".to_vec(),
        2 => {
            let mut r = format!("POST /c HTTP/1.1\r\nHost: fuzz\r\nContent-Length: {POST_BODY}\r\n\r\n").into_bytes();
            r.resize(r.len() + POST_BODY, b'p');
            r
        }
        _ => format!("GET /d HTTP/1.1\r\nHost: fuzz\r\nX-Big: {}\r\n\r\n", "v".repeat(20_000)).into_bytes(),
    }
}

/// Per stream: what the events said so far.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    head: bool,
    data: u64,
    ended: bool,
}

/// Feeds `reads` the way the worker does; returns the events and everything the client wrote.
fn run<'a>(setup: u8, reads: impl Iterator<Item = &'a [u8]>) -> (Vec<Ev>, Vec<u8>) {
    let config = config(setup);
    let max_frame = config.max_frame_size as usize;
    let mut client = Client::new(config);
    let mut out = Vec::new();
    client.start(&mut out);
    let opened = usize::from(setup & 0x07);
    let mut queued = 0;
    for n in 0..opened {
        let kind = (setup >> 5).wrapping_add(n as u8);
        let request = request(kind);
        let id = client.open(&mut out, &request).expect("a valid request opens before any byte arrives");
        assert_eq!(id, 2 * n as u32 + 1, "stream ids are 1, 3, 5…");
        queued += request.len();
    }
    let mut seen = vec![Seen::default(); opened];
    let mut events = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut read_total = 0;
    let mut lowest_goaway = u32::MAX;
    let mut failed = None;
    for read in reads {
        read_total += read.len();
        buf.extend_from_slice(read);
        let mut got = Vec::new();
        let result = client.receive(&buf, &mut out, &mut |e| got.push(own(e)));
        for e in &got {
            check(e, &mut seen, &mut lowest_goaway);
        }
        events.extend(got);
        match result {
            Ok(used) => {
                assert!(used <= buf.len(), "consumed {used} of {} bytes", buf.len());
                buf.drain(..used);
                // What is left is one incomplete frame, never a whole one the client skipped.
                if let Some(h) = FrameHeader::parse(&buf) {
                    assert!(buf.len() < HEADER_LEN + h.length as usize, "a whole frame left unconsumed");
                    assert!(h.length as usize <= max_frame, "an oversized frame is waited for");
                }
                let ended = seen.iter().filter(|s| s.ended).count();
                assert_eq!(client.in_flight(), opened - ended, "in_flight is not opened minus ended");
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if let Some(e) = failed {
        assert_eq!(client.failed(), Some(e));
        assert!(!client.can_open());
        let before = out.len();
        assert_eq!(
            client.receive(b"\0\0\0\x04\0\0\0\0\0", &mut out, &mut |_| panic!("an event after the error")),
            Err(e)
        );
        assert_eq!(out.len(), before, "a failed client wrote");
        events.push(Ev::Failed(e));
    } else {
        events.push(Ev::Leftover(buf.len()));
    }
    // Replies are proportional to what was read: ACKs, WINDOW_UPDATEs, resets, one GOAWAY, and the bodies.
    assert!(out.len() <= 1024 + 3 * queued + 3 * read_total, "wrote {} bytes for {read_total} read", out.len());
    (events, out)
}

/// One event against what the stream's earlier events said.
fn check(event: &Ev, seen: &mut [Seen], lowest_goaway: &mut u32) {
    match event {
        Ev::Head(id, status, headers) => {
            let s = stream(seen, *id);
            assert!(!s.head, "two final heads on stream {id}");
            assert!((200..=999).contains(status), "final status {status}");
            assert!(headers.iter().all(|(n, _)| !n.is_empty() && !n.starts_with(':') && n.to_ascii_lowercase() == *n));
            s.head = true;
        }
        Ev::Data(id, bytes) => {
            let s = stream(seen, *id);
            assert!(s.head && !bytes.is_empty(), "data before the head, or empty, on stream {id}");
            s.data += bytes.len() as u64;
        }
        Ev::Done(id, _, body_len) => {
            let s = stream(seen, *id);
            assert!(s.head, "done without a head on stream {id}");
            assert_eq!(*body_len, s.data, "body_len is not the data handed out on stream {id}");
            s.ended = true;
        }
        Ev::Reset(id, _) | Ev::StreamError(id, _, _) => stream(seen, *id).ended = true,
        Ev::Unprocessed(id) => {
            assert!(*id > *lowest_goaway, "stream {id} unprocessed but at or below the last stream id");
            stream(seen, *id).ended = true;
        }
        Ev::GoAway(last, _, _) => *lowest_goaway = (*lowest_goaway).min(*last),
        Ev::Settings(_) | Ev::Failed(_) | Ev::Leftover(_) => {}
    }
}

/// The record of stream `id`, which must have been opened and not have ended.
fn stream(seen: &mut [Seen], id: u32) -> &mut Seen {
    assert!(id % 2 == 1, "an event for even stream {id}");
    let s = seen.get_mut((id / 2) as usize).unwrap_or_else(|| panic!("an event for unopened stream {id}"));
    assert!(!s.ended, "an event for stream {id} after it ended");
    s
}

fuzz_target!(|data: &[u8]| {
    let [setup, k, rest @ ..] = data else { return };
    let k = usize::from(*k % 8);
    if rest.len() < 2 * k {
        return;
    }
    let (points, stream) = rest.split_at(2 * k);
    let mut cuts: Vec<usize> =
        points.chunks_exact(2).map(|p| usize::from(u16::from_le_bytes([p[0], p[1]])) % (stream.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.push(stream.len());
    let mut pieces = Vec::with_capacity(cuts.len());
    let mut from = 0;
    for to in cuts {
        pieces.push(&stream[from..to]);
        from = to;
    }

    let whole = run(*setup, std::iter::once(stream));
    let split = run(*setup, pieces.into_iter());
    assert_eq!(whole, split, "one read vs. reads split at the fuzzer's points");
    let steady = run(*setup, stream.chunks(512));
    assert_eq!(whole, steady, "one read vs. 512-byte reads");
    if stream.len() <= 2048 {
        let bytewise = run(*setup, stream.chunks(1));
        assert_eq!(whole, bytewise, "one read vs. one byte per read");
    }
});
