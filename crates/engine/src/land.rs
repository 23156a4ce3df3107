//! Landing one input, the one way every caller does it: `landing run --input`, each
//! input of an inbox, and the tests through them. An [`Input`] is an input's
//! configuration with the stores its caller opened and the process's handles;
//!
//! - [`Input::unchanged`]: the cheap skip, when the listing's identity equals what
//!   the checkpoint recorded and the published object is intact (reads only);
//! - [`Input::land`]: the full run through [`pipeline::run`], under its lease;
//!
//! and either one writes the input's run record and records its metrics. The lake is
//! opened once, by the caller or by [`Input::land`], and serves the run, its record
//! and its metrics alike.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::{info, warn};

use crate::checkpoint::{self, ContractStamp};
use crate::config::Config;
use crate::error::{Result, Step};
use crate::history::{self, Measured, RunRecord, Trace};
use crate::hook::Hooks;
use crate::layout::Layout;
use crate::lease::LeaseRecord;
use crate::metrics::Recorder;
use crate::pipeline::{self, CheckpointRead, Handles, Opened};
use crate::store::{Lake, Store};
use crate::summary::{Action, Summary};

/// An input that was landed, or skipped as unchanged.
pub struct Landed {
    /// The summary, or the error that ended the run.
    pub result: Result<Summary>,
    /// The summary's action, or busy, conflict or failed.
    pub action: Action,
    /// The stdout line (the summary's schema; busy, conflict and failed runs get an
    /// `error`).
    pub line: Value,
    /// From the start of its run (after any wait for a `--jobs` slot) to its outcome.
    pub took: Duration,
    /// Its stages, bytes and lease waits, as the metrics have them.
    pub measured: Measured,
}

/// What the cheap skip found.
pub enum Checked {
    /// Unchanged since its checkpoint: skipped without a read of the input, its run
    /// record written and its metrics recorded.
    Unchanged(Box<Landed>),
    /// Land it: the checkpoint as read before any lease, which the run may take for
    /// its own read (see [`Opened::checkpoint`]).
    Changed(Box<CheckpointRead>),
    /// Not known: the listing gave no identity, or a read failed. The full run
    /// decides, and reports a failing read under its lease.
    Unknown,
}

/// After a process's runs of `landed` (inputs of `cfg.product`), the repair of the
/// product's log ([`pipeline::repair_log`]) on `lake`, or on one opened here. A
/// failure names the step and the product's log.
pub async fn repair_log(
    cfg: &Config,
    lake: Option<&Arc<dyn Lake>>,
    handles: Handles<'_>,
    landed: &std::collections::BTreeSet<String>,
) -> Result<crate::summary::Repairs> {
    let at = cfg
        .lake
        .join(&crate::commit_log::LogKeys::of(&cfg.product).folder)
        .to_string();
    let repaired = async {
        let opened;
        let lake = match lake {
            Some(l) => l,
            None => {
                opened = crate::store::open(&cfg.lake, &cfg.s3).await?;
                &opened
            }
        };
        pipeline::repair_log(cfg, lake, handles, landed).await
    };
    repaired.await.map_err(|e| e.at(Step::Log, &at))
}

/// One input to land.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    pub cfg: &'a Config,
    pub hooks: &'a Hooks,
    pub handles: Handles<'a>,
    /// The lake as the caller opened it; [`Input::land`] opens it when it is `None`.
    pub lake: Option<&'a Arc<dyn Lake>>,
    /// What the caller opened and read of the input.
    pub opened: Opened<'a>,
    /// The process's measurements, which every input adds to.
    pub recorder: &'a Recorder,
}

