//! End-to-end tests of inbox runs (`landing run --inbox`), sharding, run history,
//! `landing status` and `landing verify`, through the built binary, each body on a
//! local lake, SeaweedFS and moto (docs/design.md sections 6 and 7).
//!
//! Reads are counted, not inferred, on every backend: on S3 the run goes through the
//! proxy, which counts GetObject calls per input (and, to prove "not read", fails
//! them all); on a local inbox an inotify watch on the folder counts every open of an
//! input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use aws_sdk_s3::primitives::ByteStream;
use serde_json::Value;

use crate::support::proxy::{Fault, Match, Op, Proxy, Rule};
use crate::support::*;

fn day(i: usize) -> String {
    format!("progress-2026-01-{i:02}.jsonl")
}

fn input_bytes(i: usize) -> Vec<u8> {
    generated(200 + i as u64, 100 + i as u64)
}

/// The `--inbox` argument of a world.
pub(crate) fn inbox_arg(w: &World) -> String {
    match w.s3_parts() {
        None => w.tmp.path().join("inbox").display().to_string(),
        Some((_, _, bucket)) => format!("s3://{bucket}/inbox/"),
    }
}

/// Put a file at `rel` under the inbox (may name a sub-folder).
pub(crate) fn put_inbox(w: &World, rel: &str, bytes: &[u8]) {
    match w.s3_parts() {
        None => {
            let p = w.tmp.path().join("inbox").join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        Some((rt, client, bucket)) => {
            rt.block_on(
                client
                    .put_object()
                    .bucket(bucket)
                    .key(format!("inbox/{rel}"))
                    .body(ByteStream::from(bytes.to_vec()))
                    .send(),
            )
            .expect("put inbox object");
        }
    }
}

/// What an inbox run printed: one line per input by name, and the totals line.
pub(crate) struct InboxRun {
    pub run: Run,
    pub by_name: BTreeMap<String, Value>,
    pub totals: Value,
}

impl InboxRun {
    pub fn action(&self, name: &str) -> &str {
        self.by_name
            .get(name)
            .and_then(|l| l["action"].as_str())
            .unwrap_or("<absent>")
    }

    fn names_with(&self, action: &str) -> BTreeSet<String> {
        self.by_name
            .iter()
            .filter(|(_, l)| l["action"] == action)
            .map(|(n, _)| n.clone())
            .collect()
    }

    pub fn ctx(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.run.stdout, self.run.stderr)
    }
}

pub(crate) fn parse_inbox(run: Run) -> InboxRun {
    let mut by_name = BTreeMap::new();
    let mut totals = Value::Null;
    for line in run.stdout.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        if v.get("totals").is_some() {
            totals = v;
            continue;
        }
        let input = v["input"].as_str().expect("input").to_owned();
        let name = input.rsplit('/').next().unwrap().to_owned();
        assert!(
            by_name.insert(name.clone(), v).is_none(),
            "two lines for {name}:\n{}",
            run.stdout
        );
    }
    assert!(
        totals.is_object(),
        "no totals line\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    InboxRun {
        run,
        by_name,
        totals,
    }
}

/// `landing run --inbox INBOX --lake LAKE ARGS...` with extra environment.
pub(crate) fn inbox_run(w: &World, args: &[&str], env: &[(&str, &str)]) -> InboxRun {
    let inbox = inbox_arg(w);
    let lake = w.lake_arg();
    let mut all = vec!["run", "--inbox", &inbox, "--lake", &lake];
    all.extend_from_slice(args);
    parse_inbox(w.landing(&all, env))
}

fn totals(r: &InboxRun) -> [u64; 6] {
    let t = &r.totals["totals"];
    [
        "inputs",
        "published",
        "skipped",
        "refused",
        "busy",
        "failed",
    ]
    .map(|k| {
        t[k].as_u64()
            .unwrap_or_else(|| panic!("totals.{k}: {}", r.totals))
    })
}

/// Keys of run records of one input.
fn run_records(w: &World, name: &str) -> Vec<Value> {
    w.snapshot_all()
        .into_iter()
        .filter(|(k, _)| k.starts_with(&format!("runs/progress/{name}/")) && k.ends_with(".json"))
        .map(|(_, (bytes, _))| serde_json::from_slice(&bytes).expect("run record parses"))
        .collect()
}

// ------------------------------------------------------------ read watchers

/// Counts how often a run read each input: inotify on a local inbox, the proxy on S3.
/// [`Watch::failing`] proves "not read" (on S3 every GetObject on the inbox also
/// fails, so no read can pass unnoticed); [`Watch::counting`] forwards every request
/// and only counts, for runs that must read.
enum Watch {
    Local(Inotify),
    S3 { proxy: Proxy, failing: bool },
}

impl Watch {
    fn failing(w: &World) -> Watch {
        Watch::start(w, true)
    }

    fn counting(w: &World) -> Watch {
        Watch::start(w, false)
    }

    fn start(w: &World, failing: bool) -> Watch {
        match w.server() {
            None => Watch::Local(Inotify::new(&w.tmp.path().join("inbox"))),
            Some(server) => {
                let proxy = Proxy::start(&server.endpoint());
                if failing {
                    proxy.arm(
                        Rule::new(
                            Match::op(Op::GetObject).key_under("inbox/"),
                            Fault::InternalError,
                        )
                        .always(),
                    );
                }
                Watch::S3 { proxy, failing }
            }
        }
    }

    /// Environment routing the job through the proxy (S3), nothing locally. A failing
    /// watch also makes each request a single attempt.
    fn env(&self) -> Vec<(String, String)> {
        match self {
            Watch::Local(_) => Vec::new(),
            Watch::S3 { proxy, failing } => {
                let mut env = vec![("AWS_ENDPOINT_URL".into(), proxy.url())];
                if *failing {
                    env.push(("LANDING_S3_MAX_ATTEMPTS".into(), "1".into()));
                }
                env
            }
        }
    }

    /// How many times each input was opened (local) or fetched (S3) so far; inputs
    /// never read are absent.
    fn reads(&mut self) -> BTreeMap<String, usize> {
        match self {
            Watch::Local(i) => i.opened(),
            Watch::S3 { proxy, .. } => {
                let mut n = BTreeMap::new();
                for s in proxy.seen() {
                    if let (Op::GetObject, Some(name)) = (s.op, s.key.strip_prefix("inbox/")) {
                        *n.entry(name.to_owned()).or_default() += 1;
                    }
                }
                n
            }
        }
    }
}

/// Each of `names` read exactly once.
fn each_once(names: impl IntoIterator<Item = String>) -> BTreeMap<String, usize> {
    names.into_iter().map(|n| (n, 1)).collect()
}

/// An inotify watch on one folder: the files opened in it.
struct Inotify {
    fd: i32,
}

