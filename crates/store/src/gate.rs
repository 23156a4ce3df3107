//! The run's write [`Gate`]: what a backend checks at the last instant before a write
//! takes effect, and who hears of it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use landing_error::{Error, Result};

/// The instant before which a run's writes must start: its lease's deadline (see
/// the engine's `lease`). The lease moves it on every renewal; unset, nothing is checked.
#[derive(Debug, Clone, Default)]
pub struct Deadline(Arc<std::sync::Mutex<Option<Instant>>>);

impl Deadline {
    pub fn set(&self, at: Option<Instant>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = at;
    }

    pub fn get(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True once the deadline is set and past.
    pub fn passed(&self) -> bool {
        self.get().is_some_and(|d| Instant::now() >= d)
    }
}

/// How long a local write waits for a file lock held by another process unless told
/// otherwise: far above a healthy holder's hold (one rename and fsync).
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(5);

/// What a backend tells the run's [`WriteObserver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteEvent<'a> {
    /// The last instant before the write of `key` (relative to the store's root)
    /// takes effect, before the gate checks the deadline once more.
    Before { key: &'a str },
    /// Right after part `number` of a multipart staging upload was acknowledged.
    PartDone { number: u32 },
}

/// Who hears of a run's writes from inside a backend: the crash and freeze points of
/// drills and tests, handed down by the engine in the run's [`Gate`]. The store
/// knows nothing of what they do; a normal run has no observer.
pub type WriteObserver = Arc<dyn Fn(WriteEvent<'_>) + Send + Sync>;

/// What a backend checks at the last instant before a write reaches readers, the
/// checkpoint or the lease (on a local lake: while it holds the file lock; on S3: right
/// before the request). A run that was frozen (SIGSTOP, a paused VM, a stalled mount)
/// past its lease's deadline then writes nothing when it resumes. Also how long a
/// local file lock is waited for before the write answers busy, so a frozen holder
/// never blocks another run, and the run's [`WriteObserver`], if any.
#[derive(Clone)]
pub struct Gate {
    pub deadline: Deadline,
    pub lock_wait: Duration,
    observer: Option<WriteObserver>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("deadline", &self.deadline)
            .field("lock_wait", &self.lock_wait)
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

impl Default for Gate {
    fn default() -> Self {
        Gate::new(Deadline::default(), DEFAULT_LOCK_WAIT)
    }
}

impl Gate {
    pub fn new(deadline: Deadline, lock_wait: Duration) -> Self {
        Gate {
            deadline,
            lock_wait,
            observer: None,
        }
    }

    /// The same gate, its writes told to `observer` (drills and tests).
    pub fn observed_by(mut self, observer: Option<WriteObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// Called by a backend right before the write of `key` (relative to the store's
    /// root) at `location` takes effect. `Conflict` once the deadline has passed.
    pub fn before_write(&self, key: &str, location: &str) -> Result<()> {
        if let Some(o) = &self.observer {
            o(WriteEvent::Before { key });
        }
        if self.deadline.passed() {
            return Err(Error::Conflict(format!(
                "conflict: this run's lease deadline passed before its write to {location} (the run was stopped or stalled); nothing was written. Rerun to reconcile"
            )));
        }
        Ok(())
    }

    /// Called by a backend right before a write to the run's staging: `Conflict` once
    /// the deadline has passed, so a run that stalled past it adds nothing to
    /// staging after another run took its lease and swept (no freeze points here).
    pub fn before_staging(&self, location: &str) -> Result<()> {
        if self.deadline.passed() {
            return Err(Error::Conflict(format!(
                "conflict: this run's lease deadline passed before its staging write to {location} (the run was stopped or stalled); nothing was written. Rerun to reconcile"
            )));
        }
        Ok(())
    }

    /// Called by a backend right after part `number` of a multipart staging upload
    /// was acknowledged.
    pub fn after_part(&self, number: u32) {
        if let Some(o) = &self.observer {
            o(WriteEvent::PartDone { number });
        }
    }
}
