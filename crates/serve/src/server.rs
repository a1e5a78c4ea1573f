use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::server::conn::{http1, http2};
use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::Service;

use crate::connection::{http1_builder, parts};
use crate::http2::{LocalExec, http2_builder};
use crate::serving::{Live, Protocol, Serving};
use crate::{Limits, Request, Response, ShutdownSignal, Tls};

/// What a client that speaks HTTP/2 by prior knowledge sends first (RFC 9113 §3.4). No HTTP/1.1 request starts
/// with it: `PRI` is a method reserved so that none does.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Every connection of a worker is set up from this: hyper's builders and the limits.
struct Setup {
    http1: http1::Builder,
    /// None: HTTP/2 is off.
    http2: Option<http2::Builder<LocalExec>>,
    limits: Limits,
}

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
                Tls::load(settings, limits.http2.is_some())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
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
        .map(|settings| {
            Tls::load(settings, limits.http2.is_some()).unwrap_or_else(|e| crate::exit_config(&e.to_string()))
        })
        .map(Arc::new);
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
    let http2 = limits.http2.as_ref().map(|h2| http2_builder(&limits, h2));
    let setup = Rc::new(Setup { http1: http1_builder(&limits), http2, limits });
    let live = Live::default();
    loop {
        tokio::select! {
            biased;
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let (setup, app, live, mut stop) = (setup.clone(), app.clone(), live.clone(), stopped.clone());
                    let tls = tls.clone();
                    tokio::task::spawn_local(async move {
                        let limits = &setup.limits;
                        // The handshake, like a request head, must be done within the header timeout of the accept.
                        let deadline = tokio::time::Instant::now() + limits.header_timeout;
                        // In cleartext the first bytes say which protocol; with TLS, ALPN does.
                        let sniff = tls.is_none() && setup.http2.is_some();
                        let Some(h2c) = first_bytes(&stream, limits.keep_alive_timeout, sniff, &mut stop).await else {
                            return;
                        };
                        let served = match tls {
                            None => serve(&setup, stream, peer, app, h2c, &live).await,
                            Some(acceptor) => {
                                let Some(stream) = handshake(&acceptor, stream, deadline, &mut stop).await else {
                                    return;
                                };
                                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                                serve(&setup, stream, peer, app, h2, &live).await
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
    live.stop();
    if tokio::time::timeout(setup.limits.shutdown_timeout, live.drained()).await.is_err() {
        tracing::warn!("shutdown deadline passed with connections still open; closing them");
    }
}

/// Serves one connection (after the TLS handshake, if any) in HTTP/2 when `h2` and HTTP/2 is on, in HTTP/1.1
/// otherwise, until it ends or the server's shutdown has closed it.
async fn serve<I, S>(setup: &Setup, io: I, peer: SocketAddr, app: S, h2: bool, live: &Live) -> Result<(), hyper::Error>
where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
    S::Future: 'static,
{
    let protocol = match (&setup.http2, h2) {
        (Some(http), true) => {
            let (io, service, handle) = parts(io, peer, &setup.limits, app, true);
            Protocol::Http2 { conn: http.serve_connection(io, service), handle }
        }
        _ => {
            let (io, service, _) = parts(io, peer, &setup.limits, app, false);
            Protocol::Http1 { conn: setup.http1.serve_connection(io, service) }
        }
    };
    Box::pin(Serving::new(protocol, live)).await
}

/// Waits for a new connection's first bytes (or its end) before hyper gets it, so a connection that sends
/// nothing costs its socket and this small task rather than hyper's state and 8 KiB read buffer (about 11 KiB
/// in all). With `sniff` (cleartext, HTTP/2 on) it reads as far as it takes to tell the HTTP/2 preface from an
/// HTTP/1.1 request: Some(true) for the preface, Some(false) for anything else (or the end of the stream, or an
/// error, which hyper then meets). None when the keep-alive deadline or the shutdown comes first: the
/// connection is dropped.
async fn first_bytes(
    stream: &TcpStream,
    within: Duration,
    sniff: bool,
    stopped: &mut watch::Receiver<bool>,
) -> Option<bool> {
    let deadline = tokio::time::sleep(within);
    tokio::pin!(deadline);
    let mut probe = [0u8; PREFACE.len()];
    let wanted = if sniff { PREFACE.len() } else { 1 };
    loop {
        // A peek through tokio's readiness: usually the request is already there (clients write it right after
        // connecting) and this is the only syscall, whatever the protocol. Would-block clears the readiness
        // tokio assumes for an accepted stream, so `readable` below waits for the kernel's event instead of
        // returning at once; a preface only partly in is reported as would-block for the same reason.
        let peeked = stream.try_io(Interest::READABLE, || {
            let (n, _) = rustix::net::recv(stream, &mut probe[..wanted], rustix::net::RecvFlags::PEEK)?;
            let seen = &probe[..n];
            if sniff && !seen.is_empty() && PREFACE.starts_with(seen) {
                return if n == PREFACE.len() { Ok(true) } else { Err(io::ErrorKind::WouldBlock.into()) };
            }
            Ok(false)
        });
        match peeked {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Ok(h2c) => return Some(h2c),
            // An error: hyper meets it too, and acts.
            Err(_) => return Some(false),
        }
        tokio::select! {
            biased;
            _ = stopped.changed() => return None,
            ready = stream.readable() => if ready.is_err() { return Some(false) },
            () = &mut deadline => return None,
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
