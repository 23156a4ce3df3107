//! The nemesis's feed reader: a downstream job following the commit log
//! with `landing feed --since <cursor>` throughout the soak, and the checker's
//! reading of the whole log at the quiet end. Every expected value comes from the
//! soak's model: the versions it stored and the model's publish of each.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{name, Soak, INPUTS};
use crate::commit_log::{names_published, read_log};
use crate::support::*;

const PRODUCT: &str = "progress";

/// A summary line a run printed with action `published` or `skipped`.
pub(super) struct Said {
    pub op: String,
    pub action: String,
    pub run_id: String,
    pub input_name: String,
    pub input_sha256: String,
    pub log_sequence: Value,
}

/// The `published` and `skipped` summary lines of a run's stdout.
pub(super) fn summaries(op: &str, stdout: &str) -> Vec<Said> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| matches!(v["action"].as_str(), Some("published" | "skipped")))
        .map(|v| {
            let input = v["input"].as_str().unwrap_or_default();
            Said {
                op: op.to_owned(),
                action: v["action"].as_str().unwrap_or_default().to_owned(),
                run_id: v["run_id"].as_str().unwrap_or_default().to_owned(),
                input_name: input.rsplit('/').next().unwrap_or(input).to_owned(),
                input_sha256: v["input_sha256"].as_str().unwrap_or_default().to_owned(),
                log_sequence: v["log_sequence"].clone(),
            }
        })
        .collect()
}

