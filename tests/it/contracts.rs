//! Product contracts as files (docs/contracts.md): a second product landed end to end
//! on a local lake and SeaweedFS, the `contract` subcommands, contract versions in
//! checkpoints, `verify` and `--rehash`, and the JSON Schema checked against a real
//! validator (python-jsonschema, pinned; `LANDING_TEST_JSONSCHEMA_PYTHON`).

use std::path::PathBuf;

use crate::inbox::inbox_run;
use crate::support::*;

const DAY: &str = "enrollment-2026-03-02.jsonl";
const RAW: &str = "raw/enrollment/enrollment-2026-03-02.jsonl";
const CKPT: &str = "checkpoints/enrollment/enrollment-2026-03-02.jsonl.json";
const QUAR: &str = "quarantine/enrollment/enrollment-2026-03-02.jsonl.rejects.jsonl";

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn contracts_dir() -> String {
    repo("contracts").display().to_string()
}

fn sample() -> Vec<u8> {
    std::fs::read(repo("examples/enrollment/enrollment-2026-03-02.jsonl")).unwrap()
}

fn enrollment(id: &str, seats: u32) -> String {
    format!(
        r#"{{"enrollment_id":"{id}","learner_id":"l-1","course_id":"c-1","action":"enrolled","seats":{seats},"paid":true,"enrolled_at":"2026-03-02T10:00:00+01:00"}}"#
    )
}

/// `landing run` of the enrollment product, contracts from the repository's folder.
fn run(w: &World, input: &str, args: &[&str]) -> Run {
    let dir = contracts_dir();
    let mut all = vec!["--product", "enrollment", "--contracts-dir", &dir];
    all.extend_from_slice(args);
    w.run(input, &all)
}

fn checkpoint(w: &World, key: &str) -> serde_json::Value {
    serde_json::from_slice(&w.get(key).expect("checkpoint exists")).expect("checkpoint parses")
}

