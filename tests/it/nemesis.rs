//! Nemesis: the run contract under combined faults for minutes at a time.
//!
//! A soak per backend. Three workers start runs one after another over an inbox of
//! `INPUTS` inputs: whole-inbox runs, shard runs (`--shard i/3`) and single-input
//! runs, each with or without a lease wait, 30% of them with a wall clock an hour
//! ahead or behind (libfaketime), and on S3 half of them through a fault proxy. A
//! producer rewrites a random input with new content every 1 to 4 s. A nemesis, every
//! 0.5 to 2 s, does one of: SIGKILL a run; SIGSTOP one for longer than a TTL plus the
//! margin, then SIGCONT it; and on S3, one store fault on the next matching request
//! through the proxy (a 1.5 s delay, a body cut mid-way, 500, 503, an answer lost
//! after the server applied the request), a 2 s outage in which every connection
//! through the proxy is reset, or (SeaweedFS, at most every 30 s) a restart of the
//! server itself: SIGUSR1 to `scripts/test-servers`, which stops it with SIGTERM and
//! starts it again on the same ports and data. moto and LocalStack keep their data in
//! memory, so a restart would lose the lake: there only the outage stands for one. A
//! reader polls every
//! published object throughout: each one it reads must be the reference model's
//! output for some version of its input, whole. A feed reader follows the commit log
//! as a downstream job does (`feed.rs`): `landing feed --since <cursor>` every half
//! second, its cursor moving only to the printed one; the entries it reads must be
//! numbered cursor+1, +2, … (never back, repeated or skipped), each naming one of the
//! inputs at its raw key with the model's publish (`published_sha256`) of a version
//! the producer stored (`input_sha256`), and an entry whose object still has its
//! version (size, ETag or the local version fields) must hash to that publish.
//!
//! Then everything stops (frozen runs are resumed and every run is waited for), two
//! quiet inbox runs land what is left, and the checker asks: each input's raw object
//! is the model's output of its latest content and its checkpoint names that content;
//! every lease is released; no staging object or multipart upload is left; every run
//! that said what it did (a summary line, any action but busy) left its run record,
//! unless it said the record's write failed. The commit log: the feed reader's last
//! pass reaches the log's end; the store holds entries 1..=n without a gap, as `feed
//! --since 0` prints them; each input's latest entry names its raw object's current
//! version and the model's publish of its latest content; every `published` summary
//! a run printed names (`log_sequence`) the entry its run wrote for that input and
//! content, every `skipped` one an entry of that input and content; no run has two
//! entries for one input; a `replaced.sequence` names an earlier entry of the same
//! key and bytes; `landing verify` has no `log_…` finding. Runs exit 0, 75, by the
//! nemesis's SIGKILL, or 1 only where a fault can explain it (through the proxy; during a restart, until
//! the server takes a write again and 30 s more; or reading an input the producer
//! rewrote under it); anything else is an anomaly, which names each failed input's
//! error. The reader's and the producer's
//! own requests, and the feed reader's, may fail only while the server restarts.
//!
//! `LANDING_NEMESIS_MINUTES` sets the soak's length (default 3), `LANDING_TEST_SEED`
//! its seed (printed; it replays the same choices, not the same timing).
//! `scripts/nemesis` runs it alone. Each soak prints its operations, faults by kind,
//! reads, feed entries checked and anomalies.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::proxy::{Fault, Match, Op, Proxy, Rule, RuleId};
use crate::support::*;

mod feed;

/// Inputs in the inbox, and lines in each version of one.
const INPUTS: usize = 12;
const LINES: u64 = 20_000;
/// Runs started at once.
const WORKERS: usize = 3;
/// Shards of a shard run.
const SHARDS: usize = 3;
/// A run alive longer than this is hung: killed, and an anomaly.
const HUNG: Duration = Duration::from_secs(300);

fn name(i: usize) -> String {
    format!("n{i:02}.jsonl")
}

