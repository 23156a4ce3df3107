//! One test's world: one test body runs against a local lake and against the S3
//! servers started by `scripts/test-servers` (SeaweedFS, moto and LocalStack). Each test gets a
//! temp dir (and, on S3, a fresh bucket); the job is the built binary, run as a
//! child process with a clean environment, and assertions read the lake directly
//! (std::fs or a raw S3 client), never through the code under test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use serde_json::Value;
use tempfile::TempDir;

use super::servers::Server;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Local,
    S3(Server),
}

struct S3Lake {
    rt: tokio::runtime::Runtime,
    client: Client,
    bucket: String,
    server: Server,
}

/// One test's world: a temp dir, an inbox and a lake.
pub struct World {
    pub kind: Kind,
    pub tmp: TempDir,
    s3: Option<S3Lake>,
    /// Extra environment for every run (e.g. part size).
    pub env: Vec<(String, String)>,
    /// The commit log numbers this world's publishes took (`super::logged`).
    taken: super::logged::Taken,
}

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub summary: Option<Value>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Exit status, the last JSON line of stdout as the summary, and stderr.
    pub fn from_output(out: Output) -> Run {
        use std::os::unix::process::ExitStatusExt;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let summary = stdout
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok());
        Run {
            code: out.status.code(),
            signal: out.status.signal(),
            summary,
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn action(&self) -> &str {
        self.summary
            .as_ref()
            .and_then(|s| s["action"].as_str())
            .unwrap_or("<none>")
    }
}

pub const LAKE_PREFIX: &str = "lake";

