//! Test and drill hooks: named instants at which a run dies ([`CrashPoint`]), waits
//! ([`PausePoint`]) or freezes itself with SIGSTOP inside a write ([`FreezePoint`]).
//! The command line parses them from hidden flags; the drill and the tests hand them
//! to the pipeline as [`Hooks`], and the pipeline hands them to the store inside its
//! [`crate::store::Gate`] (freezes inside a write, a crash after an S3 part), so no
//! settings struct carries them and a normal run never looks at them twice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The crash points, from the line pass (`landing-pass`), which fires some of them.
pub use landing_pass::hook::CrashPoint;
use landing_pass::hook::PassHooks;

use crate::progress::Terminal;
use crate::store::{WriteEvent, WriteObserver};

/// The hooks of one run; `Hooks::default()` is a normal run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hooks {
    pub crash_at: Option<CrashPoint>,
    pub pause_at: Option<PausePoint>,
    pub freeze_at: Option<FreezePoint>,
    /// Spill the dedup index every this many distinct events (tests of the spill).
    pub spill_every: Option<usize>,
    /// Keep only this many bits of each id digest, so distinct ids share digests.
    pub id_digest_bits: Option<u32>,
    /// After a spill, hold the lines back for a replay (`true`) or stage them as they
    /// come (`false`), whatever the copies seen before the spill suggest.
    pub spill_replay: Option<bool>,
    /// After a spill, the fingerprint table's room in events (default: twice
    /// `spill_every` under that hook; 0 holds every line from the spill on).
    pub spill_table: Option<usize>,
    /// Keep only this many bits of the table's canonical fingerprint, so it takes
    /// distinct events for copies and the merge must catch it.
    pub fingerprint_bits: Option<u32>,
}

impl Hooks {
    /// Crash drills: die here if this is the configured crash point.
    pub fn crash(&self, point: CrashPoint) {
        if self.crash_at == Some(point) {
            point.fire();
        }
    }

    /// The part of them the line pass (`landing-pass`) takes: the crash point and
    /// the spill's test switches.
    pub fn pass(self) -> PassHooks {
        PassHooks {
            crash_at: self.crash_at,
            spill_every: self.spill_every,
            id_digest_bits: self.id_digest_bits,
            spill_replay: self.spill_replay,
            spill_table: self.spill_table,
            fingerprint_bits: self.fingerprint_bits,
        }
    }

    /// Tests: wait here if this is the configured pause point, saying so above the
    /// bars of `terminal` (they go on drawing while the run waits).
    pub async fn pause(&self, point: PausePoint, terminal: &Terminal) {
        if self.pause_at == Some(point) {
            point.wait(terminal).await;
        }
    }

    /// The hooks that fire inside the store's writes (a freeze point, a crash after
    /// an S3 part), as the observer the run's [`crate::store::Gate`] carries; `None`
    /// when there are none. A freeze is said above the bars of `terminal`.
    pub fn write_observer(self, terminal: &Terminal) -> Option<WriteObserver> {
        let in_writes =
            self.freeze_at.is_some() || matches!(self.crash_at, Some(CrashPoint::AfterPart(_)));
        in_writes.then(|| {
            let hooks = WriteHooks {
                hooks: self,
                frozen: AtomicBool::new(false),
                terminal: terminal.clone(),
            };
            Arc::new(move |event: WriteEvent<'_>| hooks.heard(event)) as WriteObserver
        })
    }
}

/// [`Hooks`] as the closure a store calls ([`WriteObserver`]).
#[derive(Debug)]
struct WriteHooks {
    hooks: Hooks,
    /// A run freezes once: the write it resumes into must go on.
    frozen: AtomicBool,
    terminal: Terminal,
}

impl WriteHooks {
    fn heard(&self, event: WriteEvent<'_>) {
        match event {
            WriteEvent::Before { key } => {
                let Some(point) = self.hooks.freeze_at else {
                    return;
                };
                if FreezePoint::of_key(key) == Some(point)
                    && !self.frozen.swap(true, Ordering::SeqCst)
                {
                    self.terminal.say(&format!("landing: frozen at {point:?}"));
                    point.fire();
                }
            }
            WriteEvent::PartDone { number } => self.hooks.crash(CrashPoint::AfterPart(number)),
        }
    }
}

/// Test switch: a write during which the run stops itself with SIGSTOP, as a paused
/// VM, a stalled NFS mount or `kill -STOP` would stop it. The store fires it at the
/// last instant before the write (on a local lake, holding the file lock), before it
/// checks the lease's deadline once more. Which write each one is:
/// [`FreezePoint::describe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreezePoint {
    LeaseWrite,
    CheckpointWrite,
    PromoteData,
    PromoteQuarantine,
    LogWrite,
}

impl FreezePoint {
    /// Every freeze point, in the order `--freeze-at` lists them.
    pub const ALL: [FreezePoint; 5] = [
        FreezePoint::LeaseWrite,
        FreezePoint::CheckpointWrite,
        FreezePoint::PromoteData,
        FreezePoint::PromoteQuarantine,
        FreezePoint::LogWrite,
    ];

