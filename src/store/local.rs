//! Local-folder backend. Staging is a hidden temp file beside its destination
//! (`.<name>.<run id>.tmp`, never a valid input name); publish is fsync, rename over
//! the published name, fsync the directory, which POSIX makes atomic on one file
//! system. Small objects (checkpoint, lease) are replaced under an advisory `flock`
//! on a sidecar file, so compare-and-swap holds between processes on one host only.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    Condition, ObjectMeta, ObjectReader, StageSpec, Staged, Store, SweepReport, SweepSpec, Upload,
    Versioned,
};
use crate::error::{Error, Result};

/// A lake (or inbox) rooted at a local folder.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// A store rooted at `root`; the folder is created on first write.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStore { root: root.into() }
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
    ObjectMeta {
        size: md.len(),
        etag: None,
        mtime_ns: Some(mtime_ns(md)),
    }
}

fn metadata_opt(path: &Path) -> io::Result<Option<fs::Metadata>> {
    match fs::metadata(path) {
        Ok(md) => Ok(Some(md)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
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

/// Write `body` to a fresh temp file beside `dest` and fsync it.
fn write_temp(dest: &Path, body: &[u8]) -> io::Result<PathBuf> {
    fs::create_dir_all(parent(dest))?;
    let tmp = temp_path(dest, &unique_tag());
    let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    f.write_all(body)?;
    f.sync_all()?;
    Ok(tmp)
}

/// Exclusive advisory lock serialising compare-and-swap on one small file. The
/// kernel drops it when the process dies, so a crash never leaves it held.
fn cas_guard(dest: &Path) -> io::Result<File> {
    fs::create_dir_all(parent(dest))?;
    let guard_path = parent(dest).join(format!(".{}.cas", file_name(dest)));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(guard_path)?;
    f.lock()?;
    Ok(f)
}

fn put_small_blocking(dest: &Path, body: &[u8], cond: &Condition) -> io::Result<Option<String>> {
    let tmp = write_temp(dest, body)?;
    let _guard = cas_guard(dest)?;
    let current = metadata_opt(dest)?;
    let allowed = match (cond, &current) {
        (Condition::None, _) => true,
        (Condition::IfAbsent, cur) => cur.is_none(),
        (Condition::IfMatch(v), Some(md)) => &version_of(md) == v,
        (Condition::IfMatch(_), None) => false,
    };
    if !allowed {
        let _ = fs::remove_file(&tmp);
        return Ok(None);
    }
    fs::rename(&tmp, dest)?;
    sync_dir(parent(dest))?;
    let md = fs::metadata(dest)?;
    Ok(Some(version_of(&md)))
}

/// Is `entry` a leftover temp file of `dest_name` written by a run other than `keep`?
fn is_leftover(entry: &str, dest_name: &str, keep: &str) -> bool {
    entry
        .strip_prefix('.')
        .and_then(|s| s.strip_prefix(dest_name))
        .and_then(|s| s.strip_prefix('.'))
        .and_then(|s| s.strip_suffix(".tmp"))
        .is_some_and(|tag| !tag.is_empty() && !tag.contains('/') && tag != keep)
}

fn sweep_blocking(root: &LocalStore, spec: &SweepSpec) -> Result<SweepReport> {
    let mut report = SweepReport::default();
    let now = SystemTime::now();
    for key in &spec.dest_keys {
        let dest = root.path(key)?;
        let dir = parent(&dest);
        let name = file_name(&dest);
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(root.err("list for sweep", dir, e)),
        };
        let mut removed = false;
        for entry in entries {
            let entry = entry.map_err(|e| root.err("list for sweep", dir, e))?;
            let entry_name = entry.file_name().to_string_lossy().into_owned();
            if !is_leftover(&entry_name, &name, &spec.keep_run_id) {
                continue;
            }
            let age = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .unwrap_or(Duration::ZERO);
            if age < spec.older_than {
                continue;
            }
            match fs::remove_file(entry.path()) {
                Ok(()) => {
                    report.deleted_objects += 1;
                    removed = true;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(root.err("sweep", &entry.path(), e)),
            }
        }
        if removed {
            sync_dir(dir).map_err(|e| root.err("sync after sweep", dir, e))?;
        }
    }
    Ok(report)
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
        blocking(move || match put_small_blocking(&path, &body, &cond) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(Error::Precondition {
                location: path.display().to_string(),
            }),
            Err(e) => Err(store.err("write", &path, e)),
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        let store = self.clone();
        blocking(move || {
            let _guard = cas_guard(&path).map_err(|e| store.err("lock", &path, e))?;
            match fs::remove_file(&path) {
                Ok(()) => sync_dir(parent(&path)).map_err(|e| store.err("sync", &path, e)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(store.err("delete", &path, e)),
            }
        })
        .await
    }

    async fn stage(&self, spec: &StageSpec) -> Result<Box<dyn Upload>> {
        let dest = self.path(&spec.dest_key)?;
        let tmp = temp_path(&dest, &spec.run_id);
        let store = self.clone();
        let tmp2 = tmp.clone();
        let file = blocking(move || {
            fs::create_dir_all(parent(&tmp2)).map_err(|e| store.err("create folder", &tmp2, e))?;
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp2)
                .map_err(|e| store.err("create temp file", &tmp2, e))
        })
        .await?;
        let key = match spec.dest_key.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/{}", file_name(&tmp)),
            None => file_name(&tmp),
        };
        Ok(Box::new(LocalUpload {
            file: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
            path: tmp,
            staged: Staged {
                key,
                dest_key: spec.dest_key.clone(),
                size: 0,
            },
        }))
    }

    async fn promote(&self, staged: &Staged) -> Result<ObjectMeta> {
        let tmp = self.path(&staged.key)?;
        let dest = self.path(&staged.dest_key)?;
        let store = self.clone();
        let expected = staged.size;
        blocking(move || {
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

    async fn discard(&self, staged: &Staged) -> Result<()> {
        let tmp = self.path(&staged.key)?;
        match fs::remove_file(&tmp) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err("remove temp file", &tmp, e)),
        }
    }

    async fn sweep(&self, spec: &SweepSpec) -> Result<SweepReport> {
        let store = self.clone();
        let spec = spec.clone();
        blocking(move || sweep_blocking(&store, &spec)).await
    }
}

/// A temp file being written. Writes are blocking but buffered; the pipeline hands
/// over large chunks, so each call is a few large `write`s.
struct LocalUpload {
    file: Option<std::io::BufWriter<File>>,
    path: PathBuf,
    staged: Staged,
}

impl LocalUpload {
    fn io_err(&self, op: &'static str, e: io::Error) -> Error {
        Error::store(op, self.path.display().to_string(), e)
    }
}

#[async_trait]
impl Upload for LocalUpload {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(self.io_err("write temp file", io::Error::other("already closed")));
        };
        // Blocking write on purpose: the job is a batch of one input and the writes are
        // large; block_in_place would tie the backend to the multi-thread runtime.
        match file.write_all(&data) {
            Ok(()) => {
                self.staged.size += data.len() as u64;
                Ok(())
            }
            Err(e) => Err(self.io_err("write temp file", e)),
        }
    }

    async fn complete(mut self: Box<Self>) -> Result<Staged> {
        let Some(buf) = self.file.take() else {
            return Err(self.io_err("complete temp file", io::Error::other("already closed")));
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_match_only_other_runs_of_the_same_name() {
        assert!(is_leftover(".a.jsonl.run1.tmp", "a.jsonl", "run2"));
        assert!(!is_leftover(".a.jsonl.run2.tmp", "a.jsonl", "run2"));
        assert!(!is_leftover(".ab.jsonl.run1.tmp", "a.jsonl", "run2"));
        assert!(!is_leftover("a.jsonl", "a.jsonl", "run2"));
        assert!(!is_leftover(".a.jsonl..tmp", "a.jsonl", "run2"));
    }

    #[test]
    fn keys_cannot_escape_the_root() {
        let s = LocalStore::new("/lake");
        assert!(s.path("raw/p/../../etc").is_err());
        assert!(s.path("/etc/passwd").is_err());
        assert_eq!(s.path("raw/p/a").unwrap(), PathBuf::from("/lake/raw/p/a"));
    }
}
