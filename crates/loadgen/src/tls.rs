//! TLS over either engine: [`Tls`] is an [`Engine`] wrapping another (io_uring or epoll) with one rustls
//! client connection per slot. rustls does no I/O of its own, so the bytes take the inner engine's path and
//! no thread is added: received bytes go into rustls inside the inner engine's wait and come out as
//! plaintext to the worker; the worker's writes are encrypted and handed to the inner engine at once.
//!
//! The worker sees what it sees on plaintext plus three events: `Handshaking` when the TCP connect is done,
//! `Secured` (instead of `Connected`) when the handshake is, and `TlsFailed` with rustls's reason. A plaintext
//! run never builds a `Tls`, so its loop has no TLS branch at all (the worker is generic over the engine).
//!
//! rustls's outgoing buffer is unbounded here: a write is taken whole (as io_uring takes it), and what the
//! socket does not take yet waits inside rustls until the inner engine says it is writable. That is at most
//! what the worker has queued (its pipeline of requests), as it would be in the worker's own buffer.

use std::io::{self, IoSlice, Read, Write};
use std::time::Instant;

use rustls::ClientConnection;

use crate::engine::{Engine, Event, OnEvent};
use crate::handshake::{Failure, Handshake};
use crate::tls_config::TlsClient;

/// Plaintext handed to the worker per read from rustls (a record carries at most 16 KiB).
const PLAIN_BUF: usize = 16 * 1024;

pub struct Tls<E> {
    inner: E,
    sessions: Sessions,
}

/// Everything but the inner engine, so that it can take the inner engine's events while the inner engine
/// is busy waiting.
struct Sessions {
    client: TlsClient,
    slots: Vec<Option<Session>>,
    /// Slots with TLS bytes of rustls's own (handshake messages, alerts) to write after the wait.
    to_flush: Vec<usize>,
    plain: Vec<u8>,
    /// Where several pending records are joined into one write.
    gather: Vec<u8>,
}

struct Session {
    conn: ClientConnection,
    /// The handshake finished (and the worker was told).
    secured: bool,
    flush_listed: bool,
}

impl<E: Engine> Tls<E> {
    pub fn new(inner: E, client: TlsClient, connections: usize) -> Tls<E> {
        Tls {
            inner,
            sessions: Sessions {
                client,
                slots: (0..connections).map(|_| None).collect(),
                to_flush: Vec::with_capacity(connections),
                plain: vec![0; PLAIN_BUF],
                gather: Vec::new(),
            },
        }
    }
}

impl<E: Engine> Engine for Tls<E> {
    fn connect(&mut self, i: usize) -> io::Result<()> {
        let client = &self.sessions.client;
        // The ClientHello (and its key share) is made now and sent once the TCP connect is done.
        let mut conn =
            ClientConnection::new(client.config.clone(), client.server_name.clone()).map_err(io::Error::other)?;
        conn.set_buffer_limit(None);
        self.inner.connect(i)?;
        self.sessions.slots[i] = Some(Session { conn, secured: false, flush_listed: false });
        Ok(())
    }

    fn close(&mut self, i: usize) {
        if let Some(mut session) = self.sessions.slots[i].take()
            && session.secured
        {
            // Said politely, as wrk does; the socket may be gone already, so a failure is no news.
            session.conn.send_close_notify();
            let _ = write_out(&mut self.inner, i, &mut session.conn, &mut self.sessions.gather);
        }
        self.inner.close(i);
    }

    fn write(&mut self, i: usize, bytes: &[u8]) -> io::Result<usize> {
        let Some(session) = self.sessions.slots[i].as_mut().filter(|s| s.secured) else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        session.conn.writer().write_all(bytes)?;
        write_out(&mut self.inner, i, &mut session.conn, &mut self.sessions.gather)?;
        Ok(bytes.len())
    }

