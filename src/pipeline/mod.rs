//! The run as named stages over the [`Store`] trait. Each stage is a function that
//! fits on a screen; [`run`] strings them together in the order of the contract:
//!
//! lease → prepare (read checkpoint, sweep, read what is published, probe copy
//! conditions: independent, so sent together) → (hash, skip?) → stream + stage →
//! publish → checkpoint (last, compare-and-swap) → cleanup → release.
//!
//! Fencing: what the run saw of the published object when it decided is the
//! condition of its promotion, the checkpoint it read is the condition of its
//! checkpoint write, and the lease's deadline is checked before every write. A
//! SIGTERM or SIGINT before the publish drops the work, removes this run's staging
//! and releases the lease; after the publish the run finishes its checkpoint first.

mod scan;
mod validator;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tracing::{info, warn};

use scan::{scan, Out, Scan};
use validator::Sequencer;
pub use validator::{Counts, Validator};

use crate::checkpoint::{self, Checkpoint, Current, PublishedVersion};
use crate::config::Config;
use crate::error::{Error, Result, Step, StepExt};
use crate::hook::{CrashPoint, Hooks, PausePoint};
use crate::layout::Layout;
use crate::lease::{Lease, LeaseOptions};
use crate::progress::Progress;
use crate::store::s3::S3Options;
use crate::store::{
    CopyFence, Deadline, Expect, Gate, Location, ObjectMeta, Staged, Store, Sweep, Upload, Version,
};
use crate::summary::{Action, Refusal, Signal, Summary};

/// Everything a stage needs, opened once per run.
struct Ctx<'a> {
    cfg: &'a Config,
    run_id: String,
    input: Arc<dyn Store>,
    input_key: String,
    input_location: String,
    lake: Arc<dyn Store>,
    layout: Layout,
    hooks: Hooks,
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

/// Open the input as (store rooted at its folder or bucket, key of the input).
async fn open_input(cfg: &Config) -> Result<(Arc<dyn Store>, String)> {
    let (root, key) = match &cfg.input {
        Location::Local(path) => {
            let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
            let dir = dir.map_or_else(|| std::path::PathBuf::from("."), |d| d.to_path_buf());
            (Location::Local(dir), cfg.input_name.clone())
        }
        Location::S3 { bucket, key } => (
            Location::S3 {
                bucket: bucket.clone(),
                key: String::new(),
            },
            key.clone(),
        ),
    };
    Ok((crate::store::open_read_only(&root, &cfg.s3).await?, key))
}

/// SIGTERM (a pod being stopped) and SIGINT, listened to for the whole run.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install(input: &str) -> Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        let listen = |kind| signal(kind).map_err(|e| Error::store("listen for signals", input, e));
        Ok(Signals {
            term: listen(SignalKind::terminate())?,
            int: listen(SignalKind::interrupt())?,
        })
    }

    /// A signal that already arrived, without waiting.
    async fn pending(&mut self) -> Option<Signal> {
        tokio::select! {
            biased;
            signal = self.recv() => Some(signal),
            () = std::future::ready(()) => None,
        }
    }

    async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::Term,
            _ = self.int.recv() => Signal::Int,
        }
    }
}

/// How the lease is held on this lake (see [`LeaseOptions`]).
fn lease_options(cfg: &Config) -> LeaseOptions {
    match cfg.lake {
        Location::Local(_) => LeaseOptions {
            ttl: cfg.lease_ttl,
            margin: cfg.lease_ttl / 10,
            instant_takeover: true,
        },
        Location::S3 { .. } => LeaseOptions {
            ttl: cfg.lease_ttl,
            margin: cfg.s3.attempt_timeout,
            instant_takeover: false,
        },
    }
}

/// `landing run`: land one input under the run contract.
pub async fn run(cfg: &Config, hooks: &Hooks) -> Result<Summary> {
    let run_id = new_run_id();
    crate::history::begin(&run_id);
    let span =
        tracing::info_span!("run", run_id = %run_id, product = %cfg.product, input = %cfg.input);
    // Instrumented, not entered: inbox runs land several inputs at once on one runtime.
    tracing::Instrument::instrument(run_in_span(cfg, *hooks, run_id), span).await
}

