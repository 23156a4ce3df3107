//! The readers' commit log of a product (docs/interface.md, "Reading what landed"):
//! one entry per publish at `raw/<product>/_landing_log/<sequence>.json`, numbered
//! from 1 without gaps, created and never overwritten, in the folder the reader role
//! may read, so that a downstream job follows a cursor instead of listing `raw/`.
//!
//! - **Append**: find the end (the hint `_last`, checked by a HEAD of the entry it
//!   names, then a gallop forward), then create the next number with
//!   [`PutMode::Create`] (`If-None-Match: *` on S3, the guarded create locally).
//!   A writer that loses number N to another run of the product takes N+1. A 412 on
//!   our own entry, written but its answer lost (the SDK retried), is read back and
//!   recognised by its run id, never written twice. The runs of one process append
//!   in turn through its [`Appender`], which remembers the end it left: after the
//!   first, an append is one PUT.
//! - **Order**: a run writes its entry after the publish and before the checkpoint.
//!   A crash between the publish and the entry leaves a version no entry names: the
//!   checkpoint no longer matches it, so the input's next run publishes again and
//!   writes the entry (a version the log never named was never committed, as in
//!   Delta). A crash after the entry leaves the entry and the old checkpoint: the
//!   next run republishes, and its entry names the one it replaced.
//! - **Snapshots**: every [`SNAPSHOT_EVERY`] entries, the latest entry of each key up
//!   to there (`_snapshots/<sequence>.json`), so that the current state is read from
//!   the nearest snapshot on, not from entry 1. Best effort: a missing snapshot costs
//!   a reader more reads, never a wrong answer.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::checkpoint::{published_version, ContractStamp};
use crate::compression::OutputCompression;
use crate::error::{Error, Result};
pub use crate::layout::LogKeys;
use crate::store::{ObjectMeta, PutMode, Store, Version};

/// An entry every this many numbers is followed by a snapshot of the current state.
pub const SNAPSHOT_EVERY: u64 = 1000;

/// How far back from the end a run looks for the entry that named the version it
/// replaces, when its checkpoint does not say (only after a crash in the window
/// between a publish and its checkpoint).
pub const REPLACED_LOOKBACK: u64 = 1000;

/// Entries read at once, in order: a reader following a long way behind, a
/// snapshot and `verify` wait on round trips of this many, not one entry at a time.
/// Small enough that the 404s of a reader's last window stay few (docs/interface.md
/// promises a reader at most 10 requests beyond its entries).
const READ_AHEAD: usize = 8;

/// One commit: a publish of `key`, and what it replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub sequence: u64,
    pub committed_at: String,
    pub product: String,
    pub input_name: String,
    /// The published object's key, relative to the lake root.
    pub key: String,
    pub published_size: u64,
    /// The version the publish created: the ETag on S3; on a local disk the
    /// modification time, inode and change time.
    #[serde(flatten, with = "published_version")]
    pub published: Option<Version>,
    /// SHA-256 of the published bytes, as stored (compressed when the output is).
    pub published_sha256: String,
    pub output_compression: OutputCompression,
    /// SHA-256 of the input's bytes, as the checkpoint records it.
    pub input_sha256: String,
    pub accepted_rows: u64,
    pub rejected_rows: u64,
    pub duplicate_rows: u64,
    /// The quarantine published with this input, if it had rejects.
    pub quarantine_key: Option<String>,
    pub contract: ContractStamp,
    pub run_id: String,
    pub job_version: String,
    /// What was published under `key` before this publish; absent for a first publish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<Replaced>,
}

/// The version a publish replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replaced {
    /// The entry that named it; `null` when none did (published before the log
    /// existed, or by a run that stopped between its publish and its entry).
    pub sequence: Option<u64>,
    pub published_size: u64,
    #[serde(flatten, with = "published_version")]
    pub published: Option<Version>,
    /// SHA-256 of its bytes, when an entry or the checkpoint recorded it.
    pub published_sha256: Option<String>,
}

