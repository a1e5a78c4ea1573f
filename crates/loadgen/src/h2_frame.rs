//! HTTP/2 frames (RFC 9113 §4 and §6): the 9-byte header, a parser that turns one whole frame at the start of
//! a buffer into a typed, borrowed [`Frame`] (padding and the PRIORITY fields stripped, every length rule the
//! RFC gives checked), and writers for every frame type. Nothing here keeps state: flow control, streams and
//! header compression are `h2`'s.
//!
//! The writers are deliberately general (any stream, any flags, any payload): the client uses a few of them,
//! and tests that play a hostile peer (rapid reset, CONTINUATION floods, SETTINGS and PING floods, clients
//! that never open their window) build their byte streams from the same functions.

/// What a client sends first, before its SETTINGS (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The frame header's length.
pub const HEADER_LEN: usize = 9;
/// The smallest SETTINGS_MAX_FRAME_SIZE, and the value until a peer says otherwise.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest frame payload any peer may allow (2^24 - 1).
pub const MAX_FRAME_SIZE_LIMIT: u32 = (1 << 24) - 1;
/// The largest flow-control window (2^31 - 1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
/// The initial window of every stream and of the connection until SETTINGS change the streams'.
pub const DEFAULT_WINDOW: u32 = 65_535;

// Frame types (§6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

// Flags. ACK (SETTINGS, PING) shares END_STREAM's bit.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

// Settings identifiers (§6.5.2).
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

// Error codes (§7).
pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const INTERNAL_ERROR: u32 = 0x2;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const SETTINGS_TIMEOUT: u32 = 0x4;
pub const STREAM_CLOSED: u32 = 0x5;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;
pub const CONNECT_ERROR: u32 = 0xa;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;
pub const INADEQUATE_SECURITY: u32 = 0xc;
pub const HTTP_1_1_REQUIRED: u32 = 0xd;

/// The RFC's name of an error code ("REFUSED_STREAM"); codes it does not define are "UNKNOWN" (they must be
/// treated as INTERNAL_ERROR, but reports should show what the peer sent: print the number next to it).
pub fn error_name(code: u32) -> &'static str {
    match code {
        NO_ERROR => "NO_ERROR",
        PROTOCOL_ERROR => "PROTOCOL_ERROR",
        INTERNAL_ERROR => "INTERNAL_ERROR",
        FLOW_CONTROL_ERROR => "FLOW_CONTROL_ERROR",
        SETTINGS_TIMEOUT => "SETTINGS_TIMEOUT",
        STREAM_CLOSED => "STREAM_CLOSED",
        FRAME_SIZE_ERROR => "FRAME_SIZE_ERROR",
        REFUSED_STREAM => "REFUSED_STREAM",
        CANCEL => "CANCEL",
        COMPRESSION_ERROR => "COMPRESSION_ERROR",
        CONNECT_ERROR => "CONNECT_ERROR",
        ENHANCE_YOUR_CALM => "ENHANCE_YOUR_CALM",
        INADEQUATE_SECURITY => "INADEQUATE_SECURITY",
        HTTP_1_1_REQUIRED => "HTTP_1_1_REQUIRED",
        _ => "UNKNOWN",
    }
}

/// The 9 bytes in front of every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length (24 bits).
    pub length: u32,
    pub kind: u8,
    pub flags: u8,
    /// Stream identifier, the reserved bit cleared.
    pub stream: u32,
}

