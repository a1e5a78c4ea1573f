//! HTTP/2 for every server: hyper's HTTP/2 connection with `--http2-*`'s limits, its streams run as tasks of
//! the worker's own current-thread runtime. Which connections speak it is decided before hyper sees a byte
//! (by the worker in server.rs: ALPN `h2` with TLS, the client preface in cleartext), so an HTTP/1.1 connection pays
//! nothing for it being on.
//!
//! What hyper's HTTP/2 does not bound by itself, connection.rs does: the idle and stalled-response
//! deadlines of the connection as a whole (`ConnHandle`), checked by the driver
//! (serving.rs), which answers them with a GOAWAY.

use std::future::Future;

use hyper::server::conn::http2;
use hyper_util::rt::TokioTimer;

use crate::Limits;
use crate::limits::Http2Limits;

/// Runs each HTTP/2 stream as a task on the worker's `LocalSet`: the app and its futures are not `Send` (each
/// worker owns its connection pools and caches), so hyper's default of a multi-threaded spawn does not fit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalExec;

impl<F> hyper::rt::Executor<F> for LocalExec
where
    F: Future + 'static,
{
    fn execute(&self, future: F) {
        tokio::task::spawn_local(future);
    }
}

/// hyper's HTTP/2 settings for every connection.
pub(crate) fn http2_builder(limits: &Limits, h2: &Http2Limits) -> http2::Builder<LocalExec> {
    let mut http = http2::Builder::new(LocalExec);
    http.timer(TokioTimer::new())
        .max_concurrent_streams(h2.max_streams)
        // The same bound as an HTTP/1.1 head; past it a request gets 431, as there.
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .initial_stream_window_size(h2.stream_window)
        .initial_connection_window_size(h2.connection_window)
        .max_pending_accept_reset_streams(h2.max_pending_resets as usize)
        .keep_alive_interval((!h2.keep_alive_interval.is_zero()).then_some(h2.keep_alive_interval))
        .keep_alive_timeout(h2.keep_alive_timeout);
    http
}