async fn run_in_span(cfg: &Config, hooks: Hooks, run_id: String) -> Result<Summary> {
    let input_location = cfg.input.to_string();
    let mut signals = Signals::install(&input_location)?;
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
    let s3 = S3Options {
        crash_after_part: hooks.crash_after_part(),
        ..cfg.s3.clone()
    };
    // Every write of this run passes the lease's deadline once more at its last
    // instant; a local file lock is waited for no longer than the lease's margin.
    let opts = lease_options(cfg);
    let deadline = Deadline::default();
    let gate = Gate::new(deadline.clone(), opts.margin, hooks.freeze_at);
    let lake = crate::store::open_gated(&cfg.lake, &s3, gate)
        .await
        .at(Step::Connect, &input_location)?;
    let layout = Layout::new(&cfg.product, &cfg.input_name);
    let waited = take_lease(cfg, &lake, &layout, &run_id, deadline, &mut signals).await;
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
    crate::history::lap("lease");
    let ctx = Ctx {
        cfg,
        run_id,
        input,
        input_key,
        input_location,
        lake,
        layout,
        hooks,
    };
    let result = run_leased(&ctx, &lease, &mut signals).await;
    if let Err(e) = lease.release().await {
        warn!(error = %e, "could not release the lease; it expires on its own");
    }
    result
}

/// Take the input's lease. While another run holds it, poll with jittered backoff for
/// up to `--lease-wait` (until it is released or expires), then answer busy. A signal
/// stops the wait (`Err(signal)`); it never interrupts an attempt, whose write may
/// land after it was abandoned.
async fn take_lease(
    cfg: &Config,
    lake: &Arc<dyn Store>,
    layout: &Layout,
    run_id: &str,
    deadline: Deadline,
    signals: &mut Signals,
) -> Result<std::result::Result<Lease, Signal>> {
    let opts = lease_options(cfg);
    let until = Instant::now() + cfg.lease_wait;
    let mut delays = crate::lease::wait_delays();
    let mut waiting = false;
    loop {
        let attempt = Lease::acquire(lake.clone(), &layout.lock, run_id, opts, deadline.clone());
        let busy = match attempt.await {
            Err(e @ Error::Busy { .. }) => e,
            other => {
                if waiting {
                    info!("lease free; the run goes on");
                }
                return other.map(Ok);
            }
        };
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(busy);
        }
        if !waiting {
            waiting = true;
            info!(error = %busy, wait_secs = left.as_secs(), "lease held by another run; waiting for it");
        }
        let pause = delays.next().unwrap_or(left).min(left);
        tokio::select! {
            biased;
            signal = signals.recv() => return Ok(Err(signal)),
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// What the run decided before writing anything a reader can see.
enum Decision {
    Done(Box<Summary>),
    Publish(Box<StagedRun>),
}

async fn run_leased(ctx: &Ctx<'_>, lease: &Lease, signals: &mut Signals) -> Result<Summary> {
    let decided = tokio::select! {
        biased;
        signal = signals.recv() => return interrupted(ctx, signal, None).await,
        decided = decide(ctx, lease) => decided?,
    };
    let staged = match decided {
        Decision::Done(summary) => return Ok(*summary),
        Decision::Publish(staged) => staged,
    };
    ctx.hooks.pause(PausePoint::AfterStaging).await;
    // A signal that came while staging completed still stops us before the publish.
    if let Some(signal) = signals.pending().await {
        return interrupted(ctx, signal, Some(&staged)).await;
    }
    // From here on a signal waits: the publish is followed by its checkpoint.
    publish_and_commit(ctx, lease, &staged).await
}

/// Up to the publish: checkpoint, sweep, skip rule, stream and staging.
async fn decide(ctx: &Ctx<'_>, lease: &Lease) -> Result<Decision> {
    let at = |step| move |e: Error| Err::<(), _>(e).at(step, &ctx.input_location).unwrap_err();
    // Four independent round trips (six for the probe, once per process) go out
    // together: none reads what another writes. The probe only touches this run's own
    // staging, which the sweep of others' leftovers never takes.
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
            let others = Sweep::Others {
                older_than: ctx.cfg.sweep_age,
            };
            sweep(ctx, others).await.map_err(at(Step::Sweep))
        },
        // What readers see now is the condition of our promotion (the fence).
        async { Seen::read(ctx).await.map_err(at(Step::ReadCheckpoint)) },
    )?;
    if fence != CopyFence::Fenced {
        warn!(copy_fence = %fence, "promotion is not fenced on this store: a late copy of a killed run could overwrite a newer publish (see RUNBOOK)");
    }
    crate::history::lap("prepare");
    if let Some(cur) = &prior {
        if let Some(summary) = try_skip(ctx, cur, seen.raw.as_ref()).await? {
            return Ok(Decision::Done(Box::new(summary)));
        }
    }
    let streamed = stream(ctx, lease).await?;
    crate::history::lap("stream");
    if let Some(refusal) = streamed.refusal.clone() {
        return refuse(ctx, streamed, refusal)
            .await
            .map(|s| Decision::Done(Box::new(s)));
    }
    lease.ensure_held().map_err(at(Step::Stage))?;
    let staged = complete_staging(ctx, streamed, seen, prior)
        .await
        .map_err(at(Step::Stage))?;
    crate::history::lap("stage");
    ctx.hooks.crash(CrashPoint::AfterStaging);
    Ok(Decision::Publish(Box::new(staged)))
}

