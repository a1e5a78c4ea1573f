//! One proxied connection: the accepted client socket, the socket to the upstream, and a [`Direction`] each
//! way. Driven by the worker: [`Connection::ready`] records what epoll said (edge-triggered, so readiness is
//! remembered until a read or write says `WouldBlock`), [`Connection::pump`] moves every byte it can and says
//! when the connection next needs attention.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use crate::direction::{Direction, Payload};
use crate::report::{ConnectionReport, End};

/// Which socket of the connection an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Upstream,
}

/// What the worker does with the connection after a pump.
#[derive(Debug)]
pub enum Status {
    /// Pump again on the next event, or at `next_due` (a segment or a reset waiting for its time).
    Open { next_due: Option<Instant> },
    /// Done: the worker closes both sockets (with an RST on [`End::Reset`]) and reports it.
    Finished(End),
}

#[derive(Debug, Default)]
struct Readiness {
    readable: bool,
    writable: bool,
}

/// What the pump does: the one-way delay, the bound on each direction's queue, and the worker's read buffer.
#[derive(Debug)]
pub struct PumpContext<'a> {
    pub one_way: Duration,
    pub queue_limit: usize,
    pub buffer: &'a mut [u8],
}

#[derive(Debug)]
pub struct Connection {
    client: TcpStream,
    upstream: TcpStream,
    client_ready: Readiness,
    upstream_ready: Readiness,
    /// The upstream's connect finished; until then nothing is written to it or read from it.
    connected: bool,
    /// Why the upstream could not be connected to.
    unreachable: Option<String>,
    to_upstream: Direction,
    to_client: Direction,
    peer: SocketAddr,
    opened: Instant,
}

impl Connection {
    /// `upstream` is a connect in progress (mio's non-blocking connect).
    pub fn new(client: TcpStream, peer: SocketAddr, upstream: TcpStream) -> Connection {
        // The proxy forwards each segment as it comes; Nagle's algorithm would hold small writes back for the
        // peer's ACK, a delay that is not the one asked for.
        let _ = client.set_nodelay(true);
        Connection {
            client,
            upstream,
            client_ready: Readiness::default(),
            upstream_ready: Readiness::default(),
            connected: false,
            unreachable: None,
            to_upstream: Direction::default(),
            to_client: Direction::default(),
            peer,
            opened: Instant::now(),
        }
    }

    pub fn register(&mut self, registry: &Registry, client: Token, upstream: Token) -> io::Result<()> {
        registry.register(&mut self.client, client, Interest::READABLE | Interest::WRITABLE)?;
        registry.register(&mut self.upstream, upstream, Interest::READABLE | Interest::WRITABLE)
    }

    /// Records what epoll reported for one socket. An error or hang-up counts as readable and writable, so
    /// the next read or write returns it.
    pub fn ready(&mut self, side: Side, event: &Event, one_way: Duration) {
        let readable = event.is_readable() || event.is_read_closed() || event.is_error();
        let writable = event.is_writable() || event.is_write_closed() || event.is_error();
        match side {
            Side::Client => {
                self.client_ready.readable |= readable;
                self.client_ready.writable |= writable;
            }
            Side::Upstream => {
                self.upstream_ready.readable |= readable;
                self.upstream_ready.writable |= writable;
                if !self.connected && (writable || readable) {
                    self.check_connect(one_way);
                }
            }
        }
    }

    /// After the upstream socket's first event: connected, still connecting (a spurious wake-up), or failed.
    fn check_connect(&mut self, one_way: Duration) {
        let failure = match self.upstream.take_error() {
            Ok(Some(e)) | Err(e) => Some(e),
            Ok(None) => match self.upstream.peer_addr() {
                Ok(_) => None,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                Err(e) => Some(e),
            },
        };
        match failure {
            None => {
                self.connected = true;
                let _ = self.upstream.set_nodelay(true);
            }
            Some(e) => {
                // The client sees its connection closed one way later, as a refusal would have reached it.
                self.unreachable = Some(e.to_string());
                self.to_upstream.abandon();
                self.to_client.push_fin(Instant::now() + one_way);
            }
        }
    }