impl Input<'_> {
    /// The cheap skip. Needs the lake opened by the caller and the input's identity
    /// from its listing; [`Checked::Unknown`] without them.
    pub async fn unchanged(&self) -> Checked {
        let (Some(lake), Some(meta)) = (self.lake, &self.cfg.input_meta) else {
            return Checked::Unknown;
        };
        let trace = Trace::new();
        let started = Instant::now();
        match cheap_skip(&**lake, self.cfg, meta).await {
            Ok(Some(summary)) => {
                trace.begin(&summary.run_id);
                trace.lap("checkpoint-check");
                info!(input = %self.cfg.input, input_sha256 = summary.input_sha256.as_str(), action = "skipped", "unchanged since its checkpoint; not read");
                let landed = self.finish(Ok(*summary), &trace, started, lake).await;
                Checked::Unchanged(Box::new(landed))
            }
            Ok(None) => Checked::Changed(Box::new(CheckpointRead { found: None })),
            Err(Read::Changed(cur)) => Checked::Changed(cur),
            Err(Read::Failed(e)) => {
                tracing::debug!(error = %e, "no cheap skip");
                Checked::Unknown
            }
        }
    }

    /// The full run under the run contract, then its run record and its metrics.
    pub async fn land(&self) -> Landed {
        let trace = Trace::new();
        let started = Instant::now();
        let opened_here;
        let lake = match self.lake {
            Some(lake) => lake,
            None => match crate::store::open(&self.cfg.lake, &self.cfg.s3).await {
                Ok(lake) => {
                    opened_here = lake;
                    &opened_here
                }
                Err(e) => {
                    trace.begin(&pipeline::new_run_id());
                    warn!(input = %self.cfg.input, "lake unreachable; no run record written");
                    let e = e.at(Step::Connect, &self.cfg.input.to_string());
                    return self.outcome(Err(e), &trace, started);
                }
            },
        };
        let run = pipeline::run(
            self.cfg,
            lake,
            self.opened,
            self.hooks,
            self.handles,
            &trace,
        );
        let result = run.await;
        self.finish(result, &trace, started, lake).await
    }

    /// The run record of a run that reached an outcome (a busy one did not: the
    /// holder writes one), then the outcome.
    async fn finish(
        &self,
        result: Result<Summary>,
        trace: &Trace,
        started: Instant,
        lake: &Arc<dyn Lake>,
    ) -> Landed {
        let landed = self.outcome(result, trace, started);
        if let (Some(run_id), false) = (trace.run_id(), landed.action == Action::Busy) {
            let error = landed.result.as_ref().err().map(history::error_chain);
            let mut rec = RunRecord::from_trace(
                trace,
                &self.cfg.product,
                &self.cfg.input_name,
                &run_id,
                landed.action,
                landed.line.clone(),
                error,
            );
            rec.contract = Some(ContractStamp::of(&self.cfg.contract));
            history::write(&**lake, &rec).await;
        }
        landed
    }

    /// The stdout line of `result`, and its metrics recorded under the input's name
    /// as listed (an inbox's compressed input keeps its suffix).
    fn outcome(&self, result: Result<Summary>, trace: &Trace, started: Instant) -> Landed {
        let (action, line) = match &result {
            Ok(summary) => (
                summary.action,
                serde_json::to_value(summary).unwrap_or(Value::Null),
            ),
            Err(e) => {
                let action = Action::of_error(e);
                let (product, input) = (self.cfg.product.clone(), self.cfg.input.to_string());
                let chain = history::error_chain(e);
                let line = Summary::unfinished(trace.run_id(), product, input, action, &chain);
                (action, line)
            }
        };
        let landed = Landed {
            took: started.elapsed(),
            measured: trace.measured(),
            result,
            action,
            line,
        };
        let name = self
            .opened
            .input
            .map_or(&*self.cfg.input_name, |(_, key)| key);
        let summary = landed.result.as_ref().ok();
        self.recorder
            .landed(name, landed.action, summary, &landed.measured);
        self.recorder.count(landed.action);
        landed
    }
}

/// Why a checkpoint read did not end in a skip.
enum Read {
    /// The checkpoint, read, does not match: land with it.
    Changed(Box<CheckpointRead>),
    Failed(crate::Error),
}

impl From<crate::Error> for Read {
    fn from(e: crate::Error) -> Self {
        Read::Failed(e)
    }
}

/// The skipped summary when the listing (`meta`) equals what the checkpoint recorded,
/// the published object is intact and no run holds or left the lease; `Ok(None)`
/// when there is no checkpoint.
async fn cheap_skip(
    lake: &dyn Store,
    cfg: &Config,
    meta: &crate::store::ObjectMeta,
) -> std::result::Result<Option<Box<Summary>>, Read> {
    let layout = Layout::new(&cfg.product, &cfg.input_name).published_as(cfg.output_compression);
    let Some(cur) =
        checkpoint::read(lake, &layout.checkpoint, &cfg.product, &cfg.input_name).await?
    else {
        return Ok(None);
    };
    let rec = &cur.record;
    let changed = !rec.input.matches(meta)
        || checkpoint::published_drift(lake, &layout.raw, rec)
            .await?
            .is_some()
        // A lease not released means a run of this input died, stalled or is still
        // at work, perhaps between its checkpoint and its cleanup: a full run takes
        // the lease (or answers busy) and sweeps what that run left, which no skip
        // would.
        || !lease_released(lake, &layout.lock).await?;
    if changed {
        return Err(Read::Changed(Box::new(CheckpointRead { found: Some(cur) })));
    }
    Ok(Some(Box::new(Summary::skipped(
        pipeline::new_run_id(),
        cfg.product.clone(),
        cfg.input.to_string(),
        rec,
    ))))
}

/// Is the input's lease absent or released? A record that does not parse is not: the
/// full run reports it.
async fn lease_released(lake: &dyn Store, key: &str) -> Result<bool> {
    Ok(match crate::store::get_small(lake, key).await? {
        None => true,
        Some(v) => serde_json::from_slice::<LeaseRecord>(&v.bytes).is_ok_and(|r| r.released),
    })
}
