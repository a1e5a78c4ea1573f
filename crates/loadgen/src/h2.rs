//! The HTTP/2 client side of one connection, sans-I/O: the worker hands it the bytes it read and a write
//! buffer, and it hands back events. It speaks h2 over TLS (after ALPN chose "h2") and h2c by prior knowledge
//! alike: it never sees the socket or TLS, only the bytes inside them.
//!
//! How the worker drives it:
//! * [`Client::start`] once the connection is ready: the preface, our SETTINGS and the connection's
//!   WINDOW_UPDATE go into the write buffer.
//! * [`Client::open`] for each request while [`Client::can_open`]: the request, rendered as HTTP/1.1 by
//!   `source` exactly as for HTTP/1.1 connections, becomes a HEADERS frame (CONTINUATION when the block is
//!   larger than the server's frame size) and DATA frames for its body. It returns the stream id: 1, 3, 5…
//!   in the order of the calls, so the worker can key its per-request records by it.
//! * [`Client::receive`] with what was read: it consumes whole frames only and says how many bytes it took;
//!   the worker keeps the rest and calls again when more arrive (as with `http1::ResponseParser`). What the
//!   protocol requires in reply (SETTINGS and PING ACKs, WINDOW_UPDATEs, request body that now fits the
//!   server's windows) is appended to the write buffer, and what happened is reported through the callback.
//!
//! Every opened stream ends in exactly one of [`Event::Done`], [`Event::Reset`] (the server's RST_STREAM),
//! [`Event::StreamError`] (the client reset it: the server broke the protocol on it) or
//! [`Event::Unprocessed`] (above a GOAWAY's last stream id: never processed, safe to retry), unless the worker
//! cancels it ([`Client::cancel`], for a timeout) or the connection fails (`receive` returns a [`ConnError`]:
//! every stream still open is lost; [`Client::in_flight`] says how many).
//!
//! Choices:
//! * Windows: 2^30-1 per stream and for the connection by default, as h2load does, so a load test measures
//!   the server rather than our flow control. The connection's window starts at 65,535 whatever SETTINGS say,
//!   so `start` raises it with a WINDOW_UPDATE. Received DATA is replenished once half of a window has been
//!   consumed (the data is handed over at once, so consumed means received): the server never stalls on us.
//! * HPACK: ours (`hpack`, which says why). Responses are decoded into reused buffers and handed over as
//!   `&[httparse::Header]`, the type the worker's assertions take; requests are encoded straight into the write
//!   buffer, indexing every field that fits the table, so a repeated request costs about a dozen bytes.
//! * Allocation: none per request in steady state. Streams' records (and the request body buffered behind a
//!   closed window) are reused, header blocks are encoded straight into the write buffer, and DATA is never
//!   buffered: it is handed over as [`Event::Data`].
//! * Bounds against a hostile server: frames larger than our SETTINGS_MAX_FRAME_SIZE are refused from their
//!   header (so the worker buffers at most one frame), header blocks and decoded header lists are capped at
//!   `max_header_list` bytes and a block at [`MAX_CONTINUATIONS`] CONTINUATION frames, the HPACK table at 4,096
//!   bytes; what we write in reply is at most proportional to what we consumed.
//! * Errors: a connection error writes a GOAWAY with its code (best effort) and returns [`ConnError`]; the
//!   client is then dead and says so on every later call. A malformed response (no `:status`, pseudo-headers
//!   it should not have, a body that disagrees with `content-length`, DATA before the head…) or a stream-level
//!   flow control error resets only its stream.
//!
//! Not supported: server push (refused by SETTINGS_ENABLE_PUSH=0; a PUSH_PROMISE is a connection error),
//! priorities (PRIORITY frames and fields are parsed and ignored), CONNECT and extended CONNECT, a request
//! body other than the one its Content-Length announces (no chunked request bodies), padding our own frames.
//!
//! Beside this file: `h2_settings` (both sides' SETTINGS), `h2_request` (a request's header block),
//! `h2_response` (decoding a response's) and `h2_stream` (the streams and their flow control).

use crate::h2_frame::{self as frame, Frame};
use crate::h2_request::{self, MAX_REQUEST_HEADERS, RequestEncoder};
use crate::h2_response::{Decoded, Fields, Status};
use crate::h2_stream::{Known, RecvWindow, Response, Streams};
use crate::hpack::Decoder;

pub use crate::h2_request::RequestError;
pub use crate::h2_settings::{Config, Scheme, ServerSettings};

/// The largest stream id a client can use.
pub const MAX_STREAM_ID: u32 = (1 << 31) - 1;
/// CONTINUATION frames allowed in one header block: legitimate servers send a handful (a 64 KiB block in
/// 16 KiB frames is four); a flood of empty ones would otherwise keep the client in one block forever.
pub const MAX_CONTINUATIONS: u32 = 256;
/// Our HPACK decoder's table: the RFC's default, so SETTINGS_HEADER_TABLE_SIZE is never sent.
const DECODER_TABLE: usize = 4096;