impl FrameHeader {
    /// The header at the start of `buf`, or None while fewer than 9 bytes are there.
    pub fn parse(buf: &[u8]) -> Option<FrameHeader> {
        let h: &[u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
        Some(FrameHeader {
            length: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_WINDOW,
        })
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// The PRIORITY fields of a PRIORITY frame or a HEADERS frame with the PRIORITY flag (deprecated by RFC 9113
/// and ignored by the client, but parsed so a test can check what it wrote).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub dependency: u32,
    pub exclusive: bool,
    /// As on the wire: the weight minus one.
    pub weight: u8,
}

/// One frame, borrowing its payload from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `data` without padding; `flow_len` is the whole payload (padding included), what flow control counts.
    Data {
        stream: u32,
        end_stream: bool,
        data: &'a [u8],
        flow_len: u32,
    },
    /// `block` is the header block fragment, padding and priority fields removed.
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
        block: &'a [u8],
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        code: u32,
    },
    /// `payload` is a whole number of 6-byte settings: read them with [`settings`].
    Settings {
        ack: bool,
        payload: &'a [u8],
    },
    PushPromise {
        stream: u32,
        end_headers: bool,
        promised: u32,
        block: &'a [u8],
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        code: u32,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        block: &'a [u8],
    },
    /// A type this parser does not know: to be ignored (§5.5), except inside a header block.
    Unknown {
        kind: u8,
        stream: u32,
    },
}

/// A frame that breaks the framing rules. Some of these are stream errors in the RFC; the parser reports
/// them all as connection errors, which §5.4 allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameError {
    pub code: u32,
    pub reason: &'static str,
}

const fn frame_error(code: u32, reason: &'static str) -> FrameError {
    FrameError { code, reason }
}

/// Parses the frame at the start of `buf`. `Ok(None)` while the frame is incomplete (its header says how long
/// it is; nothing is consumed); otherwise the frame and the bytes it took. A frame longer than `max_len` (the
/// SETTINGS_MAX_FRAME_SIZE we advertised) is refused from its header alone, so a caller that buffers partial
/// frames never holds more than `HEADER_LEN + max_len` bytes.
pub fn parse(buf: &[u8], max_len: u32) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let Some(h) = FrameHeader::parse(buf) else { return Ok(None) };
    if h.length > max_len {
        return Err(frame_error(FRAME_SIZE_ERROR, "frame larger than our SETTINGS_MAX_FRAME_SIZE"));
    }
    let total = HEADER_LEN + h.length as usize;
    let Some(payload) = buf.get(HEADER_LEN..total) else { return Ok(None) };
    let on_stream = |what: &'static str| if h.stream == 0 { Err(frame_error(PROTOCOL_ERROR, what)) } else { Ok(()) };
    let on_connection =
        |what: &'static str| if h.stream != 0 { Err(frame_error(PROTOCOL_ERROR, what)) } else { Ok(()) };
    let frame = match h.kind {
        DATA => {
            on_stream("DATA on stream 0")?;
            let data = unpad(&h, payload)?;
            Frame::Data { stream: h.stream, end_stream: h.has(END_STREAM), data, flow_len: h.length }
        }
        HEADERS => {
            on_stream("HEADERS on stream 0")?;
            let mut block = unpad(&h, payload)?;
            let mut priority = None;
            if h.has(PRIORITY_FLAG) {
                let (fields, rest) = block
                    .split_first_chunk::<5>()
                    .ok_or(frame_error(FRAME_SIZE_ERROR, "HEADERS too short for its priority fields"))?;
                priority = Some(read_priority(fields));
                block = rest;
            }
            Frame::Headers {
                stream: h.stream,
                end_stream: h.has(END_STREAM),
                end_headers: h.has(END_HEADERS),
                priority,
                block,
            }
        }
        PRIORITY => {
            on_stream("PRIORITY on stream 0")?;
            let fields: &[u8; 5] =
                payload.try_into().map_err(|_| frame_error(FRAME_SIZE_ERROR, "PRIORITY payload is not 5 bytes"))?;
            Frame::Priority { stream: h.stream, priority: read_priority(fields) }
        }
        RST_STREAM => {
            on_stream("RST_STREAM on stream 0")?;
            let code = read_u32(payload).ok_or(frame_error(FRAME_SIZE_ERROR, "RST_STREAM payload is not 4 bytes"))?;
            Frame::RstStream { stream: h.stream, code }
        }
        SETTINGS => {
            on_connection("SETTINGS on a stream")?;
            let ack = h.has(ACK);
            if ack && !payload.is_empty() {
                return Err(frame_error(FRAME_SIZE_ERROR, "SETTINGS ACK with a payload"));
            }
            if !payload.len().is_multiple_of(6) {
                return Err(frame_error(FRAME_SIZE_ERROR, "SETTINGS payload is not a multiple of 6 bytes"));
            }
            Frame::Settings { ack, payload }
        }
        PUSH_PROMISE => {
            on_stream("PUSH_PROMISE on stream 0")?;
            let block = unpad(&h, payload)?;
            let (promised, block) = block
                .split_first_chunk::<4>()
                .ok_or(frame_error(FRAME_SIZE_ERROR, "PUSH_PROMISE too short for its stream id"))?;
            Frame::PushPromise {
                stream: h.stream,
                end_headers: h.has(END_HEADERS),
                promised: u32::from_be_bytes(*promised) & MAX_WINDOW,
                block,
            }
        }
        PING => {
            on_connection("PING on a stream")?;
            let data: [u8; 8] =
                payload.try_into().map_err(|_| frame_error(FRAME_SIZE_ERROR, "PING payload is not 8 bytes"))?;
            Frame::Ping { ack: h.has(ACK), data }
        }
        GOAWAY => {
            on_connection("GOAWAY on a stream")?;
            let (fixed, debug) =
                payload.split_first_chunk::<8>().ok_or(frame_error(FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes"))?;
            Frame::GoAway {
                last_stream: u32::from_be_bytes([fixed[0], fixed[1], fixed[2], fixed[3]]) & MAX_WINDOW,
                code: u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]),
                debug,
            }
        }
        WINDOW_UPDATE => {
            let increment =
                read_u32(payload).ok_or(frame_error(FRAME_SIZE_ERROR, "WINDOW_UPDATE payload is not 4 bytes"))?;
            Frame::WindowUpdate { stream: h.stream, increment: increment & MAX_WINDOW }
        }
        CONTINUATION => {
            on_stream("CONTINUATION on stream 0")?;
            Frame::Continuation { stream: h.stream, end_headers: h.has(END_HEADERS), block: payload }
        }
        kind => Frame::Unknown { kind, stream: h.stream },
    };
    Ok(Some((frame, total)))
}

