//! An HTTP/1.1 request turned into an HTTP/2 one: the request line and headers become a header block
//! (pseudo-headers first, connection-specific headers dropped, names lower-cased), framed as HEADERS and, past
//! the server's frame size, CONTINUATION. The worker renders every request as HTTP/1.1 (`source`), so this is
//! the one place that knows how the two differ; `h2::Client::open` owns the stream and the encoder's state.

use crate::h2_frame as frame;
use crate::hpack::{Encoder, write_table_size_update};

/// Request headers `open` reads at most (as `source` does for replayed requests).
pub(crate) const MAX_REQUEST_HEADERS: usize = 64;
/// Our HPACK encoder's table at most (the server's SETTINGS_HEADER_TABLE_SIZE can only lower it).
const ENCODER_TABLE: u32 = 4096;

/// Why `open` refused a request. Nothing was written and no stream id was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("no HTTP/2 stream available (not started, concurrency limit, GOAWAY, ids exhausted or failed)")]
    NoStream,
    #[error("not one complete HTTP/1.1 request")]
    Invalid,
    #[error("request with more than {MAX_REQUEST_HEADERS} headers")]
    TooManyHeaders,
    #[error("request with an invalid Content-Length")]
    ContentLength,
    #[error("request bytes after the Content-Length body (a chunked body is not supported over HTTP/2)")]
    Trailing,
    #[error("CONNECT is not supported over HTTP/2")]
    Connect,
}

/// One complete HTTP/1.1 request, parsed: what its HTTP/2 form is made of.
pub(crate) struct Request<'h, 'b> {
    pub(crate) method: &'b str,
    path: &'b str,
    headers: &'h [httparse::Header<'b>],
    pub(crate) body: &'b [u8],
}

/// Parses `request` (request line, headers, blank line, a body of Content-Length bytes and nothing after it)
/// with `headers` as httparse's room.
pub(crate) fn parse<'h, 'b>(
    request: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
) -> Result<Request<'h, 'b>, RequestError> {
    let mut req = httparse::Request::new(headers);
    let head_len = match req.parse(request) {
        Ok(httparse::Status::Complete(n)) => n,
        Err(httparse::Error::TooManyHeaders) => return Err(RequestError::TooManyHeaders),
        Ok(httparse::Status::Partial) | Err(_) => return Err(RequestError::Invalid),
    };
    let (Some(method), Some(path)) = (req.method, req.path) else { return Err(RequestError::Invalid) };
    if method == "CONNECT" {
        return Err(RequestError::Connect);
    }
    let mut body_len: Option<usize> = None;
    for h in req.headers.iter().filter(|h| h.name.eq_ignore_ascii_case("content-length")) {
        let value = trim(h.value);
        let n = std::str::from_utf8(value)
            .ok()
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<usize>().ok())
            .ok_or(RequestError::ContentLength)?;
        if body_len.is_some_and(|l| l != n) {
            return Err(RequestError::ContentLength);
        }
        body_len = Some(n);
    }
    let body_end = head_len.checked_add(body_len.unwrap_or(0)).ok_or(RequestError::ContentLength)?;
    let body = request.get(head_len..body_end).ok_or(RequestError::ContentLength)?;
    if request.len() != body_end {
        return Err(RequestError::Trailing);
    }
    Ok(Request { method, path, headers: req.headers, body })
}

/// Writes requests' header blocks: the connection's HPACK encoder, which indexes every field that fits its
/// table (so a repeated request costs about a dozen bytes), and the table size changes the server has not
/// heard of yet.
pub(crate) struct RequestEncoder {
    encoder: Encoder,
    /// The encoder's table size and the smallest it had since the last header block we sent: both must be
    /// signalled at the start of the next block when they differ from what the server last heard (RFC 7541
    /// §4.2).
    table: u32,
    low: u32,
    signalled: u32,
    /// A lower-cased request header name; the tail of a header block that needs CONTINUATION frames.
    name: Vec<u8>,
    scratch: Vec<u8>,
}