impl World {
    pub fn new(kind: Kind, test: &str) -> World {
        let tmp = tempfile::tempdir().expect("temp dir");
        let s3 = match kind {
            Kind::Local => None,
            Kind::S3(server) => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                let (client, bucket) = rt.block_on(server.fresh_bucket(test));
                Some(S3Lake {
                    rt,
                    client,
                    bucket,
                    server,
                })
            }
        };
        World {
            kind,
            tmp,
            s3,
            env: Vec::new(),
            taken: Default::default(),
        }
    }

    pub fn is_s3(&self) -> bool {
        self.s3.is_some()
    }

    fn lake_dir(&self) -> PathBuf {
        self.tmp.path().join(LAKE_PREFIX)
    }

    /// The `--lake` argument.
    pub fn lake_arg(&self) -> String {
        match &self.s3 {
            None => self.lake_dir().display().to_string(),
            Some(s) => format!("s3://{}/{LAKE_PREFIX}", s.bucket),
        }
    }

    /// Put an input into the inbox; returns the `--input` argument.
    pub fn put_input(&self, name: &str, bytes: &[u8]) -> String {
        match &self.s3 {
            None => {
                let dir = self.tmp.path().join("inbox");
                std::fs::create_dir_all(&dir).unwrap();
                let p = dir.join(name);
                std::fs::write(&p, bytes).unwrap();
                p.display().to_string()
            }
            Some(s) => {
                let key = format!("inbox/{name}");
                s.rt.block_on(
                    s.client
                        .put_object()
                        .bucket(&s.bucket)
                        .key(&key)
                        .body(ByteStream::from(bytes.to_vec()))
                        .send(),
                )
                .expect("put input");
                format!("s3://{}/{key}", s.bucket)
            }
        }
    }

    /// Run the binary with `args` and this world's environment. A run on this
    /// world's lake is checked against its commit log (`super::logged`).
    pub fn landing(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Run {
        let run = Run::from_output(
            self.command(args, extra_env)
                .output()
                .expect("spawn landing"),
        );
        let lake = args
            .iter()
            .position(|a| *a == "--lake")
            .map(|i| args.get(i + 1));
        if lake == Some(Some(&self.lake_arg().as_str())) {
            super::logged::check_summaries(self, &self.taken, &run.stdout);
        }
        run
    }

    /// The binary as a `Command` with a clean environment plus this world's.
    pub fn command(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_landing"));
        cmd.args(args)
            .current_dir(self.tmp.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.tmp.path())
            // Keep the SDK away from any profile or instance metadata on the machine.
            .env("AWS_CONFIG_FILE", self.tmp.path().join("no-aws-config"))
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                self.tmp.path().join("no-aws-creds"),
            )
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("LANDING_LOG_LEVEL", "info");
        if let Some(s) = &self.s3 {
            for (k, v) in s.server.process_env() {
                cmd.env(k, v);
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// `landing run --input INPUT --lake LAKE ARGS...`
    pub fn run(&self, input: &str, args: &[&str]) -> Run {
        self.run_env(input, args, &[])
    }

    pub fn run_env(&self, input: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
        let lake = self.lake_arg();
        let mut all = vec!["run", "--input", input, "--lake", &lake];
        all.extend_from_slice(args);
        self.landing(&all, env)
    }

    /// Bytes of a lake object (`key` relative to the lake root); `None` only when it
    /// does not exist. Any other failure (a server error, an unreadable file) fails the
    /// test: "absent" must never be concluded from an error.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.try_get(key).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`World::get`] for a caller that expects the store to fail at times (the
    /// nemesis restarts it): `Err` names the failure, and only a missing object is
    /// `Ok(None)`.
    pub fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        match &self.s3 {
            None => match std::fs::read(self.lake_dir().join(key)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(format!("reading {key} from the local lake: {e}")),
            },
            Some(s) => s.rt.block_on(read_object(
                &s.client,
                &s.bucket,
                &format!("{LAKE_PREFIX}/{key}"),
            )),
        }
    }

    /// When the lake object `key` was last written and what it is, for failure
    /// messages: S3 `LastModified`, ETag and size (HeadObject), or a local file's
    /// mtime and size; `None` if it is absent.
    pub fn last_modified(&self, key: &str) -> Option<String> {
        use aws_sdk_s3::primitives::{DateTime, DateTimeFormat};
        let fmt = |t: &DateTime| {
            t.fmt(DateTimeFormat::DateTime)
                .unwrap_or_else(|_| format!("{t:?}"))
        };
        match &self.s3 {
            None => {
                let md = std::fs::metadata(self.lake_dir().join(key)).ok()?;
                let mtime = DateTime::from(md.modified().ok()?);
                Some(format!("mtime {} size {}", fmt(&mtime), md.len()))
            }
            Some(s) => s.rt.block_on(async {
                let h = s
                    .client
                    .head_object()
                    .bucket(&s.bucket)
                    .key(format!("{LAKE_PREFIX}/{key}"))
                    .send()
                    .await
                    .ok()?;
                Some(format!(
                    "LastModified {} ETag {} size {}",
                    h.last_modified().map_or_else(|| "?".to_owned(), fmt),
                    h.e_tag().unwrap_or("?"),
                    h.content_length().unwrap_or(-1)
                ))
            }),
        }
    }

    pub fn put(&self, key: &str, bytes: &[u8]) {
        match &self.s3 {
            None => {
                let p = self.lake_dir().join(key);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, bytes).unwrap();
            }
            Some(s) => {
                s.rt.block_on(
                    s.client
                        .put_object()
                        .bucket(&s.bucket)
                        .key(format!("{LAKE_PREFIX}/{key}"))
                        .body(ByteStream::from(bytes.to_vec()))
                        .send(),
                )
                .expect("put");
            }
        }
    }

    /// Replace the local lake file `key` with `bytes` and move its mtime one second on,
    /// so a same-size rewrite is seen as a change without waiting for the clock; on S3
    /// a plain put (every PUT gets a new ETag).
    pub fn rewrite_in_place(&self, key: &str, bytes: &[u8]) {
        if self.is_s3() {
            return self.put(key, bytes);
        }
        let p = self.lake_dir().join(key);
        let before = std::fs::metadata(&p)
            .and_then(|m| m.modified())
            .unwrap_or_else(|e| panic!("mtime of {key}: {e}"));
        std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("rewriting {key}: {e}"));
        let f = std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap_or_else(|e| panic!("opening {key}: {e}"));
        f.set_modified(before + std::time::Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("setting the mtime of {key}: {e}"));
    }

    /// What a checkpoint must record of the published object `key`: its size and its
    /// version marker as the store reports it, as the checkpoint's own JSON fields
    /// (`published_etag` on S3; `published_mtime_ns`, `published_ino` and
    /// `published_ctime_ns` on a local lake). `None` if the object is absent; any other
    /// error fails the test.
    pub fn published_marker(&self, key: &str) -> Option<(u64, Value)> {
        match &self.s3 {
            None => {
                use std::os::unix::fs::MetadataExt;
                let md = match std::fs::metadata(self.lake_dir().join(key)) {
                    Ok(md) => md,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
                    Err(e) => panic!("stat {key}: {e}"),
                };
                let mtime_ns = md.mtime() * 1_000_000_000 + md.mtime_nsec();
                let ctime_ns = md.ctime() * 1_000_000_000 + md.ctime_nsec();
                Some((
                    md.len(),
                    serde_json::json!({
                        "published_mtime_ns": mtime_ns,
                        "published_ino": md.ino(),
                        "published_ctime_ns": ctime_ns,
                    }),
                ))
            }
            Some(s) => s.rt.block_on(async {
                let sent = s
                    .client
                    .head_object()
                    .bucket(&s.bucket)
                    .key(format!("{LAKE_PREFIX}/{key}"))
                    .send()
                    .await;
                let h = match sent {
                    Ok(h) => h,
                    Err(e) if e.as_service_error().is_some_and(|e| e.is_not_found()) => {
                        return None
                    }
                    Err(e) => panic!(
                        "HeadObject {key}: {}",
                        aws_sdk_s3::error::DisplayErrorContext(&e)
                    ),
                };
                let size = u64::try_from(h.content_length().unwrap_or(-1))
                    .unwrap_or_else(|_| panic!("HeadObject {key}: no size"));
                Some((size, serde_json::json!({ "published_etag": h.e_tag() })))
            }),
        }
    }

    pub fn delete(&self, key: &str) {
        match &self.s3 {
            None => std::fs::remove_file(self.lake_dir().join(key)).unwrap(),
            Some(s) => {
                s.rt.block_on(
                    s.client
                        .delete_object()
                        .bucket(&s.bucket)
                        .key(format!("{LAKE_PREFIX}/{key}"))
                        .send(),
                )
                .expect("delete");
            }
        }
    }

    /// Every object under the lake with its bytes and change marker (local mtime, or
    /// S3 ETag + Last-Modified). The transient lease, local CAS guards and the run
    /// history (`runs/`, written by every run, skips included) are left out: what is
    /// left is what the run contract speaks about.
    pub fn snapshot(&self) -> BTreeMap<String, (Vec<u8>, String)> {
        let mut all = self.snapshot_all();
        all.retain(|k, _| !k.starts_with("runs/"));
        all
    }

    /// [`World::snapshot`] with the run history.
    pub fn snapshot_all(&self) -> BTreeMap<String, (Vec<u8>, String)> {
        let mut out = BTreeMap::new();
        match &self.s3 {
            None => walk(&self.lake_dir(), &self.lake_dir(), &mut out),
            Some(_) => out = self.bucket_objects(&format!("{LAKE_PREFIX}/")),
        }
        out.retain(|k, _| !k.starts_with("locks/") && !k.ends_with(".cas"));
        out
    }

    /// Everything a process run in this world could write to, with bytes and change
    /// markers and nothing left out: every file and folder under the temp dir (the
    /// inbox, a local lake, and the home and working dir of every run; a folder's
    /// mtime moves when an entry is added or removed) and, on S3, every object in the
    /// bucket.
    pub fn snapshot_everything(&self) -> BTreeMap<String, (Vec<u8>, String)> {
        let mut out = BTreeMap::new();
        walk_with_folders(self.tmp.path(), self.tmp.path(), &mut out);
        if let Some(s) = &self.s3 {
            for (key, v) in self.bucket_objects("") {
                out.insert(format!("s3://{}/{key}", s.bucket), v);
            }
        }
        out
    }

    /// The S3 objects under `prefix` (keys relative to it) with their bytes and ETag
    /// plus Last-Modified.
    fn bucket_objects(&self, prefix: &str) -> BTreeMap<String, (Vec<u8>, String)> {
        let s = self.s3.as_ref().expect("an S3 world");
        let mut out = BTreeMap::new();
        s.rt.block_on(async {
            let mut pages = s
                .client
                .list_objects_v2()
                .bucket(&s.bucket)
                .prefix(prefix)
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                for o in page.expect("list").contents() {
                    let key = o.key().unwrap_or_default();
                    let rel = key.strip_prefix(prefix).unwrap_or(key);
                    let read = read_object(&s.client, &s.bucket, key).await;
                    let Some(body) = read.unwrap_or_else(|e| panic!("{e}")) else {
                        continue; // deleted since the listing
                    };
                    let marker = format!("{:?} {:?}", o.e_tag(), o.last_modified());
                    out.insert(rel.to_owned(), (body, marker));
                }
            }
        });
        out
    }

    /// Staging leftovers a reader must never see and a rerun must sweep: local temp
    /// files; S3 staging objects and incomplete multipart uploads.
    pub fn leftovers(&self) -> Vec<String> {
        match &self.s3 {
            None => self
                .snapshot()
                .into_keys()
                .filter(|k| {
                    k.rsplit('/')
                        .next()
                        .is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"))
                })
                .collect(),
            Some(s) => {
                let mut v: Vec<String> = self
                    .snapshot()
                    .into_keys()
                    .filter(|k| k.starts_with("staging/"))
                    .collect();
                s.rt.block_on(async {
                    let r = s
                        .client
                        .list_multipart_uploads()
                        .bucket(&s.bucket)
                        .send()
                        .await
                        .expect("list uploads");
                    for u in r.uploads() {
                        v.push(format!("upload:{}", u.key().unwrap_or_default()));
                    }
                });
                v
            }
        }
    }
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (Vec<u8>, String)>) {
    // Only a folder that does not exist is empty: any other error (permissions, I/O)
    // must fail the test, never read as "nothing left".
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => panic!("reading {}: {e}", dir.display()),
    };
    for e in entries {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            walk(root, &p, out);
        } else {
            let md = e.metadata().unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let marker = format!("{:?} {}", md.modified().unwrap(), md.len());
            out.insert(rel, (std::fs::read(&p).unwrap(), marker));
        }
    }
}