/// The six-byte settings of a SETTINGS payload, as (identifier, value); a trailing partial entry (which
/// [`parse`] never lets through) is dropped.
pub fn settings(payload: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    payload.chunks_exact(6).map(|s| (u16::from_be_bytes([s[0], s[1]]), u32::from_be_bytes([s[2], s[3], s[4], s[5]])))
}

/// The payload without its padding when the PADDED flag is set: the pad length byte, then the content, then
/// that many bytes of padding, which must leave room for the content (§6.1).
fn unpad<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if !h.has(PADDED) {
        return Ok(payload);
    }
    let (&pad, rest) =
        payload.split_first().ok_or(frame_error(FRAME_SIZE_ERROR, "padded frame without a pad length"))?;
    let end = rest
        .len()
        .checked_sub(usize::from(pad))
        .ok_or(frame_error(PROTOCOL_ERROR, "padding longer than the frame payload"))?;
    Ok(&rest[..end])
}

fn read_priority(fields: &[u8; 5]) -> Priority {
    let word = u32::from_be_bytes([fields[0], fields[1], fields[2], fields[3]]);
    Priority { dependency: word & MAX_WINDOW, exclusive: word & !MAX_WINDOW != 0, weight: fields[4] }
}

fn read_u32(payload: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(payload.try_into().ok()?))
}

/// Appends a frame header. `length` is written as its low 24 bits and `stream` as its low 31: callers that
/// want a lying length (a test's malformed frame) pass it here and write the payload themselves.
pub fn write_header(out: &mut Vec<u8>, length: u32, kind: u8, flags: u8, stream: u32) {
    let len = length.to_be_bytes();
    out.extend_from_slice(&[len[1], len[2], len[3], kind, flags]);
    out.extend_from_slice(&(stream & MAX_WINDOW).to_be_bytes());
}

