//! The run, top-down. [`run`] is the contract's sequence, and each step is a stage
//! module that takes what the step before produced and hands its result on; no stage
//! calls back into this module, and what they share is the leaf `ctx.rs`:
//!
//! connect → lease → **prepare** (probe copy conditions, read the checkpoint and
//! what is published, sweep when needed: independent, so sent together) → skip rule
//! (hash only) → **stream** (hash, validate, stage as the lines come; merge a spilled
//! index) → refuse, or **stage** (complete; a spilled run's second pass) →
//! **publish** (fenced promotions) → **log** (the commit log's entry) → checkpoint (last, compare-and-swap) → **tidy**
//! → release.
//!
//! Fencing: what the run saw of the published object when it decided is the
//! condition of its promotion, the checkpoint it read is the condition of its
//! checkpoint write, and the lease's deadline is checked before every write. A
//! SIGTERM or SIGINT before the publish drops the work, removes this run's staging
//! and releases the lease; after the publish the run finishes its checkpoint first.

mod check;
mod ctx;
mod hashed;
mod leasing;
mod log_entry;
mod pass;
mod prepare;
mod publish;
mod published;
mod repair;
mod second_pass;
mod stage;
mod stream;
mod tidy;

// The line pass, from `landing-pass`, under the names the stages use for it.
use landing_pass::{batch, replay, resolve, scan, spill_plan, validator, whole};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tracing::warn;

pub use batch::RawForm;
pub use check::check;
pub use ctx::new_run_id;
use ctx::{log_outcome, open_input, Ctx, StagedRun};
use leasing::{lock_wait, take_lease, Leasing};
use prepare::Prepared;
pub use published::{read_published, Budget, Published};
pub use repair::repair_log;
pub use validator::Counts;
pub use whole::Validator;

use crate::checkpoint::Current;
use crate::commit_log::Appender;
use crate::config::Config;
use crate::error::{Error, Result, Step, StepExt};
use crate::history::Trace;
use crate::hook::{CrashPoint, Hooks, PausePoint};
use crate::layout::Layout;
use crate::lease::{Lease, Sightings};
use crate::progress::Terminal;
use crate::shutdown::Shutdown;
use crate::store::{Deadline, Gate, Lake, Store};
use crate::summary::{Action, Summary};

/// What a run is handed from above besides its settings and hooks: handles it
/// shares with the other runs of its process, passed down, never reached through a
/// global.
#[derive(Debug, Clone, Copy)]
pub struct Handles<'a> {
    /// Cancelled by the first SIGTERM or SIGINT: stops a run before its publish.
    pub shutdown: &'a Shutdown,
    /// The lease records this process has seen held, and since when by its own clock.
    pub sightings: &'a Sightings,
    /// The bars of the terminal, and the lines written above them.
    pub terminal: &'a Terminal,
    /// The end of each commit log as this process left it: its runs append in turn.
    pub log: &'a Appender,
}

/// What an inbox run opened or read of an input before its run, shared with it: one
/// SDK client for the inbox, with its connection pool and its credentials, where
/// opening one per input cost a small input more CPU than its own validation. `None`:
/// the run opens or reads its own.
#[derive(Clone, Copy, Default)]
pub struct Opened<'a> {
    /// The inbox, and the input's key in it as listed.
    pub input: Option<(&'a Arc<dyn Store>, &'a str)>,
    /// The input's checkpoint as the inbox's cheap skip read it, before the run's
    /// lease. The run takes it for its own read only if no lease existed when it
    /// took its own (see `prepare`).
    pub checkpoint: Option<&'a CheckpointRead>,
}

/// What a read of an input's checkpoint found, kept for a later step.
#[derive(Debug, Clone)]
pub struct CheckpointRead {
    /// `None`: the input has no checkpoint.
    pub found: Option<Current>,
}

