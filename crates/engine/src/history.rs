//! Run history (docs/design.md section 7): every run that reaches an outcome writes
//! `runs/<product>/<input name>/<run id>.json` after its checkpoint or refusal: its
//! summary, start and end, the time per stage, bytes in and out, and the job version.
//! The skip rule never reads it; the checkpoint stays the one row per input.
//!
//! Timings come from a collector, a [`Trace`] made for each input and handed to its
//! run, which fills it at stage boundaries ([`Trace::lap`], [`Trace::bytes_in`],
//! [`Trace::bytes_out`]). A record that cannot be written is logged and changes
//! nothing else.

use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::error::Result;
use crate::layout::{Folders, Layout};
use crate::store::{PutMode, Store};
use crate::summary::Action;

/// What one run's stages took: made by whoever starts the run, filled by the
/// pipeline, read for the run record and the pushed metrics.
#[derive(Debug)]
pub struct Trace {
    inner: Mutex<TraceInner>,
}

#[derive(Debug)]
struct TraceInner {
    run_id: Option<String>,
    started_at: OffsetDateTime,
    started: Instant,
    last: Instant,
    stages: Vec<(&'static str, f64)>,
    bytes_in: u64,
    bytes_out: u64,
    lease_waits: u64,
}

/// What a finished run's collector measured, for the pushed metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// Seconds per stage, in the order the stages first ended.
    pub stages: Vec<(&'static str, f64)>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// 1 if the run waited for a lease another run held.
    pub lease_waits: u64,
}

impl Default for Trace {
    fn default() -> Self {
        Trace::new()
    }
}

impl Trace {
    /// A collector whose clock starts now.
    pub fn new() -> Trace {
        let now = Instant::now();
        Trace {
            inner: Mutex::new(TraceInner {
                run_id: None,
                started_at: OffsetDateTime::now_utc(),
                started: now,
                last: now,
                stages: Vec::new(),
                bytes_in: 0,
                bytes_out: 0,
                lease_waits: 0,
            }),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut TraceInner) -> T) -> T {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    pub fn run_id(&self) -> Option<String> {
        self.with(|t| t.run_id.clone())
    }

    /// The run got its id.
    pub fn begin(&self, run_id: &str) {
        self.with(|t| t.run_id = Some(run_id.to_owned()));
    }

    /// A stage ended: the time since the previous boundary is added to `stage`.
    pub fn lap(&self, stage: &'static str) {
        self.with(|t| {
            let now = Instant::now();
            let secs = now.duration_since(t.last).as_secs_f64();
            t.last = now;
            match t.stages.iter_mut().find(|(s, _)| *s == stage) {
                Some((_, total)) => *total += secs,
                None => t.stages.push((stage, secs)),
            }
        });
    }

    /// Bytes of input read.
    pub fn bytes_in(&self, n: u64) {
        self.with(|t| t.bytes_in += n);
    }

    /// Bytes staged for publication (data and quarantine).
    pub fn bytes_out(&self, n: u64) {
        self.with(|t| t.bytes_out += n);
    }

    /// The run found its lease held and waited for it (`--lease-wait`).
    pub fn lease_waited(&self) {
        self.with(|t| t.lease_waits += 1);
    }

    /// What was collected so far.
    pub fn measured(&self) -> Measured {
        self.with(|t| Measured {
            stages: t.stages.clone(),
            bytes_in: t.bytes_in,
            bytes_out: t.bytes_out,
            lease_waits: t.lease_waits,
        })
    }
}

/// One run record, as stored under `runs/`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    pub product: String,
    pub input_name: String,
    /// The run's outcome, spelled as on its stdout line.
    pub action: Action,
    pub started_at: String,
    pub ended_at: String,
    pub duration_s: f64,
    /// Seconds per stage (lease, prepare, hash or stream, stage, promote, checkpoint,
    /// cleanup; `checkpoint-check` for a cheap skip).
    pub stages: serde_json::Map<String, serde_json::Value>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub job_version: String,
    /// The summary line as printed on stdout.
    pub summary: serde_json::Value,
    /// For a failed run: the error, naming the step (never content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The contract the run applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<crate::checkpoint::ContractStamp>,
}

impl RunRecord {
    /// Build the record of a finished run from its collector.
    pub fn from_trace(
        trace: &Trace,
        product: &str,
        input_name: &str,
        run_id: &str,
        action: Action,
        summary: serde_json::Value,
        error: Option<String>,
    ) -> RunRecord {
        trace.with(|t| {
            let stages = t
                .stages
                .iter()
                .map(|(s, secs)| ((*s).to_owned(), serde_json::json!(round_ms(*secs))))
                .collect();
            RunRecord {
                run_id: run_id.to_owned(),
                product: product.to_owned(),
                input_name: input_name.to_owned(),
                action,
                started_at: crate::rfc3339(t.started_at),
                ended_at: crate::rfc3339(OffsetDateTime::now_utc()),
                duration_s: round_ms(t.started.elapsed().as_secs_f64()),
                stages,
                bytes_in: t.bytes_in,
                bytes_out: t.bytes_out,
                job_version: crate::JOB_VERSION.to_owned(),
                summary,
                error,
                contract: None,
            }
        })
    }
}

fn round_ms(secs: f64) -> f64 {
    (secs * 1000.0).round() / 1000.0
}

/// Write a record; a failure is logged (warning) and otherwise ignored.
pub async fn write(lake: &dyn Store, rec: &RunRecord) {
    let key = Layout::new(&rec.product, &rec.input_name).run_record(&rec.run_id);
    let body = match serde_json::to_vec(rec) {
        Ok(mut b) => {
            b.push(b'\n');
            b
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not encode the run record");
            return;
        }
    };
    // Run ids are unique: a plain write never replaces another run's record.
    if let Err(e) = lake
        .put_small(&key, Bytes::from(body), PutMode::Overwrite)
        .await
    {
        tracing::warn!(location = %lake.location(&key), error = %e, "could not write the run record; the run's outcome stands");
    }
}

/// Record names of one input, oldest first by name (run ids start with their start
/// second).
async fn record_names(lake: &dyn Store, folder: &str) -> Result<Vec<String>> {
    Ok(lake
        .list(folder)
        .await?
        .files
        .into_iter()
        .map(|f| f.name)
        .filter(|n| Folders::run_record_id(n).is_some())
        .collect())
}

async fn read_records(lake: &dyn Store, folder: &str, names: &[String]) -> Result<Vec<RunRecord>> {
    let mut out = Vec::new();
    for name in names {
        let key = format!("{folder}/{name}");
        if let Some(v) = crate::store::get_small(lake, &key).await? {
            match serde_json::from_slice::<RunRecord>(&v.bytes) {
                Ok(r) => out.push(r),
                Err(e) => {
                    tracing::warn!(location = %lake.location(&key), error = %e, "unreadable run record left out")
                }
            }
        }
    }
    // Newest first; within one second, run ids end in random bits, so times decide.
    out.sort_by(|a, b| {
        (b.ended_at.as_str(), b.started_at.as_str())
            .cmp(&(a.ended_at.as_str(), a.started_at.as_str()))
    });
    Ok(out)
}

/// The records of one input, newest first.
pub async fn read_all(lake: &dyn Store, product: &str, input_name: &str) -> Result<Vec<RunRecord>> {
    let folder = Layout::new(product, input_name).runs;
    let names = record_names(lake, &folder).await?;
    read_records(lake, &folder, &names).await
}

/// The newest record of one input, if any: only the records of the latest start
/// second are read.
pub async fn latest(
    lake: &dyn Store,
    product: &str,
    input_name: &str,
) -> Result<Option<RunRecord>> {
    let folder = Layout::new(product, input_name).runs;
    let names = record_names(lake, &folder).await?;
    let Some(last) = names.last() else {
        return Ok(None);
    };
    let second = last.split('-').next().unwrap_or(last).to_owned();
    let recent: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with(&second))
        .cloned()
        .collect();
    Ok(read_records(lake, &folder, &recent)
        .await?
        .into_iter()
        .next())
}

