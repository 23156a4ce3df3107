//! Kill anywhere: SIGKILL the job at seeded random instants while it replaces a
//! previous publish, then rerun it plainly, and check the contract's invariants.
//!
//! Each backend runs trials until `MIN_KILLS` runs were really killed: a kill counts
//! only when the run's exit status says SIGKILL and the run held its lease by then (a
//! kill during process start tests nothing); a run that ended by itself before its
//! kill instant is checked all the same but not counted. Each kill is placed in its
//! window (streaming, staged, promote, checkpoint) by what the settled lake shows,
//! and streaming, staged, promote and checkpoint each need `PER_WINDOW` kills. Once
//! the real kills are in, up to `AIMED_TRIALS` instants aim at a window still short of
//! kills; a window still short after them (promote on a local lake is one rename, a
//! few microseconds wide) gets placed kills: the run is started with the crash point
//! that sends itself SIGKILL inside that window (`LANDING_CRASH_AT`), and the test
//! checks that the lake shows the window it was aimed at. Random kills and placed
//! ones are printed apart. At most `MAX_TRIALS` random trials: reaching that bound
//! before `MIN_KILLS` fails the test. SeaweedFS runs the trials a second time
//! with every core kept busy by a CPU hog that the test starts and stops itself, and
//! each trial checks that the hog did work since the previous one (a loaded machine
//! stretches the windows in which a killed run's last request is still in flight on
//! the server). Each backend prints `<label>: N real kills in M trials` (visible with
//! `--nocapture`).
//!
//! The lake is checked right after the kill, then (on S3) again once no request of
//! the killed run is in flight any more, and after the plain rerun: the raw object is
//! one of the two publishes, whole; the checkpoint exists, names one of the two inputs
//! and never one the raw object does not hold yet; when it names the one the raw
//! object holds, it records that object's size and version marker (ETag, or mtime,
//! inode and ctime); after the rerun both are the new input's and no staging is left.
//! On S3 the killed run talks to the server through the test's proxy, which only
//! forwards, so that the test can wait until the proxy has no request in flight
//! ([`Proxy::wait_idle`]) before it checks the lake again and reruns.
//!
//! `kill_anywhere_gzip` runs the same trials on one compressed input, `kill.jsonl.gz`
//! (published as `kill.jsonl`, its identity the hash of the gzip bytes), on the local
//! lake and SeaweedFS, with `GZIP_MIN_KILLS` kills: decoding is one more thread of
//! the same pass, and its kill instants fall in the same stages, so fewer trials
//! cover it without doubling the suite's longest test.
//!
//! Set `LANDING_TEST_SEED` to replay; a failing trial prints its seed and delay, the
//! checkpoint it saw (with its `committed_at`) and the raw object's `LastModified`.
//! Every trial runs even after a failure, so one report lists them all.

use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::proxy::Proxy;
use crate::support::*;

const NAME: &str = "kill.jsonl";
const RAW: &str = "raw/progress/kill.jsonl";
const CKPT: &str = "checkpoints/progress/kill.jsonl.json";
const LOCK: &str = "locks/progress/kill.jsonl.lock";
/// Real kills each backend must see (a kill before the run held its lease is not one).
const MIN_KILLS: u64 = 40;
/// Kills each backend must see in each window of [`WINDOWS`], random or placed.
const PER_WINDOW: usize = 1;
/// Random trials that may aim at a short window before it gets placed kills (one CI
/// run saw 0 random promote kills in 120 trials on a local lake, 13 on SeaweedFS).
const AIMED_TRIALS: u64 = 10;
/// Trials each backend may take to see them.
const MAX_TRIALS: u64 = 120;
/// The same for the compressed input.
const GZIP_MIN_KILLS: u64 = 15;
const GZIP_PER_WINDOW: usize = 1;
const GZIP_MAX_TRIALS: u64 = 50;

/// How the trials' input is stored, and how many kills they need.
#[derive(Debug, Clone, Copy)]
struct Form {
    gzip: bool,
    min_kills: u64,
    max_trials: u64,
    /// Least kills in each of [`WINDOWS`].
    per_window: usize,
}

const PLAIN: Form = Form {
    gzip: false,
    min_kills: MIN_KILLS,
    max_trials: MAX_TRIALS,
    per_window: PER_WINDOW,
};

impl Form {
    /// The bytes the producer stores for `content`.
    fn stored(self, content: &[u8]) -> Vec<u8> {
        if !self.gzip {
            return content.to_vec();
        }
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        e.write_all(content).expect("gzip into memory");
        e.finish().expect("gzip into memory")
    }

