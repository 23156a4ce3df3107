//! Fencing: no late, lost-lease, half-checked or interrupted write changes what
//! readers see. Interleavings are driven by the binary's pause points (it stops at a
//! named point, says so on stderr and waits for a line on stdin), never by sleeps.

use crate::support::*;

const NAME: &str = "progress-2026-03-07.jsonl";
const RAW: &str = "raw/progress/progress-2026-03-07.jsonl";
const CKPT: &str = "checkpoints/progress/progress-2026-03-07.jsonl.json";
const LOCK: &str = "locks/progress/progress-2026-03-07.jsonl.lock";

fn published(w: &World) -> (Vec<u8>, String) {
    let raw = w.get(RAW).expect("raw");
    (raw, checkpoint_sha(w, CKPT).expect("checkpoint"))
}

/// What the late-promotion interleaving leaves: both inputs' bytes, what readers saw
/// once B had published, and how A ended.
struct LatePromotion {
    w: World,
    input: String,
    a_in: Vec<u8>,
    b_in: Vec<u8>,
    after_b: (Vec<u8>, String),
    a: Run,
}

/// Run A decides while raw is absent and stops right before its promotion; its lease
/// is then lost (removed) and run B publishes and checkpoints other bytes. A then
/// goes on. On every store the checkpoint's compare-and-swap refuses A: it exits 75
/// with `conflict` and leaves B's checkpoint alone. What A's promotion does to B's
/// publish depends on whether the store fences a copy; each test asserts its side.
fn late_promotion(kind: Kind) -> LatePromotion {
    let w = World::new(kind, "late-promote");
    let a_in = generated(2_000, 31);
    let b_in = generated(2_500, 32);
    let input = w.put_input(NAME, &a_in);
    let a = Paused::start(&w, &input, "before-promote", &[]);
    w.delete(LOCK);
    w.put_input(NAME, &b_in);
    // B leaves A's staging alone (it is young), so A really reaches its copy.
    let b = w.run(&input, &["--sweep-age", "3600"]);
    assert_eq!(b.code, Some(0), "{}", b.stderr);
    assert_eq!(b.action(), "published");
    let after_b = published(&w);
    assert_eq!(after_b.0, expected_publish(&b_in), "B's publish");
    let a = a.finish();
    assert_eq!(
        a.code,
        Some(75),
        "A must stop on the conflict: {}",
        a.stderr
    );
    assert!(a.stderr.contains("conflict"), "{}", a.stderr);
    assert_eq!(
        checkpoint_sha(&w, CKPT).as_deref(),
        Some(sha256(&b_in).as_str()),
        "A touched B's checkpoint"
    );
    LatePromotion {
        w,
        input,
        a_in,
        b_in,
        after_b,
        a,
    }
}

/// Where the store fences a copy (local, SeaweedFS), A's late promotion is refused:
/// B's publish and checkpoint stay exactly as B left them.
fn late_promotion_never_replaces_a_newer_publish(kind: Kind) {
    let LatePromotion {
        w,
        b_in,
        after_b,
        a,
        ..
    } = late_promotion(kind);
    assert!(
        a.stderr.contains("changed since this run decided"),
        "the promotion itself must be refused: {}",
        a.stderr
    );
    assert!(
        !a.stderr.contains("promotion is not fenced"),
        "this store fences copies: {}",
        a.stderr
    );
    assert_eq!(
        published(&w),
        after_b,
        "a late promotion replaced B's publish"
    );
    assert_eq!(w.get(RAW).unwrap(), expected_publish(&b_in));
}

