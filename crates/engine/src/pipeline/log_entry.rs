//! The log stage, between the publish and the checkpoint: the publish's entry in the
//! product's commit log (`crate::commit_log`), naming the version it created and the
//! one it replaced.

use time::OffsetDateTime;

use super::ctx::{Ctx, StagedRun};
use crate::checkpoint::ContractStamp;
use crate::commit_log::{self, Entry, LogKeys, Replaced};
use crate::error::Result;
use crate::store::ObjectMeta;

/// This publish's entry as far as it is known before the promote: everything but
/// its number and the version the promote creates. The promote carries it as the
/// published object's label, so that a later run can write the entry of a run that
/// died between its publish and its entry (`crate::log_repair`).
pub(super) async fn pending(ctx: &Ctx<'_>, staged: &StagedRun) -> Result<Entry> {
    let keys = LogKeys::of(&ctx.cfg.product);
    let replaced = replaced(ctx, &keys, staged).await?;
    Ok(Entry {
        sequence: 0,
        committed_at: crate::rfc3339(OffsetDateTime::now_utc()),
        product: ctx.cfg.product.clone(),
        input_name: ctx.cfg.input_name.clone(),
        key: ctx.layout.raw.clone(),
        published_size: staged.data.size,
        published: None,
        published_sha256: staged.published_sha256.clone(),
        output_compression: ctx.cfg.output_compression,
        input_sha256: staged.sha256.clone(),
        accepted_rows: staged.counts.accepted,
        rejected_rows: staged.counts.rejected,
        duplicate_rows: staged.counts.duplicates,
        quarantine_key: staged
            .quarantine
            .as_ref()
            .map(|_| ctx.layout.quarantine.clone()),
        contract: ContractStamp::of(&ctx.cfg.contract),
        run_id: ctx.run_id.clone(),
        job_version: crate::JOB_VERSION.to_owned(),
        replaced,
    })
}

/// Append this publish's entry, `pending` with the version the promote created;
/// its number goes into the checkpoint.
pub(super) async fn log(ctx: &Ctx<'_>, pending: &Entry, published: &ObjectMeta) -> Result<u64> {
    let keys = LogKeys::of(&ctx.cfg.product);
    let entry = Entry {
        committed_at: crate::rfc3339(OffsetDateTime::now_utc()),
        published_size: published.size,
        published: Some(published.version.clone()),
        ..pending.clone()
    };
    commit_log::append(&*ctx.lake, &keys, entry, ctx.appender).await
}

/// What this publish replaced: the version the run saw when it decided, and the
/// entry that named it. The checkpoint says which entry, when it still describes that
/// version; otherwise (a run stopped between its publish and its checkpoint) the
/// log's recent entries are searched for it.
async fn replaced(ctx: &Ctx<'_>, keys: &LogKeys, staged: &StagedRun) -> Result<Option<Replaced>> {
    let Some(seen) = staged.existing.raw.as_ref() else {
        return Ok(None);
    };
    let prior = staged.prior.as_ref().map(|c| &c.record);
    if let Some(rec) = prior.filter(|r| r.matches(seen)) {
        return Ok(Some(Replaced {
            sequence: rec.log_sequence,
            published_size: seen.size,
            published: Some(seen.version.clone()),
            published_sha256: rec.published_sha256.clone(),
        }));
    }
    let floor = prior.and_then(|r| r.log_sequence).unwrap_or(0);
    let named = commit_log::latest_of(&*ctx.lake, keys, &ctx.layout.raw, floor).await?;
    Ok(Some(Replaced::of(
        seen,
        named.as_ref().filter(|e| e.names(seen)),
    )))
}
