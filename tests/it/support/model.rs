//! The reference model as the tests' expected value: `tests/model/landing_model.py`,
//! written from docs/interface.md and docs/contracts.md alone, in another language
//! and with another JSON parser, sharing no code with the crate. Whatever a test
//! expects a run to publish, quarantine, count or refuse comes from here (or from a
//! literal), never from another run of the binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The shipped contract file of `product` (`contracts/<product>.json`).
pub fn contract_file(product: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contracts")
        .join(format!("{product}.json"))
}

fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/model")
}

/// What the model says one input must give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// `published` or `refused`.
    pub action: String,
    /// The refusal reason (`kind`, `line`, `field`), `Value::Null` on a publish.
    pub reason: Value,
    pub accepted_rows: u64,
    pub rejected_rows: u64,
    pub duplicate_rows: u64,
    /// The published bytes (empty on a refusal).
    pub published: Vec<u8>,
    /// The quarantine records (empty when no line was quarantined).
    pub quarantine: Vec<u8>,
    /// `(line, reason code)` of every quarantined line, in line order.
    pub quarantine_reasons: Vec<(u64, String)>,
}

/// Options of a run the model mirrors.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opts {
    pub max_rejected_lines: u64,
    pub max_line_bytes: Option<u64>,
}

/// The model's verdict on the plain (or gzip) `input` under `contract`.
///
/// Memoised on disk under the test build's temp folder, keyed by the SHA-256 of the
/// model's source, the contract, the options and the input: many tests ask the model
/// about the same generated days, each in a process of its own under nextest, and the
/// model is the slowest part of their setup. A memo is the model's own output for
/// exactly these inputs, so the expected value still comes from the model alone.
pub fn expect(contract: &Path, input: &[u8], opts: Opts) -> Expected {
    let memo = memo_dir(contract, input, opts);
    if let Some(e) = read_memo(&memo) {
        return e;
    }
    let dir = tempfile::tempdir().expect("temp dir for the model");
    let (inp, out, quar) = (
        dir.path().join("input"),
        dir.path().join("published"),
        dir.path().join("quarantine"),
    );
    std::fs::write(&inp, input).expect("writing the model's input");
    let mut cmd = Command::new("python3");
    cmd.arg(model_dir().join("landing_model.py"))
        .arg("--contract")
        .arg(contract)
        .arg("--max-rejected-lines")
        .arg(opts.max_rejected_lines.to_string())
        .arg("--out-published")
        .arg(&out)
        .arg("--out-quarantine")
        .arg(&quar);
    if let Some(n) = opts.max_line_bytes {
        cmd.arg("--max-line-bytes").arg(n.to_string());
    }
    let o = cmd
        .arg(&inp)
        .output()
        .expect("python3 runs the reference model (tests/model/landing_model.py)");
    assert!(
        o.status.success(),
        "the reference model failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    write_memo(&memo, &o.stdout, &out, &quar);
    parse(&o.stdout, &out, &quar)
}

/// Where the model's answer for these exact inputs is kept.
fn memo_dir(contract: &Path, input: &[u8], opts: Opts) -> PathBuf {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        std::fs::read(model_dir().join("landing_model.py")).expect("the model's source"),
        std::fs::read(contract).expect("the contract file"),
        format!("{}/{:?}", opts.max_rejected_lines, opts.max_line_bytes).into_bytes(),
        input.to_vec(),
    ] {
        // Each part's length first, so that no two splits of the same bytes collide.
        h.update((part.len() as u64).to_le_bytes());
        h.update(&part);
    }
    let key: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("model-memo")
        .join(key)
}

fn read_memo(memo: &Path) -> Option<Expected> {
    let stdout = std::fs::read(memo.join("stdout.json")).ok()?;
    Some(parse(
        &stdout,
        &memo.join("published"),
        &memo.join("quarantine"),
    ))
}