/// Where copies cannot be fenced (moto ignores the condition; LocalStack's would
/// corrupt, so the job sends none), A says so, its late copy lands over B's publish,
/// and only the checkpoint refuses A: the documented unfenced window. The
/// checkpoint still names B's input, so the next run sees the mismatch and repairs
/// the publish.
fn late_promotion_lands_unfenced_and_the_next_run_repairs_it(kind: Kind) {
    let LatePromotion {
        w,
        input,
        a_in,
        b_in,
        after_b,
        a,
    } = late_promotion(kind);
    assert!(
        a.stderr.contains("promotion is not fenced"),
        "A must say its promotion is not fenced: {}",
        a.stderr
    );
    assert!(
        !a.stderr.contains("changed since this run decided"),
        "an unfenced promotion is not refused: {}",
        a.stderr
    );
    assert_eq!(
        w.get(RAW).unwrap(),
        expected_publish(&a_in),
        "the late copy lands where copies are not fenced"
    );
    assert_ne!(w.get(RAW).unwrap(), after_b.0);
    let repair = w.run(&input, &[]);
    assert_eq!(repair.code, Some(0), "{}", repair.stderr);
    assert_eq!(
        repair.action(),
        "published",
        "the mismatch must be republished"
    );
    assert_eq!(w.get(RAW).unwrap(), expected_publish(&b_in));
    assert_eq!(
        checkpoint_sha(&w, CKPT).as_deref(),
        Some(sha256(&b_in).as_str())
    );
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

/// A validation worker that panics mid-file fails the run: nothing is published or
/// checkpointed, and the rerun lands the right bytes.
fn a_failed_worker_publishes_nothing(kind: Kind) {
    let w = World::new(kind, "worker-panic");
    let body = generated(40_000, 33); // ~8 MiB: several batches per worker
    let input = w.put_input(NAME, &body);
    let r = w.run_env(&input, &[], &[("LANDING_CRASH_AT", "worker-panic")]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("validation"), "{}", r.stderr);
    assert!(w.get(RAW).is_none(), "a truncated file was published");
    assert!(w.get(CKPT).is_none(), "a failed run checkpointed");
    let again = w.run(&input, &[]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(w.get(RAW).unwrap(), expected_publish(&body));
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

/// SIGTERM mid-stream: staging removed, lease released, summary `interrupted`, exit
/// 143; the next run publishes at once.
fn sigterm_before_publish_leaves_nothing(kind: Kind) {
    let mut w = World::new(kind, "sigterm");
    w.env.push(("LANDING_S3_PART_SIZE_MIB".into(), "5".into()));
    let body = generated(60_000, 34);
    let input = w.put_input(NAME, &body);
    let run = Paused::start(&w, &input, "mid-stream", &[]);
    run.signal(libc::SIGTERM);
    // Let it go on only once it took the signal in: let go earlier, it could finish
    // its staging before the signal reaches it.
    run.wait_for_line("interrupted before the publish");
    let r = run.finish();
    assert_eq!(r.code, Some(143), "{}", r.stderr);
    assert_eq!(r.action(), "interrupted");
    assert_eq!(r.summary.as_ref().unwrap()["signal"], "SIGTERM");
    assert!(w.get(RAW).is_none() && w.get(CKPT).is_none());
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    assert!(w.lease_is_free(LOCK), "the lease is still held");
    let again = w.run(&input, &[]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.action(), "published");
}

/// A signal after the publish started waits for the checkpoint: the run completes.
fn signal_during_publish_finishes_the_checkpoint(kind: Kind) {
    let w = World::new(kind, "sigterm-late");
    let body = generated(2_000, 35);
    let input = w.put_input(NAME, &body);
    let run = Paused::start(&w, &input, "before-promote", &[]);
    run.signal(libc::SIGTERM);
    let r = run.finish();
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.action(), "published");
    assert_eq!(published(&w), (expected_publish(&body), sha256(&body)));
}

/// The quarantine goes after the data, and an earlier publish's quarantine is only
/// removed once the new checkpoint no longer names it: a crash after the publish
/// leaves the old checkpoint naming a quarantine that still exists.
fn a_crash_after_publish_keeps_the_quarantine_the_checkpoint_names(kind: Kind) {
    let mut w = World::new(kind, "quarantine-order");
    if w.is_s3() {
        w.env
            .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }
    let quarantine = "quarantine/progress/progress-2026-03-07.jsonl.rejects.jsonl";
    let with_reject = format!("{}\nnot json\n", event("q1", 1));
    let input = w.put_input(NAME, with_reject.as_bytes());
    let first = w.run(&input, &["--max-rejected-lines", "1"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert!(w.get(quarantine).is_some());
    w.put_input(NAME, format!("{}\n", event("q2", 1)).as_bytes());
    let crashed = w.run_env(&input, &[], &[("LANDING_CRASH_AT", "after-publish")]);
    assert_eq!(crashed.signal, Some(9), "{}", crashed.stderr);
    let ckpt: serde_json::Value = serde_json::from_slice(&w.get(CKPT).unwrap()).unwrap();
    assert!(ckpt["quarantine_path"].is_string(), "{ckpt}");
    assert!(
        w.get(quarantine).is_some(),
        "the checkpoint names a quarantine that was deleted"
    );
    let r = w.run(&input, &["--lease-wait", TAKEOVER_WAIT]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let ckpt: serde_json::Value = serde_json::from_slice(&w.get(CKPT).unwrap()).unwrap();
    assert!(ckpt["quarantine_path"].is_null(), "{ckpt}");
    assert!(
        w.get(quarantine).is_none(),
        "a quarantine no checkpoint names is left"
    );
}

matrix! {
    a_crash_after_publish_keeps_the_quarantine_the_checkpoint_names: [local, seaweed, moto, localstack];
    late_promotion_never_replaces_a_newer_publish: [local, seaweed];
    late_promotion_lands_unfenced_and_the_next_run_repairs_it: [moto, localstack];
    a_failed_worker_publishes_nothing: [local, seaweed, moto, localstack];
    sigterm_before_publish_leaves_nothing: [local, seaweed, moto, localstack];
    signal_during_publish_finishes_the_checkpoint: [local, seaweed, moto, localstack];
}

/// SIGINT exits 130 with the same clean-up.
#[test]
fn sigint_exits_130() {
    let w = World::new(Kind::Local, "sigint");
    let input = w.put_input(NAME, &generated(30_000, 36));
    let run = Paused::start(&w, &input, "mid-stream", &[]);
    run.signal(libc::SIGINT);
    run.wait_for_line("interrupted before the publish");
    let r = run.finish();
    assert_eq!(r.code, Some(130), "{}", r.stderr);
    assert_eq!(r.action(), "interrupted");
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

/// While a run of `day.jsonl` has staged its output, a run of an input named `day`
/// must not sweep that temp file (the sweep matched temp names by prefix).
#[test]
fn prefix_named_inputs_do_not_sweep_each_other() {
    let w = World::new(Kind::Local, "prefix-names");
    let long = w.put_input("day.jsonl", &generated(5_000, 37));
    let short = w.put_input("day", &generated(10, 38));
    let a = Paused::start(&w, &long, "before-promote", &[]);
    let b = w.run(&short, &[]);
    assert_eq!(b.code, Some(0), "{}", b.stderr);
    let a = a.finish();
    assert_eq!(a.code, Some(0), "{}", a.stderr);
    assert_eq!(a.action(), "published");
}

/// A same-size forgery of the published file with its mtime set back (`cp -p`,
/// `rsync -a`) is not taken for the original: the rerun republishes.
#[test]
fn forged_published_file_is_republished() {
    let w = World::new(Kind::Local, "forged");
    let body = generated(1_000, 39);
    let input = w.put_input(NAME, &body);
    assert_eq!(w.run(&input, &[]).code, Some(0));
    let raw = w.tmp.path().join("lake").join(RAW);
    let good = std::fs::read(&raw).unwrap();
    let mtime = std::fs::metadata(&raw).unwrap().modified().unwrap();
    let forged: Vec<u8> = good
        .iter()
        .map(|b| if *b == b'1' { b'2' } else { *b })
        .collect();
    assert_ne!(forged, good);
    let copy = w.tmp.path().join("forged");
    std::fs::write(&copy, &forged).unwrap();
    std::fs::rename(&copy, &raw).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&raw)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let r = w.run(&input, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.action(), "published", "the forgery was skipped");
    assert_eq!(std::fs::read(&raw).unwrap(), good);
}

/// A run whose lease was taken over while it worked stops before its next write:
/// exit 75, nothing published.
#[test]
fn a_run_that_lost_its_lease_writes_nothing() {
    let w = World::new(Kind::Local, "lost-lease");
    let input = w.put_input(NAME, &generated(3_000, 40));
    // Renew every second so the loss is noticed while paused.
    let a = Paused::start(&w, &input, "after-staging", &[("LANDING_LEASE_TTL", "3")]);
    let other = serde_json::json!({
        "run_id": "other-run", "host": "elsewhere", "pid": 1, "boot_id": "x",
        "pid_ns": "y", "acquired_at": "2026-01-01T00:00:00Z", "expires_at": "2999-01-01T00:00:00Z",
    });
    w.put(LOCK, other.to_string().as_bytes());
    let r = a.finish_after_log("lease taken by another run");
    assert_eq!(r.code, Some(75), "{}", r.stderr);
    assert!(w.get(RAW).is_none(), "a run without its lease published");
    assert_eq!(
        w.get(LOCK).unwrap(),
        other.to_string().into_bytes(),
        "the new holder's lease was touched"
    );
}

/// On S3 a holder that died on this machine still blocks until its lease expires:
/// its last request may still be executing on the server.
#[test]
fn s3_dead_holder_is_not_taken_over_before_expiry() {
    let w = World::new(Kind::S3(Server::Seaweed), "dead-holder-s3");
    let input = w.put_input(NAME, &generated(5_000, 41));
    let crashed = w.run_env(&input, &[], &[("LANDING_CRASH_AT", "after-staging")]);
    assert_eq!(crashed.signal, Some(9), "{}", crashed.stderr);
    let r = w.run(&input, &[]);
    assert_eq!(r.code, Some(75), "{}", r.stderr);
    assert!(r.stderr.contains("busy"), "{}", r.stderr);
}

/// The lease must outlive any request in flight: a TTL not above the per-attempt
/// timeout is refused at startup on S3 lakes.
#[test]
fn lease_ttl_must_exceed_the_attempt_timeout() {
    let w = World::new(Kind::S3(Server::Seaweed), "ttl-check");
    let input = w.put_input(NAME, &generated(10, 42));
    let r = w.run(
        &input,
        &["--lease-ttl", "60", "--s3-attempt-timeout", "120"],
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--lease-ttl (60 s) must exceed --s3-attempt-timeout (120 s)"),
        "{}",
        r.stderr
    );
    assert!(w.get(LOCK).is_none(), "nothing is touched before the check");
}

/// The probe tells LocalStack's unsafe conditional copy apart (a 412 that still
/// overwrites the destination): `on` refuses it, `auto` never sends it one.
#[test]
fn localstack_conditional_copy_is_detected_as_unsafe() {
    let w = World::new(Kind::S3(Server::Localstack), "cc-localstack");
    let input = w.put_input(NAME, &generated(10, 44));
    let r = w.run(&input, &["--s3-conditional-copy", "on"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("conditional copy unsafe"), "{}", r.stderr);
    assert!(w.get(RAW).is_none());
    let r = w.run(&input, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("promotion is not fenced"), "{}", r.stderr);
}

/// `--s3-conditional-copy on` refuses to start (exit 2) where copies cannot be fenced,
/// and runs where they can.
#[test]
fn conditional_copy_on_needs_a_fencing_store() {
    let moto = World::new(Kind::S3(Server::Moto), "cc-on-moto");
    let input = moto.put_input(NAME, &generated(10, 43));
    let r = moto.run(&input, &["--s3-conditional-copy", "on"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("cannot be fenced"), "{}", r.stderr);
    assert!(moto.get(RAW).is_none());
    let weed = World::new(Kind::S3(Server::Seaweed), "cc-on-weed");
    let input = weed.put_input(NAME, &generated(10, 43));
    let r = weed.run(&input, &["--s3-conditional-copy", "on"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}
