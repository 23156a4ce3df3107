//! The checkpoint: one small JSON object per (product, input name), the row of
//! `ingestion_checkpoint`. It is read at the start of a run and written last, only
//! after the publish is durable, with compare-and-swap against the version read at
//! the start, so a run never overwrites a checkpoint another writer moved.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::compression::OutputCompression;
use crate::error::{Error, Result};
use crate::store::{ObjectMeta, PutMode, Store, Version};

/// The checkpoint record (docs/interface.md section 4).
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
    /// How the published object is stored (`--output-compression`); `none` in
    /// checkpoints written before it was recorded.
    #[serde(default)]
    pub output_compression: OutputCompression,
    /// The published object's version when it was published.
    #[serde(flatten, with = "published_version")]
    pub published: Option<Version>,
    /// Key of the quarantine published with this input, if it had rejects.
    pub quarantine_path: Option<String>,
    pub committed_at: String,
    pub run_id: String,
    pub job_version: String,
    /// The input's size and identity when it was landed (cheap skips of inbox runs).
    /// Absent in checkpoints written before it existed: such an input is read once
    /// and its checkpoint upgraded.
    #[serde(flatten)]
    pub input: InputIdentity,
    /// The contract the input was landed under; absent in checkpoints written
    /// before contracts were files (those were `progress` version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<ContractStamp>,
    /// SHA-256 of the published bytes, as stored; absent in checkpoints written
    /// before the commit log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_sha256: Option<String>,
    /// The number of the commit log's entry for this publish (`crate::commit_log`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_sequence: Option<u64>,
}

/// Which contract a run applied: its name, version and the SHA-256 of its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractStamp {
    pub name: String,
    pub version: String,
    pub sha256: String,
}

impl ContractStamp {
    pub fn of(c: &crate::contract::Contract) -> Self {
        ContractStamp {
            name: c.name.clone(),
            version: c.version.clone(),
            sha256: c.sha256.clone(),
        }
    }

    /// Was this stamp made by `c` (the same file bytes)?
    pub fn is(&self, c: &crate::contract::Contract) -> bool {
        self.sha256 == c.sha256
    }
}

/// The input's listed size and identity, recorded beside its hash: the ETag on S3;
/// on a local disk the modification time, inode and change time, which no tool can
/// set back together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputIdentity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_etag: Option<String>,
    /// Nanoseconds since the epoch (64 bits: serde cannot flatten 128-bit integers,
    /// and they last until 2262).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_mtime_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_ino: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_ctime_ns: Option<i64>,
}

impl InputIdentity {
    /// The identity of an input as listed (or headed) before it was read.
    pub fn of(meta: Option<&ObjectMeta>) -> Self {
        let Some(m) = meta else {
            return InputIdentity::default();
        };
        let size = Some(m.size);
        match &m.version {
            Version::ETag(e) => InputIdentity {
                input_size: size,
                input_etag: Some(e.clone()),
                ..InputIdentity::default()
            },
            Version::File {
                mtime_ns,
                ino,
                ctime_ns,
            } => InputIdentity {
                input_size: size,
                input_mtime_ns: i64::try_from(*mtime_ns).ok(),
                input_ino: Some(*ino),
                input_ctime_ns: i64::try_from(*ctime_ns).ok(),
                ..InputIdentity::default()
            },
        }
    }

    /// The input as recorded, if the record is complete: a size plus an ETag, or a
    /// size plus mtime, inode and ctime (flat optional fields on disk, one value here).
    fn recorded(&self) -> Option<ObjectMeta> {
        let version = match (
            &self.input_etag,
            self.input_mtime_ns,
            self.input_ino,
            self.input_ctime_ns,
        ) {
            (Some(e), _, _, _) => Version::ETag(e.clone()),
            (None, Some(mtime), Some(ino), Some(ctime)) => Version::File {
                mtime_ns: mtime.into(),
                ino,
                ctime_ns: ctime.into(),
            },
            _ => return None,
        };
        Some(ObjectMeta {
            size: self.input_size?,
            version,
        })
    }

    /// Is `meta` the input this identity recorded? Only a complete record can say yes.
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        self.recorded().as_ref() == Some(meta)
    }
}

/// The published object's version as checkpoint and log fields: `published_etag` on
/// S3; `published_mtime_ns`, `published_ino` and `published_ctime_ns` on a local disk.
/// `None`: a record without them (or one of a local file without its inode and ctime,
/// written before they were recorded), which matches no object.
pub mod published_version {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::store::Version;

