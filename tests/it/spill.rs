//! Bounded memory (docs/design.md, "Memory and spill"): a run whose dedup index
//! spills to scratch publishes exactly what the reference model says, refuses what
//! it refuses at the same line with the same counts, survives a crash at each step of
//! the spill, leaves no scratch behind, and fails plainly on a full scratch disk.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

const DAY: &str = "progress-2026-03-02.jsonl";
const RAW: &str = "raw/progress/progress-2026-03-02.jsonl";
const QUAR: &str = "quarantine/progress/progress-2026-03-02.jsonl.rejects.jsonl";
const CKPT: &str = "checkpoints/progress/progress-2026-03-02.jsonl.json";

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
fn corpus() -> Vec<(&'static str, Vec<u8>, u64)> {
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
        ("sample day", example("progress-2026-03-02.jsonl"), 1),
        ("second day", example("progress-2026-03-03.jsonl"), 5),
        ("generated", generated(3000, 7), 0),
        ("copies across runs", lines(copies), 0),
        ("late collision", lines(late), 0),
        ("collision before a prohibited field", lines(prohibited), 0),
        ("collision before the cap", lines(capped), 1),
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

/// What the reference model says a reader and an operator must see.
fn expected_seen(input: &[u8], cap: u64) -> Seen {
    let e = model::expect(
        &model::contract_file("progress"),
        input,
        model::Opts {
            max_rejected_lines: cap,
            ..model::Opts::default()
        },
    );
    let published = e.action == "published";
    Seen {
        code: Some(if published { 0 } else { 65 }),
        counts: [e.accepted_rows, e.rejected_rows, e.duplicate_rows].map(serde_json::Value::from),
        reason: e.reason,
        raw: published.then_some(e.published),
        quarantine: (published && e.rejected_rows > 0).then_some(e.quarantine),
    }
}

/// The two ways a spilled run writes what it kept, pinned by the test hook
/// (`LANDING_TEST_SPILL_REPLAY`; a normal run chooses at the spill): "true" holds
/// the lines back and replays them from the input, "false" stages them as they come
/// and copies the staged output without later copies (the second pass).
const WAYS: [&str; 2] = ["true", "false"];

/// Each corpus, spilling every 3 events, either way from the spill on (no
/// fingerprint table) or through a table of 6 events first, gives exactly what the
/// reference model says: exit code, counts, reason, published and quarantine bytes.
fn a_spilling_run_matches_the_model(kind: Kind) {
    for (name, input, cap) in corpus() {
        let expected = expected_seen(&input, cap);
        for way in WAYS.into_iter().chain(["table"]) {
            let name = format!("{name}, replay {way}");
            let w = World::new(kind, "spilled");
            let arg = w.put_input(DAY, &input);
            let dir = scratch(&w);
            let d = dir.to_str().unwrap();
            let cap_arg = cap.to_string();
            let all = ["--max-rejected-lines", &cap_arg, "--scratch-dir", d];
            let mut env = vec![("LANDING_TEST_SPILL_EVERY", "3")];
            if way != "table" {
                env.extend([
                    ("LANDING_TEST_SPILL_REPLAY", way),
                    ("LANDING_TEST_SPILL_TABLE", "0"),
                ]);
            }
            let r = w.run_env(&arg, &all, &env);
            assert_eq!(seen(&w, &r), expected, "{name}: {}", r.stderr);
            if way == "table" {
                assert!(scratch_is_empty(&dir), "{name}: scratch left behind");
                assert!(w.leftovers().is_empty(), "{name}: {:?}", w.leftovers());
                continue;
            }
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
            // Past its fourth event a run that holds lines back replays them when it
            // publishes; one that staged them copies only if the merge found copies.
            let published = expected.code == Some(0);
            let dups = expected.counts[2].as_u64().unwrap() > 0;
            let replay = way == "true";
            assert_eq!(spill["replayed"], replay && published, "{name}: {spill}");
            let copied = !replay && dups && published;
            assert_eq!(spill["second_pass"], copied, "{name}: {spill}");
            assert!(scratch_is_empty(&dir), "{name}: scratch left behind");
            assert!(w.leftovers().is_empty(), "{name}: {:?}", w.leftovers());
        }
    }
}

/// Without the hook, the copies the index collapsed before it spilled choose the
/// way: a day with an early copy replays, a day whose copies all come after the
/// spill stages its lines and copies them once.
fn copies_before_the_spill_choose_the_replay(kind: Kind) {
    let early: Vec<String> = ["e0", "e0"]
        .into_iter()
        .map(str::to_owned)
        .chain((1..200).map(|i| format!("e{i}")))
        .map(|id| event(&id, 1))
        .collect();
    let mut late: Vec<String> = (0..200).map(|i| event(&format!("e{i}"), 1)).collect();
    late.push(event("e3", 1));
    for (name, lines, replayed) in [("early copy", early, true), ("late copy", late, false)] {
        let input = (lines.join("\n") + "\n").into_bytes();
        let w = World::new(kind, "chosen");
        let arg = w.put_input(DAY, &input);
        let dir = scratch(&w);
        let all = ["--scratch-dir", dir.to_str().unwrap()];
        let r = w.run_env(&arg, &all, &[("LANDING_TEST_SPILL_EVERY", "50")]);
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        assert_eq!(w.get(RAW).unwrap(), expected_publish(&input), "{name}");
        let spill = &r.summary.as_ref().unwrap()["spill"];
        assert_eq!(spill["replayed"], replayed, "{name}: {spill}");
        assert_eq!(spill["second_pass"], !replayed, "{name}: {spill}");
    }
}

/// A crash while spilling, merging, in the second pass or in the replay: the rerun
/// publishes the model's bytes and leaves no scratch and no staging.
fn a_crash_at_each_spill_step_reruns_to_the_same_bytes(kind: Kind) {
    let input = generated(2000, 3);
    let expected = expected_publish(&input);
    let points = [
        ("spill", "true"),
        ("merge", "true"),
        ("second-pass", "false"),
        ("replay", "true"),
    ];
    for (point, way) in points {
        let mut w = World::new(kind, point);
        if w.is_s3() {
            // The dead run's lease runs out in seconds, not minutes.
            w.env
                .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
        }
        let arg = w.put_input(DAY, &input);
        let dir = scratch(&w);
        let d = dir.to_str().unwrap();
        let spill = [
            ("LANDING_TEST_SPILL_EVERY", "50"),
            ("LANDING_TEST_SPILL_REPLAY", way),
        ];
        let crash = [spill[0], spill[1], ("LANDING_CRASH_AT", point)];
        let r = w.run_env(&arg, &["--scratch-dir", d], &crash);
        assert_eq!(r.signal, Some(9), "{point}: not killed: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("drill crash at {point}")),
            "{}",
            r.stderr
        );
        assert!(w.get(RAW).is_none(), "{point}: published before the merge");
        match point {
            // The merge removed the scratch; the second pass's first staging is
            // complete, so there is staging to sweep.
            "second-pass" => {
                assert!(scratch_is_empty(&dir), "{point}: scratch left");
                assert!(!w.leftovers().is_empty(), "{point}: no staging to sweep");
            }
            // The replay writes to the open staging: a temporary file locally; on S3
            // an upload that buffers in memory below its first part, so it dies with
            // the process.
            "replay" => {
                assert!(scratch_is_empty(&dir), "{point}: scratch left");
                if !w.is_s3() {
                    assert!(!w.leftovers().is_empty(), "{point}: no staging to sweep");
                }
            }
            _ => assert!(!scratch_is_empty(&dir), "{point}: no scratch to sweep"),
        }
        // --sweep-age 0: the dead run's staging is swept at once.
        let takeover = ["--scratch-dir", d, "--lease-wait", TAKEOVER_WAIT];
        let r = w.run_env(&arg, &takeover, &spill);
        assert_eq!(r.code, Some(0), "{point}: {}", r.stderr);
        assert_eq!(w.get(RAW).unwrap(), expected, "{point}: bytes differ");
        assert!(
            scratch_is_empty(&dir),
            "{point}: scratch left after the rerun"
        );
        assert!(w.leftovers().is_empty(), "{point}: {:?}", w.leftovers());
    }
}

/// `input` with line `n`'s learner id changed in one digit: another valid event,
/// of the same length.
fn edit_learner(input: &[u8], n: usize) -> Vec<u8> {
    let text = std::str::from_utf8(input).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let line = &mut lines[n - 1];
    let at = line
        .find("\"learner_id\":\"learner-")
        .expect("a learner id")
        + 22;
    let digit = if &line[at..=at] == "9" { "8" } else { "9" };
    line.replace_range(at..=at, digit);
    (lines.join("\n") + "\n").into_bytes()
}

/// The input edited between a spilled run's pass and its replay, one line to
/// another valid one of the same length (RUNBOOK, "Sizing memory and scratch"):
/// the replay reads other lines than the pass held back, so the run fails, and
/// publishes and checkpoints nothing.
fn an_input_edited_before_the_replay_fails_the_run(kind: Kind) {
    let w = World::new(kind, "edited");
    let input = generated(2000, 3);
    let arg = w.put_input(DAY, &input);
    let dir = scratch(&w);
    let (lake, d) = (w.lake_arg(), dir.to_str().unwrap().to_owned());
    let args = ["run", "--input", &arg, "--lake", &lake, "--scratch-dir", &d];
    let env = [
        ("LANDING_TEST_SPILL_EVERY", "50"),
        ("LANDING_TEST_SPILL_REPLAY", "true"),
    ];
    let paused = Paused::start_args(&w, &args, "before-replay", &env);
    // Line 1900 was held back: the first spill came after 50 events.
    let edited = edit_learner(&input, 1900);
    assert_eq!(edited.len(), input.len());
    assert_ne!(edited, input);
    w.put_input(DAY, &edited);
    let r = paused.finish();
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the input read differently the second time"),
        "{}",
        r.stderr
    );
    assert!(w.get(RAW).is_none(), "published a day of two inputs");
    assert_eq!(checkpoint_sha(&w, CKPT), None, "checkpointed");
    assert!(scratch_is_empty(&dir), "scratch left");
}

