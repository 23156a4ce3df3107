//! Kill anywhere: SIGKILL the job at seeded random instants while it replaces a
//! previous publish, then rerun it plainly, and check the contract's invariants.
//! 50 trials on each backend, and 50 more on SeaweedFS with every core kept busy by a
//! CPU hog that the test starts and stops itself (a loaded machine stretches the
//! windows in which a killed run's last request is still in flight on the server).
//! Set `LANDING_TEST_SEED` to replay; a failing trial prints its seed and delay, the
//! checkpoint it saw (with its `committed_at`) and the raw object's `LastModified`.
//! Every trial runs even after a failure, so one report counts them all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::*;

const NAME: &str = "kill.jsonl";
const RAW: &str = "raw/progress/kill.jsonl";
const CKPT: &str = "checkpoints/progress/kill.jsonl.json";
const LOCK: &str = "locks/progress/kill.jsonl.lock";
const TRIALS: u64 = 50;
/// The CPU hog stops by itself after this long, whatever happens to the test.
const HOG_LIMIT: Duration = Duration::from_secs(600);

fn ckpt_sha(w: &World) -> Option<String> {
    checkpoint_sha(w, CKPT)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Busy-loop threads, two per core, until dropped (or `HOG_LIMIT` has passed).
struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<u64>>,
}

impl CpuHog {
    fn start() -> CpuHog {
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + HOG_LIMIT;
        let n = 2 * std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|i| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = i as u64 + 1;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        for _ in 0..100_000 {
                            x = std::hint::black_box(splitmix(x));
                        }
                    }
                    x
                })
            })
            .collect();
        CpuHog { stop, threads }
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

/// What the lake holds right now, for a failure message: the checkpoint (its
/// `committed_at`, run, hash and the published object it recorded) and the raw
/// object's `LastModified`, ETag and size.
fn state(w: &World) -> String {
    let ckpt = match w.get(CKPT) {
        None => "none".to_owned(),
        Some(bytes) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => format!(
                "committed_at {} run_id {} input_sha256 {} published_etag {} published_size {}",
                v["committed_at"],
                v["run_id"],
                v["input_sha256"],
                v["published_etag"],
                v["published_size"]
            ),
            Err(_) => format!("unparsable: {}", String::from_utf8_lossy(&bytes)),
        },
    };
    let raw = w.last_modified(RAW).unwrap_or_else(|| "absent".to_owned());
    format!("checkpoint: {ckpt}; raw object: {raw}")
}

