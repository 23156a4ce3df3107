//! Local-folder backend. Staging is a hidden temp file beside its destination
//! (`.<name>.<run id>.tmp`, never a valid input name); publish is fsync, rename over
//! the published name, fsync the directory, which POSIX makes atomic on one file
//! system. Small objects (checkpoint, lease) are replaced, and published objects
//! promoted, under an advisory `flock` on a guard file, so compare-and-swap holds
//! between processes on one host only. Guard files live in `locks/.cas/`, a zone no
//! reader is granted, never beside published data. A lock is only ever tried, within
//! the [`Gate`]'s bound: a holder that is stopped (SIGSTOP, a paused VM, a stalled
//! mount) makes other writers answer busy instead of waiting for it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    Condition, CopyFence, Expect, Gate, Listed, Listing, ObjectMeta, ObjectReader, Staged, Store,
    Sweep, SweepReport, Upload, Version, Versioned,
};
use crate::error::{Error, Result};

/// A lake (or inbox) rooted at a local folder.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    gate: Gate,
}

/// Where guard files live under the root: in the locks zone, hidden.
const GUARDS: &str = "locks/.cas";

impl LocalStore {
    /// A store rooted at `root`; the folder is created on first write.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStore {
            root: root.into(),
            gate: Gate::default(),
        }
    }

    /// The same store, checking `gate` before every write (see [`Gate`]).
    pub fn with_gate(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }

    /// The guard file serialising writes of `key`: `locks/.cas/<key>.cas`.
    fn guard_path(&self, key: &str) -> Result<PathBuf> {
        self.path(&format!("{GUARDS}/{key}.cas"))
    }

    /// Take the guard of `key` within the gate's bound, or answer busy.
    fn guard(&self, key: &str, dest: &Path) -> Result<File> {
        let guard = self.guard_path(key)?;
        match lock_guard(&guard, self.gate.lock_wait) {
            Ok(Some(f)) => Ok(f),
            Ok(None) => Err(Error::Busy {
                location: dest.display().to_string(),
                holder: format!(
                    "a process that held its write lock for more than {:.1} s (stopped or stalled mid-write)",
                    self.gate.lock_wait.as_secs_f64()
                ),
                expires_at: "that process resumes or exits".into(),
            }),
            Err(e) => Err(self.err("lock", &guard, e)),
        }
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        let rel = Path::new(key);
        // Keys are built by the job, but an input name must never climb out of the lake.
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(Error::Config(format!("unsafe key {key:?}")));
        }
        Ok(self.root.join(rel))
    }

    fn err(&self, op: &'static str, path: &Path, e: io::Error) -> Error {
        if e.kind() == io::ErrorKind::NotFound {
            Error::NotFound {
                location: path.display().to_string(),
            }
        } else {
            Error::store(op, path.display().to_string(), e)
        }
    }
}

fn mtime_ns(md: &fs::Metadata) -> i128 {
    md.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128)
}

/// Version token of a small file. Every write goes through a fresh temp file and a
/// rename, so the inode changes with each version; mtime and size guard inode reuse.
fn version_of(md: &fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{}-{}-{}", md.ino(), mtime_ns(md), md.len())
}

fn meta_of(md: &fs::Metadata) -> ObjectMeta {
    use std::os::unix::fs::MetadataExt;
    ObjectMeta {
        size: md.len(),
        version: Version::File {
            mtime_ns: mtime_ns(md),
            ino: md.ino(),
            ctime_ns: i128::from(md.ctime()) * 1_000_000_000 + i128::from(md.ctime_nsec()),
        },
    }
}