impl Replaced {
    /// The replaced version as the store showed it, named by `entry` if one did.
    pub fn of(meta: &ObjectMeta, entry: Option<&Entry>) -> Self {
        Replaced {
            sequence: entry.map(|e| e.sequence),
            published_size: meta.size,
            published: Some(meta.version.clone()),
            published_sha256: entry.map(|e| e.published_sha256.clone()),
        }
    }
}

impl Entry {
    /// Does this entry name the object version `meta` describes?
    pub fn names(&self, meta: &ObjectMeta) -> bool {
        self.published_size == meta.size && self.published.as_ref() == Some(&meta.version)
    }
}

/// A pending entry (number 0, no version) as the label its publish carries: its
/// JSON in ASCII (a label travels as an HTTP header on S3), `None` if longer than a
/// label may be.
pub fn label(pending: &Entry) -> Option<String> {
    // An entry is strings, integers and options of them: it always serialises.
    let json = serde_json::to_string(pending).ok()?;
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    (out.len() <= crate::store::LABEL_MAX).then_some(out)
}

/// The pending entry a publish's label holds, if it is one.
pub fn from_label(label: &str) -> Option<Entry> {
    serde_json::from_str(label).ok()
}

/// A snapshot: the latest entry of every key, as of entry `sequence`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub sequence: u64,
    pub files: Vec<Entry>,
}

/// A hint moved every this many numbers (and on a process's first append, and after
/// a race): a process that appends many entries writes one PUT per entry, and a
/// stale hint costs a newcomer a few HEADs of a gallop, never a wrong number.
pub const HINT_EVERY: u64 = 16;

/// What one process knows of the end of each product's log, shared by its runs (an
/// inbox lands many inputs at once). They append one at a time, each trying the
/// number after the last one the process created: runs of one inbox racing each
/// other for a number cost each loser a 412, a read of the winner's entry and a
/// gallop. Other processes (shards, an overlapping run) still race, and a 412 moves
/// on as before.
#[derive(Debug, Default)]
pub struct Appender(tokio::sync::Mutex<HashMap<String, Known>>);

/// The end of one log as this process left it.
#[derive(Debug, Clone)]
struct Known {
    /// The number this process last created.
    last: u64,
    /// The last number it wrote to the hint, and the hint's version then (`None`:
    /// unknown, read it before the next conditional write).
    hinted: u64,
    hint_version: Option<Version>,
}

/// Create the next entry of the log: `entry` with its number set. Returns it.
pub async fn append(
    store: &dyn Store,
    keys: &LogKeys,
    mut entry: Entry,
    appender: &Appender,
) -> Result<u64> {
    let mut ends = appender.0.lock().await;
    // The number after the last known one, tried at once: the create itself checks
    // that it is free, and a 412 gallops to the end. A process's first publish also
    // reads the hint (a GET and a HEAD); later ones send one PUT.
    let mut now = match ends.get(&keys.folder) {
        Some(known) => known.clone(),
        None => {
            let (hinted, hint_version) = checked_hint(store, keys).await?;
            Known {
                last: hinted,
                hinted: 0,
                hint_version,
            }
        }
    };
    let first_try = now.last + 1;
    let mut next = first_try;
    loop {
        entry.sequence = next;
        let key = keys.entry(next);
        match store
            .put_small(&key, encode(store, &key, &entry)?, PutMode::Create)
            .await
        {
            Ok(_) => break,
            Err(Error::Precondition { .. }) => {
                if is_ours(store, keys, next, &entry.run_id).await? {
                    info!(
                        sequence = next,
                        "the log entry landed though its answer was lost"
                    );
                    break;
                }
                next = first_absent(store, keys, next).await?;
            }
            Err(e) => return Err(e),
        }
    }
    now.last = next;
    if now.hinted == 0 || next != first_try || next >= now.hinted + HINT_EVERY {
        now.hint_version = move_hint(store, keys, next, now.hint_version).await;
        now.hinted = next;
    }
    ends.insert(keys.folder.clone(), now);
    drop(ends);
    if next % SNAPSHOT_EVERY == 0 {
        if let Err(e) = snapshot(store, keys, next).await {
            warn!(error = %e, sequence = next, "could not write the log's snapshot; readers read the entries instead");
        }
    }
    Ok(next)
}

