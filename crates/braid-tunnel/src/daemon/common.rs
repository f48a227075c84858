//! What every part of the daemons uses: the clock, the error, the signal that stops them.

use std::time::Duration;

/// A daemon that could not start or had to stop; the message is one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DaemonError(pub String);

impl From<super::config::ConfigError> for DaemonError {
    fn from(e: super::config::ConfigError) -> Self {
        DaemonError(e.0)
    }
}

/// The daemon's clock: microseconds since the daemon started, as the core counts time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock(std::time::Instant);

impl Clock {
    pub fn start() -> Clock {
        Clock(std::time::Instant::now())
    }

    pub fn now(&self) -> braid_core::Instant {
        braid_core::Instant::from_micros(self.0.elapsed().as_micros() as u64)
    }

    /// The tokio instant of a core instant.
    pub fn tokio(&self, t: braid_core::Instant) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.0 + t.since_epoch())
    }
}

/// How often the status snapshot is refreshed.
pub(crate) const STATUS_EVERY: Duration = Duration::from_millis(250);

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    match term {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
