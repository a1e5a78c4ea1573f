//! One event-loop thread: accepts on (its clone of) the listener, connects each client to the upstream, and
//! moves bytes for the connections it accepted. Single-threaded per loop, so no locks: a connection lives and
//! dies on the thread that accepted it. Due times wake the loop through a timerfd ([`DueTimer`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use crate::connection::{Connection, PumpContext, Side, Status};
use crate::report::{ConnectionReport, End, Report};
use crate::settings::Settings;
use oskit::timer::DueTimer;

const WAKER: Token = Token(usize::MAX);
const TIMER: Token = Token(usize::MAX - 1);
const LISTENER: Token = Token(usize::MAX - 2);

/// One read's bytes at most: a 64 KiB buffer per thread, not per connection.
const READ_BUFFER: usize = 64 * 1024;

struct Slot {
    /// Tells a wake-up meant for this connection from one meant for an earlier occupant of the slot.
    id: u64,
    connection: Connection,
    /// The earliest wake-up already queued for this connection.
    scheduled: Option<Instant>,
}

pub struct Worker {
    poll: Poll,
    listener: TcpListener,
    timer: DueTimer,
    settings: Settings,
    stop: Arc<AtomicBool>,
    /// Connection `i` has the tokens `2i` (client) and `2i + 1` (upstream).
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    next_id: u64,
    /// (due, slot, id): when a connection has a segment or a reset to deliver. A stale entry (the connection
    /// gone, or pumped already) costs one pump that finds nothing due.
    wakeups: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    buffer: Vec<u8>,
    report: Report,
}

impl Worker {
    /// The worker and the waker that interrupts its poll (for shutdown: set `stop`, then wake).
    pub fn new(
        listener: std::net::TcpListener,
        settings: Settings,
        stop: Arc<AtomicBool>,
    ) -> io::Result<(Worker, Arc<Waker>)> {
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let timer = DueTimer::new(poll.registry(), TIMER)?;
        let worker = Worker {
            poll,
            listener,
            timer,
            settings,
            stop,
            slots: Vec::new(),
            free: Vec::new(),
            next_id: 0,
            wakeups: BinaryHeap::new(),
            buffer: vec![0; READ_BUFFER],
            report: Report::default(),
        };
        Ok((worker, waker))
    }

    /// Serves until `stop` is set and the waker woken; then closes every connection still open and returns
    /// what was carried.
    pub fn run(mut self) -> Report {
        let mut events = Events::with_capacity(256);
        while !self.stop.load(Ordering::Acquire) {
            if let Err(e) = self.poll.poll(&mut events, None) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                eprintln!("delay-proxy: poll failed, stopping this worker: {e}");
                break;
            }
            for event in events.iter() {
                match event.token() {
                    WAKER => {}
                    TIMER => self.timer.fired(),
                    LISTENER => self.accept(),
                    Token(token) => {
                        let (index, side) = (token / 2, if token % 2 == 0 { Side::Client } else { Side::Upstream });
                        if let Some(Some(slot)) = self.slots.get_mut(index) {
                            slot.connection.ready(side, event, self.settings.one_way());
                            self.pump(index);
                        }
                    }
                }
            }
            self.pump_due();
            self.arm_timer();
        }
        for index in 0..self.slots.len() {
            self.close(index, End::Open);
        }
        self.report
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((client, peer)) => self.open(client, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors and the like: the pending clients wait for the next accept event.
                Err(e) => return eprintln!("delay-proxy: accept failed: {e}"),
            }
        }
    }

    fn open(&mut self, client: TcpStream, peer: std::net::SocketAddr) {
        let upstream = match TcpStream::connect(self.settings.upstream) {
            Ok(upstream) => upstream,
            Err(e) => {
                // Dropping the client closes it at once: the connect could not even start.
                let end = End::Unreachable(e.to_string());
                let report =
                    ConnectionReport { client: peer, to_upstream: 0, to_client: 0, lasted: Default::default(), end };
                return self.report.add(report);
            }
        };
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let mut connection = Connection::new(client, peer, upstream);
        if let Err(e) = connection.register(self.poll.registry(), Token(2 * index), Token(2 * index + 1)) {
            eprintln!("delay-proxy: cannot watch the connection from {peer}: {e}");
            self.report.add(connection.close(self.poll.registry(), End::Reset));
            return self.free.push(index);
        }
        self.next_id += 1;
        self.slots[index] = Some(Slot { id: self.next_id, connection, scheduled: None });
        self.pump(index);
    }

    /// Pumps connection `index` and queues its next wake-up, or closes it when it finished.
    fn pump(&mut self, index: usize) {
        let Some(Some(slot)) = self.slots.get_mut(index) else { return };
        let mut context = PumpContext {
            one_way: self.settings.one_way(),
            queue_limit: self.settings.queue_limit,
            buffer: &mut self.buffer,
        };
        match slot.connection.pump(&mut context) {
            Status::Open { next_due: Some(due) } => {
                if slot.scheduled.is_none_or(|scheduled| due < scheduled) {
                    slot.scheduled = Some(due);
                    self.wakeups.push(Reverse((due, index, slot.id)));
                }
            }
            Status::Open { next_due: None } => {}
            Status::Finished(end) => self.close(index, end),
        }
    }

    /// Pumps every connection with a wake-up due now.
    fn pump_due(&mut self) {
        let now = Instant::now();
        while let Some(&Reverse((due, index, id))) = self.wakeups.peek() {
            if due > now {
                return;
            }
            self.wakeups.pop();
            if let Some(Some(slot)) = self.slots.get_mut(index)
                && slot.id == id
            {
                if slot.scheduled == Some(due) {
                    slot.scheduled = None;
                }
                self.pump(index);
            }
        }
    }

    fn arm_timer(&mut self) {
        if let Some(&Reverse((due, _, _))) = self.wakeups.peek()
            && let Err(e) = self.timer.arm(due, Instant::now())
        {
            eprintln!("delay-proxy: cannot arm the timer: {e}");
        }
    }

    fn close(&mut self, index: usize, end: End) {
        if let Some(slot) = self.slots.get_mut(index).and_then(Option::take) {
            self.report.add(slot.connection.close(self.poll.registry(), end));
            self.free.push(index);
        }
    }
}
