//! The run as named stages over the [`Store`] trait. Each stage is a function that
//! fits on a screen; [`run`] strings them together in the order of the contract:
//!
//! lease → prepare (read checkpoint, sweep, read what is published, probe copy
//! conditions: independent, so sent together) → (hash, skip?) → stream + stage →
//! publish → checkpoint (last, compare-and-swap) → cleanup → release.
//! The sweep runs only when an earlier holder may have left staging (see `decide`).
//!
//! Fencing: what the run saw of the published object when it decided is the
//! condition of its promotion, the checkpoint it read is the condition of its
//! checkpoint write, and the lease's deadline is checked before every write. A
//! SIGTERM or SIGINT before the publish drops the work, removes this run's staging
//! and releases the lease; after the publish the run finishes its checkpoint first.

mod check;
mod leasing;
mod resolve;
mod scan;
mod stream;
mod tidy;
mod validator;
mod whole;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use time::OffsetDateTime;
use tracing::{info, warn};

pub use check::check;
use leasing::{lock_wait, take_lease, Leasing};
use resolve::{digester, second_pass};
use scan::{scan, Limits, Scan};
use stream::{refuse, stream, Streamed};
use tidy::{cleanup, interrupted, remove_staging, sweep_others};
pub use validator::Counts;
pub use whole::Validator;

use crate::checkpoint::{self, Checkpoint, Current, PublishedVersion};
use crate::config::Config;
use crate::error::{Error, Result, Step, StepExt};
use crate::history::Trace;
use crate::hook::{CrashPoint, Hooks, PausePoint};
use crate::layout::Layout;
use crate::lease::{Inherited, Lease, Sightings};
use crate::progress::Terminal;
use crate::shutdown::Shutdown;
use crate::store::{
    CopyFence, Deadline, Expect, Fence, Gate, Lake, ObjectMeta, Staged, Store, Version,
};
use crate::summary::{Action, SpillReport, Summary};

/// Everything a stage needs, opened once per run.
struct Ctx<'a> {
    cfg: &'a Config,
    run_id: String,
    input: Arc<dyn Store>,
    input_key: String,
    input_location: String,
    lake: Arc<dyn Lake>,
    layout: Layout,
    hooks: Hooks,
    terminal: &'a Terminal,
    trace: &'a Trace,
    /// Cleared when this run may leave staging of the input behind: a removal of its
    /// own failed, or its sweep left another run's leftovers. Its lease is released
    /// clean only if this stays set and the run succeeded (see [`Inherited`]).
    clean: AtomicBool,
}

impl Ctx<'_> {
    /// This run's summary for `action`, before anything is counted.
    fn summary(&self, action: Action) -> Summary {
        Summary::new(
            self.run_id.clone(),
            self.cfg.product.clone(),
            self.input_location.clone(),
            action,
        )
    }
}

/// A unique, sortable run id: UTC start time plus 32 random bits.
pub fn new_run_id() -> String {
    let now = OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z-{:08x}",
        now.year(),
        now.month() as u8,
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        random_u64() as u32
    )
}

/// Per-process randomness from std's randomly keyed hasher (no extra dependency).
pub(crate) fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(OffsetDateTime::now_utc().unix_timestamp_nanos() as u128);
    h.finish()
}

/// Open the input as (store rooted at its folder or prefix, key of the input).
async fn open_input(cfg: &Config) -> Result<(Arc<dyn Store>, String)> {
    let (root, name) = cfg.input.split_name().ok_or_else(|| {
        Error::Config(format!("{}: cannot take an input name from it", cfg.input))
    })?;
    let store = crate::store::open_read_only(&root, &cfg.s3).await?;
    Ok((store, name.to_owned()))
}

/// What a run is handed from above besides its settings and hooks: handles it
/// shares with the other runs of its process, passed down, never reached through a
/// global.
#[derive(Debug, Clone, Copy)]
pub struct Handles<'a> {
    /// Cancelled by the first SIGTERM or SIGINT: stops a run before its publish.
    pub shutdown: &'a Shutdown,
    /// The lease records this process has seen held, and since when by its own clock.
    pub seen: &'a Sightings,
    /// The bars of the terminal, and the lines written above them.
    pub terminal: &'a Terminal,
}

