//! loadgen's HTTP/1.1 response parser on arbitrary server bytes.
//!
//! Input: `[flags] [k] [k × u16 split points] [stream…]`. Bit i of `flags` says whether the i-th response
//! (mod 8) answers a HEAD request; the split points cut the stream into reads.
//!
//! Invariants:
//! * no panic, and every call makes sense: `used` within the buffer, a completed response consumed bytes,
//!   its `body_len` is the number of body bytes handed out;
//! * the parser does not depend on how the bytes arrive: fed in one read, at the fuzzer's split points, in
//!   512-byte reads and one byte per read, it reports the same heads, responses, bodies and errors (the
//!   loader's results must not depend on TCP segmentation);
//! * after an error, `reset` makes it parse a fresh response.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::http1::{Done, ParseError, ResponseParser};

/// Everything the parser told its caller, in order.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    Head(u16, Vec<(String, Vec<u8>)>),
    Response(Done, Vec<u8>),
    Error(ParseError),
    Eof(Result<Option<Done>, ParseError>),
    /// Bytes buffered but never consumed when the stream ended (an incomplete head).
    Leftover(usize),
}

/// Feeds `reads` the way loadgen's worker does: append to a buffer, parse until the parser wants more, drop
/// what it consumed; at the end, EOF.
fn run<'a>(reads: impl Iterator<Item = &'a [u8]>, head_flags: u8) -> Vec<Event> {
    let mut parser = ResponseParser::default();
    let mut events = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut body = Vec::new();
    let mut responses = 0usize;
    for read in reads {
        buf.extend_from_slice(read);
        loop {
            let head_request = head_flags & (1 << (responses % 8)) != 0;
            let mut on_head = |status: u16, headers: &[httparse::Header<'_>]| {
                let headers = headers.iter().map(|h| (h.name.to_string(), h.value.to_vec())).collect();
                events.push(Event::Head(status, headers));
            };
            let outcome = parser.parse(&buf, head_request, &mut on_head, Some(&mut body));
            match outcome {
                Ok((used, done)) => {
                    assert!(used <= buf.len(), "consumed {used} of {} bytes", buf.len());
                    buf.drain(..used);
                    match done {
                        Some(done) => {
                            assert!(used > 0, "a response completed without consuming a byte");
                            assert_eq!(done.body_len, body.len() as u64, "body_len is not the body handed out");
                            assert!(parser.idle(), "not idle after a complete response");
                            events.push(Event::Response(done, std::mem::take(&mut body)));
                            responses += 1;
                        }
                        None => break,
                    }
                }
                Err(e) => {
                    events.push(Event::Error(e));
                    check_reset(&mut parser);
                    return events;
                }
            }
        }
    }
    let eof = parser.eof();
    if let Ok(Some(done)) = &eof {
        assert_eq!(done.body_len, body.len() as u64, "close-delimited body_len is not the body handed out");
        assert!(done.close, "a close-delimited response must report the close");
    }
    events.push(Event::Eof(eof));
    events.push(Event::Leftover(buf.len()));
    events
}

/// After an error the worker drops the connection and resets the parser; the next connection's first response
/// must parse from scratch.
fn check_reset(parser: &mut ResponseParser) {
    parser.reset();
    assert!(parser.idle());
    let fresh = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let got = parser.parse(fresh, false, &mut |_, _| {}, None);
    assert_eq!(got, Ok((fresh.len(), Some(Done { status: 200, close: false, body_len: 2 }))));
}

fuzz_target!(|data: &[u8]| {
    let [flags, k, rest @ ..] = data else { return };
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

    let whole = run(std::iter::once(stream), *flags);
    let split = run(pieces.into_iter(), *flags);
    assert_eq!(whole, split, "one read vs. reads split at the fuzzer's points");
    // Reads of 512 bytes: a line or head longer than a read limit spans several reads whatever its length.
    let steady = run(stream.chunks(512), *flags);
    assert_eq!(whole, steady, "one read vs. 512-byte reads");
    // One byte per read: quadratic in the head's length (each read re-parses the buffered head), so only for
    // inputs of a few KiB.
    if stream.len() <= 1024 {
        let bytewise = run(stream.chunks(1), *flags);
        assert_eq!(whole, bytewise, "one read vs. one byte per read");
    }
});
