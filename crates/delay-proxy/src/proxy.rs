//! A running proxy: its event-loop threads, and the handle that stops and joins them.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use mio::Waker;

use crate::report::Report;
use crate::settings::Settings;
use crate::worker::Worker;

/// Started by [`spawn`]; stops (closing every connection) on [`Proxy::shutdown`] or when dropped.
#[derive(Debug)]
pub struct Proxy {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    wakers: Vec<Arc<Waker>>,
    threads: Vec<JoinHandle<Report>>,
}

/// Serves `listener` on `settings.threads` event-loop threads (each polls its own clone of the listener and
/// keeps the connections it accepted), each connection proxied to `settings.upstream` with `settings.rtt`
/// added. Errors only when the threads' pollers cannot be set up.
pub fn spawn(listener: TcpListener, settings: Settings) -> io::Result<Proxy> {
    let local_addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut proxy = Proxy { local_addr, stop: stop.clone(), wakers: Vec::new(), threads: Vec::new() };
    for n in 0..settings.threads.max(1) {
        // On error, `proxy` is dropped, which stops the threads already started.
        let (worker, waker) = Worker::new(listener.try_clone()?, settings.clone(), stop.clone())?;
        let thread = std::thread::Builder::new().name(format!("delay-proxy-{n}")).spawn(move || worker.run())?;
        proxy.wakers.push(waker);
        proxy.threads.push(thread);
    }
    Ok(proxy)
}

impl Proxy {
    /// Where clients connect.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Asks every thread to stop; [`Proxy::join`] waits for them.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        for waker in &self.wakers {
            let _ = waker.wake();
        }
    }

    /// Stops the threads, closes every connection still open, and returns what was carried.
    pub fn join(mut self) -> Report {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Report {
        self.shutdown();
        let mut report = Report::default();
        for thread in self.threads.drain(..) {
            match thread.join() {
                Ok(part) => report.merge(part),
                Err(_) => eprintln!("delay-proxy: a worker thread panicked; its connections are not reported"),
            }
        }
        report
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}