/// The sample enrollment day publishes canonical lines (sorted keys, UTC times,
/// `null` for the absent cohort), quarantines the unknown field, collapses the
/// retry; a rerun skips and writes nothing.
fn enrollment_publishes_then_skips(kind: Kind) {
    let w = World::new(kind, "enroll");
    let input = w.put_input(DAY, &sample());
    let r = run(&w, &input, &["--max-rejected-lines", "1"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.action(), "published");
    let s = r.summary.as_ref().unwrap();
    assert_eq!(s["product"], "enrollment");
    assert_eq!(
        (
            &s["accepted_rows"],
            &s["rejected_rows"],
            &s["duplicate_rows"]
        ),
        (&4.into(), &1.into(), &1.into())
    );
    let published = String::from_utf8(w.get(RAW).unwrap()).unwrap();
    assert_eq!(
        published,
        concat!(
            r#"{"action":"enrolled","cohort":"2026-spring","course_id":"course-017","enrolled_at":"2026-03-02T07:15:00Z","enrollment_id":"enr-0001","learner_id":"learner-0041489","paid":true,"seats":1}"#,
            "\n",
            r#"{"action":"enrolled","cohort":null,"course_id":"course-017","enrolled_at":"2026-03-02T09:30:12.25Z","enrollment_id":"enr-0002","learner_id":"learner-0058935","paid":false,"seats":3}"#,
            "\n",
            r#"{"action":"withdrawn","cohort":null,"course_id":"course-004","enrolled_at":"2026-03-02T15:00:00Z","enrollment_id":"enr-0003","learner_id":"learner-0075822","paid":true,"seats":1}"#,
            "\n",
            r#"{"action":"enrolled","cohort":null,"course_id":"course-101","enrolled_at":"2026-03-02T12:00:00Z","enrollment_id":"enr-0005","learner_id":"learner-0099999","paid":true,"seats":1}"#,
            "\n",
        )
    );
    assert_eq!(
        w.get(QUAR).unwrap(),
        b"{\"line\":5,\"reason\":\"unknown_field\"}\n"
    );
    let c = checkpoint(&w, CKPT);
    assert_eq!(c["product"], "enrollment");
    assert_eq!(c["contract"]["name"], "enrollment");
    assert_eq!(c["contract"]["version"], "1");
    assert_eq!(
        c["contract"]["sha256"],
        sha256(&std::fs::read(repo("contracts/enrollment.json")).unwrap())
    );
    let before = w.snapshot();
    let again = run(&w, &input, &["--max-rejected-lines", "1"]);
    assert_eq!(again.action(), "skipped", "{}", again.stderr);
    assert_eq!(w.snapshot(), before);
}

/// A prohibited field of the enrollment contract (`phone`, not one of progress's)
/// refuses the file and names the field, never its value.
fn enrollment_prohibited_field_refuses(kind: Kind) {
    let w = World::new(kind, "enroll-prohibited");
    let bad = format!(
        "{}\n{}\n",
        enrollment("a", 1),
        enrollment("b", 1).replace("\"paid\"", "\"phone\":\"+44 7700 900123\",\"paid\"")
    );
    let input = w.put_input(DAY, bad.as_bytes());
    let r = run(&w, &input, &[]);
    assert_eq!(r.code, Some(65), "{}", r.stderr);
    let reason = &r.summary.as_ref().unwrap()["reason"];
    assert_eq!(
        (&reason["kind"], &reason["field"], &reason["line"]),
        (&"prohibited_field".into(), &"phone".into(), &2.into())
    );
    assert!(!r.stdout.contains("7700") && !r.stderr.contains("7700"));
    assert!(w.get(RAW).is_none() && w.get(CKPT).is_none());
}

/// An unknown field quarantines its line; a field of progress is unknown here.
fn enrollment_unknown_field_is_quarantined(kind: Kind) {
    let w = World::new(kind, "enroll-unknown");
    let body = format!(
        "{}\n{}\n{}\n",
        enrollment("a", 1),
        enrollment("b", 1).replace("\"paid\"", "\"lesson_id\":\"les_07\",\"paid\""),
        enrollment("c", 0)
    );
    let input = w.put_input(DAY, body.as_bytes());
    let r = run(&w, &input, &["--max-rejected-lines", "2"]);
    assert_eq!(r.action(), "published", "{}", r.stderr);
    assert_eq!(r.summary.as_ref().unwrap()["accepted_rows"], 1);
    assert_eq!(
        String::from_utf8(w.get(QUAR).unwrap()).unwrap(),
        "{\"line\":2,\"reason\":\"unknown_field\"}\n{\"line\":3,\"reason\":\"invalid_seats\"}\n"
    );
}

/// The same enrollment_id with another payload refuses the file at the repeat.
fn enrollment_id_collision_refuses(kind: Kind) {
    let w = World::new(kind, "enroll-collision");
    let body = format!(
        "{}\n{}\n{}\n",
        enrollment("a", 1),
        enrollment("b", 1),
        enrollment("a", 2)
    );
    let input = w.put_input(DAY, body.as_bytes());
    let r = run(&w, &input, &[]);
    assert_eq!(r.code, Some(65), "{}", r.stderr);
    let reason = &r.summary.as_ref().unwrap()["reason"];
    assert_eq!(
        (&reason["kind"], &reason["line"]),
        (&"id_collision".into(), &3.into())
    );
    assert!(w.get(RAW).is_none() && w.get(CKPT).is_none());
}

matrix! {
    enrollment_publishes_then_skips: [local, seaweed];
    enrollment_prohibited_field_refuses: [local, seaweed];
    enrollment_unknown_field_is_quarantined: [local, seaweed];
    enrollment_id_collision_refuses: [local, seaweed];
}

/// `contract check` accepts the shipped contracts and refuses a broken one with
/// exit 2, naming the file and the problem; `run` with it fails at startup.
#[test]
fn contract_check_validates_one_file() {
    let w = World::new(Kind::Local, "contract-check");
    for name in ["progress", "enrollment"] {
        let file = repo(&format!("contracts/{name}.json"))
            .display()
            .to_string();
        let r = w.landing(&["contract", "check", &file], &[]);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let s = r.summary.as_ref().unwrap();
        assert_eq!((&s["valid"], &s["name"]), (&true.into(), &name.into()));
    }
    let bad = w.tmp.path().join("orders.json");
    std::fs::write(
        &bad,
        r#"{"name":"orders","version":"1","identity":"order_id","max_line_bytes":100,"prohibited":[],"fields":[{"name":"amount","type":"decimal"}]}"#,
    )
    .unwrap();
    let bad = bad.display().to_string();
    let r = w.landing(&["contract", "check", &bad], &[]);
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr.contains(&bad) && r.stderr.contains("unknown type \"decimal\""),
        "{}",
        r.stderr
    );
    let input = w.put_input("orders.jsonl", b"{}\n");
    let lake = w.lake_arg();
    let r = w.landing(
        &["run", "--input", &input, "--lake", &lake],
        &[("LANDING_CONTRACT", &bad)],
    );
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains(&bad), "{}", r.stderr);
    assert!(w.get("checkpoints").is_none());
    // A contract whose name is not the product exits 2 naming the file
    // (docs/contracts.md section 4), from --contract and from --contracts-dir.
    let enrollment = repo("contracts/enrollment.json").display().to_string();
    let r = w.landing(
        &[
            "check",
            "--input",
            &input,
            "--product",
            "progress",
            "--contract",
            &enrollment,
        ],
        &[],
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&enrollment) && r.stderr.contains("not \"progress\""),
        "{}",
        r.stderr
    );
    let dir = w.tmp.path().join("misnamed");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo("contracts/enrollment.json"), dir.join("orders.json")).unwrap();
    let dir_arg = dir.display().to_string();
    let r = w.landing(
        &[
            "check",
            "--input",
            &input,
            "--product",
            "orders",
            "--contracts-dir",
            &dir_arg,
        ],
        &[],
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&dir.join("orders.json").display().to_string()),
        "{}",
        r.stderr
    );
    // A product without a contract is a usage error too.
    let r = w.landing(&["check", "--input", &input, "--product", "orders"], &[]);
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr.contains("no contract for product \"orders\""),
        "{}",
        r.stderr
    );
}

