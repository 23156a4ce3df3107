//! The run as named stages over the [`Store`] trait. Each stage is a function that
//! fits on a screen; [`run`] strings them together in the order of the contract:
//!
//! lease → read checkpoint → sweep → (hash, skip?) → stream + stage → publish →
//! checkpoint (last, compare-and-swap) → cleanup → release.

mod scan;
mod validator;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use bytes::Bytes;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tracing::{info, warn};

use scan::{scan, Out};
use validator::Sequencer;
pub use validator::{Counts, Validator, CHECK_REASONS};

use crate::checkpoint::{self, Checkpoint, Current};
use crate::config::{Config, CrashPoint, Location, S3Config};
use crate::error::{Error, Result, Step, StepExt};
use crate::lease::Lease;
use crate::progress::Progress;
use crate::store::local::LocalStore;
use crate::store::s3::S3Store;
use crate::store::{ObjectMeta, StageSpec, Staged, Store, SweepSpec, Upload};
use crate::summary::{Action, Refusal, Summary};

/// Where one input's objects live in the lake (DESIGN.md section 3).
#[derive(Debug, Clone)]
pub struct Layout {
    pub raw: String,
    pub quarantine: String,
    pub checkpoint: String,
    pub lock: String,
    pub staging_prefix: String,
    pub input_name: String,
    pub quarantine_name: String,
}

impl Layout {
    pub fn new(product: &str, input_name: &str) -> Self {
        let quarantine_name = format!("{input_name}.rejects.jsonl");
        Layout {
            raw: format!("raw/{product}/{input_name}"),
            quarantine: format!("quarantine/{product}/{quarantine_name}"),
            checkpoint: format!("checkpoints/{product}/{input_name}.json"),
            lock: format!("locks/{product}/{input_name}.lock"),
            staging_prefix: format!("staging/{product}/"),
            input_name: input_name.to_owned(),
            quarantine_name,
        }
    }

    fn stage_spec(&self, dest_key: &str, name: &str, run_id: &str) -> StageSpec {
        StageSpec {
            dest_key: dest_key.to_owned(),
            run_id: run_id.to_owned(),
            staging_key: format!("{}{run_id}/{name}", self.staging_prefix),
        }
    }
}

/// Everything a stage needs, opened once per run.
struct Ctx<'a> {
    cfg: &'a Config,
    run_id: String,
    input: Arc<dyn Store>,
    input_key: String,
    input_location: String,
    lake: Arc<dyn Store>,
    layout: Layout,
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

/// Open a store rooted at a location (a folder, or an S3 bucket plus prefix).
pub(crate) async fn open_store(loc: &Location, s3: &S3Config) -> Result<Arc<dyn Store>> {
    Ok(match loc {
        Location::Local(dir) => Arc::new(LocalStore::new(dir.clone())),
        Location::S3 { bucket, key } => Arc::new(S3Store::from_env(bucket, key, s3).await?),
    })
}

/// Open the input as (store rooted at its folder or bucket, key of the input).
async fn open_input(cfg: &Config) -> Result<(Arc<dyn Store>, String)> {
    match &cfg.input {
        Location::Local(path) => {
            let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
            let dir = dir.map_or_else(|| std::path::PathBuf::from("."), |d| d.to_path_buf());
            Ok((Arc::new(LocalStore::new(dir)), cfg.input_name.clone()))
        }
        Location::S3 { bucket, key } => {
            let store = S3Store::from_env(bucket, "", &cfg.s3).await?;
            Ok((Arc::new(store), key.clone()))
        }
    }
}

/// Crash drills: die here if this is the configured crash point.
fn crash_point(cfg: &Config, point: CrashPoint) {
    if cfg.crash_at == Some(point) {
        point.fire();
    }
}

