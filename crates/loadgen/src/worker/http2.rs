//! The HTTP/2 half of a worker's `State`: starting each connection's `h2::Client`, opening streams for
//! requests, handing it the bytes read, counting what it reports, and cancelling streams past the timeout.
//!
//! A child module of `worker` so that it can see `State`'s private fields: the connection slots, the counts and
//! the run's plan are one state shared by both protocols, and making the fields visible to a sibling would
//! open them to the whole crate. Imports point one way: this module names `worker`'s items (`super::`), and
//! `worker` only calls the methods marked `pub(super)` here, through `State`.

use std::time::Instant;

use super::{FailKind, State};
use crate::conn::{After, Sent};
use crate::h2;
use crate::h2_frame;
use crate::stats::{Http2Settings, count};

impl State<'_> {
    /// HTTP/2: the preface and our SETTINGS; requests wait for the server's SETTINGS (`receive_h2`), so none is
    /// opened past a stream limit not heard of yet.
    pub(super) fn start_h2(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let scheme = if self.plan.tls { h2::Scheme::Https } else { h2::Scheme::Http };
        let mut client = Box::new(h2::Client::new(h2::Config { scheme, ..h2::Config::default() }));
        client.start(&mut conn.wbuf);
        conn.h2 = Some(client);
        self.list_flush(i);
    }

    /// HTTP/2: the request as HTTP/1.1 bytes, framed by the client (`h2::Client::open`) into connection
    /// `i`'s write buffer and recorded by its stream id.
    pub(super) fn queue_h2_request(&mut self, i: usize, intended: Instant) {
        let conn = &mut self.conns[i];
        let Some(client) = conn.h2.as_mut() else { return };
        self.rendered.clear();
        let head = self.shared.source.write_next(&mut self.cursor, &mut self.rendered, false);
        match client.open(&mut conn.wbuf, &self.rendered) {
            Ok(stream) => {
                conn.sent += 1;
                conn.pending.push_back(Sent { intended, written: Instant::now(), head, stream });
                if let (true, Some(h2)) = (self.measuring, &mut self.stats.http2) {
                    h2.streams_opened += 1;
                }
                self.list_flush(i);
            }
            Err(e) => self.fail(i, FailKind::Write, format!("--http2: {e}")),
        }
    }

    /// `--http2`, and the server speaks something else (`spoke`: the ALPN protocol it chose, or `http/1.1` for
    /// an HTTP/1.1 answer to the h2c preface): no request can be sent. Retried after the connect backoff; the
    /// run fails (`run::failures`), saying what was spoken.
    pub(super) fn wrong_protocol(&mut self, i: usize, spoke: &str) {
        count(&mut self.negotiated, spoke);
        self.interval_errors += 1;
        self.last_error = Some(format!("--http2: {} spoke {spoke}, not h2", self.plan.addr));
        self.doom(i, After::Backoff);
    }

    /// HTTP/2: the client takes the frames in `buf` (its replies go to the write buffer), the events it reports
    /// are counted ([`State::on_h2_event`]), and the streams that ended make room for new requests.
    pub(super) fn receive_h2(&mut self, i: usize, buf: &[u8]) -> Option<usize> {
        let conn = &mut self.conns[i];
        let mut client = conn.h2.take()?;
        let heard_before = client.counts().settings_received > 0;
        if !heard_before && buf.starts_with(b"HTTP/1.") {
            self.wrong_protocol(i, "http/1.1");
            return None;
        }
        let mut out = std::mem::take(&mut conn.wbuf);
        self.streams_ended = 0;
        let result = client.receive(buf, &mut out, &mut |event| self.on_h2_event(i, event));
        let heard = !heard_before && client.counts().settings_received > 0;
        let gone = client.goaway().is_some() && client.in_flight() == 0;
        let conn = &mut self.conns[i];
        conn.wbuf = out;
        conn.h2 = Some(client);
        self.list_flush(i);
        match result {
            Err(e) => {
                if let (true, Some(h2)) = (self.measuring, &mut self.stats.http2) {
                    count(&mut h2.connection_errors, e.reason);
                }
                self.fail(i, FailKind::Parse, e.to_string());
                None
            }
            Ok(_) if gone => {
                // The server said GOAWAY and its last stream is done: a new connection takes over.
                self.doom(i, After::Reconnect);
                None
            }
            Ok(used) => {
                if heard {
                    count(&mut self.negotiated, "h2");
                }
                if heard || self.streams_ended > 0 {
                    self.refill(i);
                }
                Some(used)
            }
        }
    }

    /// One event of connection `i`'s HTTP/2 client.
    fn on_h2_event(&mut self, i: usize, event: h2::Event<'_>) {
        let assertions = &self.shared.assertions;
        let conn = &mut self.conns[i];
        match event {
            h2::Event::Settings(s) => {
                self.server_settings = Some(Http2Settings {
                    max_concurrent_streams: s.max_concurrent_streams,
                    initial_window_size: s.initial_window_size,
                    max_frame_size: s.max_frame_size,
                    max_header_list_size: s.max_header_list_size,
                    header_table_size: s.header_table_size,
                });
                if let Some(max) = s.max_concurrent_streams.filter(|max| (*max as usize) < self.plan.pipeline) {
                    self.capped_at = Some(self.capped_at.map_or(max, |c| c.min(max)));
                }
            }
            // Assertions look at one stream of a connection at a time, every Nth response as over HTTP/1.1.
            h2::Event::Head { stream, headers, .. } => {
                if assertions.any() && conn.checking.is_none() && self.checked_counter.is_multiple_of(assertions.every)
                {
                    conn.checking = Some(stream);
                    conn.body.clear();
                    conn.head_ok = !assertions.needs_headers() || assertions.headers_ok(headers);
                }
            }
            h2::Event::Data { stream, bytes } => {
                if conn.checking == Some(stream) && assertions.needs_body() {
                    conn.body.extend_from_slice(bytes);
                }
            }
            h2::Event::Done { stream, status, body_len } => {
                let Some(at) = conn.pending.iter().position(|s| s.stream == stream) else { return };
                let sent = conn.pending.remove(at).unwrap_or_else(|| unreachable!("position {at} exists"));
                let checked = conn.checking == Some(stream);
                if checked {
                    conn.checking = None;
                }
                self.streams_ended += 1;
                self.record_response(i, &sent, status, body_len, checked);
            }
            h2::Event::Reset { stream, code } => {
                if let (true, Some(h2)) = (self.measuring, &mut self.stats.http2) {
                    if code == h2_frame::REFUSED_STREAM {
                        h2.refused += 1;
                    } else {
                        count(&mut h2.resets, h2_frame::error_name(code));
                    }
                }
                self.lose_stream(i, stream, format!("RST_STREAM {}", h2_frame::error_name(code)));
            }
            h2::Event::StreamError { stream, reason, .. } => {
                if let (true, Some(h2)) = (self.measuring, &mut self.stats.http2) {
                    h2.stream_errors += 1;
                }
                self.lose_stream(i, stream, format!("HTTP/2 stream error: {reason}"));
            }
            h2::Event::GoAway { code, .. } => {
                if let (true, Some(h2)) = (self.measuring, &mut self.stats.http2) {
                    count(&mut h2.goaways, h2_frame::error_name(code));
                }
            }
            h2::Event::Unprocessed { stream } => {
                if let (true, Some(h2)) = (self.measuring, &mut self.stats.http2) {
                    h2.unprocessed += 1;
                }
                self.lose_stream(i, stream, "a stream left unprocessed after GOAWAY".into());
            }
        }
    }

    /// HTTP/2: a stream ended without a response (reset, refused, unprocessed): an error, as a request lost
    /// with its connection is over HTTP/1.1, and room for the next request.
    fn lose_stream(&mut self, i: usize, stream: u32, why: String) {
        let conn = &mut self.conns[i];
        let Some(at) = conn.pending.iter().position(|s| s.stream == stream) else { return };
        conn.pending.remove(at);
        if conn.checking == Some(stream) {
            conn.checking = None;
        }
        if self.measuring {
            self.stats.errors.closed += 1;
        }
        self.interval_errors += 1;
        self.last_error = Some(why);
        self.streams_ended += 1;
    }

    /// HTTP/2: connection `i` can take requests again (the server's SETTINGS came, or streams ended): closed
    /// loop, as many as it has room for; open loop, it is offered to the schedule.
    fn refill(&mut self, i: usize) {
        if self.open_loop.is_some() {
            self.mark_free(i);
            return;
        }
        let now = Instant::now();
        while self.conns[i].usable() && self.conns[i].has_room(self.plan.pipeline, self.plan.requests_per_conn) {
            self.queue_request(i, now);
        }
    }

    /// HTTP/2: streams with no complete response within the timeout are cancelled (RST_STREAM CANCEL) and
    /// counted; the connection and its other streams go on (over HTTP/1.1 the connection has to go, or a late
    /// response would be taken for the next request's).
    pub(super) fn cancel_late_streams(&mut self, i: usize, now: Instant) {
        let timeout = self.plan.timeout;
        let mut cancelled = 0;
        loop {
            let conn = &mut self.conns[i];
            let Some(client) = conn.h2.as_mut() else { return };
            if conn.pending.front().is_none_or(|s| now.duration_since(s.written) <= timeout) {
                break;
            }
            let Some(sent) = conn.pending.pop_front() else { break };
            client.cancel(&mut conn.wbuf, sent.stream);
            if conn.checking == Some(sent.stream) {
                conn.checking = None;
            }
            cancelled += 1;
        }
        if cancelled == 0 {
            return;
        }
        if self.measuring {
            self.stats.errors.timeout += cancelled;
            if let Some(h2) = &mut self.stats.http2 {
                h2.cancelled += cancelled;
            }
        }
        self.interval_errors += cancelled;
        self.last_error = Some(format!("no response within {:?}", timeout));
        self.list_flush(i);
        self.refill(i);
    }
}
