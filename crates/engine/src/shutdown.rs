//! Shutdown: one cancellation token per process, cancelled by the first SIGTERM (a
//! pod being stopped) or SIGINT. `main` installs the handlers once, before any work,
//! and hands the token down; every wait that may be cut short selects on it. The
//! token carries which signal it was: the exit code is 128 + its number.

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

use crate::summary::Signal;

/// The process's shutdown token. The default one is never cancelled by a signal
/// (commands without handlers, tests).
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
    /// Set before the token is cancelled, so a cancelled token always has a signal.
    signal: Arc<OnceLock<Signal>>,
}

impl Shutdown {
    /// Listen for SIGTERM and SIGINT for the rest of the process; the first one
    /// cancels the token, later ones are ignored (the run is already winding down).
    /// Call once, inside the runtime, before anything that may need to stop cleanly.
    pub fn listen() -> std::io::Result<Shutdown> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let shutdown = Shutdown::default();
        let first = shutdown.clone();
        tokio::spawn(async move {
            let got = tokio::select! {
                _ = term.recv() => Signal::Term,
                _ = int.recv() => Signal::Int,
            };
            first.cancel(got);
        });
        Ok(shutdown)
    }

    /// Stop as `signal` would.
    pub fn cancel(&self, signal: Signal) {
        // The first signal wins; the token is cancelled only once it is recorded.
        let _ = self.signal.set(signal);
        self.token.cancel();
    }

    /// The signal that arrived, if one did; never waits.
    pub fn signal(&self) -> Option<Signal> {
        self.signal.get().copied()
    }

    /// Wait for the signal.
    pub async fn signalled(&self) -> Signal {
        self.token.cancelled().await;
        // `cancel` records the signal before it cancels the token.
        self.signal.get().copied().unwrap_or(Signal::Term)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_signal_is_the_one_reported() {
        let s = Shutdown::default();
        assert_eq!(s.signal(), None);
        let clone = s.clone();
        let waiter = tokio::spawn(async move { clone.signalled().await });
        s.cancel(Signal::Int);
        s.cancel(Signal::Term);
        assert_eq!(s.signal(), Some(Signal::Int));
        assert_eq!(waiter.await.unwrap(), Signal::Int);
    }
}