fn metadata_opt(path: &Path) -> io::Result<Option<fs::Metadata>> {
    match fs::metadata(path) {
        Ok(md) => Ok(Some(md)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Create `dir` and any missing parents, fsyncing each new folder's parent so the
/// new entries survive a power cut as the files later renamed into them do.
fn create_dirs(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = dir;
    while !at.as_os_str().is_empty() && !at.exists() {
        missing.push(at.to_path_buf());
        at = parent(at);
    }
    for d in missing.iter().rev() {
        match fs::create_dir(d) {
            Ok(()) => sync_dir(parent(d))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// fsync a directory so a rename or unlink in it survives a power cut.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Temp name beside `dest` for `tag` (a run id, or a unique token for small writes).
fn temp_path(dest: &Path, tag: &str) -> PathBuf {
    parent(dest).join(format!(".{}.{tag}.tmp", file_name(dest)))
}

fn unique_tag() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("w{}-{nanos:x}", std::process::id())
}

/// Create a temp file exclusively and lock it: a sweep never removes a temp file
/// whose writer is alive, and the kernel drops the lock when the writer dies.
fn create_temp(tmp: &Path) -> io::Result<File> {
    create_dirs(parent(tmp))?;
    let f = OpenOptions::new().write(true).create_new(true).open(tmp)?;
    f.lock()?;
    Ok(f)
}

/// Write `body` to a fresh, locked temp file beside `dest` and fsync it. The lock
/// lives as long as the returned file.
fn write_temp(dest: &Path, body: &[u8]) -> io::Result<(PathBuf, File)> {
    let tmp = temp_path(dest, &unique_tag());
    let mut f = create_temp(&tmp)?;
    f.write_all(body)?;
    f.sync_all()?;
    Ok((tmp, f))
}

/// Exclusive advisory lock on the guard file at `path`, tried (never waited on) with
/// jittered backoff for up to `wait`; `None` if another process still holds it then.
/// The kernel drops the lock when its holder dies, so a crash never leaves it held;
/// only a stopped holder keeps it, and it must not stall everyone behind it.
fn lock_guard(path: &Path, wait: Duration) -> io::Result<Option<File>> {
    use backon::BackoffBuilder;
    create_dirs(parent(path))?;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let until = Instant::now() + wait;
    let mut delays = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(1))
        .with_max_delay(Duration::from_millis(100))
        .with_jitter()
        .without_max_times()
        .build();
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(Some(f)),
            Err(fs::TryLockError::WouldBlock) => {}
            Err(fs::TryLockError::Error(e)) => return Err(e),
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let delay = delays.next().unwrap_or(Duration::from_millis(100));
        std::thread::sleep(delay.min(left));
    }
}

/// Replace `dest` with `body` if `cond` holds. `Ok(None)`: the condition is false.
/// The caller holds the guard of `dest` (for a conditional write) and checked the gate.
fn put_small_blocking(
    store: &LocalStore,
    key: &str,
    dest: &Path,
    body: &[u8],
    cond: &Condition,
) -> Result<Option<String>> {
    let io = |op, e| store.err(op, dest, e);
    let (tmp, _tmp_lock) = write_temp(dest, body).map_err(|e| io("write", e))?;
    // An unconditional write (run records: unique keys) needs no compare-and-swap.
    let _guard = match cond {
        Condition::None => None,
        _ => match store.guard(key, dest) {
            Ok(g) => Some(g),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        },
    };
    let current = metadata_opt(dest).map_err(|e| io("stat", e))?;
    let allowed = match (cond, &current) {
        (Condition::None, _) => true,
        (Condition::IfAbsent, cur) => cur.is_none(),
        (Condition::IfMatch(v), Some(md)) => &version_of(md) == v,
        (Condition::IfMatch(_), None) => false,
    };
    // The last instant before the write, lock held: a run frozen until its lease's
    // deadline passed stops here.
    let gate = store.gate.before_write(key, &dest.display().to_string());
    if !allowed || gate.is_err() {
        let _ = fs::remove_file(&tmp);
        return gate.map(|()| None);
    }
    fs::rename(&tmp, dest).map_err(|e| io("write", e))?;
    sync_dir(parent(dest)).map_err(|e| io("write", e))?;
    let md = fs::metadata(dest).map_err(|e| io("write", e))?;
    Ok(Some(version_of(&md)))
}

/// The tag of a temp file of `dest_name` (`.<dest_name>.<tag>.tmp`), if `entry` is
/// one. The whole name must parse, tag included, so `.day.jsonl.<run>.tmp` is never
/// taken for a temp file of an input named `day`.
fn temp_tag<'a>(entry: &'a str, dest_name: &str) -> Option<&'a str> {
    let tag = entry
        .strip_prefix('.')?
        .strip_prefix(dest_name)?
        .strip_prefix('.')?
        .strip_suffix(".tmp")?;
    (is_run_id(tag) || is_write_tag(tag)).then_some(tag)
}

/// `YYYYMMDDTHHMMSSZ-xxxxxxxx`, the shape of [`crate::pipeline::new_run_id`].
fn is_run_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 25
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'Z'
        && b[16] == b'-'
        && b[17..]
            .iter()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

/// `w<pid>-<hex nanos>`, the tag of a small write's temp file ([`unique_tag`]).
fn is_write_tag(s: &str) -> bool {
    let Some((pid, nanos)) = s.strip_prefix('w').and_then(|r| r.split_once('-')) else {
        return false;
    };
    !pid.is_empty()
        && pid.bytes().all(|c| c.is_ascii_digit())
        && !nanos.is_empty()
        && nanos.bytes().all(|c| c.is_ascii_hexdigit())
}

/// Should the sweep remove this temp file (whose tag is `tag`)?
fn wanted(tag: &str, run_id: &str, which: Sweep, md: &fs::Metadata, now: SystemTime) -> bool {
    match which {
        Sweep::Own => tag == run_id,
        Sweep::Others { older_than } => {
            let age = md
                .modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .unwrap_or(Duration::ZERO);
            tag != run_id && age >= older_than
        }
    }
}

/// Remove one leftover unless a live writer holds its lock. Returns whether it went.
fn remove_unless_live(path: &Path) -> io::Result<bool> {
    let f = match OpenOptions::new().read(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    match f.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Ok(false),
        Err(fs::TryLockError::Error(e)) => return Err(e),
    }
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn sweep_blocking(
    root: &LocalStore,
    dest_keys: &[String],
    run_id: &str,
    which: Sweep,
) -> Result<SweepReport> {
    let mut report = SweepReport::default();
    let now = SystemTime::now();
    for key in dest_keys {
        let dest = root.path(key)?;
        let dir = parent(&dest);
        let name = file_name(&dest);
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(root.err("list for sweep", dir, e)),
        };
        let mut removed = false;
        // A guard file that an earlier version kept beside its destination.
        let stale_guard = format!(".{name}.cas");
        for entry in entries {
            let entry = entry.map_err(|e| root.err("list for sweep", dir, e))?;
            let entry_name = entry.file_name().to_string_lossy().into_owned();
            if entry_name == stale_guard && matches!(which, Sweep::Others { .. }) {
                let path = entry.path();
                if remove_unless_live(&path).map_err(|e| root.err("sweep", &path, e))? {
                    report.deleted_objects += 1;
                    removed = true;
                }
                continue;
            }
            let Some(tag) = temp_tag(&entry_name, &name) else {
                continue;
            };
            let Ok(md) = entry.metadata() else { continue };
            if !wanted(tag, run_id, which, &md, now) {
                continue;
            }
            if remove_unless_live(&entry.path()).map_err(|e| root.err("sweep", &entry.path(), e))? {
                report.deleted_objects += 1;
                removed = true;
            }
        }
        if removed {
            sync_dir(dir).map_err(|e| root.err("sync after sweep", dir, e))?;
        }
    }
    Ok(report)
}

/// Is `name` one of the job's own entries: a temp file (`.<name>.<tag>.tmp`), a guard
/// file an earlier version left beside its destination (`.<name>.cas`), or the guard
/// folder?
fn is_own_file(name: &str, is_dir: bool) -> bool {
    let hidden = name.len() > 1 && name.starts_with('.');
    if is_dir {
        return name == ".cas";
    }
    hidden && (name.ends_with(".tmp") || name.ends_with(".cas"))
}

/// Run blocking file-system work off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::store("join blocking task", "local", e))?
}

