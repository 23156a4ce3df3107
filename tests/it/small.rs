//! Inboxes of small inputs: without `--jobs`, the inputs in flight are
//! bounded by memory, so many small ones run at once and a large one alone; and what
//! runs send an S3 store, counted by the proxy: an output within one part is one
//! PutObject, and the sweep lists staging only when an earlier run of the input may
//! have left some (its lease was taken over, or not released clean).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::inbox::{inbox_arg, parse_inbox, put_inbox};
use crate::support::proxy::{Op, Proxy, Seen};
use crate::support::*;

/// Without `--jobs`, four small inputs are in flight at once: each run stops after
/// its staging, and while all four wait, the lake holds four leases (read from the
/// store, not from what the runs say).
fn small_inputs_run_several_at_once_by_default(kind: Kind) {
    let w = World::new(kind, "small-at-once");
    for i in 1..=4 {
        put_inbox(&w, &format!("s-{i}.jsonl"), &generated(50, i));
    }
    let (inbox, lake) = (inbox_arg(&w), w.lake_arg());
    let args = ["run", "--inbox", &inbox, "--lake", &lake];
    let paused = Paused::start_args(&w, &args, "after-staging", &[]);
    // The first one said so already; the other three while it still waits.
    paused.wait_for_count("landing: paused at", 3, Duration::from_secs(120));
    let held = held_leases(&w);
    assert_eq!(
        held.len(),
        4,
        "four small inputs in flight at once: {held:?}"
    );
    let r = parse_inbox(paused.finish());
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(r.totals["totals"]["published"], 4, "{}", r.ctx());
    for i in 1..=4 {
        let raw = w
            .get(&format!("raw/progress/s-{i}.jsonl"))
            .expect("published");
        assert!(
            raw == expected_publish(&generated(50, i)),
            "s-{i}: not the model's bytes"
        );
    }
}

/// Leases held (not released, not expired) under `locks/progress/`.
fn held_leases(w: &World) -> Vec<String> {
    w.zone_files("locks")
        .into_iter()
        // Not the local lake's guard files under `locks/.cas/`.
        .filter(|f| f.starts_with("progress/") && f.ends_with(".lock"))
        .filter(|f| {
            w.get(&format!("locks/{f}"))
                .is_some_and(|b| !lease_record_is_released(&b))
        })
        .collect()
}

/// Without `--jobs`, an input charged a whole run's share of the budget runs alone:
/// with `--max-memory 256MiB`, two inputs of 40,000 lines (~9 MB, charged forty
/// times that) never overlap, so while one is stopped after its staging, only its
/// lease is held; the other has not started.
fn large_inputs_run_alone_by_default(kind: Kind) {
    let w = World::new(kind, "large-alone");
    for i in 1..=2 {
        put_inbox(&w, &format!("large-{i}.jsonl"), &generated(40_000, i));
    }
    let (inbox, lake) = (inbox_arg(&w), w.lake_arg());
    let args = [
        "run",
        "--inbox",
        &inbox,
        "--lake",
        &lake,
        "--max-memory",
        "256MiB",
    ];
    let paused = Paused::start_args(&w, &args, "after-staging", &[]);
    let held = held_leases(&w);
    assert_eq!(held.len(), 1, "one large input at a time: {held:?}");
    let r = parse_inbox(paused.finish());
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(r.totals["totals"]["published"], 2, "{}", r.ctx());
    for i in 1..=2 {
        let raw = w
            .get(&format!("raw/progress/large-{i}.jsonl"))
            .expect("published");
        let want = expected_publish(&generated(40_000, i));
        assert!(raw == want, "large-{i}: not the model's bytes");
    }
}

/// Requests of one kind among `seen`, leaving out the copy-fence probe's keys.
fn count(seen: &[Seen], op: Op) -> usize {
    seen.iter()
        .filter(|s| s.op == op && !s.key.contains("/probe-"))
        .count()
}

/// Listings of the staging folder (the sweep's ListMultipartUploads and
/// ListObjectsV2) among `seen`.
/// Listings of staging by a run's sweep: those before its run record is written.
/// After it, the log's repair lists the product's staging once (counted apart).
fn staging_listings(seen: &[Seen]) -> usize {
    let (run, _) = around_run_record(seen);
    run.iter()
        .filter(|s| matches!(s.op, Op::ListMultipartUploads | Op::ListObjectsV2))
        .filter(|s| s.target.contains("staging"))
        .count()
}

/// The requests of one `run --input` before and after its run record's PutObject.
fn around_run_record(seen: &[Seen]) -> (&[Seen], &[Seen]) {
    let at = seen
        .iter()
        .position(|s| s.op == Op::PutObject && s.key.contains("/runs/"))
        .expect("the run wrote its record");
    seen.split_at(at + 1)
}

