//! The storage boundary: one narrow trait, implemented by a local-folder backend and
//! an S3 backend. The pipeline only speaks this trait, so the run contract is written
//! once. Provider quirks (status codes, error bodies, encodings) are normalised inside
//! each backend into [`Error`](crate::Error) variants.
//!
//! Keys are `/`-separated and relative to the store's root (a folder, or an S3
//! bucket plus prefix).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::AsyncRead;

use crate::error::Result;

pub mod local;
pub mod s3;

/// What the skip rule compares: the published object's size and its change marker
/// (the ETag on S3, the modification time on a local disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub size: u64,
    /// S3 ETag as returned by the server (quotes included).
    pub etag: Option<String>,
    /// Local modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: Option<i128>,
}

/// A condition on a small-object write (checkpoint, lease).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// Write unconditionally.
    None,
    /// Create only; fail with `Precondition` if the key exists (`If-None-Match: *`).
    IfAbsent,
    /// Replace only the version read earlier (`If-Match: <etag>`).
    IfMatch(String),
}

/// A small object read whole, with the version token to use in [`Condition::IfMatch`].
#[derive(Debug, Clone)]
pub struct Versioned {
    pub bytes: Bytes,
    pub version: String,
}

/// A streaming read of an input.
pub struct ObjectReader {
    pub body: Box<dyn AsyncRead + Send + Unpin>,
    pub size: u64,
}

/// Where to stage an output before it is published at `dest_key`.
#[derive(Debug, Clone)]
pub struct StageSpec {
    /// The published key the staged bytes will be promoted to.
    pub dest_key: String,
    /// The run staging it; local temp names and S3 staging keys carry it.
    pub run_id: String,
    /// Staging key for stores without an atomic rename (S3): `staging/<product>/<run id>/<name>`.
    pub staging_key: String,
}

/// A completed staging object, not yet visible under its published name.
#[derive(Debug, Clone)]
pub struct Staged {
    /// Key of the staged bytes (the temp file or the staging object).
    pub key: String,
    pub dest_key: String,
    pub size: u64,
}

/// What a sweep of crashed runs' leftovers should look at.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// Published keys whose leftovers (temp files beside them) may exist.
    pub dest_keys: Vec<String>,
    /// Prefix holding per-run staging folders (`staging/<product>/`).
    pub staging_prefix: String,
    /// Only leftovers whose final path segment is one of these names are swept.
    pub names: Vec<String>,
    /// Never sweep the current run's own staging.
    pub keep_run_id: String,
    /// Only sweep leftovers at least this old.
    pub older_than: Duration,
}

/// What a sweep removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    pub aborted_uploads: u64,
    pub deleted_objects: u64,
}

/// The storage operations the run contract needs, and nothing more.
#[async_trait]
pub trait Store: Send + Sync {
    /// Full human-readable location of a key, for messages and summaries.
    fn location(&self, key: &str) -> String;

    /// Open `key` for one streaming read. `NotFound` if absent.
    async fn read(&self, key: &str) -> Result<ObjectReader>;

    /// Size and change marker of `key`, or `None` if absent.
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>>;

    /// Read a small object whole with its version token, or `None` if absent.
    async fn get_small(&self, key: &str) -> Result<Option<Versioned>>;

    /// Write a small object under `cond`; returns the new version token.
    /// A false condition is `Precondition`, whatever the provider's status code.
    async fn put_small(&self, key: &str, body: Bytes, cond: Condition) -> Result<String>;

    /// Delete `key`; absent is not an error.
    async fn delete(&self, key: &str) -> Result<()>;

    /// Start staging an output that no reader can see until [`Store::promote`].
    async fn stage(&self, spec: &StageSpec) -> Result<Box<dyn Upload>>;

    /// Publish staged bytes under their destination atomically (a reader sees the old
    /// object or the new one), make it durable, verify it, and return its metadata.
    async fn promote(&self, staged: &Staged) -> Result<ObjectMeta>;

    /// Remove a staging object once the checkpoint is written. Absent is fine.
    async fn discard(&self, staged: &Staged) -> Result<()>;

    /// Remove leftovers of crashed runs (incomplete uploads, staging objects, temp files).
    async fn sweep(&self, spec: &SweepSpec) -> Result<SweepReport>;
}

/// An output being staged. Bytes are written in order; nothing is visible to readers.
#[async_trait]
pub trait Upload: Send {
    async fn write(&mut self, data: Bytes) -> Result<()>;
    /// Make the staged bytes complete and durable.
    async fn complete(self: Box<Self>) -> Result<Staged>;
    /// Drop everything staged so far.
    async fn abort(self: Box<Self>) -> Result<()>;
}
