//! Kill anywhere: SIGKILL the job at seeded random instants while it replaces a
//! previous publish, then rerun it plainly, and check the contract's invariants.
//! Set `LANDING_TEST_SEED` to replay; a failing trial prints its seed and delay.

mod harness;

use std::time::{Duration, Instant};

use harness::*;

const NAME: &str = "kill.jsonl";
const RAW: &str = "raw/progress/kill.jsonl";
const CKPT: &str = "checkpoints/progress/kill.jsonl.json";
const LOCK: &str = "locks/progress/kill.jsonl.lock";
const TRIALS: u64 = 25;

fn ckpt_sha(w: &World) -> Option<String> {
    checkpoint_sha(w, CKPT)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn kill_anywhere(kind: Kind) {
    let seed = std::env::var("LANDING_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    // Two versions; each trial replaces the published one with the other.
    let inputs = [generated(60_000, 31), generated(55_000, 32)];
    let outputs: Vec<Vec<u8>> = inputs.iter().map(|i| clean_output(NAME, i)).collect();
    let mut w = World::new(kind, "kill");
    w.env.push(("LANDING_S3_PART_SIZE_MIB".into(), "5".into()));
    if w.is_s3() {
        w.env
            .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }
    let input = w.put_input(NAME, &inputs[0]);
    let t = Instant::now();
    assert_eq!(w.run(&input, &[]).code, Some(0));
    // Kill instants spread over the time of one clean run.
    let span = t.elapsed().as_micros().max(1) as u64;
    let mut kills = 0;
    let mut conflicts = 0;
    // Run ids of the plain reruns, to tell whose checkpoint a failure saw.
    let mut runs: Vec<String> = Vec::new();
    for trial in 0..TRIALS {
        let (old, new) = ((trial % 2) as usize, ((trial + 1) % 2) as usize);
        let delay = Duration::from_micros(splitmix(seed ^ trial) % span);
        let ctx = format!("{kind:?} seed {seed} trial {trial} delay {delay:?}");
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
        assert!(
            raw == outputs[old] || raw == outputs[new],
            "{ctx}: torn or foreign publish"
        );
        let sha = ckpt_sha(&w);
        if sha.as_deref() == Some(sha256(&inputs[new]).as_str()) {
            assert!(
                raw == outputs[new],
                "{ctx}: checkpoint ahead of the publish; checkpoint: {}; earlier runs: {runs:?}",
                String::from_utf8_lossy(&w.get(CKPT).unwrap_or_default())
            );
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
        assert_eq!(r.code, Some(0), "{ctx}: rerun failed: {}", r.stderr);
        runs.push(
            r.summary
                .as_ref()
                .map(|s| s["run_id"].to_string())
                .unwrap_or_default(),
        );
        assert!(
            w.get(RAW).unwrap() == outputs[new],
            "{ctx}: rerun did not converge"
        );
        assert_eq!(ckpt_sha(&w).unwrap(), sha256(&inputs[new]), "{ctx}");
        assert!(
            w.leftovers().is_empty(),
            "{ctx}: leftovers {:?}",
            w.leftovers()
        );
    }
    // The trials must actually have killed runs, not only watched them finish.
    assert!(
        kills >= TRIALS / 4,
        "{kind:?} seed {seed}: only {kills} of {TRIALS} runs were killed"
    );
    eprintln!(
        "{kind:?}: {TRIALS} trials, {kills} killed mid-run, {conflicts} reruns stopped on a conflict, seed {seed}"
    );
}

fn last_error(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| l.starts_with("landing: error") || l.starts_with("  caused by"))
        .collect::<Vec<_>>()
        .join(" / ")
}

on_every_backend!(kill_anywhere);