    #[derive(Default, Serialize, Deserialize)]
    struct Fields {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        published_etag: Option<String>,
        // i64 nanoseconds (good until 2262): serde cannot flatten an i128.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        published_mtime_ns: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        published_ino: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        published_ctime_ns: Option<i64>,
    }

    pub fn serialize<S: Serializer>(v: &Option<Version>, s: S) -> Result<S::Ok, S::Error> {
        let fields = match v {
            None => Fields::default(),
            Some(Version::ETag(e)) => Fields {
                published_etag: Some(e.clone()),
                ..Fields::default()
            },
            Some(Version::File {
                mtime_ns,
                ino,
                ctime_ns,
            }) => Fields {
                published_mtime_ns: Some(*mtime_ns as i64),
                published_ino: Some(*ino),
                published_ctime_ns: Some(*ctime_ns as i64),
                ..Fields::default()
            },
        };
        fields.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Version>, D::Error> {
        let f = Fields::deserialize(d)?;
        Ok(match f {
            Fields {
                published_etag: Some(e),
                ..
            } => Some(Version::ETag(e)),
            Fields {
                published_mtime_ns: Some(m),
                published_ino: Some(ino),
                published_ctime_ns: Some(c),
                ..
            } => Some(Version::File {
                mtime_ns: i128::from(m),
                ino,
                ctime_ns: i128::from(c),
            }),
            _ => None,
        })
    }
}

impl Checkpoint {
    /// Was this input landed under `contract`? A checkpoint without a stamp predates
    /// contract files: it was the built-in `progress` contract's first version.
    pub fn landed_under(&self, contract: &crate::contract::Contract) -> bool {
        match &self.contract {
            Some(stamp) => stamp.is(contract),
            None => contract.sha256 == crate::contract::progress_sha256(),
        }
    }

    /// Does the published object still match what this checkpoint recorded: the size
    /// and every part of the version marker? A checkpoint written before the inode and
    /// ctime were recorded never matches a local file, so it is republished once.
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        self.published_size == meta.size && self.published.as_ref() == Some(&meta.version)
    }

    /// How the object at `here`, as `meta` describes it, differs from what this
    /// checkpoint published; `None`: it is still that object.
    pub fn drift(&self, here: &str, meta: Option<&ObjectMeta>) -> Option<Drift> {
        if self.published_path != here {
            return Some(Drift::Elsewhere);
        }
        match meta {
            None => Some(Drift::Missing),
            Some(m) if m.size != self.published_size => Some(Drift::Size(m.size)),
            Some(m) if !self.matches(m) => Some(Drift::Changed(m.version.clone())),
            Some(_) => None,
        }
    }
}

/// How a published object differs from what its checkpoint recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// The checkpoint names another location than the one asked about.
    Elsewhere,
    Missing,
    /// Another size (this one).
    Size(u64),
    /// The recorded size but another version (this one): rewritten or replaced.
    Changed(Version),
}

/// [`Checkpoint::drift`] of the object at `key` in `lake`, which is read (a HEAD)
/// only when the checkpoint names it.
pub async fn published_drift(
    lake: &dyn Store,
    key: &str,
    rec: &Checkpoint,
) -> Result<Option<Drift>> {
    let here = lake.location(key);
    if rec.published_path != here {
        return Ok(Some(Drift::Elsewhere));
    }
    let meta = lake.head(key).await?;
    Ok(rec.drift(&here, meta.as_ref()))
}

/// A checkpoint as read, with the version token to compare-and-swap against.
#[derive(Debug, Clone)]
pub struct Current {
    pub record: Checkpoint,
    pub version: Version,
}

