//! Crash points: the job is killed (SIGKILL, via the drill switch `LANDING_CRASH_AT`)
//! at each named stage while replacing a previous publish. After each, what a reader
//! sees must be the old bytes or the complete new bytes, the checkpoint never names
//! bytes that are not published, and a plain rerun ends in the state of a clean run
//! with no staging left behind (docs/design.md section 1, crash table).

use crate::support::*;

const NAME: &str = "progress-2026-03-04.jsonl";
const RAW: &str = "raw/progress/progress-2026-03-04.jsonl";
const CKPT: &str = "checkpoints/progress/progress-2026-03-04.jsonl.json";

fn clean_output(input: &[u8]) -> Vec<u8> {
    expected_publish(input)
}

fn ckpt_sha(w: &World) -> Option<String> {
    checkpoint_sha(w, CKPT)
}

/// What the crash table promises right after the crash.
enum Expect {
    /// Old publish intact, checkpoint old.
    Old,
    /// New publish, checkpoint still old.
    NewUnmarked,
    /// New publish, new checkpoint.
    NewMarked,
}

fn crash_then_rerun(kind: Kind, point: &str, expect: Expect) {
    let old_in = generated(2_000, 11);
    // ~12 MiB: several 5 MiB parts on S3, several 1 MiB flushes locally.
    let new_in = generated(60_000, 12);
    let (old_out, new_out) = (clean_output(&old_in), clean_output(&new_in));
    let mut w = World::new(kind, &format!("crash-{point}"));
    w.env.push(("LANDING_S3_PART_SIZE_MIB".into(), "5".into()));
    if w.is_s3() {
        w.env
            .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }
    let input = w.put_input(NAME, &old_in);
    assert_eq!(w.run(&input, &[]).code, Some(0));
    w.put_input(NAME, &new_in);

    let crashed = w.run_env(&input, &[], &[("LANDING_CRASH_AT", point)]);
    assert_eq!(
        crashed.signal,
        Some(9),
        "expected a SIGKILL at {point}: {:?}\n{}",
        crashed.code,
        crashed.stderr
    );

    let raw = w
        .get(RAW)
        .expect("a published object exists after the crash");
    let sha = ckpt_sha(&w).expect("a checkpoint exists after the crash");
    assert!(
        raw == old_out || raw == new_out,
        "published bytes are neither old nor new after {point}"
    );
    match expect {
        Expect::Old => {
            assert!(
                raw == old_out,
                "old publish replaced before the publish step"
            );
            assert_eq!(sha, sha256(&old_in));
        }
        Expect::NewUnmarked => {
            assert!(raw == new_out);
            assert_eq!(sha, sha256(&old_in));
        }
        Expect::NewMarked => {
            assert!(raw == new_out);
            assert_eq!(sha, sha256(&new_in));
        }
    }

    // The log: the first publish's entry, and the new one only once the crashed run
    // wrote it (after the log entry); it names the published version.
    let logged = crate::commit_log::log_entries(&w, "progress");
    let crashed_entry = matches!(point, "after-log-entry" | "after-checkpoint");
    assert_eq!(
        logged.len(),
        if crashed_entry { 2 } else { 1 },
        "entries after {point}"
    );
    let latest = logged.last().unwrap();
    let uncommitted = point == "after-publish";
    assert_eq!(
        crate::commit_log::names_published(&w, latest, RAW),
        !uncommitted,
        "after {point}, the latest entry names the published version unless none was written: {latest}"
    );

    let rerun = w.run(&input, &["--lease-wait", TAKEOVER_WAIT]);
    assert_eq!(rerun.code, Some(0), "rerun after {point}: {}", rerun.stderr);
    let expected_action = if matches!(expect, Expect::NewMarked) {
        "skipped"
    } else {
        "published"
    };
    assert_eq!(rerun.action(), expected_action);
    // One entry per publish: a rerun that publishes adds one, naming the version it
    // replaced and the entry that named it (none after a crash before the entry).
    let log = crate::commit_log::log_entries(&w, "progress");
    let last = log.last().unwrap();
    crate::commit_log::assert_names_published(&w, last, RAW);
    assert_eq!(last["published_sha256"], sha256(&new_out));
    if expected_action == "published" {
        assert_eq!(
            log.len(),
            logged.len() + 1,
            "one more entry after the rerun"
        );
        let named = if point == "after-publish" {
            serde_json::Value::Null
        } else {
            logged.len().into()
        };
        assert_eq!(last["replaced"]["sequence"], named, "{last}");
    } else {
        assert_eq!(log.len(), logged.len(), "a skip adds no entry");
    }
    assert!(w.get(RAW).unwrap() == new_out);
    assert_eq!(ckpt_sha(&w).unwrap(), sha256(&new_in));
    assert!(
        w.leftovers().is_empty(),
        "leftovers after rerun: {:?}",
        w.leftovers()
    );
    // Another plain rerun is a skip: the state equals a clean run's.
    assert_eq!(w.run(&input, &[]).action(), "skipped");
}

matrix! {
    mid_stream: [local, seaweed, moto, localstack] => crash_then_rerun("mid-stream", Expect::Old);
    after_part: [seaweed, moto, localstack] => crash_then_rerun("after-part:1", Expect::Old);
    after_staging: [local, seaweed, moto, localstack] => crash_then_rerun("after-staging", Expect::Old);
    after_publish: [local, seaweed, moto, localstack] => crash_then_rerun("after-publish", Expect::NewUnmarked);
    after_log_entry: [local, seaweed, moto, localstack] => crash_then_rerun("after-log-entry", Expect::NewUnmarked);
    after_checkpoint: [local, seaweed, moto, localstack] => crash_then_rerun("after-checkpoint", Expect::NewMarked);
}