/// A fingerprint table with room for the whole day (`LANDING_TEST_SPILL_TABLE`)
/// decides every copy during the pass: the model's bytes and counts, with neither a
/// replay nor a second pass, though the day spilled early and has copies throughout.
fn a_table_with_room_decides_every_copy_in_the_pass(kind: Kind) {
    let input = generated(3000, 7);
    let expected = expected_seen(&input, 0);
    assert!(
        expected.counts[2].as_u64().unwrap() > 0,
        "no copies to decide"
    );
    let w = World::new(kind, "table");
    let arg = w.put_input(DAY, &input);
    let dir = scratch(&w);
    let all = ["--scratch-dir", dir.to_str().unwrap()];
    let env = [
        ("LANDING_TEST_SPILL_EVERY", "50"),
        ("LANDING_TEST_SPILL_TABLE", "100000"),
    ];
    let r = w.run_env(&arg, &all, &env);
    assert_eq!(seen(&w, &r), expected, "{}", r.stderr);
    let spill = &r.summary.as_ref().unwrap()["spill"];
    assert!(spill["runs"].as_u64().is_some_and(|n| n > 1), "{spill}");
    assert_eq!(spill["replayed"], false, "{spill}");
    assert_eq!(spill["second_pass"], false, "{spill}");
    assert!(scratch_is_empty(&dir), "scratch left behind");
}

