//! End-to-end tests of `landing run` and `landing check` through the built binary,
//! each body run on a local lake, SeaweedFS, moto and LocalStack.

use std::collections::BTreeSet;

use crate::support::*;

const DAY: &str = "progress-2026-03-02.jsonl";
const RAW: &str = "raw/progress/progress-2026-03-02.jsonl";
const CKPT: &str = "checkpoints/progress/progress-2026-03-02.jsonl.json";
const QUAR: &str = "quarantine/progress/progress-2026-03-02.jsonl.rejects.jsonl";

fn sample() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/inbox/progress-2026-03-02.jsonl"
    ))
    .unwrap()
}

fn golden() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/progress-2026-03-02.jsonl"
    ))
    .unwrap()
}

fn checkpoint(w: &World) -> serde_json::Value {
    serde_json::from_slice(&w.get(CKPT).expect("checkpoint exists")).expect("checkpoint parses")
}

fn assert_ok(r: &Run, action: &str) {
    assert_eq!(r.code, Some(0), "exit code; stderr:\n{}", r.stderr);
    assert_eq!(r.action(), action, "stdout: {}", r.stdout);
}

/// The sample day publishes the golden bytes, with its quarantine and checkpoint.
fn sample_day_publishes_golden_bytes(kind: Kind) {
    let w = World::new(kind, "sample");
    let input = w.put_input(DAY, &sample());
    let r = w.run(&input, &["--max-rejected-lines", "1"]);
    assert_ok(&r, "published");
    let s = r.summary.as_ref().unwrap();
    assert_eq!(s["accepted_rows"], 5);
    assert_eq!(s["rejected_rows"], 1);
    assert_eq!(s["duplicate_rows"], 1);
    assert_eq!(s["checkpoint_moved"], true);
    assert_eq!(s["input_sha256"], sha256(&sample()));
    assert_eq!(w.get(RAW).unwrap(), golden());
    assert_eq!(
        String::from_utf8(w.get(QUAR).unwrap()).unwrap(),
        "{\"line\":6,\"reason\":\"invalid_json\"}\n"
    );
    let c = checkpoint(&w);
    assert_eq!(c["input_sha256"], sha256(&sample()));
    assert_eq!(c["published_size"], golden().len());
    assert_eq!(c["run_id"], s["run_id"]);
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

/// An unchanged rerun skips and rewrites nothing: bytes and change markers equal.
fn rerun_skips_and_writes_nothing(kind: Kind) {
    let w = World::new(kind, "rerun");
    let input = w.put_input(DAY, &sample());
    assert_ok(&w.run(&input, &["--max-rejected-lines", "1"]), "published");
    let before = w.snapshot();
    let r = w.run(&input, &["--max-rejected-lines", "1"]);
    assert_ok(&r, "skipped");
    assert_eq!(r.summary.as_ref().unwrap()["checkpoint_moved"], false);
    assert_eq!(w.snapshot(), before);
}

/// A checkpoint naming a deleted published object is a lie: republish.
fn deleted_publish_is_republished(kind: Kind) {
    let w = World::new(kind, "deleted");
    let input = w.put_input(DAY, &sample());
    assert_ok(&w.run(&input, &["--max-rejected-lines", "1"]), "published");
    w.delete(RAW);
    let r = w.run(&input, &["--max-rejected-lines", "1"]);
    assert_ok(&r, "published");
    assert_eq!(w.get(RAW).unwrap(), golden());
}

/// A published object whose size differs from the checkpoint is republished.
fn changed_publish_is_republished(kind: Kind) {
    let w = World::new(kind, "tampered");
    let input = w.put_input(DAY, &sample());
    assert_ok(&w.run(&input, &["--max-rejected-lines", "1"]), "published");
    w.put(RAW, b"{}\n");
    assert_ok(&w.run(&input, &["--max-rejected-lines", "1"]), "published");
    assert_eq!(w.get(RAW).unwrap(), golden());
}

/// A changed input publishes again and moves the checkpoint to the new hash.
fn changed_input_publishes_and_moves_checkpoint(kind: Kind) {
    let w = World::new(kind, "changed");
    let v1 = format!("{}\n", event("a", 1));
    let v2 = format!("{}\n{}\n", event("a", 1), event("b", 2));
    let input = w.put_input(DAY, v1.as_bytes());
    assert_ok(&w.run(&input, &[]), "published");
    w.put_input(DAY, v2.as_bytes());
    let r = w.run(&input, &[]);
    assert_ok(&r, "published");
    assert_eq!(r.summary.as_ref().unwrap()["accepted_rows"], 2);
    assert_eq!(checkpoint(&w)["input_sha256"], sha256(v2.as_bytes()));
    assert_eq!(w.get(RAW).unwrap(), expected_publish(v2.as_bytes()));
}

/// A prohibited field refuses (65) and leaves the previous publish and checkpoint.
fn prohibited_field_refuses_and_keeps_previous(kind: Kind) {
    let w = World::new(kind, "prohibited");
    let input = w.put_input(DAY, &sample());
    assert_ok(&w.run(&input, &["--max-rejected-lines", "1"]), "published");
    let before = w.snapshot();
    let bad = format!(
        "{}\n{}\n",
        event("x", 1),
        event("y", 1).replace(
            "\"lesson_id\"",
            "\"email\":\"someone@example.invalid\",\"lesson_id\""
        )
    );
    w.put_input(DAY, bad.as_bytes());
    let r = w.run(&input, &["--max-rejected-lines", "1"]);
    assert_eq!(r.code, Some(65), "{}", r.stderr);
    assert_eq!(r.action(), "refused");
    let reason = &r.summary.as_ref().unwrap()["reason"];
    assert_eq!(reason["kind"], "prohibited_field");
    assert_eq!(reason["line"], 2);
    assert_eq!(reason["field"], "email");
    assert_eq!(w.snapshot(), before, "refusal changed the lake");
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    assert!(
        !r.stderr.contains("someone@example.invalid")
            && !r.stdout.contains("someone@example.invalid")
    );
}

/// The same event_id with a different payload refuses the file, naming the line.
fn id_collision_refuses(kind: Kind) {
    let w = World::new(kind, "collision");
    let body = format!("{}\n{}\n{}\n", event("a", 1), event("b", 1), event("a", 2));
    let input = w.put_input(DAY, body.as_bytes());
    let r = w.run(&input, &[]);
    assert_eq!(r.code, Some(65), "{}", r.stderr);
    let reason = &r.summary.as_ref().unwrap()["reason"];
    assert_eq!(reason["kind"], "id_collision");
    assert_eq!(reason["line"], 3);
    assert!(w.get(RAW).is_none() && w.get(CKPT).is_none());
}

/// A cap of N accepts N quarantined lines and refuses N+1, naming the line.
fn reject_cap_is_exact(kind: Kind) {
    let w = World::new(kind, "cap");
    let two_bad = format!("{}\nnot json\n{}\n[]\n", event("a", 1), event("b", 1));
    let input = w.put_input(DAY, two_bad.as_bytes());
    let r = w.run(&input, &["--max-rejected-lines", "2"]);
    assert_ok(&r, "published");
    assert_eq!(r.summary.as_ref().unwrap()["rejected_rows"], 2);
    let three_bad = format!("{two_bad}{{\"event_id\":1}}\n");
    w.put_input(DAY, three_bad.as_bytes());
    let r = w.run(&input, &["--max-rejected-lines", "2"]);
    assert_eq!(r.code, Some(65), "{}", r.stderr);
    let reason = &r.summary.as_ref().unwrap()["reason"];
    assert_eq!(
        (reason["kind"].as_str(), reason["line"].as_u64()),
        (Some("reject_cap"), Some(5))
    );
    assert_eq!(checkpoint(&w)["input_sha256"], sha256(two_bad.as_bytes()));
}

/// The default cap is 0: one bad line refuses the file.
fn default_cap_fails_closed(kind: Kind) {
    let w = World::new(kind, "failclosed");
    let input = w.put_input(DAY, &sample());
    let r = w.run(&input, &[]);
    assert_eq!(r.code, Some(65), "{}", r.stderr);
    assert_eq!(r.summary.as_ref().unwrap()["reason"]["kind"], "reject_cap");
    assert!(w.get(RAW).is_none());
}

/// The same input gives byte-identical output in two fresh lakes.
fn same_input_same_bytes_in_two_lakes(kind: Kind) {
    let body = generated(5000, 3);
    let outs: Vec<_> = (0..2)
        .map(|i| {
            let w = World::new(kind, &format!("twice{i}"));
            let input = w.put_input(DAY, &body);
            assert_ok(&w.run(&input, &[]), "published");
            w.get(RAW).unwrap()
        })
        .collect();
    assert_eq!(outs[0], outs[1]);
    assert!(outs[0].len() > 100_000);
    assert!(outs[0] == expected_publish(&body), "not the model's bytes");
}

/// `check` validates, prints the reasons and writes nothing anywhere.
fn check_writes_nothing(kind: Kind) {
    let w = World::new(kind, "check");
    let input = w.put_input(DAY, &sample());
    let lake_before = w.snapshot();
    let everything_before = w.snapshot_everything();
    // `check` takes no lake; give it the lake a CronJob's environment would, so that a
    // check that found one and wrote there would be caught below.
    let lake = w.lake_arg();
    let env = [("LANDING_LAKE", lake.as_str())];
    let r = w.landing(
        &["check", "--input", &input, "--max-rejected-lines", "1"],
        &env,
    );
    assert_ok(&r, "checked");
    let s = r.summary.as_ref().unwrap();
    assert_eq!(s["accepted_rows"], 5);
    assert_eq!(s["quarantine_reasons"][0]["line"], 6);
    assert_eq!(s["quarantine_reasons"][0]["reason"], "invalid_json");
    assert_eq!(w.snapshot(), lake_before);
    assert!(w.snapshot().is_empty());
    // Without a cap the same file would be refused: check says so with exit 65.
    let r = w.landing(&["check", "--input", &input], &env);
    assert_eq!(r.code, Some(65));
    let s = r.summary.as_ref().unwrap();
    assert_eq!(s["reason"]["kind"], "reject_cap");
    // The reject that broke the cap is listed with its reason: a producer must see it.
    assert_eq!(
        s["quarantine_reasons"],
        serde_json::json!([{"line": 6, "reason": "invalid_json"}])
    );
    // Neither check wrote anything anywhere it could: not the lake, the inbox, its
    // working dir or home (the temp dir), nor anywhere in the bucket.
    let after = w.snapshot_everything();
    let written: BTreeSet<&String> = everything_before
        .keys()
        .chain(after.keys())
        .filter(|k| everything_before.get(*k) != after.get(*k))
        .collect();
    assert!(written.is_empty(), "check wrote {written:?}");
}

/// A missing input exits 1 naming it and the step; nothing is written.
fn missing_input_fails_naming_it(kind: Kind) {
    let w = World::new(kind, "missing");
    let input = w.put_input("other.jsonl", b"");
    let missing = input.replace("other.jsonl", "nope.jsonl");
    let r = w.run(&missing, &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("nope.jsonl"), "{}", r.stderr);
    assert!(r.stderr.contains("stream"), "{}", r.stderr);
    assert!(w.get("raw/progress/nope.jsonl").is_none());
}

/// A corrupt checkpoint exits 1 naming it, and publishes nothing.
fn corrupt_checkpoint_fails_and_publishes_nothing(kind: Kind) {
    let w = World::new(kind, "corrupt");
    let input = w.put_input(DAY, &sample());
    w.put(CKPT, b"{not a checkpoint");
    let r = w.run(&input, &["--max-rejected-lines", "1"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("corrupt checkpoint"), "{}", r.stderr);
    assert!(r.stderr.contains(CKPT), "{}", r.stderr);
    assert!(w.get(RAW).is_none());
}

/// An empty input publishes an empty object and checkpoints it.
fn empty_input_publishes_empty(kind: Kind) {
    let w = World::new(kind, "empty");
    let input = w.put_input(DAY, b"");
    let r = w.run(&input, &[]);
    assert_ok(&r, "published");
    assert_eq!(w.get(RAW).unwrap(), b"");
    assert_ok(&w.run(&input, &[]), "skipped");
}

matrix! {
    sample_day_publishes_golden_bytes: [local, seaweed, moto, localstack];
    rerun_skips_and_writes_nothing: [local, seaweed, moto, localstack];
    deleted_publish_is_republished: [local, seaweed, moto, localstack];
    changed_publish_is_republished: [local, seaweed, moto, localstack];
    changed_input_publishes_and_moves_checkpoint: [local, seaweed, moto, localstack];
    prohibited_field_refuses_and_keeps_previous: [local, seaweed, moto, localstack];
    id_collision_refuses: [local, seaweed, moto, localstack];
    reject_cap_is_exact: [local, seaweed, moto, localstack];
    default_cap_fails_closed: [local, seaweed, moto, localstack];
    same_input_same_bytes_in_two_lakes: [local, seaweed, moto, localstack];
    check_writes_nothing: [local, seaweed, moto, localstack];
    missing_input_fails_naming_it: [local, seaweed, moto, localstack];
    corrupt_checkpoint_fails_and_publishes_nothing: [local, seaweed, moto, localstack];
    empty_input_publishes_empty: [local, seaweed, moto, localstack];
}

/// An unwritable lake exits 1 naming the path and the step.
#[test]
fn unwritable_lake_fails_naming_path_and_step() {
    let w = World::new(Kind::Local, "unwritable");
    let input = w.put_input(DAY, &sample());
    // A regular file where the lake folder should be: no permission bits involved,
    // so it fails even when the tests run as root.
    let blocker = w.tmp.path().join("blocker");
    std::fs::write(&blocker, b"").unwrap();
    let lake = blocker.join("lake").display().to_string();
    let r = w.landing(
        &[
            "run",
            "--input",
            &input,
            "--lake",
            &lake,
            "--max-rejected-lines",
            "1",
        ],
        &[],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains(&lake), "{}", r.stderr);
    assert!(
        r.stderr.contains("connect") || r.stderr.contains("create lake folder"),
        "{}",
        r.stderr
    );
}

/// Usage errors exit 2.
#[test]
fn usage_errors_exit_2() {
    let w = World::new(Kind::Local, "usage");
    assert_eq!(w.landing(&["run"], &[]).code, Some(2));
    assert_eq!(
        w.landing(&["run", "--input", "x", "--product", "Bad!"], &[])
            .code,
        Some(2)
    );
}

/// Logs and summaries carry no field values.
#[test]
fn logs_never_carry_content() {
    let w = World::new(Kind::Local, "privacy");
    let secret = "learner-secret-value";
    let body = format!(
        "{}\n{{\"event_id\":\"{secret}\",\"bogus\":\"{secret}\"}}\n",
        event("a", 1).replace("l-1", secret)
    );
    let input = w.put_input(DAY, body.as_bytes());
    let r = w.run(
        &input,
        &[
            "--max-rejected-lines",
            "1",
            "--log-format",
            "json",
            "--log-level",
            "debug",
        ],
    );
    assert_ok(&r, "published");
    assert!(
        !r.stderr.contains(secret),
        "stderr leaks content:\n{}",
        r.stderr
    );
    assert!(!r.stdout.contains(secret));
    let q = String::from_utf8(w.get(QUAR).unwrap()).unwrap();
    assert!(!q.contains(secret));
    assert!(
        r.stderr
            .lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{}",
        r.stderr
    );
}

/// `--lake lake` and `--lake ./lake` are the same lake: the rerun skips.
#[test]
fn relative_lake_spellings_name_one_lake() {
    let w = World::new(Kind::Local, "relative");
    let input = w.put_input(DAY, &sample());
    let first = w.landing(
        &[
            "run",
            "--input",
            &input,
            "--lake",
            "lake",
            "--max-rejected-lines",
            "1",
        ],
        &[],
    );
    assert_ok(&first, "published");
    let again = w.landing(
        &[
            "run",
            "--input",
            &input,
            "--lake",
            "./lake",
            "--max-rejected-lines",
            "1",
        ],
        &[],
    );
    assert_ok(&again, "skipped");
    assert!(first.summary.unwrap()["published_path"]
        .as_str()
        .unwrap()
        .starts_with('/'));
}

/// Logs spell the outcome as stdout does (`action=published`), and a run without a
/// refusal logs no `reason` field at all; a refusal logs its reason.
#[test]
fn logs_spell_actions_as_stdout_does() {
    let w = World::new(Kind::Local, "log-spelling");
    let input = w.put_input(DAY, &sample());
    let r = w.run(&input, &["--max-rejected-lines", "1"]);
    assert_ok(&r, "published");
    let finished = r
        .stderr
        .lines()
        .find(|l| l.contains("run finished"))
        .expect("a run finished line");
    assert!(finished.contains("action=published"), "{finished}");
    assert!(!finished.contains("reason"), "{finished}");
    let bad = w.put_input("bad.jsonl", format!("{}\n", r#"{"email":"x"}"#).as_bytes());
    let refused = w.run(&bad, &[]);
    assert_eq!(refused.code, Some(65), "{}", refused.stderr);
    let finished = refused
        .stderr
        .lines()
        .find(|l| l.contains("run finished"))
        .expect("a run finished line");
    assert!(finished.contains("action=refused"), "{finished}");
    assert!(finished.contains("reason=prohibited_field"), "{finished}");
}
