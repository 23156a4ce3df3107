//! The readers' commit log (docs/interface.md, "Reading what landed"), on every
//! backend: the test reads the entries from the store itself (names, numbers,
//! fields) and judges them against the store's own bytes and versions and the
//! reference model's counts; `landing feed` is judged against those entries.

use serde_json::Value;

use crate::inbox::{inbox_run, put_inbox};
use crate::support::model::{contract_file, expect, Opts};
use crate::support::*;

const DAY: &str = "progress-2026-03-02.jsonl";
const RAW: &str = "raw/progress/progress-2026-03-02.jsonl";
const QUAR: &str = "quarantine/progress/progress-2026-03-02.jsonl.rejects.jsonl";

/// The log of `product` as the store holds it: every file `<20 digits>.json` of
/// `raw/<product>/_landing_log/`, which must be numbered 1..=n without a gap, each
/// saying its own number.
pub(crate) fn log_entries(w: &World, product: &str) -> Vec<Value> {
    read_log(w, product).unwrap_or_else(|e| panic!("{e}"))
}

/// [`log_entries`], with what is wrong as an error (for tests that collect problems).
pub(crate) fn read_log(w: &World, product: &str) -> Result<Vec<Value>, String> {
    let folder = format!("{product}/_landing_log/");
    let names: Vec<String> = w
        .zone_files("raw")
        .into_iter()
        .filter_map(|f| f.strip_prefix(&folder).map(str::to_owned))
        .filter(|n| n.len() == 25 && n.ends_with(".json") && !n.starts_with('.'))
        .collect();
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let n = i as u64 + 1;
        if name != &format!("{n:020}.json") {
            return Err(format!(
                "the log is not numbered 1..=n without a gap: {names:?}"
            ));
        }
        let bytes = w
            .try_get(&format!("raw/{folder}{name}"))?
            .ok_or_else(|| format!("entry {name} listed, then gone"))?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| format!("entry {name}: {e}"))?;
        if v["sequence"] != n {
            return Err(format!("entry {name} says sequence {}", v["sequence"]));
        }
        out.push(v);
    }
    Ok(out)
}

/// Does `entry` name the version now at `key` (size and the store's version marker)?
pub(crate) fn names_published(w: &World, entry: &Value, key: &str) -> bool {
    let Some((size, marker)) = w.published_marker(key) else {
        return false;
    };
    entry["key"] == key
        && entry["published_size"] == size
        && marker
            .as_object()
            .expect("marker fields")
            .iter()
            .all(|(field, value)| &entry[field] == value)
}

/// `entry` names the object now at `key`: the SHA-256 of its bytes, its size and
/// the version the store reports.
pub(crate) fn assert_names_published(w: &World, entry: &Value, key: &str) {
    let bytes = w.get(key).expect("the published object exists");
    assert_eq!(entry["key"], key);
    assert_eq!(entry["published_sha256"], sha256(&bytes), "{entry}");
    let (size, marker) = w.published_marker(key).expect("published");
    assert_eq!(entry["published_size"], size);
    for (field, value) in marker.as_object().expect("marker fields") {
        assert_eq!(&entry[field], value, "{field} of {entry}");
    }
}

/// The counts `input` lands with, by the reference model.
fn model_counts(input: &[u8], cap: u64) -> [u64; 3] {
    let opts = Opts {
        max_rejected_lines: cap,
        ..Opts::default()
    };
    let e = expect(&contract_file("progress"), input, opts);
    [e.accepted_rows, e.rejected_rows, e.duplicate_rows]
}

fn counts(entry: &Value) -> [u64; 3] {
    ["accepted_rows", "rejected_rows", "duplicate_rows"].map(|k| entry[k].as_u64().expect(k))
}

fn feed(w: &World, args: &[&str]) -> Run {
    let lake = w.lake_arg();
    let mut all = vec!["feed", "--lake", &lake];
    all.extend_from_slice(args);
    w.landing(&all, &[])
}

fn stdout_lines(r: &Run) -> Vec<Value> {
    assert_eq!(r.code, Some(0), "feed: {}", r.stderr);
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("feed prints JSON lines"))
        .collect()
}