/// A seeded generator (splitmix64): the soak's choices replay from its seed.
struct Rng(AtomicU64);

impl Rng {
    fn next(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn millis(&self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo))
    }
}

/// One version of an input: the stored bytes' hash, the model's publish of them and
/// that publish's hash.
struct Version {
    sha: String,
    output: Vec<u8>,
    output_sha: String,
}

/// A run in flight, for the nemesis to pick.
struct Live {
    started: Instant,
    frozen_until: Option<Instant>,
    /// Stopped at least once for longer than a lease lives.
    was_frozen: bool,
}

/// What a finished run said and how it ended.
struct Ended {
    op: String,
    via_proxy: bool,
    started: Instant,
    ended: Instant,
    /// The nemesis froze it past its lease's life at least once.
    was_frozen: bool,
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

#[derive(Default)]
struct Tally {
    ops: BTreeMap<String, u64>,
    exits: BTreeMap<String, u64>,
    faults: BTreeMap<String, u64>,
    reads: u64,
    /// Log entries the feed reader read and judged.
    feed_entries: u64,
    /// Of those, the entries whose object still had their version when read: its
    /// bytes were hashed against the entry.
    feed_hashed: u64,
    /// The log's end at the quiet end.
    log_end: u64,
    anomalies: Vec<String>,
}

struct Soak<'w> {
    w: &'w World,
    rng: Rng,
    versions: Mutex<Vec<Vec<Version>>>,
    live: Mutex<BTreeMap<u32, Live>>,
    tally: Mutex<Tally>,
    ended: Mutex<Vec<Ended>>,
    stop: AtomicBool,
    proxy: Option<Proxy>,
    outage: Arc<AtomicBool>,
    ttl_and_margin: Duration,
    /// `scripts/test-servers`' pid, to restart SeaweedFS (`None` elsewhere).
    restarter: Option<u32>,
    /// Each server restart: from the signal until the server answered again.
    restarts: Mutex<Vec<(Instant, Instant)>>,
}

