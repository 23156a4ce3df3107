//! The store conformance suite: every behaviour of [`Store`] and [`Lake`] that the
//! run contract relies on, one public async function per behaviour, each run on an
//! empty backend that a [`Fixture`] gives. A backend's own tests call every function
//! on a fresh fixture of that backend (`crates/store/tests/conformance/` does so for
//! the local folder, the memory store and three S3 servers), as `object_store`'s
//! `integration` module is used. Built with the `conformance` feature (and in this
//! crate's own tests); the functions panic on a failed check.
//!
//! Where backends rightly differ (how staging is kept, what a location looks like,
//! what the copy-fence probe finds) the fixture says what its backend does, and the
//! checks hold it to that.
//!
//! - this file: [`Fixture`], [`Named`] and the helpers the checks share;
//! - `objects.rs`: the primitives of [`Store`] (small conditional writes, reads,
//!   heads, deletes, listings, locations);
//! - `staging.rs`: staging and promotion (hidden staging, parts, aborts, the lease
//!   deadline, odd keys, copies, checksums);
//! - `sweep.rs`: what interrupted runs leave (sweeps, leftovers) and the copy fence.

use std::collections::BTreeSet;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::AsyncReadExt;

use crate::s3::S3Options;
use crate::{CopyFence, Lake, ObjectMeta, PutMode, Slot, Staged, Store, Upload};
use landing_error::Error;

mod objects;
mod staging;
mod sweep;

pub use objects::*;
pub use staging::*;
pub use sweep::*;

/// One backend under test, empty when a check starts. Each check takes a fresh one,
/// so checks may run in parallel.
#[async_trait]
pub trait Fixture: Send + Sync {
    /// The store under test with these S3 settings (a backend that is no S3 store
    /// ignores them). Every handle sees the same objects.
    fn lake_with(&self, options: &S3Options) -> Box<dyn Lake>;

    /// The S3 settings the checks start from; a check changes one of them at most
    /// (the copy threshold, conditional copies, checksum modes). The smallest part
    /// S3 allows keeps multi-part paths on small data.
    fn options(&self) -> S3Options;

    /// What `location(key)` must answer for this backend.
    fn location_of(&self, key: &str) -> Named;

    /// The store is S3: `promote` returns an ETag, a multipart copy's ETag ends in
    /// `-<parts>`, and conditional copies can be switched off.
    fn is_s3(&self) -> bool;

    /// Staging is kept as objects under a staging prefix, an upload in progress being
    /// no object ([`Fixture::incomplete_uploads`]): S3 and memory. A local lake stages
    /// into temp files beside the destination instead.
    fn stages_as_objects(&self) -> bool;

    /// What [`Lake::fencing`] finds on this backend.
    fn fence(&self) -> CopyFence;

    /// Every stored object or file, relative to the lake's root, staging included.
    /// Local lock sidecars (`.<name>.cas`) are not data and are left out.
    async fn all_keys(&self) -> BTreeSet<String>;

    /// Keys of uploads in progress, relative to the lake's root (S3's incomplete
    /// multipart uploads). Asked only where [`Fixture::stages_as_objects`].
    async fn incomplete_uploads(&self) -> BTreeSet<String> {
        panic!("this backend keeps no uploads apart from its objects")
    }

    /// The CRC32 checksum stored with the object at `key` (relative to the lake's
    /// root), as a HeadObject with checksum mode enabled reports it. Asked only of
    /// S3 stores ([`staging_checksums_follow_the_sdk_setting`]).
    async fn crc32(&self, key: &str) -> Option<String> {
        panic!("{key}: this backend stores no S3 checksums")
    }

    /// The store under test with [`Fixture::options`].
    fn lake(&self) -> Box<dyn Lake> {
        self.lake_with(&self.options())
    }
}

/// A location as a check expects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// This whole string.
    Exactly(String),
    /// A string ending in this (a temp folder's path before it).
    EndingWith(String),
}

const MIB: usize = 1 << 20;

// Run ids in the job's own shape: the local sweep only takes temp files whose whole
// name parses as one of an input's temps.
const RUN_1: &str = "20260101T000001Z-00000001";
const RUN_OLD: &str = "20260101T000002Z-00000002";
const RUN_OLD2: &str = "20260101T000003Z-00000003";
const RUN_CUR: &str = "20260101T000004Z-00000004";

/// Deterministic, non-repeating bytes (xorshift), so a misplaced or reordered part
/// cannot go unnoticed.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// An output to stage: where it will be published, and by which run.
struct Spec {
    dest_key: String,
    run_id: String,
}

fn spec(name: &str, run_id: &str) -> Spec {
    Spec {
        dest_key: format!("raw/progress/{name}"),
        run_id: run_id.to_owned(),
    }
}

async fn stage(store: &dyn Lake, spec: &Spec) -> Box<dyn Upload> {
    store
        .stage(&spec.dest_key, &spec.run_id, Slot::First)
        .await
        .expect("stage")
}

/// Stage `data`, written in chunks of `chunk` bytes, and complete it.
async fn stage_bytes(store: &dyn Lake, spec: &Spec, data: &[u8], chunk: usize) -> Staged {
    let mut up = stage(store, spec).await;
    let data = Bytes::copy_from_slice(data);
    let mut at = 0;
    while at < data.len() {
        let end = (at + chunk).min(data.len());
        up.write(data.slice(at..end)).await.expect("write");
        at = end;
    }
    let staged = up.complete().await.expect("complete");
    assert_eq!(staged.size, data.len() as u64, "staged size");
    assert_eq!(staged.dest_key, spec.dest_key);
    staged
}

async fn read_all(store: &dyn Store, key: &str) -> Vec<u8> {
    let r = store.read(key, 0).await.expect("read");
    let size = r.size;
    let mut out = Vec::new();
    r.into_async_read()
        .read_to_end(&mut out)
        .await
        .expect("read body");
    assert_eq!(out.len() as u64, size, "read size matches the bytes");
    out
}

/// Promote `staged` in `mode` under the fence its store's probe found, as a run
/// does (`promote` cannot be called without one).
async fn promote(
    store: &dyn Lake,
    staged: &Staged,
    mode: &PutMode,
) -> landing_error::Result<ObjectMeta> {
    let fence = store.fencing(&staged.dest_key, RUN_1).await?;
    store.promote(staged, mode, fence).await
}

/// Stage, promote and read back `data` under `name`; check what head and promote say.
async fn round_trip(fx: &dyn Fixture, store: &dyn Lake, name: &str, data: &[u8], chunk: usize) {
    let spec = spec(name, RUN_1);
    let staged = stage_bytes(store, &spec, data, chunk).await;
    let meta = promote(store, &staged, &PutMode::Create)
        .await
        .expect("promote");
    assert_eq!(meta.size, data.len() as u64);
    if fx.is_s3() {
        assert!(meta.etag().is_some(), "S3 promote returns the ETag");
    }
    let head = store
        .head(&spec.dest_key)
        .await
        .expect("head")
        .expect("published");
    assert_eq!(head, meta, "head matches what promote verified");
    assert!(
        read_all(store, &spec.dest_key).await == data,
        "published bytes differ"
    );
    store.delete(&staged.key).await.expect("discard");
    assert!(
        read_all(store, &spec.dest_key).await == data,
        "discard touched the publish"
    );
}

fn assert_precondition<T: std::fmt::Debug>(r: landing_error::Result<T>, what: &str) {
    match r {
        Err(Error::Precondition { .. }) => {}
        other => panic!("{what}: expected Precondition, got {other:?}"),
    }
}
