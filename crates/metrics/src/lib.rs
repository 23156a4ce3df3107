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
//! (`push`). What a run measured is collected by the engine (`landing_engine::metrics`,
//! its `Recorder` and `Night`); this crate encodes it and sends it, and only the
//! binary calls it.

mod push;

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use landing_engine::metrics::{Night, OUTCOMES};
use landing_engine::shard::Shard;
use landing_engine::summary::Action;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use push::push;

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
        [(
            vec![("version", landing_engine::JOB_VERSION.to_owned())],
            1.0,
        )],
    );
    encode(&r)
}

/// The marks group: the time of this run as the last success (exit 0) and as the
/// last publish (an input published), each only if it is one; `None` if neither.
pub fn marks_group(night: &Night, end: &Ending) -> Option<String> {
    let success = end.exit_code == landing_engine::EXIT_OK;
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
pub fn group_path(product: &str, shard: Option<Shard>) -> String {
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
