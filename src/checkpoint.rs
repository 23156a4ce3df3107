//! The checkpoint: one small JSON object per (product, input name), the row of
//! `ingestion_checkpoint`. It is read at the start of a run and written last, only
//! after the publish is durable, with compare-and-swap against the version read at
//! the start, so a run never overwrites a checkpoint another writer moved.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::{Condition, ObjectMeta, Store, Version};

/// The checkpoint record (docs/CONTRACT.md section 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub product: String,
    pub input_name: String,
    pub input_sha256: String,
    pub accepted_rows: u64,
    pub rejected_rows: u64,
    pub duplicate_rows: u64,
    /// Key of the published object, relative to the lake root.
    pub published_path: String,
    pub published_size: u64,
    /// The published object's version when it was published.
    #[serde(flatten)]
    pub published: PublishedVersion,
    /// Key of the quarantine published with this input, if it had rejects.
    pub quarantine_path: Option<String>,
    pub committed_at: String,
    pub run_id: String,
    pub job_version: String,
}

/// The published object's version marker, as checkpoint fields: the ETag on S3;
/// modification time, inode and ctime on a local disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedVersion {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_etag: Option<String>,
    // i64 nanoseconds (good until 2262): serde cannot flatten an i128.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_mtime_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_ino: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_ctime_ns: Option<i64>,
}

impl PublishedVersion {
    pub fn of(meta: &ObjectMeta) -> Self {
        match &meta.version {
            Version::ETag(e) => PublishedVersion {
                published_etag: Some(e.clone()),
                ..Self::default()
            },
            Version::File {
                mtime_ns,
                ino,
                ctime_ns,
            } => PublishedVersion {
                published_mtime_ns: Some(*mtime_ns as i64),
                published_ino: Some(*ino),
                published_ctime_ns: Some(*ctime_ns as i64),
                ..Self::default()
            },
        }
    }
}

impl Checkpoint {
    /// Does the published object still match what this checkpoint recorded: the size
    /// and every part of the version marker? A checkpoint written before the inode and
    /// ctime were recorded never matches a local file, so it is republished once.
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        self.published_size == meta.size && self.published == PublishedVersion::of(meta)
    }
}

/// A checkpoint as read, with the version token to compare-and-swap against.
#[derive(Debug, Clone)]
pub struct Current {
    pub record: Checkpoint,
    pub version: String,
}

/// Read the checkpoint at `key`. A record that exists but does not parse, or that
/// names another product or input, is an error: publishing over it would hide it.
pub async fn read(
    store: &dyn Store,
    key: &str,
    product: &str,
    input_name: &str,
) -> Result<Option<Current>> {
    let Some(v) = store.get_small(key).await? else {
        return Ok(None);
    };
    let corrupt = |reason: String| Error::Corrupt {
        what: "checkpoint",
        location: store.location(key),
        reason,
    };
    let record: Checkpoint = serde_json::from_slice(&v.bytes).map_err(|e| {
        // serde_json's message names a position, never the content.
        corrupt(format!(
            "not a checkpoint record ({e}); move it aside to republish"
        ))
    })?;
    if record.product != product || record.input_name != input_name {
        return Err(corrupt(format!(
            "it records product {:?} input {:?}",
            record.product, record.input_name
        )));
    }
    Ok(Some(Current {
        record,
        version: v.version,
    }))
}

/// Write `record` only if the checkpoint is still the version read at the start
/// (`None`: there was none). `Precondition` means another writer moved it.
pub async fn write(
    store: &dyn Store,
    key: &str,
    record: &Checkpoint,
    read_version: Option<&str>,
) -> Result<()> {
    let mut body = serde_json::to_vec_pretty(record)
        .map_err(|e| Error::store("encode checkpoint", store.location(key), e))?;
    body.push(b'\n');
    let cond = match read_version {
        Some(v) => Condition::IfMatch(v.to_owned()),
        None => Condition::IfAbsent,
    };
    store
        .put_small(key, Bytes::from(body), cond)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Checkpoint {
        Checkpoint {
            product: "progress".into(),
            input_name: "a.jsonl".into(),
            input_sha256: "00".into(),
            accepted_rows: 1,
            rejected_rows: 0,
            duplicate_rows: 0,
            published_path: "raw/progress/a.jsonl".into(),
            published_size: 10,
            published: PublishedVersion {
                published_etag: Some("\"e\"".into()),
                ..PublishedVersion::default()
            },
            quarantine_path: None,
            committed_at: "2026-01-01T00:00:00Z".into(),
            run_id: "r".into(),
            job_version: "0".into(),
        }
    }

    #[test]
    fn matches_requires_size_and_marker() {
        let c = record();
        let meta = |size, etag: &str| ObjectMeta {
            size,
            version: Version::ETag(etag.into()),
        };
        assert!(c.matches(&meta(10, "\"e\"")));
        assert!(!c.matches(&meta(11, "\"e\"")));
        assert!(!c.matches(&meta(10, "\"f\"")));
    }

    #[test]
    fn local_marker_is_mtime_inode_and_ctime() {
        let file = |mtime_ns, ino, ctime_ns| ObjectMeta {
            size: 10,
            version: Version::File {
                mtime_ns,
                ino,
                ctime_ns,
            },
        };
        let mut c = record();
        c.published = PublishedVersion::of(&file(5, 7, 9));
        assert!(c.matches(&file(5, 7, 9)));
        assert!(!c.matches(&file(6, 7, 9)));
        // `cp -p` / `rsync -a` restore the mtime, never the inode or ctime.
        assert!(!c.matches(&file(5, 8, 9)));
        assert!(!c.matches(&file(5, 7, 10)));
        // A checkpoint from before inode and ctime were recorded: republish once.
        c.published.published_ino = None;
        c.published.published_ctime_ns = None;
        assert!(!c.matches(&file(5, 7, 9)));
        c.published = PublishedVersion::default();
        assert!(
            !c.matches(&file(5, 7, 9)),
            "a record without a change marker never matches"
        );
    }

    #[test]
    fn round_trips_as_json() {
        let c = record();
        let back: Checkpoint = serde_json::from_slice(&serde_json::to_vec(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }
}
