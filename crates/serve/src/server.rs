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
use tokio_rustls::TlsAcceptor;
use tower::Service;

use crate::connection::{connection, http1_builder};
use crate::{Limits, Request, Response, ShutdownSignal, Tls};

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
    tls: Option<Arc<Tls>>,
}

impl Server {
    /// Starts one worker thread per listener. `make_service` runs once on each worker thread, inside that
    /// worker's runtime, so whatever it spawns (connection pools, Redis connections) lives on that worker.
    /// The service need not be `Send`: each worker drives its connections on its own thread. With
    /// [`Limits::tls`] set, the files are loaded here and a bad one fails `start`.
    pub fn start<F, S>(listeners: Vec<std::net::TcpListener>, limits: Limits, make_service: F) -> io::Result<Server>
    where
        F: Fn() -> S + Send + Sync + 'static,
        S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
        S::Future: 'static,
    {
        let tls = match &limits.tls {
            Some(settings) => Some(Arc::new(
                Tls::load(settings).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
            )),
            None => None,
        };
        Server::start_with(listeners, limits, tls, make_service)
    }

    fn start_with<F, S>(
        listeners: Vec<std::net::TcpListener>,
        limits: Limits,
        tls: Option<Arc<Tls>>,
        make_service: F,
    ) -> io::Result<Server>
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
            let acceptor = tls.as_ref().map(|tls| tls.acceptor());
            let thread = std::thread::Builder::new().name(format!("worker-{index}")).spawn(move || {
                let local = tokio::task::LocalSet::new();
                local.block_on(&runtime, async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => worker(listener, limits, acceptor, make_service(), stopped).await,
                        Err(e) => tracing::error!(error = %e, "worker could not register its listener"),
                    }
                });
                // Dropping the LocalSet and runtime here cuts whatever outlived the shutdown deadline.
            })?;
            threads.push(thread);
        }
        Ok(Server { addr, stop, threads, tls })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Reads the TLS files again and serves the new certificate to every handshake from now on; connections
    /// already open keep theirs. On an error the old certificate stays. Without TLS there is nothing to do.
    pub fn reload_tls(&self) -> Result<(), crate::TlsError> {
        match &self.tls {
            Some(tls) => tls.reload(),
            None => Ok(()),
        }
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

/// The tail of every server's `main`: loads the TLS files if any (a bad one: one line and exit 64, before
/// binding), installs the SIGTERM/SIGINT handlers (and SIGHUP's, which reloads the certificate, with TLS),
/// binds `addr` with one listener per worker, prints `banner(url)` on stdout once listening (`url` is
/// `http://` or `https://` and the bound address), and serves until a signal. Any other failure prints
/// `<name>: …` on stderr and exits with status 1.
pub fn serve_until_signal<F, S>(
    name: &str,
    addr: SocketAddr,
    limits: Limits,
    banner: impl FnOnce(String) -> String,
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
    let tls = limits
        .tls
        .as_ref()
        .map(|settings| Arc::new(Tls::load(settings).unwrap_or_else(|e| crate::exit_config(&e.to_string()))));
    // Before the banner: a SIGTERM right after readiness is announced must be graceful, not the default kill.
    let signals =
        ShutdownSignal::install(tls.is_some()).unwrap_or_else(|e| fail(format!("cannot install signal handlers: {e}")));
    let listeners =
        crate::bind_reuseport(addr, limits.workers).unwrap_or_else(|e| fail(format!("cannot listen on {addr}: {e}")));
    let scheme = limits.scheme();
    let server = Server::start_with(listeners, limits, tls, make_service)
        .unwrap_or_else(|e| fail(format!("server failed: {e}")));
    println!("{}", banner(format!("{scheme}://{}", server.local_addr())));
    signals.wait(|| match server.reload_tls() {
        Ok(()) => tracing::info!("SIGHUP: certificate reloaded"),
        Err(e) => tracing::error!(error = %e, "SIGHUP: certificate not reloaded, the old one stays"),
    });
    server.shutdown();
}

async fn worker<S>(
    listener: tokio::net::TcpListener,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    app: S,
    mut stopped: watch::Receiver<bool>,
) where
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
                    let tls = tls.clone();
                    tokio::task::spawn_local(async move {
                        let (http, limits) = &*setup;
                        // The handshake, like a request head, must be done within the header timeout of the accept.
                        let deadline = tokio::time::Instant::now() + limits.header_timeout;
                        if !first_byte(&stream, limits.keep_alive_timeout, &mut stop).await {
                            return;
                        }
                        let served = match tls {
                            None => Box::pin(watcher.watch(connection(http, stream, peer, limits, app))).await,
                            Some(acceptor) => {
                                let Some(stream) = handshake(&acceptor, stream, deadline, &mut stop).await else {
                                    return;
                                };
                                Box::pin(watcher.watch(connection(http, stream, peer, limits, app))).await
                            }
                        };
                        if let Err(e) = served {
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

/// The TLS handshake of a new connection, cut at `deadline` or at shutdown. None: it failed (plaintext sent to
/// the TLS port, an alert, garbage), ran out of time, or the server is stopping; the connection is dropped.
async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    deadline: tokio::time::Instant,
    stopped: &mut watch::Receiver<bool>,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    tokio::select! {
        biased;
        _ = stopped.changed() => None,
        outcome = tokio::time::timeout_at(deadline, acceptor.accept(stream)) => match outcome {
            Ok(Ok(stream)) => Some(stream),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!("TLS handshake not done within the header timeout");
                None
            }
        },
    }
}