impl Soak<'_> {
    fn count(&self, map: fn(&mut Tally) -> &mut BTreeMap<String, u64>, key: &str) {
        let mut t = self.tally.lock().unwrap();
        *map(&mut t).entry(key.to_owned()).or_default() += 1;
    }

    fn anomaly(&self, what: String) {
        eprintln!("nemesis anomaly: {what}");
        self.tally.lock().unwrap().anomalies.push(what);
    }

    /// Store a new version of input `i`: recorded before it is visible, so the reader
    /// never meets a publish of a version it does not know.
    fn put_version(&self, i: usize, seed: u64) {
        let content = generated(LINES, seed);
        let output = expected_publish(&content);
        let v = Version {
            sha: sha256(&content),
            output_sha: sha256(&output),
            output,
        };
        let mut versions = self.versions.lock().unwrap();
        versions[i].push(v);
        // Until it lands: the store may be restarting (bounded, so a store that never
        // comes back fails the soak).
        let until = Instant::now() + Duration::from_secs(120);
        while let Err(e) = put_atomically(self.w, &name(i), &content) {
            assert!(
                Instant::now() < until,
                "putting {} for two minutes: {e}",
                name(i)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Did a server restart overlap `from..=to` (widened by the SDK's retries and a
    /// restarted server's first slow answers)?
    fn restarting(&self, from: Instant, to: Instant) -> bool {
        let slack = Duration::from_secs(30);
        self.restarts
            .lock()
            .unwrap()
            .iter()
            .any(|(a, b)| *a <= to && from <= *b + slack)
    }

    /// Is a restart under way now (signalled, not yet answering)?
    fn restart_in_progress(&self) -> bool {
        let now = Instant::now();
        self.restarting(now, now)
    }
}

/// An inbox file replaced whole: S3's PutObject is atomic; on a local inbox a temp
/// file renamed over the name, as a producer that closes its files does.
fn put_atomically(w: &World, name: &str, bytes: &[u8]) -> Result<(), String> {
    if let Some((rt, client, bucket)) = w.s3_parts() {
        let body = aws_sdk_s3::primitives::ByteStream::from(bytes.to_vec());
        let put = client
            .put_object()
            .bucket(bucket)
            .key(format!("inbox/{name}"));
        return rt
            .block_on(put.body(body).send())
            .map(drop)
            .map_err(|e| aws_sdk_s3::error::DisplayErrorContext(&e).to_string());
    }
    let dir = w.tmp.path().join("inbox");
    std::fs::create_dir_all(&dir).unwrap();
    let tmp = dir.join(format!(".{name}.part"));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
    Ok(())
}

fn inbox(w: &World) -> String {
    match w.s3_parts() {
        None => w.tmp.path().join("inbox").display().to_string(),
        Some((_, _, bucket)) => format!("s3://{bucket}/inbox/"),
    }
}

/// A worker: runs until the soak stops, one run at a time.
fn worker(s: &Soak) {
    while !s.stopping() {
        let (op, mut args) = match s.rng.below(100) {
            0..40 => ("inbox".to_owned(), vec!["--inbox".to_owned(), inbox(s.w)]),
            40..65 => {
                let i = s.rng.below(SHARDS as u64);
                let shard = format!("{i}/{SHARDS}");
                (
                    "shard".to_owned(),
                    vec!["--inbox".into(), inbox(s.w), "--shard".into(), shard],
                )
            }
            _ => {
                let i = s.rng.below(INPUTS as u64) as usize;
                let input = match s.w.s3_parts() {
                    None => {
                        s.w.tmp
                            .path()
                            .join("inbox")
                            .join(name(i))
                            .display()
                            .to_string()
                    }
                    Some((_, _, bucket)) => format!("s3://{bucket}/inbox/{}", name(i)),
                };
                ("single".to_owned(), vec!["--input".into(), input])
            }
        };
        args.extend(["--lake".into(), s.w.lake_arg()]);
        if s.rng.chance(50) {
            args.extend(["--lease-wait".into(), TAKEOVER_WAIT.into()]);
        }
        let mut env: Vec<(String, String)> = vec![("LANDING_LOG_LEVEL".into(), "warn".into())];
        let mut label = op.clone();
        if s.rng.chance(30) {
            let offset = if s.rng.chance(50) { "+1h" } else { "-1h" };
            env.extend(skewed_clock(offset).map(|(k, v)| (k.to_owned(), v.to_owned())));
            label.push_str(&format!(" clock{offset}"));
        }
        let via_proxy = s.proxy.is_some() && s.rng.chance(50);
        if let (true, Some(p)) = (via_proxy, &s.proxy) {
            env.push(("AWS_ENDPOINT_URL".into(), p.url()));
            label.push_str(" via-proxy");
        }
        s.count(|t| &mut t.ops, &label);
        run_one(s, &op, &args, &env, via_proxy);
    }
}

/// Start one run, let the nemesis see it, and collect how it ended.
fn run_one(s: &Soak, op: &str, args: &[String], env: &[(String, String)], via_proxy: bool) {
    let mut all: Vec<&str> = vec!["run"];
    all.extend(args.iter().map(String::as_str));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut child =
        s.w.command(&all, &env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn landing");
    let pid = child.id();
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let started = Instant::now();
    s.live.lock().unwrap().insert(
        pid,
        Live {
            started,
            frozen_until: None,
            was_frozen: false,
        },
    );
    wait_exited(pid);
    // Exited, not yet reaped: the nemesis, which signals only pids in `live` while it
    // holds the lock, can no longer reach a pid that another process reuses.
    let was_frozen = s
        .live
        .lock()
        .unwrap()
        .remove(&pid)
        .is_some_and(|l| l.was_frozen);
    let status = child.wait().expect("reap the run");
    s.ended.lock().unwrap().push(Ended {
        op: op.to_owned(),
        via_proxy,
        started,
        ended: Instant::now(),
        was_frozen,
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    });
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

/// Block until child `pid` has exited, leaving it unreaped (`waitid` with `WNOWAIT`);
/// a stop (SIGSTOP) does not end the wait.
fn wait_exited(pid: u32) {
    loop {
        // SAFETY: waitid on our own child, into a zeroed siginfo_t we own.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "waitid: {e}");
    }
}

fn signal_pid(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a child of this test that is in `live`, so not yet reaped.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// The nemesis: one fault every 0.5 to 2 s until the soak stops; it resumes frozen
/// runs when their time is up, and kills hung ones.
fn nemesis(s: &Soak, rules: &[(String, Rule)]) -> Vec<(String, RuleId)> {
    let mut armed = Vec::new();
    while !s.stopping() {
        std::thread::sleep(s.rng.millis(500, 2000));
        thaw_and_watch(s, false);
        let pick = s.rng.below(if s.proxy.is_some() { 100 } else { 60 });
        match pick {
            0..30 => {
                if let Some(pid) = pick_live(s) {
                    signal_pid(pid, libc::SIGKILL);
                    s.count(|t| &mut t.faults, "SIGKILL");
                }
            }
            30..60 => {
                let mut live = s.live.lock().unwrap();
                let ready: Vec<u32> = live
                    .iter()
                    .filter(|(_, l)| l.frozen_until.is_none())
                    .map(|(p, _)| *p)
                    .collect();
                if let Some(&pid) = ready.get(s.rng.below(ready.len() as u64) as usize) {
                    signal_pid(pid, libc::SIGSTOP);
                    let frozen = s.ttl_and_margin + s.rng.millis(1000, 3000);
                    let l = live.get_mut(&pid).unwrap();
                    l.frozen_until = Some(Instant::now() + frozen);
                    l.was_frozen = true;
                    drop(live);
                    s.count(|t| &mut t.faults, "SIGSTOP longer than a TTL");
                }
            }
            60..90 => {
                let Some(proxy) = &s.proxy else { continue };
                let (kind, rule) = &rules[s.rng.below(rules.len() as u64) as usize];
                armed.push((kind.clone(), proxy.arm(rule.clone())));
            }
            _ if s.rng.chance(50) && restart_server(s) => {}
            _ => {
                s.outage.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_secs(2));
                s.outage.store(false, Ordering::SeqCst);
                s.count(|t| &mut t.faults, "store unreachable for 2 s");
            }
        }
    }
    armed
}

/// Restart SeaweedFS (at most every 30 s) and wait until it answers again; false
/// where there is nothing to restart, or too soon after the last one.
fn restart_server(s: &Soak) -> bool {
    let Some(pid) = s.restarter else { return false };
    let last = s.restarts.lock().unwrap().last().map(|(_, b)| *b);
    if last.is_some_and(|b| b.elapsed() < Duration::from_secs(30)) {
        return false;
    }
    let from = Instant::now();
    // The window is open until the server answers; recorded first, so the reader
    // already knows why its reads fail.
    s.restarts
        .lock()
        .unwrap()
        .push((from, from + Duration::from_secs(3600)));
    signal_pid(pid, libc::SIGUSR1);
    let until = from + Duration::from_secs(180);
    // Over once the server takes a write again (its S3 port can answer reads before
    // its volumes take writes): a small object outside the lake.
    while put_probe(s.w).is_err() || from.elapsed() < Duration::from_secs(1) {
        assert!(
            Instant::now() < until,
            "SeaweedFS did not answer 3 minutes after a restart"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    s.restarts.lock().unwrap().last_mut().unwrap().1 = Instant::now();
    s.count(|t| &mut t.faults, "SeaweedFS restarted");
    true
}

fn pick_live(s: &Soak) -> Option<u32> {
    let live = s.live.lock().unwrap();
    let pids: Vec<u32> = live.keys().copied().collect();
    pids.get(s.rng.below(pids.len() as u64) as usize).copied()
}

/// Resume frozen runs whose time is up (all of them with `all`); kill hung ones.
fn thaw_and_watch(s: &Soak, all: bool) {
    let now = Instant::now();
    let mut live = s.live.lock().unwrap();
    for (pid, l) in live.iter_mut() {
        if l.frozen_until.is_some_and(|t| all || t <= now) {
            signal_pid(*pid, libc::SIGCONT);
            l.frozen_until = None;
        }
        if now.duration_since(l.started) > HUNG {
            signal_pid(*pid, libc::SIGKILL);
            // Reported once: the kill ends it.
            l.started = now;
            s.tally
                .lock()
                .unwrap()
                .anomalies
                .push(format!("run {pid} was still running after {HUNG:?}: hung"));
        }
    }
}

/// A small PutObject outside the lake: does the server take writes?
fn put_probe(w: &World) -> Result<(), String> {
    let (rt, client, bucket) = w.s3_parts().expect("an S3 world");
    let body = aws_sdk_s3::primitives::ByteStream::from_static(b"probe");
    let put = client
        .put_object()
        .bucket(bucket)
        .key("nemesis-probe")
        .body(body);
    rt.block_on(put.send())
        .map(drop)
        .map_err(|e| aws_sdk_s3::error::DisplayErrorContext(&e).to_string())
}

/// The producer: a new version of a random input every 1 to 4 s.
fn producer(s: &Soak, seed: u64) {
    let mut n = 0u64;
    while !s.stopping() {
        std::thread::sleep(s.rng.millis(1000, 4000));
        let i = s.rng.below(INPUTS as u64) as usize;
        n += 1;
        s.put_version(i, seed ^ (n << 20) ^ i as u64);
        s.count(|t| &mut t.faults, "input rewritten");
    }
}

/// The reader: every published object, over and over; each must be the model's
/// output of some version of its input.
fn reader(s: &Soak) {
    while !s.stopping() {
        for i in 0..INPUTS {
            let key = format!("raw/progress/{}", name(i));
            let read = s.w.try_get(&key);
            let bytes = match read {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(_) if s.restart_in_progress() => {
                    s.count(|t| &mut t.faults, "reader refused during a restart");
                    continue;
                }
                Err(e) => {
                    s.anomaly(format!("the reader could not read {key}: {e}"));
                    continue;
                }
            };
            s.tally.lock().unwrap().reads += 1;
            let versions = s.versions.lock().unwrap();
            if !versions[i].iter().any(|v| v.output == bytes) {
                drop(versions);
                s.anomaly(format!(
                    "{key}: {} bytes that are no version's publish (versions: {})",
                    bytes.len(),
                    s.versions.lock().unwrap()[i].len()
                ));
            }
        }
    }
}

/// The store faults the nemesis arms, one at a time, on the next matching request.
fn fault_rules() -> Vec<(String, Rule)> {
    vec![
        (
            "delay 1.5 s".into(),
            Rule::new(Match::default(), Fault::Delay { ms: 1500 }),
        ),
        (
            "body cut mid-way (GET)".into(),
            Rule::new(Match::op(Op::GetObject), Fault::CutBody { after: 4096 }),
        ),
        (
            "500 InternalError".into(),
            Rule::new(Match::default(), Fault::InternalError),
        ),
        (
            "503 SlowDown".into(),
            Rule::new(Match::default(), Fault::SlowDown),
        ),
        (
            "answer lost after a PUT applied".into(),
            Rule::new(Match::op(Op::PutObject), Fault::ResetAfterForward),
        ),
        (
            "answer lost after a copy applied".into(),
            Rule::new(Match::op(Op::CopyObject), Fault::ResetAfterForward),
        ),
    ]
}

/// Judge every run that ended: its exit and, when it said what it did, its records.
/// Returns the publishes and skips the runs printed, for the log's checks.
fn judge_runs(s: &Soak) -> Vec<feed::Said> {
    let ended = std::mem::take(&mut *s.ended.lock().unwrap());
    let mut said = Vec::new();
    for e in &ended {
        said.extend(feed::summaries(&e.op, &e.stdout));
        let exit = match (e.status.code(), e.status.signal()) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(sig)) => format!("signal {sig}"),
            _ => "unknown".into(),
        };
        s.count(|t| &mut t.exits, &exit);
        let last = failure_of(e);
        match (e.status.code(), e.status.signal()) {
            (Some(0 | 75), _) | (None, Some(libc::SIGKILL)) => {}
            (Some(1), _) if e.via_proxy || s.restarting(e.started, e.ended) => {}
            (Some(1), _) if only_input_reads_failed(e) => {}
            _ => s.anomaly(format!("{} run ended {exit}: {last}", e.op)),
        }
        run_records_present(s, e);
    }
    said
}

/// Why a run failed, for the anomaly: the errors of its failed inbox lines (stdout),
/// else the last error its log gave (stderr); at most 600 characters.
fn failure_of(e: &Ended) -> String {
    let failed: Vec<String> = e
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["action"] == "failed")
        .map(|v| format!("{}: {}", v["input"], v["error"]))
        .collect();
    let text = if failed.is_empty() {
        let last = e.stderr.lines().rev().find(|l| l.contains("error"));
        last.unwrap_or("(no error on stdout or stderr)").to_owned()
    } else {
        failed.join(" | ")
    };
    text.chars().take(600).collect()
}

/// Did the run fail only reading its inputs (steps `hash` and `stream`)? The producer
/// rewrites inputs mid-soak, as a producer that breaks the "closed files" rule does,
/// and SeaweedFS may drop an overwritten object's data under a GET still streaming
/// it: the run fails, naming the input and the step, and a later run lands the new
/// version. A failure at any other step is an anomaly.
fn only_input_reads_failed(e: &Ended) -> bool {
    let read = |t: &str| t.contains("failed at step stream") || t.contains("failed at step hash");
    let failed: Vec<String> = e
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["action"] == "failed")
        .map(|v| v["error"].to_string())
        .collect();
    if failed.is_empty() {
        return read(&e.stderr);
    }
    failed.iter().all(|f| read(f))
}

/// Each summary line of a run (any action but busy) names a run record in the lake.
/// A record may be missing only where a fault this soak injected can stop its write
/// (the run went through the faulty proxy, overlapped a server restart, or was frozen
/// past its lease, so its gate refuses the write), and then the run must have said so
/// on stderr: the run's word alone never excuses a missing record.
fn run_records_present(s: &Soak, e: &Ended) {
    let faulted = e.via_proxy || e.was_frozen || s.restarting(e.started, e.ended);
    let said = e.stderr.contains("could not write the run record")
        || e.stderr.contains("no run record written");
    for line in e.stdout.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(run_id), Some(action), Some(input)) = (
            v["run_id"].as_str(),
            v["action"].as_str(),
            v["input"].as_str(),
        ) else {
            continue;
        };
        if action == "busy" {
            continue;
        }
        let file = input.rsplit('/').next().unwrap_or(input);
        let key = format!("runs/progress/{file}/{run_id}.json");
        if s.w.get(&key).is_some() {
            continue;
        }
        let why = match (faulted, said) {
            (true, true) => continue,
            (false, _) => "though no injected fault could stop its write",
            (true, false) => "and did not say its write failed",
        };
        s.anomaly(format!(
            "{} run {run_id} ({action}) left no run record {key}, {why}",
            e.op
        ));
    }
}

/// The quiet end: two inbox runs with no fault, then the lake and its commit log
/// against the model (`cursor`: the feed reader's; `said`: the runs' summaries).
fn check_quiet_end(s: &Soak, cursor: u64, mut said: Vec<feed::Said>) {
    let lake = s.w.lake_arg();
    let inbox = inbox(s.w);
    for pass in ["first", "second"] {
        let r = s.w.landing(
            &[
                "run",
                "--inbox",
                &inbox,
                "--lake",
                &lake,
                "--lease-wait",
                TAKEOVER_WAIT,
            ],
            &[],
        );
        if r.code != Some(0) {
            s.anomaly(format!(
                "the {pass} quiet run exited {:?}: {}",
                r.code, r.stderr
            ));
        }
        said.extend(feed::summaries(&format!("{pass} quiet"), &r.stdout));
    }
    let versions = s.versions.lock().unwrap();
    for (i, v) in versions.iter().enumerate() {
        let latest = v.last().expect("a version");
        let n = name(i);
        if s.w.get(&format!("raw/progress/{n}")).as_deref() != Some(latest.output.as_slice()) {
            s.anomaly(format!(
                "{n}: the raw object is not the model's publish of its latest content"
            ));
        }
        let ckpt = checkpoint_sha(s.w, &format!("checkpoints/progress/{n}.json"));
        if ckpt.as_deref() != Some(latest.sha.as_str()) {
            s.anomaly(format!(
                "{n}: the checkpoint names {ckpt:?}, not its latest content"
            ));
        }
        if !s.w.lease_is_free(&format!("locks/progress/{n}.lock")) {
            s.anomaly(format!("{n}: its lease is still held after the quiet runs"));
        }
    }
    drop(versions);
    let leftovers = s.w.leftovers();
    if !leftovers.is_empty() {
        s.anomaly(format!(
            "left in staging after the quiet runs: {leftovers:?}"
        ));
    }
    feed::check_log_at_quiet_end(s, cursor, &said);
}

/// The soak's length in minutes: `LANDING_NEMESIS_MINUTES`, 3 unless set.
fn soak_minutes() -> f64 {
    std::env::var("LANDING_NEMESIS_MINUTES")
        .ok()
        .map(|m| {
            m.parse()
                .expect("LANDING_NEMESIS_MINUTES: a number of minutes")
        })
        .unwrap_or(3.0)
}

/// On S3, a fault proxy before the server with one standing rule: reset every
/// connection while `outage` is set, so the nemesis can cut the store off at will.
fn outage_proxy(w: &World, outage: &Arc<AtomicBool>) -> Option<Proxy> {
    w.server().map(|server| {
        let p = Proxy::start(&server.endpoint());
        let down = outage.clone();
        p.arm(
            Rule::new(
                Match::default().when(move |_| down.load(Ordering::SeqCst)),
                Fault::Reset,
            )
            .always(),
        );
        p
    })
}

/// Workers, producer, readers and nemesis for `minutes`, then stops them all and
/// waits for every run to end (thawing frozen ones); returns the rules the nemesis
/// armed and the feed reader's cursor.
fn run_soak(
    s: &Soak,
    seed: u64,
    rules: &[(String, Rule)],
    minutes: f64,
) -> (Vec<(String, RuleId)>, u64) {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS).map(|_| scope.spawn(|| worker(s))).collect();
        let producer = scope.spawn(|| producer(s, seed));
        let reader = scope.spawn(|| reader(s));
        let feed_reader = scope.spawn(|| feed::feed_reader(s));
        let nemesis = scope.spawn(|| nemesis(s, rules));
        std::thread::sleep(Duration::from_secs_f64(minutes * 60.0));
        s.stop.store(true, Ordering::SeqCst);
        let armed = nemesis.join().expect("the nemesis");
        producer.join().expect("the producer");
        // Frozen runs go on, so that every worker's last run ends.
        while workers.iter().any(|w| !w.is_finished()) {
            thaw_and_watch(s, true);
            std::thread::sleep(Duration::from_millis(200));
        }
        for w in workers {
            w.join().expect("a worker");
        }
        reader.join().expect("the reader");
        let cursor = feed_reader.join().expect("the feed reader");
        (armed, cursor)
    })
}