/// Point the hint at `number`, conditional on the hint's version as this process
/// last knew it (read now if unknown; read again once if another writer moved it,
/// left alone if that writer's number is as recent): a create never leaves a temp
/// file behind on a local lake. Returns the hint's version as this process leaves
/// it, `None` if unknown.
async fn move_hint(
    store: &dyn Store,
    keys: &LogKeys,
    number: u64,
    mut version: Option<Version>,
) -> Option<Version> {
    for _ in 0..2 {
        let cond = version.map_or(PutMode::Create, PutMode::Update);
        let hint = Bytes::from(format!("{number}\n"));
        match store.put_small(&keys.last, hint, cond).await {
            Ok(v) => return Some(v),
            Err(Error::Precondition { .. }) => {}
            Err(e) => {
                warn!(error = %e, "could not update the log's hint; readers find the end without it");
                return None;
            }
        }
        let read = crate::store::get_small(store, &keys.last)
            .await
            .ok()
            .flatten()?;
        let theirs = std::str::from_utf8(&read.bytes)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        if theirs.is_some_and(|h| h >= number) {
            return Some(read.version);
        }
        version = Some(read.version);
    }
    None
}

/// Was entry `sequence` written by run `run_id`? A 412 on a create can be our own
/// first attempt, landed, met by the SDK's retry.
async fn is_ours(store: &dyn Store, keys: &LogKeys, sequence: u64, run_id: &str) -> Result<bool> {
    Ok(read_entry(store, keys, sequence)
        .await?
        .is_some_and(|e| e.run_id == run_id))
}

/// The number of the last entry (0: none). Costs a GET of the hint and a HEAD or two
/// when the hint is current; never a listing of the log.
pub async fn end(store: &dyn Store, keys: &LogKeys) -> Result<u64> {
    let (from, _) = checked_hint(store, keys).await?;
    Ok(first_absent(store, keys, from).await? - 1)
}

/// The hint's number if its entry exists, else 0: an entry at or below the end. The
/// hint is written after its entry, so an entry it names exists; one that does not
/// (a hint written by hand, or a log deleted under it) is not trusted.
/// Also the hint's version, if it exists (its next write is conditional on it).
async fn checked_hint(store: &dyn Store, keys: &LogKeys) -> Result<(u64, Option<Version>)> {
    let Some(v) = crate::store::get_small(store, &keys.last).await? else {
        return Ok((0, None));
    };
    let number = std::str::from_utf8(&v.bytes)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    Ok(match number {
        Some(h) if h > 0 && exists(store, keys, h).await? => (h, Some(v.version)),
        _ => (0, Some(v.version)),
    })
}

async fn hint(store: &dyn Store, keys: &LogKeys) -> Result<Option<u64>> {
    Ok(match crate::store::get_small(store, &keys.last).await? {
        Some(v) => std::str::from_utf8(&v.bytes)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok()),
        None => None,
    })
}

/// The first number above `present` (an entry known to exist, or 0) with no entry:
/// a gallop forward, then a binary search. Entries form a prefix (each is created
/// only when every lower one exists, and none is deleted), so existence is monotone.
async fn first_absent(store: &dyn Store, keys: &LogKeys, present: u64) -> Result<u64> {
    let (mut lo, mut step) = (present, 1u64);
    let mut hi = loop {
        let probe = lo.saturating_add(step);
        if !exists(store, keys, probe).await? {
            break probe;
        }
        lo = probe;
        step = step.saturating_mul(2);
    };
    // lo exists (or is 0), hi does not.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists(store, keys, mid).await? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(hi)
}

