//! Compressed inputs and outputs (docs/design.md § 9), through the built binary:
//! gzip and zstd inputs publish what their plain content does, bad streams are
//! refused with a documented reason, two forms of one input in one inbox land
//! neither, and `--output-compression` objects read back (DuckDB included) as the
//! plain ones. Inputs are compressed here with flate2 and zstd directly, as a
//! producer would, never with the job's own encoder.

use std::io::{Read, Write};

use serde_json::Value;

use crate::inbox::{inbox_run, put_inbox};
use crate::support::*;

const NAME: &str = "day.jsonl";
const RAW: &str = "raw/progress/day.jsonl";
const CKPT: &str = "checkpoints/progress/day.jsonl.json";

fn gzip(content: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    e.write_all(content).unwrap();
    e.finish().unwrap()
}

fn zstd(content: &[u8]) -> Vec<u8> {
    zstd::encode_all(content, 3).unwrap()
}

fn gunzip(stored: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(stored)
        .read_to_end(&mut out)
        .expect("a gzip stream");
    out
}

fn unzstd(stored: &[u8]) -> Vec<u8> {
    zstd::decode_all(stored).expect("a zstd stream")
}

fn checkpoint(w: &World, key: &str) -> Value {
    serde_json::from_slice(&w.get(key).expect("checkpoint exists")).expect("checkpoint parses")
}

fn assert_code(r: &Run, code: i32, action: &str, ctx: &str) {
    assert_eq!(
        r.code,
        Some(code),
        "{ctx}: exit code; stderr:\n{}",
        r.stderr
    );
    assert_eq!(r.action(), action, "{ctx}: stdout: {}", r.stdout);
}

