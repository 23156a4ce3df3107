//! One input of an inbox run (or the one input of `landing run`): its cheap skip
//! when its listing is what its checkpoint recorded, else a full run through
//! [`pipeline::run`], then its run record.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::{info, warn};

use super::Slots;
use crate::checkpoint::{self, Current};
use crate::config::Config;
use crate::error::Result;
use crate::history::{self, RunRecord, Trace};
use crate::hook::Hooks;
use crate::layout::Layout;
use crate::lease::LeaseRecord;
use crate::pipeline::{self, Handles, Opened};
use crate::store::{Lake, Listed, Store};
use crate::summary::{Action, Summary};

/// What the cheap skip decided.
enum Cheap {
    /// Unchanged since its checkpoint: skipped without a read of the input.
    Skipped(Box<Summary>),
    /// Land it in full. The checkpoint as read, before any lease (`None`: absent),
    /// which the run may take for its own read (see [`Opened::checkpoint`]).
    Run(Box<Option<Current>>),
}

/// The cheap skip: the listing equals what the checkpoint recorded and the published
/// object is intact.
async fn cheap_skip(lake: &dyn Store, cfg: &Config, listed: &Listed) -> Result<Cheap> {
    let layout = Layout::new(&cfg.product, &listed.name).published_as(cfg.output_compression);
    let Some(cur) = checkpoint::read(lake, &layout.checkpoint, &cfg.product, &listed.name).await?
    else {
        return Ok(Cheap::Run(Box::new(None)));
    };
    let rec = &cur.record;
    if !rec.input.matches(&listed.meta)
        || checkpoint::published_drift(lake, &layout.raw, rec)
            .await?
            .is_some()
    {
        return Ok(Cheap::Run(Box::new(Some(cur))));
    }
    // A lease not released means a run of this input died, stalled or is still at
    // work, perhaps between its checkpoint and its cleanup: a full run takes the lease
    // (or answers busy) and sweeps what that run left, which no skip would.
    if !lease_released(lake, &layout.lock).await? {
        return Ok(Cheap::Run(Box::new(Some(cur))));
    }
    Ok(Cheap::Skipped(Box::new(Summary::skipped(
        pipeline::new_run_id(),
        cfg.product.clone(),
        cfg.input.to_string(),
        rec,
    ))))
}

/// [`cheap_skip`] where the listing gave the input's identity; `None` where it did
/// not, or where its reads failed: the full run reports those properly, under its
/// lease.
async fn try_cheap(lake: Option<&Arc<dyn Lake>>, cfg: &Config) -> Option<Cheap> {
    let (Some(lake), Some(meta)) = (lake, &cfg.input_meta) else {
        return None;
    };
    let listed = Listed {
        name: cfg.input_name.clone(),
        meta: meta.clone(),
        modified_ns: 0,
    };
    match cheap_skip(&**lake, cfg, &listed).await {
        Ok(cheap) => Some(cheap),
        Err(e) => {
            tracing::debug!(error = %e, "no cheap skip");
            None
        }
    }
}

/// Is the input's lease absent or released? A record that does not parse is not: the
/// full run reports it.
async fn lease_released(lake: &dyn Store, key: &str) -> Result<bool> {
    Ok(match lake.get_small(key).await? {
        None => true,
        Some(v) => serde_json::from_slice::<LeaseRecord>(&v.bytes).is_ok_and(|r| r.released),
    })
}

/// An input that ran, or was skipped cheaply.
pub struct Landed {
    /// The summary, or the error that ended the run.
    pub result: Result<Summary>,
    /// The summary's action, or busy, conflict or failed.
    pub action: Action,
    /// The stdout line (section 4's schema; busy, conflict and failed runs get an
    /// `error`).
    pub line: Value,
    /// From the start of its run (after any wait for a `--jobs` slot) to its outcome.
    pub took: Duration,
    /// Its stages, bytes and lease waits, for the pushed metrics.
    pub measured: history::Measured,
}

/// Land one input: cheap skip or full run, then its run record. A full run waits
/// for its charge of `full_runs` first; `None` if a signal came before it got it
/// (the input was not started).
pub async fn land_one(
    cfg: &Config,
    hooks: &Hooks,
    handles: Handles<'_>,
    opened: Opened<'_>,
    try_cheap: bool,
    full_runs: Option<&Slots>,
) -> Option<Landed> {
    let trace = Trace::new();
    let lake = opened.lake;
    let ran = async {
        let started = Instant::now();
        let mut read_before_lease = None;
        if try_cheap {
            match self::try_cheap(lake, cfg).await {
                Some(Cheap::Skipped(summary)) => {
                    trace.begin(&summary.run_id);
                    trace.lap("checkpoint-check");
                    return Some((Ok(*summary), true, started));
                }
                Some(Cheap::Run(read)) => read_before_lease = Some(read),
                None => {}
            }
        }
        // Only full runs are charged: a cheap skip holds no input in memory.
        let stored = cfg.input_meta.as_ref().map_or(u64::MAX, |m| m.size);
        let _slot = match full_runs {
            Some(slots) => tokio::select! {
                biased;
                _ = handles.shutdown.signalled() => return None,
                slot = slots.acquire(stored) => slot,
            },
            None => None,
        };
        // An inbox input in flight has its bar on a terminal until it finishes.
        let _bar = full_runs.and_then(|_| handles.terminal.in_flight(&cfg.input_name));
        let started = Instant::now();
        let opened = Opened {
            checkpoint: read_before_lease.as_deref(),
            ..opened
        };
        Some((
            pipeline::run(cfg, opened, hooks, handles, &trace).await,
            false,
            started,
        ))
    }
    .await;
    let (result, cheap, started) = ran?;
    let took = started.elapsed();
    let (action, line, error) = match &result {
        Ok(summary) => (
            summary.action,
            serde_json::to_value(summary).unwrap_or(Value::Null),
            None,
        ),
        Err(e) => {
            let chain = history::error_chain(e);
            let action = Action::of_error(e);
            let (product, input) = (cfg.product.clone(), cfg.input.to_string());
            let line = Summary::unfinished(trace.run_id(), product, input, action, &chain);
            (action, line, Some(chain))
        }
    };
    if cheap {
        if let Ok(summary) = &result {
            info!(input = %cfg.input, input_sha256 = summary.input_sha256.as_str(), action = "skipped", "unchanged since its checkpoint; not read");
        }
    }
    // Busy runs reached no outcome and changed nothing: no record (the holder writes one).
    if action != Action::Busy {
        if let Some(run_id) = trace.run_id() {
            let opened;
            let lake = match lake {
                Some(l) => Some(l),
                None => {
                    opened = crate::store::open(&cfg.lake, &cfg.s3).await.ok();
                    opened.as_ref()
                }
            };
            match lake {
                Some(lake) => {
                    let mut rec = RunRecord::from_trace(
                        &trace,
                        &cfg.product,
                        &cfg.input_name,
                        &run_id,
                        action,
                        line.clone(),
                        error,
                    );
                    rec.contract = Some(crate::checkpoint::ContractStamp::of(&cfg.contract));
                    history::write(&**lake, &rec).await;
                }
                None => warn!(input = %cfg.input, "lake unreachable; no run record written"),
            }
        }
    }
    Some(Landed {
        result,
        action,
        line,
        took,
        measured: trace.measured(),
    })
}