/// What the log's repair sent after a run's record: one listing of the product's
/// staging, and (where it found none) nothing more.
fn repair_requests(seen: &[Seen]) -> Vec<(Op, String)> {
    let (_, after) = around_run_record(seen);
    after.iter().map(|s| (s.op, s.target.clone())).collect()
}

/// A run sweeps only after a run that may have left staging: not on a first
/// landing, nor after a run that released its lease clean; after a run killed
/// between its checkpoint and its cleanup, the next run takes the expired lease
/// over, sweeps the staging object it left, and releases clean again. Each small
/// output is staged with one PutObject, never a multipart upload.
fn a_sweep_lists_staging_only_after_a_run_that_may_have_left_some(server: Server) {
    let mut w = World::new(Kind::S3(server), "sweep-when-needed");
    w.env
        .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    let proxy = Proxy::start(&server.endpoint());
    let url = proxy.url();
    let via = [("AWS_ENDPOINT_URL", url.as_str())];
    let mut from = 0;
    // The requests since the last call.
    let mut since = || {
        let seen = proxy.settled();
        let new = seen[from..].to_vec();
        from = seen.len();
        new
    };
    let input = w.put_input("day.jsonl", &generated(100, 1));
    let first = w.run_env(&input, &[], &via);
    assert_eq!(first.action(), "published", "{}", first.stderr);
    let seen = since();
    assert_eq!(staging_listings(&seen), 0, "first landing: no sweep");
    let repair = repair_requests(&seen);
    assert_eq!(repair.len(), 1, "the log's repair looks once: {repair:?}");
    assert_eq!(repair[0].0, Op::ListObjectsV2, "{repair:?}");
    assert!(repair[0].1.contains("staging"), "{repair:?}");
    assert_eq!(count(&seen, Op::CreateMultipartUpload), 0);
    assert_eq!(count(&seen, Op::UploadPart), 0);
    assert_eq!(count(&seen, Op::CompleteMultipartUpload), 0);
    let staged = seen
        .iter()
        .filter(|s| s.op == Op::PutObject && s.key.contains("/staging/"))
        .filter(|s| !s.key.contains("/probe-"))
        .count();
    assert_eq!(staged, 1, "one PutObject stages the output");
    // Before its first publish the process probed that a second create is refused:
    // a scratch key created, created again with If-None-Match (the server's 412),
    // read back and removed.
    let probe: Vec<(Op, Option<u16>)> = seen
        .iter()
        .filter(|s| s.key.contains("/probe-create/"))
        .map(|s| (s.op, s.status))
        .collect();
    assert_eq!(
        probe,
        [
            (Op::PutObject, Some(200)),
            (Op::PutObject, Some(412)),
            (Op::GetObject, Some(200)),
            (Op::DeleteObject, Some(204)),
        ],
        "the create probe"
    );

    w.put_input("day.jsonl", &generated(100, 2));
    let second = w.run_env(&input, &[], &via);
    assert_eq!(second.action(), "published", "{}", second.stderr);
    assert_eq!(staging_listings(&since()), 0, "released clean: no sweep");

    w.put_input("day.jsonl", &generated(100, 3));
    let crashed = w.run_env(&input, &[], &[("LANDING_CRASH_AT", "after-checkpoint")]);
    assert_eq!(crashed.signal, Some(9), "{}", crashed.stderr);
    assert!(!w.leftovers().is_empty(), "the staging object stays");
    since();
    let rerun = w.run_env(&input, &["--lease-wait", TAKEOVER_WAIT], &via);
    assert_eq!(rerun.action(), "skipped", "{}", rerun.stderr);
    assert!(staging_listings(&since()) > 0, "taken over: a sweep");
    assert!(rerun.stderr.contains("swept leftovers"), "{}", rerun.stderr);
    assert_eq!(w.leftovers(), Vec::<String>::new());

    w.put_input("day.jsonl", &generated(100, 4));
    let after = w.run_env(&input, &[], &via);
    assert_eq!(after.action(), "published", "{}", after.stderr);
    assert_eq!(staging_listings(&since()), 0, "the sweeper released clean");
}

/// The commit log's folder under `raw/<product>/`: its requests are counted apart.
const LOG_FOLDER: &str = "/_landing_log/";

/// What a first landing of an inbox input sends, by operation and by the zone of
/// the key (`inbox`, or the lake's `checkpoints`, `locks`, `raw`, ...), leaving out
/// the copy-fence probe, the inbox listing and the commit log.
fn requests_by_zone(seen: &[Seen]) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for s in seen {
        if s.key.contains("/probe-") || s.op == Op::ListObjectsV2 || s.key.contains(LOG_FOLDER) {
            continue;
        }
        let zone = match s.key.strip_prefix("lake/") {
            Some(rest) => rest.split('/').next().unwrap_or(""),
            None => s.key.split('/').next().unwrap_or(""),
        };
        *by.entry(format!("{:?} {zone}", s.op)).or_insert(0) += 1;
    }
    by
}

