use std::io;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGTERM and SIGINT handlers. Install them before the server announces itself: a signal that arrives right
/// after the "listening" line then stops the server gracefully instead of killing it with the default action.
pub struct ShutdownSignal {
    runtime: tokio::runtime::Runtime,
    term: Signal,
    int: Signal,
}

impl ShutdownSignal {
    /// Installs the handlers (on a small runtime of their own, owned by the calling thread).
    pub fn install() -> io::Result<ShutdownSignal> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (term, int) = {
            let _context = runtime.enter();
            (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?)
        };
        Ok(ShutdownSignal { runtime, term, int })
    }

    /// Blocks until SIGTERM or SIGINT.
    pub fn wait(self) {
        let ShutdownSignal { runtime, mut term, mut int } = self;
        runtime.block_on(async {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
                _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
            }
        });
    }
}