/// Appends a frame of any type with `payload` as is (which must fit 24 bits of length).
pub fn write_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_FRAME_SIZE_LIMIT as usize, "frame payload over 2^24-1 bytes");
    write_header(out, payload.len() as u32, kind, flags, stream);
    out.extend_from_slice(payload);
}

/// Appends a frame of a paddable type (DATA, HEADERS, PUSH_PROMISE) with the PADDED flag and `pad` zero
/// bytes of padding after `content`.
pub fn write_padded(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, content: &[u8], pad: u8) {
    let length = 1 + content.len() + usize::from(pad);
    debug_assert!(length <= MAX_FRAME_SIZE_LIMIT as usize, "frame payload over 2^24-1 bytes");
    write_header(out, length as u32, kind, flags | PADDED, stream);
    out.push(pad);
    out.extend_from_slice(content);
    out.resize(out.len() + usize::from(pad), 0);
}

pub fn write_data(out: &mut Vec<u8>, stream: u32, flags: u8, data: &[u8]) {
    write_frame(out, DATA, flags, stream, data);
}

/// A HEADERS frame carrying `block` (flags: END_STREAM, END_HEADERS; PRIORITY and PADDED only when the
/// caller put those fields into `block` itself).
pub fn write_headers(out: &mut Vec<u8>, stream: u32, flags: u8, block: &[u8]) {
    write_frame(out, HEADERS, flags, stream, block);
}

pub fn write_continuation(out: &mut Vec<u8>, stream: u32, flags: u8, block: &[u8]) {
    write_frame(out, CONTINUATION, flags, stream, block);
}

pub fn write_priority(out: &mut Vec<u8>, stream: u32, priority: Priority) {
    write_header(out, 5, PRIORITY, 0, stream);
    let exclusive = if priority.exclusive { !MAX_WINDOW } else { 0 };
    out.extend_from_slice(&((priority.dependency & MAX_WINDOW) | exclusive).to_be_bytes());
    out.push(priority.weight);
}

pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_frame(out, RST_STREAM, 0, stream, &code.to_be_bytes());
}

/// A SETTINGS frame (not an ACK) with these (identifier, value) pairs, in order.
pub fn write_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    write_header(out, (settings.len() * 6) as u32, SETTINGS, 0, 0);
    for (id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_header(out, 0, SETTINGS, ACK, 0);
}