#[async_trait]
impl Store for LocalStore {
    fn location(&self, key: &str) -> String {
        self.root.join(key).display().to_string()
    }

    async fn list(&self, prefix: &str) -> Result<Listing> {
        self.list_folder(prefix, false).await
    }

    async fn read(&self, key: &str) -> Result<ObjectReader> {
        let path = self.path(key)?;
        let file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| self.err("open", &path, e))?;
        let md = file
            .metadata()
            .await
            .map_err(|e| self.err("stat", &path, e))?;
        if !md.is_file() {
            return Err(Error::store(
                "open",
                path.display().to_string(),
                "not a regular file",
            ));
        }
        Ok(ObjectReader {
            body: Box::new(file),
            size: md.len(),
        })
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        let path = self.path(key)?;
        metadata_opt(&path)
            .map(|m| m.map(|m| meta_of(&m)))
            .map_err(|e| self.err("stat", &path, e))
    }

    async fn get_small(&self, key: &str) -> Result<Option<Versioned>> {
        let path = self.path(key)?;
        let store = self.clone();
        blocking(move || {
            let mut f = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(store.err("open", &path, e)),
            };
            // Version and bytes come from the same open file, so they describe one version.
            let md = f.metadata().map_err(|e| store.err("stat", &path, e))?;
            let mut buf = Vec::with_capacity(md.len() as usize);
            io::Read::read_to_end(&mut f, &mut buf).map_err(|e| store.err("read", &path, e))?;
            Ok(Some(Versioned {
                bytes: Bytes::from(buf),
                version: version_of(&md),
            }))
        })
        .await
    }

    async fn put_small(&self, key: &str, body: Bytes, cond: Condition) -> Result<String> {
        let path = self.path(key)?;
        let store = self.clone();
        let key = key.to_owned();
        blocking(
            move || match put_small_blocking(&store, &key, &path, &body, &cond)? {
                Some(v) => Ok(v),
                None => Err(Error::Precondition {
                    location: path.display().to_string(),
                }),
            },
        )
        .await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        let store = self.clone();
        let key = key.to_owned();
        blocking(move || {
            let _guard = store.guard(&key, &path)?;
            match fs::remove_file(&path) {
                Ok(()) => sync_dir(parent(&path)).map_err(|e| store.err("sync", &path, e)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(store.err("delete", &path, e)),
            }
        })
        .await
    }

    async fn stage(&self, dest_key: &str, run_id: &str) -> Result<Box<dyn Upload>> {
        let dest = self.path(dest_key)?;
        let tmp = temp_path(&dest, run_id);
        let store = self.clone();
        let tmp2 = tmp.clone();
        let file = blocking(move || {
            create_temp(&tmp2).map_err(|e| store.err("create temp file", &tmp2, e))
        })
        .await?;
        let key = match dest_key.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/{}", file_name(&tmp)),
            None => file_name(&tmp),
        };
        Ok(Box::new(LocalUpload {
            file: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
            path: tmp,
            staged: Staged {
                key,
                dest_key: dest_key.to_owned(),
                size: 0,
            },
            write_behind: WriteBehind::default(),
        }))
    }

    async fn promote(&self, staged: &Staged, expect: &Expect) -> Result<ObjectMeta> {
        let tmp = self.path(&staged.key)?;
        let dest = self.path(&staged.dest_key)?;
        let store = self.clone();
        let expected = staged.size;
        let expect = expect.clone();
        let key = staged.dest_key.clone();
        blocking(move || {
            // The same guard as compare-and-swap on small files: the check and the
            // rename are one step for every writer on this host.
            let _guard = store.guard(&key, &dest)?;
            let now = metadata_opt(&dest).map_err(|e| store.err("stat", &dest, e))?;
            if Expect::from_head(now.map(|m| meta_of(&m)).as_ref()) != expect {
                return Err(Error::Precondition {
                    location: dest.display().to_string(),
                });
            }
            store.gate.before_write(&key, &dest.display().to_string())?;
            fs::rename(&tmp, &dest).map_err(|e| store.err("rename into place", &dest, e))?;
            sync_dir(parent(&dest)).map_err(|e| store.err("sync folder", &dest, e))?;
            let md = fs::metadata(&dest).map_err(|e| store.err("verify", &dest, e))?;
            if md.len() != expected {
                return Err(Error::store(
                    "verify",
                    dest.display().to_string(),
                    format!("published size {} differs from staged {expected}", md.len()),
                ));
            }
            Ok(meta_of(&md))
        })
        .await
    }

    async fn fencing(&self, _dest_key: &str, _run_id: &str) -> Result<CopyFence> {
        // Promotion checks the destination and renames under one lock.
        Ok(CopyFence::Fenced)
    }

    async fn discard(&self, staged: &Staged) -> Result<()> {
        let tmp = self.path(&staged.key)?;
        match fs::remove_file(&tmp) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err("remove temp file", &tmp, e)),
        }
    }

    async fn leftovers(&self, folders: &[String]) -> Result<Vec<String>> {
        // Temp files (and an earlier version's guard files) are hidden names beside
        // their destination.
        let mut out = Vec::new();
        for folder in folders {
            for f in self.list_folder(folder, true).await?.files {
                if is_own_file(&f.name, false) {
                    out.push(self.location(&format!("{folder}/{}", f.name)));
                }
            }
        }
        Ok(out)
    }

    async fn sweep(&self, dest_keys: &[String], run_id: &str, which: Sweep) -> Result<SweepReport> {
        let store = self.clone();
        let (dest_keys, run_id) = (dest_keys.to_vec(), run_id.to_owned());
        blocking(move || sweep_blocking(&store, &dest_keys, &run_id, which)).await
    }
}

