//! What a run tells Prometheus (docs/observability.md): at the end of every run,
//! single-input or inbox, its measurements are pushed to a Pushgateway
//! (`--pushgateway`), so an alert can say when a night needs a human.
//!
//! Two groups per product (and shard, when sharded), both under `job="landing"`:
//!
//! - the **run group** (`/metrics/job/landing/product/P[/shard@base64/S]`) is
//!   replaced whole by every run (PUT): the run's outcome counts, rows, bytes,
//!   seconds per stage, lease waits, exit code, and one series per input that needs
//!   a human. Nothing of an earlier run survives in it.
//! - the **marks group** (the same path plus `/marks/last`) keeps the time of the
//!   last successful run and of the last publish, and the number of the last commit
//!   log entry written. It is only ever updated by POST,
//!   which replaces the metrics it carries and keeps the others, so a failed night
//!   leaves the last success where it was: the 26-hour alert depends on it.
//!
//! Labels never carry event content: outcome, row kind, stage and byte direction
//! are fixed sets; an input's name is a label only on the series of an input that
//! needs a human (refused, busy, conflict, failed) in the run group, which the next
//! run replaces, so their number is bounded by one inbox listing, not by every
//! file ever seen.
//!
//! A push that fails, times out or is refused is logged and changes nothing else
//! (`push`).

mod push;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::error::{Error, Result};
use crate::history::Measured;
use crate::summary::{Action, Outcomes, Summary};

pub use push::push;

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
        let uri: hyper::Uri = url.parse().map_err(|_| bad("not a URL"))?;
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

/// How a run ended, beside what it measured.
#[derive(Debug, Clone, Copy)]
pub struct Ending {
    pub exit_code: i32,
    /// Unix seconds.
    pub ended_at: f64,
    pub duration: Duration,
}

type Labels = Vec<(&'static str, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

fn gauge(registry: &mut Registry, name: &str, help: &str, value: f64) {
    let g = FloatGauge::default();
    g.set(value);
    registry.register(name, help, g);
}

fn family(
    registry: &mut Registry,
    name: &str,
    help: &str,
    values: impl IntoIterator<Item = (Labels, f64)>,
) {
    let f = Family::<Labels, FloatGauge>::default();
    for (labels, v) in values {
        f.get_or_create(&labels).set(v);
    }
    registry.register(name, help, f);
}

fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail; the encoder only passes on the writer's errors.
    prometheus_text::encode(&mut text, registry).expect("metrics encode into a String");
    text
}

/// The run group: everything this run measured (text exposition format 0.0.4).
pub fn run_group(night: &Night, end: &Ending) -> String {
    let mut r = Registry::default();
    gauge(
        &mut r,
        "landing_run_end_timestamp_seconds",
        "When the run ended, in Unix seconds",
        end.ended_at,
    );
    gauge(
        &mut r,
        "landing_run_duration_seconds",
        "Wall time of the run",
        end.duration.as_secs_f64(),
    );
    gauge(
        &mut r,
        "landing_run_exit_code",
        "The run's exit code (README, Exit codes)",
        f64::from(end.exit_code),
    );
    family(
        &mut r,
        "landing_run_inputs",
        "Inputs of the run by outcome",
        OUTCOMES.iter().map(|a| {
            (
                vec![("outcome", a.as_str().to_owned())],
                night.outcomes.get(*a) as f64,
            )
        }),
    );
    family(
        &mut r,
        "landing_run_rows",
        "Rows of the inputs the run published, by kind",
        ["accepted", "rejected", "duplicate"]
            .iter()
            .zip(night.rows)
            .map(|(k, v)| (vec![("kind", (*k).to_owned())], v as f64)),
    );
    family(
        &mut r,
        "landing_run_bytes",
        "Bytes read from inputs (in) and staged for publication (out)",
        [("in", night.bytes_in), ("out", night.bytes_out)]
            .map(|(d, v)| (vec![("direction", d.to_owned())], v as f64)),
    );
    family(
        &mut r,
        "landing_run_stage_seconds",
        "Seconds spent per stage, summed over inputs",
        night
            .stages
            .iter()
            .map(|(s, secs)| (vec![("stage", (*s).to_owned())], *secs)),
    );
    gauge(
        &mut r,
        "landing_run_lease_waits",
        "Inputs whose run found the lease held by another run and waited for it",
        night.lease_waits as f64,
    );
    family(
        &mut r,
        "landing_input_outcome",
        "1 for each input of the run that needs a human (refused, busy, conflict, failed)",
        night.attention.iter().map(|(input, a)| {
            (
                vec![("input", input.clone()), ("outcome", a.as_str().to_owned())],
                1.0,
            )
        }),
    );
    family(
        &mut r,
        "landing_build_info",
        "The job's version",
        [(vec![("version", crate::JOB_VERSION.to_owned())], 1.0)],
    );
    encode(&r)
}

/// The marks group: the time of this run as the last success (exit 0) and as the
/// last publish (an input published), each only if it is one; `None` if neither.
pub fn marks_group(night: &Night, end: &Ending) -> Option<String> {
    let success = end.exit_code == crate::EXIT_OK;
    let published = night.outcomes.get(Action::Published) > 0;
    if !success && !published {
        return None;
    }
    let mut r = Registry::default();
    if success {
        gauge(
            &mut r,
            "landing_last_success_timestamp_seconds",
            "When a run last ended with exit code 0, in Unix seconds",
            end.ended_at,
        );
    }
    if published {
        gauge(
            &mut r,
            "landing_last_publish_timestamp_seconds",
            "When a run last published an input, in Unix seconds",
            end.ended_at,
        );
    }
    // Kept by the POST like the publish mark: a failed night leaves the last number.
    if let Some(sequence) = night.log_sequence {
        gauge(
            &mut r,
            "landing_log_sequence",
            "The latest commit log entry a run of this product (and shard) wrote: raw/<product>/_landing_log/",
            sequence as f64,
        );
    }
    Some(encode(&r))
}

/// The Pushgateway path of this product's (and shard's) run group. A shard (`I/N`)
/// holds a slash, so it travels base64url-encoded, as the Pushgateway defines.
pub fn group_path(product: &str, shard: Option<crate::shard::Shard>) -> String {
    let mut path = format!("/metrics/job/landing/product/{product}");
    if let Some(s) = shard {
        let b64: String = aws_smithy_types::base64::encode(s.to_string())
            .chars()
            .filter(|c| *c != '=')
            .map(|c| match c {
                '+' => '-',
                '/' => '_',
                c => c,
            })
            .collect();
        path.push_str(&format!("/shard@base64/{b64}"));
    }
    path
}

#[cfg(test)]
mod tests;
