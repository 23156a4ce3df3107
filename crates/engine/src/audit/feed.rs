//! `landing feed`: what a downstream job reads (docs/interface.md, "Reading what
//! landed"). With a cursor, the commit log's entries after it, one JSON line each,
//! then `{"cursor":N}`; without one, the current state (each key's latest entry, from
//! the nearest snapshot on). `--files`: only the objects' locations, one per line,
//! each once. Read-only: the reader role's grants suffice.

use std::collections::BTreeSet;
use std::io::Write;

use serde_json::json;

use super::open_lake;
use crate::commit_log::{self, Entry, LogKeys};
use crate::config::AuditConfig;
use crate::error::{Error, Result};
use crate::store::Store;

/// What `feed` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedRequest {
    /// The reader's cursor: the last entry it has read (0: none yet). `None`: the
    /// current state.
    pub since: Option<u64>,
    /// Only the published objects' locations.
    pub files: bool,
}

pub async fn feed(cfg: &AuditConfig, req: FeedRequest) -> Result<i32> {
    let lake = open_lake(cfg).await?;
    let keys = LogKeys::of(&cfg.product);
    let (entries, cursor) = match req.since {
        Some(since) => {
            let entries = commit_log::read_since(&*lake, &keys, since).await?;
            // A cursor past the end was not made by this log: nothing to read.
            if entries.is_empty() && commit_log::end(&*lake, &keys).await? < since {
                tracing::warn!(
                    since,
                    "the cursor is past the end of the log; nothing to read"
                );
                return Ok(crate::EXIT_OK);
            }
            let cursor = entries.last().map_or(since, |e| e.sequence);
            (entries, cursor)
        }
        None => {
            let state = commit_log::current(&*lake, &keys).await?;
            (state.files, state.sequence)
        }
    };
    let text = if req.files {
        files(&*lake, &entries)
    } else {
        lines(&entries, cursor)?
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Error::store("write", "stdout", e))?;
    Ok(crate::EXIT_OK)
}

/// One JSON line per entry, then the cursor to pass next time.
fn lines(entries: &[Entry], cursor: u64) -> Result<String> {
    let mut text = String::new();
    for e in entries {
        let line = serde_json::to_string(e).map_err(|e| Error::store("encode", "entry", e))?;
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str(&json!({ "cursor": cursor }).to_string());
    text.push('\n');
    Ok(text)
}

/// Each published object's location once (a day replaced twice is read once), in
/// commit order of its latest entry.
fn files(lake: &dyn Store, entries: &[Entry]) -> String {
    let mut seen = BTreeSet::new();
    let mut latest_first: Vec<&str> = Vec::new();
    for e in entries.iter().rev() {
        if seen.insert(e.key.as_str()) {
            latest_first.push(&e.key);
        }
    }
    latest_first
        .into_iter()
        .rev()
        .map(|k| format!("{}\n", lake.location(k)))
        .collect()
}