/// Counts, by kind, the armed proxy faults that actually fired, then lets the proxy
/// go idle, so the tally shows what the soak really went through.
fn tally_fired_faults(s: &Soak, armed: &[(String, RuleId)]) {
    if let Some(proxy) = &s.proxy {
        for (kind, id) in armed {
            let n = proxy.fired(*id) as u64;
            if n > 0 {
                *s.tally
                    .lock()
                    .unwrap()
                    .faults
                    .entry(kind.clone())
                    .or_default() += n;
            }
        }
        proxy.wait_idle(Duration::from_secs(120));
    }
}

/// Prints the soak's summary line (length, seed, operations, exits, faults, reads,
/// feed entries checked, anomalies), so a run shows what it covered even when it
/// passes.
fn print_summary(s: &Soak, t: &Tally, kind: Kind, seed: u64, soaked: Duration) {
    let list = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let versions: usize = s.versions.lock().unwrap().iter().map(Vec::len).sum();
    eprintln!(
        "nemesis {kind:?}: {:.1} min, seed {seed}; runs: {} ({}); exits: {}; faults: {}; \
         {versions} input versions; {} reads of raw/; {} feed entries checked ({} hashed \
         at their key), log end {}; {} anomalies",
        soaked.as_secs_f64() / 60.0,
        t.ops.values().sum::<u64>(),
        list(&t.ops),
        list(&t.exits),
        list(&t.faults),
        t.reads,
        t.feed_entries,
        t.feed_hashed,
        t.log_end,
        t.anomalies.len()
    );
}

