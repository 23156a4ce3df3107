//! Store conformance: every behaviour the run contract relies on, asserted once and run
//! against every backend — a local folder, SeaweedFS, moto, LocalStack and the
//! in-memory store. The S3 servers come from `scripts/test-servers`
//! (`scripts/test-servers -- cargo test --test it store_conformance::`); without them
//! the S3 tests fail, they do not skip (`store_conformance::` tests named `::memory`
//! or `::local` need no server). Each test gets its own bucket (or temp folder, or
//! memory store), so tests run in parallel without sharing state.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use bytes::Bytes;
use landing_error::Error;
use landing_store::local::LocalStore;
use landing_store::memory::MemoryStore;
use landing_store::s3::S3Store;
use landing_store::s3::{ChecksumMode, ConditionalCopy, S3Options};
use landing_store::{
    Condition, CopyFence, Expect, Gate, Lake, ObjectMeta, Staged, Store, Sweep, Upload,
};
use tokio::io::AsyncReadExt;

use crate::support::{test_s3_config, Backend};

const MIB: usize = 1 << 20;
/// Every S3 fixture keeps its lake under this prefix, so prefix joining is exercised.
const S3_PREFIX: &str = "lake";

/// One backend, empty, for one test.
struct Fixture {
    backend: Backend,
    /// Local: the temp folder holding the lake.
    dir: Option<tempfile::TempDir>,
    /// S3: SDK configuration, raw client and bucket.
    s3: Option<S3Target>,
    /// Memory: the store (every handle the fixture gives shares its objects).
    memory: Option<MemoryStore>,
}

struct S3Target {
    sdk: aws_config::SdkConfig,
    client: Client,
    bucket: String,
}

impl Fixture {
    async fn new(backend: Backend, test: &str) -> Self {
        match backend {
            Backend::Local => Fixture {
                backend,
                dir: Some(tempfile::tempdir().expect("temp dir")),
                s3: None,
                memory: None,
            },
            Backend::Memory => Fixture {
                backend,
                dir: None,
                s3: None,
                memory: Some(MemoryStore::new()),
            },
            s3 => {
                let server = s3.server();
                let sdk = server.sdk_config().await;
                let (client, bucket) = server.fresh_bucket(test).await;
                Fixture {
                    backend,
                    dir: None,
                    s3: Some(S3Target {
                        sdk,
                        client,
                        bucket,
                    }),
                    memory: None,
                }
            }
        }
    }

    fn is_s3(&self) -> bool {
        self.s3.is_some()
    }

    /// Staging as objects under a staging prefix, an upload in progress being no
    /// object ([`Fixture::incomplete_uploads`]): S3 and memory. A local lake stages
    /// into temp files beside the destination instead.
    fn stages_as_objects(&self) -> bool {
        self.s3.is_some() || self.memory.is_some()
    }

    fn lake_dir(&self) -> PathBuf {
        self.dir
            .as_ref()
            .expect("local fixture")
            .path()
            .join("lake")
    }

    /// The store under test with the test S3 settings.
    fn store(&self) -> Box<dyn Lake> {
        self.store_with(&test_s3_config())
    }

    /// The store under test with explicit S3 settings (ignored by the local and memory
    /// backends).
    fn store_with(&self, cfg: &S3Options) -> Box<dyn Lake> {
        match (&self.s3, &self.memory) {
            (Some(t), _) => Box::new(S3Store::from_sdk_config(&t.sdk, &t.bucket, S3_PREFIX, cfg)),
            (None, Some(memory)) => Box::new(memory.clone()),
            (None, None) => Box::new(LocalStore::new(self.lake_dir())),
        }
    }

    /// Keys of incomplete multipart uploads in the bucket (relative to the lake); of a
    /// memory store, its uploads in progress.
    async fn incomplete_uploads(&self) -> BTreeSet<String> {
        if let Some(memory) = &self.memory {
            return memory.uploads().into_iter().collect();
        }
        let t = self.s3.as_ref().expect("S3 fixture");
        let out = t
            .client
            .list_multipart_uploads()
            .bucket(&t.bucket)
            .send()
            .await
            .expect("ListMultipartUploads");
        assert!(
            !out.is_truncated().unwrap_or(false),
            "more uploads than one page"
        );
        out.uploads()
            .iter()
            .filter_map(|u| u.key())
            .map(|k| relative(k).to_owned())
            .collect()
    }