impl Inotify {
    fn new(dir: &std::path::Path) -> Inotify {
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: plain syscalls on a descriptor this struct owns.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
            assert!(fd >= 0, "inotify_init1");
            let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
            let wd = libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_OPEN);
            assert!(wd >= 0, "inotify_add_watch {}", dir.display());
            Inotify { fd }
        }
    }

    /// How many times each file was opened since the last call.
    fn opened(&mut self) -> BTreeMap<String, usize> {
        let mut names = BTreeMap::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            // SAFETY: buf is writable for its length.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= n as usize {
                // SAFETY: the kernel wrote whole events; read the header unaligned.
                let ev: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let name = &buf[at + header..at + header + ev.len as usize];
                let name = name.split(|&b| b == 0).next().unwrap_or_default();
                if !name.is_empty() && ev.mask & libc::IN_OPEN != 0 {
                    *names
                        .entry(String::from_utf8_lossy(name).into_owned())
                        .or_default() += 1;
                }
                at += header + ev.len as usize;
            }
        }
        names
    }
}

impl Drop for Inotify {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this struct owns.
        unsafe {
            libc::close(self.fd);
        }
    }
}

fn env_refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

// ------------------------------------------------------------------- tests

/// Every matching file directly under the inbox is landed under the full contract;
/// other names and sub-folders are not; a refusal does not stop the others; one
/// line per input, the totals, exit 65; each input has its run record.
fn inbox_lands_each_input_and_reports_totals(kind: Kind) {
    let w = World::new(kind, "inbox-lands");
    for i in 1..=3 {
        put_inbox(&w, &day(i), &input_bytes(i));
    }
    let bad = format!(
        "{}\n{{\"event_id\":\"x\",\"email\":\"a@b.c\"}}\n",
        event("a", 1)
    );
    put_inbox(&w, "progress-2026-01-04.jsonl", bad.as_bytes());
    put_inbox(&w, "notes.txt", b"not an input\n");
    put_inbox(&w, "sub/progress-2026-01-05.jsonl", &input_bytes(5));
    let r = inbox_run(&w, &["--jobs", "2"], &[]);
    assert_eq!(r.run.code, Some(65), "{}", r.ctx());
    assert_eq!(totals(&r), [4, 3, 0, 1, 0, 0], "{}", r.ctx());
    for i in 1..=3 {
        assert_eq!(r.action(&day(i)), "published", "{}", r.ctx());
        assert_eq!(
            w.get(&format!("raw/progress/{}", day(i))).unwrap(),
            expected_publish(&input_bytes(i))
        );
        assert_eq!(run_records(&w, &day(i)).len(), 1);
    }
    assert_eq!(r.action("progress-2026-01-04.jsonl"), "refused");
    assert_eq!(
        r.by_name["progress-2026-01-04.jsonl"]["reason"]["kind"],
        "prohibited_field"
    );
    let refused = run_records(&w, "progress-2026-01-04.jsonl");
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["action"], "refused");
    assert!(w.get("raw/progress/progress-2026-01-04.jsonl").is_none());
    assert!(w.get("raw/progress/notes.txt").is_none());
    assert!(w.get("raw/progress/progress-2026-01-05.jsonl").is_none());
    assert!(!r.by_name.contains_key("notes.txt"));
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    let rec = &run_records(&w, &day(1))[0];
    assert_eq!(rec["action"], "published");
    assert_eq!(rec["bytes_in"], input_bytes(1).len());
    assert!(rec["bytes_out"].as_u64().unwrap() > 0);
    for stage in ["lease", "stream", "stage", "promote", "checkpoint"] {
        assert!(rec["stages"].get(stage).is_some(), "{stage} in {rec}");
    }
    assert_eq!(rec["job_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(rec["summary"]["run_id"], rec["run_id"]);
}

/// An unchanged inbox is skipped from one listing: no input is read, nothing but
/// run records is written. `--rehash` reads every input once and still skips.
fn unchanged_inbox_skips_without_reading(kind: Kind) {
    let w = World::new(kind, "inbox-cheap");
    for i in 1..=3 {
        put_inbox(&w, &day(i), &input_bytes(i));
    }
    let first = inbox_run(&w, &[], &[]);
    assert_eq!(first.run.code, Some(0), "{}", first.ctx());
    let before = w.snapshot_all();

    let mut watch = Watch::failing(&w);
    let env = watch.env();
    let r = inbox_run(&w, &["--jobs", "2"], &env_refs(&env));
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(totals(&r), [3, 0, 3, 0, 0, 0], "{}", r.ctx());
    assert_eq!(
        watch.reads(),
        BTreeMap::new(),
        "inputs were read\n{}",
        r.ctx()
    );
    let after = w.snapshot_all();
    let changed: Vec<&String> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, _)| k)
        .collect();
    assert!(
        changed.iter().all(|k| k.starts_with("runs/")),
        "a cheap skip writes only its run record: {changed:?}"
    );
    assert_eq!(changed.len(), 3, "{changed:?}");
    let rec = &run_records(&w, &day(2))
        .into_iter()
        .find(|r| r["action"] == "skipped")
        .expect("skip record");
    assert_eq!(rec["bytes_in"], 0);

    // --rehash reads each input once, and still skips.
    let mut watch = Watch::counting(&w);
    let env = watch.env();
    let r = inbox_run(&w, &["--rehash"], &env_refs(&env));
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(totals(&r), [3, 0, 3, 0, 0, 0], "{}", r.ctx());
    assert_eq!(
        watch.reads(),
        each_once((1..=3).map(day)),
        "--rehash reads every input once\n{}",
        r.ctx()
    );
}

/// A checkpoint written before the input's identity was recorded still works: that
/// input, and only it, is read once (skipped by hash) and its checkpoint upgraded;
/// the others are skipped unread; the next run reads nothing.
fn old_checkpoint_is_read_once_and_upgraded(kind: Kind) {
    let w = World::new(kind, "inbox-upgrade");
    for i in 1..=3 {
        put_inbox(&w, &day(i), &input_bytes(i));
    }
    assert_eq!(inbox_run(&w, &[], &[]).run.code, Some(0));
    let ckpt = format!("checkpoints/progress/{}.json", day(1));
    let mut c: serde_json::Map<String, Value> =
        serde_json::from_slice(&w.get(&ckpt).unwrap()).unwrap();
    assert!(c.contains_key("input_size"), "{c:?}");
    c.retain(|k, _| !k.starts_with("input_") || k == "input_name" || k == "input_sha256");
    w.put(&ckpt, &serde_json::to_vec_pretty(&c).unwrap());

    // The upgrade run must be able to read the input: count, do not fail.
    let mut watch = Watch::counting(&w);
    let env = watch.env();
    let r = inbox_run(&w, &[], &env_refs(&env));
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(totals(&r), [3, 0, 3, 0, 0, 0], "{}", r.ctx());
    assert_eq!(
        watch.reads(),
        each_once([day(1)]),
        "only the input whose checkpoint needs the upgrade is read, once\n{}",
        r.ctx()
    );
    let up: Value = serde_json::from_slice(&w.get(&ckpt).unwrap()).unwrap();
    assert_eq!(up["input_size"], input_bytes(1).len(), "upgraded: {up}");
    assert_eq!(up["input_sha256"], sha256(&input_bytes(1)));

    let mut watch = Watch::failing(&w);
    let env = watch.env();
    let r = inbox_run(&w, &[], &env_refs(&env));
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(totals(&r), [3, 0, 3, 0, 0, 0], "{}", r.ctx());
    assert_eq!(
        watch.reads(),
        BTreeMap::new(),
        "after the upgrade, no read\n{}",
        r.ctx()
    );
}