    /// The input's file name in the inbox.
    fn file_name(self) -> String {
        if self.gzip {
            format!("{NAME}.gz")
        } else {
            NAME.to_owned()
        }
    }
}
/// The CPU hog stops by itself after this long, whatever happens to the test; longer
/// than `MAX_TRIALS` loaded trials take.
const HOG_LIMIT: Duration = Duration::from_secs(1800);
/// How long the proxy may take to see the last answer to a killed run's requests.
const IDLE_BOUND: Duration = Duration::from_secs(120);

fn ckpt_sha(w: &World) -> Option<String> {
    checkpoint_sha(w, CKPT)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Busy-loop threads, two per core, until dropped (or `HOG_LIMIT` has passed). Each
/// round of busy work is counted, so a test can tell the hog is still running.
struct CpuHog {
    stop: Arc<AtomicBool>,
    /// Rounds of busy work done so far, all threads together.
    rounds: Arc<AtomicU64>,
    /// `rounds` when [`CpuHog::still_loading`] last looked.
    last: u64,
    threads: Vec<JoinHandle<u64>>,
}

impl CpuHog {
    fn start() -> CpuHog {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + HOG_LIMIT;
        let n = 2 * std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|i| {
                let stop = Arc::clone(&stop);
                let rounds = Arc::clone(&rounds);
                std::thread::spawn(move || {
                    let mut x = i as u64 + 1;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        for _ in 0..100_000 {
                            x = std::hint::black_box(splitmix(x));
                        }
                        rounds.fetch_add(1, Ordering::Relaxed);
                    }
                    x
                })
            })
            .collect();
        CpuHog {
            stop,
            rounds,
            last: 0,
            threads,
        }
    }

    /// Did the hog do any work since the last call (or since it started)?
    fn still_loading(&mut self) -> bool {
        let now = self.rounds.load(Ordering::Relaxed);
        let advanced = now > self.last;
        self.last = now;
        advanced
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The checkpoint fields that record the published object's version.
const MARKER_FIELDS: [&str; 4] = [
    "published_etag",
    "published_mtime_ns",
    "published_ino",
    "published_ctime_ns",
];

/// What the lake holds right now, for a failure message: the checkpoint (its
/// `committed_at`, run, hash and the published object it recorded) and the raw
/// object's `LastModified`, ETag and size, and its version marker as a checkpoint
/// would record it.
fn state(w: &World) -> String {
    let ckpt = match w.get(CKPT) {
        None => "none".to_owned(),
        Some(bytes) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => {
                let mut s = format!(
                    "committed_at {} run_id {} input_sha256 {} published_size {}",
                    v["committed_at"], v["run_id"], v["input_sha256"], v["published_size"]
                );
                for f in MARKER_FIELDS.iter().filter(|f| v.get(**f).is_some()) {
                    s.push_str(&format!(" {f} {}", v[*f]));
                }
                s
            }
            Err(_) => format!("unparsable: {}", String::from_utf8_lossy(&bytes)),
        },
    };
    let raw = match (w.last_modified(RAW), w.published_marker(RAW)) {
        (Some(lm), Some((_, marker))) => format!("{lm}, marker {marker}"),
        (Some(lm), None) => lm,
        (None, _) => "absent".to_owned(),
    };
    format!("checkpoint: {ckpt}; raw object: {raw}")
}

/// The two versions the trials alternate between.
struct Versions {
    /// The published bytes of each input.
    outputs: [Vec<u8>; 2],
    /// The hash of each input, as a checkpoint records it.
    shas: [String; 2],
}

/// When the lake is looked at in a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Right after the killed run was reaped; on S3 a request it sent may still be
    /// executing on the server, so the lake may still move while it is read.
    Killed,
    /// No request of the killed run can still land: a local run, or the proxy the
    /// S3 run went through has none in flight any more.
    Settled,
    /// After the plain rerun completed.
    Rerun,
}

impl Phase {
    fn label(self) -> &'static str {
        match self {
            Phase::Killed => "right after the kill",
            Phase::Settled => "after the kill, with no request of the killed run in flight",
            Phase::Rerun => "after the rerun",
        }
    }
}

/// What [`lake_problems`] found.
#[derive(Default)]
struct Problems {
    found: Vec<String>,
    /// The checkpoint names the new input while the raw object still holds the old
    /// bytes: a killed run's late promotion.
    late_copy: bool,
}