/// The feed reader: `landing feed --since <cursor>` over and over until the soak
/// stops, each pass half a second after the last, as a downstream job polls (pacing
/// only: nothing waits on it). A failed pass is excused only while the server
/// restarts; the cursor then stays where it was. Returns the cursor.
pub(super) fn feed_reader(s: &Soak) -> u64 {
    let mut cursor = 0;
    while !s.stopping() {
        let started = Instant::now();
        if let Err(e) = follow_once(s, &mut cursor) {
            if s.restarting(started, Instant::now()) {
                s.count(|t| &mut t.faults, "feed refused during a restart");
            } else {
                s.anomaly(format!("the feed reader at cursor {cursor}: {e}"));
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    cursor
}

/// One pass: the entries after `cursor` must be numbered `cursor`+1, +2, … and end
/// with `{"cursor":M}`, M their last number; each entry is judged ([`judge_entry`]).
/// `Err` only for what a store failure can explain (the feed failed, or reading an
/// entry's object failed); the rest is an anomaly here. The cursor moves to M.
fn follow_once(s: &Soak, cursor: &mut u64) -> Result<(), String> {
    let since = cursor.to_string();
    let r = feed_since(s, &since);
    if r.code != Some(0) {
        let last = r.stderr.lines().last().unwrap_or("(nothing on stderr)");
        return Err(format!("feed --since {since} exited {:?}: {last}", r.code));
    }
    let mut lines = Vec::new();
    for l in r.stdout.lines() {
        match serde_json::from_str::<Value>(l) {
            Ok(v) => lines.push(v),
            Err(e) => {
                s.anomaly(format!(
                    "feed --since {since} printed a line that is no JSON ({e}): {l}"
                ));
                return Ok(());
            }
        }
    }
    let Some(last) = lines.pop() else {
        s.anomaly(format!(
            "feed --since {since} printed nothing: the log ends before the cursor it printed"
        ));
        return Ok(());
    };
    let Some(printed) = last.get("cursor").and_then(Value::as_u64) else {
        s.anomaly(format!(
            "feed --since {since} did not end with a cursor: {last}"
        ));
        return Ok(());
    };
    let mut expect = *cursor;
    let mut read_failure = None;
    for e in &lines {
        expect += 1;
        if e["sequence"] != expect {
            s.anomaly(format!(
                "feed --since {since}: entry {} where {expect} was due (numbers go back, repeat or skip)",
                e["sequence"]
            ));
        }
        s.tally.lock().unwrap().feed_entries += 1;
        if let Err(err) = judge_entry(s, e) {
            read_failure.get_or_insert(err);
        }
    }
    if printed != expect {
        s.anomaly(format!(
            "feed --since {since} printed {} entries, then cursor {printed}, not {expect}",
            lines.len()
        ));
    }
    if printed < *cursor {
        s.anomaly(format!(
            "feed --since {since} printed cursor {printed}: backwards"
        ));
    } else {
        *cursor = printed;
    }
    read_failure.map_or(Ok(()), Err)
}

/// One entry against the model: it names one of the soak's inputs at its raw key; its
/// `published_sha256` and `input_sha256` are the model's publish and the hash of one
/// version of that input; and if the object at its key still has the entry's version
/// (size and version fields), its bytes hash to `published_sha256`. `Err` when the
/// object could not be read.
fn judge_entry(s: &Soak, e: &Value) -> Result<(), String> {
    let seq = &e["sequence"];
    let Some(input) = e["input_name"].as_str() else {
        s.anomaly(format!("log entry {seq} has no input_name: {e}"));
        return Ok(());
    };
    let Some(i) = (0..INPUTS).find(|&i| name(i) == input) else {
        s.anomaly(format!(
            "log entry {seq} names {input}, no input of the soak"
        ));
        return Ok(());
    };
    let key = format!("raw/{PRODUCT}/{input}");
    if e["key"] != key.as_str() {
        s.anomaly(format!("log entry {seq} of {input} names key {}", e["key"]));
    }
    let published = e["published_sha256"].as_str().unwrap_or_default();
    {
        let versions = s.versions.lock().unwrap();
        let of_output: Vec<_> = versions[i]
            .iter()
            .filter(|v| v.output_sha == published)
            .collect();
        if of_output.is_empty() {
            s.anomaly(format!(
                "log entry {seq} of {input}: published_sha256 {published} is the model's publish of none of its {} versions",
                versions[i].len()
            ));
        } else if !of_output
            .iter()
            .any(|v| e["input_sha256"] == v.sha.as_str())
        {
            s.anomaly(format!(
                "log entry {seq} of {input}: input_sha256 {} is not the content whose publish it names",
                e["input_sha256"]
            ));
        }
    }
    let Some((bytes, size, marker)) = read_versioned(s.w, &key)? else {
        return Ok(());
    };
    let same_version = e["published_size"] == size
        && marker
            .as_object()
            .expect("marker fields")
            .iter()
            .all(|(field, value)| &e[field] == value);
    if same_version {
        s.tally.lock().unwrap().feed_hashed += 1;
        let got = sha256(&bytes);
        if got != published {
            s.anomaly(format!(
                "log entry {seq} names the version now at {key}, whose bytes hash to {got}, not its published_sha256 {published}"
            ));
        }
    }
    Ok(())
}

/// The object at lake key `key`, its size and its version fields as one reading: on
/// S3 one GetObject (body, ETag); on a local lake one open file (read and fstat'ed:
/// a publish renames a new file over the name, so an open file's bytes never change).
/// `None` when absent; `Err` for any other failure.
fn read_versioned(w: &World, key: &str) -> Result<Option<(Vec<u8>, u64, Value)>, String> {
    let Some((rt, client, bucket)) = w.s3_parts() else {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let path = w.tmp.path().join(LAKE_PREFIX).join(key);
        let mut f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("opening {key}: {e}")),
        };
        let md = f.metadata().map_err(|e| format!("fstat {key}: {e}"))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)
            .map_err(|e| format!("reading {key}: {e}"))?;
        let marker = serde_json::json!({
            "published_mtime_ns": md.mtime() * 1_000_000_000 + md.mtime_nsec(),
            "published_ino": md.ino(),
            "published_ctime_ns": md.ctime() * 1_000_000_000 + md.ctime_nsec(),
        });
        return Ok(Some((bytes, md.len(), marker)));
    };
    rt.block_on(async {
        let full = format!("{LAKE_PREFIX}/{key}");
        let sent = client.get_object().bucket(bucket).key(&full).send().await;
        let r = match sent {
            Ok(r) => r,
            Err(e) if e.as_service_error().is_some_and(|e| e.is_no_such_key()) => return Ok(None),
            Err(e) => {
                let e = aws_sdk_s3::error::DisplayErrorContext(&e);
                return Err(format!("GetObject {key}: {e}"));
            }
        };
        let marker = serde_json::json!({ "published_etag": r.e_tag() });
        let body = r
            .body
            .collect()
            .await
            .map_err(|e| format!("reading the body of {key}: {e:?}"))?;
        let bytes = body.into_bytes().to_vec();
        let size = bytes.len() as u64;
        Ok(Some((bytes, size, marker)))
    })
}