/// Three shards over one inbox land every input exactly once; a shard run twice
/// only skips; `--shards N` takes its index from JOB_COMPLETION_INDEX.
fn three_shards_land_every_input_once(kind: Kind) {
    let w = World::new(kind, "inbox-shards");
    let names: BTreeSet<String> = (1..=9).map(day).collect();
    for i in 1..=9 {
        put_inbox(&w, &day(i), &input_bytes(i));
    }
    let mut published: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..3 {
        let r = if i == 2 {
            inbox_run(&w, &["--shards", "3"], &[("JOB_COMPLETION_INDEX", "2")])
        } else {
            inbox_run(&w, &["--shard", &format!("{i}/3")], &[])
        };
        assert_eq!(r.run.code, Some(0), "{}", r.ctx());
        assert_eq!(r.totals["shard"], format!("{i}/3"));
        for n in r.names_with("published") {
            *published.entry(n).or_default() += 1;
        }
        assert!(r.names_with("skipped").is_empty(), "{}", r.ctx());
    }
    assert_eq!(published.keys().cloned().collect::<BTreeSet<_>>(), names);
    assert!(published.values().all(|&n| n == 1), "{published:?}");
    let again = inbox_run(&w, &["--shard", "1/3"], &[]);
    assert_eq!(again.run.code, Some(0), "{}", again.ctx());
    assert!(again.names_with("published").is_empty(), "{}", again.ctx());
    assert!(!again.names_with("skipped").is_empty());
    assert_eq!(totals(&again)[0], totals(&again)[2]);
}

/// The shard (of `count`) that takes `name`: the fixed shard hash (docs/design.md section
/// 6), the first 8 bytes of the name's SHA-256, big-endian, modulo the count.
fn shard_of(name: &str, count: u64) -> u64 {
    use sha2::Digest;
    let d = sha2::Sha256::digest(name.as_bytes());
    u64::from_be_bytes(d[..8].try_into().unwrap()) % count
}

/// The inputs whose lease is held now (neither released nor expired).
fn held_leases(w: &World) -> BTreeSet<String> {
    w.zone_files("locks")
        .into_iter()
        .filter_map(|f| {
            let name = f.strip_prefix("progress/")?.strip_suffix(".lock")?;
            Some(name.to_owned())
        })
        .filter(|n| {
            w.get(&format!("locks/progress/{n}.lock"))
                .is_some_and(|b| !lease_record_is_released(&b))
        })
        .collect()
}

/// Two overlapping shard sets (halves and thirds) at once land each input exactly
/// once, and the overlap is certain. Run A (shard 0/2, one input at a time) is paused
/// mid-stream, holding the lease of one input; run B, over the third that holds that
/// input, meanwhile answers busy (exit 75) for exactly that input and lands the rest
/// of its third. A then goes on: it publishes its input and skips those B landed. A
/// last run lands what neither set covers. No input is published twice.
fn overlapping_shard_sets_land_each_input_once(kind: Kind) {
    let w = World::new(kind, "inbox-overlap");
    let names: BTreeSet<String> = (1..=12).map(day).collect();
    for i in 1..=12 {
        put_inbox(&w, &day(i), &input_bytes(i));
    }
    let shard = |n: u64, i: u64| -> BTreeSet<String> {
        names
            .iter()
            .filter(|name| shard_of(name, n) == i)
            .cloned()
            .collect()
    };
    let halves = shard(2, 0);
    let inbox = inbox_arg(&w);
    let lake = w.lake_arg();
    let a = Paused::start_args(
        &w,
        &[
            "run", "--inbox", &inbox, "--lake", &lake, "--shard", "0/2", "--jobs", "1",
        ],
        "mid-stream",
        &[],
    );
    let held = held_leases(&w);
    assert_eq!(held.len(), 1, "A runs one input at a time: {held:?}");
    let held = held.into_iter().next().unwrap();
    assert!(
        halves.contains(&held),
        "{held} is not in A's shard {halves:?}"
    );
    let third = shard_of(&held, 3);
    let thirds = shard(3, third);

    let b = inbox_run(&w, &["--shard", &format!("{third}/3"), "--jobs", "2"], &[]);
    assert_eq!(b.run.code, Some(75), "B meets A's lease\n{}", b.ctx());
    assert_eq!(
        b.names_with("busy"),
        BTreeSet::from([held.clone()]),
        "{}",
        b.ctx()
    );
    let b_published = b.names_with("published");
    let b_rest: BTreeSet<String> = thirds.iter().filter(|n| **n != held).cloned().collect();
    assert_eq!(b_published, b_rest, "{}", b.ctx());
    let n = thirds.len() as u64;
    assert_eq!(totals(&b), [n, n - 1, 0, 0, 1, 0], "{}", b.ctx());

    let a = parse_inbox(a.finish());
    assert_eq!(a.run.code, Some(0), "{}", a.ctx());
    assert_eq!(
        a.by_name.keys().cloned().collect::<BTreeSet<_>>(),
        halves,
        "{}",
        a.ctx()
    );
    for name in &halves {
        let want = if b_published.contains(name) {
            "skipped"
        } else {
            "published"
        };
        assert_eq!(a.action(name), want, "A on {name}\n{}", a.ctx());
    }
    let a_published = a.names_with("published");
    assert!(a_published.contains(&held), "{}", a.ctx());

    let rest = inbox_run(&w, &[], &[]);
    assert_eq!(rest.run.code, Some(0), "{}", rest.ctx());
    let rest_published = rest.names_with("published");
    let covered: BTreeSet<String> = halves.union(&thirds).cloned().collect();
    assert_eq!(
        rest_published,
        names.difference(&covered).cloned().collect(),
        "{}",
        rest.ctx()
    );
    let all: Vec<&String> = a_published
        .iter()
        .chain(&b_published)
        .chain(&rest_published)
        .collect();
    assert_eq!(all.len(), names.len(), "published twice: {all:?}");
    assert_eq!(all.into_iter().cloned().collect::<BTreeSet<_>>(), names);
    for i in 1..=12 {
        assert_eq!(
            checkpoint_sha(&w, &format!("checkpoints/progress/{}.json", day(i))).as_deref(),
            Some(sha256(&input_bytes(i)).as_str()),
            "{}",
            day(i)
        );
    }
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

/// A held lease (busy) and a corrupt checkpoint (failed) do not stop the other
/// inputs; exit 1 (failed outranks busy); the lines say why.
fn busy_and_failed_inputs_do_not_stop_the_others(kind: Kind) {
    let w = World::new(kind, "inbox-busy");
    for i in 1..=4 {
        put_inbox(&w, &day(i), &input_bytes(i));
    }
    let lease = serde_json::json!({
        "run_id": "20260101T000000Z-other",
        "host": "another-host",
        "pid": 1,
        "acquired_at": "2026-01-01T00:00:00Z",
        "expires_at": "2999-01-01T00:00:00Z",
    });
    w.put(
        &format!("locks/progress/{}.lock", day(2)),
        lease.to_string().as_bytes(),
    );
    w.put(
        &format!("checkpoints/progress/{}.json", day(3)),
        b"{ not a checkpoint",
    );
    let r = inbox_run(&w, &["--jobs", "2"], &[]);
    assert_eq!(r.run.code, Some(1), "{}", r.ctx());
    assert_eq!(totals(&r), [4, 2, 0, 0, 1, 1], "{}", r.ctx());
    assert_eq!(r.action(&day(1)), "published");
    assert_eq!(r.action(&day(4)), "published");
    assert_eq!(r.action(&day(2)), "busy");
    assert!(
        r.by_name[&day(2)]["error"]
            .as_str()
            .unwrap()
            .contains("20260101T000000Z-other"),
        "{}",
        r.ctx()
    );
    assert_eq!(r.action(&day(3)), "failed");
    let err = r.by_name[&day(3)]["error"].as_str().unwrap();
    assert!(err.contains("step read-checkpoint"), "{err}");
    // The failed run left a record; the busy one did not.
    let failed = run_records(&w, &day(3));
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["action"], "failed");
    assert!(failed[0]["error"]
        .as_str()
        .unwrap()
        .contains("read-checkpoint"));
    assert!(run_records(&w, &day(2)).is_empty());

    // With only the busy one left, the exit code is 75.
    w.delete(&format!("checkpoints/progress/{}.json", day(3)));
    let r = inbox_run(&w, &[], &[]);
    assert_eq!(r.run.code, Some(75), "{}", r.ctx());
    assert_eq!(totals(&r), [4, 1, 2, 0, 1, 0], "{}", r.ctx());
}