fn kill_anywhere_trials(kind: Kind, trials: u64, loaded: bool) {
    let started = Instant::now();
    let seed = std::env::var("LANDING_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let label = format!("{kind:?}{}", if loaded { " under a CPU hog" } else { "" });
    // Two versions; each trial replaces the published one with the other.
    let inputs = [generated(60_000, 31), generated(55_000, 32)];
    let outputs: Vec<Vec<u8>> = inputs.iter().map(|i| clean_output(NAME, i)).collect();
    let new_sha: Vec<String> = inputs.iter().map(|i| sha256(i)).collect();
    let mut w = World::new(kind, "kill");
    w.env.push(("LANDING_S3_PART_SIZE_MIB".into(), "5".into()));
    if w.is_s3() {
        w.env
            .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }
    // Started before the span is measured, so the kill instants cover a loaded run.
    let hog = loaded.then(CpuHog::start);
    let input = w.put_input(NAME, &inputs[0]);
    let t = Instant::now();
    assert_eq!(w.run(&input, &[]).code, Some(0));
    // Kill instants spread over the time of one clean run.
    let span = t.elapsed().as_micros().max(1) as u64;
    let mut kills = 0;
    let mut conflicts = 0;
    // Run ids of the plain reruns, to tell whose checkpoint a failure saw.
    let mut runs: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    // Old raw bytes under a checkpoint of the new input: a killed run's late promotion.
    let mut late_copies = 0;
    for trial in 0..trials {
        let (old, new) = ((trial % 2) as usize, ((trial + 1) % 2) as usize);
        let delay = Duration::from_micros(splitmix(seed ^ trial) % span);
        let ctx = format!("{label} seed {seed} trial {trial} delay {delay:?}");
        w.put_input(NAME, &inputs[new]);
        let mut child = w
            .command(&["run", "--input", &input, "--lake", &w.lake_arg()], &[])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The random instant itself, not a synchronisation: the kill lands wherever it lands.
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        child.wait().unwrap();

        let raw = w.get(RAW).unwrap_or_default();
        if raw != outputs[old] && raw != outputs[new] {
            failures.push(format!(
                "{ctx}: torn or foreign publish ({} bytes); {}; earlier runs: {runs:?}",
                raw.len(),
                state(&w)
            ));
        }
        let sha = ckpt_sha(&w);
        if sha.as_deref() == Some(new_sha[new].as_str()) && raw != outputs[new] {
            if raw == outputs[old] {
                late_copies += 1;
            }
            failures.push(format!(
                "{ctx}: checkpoint ahead of the publish (raw holds the {} bytes); {}; earlier runs: {runs:?}",
                if raw == outputs[old] { "old" } else { "wrong" },
                state(&w)
            ));
        }
        // A killed holder's lease must expire first on S3; and a killed run's copy
        // still executing on the server can land between the rerun's decision and its
        // promotion, which the fence turns into a conflict (75): rerun once more.
        w.wait_for_lease_expiry(LOCK);
        let mut r = w.run(&input, &[]);
        if r.code == Some(75) {
            conflicts += 1;
            eprintln!(
                "{ctx}: rerun stopped on a conflict: {}",
                last_error(&r.stderr)
            );
            w.wait_for_lease_expiry(LOCK);
            r = w.run(&input, &[]);
        }
        runs.push(
            r.summary
                .as_ref()
                .map(|s| s["run_id"].to_string())
                .unwrap_or_default(),
        );
        if r.code != Some(0) {
            failures.push(format!(
                "{ctx}: rerun failed ({:?}); {}\n{}",
                r.code,
                state(&w),
                r.stderr
            ));
            break;
        }
        let converged = w.get(RAW).as_deref() == Some(outputs[new].as_slice())
            && ckpt_sha(&w).as_deref() == Some(new_sha[new].as_str());
        if !converged {
            failures.push(format!(
                "{ctx}: rerun ({}) did not converge; {}; earlier runs: {runs:?}",
                r.action(),
                state(&w)
            ));
            break;
        }
        let leftovers = w.leftovers();
        if !leftovers.is_empty() {
            failures.push(format!("{ctx}: leftovers {leftovers:?}; {}", state(&w)));
        }
    }
    drop(hog);
    let took = started.elapsed();
    eprintln!(
        "{label}: {trials} trials, {kills} killed mid-run, {conflicts} reruns stopped on a \
         conflict, {} failures ({late_copies} late copies), seed {seed}, clean run {:.1?}, \
         {took:.1?} in all",
        failures.len(),
        Duration::from_micros(span)
    );
    assert!(
        failures.is_empty(),
        "{label}: {} of {trials} trials failed ({late_copies} with old raw bytes under a newer \
         checkpoint):\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The trials must actually have killed runs, not only watched them finish.
    assert!(
        kills >= trials / 4,
        "{label} seed {seed}: only {kills} of {trials} runs were killed"
    );
}

fn last_error(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| l.starts_with("landing: error") || l.starts_with("  caused by"))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn kill_anywhere(kind: Kind) {
    kill_anywhere_trials(kind, TRIALS, false)
}

fn kill_anywhere_under_load(kind: Kind) {
    kill_anywhere_trials(kind, TRIALS, true)
}

matrix! {
    kill_anywhere: [local, seaweed, moto, localstack];
    kill_anywhere_under_load: [seaweed];
}