/// A table that takes distinct events for copies (the test hooks keep no canonical
/// bits and squeeze the ids into three digests): the merge catches the first wrong
/// call, the run fails with exit 1 and says to run again, and nothing is published,
/// checkpointed or left in scratch. The same day without the hook lands whole.
fn a_copy_the_table_called_wrongly_fails_the_run(kind: Kind) {
    let input = generated(1500, 11);
    let w = World::new(kind, "wrong-copy");
    let arg = w.put_input(DAY, &input);
    let dir = scratch(&w);
    let all = ["--scratch-dir", dir.to_str().unwrap()];
    let squeezed = [
        ("LANDING_TEST_SPILL_EVERY", "50"),
        ("LANDING_TEST_ID_DIGEST_BITS", "2"),
    ];
    let mut env = squeezed.to_vec();
    env.push(("LANDING_TEST_FINGERPRINT_BITS", "0"));
    let r = w.run_env(&arg, &all, &env);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("the fingerprint table took line") && r.stderr.contains("run again"),
        "{}",
        r.stderr
    );
    assert!(w.get(RAW).is_none(), "published a day with a line missing");
    assert_eq!(checkpoint_sha(&w, CKPT), None, "checkpointed");
    assert!(scratch_is_empty(&dir), "scratch left");
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    let r = w.run_env(&arg, &all, &squeezed);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(w.get(RAW).unwrap(), expected_publish(&input));
}