/// The same events as a plain, a gzip and a zstd input publish identical bytes under
/// one name (the name without `.gz`/`.zst`), each identified by the hash of its
/// stored bytes; an unchanged compressed input is skipped; `check` counts alike;
/// `verify --deep` is clean.
fn same_events_publish_identical_bytes(kind: Kind) {
    let content = generated(20_000, 7);
    let reference = expected_publish(&content);
    let w = World::new(kind, "identical");
    let forms = [
        ("day.jsonl", content.clone()),
        ("day.jsonl.gz", gzip(&content)),
        ("day.jsonl.zst", zstd(&content)),
    ];
    let mut checked = Vec::new();
    for (file, stored) in &forms {
        let input = w.put_input(file, stored);
        let r = w.run(&input, &[]);
        assert_code(&r, 0, "published", file);
        let s = r.summary.as_ref().unwrap();
        assert_eq!(
            s["input_sha256"],
            sha256(stored),
            "{file}: identity of the stored bytes"
        );
        assert!(
            s["published_path"].as_str().unwrap().ends_with(RAW),
            "{file}: {}",
            s["published_path"]
        );
        assert!(
            w.get(RAW).unwrap() == reference,
            "{file}: published bytes differ"
        );
        let c = checkpoint(&w, CKPT);
        assert_eq!(c["input_name"], NAME, "{file}");
        assert_eq!(c["input_sha256"], sha256(stored), "{file}");
        assert_eq!(c["output_compression"], "none", "{file}");
        // The skip rule is unchanged: the same stored bytes are not landed again.
        let again = w.run(&input, &[]);
        assert_code(&again, 0, "skipped", file);
        let ck = w.landing(&["check", "--input", &input], &[]);
        assert_code(&ck, 0, "checked", file);
        let counts = ["accepted_rows", "rejected_rows", "duplicate_rows"]
            .map(|k| ck.summary.as_ref().unwrap()[k].as_u64());
        checked.push((file, counts));
    }
    // Each form's `check` counts what the model counts on the plain content.
    let m = model::expect(
        &model::contract_file("progress"),
        &content,
        model::Opts::default(),
    );
    let want = [m.accepted_rows, m.rejected_rows, m.duplicate_rows].map(Some);
    for (file, counts) in &checked {
        assert_eq!(*counts, want, "{file}: check's counts against the model's");
    }
    let v = w.landing(&["verify", "--lake", &w.lake_arg(), "--deep"], &[]);
    assert_eq!(v.code, Some(0), "verify --deep: {}{}", v.stdout, v.stderr);
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

/// A gzip of several members and a zstd of several frames (concatenated, as `cat`
/// and `pigz` make them) land every line of every part.
fn members_and_frames_land_every_line(kind: Kind) {
    let content = generated(9_000, 11);
    let reference = expected_publish(&content);
    // Cut on line ends, as a producer appending one member per batch does.
    let cuts: Vec<&[u8]> = content.split_inclusive(|&b| b == b'\n').collect();
    let parts: Vec<Vec<u8>> = cuts.chunks(3_000).map(|c| c.concat()).collect();
    assert_eq!(parts.len(), 3);
    for (file, stored) in [
        (
            "day.jsonl.gz",
            parts.iter().flat_map(|p| gzip(p)).collect::<Vec<u8>>(),
        ),
        (
            "day.jsonl.zst",
            parts.iter().flat_map(|p| zstd(p)).collect(),
        ),
    ] {
        let w = World::new(kind, "members");
        let r = w.run(&w.put_input(file, &stored), &[]);
        assert_code(&r, 0, "published", file);
        assert!(
            w.get(RAW).unwrap() == reference,
            "{file}: published bytes differ"
        );
    }
}

/// The line a broken gzip stream's refusal names (docs/interface.md section 2): the one
/// being decoded when the stream broke, one past the whole lines it decoded to, as
/// flate2's multi-member reader decodes the damaged bytes until its error.
fn line_when_broken(stored: &[u8]) -> u64 {
    use std::io::Read;
    let mut content = Vec::new();
    let read = flate2::read::MultiGzDecoder::new(stored).read_to_end(&mut content);
    assert!(read.is_err(), "the damaged stream decodes whole");
    content.iter().filter(|&&b| b == b'\n').count() as u64 + 1
}

/// Truncated or corrupt streams, and bytes after the last member, are refused: exit
/// 65, reason `corrupt_compression`, the previous publish and checkpoint kept, no
/// staging left. `check` says the same.
fn broken_streams_are_refused_keeping_the_previous_publish(kind: Kind) {
    let w = World::new(kind, "broken");
    let good = generated(30_000, 5);
    let first = w.run(&w.put_input("day.jsonl.gz", &gzip(&good)), &[]);
    assert_code(&first, 0, "published", "first publish");
    let before = w.snapshot();
    let damaged = |stored: &[u8]| {
        let mut d = stored.to_vec();
        let mid = d.len() / 2;
        for b in &mut d[mid..mid + 64] {
            *b ^= 0xa5;
        }
        d
    };
    let later = generated(30_000, 6);
    let (gz, zst) = (gzip(&later), zstd(&later));
    let mut trailing = gz.clone();
    trailing.extend_from_slice(b"{\"event_id\":\"after the last member\"}\n");
    let cases: [(&str, &str, Vec<u8>); 5] = [
        (
            "truncated gzip",
            "day.jsonl.gz",
            gz[..gz.len() * 2 / 3].to_vec(),
        ),
        (
            "truncated zstd",
            "day.jsonl.zst",
            zst[..zst.len() * 2 / 3].to_vec(),
        ),
        ("corrupt gzip", "day.jsonl.gz", damaged(&gz)),
        ("corrupt zstd", "day.jsonl.zst", damaged(&zst)),
        ("gzip with trailing bytes", "day.jsonl.gz", trailing),
    ];
    for (what, file, stored) in cases {
        let input = w.put_input(file, &stored);
        let r = w.run(&input, &[]);
        assert_code(&r, 65, "refused", what);
        let s = r.summary.as_ref().unwrap();
        assert_eq!(
            s["reason"]["kind"], "corrupt_compression",
            "{what}: {}",
            r.stdout
        );
        // zstd hands out a block's output only when the block is whole, so which
        // line "was being decoded" depends on how much output each read asked for;
        // gzip's answer does not.
        if file.ends_with(".gz") {
            assert_eq!(
                s["reason"]["line"],
                line_when_broken(&stored),
                "{what}: the line being decoded when the stream broke; {}",
                r.stdout
            );
        }
        assert_eq!(s["input_sha256"], sha256(&stored), "{what}");
        assert_eq!(s["published_path"], Value::Null, "{what}");
        assert!(w.snapshot() == before, "{what}: the lake changed");
        assert!(w.leftovers().is_empty(), "{what}: {:?}", w.leftovers());
        let ck = w.landing(&["check", "--input", &input], &[]);
        assert_eq!(ck.code, Some(65), "{what}: check; {}", ck.stderr);
        assert_eq!(
            ck.summary.as_ref().unwrap()["reason"]["kind"],
            "corrupt_compression"
        );
    }
}

/// A stream decoding past `--max-decompressed-bytes` is refused as a likely bomb
/// (`decompressed_too_large`), nothing published; under the limit the same kind of
/// stream (one line far longer than `--max-line-bytes`) is one quarantined line.
fn a_bomb_is_refused_and_a_long_line_quarantined(kind: Kind) {
    let w = World::new(kind, "bomb");
    // 48 MiB of one byte without a newline, between valid events: ~50 KiB stored.
    let mut content = event("e-1", 1).into_bytes();
    content.push(b'\n');
    content.extend(std::iter::repeat_n(b'a', 48 << 20));
    content.push(b'\n');
    content.extend(event("e-2", 1).into_bytes());
    content.push(b'\n');
    for (file, stored) in [
        ("day.jsonl.gz", gzip(&content)),
        ("day.jsonl.zst", zstd(&content)),
    ] {
        assert!(
            stored.len() < 1 << 20,
            "{file}: {} bytes stored",
            stored.len()
        );
        let input = w.put_input(file, &stored);
        let limit = (16u64 << 20).to_string();
        let r = w.run(&input, &["--max-decompressed-bytes", &limit]);
        assert_code(&r, 65, "refused", file);
        let s = r.summary.as_ref().unwrap();
        assert_eq!(
            s["reason"]["kind"], "decompressed_too_large",
            "{}",
            r.stdout
        );
        assert_eq!(w.get(RAW), None, "{file}: a bomb published something");
        assert!(w.leftovers().is_empty(), "{file}: {:?}", w.leftovers());
        // Under the (default) limit: the long line is quarantined as too long.
        let r = w.run(&input, &["--max-rejected-lines", "1"]);
        assert_code(&r, 0, "published", file);
        let s = r.summary.as_ref().unwrap();
        assert_eq!(
            (s["accepted_rows"].as_u64(), s["rejected_rows"].as_u64()),
            (Some(2), Some(1))
        );
        let q = String::from_utf8(
            w.get("quarantine/progress/day.jsonl.rejects.jsonl")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(q, "{\"line\":2,\"reason\":\"line_too_long\"}\n", "{file}");
        w.delete(CKPT);
        w.delete(RAW);
        w.delete("quarantine/progress/day.jsonl.rejects.jsonl");
    }
}

/// A compressed file of no events publishes an empty object as an empty plain file
/// does; so does a zero-byte `.gz` (too short for any magic: plain); a plain file
/// named `.gz` is read as plain (the bytes decide, not the name) and published under
/// the name without `.gz`.
fn empty_and_misnamed_inputs(kind: Kind) {
    let content = generated(2_000, 9);
    let reference = expected_publish(&content);
    let cases: [(&str, Vec<u8>, &[u8]); 4] = [
        ("empty gzip", gzip(b""), b""),
        ("empty zstd", zstd(b""), b""),
        ("zero-byte .gz", Vec::new(), b""),
        ("plain named .gz", content.clone(), &reference),
    ];
    for (what, stored, want) in cases {
        let w = World::new(kind, "empty");
        let file = if what.contains("zstd") {
            "day.jsonl.zst"
        } else {
            "day.jsonl.gz"
        };
        let r = w.run(&w.put_input(file, &stored), &[]);
        assert_code(&r, 0, "published", what);
        assert_eq!(
            r.summary.as_ref().unwrap()["input_sha256"],
            sha256(&stored),
            "{what}"
        );
        assert!(
            w.get(RAW).as_deref() == Some(want),
            "{what}: published bytes differ"
        );
    }
}

/// `day.jsonl` and `day.jsonl.gz` in one inbox are one input: neither lands, both are
/// reported failed with an `error` naming both, exit 1; other inputs (a zstd one,
/// taken by the default `--match`) land. With one form left, it lands; its next run
/// is a cheap skip.
fn two_forms_of_one_input_land_neither(kind: Kind) {
    let w = World::new(kind, "two-forms");
    let (a, b) = (generated(500, 1), generated(400, 2));
    put_inbox(&w, "day.jsonl", &a);
    put_inbox(&w, "day.jsonl.gz", &gzip(&a));
    put_inbox(&w, "other.jsonl.zst", &zstd(&b));
    let r = inbox_run(&w, &[], &[]);
    assert_eq!(r.run.code, Some(1), "{}", r.ctx());
    for name in ["day.jsonl", "day.jsonl.gz"] {
        assert_eq!(r.action(name), "failed", "{name}: {}", r.ctx());
        let error = r.by_name[name]["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("day.jsonl and day.jsonl.gz") && error.contains("neither was landed"),
            "{name}: {error}"
        );
    }
    assert_eq!(r.action("other.jsonl.zst"), "published", "{}", r.ctx());
    assert_eq!(w.get(RAW), None, "neither form may land");
    assert_eq!(w.get(CKPT), None, "neither form may checkpoint");
    assert!(w.get("raw/progress/other.jsonl").unwrap() == expected_publish(&b));
    // The producer's retry removed the plain copy: the gzip one lands.
    match w.s3_parts() {
        None => std::fs::remove_file(w.tmp.path().join("inbox/day.jsonl")).unwrap(),
        Some((rt, client, bucket)) => {
            rt.block_on(
                client
                    .delete_object()
                    .bucket(bucket)
                    .key("inbox/day.jsonl")
                    .send(),
            )
            .expect("delete the plain copy");
        }
    }
    let r = inbox_run(&w, &[], &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(r.action("day.jsonl.gz"), "published", "{}", r.ctx());
    assert!(w.get(RAW).unwrap() == expected_publish(&a));
    let r = inbox_run(&w, &[], &[]);
    assert_eq!(r.action("day.jsonl.gz"), "skipped", "{}", r.ctx());
    assert!(
        r.run.stderr.contains("not read"),
        "a cheap skip: {}",
        r.ctx()
    );
}

/// Shards split by the published name: the two forms of one input fall in one shard,
/// which reports them; every other shard lands its share and none of them.
fn shards_keep_the_forms_of_one_input_together(kind: Kind) {
    let w = World::new(kind, "shards");
    let days = ["d1.jsonl", "d2.jsonl", "d3.jsonl", "d4.jsonl", "d5.jsonl"];
    for (i, d) in days.iter().enumerate() {
        let content = generated(100, 40 + i as u64);
        put_inbox(&w, d, &content);
        put_inbox(&w, &format!("{d}.gz"), &gzip(&content));
    }
    let mut reported = std::collections::BTreeMap::new();
    for shard in ["0/3", "1/3", "2/3"] {
        let r = inbox_run(&w, &["--shard", shard], &[]);
        for (name, line) in &r.by_name {
            assert_eq!(line["action"], "failed", "{shard} {name}: {}", r.ctx());
            let day = name.trim_end_matches(".gz").to_owned();
            reported.entry(day).or_insert_with(Vec::new).push(shard);
        }
    }
    for d in days {
        let shards = reported.get(d).cloned().unwrap_or_default();
        assert_eq!(
            shards.len(),
            2,
            "{d}: both forms reported, by one shard: {shards:?}"
        );
        assert_eq!(
            shards[0], shards[1],
            "{d}: forms split over shards {shards:?}"
        );
    }
}

/// `--output-compression gzip|zstd`: the published name gets the suffix, the object
/// decodes to the plain publish, the checkpoint records the choice and the size
/// stored; a rerun skips; `verify --deep` is clean. Going back to `none` republishes
/// under the plain name and leaves the compressed object, which verify reports.
fn output_compression_publishes_a_suffixed_object(kind: Kind) {
    let content = generated(20_000, 21);
    let reference = expected_publish(&content);
    for (flag, suffix, decode) in [
        ("gzip", ".gz", gunzip as fn(&[u8]) -> Vec<u8>),
        ("zstd", ".zst", unzstd),
    ] {
        let w = World::new(kind, "output");
        let input = w.put_input("day.jsonl.gz", &gzip(&content));
        let args = ["--output-compression", flag];
        let r = w.run(&input, &args);
        assert_code(&r, 0, "published", flag);
        let key = format!("{RAW}{suffix}");
        let s = r.summary.as_ref().unwrap();
        assert!(
            s["published_path"].as_str().unwrap().ends_with(&key),
            "{flag}: {}",
            r.stdout
        );
        let stored = w.get(&key).expect("the compressed object");
        assert!(
            decode(&stored) == reference,
            "{flag}: decodes to other bytes"
        );
        assert_eq!(w.get(RAW), None, "{flag}: no plain object beside it");
        let c = checkpoint(&w, CKPT);
        assert_eq!(c["output_compression"], flag);
        assert_eq!(c["published_size"], stored.len());
        assert_code(&w.run(&input, &args), 0, "skipped", flag);
        let v = w.landing(&["verify", "--lake", &w.lake_arg(), "--deep"], &[]);
        assert_eq!(
            v.code,
            Some(0),
            "{flag}: verify --deep: {}{}",
            v.stdout,
            v.stderr
        );
        // Back to plain: republished under the plain name; the old object stays.
        let r = w.run(&input, &[]);
        assert_code(&r, 0, "published", "back to none");
        assert!(w.get(RAW).unwrap() == reference);
        assert!(
            r.stderr.contains("another --output-compression"),
            "{}",
            r.stderr
        );
        let v = w.landing(&["verify", "--lake", &w.lake_arg()], &[]);
        assert_eq!(v.code, Some(1), "{flag}: {}", v.stdout);
        assert!(
            v.stdout.contains(&format!("day.jsonl{suffix}: unnamed")),
            "{flag}: {}",
            v.stdout
        );
        assert!(w.leftovers().is_empty(), "{flag}: {:?}", w.leftovers());
    }
}

/// DuckDB (pinned, from PyPI) reads the published plain, gzip and zstd objects with
/// the rows it reads from the reference model's publish of the same day.
fn duckdb_reads_compressed_publishes_as_plain(kind: Kind) {
    let python = std::env::var("LANDING_TEST_DUCKDB_PYTHON").expect(
        "LANDING_TEST_DUCKDB_PYTHON is not set: run the tests under scripts/test-servers, which installs the pinned duckdb",
    );
    let content = generated(5_000, 23);
    let w = World::new(kind, "duckdb");
    let mut files = Vec::new();
    for (flag, suffix) in [("none", ""), ("gzip", ".gz"), ("zstd", ".zst")] {
        let lake = w.tmp.path().join(format!("lake-{flag}"));
        let input = w.put_input("day.jsonl.zst", &zstd(&content));
        let lake_arg = lake.display().to_string();
        let r = w.landing(
            &[
                "run",
                "--input",
                &input,
                "--lake",
                &lake_arg,
                "--output-compression",
                flag,
            ],
            &[],
        );
        assert_code(&r, 0, "published", flag);
        files.push(lake.join(format!("{RAW}{suffix}")));
    }
    // The expected table: the model's publish, read by DuckDB as the objects are.
    let model = w.tmp.path().join("model.jsonl");
    std::fs::write(&model, expected_publish(&content)).expect("write the model's publish");
    files.push(model);
    let script = r#"
import duckdb, json, sys
for path in sys.argv[1:]:
    con = duckdb.connect()
    rows = con.execute("SELECT to_json(t) FROM read_json_auto(?) AS t ORDER BY event_id", [path]).fetchall()
    print(json.dumps([r[0] for r in rows]))
"#;
    let out = std::process::Command::new(&python)
        .arg("-c")
        .arg(script)
        .args(&files)
        .output()
        .expect("run the DuckDB venv's python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "duckdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tables: Vec<Vec<String>> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON list per file"))
        .collect();
    assert_eq!(tables.len(), 4, "{stdout}");
    let expected = &tables[3];
    let accepted = expected_publish(&content)
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    assert_eq!(expected.len(), accepted, "the model's publish: rows");
    for (form, table) in ["plain", "gzip", "zstd"].iter().zip(&tables) {
        assert!(
            table == expected,
            "{form}: DuckDB reads other rows than the model's publish"
        );
    }
}

/// `landing drill --compress gzip|zstd` rehearses the crash diagram on compressed
/// inputs and passes.
fn drill_on_compressed_inputs(kind: Kind) {
    for how in ["gzip", "zstd"] {
        let w = World::new(kind, "drill-compressed");
        let r = w.landing(
            &[
                "drill",
                "--lake",
                &w.lake_arg(),
                "--size-mib",
                "2",
                "--json",
                "--compress",
                how,
            ],
            &[],
        );
        assert_eq!(r.code, Some(0), "{how}: {}\n{}", r.stdout, r.stderr);
        let report: Value = serde_json::from_str(r.stdout.trim()).expect("a JSON report");
        assert_eq!(report["passed"], true, "{how}: {}", r.stdout);
    }
}

matrix! {
    same_events_publish_identical_bytes: [local, seaweed];
    members_and_frames_land_every_line: [local];
    broken_streams_are_refused_keeping_the_previous_publish: [local, seaweed];
    a_bomb_is_refused_and_a_long_line_quarantined: [local];
    empty_and_misnamed_inputs: [local];
    two_forms_of_one_input_land_neither: [local, seaweed];
    shards_keep_the_forms_of_one_input_together: [local];
    output_compression_publishes_a_suffixed_object: [local, seaweed];
    duckdb_reads_compressed_publishes_as_plain: [local];
    drill_on_compressed_inputs: [local];
}