/// The error chain of `e` on one line: `outer: cause: cause`.
pub fn error_chain(e: &crate::Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(trace: &Trace) -> RunRecord {
        RunRecord::from_trace(
            trace,
            "progress",
            "a.jsonl",
            "r-1",
            Action::Published,
            serde_json::json!({"action": "published"}),
            None,
        )
    }

    #[test]
    fn laps_add_up_per_stage_and_bytes_accumulate() {
        let trace = Trace::new();
        trace.begin("r-1");
        trace.lap("lease");
        trace.bytes_in(10);
        trace.lap("stream");
        trace.lap("lease");
        trace.bytes_in(5);
        trace.bytes_out(7);
        assert_eq!(trace.run_id().as_deref(), Some("r-1"));
        let rec = record(&trace);
        let stages: Vec<&String> = rec.stages.keys().collect();
        assert_eq!(stages.len(), 2, "one entry per stage: {stages:?}");
        assert_eq!((rec.bytes_in, rec.bytes_out), (15, 7));
        assert_eq!(rec.action, Action::Published);
    }

    /// Each run has its own collector, handed to it: what one records never reaches
    /// another's (inbox runs land several inputs at once).
    #[test]
    fn two_traces_collect_apart() {
        let (a, b) = (Trace::new(), Trace::new());
        a.begin("run-a");
        a.lap("stream");
        a.bytes_in(100);
        a.bytes_out(100);
        a.lease_waited();
        assert_eq!(b.run_id(), None);
        assert_eq!(b.measured(), Measured::default());
        let rec = record(&b);
        assert!(rec.stages.is_empty(), "no stage recorded: {:?}", rec.stages);
        assert_eq!((rec.bytes_in, rec.bytes_out), (0, 0));
        assert_eq!(a.measured().lease_waits, 1);
    }
}
