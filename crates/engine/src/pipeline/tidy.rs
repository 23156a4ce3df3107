//! Staging hygiene: the sweep of other runs' leftovers, the cleanup after the
//! checkpoint, and the removal of this run's staging when it stops early. Each
//! clears the run's `clean` mark when it may leave staging behind.

use std::sync::atomic::Ordering;

use tracing::{info, warn};

use super::ctx::{log_outcome, Ctx, StagedRun};
use crate::compression::OutputCompression;
use crate::error::Result;
use crate::store::{Staged, Sweep};
use crate::summary::{Action, Signal, Summary};

/// Stopped by a signal before the publish: remove this run's staging (the lease is
/// released by the caller) and say so.
pub(super) async fn interrupted(
    ctx: &Ctx<'_>,
    signal: Signal,
    staged: Option<&StagedRun>,
) -> Result<Summary> {
    warn!(signal = ?signal, "interrupted before the publish; removing this run's staging");
    // Collected first: a closure-built iterator held across an await makes the run's
    // future not `Send`, and inbox runs spawn one task per input.
    let stagings: Vec<&Staged> = staged
        .into_iter()
        .flat_map(|s| std::iter::once(&s.data).chain(&s.quarantine))
        .collect();
    for s in stagings {
        if let Err(e) = ctx.lake.delete(&s.key).await {
            ctx.clean.store(false, Ordering::SeqCst);
            warn!(error = %e, "could not remove staging; a later run sweeps it");
        }
    }
    // Uploads dropped mid-stream are found by name: this run's staging only.
    if let Err(e) = sweep(ctx, Sweep::Own).await {
        ctx.clean.store(false, Ordering::SeqCst);
        warn!(error = %e, "could not remove this run's staging; a later run sweeps it");
    }
    let summary = Summary {
        signal: Some(signal),
        ..ctx.summary(Action::Interrupted)
    };
    log_outcome(&summary);
    Ok(summary)
}

/// Remove other runs' leftovers of this input (`--sweep-age` and older) before
/// doing any work.
pub(super) async fn sweep_others(ctx: &Ctx<'_>) -> Result<()> {
    let others = Sweep::Others {
        older_than: ctx.cfg.sweep_age,
    };
    sweep(ctx, others).await
}

/// Remove leftovers: of crashed runs before doing any work, or this run's own.
pub(super) async fn sweep(ctx: &Ctx<'_>, which: Sweep) -> Result<()> {
    let report = ctx
        .lake
        .sweep(&ctx.layout.written(), &ctx.run_id, which)
        .await?;
    if report.kept > 0 {
        // Too young for `--sweep-age`, or a live writer's: a later run sweeps them.
        ctx.clean.store(false, Ordering::SeqCst);
        info!(kept = report.kept, "left leftovers of other runs");
    }
    if report.aborted_uploads + report.deleted_objects > 0 {
        info!(
            aborted_uploads = report.aborted_uploads,
            deleted_objects = report.deleted_objects,
            "swept leftovers"
        );
    }
    Ok(())
}

/// Stopped after losing the lease: remove what this run staged. The run that took the
/// lease over swept other runs' staging before its own work, and a write of this run
/// can land after that sweep (a run frozen mid-upload, then resumed), where no later
/// run looks once that holder released the lease clean. Only keys under this run's
/// own id are touched, which no other run writes; deletes pass no lease gate.
pub(super) async fn lost_lease(ctx: &Ctx<'_>) {
    if let Err(e) = sweep(ctx, Sweep::Own).await {
        warn!(error = %e, "lost the lease and could not remove this run's staging; a run that takes a lease over sweeps it");
    }
}

/// Discard this run's staged data and quarantine; a failure leaves the run unclean.
pub(super) async fn remove_staging(ctx: &Ctx<'_>, staged: &StagedRun) {
    for s in std::iter::once(&staged.data).chain(staged.quarantine.as_ref()) {
        if let Err(e) = ctx.lake.delete(&s.key).await {
            ctx.clean.store(false, Ordering::SeqCst);
            warn!(error = %e, "could not remove staging; a later run sweeps it");
        }
    }
}

/// After the checkpoint: staging is garbage, and so is a quarantine of an earlier
/// publish when this one had none (the new checkpoint no longer names it). A failure
/// here is logged, not fatal: the publish and checkpoint are done.
pub(super) async fn cleanup(ctx: &Ctx<'_>, staged: &StagedRun) {
    remove_staging(ctx, staged).await;
    if staged.quarantine.is_none() && staged.existing.quarantine.is_some() {
        if let Err(e) = ctx.lake.delete(&ctx.layout.quarantine).await {
            warn!(error = %e, "could not remove the previous quarantine, which no checkpoint names now");
        }
    }
    // Published before under another --output-compression: the job may not delete
    // in raw/ (least privilege), so the old object stays until an operator removes
    // it (RUNBOOK); readers would see its events twice.
    if let Some(prior) = &staged.prior {
        let before = OutputCompression::ALL
            .into_iter()
            .map(|c| ctx.lake.location(&ctx.layout.raw_as(c)))
            .find(|old| {
                *old != ctx.lake.location(&ctx.layout.raw) && prior.record.published_path == *old
            });
        if let Some(old) = before {
            warn!(previous = %old, "this input was published under another --output-compression before; that object stays and no checkpoint names it now: remove it (RUNBOOK, changing --output-compression)");
        }
    }
}