/// `verify --deep` names the contract's identity field when two published lines
/// share one: `enrollment_id` for enrollment, not `event_id`.
#[test]
fn verify_deep_names_the_identity_field() {
    let w = World::new(Kind::Local, "deep-identity");
    let body = format!("{}\n{}\n", enrollment("e-1", 1), enrollment("e-2", 2));
    let input = w.put_input(DAY, body.as_bytes());
    assert_eq!(run(&w, &input, &[]).code, Some(0));
    // A published line repeated by hand behind the checkpoint's back.
    let raw = format!("raw/enrollment/{DAY}");
    let mut published = w.get(&raw).unwrap();
    let first = published.split(|&b| b == b'\n').next().unwrap().to_vec();
    published.extend_from_slice(&first);
    published.push(b'\n');
    w.put(&raw, &published);
    // ... and the checkpoint made to match it, so only --deep can tell.
    let key = format!("checkpoints/enrollment/{DAY}.json");
    let mut c: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&w.get(&key).unwrap()).unwrap();
    for (k, v) in crate::inbox::current_identity(&w, &raw) {
        c.insert(k, v);
    }
    w.put(&key, &serde_json::to_vec(&c).unwrap());
    let (lake, dir) = (w.lake_arg(), contracts_dir());
    let v = w.landing(
        &[
            "verify",
            "--lake",
            &lake,
            "--deep",
            "--json",
            "--product",
            "enrollment",
            "--contracts-dir",
            &dir,
        ],
        &[],
    );
    let finding = v
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|f| f["finding"] == "duplicate_event_id")
        .unwrap_or_else(|| panic!("no duplicate finding:\n{}\n{}", v.stdout, v.stderr));
    let message = finding["detail"].as_str().expect("a detail");
    assert!(
        message.contains("repeat an earlier enrollment_id"),
        "{finding}"
    );
}