    /// The name `--freeze-at` takes.
    pub fn name(self) -> &'static str {
        match self {
            FreezePoint::LeaseWrite => "lease-write",
            FreezePoint::CheckpointWrite => "checkpoint-write",
            FreezePoint::PromoteData => "promote-data",
            FreezePoint::PromoteQuarantine => "promote-quarantine",
            FreezePoint::LogWrite => "log-write",
        }
    }

    /// The write it freezes in, as `--freeze-at` describes it beside its name.
    pub fn describe(self) -> &'static str {
        match self {
            FreezePoint::LeaseWrite => "The lease's first write (its create or takeover)",
            FreezePoint::CheckpointWrite => "The checkpoint's write",
            FreezePoint::PromoteData => "The promotion of the published data",
            FreezePoint::PromoteQuarantine => "The promotion of the quarantine",
            FreezePoint::LogWrite => "The commit log's entry (or its hint)",
        }
    }

    /// The freeze point of a write to `key` (relative to the lake), by its zone.
    pub fn of_key(key: &str) -> Option<FreezePoint> {
        let zone = key.split('/').next()?;
        if zone == crate::layout::RAW && key.split('/').nth(2) == Some(crate::layout::LOG_FOLDER) {
            return Some(FreezePoint::LogWrite);
        }
        Some(match zone {
            crate::layout::LOCKS => FreezePoint::LeaseWrite,
            crate::layout::CHECKPOINTS => FreezePoint::CheckpointWrite,
            crate::layout::RAW => FreezePoint::PromoteData,
            crate::layout::QUARANTINE => FreezePoint::PromoteQuarantine,
            _ => return None,
        })
    }

    /// Stop this process (SIGSTOP cannot be caught); it goes on when sent SIGCONT.
    pub fn fire(self) {
        // raise(3), not kill(getpid()): a signal sent to the process may be taken by
        // another thread while this one runs on into the write; one raised on this
        // thread is delivered before raise returns, and SIGSTOP stops every thread.
        // SAFETY: raise(3) with a signal that only stops the process.
        unsafe {
            libc::raise(libc::SIGSTOP);
        }
    }
}

/// Test switch: where a run stops and waits for a line on stdin, so a test can make
/// another run overtake it at an exact point without sleeping. Where each one is:
/// [`PausePoint::describe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PausePoint {
    MidStream,
    BeforePromote,
    AfterStaging,
    BeforeReplay,
}

impl PausePoint {
    /// Every pause point, in the order `--pause-at` lists them.
    pub const ALL: [PausePoint; 4] = [
        PausePoint::MidStream,
        PausePoint::BeforePromote,
        PausePoint::AfterStaging,
        PausePoint::BeforeReplay,
    ];

    /// The name `--pause-at` takes.
    pub fn name(self) -> &'static str {
        match self {
            PausePoint::MidStream => "mid-stream",
            PausePoint::BeforePromote => "before-promote",
            PausePoint::AfterStaging => "after-staging",
            PausePoint::BeforeReplay => "before-replay",
        }
    }

    /// Where it is, as `--pause-at` describes it beside its name.
    pub fn describe(self) -> &'static str {
        match self {
            PausePoint::MidStream => "After the first output bytes were written to staging",
            PausePoint::BeforePromote => {
                "After the lease's deadline was checked, right before promotion"
            }
            PausePoint::AfterStaging => {
                "After staging completed, before the interrupt check (signal tests)"
            }
            PausePoint::BeforeReplay => {
                "After a spilled run's merge, before its replay reads the input again"
            }
        }
    }

    /// Say where we are on stderr (above the bars), then wait for one line (or end)
    /// on stdin.
    pub async fn wait(self, terminal: &Terminal) {
        terminal.say(&format!("landing: paused at {self:?}"));
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)
        })
        .await;
    }
}

impl std::str::FromStr for FreezePoint {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        FreezePoint::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown freeze point {s:?}"))
    }
}

impl std::str::FromStr for PausePoint {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        PausePoint::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown pause point {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freeze_points_follow_the_lake_zones() {
        let l = crate::layout::Layout::new("progress", "d.jsonl");
        assert_eq!(FreezePoint::of_key(&l.lock), Some(FreezePoint::LeaseWrite));
        assert_eq!(
            FreezePoint::of_key(&l.checkpoint),
            Some(FreezePoint::CheckpointWrite)
        );
        assert_eq!(FreezePoint::of_key(&l.raw), Some(FreezePoint::PromoteData));
        assert_eq!(
            FreezePoint::of_key(&l.quarantine),
            Some(FreezePoint::PromoteQuarantine)
        );
        assert_eq!(FreezePoint::of_key(&l.run_record("r")), None);
        assert_eq!(FreezePoint::of_key("staging/progress/r/d.jsonl"), None);
        let log = crate::layout::LogKeys::of("progress");
        assert_eq!(
            FreezePoint::of_key(&log.entry(7)),
            Some(FreezePoint::LogWrite)
        );
        assert_eq!(FreezePoint::of_key(&log.last), Some(FreezePoint::LogWrite));
    }

    #[test]
    fn freeze_and_pause_points_are_spelled_as_their_flags_take_them() {
        assert_eq!(
            FreezePoint::ALL.map(FreezePoint::name),
            [
                "lease-write",
                "checkpoint-write",
                "promote-data",
                "promote-quarantine",
                "log-write"
            ]
        );
        for p in FreezePoint::ALL {
            assert_eq!(p.name().parse(), Ok(p));
        }
        assert_eq!(
            PausePoint::ALL.map(PausePoint::name),
            [
                "mid-stream",
                "before-promote",
                "after-staging",
                "before-replay"
            ]
        );
        for p in PausePoint::ALL {
            assert_eq!(p.name().parse(), Ok(p));
        }
        assert!("lease_write".parse::<FreezePoint>().is_err());
        assert!("MidStream".parse::<PausePoint>().is_err());
    }
}