/// Read the checkpoint at `key`. A record that exists but does not parse, or that
/// names another product or input, is an error: publishing over it would hide it.
pub async fn read(
    store: &dyn Store,
    key: &str,
    product: &str,
    input_name: &str,
) -> Result<Option<Current>> {
    let Some(v) = crate::store::get_small(store, key).await? else {
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
    read_version: Option<&Version>,
) -> Result<()> {
    let mut body = serde_json::to_vec_pretty(record)
        .map_err(|e| Error::store("encode checkpoint", store.location(key), e))?;
    body.push(b'\n');
    let cond = match read_version {
        Some(v) => PutMode::Update(v.clone()),
        None => PutMode::Create,
    };
    store
        .put_small(key, Bytes::from(body), cond)
        .await
        .map(|_| ())
}

/// Record the input's identity in a checkpoint that describes the same bytes but
/// lacks it or holds an older one (a checkpoint from before the fields existed, or an
/// input touched without changing): replaces only the version read at the start, and
/// a failure only means the next run reads the input again.
pub async fn upgrade_identity(
    store: &dyn Store,
    key: &str,
    cur: &Current,
    meta: Option<&ObjectMeta>,
) {
    let Some(meta) = meta else { return };
    if cur.record.input.matches(meta) {
        return;
    }
    let mut record = cur.record.clone();
    record.input = InputIdentity::of(Some(meta));
    match write(store, key, &record, Some(&cur.version)).await {
        Ok(()) => tracing::info!(
            location = %store.location(key),
            "checkpoint upgraded with the input's size and identity"
        ),
        Err(e) => tracing::warn!(
            location = %store.location(key),
            error = %e,
            "could not record the input's identity in the checkpoint; the next run reads the input again"
        ),
    }
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
            output_compression: OutputCompression::None,
            published: Some(Version::ETag("\"e\"".into())),
            quarantine_path: None,
            committed_at: "2026-01-01T00:00:00Z".into(),
            run_id: "r".into(),
            job_version: "0".into(),
            input: InputIdentity::default(),
            contract: Some(ContractStamp::of(&crate::contract::progress())),
            published_sha256: Some("ab".repeat(32)),
            log_sequence: Some(7),
        }
    }

    #[test]
    fn the_contract_stamp_round_trips_and_is_optional() {
        let rec = record();
        let text = serde_json::to_string(&rec).unwrap();
        assert!(
            text.contains("\"contract\":{\"name\":\"progress\",\"version\":\"1\",\"sha256\":"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Checkpoint>(&text).unwrap(), rec);
        let old = Checkpoint {
            contract: None,
            published_sha256: None,
            log_sequence: None,
            ..rec
        };
        let text = serde_json::to_string(&old).unwrap();
        assert!(!text.contains("contract") && !text.contains("log_sequence"));
        assert_eq!(serde_json::from_str::<Checkpoint>(&text).unwrap(), old);
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
    fn drift_says_how_the_published_object_differs() {
        let c = record();
        let here = "raw/progress/a.jsonl";
        let meta = |size, etag: &str| ObjectMeta {
            size,
            version: Version::ETag(etag.into()),
        };
        assert_eq!(c.drift(here, Some(&meta(10, "\"e\""))), None);
        let elsewhere = c.drift("raw/progress/b.jsonl", Some(&meta(10, "\"e\"")));
        assert_eq!(elsewhere, Some(Drift::Elsewhere));
        assert_eq!(c.drift(here, None), Some(Drift::Missing));
        assert_eq!(
            c.drift(here, Some(&meta(11, "\"e\""))),
            Some(Drift::Size(11))
        );
        let changed = Drift::Changed(Version::ETag("\"f\"".into()));
        assert_eq!(c.drift(here, Some(&meta(10, "\"f\""))), Some(changed));
    }

    /// A version is stored as the `published_*` fields (docs/interface.md § 4) and
    /// read back as the same version, on S3 and on a local disk.
    #[test]
    fn a_published_version_round_trips_through_its_fields() {
        let mut c = record();
        c.published = Some(Version::File {
            mtime_ns: 1_700_000_000_123_456_789,
            ino: 42,
            ctime_ns: 1_700_000_001_000_000_001,
        });
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["published_mtime_ns"], 1_700_000_000_123_456_789_i64);
        assert_eq!(json["published_ino"], 42);
        assert_eq!(json["published_ctime_ns"], 1_700_000_001_000_000_001_i64);
        assert!(json.get("published_etag").is_none());
        let back: Checkpoint = serde_json::from_value(json).unwrap();
        assert_eq!(back.published, c.published);

        c.published = Some(Version::ETag("\"e\"".into()));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["published_etag"], "\"e\"");
        assert!(json.get("published_ino").is_none());
        let back: Checkpoint = serde_json::from_value(json).unwrap();
        assert_eq!(back.published, c.published);
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
        c.published = Some(file(5, 7, 9).version);
        assert!(c.matches(&file(5, 7, 9)));
        assert!(!c.matches(&file(6, 7, 9)));
        // `cp -p` / `rsync -a` restore the mtime, never the inode or ctime.
        assert!(!c.matches(&file(5, 8, 9)));
        assert!(!c.matches(&file(5, 7, 10)));
        // A checkpoint from before inode and ctime were recorded: republish once.
        let mut old = serde_json::to_value(&c).unwrap();
        let fields = old.as_object_mut().unwrap();
        assert!(fields.remove("published_ino").is_some());
        assert!(fields.remove("published_ctime_ns").is_some());
        let old: Checkpoint = serde_json::from_value(old).unwrap();
        assert_eq!(old.published, None);
        assert!(!old.matches(&file(5, 7, 9)));
        c.published = None;
        assert!(
            !c.matches(&file(5, 7, 9)),
            "a record without a change marker never matches"
        );
    }

    #[test]
    fn input_identity_is_optional_and_complete_or_nothing() {
        let mut c = record();
        let old = serde_json::to_value(&c).unwrap();
        assert!(
            old.get("input_size").is_none(),
            "absent fields are not written"
        );
        let back: Checkpoint = serde_json::from_value(old).unwrap();
        assert_eq!(back.input, InputIdentity::default());
        let meta = ObjectMeta {
            size: 7,
            version: Version::ETag("\"x\"".into()),
        };
        assert!(!c.input.matches(&meta), "an old checkpoint never matches");
        c.input = InputIdentity::of(Some(&meta));
        assert!(c.input.matches(&meta));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["input_size"], 7);
        assert_eq!(v["input_etag"], "\"x\"");
        let back: Checkpoint = serde_json::from_value(v).unwrap();
        assert!(back.input.matches(&meta));
        assert!(!back.input.matches(&ObjectMeta {
            size: 8,
            ..meta.clone()
        }));
        assert!(!back.input.matches(&ObjectMeta {
            version: Version::ETag("\"y\"".into()),
            ..meta
        }));
    }

    #[test]
    fn local_identity_round_trips_through_a_file() {
        let mut c = record();
        let file = |mtime_ns, ino, ctime_ns| ObjectMeta {
            size: 7,
            version: Version::File {
                mtime_ns,
                ino,
                ctime_ns,
            },
        };
        let meta = file(1_764_000_000_123_456_789, 42, 1_764_000_000_223_456_789);
        c.input = InputIdentity::of(Some(&meta));
        let bytes = serde_json::to_vec_pretty(&c).unwrap();
        let back: Checkpoint = serde_json::from_slice(&bytes).unwrap();
        assert!(back.input.matches(&meta));
        // A same-size copy with the mtime set back (`cp -p`) is another input.
        assert!(!back.input.matches(&file(
            1_764_000_000_123_456_789,
            43,
            1_764_000_000_223_456_789
        )));
        // A record with the mtime only (not complete) never matches.
        let mut partial = back.input.clone();
        partial.input_ino = None;
        assert!(!partial.matches(&meta));
    }

    #[test]
    fn round_trips_as_json() {
        let c = record();
        let back: Checkpoint = serde_json::from_slice(&serde_json::to_vec(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    /// A contract other than `progress` (another file, so another SHA-256).
    const OTHER: &str = r#"{"name":"t","version":"2","identity":"id","max_line_bytes":100,"prohibited":[],"fields":[{"name":"id","type":"string"}]}"#;

    #[test]
    fn landed_under_compares_the_contract_file_and_an_unstamped_record_is_progress() {
        let progress = crate::contract::progress();
        let other = crate::contract::Contract::load(OTHER.as_bytes()).unwrap();
        let stamp = ContractStamp::of(&other);
        assert_eq!((stamp.name.as_str(), stamp.version.as_str()), ("t", "2"));
        assert_eq!(stamp.sha256.len(), 64);
        assert!(stamp.is(&other));
        assert!(!stamp.is(&progress));
        let rec = record();
        assert!(rec.landed_under(&progress));
        assert!(!rec.landed_under(&other));
        let under_other = Checkpoint {
            contract: Some(stamp),
            ..record()
        };
        assert!(under_other.landed_under(&other));
        assert!(!under_other.landed_under(&progress));
        let unstamped = Checkpoint {
            contract: None,
            ..record()
        };
        assert!(unstamped.landed_under(&progress));
        assert!(!unstamped.landed_under(&other));
    }

    fn lake() -> crate::store::memory::MemoryStore {
        crate::store::memory::MemoryStore::default()
    }

    #[tokio::test]
    async fn read_finds_nothing_then_the_record_written_with_its_version() {
        let store = lake();
        let none = read(&store, "c.json", "progress", "a.jsonl").await.unwrap();
        assert!(none.is_none());
        write(&store, "c.json", &record(), None).await.unwrap();
        let cur = read(&store, "c.json", "progress", "a.jsonl")
            .await
            .unwrap()
            .expect("the record written");
        assert_eq!(cur.record, record());
        let raw = crate::store::get_small(&store, "c.json")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(raw.version, cur.version);
        assert!(raw.bytes.starts_with(b"{\n  \""), "pretty JSON");
        assert!(raw.bytes.ends_with(b"}\n"), "one line feed at the end");
    }

    #[tokio::test]
    async fn write_replaces_only_the_version_read() {
        let store = lake();
        write(&store, "c.json", &record(), None).await.unwrap();
        let again = write(&store, "c.json", &record(), None).await;
        assert!(
            matches!(again, Err(Error::Precondition { .. })),
            "{again:?}"
        );
        let first = read(&store, "c.json", "progress", "a.jsonl").await.unwrap();
        let first = first.unwrap().version;
        let next = Checkpoint {
            accepted_rows: 2,
            ..record()
        };
        write(&store, "c.json", &next, Some(&first)).await.unwrap();
        let stale = write(&store, "c.json", &record(), Some(&first)).await;
        assert!(
            matches!(stale, Err(Error::Precondition { .. })),
            "{stale:?}"
        );
        let now = read(&store, "c.json", "progress", "a.jsonl").await.unwrap();
        assert_eq!(now.unwrap().record.accepted_rows, 2);
    }

    #[tokio::test]
    async fn read_refuses_garbage_and_a_record_of_another_input() {
        let store = lake();
        write(&store, "c.json", &record(), None).await.unwrap();
        for (product, input) in [("enrollment", "a.jsonl"), ("progress", "b.jsonl")] {
            let e = read(&store, "c.json", product, input).await.unwrap_err();
            assert!(
                matches!(&e, Error::Corrupt { what: "checkpoint", reason, .. } if reason.contains("it records product")),
                "{product} {input}: {e:?}"
            );
        }
        let garbage = Bytes::from_static(b"{\"product\":");
        store
            .put_small("g.json", garbage, PutMode::Overwrite)
            .await
            .unwrap();
        let e = read(&store, "g.json", "progress", "a.jsonl")
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { what: "checkpoint", reason, .. } if reason.contains("not a checkpoint record")),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn published_drift_heads_the_object_the_checkpoint_names() {
        let store = lake();
        let mut rec = record();
        rec.published_path = store.location("a.jsonl");
        let missing = published_drift(&store, "a.jsonl", &rec).await.unwrap();
        assert_eq!(missing, Some(Drift::Missing));
        let body = Bytes::from_static(b"0123456789"); // the record's 10 bytes
        store
            .put_small("a.jsonl", body, PutMode::Overwrite)
            .await
            .unwrap();
        let meta = store.head("a.jsonl").await.unwrap().expect("written");
        rec.published = Some(meta.version.clone());
        assert_eq!(
            published_drift(&store, "a.jsonl", &rec).await.unwrap(),
            None
        );
        let elsewhere = published_drift(&store, "b.jsonl", &rec).await.unwrap();
        assert_eq!(elsewhere, Some(Drift::Elsewhere));
    }

    #[tokio::test]
    async fn upgrade_identity_records_the_input_once() {
        let store = lake();
        write(&store, "c.json", &record(), None).await.unwrap();
        let cur = read(&store, "c.json", "progress", "a.jsonl").await.unwrap();
        let cur = cur.unwrap();
        let meta = ObjectMeta {
            size: 7,
            version: Version::ETag("\"x\"".into()),
        };
        upgrade_identity(&store, "c.json", &cur, None).await;
        let same = read(&store, "c.json", "progress", "a.jsonl").await.unwrap();
        assert_eq!(same.unwrap().version, cur.version, "nothing to record");
        upgrade_identity(&store, "c.json", &cur, Some(&meta)).await;
        let after = read(&store, "c.json", "progress", "a.jsonl").await.unwrap();
        let after = after.unwrap();
        assert!(after.record.input.matches(&meta));
        assert_eq!(after.record.input.input_size, Some(7));
        assert_ne!(after.version, cur.version);
        // Already recorded: nothing is written.
        upgrade_identity(&store, "c.json", &after, Some(&meta)).await;
        let last = read(&store, "c.json", "progress", "a.jsonl").await.unwrap();
        assert_eq!(last.unwrap().version, after.version);
    }
}
