//! `verify`'s checks of the commit log: each checkpointed publish has its entry,
//! naming the same key and version; the log reads without a gap from its latest
//! snapshot on; and each key's latest entry names the object published there now.

use std::collections::HashSet;

use super::finding::Finding;
use crate::checkpoint::Checkpoint;
use crate::commit_log::{self, Entry, LogKeys};
use crate::error::{Error, Result};
use crate::store::Store;

/// The finding's input name for what concerns the log as a whole.
const LOG: &str = "_landing_log";

/// Findings of the log of `product`, against `checkpoints` (input name, record),
/// leaving out the inputs `drifted` (their objects have findings of their own).
pub(super) async fn log_findings(
    lake: &dyn Store,
    product: &str,
    checkpoints: &[(String, Checkpoint)],
    drifted: &HashSet<String>,
) -> Result<Vec<Finding>> {
    let keys = LogKeys::of(product);
    let mut out = Vec::new();
    match commit_log::current(lake, &keys).await {
        Ok(state) => {
            for e in state
                .files
                .iter()
                .filter(|e| !drifted.contains(&e.input_name))
            {
                out.extend(stale(lake, e).await?);
            }
        }
        Err(e @ Error::Corrupt { .. }) => out.push(Finding::new(LOG, "log_corrupt", e.to_string())),
        Err(e) => return Err(e),
    }
    for (name, rec) in checkpoints {
        let Some(n) = rec.log_sequence else {
            continue; // checkpointed before the log existed
        };
        let finding = match commit_log::read_entry(lake, &keys, n).await {
            Ok(Some(e)) if names_checkpointed(&e, rec, lake) => continue,
            Ok(Some(_)) => (
                "log_mismatch",
                format!("log entry {n} names another key or version than the checkpoint"),
            ),
            Ok(None) => (
                "log_missing",
                format!("{} does not exist", lake.location(&keys.entry(n))),
            ),
            Err(e @ Error::Corrupt { .. }) => ("log_corrupt", e.to_string()),
            Err(e) => return Err(e),
        };
        out.push(Finding::new(name, finding.0, finding.1));
    }
    Ok(out)
}

fn names_checkpointed(e: &Entry, rec: &Checkpoint, lake: &dyn Store) -> bool {
    lake.location(&e.key) == rec.published_path
        && e.published_size == rec.published_size
        && e.published == rec.published
}

/// The key's latest entry does not name what is published there now.
async fn stale(lake: &dyn Store, e: &Entry) -> Result<Option<Finding>> {
    let here = lake.location(&e.key);
    let detail = match lake.head(&e.key).await? {
        None => format!("log entry {} names {here}, which does not exist", e.sequence),
        Some(m) if e.published_size == m.size && e.published.as_ref() == Some(&m.version) => {
            return Ok(None)
        }
        Some(_) => format!(
            "log entry {} is the latest for {here} but names another version than the one published (a publish not logged yet: its input's next run logs it)",
            e.sequence
        ),
    };
    Ok(Some(Finding::new(&e.input_name, "log_stale", detail)))
}
