//! Staging and promotion: staged bytes are invisible until promoted, then published
//! exactly, in any number of parts, under any key; an abort leaves nothing; a staging
//! past the lease's deadline writes nothing; copies and checksums as configured.

use std::collections::BTreeSet;
use std::time::Instant;

use bytes::Bytes;

use super::{
    pattern, promote, read_all, round_trip, spec, stage, stage_bytes, Fixture, MIB, RUN_1,
};
use crate::s3::{ChecksumMode, S3Options};
use crate::{Gate, PutMode, Slot};
use landing_error::Error;

pub async fn stage_complete_promote_publishes_exact_bytes(fx: &dyn Fixture) {
    let store = fx.lake();
    let data = pattern(300_001, 2);
    round_trip(fx, &*store, "a.jsonl", &data, 4096).await;
}

pub async fn staged_object_is_invisible_before_promote(fx: &dyn Fixture) {
    let store = fx.lake();
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
        store.read(&spec.dest_key, 0).await,
        Err(Error::NotFound { .. })
    ));
    promote(&*store, &staged, &PutMode::Create)
        .await
        .expect("promote");
    assert!(read_all(&*store, &spec.dest_key).await == data);
}

pub async fn abort_leaves_nothing_behind(fx: &dyn Fixture) {
    let store = fx.lake();
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

/// A run past its lease's deadline adds nothing to staging, so a run that took its
/// lease over and swept finds everything it left: a new staging is refused, and on
/// S3 so is the single PutObject of an output started before the deadline (in memory,
/// its completion).
pub async fn staging_past_the_deadline_writes_nothing(fx: &dyn Fixture) {
    let gate = Gate::default();
    let store = fx.lake().with_run_gate(gate.clone());
    let mut started = stage(&*store, &spec("a.jsonl", RUN_1)).await;
    started
        .write(Bytes::from_static(b"{\"x\":1}\n"))
        .await
        .expect("write");
    gate.deadline.set(Some(Instant::now()));
    match store
        .stage("raw/progress/b.jsonl", RUN_1, Slot::First)
        .await
    {
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

pub async fn multi_part_staging_round_trips(fx: &dyn Fixture) {
    // 12 MiB in 5 MiB parts (5 + 5 + 2), written in odd chunks so part boundaries fall
    // inside writes; one write larger than a part takes the no-copy path.
    let store = fx.lake();
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
    let meta = promote(&*store, &staged, &PutMode::Create)
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

pub async fn empty_output_round_trips(fx: &dyn Fixture) {
    let store = fx.lake();
    round_trip(fx, &*store, "empty.jsonl", &[], 1).await;
    if fx.stages_as_objects() {
        assert_eq!(fx.incomplete_uploads().await, BTreeSet::new());
    }
}

pub async fn multipart_copy_promotion_round_trips(fx: &dyn Fixture) {
    let cfg = S3Options {
        copy_threshold: 6 << 20,
        ..fx.options()
    };
    let store = fx.lake_with(&cfg);
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

pub async fn odd_keys_round_trip(fx: &dyn Fixture) {
    let store = fx.lake();
    for (i, name) in ["día 1+2.jsonl", "c++ 100%~x.jsonl", "a=b&c;d,e@f$g.jsonl"]
        .into_iter()
        .enumerate()
    {
        let data = pattern(1000 + i, 7 + i as u64);
        round_trip(fx, &*store, name, &data, 333).await;
        let ck = format!("checkpoints/progress/{name}.json");
        let v = store
            .put_small(&ck, Bytes::from_static(b"{}"), PutMode::Create)
            .await
            .expect("put odd checkpoint");
        store
            .put_small(&ck, Bytes::from_static(b"{ }"), PutMode::Update(v))
            .await
            .expect("replace odd checkpoint");
        let got = crate::get_small(&*store, &ck)
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(&got.bytes[..], b"{ }");
    }
    let keys = fx.all_keys().await;
    assert!(
        keys.contains("raw/progress/día 1+2.jsonl"),
        "stored under its exact name: {keys:?}"
    );
}

/// `when_supported`: the staging upload names CRC32 and the staged object carries it;
/// `when_required`: no checksum anywhere. Both round-trip a multi-part output, and the
/// published object reads back through the SDK's response validation.
pub async fn staging_checksums_follow_the_sdk_setting(fx: &dyn Fixture) {
    for (mode, with_crc) in [
        (ChecksumMode::WhenSupported, true),
        (ChecksumMode::WhenRequired, false),
    ] {
        let cfg = S3Options {
            request_checksum: Some(mode),
            response_checksum: Some(mode),
            ..fx.options()
        };
        let store = fx.lake_with(&cfg);
        let name = format!("{mode:?}.jsonl");
        let data = pattern(11 * MIB, 10);
        let spec = spec(&name, RUN_1);
        let staged = stage_bytes(&*store, &spec, &data, MIB).await;
        let crc32 = fx.crc32(&staged.key).await;
        assert_eq!(
            crc32.is_some(),
            with_crc,
            "{mode:?}: staged object's CRC32 is {crc32:?}"
        );
        let meta = promote(&*store, &staged, &PutMode::Create)
            .await
            .expect("promote");
        assert_eq!(meta.size, data.len() as u64);
        assert!(read_all(&*store, &spec.dest_key).await == data, "{mode:?}");
    }
    assert_eq!(fx.incomplete_uploads().await, BTreeSet::new());
}

/// A promotion's label is stored with the published object and read back with its
/// metadata, through either copy, whatever characters it holds; a promotion without
/// one replaces it with none. Staging left behind is named by `unsettled` where
/// staging outlives a promote (S3); a local lake says it cannot tell.
pub async fn a_promotions_label_comes_with_the_object(fx: &dyn Fixture) {
    let label = r#"{"input_name":"día 1 %41+ü","rows":7}"#;
    for (name, copy_threshold) in [("small.jsonl", u64::MAX), ("big.jsonl", 6 << 20)] {
        let cfg = S3Options {
            copy_threshold,
            ..fx.options()
        };
        let store = fx.lake_with(&cfg);
        let size = if copy_threshold == u64::MAX {
            1000
        } else {
            7 * MIB
        };
        let spec = spec(name, RUN_1);
        let mut staged = stage_bytes(&*store, &spec, &pattern(size, 9), MIB).await;
        staged.label = Some(label.to_owned());
        let meta = promote(&*store, &staged, &PutMode::Create)
            .await
            .expect("promote");
        let (seen, got) = store
            .labelled(&spec.dest_key)
            .await
            .expect("labelled")
            .expect("published");
        assert_eq!(seen, meta, "{name}: the metadata of the promoted object");
        assert_eq!(got.as_deref(), Some(label), "{name}: its label");
        let again = stage_bytes(&*store, &spec, &pattern(size, 10), MIB).await;
        let replaced = promote(&*store, &again, &PutMode::Update(meta.version))
            .await
            .expect("promote over it");
        let (seen, got) = store
            .labelled(&spec.dest_key)
            .await
            .expect("labelled")
            .expect("published");
        assert_eq!(seen, replaced);
        assert_eq!(got, None, "{name}: a promotion without a label leaves none");
    }
    let store = fx.lake();
    assert!(store
        .labelled("raw/progress/none.jsonl")
        .await
        .expect("labelled")
        .is_none());
    let left = stage_bytes(&*store, &spec("left.jsonl", RUN_1), b"{}\n", 3).await;
    let unsettled = store
        .unsettled(&["raw/progress".to_owned()])
        .await
        .expect("unsettled");
    if fx.is_s3() {
        let names = unsettled.expect("S3 names its staging");
        assert!(names.contains(&"left.jsonl".to_owned()), "{names:?}");
    } else {
        assert_eq!(unsettled, None, "staging says nothing here");
    }
    store.delete(&left.key).await.expect("discard");
}
