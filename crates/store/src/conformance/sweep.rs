//! What interrupted runs leave and who removes it: sweeps by run and age, the
//! leftovers `landing status` reports, and the copy fence a promotion obeys.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;

use super::{
    assert_precondition, pattern, promote, read_all, spec, stage, stage_bytes, Fixture, MIB, RUN_1,
    RUN_CUR, RUN_OLD, RUN_OLD2,
};
use crate::s3::{ConditionalCopy, S3Options};
use crate::{CopyFence, PutMode, Slot, Sweep, Upload};

pub async fn sweep_removes_only_old_leftovers_of_other_runs(fx: &dyn Fixture) {
    sweep_leftovers(fx, false).await;
}

/// moto's ListMultipartUploads answers a fixed `Initiated` of 2010-11-10 for every
/// upload, so its incomplete uploads always look old enough: even a young one of
/// another run is aborted there.
pub async fn sweep_on_moto_aborts_young_uploads_too_as_moto_dates_them_2010(fx: &dyn Fixture) {
    sweep_leftovers(fx, true).await;
}

/// The sweep case; `uploads_dated_2010` is moto's quirk above.
async fn sweep_leftovers(fx: &dyn Fixture, uploads_dated_2010: bool) {
    let store = fx.lake();
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
    promote(&*store, &staged, &PutMode::Create)
        .await
        .expect("promote");
    assert!(read_all(&*store, "raw/progress/a.jsonl").await == own_bytes);
}

/// `leftovers` (what `landing status` reports) lists a staging that completed but
/// was never promoted, as a run killed after staging leaves it, and its second
/// pass's; never a published object; and nothing once a sweep removed them.
pub async fn leftovers_lists_unpromoted_staging_until_swept(fx: &dyn Fixture) {
    let store = fx.lake();
    let folders = ["raw/progress".to_owned(), "checkpoints/progress".to_owned()];
    let none: Vec<String> = Vec::new();
    assert_eq!(store.leftovers(&folders).await.expect("leftovers"), none);
    let published = stage_bytes(&*store, &spec("pub.jsonl", RUN_1), b"{\"x\":1}\n", 8).await;
    promote(&*store, &published, &PutMode::Create)
        .await
        .expect("promote");
    store.delete(&published.key).await.expect("discard");
    assert_eq!(store.leftovers(&folders).await.expect("leftovers"), none);

    let staged = stage_bytes(&*store, &spec("a.jsonl", RUN_OLD), b"{\"x\":2}\n", 8).await;
    assert_eq!(
        store.leftovers(&folders).await.expect("leftovers"),
        vec![store.location(&staged.key)]
    );
    // The same run's second pass (`Slot::Second`), completed, is a leftover too.
    let mut up = store
        .stage(&staged.dest_key, RUN_OLD, Slot::Second)
        .await
        .expect("second staging");
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

/// `fencing` reports what the store does with a copy's destination condition, and
/// `promote` sends what it found: where a copy is fenced, a promotion never replaces
/// a destination that changed since the run decided. Conditional copies switched off
/// are reported as such.
pub async fn fencing_reports_the_store_and_promote_obeys_it(fx: &dyn Fixture) {
    let store = fx.lake();
    let first = stage_bytes(&*store, &spec("a.jsonl", RUN_OLD), b"{\"x\":1}\n", 8).await;
    let fence = store
        .fencing(&first.dest_key, RUN_OLD)
        .await
        .expect("fencing");
    assert_eq!(fence.verdict(), fx.fence());
    let again = store
        .fencing(&first.dest_key, RUN_CUR)
        .await
        .expect("fencing");
    assert_eq!(again, fence, "one verdict per store");
    store
        .promote(&first, &PutMode::Create, fence)
        .await
        .expect("first publish");
    if fence.verdict() == CopyFence::Fenced {
        let late = stage_bytes(&*store, &spec("a.jsonl", RUN_CUR), b"{\"x\":2}\n", 8).await;
        assert_precondition(
            store.promote(&late, &PutMode::Create, fence).await,
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
            ..fx.options()
        };
        let fence = fx.lake_with(&off).fencing(&first.dest_key, RUN_CUR).await;
        assert_eq!(fence.expect("fencing").verdict(), CopyFence::Off);
    }
}