/// A publish adds one entry naming its bytes, version, counts, contract and run; a
/// skip and a refusal add none; a republish names the version it replaced.
fn each_publish_adds_one_entry(kind: Kind) {
    let w = World::new(kind, "log-entries");
    let first = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/inbox/progress-2026-03-02.jsonl"
    ))
    .unwrap();
    let input = w.put_input(DAY, &first);
    let r = w.run(&input, &["--max-rejected-lines", "1"]);
    assert_eq!(r.action(), "published", "{}", r.stderr);
    let log = log_entries(&w, "progress");
    assert_eq!(log.len(), 1);
    let e1 = &log[0];
    assert_names_published(&w, e1, RAW);
    assert_eq!(counts(e1), model_counts(&first, 1));
    assert_eq!(e1["input_sha256"], sha256(&first));
    assert_eq!(e1["input_name"], DAY);
    assert_eq!(e1["product"], "progress");
    assert_eq!(e1["quarantine_key"], QUAR);
    assert_eq!(e1["run_id"], r.summary.as_ref().unwrap()["run_id"]);
    // The run says which entry it wrote: the one stored under that number.
    assert_eq!(r.summary.as_ref().unwrap()["log_sequence"], 1);
    assert_eq!(e1["sequence"], 1);
    assert_eq!(e1["contract"]["name"], "progress");
    assert_eq!(e1["contract"]["version"], "1");
    assert_eq!(
        e1["contract"]["sha256"],
        sha256(&std::fs::read(contract_file("progress")).unwrap())
    );
    assert!(
        e1.get("replaced").is_none(),
        "a first publish replaces nothing: {e1}"
    );

    // A skip and a refusal add nothing; the skip names the entry it found.
    let skip = w.run(&input, &["--max-rejected-lines", "1"]);
    assert_eq!(skip.action(), "skipped");
    assert_eq!(skip.summary.as_ref().unwrap()["log_sequence"], 1);
    w.put_input(DAY, b"{not json\n");
    assert_eq!(w.run(&input, &[]).action(), "refused");
    assert_eq!(log_entries(&w, "progress").len(), 1);

    // A corrected day replaces the first: entry 2 names what it replaced.
    let second = generated(300, 5);
    w.put_input(DAY, &second);
    assert_eq!(w.run(&input, &[]).action(), "published");
    let log = log_entries(&w, "progress");
    assert_eq!(log.len(), 2);
    let e2 = &log[1];
    assert_names_published(&w, e2, RAW);
    assert_eq!(counts(e2), model_counts(&second, 0));
    assert_eq!(e2["quarantine_key"], Value::Null);
    let replaced = &e2["replaced"];
    assert_eq!(replaced["sequence"], 1);
    assert_eq!(replaced["published_sha256"], e1["published_sha256"]);
    assert_eq!(replaced["published_size"], e1["published_size"]);
    for field in ["published_etag", "published_mtime_ns", "published_ino"] {
        assert_eq!(replaced.get(field), e1.get(field), "{field}");
    }
}

/// `feed --since N` prints the entries after N as stored, then the next cursor; a
/// cursor at the end prints only itself, one past it nothing; `--files` the
/// locations; without `--since` each key's latest entry.
fn feed_reads_from_a_cursor(kind: Kind) {
    let w = World::new(kind, "log-feed");
    let a = w.put_input("a.jsonl", &generated(50, 1));
    let b = w.put_input("b.jsonl", &generated(60, 2));
    for input in [&a, &b] {
        assert_eq!(w.run(input, &[]).action(), "published");
    }
    w.put_input("a.jsonl", &generated(70, 3));
    assert_eq!(w.run(&a, &[]).action(), "published");
    let log = log_entries(&w, "progress");
    assert_eq!(log.len(), 3);

    let all = stdout_lines(&feed(&w, &["--since", "0"]));
    let mut expected = log.clone();
    expected.push(serde_json::json!({ "cursor": 3 }));
    assert_eq!(all, expected);
    let tail = stdout_lines(&feed(&w, &["--since", "2"]));
    assert_eq!(tail, [log[2].clone(), serde_json::json!({ "cursor": 3 })]);
    assert_eq!(
        stdout_lines(&feed(&w, &["--since", "3"])),
        [serde_json::json!({ "cursor": 3 })]
    );
    let past = feed(&w, &["--since", "4"]);
    assert_eq!(
        (past.code, past.stdout.as_str()),
        (Some(0), ""),
        "{}",
        past.stderr
    );

    let current = stdout_lines(&feed(&w, &[]));
    assert_eq!(
        current,
        [
            log[2].clone(),
            log[1].clone(),
            serde_json::json!({ "cursor": 3 })
        ]
    );
    let files = feed(&w, &["--since", "0", "--files"]);
    assert_eq!(files.code, Some(0), "{}", files.stderr);
    let lake = w.lake_arg();
    let want = format!("{lake}/raw/progress/b.jsonl\n{lake}/raw/progress/a.jsonl\n");
    assert_eq!(files.stdout, want);
}