/// `landing run`: land one input under the run contract.
pub async fn run(cfg: &Config) -> Result<Summary> {
    let run_id = new_run_id();
    let input_location = cfg.input.to_string();
    let span = tracing::info_span!("run", run_id = %run_id, product = %cfg.product, input = %input_location);
    let _enter = span.enter();
    let (input, input_key) = open_input(cfg).await.at(Step::Connect, &input_location)?;
    if let Location::Local(dir) = &cfg.lake {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::store("create lake folder", dir.display().to_string(), e))
            .at(Step::Connect, &input_location)?;
    }
    let lake = open_store(&cfg.lake, &cfg.s3)
        .await
        .at(Step::Connect, &input_location)?;
    let layout = Layout::new(&cfg.product, &cfg.input_name);
    let lease = Lease::acquire(lake.clone(), &layout.lock, &run_id, cfg.lease_ttl)
        .await
        .at(Step::Lease, &input_location)?;
    let ctx = Ctx {
        cfg,
        run_id,
        input,
        input_key,
        input_location,
        lake,
        layout,
    };
    let result = run_leased(&ctx, &lease).await;
    if let Err(e) = lease.release().await {
        warn!(error = %e, "could not release the lease; it expires on its own");
    }
    result
}

async fn run_leased(ctx: &Ctx<'_>, lease: &Lease) -> Result<Summary> {
    let at = |step| move |e: Error| Err::<(), _>(e).at(step, &ctx.input_location).unwrap_err();
    let prior = checkpoint::read(
        &*ctx.lake,
        &ctx.layout.checkpoint,
        &ctx.cfg.product,
        &ctx.cfg.input_name,
    )
    .await
    .map_err(at(Step::ReadCheckpoint))?;
    sweep(ctx).await.map_err(at(Step::Sweep))?;
    if let Some(cur) = &prior {
        if let Some(summary) = try_skip(ctx, cur).await? {
            return Ok(summary);
        }
    }
    let streamed = stream(ctx, lease).await?;
    if let Some(refusal) = streamed.refusal.clone() {
        return refuse(ctx, streamed, refusal).await;
    }
    let staged = complete_staging(ctx, streamed)
        .await
        .map_err(at(Step::Stage))?;
    crash_point(ctx.cfg, CrashPoint::AfterStaging);
    lease.ensure_held().map_err(at(Step::Publish))?;
    let published = publish(ctx, &staged).await.map_err(at(Step::Publish))?;
    crash_point(ctx.cfg, CrashPoint::AfterPublish);
    lease.ensure_held().map_err(at(Step::Checkpoint))?;
    let moved = commit(ctx, &staged, &published, prior.as_ref())
        .await
        .map_err(at(Step::Checkpoint))?;
    crash_point(ctx.cfg, CrashPoint::AfterCheckpoint);
    cleanup(ctx, &staged).await;
    Ok(published_summary(ctx, &staged, moved))
}

/// Remove leftovers of crashed runs before doing any work.
async fn sweep(ctx: &Ctx<'_>) -> Result<()> {
    let l = &ctx.layout;
    let spec = SweepSpec {
        dest_keys: vec![l.raw.clone(), l.quarantine.clone(), l.checkpoint.clone()],
        staging_prefix: l.staging_prefix.clone(),
        names: vec![l.input_name.clone(), l.quarantine_name.clone()],
        keep_run_id: ctx.run_id.clone(),
        older_than: ctx.cfg.sweep_age,
    };
    let report = ctx.lake.sweep(&spec).await?;
    if report.aborted_uploads + report.deleted_objects > 0 {
        info!(
            aborted_uploads = report.aborted_uploads,
            deleted_objects = report.deleted_objects,
            "swept leftovers of earlier runs"
        );
    }
    Ok(())
}