/// `contract show` prints the contract in force: the built-in progress file, or
/// the one --contracts-dir holds.
#[test]
fn contract_show_prints_the_contract_in_force() {
    let w = World::new(Kind::Local, "contract-show");
    let r = w.landing(&["contract", "show"], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let builtin = std::fs::read_to_string(repo("contracts/progress.json")).unwrap();
    assert_eq!(r.stdout, builtin);
    let dir = contracts_dir();
    let r = w.landing(
        &["contract", "show", "enrollment", "--contracts-dir", &dir],
        &[],
    );
    assert_eq!(
        r.stdout,
        std::fs::read_to_string(repo("contracts/enrollment.json")).unwrap()
    );
}

/// A changed contract leaves an unchanged input skipped; `verify` lists it as
/// landed under another contract (exit 0: a notice, not drift); `run --inbox
/// --rehash` re-lands it under the new one and records the new stamp.
#[test]
fn contract_versions_skip_verify_and_rehash() {
    let w = World::new(Kind::Local, "contract-versions");
    let name = "progress-2026-03-02.jsonl";
    let body = format!("{}\n{}\n", event("a", 1), event("b", 2));
    let input = w.put_input(name, body.as_bytes());
    let first = inbox_run(&w, &[], &[]);
    assert_eq!(first.by_name[name]["action"], "published");
    let ckpt = format!("checkpoints/progress/{name}.json");
    let v1 = checkpoint(&w, &ckpt)["contract"].clone();
    assert_eq!(
        (&v1["name"], &v1["version"]),
        (&"progress".into(), &"1".into())
    );
    let runs = w.tmp.path().join("lake/runs/progress").join(name);
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            std::fs::read_dir(&runs)
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(record["contract"], v1);

    // Version 2: the same rules, one more optional field.
    let v2_text = std::fs::read_to_string(repo("contracts/progress.json"))
        .unwrap()
        .replace("\"version\": \"1\"", "\"version\": \"2\"")
        .replace(
            "\"nullable\": true}",
            "\"nullable\": true},\n    {\"name\": \"device\", \"type\": \"string\", \"required\": false}",
        );
    let v2 = w.tmp.path().join("progress-v2.json");
    std::fs::write(&v2, &v2_text).unwrap();
    let v2 = v2.display().to_string();
    let with_v2 = ["--contract", v2.as_str()];
    let before = w.snapshot();
    let again = inbox_run(&w, &with_v2, &[]);
    assert_eq!(again.by_name[name]["action"], "skipped");
    let single = w.run(&input, &with_v2);
    assert_eq!(single.action(), "skipped", "{}", single.stderr);
    assert_eq!(
        w.snapshot(),
        before,
        "a contract change alone rewrote the lake"
    );

    let lake = w.lake_arg();
    let r = w.landing(&["verify", "--lake", &lake, "--contract", &v2], &[]);
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "{name}: other_contract: landed under contract progress@1"
        )) && r.stdout.contains("in force: progress@2"),
        "{}",
        r.stdout
    );
    let r = w.landing(&["verify", "--lake", &lake, "--json"], &[]);
    assert_eq!(
        r.summary.as_ref().unwrap()["other_contract"],
        0,
        "{}",
        r.stdout
    );

    let rehash = inbox_run(&w, &["--rehash", "--contract", &v2], &[]);
    assert_eq!(
        rehash.by_name[name]["action"], "published",
        "{}",
        rehash.run.stderr
    );
    let stamp = checkpoint(&w, &ckpt)["contract"].clone();
    assert_eq!(stamp["version"], "2");
    assert_eq!(stamp["sha256"], sha256(v2_text.as_bytes()));
    // The new field is published as null for every line.
    let published = String::from_utf8(w.get(&format!("raw/progress/{name}")).unwrap()).unwrap();
    assert_eq!(
        published.matches("\"device\":null").count(),
        2,
        "{published}"
    );
    let r = w.landing(
        &["verify", "--lake", &lake, "--contract", &v2, "--json"],
        &[],
    );
    assert_eq!(
        r.summary.as_ref().unwrap()["other_contract"],
        0,
        "{}",
        r.stdout
    );
    let unchanged = inbox_run(&w, &["--rehash", "--contract", &v2], &[]);
    assert_eq!(unchanged.by_name[name]["action"], "skipped");
}

// ----- the JSON Schema against python-jsonschema --------------------------------