/// `landing run`: land one input under the run contract.
///
/// `lake`: the lake already opened by an inbox run, shared by its inputs (one SDK
/// client, one copy-fence probe); `None` opens it for this run. `trace`: the run's
/// stage timer, read for its run record and the pushed metrics.
pub async fn run(
    cfg: &Config,
    lake: Option<&Arc<dyn Lake>>,
    hooks: &Hooks,
    handles: Handles<'_>,
    trace: &Trace,
) -> Result<Summary> {
    let run_id = new_run_id();
    trace.begin(&run_id);
    let span =
        tracing::info_span!("run", run_id = %run_id, product = %cfg.product, input = %cfg.input);
    // Instrumented, not entered: inbox runs land several inputs at once on one runtime.
    let ran = run_in_span(cfg, lake, *hooks, handles, trace, run_id);
    tracing::Instrument::instrument(ran, span).await
}

async fn run_in_span(
    cfg: &Config,
    shared_lake: Option<&Arc<dyn Lake>>,
    hooks: Hooks,
    handles: Handles<'_>,
    trace: &Trace,
    run_id: String,
) -> Result<Summary> {
    let input_location = cfg.input.to_string();
    let (input, input_key) = open_input(cfg).await.at(Step::Connect, &input_location)?;
    // The input's identity before it is read, recorded in the checkpoint for cheap skips.
    let with_meta;
    let cfg = match &cfg.input_meta {
        Some(_) => cfg,
        None => {
            let mut c = cfg.clone();
            c.input_meta = input.head(&input_key).await.ok().flatten();
            with_meta = c;
            &with_meta
        }
    };
    // Every write of this run passes the lease's deadline once more at its last
    // instant; the store fires the run's hooks inside its writes.
    let deadline = Deadline::default();
    let gate = Gate::new(deadline.clone(), lock_wait(cfg))
        .observed_by(hooks.write_observer(handles.terminal));
    let lake = match shared_lake {
        Some(lake) => lake.with_run_gate(gate),
        None => crate::store::open_gated(&cfg.lake, &cfg.s3, gate)
            .await
            .at(Step::Connect, &input_location)?,
    };
    let layout = Layout::new(&cfg.product, &cfg.input_name).published_as(cfg.output_compression);
    let leasing = Leasing {
        lake: &lake,
        key: &layout.lock,
        run_id: &run_id,
        seen: handles.seen,
        trace,
    };
    let waited = take_lease(cfg, &leasing, deadline, handles.shutdown).await;
    let lease = match waited.at(Step::Lease, &input_location)? {
        Ok(lease) => lease,
        Err(signal) => {
            let summary = Summary {
                signal: Some(signal),
                ..Summary::new(
                    run_id,
                    cfg.product.clone(),
                    input_location,
                    Action::Interrupted,
                )
            };
            warn!(signal = ?signal, "interrupted while waiting for the lease; nothing was written");
            log_outcome(&summary);
            return Ok(summary);
        }
    };
    trace.lap("lease");
    let ctx = Ctx {
        cfg,
        run_id,
        input,
        input_key,
        input_location,
        lake,
        layout,
        hooks,
        terminal: handles.terminal,
        trace,
        clean: AtomicBool::new(true),
    };
    let result = run_leased(&ctx, &lease, handles.shutdown).await;
    // A failed run may have left staging anywhere: the next holder sweeps.
    let clean = result.is_ok() && ctx.clean.load(Ordering::SeqCst);
    if let Err(e) = lease.release(clean).await {
        warn!(error = %e, "could not release the lease; it expires on its own");
    }
    result
}

/// What the run decided before writing anything a reader can see.
enum Decision {
    Done(Box<Summary>),
    Publish(Box<StagedRun>),
}

async fn run_leased(ctx: &Ctx<'_>, lease: &Lease, shutdown: &Shutdown) -> Result<Summary> {
    let decided = tokio::select! {
        biased;
        signal = shutdown.signalled() => return interrupted(ctx, signal, None).await,
        decided = decide(ctx, lease) => decided?,
    };
    let staged = match decided {
        Decision::Done(summary) => return Ok(*summary),
        Decision::Publish(staged) => staged,
    };
    ctx.hooks
        .pause(PausePoint::AfterStaging, ctx.terminal)
        .await;
    // A signal that came while staging completed still stops us before the publish.
    if let Some(signal) = shutdown.signal() {
        return interrupted(ctx, signal, Some(&staged)).await;
    }
    // From here on a signal waits: the publish is followed by its checkpoint.
    let done = publish_and_commit(ctx, lease, &staged).await;
    if done.is_err() {
        // A conflict or failure: this run's staging is garbage now. Removed here, not
        // left to a sweep: a run that lost its lease cannot mark it for one.
        remove_staging(ctx, &staged).await;
    }
    done
}