/// A temp file being written. Writes are blocking but buffered; the pipeline hands
/// over large chunks, so each call is a few large `write`s.
struct LocalUpload {
    file: Option<std::io::BufWriter<File>>,
    path: PathBuf,
    staged: Staged,
    write_behind: WriteBehind,
}

/// Writes a large temp file back while it is written, instead of all at the final
/// fsync (a serial 0.2 s tail per GB: the kernel's background threshold, 10% of RAM,
/// is above a day's output), and drops what is written back from the page cache, so
/// a peak day's output does not make the kernel reclaim while we write. Hints only:
/// errors surface at the fsync, which stays.
#[derive(Default)]
struct WriteBehind {
    /// Bytes whose writeback has been started.
    started: u64,
    /// Bytes dropped from the page cache.
    dropped: u64,
}

impl WriteBehind {
    const STEP: u64 = 8 << 20;

    /// `written`: bytes of `file` handed to the kernel so far.
    #[cfg(target_os = "linux")]
    fn advance(&mut self, file: &File, written: u64) {
        use std::os::fd::AsRawFd;
        if written - self.started < Self::STEP {
            return;
        }
        let fd = file.as_raw_fd();
        // SAFETY: plain syscalls on our own open descriptor; they only schedule I/O
        // and drop clean cached pages, never change the file's contents.
        unsafe {
            libc::sync_file_range(
                fd,
                self.started as libc::off64_t,
                (written - self.started) as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
            // The previous step's pages are written back by now (any still under
            // writeback are skipped). A length of 0 would mean "to the end".
            if self.started > self.dropped {
                libc::posix_fadvise(
                    fd,
                    self.dropped as libc::off64_t,
                    (self.started - self.dropped) as libc::off64_t,
                    libc::POSIX_FADV_DONTNEED,
                );
            }
        }
        self.dropped = self.started;
        self.started = written;
    }

    #[cfg(not(target_os = "linux"))]
    fn advance(&mut self, _file: &File, _written: u64) {}
}

impl LocalUpload {
    fn io_err(&self, op: &'static str, e: io::Error) -> Error {
        Error::store(op, self.path.display().to_string(), e)
    }
}

#[async_trait]
impl Upload for LocalUpload {
    fn key(&self) -> &str {
        &self.staged.key
    }