/// The checkpoint fields that name the published object's identity as it is now.
pub(crate) fn current_identity(w: &World, key: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    match w.s3_parts() {
        Some((rt, client, bucket)) => {
            let h = rt
                .block_on(
                    client
                        .head_object()
                        .bucket(bucket)
                        .key(format!("{LAKE_PREFIX}/{key}"))
                        .send(),
                )
                .unwrap();
            m.insert("published_etag".into(), h.e_tag().unwrap().into());
            m.insert("published_size".into(), h.content_length().unwrap().into());
        }
        None => {
            use std::os::unix::fs::MetadataExt;
            let p: PathBuf = w.tmp.path().join(LAKE_PREFIX).join(key);
            let md = std::fs::metadata(p).unwrap();
            let ns = |s: i64, n: i64| (s as i128 * 1_000_000_000 + n as i128) as i64;
            m.insert("published_size".into(), md.len().into());
            m.insert(
                "published_mtime_ns".into(),
                ns(md.mtime(), md.mtime_nsec()).into(),
            );
            m.insert("published_ino".into(), md.ino().into());
            m.insert(
                "published_ctime_ns".into(),
                ns(md.ctime(), md.ctime_nsec()).into(),
            );
        }
    }
    m
}

/// Rewrite a checkpoint's fields (keeps the others).
fn patch_checkpoint(w: &World, name: &str, fields: serde_json::Map<String, Value>) {
    let key = format!("checkpoints/progress/{name}.json");
    let mut c: serde_json::Map<String, Value> =
        serde_json::from_slice(&w.get(&key).unwrap()).unwrap();
    for (k, v) in fields {
        // Fields of a newer checkpoint format are only patched where present.
        if (k == "published_ino" || k == "published_ctime_ns") && !c.contains_key(&k) {
            continue;
        }
        c.insert(k, v);
    }
    w.put(&key, &serde_json::to_vec_pretty(&c).unwrap());
}

/// `verify` is clean on a landed lake and names each kind of drift, one line per
/// finding naming the input; `--deep` also checks lines, ids and the quarantine.
fn verify_finds_each_drift_kind(kind: Kind) {
    let w = World::new(kind, "inbox-verify");
    let sample = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/inbox/progress-2026-03-02.jsonl"
    ))
    .unwrap();
    for i in 1..=6 {
        put_inbox(&w, &day(i), &input_bytes(i));
    }
    put_inbox(&w, "progress-2026-03-02.jsonl", &sample);
    let r = inbox_run(&w, &["--max-rejected-lines", "1"], &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    let lake = w.lake_arg();
    for deep in [false, true] {
        let mut args = vec!["verify", "--lake", &lake];
        if deep {
            args.push("--deep");
        }
        let v = w.landing(&args, &[]);
        assert_eq!(v.code, Some(0), "clean lake: {}\n{}", v.stdout, v.stderr);
    }
    let raw = |i: usize| format!("raw/progress/{}", day(i));
    // 1: missing. 2: other size. 3: same size, other bytes (rewritten).
    w.delete(&raw(1));
    w.put(&raw(2), b"{}\n");
    let mut same = w.get(&raw(3)).unwrap();
    same[10] = if same[10] == b'1' { b'2' } else { b'1' };
    w.rewrite_in_place(&raw(3), &same);
    // 4: the checkpoint names another lake.
    let mut m = serde_json::Map::new();
    m.insert(
        "published_path".into(),
        "s3://elsewhere/raw/progress/x".into(),
    );
    patch_checkpoint(&w, &day(4), m);
    // 5: deep drift behind a matching checkpoint: a repeated line (duplicate id,
    // one line too many) and a line in non-canonical form.
    let good = w.get(&raw(5)).unwrap();
    let first = good.split(|&b| b == b'\n').next().unwrap().to_vec();
    let mut bad = good.clone();
    bad.extend_from_slice(&first);
    bad.push(b'\n');
    bad.extend_from_slice(b"{\"event_id\":\"zz\"}\n");
    w.put(&raw(5), &bad);
    patch_checkpoint(&w, &day(5), current_identity(&w, &raw(5)));
    // 6: a corrupt checkpoint. Sample: its quarantine is gone.
    w.put(
        &format!("checkpoints/progress/{}.json", day(6)),
        b"{\"product\":",
    );
    w.delete("quarantine/progress/progress-2026-03-02.jsonl.rejects.jsonl");

    let v = w.landing(&["verify", "--lake", &lake], &[]);
    assert_eq!(v.code, Some(1), "{}\n{}", v.stdout, v.stderr);
    let expect_shallow = [
        (day(1), "missing"),
        (day(2), "size"),
        (day(3), "changed"),
        (day(4), "elsewhere"),
        (day(6), "corrupt_checkpoint"),
    ];
    for (name, finding) in &expect_shallow {
        assert!(
            v.stdout
                .lines()
                .any(|l| l.starts_with(&format!("{name}: {finding}: "))),
            "{name} {finding} in:\n{}",
            v.stdout
        );
    }
    // Day 5's object was edited and its checkpoint rewritten to match: only the
    // commit log still names the version the job published.
    let day5: Vec<&str> = v
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{}: ", day(5))))
        .map(|l| l.split(':').next().unwrap_or(l))
        .collect();
    assert_eq!(day5, ["log_stale", "log_mismatch"], "{}", v.stdout);
    assert!(!v.stdout.contains("quarantine"), "{}", v.stdout);

    // Day 5's good lines, then the copy of its first line, then the bad line.
    let good_lines = good.iter().filter(|&&b| b == b'\n').count();
    deep_finds_each_drift_kind(&w, &expect_shallow, good_lines);
}