    /// Every stored object (S3, memory) or file (local), relative to the lake. Local
    /// lock sidecars (`.<name>.cas`) are not data and are left out.
    async fn all_keys(&self) -> BTreeSet<String> {
        if let Some(memory) = &self.memory {
            return memory.keys().into_iter().collect();
        }
        match &self.s3 {
            Some(t) => {
                let mut keys = BTreeSet::new();
                let mut pages = t
                    .client
                    .list_objects_v2()
                    .bucket(&t.bucket)
                    .into_paginator()
                    .send();
                while let Some(page) = pages.next().await {
                    for o in page.expect("ListObjectsV2").contents() {
                        keys.insert(relative(o.key().expect("key")).to_owned());
                    }
                }
                keys
            }
            None => {
                let root = self.lake_dir();
                let mut keys = BTreeSet::new();
                walk(&root, &root, &mut keys);
                keys.retain(|k| !k.ends_with(".cas"));
                keys
            }
        }
    }
}

fn relative(key: &str) -> &str {
    key.strip_prefix(S3_PREFIX)
        .and_then(|k| k.strip_prefix('/'))
        .unwrap_or(key)
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    // Only a missing folder is empty; any other error fails the test.
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => panic!("reading {}: {e}", dir.display()),
    };
    for entry in entries {
        let entry = entry.expect("dir entry");
        let path = entry.path();
        if entry.file_type().expect("file type").is_dir() {
            walk(root, &path, out);
        } else {
            let rel = path.strip_prefix(root).expect("under root");
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
}

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

// Run ids in the job's own shape: the local sweep only takes temp files whose whole
// name parses as one of an input's temps.
const RUN_1: &str = "20260101T000001Z-00000001";
const RUN_OLD: &str = "20260101T000002Z-00000002";
const RUN_OLD2: &str = "20260101T000003Z-00000003";
const RUN_CUR: &str = "20260101T000004Z-00000004";

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
        .stage(&spec.dest_key, &spec.run_id)
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
    let r = store.read(key).await.expect("read");
    let size = r.size;
    let mut out = Vec::new();
    r.into_async_read()
        .read_to_end(&mut out)
        .await
        .expect("read body");
    assert_eq!(out.len() as u64, size, "read size matches the bytes");
    out
}

/// Promote `staged` over `expect` under the fence its store's probe found, as a run
/// does (`promote` cannot be called without one).
async fn promote(
    store: &dyn Lake,
    staged: &Staged,
    expect: &Expect,
) -> landing_error::Result<ObjectMeta> {
    let fence = store.fencing(&staged.dest_key, RUN_1).await?;
    store.promote(staged, expect, fence).await
}