    fn wait(&mut self, wake_at: Instant, send_at: Option<Instant>, on_event: &mut OnEvent<'_>) -> io::Result<()> {
        let Tls { inner, sessions } = self;
        inner.wait(wake_at, send_at, &mut |i, event| sessions.on_event(i, event, on_event))?;
        while let Some(i) = sessions.to_flush.pop() {
            let Some(session) = sessions.slots[i].as_mut() else { continue };
            session.flush_listed = false;
            if let Err(e) = write_out(inner, i, &mut session.conn, &mut sessions.gather) {
                on_event(i, Event::WriteFailed(e));
            }
        }
        Ok(())
    }
}

impl Sessions {
    /// One event of the inner engine, passed on to the worker (`up`) as the plaintext engine would have.
    fn on_event(&mut self, i: usize, event: Event<'_>, up: &mut OnEvent<'_>) -> bool {
        match event {
            Event::Connected => {
                self.list_flush(i);
                up(i, Event::Handshaking)
            }
            Event::Writable => {
                self.list_flush(i);
                true
            }
            Event::Data(bytes) => self.on_data(i, bytes, up),
            Event::Eof if self.slots[i].as_ref().is_some_and(|s| !s.secured) => {
                up(i, Event::TlsFailed(Failure::new("closed by the server during the handshake")))
            }
            other => up(i, other),
        }
    }

    fn list_flush(&mut self, i: usize) {
        if let Some(session) = &mut self.slots[i]
            && !session.flush_listed
            && session.conn.wants_write()
        {
            session.flush_listed = true;
            self.to_flush.push(i);
        }
    }

    /// TLS bytes in: records are decrypted and their plaintext handed on; the end of the handshake is said
    /// once, before the first plaintext.
    fn on_data(&mut self, i: usize, mut bytes: &[u8], up: &mut OnEvent<'_>) -> bool {
        let Some(session) = self.slots[i].as_mut() else { return false };
        let conn = &mut session.conn;
        while !bytes.is_empty() {
            match conn.read_tls(&mut bytes) {
                Ok(0) => break, // after the server's close_notify: nothing more is read
                Ok(_) => {}
                Err(e) => return up(i, Event::ReadFailed(e)),
            }
            let state = match conn.process_new_packets() {
                Ok(state) => state,
                Err(e) => {
                    self.list_flush(i); // the alert rustls queued
                    return up(i, Event::TlsFailed(Failure::of(&e)));
                }
            };
            if !session.secured && !conn.is_handshaking() {
                session.secured = true;
                if !up(i, Event::Secured(Handshake::of(conn))) {
                    return false;
                }
            }
            let mut left = state.plaintext_bytes_to_read();
            while left > 0 {
                let n = match conn.reader().read(&mut self.plain) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => return up(i, Event::ReadFailed(e)),
                };
                left = left.saturating_sub(n);
                if !up(i, Event::Data(&self.plain[..n])) {
                    return false;
                }
            }
            if state.peer_has_closed() {
                // close_notify ends the stream as a FIN does (a close-delimited body ends here), whether or
                // not the FIN follows.
                return up(i, Event::Eof);
            }
        }
        self.list_flush(i); // handshake replies (the client's Finished), key updates
        true
    }
}

/// Hands what rustls has to send to the inner engine, as far as the socket takes it.
fn write_out<E: Engine>(engine: &mut E, i: usize, conn: &mut ClientConnection, gather: &mut Vec<u8>) -> io::Result<()> {
    let mut to = ToEngine { engine, slot: i, gather };
    while conn.wants_write() {
        match conn.write_tls(&mut to) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            // The rest stays in rustls until the inner engine says Writable.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The inner engine's slot as an `io::Write`, for rustls's `write_tls`.
struct ToEngine<'a, E> {
    engine: &'a mut E,
    slot: usize,
    gather: &'a mut Vec<u8>,
}

impl<E: Engine> Write for ToEngine<'_, E> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.engine.write(self.slot, buf)
    }

    /// Several records (a handshake flight, pipelined requests) go out as one write, not one each.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut nonempty = bufs.iter().filter(|b| !b.is_empty());
        match (nonempty.next(), nonempty.next()) {
            (None, _) => Ok(0),
            (Some(one), None) => self.engine.write(self.slot, one),
            _ => {
                self.gather.clear();
                for buf in bufs {
                    self.gather.extend_from_slice(buf);
                }
                self.engine.write(self.slot, self.gather)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