/// What `receive` reports, borrowing from the input and the client's scratch buffers.
#[derive(Debug)]
pub enum Event<'a> {
    /// The server's SETTINGS, each time a SETTINGS frame arrives, with every value as it now stands.
    Settings(ServerSettings),
    /// The final response head (1xx interim heads are skipped and counted). Field names are lower case.
    Head { stream: u32, status: u16, headers: &'a [httparse::Header<'a>] },
    /// Response body bytes, as they arrive (padding removed). Never empty.
    Data { stream: u32, bytes: &'a [u8] },
    /// The response is complete (END_STREAM, on DATA, HEADERS or trailers); `body_len` is the sum of its
    /// `Data` events' lengths. Trailers are checked and dropped.
    Done { stream: u32, status: u16, body_len: u64 },
    /// The server reset the stream (RST_STREAM). REFUSED_STREAM means it was not processed at all.
    Reset { stream: u32, code: u32 },
    /// The server broke the protocol on this stream (a malformed response, flow control); the client reset
    /// it (RST_STREAM with `code` went into the write buffer, unless the server had ended the stream).
    StreamError { stream: u32, code: u32, reason: &'static str },
    /// The server is going away: no new streams on this connection (`can_open` is false from now on). Streams
    /// up to `last_stream` may still complete; those above it follow as `Unprocessed`. A server closing
    /// gracefully sends two: first with last_stream 2^31-1, then with the real one.
    GoAway { last_stream: u32, code: u32, debug: &'a [u8] },
    /// The stream is above a GOAWAY's last stream id: the server never processed it and will not answer.
    Unprocessed { stream: u32 },
}

/// Protocol facts about one connection, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub streams_opened: u64,
    /// `Done` events.
    pub responses: u64,
    /// `Reset` events (RST_STREAM from the server on a stream still open), refusals included.
    pub resets_received: u64,
    /// Of those, REFUSED_STREAM.
    pub refused: u64,
    /// `StreamError` events: streams the client reset because of the server.
    pub stream_errors: u64,
    /// Streams the worker cancelled.
    pub cancelled: u64,
    /// `Unprocessed` events.
    pub unprocessed: u64,
    pub goaways: u64,
    /// 1xx heads skipped.
    pub interim_responses: u64,
    /// SETTINGS frames from the server, ACKs not counted.
    pub settings_received: u64,
    /// SETTINGS ACKs from the server (ours acknowledged).
    pub settings_acked: u64,
    /// PINGs from the server (answered), ACKs not counted.
    pub pings_received: u64,
    pub window_updates_received: u64,
    pub window_updates_sent: u64,
    /// DATA payload received, padding included (what flow control counts).
    pub data_bytes_received: u64,
}

/// The connection is over: a protocol error (ours to report: a GOAWAY with `code` went into the write buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/2 connection error {}: {reason}", frame::error_name(*code))]
pub struct ConnError {
    pub code: u32,
    pub reason: &'static str,
}

/// A HEADERS frame without END_HEADERS: CONTINUATION frames for `stream` follow.
#[derive(Debug, Clone, Copy)]
struct Continuing {
    stream: u32,
    end_stream: bool,
    frames: u32,
}

pub struct Client {
    config: Config,
    server: ServerSettings,
    requests: RequestEncoder,
    decoder: Decoder,
    started: bool,
    /// A SETTINGS frame came (the first frame the server sends must be one).
    server_spoke: bool,
    streams: Streams,
    /// Connection windows: what we may send, what the server may send (and sent since our last update).
    send_window: i64,
    recv: RecvWindow,
    /// The last stream id and code of the GOAWAYs received (the lowest last stream id).
    goaway: Option<(u32, u32)>,
    failed: Option<ConnError>,
    continuing: Option<Continuing>,
    /// A header block arriving in several frames.
    block: Vec<u8>,
    /// The regular fields of the last header block decoded.
    fields: Fields,
    counts: Counts,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server)
            .field("in_flight", &self.streams.len())
            .field("next_id", &self.streams.next_id())
            .field("goaway", &self.goaway)
            .field("failed", &self.failed)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for one connection. Out-of-range settings are brought into range (see [`Config`]).
    pub fn new(config: Config) -> Client {
        let config = config.clamped();
        let decoder = Decoder::new(DECODER_TABLE);
        Client {
            server: ServerSettings::default(),
            requests: RequestEncoder::new(),
            decoder,
            started: false,
            server_spoke: false,
            streams: Streams::new(config.stream_window),
            send_window: i64::from(frame::DEFAULT_WINDOW),
            recv: RecvWindow::new(frame::DEFAULT_WINDOW),
            goaway: None,
            failed: None,
            continuing: None,
            block: Vec::new(),
            fields: Fields::default(),
            counts: Counts::default(),
            config,
        }
    }

    /// Writes the connection preface: the magic, our SETTINGS (push off, our stream window, header list and
    /// frame size) and the WINDOW_UPDATE that raises the connection window from its fixed 65,535. Requests
    /// may be opened right after, without waiting for the server's SETTINGS (its limits apply when they come).
    pub fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        out.extend_from_slice(frame::PREFACE);
        let c = &self.config;
        c.write_settings(out);
        let raise = c.connection_window - frame::DEFAULT_WINDOW;
        if raise > 0 {
            frame::write_window_update(out, 0, raise);
            self.counts.window_updates_sent += 1;
        }
        self.recv.set(c.connection_window);
    }

    /// A request may be opened now: started, under the server's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited
    /// until it says; streams opened beyond a limit that arrived later still complete), no GOAWAY received,
    /// stream ids left, and the connection has not failed.
    pub fn can_open(&self) -> bool {
        self.started
            && self.failed.is_none()
            && self.goaway.is_none()
            && self.streams.next_id() <= MAX_STREAM_ID
            && self.server.max_concurrent_streams.is_none_or(|max| self.streams.len() < max as usize)
    }

    /// Streams opened and not yet ended (by a response, a reset, a GOAWAY or `cancel`).
    pub fn in_flight(&self) -> usize {
        self.streams.len()
    }

    pub fn streams_opened(&self) -> u64 {
        self.counts.streams_opened
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    pub fn server_settings(&self) -> ServerSettings {
        self.server
    }

    /// The lowest last stream id and the last error code of the GOAWAYs received, if any.
    pub fn goaway(&self) -> Option<(u32, u32)> {
        self.goaway
    }

    /// The connection error that ended this client, if one did.
    pub fn failed(&self) -> Option<ConnError> {
        self.failed
    }

    /// Opens a stream for `request`, one complete HTTP/1.1 request as `source` renders it (request line,
    /// headers, blank line, a body of Content-Length bytes). The request line gives `:method` and `:path`,
    /// Host gives `:authority`, the scheme comes from the config; connection-specific headers (Connection,
    /// Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade, and TE unless it is "trailers") are dropped,
    /// names lower-cased. HEADERS (and CONTINUATION) go into `out`, then as much of the body as the server's
    /// windows allow; the rest is sent by `receive` as WINDOW_UPDATEs arrive. Returns the stream id.
    pub fn open(&mut self, out: &mut Vec<u8>, request: &[u8]) -> Result<u32, RequestError> {
        if !self.can_open() {
            return Err(RequestError::NoStream);
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_REQUEST_HEADERS];
        let request = h2_request::parse(request, &mut headers)?;
        let id = self.streams.next_id();
        let max = self.server.max_frame_size as usize;
        self.requests.write(&request, self.config.scheme.name(), id, max, out);
        let head_request = request.method == "HEAD";
        let send_window = self.server.initial_window_size;
        self.streams.open(head_request, send_window, request.body, &mut self.send_window, max, out);
        self.counts.streams_opened += 1;
        Ok(id)
    }

    /// Gives a stream up (a timeout): RST_STREAM CANCEL goes into `out` and the stream is forgotten; what the
    /// server still sends on it is ignored. False when the stream is not open.
    pub fn cancel(&mut self, out: &mut Vec<u8>, stream: u32) -> bool {
        let Known::Open(i) = self.streams.find(stream) else { return false };
        frame::write_rst_stream(out, stream, frame::CANCEL);
        self.streams.close(i);
        self.counts.cancelled += 1;
        true
    }

    /// Says goodbye before the worker closes the connection: GOAWAY NO_ERROR (we accept no streams, so the
    /// last stream id is 0). The client cannot open streams afterwards.
    pub fn shutdown(&mut self, out: &mut Vec<u8>) {
        if self.started && self.failed.is_none() {
            frame::write_goaway(out, 0, frame::NO_ERROR, b"");
        }
        self.goaway.get_or_insert((0, frame::NO_ERROR));
    }

    /// Consumes the whole frames at the start of `input` (an incomplete one is left for the next call, with
    /// more bytes after it) and returns how many bytes that was. Replies go into `out`, events to `on_event`.
    /// On a connection error, a GOAWAY goes into `out` and the error comes back, now and on every later call.
    pub fn receive(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        on_event: &mut impl FnMut(Event<'_>),
    ) -> Result<usize, ConnError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut at = 0;
        loop {
            let rest = &input[at..];
            if !self.server_spoke
                && let Some(h) = frame::FrameHeader::parse(rest)
                && (h.kind != frame::SETTINGS || h.has(frame::ACK))
            {
                return Err(self.fail(out, frame::PROTOCOL_ERROR, "the server's first frame is not SETTINGS"));
            }
            let (frame, used) = match frame::parse(rest, self.config.max_frame_size) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => break,
                Err(e) => return Err(self.fail(out, e.code, e.reason)),
            };
            if let Err(e) = self.on_frame(frame, out, on_event) {
                return Err(self.fail(out, e.code, e.reason));
            }
            at += used;
        }
        Ok(at)
    }

    fn fail(&mut self, out: &mut Vec<u8>, code: u32, reason: &'static str) -> ConnError {
        // The last stream id is the server's highest stream we processed: it may open none.
        frame::write_goaway(out, 0, code, reason.as_bytes());
        let e = ConnError { code, reason };
        self.failed = Some(e);
        self.continuing = None;
        e
    }

    fn on_frame(
        &mut self,
        frame: Frame<'_>,
        out: &mut Vec<u8>,
        on_event: &mut impl FnMut(Event<'_>),
    ) -> Result<(), ConnError> {
        if let Some(mut continuing) = self.continuing {
            let Frame::Continuation { stream, end_headers, block } = frame else {
                return Err(conn_error(frame::PROTOCOL_ERROR, "a frame other than CONTINUATION inside a header block"));
            };
            if stream != continuing.stream {
                return Err(conn_error(frame::PROTOCOL_ERROR, "CONTINUATION on another stream"));
            }
            continuing.frames += 1;
            if continuing.frames > MAX_CONTINUATIONS {
                return Err(conn_error(frame::ENHANCE_YOUR_CALM, "too many CONTINUATION frames in one header block"));
            }
            self.append_block(block)?;
            if !end_headers {
                self.continuing = Some(continuing);
                return Ok(());
            }
            self.continuing = None;
            let block = std::mem::take(&mut self.block);
            let done = self.on_header_block(continuing.stream, continuing.end_stream, &block, out, on_event);
            self.block = block;
            self.block.clear();
            return done;
        }
        match frame {
            Frame::Data { stream, end_stream, data, flow_len } => {
                self.on_data(stream, end_stream, data, flow_len, out, on_event)
            }
            Frame::Headers { stream, end_stream, end_headers: true, block, .. } => {
                self.on_header_block(stream, end_stream, block, out, on_event)
            }
            Frame::Headers { stream, end_stream, end_headers: false, block, .. } => {
                self.block.clear();
                self.append_block(block)?;
                self.continuing = Some(Continuing { stream, end_stream, frames: 0 });
                Ok(())
            }
            Frame::Priority { .. } | Frame::Unknown { .. } => Ok(()),
            Frame::RstStream { stream, code } => match self.streams.find(stream) {
                Known::Idle => Err(conn_error(frame::PROTOCOL_ERROR, "RST_STREAM on an idle stream")),
                Known::Closed => Ok(()),
                Known::Open(i) => {
                    self.streams.close(i);
                    self.counts.resets_received += 1;
                    self.counts.refused += u64::from(code == frame::REFUSED_STREAM);
                    on_event(Event::Reset { stream, code });
                    Ok(())
                }
            },
            Frame::Settings { ack: true, .. } => {
                self.counts.settings_acked += 1;
                Ok(())
            }
            Frame::Settings { ack: false, payload } => {
                self.on_settings(payload, out, on_event)?;
                self.send_blocked(out);
                Ok(())
            }
            Frame::PushPromise { .. } => {
                Err(conn_error(frame::PROTOCOL_ERROR, "PUSH_PROMISE although SETTINGS_ENABLE_PUSH is 0"))
            }
            Frame::Ping { ack: true, .. } => Ok(()),
            Frame::Ping { ack: false, data } => {
                frame::write_ping(out, true, data);
                self.counts.pings_received += 1;
                Ok(())
            }
            Frame::GoAway { last_stream, code, debug } => {
                self.on_goaway(last_stream, code, debug, on_event);
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => {
                self.on_window_update(stream, increment, out, on_event)?;
                self.send_blocked(out);
                Ok(())
            }
            Frame::Continuation { .. } => {
                Err(conn_error(frame::PROTOCOL_ERROR, "CONTINUATION without a header block to continue"))
            }
        }
    }

    fn append_block(&mut self, fragment: &[u8]) -> Result<(), ConnError> {
        if self.block.len() + fragment.len() > self.config.max_header_list as usize {
            return Err(conn_error(frame::ENHANCE_YOUR_CALM, "header block larger than our max header list"));
        }
        self.block.extend_from_slice(fragment);
        Ok(())
    }

    /// Resets stream `i` because the server broke the protocol on it (no RST_STREAM when the server had
    /// already ended the stream: it is closed on both sides).
    fn stream_error(
        &mut self,
        i: usize,
        code: u32,
        reason: &'static str,
        ended: bool,
        out: &mut Vec<u8>,
        on_event: &mut impl FnMut(Event<'_>),
    ) {
        let stream = self.streams.live[i].id;
        if !ended {
            frame::write_rst_stream(out, stream, code);
        }
        self.streams.close(i);
        self.counts.stream_errors += 1;
        on_event(Event::StreamError { stream, code, reason });
    }

    /// The server ended stream `i`: the response is complete if its body agrees with its content-length.
    fn finish(&mut self, i: usize, out: &mut Vec<u8>, on_event: &mut impl FnMut(Event<'_>)) {
        let s = &self.streams.live[i];
        if !s.bodiless() && s.content_length.is_some_and(|n| n != s.body_len) {
            return self.stream_error(
                i,
                frame::PROTOCOL_ERROR,
                "body length differs from content-length",
                true,
                out,
                on_event,
            );
        }
        let (stream, status, body_len) = (s.id, s.status, s.body_len);
        if !s.local_closed {
            // The server answered before the whole request body went out: stop sending it (RFC 9113 §8.1).
            frame::write_rst_stream(out, stream, frame::CANCEL);
        }
        self.streams.close(i);
        self.counts.responses += 1;
        on_event(Event::Done { stream, status, body_len });
    }

    fn on_data(
        &mut self,
        stream: u32,
        end_stream: bool,
        data: &[u8],
        flow_len: u32,
        out: &mut Vec<u8>,
        on_event: &mut impl FnMut(Event<'_>),
    ) -> Result<(), ConnError> {
        // The connection window counts every DATA frame, also those on streams already over.
        if !self.recv.take(flow_len) {
            return Err(conn_error(frame::FLOW_CONTROL_ERROR, "DATA beyond the connection window"));
        }
        self.counts.data_bytes_received += u64::from(flow_len);
        if self.recv.replenish(0, self.config.connection_window, out) {
            self.counts.window_updates_sent += 1;
        }
        let i = match self.streams.find(stream) {
            Known::Idle => return Err(conn_error(frame::PROTOCOL_ERROR, "DATA on an idle stream")),
            Known::Closed => return Ok(()),
            Known::Open(i) => i,
        };
        let s = &mut self.streams.live[i];
        if !s.recv.take(flow_len) {
            self.stream_error(i, frame::FLOW_CONTROL_ERROR, "DATA beyond the stream window", end_stream, out, on_event);
            return Ok(());
        }
        if s.response != Response::Body {
            self.stream_error(i, frame::PROTOCOL_ERROR, "DATA before the response head", end_stream, out, on_event);
            return Ok(());
        }
        if !data.is_empty() && s.bodiless() {
            let reason = "DATA in a response that has no body";
            self.stream_error(i, frame::PROTOCOL_ERROR, reason, end_stream, out, on_event);
            return Ok(());
        }
        s.body_len += data.len() as u64;
        if !data.is_empty() {
            on_event(Event::Data { stream, bytes: data });
        }
        if end_stream {
            self.finish(i, out, on_event);
            return Ok(());
        }
        if self.streams.live[i].recv.replenish(stream, self.config.stream_window, out) {
            self.counts.window_updates_sent += 1;
        }
        Ok(())
    }

    fn on_header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
        out: &mut Vec<u8>,
        on_event: &mut impl FnMut(Event<'_>),
    ) -> Result<(), ConnError> {
        // Decoded even when the stream is over: the HPACK table must see every block the server encoded.
        let decoded = self.decode(block)?;
        let i = match self.streams.find(stream) {
            Known::Idle => return Err(conn_error(frame::PROTOCOL_ERROR, "HEADERS on an idle stream")),
            Known::Closed => return Ok(()),
            Known::Open(i) => i,
        };
        if let Some(reason) = decoded.malformed {
            self.stream_error(i, frame::PROTOCOL_ERROR, reason, end_stream, out, on_event);
            return Ok(());
        }
        if self.streams.live[i].response == Response::Body {
            // Trailers: they end the stream and carry no pseudo-header.
            let reason = if !end_stream {
                "HEADERS after the response head without END_STREAM"
            } else if decoded.status.is_some() {
                "pseudo-header in trailers"
            } else {
                self.finish(i, out, on_event);
                return Ok(());
            };
            self.stream_error(i, frame::PROTOCOL_ERROR, reason, end_stream, out, on_event);
            return Ok(());
        }
        let status = match Status::of(decoded.status, end_stream) {
            Status::Final(status) => status,
            Status::Interim => {
                self.counts.interim_responses += 1;
                return Ok(());
            }
            Status::Malformed(reason) => {
                self.stream_error(i, frame::PROTOCOL_ERROR, reason, end_stream, out, on_event);
                return Ok(());
            }
        };
        let s = &mut self.streams.live[i];
        s.response = Response::Body;
        s.status = status;
        s.content_length = decoded.content_length;
        self.fields.with_headers(|headers| on_event(Event::Head { stream, status, headers }));
        if end_stream {
            self.finish(i, out, on_event);
        }
        Ok(())
    }

    /// Decodes a whole header block into `fields` (regular fields) and what its
    /// pseudo-headers and content-length say.
    fn decode(&mut self, block: &[u8]) -> Result<Decoded, ConnError> {
        let limit = self.config.max_header_list as usize;
        let decoded = self.fields.decode(&mut self.decoder, block, limit);
        let d = decoded.map_err(|e| conn_error(frame::COMPRESSION_ERROR, e.reason()))?;
        if d.too_large {
            return Err(conn_error(frame::PROTOCOL_ERROR, "header list larger than our SETTINGS_MAX_HEADER_LIST_SIZE"));
        }
        Ok(d)
    }

    fn on_settings(
        &mut self,
        payload: &[u8],
        out: &mut Vec<u8>,
        on_event: &mut impl FnMut(Event<'_>),
    ) -> Result<(), ConnError> {
        for (id, value) in frame::settings(payload) {
            match id {
                frame::SETTINGS_HEADER_TABLE_SIZE => {
                    self.server.header_table_size = value;
                    self.requests.server_table_size(value);
                }
                frame::SETTINGS_ENABLE_PUSH => match value {
                    0 => self.server.enable_push = false,
                    1 => return Err(conn_error(frame::PROTOCOL_ERROR, "a server may not set SETTINGS_ENABLE_PUSH")),
                    _ => return Err(conn_error(frame::PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH neither 0 nor 1")),
                },
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => self.server.max_concurrent_streams = Some(value),
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if value > frame::MAX_WINDOW {
                        return Err(conn_error(frame::FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1"));
                    }
                    // Every open stream's window moves by the difference (§6.9.2), possibly below zero.
                    let delta = i64::from(value) - i64::from(self.server.initial_window_size);
                    if !self.streams.shift_send_windows(delta) {
                        let reason = "SETTINGS_INITIAL_WINDOW_SIZE took a stream window over 2^31-1";
                        return Err(conn_error(frame::FLOW_CONTROL_ERROR, reason));
                    }
                    self.server.initial_window_size = value;
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_FRAME_SIZE_LIMIT).contains(&value) {
                        return Err(conn_error(frame::PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE out of range"));
                    }
                    self.server.max_frame_size = value;
                }
                frame::SETTINGS_MAX_HEADER_LIST_SIZE => self.server.max_header_list_size = Some(value),
                _ => {} // unknown settings are ignored (§6.5.2)
            }
        }
        self.server_spoke = true;
        self.counts.settings_received += 1;
        frame::write_settings_ack(out);
        on_event(Event::Settings(self.server));
        Ok(())
    }

    fn on_goaway(&mut self, last_stream: u32, code: u32, debug: &[u8], on_event: &mut impl FnMut(Event<'_>)) {
        self.counts.goaways += 1;
        let last = self.goaway.map_or(last_stream, |(prev, _)| prev.min(last_stream));
        self.goaway = Some((last, code));
        on_event(Event::GoAway { last_stream, code, debug });
        while let Some(stream) = self.streams.close_first_above(last) {
            self.counts.unprocessed += 1;
            on_event(Event::Unprocessed { stream });
        }
    }

    fn on_window_update(
        &mut self,
        stream: u32,
        increment: u32,
        out: &mut Vec<u8>,
        on_event: &mut impl FnMut(Event<'_>),
    ) -> Result<(), ConnError> {
        self.counts.window_updates_received += 1;
        if stream == 0 {
            if increment == 0 {
                return Err(conn_error(frame::PROTOCOL_ERROR, "WINDOW_UPDATE of 0 on the connection"));
            }
            self.send_window += i64::from(increment);
            if self.send_window > i64::from(frame::MAX_WINDOW) {
                return Err(conn_error(frame::FLOW_CONTROL_ERROR, "connection send window over 2^31-1"));
            }
            return Ok(());
        }
        let i = match self.streams.find(stream) {
            Known::Idle => return Err(conn_error(frame::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream")),
            Known::Closed => return Ok(()),
            Known::Open(i) => i,
        };
        if increment == 0 {
            self.stream_error(i, frame::PROTOCOL_ERROR, "WINDOW_UPDATE of 0", false, out, on_event);
            return Ok(());
        }
        let s = &mut self.streams.live[i];
        s.send_window += i64::from(increment);
        if s.send_window > i64::from(frame::MAX_WINDOW) {
            self.stream_error(i, frame::FLOW_CONTROL_ERROR, "stream send window over 2^31-1", false, out, on_event);
        }
        Ok(())
    }

    /// Sends the request body that waited for window, oldest stream first, as far as the windows now allow.
    /// Called after each frame that can open a window, so what is written depends on the frames only, not on
    /// how they were split into reads.
    fn send_blocked(&mut self, out: &mut Vec<u8>) {
        let max = self.server.max_frame_size as usize;
        self.streams.send_blocked(&mut self.send_window, max, out);
    }
}

fn conn_error(code: u32, reason: &'static str) -> ConnError {
    ConnError { code, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::h2_frame::FrameHeader;
    use crate::hpack::Encoder;

    /// An event, owned, to compare.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Ev {
        Settings(ServerSettings),
        Head(u32, u16, Vec<(String, String)>),
        Data(u32, Vec<u8>),
        Done(u32, u16, u64),
        Reset(u32, u32),
        StreamError(u32, u32),
        GoAway(u32, u32),
        Unprocessed(u32),
    }

    fn own(event: Event<'_>) -> Ev {
        match event {
            Event::Settings(s) => Ev::Settings(s),
            Event::Head { stream, status, headers } => Ev::Head(
                stream,
                status,
                headers.iter().map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned())).collect(),
            ),
            Event::Data { stream, bytes } => Ev::Data(stream, bytes.to_vec()),
            Event::Done { stream, status, body_len } => Ev::Done(stream, status, body_len),
            Event::Reset { stream, code } => Ev::Reset(stream, code),
            Event::StreamError { stream, code, .. } => Ev::StreamError(stream, code),
            Event::GoAway { last_stream, code, .. } => Ev::GoAway(last_stream, code),
            Event::Unprocessed { stream } => Ev::Unprocessed(stream),
        }
    }

    /// Feeds `input` in reads of `step` bytes the way the worker does; returns the events, what the client
    /// wrote, and the error if one ended it.
    fn feed(client: &mut Client, input: &[u8], step: usize) -> (Vec<Ev>, Vec<u8>, Option<ConnError>) {
        let (mut events, mut out, mut buf) = (Vec::new(), Vec::new(), Vec::new());
        for read in input.chunks(step.max(1)) {
            buf.extend_from_slice(read);
            match client.receive(&buf, &mut out, &mut |e| events.push(own(e))) {
                Ok(used) => drop(buf.drain(..used)),
                Err(e) => return (events, out, Some(e)),
            }
        }
        (events, out, None)
    }

    /// A started client, what `start` wrote discarded.
    fn client(config: Config) -> Client {
        let mut client = Client::new(config);
        client.start(&mut Vec::new());
        client
    }

    fn frames(mut bytes: &[u8]) -> Vec<(FrameHeader, Vec<u8>)> {
        let mut frames = Vec::new();
        while let Some(h) = FrameHeader::parse(bytes) {
            let end = frame::HEADER_LEN + h.length as usize;
            frames.push((h, bytes[frame::HEADER_LEN..end].to_vec()));
            bytes = &bytes[end..];
        }
        assert!(bytes.is_empty(), "a partial frame was written");
        frames
    }

    fn decode_block(decoder: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        decoder
            .decode(block, |n, v| {
                fields.push((String::from_utf8_lossy(n).into_owned(), String::from_utf8_lossy(v).into_owned()));
            })
            .expect("our block decodes");
        fields
    }

    fn fields(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    /// What a server sends: its SETTINGS, then frames built by the test.
    struct Server {
        encoder: Encoder,
        bytes: Vec<u8>,
    }

    impl Server {
        fn new(settings: &[(u16, u32)]) -> Server {
            let mut bytes = Vec::new();
            frame::write_settings(&mut bytes, settings);
            Server { encoder: Encoder::new(4096), bytes }
        }

        fn headers(&mut self, stream: u32, flags: u8, fields: &[(&str, &str)]) -> &mut Server {
            let mut block = Vec::new();
            for (name, value) in fields {
                self.encoder.encode(name.as_bytes(), value.as_bytes(), &mut block);
            }
            frame::write_headers(&mut self.bytes, stream, flags | frame::END_HEADERS, &block);
            self
        }

        fn data(&mut self, stream: u32, flags: u8, data: &[u8]) -> &mut Server {
            frame::write_data(&mut self.bytes, stream, flags, data);
            self
        }
    }

    #[test]
    fn start_writes_the_preface_settings_and_the_connection_window() {
        let mut out = Vec::new();
        Client::new(Config::default()).start(&mut out);
        assert_eq!(&out[..24], frame::PREFACE);
        let written = frames(&out[24..]);
        assert_eq!(written.len(), 2);
        assert_eq!(written[0].0.kind, frame::SETTINGS);
        assert_eq!(
            frame::settings(&written[0].1).collect::<Vec<_>>(),
            vec![
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, (1 << 30) - 1),
                (frame::SETTINGS_MAX_HEADER_LIST_SIZE, 65_536)
            ]
        );
        assert_eq!(written[1].0.kind, frame::WINDOW_UPDATE);
        assert_eq!(written[1].1, ((1u32 << 30) - 1 - 65_535).to_be_bytes());
    }

    #[test]
    fn a_get_becomes_pseudo_headers() {
        let mut client = client(Config::default());
        let mut out = Vec::new();
        let id = client.open(&mut out, b"GET /api/hello HTTP/1.1\r\nHost: 127.0.0.1:3000\r\n\r\n").expect("opens");
        assert_eq!((id, client.in_flight(), client.streams_opened()), (1, 1, 1));
        let written = frames(&out);
        assert_eq!(written.len(), 1);
        let (h, block) = &written[0];
        assert_eq!((h.kind, h.flags, h.stream), (frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, 1));
        assert_eq!(
            decode_block(&mut Decoder::new(4096), block),
            fields(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", "127.0.0.1:3000"),
                (":path", "/api/hello")
            ])
        );
    }

    #[test]
    fn a_post_sends_its_body_and_drops_connection_headers() {
        let mut client = client(Config { scheme: Scheme::Https, ..Config::default() });
        let mut out = Vec::new();
        let request = b"POST /submit HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\nKeep-Alive: timeout=5\r\n\
                        TE: gzip\r\nUpgrade: h2c\r\nX-Custom: A\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(client.open(&mut out, request), Ok(1));
        let written = frames(&out);
        assert_eq!(written.len(), 2);
        assert_eq!((written[0].0.kind, written[0].0.flags), (frame::HEADERS, frame::END_HEADERS));
        assert_eq!(
            decode_block(&mut Decoder::new(4096), &written[0].1),
            fields(&[
                (":method", "POST"),
                (":scheme", "https"),
                (":authority", "example.com"),
                (":path", "/submit"),
                ("x-custom", "A"),
                ("content-length", "5"),
            ])
        );
        assert_eq!((written[1].0.kind, written[1].0.flags, written[1].0.stream), (frame::DATA, frame::END_STREAM, 1));
        assert_eq!(written[1].1, b"hello");
        // TE: trailers is the one TE that HTTP/2 allows.
        out.clear();
        assert_eq!(client.open(&mut out, b"GET / HTTP/1.1\r\nte: trailers\r\n\r\n"), Ok(3));
        let mut decoder = Decoder::new(4096);
        decode_block(&mut decoder, &written[0].1);
        let got = decode_block(&mut decoder, &frames(&out)[0].1);
        assert_eq!(got, fields(&[(":method", "GET"), (":scheme", "https"), (":path", "/"), ("te", "trailers")]));
    }

    #[test]
    fn repeated_requests_cost_a_few_bytes_and_bad_ones_are_refused() {
        let mut client = client(Config::default());
        let request = b"GET /v1/item?id=42 HTTP/1.1\r\nHost: 127.0.0.1:3000\r\nUser-Agent: loadgen\r\n\r\n";
        let (mut first, mut second) = (Vec::new(), Vec::new());
        client.open(&mut first, request).expect("opens");
        client.open(&mut second, request).expect("opens");
        // :method, :scheme, :authority, :path and user-agent: one byte each the second time.
        assert_eq!(second.len(), frame::HEADER_LEN + 5, "{first:?} then {second:?}");
        let mut decoder = Decoder::new(4096);
        assert_eq!(decode_block(&mut decoder, &first[9..]), decode_block(&mut decoder, &second[9..]));
        let mut out = Vec::new();
        assert_eq!(client.open(&mut out, b"GET / HTTP/1.1\r\nHost: x\r\n"), Err(RequestError::Invalid));
        assert_eq!(client.open(&mut out, b"GET / HTTP/1.1\r\n\r\nextra"), Err(RequestError::Trailing));
        let bad_length = b"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello";
        assert_eq!(client.open(&mut out, bad_length), Err(RequestError::ContentLength));
        let short = b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nhello";
        assert_eq!(client.open(&mut out, short), Err(RequestError::ContentLength));
        assert_eq!(client.open(&mut out, b"CONNECT a:1 HTTP/1.1\r\n\r\n"), Err(RequestError::Connect));
        assert!(out.is_empty(), "a refused request wrote {out:?}");
        assert_eq!(client.open(&mut out, b"GET / HTTP/1.1\r\n\r\n"), Ok(5), "refusals use no stream id");
        let mut unstarted = Client::new(Config::default());
        assert_eq!(unstarted.open(&mut out, b"GET / HTTP/1.1\r\n\r\n"), Err(RequestError::NoStream));
    }

    #[test]
    fn a_header_block_over_the_frame_size_continues() {
        let mut client = client(Config::default());
        let big = "v".repeat(40_000);
        let request = format!("GET / HTTP/1.1\r\nX-Big: {big}\r\n\r\n");
        let mut out = Vec::new();
        client.open(&mut out, request.as_bytes()).expect("opens");
        let written = frames(&out);
        let kinds: Vec<(u8, u8)> = written.iter().map(|(h, _)| (h.kind, h.flags)).collect();
        assert_eq!(
            kinds,
            vec![
                (frame::HEADERS, frame::END_STREAM),
                (frame::CONTINUATION, 0),
                (frame::CONTINUATION, frame::END_HEADERS)
            ]
        );
        assert!(written.iter().all(|(h, _)| h.length <= frame::DEFAULT_MAX_FRAME_SIZE && h.stream == 1));
        let block: Vec<u8> = written.iter().flat_map(|(_, p)| p.clone()).collect();
        let got = decode_block(&mut Decoder::new(4096), &block);
        assert_eq!(got.last(), Some(&("x-big".to_string(), big)));
    }

    #[test]
    fn a_response_reads_the_same_however_it_is_split() {
        let mut server = Server::new(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 100)]);
        server
            .headers(1, 0, &[(":status", "103"), ("link", "</a>")])
            .headers(1, 0, &[(":status", "200"), ("content-length", "13"), ("x-a", "1")])
            .data(1, 0, b"hello, ")
            .headers(3, frame::END_STREAM, &[(":status", "204")])
            .data(5, 0, b"");
        frame::write_padded(&mut server.bytes, frame::DATA, frame::END_STREAM, 1, b"world!", 10);
        frame::write_ping(&mut server.bytes, false, *b"pingpong");
        frame::write_window_update(&mut server.bytes, 3, 1);
        let settings = ServerSettings { max_concurrent_streams: Some(100), ..ServerSettings::default() };
        let expected = vec![
            Ev::Settings(settings),
            Ev::Head(1, 200, fields(&[("content-length", "13"), ("x-a", "1")])),
            Ev::Data(1, b"hello, ".to_vec()),
            Ev::Head(3, 204, vec![]),
            Ev::Done(3, 204, 0),
            Ev::StreamError(5, frame::PROTOCOL_ERROR),
            Ev::Data(1, b"world!".to_vec()),
            Ev::Done(1, 200, 13),
        ];
        let mut replies = None;
        for step in [1, 2, 9, 10, 100, usize::MAX] {
            let mut c = client(Config::default());
            let mut out = Vec::new();
            for _ in 0..3 {
                c.open(&mut out, b"GET / HTTP/1.1\r\n\r\n").expect("opens");
            }
            let (events, out, failed) = feed(&mut c, &server.bytes, step);
            assert_eq!(failed, None, "step {step}");
            assert_eq!(events, expected, "step {step}");
            assert_eq!(c.in_flight(), 0);
            assert_eq!(c.counts().interim_responses, 1);
            assert_eq!(c.counts().responses, 2);
            assert_eq!(c.counts().pings_received, 1);
            match &replies {
                None => replies = Some(out),
                Some(first) => assert_eq!(&out, first, "step {step}: the replies depend on the split"),
            }
        }
        // Replies: the SETTINGS ACK, the reset of stream 5 (DATA before its head), the PING ACK; nothing for
        // the WINDOW_UPDATE on stream 3, which is over.
        let replies = frames(&replies.expect("ran"));
        let kinds: Vec<(u8, u8, u32)> = replies.iter().map(|(h, _)| (h.kind, h.flags, h.stream)).collect();
        assert_eq!(
            kinds,
            vec![(frame::SETTINGS, frame::ACK, 0), (frame::RST_STREAM, 0, 5), (frame::PING, frame::ACK, 0)]
        );
        assert_eq!(replies[2].1, b"pingpong");
    }

    #[test]
    fn trailers_head_and_malformed_responses() {
        let mut c = client(Config::default());
        let mut out = Vec::new();
        for request in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"HEAD / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
        ] {
            c.open(&mut out, request).expect("opens");
        }
        let mut server = Server::new(&[]);
        server
            .headers(1, 0, &[(":status", "200")])
            .data(1, 0, b"body")
            .headers(1, frame::END_STREAM, &[("x-checksum", "abc")])
            .headers(3, frame::END_STREAM, &[(":status", "200"), ("content-length", "1000")])
            .headers(5, 0, &[(":status", "200"), ("content-length", "10")])
            .data(5, frame::END_STREAM, b"short")
            .headers(7, frame::END_STREAM, &[("x-no-status", "1")])
            .headers(9, 0, &[(":status", "200"), ("Upper", "1")]);
        let (events, out, failed) = feed(&mut c, &server.bytes, usize::MAX);
        assert_eq!(failed, None);
        assert_eq!(
            events[1..],
            [
                Ev::Head(1, 200, vec![]),
                Ev::Data(1, b"body".to_vec()),
                Ev::Done(1, 200, 4),
                Ev::Head(3, 200, fields(&[("content-length", "1000")])),
                Ev::Done(3, 200, 0),
                Ev::Head(5, 200, fields(&[("content-length", "10")])),
                Ev::Data(5, b"short".to_vec()),
                Ev::StreamError(5, frame::PROTOCOL_ERROR),
                Ev::StreamError(7, frame::PROTOCOL_ERROR),
                Ev::StreamError(9, frame::PROTOCOL_ERROR),
            ]
        );
        // Only stream 9 was still open on the server's side: the only reset written.
        let resets: Vec<u32> =
            frames(&out).iter().filter(|(h, _)| h.kind == frame::RST_STREAM).map(|(h, _)| h.stream).collect();
        assert_eq!(resets, vec![9]);
        assert_eq!(c.counts().stream_errors, 3);
    }

    #[test]
    fn received_data_is_replenished_at_half_window() {
        let mut c = client(Config { stream_window: 65_535, connection_window: 65_535, ..Config::default() });
        let mut out = Vec::new();
        c.open(&mut out, b"GET / HTTP/1.1\r\n\r\n").expect("opens");
        let mut server = Server::new(&[]);
        server.headers(1, 0, &[(":status", "200")]);
        for _ in 0..3 {
            server.data(1, 0, &[b'x'; 16_384]);
        }
        let (_, out, failed) = feed(&mut c, &server.bytes, usize::MAX);
        assert_eq!(failed, None);
        let updates: Vec<(u32, Vec<u8>)> = frames(&out)
            .into_iter()
            .filter(|(h, _)| h.kind == frame::WINDOW_UPDATE)
            .map(|(h, p)| (h.stream, p))
            .collect();
        // 32,768 bytes crossed half of 65,535 on both windows.
        assert_eq!(updates, vec![(0, 32_768u32.to_be_bytes().to_vec()), (1, 32_768u32.to_be_bytes().to_vec())]);
        // Beyond the window: the stream's is a stream error, the connection's a connection error.
        let mut over = Server::new(&[]);
        over.headers(1, 0, &[(":status", "200")]);
        for _ in 0..5 {
            over.data(1, 0, &[b'x'; 16_384]);
        }
        let mut c = client(Config { stream_window: 65_535, connection_window: 1 << 20, ..Config::default() });
        c.open(&mut Vec::new(), b"GET / HTTP/1.1\r\n\r\n").expect("opens");
        // Our stream update after 32 KiB makes room for 98,303 bytes: the fifth frame (81,920) still fits.
        let (events, _, failed) = feed(&mut c, &over.bytes, usize::MAX);
        assert_eq!((failed, events.last()), (None, Some(&Ev::Data(1, vec![b'x'; 16_384]))));
    }

    #[test]
    fn a_request_body_waits_for_the_servers_windows() {
        let mut c = client(Config::default());
        let (events, _, failed) = feed(&mut c, &Server::new(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]).bytes, 100);
        assert_eq!((events.len(), failed), (1, None));
        let body = [b'b'; 100];
        let mut request = b"POST /up HTTP/1.1\r\nContent-Length: 100\r\n\r\n".to_vec();
        request.extend_from_slice(&body);
        let mut out = Vec::new();
        c.open(&mut out, &request).expect("opens");
        let data = |out: &[u8]| -> Vec<(u8, usize)> {
            frames(out).iter().filter(|(h, _)| h.kind == frame::DATA).map(|(h, p)| (h.flags, p.len())).collect()
        };
        assert_eq!(data(&out), vec![(0, 10)]);
        let mut updates = Vec::new();
        frame::write_window_update(&mut updates, 1, 50);
        let (_, out, _) = feed(&mut c, &updates, 100);
        assert_eq!(data(&out), vec![(0, 50)]);
        updates.clear();
        frame::write_window_update(&mut updates, 1, 1000);
        let (_, out, _) = feed(&mut c, &updates, 100);
        assert_eq!(data(&out), vec![(frame::END_STREAM, 40)]);
        // The connection window: 65,535 at first, shared by every stream.
        let mut c = client(Config::default());
        let mut request = b"POST /up HTTP/1.1\r\nContent-Length: 70000\r\n\r\n".to_vec();
        request.resize(request.len() + 70_000, b'c');
        let mut out = Vec::new();
        c.open(&mut out, &request).expect("opens");
        assert_eq!(data(&out).iter().map(|d| d.1).sum::<usize>(), 65_535);
        let mut server = Server::new(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)]).bytes;
        frame::write_window_update(&mut server, 0, 1 << 20);
        let (_, out, _) = feed(&mut c, &server, 7);
        assert_eq!(data(&out), vec![(frame::END_STREAM, 70_000 - 65_535)]);
    }

    #[test]
    fn settings_cap_concurrency_and_goaway_names_the_unprocessed() {
        let mut c = client(Config::default());
        let mut out = Vec::new();
        for _ in 0..3 {
            c.open(&mut out, b"GET / HTTP/1.1\r\n\r\n").expect("opens");
        }
        let (_, _, failed) = feed(&mut c, &Server::new(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 2)]).bytes, 100);
        assert_eq!(failed, None);
        assert!(!c.can_open(), "3 open, the server allows 2");
        let mut server = Server::new(&[]);
        server.bytes.clear();
        server.headers(1, frame::END_STREAM, &[(":status", "200")]);
        feed(&mut c, &server.bytes, 100);
        assert!(!c.can_open(), "2 open, the server allows 2");
        server.bytes.clear();
        frame::write_rst_stream(&mut server.bytes, 3, frame::REFUSED_STREAM);
        let (events, _, _) = feed(&mut c, &server.bytes, 100);
        assert_eq!(events, vec![Ev::Reset(3, frame::REFUSED_STREAM)]);
        assert!(c.can_open());
        assert_eq!(c.open(&mut out, b"GET / HTTP/1.1\r\n\r\n"), Ok(7));
        server.bytes.clear();
        frame::write_goaway(&mut server.bytes, MAX_STREAM_ID, frame::NO_ERROR, b"");
        frame::write_goaway(&mut server.bytes, 5, frame::NO_ERROR, b"bye");
        let (events, _, _) = feed(&mut c, &server.bytes, 3);
        assert_eq!(
            events,
            vec![Ev::GoAway(MAX_STREAM_ID, frame::NO_ERROR), Ev::GoAway(5, frame::NO_ERROR), Ev::Unprocessed(7)]
        );
        assert!(!c.can_open());
        assert_eq!((c.in_flight(), c.goaway(), c.counts().refused, c.counts().unprocessed), (1, Some((5, 0)), 1, 1));
    }

    #[test]
    fn connection_errors_write_goaway_and_stick() {
        let cases: Vec<(&str, Vec<u8>, u32)> = vec![
            (
                "not SETTINGS first",
                {
                    let mut b = Vec::new();
                    frame::write_ping(&mut b, false, [0; 8]);
                    b
                },
                frame::PROTOCOL_ERROR,
            ),
            ("an HTTP/1.1 answer", b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(), frame::PROTOCOL_ERROR),
            (
                "push",
                {
                    let mut s = Server::new(&[]).bytes;
                    frame::write_push_promise(&mut s, 1, frame::END_HEADERS, 2, b"\x82");
                    s
                },
                frame::PROTOCOL_ERROR,
            ),
            ("idle DATA", Server::new(&[]).data(9, 0, b"x").bytes.clone(), frame::PROTOCOL_ERROR),
            (
                "server stream",
                Server::new(&[]).headers(2, 0, &[(":status", "200")]).bytes.clone(),
                frame::PROTOCOL_ERROR,
            ),
            (
                "big frame",
                {
                    let mut s = Server::new(&[]).bytes;
                    frame::write_header(&mut s, 16_385, frame::DATA, 0, 1);
                    s
                },
                frame::FRAME_SIZE_ERROR,
            ),
            (
                "bad HPACK",
                {
                    let mut s = Server::new(&[]).bytes;
                    frame::write_headers(&mut s, 1, frame::END_HEADERS, b"\xff\xff\xff\xff\x0f");
                    s
                },
                frame::COMPRESSION_ERROR,
            ),
            ("push on", Server::new(&[(frame::SETTINGS_ENABLE_PUSH, 1)]).bytes, frame::PROTOCOL_ERROR),
            ("window", Server::new(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 31)]).bytes, frame::FLOW_CONTROL_ERROR),
            (
                "zero update",
                {
                    let mut s = Server::new(&[]).bytes;
                    frame::write_window_update(&mut s, 0, 0);
                    s
                },
                frame::PROTOCOL_ERROR,
            ),
            (
                "stray CONTINUATION",
                {
                    let mut s = Server::new(&[]).bytes;
                    frame::write_continuation(&mut s, 1, frame::END_HEADERS, b"");
                    s
                },
                frame::PROTOCOL_ERROR,
            ),
            (
                "interleaved block",
                {
                    let mut s = Server::new(&[]).bytes;
                    frame::write_headers(&mut s, 1, 0, b"");
                    frame::write_ping(&mut s, false, [0; 8]);
                    s
                },
                frame::PROTOCOL_ERROR,
            ),
            (
                "CONTINUATION flood",
                {
                    let mut s = Server::new(&[]).bytes;
                    frame::write_headers(&mut s, 1, 0, b"");
                    for _ in 0..=MAX_CONTINUATIONS {
                        frame::write_continuation(&mut s, 1, 0, b"");
                    }
                    s
                },
                frame::ENHANCE_YOUR_CALM,
            ),
            (
                "huge block",
                {
                    let mut s = Server::new(&[]).bytes;
                    frame::write_headers(&mut s, 1, 0, &[0; 16_000]);
                    for _ in 0..4 {
                        frame::write_continuation(&mut s, 1, 0, &[0; 16_000]);
                    }
                    s
                },
                frame::ENHANCE_YOUR_CALM,
            ),
            (
                "huge list",
                {
                    // 100 fields of 1 KiB, each an index into the dynamic table after the first: a small block.
                    let mut server = Server::new(&[]);
                    let value = "v".repeat(1000);
                    let list: Vec<(&str, &str)> =
                        std::iter::once((":status", "200")).chain((0..100).map(|_| ("x", value.as_str()))).collect();
                    server.headers(1, frame::END_STREAM, &list);
                    server.bytes.clone()
                },
                frame::PROTOCOL_ERROR,
            ),
        ];
        for (what, input, code) in cases {
            let mut c = client(Config::default());
            c.open(&mut Vec::new(), b"GET / HTTP/1.1\r\n\r\n").expect("opens");
            let (_, out, failed) = feed(&mut c, &input, usize::MAX);
            let e = failed.unwrap_or_else(|| panic!("{what}: no error"));
            assert_eq!(e.code, code, "{what}: {e}");
            let goaway = frames(&out).into_iter().find(|(h, _)| h.kind == frame::GOAWAY).expect("a GOAWAY");
            assert_eq!(goaway.1[4..8], code.to_be_bytes(), "{what}");
            assert!(!c.can_open());
            let mut more = Vec::new();
            assert_eq!(c.receive(b"", &mut more, &mut |_| {}), Err(e), "{what}: the error sticks");
            assert!(more.is_empty());
        }
        let e = ConnError { code: frame::REFUSED_STREAM, reason: "why" };
        assert_eq!(e.to_string(), "HTTP/2 connection error REFUSED_STREAM: why");
    }

    #[test]
    fn a_smaller_server_table_is_signalled_before_the_next_block() {
        let mut c = client(Config::default());
        let mut out = Vec::new();
        let request = b"GET /x HTTP/1.1\r\nX-Custom: one\r\n\r\n";
        c.open(&mut out, request).expect("opens");
        let mut decoder = Decoder::new(4096);
        decode_block(&mut decoder, &frames(&out)[0].1);
        feed(&mut c, &Server::new(&[(frame::SETTINGS_HEADER_TABLE_SIZE, 0)]).bytes, 100);
        out.clear();
        c.open(&mut out, request).expect("opens");
        let block = frames(&out)[0].1.clone();
        assert_eq!(block[0], 0x20, "a size update to 0 opens the block");
        let expected = fields(&[(":method", "GET"), (":scheme", "http"), (":path", "/x"), ("x-custom", "one")]);
        assert_eq!(decode_block(&mut decoder, &block), expected);
        out.clear();
        c.open(&mut out, request).expect("opens");
        assert_eq!(decode_block(&mut decoder, &frames(&out)[0].1), expected, "no table: literals again");
    }

    #[test]
    fn cancel_forgets_the_stream_and_ignores_what_follows() {
        let mut c = client(Config::default());
        let mut out = Vec::new();
        c.open(&mut out, b"GET / HTTP/1.1\r\n\r\n").expect("opens");
        out.clear();
        assert!(c.cancel(&mut out, 1));
        assert!(!c.cancel(&mut out, 1));
        assert_eq!(
            frames(&out).iter().map(|(h, p)| (h.kind, h.stream, p.clone())).collect::<Vec<_>>(),
            vec![(frame::RST_STREAM, 1, frame::CANCEL.to_be_bytes().to_vec())]
        );
        let mut server = Server::new(&[]);
        server.headers(1, 0, &[(":status", "200")]).data(1, frame::END_STREAM, b"late");
        let (events, _, failed) = feed(&mut c, &server.bytes, usize::MAX);
        assert_eq!((events.len(), failed, c.in_flight()), (1, None, 0));
    }
}
