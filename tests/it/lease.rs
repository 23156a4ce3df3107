//! One run at a time: overlapping runs of the same input, a live lease, an expired
//! lease and a killed holder.

use std::process::Stdio;

use crate::support::*;

const NAME: &str = "progress-2026-03-05.jsonl";
const RAW: &str = "raw/progress/progress-2026-03-05.jsonl";
const CKPT: &str = "checkpoints/progress/progress-2026-03-05.jsonl.json";
const LOCK: &str = "locks/progress/progress-2026-03-05.jsonl.lock";

fn lease_record(run_id: &str, boot_id: &str, expires_at: &str) -> Vec<u8> {
    serde_json::json!({
        "run_id": run_id, "host": "elsewhere", "pid": 1, "boot_id": boot_id,
        "pid_ns": "pid:[1]", "acquired_at": "2026-01-01T00:00:00Z", "expires_at": expires_at,
    })
    .to_string()
    .into_bytes()
}

/// A live lease held by another host: exit 75, nothing changes.
fn live_lease_means_busy(kind: Kind) {
    let w = World::new(kind, "busy");
    let input = w.put_input(NAME, format!("{}\n", event("a", 1)).as_bytes());
    let lease = lease_record("other-run", "another-machine", "2999-01-01T00:00:00Z");
    w.put(LOCK, &lease);
    let r = w.run(&input, &[]);
    assert_eq!(r.code, Some(75), "{}", r.stderr);
    assert!(r.stderr.contains("other-run"), "{}", r.stderr);
    assert!(w.get(RAW).is_none() && w.get(CKPT).is_none());
    assert_eq!(
        w.get(LOCK).unwrap(),
        lease,
        "a busy run must not touch the lease"
    );
}

/// An expired lease of a holder on another host is taken over; the run works.
fn expired_lease_is_taken_over(kind: Kind) {
    let w = World::new(kind, "expired");
    let input = w.put_input(NAME, format!("{}\n", event("a", 1)).as_bytes());
    w.put(
        LOCK,
        &lease_record("dead-run", "another-machine", "2020-01-01T00:00:00Z"),
    );
    let r = w.run(&input, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.action(), "published");
    assert!(r.stderr.contains("took over a stale lease"), "{}", r.stderr);
    assert!(lease_is_free(&w), "the lease is released at the end");
}

/// A holder killed mid-run leaves its lease. On a local lake the next run on this
/// machine sees the holder is gone and takes it over at once, then lands the file. On
/// S3 the dead holder's last request may still be executing on the server, so the
/// lease must run out first: the next run is busy.
fn killed_holder_lease_is_taken_over(kind: Kind) {
    let w = World::new(kind, "killed");
    let input = w.put_input(NAME, &generated(20_000, 5));
    let crashed = w.run_env(&input, &[], &[("LANDING_CRASH_AT", "after-staging")]);
    assert_eq!(crashed.signal, Some(9), "{}", crashed.stderr);
    assert!(!lease_is_free(&w), "a killed holder leaves its lease");
    let r = w.run(&input, &[]);
    if w.is_s3() {
        assert_eq!(r.code, Some(75), "{}", r.stderr);
        assert!(w.get(RAW).is_none());
    } else {
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert_eq!(r.action(), "published");
    }
}

/// Free: absent, or a record released by its holder or expired.
fn lease_is_free(w: &World) -> bool {
    w.get(LOCK)
        .is_none_or(|b| landing::lease::Lease::is_free(&b))
}

/// Two runs of the same input started together, 20 times: exactly one works, the
/// other exits 75 or skips, and the final state equals a clean run's.
fn overlapping_runs_never_both_work(kind: Kind) {
    let body = generated(3_000, 9);
    let reference = {
        let w = World::new(Kind::Local, "overlap-ref");
        let i = w.put_input(NAME, &body);
        assert_eq!(w.run(&i, &[]).code, Some(0));
        w.get(RAW).unwrap()
    };
    for trial in 0..20 {
        let w = World::new(kind, &format!("overlap{trial}"));
        let input = w.put_input(NAME, &body);
        let spawn = || {
            let mut cmd = w.command(&["run", "--input", &input, "--lake", &w.lake_arg()], &[]);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.spawn().expect("spawn")
        };
        let (a, b) = (spawn(), spawn());
        let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        let mut published = 0;
        for o in &outs {
            let stdout = String::from_utf8_lossy(&o.stdout);
            match o.status.code() {
                Some(0) if stdout.contains("\"action\":\"published\"") => published += 1,
                Some(0) if stdout.contains("\"action\":\"skipped\"") => {}
                Some(75) => {}
                other => panic!(
                    "trial {trial}: unexpected {other:?}: {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
            }
        }
        assert_eq!(published, 1, "trial {trial}: exactly one run publishes");
        assert_eq!(w.get(RAW).unwrap(), reference, "trial {trial}");
        assert!(lease_is_free(&w), "trial {trial}: lease left behind");
        assert!(
            w.leftovers().is_empty(),
            "trial {trial}: {:?}",
            w.leftovers()
        );
    }
}

matrix! {
    live_lease_means_busy: [local, seaweed, moto, localstack];
    expired_lease_is_taken_over: [local, seaweed, moto, localstack];
    killed_holder_lease_is_taken_over: [local, seaweed, moto, localstack];
    overlapping_runs_never_both_work: [local, seaweed, moto, localstack];
}