/// Stage, promote and read back `data` under `name`; check what head and promote say.
async fn round_trip(fx: &Fixture, store: &dyn Lake, name: &str, data: &[u8], chunk: usize) {
    let spec = spec(name, RUN_1);
    let staged = stage_bytes(store, &spec, data, chunk).await;
    let meta = promote(store, &staged, &Expect::Absent)
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
    store.discard(&staged).await.expect("discard");
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

// ---------------------------------------------------------------------------------
// The cases.

async fn location_names_the_object(fx: &Fixture) {
    let store = fx.store();
    let loc = store.location("raw/progress/a.jsonl");
    match (&fx.s3, &fx.memory) {
        (Some(t), _) => assert_eq!(loc, format!("s3://{}/lake/raw/progress/a.jsonl", t.bucket)),
        (None, Some(_)) => assert_eq!(loc, "memory://raw/progress/a.jsonl"),
        (None, None) => assert!(loc.ends_with("lake/raw/progress/a.jsonl"), "{loc}"),
    }
}

async fn conditional_create_twice_is_precondition(fx: &Fixture) {
    let store = fx.store();
    let key = "checkpoints/progress/a.jsonl.json";
    let v1 = store
        .put_small(key, Bytes::from_static(b"first"), Condition::IfAbsent)
        .await
        .expect("first create");
    assert_precondition(
        store
            .put_small(key, Bytes::from_static(b"second"), Condition::IfAbsent)
            .await,
        "second create",
    );
    let got = store.get_small(key).await.expect("get").expect("exists");
    assert_eq!(&got.bytes[..], b"first");
    assert_eq!(got.version, v1);
}

async fn if_match_current_version_replaces(fx: &Fixture) {
    let store = fx.store();
    let key = "checkpoints/progress/a.jsonl.json";
    let v1 = store
        .put_small(key, Bytes::from_static(b"one"), Condition::IfAbsent)
        .await
        .expect("create");
    let read = store.get_small(key).await.expect("get").expect("exists");
    assert_eq!(
        read.version, v1,
        "get_small returns the version put_small returned"
    );
    let v2 = store
        .put_small(
            key,
            Bytes::from_static(b"two"),
            Condition::IfMatch(read.version),
        )
        .await
        .expect("replace current version");
    assert_ne!(v1, v2, "a replace yields a new version");
    let got = store.get_small(key).await.expect("get").expect("exists");
    assert_eq!(&got.bytes[..], b"two");
    assert_eq!(got.version, v2);
}

async fn if_match_stale_version_is_precondition(fx: &Fixture) {
    let store = fx.store();
    let key = "checkpoints/progress/a.jsonl.json";
    let v1 = store
        .put_small(key, Bytes::from_static(b"one"), Condition::IfAbsent)
        .await
        .expect("create");
    let v2 = store
        .put_small(
            key,
            Bytes::from_static(b"two"),
            Condition::IfMatch(v1.clone()),
        )
        .await
        .expect("replace");
    assert_precondition(
        store
            .put_small(key, Bytes::from_static(b"three"), Condition::IfMatch(v1))
            .await,
        "replace of a stale version",
    );
    let got = store.get_small(key).await.expect("get").expect("exists");
    assert_eq!(&got.bytes[..], b"two", "a lost condition writes nothing");
    assert_eq!(got.version, v2);
}

async fn if_match_missing_key_is_precondition(fx: &Fixture) {
    let store = fx.store();
    let key = "checkpoints/progress/gone.jsonl.json";
    // A version that once existed: create, read, delete.
    let v = store
        .put_small(key, Bytes::from_static(b"was"), Condition::IfAbsent)
        .await
        .expect("create");
    store.delete(key).await.expect("delete");
    assert_precondition(
        store
            .put_small(key, Bytes::from_static(b"now"), Condition::IfMatch(v))
            .await,
        "If-Match on a missing key",
    );
    assert!(
        store.get_small(key).await.expect("get").is_none(),
        "nothing written"
    );
}

async fn get_small_missing_is_none(fx: &Fixture) {
    let store = fx.store();
    assert!(store
        .get_small("checkpoints/progress/none.json")
        .await
        .expect("get")
        .is_none());
}

async fn head_missing_is_none(fx: &Fixture) {
    let store = fx.store();
    assert!(store
        .head("raw/progress/none.jsonl")
        .await
        .expect("head")
        .is_none());
}

async fn delete_missing_is_ok_and_delete_removes(fx: &Fixture) {
    let store = fx.store();
    store
        .delete("locks/progress/none.lock")
        .await
        .expect("delete of a missing key");
    let key = "locks/progress/a.jsonl.lock";
    store
        .put_small(key, Bytes::from_static(b"held"), Condition::None)
        .await
        .expect("put");
    store.delete(key).await.expect("delete");
    assert!(store.head(key).await.expect("head").is_none());
}

async fn read_streams_the_bytes(fx: &Fixture) {
    let store = fx.store();
    let key = "inbox/a.jsonl";
    let data = pattern(3 * MIB + 17, 1);
    store
        .put_small(key, Bytes::from(data.clone()), Condition::None)
        .await
        .expect("put");
    let mut r = store.read(key).await.expect("read");
    assert_eq!(r.size, data.len() as u64);
    // Read in chunks, as the pipeline does.
    let mut got = Vec::new();
    let mut buf = bytes::BytesMut::with_capacity(64 * 1024);
    loop {
        buf.clear();
        let n = r.read_chunk(&mut buf).await.expect("read body");
        assert_eq!(n, buf.len(), "a chunk appends what it read");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf);
    }
    assert!(got == data, "streamed bytes differ");
}

/// A read from an offset (a spilled run's replay) streams exactly the bytes from
/// there on, and its size is what is left; a missing object is `NotFound`.
async fn read_from_streams_the_rest(fx: &Fixture) {
    let store = fx.store();
    let key = "inbox/b.jsonl";
    let data = pattern(MIB + 5, 2);
    store
        .put_small(key, Bytes::from(data.clone()), Condition::None)
        .await
        .expect("put");
    for offset in [0, 1, 4096, MIB + 4] {
        let r = store
            .read_from(key, offset as u64)
            .await
            .expect("read_from");
        assert_eq!(r.size, (data.len() - offset) as u64, "offset {offset}");
        let mut got = Vec::new();
        r.into_async_read()
            .read_to_end(&mut got)
            .await
            .expect("read body");
        assert!(got[..] == data[offset..], "offset {offset}: bytes differ");
    }
    match store.read_from("inbox/none.jsonl", 10).await {
        Err(Error::NotFound { .. }) => {}
        other => panic!("expected NotFound, got {:?}", other.map(|r| r.size)),
    }
}