/// Skip rule: the checkpoint's hash equals the input's and the published object it
/// names is still there, unchanged. Costs one read of the input, writes nothing.
async fn try_skip(ctx: &Ctx<'_>, cur: &Current) -> Result<Option<Summary>> {
    let rec = &cur.record;
    let here = ctx.lake.location(&ctx.layout.raw);
    let meta = ctx
        .lake
        .head(&ctx.layout.raw)
        .await
        .at(Step::ReadCheckpoint, &ctx.input_location)?;
    let intact = rec.published_path == here && meta.as_ref().is_some_and(|m| rec.matches(m));
    if !intact {
        warn!(published = %here, "checkpoint names a published object that is missing or changed; republishing");
        return Ok(None);
    }
    let sha = hash_only(ctx).await.at(Step::Hash, &ctx.input_location)?;
    if sha != rec.input_sha256 {
        info!(input_sha256 = %sha, previous_sha256 = %rec.input_sha256, "input changed since the last publish");
        return Ok(None);
    }
    let summary = Summary {
        run_id: ctx.run_id.clone(),
        product: ctx.cfg.product.clone(),
        input: ctx.input_location.clone(),
        input_sha256: sha,
        action: Action::Skipped,
        accepted_rows: rec.accepted_rows,
        rejected_rows: rec.rejected_rows,
        duplicate_rows: rec.duplicate_rows,
        published_path: Some(rec.published_path.clone()),
        quarantine_path: rec.quarantine_path.clone(),
        checkpoint_moved: false,
        reason: None,
        quarantine_reasons: None,
    };
    log_outcome(&summary);
    Ok(Some(summary))
}

async fn hash_only(ctx: &Ctx<'_>) -> Result<String> {
    let reader = ctx.input.read(&ctx.input_key).await?;
    let progress = Progress::new("hash", reader.size, ctx.cfg.progress);
    let (sha, _) = scan(reader, &ctx.input_location, progress, 0, None).await?;
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
    let l = &ctx.layout;
    let data = ctx
        .lake
        .stage(&l.stage_spec(&l.raw, &l.input_name, &ctx.run_id))
        .await
        .at(Step::Stage, input)?;
    let v = Sequencer::new(ctx.cfg.max_rejected_lines, reader.size, random_u64());
    let progress = Progress::new("land", reader.size, ctx.cfg.progress);
    let (out_tx, out_rx) = mpsc::channel::<Out>(4);
    let writer = write_staging(ctx, data, out_rx);
    let scanned = scan(
        reader,
        input,
        progress,
        ctx.cfg.max_line_bytes,
        Some((v, Some(out_tx))),
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
            crash_point(ctx.cfg, CrashPoint::MidStream);
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
        let spec = l.stage_spec(&l.quarantine, &l.quarantine_name, &ctx.run_id);
        *upload = Some(ctx.lake.stage(&spec).await?);
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
        run_id: ctx.run_id.clone(),
        product: ctx.cfg.product.clone(),
        input: input.clone(),
        input_sha256: streamed.sha256,
        action: Action::Refused,
        accepted_rows: streamed.counts.accepted,
        rejected_rows: streamed.counts.rejected,
        duplicate_rows: streamed.counts.duplicates,
        published_path: None,
        quarantine_path: None,
        checkpoint_moved: false,
        reason: Some(refusal),
        quarantine_reasons: None,
    };
    log_outcome(&summary);
    Ok(summary)
}

/// Staged outputs of a run that is going to publish.
struct StagedRun {
    sha256: String,
    counts: Counts,
    data: Staged,
    quarantine: Option<Staged>,
}

async fn complete_staging(_ctx: &Ctx<'_>, s: Streamed) -> Result<StagedRun> {
    let data = s.data.complete().await?;
    let quarantine = match s.quarantine {
        Some(q) => Some(q.complete().await?),
        None => None,
    };
    Ok(StagedRun {
        sha256: s.sha256,
        counts: s.counts,
        data,
        quarantine,
    })
}

/// Promote quarantine then data. A quarantine left by an earlier publish of this
/// input no longer describes it, so it goes when this one has none.
async fn publish(ctx: &Ctx<'_>, staged: &StagedRun) -> Result<ObjectMeta> {
    match &staged.quarantine {
        Some(q) => {
            ctx.lake.promote(q).await?;
        }
        None => ctx.lake.delete(&ctx.layout.quarantine).await?,
    }
    ctx.lake.promote(&staged.data).await
}