async fn exists(store: &dyn Store, keys: &LogKeys, sequence: u64) -> Result<bool> {
    Ok(store.head(&keys.entry(sequence)).await?.is_some())
}

/// Entry `sequence`, checked: it parses, and its number is its name's.
pub async fn read_entry(store: &dyn Store, keys: &LogKeys, sequence: u64) -> Result<Option<Entry>> {
    read_numbered(store, &keys.entry(sequence), sequence, |e: &Entry| {
        e.sequence
    })
    .await
}

/// The object at `key`, which must parse and carry the number `sequence` its name
/// has (`number` reads it).
async fn read_numbered<T: for<'de> Deserialize<'de>>(
    store: &dyn Store,
    key: &str,
    sequence: u64,
    number: impl Fn(&T) -> u64,
) -> Result<Option<T>> {
    let Some(v) = crate::store::get_small(store, key).await? else {
        return Ok(None);
    };
    let read: T = decode(store, key, &v.bytes)?;
    match number(&read) {
        n if n == sequence => Ok(Some(read)),
        n => Err(corrupt(store, key, format!("it says sequence {n}"))),
    }
}

/// Every entry after `since`, in order, up to the end. A missing entry below the end
/// (a gap: an entry deleted, or unreadable) is an error naming its key, never skipped.
///
/// Read in windows of 1, 2, 4, … up to `READ_AHEAD` (8) entries, each read at once:
/// a reader at the end sends one GET, and one far behind waits on a round trip per 8
/// entries. The window that passes the end costs its 404s, at most 7.
pub async fn read_since(store: &dyn Store, keys: &LogKeys, since: u64) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    let mut next = since.saturating_add(1);
    let mut window = 1u64;
    loop {
        let read = read_many(store, keys, next..next.saturating_add(window)).await?;
        let found = read.iter().take_while(|e| e.is_some()).count() as u64;
        out.extend(read.into_iter().map_while(|e| e));
        next += found;
        if found < window {
            break;
        }
        window = (window * 2).min(READ_AHEAD as u64);
    }
    check_no_entry_after(store, keys, next).await?;
    Ok(out)
}

/// Entries `numbers`, in order ([`read_entry`] each), [`READ_AHEAD`] in flight.
async fn read_many(
    store: &dyn Store,
    keys: &LogKeys,
    numbers: std::ops::Range<u64>,
) -> Result<Vec<Option<Entry>>> {
    futures_util::stream::iter(numbers)
        .map(|n| read_entry(store, keys, n))
        .buffered(READ_AHEAD)
        .try_collect()
        .await
}

/// `absent` has no entry: is it the end? A hint at or past it, or an entry just
/// after it, says an entry is missing below the end.
async fn check_no_entry_after(store: &dyn Store, keys: &LogKeys, absent: u64) -> Result<()> {
    let hinted = hint(store, keys).await?;
    let later = hinted.is_some_and(|h| h >= absent) || exists(store, keys, absent + 1).await?;
    // A writer may have created `absent` since we looked: a gap only if it is still
    // missing.
    if later && !exists(store, keys, absent).await? {
        let key = keys.entry(absent);
        return Err(corrupt(
            store,
            &key,
            "missing below the end of the log (a gap)".into(),
        ));
    }
    Ok(())
}

/// The latest entry of every key as of the end: the nearest snapshot, then the
/// entries after it. Returns the state and the end's number.
pub async fn current(store: &dyn Store, keys: &LogKeys) -> Result<Snapshot> {
    let end = end(store, keys).await?;
    state_at(store, keys, end).await
}

/// The state as of entry `at`: the latest snapshot at or below it, then the entries
/// up to `at`.
async fn state_at(store: &dyn Store, keys: &LogKeys, at: u64) -> Result<Snapshot> {
    let mut state: Snapshot = latest_snapshot(store, keys, at).await?.unwrap_or_default();
    let mut by_key: BTreeMap<String, Entry> =
        state.files.drain(..).map(|e| (e.key.clone(), e)).collect();
    let from = state.sequence + 1;
    for (n, e) in (from..).zip(read_many(store, keys, from..at.saturating_add(1)).await?) {
        let Some(e) = e else {
            let key = keys.entry(n);
            return Err(corrupt(
                store,
                &key,
                "missing below the end of the log (a gap)".into(),
            ));
        };
        by_key.insert(e.key.clone(), e);
    }
    Ok(Snapshot {
        sequence: at,
        files: by_key.into_values().collect(),
    })
}