/// The findings of `verify --json` (every line must be JSON; the totals line has
/// no `finding`).
fn json_findings(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|f| f.get("finding").is_some())
        .collect()
}

/// `verify --deep` names the drifts `verify` does, and day 5's and the sample's:
/// the same findings with the same first lines whether the id index stays in
/// memory or spills.
fn deep_finds_each_drift_kind(w: &World, expect_shallow: &[(String, &str)], good_lines: usize) {
    let lake = w.lake_arg();
    let day5 = [
        (
            "line_count",
            format!(
                "has {} lines, the checkpoint recorded {good_lines} accepted rows",
                good_lines + 2
            ),
        ),
        (
            "not_canonical",
            format!(
                "1 lines are not the canonical form of a valid event (first at line {})",
                good_lines + 2
            ),
        ),
        (
            "duplicate_event_id",
            format!(
                "1 lines repeat an earlier event_id (first at line {})",
                good_lines + 1
            ),
        ),
    ];
    // The same findings whether the id index stays in memory or spills every two
    // events (the copy then found by the merge, not the index).
    for spill in [None, Some("2")] {
        let env: Vec<(&str, &str)> = spill
            .map(|n| ("LANDING_TEST_SPILL_EVERY", n))
            .into_iter()
            .collect();
        let v = w.landing(&["verify", "--lake", &lake, "--deep", "--json"], &env);
        assert_eq!(v.code, Some(1), "{spill:?}: {}\n{}", v.stdout, v.stderr);
        let all = json_findings(&v.stdout);
        let findings: BTreeSet<(String, String)> = all
            .iter()
            .map(|f| {
                (
                    f["input_name"].as_str().unwrap().to_owned(),
                    f["finding"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        for (name, finding) in expect_shallow.iter().cloned().chain([
            (day(5), "line_count"),
            (day(5), "not_canonical"),
            (day(5), "duplicate_event_id"),
            ("progress-2026-03-02.jsonl".to_owned(), "quarantine_missing"),
        ]) {
            assert!(
                findings.contains(&(name.clone(), finding.to_owned())),
                "{spill:?}: {name} {finding} in {findings:?}"
            );
        }
        // Day 5's log findings (see the shallow run) are left out: the deep
        // findings name its drift.
        assert_eq!(findings.len(), 9, "{spill:?}: {findings:?}");
        for (finding, says) in &day5 {
            let f = all
                .iter()
                .find(|f| f["input_name"] == day(5).as_str() && f["finding"] == *finding)
                .unwrap();
            let detail = f["detail"].as_str().unwrap();
            assert!(detail.contains(says.as_str()), "{spill:?}: {detail}");
        }
    }
}

/// `verify --deep` takes `run`'s memory budget: one too small for two objects read
/// at once (each with a run's 64 MiB of buffers and an 8 MiB index, on a 48 MiB
/// process base: 192 MiB) is a usage error; one that makes the index spill still
/// finds a clean lake clean, and leaves no scratch behind; a lake of one object
/// reads it with the whole budget, two share it.
#[test]
fn verify_deep_reads_within_the_memory_budget() {
    let w = World::new(Kind::Local, "deep-budget");
    let input = w.put_input(&day(1), &generated(5_000, 41));
    assert_eq!(w.run(&input, &[]).code, Some(0));
    let lake = w.lake_arg();
    let scratch = w.tmp.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let scratch = scratch.to_str().unwrap();
    let v = w.landing(
        &[
            "verify",
            "--lake",
            &lake,
            "--deep",
            "--max-memory",
            "150MiB",
        ],
        &[],
    );
    assert_eq!(v.code, Some(2), "{}\n{}", v.stdout, v.stderr);
    assert!(
        v.stderr
            .contains("--max-memory: 150.0 MiB is too little for verify --deep")
            && v.stderr.contains("give at least 192.0 MiB"),
        "{}",
        v.stderr
    );
    let v = w.landing(
        &[
            "verify",
            "--lake",
            &lake,
            "--deep",
            "--max-memory",
            "256MiB",
            "--scratch-dir",
            scratch,
        ],
        &[
            ("LANDING_TEST_SPILL_EVERY", "500"),
            ("LANDING_LOG_LEVEL", "info"),
        ],
    );
    assert_eq!(v.code, Some(0), "{}\n{}", v.stdout, v.stderr);
    assert!(v.stdout.contains("(deep): clean"), "{}", v.stdout);
    // About 4,950 distinct events, the index spilled every 500 events and records:
    // about ten runs (five is proof enough that it spilled, and spilled again).
    let runs: u64 = v
        .stderr
        .split("spill_runs=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no spill_runs in:\n{}", v.stderr));
    assert!(runs >= 5, "{runs} runs:\n{}", v.stderr);
    let left: Vec<_> = std::fs::read_dir(scratch).unwrap().collect();
    assert!(left.is_empty(), "scratch left: {left:?}");
    // The share, as RUNBOOK gives it: (budget - 48 MiB) / reads at once - 64 MiB.
    // One published object is read alone, with the whole budget: 144 MiB of 256.
    let args = [
        "verify",
        "--lake",
        &lake,
        "--deep",
        "--max-memory",
        "256MiB",
    ];
    let info = [("LANDING_LOG_LEVEL", "info")];
    let v = w.landing(&args, &info);
    assert_eq!(v.code, Some(0), "{}\n{}", v.stdout, v.stderr);
    assert!(
        v.stderr.contains(&format!("index_share={}", 144u64 << 20)),
        "{}",
        v.stderr
    );
    // Two are read at once, sharing it: 40 MiB each.
    let second = w.put_input(&day(2), &generated(100, 42));
    assert_eq!(w.run(&second, &[]).code, Some(0));
    let v = w.landing(&args, &info);
    assert_eq!(v.code, Some(0), "{}\n{}", v.stdout, v.stderr);
    let share = format!("index_share={}", 40u64 << 20);
    assert_eq!(v.stderr.matches(&share).count(), 2, "{}", v.stderr);
}

/// `verify --deep` tells a valid line that is not in its canonical form, a last line
/// without its newline, and CRLF line ends or a BOM, from canonical lines.
#[test]
fn verify_deep_finds_lines_not_in_canonical_form() {
    let w = World::new(Kind::Local, "deep-canonical");
    // Events in canonical form (keys sorted, `checkpoint` written as null).
    let canonical = |id: &str| {
        format!(
            r#"{{"attempt_number":1,"checkpoint":null,"event_id":"{id}","event_time":"2026-03-02T10:00:00Z","event_type":"completed","learner_id":"l-1","lesson_id":"s-1"}}"#
        )
    };
    let (a, b, c) = (canonical("a"), canonical("b"), canonical("c"));
    let body = format!("{a}\n{b}\n{c}\n");
    let input = w.put_input(&day(1), body.as_bytes());
    assert_eq!(w.run(&input, &[]).code, Some(0));
    let raw = format!("raw/progress/{}", day(1));
    // The literal lines are canonical: published as they came.
    assert_eq!(w.get(&raw).unwrap(), body.as_bytes());
    let lake = w.lake_arg();
    let v = w.landing(&["verify", "--lake", &lake, "--deep"], &[]);
    assert_eq!(v.code, Some(0), "{}\n{}", v.stdout, v.stderr);
    // Line 2: the same event, valid, spaced after its commas. Line 3: no newline.
    let edited = format!("{a}\n{}\n{c}", b.replace(',', ", "));
    w.put(&raw, edited.as_bytes());
    patch_checkpoint(&w, &day(1), current_identity(&w, &raw));
    let v = w.landing(&["verify", "--lake", &lake, "--deep", "--json"], &[]);
    assert_eq!(v.code, Some(1), "{}\n{}", v.stdout, v.stderr);
    let findings = json_findings(&v.stdout);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["finding"], "not_canonical", "{findings:?}");
    let detail = findings[0]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("2 lines are not the canonical form of a valid event (first at line 2)"),
        "{detail}"
    );
    // The object saved again by a tool that wrote CRLF line ends and a BOM: three
    // lines that are their canonical forms but for the bytes the framer drops.
    let windows = format!("\u{FEFF}{a}\r\n{b}\r\n{c}\r\n");
    w.put(&raw, windows.as_bytes());
    patch_checkpoint(&w, &day(1), current_identity(&w, &raw));
    let v = w.landing(&["verify", "--lake", &lake, "--deep", "--json"], &[]);
    assert_eq!(v.code, Some(1), "{}\n{}", v.stdout, v.stderr);
    let findings = json_findings(&v.stdout);
    assert_eq!(findings.len(), 1, "{findings:?}");
    let detail = findings[0]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("3 lines are not the canonical form of a valid event (first at line 1)"),
        "{detail}"
    );
}

