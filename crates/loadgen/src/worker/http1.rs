//! The HTTP/1.1 half of a worker's `State`: parsing responses from a connection's bytes (`http1`) in the
//! order their requests were sent, and what a complete one means for the connection (reopened when the server
//! closes it or its last request is answered, the next request otherwise).
//!
//! A child module of `worker`, as `http2` is, so that it can see `State`'s private fields without opening them
//! to the crate; `worker` calls only its `pub(super)` methods.

use std::time::Instant;

use super::{FailKind, State};
use crate::conn::After;
use crate::http1::Done;

impl State<'_> {
    /// Parses `buf` for connection `i`; returns how much it consumed, or None when the connection was given up
    /// on meanwhile (a parse error, or the server's close).
    pub(super) fn parse(&mut self, i: usize, buf: &[u8]) -> Option<usize> {
        let assertions = &self.shared.assertions;
        let mut at = 0;
        loop {
            let conn = &mut self.conns[i];
            if at == buf.len() {
                return Some(at);
            }
            let Some(front) = conn.pending.front() else {
                self.fail(i, FailKind::Parse, "response bytes with no request outstanding".into());
                return None;
            };
            let head = front.head;
            // Decide per response whether assertions look at it (every Nth).
            if conn.parser.idle() {
                conn.head_ok = true;
                conn.body.clear();
            }
            let check = assertions.any() && self.checked_counter.is_multiple_of(assertions.every);
            let keep_body = check && assertions.needs_body();
            let mut head_ok = conn.head_ok;
            let outcome = {
                let mut on_head = |_status: u16, headers: &[httparse::Header<'_>]| {
                    if check && assertions.needs_headers() {
                        head_ok = assertions.headers_ok(headers);
                    }
                };
                let body = if keep_body { Some(&mut conn.body) } else { None };
                conn.parser.parse(&buf[at..], head, &mut on_head, body)
            };
            conn.head_ok = head_ok;
            match outcome {
                Ok((used, None)) => return Some(at + used),
                Ok((used, Some(done))) => {
                    at += used;
                    if !self.on_response(i, done, check) {
                        return None;
                    }
                }
                Err(e) => {
                    self.fail(i, FailKind::Parse, e.to_string());
                    return None;
                }
            }
        }
    }

    /// Records a complete HTTP/1.1 response; returns false when the connection is being closed (server asked).
    pub(super) fn on_response(&mut self, i: usize, done: Done, checked: bool) -> bool {
        let now = Instant::now();
        let Some(sent) = self.conns[i].pending.pop_front() else { return false };
        self.record_response(i, &sent, done.status, done.body_len, checked);
        let conn = &mut self.conns[i];
        if done.close {
            // Requests pipelined behind this one are lost with the connection.
            let lost = conn.pending.len() as u64;
            if self.measuring && lost > 0 {
                self.stats.errors.closed += lost;
            }
            self.doom(i, After::Reconnect);
            return false;
        }
        if conn.pending.is_empty() && self.plan.requests_per_conn.is_some_and(|n| conn.sent >= n) {
            // The connection's last response (churn): not an error, the next connection takes over.
            self.doom(i, After::Reconnect);
            return false;
        }
        if self.open_loop.is_some() {
            self.mark_free(i);
        } else {
            self.queue_request(i, now);
        }
        true
    }
}