/// `landing run`: land one input under the run contract.
///
/// `lake`: the lake, opened by the caller (the run gates its own writes). `opened`:
/// what an inbox run opened or read of the input. `trace`: the run's stage timer,
/// read for its run record and the pushed metrics.
pub async fn run(
    cfg: &Config,
    lake: &Arc<dyn Lake>,
    opened: Opened<'_>,
    hooks: &Hooks,
    handles: Handles<'_>,
    trace: &Trace,
) -> Result<Summary> {
    let run_id = new_run_id();
    trace.begin(&run_id);
    let span =
        tracing::info_span!("run", run_id = %run_id, product = %cfg.product, input = %cfg.input);
    // Instrumented, not entered: inbox runs land several inputs at once on one runtime.
    let ran = land(cfg, lake, opened, *hooks, handles, trace, run_id);
    tracing::Instrument::instrument(ran, span).await
}

/// The run's sequence: connect, lease, the work under the lease, release.
async fn land(
    cfg: &Config,
    lake: &Arc<dyn Lake>,
    opened: Opened<'_>,
    hooks: Hooks,
    handles: Handles<'_>,
    trace: &Trace,
    run_id: String,
) -> Result<Summary> {
    let deadline = Deadline::default();
    // Every write of this run passes the lease's deadline once more at its last
    // instant, and the store fires the run's hooks inside its writes.
    let gate = Gate::new(deadline.clone(), lock_wait(cfg))
        .observed_by(hooks.write_observer(handles.terminal));
    let lake = lake.with_run_gate(gate);
    let ctx = connect(cfg, lake, opened, hooks, handles, trace, run_id).await?;
    let leasing = Leasing {
        lake: &ctx.lake,
        key: &ctx.layout.lock,
        run_id: &ctx.run_id,
        sightings: handles.sightings,
        trace,
    };
    let waited = take_lease(cfg, &leasing, deadline, handles.shutdown).await;
    let lease = match waited.at(Step::Lease, &ctx.input_location)? {
        Ok(lease) => lease,
        Err(signal) => {
            warn!(signal = ?signal, "interrupted while waiting for the lease; nothing was written");
            let summary = Summary {
                signal: Some(signal),
                ..ctx.summary(Action::Interrupted)
            };
            log_outcome(&summary);
            return Ok(summary);
        }
    };
    trace.lap("lease");
    let result = match leased(&ctx, &lease, handles.shutdown).await {
        Err(failed) => match lease.ensure_held() {
            Err(lost) => {
                tidy::lost_lease(&ctx).await;
                Err(failed.after_lost_lease(lost))
            }
            Ok(()) => Err(failed),
        },
        done => done,
    };
    // A failed run may have left staging anywhere: the next holder sweeps.
    let clean = result.is_ok() && ctx.clean.load(Ordering::SeqCst);
    if let Err(e) = lease.release(clean).await {
        warn!(error = %e, "could not release the lease; it expires on its own");
    }
    result
}

/// Open the input beside the run's gated `lake`: the run's context.
async fn connect<'a>(
    cfg: &'a Config,
    lake: Arc<dyn Lake>,
    opened: Opened<'_>,
    hooks: Hooks,
    handles: Handles<'a>,
    trace: &'a Trace,
    run_id: String,
) -> Result<Ctx<'a>> {
    let input_location = cfg.input.to_string();
    let (input, input_key) = match opened.input {
        Some((inbox, key)) => (inbox.clone(), key.to_owned()),
        None => open_input(cfg).await.at(Step::Connect, &input_location)?,
    };
    // The input's identity before it is read, recorded in the checkpoint for cheap skips.
    let input_meta = match &cfg.input_meta {
        Some(meta) => Some(meta.clone()),
        None => input.head(&input_key).await.ok().flatten(),
    };
    Ok(Ctx {
        cfg,
        input_meta,
        checkpoint_before_lease: opened.checkpoint.cloned(),
        run_id,
        input,
        input_key,
        input_location,
        lake,
        layout: Layout::new(&cfg.product, &cfg.input_name).published_as(cfg.output_compression),
        hooks,
        terminal: handles.terminal,
        appender: handles.log,
        trace,
        clean: AtomicBool::new(true),
    })
}