/// The edge cases of docs/interface.md for `progress`, one line each.
fn edge_corpus() -> Vec<Vec<u8>> {
    let good = event("evt_1", 1);
    let with = |field: &str, value: &str| -> String {
        let mut v: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&good).unwrap();
        v.remove(field);
        let rest = serde_json::to_string(&v).unwrap();
        format!("{{\"{field}\":{value},{}", &rest[1..])
    };
    let mut lines: Vec<String> = vec![
        good.clone(),
        good.replace("}", ",\"checkpoint\":null}"),
        good.replace("}", ",\"checkpoint\":-9223372036854775808}"),
        "{}".into(),
        "[]".into(),
        "1".into(),
        "\"str\"".into(),
        "{".into(),
        "{\"a\":NaN}".into(),
        good.replace("}", ",\"email\":\"x\"}"),
        good.replace("}", ",\"colour\":1}"),
        good.replace("}", ",\"event_id\":\"evt_1\"}"),
        good.replace("\"event_id\"", "\"e\\u0076ent_id\""),
        good.replace("evt_1", "evt\\u0031"),
        good.replace("evt_1", "evt\\ud800"),
        good.replace("evt_1", "a\\nb"),
        good.replace("evt_1", "a\\u007fb"),
        good.replace("evt_1", "é😀"),
        good.replace("completed", "c\\u006fmpleted"),
    ];
    for (field, values) in [
        (
            "event_id",
            &[
                "\"\"",
                "1",
                "null",
                "[\"a\"]",
                "{\"email\":1}",
                "\"\\u0000\"",
            ][..],
        ),
        (
            "event_type",
            &["\"started\"", "\"Completed\"", "\"checkpoint\"", "1"][..],
        ),
        (
            "attempt_number",
            &[
                "0",
                "-0",
                "-1",
                "1.0",
                "1e0",
                "1E2",
                "2147483647",
                "2147483648",
                "\"1\"",
                "true",
            ][..],
        ),
        (
            "checkpoint",
            &[
                "0",
                "-0",
                "1.5",
                "1.0",
                "true",
                "\"1\"",
                "9223372036854775807",
                "9223372036854775808",
            ][..],
        ),
        (
            "event_time",
            &[
                "\"2026-03-02T14:02:11Z\"",
                "\"2026-03-02t14:02:11.123456789z\"",
                "\"2026-03-02 14:02:11-00:00\"",
                "\"2026-03-02T14:02:11\"",
                "\"2026-03-02T14:02:11+0100\"",
                "\"2026-03-02T24:00:00Z\"",
                "\"2026-03-02T14:02:60Z\"",
                "\"2026-03-02T14:02:11.1234567890Z\"",
                "\"2026-02-30T00:00:00Z\"",
                "\"2024-02-29T00:00:00Z\"",
                "\"0000-01-01T00:30:00+01:00\"",
                "\"9999-12-31T23:30:00-01:00\"",
                "\"2026-03-02T14:02:11Z\\n\"",
                "1772460131",
            ][..],
        ),
    ] {
        lines.extend(values.iter().map(|v| with(field, v)));
    }
    let mut out: Vec<Vec<u8>> = lines.into_iter().map(String::into_bytes).collect();
    let mut bad_utf8 = good.into_bytes();
    bad_utf8[15] = 0xFF;
    out.push(bad_utf8);
    out
}

/// Lines mutated from valid ones (deterministic): where the rules' edges are.
fn generated_corpus(n: usize) -> Vec<Vec<u8>> {
    let seeds = [
        r#"{"event_id":"evt-1","learner_id":"learner-7","lesson_id":"lesson-3","event_type":"checkpoint","attempt_number":4,"event_time":"2026-03-02T00:00:09.255+00:00","checkpoint":4}"#,
        r#"{"checkpoint":null,"event_time":"2026-03-02T05:30:20.995+05:30","attempt_number":1,"event_type":"completed","lesson_id":"l","learner_id":"m","event_id":"e"}"#,
    ];
    let alphabet: Vec<char> = "{}[]\",:\\ 0123456789-+.eEtrufalsnZT_xé".chars().collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |below: usize| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) % below as u64) as usize
    };
    (0..n)
        .map(|k| {
            let mut chars: Vec<char> = seeds[k % seeds.len()].chars().collect();
            for _ in 0..1 + next(2) {
                let at = next(chars.len() + 1);
                let c = alphabet[next(alphabet.len())];
                match next(3) {
                    0 if at < chars.len() => {
                        chars.remove(at);
                    }
                    1 if at < chars.len() => chars[at] = c,
                    _ => chars.insert(at, c),
                }
            }
            chars.into_iter().collect::<String>().into_bytes()
        })
        .collect()
}