async fn read_missing_is_not_found(fx: &Fixture) {
    let store = fx.store();
    match store.read("inbox/none.jsonl").await {
        Err(Error::NotFound { location }) => {
            assert!(location.contains("inbox/none.jsonl"), "{location}")
        }
        Err(e) => panic!("expected NotFound, got {e:?}"),
        Ok(_) => panic!("expected NotFound, got a reader"),
    }
}

async fn stage_complete_promote_publishes_exact_bytes(fx: &Fixture) {
    let store = fx.store();
    let data = pattern(300_001, 2);
    round_trip(fx, &*store, "a.jsonl", &data, 4096).await;
}

async fn staged_object_is_invisible_before_promote(fx: &Fixture) {
    let store = fx.store();
    let spec = spec("a.jsonl", RUN_1);
    let data = pattern(10_000, 3);
    let mut up = stage(&*store, &spec).await;
    up.write(Bytes::from(data.clone())).await.expect("write");
    assert!(store.head(&spec.dest_key).await.expect("head").is_none());
    let staged = up.complete().await.expect("complete");
    assert!(
        store.head(&spec.dest_key).await.expect("head").is_none(),
        "staged bytes are visible at the destination before promote"
    );
    assert!(matches!(
        store.read(&spec.dest_key).await,
        Err(Error::NotFound { .. })
    ));
    promote(&*store, &staged, &Expect::Absent)
        .await
        .expect("promote");
    assert!(read_all(&*store, &spec.dest_key).await == data);
}

async fn abort_leaves_nothing_behind(fx: &Fixture) {
    let store = fx.store();
    let spec = spec("a.jsonl", RUN_1);
    let mut up = stage(&*store, &spec).await;
    // More than one 5 MiB part, so a part is in flight or uploaded when aborting.
    let data = Bytes::from(pattern(6 * MIB, 4));
    up.write(data.slice(..3 * MIB)).await.expect("write");
    up.write(data.slice(3 * MIB..)).await.expect("write");
    up.abort().await.expect("abort");
    assert!(store.head(&spec.dest_key).await.expect("head").is_none());
    if fx.stages_as_objects() {
        assert_eq!(
            fx.incomplete_uploads().await,
            BTreeSet::new(),
            "incomplete uploads"
        );
    }
    assert_eq!(
        fx.all_keys().await,
        BTreeSet::new(),
        "objects or files left"
    );
}

async fn multi_part_staging_round_trips(fx: &Fixture) {
    // 12 MiB in 5 MiB parts (5 + 5 + 2), written in odd chunks so part boundaries fall
    // inside writes; one write larger than a part takes the no-copy path.
    let store = fx.store();
    let data = pattern(12 * MIB, 5);
    let spec = spec("a.jsonl", RUN_1);
    let mut up = stage(&*store, &spec).await;
    let bytes = Bytes::from(data.clone());
    up.write(bytes.slice(..700_001)).await.expect("write");
    up.write(bytes.slice(700_001..1_000_000))
        .await
        .expect("write");
    up.write(bytes.slice(1_000_000..1_000_000 + 6 * MIB))
        .await
        .expect("write");
    let mut at = 1_000_000 + 6 * MIB;
    while at < data.len() {
        let end = (at + 333_333).min(data.len());
        up.write(bytes.slice(at..end)).await.expect("write");
        at = end;
    }
    let staged = up.complete().await.expect("complete");
    assert_eq!(staged.size, data.len() as u64);
    let meta = promote(&*store, &staged, &Expect::Absent)
        .await
        .expect("promote");
    assert_eq!(meta.size, data.len() as u64);
    assert!(
        read_all(&*store, &spec.dest_key).await == data,
        "published bytes differ"
    );
    if fx.stages_as_objects() {
        assert_eq!(fx.incomplete_uploads().await, BTreeSet::new());
    }
}

async fn empty_output_round_trips(fx: &Fixture) {
    let store = fx.store();
    round_trip(fx, &*store, "empty.jsonl", &[], 1).await;
    if fx.stages_as_objects() {
        assert_eq!(fx.incomplete_uploads().await, BTreeSet::new());
    }
}

