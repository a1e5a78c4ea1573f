use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// Binds `count` listeners on one address with SO_REUSEPORT, one per worker, so the kernel balances
/// connections across workers without a shared accept lock. Port 0 is resolved by the first bind and reused
/// by the rest, so tests can bind `127.0.0.1:0`.
pub fn bind_reuseport(addr: SocketAddr, count: usize) -> io::Result<Vec<TcpListener>> {
    let first = bind_one(addr)?;
    let actual = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..count.max(1) {
        listeners.push(bind_one(actual)?);
    }
    Ok(listeners)
}

fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket.into())
}
