//! Unattended nights: a killed or evicted pod recovers within the Job's own retries
//! (the retry schedule and the environment are read from `k8s/`, so the manifests and
//! the timing cannot drift apart), a run stopped inside a write never blocks another,
//! readers' zones hold only published data, waits for a held lease, and a missing
//! inbox. Every wait is bounded by the code under test; where a test waits on time,
//! it is the contract's own clock (a lease's expiry), never a guess at how long
//! something takes. The Job controller's backoff is replayed by counting it, not by
//! sleeping it: nothing a retry does depends on when it starts.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

use crate::inbox::{inbox_arg, inbox_run, put_inbox};
use crate::support::*;

/// Matches the ConfigMap's `LANDING_MATCH` (`progress-*.jsonl` and its `.gz`, `.zst`).
const NAME: &str = "progress-2026-12-01.jsonl";
const RAW: &str = "raw/progress/progress-2026-12-01.jsonl";
const CKPT: &str = "checkpoints/progress/progress-2026-12-01.jsonl.json";
const LOCK: &str = "locks/progress/progress-2026-12-01.jsonl.lock";

// ---------------------------------------------------------------------------------
// The CronJob, as k8s/ declares it.

/// What the replay needs from `k8s/`: the Job's retry budget, the exit codes its
/// podFailurePolicy retries, whether evictions are ignored, and the pod environment.
struct CronJob {
    backoff_limit: u32,
    counted_codes: Vec<i64>,
    ignores_disruption: bool,
    env: Vec<(String, String)>,
}

fn manifests(file: &str) -> Vec<Yaml> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("k8s").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind} in k8s/"))
}

fn cronjob() -> CronJob {
    let cm = manifests("20-configmap.yaml");
    let data = of_kind(&cm, "ConfigMap")["data"]
        .as_hash()
        .expect("ConfigMap data");
    // The pod's LANDING_* settings; the bucket locations are the test world's, and
    // credentials, region and endpoint come from the test server.
    let env = data
        .iter()
        .map(|(k, v)| {
            let v = v.as_str().map_or_else(|| format!("{v:?}"), str::to_owned);
            (k.as_str().expect("a string key").to_owned(), v)
        })
        // The Pushgateway is the cluster's: these pods push nowhere (tests/it/metrics.rs
        // pushes to a real one).
        .filter(|(k, _)| {
            k.starts_with("LANDING_")
                && !["LANDING_INBOX", "LANDING_LAKE", "LANDING_PUSHGATEWAY"].contains(&k.as_str())
        })
        .collect();
    let cj = manifests("30-cronjob.yaml");
    let job = &of_kind(&cj, "CronJob")["spec"]["jobTemplate"]["spec"];
    let rules = job["podFailurePolicy"]["rules"].as_vec().expect("rules");
    let counted_codes = rules
        .iter()
        .filter(|r| r["action"].as_str() == Some("Count"))
        .flat_map(|r| {
            r["onExitCodes"]["values"]
                .as_vec()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|v| v.as_i64())
        .collect();
    let ignores_disruption = rules.iter().any(|r| {
        r["action"].as_str() == Some("Ignore")
            && r["onPodConditions"].as_vec().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"].as_str() == Some("DisruptionTarget"))
            })
    });
    CronJob {
        backoff_limit: job["backoffLimit"].as_i64().expect("backoffLimit") as u32,
        counted_codes,
        ignores_disruption,
        env,
    }
}

/// The Job controller's delay before retry `n` (1-based): 10 s, doubled after each
/// failure, capped at 6 minutes (Kubernetes, "Pod backoff failure policy").
fn job_backoff(n: u32) -> Duration {
    Duration::from_secs((10u64 << (n - 1)).min(360))
}

/// How one pod of the Job runs: a single input, or the inbox as the CronJob does.
#[derive(Debug, Clone, Copy)]
enum Pod {
    Single,
    Inbox,
}