async fn multipart_copy_promotion_round_trips(fx: &Fixture) {
    let cfg = S3Options {
        copy_threshold: 6 << 20,
        ..test_s3_config()
    };
    let store = fx.store_with(&cfg);
    let data = pattern(12 * MIB, 6);
    round_trip(fx, &*store, "big día+1.jsonl", &data, MIB).await;
    if fx.stages_as_objects() {
        assert_eq!(fx.incomplete_uploads().await, BTreeSet::new());
    }
    if fx.is_s3() {
        // A multipart object's ETag ends in `-<parts>`; a CopyObject's does not. 12 MiB
        // in 5 MiB copy parts is three UploadPartCopy calls.
        let meta = store
            .head("raw/progress/big día+1.jsonl")
            .await
            .expect("head")
            .expect("published");
        let etag = meta.etag().expect("S3 head has an ETag");
        let parts = (data.len() as u64).div_ceil(cfg.part_size as u64);
        assert!(
            etag.trim_matches('"').ends_with(&format!("-{parts}")),
            "published by a {parts}-part multipart copy, ETag {etag}"
        );
    }
}

async fn odd_keys_round_trip(fx: &Fixture) {
    let store = fx.store();
    for (i, name) in ["día 1+2.jsonl", "c++ 100%~x.jsonl", "a=b&c;d,e@f$g.jsonl"]
        .into_iter()
        .enumerate()
    {
        let data = pattern(1000 + i, 7 + i as u64);
        round_trip(fx, &*store, name, &data, 333).await;
        let ck = format!("checkpoints/progress/{name}.json");
        let v = store
            .put_small(&ck, Bytes::from_static(b"{}"), Condition::IfAbsent)
            .await
            .expect("put odd checkpoint");
        store
            .put_small(&ck, Bytes::from_static(b"{ }"), Condition::IfMatch(v))
            .await
            .expect("replace odd checkpoint");
        let got = store.get_small(&ck).await.expect("get").expect("exists");
        assert_eq!(&got.bytes[..], b"{ }");
    }
    let keys = fx.all_keys().await;
    assert!(
        keys.contains("raw/progress/día 1+2.jsonl"),
        "stored under its exact name: {keys:?}"
    );
}

async fn sweep_removes_only_old_leftovers_of_other_runs(fx: &Fixture) {
    sweep_leftovers(fx, false).await;
}

/// moto's ListMultipartUploads answers a fixed `Initiated` of 2010-11-10 for every
/// upload, so its incomplete uploads always look old enough: even a young one of
/// another run is aborted there.
async fn sweep_on_moto_aborts_young_uploads_too_as_moto_dates_them_2010(fx: &Fixture) {
    sweep_leftovers(fx, true).await;
}

