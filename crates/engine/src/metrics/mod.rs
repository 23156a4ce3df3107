//! What a run measured, for Prometheus (docs/observability.md): the [`Recorder`]
//! every input of the process adds to as it finishes, and the [`Night`] it sums up;
//! the settings of the push (`--pushgateway`). The `landing-metrics` crate encodes a
//! night into the Pushgateway's groups and pushes them when the run ends.
//!
//! Labels never carry event content: an input's name is kept only for an input that
//! needs a human (refused, busy, conflict, failed), so their number is bounded by one
//! inbox listing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
pub use crate::history::Measured;
use crate::summary::{Action, Outcomes, Summary};

/// `--pushgateway-timeout`'s default, seconds: the longest a push may delay the exit.
pub const DEFAULT_TIMEOUT: u64 = 5;

/// Where and how long to push (`--pushgateway`, `--pushgateway-timeout`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushgateway {
    /// `http(s)://host:port[/prefix]`, without a trailing slash.
    pub url: String,
    /// The bound on the whole push (both groups), connection included.
    pub timeout: Duration,
}

impl Pushgateway {
    /// Validate `url`: http or https, a host, no credentials, query or fragment.
    pub fn new(url: &str, timeout_secs: u64) -> Result<Pushgateway> {
        let bad = |why: &str| Error::Config(format!("--pushgateway {url:?}: {why}"));
        let uri: http::Uri = url.parse().map_err(|_| bad("not a URL"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(bad("must start with http:// or https://"));
        }
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("credentials do not belong in the URL"));
        }
        if uri.query().is_some() || url.contains('#') {
            return Err(bad("no query or fragment"));
        }
        if timeout_secs == 0 {
            return Err(Error::Config(
                "--pushgateway-timeout must be at least 1 second".into(),
            ));
        }
        Ok(Pushgateway {
            url: url.trim_end_matches('/').to_owned(),
            timeout: Duration::from_secs(timeout_secs),
        })
    }
}

/// Every outcome an input can have in a run, as the `outcome` label spells it.
pub const OUTCOMES: [Action; 8] = [
    Action::Published,
    Action::Skipped,
    Action::Refused,
    Action::Busy,
    Action::Conflict,
    Action::Failed,
    Action::Interrupted,
    Action::NotStarted,
];

/// Outcomes that need a human: their inputs get a series of their own.
const NEEDS_A_HUMAN: [Action; 4] = [
    Action::Refused,
    Action::Busy,
    Action::Conflict,
    Action::Failed,
];

/// What one run measured, summed over its inputs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Night {
    /// Inputs per outcome.
    pub outcomes: Outcomes,
    /// Rows of the inputs this run published: accepted, rejected, duplicate.
    pub rows: [u64; 3],
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Seconds per stage, summed over inputs.
    pub stages: BTreeMap<&'static str, f64>,
    pub lease_waits: u64,
    /// Input name → outcome, for inputs that need a human.
    pub attention: BTreeMap<String, Action>,
    /// The highest commit log entry this run's publishes wrote.
    pub log_sequence: Option<u64>,
}

/// Collects a run's measurements as its inputs finish; shared by an inbox's workers.
#[derive(Debug, Clone)]
pub struct Recorder {
    night: Arc<Mutex<Night>>,
    started: Instant,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            night: Arc::default(),
            started: Instant::now(),
        }
    }
}

impl Recorder {
    fn with<T>(&self, f: impl FnOnce(&mut Night) -> T) -> T {
        f(&mut self.night.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// An input finished with `action` (its summary, if it reached one) after its run
    /// measured `measured`. Its outcome is counted by [`Recorder::count`], and an
    /// inbox's totals replace those counts ([`Recorder::outcomes`]).
    pub fn landed(
        &self,
        input_name: &str,
        action: Action,
        summary: Option<&Summary>,
        measured: &Measured,
    ) {
        self.with(|n| {
            if let Some(s) = summary.filter(|s| s.action == Action::Published) {
                n.rows[0] += s.accepted_rows;
                n.rows[1] += s.rejected_rows;
                n.rows[2] += s.duplicate_rows;
                n.log_sequence = n.log_sequence.max(s.log_sequence);
            }
            n.bytes_in += measured.bytes_in;
            n.bytes_out += measured.bytes_out;
            n.lease_waits += measured.lease_waits;
            for (stage, secs) in &measured.stages {
                *n.stages.entry(stage).or_default() += secs;
            }
            // An input's latest outcome stands: a busy one tried again later is
            // judged by the later try.
            if NEEDS_A_HUMAN.contains(&action) {
                n.attention.insert(input_name.to_owned(), action);
            } else {
                n.attention.remove(input_name);
            }
        });
    }

    /// The log's repair wrote these entries (`crate::pipeline::repair_log`): they
    /// count as entries the process wrote.
    pub fn repaired(&self, repairs: &crate::summary::Repairs) {
        let highest = repairs.repaired.iter().map(|r| r.sequence).max();
        self.with(|n| n.log_sequence = n.log_sequence.max(highest));
    }

    /// One more input ended in `action`.
    pub fn count(&self, action: Action) {
        self.with(|n| n.outcomes.add(action));
    }

    /// The outcome counts, as the inbox's totals line has them.
    pub fn outcomes(&self, counts: Outcomes) {
        self.with(|n| n.outcomes = counts);
    }

    pub fn night(&self) -> Night {
        self.with(|n| n.clone())
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

#[cfg(test)]
mod tests;
