//! Clock skew: a run whose wall clock is an hour ahead or behind judges a lease as any
//! other run does, by watching the record's version on its own monotonic clock, never
//! by comparing its wall clock with the holder's `expires_at`. The skewed run has
//! libfaketime (Debian's `faketime`) preloaded with a fixed offset on the wall clock
//! only (`FAKETIME_DONT_FAKE_MONOTONIC=1`), as a host whose clock is off would be.
//! Each test also checks that the offset took hold, from a timestamp the skewed run
//! wrote into the lake.

use crate::support::*;

const NAME: &str = "progress-2026-03-05.jsonl";
const RAW: &str = "raw/progress/progress-2026-03-05.jsonl";
const CKPT: &str = "checkpoints/progress/progress-2026-03-05.jsonl.json";
const LOCK: &str = "locks/progress/progress-2026-03-05.jsonl.lock";

fn short_leases(kind: Kind) -> World {
    let mut w = World::new(kind, "skew");
    w.env
        .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    w
}

/// Seconds from now to the RFC 3339 `field` of the checkpoint: what the clock of the
/// run that committed it said.
fn checkpoint_clock_offset(w: &World) -> i64 {
    let v: serde_json::Value =
        serde_json::from_slice(&w.get(CKPT).expect("a checkpoint")).expect("checkpoint JSON");
    let fmt = time::format_description::well_known::Rfc3339;
    let at = time::OffsetDateTime::parse(v["committed_at"].as_str().expect("committed_at"), &fmt)
        .expect("an RFC 3339 committed_at");
    (at - time::OffsetDateTime::now_utc()).whole_seconds()
}

/// The run id the lease record names.
fn lease_holder(w: &World) -> String {
    let v: serde_json::Value =
        serde_json::from_slice(&w.get(LOCK).expect("a lease")).expect("lease JSON");
    v["run_id"].as_str().expect("run_id").to_owned()
}

/// A live holder, stopped before its promote and renewing its lease, meets a run whose
/// clock is an hour ahead, so that the holder's `expires_at` is an hour past by that
/// clock. The skewed run waits several TTLs and answers busy, leaving the lease
/// alone; the holder goes on and publishes. A later skewed run, once the lease is
/// released, lands the next version (and its checkpoint shows the offset held).
fn a_clock_an_hour_ahead_never_takes_a_live_lease(kind: Kind) {
    let w = short_leases(kind);
    let body = generated(2_000, 61);
    let input = w.put_input(NAME, &body);
    let holder = Paused::start(&w, &input, "before-promote", &[]);
    let held_by = lease_holder(&w);
    // Three TTLs plus margins of the skewed run's own clock, with renewals every
    // second or so: each renewal is a new version, so it never sees one stay.
    let skewed_run = w.run_env(&input, &["--lease-wait", "20"], &skewed_clock("+1h"));
    assert_eq!(skewed_run.code, Some(75), "{}", skewed_run.stderr);
    assert!(
        skewed_run.stderr.contains("waiting for it"),
        "{}",
        skewed_run.stderr
    );
    assert!(
        skewed_run.stderr.contains(&held_by),
        "{}",
        skewed_run.stderr
    );
    assert_eq!(
        lease_holder(&w),
        held_by,
        "the skewed run took a live lease"
    );
    assert!(w.get(RAW).is_none(), "the skewed run published");
    let done = holder.finish();
    assert_eq!(done.code, Some(0), "the holder: {}", done.stderr);
    assert_eq!(done.action(), "published");
    assert_eq!(w.get(RAW).unwrap(), expected_publish(&body));

    let next = generated(2_500, 63);
    w.put_input(NAME, &next);
    let later = w.run_env(&input, &["--lease-wait", "0"], &skewed_clock("+1h"));
    assert_eq!(
        later.code,
        Some(0),
        "a released lease is free: {}",
        later.stderr
    );
    assert_eq!(w.get(RAW).unwrap(), expected_publish(&next));
    let offset = checkpoint_clock_offset(&w);
    assert!(
        (3000..4200).contains(&offset),
        "the run's clock was {offset} s off"
    );
}

/// A holder killed after staging leaves its lease; a run whose clock is an hour
/// behind, so that the dead holder's `expires_at` is an hour ahead by that clock,
/// takes the lease over within its wait (on S3 one TTL plus the margin after its
/// first look; on a local lake at once, the holder's pid being gone), sweeps and
/// lands the input.
fn a_clock_an_hour_behind_takes_a_dead_holders_lease_over(kind: Kind) {
    let w = short_leases(kind);
    let body = generated(2_000, 62);
    let input = w.put_input(NAME, &body);
    let crashed = w.run_env(&input, &[], &[("LANDING_CRASH_AT", "after-staging")]);
    assert_eq!(crashed.signal, Some(9), "{}", crashed.stderr);
    let dead = lease_holder(&w);
    let r = w.run_env(
        &input,
        &["--lease-wait", TAKEOVER_WAIT],
        &skewed_clock("-1h"),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.action(), "published");
    assert!(r.stderr.contains("took over a stale lease"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&dead),
        "names the dead holder: {}",
        r.stderr
    );
    if w.is_s3() {
        assert!(r.stderr.contains("waiting for it"), "{}", r.stderr);
    }
    assert_eq!(w.get(RAW).unwrap(), expected_publish(&body));
    assert_eq!(
        checkpoint_sha(&w, CKPT).as_deref(),
        Some(sha256(&body).as_str())
    );
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    let offset = checkpoint_clock_offset(&w);
    assert!(
        (-4200..-3000).contains(&offset),
        "the run's clock was {offset} s off"
    );
}

matrix! {
    a_clock_an_hour_ahead_never_takes_a_live_lease: [local, seaweed, moto, localstack];
    a_clock_an_hour_behind_takes_a_dead_holders_lease_over: [local, seaweed, moto, localstack];
}
