//! The end of staging: complete the staged outputs and, for a spilled run that
//! staged every line and whose merge found later copies, write the filtered copy
//! (the second pass).

use super::ctx::{Ctx, Existing, StagedRun};
use super::second_pass::second_pass;
use super::stream::Streamed;
use crate::checkpoint::Current;
use crate::error::Result;
use crate::store::Fence;

/// Complete what the stream stage staged; the result carries what the run decided on.
pub(super) async fn complete(
    ctx: &Ctx<'_>,
    s: Streamed,
    existing: Existing,
    prior: Option<Current>,
    fence: Fence,
) -> Result<StagedRun> {
    let (mut data, mut published_sha256) = s.data.complete().await?;
    if let Some(drops) = &s.drops {
        // The merge found later copies in the staged output: a filtered copy of it.
        let output = ctx.cfg.output_compression;
        (data, published_sha256) =
            second_pass(&*ctx.lake, data, drops, &ctx.run_id, ctx.hooks, output).await?;
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
        published_sha256,
        quarantine,
        existing,
        prior,
        fence,
        spill: s.spill,
    })
}