/// What is wrong with the commit log: a gap or a bad entry; an entry naming bytes
/// that are neither publish; after the rerun, a latest entry that does not name the
/// published object (its version, and the SHA-256 of its bytes).
fn log_problems(w: &World, v: &Versions, phase: Phase) -> Vec<String> {
    let log = match crate::commit_log::read_log(w, "progress") {
        Ok(log) => log,
        Err(e) => return vec![e],
    };
    let shas = v.outputs.iter().map(|o| sha256(o)).collect::<Vec<_>>();
    let mut found: Vec<String> = log
        .iter()
        .filter(|e| !shas.iter().any(|s| e["published_sha256"] == s.as_str()))
        .map(|e| format!("log entry {} names bytes of neither publish", e["sequence"]))
        .collect();
    if phase == Phase::Rerun {
        let current = log.last().is_some_and(|e| {
            crate::commit_log::names_published(w, e, RAW)
                && w.get(RAW)
                    .is_some_and(|b| e["published_sha256"] == sha256(&b))
        });
        if !current {
            found.push(
                "after the rerun, the log's latest entry does not name the published object".into(),
            );
        }
    }
    found
}

/// What is wrong with the lake now, in a trial that replaces `outputs[1 - new]` with
/// `outputs[new]`. Any time: the raw object is there and is one of the two publishes,
/// whole; the checkpoint is there (a clean run wrote one before the first trial and
/// nothing deletes it), names one of the two inputs, and does not name the new input
/// while the raw object holds something else (a checkpoint ahead of the publish). When
/// the checkpoint names the input whose bytes the raw object holds, it must record that
/// object's size and version marker as the store reports it: only one run publishes
/// each version in a trial, and it records what it published. That comparison is
/// skipped in [`Phase::Killed`] on S3, where the raw object may be replaced between the
/// reads (the [`Phase::Settled`] check makes it).
fn lake_problems(w: &World, v: &Versions, new: usize, phase: Phase) -> Problems {
    let mut p = Problems::default();
    let raw = w.get(RAW);
    let held = raw
        .as_deref()
        .and_then(|r| v.outputs.iter().position(|o| o.as_slice() == r));
    match (&raw, held) {
        (None, _) => p
            .found
            .push("the raw object is missing (a publish existed before the trial)".into()),
        (Some(r), None) => p
            .found
            .push(format!("torn or foreign raw object ({} bytes)", r.len())),
        (Some(_), Some(_)) => {}
    }
    let Some(bytes) = w.get(CKPT) else {
        p.found.push(format!(
            "no checkpoint, while the raw object is {}",
            if raw.is_some() { "there" } else { "absent" }
        ));
        return p;
    };
    let ckpt: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(c) => c,
        Err(e) => {
            p.found.push(format!("unparsable checkpoint: {e}"));
            return p;
        }
    };
    let Some(named) = ckpt["input_sha256"]
        .as_str()
        .and_then(|s| v.shas.iter().position(|x| x == s))
    else {
        p.found.push(format!(
            "the checkpoint names an unknown input: input_sha256 {}",
            ckpt["input_sha256"]
        ));
        return p;
    };
    if named == new && held != Some(new) {
        p.late_copy = held == Some(1 - new);
        p.found.push(format!(
            "checkpoint ahead of the publish: it names the new input, the raw object holds {}",
            match held {
                Some(_) => "the old bytes",
                None if raw.is_some() => "wrong bytes",
                None => "nothing",
            }
        ));
    }
    if phase != Phase::Killed || !w.is_s3() {
        p.found.extend(log_problems(w, v, phase));
    }
    if held != Some(named) || (phase == Phase::Killed && w.is_s3()) {
        return p;
    }
    let Some((size, marker)) = w.published_marker(RAW) else {
        p.found
            .push("the raw object vanished while the lake was read".into());
        return p;
    };
    if ckpt["published_size"].as_u64() != Some(size) {
        p.found.push(format!(
            "the checkpoint records published_size {}, the raw object has {size} bytes",
            ckpt["published_size"]
        ));
    }
    for (field, want) in marker.as_object().into_iter().flatten() {
        if ckpt[field.as_str()] != *want {
            p.found.push(format!(
                "the checkpoint records {field} {}, the raw object has {want}",
                ckpt[field.as_str()]
            ));
        }
    }
    p
}

