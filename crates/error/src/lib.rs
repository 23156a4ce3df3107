//! The one public error type of `landing`, and the exit codes a run answers with.
//! Variants say what happened in terms a caller can act on; backends keep their
//! precise errors private and map them here. Every other crate of the workspace
//! builds on this one, so it names none of them.

use std::fmt;

/// Exit code: published, skipped or checked.
pub const EXIT_OK: i32 = 0;
/// Exit code: any operational failure.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code: usage or configuration error.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: the file was refused (sysexits EX_DATAERR).
pub const EXIT_REFUSED: i32 = 65;
/// Exit code: another run holds the lease (sysexits EX_TEMPFAIL).
pub const EXIT_BUSY: i32 = 75;
/// Exit code of a run stopped by SIGTERM (128 + 15, as a shell reports it).
pub const EXIT_SIGTERM: i32 = 143;
/// Exit code of a run stopped by SIGINT (128 + 2).
pub const EXIT_SIGINT: i32 = 130;

/// A boxed source error from a backend or the OS.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object or file does not exist.
    #[error("not found: {location}")]
    NotFound { location: String },

    /// A conditional write lost: another writer changed the object since we read it.
    #[error("precondition failed on {location}: another writer changed it")]
    Precondition { location: String },

    /// Another run holds the lease for this (product, input).
    #[error("busy: {location} is held by run {holder} until {until}")]
    Busy {
        location: String,
        holder: String,
        /// When it may be free, in words.
        until: String,
    },

    /// Configuration or usage problem, detected before anything is touched.
    #[error("configuration: {0}")]
    Config(String),

    /// A stored record (checkpoint, lease) exists but cannot be understood.
    #[error("corrupt {what} at {location}: {reason}")]
    Corrupt {
        what: &'static str,
        location: String,
        reason: String,
    },

    /// The store or file system failed an operation.
    #[error("{op} {location}")]
    Store {
        op: &'static str,
        location: String,
        #[source]
        source: BoxError,
    },

    /// A thread, task or handler of this process failed: a worker that panicked, a
    /// stage that went away, a signal handler the OS refused. Not the store's.
    #[error("{what} {location}")]
    Internal {
        what: &'static str,
        location: String,
        #[source]
        source: BoxError,
    },

    /// The run failed at a named step; wraps the cause.
    #[error("run of {input} failed at step {step}")]
    Run {
        input: String,
        step: Step,
        #[source]
        source: Box<Error>,
    },

    /// Another writer moved what this run decided on (a 412 on promotion or on the
    /// checkpoint), or the run lost its lease: it stopped and wrote nothing more.
    #[error("{0}")]
    Conflict(String),
}

impl Error {
    pub fn store(
        op: &'static str,
        location: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Store {
            op,
            location: location.into(),
            source: source.into(),
        }
    }

    pub fn internal(
        what: &'static str,
        location: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Internal {
            what,
            location: location.into(),
            source: source.into(),
        }
    }

    /// The innermost error, skipping `Run` wrappers.
    pub fn root(&self) -> &Error {
        match self {
            Error::Run { source, .. } => source.root(),
            other => other,
        }
    }

    /// Process exit code for this error (docs/interface.md section 5).
    pub fn exit_code(&self) -> i32 {
        match self.root() {
            // Busy, a lost lease or a conflicting writer: nothing of ours changed what
            // readers see, and a later run sorts it out.
            Error::Busy { .. } | Error::Conflict(_) => EXIT_BUSY,
            Error::Config(_) => EXIT_USAGE,
            _ => EXIT_FAILURE,
        }
    }
}

/// The named stages of a run, used to say where an operational failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Connect,
    Lease,
    ReadCheckpoint,
    Sweep,
    Hash,
    Stream,
    Stage,
    Publish,
    Log,
    Checkpoint,
    Cleanup,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Connect => "connect",
            Step::Lease => "lease",
            Step::ReadCheckpoint => "read-checkpoint",
            Step::Sweep => "sweep",
            Step::Hash => "hash",
            Step::Stream => "stream",
            Step::Stage => "stage",
            Step::Publish => "publish",
            Step::Log => "log",
            Step::Checkpoint => "checkpoint",
            Step::Cleanup => "cleanup",
        })
    }
}

/// Attach the step and input to an error.
pub trait StepExt<T> {
    fn at(self, step: Step, input: &str) -> Result<T>;
}

impl<T> StepExt<T> for Result<T> {
    fn at(self, step: Step, input: &str) -> Result<T> {
        self.map_err(|e| e.at(step, input))
    }
}

impl Error {
    /// This error as the failure of `input`'s run at `step`.
    pub fn at(self, step: Step, input: &str) -> Error {
        match self {
            // Busy and Config are already complete answers; keep them as they are.
            e @ (Error::Busy { .. } | Error::Config(_) | Error::Run { .. }) => e,
            e => Error::Run {
                input: input.to_owned(),
                step,
                source: Box::new(e),
            },
        }
    }

    /// This failure of a run whose lease was `lost` meanwhile, as the lost lease at
    /// the step where it surfaced. A run stopped past its lease's deadline (SIGSTOP,
    /// a paused VM) can resume mid-request and meet what the run that took over did
    /// (its staging swept, a probe's scratch object gone): that is a conflict a later
    /// run sorts out (exit 75), not an operational failure. What failed stays in the
    /// message; a configuration error stays one.
    pub fn after_lost_lease(self, lost: Error) -> Error {
        match self {
            Error::Run {
                input,
                step,
                source,
            } => Error::Run {
                input,
                step,
                source: Box::new(source.after_lost_lease(lost)),
            },
            e @ (Error::Busy { .. } | Error::Config(_) | Error::Conflict(_)) => e,
            e => Error::Conflict(format!("{lost}; what failed then: {}", chain(&e))),
        }
    }
}

/// An error and its sources, joined by ": ".
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost() -> Error {
        Error::Conflict("conflict: lease L was lost".into())
    }

    #[test]
    fn a_failure_after_the_lease_was_lost_is_the_lost_lease_at_its_step() {
        let swept = Error::NotFound {
            location: "s3://b/staging/p/r/probe-target/a.jsonl".into(),
        };
        let e = swept
            .at(Step::Connect, "in/a.jsonl")
            .after_lost_lease(lost());
        assert_eq!(e.exit_code(), EXIT_BUSY);
        let Error::Run { step, source, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(*step, Step::Connect);
        assert_eq!(
            source.to_string(),
            "conflict: lease L was lost; what failed then: not found: s3://b/staging/p/r/probe-target/a.jsonl"
        );
    }

    #[test]
    fn what_failed_after_the_lease_was_lost_keeps_its_sources() {
        let io = std::io::Error::other("connection reset");
        let e = Error::store("CopyObject", "s3://b/k", io).after_lost_lease(lost());
        assert_eq!(
            e.to_string(),
            "conflict: lease L was lost; what failed then: CopyObject s3://b/k: connection reset"
        );
    }

    #[test]
    fn a_configuration_error_stays_one_after_the_lease_was_lost() {
        let e = Error::Config("bad".into())
            .at(Step::Connect, "in/a.jsonl")
            .after_lost_lease(lost());
        assert_eq!(e.exit_code(), EXIT_USAGE);
        assert_eq!(e.to_string(), "configuration: bad");
    }
}