/// The request budget of a small input's first landing from an inbox, 9 in all on
/// a store that fences copies (SeaweedFS, docs/design.md, "Which stores fence a copy"), 11 elsewhere: the
/// checkpoint is read once (the cheap skip's read serves the run, whose lease was
/// new); the published name and the quarantine are looked at only where a copy is
/// not fenced (a new lease and no checkpoint mean no run ever wrote them, and a
/// fenced create refuses one placed by hand); no HEAD follows the copy (its answer
/// names the object). The checkpoint then records the size and ETag a HEAD of the
/// published object reports, so an unchanged rerun skips every input without
/// reading it. The commit log adds one PUT per input, and for the process one read
/// and one write of its hint.
fn an_inbox_first_landing_sends_nine_requests_per_input_where_copies_are_fenced(server: Server) {
    let w = World::new(Kind::S3(server), "nine-requests");
    const N: usize = 3;
    for i in 1..=N {
        put_inbox(&w, &format!("s-{i}.jsonl"), &generated(200, i as u64));
    }
    let proxy = Proxy::start(&server.endpoint());
    let url = proxy.url();
    let via = [("AWS_ENDPOINT_URL", url.as_str())];
    let (inbox, lake) = (inbox_arg(&w), w.lake_arg());
    let r = parse_inbox(w.landing(&["run", "--inbox", &inbox, "--lake", &lake], &via));
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(r.totals["totals"]["published"], N, "{}", r.ctx());
    let seen = proxy.settled();
    let expected: BTreeMap<String, usize> = [
        ("GetObject checkpoints", 1),
        ("PutObject locks", 2),
        ("GetObject inbox", 1),
        ("PutObject staging", 1),
        ("CopyObject raw", 1),
        ("PutObject checkpoints", 1),
        ("DeleteObject staging", 1),
        ("PutObject runs", 1),
    ]
    .into_iter()
    // Moto copies whatever the condition, and LocalStack is never sent one.
    .chain(match server {
        Server::Seaweed => vec![],
        Server::Moto | Server::Localstack => {
            vec![("HeadObject raw", 1), ("HeadObject quarantine", 1)]
        }
    })
    .map(|(k, n)| (k.to_owned(), n * N))
    .collect();
    assert_eq!(requests_by_zone(&seen), expected, "requests of {N} inputs");
    // The commit log: the inputs of one process append in turn, so no run races
    // another for a number; the process reads the hint once (absent on a new log),
    // creates one entry per input and points the hint at its first.
    let mut log: BTreeMap<String, usize> = BTreeMap::new();
    for s in seen.iter().filter(|s| s.key.contains(LOG_FOLDER)) {
        let what = if s.key.ends_with("/_last") {
            "_last"
        } else {
            "entry"
        };
        let status = s.status.map_or("no answer".into(), |c| c.to_string());
        *log.entry(format!("{:?} {what} {status}", s.op))
            .or_insert(0) += 1;
    }
    let expected_log: BTreeMap<String, usize> = [
        ("GetObject _last 404".to_owned(), 1),
        ("PutObject entry 200".to_owned(), N),
        ("PutObject _last 200".to_owned(), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(log, expected_log, "the log's requests for {N} inputs");
    for i in 1..=N {
        let name = format!("s-{i}.jsonl");
        let ckpt: serde_json::Value = serde_json::from_slice(
            &w.get(&format!("checkpoints/progress/{name}.json"))
                .expect("checkpoint"),
        )
        .expect("checkpoint JSON");
        let (size, marker) = w
            .published_marker(&format!("raw/progress/{name}"))
            .expect("published");
        assert_eq!(ckpt["published_size"], size, "{name}: size");
        assert_eq!(
            ckpt["published_etag"], marker["published_etag"],
            "{name}: the checkpoint records the ETag a HEAD reports"
        );
    }
    let again = parse_inbox(w.landing(&["run", "--inbox", &inbox, "--lake", &lake], &via));
    assert_eq!(again.run.code, Some(0), "{}", again.ctx());
    assert_eq!(again.totals["totals"]["skipped"], N, "{}", again.ctx());
    let reads = proxy.seen()[seen.len()..]
        .iter()
        .filter(|s| s.op == Op::GetObject && s.key.starts_with("inbox/"))
        .count();
    assert_eq!(reads, 0, "an unchanged rerun reads no input");
}

matrix! {
    small_inputs_run_several_at_once_by_default: [local, seaweed];
    large_inputs_run_alone_by_default: [local];
}

matrix! {
    s3 a_sweep_lists_staging_only_after_a_run_that_may_have_left_some: [seaweed, moto];
    s3 an_inbox_first_landing_sends_nine_requests_per_input_where_copies_are_fenced: [seaweed, moto, localstack];
}
