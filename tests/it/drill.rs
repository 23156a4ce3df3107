//! `landing drill` against a local lake and every S3 server: it reports every
//! scenario and leaves nothing behind, and a kept drill's lake, read by the test and
//! compared with the reference model (not with the drill's own verdicts), ends as
//! each scenario requires.

use crate::support::model;
use crate::support::proxy::{Op, Proxy};
use crate::support::*;

fn drill_passes_and_cleans_up(kind: Kind) {
    let w = World::new(kind, "drill");
    let lake = w.lake_arg();
    // On S3 the drill and its children talk through a forwarding proxy, so the test
    // sees for itself the refusals the store scenarios report.
    let proxy = w.server().map(|s| Proxy::start(&s.endpoint()));
    let url = proxy.as_ref().map(Proxy::url);
    let env: Vec<(&str, &str)> = url
        .iter()
        .map(|u| ("AWS_ENDPOINT_URL", u.as_str()))
        .collect();
    let r = w.landing(
        &[
            "drill",
            "--lake",
            &lake,
            "--size-mib",
            "11",
            "--s3-part-size-mib",
            "5",
            "--json",
        ],
        &env,
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    let report = r.summary.expect("a JSON report on stdout");
    assert_eq!(report["passed"], true, "{report}");
    let rows = report["rows"].as_array().unwrap();
    let scenarios: Vec<&str> = rows
        .iter()
        .map(|r| r["scenario"].as_str().unwrap())
        .collect();
    let mut expected = vec!["crash mid-stream"];
    if w.is_s3() {
        expected.push("crash after-part:1");
    }
    expected.extend([
        "crash after-staging",
        "crash after-publish",
        "crash after-checkpoint",
        "store: create-if-absent twice",
        "store: If-Match wrong ETag",
        "store: conditional copy",
        "store: staged bytes hidden",
        "refusal (prohibited field)",
        "unchanged rerun",
    ]);
    assert_eq!(scenarios, expected);
    assert!(rows.iter().all(|r| r["held"] == true), "{report}");
    // The crash table, as a reader saw it right after each crash.
    let seen = |s: &str| rows.iter().find(|r| r["scenario"] == s).unwrap()["visible_after"].clone();
    assert_eq!(seen("crash mid-stream"), "old bytes");
    assert_eq!(seen("crash after-publish"), "new bytes");
    // The store's promises, as the probe found them on each backend.
    assert_eq!(seen("store: create-if-absent twice"), "412");
    assert_eq!(seen("store: If-Match wrong ETag"), "412");
    assert_eq!(seen("store: staged bytes hidden"), "hidden");
    let copy = match w.kind {
        Kind::S3(Server::Moto) => "not fenced",
        Kind::S3(Server::Localstack) => "unsafe",
        _ => "fenced",
    };
    assert_eq!(seen("store: conditional copy"), copy);
    // The lake, read independently of the drill's report: not a file or object left
    // anywhere under it (locks, history and guards included), no incomplete upload.
    let under_lake = |k: &String| match w.s3_parts() {
        None => k.starts_with(&format!("{LAKE_PREFIX}/")) && !k.ends_with('/'),
        Some((_, _, bucket)) => k.starts_with(&format!("s3://{bucket}/{LAKE_PREFIX}/")),
    };
    let left: Vec<String> = w
        .snapshot_everything()
        .into_keys()
        .filter(under_lake)
        .collect();
    assert!(left.is_empty(), "drill left objects: {left:?}");
    assert_eq!(w.leftovers(), Vec::<String>::new(), "drill left uploads");
    if let Some(proxy) = proxy {
        // create-if-absent twice and If-Match with a wrong ETag: the store said 412.
        let refused = proxy
            .settled()
            .iter()
            .filter(|s| s.op == Op::PutObject && s.status == Some(412))
            .count();
        assert!(refused >= 2, "PutObject 412s seen: {}", proxy.report());
    }
}

/// The table form names every scenario and the verdict.
#[test]
fn drill_prints_a_table() {
    let w = World::new(Kind::Local, "drill-table");
    let r = w.landing(&["drill", "--lake", &w.lake_arg(), "--size-mib", "2"], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("crash after-publish"), "{}", r.stdout);
    assert!(r.stdout.contains("all invariants held"), "{}", r.stdout);
}

/// A kept drill (`--keep`), judged from its namespace and the reference model, not
/// from its report: after each crash scenario's rerun, that scenario's lake holds
/// the model's bytes of the input in its inbox, a checkpoint naming that input's
/// SHA-256 (hashed here), a released lease and no staging; the refusal scenario's
/// history is a publish, the refusal and a skip, and its lake ends the same way.
fn a_kept_drill_ends_as_the_model_says(kind: Kind) {
    let w = World::new(kind, "drill-kept");
    let lake = w.lake_arg();
    let mut args = vec!["drill", "--lake", &lake, "--keep", "--json"];
    // On S3, large enough for two parts, so the after-part-1 crash has a part to
    // follow.
    args.extend(match w.is_s3() {
        true => ["--size-mib", "11", "--s3-part-size-mib", "5"].as_slice(),
        false => ["--size-mib", "2"].as_slice(),
    });
    let r = w.landing(&args, &[]);
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    let report = r.summary.expect("a JSON report");
    let id = report["drill_id"].as_str().expect("drill_id");
    let progress = model::contract_file("progress");
    let key = |scenario: &str, rest: &str| format!("drills/{id}/{scenario}/{rest}");
    let checkpoint_sha = |scenario: &str| {
        let c: serde_json::Value = serde_json::from_slice(
            &w.get(&key(scenario, "checkpoints/progress/drill.jsonl.json"))
                .expect("a checkpoint"),
        )
        .expect("checkpoint JSON");
        c["input_sha256"].as_str().expect("input_sha256").to_owned()
    };
    let mut crashes = vec![
        "mid-stream",
        "after-staging",
        "after-publish",
        "after-checkpoint",
    ];
    if w.is_s3() {
        crashes.push("after-part-1");
    }
    for scenario in crashes {
        let input = w
            .get(&key(scenario, "inbox/drill.jsonl"))
            .unwrap_or_else(|| panic!("{scenario}: no inbox kept"));
        let e = model::expect(&progress, &input, model::Opts::default());
        assert_eq!(
            e.action, "published",
            "{scenario}: the model refuses the drill's input"
        );
        assert!(
            w.get(&key(scenario, "raw/progress/drill.jsonl")) == Some(e.published),
            "{scenario}: the raw object is not the model's bytes of the input"
        );
        assert_eq!(checkpoint_sha(scenario), sha256(&input), "{scenario}");
        assert!(
            w.lease_is_free(&key(scenario, "locks/progress/drill.jsonl.lock")),
            "{scenario}: lease still held"
        );
    }
    // The refusal scenario publishes, is refused, then reruns the published input
    // (a skip): its run history says so, and its lake ends on the model's bytes.
    let mut actions: Vec<String> = w
        .snapshot_all()
        .into_iter()
        .filter(|(k, _)| k.starts_with(&key("refusal", "runs/progress/drill.jsonl/")))
        .map(|(_, (bytes, _))| {
            let v: serde_json::Value = serde_json::from_slice(&bytes).expect("a run record");
            v["action"].as_str().expect("action").to_owned()
        })
        .collect();
    actions.sort();
    assert_eq!(actions, ["published", "refused", "skipped"]);
    let input = w
        .get(&key("refusal", "inbox/drill.jsonl"))
        .expect("the input");
    let e = model::expect(&progress, &input, model::Opts::default());
    assert!(w.get(&key("refusal", "raw/progress/drill.jsonl")) == Some(e.published));
    assert_eq!(checkpoint_sha("refusal"), sha256(&input));
    let staged: Vec<String> = w
        .snapshot()
        .into_keys()
        .filter(|k| {
            let name = k.rsplit('/').next().unwrap_or(k);
            k.contains("/staging/") || (name.starts_with('.') && name.ends_with(".tmp"))
        })
        .collect();
    assert!(
        staged.is_empty(),
        "staging left in the kept drill: {staged:?}"
    );
}

matrix! {
    drill_passes_and_cleans_up: [local, seaweed, moto, localstack];
    a_kept_drill_ends_as_the_model_says: [local, seaweed, moto, localstack];
}