/// Where in its run a SIGKILL landed, told from the lake after the kill settled (no
/// request of the killed run in flight), never from the run's own report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Window {
    /// Before it held the lease: process start, configuration, the lease request.
    Start,
    /// It holds the lease; its output is not staged whole yet.
    Streaming,
    /// Its whole output is staged (a complete staging object, or a local temp file
    /// holding every byte), the raw object still the old one.
    Staged,
    /// The raw object holds the new bytes, which no log entry names yet; the
    /// checkpoint still names the old input.
    Promote,
    /// The log's latest entry names the new bytes; the checkpoint still names the old
    /// input.
    Logged,
    /// The checkpoint names the new input; the run had not released its lease.
    Checkpoint,
    /// It had released its lease: only the process's exit was left.
    Released,
}

/// The windows a backend must see killed, in run order, each at least
/// `Form::per_window` times.
const WINDOWS: [Window; 5] = [
    Window::Streaming,
    Window::Staged,
    Window::Promote,
    Window::Logged,
    Window::Checkpoint,
];

impl Window {
    /// The crash point (`LANDING_CRASH_AT`) at which a run kills itself inside this
    /// window: after its first staged bytes, after staging, after the promotion, after
    /// the checkpoint (before the release).
    fn crash_point(self) -> Option<&'static str> {
        Some(match self {
            Window::Streaming => "mid-stream",
            Window::Staged => "after-staging",
            Window::Promote => "after-publish",
            Window::Logged => "after-log-entry",
            Window::Checkpoint => "after-checkpoint",
            Window::Start | Window::Released => return None,
        })
    }
}

/// How a trial's run dies: SIGKILL from the test at a delay (µs), or its own SIGKILL
/// at the crash point of a window.
#[derive(Debug, Clone, Copy)]
enum Shot {
    At(u64),
    Placed(Window),
}

/// The run id a lease record names, and whether it was released.
fn lease_of(w: &World) -> Option<(String, bool)> {
    let v: serde_json::Value = serde_json::from_slice(&w.get(LOCK)?).expect("a lease record");
    Some((
        v["run_id"].as_str().expect("run_id").to_owned(),
        v["released"] == true,
    ))
}

/// The window a killed run was in, read from the settled lake: whose lease it is,
/// which input the checkpoint and the raw object hold, and what is staged.
/// `holder_before` is the lease's run id before the killed run started.
fn window_of(w: &World, v: &Versions, new: usize, holder_before: &Option<String>) -> Window {
    let lease = lease_of(w);
    let Some((_, released)) = lease.filter(|(h, _)| Some(h) != holder_before.as_ref()) else {
        return Window::Start;
    };
    if released {
        return Window::Released;
    }
    if ckpt_sha(w).as_deref() == Some(v.shas[new].as_str()) {
        return Window::Checkpoint;
    }
    if w.get(RAW).as_deref() == Some(v.outputs[new].as_slice()) {
        let log = crate::commit_log::read_log(w, "progress").unwrap_or_default();
        let logged = log
            .last()
            .is_some_and(|e| crate::commit_log::names_published(w, e, RAW));
        return if logged {
            Window::Logged
        } else {
            Window::Promote
        };
    }
    // A whole staged output: a local temp file or an S3 staging object with every
    // byte of the new publish.
    let staged_whole = w.snapshot().iter().any(|(k, (bytes, _))| {
        let name = k.rsplit('/').next().unwrap_or(k);
        let staging =
            k.starts_with("staging/") || (name.starts_with('.') && name.ends_with(".tmp"));
        staging && bytes.as_slice() == v.outputs[new].as_slice()
    });
    if staged_whole {
        Window::Staged
    } else {
        Window::Streaming
    }
}

/// The next kill instant: seeded and uniform over the run, except that once the
/// real kills are in, a window still short of kills is aimed at between the latest
/// instant seen in an earlier window and the earliest seen in a later one (the
/// windows come in run order, so this narrows onto the short one).
fn next_delay(
    x: u64,
    span: u64,
    seen: &std::collections::BTreeMap<Window, Vec<u64>>,
    short: Option<Window>,
) -> u64 {
    let Some(want) = short else {
        return x % span;
    };
    let lo = seen
        .range(..want)
        .flat_map(|(_, d)| d.iter().copied())
        .max()
        .unwrap_or(0);
    let hi = seen
        .range((std::ops::Bound::Excluded(want), std::ops::Bound::Unbounded))
        .flat_map(|(_, d)| d.iter().copied())
        .min()
        .unwrap_or(span)
        .max(lo + 1);
    lo + x % (hi - lo)
}