/// [`walk`] that also records each folder (`rel/`, by its mtime).
fn walk_with_folders(root: &Path, dir: &Path, out: &mut BTreeMap<String, (Vec<u8>, String)>) {
    let md = std::fs::metadata(dir).unwrap();
    let rel = dir.strip_prefix(root).unwrap().display().to_string();
    let marker = format!("{:?}", md.modified().unwrap());
    out.insert(format!("{rel}/"), (Vec::new(), marker));
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk_with_folders(root, &p, out);
        } else {
            let md = std::fs::metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let marker = format!("{:?} {}", md.modified().unwrap(), md.len());
            out.insert(rel, (std::fs::read(&p).unwrap(), marker));
        }
    }
}

/// Short leases for S3 runs that a test kills. A killed holder's lease is taken over
/// once its record stayed unchanged for the TTL plus the margin (the attempt timeout)
/// of the taker's own clock: 5 + 2 s here. The attempt timeout must stay below the
/// TTL; the deadline leaves TTL − attempt timeout = 3 s between renewals' answers,
/// ample for a small PutObject on a loaded test server.
pub const SHORT_LEASE: [(&str, &str); 2] = [
    ("LANDING_LEASE_TTL", "5"),
    ("LANDING_S3_ATTEMPT_TIMEOUT", "2"),
];