/// Publish, then checkpoint last, then clean up.
async fn publish_and_commit(ctx: &Ctx<'_>, lease: &Lease, staged: &StagedRun) -> Result<Summary> {
    let at = |step| move |e: Error| Err::<(), _>(e).at(step, &ctx.input_location).unwrap_err();
    lease.ensure_held().map_err(at(Step::Publish))?;
    // Tests: the deadline was fine, now another run overtakes this one.
    ctx.hooks.pause(PausePoint::BeforePromote).await;
    let published = publish(ctx, lease, staged)
        .await
        .map_err(at(Step::Publish))?;
    crate::history::lap("promote");
    ctx.hooks.crash(CrashPoint::AfterPublish);
    lease.ensure_held().map_err(at(Step::Checkpoint))?;
    let moved = commit(ctx, staged, &published)
        .await
        .map_err(at(Step::Checkpoint))?;
    crate::history::lap("checkpoint");
    ctx.hooks.crash(CrashPoint::AfterCheckpoint);
    cleanup(ctx, staged).await;
    crate::history::lap("cleanup");
    Ok(published_summary(ctx, staged, moved))
}

/// Stopped by a signal before the publish: remove this run's staging (the lease is
/// released by the caller) and say so.
async fn interrupted(ctx: &Ctx<'_>, signal: Signal, staged: Option<&StagedRun>) -> Result<Summary> {
    warn!(signal = ?signal, "interrupted before the publish; removing this run's staging");
    // Collected first: a closure-built iterator held across an await makes the run's
    // future not `Send`, and inbox runs spawn one task per input.
    let stagings: Vec<&Staged> = staged
        .into_iter()
        .flat_map(|s| std::iter::once(&s.data).chain(&s.quarantine))
        .collect();
    for s in stagings {
        if let Err(e) = ctx.lake.discard(s).await {
            warn!(error = %e, "could not remove staging; a later run sweeps it");
        }
    }
    // Uploads dropped mid-stream are found by name: this run's staging only.
    if let Err(e) = sweep(ctx, Sweep::Own).await {
        warn!(error = %e, "could not remove this run's staging; a later run sweeps it");
    }
    let summary = Summary {
        signal: Some(signal),
        ..ctx.summary(Action::Interrupted)
    };
    log_outcome(&summary);
    Ok(summary)
}