/// What every trial of one backend shares: the lake, the two inputs and what they
/// publish, and on S3 the proxy the killed runs go through.
struct Rig {
    label: String,
    seed: u64,
    form: Form,
    /// The proxy's URL, the S3 endpoint of the runs that get killed.
    endpoint: Option<String>,
    /// Declared before `w`, so that it is dropped before the lake it forwards to.
    proxy: Option<Proxy>,
    w: World,
    /// The stored bytes of each input.
    inputs: [Vec<u8>; 2],
    /// The input's file name in the inbox.
    file: String,
    versions: Versions,
}

impl Rig {
    /// Set up the backend's lake and the two versions a trial alternates between; on
    /// S3 also start the proxy, so the test can tell when none of a killed run's
    /// requests is in flight any more.
    fn new(kind: Kind, loaded: bool, form: Form) -> Rig {
        let seed = test_seed();
        let label = format!(
            "{kind:?}{}{}",
            if loaded { " under a CPU hog" } else { "" },
            if form.gzip { " (gzip input)" } else { "" }
        );
        // Two versions; each trial replaces the published one with the other.
        let content = [generated(60_000, 31), generated(55_000, 32)];
        let inputs = [form.stored(&content[0]), form.stored(&content[1])];
        let file = form.file_name();
        let versions = Versions {
            // A compressed input publishes what its plain content does.
            outputs: [expected_publish(&content[0]), expected_publish(&content[1])],
            shas: [sha256(&inputs[0]), sha256(&inputs[1])],
        };
        let mut w = World::new(kind, "kill");
        w.env.push(("LANDING_S3_PART_SIZE_MIB".into(), "5".into()));
        if w.is_s3() {
            w.env
                .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
        }
        // On S3 the runs that get killed go through a proxy that only forwards, so the test
        // can tell when none of their requests is in flight any more.
        let proxy = w.server().map(|s| Proxy::start(&s.endpoint()));
        let endpoint = proxy.as_ref().map(Proxy::url);
        Rig {
            label,
            seed,
            form,
            endpoint,
            proxy,
            w,
            inputs,
            file,
            versions,
        }
    }

    /// The environment that sends a run through the proxy (empty on a local lake).
    fn via_proxy(&self) -> Vec<(&str, &str)> {
        self.endpoint
            .iter()
            .map(|url| ("AWS_ENDPOINT_URL", url.as_str()))
            .collect()
    }

    /// Publish input 0 and time the clean replacing runs; returns the input's path and
    /// the span (µs) the kill instants spread over.
    fn clean_runs(&self) -> (String, u64) {
        let via_proxy = self.via_proxy();
        // Publish input 0, then time two clean runs that do what a trial's run does
        // (replace the other input's publish, through the same route), ending on input 0
        // published again. A first publish into a fresh lake is slower on some servers
        // and would put many kill instants after the run's end.
        let mut taken = Duration::ZERO;
        let input = self.w.put_input(&self.file, &self.inputs[0]);
        for (i, which) in [0, 1, 0].into_iter().enumerate() {
            self.w.put_input(&self.file, &self.inputs[which]);
            let t = Instant::now();
            let r = self.w.run_env(&input, &[], &via_proxy);
            assert_eq!(
                r.code,
                Some(0),
                "{}: clean run {i} of input {which}: {}",
                self.label,
                r.stderr
            );
            if i > 0 {
                taken += t.elapsed();
            }
        }
        // Kill instants spread over the mean time of those replacing runs.
        (input, (taken / 2).as_micros().max(1) as u64)
    }

    /// The trial's name in messages: label, seed, trial and how its run dies.
    fn context(&self, trial: u64, shot: Shot) -> String {
        let (label, seed) = (&self.label, self.seed);
        match shot {
            Shot::At(us) => format!(
                "{label} seed {seed} trial {trial} delay {:?}",
                Duration::from_micros(us)
            ),
            Shot::Placed(want) => format!("{label} seed {seed} trial {trial} placed in {want:?}"),
        }
    }

