use std::io;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGTERM and SIGINT handlers, and SIGHUP's when the server has something to reload. Install them before the
/// server announces itself: a signal that arrives right after the "listening" line then stops the server
/// gracefully instead of killing it with the default action.
pub struct ShutdownSignal {
    runtime: tokio::runtime::Runtime,
    term: Signal,
    int: Signal,
    hangup: Option<Signal>,
}

impl ShutdownSignal {
    /// Installs the handlers (on a small runtime of their own, owned by the calling thread). With `reload`,
    /// SIGHUP is caught too (see [`ShutdownSignal::wait`]); without, it keeps its default action.
    pub fn install(reload: bool) -> io::Result<ShutdownSignal> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (term, int, hangup) = {
            let _context = runtime.enter();
            let hangup = if reload { Some(signal(SignalKind::hangup())?) } else { None };
            (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?, hangup)
        };
        Ok(ShutdownSignal { runtime, term, int, hangup })
    }

    /// Blocks until SIGTERM or SIGINT, calling `on_hangup` for each SIGHUP meanwhile.
    pub fn wait(self, mut on_hangup: impl FnMut()) {
        let ShutdownSignal { runtime, mut term, mut int, mut hangup } = self;
        runtime.block_on(async {
            loop {
                tokio::select! {
                    _ = term.recv() => break tracing::info!("SIGTERM received, shutting down"),
                    _ = int.recv() => break tracing::info!("SIGINT received, shutting down"),
                    Some(()) = async { hangup.as_mut()?.recv().await } => on_hangup(),
                }
            }
        });
    }
}