/// A missing entry below the end, or a malformed one, is an error naming its key:
/// never skipped.
fn feed_refuses_a_gap_or_a_bad_entry(kind: Kind) {
    let w = World::new(kind, "log-gap");
    for (name, seed) in [("a.jsonl", 1), ("b.jsonl", 2), ("c.jsonl", 3)] {
        let input = w.put_input(name, &generated(20, seed));
        assert_eq!(w.run(&input, &[]).action(), "published");
    }
    let second = "raw/progress/_landing_log/00000000000000000002.json";
    let kept = w.get(second).expect("entry 2");
    w.delete(second);
    let r = feed(&w, &["--since", "0"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("00000000000000000002.json"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stdout.contains("cursor"),
        "no cursor past a gap: {}",
        r.stdout
    );
    w.put(second, b"{\"sequence\":");
    let r = feed(&w, &["--since", "1"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("00000000000000000002.json"),
        "{}",
        r.stderr
    );
    w.put(second, &kept);
    assert_eq!(stdout_lines(&feed(&w, &["--since", "0"])).len(), 4);
}

/// Inputs of one product landed at once (an inbox run with --jobs, and two shard
/// processes side by side) take every number once: one entry per publish, no gap.
fn parallel_runs_take_every_number_once(kind: Kind) {
    let w = World::new(kind, "log-parallel");
    let names: Vec<String> = (0..12).map(|i| format!("day-{i:02}.jsonl")).collect();
    for (i, name) in names.iter().enumerate() {
        put_inbox(&w, name, &generated(40, 100 + i as u64));
    }
    let inbox = crate::inbox::inbox_arg(&w);
    let lake = w.lake_arg();
    let shard = |i: &str| {
        let args = [
            "run", "--inbox", &inbox, "--lake", &lake, "--jobs", "4", "--shard", i,
        ];
        w.command(&args, &[]).spawn().expect("spawn a shard")
    };
    let (s0, s1) = (shard("0/2"), shard("1/2"));
    for child in [s0, s1] {
        let out = child.wait_with_output().expect("shard ends");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A second night: every input corrected, all at once in one inbox run.
    for (i, name) in names.iter().enumerate() {
        put_inbox(&w, name, &generated(45, 200 + i as u64));
    }
    let night = inbox_run(&w, &["--jobs", "6"], &[]);
    assert_eq!(night.run.code, Some(0), "{}", night.run.stderr);
    let log = log_entries(&w, "progress");
    assert_eq!(log.len(), 24, "one entry per publish");
    for name in &names {
        let key = format!("raw/progress/{name}");
        let of_key: Vec<&Value> = log.iter().filter(|e| e["key"] == key.as_str()).collect();
        assert_eq!(of_key.len(), 2, "{key}");
        assert_names_published(&w, of_key[1], &key);
        assert_eq!(of_key[1]["replaced"]["sequence"], of_key[0]["sequence"]);
    }
}

/// The downstream loop of docs/interface.md § 6 (`examples/feed_loop.py`, DuckDB)
/// over two nights, the second re-landing one day with corrections: the reader's table
/// ends with exactly the model's lines of each day's latest input, each once, and a
/// third pass with nothing new changes nothing.
fn duckdb_follows_the_feed(kind: Kind) {
    let python = std::env::var("LANDING_TEST_DUCKDB_PYTHON").expect(
        "LANDING_TEST_DUCKDB_PYTHON is not set: run the tests under scripts/test-servers, which installs the pinned duckdb",
    );
    let w = World::new(kind, "log-duckdb");
    let db = w.tmp.path().join("reader.duckdb").display().to_string();
    let feed_file = w.tmp.path().join("feed.jsonl");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/feed_loop.py");
    let lake = w.lake_arg();
    let reader_pass = || {
        let py = |args: &[&str]| {
            let out = std::process::Command::new(&python)
                .arg(script)
                .args(args)
                .output()
                .expect("run the DuckDB venv's python");
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert!(
                out.status.success(),
                "feed_loop: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            text
        };
        let since = py(&[&db, "--cursor"]);
        let fed = feed(&w, &["--since", &since]);
        assert_eq!(fed.code, Some(0), "{}", fed.stderr);
        std::fs::write(&feed_file, &fed.stdout).unwrap();
        py(&[&db, "--load", &lake, &feed_file.display().to_string()])
    };
    let (a, b1, b2, c) = (
        generated(30, 1),
        generated(40, 2),
        generated(50, 3),
        generated(20, 4),
    );
    for (name, bytes) in [("a.jsonl", &a), ("b.jsonl", &b1)] {
        assert_eq!(w.run(&w.put_input(name, bytes), &[]).action(), "published");
    }
    assert_eq!(reader_pass(), "2");
    for (name, bytes) in [("b.jsonl", &b2), ("c.jsonl", &c)] {
        assert_eq!(w.run(&w.put_input(name, bytes), &[]).action(), "published");
    }
    assert_eq!(reader_pass(), "4");
    assert_eq!(reader_pass(), "4", "nothing new: the cursor stays");

    let mut want: Vec<(String, String)> = Vec::new();
    for (key, input) in [("a.jsonl", &a), ("b.jsonl", &b2), ("c.jsonl", &c)] {
        let published = String::from_utf8(expected_publish(input)).unwrap();
        want.extend(
            published
                .lines()
                .map(|l| (l.to_owned(), format!("raw/progress/{key}"))),
        );
    }
    want.sort();
    let out = std::process::Command::new(&python)
        .arg("-c")
        .arg("import duckdb, json, sys\nrows = duckdb.connect(sys.argv[1]).execute('SELECT event::VARCHAR, source_key FROM events').fetchall()\nprint(json.dumps(rows))")
        .arg(&db)
        .output()
        .expect("read the reader's table");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got: Vec<(String, String)> = serde_json::from_slice(&out.stdout).expect("rows");
    got.sort();
    assert_eq!(got.len(), want.len(), "rows in the reader's table");
    assert!(
        got == want,
        "the reader's table is not the model's lines of each day's latest input"
    );
}

/// `verify` checks the log against the checkpoints and the objects: clean after
/// plain runs; a checkpointed publish whose entry is gone, and a key whose latest
/// entry names a version no longer published, are findings. `status` shows the end.
fn verify_and_status_know_the_log(kind: Kind) {
    let w = World::new(kind, "log-verify");
    for (name, seed) in [("a.jsonl", 1), ("b.jsonl", 2)] {
        let input = w.put_input(name, &generated(20, seed));
        assert_eq!(w.run(&input, &[]).action(), "published");
    }
    let lake = w.lake_arg();
    let verify = || w.landing(&["verify", "--lake", &lake, "--json"], &[]);
    let findings = |r: &Run| -> Vec<(String, String)> {
        r.stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("JSON lines"))
            .filter(|v| v.get("finding").is_some())
            .map(|v| {
                (
                    v["input_name"].as_str().unwrap().to_owned(),
                    v["finding"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let clean = verify();
    assert_eq!(
        (clean.code, findings(&clean)),
        (Some(0), vec![]),
        "{}",
        clean.stdout
    );
    let status = w.landing(&["status", "--lake", &lake, "--json"], &[]);
    assert_eq!(status.code, Some(0), "{}", status.stderr);
    let v: Value = serde_json::from_str(status.stdout.trim()).expect("status JSON");
    assert_eq!(v["log_end"], 2);

    let first = "raw/progress/_landing_log/00000000000000000001.json";
    let kept = w.get(first).unwrap();
    w.delete(first);
    let r = verify();
    assert_eq!(r.code, Some(1));
    let found = findings(&r);
    assert!(
        found.contains(&("a.jsonl".into(), "log_missing".into())),
        "{found:?}"
    );
    assert!(
        found.contains(&("_landing_log".into(), "log_corrupt".into())),
        "{found:?}"
    );
    w.put(first, &kept);

    // An object replaced behind the job's back: its checkpoint's drift finding says
    // it (the log adds nothing); with its checkpoint gone too, the log says it.
    w.put("raw/progress/b.jsonl", b"{}\n");
    let found = findings(&verify());
    assert!(
        found.contains(&("b.jsonl".into(), "size".into())),
        "{found:?}"
    );
    assert!(
        !found.iter().any(|(_, f)| f.starts_with("log_")),
        "{found:?}"
    );
    w.delete("checkpoints/progress/b.jsonl.json");
    let r = verify();
    assert_eq!(r.code, Some(1));
    let found = findings(&r);
    assert!(
        found.contains(&("b.jsonl".into(), "log_stale".into())),
        "{found:?}"
    );
    assert!(!found.iter().any(|(n, _)| n == "a.jsonl"), "{found:?}");
}

/// A run killed between its publish and its entry leaves a version no entry names;
/// the next run of the product, of another input, writes that entry from what the
/// publish carried (docs/design.md, the crash table): counts, hashes, contract and
/// run as the killed run would have, the version now published, one entry per
/// publish, no gap; and sweeps what the killed run left. The input's own next run
/// then replaces it, naming it.
fn another_inputs_run_repairs_an_entry_a_kill_left_out(kind: Kind) {
    let mut w = World::new(kind, "log-repair");
    if w.is_s3() {
        w.env
            .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }
    let first = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/inbox/progress-2026-03-02.jsonl"
    ))
    .unwrap();
    let input = w.put_input(DAY, &first);
    let cap = ["--max-rejected-lines", "1"];
    let killed = w.run_env(&input, &cap, &[("LANDING_CRASH_AT", "after-publish")]);
    assert_eq!(killed.signal, Some(9), "{}", killed.stderr);
    assert!(
        log_entries(&w, "progress").is_empty(),
        "killed before its entry"
    );
    let lease: Value = serde_json::from_slice(
        &w.get("locks/progress/progress-2026-03-02.jsonl.lock")
            .expect("the killed run's lease"),
    )
    .unwrap();
    let killed_run = lease["run_id"].as_str().expect("run id").to_owned();

    let other = generated(50, 3);
    let other_input = w.put_input("other.jsonl", &other);
    let r = w.run(&other_input, &["--lease-wait", TAKEOVER_WAIT]);
    assert_eq!(r.action(), "published", "{}", r.stderr);
    let s = r.summary.as_ref().unwrap();
    let repaired = &s["log_repairs"]["repaired"];
    assert_eq!(repaired[0]["input_name"], DAY, "{s}");
    assert_eq!(repaired[0]["run_id"], killed_run.as_str(), "{s}");
    assert_eq!(repaired.as_array().map(Vec::len), Some(1), "{s}");

    let log = log_entries(&w, "progress");
    assert_eq!(log.len(), 2, "one entry per publish: {log:?}");
    let (mine, theirs): (Vec<&Value>, Vec<&Value>) =
        log.iter().partition(|e| e["input_name"] == DAY);
    assert_eq!((mine.len(), theirs.len()), (1, 1), "{log:?}");
    let e = mine[0];
    assert_eq!(e["sequence"], repaired[0]["sequence"]);
    assert_names_published(&w, e, RAW);
    let opts = Opts {
        max_rejected_lines: 1,
        ..Opts::default()
    };
    let published = crate::support::model::expected_publish_with(&first, opts);
    assert_eq!(e["published_sha256"], sha256(&published));
    assert_eq!(counts(e), model_counts(&first, 1));
    assert_eq!(e["input_sha256"], sha256(&first));
    assert_eq!(e["quarantine_key"], QUAR);
    assert_eq!(e["run_id"], killed_run.as_str());
    assert_eq!(e["contract"]["name"], "progress");
    assert!(e.get("replaced").is_none(), "a first publish: {e}");
    assert!(w.lease_is_free("locks/progress/progress-2026-03-02.jsonl.lock"));
    // It swept what the killed run left (on S3 its staging object), as a takeover does.
    assert_eq!(w.leftovers(), Vec::<String>::new());

    // A run with nothing to repair says nothing of it.
    let again = w.run(&other_input, &[]);
    assert_eq!(again.action(), "skipped");
    assert!(again.summary.as_ref().unwrap().get("log_repairs").is_none());

    // The input's own next run republishes (no checkpoint names the object), naming
    // the repaired entry as the one it replaced.
    let rerun = w.run(&input, &cap);
    assert_eq!(rerun.action(), "published", "{}", rerun.stderr);
    let log = log_entries(&w, "progress");
    assert_eq!(log.len(), 3);
    assert_eq!(log[2]["replaced"]["sequence"], e["sequence"], "{}", log[2]);
    assert_names_published(&w, &log[2], RAW);
}

matrix! {
    each_publish_adds_one_entry: [local, seaweed, moto, localstack];
    feed_reads_from_a_cursor: [local, seaweed, moto, localstack];
    feed_refuses_a_gap_or_a_bad_entry: [local, seaweed, moto, localstack];
    parallel_runs_take_every_number_once: [local, seaweed, moto, localstack];
    verify_and_status_know_the_log: [local, seaweed, moto, localstack];
    duckdb_follows_the_feed: [local];
    another_inputs_run_repairs_an_entry_a_kill_left_out: [local, seaweed, moto, localstack];
}