/// The seed of a seeded test: `LANDING_TEST_SEED` to replay one, else the clock.
pub fn test_seed() -> u64 {
    std::env::var("LANDING_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("a clock after 1970")
                .as_nanos() as u64
        })
}

/// Debian's libfaketime (package `faketime`, which scripts/test installs).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The environment of a run whose wall clock is off by `offset` (`+1h`, `-1h`):
/// libfaketime preloaded, the monotonic clock left alone, as on a host whose clock
/// is off. Fails the test if libfaketime is not installed.
pub fn skewed_clock(offset: &'static str) -> [(&'static str, &'static str); 3] {
    assert!(
        std::path::Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: install Debian's faketime (scripts/test does)"
    );
    [
        ("LD_PRELOAD", LIBFAKETIME),
        ("FAKETIME", offset),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]
}

/// `--lease-wait` for a run that must take over the lease of a killed or frozen
/// holder of [`SHORT_LEASE`] (or of a local lake's 3 s leases): one TTL plus the
/// margin after its first look (7 s), polling at most every 5 s. A bound a takeover
/// reaches long before, not a measure of speed; on a local lake a dead holder's lease
/// is taken at once.
pub const TAKEOVER_WAIT: &str = "30";

/// Is the lease record `bytes` released by its holder? Read from the record's
/// documented field (docs/design.md, the lease), never through the crate's own lease
/// code. A record not released is held: whether its holder is gone is for a run to
/// find out by watching it, not for a test to guess from a wall-clock expiry.
pub fn lease_record_is_released(bytes: &[u8]) -> bool {
    let v: Value = serde_json::from_slice(bytes).expect("a lease record is JSON");
    v["released"] == true
}