/// Up to the publish: checkpoint, sweep, skip rule, stream and staging.
async fn decide(ctx: &Ctx<'_>, lease: &Lease) -> Result<Decision> {
    let at = |step| move |e: Error| Err::<(), _>(e).at(step, &ctx.input_location).unwrap_err();
    // Up to four independent round trips (six for the probe, once per store) go out
    // together: none reads what another writes. The probe only touches this run's own
    // staging, which the sweep of others' leftovers never takes. The sweep only if the
    // lease was taken over, or released by a run that did not leave staging clean.
    let (fence, prior, (), seen) = tokio::try_join!(
        async {
            let fence = ctx.lake.fencing(&ctx.layout.raw, &ctx.run_id).await;
            fence.map_err(at(Step::Connect))
        },
        async {
            let (l, product) = (&ctx.layout, &ctx.cfg.product);
            checkpoint::read(&*ctx.lake, &l.checkpoint, product, &l.input_name)
                .await
                .map_err(at(Step::ReadCheckpoint))
        },
        async {
            if lease.inherited() != Inherited::Unknown {
                return Ok(());
            }
            sweep_others(ctx).await.map_err(at(Step::Sweep))
        },
        // What readers see now is the condition of our promotion (the fence).
        async { Seen::read(ctx).await.map_err(at(Step::ReadCheckpoint)) },
    )?;
    // No lease existed, yet the input was landed before: its lease was deleted by
    // hand, and whatever its holder left is unknown.
    if lease.inherited() == Inherited::Fresh && prior.is_some() {
        sweep_others(ctx).await.map_err(at(Step::Sweep))?;
    }
    if fence.verdict() != CopyFence::Fenced {
        warn!(copy_fence = %fence, "promotion is not fenced on this store: a late copy of a killed run could overwrite a newer publish (see RUNBOOK)");
    }
    ctx.trace.lap("prepare");
    if let Some(cur) = &prior {
        if let Some(summary) = try_skip(ctx, cur, seen.raw.as_ref()).await? {
            return Ok(Decision::Done(Box::new(summary)));
        }
    }
    let streamed = stream(ctx, lease).await?;
    ctx.trace.lap("stream");
    if let Some(refusal) = streamed.refusal.clone() {
        return refuse(ctx, streamed, refusal)
            .await
            .map(|s| Decision::Done(Box::new(s)));
    }
    lease.ensure_held().map_err(at(Step::Stage))?;
    let staged = complete_staging(ctx, streamed, seen, prior, fence)
        .await
        .map_err(at(Step::Stage))?;
    ctx.trace.lap("stage");
    ctx.hooks.crash(CrashPoint::AfterStaging);
    Ok(Decision::Publish(Box::new(staged)))
}

/// Publish, then checkpoint last, then clean up.
async fn publish_and_commit(ctx: &Ctx<'_>, lease: &Lease, staged: &StagedRun) -> Result<Summary> {
    let at = |step| move |e: Error| Err::<(), _>(e).at(step, &ctx.input_location).unwrap_err();
    lease.ensure_held().map_err(at(Step::Publish))?;
    // Tests: the deadline was fine, now another run overtakes this one.
    ctx.hooks
        .pause(PausePoint::BeforePromote, ctx.terminal)
        .await;
    let published = publish(ctx, lease, staged)
        .await
        .map_err(at(Step::Publish))?;
    ctx.trace.lap("promote");
    ctx.hooks.crash(CrashPoint::AfterPublish);
    lease.ensure_held().map_err(at(Step::Checkpoint))?;
    let moved = commit(ctx, staged, &published)
        .await
        .map_err(at(Step::Checkpoint))?;
    ctx.trace.lap("checkpoint");
    ctx.hooks.crash(CrashPoint::AfterCheckpoint);
    cleanup(ctx, staged).await;
    ctx.trace.lap("cleanup");
    Ok(published_summary(ctx, staged, moved))
}

/// The published object and quarantine as the run saw them when it decided.
struct Seen {
    raw: Option<ObjectMeta>,
    quarantine: Option<ObjectMeta>,
}

impl Seen {
    async fn read(ctx: &Ctx<'_>) -> Result<Self> {
        Ok(Seen {
            raw: ctx.lake.head(&ctx.layout.raw).await?,
            quarantine: ctx.lake.head(&ctx.layout.quarantine).await?,
        })
    }
}