/// The sweep case; `uploads_dated_2010` is moto's quirk above.
async fn sweep_leftovers(fx: &Fixture, uploads_dated_2010: bool) {
    let store = fx.store();
    // Past one 5 MiB part: an S3 backend holds a smaller output in memory for a
    // single PutObject and starts its multipart upload only then.
    let past_a_part = |seed| Bytes::from(pattern(5 * MIB + 8, seed));
    // Leftovers of a crash: an incomplete upload (run-old), a completed staging object
    // never cleaned up (run-old2), the current run's own upload, and another input's.
    let mut old_upload = stage(&*store, &spec("a.jsonl", RUN_OLD)).await;
    old_upload.write(past_a_part(1)).await.expect("write");
    // A crashed run leaves its upload or temp file behind and, being dead, no lock
    // on it: drop the handle (no backend deletes anything on drop).
    drop(old_upload);
    stage_bytes(&*store, &spec("a.jsonl", RUN_OLD2), b"{\"x\":2}\n", 8).await;
    let mut own = stage(&*store, &spec("a.jsonl", RUN_CUR)).await;
    let own_bytes = past_a_part(3);
    own.write(own_bytes.clone()).await.expect("write");
    let mut other: Box<dyn Upload> = stage(&*store, &spec("b.jsonl", RUN_OLD)).await;
    other.write(past_a_part(4)).await.expect("write");
    drop(other);

    let dest_keys = ["raw/progress/a.jsonl".to_owned()];
    let sweep = |older_than| store.sweep(&dest_keys, RUN_CUR, Sweep::Others { older_than });
    let before_uploads = if fx.stages_as_objects() {
        fx.incomplete_uploads().await
    } else {
        BTreeSet::new()
    };
    let before_keys = fx.all_keys().await;

    // Nothing is an hour old yet: nothing goes (but for moto's dates).
    let moto = uploads_dated_2010;
    let report = sweep(Duration::from_secs(3600)).await.expect("sweep");
    let young = if moto { (1, 0) } else { (0, 0) };
    assert_eq!((report.aborted_uploads, report.deleted_objects), young);
    assert_eq!(fx.all_keys().await, before_keys);
    // What it left of a.jsonl is reported: the other runs' two leftovers (on moto its
    // upload went), never the sweeping run's own, nor b.jsonl's.
    assert_eq!(report.kept, if moto { 1 } else { 2 }, "kept: {report:?}");

    let report = sweep(Duration::ZERO).await.expect("sweep");
    assert_eq!(report.kept, 0, "nothing of other runs left: {report:?}");
    let keys = fx.all_keys().await;
    if fx.stages_as_objects() {
        assert_eq!(
            before_uploads,
            BTreeSet::from([
                format!("staging/progress/{RUN_OLD}/a.jsonl"),
                format!("staging/progress/{RUN_CUR}/a.jsonl"),
                format!("staging/progress/{RUN_OLD}/b.jsonl"),
            ])
        );
        let old = if moto { (0, 1) } else { (1, 1) };
        assert_eq!((report.aborted_uploads, report.deleted_objects), old);
        assert_eq!(
            fx.incomplete_uploads().await,
            BTreeSet::from([
                format!("staging/progress/{RUN_CUR}/a.jsonl"),
                format!("staging/progress/{RUN_OLD}/b.jsonl"),
            ]),
            "only the other run's upload of a.jsonl is aborted"
        );
        assert!(before_keys.contains(&format!("staging/progress/{RUN_OLD2}/a.jsonl")));
        assert_eq!(keys, BTreeSet::new(), "the old staging object is deleted");
    } else {
        // Local leftovers are temp files beside the destination, whatever their state.
        assert_eq!(report.aborted_uploads + report.deleted_objects, 2);
        assert_eq!(
            keys,
            BTreeSet::from([
                format!("raw/progress/.a.jsonl.{RUN_CUR}.tmp"),
                format!("raw/progress/.b.jsonl.{RUN_OLD}.tmp"),
            ])
        );
    }
    // The current run's upload is intact and still completes.
    let staged = own.complete().await.expect("own upload still completes");
    promote(&*store, &staged, &Expect::Absent)
        .await
        .expect("promote");
    assert!(read_all(&*store, "raw/progress/a.jsonl").await == own_bytes);
}

/// `fencing` reports what the store does with a copy's destination condition, and
/// `promote` sends what it found: where a copy is fenced, a promotion never replaces
/// a destination that changed since the run decided. Conditional copies switched off
/// are reported as such.
async fn fencing_reports_the_store_and_promote_obeys_it(fx: &Fixture) {
    let store = fx.store();
    let first = stage_bytes(&*store, &spec("a.jsonl", RUN_OLD), b"{\"x\":1}\n", 8).await;
    let fence = store
        .fencing(&first.dest_key, RUN_OLD)
        .await
        .expect("fencing");
    let expected = match fx.backend {
        Backend::Moto => CopyFence::Ignored,
        Backend::Localstack => CopyFence::Unsafe,
        _ => CopyFence::Fenced,
    };
    assert_eq!(fence.verdict(), expected);
    let again = store
        .fencing(&first.dest_key, RUN_CUR)
        .await
        .expect("fencing");
    assert_eq!(again, fence, "one verdict per store");
    store
        .promote(&first, &Expect::Absent, fence)
        .await
        .expect("first publish");
    if fence.verdict() == CopyFence::Fenced {
        let late = stage_bytes(&*store, &spec("a.jsonl", RUN_CUR), b"{\"x\":2}\n", 8).await;
        assert_precondition(
            store.promote(&late, &Expect::Absent, fence).await,
            "a promotion over a publish it did not see",
        );
        assert_eq!(
            read_all(&*store, "raw/progress/a.jsonl").await,
            b"{\"x\":1}\n"
        );
    }
    if fx.is_s3() {
        let off = S3Options {
            conditional_copy: ConditionalCopy::Off,
            ..test_s3_config()
        };
        let fence = fx.store_with(&off).fencing(&first.dest_key, RUN_CUR).await;
        assert_eq!(fence.expect("fencing").verdict(), CopyFence::Off);
    }
}

// ---------------------------------------------------------------------------------
// S3-only cases.

