//! Shared HTTP/1.1 serving for every server in this workspace: flight-rs, scribe-rs, metadata-rs and ladder-rs.
//!
//! What it owns, so the servers do not: one worker thread per core, each with its own current-thread tokio
//! runtime and its own `SO_REUSEPORT` listener (the kernel spreads connections, no work stealing, no shared
//! accept queue); hyper's HTTP/1.1 connection setup with limits that actually fire (header-read timeout with
//! the timer set, keep-alive idle timeout, header bytes → 431, body limit → 413 before the body is read);
//! graceful shutdown with a hard deadline; the response body type; JSON and error responses; tracing init;
//! and command-line parsing that fails with one line and exit code 64.
//!
//! A server is a `tower::Service<Request<RequestBody>, Response = Response<Body>, Error = Infallible>` built
//! once per worker by a factory closure; its future is usually [`Reply`], and an app that is always ready
//! implements [`Handler`] and is served as [`Handled`]. How to run one: see [`Server`]. One
//! connection accepted elsewhere is served with [`serve_connection`] (the fuzz target
//! drives the whole stack that way). The answers every server shares ([`not_found`], [`method_not_allowed`],
//! [`unavailable`], [`error`]) live here so their bytes are the same everywhere.

mod body;
mod cli;
mod connection;
mod http2;
mod limits;
mod listen;
mod reply;
mod response;
mod server;
mod serving;
mod signal;
mod telemetry;
mod tls;

pub use body::{Body, BodyError, BoxError, RequestBody, read_body};
pub use cli::{EXIT_CONFIG, command_with_env, exit_config, parse_or_exit};
pub use connection::{PeerAddr, serve_connection};
pub use limits::{Http2Limits, Limits, ServeArgs};
pub use listen::bind_reuseport;
pub use reply::{Handled, Handler, Reply};
pub use response::{
    error, json, json_bytes, method_not_allowed, not_found, payload_too_large, push_json_str, push_json_str_contents,
    request_timeout, unavailable,
};
pub use server::{Server, serve_until_signal};
pub use signal::ShutdownSignal;
pub use telemetry::init_tracing;
pub use tls::{Tls, TlsError, TlsSettings};

/// The request type every server in the workspace handles.
pub type Request = http::Request<RequestBody>;
/// The response type every server in the workspace returns.
pub type Response = http::Response<Body>;