    async fn write(&mut self, data: Bytes) -> Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(self.io_err("write temp file", io::Error::other("already closed")));
        };
        // Blocking write on purpose: the job is a batch of one input and the writes are
        // large; block_in_place would tie the backend to the multi-thread runtime.
        match file.write_all(&data) {
            Ok(()) => {
                self.staged.size += data.len() as u64;
                let written = self.staged.size - file.buffer().len() as u64;
                self.write_behind.advance(file.get_ref(), written);
                Ok(())
            }
            Err(e) => Err(self.io_err("write temp file", e)),
        }
    }

    async fn complete(mut self: Box<Self>) -> Result<Staged> {
        let Some(buf) = self.file.take() else {
            return Err(self.io_err("complete temp file", io::Error::other("already closed")));
        };
        // Closing the file drops its lock: from here on the run's lease is what keeps
        // other runs of this input (the only ones whose sweep matches it) away.
        let result = buf
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|file| file.sync_all());
        result.map_err(|e| self.io_err("fsync temp file", e))?;
        Ok(self.staged.clone())
    }

    async fn abort(mut self: Box<Self>) -> Result<()> {
        self.file.take();
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io_err("remove temp file", e)),
        }
    }
}

impl LocalStore {
    /// [`Store::list`]: the entries of one folder, not descending into sub-folders.
    /// Symbolic links are followed; other kinds (sockets, fifos) and names that are
    /// not UTF-8 are left out, and so are the job's own temp and guard files unless
    /// `own` asks for them. A missing folder is empty, but a missing root is
    /// `NotFound`: an inbox or lake that is not there is not an empty one.
    async fn list_folder(&self, prefix: &str, own: bool) -> Result<Listing> {
        let is_root = prefix.trim_matches('/').is_empty();
        let dir = if is_root {
            self.root.clone()
        } else {
            self.path(prefix.trim_matches('/'))?
        };
        let store = self.clone();
        blocking(move || {
            let mut listing = Listing::default();
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound && !is_root => return Ok(listing),
                Err(e) => return Err(store.err("list", &dir, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| store.err("list", &dir, e))?;
                let Ok(name) = entry.file_name().into_string() else {
                    tracing::warn!(folder = %dir.display(), "left out an entry whose name is not UTF-8");
                    continue;
                };
                // A file may vanish between read_dir and stat: it is simply not listed.
                let md = match fs::metadata(entry.path()) {
                    Ok(md) => md,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(store.err("stat", &entry.path(), e)),
                };
                if !own && is_own_file(&name, md.is_dir()) {
                    continue;
                }
                if md.is_dir() {
                    listing.folders.push(name);
                } else if md.is_file() {
                    listing.files.push(Listed {
                        name,
                        meta: meta_of(&md),
                        modified_ns: mtime_ns(&md),
                    });
                }
            }
            listing.files.sort_by(|a, b| a.name.cmp(&b.name));
            listing.folders.sort();
            Ok(listing)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "20260301T020304Z-0a1b2c3d";

    #[test]
    fn write_behind_steps_through_the_file_and_keeps_its_bytes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out");
        let mut file = File::create(&path).expect("create");
        let mut wb = WriteBehind::default();
        let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        let mut written = 0u64;
        for _ in 0..20 {
            file.write_all(&chunk).expect("write");
            written += chunk.len() as u64;
            wb.advance(&file, written);
            assert!(wb.dropped <= wb.started && wb.started <= written);
        }
        #[cfg(target_os = "linux")]
        assert_eq!((wb.dropped, wb.started), (8 << 20, 16 << 20));
        file.sync_all().expect("fsync");
        let back = fs::read(&path).expect("read back");
        assert_eq!(back.len(), 20 << 20);
        assert!(back.chunks(1 << 20).all(|c| c == chunk.as_slice()));
    }

    #[test]
    fn temp_names_parse_whole() {
        assert_eq!(
            temp_tag(&format!(".a.jsonl.{RUN}.tmp"), "a.jsonl"),
            Some(RUN)
        );
        assert_eq!(
            temp_tag(".a.jsonl.w123-ff0.tmp", "a.jsonl"),
            Some("w123-ff0")
        );
        assert_eq!(temp_tag(&format!(".ab.jsonl.{RUN}.tmp"), "a.jsonl"), None);
        assert_eq!(temp_tag("a.jsonl", "a.jsonl"), None);
        assert_eq!(temp_tag(".a.jsonl..tmp", "a.jsonl"), None);
        // An input named `day` never claims the temp files of `day.jsonl`.
        assert_eq!(temp_tag(&format!(".day.jsonl.{RUN}.tmp"), "day"), None);
        assert_eq!(temp_tag(".day.jsonl.w1-2.tmp", "day"), None);
    }

    #[test]
    fn run_ids_have_one_shape() {
        assert!(is_run_id(&crate::pipeline::new_run_id()));
        assert!(!is_run_id("20260301T020304Z-0A1B2C3D"));
        assert!(!is_run_id("jsonl.20260301T020304Z-0a1b2c3d"));
    }

    #[test]
    fn a_locked_temp_file_is_never_swept() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join(format!(".a.jsonl.{RUN}.tmp"));
        let held = create_temp(&tmp).unwrap();
        assert!(
            !remove_unless_live(&tmp).unwrap(),
            "live writer's temp file removed"
        );
        assert!(tmp.exists());
        drop(held);
        assert!(remove_unless_live(&tmp).unwrap());
        assert!(!tmp.exists());
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// A guard held by another open file (another process, or a stopped one) makes a
    /// conditional write answer busy within the gate's bound instead of waiting.
    #[test]
    fn a_held_guard_answers_busy_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let wait = Duration::from_millis(200);
        let gate = Gate::new(super::super::Deadline::default(), wait, None);
        let store = LocalStore::new(dir.path()).with_gate(gate);
        let held = lock_guard(&store.guard_path("checkpoints/p/a.json").unwrap(), wait)
            .unwrap()
            .expect("the first lock is free");
        let t = Instant::now();
        let r = runtime().block_on(store.put_small(
            "checkpoints/p/a.json",
            Bytes::from_static(b"{}"),
            Condition::IfAbsent,
        ));
        assert!(matches!(r, Err(Error::Busy { .. })), "{r:?}");
        assert!(t.elapsed() >= wait, "gave up before the bound");
        assert!(!dir.path().join("checkpoints/p/a.json").exists());
        drop(held);
        let r = runtime().block_on(store.put_small(
            "checkpoints/p/a.json",
            Bytes::from_static(b"{}"),
            Condition::IfAbsent,
        ));
        assert!(r.is_ok(), "{r:?}");
    }

    /// Past the run's deadline, a write that got its lock writes nothing.
    #[test]
    fn a_passed_deadline_stops_the_write_inside_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let deadline = super::super::Deadline::default();
        deadline.set(Some(Instant::now()));
        let store =
            LocalStore::new(dir.path()).with_gate(Gate::new(deadline, Duration::ZERO, None));
        let r = runtime().block_on(store.put_small(
            "checkpoints/p/a.json",
            Bytes::from_static(b"{}"),
            Condition::IfAbsent,
        ));
        assert!(matches!(r, Err(Error::Conflict(_))), "{r:?}");
        let left: Vec<_> = fs::read_dir(dir.path().join("checkpoints/p"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    /// Guard files live in the locks zone, never beside the data they guard; listings
    /// leave out the job's own files; a missing root is not an empty folder.
    #[test]
    fn guards_stay_out_of_readers_zones_and_listings() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        assert_eq!(
            store.guard_path("raw/p/a.jsonl").unwrap(),
            dir.path().join("locks/.cas/raw/p/a.jsonl.cas")
        );
        fs::create_dir_all(dir.path().join("raw/p")).unwrap();
        for name in [
            "a.jsonl",
            ".a.jsonl.cas",
            &format!(".a.jsonl.{RUN}.tmp"),
            ".hidden",
        ] {
            fs::write(dir.path().join("raw/p").join(name), b"").unwrap();
        }
        let rt = runtime();
        let names: Vec<String> = rt
            .block_on(store.list("raw/p"))
            .unwrap()
            .files
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, [".hidden", "a.jsonl"]);
        let left = rt.block_on(store.leftovers(&["raw/p".to_owned()])).unwrap();
        assert_eq!(left.len(), 2, "{left:?}");
        let gone = LocalStore::new(dir.path().join("no-such"));
        assert!(matches!(
            rt.block_on(gone.list("")),
            Err(Error::NotFound { .. })
        ));
        assert!(rt.block_on(gone.list("raw")).unwrap().files.is_empty());
    }

    #[test]
    fn keys_cannot_escape_the_root() {
        let s = LocalStore::new("/lake");
        assert!(s.path("raw/p/../../etc").is_err());
        assert!(s.path("/etc/passwd").is_err());
        assert_eq!(s.path("raw/p/a").unwrap(), PathBuf::from("/lake/raw/p/a"));
    }
}