    /// Reads what each source has (as far as its direction's queue allows), writes what is due, and repeats
    /// while anything moved: a write that frees queue room lets a stalled read go on.
    pub fn pump(&mut self, context: &mut PumpContext<'_>) -> Status {
        loop {
            let mut moved = read_source(&mut self.client, &mut self.client_ready, &mut self.to_upstream, context);
            if self.connected {
                moved |= read_source(&mut self.upstream, &mut self.upstream_ready, &mut self.to_client, context);
            }
            let now = Instant::now();
            if self.connected {
                match write_due(&mut self.upstream, &mut self.upstream_ready, &mut self.to_upstream, now) {
                    Written::Moved => moved = true,
                    Written::Idle => {}
                    Written::DestinationGone => {
                        // The upstream vanished: the client learns it as a reset, one way later.
                        self.to_upstream.abandon();
                        self.to_client.push_reset(now + context.one_way);
                        moved = true;
                    }
                }
            }
            match write_due(&mut self.client, &mut self.client_ready, &mut self.to_client, now) {
                Written::Moved => moved = true,
                Written::Idle => {}
                Written::DestinationGone => {
                    self.to_client.abandon();
                    self.to_upstream.push_reset(now + context.one_way);
                    moved = true;
                }
            }
            if self.to_upstream.reset_now(now) || self.to_client.reset_now(now) {
                return Status::Finished(End::Reset);
            }
            if self.to_upstream.fin_delivered() && self.to_client.fin_delivered() {
                return Status::Finished(self.unreachable.clone().map_or(End::Closed, End::Unreachable));
            }
            if !moved {
                let next_due =
                    [self.to_upstream.next_due(now), self.to_client.next_due(now)].into_iter().flatten().min();
                return Status::Open { next_due };
            }
        }
    }

    /// Closes both sockets; with `reset`, with an RST (SO_LINGER 0), as a reset or a vanished peer would.
    pub fn close(mut self, registry: &Registry, end: End) -> ConnectionReport {
        for socket in [&mut self.client, &mut self.upstream] {
            let _ = registry.deregister(socket);
            if end == End::Reset {
                let _ = rustix::net::sockopt::set_socket_linger(&*socket, Some(Duration::ZERO));
            }
        }
        ConnectionReport {
            client: self.peer,
            to_upstream: self.to_upstream.delivered(),
            to_client: self.to_client.delivered(),
            lasted: self.opened.elapsed(),
            end,
        }
    }
}

/// Reads from `source` into `direction` until the source has nothing, ends, or the queue is full. Each read's
/// bytes are due one way after that read.
fn read_source(
    source: &mut TcpStream,
    ready: &mut Readiness,
    direction: &mut Direction,
    context: &mut PumpContext<'_>,
) -> bool {
    let mut moved = false;
    while ready.readable {
        let room = direction.room(context.queue_limit).min(context.buffer.len());
        if room == 0 {
            break;
        }
        let due = Instant::now() + context.one_way;
        match source.read(&mut context.buffer[..room]) {
            Ok(0) => {
                direction.push_fin(due);
                moved = true;
            }
            Ok(n) => {
                direction.push_data(context.buffer[..n].to_vec(), due);
                moved = true;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => ready.readable = false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                direction.push_reset(due);
                moved = true;
            }
        }
    }
    moved
}

enum Written {
    Moved,
    Idle,
    /// A write failed (the peer reset or is gone): nothing more can be delivered this way.
    DestinationGone,
}

/// Writes the segments of `direction` that are due at `now` to `destination`, in order, while it takes them.
fn write_due(destination: &mut TcpStream, ready: &mut Readiness, direction: &mut Direction, now: Instant) -> Written {
    let mut moved = Written::Idle;
    while let Some(segment) = direction.due_head(now) {
        match &segment.payload {
            Payload::Data { bytes, written } => {
                if !ready.writable {
                    break;
                }
                match destination.write(&bytes[*written..]) {
                    Ok(0) => return Written::DestinationGone,
                    Ok(n) => {
                        direction.wrote(n);
                        moved = Written::Moved;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => ready.writable = false,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Written::DestinationGone,
                }
            }
            Payload::Fin => {
                // A peer that already reset makes this fail; its reset reaches the other side through the
                // other direction's read or write.
                let _ = destination.shutdown(Shutdown::Write);
                direction.fin_passed();
                moved = Written::Moved;
            }
        }
    }
    moved
}
