//! The prepare stage, before anything is written: probe the store's copy fence,
//! read the checkpoint and what is published, sweep when an earlier holder may have
//! left staging; then the skip rule, which hashes the input and writes nothing.

use tracing::{info, warn};

use super::ctx::{log_outcome, Ctx, Existing};
use super::resolve::digester;
use super::scan::{scan, Scan};
use super::tidy::sweep_others;
use crate::checkpoint::{self, Current};
use crate::error::{Error, Result, Step, StepExt};
use crate::lease::{Inherited, Lease};
use crate::store::{CopyFence, Fence, ObjectMeta};
use crate::summary::Summary;

/// What the run knows before it streams: the conditions of its writes.
pub(super) struct Prepared {
    /// What the store's probe found: the promotions are sent under it.
    pub(super) fence: Fence,
    /// The checkpoint read at the start: the condition of the checkpoint write.
    pub(super) prior: Option<Current>,
    /// What readers see now: the condition of the promotions.
    pub(super) existing: Existing,
}

/// Read the conditions of the run's writes, sweeping first where needed.
pub(super) async fn prepare(ctx: &Ctx<'_>, lease: &Lease) -> Result<Prepared> {
    let at = |step| move |e: Error| e.at(step, &ctx.input_location);
    // Up to four independent round trips (six for the probe, once per store) go out
    // together: none reads what another writes. The probe only touches this run's own
    // staging, which the sweep of others' leftovers never takes. The sweep only if the
    // lease was taken over, or released by a run that did not leave staging clean.
    let (fence, prior, (), existing) = tokio::try_join!(
        async {
            let fence = ctx.lake.fencing(&ctx.layout.raw, &ctx.run_id).await;
            fence.map_err(at(Step::Connect))
        },
        async {
            // No lease existed until ours, so none was held since the caller read the
            // checkpoint: only a holder writes it, and a lease record outlives its
            // release. (A lease deleted by hand in that instant still cannot double
            // or tear: the promotion's fence and the checkpoint's compare-and-swap
            // read the lake as it is, and fail the run with a conflict.)
            if let (Inherited::Fresh, Some(read)) =
                (lease.inherited(), &ctx.checkpoint_before_lease)
            {
                return Ok(read.found.clone());
            }
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
        async {
            if never_landed(ctx, lease) && fenced(ctx).await.map_err(at(Step::Connect))? {
                return Ok(Existing::assumed_absent());
            }
            Existing::read(ctx).await.map_err(at(Step::ReadCheckpoint))
        },
    )?;
    // No lease existed, yet the input was landed before (a checkpoint, or something
    // published under its name): its lease was deleted by hand, and whatever its
    // holder left is unknown.
    let landed = prior.is_some() || existing.raw.is_some() || existing.quarantine.is_some();
    if lease.inherited() == Inherited::Fresh && landed {
        sweep_others(ctx).await.map_err(at(Step::Sweep))?;
    }
    if fence.verdict() != CopyFence::Fenced {
        warn!(copy_fence = %fence, "promotion is not fenced on this store: a late copy of a killed run could overwrite a newer publish (see RUNBOOK)");
    }
    ctx.trace.lap("prepare");
    Ok(Prepared {
        fence,
        prior,
        existing,
    })
}

/// No run of this input ever held its lease (none existed until ours, and a lease
/// record outlives its release) and it had no checkpoint before ours: so no run
/// wrote its published object or quarantine, and a first landing of an inbox input
/// saves their two HEADs. Only on a store whose promotions are fenced: one there
/// all the same (a crashed run's whose lease was deleted by hand, or one placed by
/// hand) fails the promotion's create, and the publish reads it then.
fn never_landed(ctx: &Ctx<'_>, lease: &Lease) -> bool {
    let no_checkpoint = matches!(
        ctx.checkpoint_before_lease,
        Some(crate::pipeline::CheckpointRead { found: None })
    );
    lease.inherited() == Inherited::Fresh && no_checkpoint
}

/// Does the store fence promotions? The probe runs once per store; every later
/// call answers from it.
async fn fenced(ctx: &Ctx<'_>) -> Result<bool> {
    let fence = ctx.lake.fencing(&ctx.layout.raw, &ctx.run_id).await?;
    Ok(fence.verdict() == CopyFence::Fenced)
}

/// Skip rule: the checkpoint's hash equals the input's and the published object it
/// names is still there, unchanged. Costs one read of the input, writes nothing.
pub(super) async fn try_skip(
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
    if ctx.cfg.rehash && !rec.landed_under(&ctx.cfg.contract) {
        info!(contract = %ctx.cfg.contract.label(), "landed under another contract; re-landing (--rehash)");
        return Ok(None);
    }
    let key = &ctx.layout.checkpoint;
    checkpoint::upgrade_identity(&*ctx.lake, key, cur, ctx.input_meta.as_ref()).await;
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
    let reader = ctx.input.read(&ctx.input_key, 0).await?;
    ctx.trace.bytes_in(reader.size);
    let progress =
        ctx.terminal
            .progress("hash", &ctx.cfg.input_name, reader.size, ctx.cfg.progress);
    let d = digester(ctx.hooks.pass());
    let limits = super::pass::limits(ctx.cfg);
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