/// The quiet end's reading of the log, after the quiet runs: the feed reader's last
/// pass reaches the end; the store holds entries 1..=n without a gap, and `feed
/// --since 0` prints them as stored; each input's latest entry names its raw
/// object's current version and the model's publish of its latest content; every
/// `published` or `skipped` summary names an entry of its input (a publish, the one
/// its run wrote); one entry per (run, input); a `replaced.sequence` names an earlier
/// entry of the same key with the bytes it says it replaced; `verify` finds nothing
/// wrong with the log.
pub(super) fn check_log_at_quiet_end(s: &Soak, mut cursor: u64, said: &[Said]) {
    if let Err(e) = follow_once(s, &mut cursor) {
        s.anomaly(format!(
            "the feed reader's last pass, at cursor {cursor}: {e}"
        ));
    }
    let log = match read_log(s.w, PRODUCT) {
        Ok(log) => log,
        Err(e) => return s.anomaly(format!("the commit log at the quiet end: {e}")),
    };
    let end = log.len() as u64;
    s.tally.lock().unwrap().log_end = end;
    if cursor != end {
        s.anomaly(format!(
            "the feed reader ended at cursor {cursor}, the log at entry {end}"
        ));
    }
    feed_prints_the_log(s, &log);
    latest_entries_name_the_model(s, &log);
    summaries_name_their_entries(s, &log, said);
    one_entry_per_publish(s, &log);
    replaced_names_an_earlier_entry(s, &log);
    verify_finds_nothing_in_the_log(s);
}

/// `landing feed --since <since>` on the soak's lake, as the reader role runs it.
fn feed_since(s: &Soak, since: &str) -> Run {
    let lake = s.w.lake_arg();
    let args = [
        "feed",
        "--lake",
        &lake,
        "--product",
        PRODUCT,
        "--since",
        since,
    ];
    s.w.landing(&args, &[("LANDING_LOG_LEVEL", "warn")])
}

fn feed_prints_the_log(s: &Soak, log: &[Value]) {
    let r = feed_since(s, "0");
    let printed: Result<Vec<Value>, _> = r.stdout.lines().map(serde_json::from_str).collect();
    let mut want = log.to_vec();
    want.push(serde_json::json!({ "cursor": log.len() }));
    match (r.code, printed) {
        (Some(0), Ok(p)) if p == want => {}
        (Some(0), Ok(p)) => s.anomaly(format!(
            "feed --since 0 printed {} lines, not the store's {} entries and the cursor",
            p.len(),
            log.len()
        )),
        (code, _) => s.anomaly(format!(
            "feed --since 0 at the quiet end exited {code:?}: {}",
            r.stderr
        )),
    }
}

fn latest_entries_name_the_model(s: &Soak, log: &[Value]) {
    let versions = s.versions.lock().unwrap();
    for (i, v) in versions.iter().enumerate() {
        let n = name(i);
        let key = format!("raw/{PRODUCT}/{n}");
        let Some(e) = log.iter().rev().find(|e| e["input_name"] == n.as_str()) else {
            s.anomaly(format!("{n}: no log entry at the quiet end"));
            continue;
        };
        let latest = v.last().expect("a version");
        if !names_published(s.w, e, &key) {
            s.anomaly(format!(
                "{n}: its latest log entry {} names another version than the one at {key}",
                e["sequence"]
            ));
        }
        if e["published_sha256"] != latest.output_sha.as_str() {
            s.anomaly(format!(
                "{n}: its latest log entry {} does not name the model's publish of its latest content",
                e["sequence"]
            ));
        }
    }
}