/// Write the checkpoint last, against the version read at the start. If another
/// writer moved it, accept only a checkpoint that already describes our bytes.
async fn commit(
    ctx: &Ctx<'_>,
    staged: &StagedRun,
    published: &ObjectMeta,
    prior: Option<&Current>,
) -> Result<bool> {
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
        published_etag: published.etag.clone(),
        published_mtime_ns: published.mtime_ns,
        quarantine_path: staged
            .quarantine
            .as_ref()
            .map(|_| lake.location(&ctx.layout.quarantine)),
        committed_at: OffsetDateTime::now_utc()
            .format(&Rfc3339)
            .unwrap_or_default(),
        run_id: ctx.run_id.clone(),
        job_version: crate::JOB_VERSION.to_owned(),
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
                    "checkpoint {} was moved by run {} to input {} while this run published {}; not overwriting. Rerun to reconcile",
                    lake.location(key),
                    c.record.run_id,
                    c.record.input_sha256,
                    record.input_sha256
                ))),
                None => Err(Error::Conflict(format!(
                    "checkpoint {} was deleted by another writer during this run; not overwriting. Rerun to reconcile",
                    lake.location(key)
                ))),
            }
        }
        Err(e) => Err(e),
    }
}

/// After the checkpoint: staging is garbage. A failure here is logged, not fatal:
/// the publish and checkpoint are done and the next run sweeps what is left.
async fn cleanup(ctx: &Ctx<'_>, staged: &StagedRun) {
    for s in std::iter::once(&staged.data).chain(staged.quarantine.as_ref()) {
        if let Err(e) = ctx.lake.discard(s).await {
            warn!(error = %e, "could not remove staging; a later run sweeps it");
        }
    }
}

fn published_summary(ctx: &Ctx<'_>, staged: &StagedRun, moved: bool) -> Summary {
    let summary = Summary {
        run_id: ctx.run_id.clone(),
        product: ctx.cfg.product.clone(),
        input: ctx.input_location.clone(),
        input_sha256: staged.sha256.clone(),
        action: Action::Published,
        accepted_rows: staged.counts.accepted,
        rejected_rows: staged.counts.rejected,
        duplicate_rows: staged.counts.duplicates,
        published_path: Some(ctx.lake.location(&ctx.layout.raw)),
        quarantine_path: staged
            .quarantine
            .as_ref()
            .map(|_| ctx.lake.location(&ctx.layout.quarantine)),
        checkpoint_moved: moved,
        reason: None,
        quarantine_reasons: None,
    };
    log_outcome(&summary);
    summary
}

fn log_outcome(s: &Summary) {
    let reason = s.reason.as_ref().map(|r| r.to_string());
    info!(
        input_sha256 = %s.input_sha256,
        action = ?s.action,
        accepted_rows = s.accepted_rows,
        rejected_rows = s.rejected_rows,
        duplicate_rows = s.duplicate_rows,
        checkpoint_moved = s.checkpoint_moved,
        reason = reason.as_deref().unwrap_or(""),
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
    let v = Sequencer::new(cfg.max_rejected_lines, reader.size, random_u64());
    let progress = Progress::new("check", reader.size, cfg.progress);
    let (sha256, v) = scan(
        reader,
        &input_location,
        progress,
        cfg.max_line_bytes,
        Some((v, None)),
    )
    .await
    .at(Step::Stream, &input_location)?;
    let v = v.ok_or_else(|| Error::store("check", &input_location, "validator missing"))?;
    let c = v.counts();
    let summary = Summary {
        run_id,
        product: cfg.product.clone(),
        input: input_location,
        input_sha256: sha256,
        action: Action::Checked,
        accepted_rows: c.accepted,
        rejected_rows: c.rejected,
        duplicate_rows: c.duplicates,
        published_path: None,
        quarantine_path: None,
        checkpoint_moved: false,
        reason: v.refusal().cloned(),
        quarantine_reasons: Some(v.first_rejects().to_vec()),
    };
    log_outcome(&summary);
    Ok(summary)
}
