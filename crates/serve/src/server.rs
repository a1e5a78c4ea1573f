use std::convert::Infallible;
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tower::Service;

use crate::connection::{connection, http1_builder};
use crate::{Limits, Request, Response, ShutdownSignal};

/// A running server: one thread per listener. Dropping it shuts down gracefully, like [`Server::shutdown`].
///
/// There is one way to run a server: bind the listeners (one per worker, [`crate::bind_reuseport`]), hand
/// them to [`Server::start`] with the limits and the per-worker service factory, and stop the returned
/// [`Server`] with [`Server::shutdown`] (or drop it) when the shutdown signal comes. Tests do exactly that on
/// 127.0.0.1:0. A binary's `main` ends in [`serve_until_signal`], the same steps with SIGTERM/SIGINT as the
/// signal and the listening line in between (tokio's mini-redis shape: a thin `main`, the library owns the
/// listeners and the shutdown).
pub struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Starts one worker thread per listener. `make_service` runs once on each worker thread, inside that
    /// worker's runtime, so whatever it spawns (connection pools, Redis connections) lives on that worker.
    /// The service need not be `Send`: each worker drives its connections on its own thread.
    pub fn start<F, S>(listeners: Vec<std::net::TcpListener>, limits: Limits, make_service: F) -> io::Result<Server>
    where
        F: Fn() -> S + Send + Sync + 'static,
        S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
        S::Future: 'static,
    {
        let addr = listeners
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no listener"))?
            .local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let make_service = Arc::new(make_service);
        let mut threads = Vec::with_capacity(listeners.len());
        for (index, listener) in listeners.into_iter().enumerate() {
            // Built here, not in the thread, so a runtime that cannot start fails `start` itself.
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let (limits, make_service, stopped) = (limits.clone(), make_service.clone(), stopped.clone());
            let thread = std::thread::Builder::new().name(format!("worker-{index}")).spawn(move || {
                let local = tokio::task::LocalSet::new();
                local.block_on(&runtime, async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => worker(listener, limits, make_service(), stopped).await,
                        Err(e) => tracing::error!(error = %e, "worker could not register its listener"),
                    }
                });
                // Dropping the LocalSet and runtime here cuts whatever outlived the shutdown deadline.
            })?;
            threads.push(thread);
        }
        Ok(Server { addr, stop, threads })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets in-flight requests finish up to the shutdown timeout, then cuts the rest.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        let _ = self.stop.send(true);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The tail of every server's `main`: installs the SIGTERM/SIGINT handlers, binds `addr` with one listener per
/// worker, prints `banner(bound address)` on stdout once listening, and serves until a signal. A failure prints
/// `<name>: …` on stderr and exits with status 1.
pub fn serve_until_signal<F, S>(
    name: &str,
    addr: SocketAddr,
    limits: Limits,
    banner: impl FnOnce(SocketAddr) -> String,
    make_service: F,
) where
    F: Fn() -> S + Send + Sync + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
    S::Future: 'static,
{
    let fail = |message: String| -> ! {
        eprintln!("{name}: {message}");
        std::process::exit(1)
    };
    // Before the banner: a SIGTERM right after readiness is announced must be graceful, not the default kill.
    let signals = ShutdownSignal::install().unwrap_or_else(|e| fail(format!("cannot install signal handlers: {e}")));
    let listeners =
        crate::bind_reuseport(addr, limits.workers).unwrap_or_else(|e| fail(format!("cannot listen on {addr}: {e}")));
    let server = Server::start(listeners, limits, make_service).unwrap_or_else(|e| fail(format!("server failed: {e}")));
    println!("{}", banner(server.local_addr()));
    signals.wait();
    server.shutdown();
}

async fn worker<S>(listener: tokio::net::TcpListener, limits: Limits, app: S, mut stopped: watch::Receiver<bool>)
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
    S::Future: 'static,
{
    // Shared by the worker's connections, so a connection waiting for its first byte holds one pointer to it.
    let setup = Rc::new((http1_builder(&limits), limits));
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            biased;
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let (setup, app, watcher, mut stop) = (setup.clone(), app.clone(), graceful.watcher(), stopped.clone());
                    tokio::task::spawn_local(async move {
                        let (http, limits) = &*setup;
                        if !first_byte(&stream, limits.keep_alive_timeout, &mut stop).await {
                            return;
                        }
                        let connection = Box::pin(watcher.watch(connection(http, stream, peer, limits, app)));
                        if let Err(e) = connection.await {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                    });
                }
                Err(e) => {
                    // EMFILE/ENFILE and friends: back off instead of spinning on a full fd table.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
    drop(listener);
    let (_, limits) = &*setup;
    if tokio::time::timeout(limits.shutdown_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("shutdown deadline passed with connections still open; closing them");
    }
}

/// Waits for a new connection's first byte (or its end) before hyper gets it, so a connection that sends
/// nothing costs its socket and this small task rather than hyper's state and 8 KiB read buffer (about 11 KiB
/// in all). False when the keep-alive deadline or the shutdown comes first: the connection is dropped.
async fn first_byte(stream: &TcpStream, within: Duration, stopped: &mut watch::Receiver<bool>) -> bool {
    let deadline = tokio::time::sleep(within);
    tokio::pin!(deadline);
    let mut probe = [MaybeUninit::<u8>::uninit()];
    loop {
        // A peek through tokio's readiness: usually the request is already there (clients write it right after
        // connecting) and this is the only syscall. Would-block clears the readiness tokio assumes for an
        // accepted stream, so `readable` below waits for the kernel's event instead of returning at once.
        let peeked = stream.try_io(Interest::READABLE, || socket2::SockRef::from(stream).peek(&mut probe));
        match peeked {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // Data, end of stream or an error: hyper reads it and acts.
            _ => return true,
        }
        tokio::select! {
            biased;
            _ = stopped.changed() => return false,
            ready = stream.readable() => if ready.is_err() { return true },
            () = &mut deadline => return false,
        }
    }
}
