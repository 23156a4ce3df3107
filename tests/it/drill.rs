//! `landing drill` passes against a local lake and both S3 servers, reports every
//! scenario, and leaves nothing behind in the lake.

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
            .seen()
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

matrix! {
    drill_passes_and_cleans_up: [local, seaweed, moto, localstack];
}