/// `status` lists every checkpointed input with its last outcome (from the run
/// history), counts, hash and whether the publish is intact, then the leases held;
/// `--history` lists an input's runs, newest first.
fn status_shows_rows_leases_and_history(kind: Kind) {
    let w = World::new(kind, "inbox-status");
    for i in 1..=2 {
        put_inbox(&w, &day(i), &input_bytes(i));
    }
    assert_eq!(inbox_run(&w, &[], &[]).run.code, Some(0));
    // Day 1 is then replaced by a file that is refused: its last outcome.
    let bad = format!("{}\n{{\"name\":\"n\"}}\n", event("a", 1));
    put_inbox(&w, &day(1), bad.as_bytes());
    assert_eq!(inbox_run(&w, &[], &[]).run.code, Some(65));
    w.put(
        &format!("locks/progress/{}.lock", day(2)),
        serde_json::json!({
            "run_id": "r-held", "host": "h", "pid": 7,
            "acquired_at": "2026-01-01T00:00:00Z", "expires_at": "2999-01-01T00:00:00Z"
        })
        .to_string()
        .as_bytes(),
    );
    let lake = w.lake_arg();
    let s = w.landing(&["status", "--lake", &lake, "--json"], &[]);
    assert_eq!(s.code, Some(0), "{}", s.stderr);
    let v: Value = serde_json::from_str(s.stdout.trim()).unwrap();
    let rows = v["inputs"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    assert_eq!(rows[0]["input_name"], day(1));
    assert_eq!(rows[0]["last_action"], "refused");
    assert_eq!(rows[0]["intact"], true);
    assert_eq!(rows[0]["input_sha256"], sha256(&input_bytes(1)));
    assert_eq!(rows[1]["last_action"], "skipped");
    assert_eq!(rows[1]["accepted_rows"], {
        let c: Value = serde_json::from_slice(
            &w.get(&format!("checkpoints/progress/{}.json", day(2)))
                .unwrap(),
        )
        .unwrap();
        c["accepted_rows"].clone()
    });
    let leases = v["leases"].as_array().unwrap();
    assert_eq!(leases.len(), 1, "{v}");
    assert_eq!(leases[0]["input_name"], day(2));
    assert_eq!(leases[0]["holder"], "r-held");
    assert_eq!(v["leftovers"].as_array().unwrap().len(), 0);

    let t = w.landing(&["status", "--lake", &lake], &[]);
    assert_eq!(t.code, Some(0));
    assert!(
        t.stdout.contains(&day(1)) && t.stdout.contains("intact"),
        "{}",
        t.stdout
    );
    assert!(t.stdout.contains("r-held"), "{}", t.stdout);

    let h = w.landing(
        &["status", "--lake", &lake, "--history", &day(1), "--json"],
        &[],
    );
    assert_eq!(h.code, Some(0), "{}", h.stderr);
    let hv: Value = serde_json::from_str(h.stdout.trim()).unwrap();
    let runs = hv["runs"].as_array().unwrap();
    let actions: Vec<&str> = runs.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["refused", "published"], "{hv}");
}