impl RequestEncoder {
    pub(crate) fn new() -> RequestEncoder {
        RequestEncoder {
            encoder: Encoder::new(ENCODER_TABLE as usize),
            table: ENCODER_TABLE,
            low: ENCODER_TABLE,
            signalled: ENCODER_TABLE,
            name: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The server's SETTINGS_HEADER_TABLE_SIZE: the table it keeps for our blocks, which ours must fit.
    pub(crate) fn server_table_size(&mut self, value: u32) {
        let size = value.min(ENCODER_TABLE);
        self.table = size;
        self.low = self.low.min(size);
    }

    /// Writes `request`'s header block for `stream` into `out`, in a HEADERS frame (END_STREAM when it has no
    /// body) and CONTINUATION frames past `max`, the server's frame size.
    pub(crate) fn write(
        &mut self,
        request: &Request<'_, '_>,
        scheme: &[u8],
        stream: u32,
        max: usize,
        out: &mut Vec<u8>,
    ) {
        let frame_at = out.len();
        frame::write_header(out, 0, frame::HEADERS, 0, stream);
        let block_at = out.len();
        self.signal_table_size(out);
        self.encode(request, scheme, out);
        let end_stream = if request.body.is_empty() { frame::END_STREAM } else { 0 };
        frame_block(out, frame_at, block_at, stream, max, end_stream, &mut self.scratch);
    }

    /// Encodes the header block's fields into `out`: `:method`, `:scheme`, `:authority` (from Host), `:path`,
    /// then the forwarded headers with lower-cased names.
    fn encode(&mut self, request: &Request<'_, '_>, scheme: &[u8], out: &mut Vec<u8>) {
        let RequestEncoder { encoder, name, .. } = self;
        encoder.encode(b":method", request.method.as_bytes(), out);
        encoder.encode(b":scheme", scheme, out);
        if let Some(host) = request.headers.iter().find(|h| h.name.eq_ignore_ascii_case("host")) {
            encoder.encode(b":authority", trim(host.value), out);
        }
        encoder.encode(b":path", request.path.as_bytes(), out);
        for h in request.headers.iter() {
            if !forwarded(h) {
                continue;
            }
            name.clear();
            name.extend(h.name.bytes().map(|b| b.to_ascii_lowercase()));
            encoder.encode(name, trim(h.value), out);
        }
    }

    /// Before the first field of a header block: the encoder's table size changes the server has not heard
    /// of, the smallest first (RFC 7541 §4.2), applied to the encoder as they are announced.
    fn signal_table_size(&mut self, out: &mut Vec<u8>) {
        if self.low < self.signalled {
            self.encoder.set_max(self.low as usize);
            write_table_size_update(out, self.low);
            self.signalled = self.low;
        }
        if self.table != self.signalled {
            self.encoder.set_max(self.table as usize);
            write_table_size_update(out, self.table);
            self.signalled = self.table;
        }
        self.low = self.table;
    }
}

/// Frames the header block written at `block_at`, behind the placeholder HEADERS frame header at `frame_at`:
/// one HEADERS frame when it fits in `max` bytes, else HEADERS and CONTINUATION frames (`scratch` holds the
/// tail meanwhile). `end_stream`: the request has no body.
fn frame_block(
    out: &mut Vec<u8>,
    frame_at: usize,
    block_at: usize,
    stream: u32,
    max: usize,
    end_stream: u8,
    scratch: &mut Vec<u8>,
) {
    let block_len = out.len() - block_at;
    if block_len <= max {
        patch_header(out, frame_at, block_len, end_stream | frame::END_HEADERS);
        return;
    }
    // Rare (a block over 16 KiB): the tail moves out of the way and comes back in CONTINUATION frames.
    scratch.clear();
    scratch.extend_from_slice(&out[block_at + max..]);
    out.truncate(block_at + max);
    patch_header(out, frame_at, max, end_stream);
    let pieces = scratch.len().div_ceil(max);
    for (k, piece) in scratch.chunks(max).enumerate() {
        let flags = if k + 1 == pieces { frame::END_HEADERS } else { 0 };
        frame::write_continuation(out, stream, flags, piece);
    }
}

/// A header that goes into the HTTP/2 request as a regular field: not Host (it became `:authority`), not a
/// connection-specific header (RFC 9113 §8.2.2), which HTTP/2 forbids.
fn forwarded(h: &httparse::Header<'_>) -> bool {
    let name = h.name;
    let dropped = ["host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];
    if dropped.iter().any(|d| name.eq_ignore_ascii_case(d)) {
        return false;
    }
    !name.eq_ignore_ascii_case("te") || trim(h.value).eq_ignore_ascii_case(b"trailers")
}

/// Fills in the length and flags of the frame header written at `at` with a placeholder.
fn patch_header(out: &mut [u8], at: usize, length: usize, flags: u8) {
    let len = (length as u32).to_be_bytes();
    out[at..at + 3].copy_from_slice(&len[1..]);
    out[at + 4] = flags;
}

/// A field value without the whitespace around it (`h2_response` trims `content-length` with it too).
pub(crate) fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &bytes[start..end]
}