/// Skip rule: the checkpoint's hash equals the input's and the published object it
/// names is still there, unchanged. Costs one read of the input, writes nothing.
async fn try_skip(
    ctx: &Ctx<'_>,
    cur: &Current,
    meta: Option<&ObjectMeta>,
) -> Result<Option<Summary>> {
    let rec = &cur.record;
    let here = ctx.lake.location(&ctx.layout.raw);
    if rec.drift(&here, meta).is_some() {
        warn!(published = %here, "checkpoint names a published object that is missing or changed; republishing");
        return Ok(None);
    }
    let sha = hash_only(ctx).await.at(Step::Hash, &ctx.input_location)?;
    if sha != rec.input_sha256 {
        info!(input_sha256 = %sha, previous_sha256 = %rec.input_sha256, "input changed since the last publish");
        return Ok(None);
    }
    // An unchanged input stays skipped when only the contract changed, unless
    // --rehash asks to re-land what an earlier contract landed.
    if ctx.cfg.reland_other_contract && !rec.landed_under(&ctx.cfg.contract) {
        info!(contract = %ctx.cfg.contract.label(), "landed under another contract; re-landing (--rehash)");
        return Ok(None);
    }
    let key = &ctx.layout.checkpoint;
    checkpoint::upgrade_identity(&*ctx.lake, key, cur, ctx.cfg.input_meta.as_ref()).await;
    // The hash equals the checkpoint's (checked above), so the summary is the record's.
    let summary = Summary::skipped(
        ctx.run_id.clone(),
        ctx.cfg.product.clone(),
        ctx.input_location.clone(),
        rec,
    );
    log_outcome(&summary);
    Ok(Some(summary))
}

async fn hash_only(ctx: &Ctx<'_>) -> Result<String> {
    let reader = ctx.input.read(&ctx.input_key).await?;
    ctx.trace.bytes_in(reader.size);
    let progress =
        ctx.terminal
            .progress("hash", &ctx.cfg.input_name, reader.size, ctx.cfg.progress);
    let d = digester(ctx.hooks);
    let limits = Limits::of(ctx.cfg);
    let (sha, _) = scan(
        reader,
        &ctx.input_location,
        progress,
        limits,
        ctx.cfg.contract.clone(),
        Scan::Hash,
        d,
        false,
    )
    .await?;
    ctx.trace.lap("hash");
    Ok(sha)
}

/// Staged outputs of a run that is going to publish, with what it decided on.
struct StagedRun {
    sha256: String,
    counts: Counts,
    data: Staged,
    quarantine: Option<Staged>,
    seen: Seen,
    prior: Option<Current>,
    /// What the store's probe found: the promotions are sent under it.
    fence: Fence,
    spill: Option<SpillReport>,
}

async fn complete_staging(
    ctx: &Ctx<'_>,
    s: Streamed,
    seen: Seen,
    prior: Option<Current>,
    fence: Fence,
) -> Result<StagedRun> {
    let mut data = s.data.complete().await?;
    if let Some(drops) = &s.drops {
        // The merge found later copies in the staged output: a filtered copy of it.
        let output = ctx.cfg.output_compression;
        data = second_pass(&*ctx.lake, data, drops, &ctx.run_id, ctx.hooks, output).await?;
        ctx.trace.lap("second-pass");
    }
    let quarantine = match s.quarantine {
        Some(q) => Some(q.complete().await?),
        None => None,
    };
    ctx.trace
        .bytes_out(data.size + quarantine.as_ref().map_or(0, |q| q.size));
    Ok(StagedRun {
        sha256: s.sha256,
        counts: s.counts,
        data,
        quarantine,
        seen,
        prior,
        fence,
        spill: s.spill,
    })
}

/// Promote the data, then the quarantine, each only over what the run saw when it
/// decided. The quarantine goes second: until the checkpoint names it, a crash in
/// between leaves the old checkpoint, which no longer matches the data and is redone.
async fn publish(ctx: &Ctx<'_>, lease: &Lease, staged: &StagedRun) -> Result<ObjectMeta> {
    let seen = &staged.seen;
    let data = promote(ctx, &staged.data, seen.raw.as_ref(), staged.fence).await?;
    if let Some(q) = &staged.quarantine {
        lease.ensure_held()?;
        promote(ctx, q, seen.quarantine.as_ref(), staged.fence).await?;
    }
    Ok(data)
}