impl CronJob {
    /// The pod's environment in world `w`, plus `extra`. `LANDING_MIN_AGE` is 0: the
    /// tests' inputs are seconds old, and the age filter is not what is replayed.
    fn pod_env(&self, w: &World, pod: Pod, input: &str) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        env.retain(|(k, _)| k != "LANDING_MIN_AGE");
        env.push(("LANDING_MIN_AGE".into(), "0".into()));
        env.push(("LANDING_LAKE".into(), w.lake_arg()));
        // The pod mounts the contracts ConfigMap, a copy of contracts/ (test-infra
        // checks they are equal), where LANDING_CONTRACTS_DIR points.
        for (k, v) in env.iter_mut() {
            if k == "LANDING_CONTRACTS_DIR" {
                *v = concat!(env!("CARGO_MANIFEST_DIR"), "/contracts").to_owned();
            }
        }
        match pod {
            Pod::Single => env.push(("LANDING_INPUT".into(), input.to_owned())),
            Pod::Inbox => env.push(("LANDING_INBOX".into(), inbox_arg(w))),
        }
        env
    }

    /// One pod: `landing run` with the pod's environment (and `extra`).
    fn pod(
        &self,
        w: &World,
        pod: Pod,
        input: &str,
        extra: &[(&str, &str)],
    ) -> std::process::Command {
        let env = self.pod_env(w, pod, input);
        let mut all: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        all.extend_from_slice(extra);
        w.command(&["run"], &all)
    }
}

fn put_day(w: &World, pod: Pod, bytes: &[u8]) -> String {
    match pod {
        Pod::Single => w.put_input(NAME, bytes),
        Pod::Inbox => {
            put_inbox(w, NAME, bytes);
            inbox_arg(w)
        }
    }
}

fn output(cmd: &mut std::process::Command) -> Run {
    Run::from_output(cmd.output().expect("spawn landing"))
}

/// A pod is killed (SIGKILL: an OOM kill, a lost node) mid-stream while replacing the
/// previous night's publish; the Job retries it on its own schedule with the pod's
/// environment. The input is published by a retry, with no human step, and readers
/// see the previous night's bytes until then.
fn replay_killed_pod(kind: Kind, pod: Pod) -> Duration {
    let job = cronjob();
    let w = World::new(kind, &format!("killed-{pod:?}"));
    let (old, new) = (generated(2_000, 61), generated(40_000, 62));
    let input = put_day(&w, pod, &old);
    let first = output(&mut job.pod(&w, pod, &input, &[]));
    assert_eq!(
        first.code,
        Some(0),
        "{pod:?} previous night: {}",
        first.stderr
    );
    let before = w.get(RAW).expect("the previous night's publish");
    put_day(&w, pod, &new);

    let killed = output(&mut job.pod(&w, pod, &input, &[("LANDING_CRASH_AT", "mid-stream")]));
    assert_eq!(killed.signal, Some(9), "{pod:?}: {}", killed.stderr);
    let killed_at = Instant::now();
    assert_eq!(
        w.get(RAW).as_deref(),
        Some(before.as_slice()),
        "{pod:?}: a killed run changed what readers see"
    );
    // The Job controller starts retry n after its backoff. Nothing a retry does
    // depends on that pause (a takeover is timed by the retry's own clock from its
    // first look at the lease), so it is counted, not slept: the time printed is
    // the Job's, backoffs included.
    let mut backoffs = Duration::ZERO;
    for n in 1..=job.backoff_limit {
        backoffs += job_backoff(n);
        let r = output(&mut job.pod(&w, pod, &input, &[]));
        if r.code == Some(0) {
            assert_eq!(
                checkpoint_sha(&w, CKPT).as_deref(),
                Some(sha256(&new).as_str()),
                "{pod:?} retry {n} exited 0 without landing the input:\n{}\n{}",
                r.stdout,
                r.stderr
            );
            assert_eq!(w.get(RAW).unwrap(), expected_publish(&new), "{pod:?}");
            assert!(w.leftovers().is_empty(), "{pod:?}: {:?}", w.leftovers());
            let took = killed_at.elapsed() + backoffs;
            eprintln!("{kind:?} {pod:?}: SIGKILL mid-stream -> published by retry {n}, {took:.1?} after the kill");
            return took;
        }
        let code = i64::from(r.code.unwrap_or(-1));
        assert!(
            job.counted_codes.contains(&code),
            "{pod:?} retry {n} exited {code}, which the Job does not retry:\n{}",
            r.stderr
        );
        assert_eq!(
            w.get(RAW).as_deref(),
            Some(before.as_slice()),
            "{pod:?} retry {n}"
        );
    }
    panic!(
        "{kind:?} {pod:?}: the input was not landed within the Job's {} retries",
        job.backoff_limit
    );
}

