//! The completion engine: one io_uring per worker thread.
//!
//! - Every submission of a loop turn (sends, receive re-arms, connects, cancels) goes to the kernel in the one
//!   `io_uring_enter` that also waits for completions, with a nanosecond timeout (the open loop's send clock
//!   needs no timerfd here).
//! - Each connected socket has one multishot receive that picks buffers from a provided buffer ring, so a
//!   response costs no receive submission; the bytes are parsed from the ring's buffer and the buffer goes
//!   back to the ring at once.
//! - A request is a send of the bytes the worker already rendered.
//! - No SQPOLL: its kernel thread's CPU would not be charged to the loader. The ring is set up with
//!   `DEFER_TASKRUN`, so the kernel's completion work runs inside this thread's `io_uring_enter` and counts
//!   in its CPU time; anything the kernel hands to io-wq workers is still in the process's CPU (the report's
//!   `cpu.process_us`).
//!
//! This is the only module of the workspace with unsafe code. What makes it sound:
//! 1. **Buffer ring memory** (`BufRing`) is allocated once, page-aligned, and freed only after the kernel can no
//!    longer write to it: [`Uring`]'s `Drop` cancels every operation, waits for their completions, and
//!    unregisters the ring first; if that does not finish, the memory is leaked rather than freed.
//! 2. **A buffer the kernel filled** is read only between its completion and its return to the ring
//!    (`BufRing::give_back`), and nothing else writes it meanwhile: the kernel picks only buffers that are
//!    in the ring.
//! 3. **Send bytes** live in the socket's `sending` vector, which is not touched (no push, no clear, no drop)
//!    while a send of it is in flight; bytes written meanwhile wait in `queued`.
//! 4. **A closed socket** keeps its file descriptor and buffers (it lingers in `sockets`) until every
//!    operation it had in flight has completed; only then is it dropped.
//! 5. **Connect addresses** are copied by the kernel when the connect is submitted (and `addr` outlives the
//!    ring anyway).

#![allow(unsafe_code)]

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use io_uring::types::{BufRingEntry, CancelBuilder, Fd, SubmitArgs, Timespec};
use io_uring::{EnterFlags, IoUring, cqueue, opcode, squeue};
use rustix::net::{AddressFamily, SocketFlags, SocketType, sockopt};

use crate::engine::{Engine, Event, OnEvent};

/// Size of one provided receive buffer: a typical response fits one, a large body takes several completions.
const BUF_SIZE: usize = 4096;
/// The provided buffer group's id (one group per ring).
const GROUP: u16 = 0;
const PAGE: usize = 4096;
/// How long `Drop` waits for cancelled operations to complete before giving up and leaking their memory.
const DRAIN_FOR: Duration = Duration::from_secs(1);

/// What a completion is for, in the top bits of its user data (the socket id is in the low 32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Connect = 1,
    Recv = 2,
    Send = 3,
    /// Completions of cancel requests carry nothing to act on.
    Cancel = 4,
}

fn user_data(op: Op, socket: u32) -> u64 {
    ((op as u64) << 32) | u64::from(socket)
}

fn decode(user_data: u64) -> (Option<Op>, u32) {
    let op = match user_data >> 32 {
        1 => Some(Op::Connect),
        2 => Some(Op::Recv),
        3 => Some(Op::Send),
        4 => Some(Op::Cancel),
        _ => None,
    };
    (op, user_data as u32)
}

/// One socket and what the kernel holds of it.
struct Socket {
    fd: OwnedFd,
    /// The worker's slot; None once the worker closed it (it lingers until `in_flight` is 0).
    slot: Option<usize>,
    connected: bool,
    /// Submitted operations without their final completion (a multishot receive counts once).
    in_flight: u32,
    recv_armed: bool,
    /// The bytes of the send in flight (invariant 3).
    sending: Vec<u8>,
    /// How much of `sending` the kernel has confirmed.
    sent: usize,
    send_in_flight: bool,
    /// Bytes written while a send was in flight.
    queued: Vec<u8>,
}