/// `when_supported`: the staging upload names CRC32 and the staged object carries it;
/// `when_required`: no checksum anywhere. Both round-trip a multi-part output, and the
/// published object reads back through the SDK's response validation.
async fn staging_checksums_follow_the_sdk_setting(fx: &Fixture) {
    let t = fx.s3.as_ref().expect("S3 fixture");
    for (mode, with_crc) in [
        (ChecksumMode::WhenSupported, true),
        (ChecksumMode::WhenRequired, false),
    ] {
        let cfg = S3Options {
            request_checksum: Some(mode),
            response_checksum: Some(mode),
            ..test_s3_config()
        };
        let store = fx.store_with(&cfg);
        let name = format!("{mode:?}.jsonl");
        let data = pattern(11 * MIB, 10);
        let spec = spec(&name, RUN_1);
        let staged = stage_bytes(&*store, &spec, &data, MIB).await;
        let head = t
            .client
            .head_object()
            .bucket(&t.bucket)
            .key(format!("{S3_PREFIX}/{}", staged.key))
            .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
            .send()
            .await
            .expect("HeadObject of the staged object");
        assert_eq!(
            head.checksum_crc32().is_some(),
            with_crc,
            "{mode:?}: staged object's CRC32 is {:?}",
            head.checksum_crc32()
        );
        let meta = promote(&*store, &staged, &Expect::Absent)
            .await
            .expect("promote");
        assert_eq!(meta.size, data.len() as u64);
        assert!(read_all(&*store, &spec.dest_key).await == data, "{mode:?}");
    }
    assert_eq!(fx.incomplete_uploads().await, BTreeSet::new());
}

// ---------------------------------------------------------------------------------
/// `list` shows one level: the files directly under a folder with the size and
/// identity `head` reports, sub-folders by name, nothing deeper; a missing folder is
/// empty. (Pagination past 1,000 keys: the `inbox` module.)
async fn list_shows_one_level_with_identity(fx: &Fixture) {
    let store = fx.store();
    for (key, body) in [
        ("inbox/b.jsonl", &b"bb"[..]),
        ("inbox/a.jsonl", b"a"),
        ("inbox/sub/c.jsonl", b"ccc"),
        ("inboxes/d.jsonl", b"d"),
    ] {
        store
            .put_small(key, Bytes::from_static(body), Condition::None)
            .await
            .expect("put");
    }
    let listing = store.list("inbox").await.expect("list");
    let names: Vec<&str> = listing.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["a.jsonl", "b.jsonl"], "{listing:?}");
    assert_eq!(listing.folders, ["sub"]);
    for f in &listing.files {
        let head = store
            .head(&format!("inbox/{}", f.name))
            .await
            .expect("head")
            .expect("exists");
        assert_eq!(f.meta, head, "{}", f.name);
        assert!(f.modified_ns > 0);
    }
    assert_eq!(store.list("inbox/").await.expect("list").files.len(), 2);
    let empty = store.list("nothing/here").await.expect("list missing");
    assert!(empty.files.is_empty() && empty.folders.is_empty());
    let root = store.list("").await.expect("list root");
    assert!(root.files.is_empty(), "{root:?}");
    assert!(root.folders.contains(&"inbox".to_owned()), "{root:?}");
}

// One test per (case, backend).

impl Fixture {
    /// Runs `case` on a fresh, empty `backend` (the runner of the matrix below).
    async fn run(backend: Backend, test: &str, case: impl AsyncFnOnce(&Fixture)) {
        let fx = Fixture::new(backend, test).await;
        case(&fx).await;
    }
}

/// A run past its lease's deadline adds nothing to staging, so a run that took its
/// lease over and swept finds everything it left: a new staging is refused, and on
/// S3 so is the single PutObject of an output started before the deadline (in memory,
/// its completion).
async fn staging_past_the_deadline_writes_nothing(fx: &Fixture) {
    let gate = Gate::default();
    let store = fx.store().with_run_gate(gate.clone());
    let mut started = stage(&*store, &spec("a.jsonl", RUN_1)).await;
    started
        .write(Bytes::from_static(b"{\"x\":1}\n"))
        .await
        .expect("write");
    gate.deadline.set(Some(Instant::now()));
    match store.stage("raw/progress/b.jsonl", RUN_1).await {
        Err(Error::Conflict(m)) => assert!(m.contains("lease deadline passed"), "{m}"),
        Err(e) => panic!("a staging past the deadline failed otherwise: {e}"),
        Ok(_) => panic!("a staging started past the deadline"),
    }
    if fx.stages_as_objects() {
        match started.complete().await {
            Err(Error::Conflict(m)) => assert!(m.contains("lease deadline passed"), "{m}"),
            other => panic!("a staging completed past the deadline: {:?}", other.err()),
        }
        assert_eq!(fx.all_keys().await, BTreeSet::new(), "nothing staged");
        assert_eq!(fx.incomplete_uploads().await, BTreeSet::new());
    } else {
        // A local staging is its temp file, created before the deadline; b's is not.
        assert_eq!(
            fx.all_keys().await,
            BTreeSet::from([format!("raw/progress/.a.jsonl.{RUN_1}.tmp")])
        );
    }
}

