//! Bounded memory (docs/design.md, "Memory and spill"): a run whose dedup index
//! spills to scratch publishes exactly what an unbounded run publishes, refuses what
//! it refuses at the same line with the same counts, survives a crash at each step of
//! the spill, leaves no scratch behind, and fails plainly on a full scratch disk.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

const DAY: &str = "progress-2026-03-02.jsonl";
const RAW: &str = "raw/progress/progress-2026-03-02.jsonl";
const LOCK: &str = "locks/progress/progress-2026-03-02.jsonl.lock";
const QUAR: &str = "quarantine/progress/progress-2026-03-02.jsonl.rejects.jsonl";

fn example(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/inbox")
            .join(name),
    )
    .unwrap()
}

/// The inputs compared: the shipped days, a generated day with duplicates, and edge
/// cases (copies straddling runs, a collision late in the file, bad lines, a
/// prohibited field after a collision, a reject cap broken after a collision).
fn corpus() -> Vec<(&'static str, Vec<u8>, &'static [&'static str])> {
    let lines = |v: Vec<String>| (v.join("\n") + "\n").into_bytes();
    let copies: Vec<String> = (0..60).map(|i| event(&format!("e{}", i % 23), 1)).collect();
    let mut late = copies.clone();
    late.push(event("e5", 2));
    let mut prohibited = copies.clone();
    prohibited.push(event("e7", 3));
    prohibited.push(event("x", 1).replace("\"lesson_id\"", "\"email\":\"a@b\",\"lesson_id\""));
    let mut capped = copies.clone();
    capped.insert(30, "not json".into());
    capped.push(event("e9", 4));
    capped.push("[]".into());
    vec![
        (
            "sample day",
            example("progress-2026-03-02.jsonl"),
            &["--max-rejected-lines", "1"],
        ),
        (
            "second day",
            example("progress-2026-03-03.jsonl"),
            &["--max-rejected-lines", "5"],
        ),
        ("generated", generated(3000, 7), &[]),
        ("copies across runs", lines(copies), &[]),
        ("late collision", lines(late), &[]),
        (
            "collision before a prohibited field",
            lines(prohibited),
            &[],
        ),
        (
            "collision before the cap",
            lines(capped),
            &["--max-rejected-lines", "1"],
        ),
    ]
}

/// What a reader and an operator can see of a run.
#[derive(Debug, PartialEq)]
struct Seen {
    code: Option<i32>,
    counts: [serde_json::Value; 3],
    reason: serde_json::Value,
    raw: Option<Vec<u8>>,
    quarantine: Option<Vec<u8>>,
}

fn seen(w: &World, r: &Run) -> Seen {
    let s = r
        .summary
        .as_ref()
        .unwrap_or_else(|| panic!("no summary: {}", r.stderr));
    Seen {
        code: r.code,
        counts: ["accepted_rows", "rejected_rows", "duplicate_rows"].map(|k| s[k].clone()),
        reason: s["reason"].clone(),
        raw: w.get(RAW),
        quarantine: w.get(QUAR),
    }
}

fn scratch(w: &World) -> PathBuf {
    let d = w.tmp.path().join("scratch");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn scratch_is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

/// Each corpus, spilling every 3 events, matches the unbounded run exactly.
fn a_spilling_run_matches_the_unbounded_run(kind: Kind) {
    for (name, input, args) in corpus() {
        let plain = World::new(kind, "plain");
        let arg = plain.put_input(DAY, &input);
        let expected = seen(&plain, &plain.run(&arg, args));

        let w = World::new(kind, "spilled");
        let arg = w.put_input(DAY, &input);
        let dir = scratch(&w);
        let d = dir.to_str().unwrap();
        let mut all = args.to_vec();
        all.extend(["--scratch-dir", d]);
        let r = w.run_env(&arg, &all, &[("LANDING_TEST_SPILL_EVERY", "3")]);
        assert_eq!(seen(&w, &r), expected, "{name}: {}", r.stderr);
        let spill = &r.summary.as_ref().unwrap()["spill"];
        if expected.counts[0].as_u64().unwrap() <= 3 {
            // Refused before a fourth event: nothing to spill.
            assert!(spill.is_null(), "{name}: {}", r.stdout);
            continue;
        }
        assert!(
            spill["runs"].as_u64().is_some_and(|n| n > 1),
            "{name}: {}",
            r.stdout
        );
        assert!(
            spill["spilled_bytes"].as_u64().unwrap() > 0,
            "{name}: {spill}"
        );
        let dups = expected.counts[2].as_u64().unwrap() > 0;
        let published = expected.code == Some(0);
        assert_eq!(spill["second_pass"], dups && published, "{name}: {spill}");
        assert!(scratch_is_empty(&dir), "{name}: scratch left behind");
        assert!(w.leftovers().is_empty(), "{name}: {:?}", w.leftovers());
    }
}

/// A crash while spilling, merging or in the second pass: the rerun publishes the
/// unbounded run's bytes and leaves no scratch and no staging.
fn a_crash_at_each_spill_step_reruns_to_the_same_bytes(kind: Kind) {
    let input = generated(2000, 3);
    let expected = clean_output(DAY, &input);
    for point in ["spill", "merge", "second-pass"] {
        let mut w = World::new(kind, point);
        if w.is_s3() {
            // The dead run's lease runs out in seconds, not minutes.
            w.env
                .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
        }
        let arg = w.put_input(DAY, &input);
        let dir = scratch(&w);
        let d = dir.to_str().unwrap();
        let spill = [("LANDING_TEST_SPILL_EVERY", "50")];
        let crash = [spill[0], ("LANDING_CRASH_AT", point)];
        let r = w.run_env(&arg, &["--scratch-dir", d], &crash);
        assert_eq!(r.signal, Some(9), "{point}: not killed: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("drill crash at {point}")),
            "{}",
            r.stderr
        );
        assert!(w.get(RAW).is_none(), "{point}: published before the merge");
        // The merge removes the scratch; the second pass then leaves staging only.
        if point == "second-pass" {
            assert!(!w.leftovers().is_empty(), "{point}: no staging to sweep");
        } else {
            assert!(!scratch_is_empty(&dir), "{point}: no scratch to sweep");
        }
        // --sweep-age 0: the dead run's staging is swept at once.
        w.wait_for_lease_expiry(LOCK);
        let r = w.run_env(&arg, &["--scratch-dir", d], &spill);
        assert_eq!(r.code, Some(0), "{point}: {}", r.stderr);
        assert_eq!(w.get(RAW).unwrap(), expected, "{point}: bytes differ");
        assert!(
            scratch_is_empty(&dir),
            "{point}: scratch left after the rerun"
        );
        assert!(w.leftovers().is_empty(), "{point}: {:?}", w.leftovers());
    }
}

matrix! {
    a_spilling_run_matches_the_unbounded_run: [local, seaweed, moto];
    a_crash_at_each_spill_step_reruns_to_the_same_bytes: [local, seaweed, moto];
}

/// Distinct ids squeezed into three id digests: nothing refused, nothing dropped,
/// spilling or not.
#[test]
fn ids_sharing_a_digest_are_all_published() {
    let input = generated(1500, 11);
    let expected = clean_output(DAY, &input);
    for spill in [None, Some("4")] {
        let w = World::new(Kind::Local, "squeezed");
        let arg = w.put_input(DAY, &input);
        let mut env = vec![("LANDING_TEST_ID_DIGEST_BITS", "2")];
        env.extend(spill.map(|n| ("LANDING_TEST_SPILL_EVERY", n)));
        let r = w.run_env(&arg, &[], &env);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert_eq!(w.get(RAW).unwrap(), expected);
    }
}

/// A full scratch disk (a 64 KiB tmpfs in a private mount namespace) fails with
/// exit 1, names the scratch dir and publishes nothing.
#[test]
fn a_full_scratch_disk_fails_naming_it() {
    let w = World::new(Kind::Local, "full-scratch");
    let arg = w.put_input(DAY, &generated(3000, 5));
    let dir = scratch(&w);
    let base = w.command(
        &[
            "run",
            "--input",
            &arg,
            "--lake",
            &w.lake_arg(),
            "--scratch-dir",
            dir.to_str().unwrap(),
        ],
        &[("LANDING_TEST_SPILL_EVERY", "100")],
    );
    let mut cmd = Command::new("unshare");
    cmd.env_clear();
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    if let Some(cwd) = base.get_current_dir() {
        cmd.current_dir(cwd);
    }
    cmd.args([
        "-rm",
        "sh",
        "-c",
        r#"mount -t tmpfs -o size=64k none "$0" && exec "$@""#,
    ])
    .arg(&dir)
    .arg(base.get_program())
    .args(base.get_args());
    let r = Run::from_output(cmd.output().expect("unshare runs"));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("scratch disk full under"), "{}", r.stderr);
    assert!(r.stderr.contains(dir.to_str().unwrap()), "{}", r.stderr);
    assert!(w.get(RAW).is_none());
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

/// `--dry-run` says the budget and where it came from; one too small exits 2.
#[test]
fn the_budget_is_shown_and_checked() {
    let w = World::new(Kind::Local, "budget");
    let arg = w.put_input(DAY, b"");
    let r = w.run(&arg, &["--dry-run", "--max-memory", "1GiB"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let m = &r.summary.as_ref().unwrap()["memory"];
    assert_eq!(m["budget_bytes"], 1u64 << 30);
    assert!(
        m["derived"].as_str().unwrap().contains("from --max-memory"),
        "{m}"
    );
    assert!(m["index_share_bytes"].as_u64().unwrap() < 1 << 30);
    let r = w.landing(
        &[
            "run",
            "--inbox",
            w.tmp.path().to_str().unwrap(),
            "--lake",
            &w.lake_arg(),
            "--jobs",
            "4",
            "--max-memory",
            "256MiB",
            "--dry-run",
        ],
        &[],
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--jobs 4"), "{}", r.stderr);
}

/// A gzip input with duplicates, published gzip: spilling (every 50 events, so the
/// merge finds copies and the second pass decodes and encodes again) publishes the
/// bytes of the in-memory run, and a collision found by the merge is refused on the
/// decoded content's line.
fn a_compressed_input_and_output_spill_to_the_same_bytes(kind: Kind) {
    use std::io::Write;
    let gzip = |content: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        e.write_all(content).unwrap();
        e.finish().unwrap()
    };
    let name = "progress-2026-03-02.jsonl.gz";
    let raw = "raw/progress/progress-2026-03-02.jsonl.gz";
    let mut content = generated(3000, 21);
    let clean = gzip(&content);
    content.extend(format!("{}\n", event("e-late", 1)).into_bytes());
    content.extend(format!("{}\n", event("e-late", 2)).into_bytes());
    let colliding = gzip(&content);
    let args = ["--output-compression", "gzip"];
    for (input, code) in [(clean, 0), (colliding, 65)] {
        let plain = World::new(kind, "plain");
        let arg = plain.put_input(name, &input);
        let r = plain.run(&arg, &args);
        assert_eq!(r.code, Some(code), "{}", r.stderr);
        let expected = (
            seen(&plain, &r).counts,
            r.summary.unwrap()["reason"].clone(),
            plain.get(raw),
        );

        let w = World::new(kind, "spilled");
        let arg = w.put_input(name, &input);
        let dir = scratch(&w);
        let mut all = args.to_vec();
        all.extend(["--scratch-dir", dir.to_str().unwrap()]);
        let r = w.run_env(&arg, &all, &[("LANDING_TEST_SPILL_EVERY", "50")]);
        assert_eq!(r.code, Some(code), "{}", r.stderr);
        let s = r.summary.as_ref().unwrap();
        assert_eq!(s["spill"]["second_pass"], code == 0, "{}", r.stdout);
        let got = (seen(&w, &r).counts, s["reason"].clone(), w.get(raw));
        assert_eq!(got, expected);
        assert!(scratch_is_empty(&dir));
        assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    }
}

matrix! {
    a_compressed_input_and_output_spill_to_the_same_bytes: [local, seaweed];
}