fn killed_pod_recovers_within_the_jobs_retries(kind: Kind) {
    // Both pods' retries wait for the same kind of lease expiry: run them side by side.
    std::thread::scope(|s| {
        let single = s.spawn(|| replay_killed_pod(kind, Pod::Single));
        let inbox = s.spawn(|| replay_killed_pod(kind, Pod::Inbox));
        let (a, b) = (single.join(), inbox.join());
        for r in [a, b] {
            if let Err(panic) = r {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// Read `child`'s stderr on a thread until a line contains `marker`; the lines read.
fn stderr_until(child: &mut Child, marker: &str) -> std::sync::mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + HANG_GUARD;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let found = line.contains(marker);
                seen.push(line);
                if found {
                    return rx;
                }
            }
            Err(_) => panic!("no {marker:?} on stderr; it printed:\n{}", seen.join("\n")),
        }
    }
}

/// A pod evicted (SIGTERM: a drain, a preemption) mid-stream stops cleanly, and its
/// replacement, which podFailurePolicy does not count, lands the input at once.
fn evicted_pod_recovers_at_once(kind: Kind) {
    let job = cronjob();
    assert!(
        job.ignores_disruption,
        "the CronJob no longer ignores evictions; this replay assumes it does"
    );
    for pod in [Pod::Single, Pod::Inbox] {
        let w = World::new(kind, &format!("evicted-{pod:?}"));
        let (old, new) = (generated(1_000, 71), generated(20_000, 72));
        let input = put_day(&w, pod, &old);
        assert_eq!(output(&mut job.pod(&w, pod, &input, &[])).code, Some(0));
        let before = w.get(RAW).unwrap();
        put_day(&w, pod, &new);
        let env = job.pod_env(&w, pod, &input);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let run = Paused::start_args(&w, &["run"], "mid-stream", &env);
        run.signal(libc::SIGTERM);
        // Let it go on only once it has taken the signal in (an inbox run twice: the
        // input's run and the inbox, which stops starting inputs); let go earlier, the
        // run may finish its staging and publish before the signal reaches it.
        let mut taken = vec!["interrupted before the publish"];
        if let Pod::Inbox = pod {
            taken.push("no further input is started");
        }
        run.wait_for_lines(&taken);
        let stopped = run.finish();
        assert_eq!(
            stopped.code,
            Some(143),
            "{pod:?}: an evicted run exits 143: {}",
            stopped.stderr
        );
        assert_eq!(
            w.get(RAW).unwrap(),
            before,
            "{pod:?}: an evicted run changed what readers see"
        );
        let r = output(&mut job.pod(&w, pod, &input, &[]));
        assert_eq!(r.code, Some(0), "{pod:?}: {}", r.stderr);
        assert_eq!(
            checkpoint_sha(&w, CKPT).as_deref(),
            Some(sha256(&new).as_str())
        );
        assert!(w.leftovers().is_empty(), "{pod:?}: {:?}", w.leftovers());
    }
}

// ---------------------------------------------------------------------------------
// A holder stopped inside a write.

/// The writes a holder is frozen in (`LANDING_FREEZE_AT`).
const FREEZE_LEASE: &str = "lease-write";
const FREEZE_CHECKPOINT: &str = "checkpoint-write";
const FREEZE_DATA: &str = "promote-data";
const FREEZE_QUARANTINE: &str = "promote-quarantine";

/// Short leases for the frozen-holder runs; the attempt timeout stays below the TTL.
fn short_lease(w: &mut World) -> Duration {
    let pairs: &[(&str, &str)] = if w.is_s3() {
        &SHORT_LEASE
    } else {
        &[("LANDING_LEASE_TTL", "3")]
    };
    w.env.extend(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let ttl = pairs
        .iter()
        .find(|(k, _)| *k == "LANDING_LEASE_TTL")
        .unwrap()
        .1;
    Duration::from_secs(ttl.parse().unwrap())
}

/// A run that another run must get past: it ends by itself, answering 0 (nothing
/// held it) or 75 (busy, or the write it needed was locked). A run blocked by the
/// frozen holder would never end: the watchdog kills it after [`HANG_GUARD`], a bound
/// only a hang reaches, not a measure of speed.
fn other_run_is_not_blocked(w: &World, input: &str, args: &[&str], who: &str) -> Run {
    let lake = w.lake_arg();
    let mut all = vec!["run", "--input", input, "--lake", &lake];
    all.extend_from_slice(args);
    let child = w
        .command(&all, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let r = Run::from_output(wait_or_kill(child, HANG_GUARD, who));
    assert!(
        matches!(r.code, Some(0 | 75)),
        "{who} exited {:?}:\n{}",
        r.code,
        r.stderr
    );
    r
}

/// Stop a holder (SIGSTOP) inside one of its writes. Another run right away, and one
/// more once the frozen run's lease ran out, each finish within a bound (0 or 75).
/// Resumed (SIGCONT) after its deadline, the frozen run writes nothing and exits 75
/// with `conflict:`; a plain run then lands the input.
fn frozen_holder_never_blocks_another(kind: Kind, point: &str) {
    let mut w = World::new(kind, &format!("frozen-{point}"));
    let ttl = short_lease(&mut w);
    w.env
        .push(("LANDING_MAX_REJECTED_LINES".into(), "5".into()));
    let old = generated(500, 81);
    let mut new = generated(5_000, 82);
    new.extend_from_slice(b"{\"not\": \"an event\"}\n");
    let input = w.put_input(NAME, &old);
    assert_eq!(w.run(&input, &[]).code, Some(0));
    w.put_input(NAME, &new);

    let mut frozen = w
        .command(
            &["run", "--input", &input, "--lake", &w.lake_arg()],
            &[("LANDING_FREEZE_AT", point)],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_stopped(&mut frozen, HANG_GUARD);
    let frozen_at = Instant::now();
    let b = other_run_is_not_blocked(&w, &input, &[], "a run while the holder is frozen");
    let c = other_run_is_not_blocked(
        &w,
        &input,
        &["--lease-wait", TAKEOVER_WAIT],
        "a run that waits to take the frozen holder's lease over",
    );
    // The frozen run's deadline is at most one TTL after its last renewal, which was
    // before it froze: past that, its writes must not land.
    if let Some(left) = (frozen_at + ttl).checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
    let before = w.snapshot();
    signal(&frozen, libc::SIGCONT);
    let out = frozen.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "the resumed run:\n{stderr}");
    assert!(
        stderr.contains("conflict"),
        "the resumed run says why:\n{stderr}"
    );
    let changed = changed_keys(&before, &w.snapshot());
    assert!(
        changed.is_empty(),
        "the resumed run changed the lake (b {:?}, c {:?}): {changed:?}\n{stderr}",
        b.code,
        c.code
    );

    let d = w.run(&input, &[]);
    assert_eq!(d.code, Some(0), "{}", d.stderr);
    assert_eq!(
        checkpoint_sha(&w, CKPT).as_deref(),
        Some(sha256(&new).as_str())
    );
    let opts = model::Opts {
        max_rejected_lines: 5,
        ..model::Opts::default()
    };
    assert_eq!(w.get(RAW).unwrap(), expected_publish_with(&new, opts));
    assert_zones_hold_only(&w, &[NAME], &[NAME]);
}

/// A holder stopped (SIGSTOP) mid-stream, before its staging is complete, whose lease
/// another run takes over, lands and releases clean. While it is stopped, an upload
/// it had in flight lands behind that run's sweep: the test writes it at the holder's
/// staging key, as a body sent before the stop completes on the server. Resumed, the
/// holder stops on its lost lease before its next write and removes its own staging,
/// so nothing is left that no later run would sweep (the next holder of a lease
/// released clean does not look).
fn a_resumed_holder_removes_its_late_staging(server: Server) {
    let mut w = World::new(Kind::S3(server), "stopped-late-staging");
    short_lease(&mut w);
    let input = w.put_input(NAME, &generated(500, 91));
    assert_eq!(w.run(&input, &[]).code, Some(0));
    let new = generated(2_000, 92);
    w.put_input(NAME, &new);
    let holder = Paused::start(&w, &input, "mid-stream", &[]);
    let record: Value =
        serde_json::from_slice(&w.get(LOCK).expect("the holder's lease")).expect("a lease record");
    let run_id = record["run_id"].as_str().expect("the holder's run id");
    let late_key = format!("staging/progress/{run_id}/{NAME}");
    holder.signal(libc::SIGSTOP);
    let taker = other_run_is_not_blocked(
        &w,
        &input,
        &["--lease-wait", TAKEOVER_WAIT],
        "a run that takes the stopped holder's lease over",
    );
    assert_eq!(taker.action(), "published", "{}", taker.stderr);
    assert!(w.lease_is_free(LOCK), "the taker released the lease");
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    w.put(&late_key, &expected_publish(&new));

    holder.signal(libc::SIGCONT);
    let r = holder.finish();
    assert_eq!(r.code, Some(75), "the resumed holder:\n{}", r.stderr);
    assert!(r.stderr.contains("conflict"), "{}", r.stderr);
    assert!(
        w.leftovers().is_empty(),
        "the resumed holder left its staging: {:?}\n{}",
        w.leftovers(),
        r.stderr
    );
    assert_eq!(w.get(RAW).unwrap(), expected_publish(&new));
    assert_eq!(
        checkpoint_sha(&w, CKPT).as_deref(),
        Some(sha256(&new).as_str())
    );
}

/// The keys whose bytes or change marker differ between two snapshots, with the
/// markers (never the bytes: they are events), temp files aside.
fn changed_keys(
    before: &std::collections::BTreeMap<String, (Vec<u8>, String)>,
    after: &std::collections::BTreeMap<String, (Vec<u8>, String)>,
) -> Vec<String> {
    // A run's own hidden temp files are no one's data (a sweep removes what is left);
    // the resumed run may remove its own.
    let is_temp = |k: &str| {
        let name = k.rsplit('/').next().unwrap_or(k);
        name.starts_with('.') && name.ends_with(".tmp")
    };
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| !is_temp(k))
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| {
            let marker =
                |m: Option<&(Vec<u8>, String)>| m.map_or("absent".to_owned(), |v| v.1.clone());
            format!("{k}: {} -> {}", marker(before.get(k)), marker(after.get(k)))
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// Readers' zones.

/// `raw/progress/` and `quarantine/progress/` hold exactly these published names,
/// beside the commit log in `raw/progress/_landing_log/`, which holds only entries
/// (`<20 digits>.json`) and its hint `_last`: no guard, temp or lock file.
fn assert_zones_hold_only(w: &World, raw: &[&str], quarantined: &[&str]) {
    let want_raw: BTreeSet<String> = raw.iter().map(|n| format!("progress/{n}")).collect();
    let (log, data): (BTreeSet<String>, BTreeSet<String>) = w
        .zone_files("raw")
        .into_iter()
        .partition(|f| f.starts_with("progress/_landing_log/"));
    for f in &log {
        let name = &f["progress/_landing_log/".len()..];
        let entry = name.len() == 25
            && name.ends_with(".json")
            && name[..20].bytes().all(|b| b.is_ascii_digit());
        assert!(entry || name == "_last", "the log folder holds {f}");
    }
    let want_q: BTreeSet<String> = quarantined
        .iter()
        .map(|n| format!("progress/{n}.rejects.jsonl"))
        .collect();
    assert_eq!(data, want_raw, "raw/ holds only published data");
    assert_eq!(
        w.zone_files("quarantine"),
        want_q,
        "quarantine/ holds only published records"
    );
}

/// After every publish, refusal and skip, the readers' zones hold exactly the
/// published names: no guard, temp or lock file beside them.
fn readers_zones_hold_only_published_names(kind: Kind) {
    let mut w = World::new(kind, "zones");
    w.env
        .push(("LANDING_MAX_REJECTED_LINES".into(), "2".into()));
    let mut a = generated(300, 91);
    a.extend_from_slice(b"not json\n");
    let b = generated(200, 92);
    let ia = w.put_input("a.jsonl", &a);
    let ib = w.put_input("b.jsonl", &b);
    assert_eq!(w.run(&ia, &[]).action(), "published");
    assert_zones_hold_only(&w, &["a.jsonl"], &["a.jsonl"]);
    assert_eq!(w.run(&ib, &[]).action(), "published");
    assert_zones_hold_only(&w, &["a.jsonl", "b.jsonl"], &["a.jsonl"]);
    assert_eq!(w.run(&ia, &[]).action(), "skipped");
    assert_zones_hold_only(&w, &["a.jsonl", "b.jsonl"], &["a.jsonl"]);
    let mut bad = generated(100, 93);
    bad.extend_from_slice(b"x\ny\nz\n");
    w.put_input("b.jsonl", &bad);
    let refused = w.run(&ib, &[]);
    assert_eq!(refused.code, Some(65), "{}", refused.stderr);
    assert_zones_hold_only(&w, &["a.jsonl", "b.jsonl"], &["a.jsonl"]);
    // A republish without rejects removes the quarantine the new checkpoint no longer names.
    w.put_input("a.jsonl", &generated(300, 94));
    assert_eq!(w.run(&ia, &[]).action(), "published");
    assert_zones_hold_only(&w, &["a.jsonl", "b.jsonl"], &[]);
}

/// An earlier version kept its guard files beside published names. `verify` reports
/// them and any other file no checkpoint names; the input's next run removes them.
fn stale_guard_files_are_reported_and_removed(kind: Kind) {
    let w = World::new(kind, "stale-cas");
    let mut day = generated(200, 95);
    day.extend_from_slice(b"not json\n");
    let input = w.put_input(NAME, &day);
    assert_eq!(w.run(&input, &["--max-rejected-lines", "1"]).code, Some(0));
    // The lake as an earlier version left it: guard files beside the destinations,
    // and a released lease that says nothing of its staging (so the next run sweeps).
    let lock = format!("locks/progress/{NAME}.lock");
    let mut lease: serde_json::Value =
        serde_json::from_slice(&w.get(&lock).expect("a released lease")).unwrap();
    assert_eq!(lease["released"], true, "{lease}");
    lease.as_object_mut().unwrap().remove("clean");
    w.put(&lock, lease.to_string().as_bytes());
    w.put(&format!("raw/progress/.{NAME}.cas"), b"");
    w.put(
        &format!("quarantine/progress/.{NAME}.rejects.jsonl.cas"),
        b"",
    );
    w.put("raw/progress/stray.jsonl", b"{}\n");
    let lake = w.lake_arg();
    let v = w.landing(&["verify", "--lake", &lake], &[]);
    assert_eq!(v.code, Some(1), "{}", v.stdout);
    assert!(
        v.stdout.contains(&format!(".{NAME}.cas: leftover")),
        "{}",
        v.stdout
    );
    assert!(
        v.stdout
            .contains(&format!(".{NAME}.rejects.jsonl.cas: leftover")),
        "{}",
        v.stdout
    );
    assert!(v.stdout.contains("stray.jsonl: unnamed"), "{}", v.stdout);
    assert_eq!(
        v.stdout.matches(": leftover").count() + v.stdout.matches(": unnamed").count(),
        3
    );
    // The next run of the input (a skip: it sweeps before it decides) removes them.
    assert_eq!(
        w.run(&input, &["--max-rejected-lines", "1"]).action(),
        "skipped"
    );
    let v = w.landing(&["verify", "--lake", &lake], &[]);
    assert_eq!(v.code, Some(1), "{}", v.stdout);
    assert!(!v.stdout.contains("leftover"), "{}", v.stdout);
    w.delete("raw/progress/stray.jsonl");
    let v = w.landing(&["verify", "--lake", &lake], &[]);
    assert_eq!(v.code, Some(0), "{}", v.stdout);
    assert_zones_hold_only(&w, &[NAME], &[NAME]);
}

/// `status` lists a killed run's incomplete multipart upload under the staging prefix.
fn status_lists_incomplete_uploads(server: Server) {
    let w = World::new(Kind::S3(server), "uploads");
    let (rt, client, bucket) = w.s3_parts().unwrap();
    let key = format!("{LAKE_PREFIX}/staging/progress/20260101T000000Z-0a1b2c3d/a.jsonl");
    let upload = rt
        .block_on(
            client
                .create_multipart_upload()
                .bucket(bucket)
                .key(&key)
                .send(),
        )
        .expect("create upload");
    let lake = w.lake_arg();
    let s = w.landing(&["status", "--lake", &lake, "--json"], &[]);
    assert_eq!(s.code, Some(0), "{}", s.stderr);
    let v: Value = serde_json::from_str(s.stdout.trim()).expect("status JSON");
    let left: Vec<&str> = v["leftovers"]
        .as_array()
        .expect("leftovers")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        left.iter()
            .any(|l| l.contains(&key) && l.contains("incomplete multipart upload")),
        "{left:?}"
    );
    rt.block_on(
        client
            .abort_multipart_upload()
            .bucket(bucket)
            .key(&key)
            .upload_id(upload.upload_id().unwrap())
            .send(),
    )
    .expect("abort");
    let s = w.landing(&["status", "--lake", &lake, "--json"], &[]);
    let v: Value = serde_json::from_str(s.stdout.trim()).expect("status JSON");
    assert_eq!(v["leftovers"], serde_json::json!([]), "{}", s.stdout);
}

// ---------------------------------------------------------------------------------
// Waiting for a lease.

/// A live lease of another host, expiring `in_secs` from now.
fn foreign_lease(in_secs: i64) -> Vec<u8> {
    let fmt = time::format_description::well_known::Rfc3339;
    let expires = (time::OffsetDateTime::now_utc() + time::Duration::seconds(in_secs))
        .format(&fmt)
        .unwrap();
    serde_json::json!({
        "run_id": "other-run", "host": "elsewhere", "pid": 1, "boot_id": "another-machine",
        "pid_ns": "pid:[1]", "acquired_at": "2026-01-01T00:00:00Z", "expires_at": expires,
        "ttl_ms": in_secs * 1000,
    })
    .to_string()
    .into_bytes()
}

/// A margin of 2 s on S3 (the attempt timeout): a held record is taken over once it
/// stayed unchanged for its TTL plus this, by the waiting run's clock.
fn short_margin(w: &mut World) {
    w.env
        .push(("LANDING_S3_ATTEMPT_TIMEOUT".into(), "2".into()));
}

/// A run of `input` with `--lease-wait wait`, spawned, once it said it waits for the
/// lease another run holds; with the rest of its stderr, which must stay read while
/// it runs.
fn spawn_waiting(w: &World, input: &str, wait: &str) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = w
        .command(
            &[
                "run",
                "--input",
                input,
                "--lake",
                &w.lake_arg(),
                "--lease-wait",
                wait,
            ],
            &[],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let rest = stderr_until(&mut child, "waiting for it");
    (child, rest)
}

/// With `--lease-wait`, a run that finds the lease held waits, touching nothing, and
/// lands the input once the lease is free: released by its holder (the test releases
/// it only after the run said it waits), or taken over once the holder's record
/// stayed unchanged for its TTL (3 s) plus the margin (the lease's unit tests prove
/// that rule on a controlled clock). Without it, or past it, the run answers busy.
fn a_run_waits_for_a_held_lease(kind: Kind) {
    let mut w = World::new(kind, "lease-wait");
    short_margin(&mut w);
    let input = w.put_input(NAME, &generated(300, 101));
    let held = foreign_lease(3600);
    w.put(LOCK, &held);
    let (child, _rest) = spawn_waiting(&w, &input, "60");
    // Waiting: the holder's record is as it wrote it, and nothing is published.
    assert_eq!(
        w.get(LOCK).unwrap(),
        held,
        "a waiting run must not touch the lease"
    );
    assert!(w.get(RAW).is_none(), "published while the lease was held");
    let mut released: Value = serde_json::from_slice(&held).unwrap();
    released["released"] = Value::Bool(true);
    w.put(LOCK, released.to_string().as_bytes());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0));
    let summary: Value = serde_json::from_slice(&out.stdout).expect("a summary");
    assert_eq!(summary["action"], "published");
    let lock: Value = serde_json::from_slice(&w.get(LOCK).unwrap()).unwrap();
    assert_eq!(
        lock["run_id"], summary["run_id"],
        "the lease is the run's now"
    );
    assert!(w.get(RAW).is_some());

    // A holder that stops renewing: its record, unchanged past its TTL, is taken over.
    let mut w = World::new(kind, "lease-wait-stale");
    short_margin(&mut w);
    let input = w.put_input(NAME, &generated(300, 104));
    w.put(LOCK, &foreign_lease(3));
    let r = w.run(&input, &["--lease-wait", "60"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.action(), "published");
    let lock: Value = serde_json::from_slice(&w.get(LOCK).unwrap()).unwrap();
    assert_ne!(
        lock["run_id"], "other-run",
        "the stale lease was not taken over"
    );

    let w = World::new(kind, "lease-wait-busy");
    let input = w.put_input(NAME, &generated(300, 102));
    let held = foreign_lease(3600);
    w.put(LOCK, &held);
    let r = w.run(&input, &["--lease-wait", "2"]);
    assert_eq!(r.code, Some(75), "{}", r.stderr);
    // It waited (it said so) and then answered busy, naming the holder.
    assert!(r.stderr.contains("waiting for it"), "{}", r.stderr);
    assert!(r.stderr.contains("other-run"), "{}", r.stderr);
    assert_eq!(
        w.get(LOCK).unwrap(),
        held,
        "a waiting run must not touch the lease"
    );
    assert!(w.get(RAW).is_none());
}

/// SIGTERM stops a run waiting for a lease: it exits 143, having written nothing.
fn sigterm_stops_a_lease_wait(kind: Kind) {
    let w = World::new(kind, "lease-wait-term");
    let input = w.put_input(NAME, &generated(300, 103));
    let held = foreign_lease(3600);
    w.put(LOCK, &held);
    let (child, _lines) = spawn_waiting(&w, &input, "600");
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(143));
    let summary: Value = serde_json::from_slice(&out.stdout).expect("a summary");
    assert_eq!(summary["action"], "interrupted");
    assert_eq!(w.get(LOCK).unwrap(), held);
    assert!(w.get(RAW).is_none() && w.get(CKPT).is_none());
}

/// An inbox run lands the free inputs first, then waits for the busy one's lease.
fn an_inbox_lands_free_inputs_before_waiting(kind: Kind) {
    let mut w = World::new(kind, "inbox-wait");
    short_margin(&mut w);
    put_inbox(&w, "a.jsonl", &generated(200, 104));
    put_inbox(&w, "b.jsonl", &generated(200, 105));
    w.put("locks/progress/a.jsonl.lock", &foreign_lease(3));
    let r = inbox_run(&w, &["--lease-wait", "60"], &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(
        (r.action("a.jsonl"), r.action("b.jsonl")),
        ("published", "published"),
        "{}",
        r.ctx()
    );
    let order: Vec<&str> = r
        .run
        .stdout
        .lines()
        .filter_map(|l| l.split("\"input\":\"").nth(1))
        .collect();
    assert!(
        order.len() == 2 && order[0].contains("b.jsonl") && order[1].contains("a.jsonl"),
        "b (free) lands before a (busy): {}",
        r.ctx()
    );
}

// ---------------------------------------------------------------------------------
// A missing inbox.

/// A missing inbox folder or bucket is a usage error (exit 2) that names it; an empty
/// one is a night with nothing to land (exit 0).
fn a_missing_inbox_is_a_usage_error(kind: Kind) {
    let w = World::new(kind, "missing-inbox");
    let missing = match w.s3_parts() {
        None => w.tmp.path().join("no-such-inbox").display().to_string(),
        Some(_) => format!(
            "s3://{}/inbox/",
            crate::support::servers::unique_bucket("no-such-bucket")
        ),
    };
    let lake = w.lake_arg();
    let r = w.landing(&["run", "--inbox", &missing, "--lake", &lake], &[]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let shown = missing.trim_end_matches('/');
    assert!(
        r.stderr.contains(shown),
        "the message names {shown}:\n{}",
        r.stderr
    );

    if !w.is_s3() {
        std::fs::create_dir_all(w.tmp.path().join("inbox")).unwrap();
    }
    let r = inbox_run(&w, &[], &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(r.totals["totals"]["inputs"], 0, "{}", r.ctx());
}

matrix! {
    killed_pod_recovers_within_the_jobs_retries: [local, seaweed, moto, localstack];
    evicted_pod_recovers_at_once: [local, seaweed, moto, localstack];
    frozen_in_lease_write: [local, seaweed, moto, localstack] => frozen_holder_never_blocks_another(FREEZE_LEASE);
    frozen_in_checkpoint_write: [local, seaweed, moto, localstack] => frozen_holder_never_blocks_another(FREEZE_CHECKPOINT);
    frozen_in_data_promote: [local, seaweed, moto, localstack] => frozen_holder_never_blocks_another(FREEZE_DATA);
    frozen_in_quarantine_promote: [local, seaweed, moto, localstack] => frozen_holder_never_blocks_another(FREEZE_QUARANTINE);
    readers_zones_hold_only_published_names: [local, seaweed, moto, localstack];
    stale_guard_files_are_reported_and_removed: [local];
    s3 status_lists_incomplete_uploads: [seaweed, moto, localstack];
    s3 a_resumed_holder_removes_its_late_staging: [seaweed, moto, localstack];
    a_run_waits_for_a_held_lease: [local, seaweed, moto, localstack];
    sigterm_stops_a_lease_wait: [local, seaweed, moto, localstack];
    an_inbox_lands_free_inputs_before_waiting: [local, seaweed, moto, localstack];
    a_missing_inbox_is_a_usage_error: [local, seaweed, moto, localstack];
}