// Cases every backend must pass: a local folder, each S3 server and memory.
/// `leftovers` (what `landing status` reports) lists a staging that completed but
/// was never promoted, as a run killed after staging leaves it, and its second
/// pass's; never a published object; and nothing once a sweep removed them.
async fn leftovers_lists_unpromoted_staging_until_swept(fx: &Fixture) {
    let store = fx.store();
    let folders = ["raw/progress".to_owned(), "checkpoints/progress".to_owned()];
    let none: Vec<String> = Vec::new();
    assert_eq!(store.leftovers(&folders).await.expect("leftovers"), none);
    let published = stage_bytes(&*store, &spec("pub.jsonl", RUN_1), b"{\"x\":1}\n", 8).await;
    promote(&*store, &published, &Expect::Absent)
        .await
        .expect("promote");
    store.discard(&published).await.expect("discard");
    assert_eq!(store.leftovers(&folders).await.expect("leftovers"), none);

    let staged = stage_bytes(&*store, &spec("a.jsonl", RUN_OLD), b"{\"x\":2}\n", 8).await;
    assert_eq!(
        store.leftovers(&folders).await.expect("leftovers"),
        vec![store.location(&staged.key)]
    );
    // The same run's second pass (`restage`), completed, is a leftover too.
    let mut up = store.restage(&staged, RUN_OLD).await.expect("restage");
    up.write(Bytes::from_static(b"{\"x\":2}\n"))
        .await
        .expect("write");
    let second = up.complete().await.expect("complete");
    assert_ne!(second.key, staged.key);
    let mut left = store.leftovers(&folders).await.expect("leftovers");
    left.sort();
    let mut both = vec![store.location(&staged.key), store.location(&second.key)];
    both.sort();
    assert_eq!(left, both);
    let others = Sweep::Others {
        older_than: Duration::ZERO,
    };
    let swept = store
        .sweep(&["raw/progress/a.jsonl".to_owned()], RUN_CUR, others)
        .await
        .expect("sweep");
    assert_eq!(swept.deleted_objects, 2);
    assert_eq!(store.leftovers(&folders).await.expect("leftovers"), none);
}

matrix! {
    async location_names_the_object: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async conditional_create_twice_is_precondition: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async if_match_current_version_replaces: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async if_match_stale_version_is_precondition: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async if_match_missing_key_is_precondition: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async get_small_missing_is_none: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async head_missing_is_none: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async delete_missing_is_ok_and_delete_removes: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async read_streams_the_bytes: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async read_from_streams_the_rest: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async read_missing_is_not_found: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async stage_complete_promote_publishes_exact_bytes: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async staged_object_is_invisible_before_promote: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async abort_leaves_nothing_behind: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async staging_past_the_deadline_writes_nothing: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async multi_part_staging_round_trips: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async empty_output_round_trips: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async multipart_copy_promotion_round_trips: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async odd_keys_round_trip: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async sweep_removes_only_old_leftovers_of_other_runs: [local, seaweed, localstack, memory] => Fixture::run;
    // moto's fixed upload dates only; the other backends date their uploads truly.
    async sweep_on_moto_aborts_young_uploads_too_as_moto_dates_them_2010: [moto] => Fixture::run;
    async list_shows_one_level_with_identity: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async leftovers_lists_unpromoted_staging_until_swept: [local, seaweed, moto, localstack, memory] => Fixture::run;
    async fencing_reports_the_store_and_promote_obeys_it: [local, seaweed, moto, localstack, memory] => Fixture::run;
}

// Cases for the S3 servers only: the SDK's checksum settings (memory has no wire).
matrix! {
    async staging_checksums_follow_the_sdk_setting: [seaweed, moto, localstack] => Fixture::run;
}
