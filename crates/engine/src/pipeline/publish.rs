//! The publish stage and the checkpoint after it: promote the data, then the
//! quarantine, each fenced on what the run saw; then write the checkpoint last,
//! compare-and-swap on the version read at the start.

use time::OffsetDateTime;
use tracing::{info, warn};

use super::ctx::{log_outcome, Ctx, Existing, StagedRun};
use super::log_entry;
use super::tidy::sweep_others;
use crate::checkpoint::{self, Checkpoint};
use crate::commit_log::{self, Entry};
use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::store::{Fence, ObjectMeta, PutMode, Staged, Version};
use crate::summary::{Action, Summary};

/// Promote the data, then the quarantine, each only over what the run saw when it
/// decided. The quarantine goes second: until the checkpoint names it, a crash in
/// between leaves the old checkpoint, which no longer matches the data and is redone.
/// What was inferred absent and is there all the same is read, then replaced, as a
/// run that had read it first would: `staged.existing` says what was replaced.
pub(super) async fn publish(
    ctx: &Ctx<'_>,
    lease: &Lease,
    staged: &mut StagedRun,
) -> Result<(ObjectMeta, Entry)> {
    let mut entry = labelled(ctx, staged).await?;
    let data = match promote(
        ctx,
        &staged.data,
        staged.existing.raw.as_ref(),
        staged.fence,
    )
    .await
    {
        Err(Error::Precondition { .. }) if staged.existing.assumed => {
            let (existing, ()) =
                tokio::try_join!(Existing::read(ctx), there_after_all(ctx, &ctx.layout.raw))?;
            staged.existing = existing;
            // What it replaces changed: so do the entry and the label.
            entry = labelled(ctx, staged).await?;
            let seen = staged.existing.raw.as_ref();
            promote(ctx, &staged.data, seen, staged.fence).await
        }
        other => other,
    }
    .map_err(|e| conflict(e, staged.existing.raw.as_ref()))?;
    if let Some(q) = &staged.quarantine {
        lease.ensure_held()?;
        let existing = &mut staged.existing;
        match promote(ctx, q, existing.quarantine.as_ref(), staged.fence).await {
            Err(Error::Precondition { .. }) if existing.assumed => {
                // Only the quarantine: the data under its name is this run's now.
                let (quarantine, ()) = tokio::try_join!(
                    ctx.lake.head(&ctx.layout.quarantine),
                    there_after_all(ctx, &ctx.layout.quarantine)
                )?;
                existing.quarantine = quarantine;
                existing.assumed = false;
                promote(ctx, q, existing.quarantine.as_ref(), staged.fence).await
            }
            other => other,
        }
        .map_err(|e| conflict(e, existing.quarantine.as_ref()))?;
    }
    Ok((data, entry))
}

/// This publish's pending entry (`log_entry::pending`), set as the label of both
/// promotions: the data's lets a later run write the entry if this one dies before
/// it does, and the quarantine's shows that it came with the same run's data.
async fn labelled(ctx: &Ctx<'_>, staged: &mut StagedRun) -> Result<Entry> {
    let entry = log_entry::pending(ctx, staged).await?;
    let label = commit_log::label(&entry);
    if label.is_none() {
        warn!("this publish's entry is too long to travel with its object: only the input's own next run can write it if this run dies before it does");
    }
    staged.data.label.clone_from(&label);
    if let Some(q) = staged.quarantine.as_mut() {
        q.label = label;
    }
    Ok(entry)
}

/// A run landed this input after all, its lease since deleted by hand: what it left
/// in staging is unknown, so it is swept, as when a checkpoint shows up without a
/// lease (`prepare`).
async fn there_after_all(ctx: &Ctx<'_>, key: &str) -> Result<()> {
    warn!(key, "an object is there though no run had landed this input (its lease deleted by hand?); publishing over it");
    sweep_others(ctx).await
}

/// One promotion over `seen`, fenced where the store allows.
async fn promote(
    ctx: &Ctx<'_>,
    staged: &Staged,
    seen: Option<&ObjectMeta>,
    fence: Fence,
) -> Result<ObjectMeta> {
    ctx.lake
        .promote(staged, &PutMode::replacing(seen), fence)
        .await
}

/// A promotion's 412 means another run published since we decided.
fn conflict(e: Error, seen: Option<&ObjectMeta>) -> Error {
    match e {
        Error::Precondition { location } => Error::Conflict(format!(
            "conflict: {location} changed since this run decided ({}); another run published it. Nothing more was written; rerun to reconcile",
            match seen.map(|m| &m.version) {
                None => "it was absent".to_owned(),
                Some(Version::ETag(e)) => format!("it had ETag {e}"),
                Some(Version::File { .. }) => "the file was replaced".to_owned(),
            }
        )),
        other => other,
    }
}

/// Write the checkpoint last, against the version read at the start. If another
/// writer moved it, accept only a checkpoint that already describes our bytes.
pub(super) async fn commit(
    ctx: &Ctx<'_>,
    staged: &StagedRun,
    published: &ObjectMeta,
    log_sequence: u64,
) -> Result<bool> {
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
        published: Some(published.version.clone()),
        quarantine_path: staged
            .quarantine
            .as_ref()
            .map(|_| lake.location(&ctx.layout.quarantine)),
        committed_at: crate::rfc3339(OffsetDateTime::now_utc()),
        run_id: ctx.run_id.clone(),
        job_version: crate::JOB_VERSION.to_owned(),
        input: checkpoint::InputIdentity::of(ctx.input_meta.as_ref()),
        contract: Some(checkpoint::ContractStamp::of(&ctx.cfg.contract)),
        published_sha256: Some(staged.published_sha256.clone()),
        log_sequence: Some(log_sequence),
    };
    let key = &ctx.layout.checkpoint;
    match checkpoint::write(lake, key, &record, prior.map(|c| &c.version)).await {
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

pub(super) fn published_summary(
    ctx: &Ctx<'_>,
    staged: &StagedRun,
    moved: bool,
    log_sequence: u64,
) -> Summary {
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
        log_sequence: Some(log_sequence),
        spill: staged.spill,
        ..ctx.summary(Action::Published)
    };
    log_outcome(&summary);
    summary
}