impl World {
    /// Is the lease at `key` free: absent or released?
    pub fn lease_is_free(&self, key: &str) -> bool {
        self.get(key).is_none_or(|b| lease_record_is_released(&b))
    }
}

/// The bytes of S3 object `key`, `None` only for NoSuchKey; any other error fails the
/// test. A body that breaks after the response head (seen on LocalStack with a lease
/// that a killed run's last request was still overwriting) is read again, at most
/// three times, as the job's own small reads are.
async fn read_object(client: &Client, bucket: &str, key: &str) -> Result<Option<Vec<u8>>, String> {
    let mut attempt = 1;
    loop {
        let sent = client.get_object().bucket(bucket).key(key).send().await;
        let r = match sent {
            Ok(r) => r,
            Err(e) if e.as_service_error().is_some_and(|e| e.is_no_such_key()) => return Ok(None),
            Err(e) => {
                let e = aws_sdk_s3::error::DisplayErrorContext(&e);
                return Err(format!("GetObject {key}: {e}"));
            }
        };
        match r.body.collect().await {
            Ok(body) => return Ok(Some(body.into_bytes().to_vec())),
            Err(e) if attempt < 3 => {
                eprintln!("reading the body of {key} failed ({e:?}); reading it again");
                attempt += 1;
            }
            Err(e) => return Err(format!("reading the body of {key}: {e:?}")),
        }
    }
}

/// A valid event line with the given id and attempt.
pub fn event(id: &str, attempt: u32) -> String {
    format!(
        r#"{{"event_id":"{id}","learner_id":"l-1","lesson_id":"s-1","event_type":"completed","attempt_number":{attempt},"event_time":"2026-03-02T10:00:00Z"}}"#
    )
}

/// Generated input of `lines` lines (deterministic for `seed`).
pub fn generated(lines: u64, seed: u64) -> Vec<u8> {
    let spec = landing_engine::generate::Spec {
        lines,
        duplicate_per_mille: 10,
        malformed_per_mille: 0,
        seed,
    };
    let mut v = Vec::new();
    landing_engine::generate::generate(&spec, &mut v).unwrap();
    v
}

/// The watchdog of a wait that only a hang would exhaust: ten minutes, never a
/// measure of speed (no test asserts on how long something took).
pub const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(600);

/// Wait for `child`; past `guard` it is hung: kill it and fail, naming `who`.
pub fn wait_or_kill(
    child: std::process::Child,
    guard: std::time::Duration,
    who: &str,
) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output();
        let _ = tx.send(());
        out
    });
    if rx.recv_timeout(guard).is_err() {
        // SAFETY: kill(2) on our own child's pid, which the waiter has not reaped.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        let _ = waiter.join();
        panic!("{who} never ended within {guard:?}: it hung");
    }
    waiter.join().expect("the waiter").expect("wait")
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    use std::fmt::Write;
    // Hex by hand: the expected hash must not go through the crate's own encoder.
    sha2::Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The input hash the checkpoint at `key` records, if there is one.
pub fn checkpoint_sha(w: &World, key: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(&w.get(key)?).expect("checkpoint parses");
    Some(v["input_sha256"].as_str().expect("input_sha256").to_owned())
}

impl World {
    /// Every file under the lake's folder `zone` (hidden ones included, sub-folders
    /// walked), as paths relative to it: what a reader granted that zone sees.
    pub fn zone_files(&self, zone: &str) -> std::collections::BTreeSet<String> {
        match &self.s3 {
            None => {
                let mut out = BTreeMap::new();
                let root = self.lake_dir().join(zone);
                walk(&root, &root, &mut out);
                out.into_keys().collect()
            }
            Some(_) => self
                .bucket_objects(&format!("{LAKE_PREFIX}/{zone}/"))
                .into_keys()
                .collect(),
        }
    }

    /// The raw S3 side of an S3 world (runtime, admin client, bucket), for tests
    /// that set up or inspect objects the helpers above do not cover.
    pub fn s3_parts(&self) -> Option<(&tokio::runtime::Runtime, &Client, &str)> {
        self.s3
            .as_ref()
            .map(|s| (&s.rt, &s.client, s.bucket.as_str()))
    }

    /// The server an S3 world runs against.
    pub fn server(&self) -> Option<Server> {
        self.s3.as_ref().map(|s| s.server)
    }
}