matrix! {
    a_spilling_run_matches_the_model: [local, seaweed, moto];
    copies_before_the_spill_choose_the_replay: [local, seaweed];
    a_crash_at_each_spill_step_reruns_to_the_same_bytes: [local, seaweed, moto];
    an_input_edited_before_the_replay_fails_the_run: [local, seaweed];
    a_table_with_room_decides_every_copy_in_the_pass: [local, seaweed];
    a_copy_the_table_called_wrongly_fails_the_run: [local, seaweed];
}

/// Distinct ids squeezed into three id digests: nothing refused, nothing dropped,
/// spilling or not.
#[test]
fn ids_sharing_a_digest_are_all_published() {
    let input = generated(1500, 11);
    let expected = expected_publish(&input);
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

/// A gzip input with duplicates, published gzip: spilling every 50 events either
/// way (the replay decodes the input again and goes on encoding the output; the
/// second pass decodes the staged output and encodes it again) publishes the
/// bytes the model gives its content, and a collision found by the merge is refused on the
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
    let base = generated(3000, 21);
    let clean = gzip(&base);
    let mut content = base.clone();
    content.extend(format!("{}\n", event("e-late", 1)).into_bytes());
    content.extend(format!("{}\n", event("e-late", 2)).into_bytes());
    let colliding = gzip(&content);
    let args = ["--output-compression", "gzip"];
    let cases = [(clean, base, 0), (colliding, content, 65)];
    for ((input, content, code), way) in cases.iter().flat_map(|c| WAYS.map(|w| (c, w))) {
        let code = *code;
        let e = expected_seen(content, 0);
        assert_eq!(e.code, Some(code), "the model: {:?}", e.reason);
        let expected = (e.counts, e.reason, e.raw);

        let w = World::new(kind, "spilled");
        let arg = w.put_input(name, input);
        let dir = scratch(&w);
        let mut all = args.to_vec();
        all.extend(["--scratch-dir", dir.to_str().unwrap()]);
        let env = [
            ("LANDING_TEST_SPILL_EVERY", "50"),
            ("LANDING_TEST_SPILL_REPLAY", way),
        ];
        let r = w.run_env(&arg, &all, &env);
        assert_eq!(r.code, Some(code), "replay {way}: {}", r.stderr);
        let s = r.summary.as_ref().unwrap();
        let done = if way == "true" {
            "replayed"
        } else {
            "second_pass"
        };
        assert_eq!(s["spill"][done], code == 0, "{}", r.stdout);
        let published = w.get(raw).map(|gz| {
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut out)
                .expect("the published object is gzip");
            out
        });
        let got = (seen(&w, &r).counts, s["reason"].clone(), published);
        assert_eq!(got, expected, "replay {way}");
        assert!(scratch_is_empty(&dir));
        assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    }
}

matrix! {
    a_compressed_input_and_output_spill_to_the_same_bytes: [local, seaweed];
}

/// Run `cmd` to its end and measure its peak resident memory, `ru_maxrss` (the
/// kernel's high-water mark), as `wait4` reports it to the parent. The parent is a
/// small Python process that forks and execs the run: the kernel carries a process's
/// high-water mark across `exec`, so a run spawned straight from this test process
/// (vfork: its memory) would report the test's own peak, not the run's.
fn run_measuring_peak(cmd: Command, dir: &Path) -> (Run, u64) {
    const MEASURE: &str = "import os, sys\n\
pid = os.fork()\n\
if pid == 0:\n    os.execv(sys.argv[2], sys.argv[2:])\n\
_, status, usage = os.wait4(pid, 0)\n\
open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n\
sys.exit(os.waitstatus_to_exitcode(status) % 256)\n";
    let (out, err, peak) = (dir.join("stdout"), dir.join("stderr"), dir.join("peak"));
    let mut m = Command::new("python3");
    m.arg("-c").arg(MEASURE).arg(&peak).arg(cmd.get_program());
    m.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => m.env(k, v),
            None => m.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        m.current_dir(d);
    }
    m.stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    let status = m.status().expect("python3 runs the measuring parent");
    let output = std::process::Output {
        status,
        stdout: std::fs::read(&out).unwrap(),
        stderr: std::fs::read(&err).unwrap(),
    };
    let kib: u64 = std::fs::read_to_string(&peak)
        .expect("the measured peak")
        .trim()
        .parse()
        .expect("ru_maxrss in KiB");
    // Linux reports ru_maxrss in KiB.
    (Run::from_output(output), kib * 1024)
}

