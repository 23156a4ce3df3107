//! The crash points of a run ([`CrashPoint`]: the named instants at which a drill
//! kills it) and the test hooks the line pass takes ([`PassHooks`]). The engine's
//! `Hooks` (pause and freeze points besides) hands the pass its part of them; a
//! normal run has none.

use std::io::Write;

/// The test hooks of the line pass, from the run's; `PassHooks::default()` is a
/// normal run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassHooks {
    /// The run's crash point: the pass fires those of a spill, its merge and a replay.
    pub crash_at: Option<CrashPoint>,
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

impl PassHooks {
    /// Crash drills: die here if this is the configured crash point.
    pub fn crash(&self, point: CrashPoint) {
        if self.crash_at == Some(point) {
            point.fire();
        }
    }
}

/// A named instant at which a crash drill aborts the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// After the first output bytes were written to staging.
    MidStream,
    /// After part K of a multipart staging upload was uploaded (S3).
    AfterPart(u32),
    /// After staging completed, before promotion.
    AfterStaging,
    /// After promotion to the published name, before the commit log's entry.
    AfterPublish,
    /// After the commit log's entry, before the checkpoint.
    AfterLogEntry,
    /// After the checkpoint, before cleanup.
    AfterCheckpoint,
    /// After the first run of a spill was written to scratch.
    Spill,
    /// During the merge of the spilled runs, before the last run is removed.
    Merge,
    /// After the second pass wrote its first bytes to its staging.
    SecondPass,
    /// After the replay handed its first kept lines to the staging writer.
    Replay,
    /// Not a kill: a validation worker panics mid-file (the run must fail, publishing
    /// nothing).
    WorkerPanic,
}

impl CrashPoint {
    /// Die here, abruptly, as a killed process would: SIGKILL to ourselves, so no
    /// destructor, flush or cleanup runs.
    pub fn fire(self) -> ! {
        // Straight to stderr, not above the bars: the process dies on the next line,
        // so no frame is drawn over it, and a crash point deep in a worker thread
        // needs no handle to say so.
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "landing: drill crash at {self}");
        let _ = err.flush();
        drop(err);
        // SAFETY: kill(2) on our own pid; SIGKILL cannot be caught.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        // SIGKILL is delivered before kill() returns to a single-threaded caller and
        // promptly otherwise; never continue past a crash point.
        std::process::abort()
    }
}

impl std::str::FromStr for CrashPoint {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "mid-stream" => CrashPoint::MidStream,
            "after-staging" => CrashPoint::AfterStaging,
            "after-publish" => CrashPoint::AfterPublish,
            "after-log-entry" => CrashPoint::AfterLogEntry,
            "after-checkpoint" => CrashPoint::AfterCheckpoint,
            "worker-panic" => CrashPoint::WorkerPanic,
            "spill" => CrashPoint::Spill,
            "merge" => CrashPoint::Merge,
            "second-pass" => CrashPoint::SecondPass,
            "replay" => CrashPoint::Replay,
            other => match other.strip_prefix("after-part:").map(str::parse) {
                Some(Ok(k)) if k >= 1 => CrashPoint::AfterPart(k),
                _ => {
                    return Err(format!(
                        "unknown crash point {other:?} (mid-stream, after-part:K, spill, merge, second-pass, replay, after-staging, after-publish, after-log-entry, after-checkpoint, worker-panic)"
                    ))
                }
            },
        })
    }
}

impl std::fmt::Display for CrashPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CrashPoint::MidStream => f.write_str("mid-stream"),
            CrashPoint::AfterPart(k) => write!(f, "after-part:{k}"),
            CrashPoint::AfterStaging => f.write_str("after-staging"),
            CrashPoint::AfterPublish => f.write_str("after-publish"),
            CrashPoint::AfterLogEntry => f.write_str("after-log-entry"),
            CrashPoint::AfterCheckpoint => f.write_str("after-checkpoint"),
            CrashPoint::WorkerPanic => f.write_str("worker-panic"),
            CrashPoint::Spill => f.write_str("spill"),
            CrashPoint::Merge => f.write_str("merge"),
            CrashPoint::SecondPass => f.write_str("second-pass"),
            CrashPoint::Replay => f.write_str("replay"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_points_round_trip() {
        for s in [
            "mid-stream",
            "after-part:3",
            "after-staging",
            "after-publish",
            "after-log-entry",
            "after-checkpoint",
            "worker-panic",
            "spill",
            "merge",
            "second-pass",
            "replay",
        ] {
            assert_eq!(s.parse::<CrashPoint>().unwrap().to_string(), s);
        }
        assert!("after-part:0".parse::<CrashPoint>().is_err());
        assert!("later".parse::<CrashPoint>().is_err());
    }
}