    /// One trial: put the new input, run it until `shot` kills it, check the lake
    /// after the kill and place the kill in its window, then rerun plainly and check
    /// again.
    fn trial(&self, input: &str, t: &mut Tally, hog: Option<&mut CpuHog>, trial: u64, shot: Shot) {
        // The first run published input 0; trial 0 replaces it with input 1, and so on.
        let new = ((trial + 1) % 2) as usize;
        let ctx = self.context(trial, shot);
        if let Some(hog) = hog {
            if !hog.still_loading() {
                t.failures.push(format!(
                    "{ctx}: the CPU hog did no work since the previous trial"
                ));
            }
        }
        self.w.put_input(&self.file, &self.inputs[new]);
        let holder_before = lease_of(&self.w).map(|(h, _)| h);
        let (status, spawned) = self.shoot(input, shot);
        let killed = t.record_exit(&ctx, shot, status, spawned);

        if let Some(proxy) = &self.proxy {
            t.check(self, new, Phase::Killed, &ctx);
            // A request the killed run sent may still be executing on the server.
            proxy.wait_idle(IDLE_BOUND);
        }
        t.check(self, new, Phase::Settled, &ctx);
        if killed {
            let window = window_of(&self.w, &self.versions, new, &holder_before);
            t.record_window(&self.w, &ctx, shot, window);
        }

        self.rerun(input, t, new, &ctx);
    }

    /// Start a run through the proxy that dies by `shot`: SIGKILL from the test after
    /// its delay, or its own at the crash point of its window; then reap it. Returns
    /// its exit status and when it was spawned.
    fn shoot(&self, input: &str, shot: Shot) -> (std::process::ExitStatus, Instant) {
        let mut env = self.via_proxy();
        if let Shot::Placed(want) = shot {
            env.push((
                "LANDING_CRASH_AT",
                want.crash_point().expect("a run's window"),
            ));
        }
        let spawned = Instant::now();
        let mut child = self
            .w
            .command(
                &["run", "--input", input, "--lake", &self.w.lake_arg()],
                &env,
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn landing");
        if let Shot::At(delay_us) = shot {
            // The random instant itself, not a synchronisation: the kill lands wherever
            // it lands.
            std::thread::sleep(Duration::from_micros(delay_us));
            // Harmless if the run has already ended: it is not reaped before `wait`.
            child.kill().expect("SIGKILL the run");
        }
        let status = child.wait().expect("reap the run");
        (status, spawned)
    }

    /// The plain rerun after the kill (once more if it stopped on a conflict), then
    /// check that it converged on the new input, that the lake is sound and that no
    /// staging is left.
    fn rerun(&self, input: &str, t: &mut Tally, new: usize, ctx: &str) {
        let w = &self.w;
        // On S3 a killed holder's lease is taken over once its record stayed
        // unchanged for a TTL of the rerun's own clock; and a killed run's copy still
        // executing on the server can land between the rerun's decision and its
        // promotion, which the fence turns into a conflict (75): rerun once more.
        let takeover = ["--lease-wait", TAKEOVER_WAIT];
        let mut r = w.run(input, &takeover);
        if r.code == Some(75) {
            t.conflicts += 1;
            eprintln!(
                "{ctx}: rerun stopped on a conflict: {}",
                last_error(&r.stderr)
            );
            r = w.run(input, &takeover);
        }
        t.runs.push(
            r.summary
                .as_ref()
                .map(|s| s["run_id"].to_string())
                .unwrap_or_default(),
        );
        if r.code != Some(0) {
            t.failures.push(format!(
                "{ctx}: rerun failed ({:?}); {}\n{}",
                r.code,
                state(w),
                r.stderr
            ));
            return;
        }
        let converged = w.get(RAW).as_deref() == Some(self.versions.outputs[new].as_slice())
            && ckpt_sha(w).as_deref() == Some(self.versions.shas[new].as_str());
        if !converged {
            let runs = &t.runs;
            t.failures.push(format!(
                "{ctx}: rerun ({}) did not converge on the new input; {}; earlier runs: {runs:?}",
                r.action(),
                state(w)
            ));
        }
        t.check(self, new, Phase::Rerun, ctx);
        let leftovers = w.leftovers();
        if !leftovers.is_empty() {
            t.failures
                .push(format!("{ctx}: leftovers {leftovers:?}; {}", state(w)));
        }
    }
}

/// What a backend's trials have counted so far, and what went wrong in them.
struct Tally {
    /// The span (µs) the kill instants spread over.
    span: u64,
    /// Random trials so far.
    trials: u64,
    /// Real kills: a random kill after the run held its lease.
    kills: u64,
    /// Runs that ended by themselves before their kill instant.
    finished: u64,
    /// Reruns that stopped on a conflict.
    conflicts: u64,
    /// Run ids of the plain reruns, to tell whose checkpoint a failure saw.
    runs: Vec<String>,
    failures: Vec<String>,
    /// Old raw bytes under a checkpoint of the new input: a killed run's late promotion.
    late_copies: u64,
    /// Kill instants (µs) by the window they landed in.
    windows: std::collections::BTreeMap<Window, Vec<u64>>,
    /// Kills placed by a crash point, by window.
    placed: std::collections::BTreeMap<Window, usize>,
    /// Random trials aimed at a short window.
    aimed: u64,
    placed_trials: u64,
}

impl Tally {
    /// Nothing counted yet; kill instants spread over `span` µs.
    fn new(span: u64) -> Tally {
        Tally {
            span,
            trials: 0,
            kills: 0,
            finished: 0,
            conflicts: 0,
            runs: Vec::new(),
            failures: Vec::new(),
            late_copies: 0,
            windows: Default::default(),
            placed: Default::default(),
            aimed: 0,
            placed_trials: 0,
        }
    }