/// What the run decided before writing anything a reader can see.
enum Decision {
    Done(Box<Summary>),
    Publish(Box<StagedRun>),
}

/// Under the lease: decide (a signal drops the work), then publish, checkpoint and
/// tidy (a signal waits: the publish is followed by its checkpoint).
async fn leased(ctx: &Ctx<'_>, lease: &Lease, shutdown: &Shutdown) -> Result<Summary> {
    let decided = tokio::select! {
        biased;
        signal = shutdown.signalled() => return tidy::interrupted(ctx, signal, None).await,
        decided = decide(ctx, lease) => decided?,
    };
    let mut staged = match decided {
        Decision::Done(summary) => return Ok(*summary),
        Decision::Publish(staged) => staged,
    };
    ctx.hooks
        .pause(PausePoint::AfterStaging, ctx.terminal)
        .await;
    // A signal that came while staging completed still stops us before the publish.
    if let Some(signal) = shutdown.signal() {
        return tidy::interrupted(ctx, signal, Some(&staged)).await;
    }
    let done = publish_and_commit(ctx, lease, &mut staged).await;
    if done.is_err() {
        // A conflict or failure: this run's staging is garbage now. Removed here, not
        // left to a sweep: a run that lost its lease cannot mark it for one.
        tidy::remove_staging(ctx, &staged).await;
    }
    done
}

/// Up to the publish, nothing a reader can see: prepare, skip rule, stream, stage.
async fn decide(ctx: &Ctx<'_>, lease: &Lease) -> Result<Decision> {
    let Prepared {
        fence,
        prior,
        existing,
    } = prepare::prepare(ctx, lease).await?;
    if let Some(cur) = &prior {
        if let Some(summary) = prepare::try_skip(ctx, cur, existing.raw.as_ref()).await? {
            return Ok(Decision::Done(Box::new(summary)));
        }
    }
    let streamed = stream::stream(ctx, lease).await?;
    ctx.trace.lap("stream");
    if let Some(refusal) = streamed.refusal.clone() {
        let summary = stream::refuse(ctx, streamed, refusal).await?;
        return Ok(Decision::Done(Box::new(summary)));
    }
    let at = |e: Error| e.at(Step::Stage, &ctx.input_location);
    lease.ensure_held().map_err(at)?;
    let staged = stage::complete(ctx, streamed, existing, prior, fence)
        .await
        .map_err(at)?;
    ctx.trace.lap("stage");
    ctx.hooks.crash(CrashPoint::AfterStaging);
    Ok(Decision::Publish(Box::new(staged)))
}

/// Publish, then its entry in the commit log, then the checkpoint last, then tidy.
async fn publish_and_commit(
    ctx: &Ctx<'_>,
    lease: &Lease,
    staged: &mut StagedRun,
) -> Result<Summary> {
    let at = |step| move |e: Error| e.at(step, &ctx.input_location);
    lease.ensure_held().map_err(at(Step::Publish))?;
    // Tests: the deadline was fine, now another run overtakes this one.
    ctx.hooks
        .pause(PausePoint::BeforePromote, ctx.terminal)
        .await;
    let (published, entry) = publish::publish(ctx, lease, staged)
        .await
        .map_err(at(Step::Publish))?;
    ctx.trace.lap("promote");
    ctx.hooks.crash(CrashPoint::AfterPublish);
    lease.ensure_held().map_err(at(Step::Log))?;
    let sequence = log_entry::log(ctx, &entry, &published)
        .await
        .map_err(at(Step::Log))?;
    ctx.trace.lap("log");
    ctx.hooks.crash(CrashPoint::AfterLogEntry);
    lease.ensure_held().map_err(at(Step::Checkpoint))?;
    let moved = publish::commit(ctx, staged, &published, sequence)
        .await
        .map_err(at(Step::Checkpoint))?;
    ctx.trace.lap("checkpoint");
    ctx.hooks.crash(CrashPoint::AfterCheckpoint);
    tidy::cleanup(ctx, staged).await;
    ctx.trace.lap("cleanup");
    Ok(publish::published_summary(ctx, staged, moved, sequence))
}