/// A day whose expected bytes are known by construction: `events` distinct events
/// already in canonical form (keys sorted, no whitespace, UTC `Z`), and every 50th
/// one sent again later. It publishes the distinct lines in input order.
fn canonical_day(events: u64) -> (Vec<u8>, Vec<u8>) {
    let line = |i: u64| {
        format!(
            r#"{{"attempt_number":{},"checkpoint":{},"event_id":"evt-{i:08}","event_time":"2026-03-02T{:02}:{:02}:{:02}Z","event_type":"checkpoint","learner_id":"lrn-{:05}","lesson_id":"lesson-{:03}-padding-to-two-hundred-bytes-a-line"}}"#,
            1 + i % 3,
            i % 1000,
            i / 3600 % 24,
            i / 60 % 60,
            i % 60,
            i % 50_000,
            i % 400
        ) + "\n"
    };
    let (mut input, mut published) = (Vec::new(), Vec::new());
    for i in 0..events {
        let l = line(i);
        input.extend_from_slice(l.as_bytes());
        published.extend_from_slice(l.as_bytes());
        if i % 50 == 49 {
            input.extend_from_slice(line(i - 25).as_bytes());
        }
    }
    (input, published)
}

/// A real `--max-memory`, with no test hook: a day whose unbounded run holds more
/// than the budget (measured in the same test) spills under it, publishes the
/// expected bytes, and its peak resident memory (measured by the kernel) stays
/// within the budget.
#[test]
fn a_real_budget_spills_and_the_peak_stays_within_it() {
    // The least budget that runs: 48 MiB of process, 64 MiB of run buffers, 8 MiB of
    // index (docs/design.md, "Memory and spill").
    const BUDGET: u64 = 120 << 20;
    let (input, expected) = canonical_day(2_500_000);
    // The construction's premise, checked by the reference model on a prefix.
    let prefix = &input[..input.len().min(200_000)];
    let prefix = &prefix[..=prefix.iter().rposition(|&b| b == b'\n').unwrap()];
    let e = model::expect(
        &model::contract_file("progress"),
        prefix,
        model::Opts::default(),
    );
    assert!(
        expected.starts_with(&e.published),
        "the day is not canonical"
    );
    let w = World::new(Kind::Local, "real-budget");
    let arg = w.put_input(DAY, &input);
    drop(input);
    let dir = scratch(&w);
    let run = |budget: Option<&str>| {
        let mut args = vec!["run", "--input", &arg, "--progress", "never"];
        let lake = w.lake_arg();
        args.extend(["--lake", &lake, "--scratch-dir", dir.to_str().unwrap()]);
        args.extend(budget.iter().flat_map(|b| ["--max-memory", b]));
        let mut cmd = w.command(&args, &[]);
        cmd.env_remove("LANDING_TEST_SPILL_EVERY");
        run_measuring_peak(cmd, w.tmp.path())
    };
    let (unbounded, peak_unbounded) = run(None);
    assert_eq!(unbounded.code, Some(0), "{}", unbounded.stderr);
    w.delete(RAW);
    w.delete("checkpoints/progress/progress-2026-03-02.jsonl.json");
    let (r, peak) = run(Some("120MiB"));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let spill = &r.summary.as_ref().expect("a summary")["spill"];
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    eprintln!(
        "bounded run: peak {:.1} MiB of a {} MiB budget (unbounded: {:.1} MiB), spill {spill}",
        mib(peak),
        BUDGET >> 20,
        mib(peak_unbounded)
    );
    assert!(
        peak_unbounded > BUDGET,
        "the day is too small to test the budget: unbounded peak {peak_unbounded} B"
    );
    assert!(
        spill["runs"].as_u64().is_some_and(|n| n > 1),
        "the budget did not make it spill: {}",
        r.stdout
    );
    assert!(
        w.get(RAW).unwrap() == expected,
        "spilled bytes differ from the expected day"
    );
    assert!(
        peak <= BUDGET,
        "peak resident memory {peak} B is over the {BUDGET} B budget"
    );
    assert!(scratch_is_empty(&dir), "scratch left behind");
}