    /// The first window of [`WINDOWS`] with fewer random kills than `per_window`.
    fn short(&self, per_window: usize) -> Option<Window> {
        WINDOWS
            .into_iter()
            .find(|w| self.windows.get(w).map_or(0, Vec::len) < per_window)
    }

    /// The next trial's number and how its run dies, counted; `None` once the trials
    /// are done. Random instants until the real kills are in (or the bound is reached),
    /// then instants aimed at a window still short, then kills placed in one.
    fn next_shot(&mut self, form: Form, seed: u64) -> Option<(u64, Shot)> {
        let shot = if self.kills < form.min_kills && self.trials < form.max_trials {
            Shot::At(next_delay(
                splitmix(seed ^ self.trials),
                self.span,
                &self.windows,
                None,
            ))
        } else if let Some(want) = self
            .short(form.per_window)
            .filter(|_| self.aimed < AIMED_TRIALS)
        {
            self.aimed += 1;
            Shot::At(next_delay(
                splitmix(seed ^ self.trials),
                self.span,
                &self.windows,
                Some(want),
            ))
        } else if let Some(want) = WINDOWS
            .into_iter()
            .find(|w| {
                self.windows.get(w).map_or(0, Vec::len) + self.placed.get(w).copied().unwrap_or(0)
                    < form.per_window
            })
            // A crash point that misses its window is a failure already; do not retry it
            // without end.
            .filter(|_| self.placed_trials < (2 * WINDOWS.len() * form.per_window) as u64)
        {
            Shot::Placed(want)
        } else {
            return None;
        };
        let trial = self.trials + self.placed_trials;
        match shot {
            Shot::At(_) => self.trials += 1,
            Shot::Placed(_) => self.placed_trials += 1,
        }
        Some((trial, shot))
    }

    /// Count how the run ended: a placed run that did not kill itself is a failure;
    /// a random one that ended by itself narrows the span to the runs seen now.
    /// Returns whether the run was SIGKILLed.
    fn record_exit(
        &mut self,
        ctx: &str,
        shot: Shot,
        status: std::process::ExitStatus,
        spawned: Instant,
    ) -> bool {
        let killed = status.signal() == Some(libc::SIGKILL);
        if let (Shot::Placed(want), false) = (shot, killed) {
            self.failures.push(format!(
                "{ctx}: the run was to kill itself in the {want:?} window; it ended {status}"
            ));
        } else if !killed {
            self.finished += 1;
            // The clean runs were measured on a busier machine than this one: keep
            // the instants inside the runs seen now, or most trials only watch.
            let ran = spawned.elapsed().as_micros() as u64;
            self.span = self.span.min((ran * 3 / 4).max(1));
            if !status.success() {
                eprintln!("{ctx}: the run ended by itself before its kill: {status}");
            }
        }
        killed
    }

    /// Check the lake at `phase` of a trial that replaces with input `new`: count a
    /// late copy, and record what is wrong with the reruns seen so far.
    fn check(&mut self, rig: &Rig, new: usize, phase: Phase, ctx: &str) {
        let p = lake_problems(&rig.w, &rig.versions, new, phase);
        if p.late_copy {
            self.late_copies += 1;
        }
        if !p.found.is_empty() {
            let runs = &self.runs;
            self.failures.push(format!(
                "{ctx} {}: {}; {}; earlier runs: {runs:?}",
                phase.label(),
                p.found.join("; "),
                state(&rig.w)
            ));
        }
    }