/// Remove leftovers: of crashed runs before doing any work, or this run's own.
async fn sweep(ctx: &Ctx<'_>, which: Sweep) -> Result<()> {
    let report = ctx
        .lake
        .sweep(&ctx.layout.written(), &ctx.run_id, which)
        .await?;
    if report.aborted_uploads + report.deleted_objects > 0 {
        info!(
            aborted_uploads = report.aborted_uploads,
            deleted_objects = report.deleted_objects,
            "swept leftovers"
        );
    }
    Ok(())
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
    let intact = rec.published_path == here && meta.is_some_and(|m| rec.matches(m));
    if !intact {
        warn!(published = %here, "checkpoint names a published object that is missing or changed; republishing");
        return Ok(None);
    }
    let sha = hash_only(ctx).await.at(Step::Hash, &ctx.input_location)?;
    if sha != rec.input_sha256 {
        info!(input_sha256 = %sha, previous_sha256 = %rec.input_sha256, "input changed since the last publish");
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
    crate::history::bytes_in(reader.size);
    let progress = Progress::new("hash", reader.size, ctx.cfg.progress);
    let (sha, _) = scan(reader, &ctx.input_location, progress, 0, Scan::Hash, false).await?;
    crate::history::lap("hash");
    Ok(sha)
}

/// What the stream stage produced.
struct Streamed {
    sha256: String,
    counts: Counts,
    refusal: Option<Refusal>,
    data: Box<dyn Upload>,
    quarantine: Option<Box<dyn Upload>>,
}

/// One pass over the input: hash every byte, validate lines, and write accepted
/// lines and quarantine records to staging as they come.
async fn stream(ctx: &Ctx<'_>, lease: &Lease) -> Result<Streamed> {
    let input = &ctx.input_location;
    let reader = ctx
        .input
        .read(&ctx.input_key)
        .await
        .at(Step::Stream, input)?;
    crate::history::bytes_in(reader.size);
    let l = &ctx.layout;
    let data = ctx
        .lake
        .stage(&l.raw, &ctx.run_id)
        .await
        .at(Step::Stage, input)?;
    let v = Sequencer::new(ctx.cfg.max_rejected_lines, reader.size);
    let progress = Progress::new("land", reader.size, ctx.cfg.progress);
    let (out_tx, out_rx) = mpsc::channel::<Out>(4);
    let writer = write_staging(ctx, data, out_rx);
    let scanned = scan(
        reader,
        input,
        progress,
        ctx.cfg.max_line_bytes,
        Scan::Land(v, out_tx),
        ctx.hooks.crash_at == Some(CrashPoint::WorkerPanic),
    );
    let (scanned, written) = tokio::join!(scanned, writer);
    let (data, quarantine) = written.at(Step::Stage, input)?;
    let (sha256, v) = match scanned {
        Ok(s) => s,
        Err(e) => {
            // Abort now rather than leave an incomplete upload for the next sweep.
            let _ = data.abort().await;
            if let Some(q) = quarantine {
                let _ = q.abort().await;
            }
            return Err(e).at(Step::Stream, input);
        }
    };
    let v = v
        .ok_or_else(|| Error::store("stream", input, "validator missing"))
        .at(Step::Stream, input)?;
    lease.ensure_held().at(Step::Stream, input)?;
    info!(distinct_events = v.distinct_events(), "stream complete");
    Ok(Streamed {
        sha256,
        counts: v.counts(),
        refusal: v.refusal().cloned(),
        data,
        quarantine,
    })
}

/// The staging writer: takes the validator's output in order and writes it.
async fn write_staging(
    ctx: &Ctx<'_>,
    mut data: Box<dyn Upload>,
    mut rx: mpsc::Receiver<Out>,
) -> Result<(Box<dyn Upload>, Option<Box<dyn Upload>>)> {
    let mut quarantine: Option<Box<dyn Upload>> = None;
    let mut wrote_any = false;
    while let Some(out) = rx.recv().await {
        let written = match out {
            Out::Data(bytes) => data.write(bytes).await,
            Out::Quarantine(bytes) => flush_quarantine(ctx, &mut quarantine, bytes).await,
        };
        if let Err(e) = written {
            let _ = data.abort().await;
            if let Some(q) = quarantine {
                let _ = q.abort().await;
            }
            return Err(e);
        }
        if !wrote_any {
            wrote_any = true;
            ctx.hooks.crash(CrashPoint::MidStream);
            ctx.hooks.pause(PausePoint::MidStream).await;
        }
    }
    Ok((data, quarantine))
}

/// Quarantine records go through staging too, opened on the first reject.
async fn flush_quarantine(
    ctx: &Ctx<'_>,
    upload: &mut Option<Box<dyn Upload>>,
    records: Bytes,
) -> Result<()> {
    if upload.is_none() {
        let l = &ctx.layout;
        *upload = Some(ctx.lake.stage(&l.quarantine, &ctx.run_id).await?);
    }
    match upload.as_mut() {
        Some(u) => u.write(records).await,
        None => Ok(()),
    }
}

/// A refused file publishes nothing: drop the staging, leave raw and checkpoint alone.
async fn refuse(ctx: &Ctx<'_>, streamed: Streamed, refusal: Refusal) -> Result<Summary> {
    let input = &ctx.input_location;
    streamed.data.abort().await.at(Step::Cleanup, input)?;
    if let Some(q) = streamed.quarantine {
        q.abort().await.at(Step::Cleanup, input)?;
    }
    let summary = Summary {
        input_sha256: streamed.sha256,
        accepted_rows: streamed.counts.accepted,
        rejected_rows: streamed.counts.rejected,
        duplicate_rows: streamed.counts.duplicates,
        reason: Some(refusal),
        ..ctx.summary(Action::Refused)
    };
    log_outcome(&summary);
    Ok(summary)
}

/// Staged outputs of a run that is going to publish, with what it decided on.
struct StagedRun {
    sha256: String,
    counts: Counts,
    data: Staged,
    quarantine: Option<Staged>,
    seen: Seen,
    prior: Option<Current>,
}

async fn complete_staging(
    _ctx: &Ctx<'_>,
    s: Streamed,
    seen: Seen,
    prior: Option<Current>,
) -> Result<StagedRun> {
    let data = s.data.complete().await?;
    let quarantine = match s.quarantine {
        Some(q) => Some(q.complete().await?),
        None => None,
    };
    crate::history::bytes_out(data.size + quarantine.as_ref().map_or(0, |q| q.size));
    Ok(StagedRun {
        sha256: s.sha256,
        counts: s.counts,
        data,
        quarantine,
        seen,
        prior,
    })
}

/// Promote the data, then the quarantine, each only over what the run saw when it
/// decided. The quarantine goes second: until the checkpoint names it, a crash in
/// between leaves the old checkpoint, which no longer matches the data and is redone.
async fn publish(ctx: &Ctx<'_>, lease: &Lease, staged: &StagedRun) -> Result<ObjectMeta> {
    let seen = &staged.seen;
    let data = promote(ctx, &staged.data, seen.raw.as_ref()).await?;
    if let Some(q) = &staged.quarantine {
        lease.ensure_held()?;
        promote(ctx, q, seen.quarantine.as_ref()).await?;
    }
    Ok(data)
}

/// One fenced promotion: a 412 means another run published since we decided.
async fn promote(ctx: &Ctx<'_>, staged: &Staged, seen: Option<&ObjectMeta>) -> Result<ObjectMeta> {
    let expect = Expect::from_head(seen);
    match ctx.lake.promote(staged, &expect).await {
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
        published: PublishedVersion::of(published),
        quarantine_path: staged
            .quarantine
            .as_ref()
            .map(|_| lake.location(&ctx.layout.quarantine)),
        committed_at: crate::rfc3339(OffsetDateTime::now_utc()),
        run_id: ctx.run_id.clone(),
        job_version: crate::JOB_VERSION.to_owned(),
        input: checkpoint::InputIdentity::of(ctx.cfg.input_meta.as_ref()),
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

/// After the checkpoint: staging is garbage, and so is a quarantine of an earlier
/// publish when this one had none (the new checkpoint no longer names it). A failure
/// here is logged, not fatal: the publish and checkpoint are done.
async fn cleanup(ctx: &Ctx<'_>, staged: &StagedRun) {
    for s in std::iter::once(&staged.data).chain(staged.quarantine.as_ref()) {
        if let Err(e) = ctx.lake.discard(s).await {
            warn!(error = %e, "could not remove staging; a later run sweeps it");
        }
    }
    if staged.quarantine.is_none() && staged.seen.quarantine.is_some() {
        if let Err(e) = ctx.lake.delete(&ctx.layout.quarantine).await {
            warn!(error = %e, "could not remove the previous quarantine, which no checkpoint names now");
        }
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

/// `landing check`: the same validation, nothing written anywhere.
pub async fn check(cfg: &Config) -> Result<Summary> {
    let run_id = new_run_id();
    let input_location = cfg.input.to_string();
    let span = tracing::info_span!("check", run_id = %run_id, product = %cfg.product, input = %input_location);
    let _enter = span.enter();
    let (input, key) = open_input(cfg).await.at(Step::Connect, &input_location)?;
    let reader = input.read(&key).await.at(Step::Stream, &input_location)?;
    let v = Sequencer::new(cfg.max_rejected_lines, reader.size);
    let progress = Progress::new("check", reader.size, cfg.progress);
    let (sha256, v) = scan(
        reader,
        &input_location,
        progress,
        cfg.max_line_bytes,
        Scan::Check(v),
        false,
    )
    .await
    .at(Step::Stream, &input_location)?;
    let v = v.ok_or_else(|| Error::store("check", &input_location, "validator missing"))?;
    let c = v.counts();
    let summary = Summary {
        input_sha256: sha256,
        accepted_rows: c.accepted,
        rejected_rows: c.rejected,
        duplicate_rows: c.duplicates,
        reason: v.refusal().cloned(),
        quarantine_reasons: Some(v.first_rejects().to_vec()),
        ..Summary::new(run_id, cfg.product.clone(), input_location, Action::Checked)
    };
    log_outcome(&summary);
    Ok(summary)
}