/// Provided receive buffers: a ring of buffer descriptors shared with the kernel, and the buffers.
struct BufRing {
    entries: *mut BufRingEntry,
    entries_layout: Layout,
    data: *mut u8,
    data_layout: Layout,
    count: u16,
    /// Our copy of the ring's tail; published to the kernel by `publish`.
    tail: u16,
    registered: bool,
}

impl BufRing {
    fn new(count: u16) -> io::Result<BufRing> {
        let entries_layout = Layout::from_size_align(usize::from(count) * size_of::<BufRingEntry>(), PAGE)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let data_layout = Layout::from_size_align(usize::from(count) * BUF_SIZE, PAGE)
            .map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: both layouts have a non-zero size (count ≥ 1).
        let (entries, data) = unsafe { (alloc_zeroed(entries_layout), alloc_zeroed(data_layout)) };
        if entries.is_null() || data.is_null() {
            return Err(io::Error::other("cannot allocate the io_uring receive buffers"));
        }
        let mut ring =
            BufRing { entries: entries.cast(), entries_layout, data, data_layout, count, tail: 0, registered: false };
        for bid in 0..count {
            ring.give_back(bid);
        }
        ring.publish();
        Ok(ring)
    }

    /// Puts buffer `bid` back in the ring (visible to the kernel after `publish`).
    fn give_back(&mut self, bid: u16) {
        let index = usize::from(self.tail & (self.count - 1));
        // SAFETY: index < count, inside the entries allocation; the kernel does not read entries past the
        // published tail, and this one is past it until `publish`.
        let entry = unsafe { &mut *self.entries.add(index) };
        // SAFETY: bid < count, so the buffer lies inside the data allocation.
        entry.set_addr(unsafe { self.data.add(usize::from(bid) * BUF_SIZE) } as u64);
        entry.set_len(BUF_SIZE as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the buffers given back visible to the kernel.
    fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's reserved field, inside the entries allocation;
        // the kernel reads it with acquire ordering, so a release store publishes the entries written before.
        let tail = unsafe { AtomicU16::from_ptr(BufRingEntry::tail(self.entries).cast_mut()) };
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which a completion just handed us (invariant 2).
    fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        let (bid, len) = (usize::from(bid).min(usize::from(self.count) - 1), len.min(BUF_SIZE));
        // SAFETY: inside the data allocation; the kernel finished writing this buffer before posting the
        // completion and will not pick it again until it is given back.
        unsafe { std::slice::from_raw_parts(self.data.add(bid * BUF_SIZE), len) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        if self.registered {
            // Still registered: the kernel may write to the buffers; leak them (invariant 1).
            return;
        }
        // SAFETY: allocated in `new` with these layouts; the kernel no longer knows these addresses.
        unsafe {
            dealloc(self.entries.cast(), self.entries_layout);
            dealloc(self.data, self.data_layout);
        }
    }
}

pub struct Uring {
    ring: IoUring,
    /// `NO_IOWAIT` where the kernel has it (6.15+): a task waiting on its ring with requests pending is
    /// otherwise counted as in iowait, so an idle loader's core looked I/O-bound (68% iowait on the loader's
    /// core at 300 req/s here) and iowait no longer pointed at a disk.
    wait_flags: EnterFlags,
    addr: SocketAddr,
    /// The target in the kernel's layout, for connects, and its length.
    sockaddr: Box<SockAddr>,
    sockaddr_len: libc::socklen_t,
    bufs: BufRing,
    /// Socket ids (indexes) in use and free.
    sockets: Vec<Option<Socket>>,
    free_ids: Vec<u32>,
    /// The worker's slots: which socket each uses.
    slots: Vec<Option<u32>>,
    /// Sockets whose multishot receive ended while they are still connected (out of buffers): armed again
    /// once the buffers are back.
    rearm: Vec<u32>,
}

/// A socket address as `connect(2)` takes it.
#[repr(C)]
union SockAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

fn sockaddr(addr: SocketAddr) -> (SockAddr, libc::socklen_t) {
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_in is plain old data; all zeroes is a valid value.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_port = a.port().to_be();
            sa.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) };
            (SockAddr { v4: sa }, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above.
            let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_port = a.port().to_be();
            sa.sin6_addr = libc::in6_addr { s6_addr: a.ip().octets() };
            sa.sin6_flowinfo = a.flowinfo();
            sa.sin6_scope_id = a.scope_id();
            (SockAddr { v6: sa }, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// Why io_uring cannot be used here (None when it can): an old kernel, `kernel.io_uring_disabled`, a seccomp
/// filter (containers), or a missing operation.
pub fn unavailable() -> Option<String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut version = release.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse::<u32>().ok());
    let (major, minor) = (version.next().unwrap_or(0), version.next().unwrap_or(0));
    if (major, minor) < (6, 1) {
        return Some(format!("kernel {} is older than 6.1 (multishot receive, deferred task work)", release.trim()));
    }
    let ring = match build_ring(8) {
        Ok(ring) => ring,
        Err(e) => return Some(format!("io_uring_setup failed: {e}")),
    };
    let mut probe = io_uring::Probe::new();
    if let Err(e) = ring.submitter().register_probe(&mut probe) {
        return Some(format!("io_uring probe failed: {e}"));
    }
    for (code, name) in [
        (opcode::Connect::CODE, "connect"),
        (opcode::RecvMulti::CODE, "recv"),
        (opcode::Send::CODE, "send"),
        (opcode::AsyncCancel2::CODE, "cancel"),
    ] {
        if !probe.is_supported(code) {
            return Some(format!("the kernel's io_uring has no {name} operation"));
        }
    }
    if !ring.params().is_feature_ext_arg() {
        return Some("the kernel's io_uring cannot time out a wait (no EXT_ARG)".into());
    }
    None
}

fn build_ring(entries: u32) -> io::Result<IoUring> {
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_submit_all()
        .setup_cqsize(entries * 4)
        .build(entries)
}

impl Uring {
    pub fn new(addr: SocketAddr, connections: usize) -> io::Result<Uring> {
        // Room for a send and a receive re-arm per connection in one turn, plus connects and cancels; a fuller
        // turn submits early (see `push`).
        let entries = (connections * 2 + 64).next_power_of_two().min(16 * 1024) as u32;
        let ring = build_ring(entries)?;
        // Two buffers per connection: a response and the start of the next (pipelining) per turn.
        let count = (connections * 2).next_power_of_two().clamp(64, 16 * 1024) as u16;
        let mut bufs = BufRing::new(count)?;
        // SAFETY: the entries are page-aligned, `count` long, a power of two, and stay allocated while registered
        // (invariant 1).
        unsafe { ring.submitter().register_buf_ring_with_flags(bufs.entries as u64, count, GROUP, 0)? };
        bufs.registered = true;
        let (target, sockaddr_len) = sockaddr(addr);
        let wait_flags = if ring.params().is_feature_no_iowait() { EnterFlags::NO_IOWAIT } else { EnterFlags::empty() };
        Ok(Uring {
            wait_flags,
            ring,
            addr,
            sockaddr: Box::new(target),
            sockaddr_len,
            bufs,
            sockets: Vec::with_capacity(connections),
            free_ids: Vec::new(),
            slots: vec![None; connections],
            rearm: Vec::new(),
        })
    }

