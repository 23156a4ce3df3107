//! The reference model against the binary: seeded corpora of every shipped contract,
//! landed by `landing run` on every backend, must give exactly what the model says
//! (tests/model/, written from docs/interface.md and docs/contracts.md alone): exit
//! code, action, reason, counts, published and quarantine bytes. Plain inputs, gzip
//! and zstd forms, several reject caps (0, one below the day's rejects, exactly its
//! rejects, none), and runs that spill.
//!
//! Each run draws new seeds and prints them; `LANDING_TEST_MODEL_SEED=<seed>` replays
//! one. Every case runs even after a failure, so one report lists them all.

use std::path::Path;

use crate::support::model::{self, Expected, Opts};
use crate::support::*;

/// The shipped contracts, each with the flag that selects it (progress is built in).
const PRODUCTS: [(&str, bool); 2] = [("progress", false), ("enrollment", true)];
/// The corpus kinds of tests/model/corpus.py.
const KINDS: [&str; 5] = ["clean", "mixed", "collision", "prohibited", "times"];
/// Seeds per run of the suite, and lines per corpus.
const SEEDS: usize = 2;
const LINES: u64 = 400;

/// How a case stores its input and runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Plain,
    Gzip,
    Zstd,
    /// Plain, with the dedup index spilled every 5 events.
    Spilled,
}

impl Form {
    fn suffix(self) -> &'static str {
        match self {
            Form::Gzip => ".gz",
            Form::Zstd => ".zst",
            Form::Plain | Form::Spilled => "",
        }
    }

    fn stored(self, content: &[u8]) -> Vec<u8> {
        use std::io::Write;
        match self {
            Form::Plain | Form::Spilled => content.to_vec(),
            Form::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
                e.write_all(content).expect("gzip into memory");
                e.finish().expect("gzip into memory")
            }
            Form::Zstd => zstd::encode_all(content, 3).expect("zstd into memory"),
        }
    }
}

/// The forms each corpus kind is landed in besides plain.
fn forms(kind: &str) -> &'static [Form] {
    match kind {
        "clean" => &[Form::Plain, Form::Zstd, Form::Spilled],
        "mixed" => &[Form::Plain, Form::Gzip],
        "collision" => &[Form::Plain, Form::Spilled],
        _ => &[Form::Plain],
    }
}

/// The caps a corpus is landed under: none, and around its count of rejects (so the
/// cap is met exactly, and broken by its last reject).
fn caps(contract: &Path, input: &[u8]) -> Vec<u64> {
    let all = model::expect(
        contract,
        input,
        Opts {
            max_rejected_lines: u64::MAX >> 1,
            ..Opts::default()
        },
    );
    let mut caps = vec![0, all.rejected_rows, u64::MAX >> 1];
    if all.rejected_rows > 1 {
        caps.push(all.rejected_rows - 1);
    }
    caps.sort_unstable();
    caps.dedup();
    caps
}