/// A run killed between its checkpoint and its cleanup leaves its lease unreleased
/// (and on S3 its staging object). The input never changes again, yet the next inbox
/// run does not skip it cheaply: it runs it in full, takes the dead holder's lease
/// over, sweeps and skips by hash, and releases the lease. Nothing is left behind.
fn a_dead_holders_unchanged_input_is_swept_not_skipped_cheaply(kind: Kind) {
    let mut w = World::new(kind, "inbox-dead-holder");
    w.env
        .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    put_inbox(&w, "a.jsonl", &generated(3_000, 111));
    put_inbox(&w, "b.jsonl", &generated(3_000, 112));
    let first = inbox_run(&w, &[], &[]);
    assert_eq!(first.run.code, Some(0), "{}", first.ctx());
    put_inbox(&w, "a.jsonl", &generated(3_500, 113));
    let input = format!("{}/a.jsonl", inbox_arg(&w).trim_end_matches('/'));
    let crashed = w.run_env(&input, &[], &[("LANDING_CRASH_AT", "after-checkpoint")]);
    assert_eq!(crashed.signal, Some(9), "{}", crashed.stderr);
    assert!(!w.lease_is_free("locks/progress/a.jsonl.lock"));
    if w.is_s3() {
        assert!(
            !w.leftovers().is_empty(),
            "the killed run's staging object stays"
        );
    }
    let r = inbox_run(&w, &["--lease-wait", TAKEOVER_WAIT], &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(
        (r.action("a.jsonl"), r.action("b.jsonl")),
        ("skipped", "skipped")
    );
    assert!(
        r.run.stderr.contains("took over a stale lease"),
        "a.jsonl got a full run: {}",
        r.ctx()
    );
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    assert!(w.lease_is_free("locks/progress/a.jsonl.lock"));
    assert_eq!(
        w.get("raw/progress/a.jsonl").unwrap(),
        expected_publish(&generated(3_500, 113))
    );
}

/// A first landing from an inbox skips the HEADs of the published name and the
/// quarantine where promotions are fenced (no lease and no checkpoint: no run ever
/// wrote them). An object there all the same (placed by hand, or left by a run
/// whose lease was deleted by hand) is never overwritten unseen: the fenced create
/// refuses it, the run reads it then and publishes over it, and its log entry names
/// it as replaced, as where copies are not fenced (moto, LocalStack: docs/design.md's
/// table) and the run reads it first.
fn an_object_placed_by_hand_where_nothing_landed_is_replaced_seen(kind: Kind) {
    let w = World::new(kind, "inbox-placed");
    put_inbox(&w, &day(1), &input_bytes(1));
    put_inbox(&w, &day(2), &input_bytes(2));
    let raw = format!("raw/progress/{}", day(1));
    let placed = b"{\"placed\":\"by hand\"}\n";
    w.put(&raw, placed);
    let r = inbox_run(&w, &[], &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(r.action(&day(1)), "published", "{}", r.ctx());
    assert_eq!(r.action(&day(2)), "published", "{}", r.ctx());
    assert_eq!(w.get(&raw), Some(expected_publish(&input_bytes(1))));
    let fenced = matches!(kind, Kind::Local | Kind::S3(Server::Seaweed));
    assert_eq!(
        r.run.stderr.contains("no run had landed this input"),
        fenced,
        "the create found it (fenced stores) or the HEAD did: {}",
        r.ctx()
    );
    let log = crate::commit_log::log_entries(&w, "progress");
    let entry = log
        .iter()
        .find(|e| e["input_name"] == day(1).as_str())
        .expect("an entry for the placed name");
    assert_eq!(
        entry["replaced"]["published_size"],
        placed.len(),
        "the entry names what it replaced: {entry}"
    );
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

fn one_reject() -> model::Opts {
    model::Opts {
        max_rejected_lines: 1,
        ..model::Opts::default()
    }
}

/// The case an operator meets: a first landing killed after its publish, its stuck
/// lease then deleted by hand. The next inbox run has no lease and no checkpoint to
/// go by, finds the killed run's publish when its fenced create is refused, and
/// publishes over it at once (no conflict), logging one entry that names no earlier
/// entry; a quarantine placed where nothing landed is read and replaced the same way.
fn a_first_landing_killed_after_its_publish_then_its_lease_deleted_lands_at_once(kind: Kind) {
    let w = World::new(kind, "inbox-lease-deleted");
    let mut with_reject = generated(3_000, 103);
    with_reject.extend_from_slice(b"not json\n");
    put_inbox(&w, &day(3), &with_reject);
    let cap = ["--max-rejected-lines", "1"];
    let (inbox, lake) = (inbox_arg(&w), w.lake_arg());
    let args = ["run", "--inbox", &inbox, "--lake", &lake, cap[0], cap[1]];
    let crashed = w.landing(&args, &[("LANDING_CRASH_AT", "after-publish")]);
    assert_eq!(crashed.signal, Some(9), "{}", crashed.stderr);
    let raw = format!("raw/progress/{}", day(3));
    assert_eq!(
        w.get(&raw),
        Some(expected_publish_with(&with_reject, one_reject()))
    );
    w.delete(&format!("locks/progress/{}.lock", day(3)));
    let quarantine = format!("quarantine/progress/{}.rejects.jsonl", day(3));
    let placed = b"{\"placed\":\"by hand\"}\n";
    w.put(&quarantine, placed);
    let r = inbox_run(&w, &cap, &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(r.action(&day(3)), "published", "{}", r.ctx());
    assert_eq!(
        w.get(&raw),
        Some(expected_publish_with(&with_reject, one_reject()))
    );
    let q = w.get(&quarantine).expect("a quarantine");
    let model = model::expect(
        &model::contract_file("progress"),
        &with_reject,
        one_reject(),
    );
    assert!(q != placed, "the placed quarantine was replaced");
    assert!(q == model.quarantine, "the quarantine is the model's");
    let log = crate::commit_log::log_entries(&w, "progress");
    assert_eq!(log.len(), 1, "one entry: {log:?}");
    assert_eq!(log[0]["replaced"]["sequence"], Value::Null, "{}", log[0]);
    assert_eq!(log[0]["rejected_rows"], 1, "{}", log[0]);
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

matrix! {
    a_dead_holders_unchanged_input_is_swept_not_skipped_cheaply: [local, seaweed, moto, localstack];
    a_first_landing_killed_after_its_publish_then_its_lease_deleted_lands_at_once: [local, seaweed, moto, localstack];
    an_object_placed_by_hand_where_nothing_landed_is_replaced_seen: [local, seaweed, moto, localstack];
    inbox_lands_each_input_and_reports_totals: [local, seaweed, moto, localstack];
    unchanged_inbox_skips_without_reading: [local, seaweed, moto, localstack];
    old_checkpoint_is_read_once_and_upgraded: [local, seaweed, moto, localstack];
    three_shards_land_every_input_once: [local, seaweed, moto, localstack];
    overlapping_shard_sets_land_each_input_once: [local, seaweed, moto, localstack];
    busy_and_failed_inputs_do_not_stop_the_others: [local, seaweed, moto, localstack];
    verify_finds_each_drift_kind: [local, seaweed, moto, localstack];
    status_shows_rows_leases_and_history: [local, seaweed, moto, localstack];
}

/// An S3 inbox of thousands of objects is listed page by page (1,000 keys a page):
/// the inputs on the third page are landed; keys under a sub-prefix are not.
fn s3_listing_pages_through_thousands(server: Server) {
    let w = World::new(Kind::S3(server), "inbox-pages");
    let (rt, client, bucket) = w.s3_parts().unwrap();
    rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..2_100 {
            let (client, bucket) = (client.clone(), bucket.to_owned());
            tasks.spawn(async move {
                client
                    .put_object()
                    .bucket(bucket)
                    .key(format!("inbox/a-{i:05}.txt"))
                    .body(ByteStream::from_static(b"x"))
                    .send()
                    .await
                    .expect("put filler")
            });
            if tasks.len() >= 32 {
                tasks.join_next().await;
            }
        }
        while tasks.join_next().await.is_some() {}
    });
    put_inbox(&w, "zz-1.jsonl", &input_bytes(1));
    put_inbox(&w, "zz-2.jsonl", &input_bytes(2));
    put_inbox(&w, "zz/zz-3.jsonl", &input_bytes(3));
    let r = inbox_run(&w, &[], &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(totals(&r), [2, 2, 0, 0, 0, 0], "{}", r.ctx());
    assert_eq!(r.action("zz-1.jsonl"), "published");
    assert_eq!(r.action("zz-2.jsonl"), "published");
    // Every file directly under the prefix was listed (the sub-prefix is not).
    let all = inbox_run(&w, &["--match", "*", "--min-age", "999999"], &[]);
    assert_eq!(totals(&all)[0], 0, "{}", all.ctx());
    assert!(all.run.stderr.contains("files=2102"), "{}", all.run.stderr);
}

matrix! {
    s3 s3_listing_pages_through_thousands: [seaweed, moto];
}

/// The copy-fence probe (scratch keys `…/probe-source/…`, `…/probe-target/…` in the
/// staging folder) runs once per inbox run, whatever the number of inputs: the inputs
/// share the lake the inbox run opened.
fn copy_fence_is_probed_once_per_inbox_run(server: Server) {
    let w = World::new(Kind::S3(server), "inbox-probe");
    let probe_writes = |inputs: usize| {
        for i in 1..=inputs {
            put_inbox(&w, &format!("probe-{inputs}-{i}.jsonl"), &input_bytes(i));
        }
        let watch = Watch::counting(&w);
        let env = watch.env();
        let r = inbox_run(
            &w,
            &["--match", &format!("probe-{inputs}-*")],
            &env_refs(&env),
        );
        assert_eq!(r.run.code, Some(0), "{}", r.ctx());
        assert_eq!(totals(&r)[1], inputs as u64, "all published: {}", r.ctx());
        let Watch::S3 { proxy, .. } = watch else {
            unreachable!("an S3 world")
        };
        let writes = proxy
            .seen()
            .iter()
            .filter(|s| s.key.contains("/probe-source/") || s.key.contains("/probe-target/"))
            .filter(|s| matches!(s.op, Op::PutObject | Op::CopyObject))
            .count();
        (writes, proxy.report())
    };
    let (one, report) = probe_writes(1);
    assert!(one > 0, "a probe ran for one input: {report}");
    let (four, report) = probe_writes(4);
    assert_eq!(four, one, "one probe for four inputs: {report}");
}

matrix! {
    s3 copy_fence_is_probed_once_per_inbox_run: [seaweed, moto, localstack];
}

/// `--dry-run` validates flags and LANDING_* variables, prints the resolved
/// settings (no secret) and touches no store; a bad setting is a usage error.
#[test]
fn dry_run_prints_settings_and_touches_nothing() {
    let w = World::new(Kind::Local, "dry-run");
    let lake = w.tmp.path().join("never-created");
    let lake_s = lake.display().to_string();
    let r = w.landing(
        &["run", "--dry-run", "--lake", &lake_s],
        &[
            ("LANDING_INBOX", "s3://in-bucket/progress/"),
            ("LANDING_JOBS", "3"),
            ("LANDING_SHARDS", "4"),
            ("JOB_COMPLETION_INDEX", "2"),
            ("LANDING_MIN_AGE", "600"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret-value"),
            ("AWS_ACCESS_KEY_ID", "AKIDSECRET"),
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["inbox"], "s3://in-bucket/progress");
    assert_eq!(v["jobs"], 3);
    assert_eq!(v["shard"], "2/4");
    assert_eq!(v["min_age"], 600);
    assert_eq!(v["match"], "*.jsonl,*.jsonl.gz,*.jsonl.zst");
    assert!(!lake.exists(), "a dry run touches nothing");
    assert!(!r.stdout.contains("very-secret-value") && !r.stdout.contains("AKIDSECRET"));

    for (args, env) in [
        (vec!["--jobs", "0"], vec![("LANDING_INBOX", "/in")]),
        (vec!["--shard", "3/3"], vec![("LANDING_INBOX", "/in")]),
        (vec!["--shards", "3"], vec![("LANDING_INBOX", "/in")]),
        (
            vec![],
            vec![("LANDING_INBOX", "/in"), ("LANDING_INPUT", "/in/a.jsonl")],
        ),
        (vec![], vec![]),
    ] {
        let mut all = vec!["run", "--dry-run", "--lake", &lake_s];
        all.extend(args.iter().copied());
        let r = w.landing(&all, &env);
        assert_eq!(r.code, Some(2), "{all:?} {env:?}: {}", r.stderr);
    }
}

/// `--min-age` leaves files that are too new for the next run.
#[test]
fn min_age_leaves_young_files() {
    let w = World::new(Kind::Local, "min-age");
    put_inbox(&w, &day(1), &input_bytes(1));
    put_inbox(&w, &day(2), &input_bytes(2));
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(w.tmp.path().join("inbox").join(day(1)))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let r = inbox_run(&w, &["--min-age", "3600"], &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    assert_eq!(totals(&r), [1, 1, 0, 0, 0, 0], "{}", r.ctx());
    assert_eq!(r.action(&day(1)), "published");
}

/// A single-input run writes its run record too, and records the input's identity
/// in the checkpoint, so a later inbox run skips it without reading.
#[test]
fn single_input_run_records_history_and_identity() {
    let w = World::new(Kind::Local, "single-history");
    put_inbox(&w, &day(1), &input_bytes(1));
    let input = w
        .tmp
        .path()
        .join("inbox")
        .join(day(1))
        .display()
        .to_string();
    let r = w.run(&input, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let recs = run_records(&w, &day(1));
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["run_id"], r.summary.as_ref().unwrap()["run_id"]);
    let mut watch = Watch::failing(&w);
    let ir = inbox_run(&w, &[], &[]);
    assert_eq!(ir.action(&day(1)), "skipped", "{}", ir.ctx());
    assert_eq!(watch.reads(), BTreeMap::new());
}

/// SIGTERM during an inbox run: no input is started after it, the totals line says
/// how many were not started, the exit code is 143, and the next run lands the rest
/// (each input published exactly once over both runs).
#[test]
fn sigterm_stops_starting_inputs() {
    use std::io::BufRead;
    let w = World::new(Kind::Local, "inbox-sigterm");
    for i in 1..=60 {
        put_inbox(&w, &format!("p-{i:03}.jsonl"), &generated(2_000, i));
    }
    let inbox = inbox_arg(&w);
    let lake = w.lake_arg();
    let mut child = w
        .command(&["run", "--inbox", &inbox, "--lake", &lake], &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    // SAFETY: signalling the child we spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = child.wait().unwrap();
    let stdout = first + &rest;
    assert_eq!(status.code(), Some(143), "{stdout}");
    let totals: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let done = totals["totals"]["inputs"].as_u64().unwrap();
    assert!(done < 60, "{stdout}");
    assert_eq!(
        totals["not_started"].as_u64().unwrap() + done,
        60,
        "{stdout}"
    );
    let published_first: BTreeSet<String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["action"] == "published")
        .map(|v| {
            v["input"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    let r = inbox_run(&w, &[], &[]);
    assert_eq!(r.run.code, Some(0), "{}", r.ctx());
    let published_next = r.names_with("published");
    assert!(published_first.is_disjoint(&published_next), "{}", r.ctx());
    assert_eq!(
        published_first.len() + published_next.len(),
        60,
        "{}",
        r.ctx()
    );
}