pub fn write_push_promise(out: &mut Vec<u8>, stream: u32, flags: u8, promised: u32, block: &[u8]) {
    write_header(out, (4 + block.len()) as u32, PUSH_PROMISE, flags, stream);
    out.extend_from_slice(&(promised & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(block);
}

pub fn write_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    write_frame(out, PING, if ack { ACK } else { 0 }, 0, &data);
}

pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32, debug: &[u8]) {
    write_header(out, (8 + debug.len()) as u32, GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(debug);
}

/// A WINDOW_UPDATE for `stream` (0: the connection). The increment is written as given (its reserved bit
/// cleared), zero included: a test may want to send the invalid zero increment.
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_frame(out, WINDOW_UPDATE, 0, stream, &(increment & MAX_WINDOW).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(buf: &[u8]) -> Frame<'_> {
        let (frame, used) = parse(buf, DEFAULT_MAX_FRAME_SIZE).expect("valid").expect("complete");
        assert_eq!(used, buf.len(), "one frame takes the whole buffer");
        // Every shorter prefix is incomplete, not an error.
        for cut in 0..buf.len() {
            assert_eq!(parse(&buf[..cut], DEFAULT_MAX_FRAME_SIZE), Ok(None), "prefix of {cut} bytes");
        }
        frame
    }

    fn err(buf: &[u8]) -> u32 {
        parse(buf, DEFAULT_MAX_FRAME_SIZE).expect_err("invalid").code
    }

    #[test]
    fn every_writer_round_trips_through_the_parser() {
        let mut out = Vec::new();
        write_data(&mut out, 3, END_STREAM, b"body");
        assert_eq!(one(&out), Frame::Data { stream: 3, end_stream: true, data: b"body", flow_len: 4 });
        out.clear();
        write_headers(&mut out, 5, END_HEADERS, b"\x82\x84");
        assert_eq!(
            one(&out),
            Frame::Headers { stream: 5, end_stream: false, end_headers: true, priority: None, block: b"\x82\x84" }
        );
        out.clear();
        write_continuation(&mut out, 5, END_HEADERS, b"\x86");
        assert_eq!(one(&out), Frame::Continuation { stream: 5, end_headers: true, block: b"\x86" });
        out.clear();
        let priority = Priority { dependency: 3, exclusive: true, weight: 15 };
        write_priority(&mut out, 7, priority);
        assert_eq!(one(&out), Frame::Priority { stream: 7, priority });
        out.clear();
        write_rst_stream(&mut out, 9, REFUSED_STREAM);
        assert_eq!(one(&out), Frame::RstStream { stream: 9, code: REFUSED_STREAM });
        out.clear();
        write_settings(&mut out, &[(SETTINGS_ENABLE_PUSH, 0), (SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)]);
        let Frame::Settings { ack: false, payload } = one(&out) else { panic!("not SETTINGS") };
        assert_eq!(
            settings(payload).collect::<Vec<_>>(),
            vec![(SETTINGS_ENABLE_PUSH, 0), (SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)]
        );
        out.clear();
        write_settings_ack(&mut out);
        assert_eq!(one(&out), Frame::Settings { ack: true, payload: b"" });
        out.clear();
        write_push_promise(&mut out, 1, END_HEADERS, 2, b"\x82");
        assert_eq!(one(&out), Frame::PushPromise { stream: 1, end_headers: true, promised: 2, block: b"\x82" });
        out.clear();
        write_ping(&mut out, true, *b"12345678");
        assert_eq!(one(&out), Frame::Ping { ack: true, data: *b"12345678" });
        out.clear();
        write_goaway(&mut out, 41, ENHANCE_YOUR_CALM, b"calm down");
        assert_eq!(one(&out), Frame::GoAway { last_stream: 41, code: ENHANCE_YOUR_CALM, debug: b"calm down" });
        out.clear();
        write_window_update(&mut out, 0, MAX_WINDOW);
        assert_eq!(one(&out), Frame::WindowUpdate { stream: 0, increment: MAX_WINDOW });
        out.clear();
        write_frame(&mut out, 0xfa, 0xff, 3, b"whatever");
        assert_eq!(one(&out), Frame::Unknown { kind: 0xfa, stream: 3 });
    }

    #[test]
    fn padding_and_priority_fields_are_stripped() {
        let mut out = Vec::new();
        write_padded(&mut out, DATA, END_STREAM, 1, b"abc", 4);
        assert_eq!(one(&out), Frame::Data { stream: 1, end_stream: true, data: b"abc", flow_len: 8 });
        out.clear();
        // PRIORITY fields, then the block, inside padding.
        write_padded(&mut out, HEADERS, END_HEADERS | PRIORITY_FLAG, 1, b"\x80\x00\x00\x03\x10\x88", 2);
        assert_eq!(
            one(&out),
            Frame::Headers {
                stream: 1,
                end_stream: false,
                end_headers: true,
                priority: Some(Priority { dependency: 3, exclusive: true, weight: 16 }),
                block: b"\x88",
            }
        );
        out.clear();
        // Padding exactly fills the payload: an empty DATA frame is fine.
        write_padded(&mut out, DATA, 0, 1, b"", 255);
        assert_eq!(one(&out), Frame::Data { stream: 1, end_stream: false, data: b"", flow_len: 256 });
    }

    #[test]
    fn bad_lengths_and_streams_are_refused() {
        let mut out = Vec::new();
        // Pad length beyond the payload.
        write_header(&mut out, 3, DATA, PADDED, 1);
        out.extend_from_slice(&[5, b'a', b'b']);
        assert_eq!(err(&out), PROTOCOL_ERROR);
        let cases: &[(u8, u8, u32, &[u8], u32)] = &[
            (DATA, PADDED, 1, b"", FRAME_SIZE_ERROR),
            (DATA, 0, 0, b"x", PROTOCOL_ERROR),
            (HEADERS, PRIORITY_FLAG, 1, b"\x00\x00", FRAME_SIZE_ERROR),
            (PRIORITY, 0, 1, b"\x00\x00\x00\x00", FRAME_SIZE_ERROR),
            (RST_STREAM, 0, 1, b"\x00\x00\x00", FRAME_SIZE_ERROR),
            (RST_STREAM, 0, 0, b"\x00\x00\x00\x00", PROTOCOL_ERROR),
            (SETTINGS, 0, 0, b"\x00\x01\x00", FRAME_SIZE_ERROR),
            (SETTINGS, ACK, 0, b"\x00\x01\x00\x00\x00\x00", FRAME_SIZE_ERROR),
            (SETTINGS, 0, 1, b"", PROTOCOL_ERROR),
            (PUSH_PROMISE, 0, 1, b"\x00\x00", FRAME_SIZE_ERROR),
            (PING, 0, 0, b"1234567", FRAME_SIZE_ERROR),
            (PING, 0, 1, b"12345678", PROTOCOL_ERROR),
            (GOAWAY, 0, 0, b"1234567", FRAME_SIZE_ERROR),
            (GOAWAY, 0, 3, b"12345678", PROTOCOL_ERROR),
            (WINDOW_UPDATE, 0, 0, b"\x00\x00\x01", FRAME_SIZE_ERROR),
            (CONTINUATION, 0, 0, b"", PROTOCOL_ERROR),
        ];
        for &(kind, flags, stream, payload, code) in cases {
            out.clear();
            write_frame(&mut out, kind, flags, stream, payload);
            assert_eq!(err(&out), code, "type {kind} flags {flags} stream {stream} payload {payload:?}");
        }
    }

    #[test]
    fn a_frame_over_the_limit_is_refused_from_its_header_and_partial_input_waits() {
        let mut out = Vec::new();
        write_header(&mut out, DEFAULT_MAX_FRAME_SIZE + 1, DATA, 0, 1);
        // Only the header has arrived: still refused, nothing waits for 16 KiB.
        assert_eq!(err(&out), FRAME_SIZE_ERROR);
        assert_eq!(parse(&out, DEFAULT_MAX_FRAME_SIZE + 1), Ok(None));
        // Two frames back to back: the first is taken, the rest left.
        out.clear();
        write_ping(&mut out, false, [1; 8]);
        write_settings_ack(&mut out);
        let (frame, used) = parse(&out, DEFAULT_MAX_FRAME_SIZE).expect("valid").expect("complete");
        assert_eq!((frame, used), (Frame::Ping { ack: false, data: [1; 8] }, 17));
        assert_eq!(FrameHeader::parse(&out[used..]).map(|h| h.kind), Some(SETTINGS));
        // The reserved bit of the stream id is ignored.
        out.clear();
        write_header(&mut out, 0, DATA, 0, 1);
        out[5] |= 0x80;
        assert_eq!(one(&out), Frame::Data { stream: 1, end_stream: false, data: b"", flow_len: 0 });
    }

    #[test]
    fn error_codes_have_names() {
        assert_eq!(error_name(REFUSED_STREAM), "REFUSED_STREAM");
        assert_eq!(error_name(HTTP_1_1_REQUIRED), "HTTP_1_1_REQUIRED");
        assert_eq!(error_name(0xe), "UNKNOWN");
    }
}
