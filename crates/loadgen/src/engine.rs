//! What a worker needs from the operating system: open, write to and close its connections, and wait for what
//! happened to them. Two engines provide it: `epoll` (readiness: mio, a write and a read per request) and
//! `uring` (completions: one io_uring per worker, multishot receives into a provided buffer ring, every
//! submission of a loop turn in one `io_uring_enter`). The worker (`worker`) decides what to send and when and
//! parses what comes back, the same way on both, so both engines measure the same thing. TLS (`tls`) is an
//! engine too, over either of them: the worker sees plaintext and three more events.

use std::io;
use std::time::Instant;

use crate::handshake::{Failure, Handshake};

/// Something that happened to connection slot `i` during [`Engine::wait`].
#[derive(Debug)]
pub enum Event<'a> {
    /// The connect started by [`Engine::connect`] finished (with TLS: see `Secured`).
    Connected,
    /// TLS: the TCP connect finished and the handshake began.
    Handshaking,
    /// TLS, in place of `Connected`: the handshake finished; requests can be written.
    Secured(Handshake),
    /// TLS: the handshake, or a record after it, failed; nothing more arrives on this connection.
    TlsFailed(Failure),
    ConnectFailed(io::Error),
    /// After a short write: the socket takes bytes again (epoll only; io_uring takes every write whole).
    Writable,
    /// Response bytes, in order.
    Data(&'a [u8]),
    /// The server closed its side; nothing more arrives on this socket.
    Eof,
    ReadFailed(io::Error),
    WriteFailed(io::Error),
}

/// The callback [`Engine::wait`] delivers events to: called with the slot and the event, it returns false when
/// the worker gave the slot up.
pub type OnEvent<'a> = dyn FnMut(usize, Event<'_>) -> bool + 'a;

/// The I/O of one worker's connections, which are numbered slots `0..connections`.
///
/// [`Engine::wait`] hands events to a callback that cannot reach the engine; the worker therefore closes and
/// writes after the wait returns, and ignores events of a slot it has already given up on.
pub trait Engine {
    /// Starts connecting slot `i`, whose previous socket (if any) was closed. A failure that is known at once
    /// is returned; otherwise [`Event::Connected`] or [`Event::ConnectFailed`] follows.
    fn connect(&mut self, i: usize) -> io::Result<()>;

    /// Closes slot `i`'s socket. No event of that socket is delivered afterwards.
    fn close(&mut self, i: usize);

    /// Writes what the socket takes now and returns how many bytes that was; `WouldBlock` when it takes none
    /// (then [`Event::Writable`] follows). io_uring takes the whole buffer (it copies it and submits a send);
    /// its failure arrives later as [`Event::WriteFailed`].
    fn write(&mut self, i: usize, bytes: &[u8]) -> io::Result<usize>;

    /// Waits until something happens, `wake_at` passes (millisecond resolution is enough) or `send_at` passes
    /// (the open loop's next send: the engine wakes then with sub-millisecond precision), and delivers every
    /// event to `on_event`. `on_event` returns false when the worker gave the slot up; the engine then stops
    /// reading that socket in this turn.
    fn wait(&mut self, wake_at: Instant, send_at: Option<Instant>, on_event: &mut OnEvent<'_>) -> io::Result<()>;
}