/// Keep the model's answer: written into a folder of its own, then renamed into
/// place whole, so a concurrent reader sees all of it or none.
fn write_memo(memo: &Path, stdout: &[u8], published: &Path, quarantine: &Path) {
    let parent = memo.parent().expect("the memo folder has a parent");
    std::fs::create_dir_all(parent).expect("create the model memo folder");
    let tmp = tempfile::tempdir_in(parent).expect("a temp folder for a memo");
    std::fs::copy(published, tmp.path().join("published")).expect("memo the published bytes");
    std::fs::copy(quarantine, tmp.path().join("quarantine")).expect("memo the quarantine");
    std::fs::write(tmp.path().join("stdout.json"), stdout).expect("memo the verdict");
    // Another test may have kept the same answer first: theirs is as good.
    if std::fs::rename(tmp.path(), memo).is_ok() {
        std::mem::forget(tmp);
    }
}

fn parse(stdout: &[u8], out: &Path, quar: &Path) -> Expected {
    let v: Value = serde_json::from_slice(stdout).expect("the model prints one JSON object");
    let count = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("model {k}: {v}"));
    Expected {
        action: v["action"].as_str().expect("model action").to_owned(),
        reason: v["reason"].clone(),
        accepted_rows: count("accepted_rows"),
        rejected_rows: count("rejected_rows"),
        duplicate_rows: count("duplicate_rows"),
        published: std::fs::read(out).expect("the model's published bytes"),
        quarantine: std::fs::read(quar).expect("the model's quarantine bytes"),
        quarantine_reasons: v["quarantine_reasons"]
            .as_array()
            .expect("model quarantine_reasons")
            .iter()
            .map(|r| {
                (
                    r["line"].as_u64().expect("line"),
                    r["reason"].as_str().expect("reason").to_owned(),
                )
            })
            .collect(),
    }
}

/// The bytes a `progress` input must publish under the default cap (0): the model's,
/// and it must be a publish.
pub fn expected_publish(input: &[u8]) -> Vec<u8> {
    expected_publish_with(input, Opts::default())
}

/// [`expected_publish`] with other options (a reject cap).
pub fn expected_publish_with(input: &[u8], opts: Opts) -> Vec<u8> {
    let e = expect(&contract_file("progress"), input, opts);
    assert_eq!(e.action, "published", "the model refuses: {:?}", e.reason);
    e.published
}

/// A seeded corpus from `tests/model/corpus.py` (deterministic for its arguments).
pub fn corpus(contract: &Path, kind: &str, seed: u64, lines: u64) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir for the corpus");
    let out = dir.path().join("corpus.jsonl");
    let o = Command::new("python3")
        .arg(model_dir().join("corpus.py"))
        .arg("--contract")
        .arg(contract)
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--lines")
        .arg(lines.to_string())
        .arg("--kind")
        .arg(kind)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("python3 runs tests/model/corpus.py");
    assert!(
        o.status.success(),
        "corpus.py failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(&out).expect("the corpus")
}

/// The seeds of this run: `LANDING_TEST_MODEL_SEED` replays one; otherwise `n` seeds taken
/// from the clock, so each CI run covers new ones. Printed, so a failure reproduces.
pub fn seeds(what: &str, n: usize) -> Vec<u64> {
    if let Ok(s) = std::env::var("LANDING_TEST_MODEL_SEED") {
        let seed = s.parse().expect("LANDING_TEST_MODEL_SEED is a number");
        eprintln!("{what}: seed {seed} (LANDING_TEST_MODEL_SEED)");
        return vec![seed];
    }
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as u64;
    let seeds: Vec<u64> = (0..n as u64)
        .map(|i| (base ^ (i.wrapping_mul(0x9E37_79B9_7F4A_7C15))) % 1_000_000_007)
        .collect();
    eprintln!("{what}: seeds {seeds:?} (replay one with LANDING_TEST_MODEL_SEED=<seed>)");
    seeds
}