/// What differs between the model's verdict and what the run did and left.
fn differences(w: &World, product: &str, name: &str, r: &Run, e: &Expected) -> Vec<String> {
    let mut d = Vec::new();
    let want_code = if e.action == "published" { 0 } else { 65 };
    if r.code != Some(want_code) {
        d.push(format!("exit {:?}, the model says {want_code}", r.code));
    }
    let Some(s) = r.summary.as_ref() else {
        d.push("no summary on stdout".into());
        return d;
    };
    if s["action"] != e.action.as_str() {
        d.push(format!(
            "action {}, the model says {}",
            s["action"], e.action
        ));
    }
    for k in ["kind", "line", "field"] {
        let (got, want) = (&s["reason"][k], &e.reason[k]);
        if got != want {
            d.push(format!("reason.{k} {got}, the model says {want}"));
        }
    }
    let counts = [
        ("accepted_rows", e.accepted_rows),
        ("rejected_rows", e.rejected_rows),
        ("duplicate_rows", e.duplicate_rows),
    ];
    for (k, want) in counts {
        if s[k] != want {
            d.push(format!("{k} {}, the model says {want}", s[k]));
        }
    }
    let raw = w.get(&format!("raw/{product}/{name}"));
    let quarantine = w.get(&format!("quarantine/{product}/{name}.rejects.jsonl"));
    let published = e.action == "published";
    let want_raw = published.then(|| e.published.clone());
    let want_q = (published && e.rejected_rows > 0).then(|| e.quarantine.clone());
    if raw != want_raw {
        d.push(format!(
            "published {:?} bytes, the model says {:?}",
            raw.as_ref().map(Vec::len),
            want_raw.as_ref().map(Vec::len)
        ));
    }
    if quarantine != want_q {
        d.push(format!(
            "quarantine {:?}, the model says {:?}",
            quarantine.map(|q| String::from_utf8_lossy(&q).into_owned()),
            want_q.map(|q| String::from_utf8_lossy(&q).into_owned())
        ));
    }
    d
}

fn landing_agrees_with_the_model(kind: Kind) {
    let seeds = model::seeds(&format!("model::{kind:?}"), SEEDS);
    let mut failures = Vec::new();
    let mut cases = 0;
    // Cases by the model's outcome (published, or the refusal's kind), so a corpus
    // that stopped exercising an outcome shows.
    let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
    for (product, from_file) in PRODUCTS {
        let contract = model::contract_file(product);
        let w = World::new(kind, &format!("model-{product}"));
        let contract_arg = contract.display().to_string();
        for &seed in &seeds {
            for corpus_kind in KINDS {
                let content = model::corpus(&contract, corpus_kind, seed, LINES);
                for cap in caps(&contract, &content) {
                    let opts = Opts {
                        max_rejected_lines: cap,
                        ..Opts::default()
                    };
                    let e = model::expect(&contract, &content, opts);
                    let outcome = match e.reason["kind"].as_str() {
                        Some(kind) => kind.to_owned(),
                        None => e.action.clone(),
                    };
                    for &form in forms(corpus_kind) {
                        cases += 1;
                        *outcomes.entry(outcome.clone()).or_default() += 1;
                        let name = format!("{corpus_kind}-{seed}-{cap}-{form:?}.jsonl");
                        let input = w
                            .put_input(&format!("{name}{}", form.suffix()), &form.stored(&content));
                        let cap_arg = cap.to_string();
                        let mut args = vec!["--max-rejected-lines", cap_arg.as_str()];
                        if from_file {
                            args.extend(["--contract", contract_arg.as_str()]);
                        }
                        let env: &[(&str, &str)] = match form {
                            Form::Spilled => &[("LANDING_TEST_SPILL_EVERY", "5")],
                            _ => &[],
                        };
                        let r = w.run_env(&input, &args, env);
                        let d = differences(&w, product, &name, &r, &e);
                        if !d.is_empty() {
                            failures.push(format!(
                                "{kind:?} {product} {corpus_kind} seed {seed} cap {cap} {form:?}: {}\n{}",
                                d.join("; "),
                                r.stderr.lines().last().unwrap_or_default()
                            ));
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "model::{kind:?}: {cases} cases over seeds {seeds:?} ({outcomes:?}), {} disagreements",
        failures.len()
    );
    // Every outcome the corpora are built to reach is reached.
    for want in [
        "published",
        "prohibited_field",
        "id_collision",
        "reject_cap",
    ] {
        assert!(
            outcomes.contains_key(want),
            "no case ended {want}: {outcomes:?}"
        );
    }
    assert!(
        failures.is_empty(),
        "landing and the model disagree in {} of {cases} cases (replay with \
         LANDING_TEST_MODEL_SEED=<seed>):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

matrix! {
    landing_agrees_with_the_model: [local, seaweed, moto, localstack];
}