fn summaries_name_their_entries(s: &Soak, log: &[Value], said: &[Said]) {
    for x in said {
        let who = format!("{} run {} ({} {})", x.op, x.run_id, x.action, x.input_name);
        let Some(n) = x.log_sequence.as_u64() else {
            s.anomaly(format!("{who} printed log_sequence {}", x.log_sequence));
            continue;
        };
        let Some(e) = n.checked_sub(1).and_then(|k| log.get(k as usize)) else {
            s.anomaly(format!("{who} names log entry {n}, past the log's end"));
            continue;
        };
        if e["input_name"] != x.input_name.as_str() || e["input_sha256"] != x.input_sha256.as_str()
        {
            s.anomaly(format!(
                "{who} names log entry {n}, which is of {} {}",
                e["input_name"], e["input_sha256"]
            ));
        }
        if x.action == "published" && e["run_id"] != x.run_id.as_str() {
            s.anomaly(format!(
                "{who} names log entry {n}, written by run {}",
                e["run_id"]
            ));
        }
    }
}

fn one_entry_per_publish(s: &Soak, log: &[Value]) {
    let mut seen: BTreeMap<(String, String), u64> = BTreeMap::new();
    for e in log {
        let k = (e["run_id"].to_string(), e["input_name"].to_string());
        let seq = e["sequence"].as_u64().unwrap_or_default();
        if let Some(first) = seen.insert(k.clone(), seq) {
            s.anomaly(format!(
                "log entries {first} and {seq}: run {} published {} twice",
                k.0, k.1
            ));
        }
    }
}

fn replaced_names_an_earlier_entry(s: &Soak, log: &[Value]) {
    for e in log {
        let Some(k) = e["replaced"]["sequence"].as_u64() else {
            continue;
        };
        let seq = &e["sequence"];
        let earlier =
            (k >= 1 && e["sequence"].as_u64().is_some_and(|n| k < n)).then(|| &log[k as usize - 1]);
        let Some(first) = earlier else {
            s.anomaly(format!(
                "log entry {seq} says it replaced entry {k}: not an earlier entry"
            ));
            continue;
        };
        let same = first["key"] == e["key"]
            && ["published_sha256", "published_size"]
                .iter()
                .all(|f| first[*f] == e["replaced"][*f]);
        if !same {
            s.anomaly(format!(
                "log entry {seq} says it replaced entry {k}, which names another key or bytes"
            ));
        }
    }
}

/// `landing verify`: no finding about the log (`log_…`, crates/engine/src/audit/
/// log_check.rs). Other findings are printed, not judged here (the checks above and
/// the checker's own say what the lake must hold).
fn verify_finds_nothing_in_the_log(s: &Soak) {
    let lake = s.w.lake_arg();
    let r = s.w.landing(&["verify", "--lake", &lake, "--json"], &[]);
    if !matches!(r.code, Some(0 | 1)) {
        return s.anomaly(format!("verify exited {:?}: {}", r.code, r.stderr));
    }
    let findings: BTreeSet<(bool, String)> = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let finding = v.get("finding")?.as_str()?.to_owned();
            let text = format!("{} {finding}: {}", v["input_name"], v["detail"]);
            Some((finding.starts_with("log_"), text))
        })
        .collect();
    for (of_log, f) in &findings {
        if *of_log {
            s.anomaly(format!("verify at the quiet end: {f}"));
        } else {
            eprintln!("nemesis: verify at the quiet end (not about the log): {f}");
        }
    }
    if r.code == Some(1) && findings.is_empty() {
        s.anomaly(format!("verify exited 1 with no finding: {}", r.stderr));
    }
}