/// One fenced promotion: a 412 means another run published since we decided.
async fn promote(
    ctx: &Ctx<'_>,
    staged: &Staged,
    seen: Option<&ObjectMeta>,
    fence: Fence,
) -> Result<ObjectMeta> {
    let expect = Expect::from_head(seen);
    match ctx.lake.promote(staged, &expect, fence).await {
        Err(Error::Precondition { location }) => Err(Error::Conflict(format!(
            "conflict: {location} changed since this run decided ({}); another run published it. Nothing more was written; rerun to reconcile",
            match &expect {
                Expect::Absent => "it was absent".to_owned(),
                Expect::Version(Version::ETag(e)) => format!("it had ETag {e}"),
                Expect::Version(Version::File { .. }) => "the file was replaced".to_owned(),
            }
        ))),
        other => other,
    }
}

/// Write the checkpoint last, against the version read at the start. If another
/// writer moved it, accept only a checkpoint that already describes our bytes.
async fn commit(ctx: &Ctx<'_>, staged: &StagedRun, published: &ObjectMeta) -> Result<bool> {
    let prior = staged.prior.as_ref();
    let lake = &*ctx.lake;
    let record = Checkpoint {
        product: ctx.cfg.product.clone(),
        input_name: ctx.cfg.input_name.clone(),
        input_sha256: staged.sha256.clone(),
        accepted_rows: staged.counts.accepted,
        rejected_rows: staged.counts.rejected,
        duplicate_rows: staged.counts.duplicates,
        published_path: lake.location(&ctx.layout.raw),
        published_size: published.size,
        output_compression: ctx.cfg.output_compression,
        published: PublishedVersion::of(published),
        quarantine_path: staged
            .quarantine
            .as_ref()
            .map(|_| lake.location(&ctx.layout.quarantine)),
        committed_at: crate::rfc3339(OffsetDateTime::now_utc()),
        run_id: ctx.run_id.clone(),
        job_version: crate::JOB_VERSION.to_owned(),
        input: checkpoint::InputIdentity::of(ctx.cfg.input_meta.as_ref()),
        contract: Some(checkpoint::ContractStamp::of(&ctx.cfg.contract)),
    };
    let key = &ctx.layout.checkpoint;
    match checkpoint::write(lake, key, &record, prior.map(|c| c.version.as_str())).await {
        Ok(()) => Ok(true),
        Err(Error::Precondition { .. }) => {
            let now = checkpoint::read(lake, key, &ctx.cfg.product, &ctx.cfg.input_name).await?;
            match now {
                // Our own write landed but its answer was lost; the SDK's retry met it.
                Some(c)
                    if c.record.run_id == record.run_id
                        && c.record.input_sha256 == record.input_sha256
                        && c.record.matches(published) =>
                {
                    info!("the checkpoint write landed though its answer was lost");
                    Ok(true)
                }
                Some(c) if c.record.input_sha256 == record.input_sha256 && c.record.matches(published) => {
                    warn!("another run moved the checkpoint to these same bytes; not overwriting");
                    Ok(false)
                }
                Some(c) => Err(Error::Conflict(format!(
                    "conflict: checkpoint {} was moved by run {} to input {} while this run published {}; not overwriting. Rerun to reconcile",
                    lake.location(key),
                    c.record.run_id,
                    c.record.input_sha256,
                    record.input_sha256
                ))),
                None => Err(Error::Conflict(format!(
                    "conflict: checkpoint {} was deleted by another writer during this run; not overwriting. Rerun to reconcile",
                    lake.location(key)
                ))),
            }
        }
        Err(e) => Err(e),
    }
}

fn published_summary(ctx: &Ctx<'_>, staged: &StagedRun, moved: bool) -> Summary {
    let summary = Summary {
        input_sha256: staged.sha256.clone(),
        accepted_rows: staged.counts.accepted,
        rejected_rows: staged.counts.rejected,
        duplicate_rows: staged.counts.duplicates,
        published_path: Some(ctx.lake.location(&ctx.layout.raw)),
        quarantine_path: staged
            .quarantine
            .as_ref()
            .map(|_| ctx.lake.location(&ctx.layout.quarantine)),
        checkpoint_moved: moved,
        spill: staged.spill,
        ..ctx.summary(Action::Published)
    };
    log_outcome(&summary);
    summary
}

fn log_outcome(s: &Summary) {
    // Spelled as on stdout (`published`); a `None` reason records no field at all.
    let action = s.action.as_str();
    info!(
        input_sha256 = %s.input_sha256,
        action = %action,
        accepted_rows = s.accepted_rows,
        rejected_rows = s.rejected_rows,
        duplicate_rows = s.duplicate_rows,
        checkpoint_moved = s.checkpoint_moved,
        reason = s.reason.as_ref().map(tracing::field::display),
        "run finished"
    );
}
