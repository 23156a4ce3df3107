//! `--pushgateway`: a real Pushgateway (Debian's, on 127.0.0.1) receives a publish,
//! a skip, a refusal and an inbox run; each test scrapes its `/metrics` and checks
//! the values against what the run printed. A stopped Pushgateway and one that
//! hangs change neither the outcome nor the exit code, and the run still ends. The
//! dashboard and the alerts in k8s/ query only metrics a scrape shows.

use serde_json::Value;

use crate::support::pushgateway::{closed_port, Pushgateway, Scrape};
use crate::support::*;

const GOOD: &str = "progress-2026-03-02.jsonl";
const REFUSED: &str = "progress-2026-03-03.jsonl";

fn example(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/examples/inbox/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn k8s(name: &str) -> String {
    std::fs::read_to_string(format!("{}/k8s/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The run group's labels (an unsharded run of product `progress`).
const RUN: [(&str, &str); 2] = [("job", "landing"), ("product", "progress")];

fn run_value(s: &Scrape, name: &str, extra: &[(&str, &str)]) -> f64 {
    let mut labels = RUN.to_vec();
    labels.extend_from_slice(extra);
    // The marks group has the same job and product; the run group has no `marks`.
    let found: Vec<_> = s
        .find(name, &labels)
        .into_iter()
        .filter(|x| !x.labels.contains_key("marks"))
        .collect();
    assert_eq!(found.len(), 1, "{name}{extra:?}:\n{}", s.landing_lines());
    found[0].value
}

fn mark(s: &Scrape, name: &str) -> Option<f64> {
    let found = s.find(name, &[("job", "landing"), ("marks", "last")]);
    found.first().map(|x| x.value)
}

fn outcome(s: &Scrape, outcome: &str) -> f64 {
    run_value(s, "landing_run_inputs", &[("outcome", outcome)])
}

fn rows(s: &Scrape, kind: &str) -> f64 {
    run_value(s, "landing_run_rows", &[("kind", kind)])
}

fn count(summary: &Value, key: &str) -> f64 {
    summary[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {summary}")) as f64
}

/// A publish: one published input, its rows and bytes, exit 0, and both marks at
/// the run's end.
#[test]
fn a_publish_is_pushed() {
    let gw = Pushgateway::start();
    let w = World::new(Kind::Local, "push-publish");
    let bytes = example(GOOD);
    let input = w.put_input(GOOD, &bytes);
    let r = w.run(
        &input,
        &["--max-rejected-lines", "1", "--pushgateway", &gw.url()],
    );
    assert_eq!((r.code, r.action()), (Some(0), "published"), "{}", r.stderr);
    let summary = r.summary.as_ref().unwrap();
    let s = gw.scrape();
    assert_eq!(outcome(&s, "published"), 1.0);
    for other in [
        "skipped",
        "refused",
        "busy",
        "conflict",
        "failed",
        "interrupted",
        "not_started",
    ] {
        assert_eq!(outcome(&s, other), 0.0, "{other}");
    }
    // The sample day's counts are known (README): 5 accepted, 1 rejected, 1
    // duplicate; the scrape and the run's own summary must both say so.
    for (kind, known) in [("accepted", 5.0), ("rejected", 1.0), ("duplicate", 1.0)] {
        assert_eq!(rows(&s, kind), known, "{kind} in the scrape");
        assert_eq!(count(summary, &format!("{kind}_rows")), known, "{kind}");
    }
    assert_eq!(run_value(&s, "landing_run_exit_code", &[]), 0.0);
    assert_eq!(
        run_value(&s, "landing_run_bytes", &[("direction", "in")]),
        bytes.len() as f64
    );
    assert!(run_value(&s, "landing_run_bytes", &[("direction", "out")]) > 0.0);
    for stage in ["lease", "stream", "promote", "checkpoint"] {
        assert!(
            s.find("landing_run_stage_seconds", &[("stage", stage)])
                .len()
                == 1,
            "stage {stage}:\n{}",
            s.landing_lines()
        );
    }
    let end = run_value(&s, "landing_run_end_timestamp_seconds", &[]);
    assert_eq!(
        mark(&s, "landing_last_success_timestamp_seconds"),
        Some(end)
    );
    assert_eq!(
        mark(&s, "landing_last_publish_timestamp_seconds"),
        Some(end)
    );
    // The lake's first commit log entry, as the summary says too.
    assert_eq!(mark(&s, "landing_log_sequence"), Some(1.0));
    assert_eq!(count(r.summary.as_ref().unwrap(), "log_sequence"), 1.0);
    assert!(
        s.find("landing_input_outcome", &[]).is_empty(),
        "nothing needs a human"
    );
    assert!(r.stderr.contains("metrics pushed"), "{}", r.stderr);
}

/// A skip replaces the run group (no rows published, one input skipped) and moves
/// the last success, not the last publish.
#[test]
fn a_skip_moves_the_last_success_only() {
    let gw = Pushgateway::start();
    let w = World::new(Kind::Local, "push-skip");
    let input = w.put_input(GOOD, &example(GOOD));
    let args = ["--max-rejected-lines", "1", "--pushgateway", &gw.url()];
    assert_eq!(w.run(&input, &args).code, Some(0));
    let published = gw.scrape();
    let r = w.run(&input, &args);
    assert_eq!((r.code, r.action()), (Some(0), "skipped"), "{}", r.stderr);
    let s = gw.scrape();
    assert_eq!(
        (outcome(&s, "skipped"), outcome(&s, "published")),
        (1.0, 0.0)
    );
    // The summary of a skip repeats the checkpoint's counts; nothing was published.
    assert_eq!(count(r.summary.as_ref().unwrap(), "accepted_rows"), 5.0);
    assert_eq!(rows(&s, "accepted"), 0.0);
    let end = run_value(&s, "landing_run_end_timestamp_seconds", &[]);
    assert_eq!(
        mark(&s, "landing_last_success_timestamp_seconds"),
        Some(end)
    );
    assert_eq!(
        mark(&s, "landing_last_publish_timestamp_seconds"),
        mark(&published, "landing_last_publish_timestamp_seconds"),
        "a skip keeps the last publish"
    );
    // It keeps the log's number too, and names the entry of the publish it found.
    assert_eq!(mark(&s, "landing_log_sequence"), Some(1.0));
    assert_eq!(count(r.summary.as_ref().unwrap(), "log_sequence"), 1.0);
    assert!(end > mark(&published, "landing_last_success_timestamp_seconds").unwrap());
}

/// A refusal: exit 65 pushed, the input named as needing a human, and the last
/// success of the earlier run kept.
#[test]
fn a_refusal_is_pushed_and_keeps_the_last_success() {
    let gw = Pushgateway::start();
    let w = World::new(Kind::Local, "push-refusal");
    let good = w.put_input(GOOD, &example(GOOD));
    let args = ["--max-rejected-lines", "1", "--pushgateway", &gw.url()];
    assert_eq!(w.run(&good, &args).code, Some(0));
    let before = gw.scrape();
    let bad = w.put_input(REFUSED, &example(REFUSED));
    let r = w.run(&bad, &args);
    assert_eq!((r.code, r.action()), (Some(65), "refused"), "{}", r.stderr);
    let s = gw.scrape();
    assert_eq!(run_value(&s, "landing_run_exit_code", &[]), 65.0);
    assert_eq!(
        (outcome(&s, "refused"), outcome(&s, "published")),
        (1.0, 0.0)
    );
    assert_eq!(
        run_value(
            &s,
            "landing_input_outcome",
            &[("input", REFUSED), ("outcome", "refused")]
        ),
        1.0
    );
    for m in [
        "landing_last_success_timestamp_seconds",
        "landing_last_publish_timestamp_seconds",
    ] {
        assert_eq!(mark(&s, m), mark(&before, m), "{m} survives a refusal");
    }
}

/// A run that waits for a lease another run holds, in vain: busy (exit 75), its
/// wait counted, the input named; neither a success nor a publish, so no mark.
#[test]
fn a_busy_run_counts_its_lease_wait() {
    let gw = Pushgateway::start();
    let w = World::new(Kind::Local, "push-busy");
    let name = "progress-2026-03-04.jsonl";
    let input = w.put_input(name, format!("{}\n", event("b", 1)).as_bytes());
    w.put(&format!("locks/progress/{name}.lock"), &live_lease());
    let r = w.run(&input, &["--lease-wait", "1", "--pushgateway", &gw.url()]);
    assert_eq!(r.code, Some(75), "{}", r.stderr);
    let s = gw.scrape();
    assert_eq!(run_value(&s, "landing_run_exit_code", &[]), 75.0);
    assert_eq!(outcome(&s, "busy"), 1.0);
    assert_eq!(run_value(&s, "landing_run_lease_waits", &[]), 1.0);
    assert_eq!(
        run_value(
            &s,
            "landing_input_outcome",
            &[("input", name), ("outcome", "busy")]
        ),
        1.0
    );
    assert_eq!(mark(&s, "landing_last_success_timestamp_seconds"), None);
    assert_eq!(mark(&s, "landing_last_publish_timestamp_seconds"), None);
}

/// A lease record of a live run on another host.
fn live_lease() -> Vec<u8> {
    serde_json::json!({
        "run_id": "other-run", "host": "elsewhere", "pid": 1, "boot_id": "another-machine",
        "pid_ns": "pid:[1]", "acquired_at": "2026-01-01T00:00:00Z",
        "expires_at": "2999-01-01T00:00:00Z",
    })
    .to_string()
    .into_bytes()
}

/// An inbox with one input to publish, one already landed (by an earlier night that
/// pushed too), one refused and one whose lease another run holds.
fn inbox_night(gw: &Pushgateway, extra: &[&str]) -> (InboxNight, Scrape) {
    let w = World::new(Kind::Local, "push-inbox");
    let dir = w.tmp.path().join("inbox");
    let old = "progress-2026-03-01.jsonl";
    let busy = "progress-2026-03-04.jsonl";
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(old), example(GOOD)).unwrap();
    let inbox = dir.display().to_string();
    let lake = w.lake_arg();
    let url = gw.url();
    let base = [
        "run",
        "--inbox",
        &inbox,
        "--lake",
        &lake,
        "--max-rejected-lines",
        "1",
        "--pushgateway",
        &url,
    ];
    assert_eq!(w.landing(&base, &[]).code, Some(0), "the earlier night");
    let earlier = gw.scrape();
    std::fs::write(dir.join(GOOD), example(GOOD)).unwrap();
    std::fs::write(dir.join(REFUSED), example(REFUSED)).unwrap();
    std::fs::write(dir.join(busy), format!("{}\n", event("b", 1))).unwrap();
    w.put(&format!("locks/progress/{busy}.lock"), &live_lease());
    let mut args = base.to_vec();
    args.extend_from_slice(extra);
    let r = w.landing(&args, &[]);
    let s = gw.scrape();
    (
        InboxNight {
            run: r,
            busy,
            earlier,
        },
        s,
    )
}

struct InboxNight {
    run: Run,
    busy: &'static str,
    /// The scrape after the earlier night.
    earlier: Scrape,
}

#[test]
fn an_inbox_run_is_pushed() {
    let gw = Pushgateway::start();
    let (night, s) = inbox_night(&gw, &[]);
    let r = &night.run;
    assert_eq!(r.code, Some(65), "refused outranks busy:\n{}", r.stderr);
    let totals = &r.summary.as_ref().expect("the totals line")["totals"];
    // The night is known: one input of each outcome but failed.
    for (o, known) in [
        ("published", 1.0),
        ("skipped", 1.0),
        ("refused", 1.0),
        ("busy", 1.0),
        ("failed", 0.0),
    ] {
        assert_eq!(outcome(&s, o), known, "{o} in the scrape");
        assert_eq!(count(totals, o), known, "{o}: {totals}");
    }
    // Rows: those of the one published input, the sample day (5, 1, 1).
    for (kind, known) in [("accepted", 5.0), ("rejected", 1.0), ("duplicate", 1.0)] {
        assert_eq!(rows(&s, kind), known, "{kind}");
    }
    assert_eq!(run_value(&s, "landing_run_exit_code", &[]), 65.0);
    let attention = s.find("landing_input_outcome", &[]);
    let named: Vec<(&str, &str)> = attention
        .iter()
        .map(|x| (x.labels["input"].as_str(), x.labels["outcome"].as_str()))
        .collect();
    assert_eq!(named, vec![(REFUSED, "refused"), (night.busy, "busy")]);
    assert_eq!(
        mark(&s, "landing_last_success_timestamp_seconds"),
        Some(run_value(
            &night.earlier,
            "landing_run_end_timestamp_seconds",
            &[]
        )),
        "exit 65 is not a success: the earlier night's mark stays"
    );
    assert_eq!(
        mark(&s, "landing_last_publish_timestamp_seconds"),
        Some(run_value(&s, "landing_run_end_timestamp_seconds", &[]))
    );
    // The scrape, for a person to read (--nocapture).
    println!("scrape after an inbox run:\n{}", s.landing_lines());
}

/// A sharded run is its own group, the shard as its label.
#[test]
fn a_sharded_run_has_its_own_group() {
    let gw = Pushgateway::start();
    let (night, s) = inbox_night(&gw, &["--shard", "0/1"]);
    assert_eq!(night.run.code, Some(65), "{}", night.run.stderr);
    assert_eq!(s.value("landing_run_exit_code", &[("shard", "0/1")]), 65.0);
}

/// A Pushgateway that is not there: the outcome and exit code stand, and the log
/// says the metrics were not pushed.
#[test]
fn a_stopped_pushgateway_changes_nothing() {
    let w = World::new(Kind::Local, "push-stopped");
    let url = format!("http://127.0.0.1:{}", closed_port());
    let good = w.put_input(GOOD, &example(GOOD));
    let args = ["--max-rejected-lines", "1", "--pushgateway", &url];
    let r = w.run(&good, &args);
    assert_eq!((r.code, r.action()), (Some(0), "published"), "{}", r.stderr);
    assert!(r.stderr.contains("metrics not pushed"), "{}", r.stderr);
    let bad = w.put_input(REFUSED, &example(REFUSED));
    let r = w.run(&bad, &args);
    assert_eq!((r.code, r.action()), (Some(65), "refused"), "{}", r.stderr);
    assert!(r.stderr.contains("metrics not pushed"), "{}", r.stderr);
}

/// A Pushgateway that accepts connections and never answers: the run ends after
/// the push timeout with its own outcome. Without the bound it would never end, so
/// the test's bound (the timeout plus 60 s for the run itself) is far from tight.
#[test]
fn a_hanging_pushgateway_is_cut_off_by_the_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // Accept, read nothing, answer nothing; hold every connection until the end.
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in listener.incoming() {
            match c {
                Ok(c) => conns.push(c),
                Err(_) => break,
            }
            if conns.len() >= 2 {
                break;
            }
        }
        conns.len()
    });
    let w = World::new(Kind::Local, "push-hang");
    let good = w.put_input(GOOD, &example(GOOD));
    // The Pushgateway never answers: only the push timeout can end the run.
    let child = w
        .command(
            &[
                "run",
                "--input",
                &good,
                "--lake",
                &w.lake_arg(),
                "--max-rejected-lines",
                "1",
                "--pushgateway",
                &url,
                "--pushgateway-timeout",
                "2",
            ],
            &[],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let r = Run::from_output(wait_or_kill(
        child,
        HANG_GUARD,
        "a run pushing to a hung gateway",
    ));
    assert_eq!((r.code, r.action()), (Some(0), "published"), "{}", r.stderr);
    assert!(r.stderr.contains("did not answer in time"), "{}", r.stderr);
    // Wake the acceptor once more so it ends: it saw the job's connection.
    let _ = std::net::TcpStream::connect(url.trim_start_matches("http://"));
    assert!(held.join().unwrap() >= 1, "the job connected");
}

/// Without --pushgateway nothing reaches a Pushgateway; --dry-run shows the setting
/// and a URL that is not http(s) is a usage error.
#[test]
fn the_setting_is_shown_and_checked() {
    let gw = Pushgateway::start();
    let w = World::new(Kind::Local, "push-none");
    let good = w.put_input(GOOD, &example(GOOD));
    let r = w.run(&good, &["--max-rejected-lines", "1"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        gw.scrape()
            .names()
            .iter()
            .all(|n| !n.starts_with("landing_")),
        "nothing pushed without --pushgateway"
    );
    let dry = |env: &[(&str, &str)]| {
        let r = w.run_env(&good, &["--dry-run"], env);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        serde_json::from_str::<Value>(r.stdout.trim()).unwrap()["pushgateway"].clone()
    };
    assert_eq!(dry(&[]), Value::Null);
    assert_eq!(
        dry(&[("LANDING_PUSHGATEWAY", &gw.url())]),
        serde_json::json!({"url": gw.url(), "timeout": 5})
    );
    let r = w.run_env(
        &good,
        &["--dry-run"],
        &[("LANDING_PUSHGATEWAY", "ftp://user:secret@example.org/")],
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--pushgateway"), "{}", r.stderr);
}

/// Every metric the dashboard and the alerts query is one a real scrape shows.
#[test]
fn the_dashboard_and_alerts_query_pushed_metrics() {
    let gw = Pushgateway::start();
    let (_, s) = inbox_night(&gw, &[]);
    let pushed = s.names();
    let docs = yaml_rust2::YamlLoader::load_from_str(&k8s("60-dashboard.yaml")).unwrap();
    let json = docs[0]["data"]["landing.json"]
        .as_str()
        .expect("data.landing.json");
    let dashboard: Value = serde_json::from_str(json).expect("the dashboard is valid JSON");
    let mut exprs = Vec::new();
    collect_queries(&dashboard, &mut exprs);
    assert!(exprs.len() >= 8, "{exprs:?}");
    let rules = yaml_rust2::YamlLoader::load_from_str(&k8s("50-prometheusrule.yaml")).unwrap();
    for group in rules[0]["spec"]["groups"].as_vec().expect("spec.groups") {
        for rule in group["rules"].as_vec().expect("rules") {
            exprs.push(rule["expr"].as_str().expect("expr").to_owned());
        }
    }
    let mut queried = std::collections::BTreeSet::new();
    for e in &exprs {
        for name in metric_names(e) {
            queried.insert(name);
        }
    }
    for panel in [
        "landing_run_inputs",
        "landing_run_rows",
        "landing_run_stage_seconds",
        "landing_run_bytes",
    ] {
        assert!(queried.contains(panel), "no panel queries {panel}");
    }
    let missing: Vec<_> = queried.difference(&pushed).collect();
    assert!(
        missing.is_empty(),
        "queried but not pushed: {missing:?}\n{}",
        s.landing_lines()
    );
}

/// Every `expr` and templating `query`/`definition` string in the dashboard.
fn collect_queries(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "definition" | "query", Value::String(s)) => out.push(s.clone()),
                    _ => collect_queries(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_queries(v, out)),
        _ => {}
    }
}

/// The job's metric names in a PromQL expression (and the Pushgateway's push time,
/// which the alerts read); label names, values and functions are not metrics.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    let mut in_braces = false;
    let mut word = String::new();
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        if c == '"' {
            // Skip a string literal (label values).
            let end = rest.find('"').unwrap_or(rest.len());
            rest = &rest[(end + 1).min(rest.len())..];
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
            continue;
        }
        if !in_braces && (word.starts_with("landing_") || word.starts_with("push_time")) {
            out.push(std::mem::take(&mut word));
        }
        word.clear();
        match c {
            '{' => in_braces = true,
            '}' => in_braces = false,
            _ => {}
        }
    }
    if word.starts_with("landing_") || word.starts_with("push_time") {
        out.push(word);
    }
    out
}