    /// Queues a submission; a full queue is submitted first.
    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every entry pushed refers only to memory that outlives its operation (invariants 1, 3, 5).
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn socket(&mut self, id: u32) -> Option<&mut Socket> {
        self.sockets.get_mut(id as usize).and_then(Option::as_mut)
    }

    fn arm_recv(&mut self, id: u32) -> io::Result<()> {
        let Some(socket) = self.socket(id) else { return Ok(()) };
        if socket.recv_armed || socket.slot.is_none() {
            return Ok(());
        }
        socket.recv_armed = true;
        socket.in_flight += 1;
        let entry = opcode::RecvMulti::new(Fd(socket.fd.as_raw_fd()), GROUP).build().user_data(user_data(Op::Recv, id));
        self.push(&entry)
    }

    /// Submits a send of `sending[sent..]`.
    fn send(&mut self, id: u32) -> io::Result<()> {
        let Some(socket) = self.socket(id) else { return Ok(()) };
        socket.send_in_flight = true;
        socket.in_flight += 1;
        let rest = &socket.sending[socket.sent..];
        let entry = opcode::Send::new(Fd(socket.fd.as_raw_fd()), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(user_data(Op::Send, id));
        self.push(&entry)
    }

    /// One completion; `on_event` gets what the worker must know.
    fn complete(&mut self, cqe: &cqueue::Entry, on_event: &mut OnEvent<'_>) -> io::Result<()> {
        let (op, id) = decode(cqe.user_data());
        let (res, flags) = (cqe.result(), cqe.flags());
        let Some(op) = op.filter(|op| *op != Op::Cancel) else { return Ok(()) };
        let Some(socket) = self.socket(id) else { return Ok(()) };
        let slot = socket.slot;
        let failure = || io::Error::from_raw_os_error(-res);
        match op {
            Op::Connect => {
                socket.in_flight -= 1;
                if let Some(slot) = slot {
                    if res < 0 {
                        on_event(slot, Event::ConnectFailed(failure()));
                    } else {
                        socket.connected = true;
                        self.arm_recv(id)?;
                        on_event(slot, Event::Connected);
                    }
                }
            }
            Op::Recv => {
                let last = !cqueue::more(flags);
                if last {
                    socket.in_flight -= 1;
                    socket.recv_armed = false;
                }
                if let Some(bid) = cqueue::buffer_select(flags) {
                    if let (Some(slot), Ok(len)) = (slot, usize::try_from(res))
                        && len > 0
                    {
                        on_event(slot, Event::Data(self.bufs.bytes(bid, len)));
                    }
                    self.bufs.give_back(bid);
                }
                if let Some(slot) = slot {
                    if res == 0 {
                        on_event(slot, Event::Eof);
                    } else if res == -libc::ENOBUFS || (last && res > 0) {
                        self.rearm.push(id); // the ring ran dry: read on once buffers are back
                    } else if res < 0 && res != -libc::ECANCELED {
                        on_event(slot, Event::ReadFailed(failure()));
                    }
                }
            }
            Op::Send => {
                socket.in_flight -= 1;
                socket.send_in_flight = false;
                if res < 0 {
                    if let Some(slot) = slot
                        && res != -libc::ECANCELED
                    {
                        on_event(slot, Event::WriteFailed(failure()));
                    }
                } else if socket.slot.is_some() {
                    socket.sent += res as usize;
                    if socket.sent < socket.sending.len() {
                        self.send(id)?;
                    } else {
                        socket.sending.clear();
                        socket.sent = 0;
                        if !socket.queued.is_empty() {
                            std::mem::swap(&mut socket.sending, &mut socket.queued);
                            self.send(id)?;
                        }
                    }
                }
            }
            Op::Cancel => {}
        }
        self.release_if_done(id);
        Ok(())
    }

    /// Drops a closed socket once nothing of it is in flight (invariant 4).
    fn release_if_done(&mut self, id: u32) {
        if let Some(Some(socket)) = self.sockets.get(id as usize)
            && socket.slot.is_none()
            && socket.in_flight == 0
        {
            self.sockets[id as usize] = None;
            self.free_ids.push(id);
        }
    }

    /// Runs one enter: submits what is queued and waits up to `timeout` for a completion.
    fn enter(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = Timespec::from(timeout);
        let args = SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args_and_flags(1, &args, self.wait_flags) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Engine for Uring {
    fn connect(&mut self, i: usize) -> io::Result<()> {
        let family = if self.addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
        let fd = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
        sockopt::set_tcp_nodelay(&fd, true)?;
        let raw = fd.as_raw_fd();
        let socket = Socket {
            fd,
            slot: Some(i),
            connected: false,
            in_flight: 1,
            recv_armed: false,
            sending: Vec::with_capacity(512),
            sent: 0,
            send_in_flight: false,
            queued: Vec::new(),
        };
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.sockets[id as usize] = Some(socket);
                id
            }
            None => {
                self.sockets.push(Some(socket));
                (self.sockets.len() - 1) as u32
            }
        };
        self.slots[i] = Some(id);
        let target: *const SockAddr = &*self.sockaddr;
        let entry = opcode::Connect::new(Fd(raw), target.cast(), self.sockaddr_len)
            .build()
            .user_data(user_data(Op::Connect, id));
        self.push(&entry)
    }

    fn close(&mut self, i: usize) {
        let Some(id) = self.slots[i].take() else { return };
        let Some(socket) = self.socket(id) else { return };
        socket.slot = None;
        if socket.in_flight > 0 {
            // Every operation of this socket completes (cancelled or done) before it is dropped (invariant 4).
            let entry = opcode::AsyncCancel2::new(CancelBuilder::fd(Fd(socket.fd.as_raw_fd())).all())
                .build()
                .user_data(user_data(Op::Cancel, id));
            let _ = self.push(&entry);
        }
        self.release_if_done(id);
    }

    fn write(&mut self, i: usize, bytes: &[u8]) -> io::Result<usize> {
        let Some(id) = self.slots[i] else { return Err(io::ErrorKind::NotConnected.into()) };
        let Some(socket) = self.socket(id) else { return Err(io::ErrorKind::NotConnected.into()) };
        if !socket.connected {
            return Err(io::ErrorKind::NotConnected.into());
        }
        if socket.send_in_flight {
            socket.queued.extend_from_slice(bytes);
        } else {
            socket.sending.clear();
            socket.sending.extend_from_slice(bytes);
            socket.sent = 0;
            self.send(id)?;
        }
        Ok(bytes.len())
    }

    fn wait(&mut self, wake_at: Instant, send_at: Option<Instant>, on_event: &mut OnEvent<'_>) -> io::Result<()> {
        for id in std::mem::take(&mut self.rearm) {
            if self.socket(id).is_some_and(|s| s.connected) {
                self.arm_recv(id)?;
            }
        }
        let until = send_at.map_or(wake_at, |at| at.min(wake_at));
        self.enter(until.saturating_duration_since(Instant::now()))?;
        loop {
            let next = self.ring.completion().next();
            let Some(cqe) = next else { break };
            self.complete(&cqe, on_event)?;
        }
        self.bufs.publish();
        Ok(())
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // Cancel everything and wait for every operation to complete, so the kernel writes no buffer after
        // this (invariant 1). Whatever is still in flight after DRAIN_FOR keeps its memory (leaked).
        let cancel = opcode::AsyncCancel2::new(CancelBuilder::any()).build().user_data(user_data(Op::Cancel, 0));
        let _ = self.push(&cancel);
        for slot in &mut self.slots {
            if let Some(id) = slot.take()
                && let Some(Some(socket)) = self.sockets.get_mut(id as usize)
            {
                socket.slot = None;
            }
        }
        let deadline = Instant::now() + DRAIN_FOR;
        let mut ignore = |_: usize, _: Event<'_>| false;
        while self.sockets.iter().flatten().any(|s| s.in_flight > 0) && Instant::now() < deadline {
            if self.enter(Duration::from_millis(10)).is_err() {
                break;
            }
            loop {
                let next = self.ring.completion().next();
                let Some(cqe) = next else { break };
                let _ = self.complete(&cqe, &mut ignore);
            }
        }
        if self.sockets.iter().flatten().all(|s| s.in_flight == 0)
            && self.ring.submitter().unregister_buf_ring(GROUP).is_ok()
        {
            self.bufs.registered = false;
        } else {
            // Sockets with operations in flight keep their send buffers too.
            for socket in self.sockets.drain(..).flatten() {
                std::mem::forget(socket);
            }
        }
    }
}
