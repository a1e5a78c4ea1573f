//! The readiness engine: mio over epoll. Sockets are registered once (edge-triggered) for read and write, so a
//! request costs a write and a read, never an epoll_ctl. Reads go into one buffer per worker and are handed
//! to the worker at once, so an idle connection holds no read buffer.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::engine::{Engine, Event, OnEvent};
use crate::timer::SendTimer;

const READ_BUF: usize = 16 * 1024;

struct Slot {
    stream: TcpStream,
    connected: bool,
}

pub struct Epoll {
    addr: SocketAddr,
    poll: Poll,
    events: Events,
    slots: Vec<Option<Slot>>,
    read_buf: Vec<u8>,
    /// Wakes the loop at the open loop's send times (epoll's own timeout rounds up to a millisecond).
    send_timer: Option<SendTimer>,
}

impl Epoll {
    pub fn new(addr: SocketAddr, connections: usize) -> io::Result<Epoll> {
        Ok(Epoll {
            addr,
            poll: Poll::new()?,
            events: Events::with_capacity(1024),
            slots: (0..connections).map(|_| None).collect(),
            read_buf: vec![0; READ_BUF],
            send_timer: None,
        })
    }
}

impl Engine for Epoll {
    fn connect(&mut self, i: usize) -> io::Result<()> {
        let mut stream = TcpStream::connect(self.addr)?;
        let _ = stream.set_nodelay(true);
        self.poll.registry().register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE)?;
        self.slots[i] = Some(Slot { stream, connected: false });
        Ok(())
    }

    fn close(&mut self, i: usize) {
        if let Some(mut slot) = self.slots[i].take() {
            let _ = self.poll.registry().deregister(&mut slot.stream);
        }
    }

    fn write(&mut self, i: usize, bytes: &[u8]) -> io::Result<usize> {
        match &mut self.slots[i] {
            Some(slot) => slot.stream.write(bytes),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    fn wait(&mut self, wake_at: Instant, send_at: Option<Instant>, on_event: &mut OnEvent<'_>) -> io::Result<()> {
        let now = Instant::now();
        let mut until = wake_at;
        if let Some(at) = send_at {
            until = until.min(at);
            let timer = match &mut self.send_timer {
                Some(timer) => timer,
                None => self.send_timer.insert(SendTimer::new(self.poll.registry())?),
            };
            timer.arm(at, now)?;
        }
        match self.poll.poll(&mut self.events, Some(until.saturating_duration_since(now))) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        for event in self.events.iter() {
            if event.token() == SendTimer::TOKEN {
                if let Some(timer) = &mut self.send_timer {
                    timer.fired();
                }
                continue;
            }
            let i = event.token().0;
            let Some(Some(slot)) = self.slots.get_mut(i) else { continue };
            if event.is_writable() || event.is_write_closed() || event.is_error() {
                if slot.connected {
                    if !on_event(i, Event::Writable) {
                        continue;
                    }
                } else {
                    // A non-blocking connect finished: it worked if there is no socket error and a peer.
                    match slot.stream.take_error() {
                        Ok(None) if slot.stream.peer_addr().is_ok() => {
                            slot.connected = true;
                            if !on_event(i, Event::Connected) {
                                continue;
                            }
                        }
                        Ok(Some(e)) | Err(e) => {
                            on_event(i, Event::ConnectFailed(e));
                            continue;
                        }
                        Ok(None) => continue, // not connected yet (spurious wakeup)
                    }
                }
            }
            if slot.connected && (event.is_readable() || event.is_read_closed()) {
                // The peer's FIN arrives with no later edge of its own, so after it the socket is read to EOF
                // now (a close-delimited body ends there).
                let peer_closed = event.is_read_closed();
                loop {
                    match slot.stream.read(&mut self.read_buf) {
                        Ok(0) => {
                            on_event(i, Event::Eof);
                            break;
                        }
                        Ok(n) => {
                            if !on_event(i, Event::Data(&self.read_buf[..n])) {
                                break;
                            }
                            // A short read drained the socket; the next edge brings more. No EAGAIN syscall
                            // needed, unless the peer already closed.
                            if n < self.read_buf.len() && !peer_closed {
                                break;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            on_event(i, Event::ReadFailed(e));
                            break;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
