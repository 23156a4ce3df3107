//! `landing status`, `landing verify` (docs/design.md section 7) and `landing feed`
//! (the commit log, for readers): what the lake holds, read-only. None takes a lease
//! or writes anything.
//!
//! `verify` findings, one per line, each naming the input (RUNBOOK.md says what to do
//! about each):
//!
//! | finding | what differs |
//! |---|---|
//! | `corrupt_checkpoint` | the checkpoint does not parse or names another input |
//! | `elsewhere` | the checkpoint's `published_path` is not this lake's `raw/` key |
//! | `missing` | the published object is absent |
//! | `size` | the published object's size is not the recorded one |
//! | `changed` | same size, but its ETag (S3) or file identity (local) is not the recorded one |
//! | `line_count` | (`--deep`) its line count is not `accepted_rows` |
//! | `not_canonical` | (`--deep`) a line is not the canonical form of a valid event, byte for byte (a CRLF line end or a BOM counts) |
//! | `corrupt_compression` | (`--deep`) a compressed published object does not decode to its end |
//! | `duplicate_event_id` | (`--deep`) two lines share an identity (the contract's `identity` field, which the message names; `event_id` for `progress`) |
//! | `quarantine_missing` | (`--deep`) `rejected_rows` > 0 but no quarantine object |
//! | `quarantine_count` | (`--deep`) the quarantine holds another number of records |
//! | `unnamed` | a file under `raw/` or `quarantine/` that no checkpoint names (the readers' zones hold only published data) |
//! | `log_missing` | the checkpoint's `log_sequence` names a commit log entry that does not exist |
//! | `log_mismatch` | the checkpoint's entry names another key or version than the checkpoint |
//! | `log_stale` | a key's latest log entry names a version that is not the one published, where no checkpoint finding says so already (a checkpoint lost, an object changed or removed since) |
//! | `log_corrupt` | the log has a gap or an entry that does not parse (from its latest snapshot on) |
//! | `leftover` | a run's temp file, or a guard file of an earlier version, under `raw/` or `quarantine/` |
//!
//! `--deep` reads each object through the landing's own pass
//! (`pipeline::read_published`, see `deep.rs`), within the memory budget.
//!
//! Beside the findings, `verify` lists each input landed under another contract
//! than the one in force (`other_contract`): a notice, not a drift (exit code
//! unchanged); `run --inbox --rehash` re-lands them.

use std::sync::Arc;

use crate::config::AuditConfig;
use crate::error::Result;

use crate::layout::Folders;
use crate::store::{Lake, Store};

/// Inputs examined at once by `status` and `verify` (small requests each).
pub(super) const AUDIT_CONCURRENCY: usize = 8;

/// Run `f` for every name, up to `n` at once; results in the order of `names`.
async fn in_order<T, F, Fut>(
    lake: &Arc<dyn Lake>,
    product: &str,
    names: Vec<String>,
    n: usize,
    f: F,
) -> Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(Arc<dyn Lake>, String, String) -> Fut,
    Fut: std::future::Future<Output = Result<T>> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    let mut out: Vec<Option<T>> = Vec::new();
    out.resize_with(names.len(), || None);
    for (i, name) in names.into_iter().enumerate() {
        while tasks.len() >= n.max(1) {
            let (j, r) = join(&mut tasks).await?;
            out[j] = Some(r?);
        }
        let fut = f(lake.clone(), product.to_owned(), name);
        tasks.spawn(async move { (i, fut.await) });
    }
    while !tasks.is_empty() {
        let (j, r) = join(&mut tasks).await?;
        out[j] = Some(r?);
    }
    Ok(out.into_iter().flatten().collect())
}

async fn join<T: 'static>(tasks: &mut tokio::task::JoinSet<T>) -> Result<T> {
    match tasks.join_next().await {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(crate::Error::internal("join audit task", "lake", e)),
        None => Err(crate::Error::internal("join audit task", "lake", "no task")),
    }
}

/// Names of the checkpointed inputs of `product`, in name order.
async fn checkpointed(lake: &dyn Store, product: &str) -> Result<Vec<String>> {
    let listing = lake.list(&Folders::of(product).checkpoints).await?;
    Ok(listing
        .files
        .into_iter()
        .filter_map(|f| Folders::checkpoint_input(&f.name).map(str::to_owned))
        .collect())
}

async fn open_lake(cfg: &AuditConfig) -> Result<Arc<dyn Lake>> {
    crate::store::open_lake_read_only(&cfg.lake, &cfg.s3).await
}

mod deep;
mod feed;
mod finding;
mod log_check;
mod status;
mod verify;

pub use feed::{feed, FeedRequest};
pub use finding::Finding;
pub use status::{status, LeaseRow, StatusRow};
pub use verify::{verify, DEEP_READS};