    /// Count a kill in the `window` the settled lake shows: a random one by its
    /// instant (a real kill unless it came before the lease), a placed one only in
    /// the window it was aimed at, else a failure.
    fn record_window(&mut self, w: &World, ctx: &str, shot: Shot, window: Window) {
        match shot {
            // A kill before the run held its lease tests nothing of the contract.
            Shot::At(delay_us) => {
                self.windows.entry(window).or_default().push(delay_us);
                if window != Window::Start {
                    self.kills += 1;
                }
            }
            Shot::Placed(want) if want == window => *self.placed.entry(want).or_default() += 1,
            Shot::Placed(want) => self.failures.push(format!(
                "{ctx}: the crash point of the {want:?} window left the lake of the \
                 {window:?} window; {}",
                state(w)
            )),
        }
    }

    /// Print the backend's line (`<label>: N real kills in M trials`, by window,
    /// placed kills, conflicts and failures).
    fn report(&self, rig: &Rig, took: Duration) {
        let (label, seed) = (&rig.label, rig.seed);
        let Tally {
            span,
            trials,
            kills,
            finished,
            conflicts,
            late_copies,
            ..
        } = *self;
        let per_window: Vec<String> = self
            .windows
            .iter()
            .map(|(w, d)| format!("{w:?} {}", d.len()))
            .collect();
        let placed_per_window: Vec<String> = self
            .placed
            .iter()
            .map(|(w, n)| format!("{w:?} {n}"))
            .collect();
        eprintln!(
            "{label}: {kills} real kills in {trials} trials (by window: {}; {finished} runs ended \
             by themselves first), placed kills: {}, {conflicts} reruns stopped on a conflict, \
             {} failures ({late_copies} late copies), seed {seed}, a clean replacing run {:.1?}, \
             {took:.1?} in all",
            per_window.join(", "),
            if self.placed.is_empty() {
                "none".to_owned()
            } else {
                placed_per_window.join(", ")
            },
            self.failures.len(),
            Duration::from_micros(span)
        );
    }

    /// Fail the test on any failure of the trials, on a window short of kills, or on
    /// fewer real kills than the form needs.
    fn judge(mut self, rig: &Rig) {
        let (label, seed, form) = (&rig.label, rig.seed, rig.form);
        let (trials, kills, late_copies) = (self.trials, self.kills, self.late_copies);
        for want in WINDOWS {
            let got = self.windows.get(&want).map_or(0, Vec::len)
                + self.placed.get(&want).copied().unwrap_or(0);
            if got < form.per_window {
                self.failures.push(format!(
                    "{label} seed {seed}: {got} kills in the {want:?} window, random or placed; \
                     {} were needed",
                    form.per_window
                ));
            }
        }
        // The trials must actually have killed runs, not only watched them finish.
        if kills < form.min_kills {
            self.failures.push(format!(
                "{label} seed {seed}: only {kills} real kills in {trials} trials, the bound; \
                 {} were needed",
                form.min_kills
            ));
        }
        assert!(
            self.failures.is_empty(),
            "{label}: {} failures in {trials} trials ({late_copies} with old raw bytes under a \
             newer checkpoint):\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// Run a backend's kill trials (see the module's doc) and fail on any broken
/// invariant or too few kills.
fn kill_anywhere_trials(kind: Kind, loaded: bool, form: Form) {
    let started = Instant::now();
    let rig = Rig::new(kind, loaded, form);
    // Started before the span is measured, so the kill instants cover a loaded run.
    let mut hog = loaded.then(CpuHog::start);
    let (input, span) = rig.clean_runs();
    let mut tally = Tally::new(span);
    while let Some((trial, shot)) = tally.next_shot(form, rig.seed) {
        rig.trial(&input, &mut tally, hog.as_mut(), trial, shot);
    }
    drop(hog);
    tally.report(&rig, started.elapsed());
    tally.judge(&rig);
}

fn last_error(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| l.starts_with("landing: error") || l.starts_with("  caused by"))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn kill_anywhere(kind: Kind) {
    kill_anywhere_trials(kind, false, PLAIN)
}

fn kill_anywhere_under_load(kind: Kind) {
    kill_anywhere_trials(kind, true, PLAIN)
}

/// The same trials on a gzip input (see the module's doc).
fn kill_anywhere_gzip(kind: Kind) {
    let gzip = Form {
        gzip: true,
        min_kills: GZIP_MIN_KILLS,
        max_trials: GZIP_MAX_TRIALS,
        per_window: GZIP_PER_WINDOW,
    };
    kill_anywhere_trials(kind, false, gzip)
}

matrix! {
    kill_anywhere: [local, seaweed, moto, localstack];
    kill_anywhere_under_load: [seaweed];
    kill_anywhere_gzip: [local, seaweed];
}