fn soak(kind: Kind) {
    let minutes = soak_minutes();
    let seed = test_seed();
    // Fails here, not in the first skewed run, if libfaketime is missing.
    skewed_clock("+0");
    let mut w = World::new(kind, "nemesis");
    w.env
        .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    // TTL 5 s plus the margin: the attempt timeout (2 s) on S3, a tenth of the TTL on
    // a local lake.
    let ttl_and_margin = Duration::from_secs(if w.is_s3() { 7 } else { 6 });
    let outage = Arc::new(AtomicBool::new(false));
    let proxy = outage_proxy(&w, &outage);
    let s = Soak {
        w: &w,
        rng: Rng(AtomicU64::new(seed)),
        versions: Mutex::new((0..INPUTS).map(|_| Vec::new()).collect()),
        live: Mutex::new(BTreeMap::new()),
        tally: Mutex::new(Tally::default()),
        ended: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        proxy,
        outage,
        ttl_and_margin,
        restarter: matches!(kind, Kind::S3(Server::Seaweed)).then(|| {
            let pid = std::env::var("LANDING_TEST_SERVERS_PID")
                .expect("LANDING_TEST_SERVERS_PID: scripts/test-servers exports it");
            pid.parse().expect("a pid")
        }),
        restarts: Mutex::new(Vec::new()),
    };
    for i in 0..INPUTS {
        s.put_version(i, seed ^ i as u64);
    }
    let rules = fault_rules();
    let started = Instant::now();
    let (armed, cursor) = run_soak(&s, seed, &rules, minutes);
    let soaked = started.elapsed();
    s.outage.store(false, Ordering::SeqCst);
    tally_fired_faults(&s, &armed);
    let said = judge_runs(&s);
    check_quiet_end(&s, cursor, said);
    let t = s.tally.lock().unwrap();
    print_summary(&s, &t, kind, seed, soaked);
    assert!(
        t.anomalies.is_empty(),
        "nemesis {kind:?} seed {seed}: {} anomalies:\n{}",
        t.anomalies.len(),
        t.anomalies.join("\n")
    );
    assert!(
        t.exits.get("signal 9").copied().unwrap_or(0) > 0 && t.reads > 0 && t.feed_entries > 0,
        "nemesis {kind:?} seed {seed}: the soak killed nothing, read nothing or followed no entry"
    );
}

matrix! {
    soak: [local, seaweed, moto, localstack];
}