/// `landing check`'s verdict on one line: accepted, or quarantined or refused.
fn landing_accepts(w: &World, n: usize, line: &[u8]) -> bool {
    let mut body = line.to_vec();
    body.push(b'\n');
    let input = w.put_input(&format!("line-{n}.jsonl"), &body);
    let r = w.landing(
        &["check", "--input", &input, "--max-rejected-lines", "1"],
        &[],
    );
    let s = r
        .summary
        .as_ref()
        .unwrap_or_else(|| panic!("no summary: {}", r.stderr));
    match (r.code, s["action"].as_str()) {
        (Some(0), Some("checked")) => s["accepted_rows"] == 1,
        (Some(65), Some("checked" | "refused")) => false,
        other => panic!("landing check of line {n}: {other:?}\n{}", r.stderr),
    }
}

/// What JSON Schema cannot express (docs/contracts.md): a line may differ from
/// landing's verdict only for one of these, and each shows up in the corpus.
const BLIND: [&str; 4] = [
    "duplicate_key",
    "integral_float",
    "lone_surrogate",
    "calendar",
];

/// A producer that validates each line with `landing contract schema progress` and
/// python-jsonschema gets landing's verdict, except for the listed differences.
#[test]
fn json_schema_agrees_with_landing_check() {
    let python = std::env::var("LANDING_TEST_JSONSCHEMA_PYTHON").expect(
        "LANDING_TEST_JSONSCHEMA_PYTHON is not set: run under scripts/test-servers, which installs the pinned python-jsonschema",
    );
    let w = World::new(Kind::Local, "schema");
    let r = w.landing(&["contract", "schema", "progress"], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let schema_path = w.tmp.path().join("progress.schema.json");
    std::fs::write(&schema_path, &r.stdout).unwrap();

    let mut corpus = edge_corpus();
    let edges = corpus.len();
    corpus.extend(generated_corpus(400));
    let hex: String = corpus
        .iter()
        .map(|l| l.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n")
        .collect();
    let lines_path = w.tmp.path().join("lines.hex");
    std::fs::write(&lines_path, hex).unwrap();
    let out = std::process::Command::new(&python)
        .arg(repo("scripts/landing_test/programs/schema_verdicts.py"))
        .arg(&schema_path)
        .arg(&lines_path)
        .output()
        .expect("run the jsonschema venv's python");
    assert!(
        out.status.success(),
        "schema_verdicts.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(theirs.len(), corpus.len());

    let (mut agreed, mut accepted, mut expected) = (0, 0, std::collections::BTreeMap::new());
    for (n, (line, t)) in corpus.iter().zip(&theirs).enumerate() {
        let ours = landing_accepts(&w, n, line);
        let schema = t["verdict"] == "accept";
        accepted += usize::from(ours);
        if ours == schema {
            agreed += 1;
            continue;
        }
        let blind: Vec<&str> = t["blind"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|b| b.as_str())
            .collect();
        assert!(
            !ours && !blind.is_empty() && blind.iter().all(|b| BLIND.contains(b)),
            "line {n} ({}): landing {}, JSON Schema {}, not an expected difference",
            String::from_utf8_lossy(line),
            if ours { "accepts" } else { "rejects" },
            if schema { "accepts" } else { "rejects" },
        );
        for b in blind {
            *expected.entry(b).or_insert(0) += usize::from(n < edges);
        }
    }
    for b in BLIND {
        assert!(
            expected.get(b).copied().unwrap_or(0) > 0,
            "no edge case shows the expected difference {b}: {expected:?}"
        );
    }
    assert!(
        accepted > 30 && corpus.len() - accepted > 30,
        "{accepted} of {} lines accepted",
        corpus.len()
    );
    assert!(
        agreed * 10 > corpus.len() * 9,
        "agreed on {agreed} of {}",
        corpus.len()
    );
}