/// The snapshot with the highest number at or below `at`, if any can be read.
async fn latest_snapshot(store: &dyn Store, keys: &LogKeys, at: u64) -> Result<Option<Snapshot>> {
    let listed = store.list(&keys.snapshots).await?;
    let mut numbers: Vec<u64> = listed
        .files
        .iter()
        .filter_map(|f| LogKeys::sequence_of(&f.name))
        .filter(|n| *n <= at)
        .collect();
    numbers.sort_unstable();
    let Some(n) = numbers.pop() else {
        return Ok(None);
    };
    read_numbered(store, &keys.snapshot(n), n, |s: &Snapshot| s.sequence).await
}

/// Write the snapshot at `at` (created, never overwritten).
async fn snapshot(store: &dyn Store, keys: &LogKeys, at: u64) -> Result<()> {
    let state = state_at(store, keys, at).await?;
    let key = keys.snapshot(at);
    match store
        .put_small(&key, encode(store, &key, &state)?, PutMode::Create)
        .await
    {
        Ok(_) | Err(Error::Precondition { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The latest entry naming `key` among the last [`REPLACED_LOOKBACK`] entries above
/// `floor`, newest first.
pub async fn latest_of(
    store: &dyn Store,
    keys: &LogKeys,
    key: &str,
    floor: u64,
) -> Result<Option<Entry>> {
    let end = end(store, keys).await?;
    let lowest = floor.max(end.saturating_sub(REPLACED_LOOKBACK)).max(1);
    for n in (lowest..=end).rev() {
        if let Some(e) = read_entry(store, keys, n).await? {
            if e.key == key {
                return Ok(Some(e));
            }
        }
    }
    Ok(None)
}

fn encode<T: Serialize>(store: &dyn Store, key: &str, value: &T) -> Result<Bytes> {
    let mut body = serde_json::to_vec(value)
        .map_err(|e| Error::store("encode log entry", store.location(key), e))?;
    body.push(b'\n');
    Ok(Bytes::from(body))
}

fn decode<T: for<'de> Deserialize<'de>>(store: &dyn Store, key: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| corrupt(store, key, e.to_string()))
}

fn corrupt(store: &dyn Store, key: &str, reason: String) -> Error {
    Error::Corrupt {
        what: "commit log entry",
        location: store.location(key),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use std::sync::Arc;

    /// Append `e` as a process of its own would (a fresh appender).
    async fn alone(store: &MemoryStore, keys: &LogKeys, e: Entry) -> u64 {
        append(store, keys, e, &Appender::default()).await.unwrap()
    }

    fn entry(key: &str, run_id: &str) -> Entry {
        Entry {
            sequence: 0,
            committed_at: "2026-12-06T00:00:00Z".into(),
            product: "p".into(),
            input_name: key.rsplit('/').next().unwrap_or(key).into(),
            key: key.into(),
            published_size: 10,
            published: Some(Version::ETag(format!("\"{run_id}\""))),
            published_sha256: "ab".repeat(32),
            output_compression: OutputCompression::None,
            input_sha256: "cd".repeat(32),
            accepted_rows: 1,
            rejected_rows: 0,
            duplicate_rows: 0,
            quarantine_key: None,
            contract: ContractStamp {
                name: "c".into(),
                version: "1".into(),
                sha256: "ef".repeat(32),
            },
            run_id: run_id.into(),
            job_version: "0".into(),
            replaced: None,
        }
    }

    /// A pending entry's label is ASCII, whatever the names hold, reads back as the
    /// same entry, and is refused when longer than a label may be.
    #[test]
    fn a_label_is_ascii_and_reads_back_as_its_entry() {
        let mut e = entry("raw/p/día 𝄞.jsonl", "r1");
        e.input_name = "día 𝄞.jsonl".into();
        let l = label(&e).expect("short enough");
        assert!(l.is_ascii(), "{l}");
        assert!(l.contains(r"d\u00eda \ud834\udd1e.jsonl"), "{l}");
        assert_eq!(from_label(&l), Some(e.clone()));
        e.input_name = "x".repeat(crate::store::LABEL_MAX);
        assert_eq!(label(&e), None);
        assert_eq!(from_label("{not an entry"), None);
    }

    /// Appends number 1, 2, 3 in order; the hint follows; a reader reads them back.
    #[tokio::test]
    async fn appends_are_numbered_from_one_without_gaps() {
        let store = MemoryStore::new();
        let keys = LogKeys::of("p");
        assert_eq!(end(&store, &keys).await.unwrap(), 0);
        for (i, run) in ["r1", "r2", "r3"].into_iter().enumerate() {
            let n = alone(&store, &keys, entry("raw/p/a.jsonl", run)).await;
            assert_eq!(n, i as u64 + 1);
        }
        let hint = crate::store::get_small(&store, &keys.last)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&hint.bytes[..], b"3\n");
        let read = read_since(&store, &keys, 0).await.unwrap();
        let runs: Vec<_> = read
            .iter()
            .map(|e| (e.sequence, e.run_id.as_str()))
            .collect();
        assert_eq!(runs, [(1, "r1"), (2, "r2"), (3, "r3")]);
        assert_eq!(read_since(&store, &keys, 2).await.unwrap().len(), 1);
        assert!(read_since(&store, &keys, 3).await.unwrap().is_empty());
        assert!(read_since(&store, &keys, 99).await.unwrap().is_empty());
    }

    /// One process's appends take 1, 2, 3, … in turn even when its runs append at
    /// once, and move the hint on the first append and every HINT_EVERY numbers.
    #[tokio::test]
    async fn one_process_appends_in_turn_and_hints_now_and_then() {
        let store = MemoryStore::new();
        let keys = LogKeys::of("p");
        let appender = Arc::new(Appender::default());
        let mut runs = tokio::task::JoinSet::new();
        for n in 1..=40 {
            let (store, keys, appender) = (store.clone(), keys.clone(), appender.clone());
            runs.spawn(async move {
                let e = entry("raw/p/a.jsonl", &format!("r{n}"));
                append(&store, &keys, e, &appender).await.unwrap()
            });
        }
        let mut taken = Vec::new();
        while let Some(n) = runs.join_next().await {
            taken.push(n.unwrap());
        }
        taken.sort_unstable();
        assert_eq!(taken, (1..=40).collect::<Vec<u64>>());
        let hint = crate::store::get_small(&store, &keys.last)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&hint.bytes[..], b"33\n", "hinted at 1, 17 and 33");
        assert_eq!(end(&store, &keys).await.unwrap(), 40);
    }

    /// A process whose known end is stale (another process appended since) loses the
    /// number it tries, takes the next free one, and moves the hint to it.
    #[tokio::test]
    async fn a_stale_known_end_moves_on_to_the_free_number() {
        let store = MemoryStore::new();
        let keys = LogKeys::of("p");
        let ours = Appender::default();
        let n = append(&store, &keys, entry("raw/p/a.jsonl", "a1"), &ours).await;
        assert_eq!(n.unwrap(), 1);
        let other = Appender::default();
        for run in ["b1", "b2"] {
            append(&store, &keys, entry("raw/p/b.jsonl", run), &other)
                .await
                .unwrap();
        }
        let n = append(&store, &keys, entry("raw/p/a.jsonl", "a2"), &ours).await;
        assert_eq!(n.unwrap(), 4);
        let hint = crate::store::get_small(&store, &keys.last)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&hint.bytes[..], b"4\n");
        let runs: Vec<String> = read_since(&store, &keys, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.run_id)
            .collect();
        assert_eq!(runs, ["a1", "b1", "b2", "a2"]);
    }

    /// A stale or missing hint costs a gallop, never a wrong number; a hint naming an
    /// entry that does not exist is not trusted.
    #[tokio::test]
    async fn the_end_is_found_whatever_the_hint_says() {
        let store = MemoryStore::new();
        let keys = LogKeys::of("p");
        for run in 0..37 {
            alone(&store, &keys, entry("raw/p/a.jsonl", &run.to_string())).await;
        }
        for hint in [
            None,
            Some("0"),
            Some("5"),
            Some("37"),
            Some("900"),
            Some("junk"),
        ] {
            match hint {
                None => store.delete(&keys.last).await.unwrap(),
                Some(h) => {
                    let body = Bytes::from(h.to_owned());
                    store
                        .put_small(&keys.last, body, PutMode::Overwrite)
                        .await
                        .unwrap();
                }
            }
            assert_eq!(end(&store, &keys).await.unwrap(), 37, "hint {hint:?}");
        }
        let n = alone(&store, &keys, entry("raw/p/a.jsonl", "late")).await;
        assert_eq!(n, 38);
    }

    /// A writer that loses a number to another takes the next one; its own entry
    /// written but answered 412 (a retried PUT) is recognised and not written again.
    #[tokio::test]
    async fn a_lost_race_takes_the_next_number_and_a_lost_answer_none() {
        let store = MemoryStore::new();
        let keys = LogKeys::of("p");
        alone(&store, &keys, entry("raw/p/a.jsonl", "r1")).await;
        // Another run created 2 behind a stale hint (it still says 1).
        let mut other = entry("raw/p/b.jsonl", "r2");
        other.sequence = 2;
        let body = encode(&store, &keys.entry(2), &other).unwrap();
        store
            .put_small(&keys.entry(2), body.clone(), PutMode::Create)
            .await
            .unwrap();
        store
            .put_small(&keys.last, Bytes::from("1"), PutMode::Overwrite)
            .await
            .unwrap();
        let n = alone(&store, &keys, entry("raw/p/a.jsonl", "r3")).await;
        assert_eq!(n, 3);
        // r2's entry, met again by r2's retry, is its own; r3 lost that number.
        assert!(is_ours(&store, &keys, 2, "r2").await.unwrap());
        assert!(!is_ours(&store, &keys, 2, "r3").await.unwrap());
        assert!(!is_ours(&store, &keys, 4, "r2").await.unwrap());
        assert_eq!(read_since(&store, &keys, 0).await.unwrap().len(), 3);
    }

    /// A reader gets every entry after its cursor, in order, whatever the cursor:
    /// windows of 1, 2, 4, … entries read at once end exactly at the end, and a gap
    /// inside a window is an error naming the missing entry.
    #[tokio::test]
    async fn a_cursor_anywhere_reads_every_later_entry_in_order() {
        let store = MemoryStore::new();
        let keys = LogKeys::of("p");
        let appender = Appender::default();
        for n in 1..=40 {
            let e = entry("raw/p/a.jsonl", &format!("r{n}"));
            append(&store, &keys, e, &appender).await.unwrap();
        }
        for since in [0, 1, 2, 3, 14, 15, 16, 31, 38, 39, 40, 41, 500] {
            let read = read_since(&store, &keys, since).await.unwrap();
            let numbers: Vec<u64> = read.iter().map(|e| e.sequence).collect();
            let expected: Vec<u64> = (since + 1..=40).collect();
            assert_eq!(numbers, expected, "since {since}");
            let runs: Vec<String> = read.iter().map(|e| e.run_id.clone()).collect();
            let expected: Vec<String> = (since + 1..=40).map(|n| format!("r{n}")).collect();
            assert_eq!(runs, expected, "since {since}");
        }
        // Entry 27 falls inside the window of 8 that reads 24 to 31.
        store.delete(&keys.entry(27)).await.unwrap();
        let e = read_since(&store, &keys, 0).await.unwrap_err().to_string();
        assert!(
            e.contains("00000000000000000027.json") && e.contains("gap"),
            "{e}"
        );
        let tail = read_since(&store, &keys, 27).await.unwrap();
        assert_eq!(tail.len(), 13, "after the gap, 28 to 40");
    }

    /// A deleted entry below the end is a gap: an error naming it, never skipped; an
    /// entry whose number is not its name's is corrupt.
    #[tokio::test]
    async fn a_gap_or_a_misnumbered_entry_is_an_error_naming_it() {
        let store = MemoryStore::new();
        let keys = LogKeys::of("p");
        for run in ["r1", "r2", "r3"] {
            alone(&store, &keys, entry("raw/p/a.jsonl", run)).await;
        }
        store.delete(&keys.entry(2)).await.unwrap();
        let e = read_since(&store, &keys, 0).await.unwrap_err().to_string();
        assert!(
            e.contains("00000000000000000002.json") && e.contains("gap"),
            "{e}"
        );
        // The last entry gone as well as the hint: indistinguishable from an end at 1.
        let mut wrong = entry("raw/p/a.jsonl", "r9");
        wrong.sequence = 7;
        let body = encode(&store, &keys.entry(2), &wrong).unwrap();
        store
            .put_small(&keys.entry(2), body, PutMode::Overwrite)
            .await
            .unwrap();
        let e = read_since(&store, &keys, 1).await.unwrap_err().to_string();
        assert!(
            e.contains("00000000000000000002.json") && e.contains("sequence 7"),
            "{e}"
        );
        let junk = Bytes::from_static(b"{not json");
        store
            .put_small(&keys.entry(2), junk, PutMode::Overwrite)
            .await
            .unwrap();
        let e = read_since(&store, &keys, 0).await.unwrap_err().to_string();
        assert!(
            e.contains("corrupt commit log entry") && e.contains("00000000000000000002.json"),
            "{e}"
        );
    }

    /// The current state folds the entries by key, from the nearest snapshot on;
    /// snapshots are written every SNAPSHOT_EVERY entries.
    #[tokio::test]
    async fn the_current_state_is_each_keys_latest_entry() {
        let store = MemoryStore::new();
        let keys = LogKeys::of("p");
        for n in 1..=SNAPSHOT_EVERY + 2 {
            let key = format!("raw/p/{}.jsonl", n % 3);
            alone(&store, &keys, entry(&key, &format!("r{n}"))).await;
        }
        let snap = crate::store::get_small(&store, &keys.snapshot(SNAPSHOT_EVERY))
            .await
            .unwrap();
        let snap: Snapshot = serde_json::from_slice(&snap.unwrap().bytes).unwrap();
        let runs: Vec<_> = snap.files.iter().map(|e| e.run_id.as_str()).collect();
        assert_eq!(runs, ["r999", "r1000", "r998"]);
        let now = current(&store, &keys).await.unwrap();
        assert_eq!(now.sequence, 1002);
        let runs: Vec<_> = now
            .files
            .iter()
            .map(|e| (e.key.as_str(), e.sequence))
            .collect();
        assert_eq!(
            runs,
            [
                ("raw/p/0.jsonl", 1002),
                ("raw/p/1.jsonl", 1000),
                ("raw/p/2.jsonl", 1001)
            ]
        );
        // From the snapshot on: the entries below it are no longer read.
        store.delete(&keys.entry(5)).await.unwrap();
        assert_eq!(current(&store, &keys).await.unwrap().files.len(), 3);
        let latest = latest_of(&store, &keys, "raw/p/1.jsonl", 0).await.unwrap();
        assert_eq!(latest.map(|e| e.sequence), Some(1000));
        assert_eq!(
            latest_of(&store, &keys, "raw/p/9.jsonl", 0).await.unwrap(),
            None
        );
    }
}
