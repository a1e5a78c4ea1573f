/// Resolves on the first SIGTERM or SIGINT. If the handlers cannot be installed the process cannot be stopped
/// gracefully; that is logged and the future then only resolves on Ctrl-C via the fallback.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
                _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
            }
        }
        _ => {
            tracing::warn!("could not install signal handlers; falling back to ctrl_c");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
