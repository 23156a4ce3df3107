//! Local-folder backend. Staging is a hidden temp file beside its destination
//! (`.<name>.<run id>.tmp`, never a valid input name; `stage.rs`); publish is fsync,
//! rename over the published name, fsync the directory, which POSIX makes atomic on
//! one file system. Small objects (checkpoint, lease) are replaced, and published
//! objects promoted, under an advisory `flock` on a guard file (`cas.rs`), so
//! compare-and-swap holds between processes on one host only. Guard files live in
//! `locks/.cas/`, a zone no reader is granted, never beside published data. A lock is
//! only ever tried, within the [`Gate`]'s bound: a holder that is stopped (SIGSTOP, a
//! paused VM, a stalled mount) makes other writers answer busy instead of waiting for
//! it.

use std::fs::{self, File};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use async_trait::async_trait;
use bytes::Bytes;

mod cas;
mod label;
mod read;
mod stage;

pub(crate) use read::OnceRead;

use super::{
    Capabilities, CopyFence, Fence, Gate, Lake, Listed, Listing, ObjectMeta, ObjectReader, PutMode,
    Slot, Staged, Store, Sweep, SweepReport, Upload, Version,
};
use landing_error::{Error, Result};

/// A lake (or inbox) rooted at a local folder.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    gate: Gate,
}

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
        .map_err(|e| Error::internal("join blocking task", "local", e))?
}

impl std::fmt::Display for LocalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let root = self.root.display().to_string();
        f.write_str(root.strip_suffix('/').unwrap_or(&root))
    }
}

impl LocalStore {
    /// Full human-readable location of `key`: the root and the key.
    pub fn location(&self, key: &str) -> String {
        crate::locate(self, key)
    }
}

#[async_trait]
impl Store for LocalStore {
    async fn list(&self, prefix: &str) -> Result<Listing> {
        self.list_folder(prefix, false).await
    }

    async fn read(&self, key: &str, offset: u64) -> Result<ObjectReader> {
        let path = self.path(key)?;
        let store = self.clone();
        blocking(move || {
            let mut file = File::open(&path).map_err(|e| store.err("open", &path, e))?;
            let md = file.metadata().map_err(|e| store.err("stat", &path, e))?;
            if !md.is_file() {
                return Err(Error::store(
                    "open",
                    path.display().to_string(),
                    "not a regular file",
                ));
            }
            let at = offset.min(md.len());
            if at > 0 {
                use std::io::{Seek, SeekFrom};
                file.seek(SeekFrom::Start(at))
                    .map_err(|e| store.err("seek", &path, e))?;
            }
            Ok(ObjectReader::file(file, md.len() - at).with_version(meta_of(&md).version))
        })
        .await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        let path = self.path(key)?;
        metadata_opt(&path)
            .map(|m| m.map(|m| meta_of(&m)))
            .map_err(|e| self.err("stat", &path, e))
    }

    async fn put_small(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Version> {
        let path = self.path(key)?;
        let store = self.clone();
        let key = key.to_owned();
        blocking(
            move || match cas::put_small_blocking(&store, &key, &path, &body, &mode)? {
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
            // A run's own temp file (its staging, once checkpointed) is no published
            // name: no guard, and no folder fsync, since losing the unlink to a power
            // cut only leaves what a sweep takes.
            if is_own_file(&file_name(&path), false) {
                return match fs::remove_file(&path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        Err(store.err("remove temp file", &path, e))
                    }
                    _ => Ok(()),
                };
            }
            let _guard = store.guard(&key, &path)?;
            match fs::remove_file(&path) {
                Ok(()) => sync_dir(parent(&path)).map_err(|e| store.err("sync", &path, e)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(store.err("delete", &path, e)),
            }
        })
        .await
    }

    fn capabilities(&self) -> Capabilities {
        // A write checks the deadline under its lock and dies with its process.
        Capabilities {
            instant_takeover: true,
            in_flight: None,
            multipart: false,
        }
    }

    async fn remove_tree(&self, prefix: &str) -> Result<()> {
        let path = self.path(prefix)?;
        let store = self.clone();
        blocking(move || {
            match fs::remove_dir_all(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(store.err("remove folder", &path, e));
                }
                _ => {}
            }
            // The folders above it that are left empty, up to the root (exclusive);
            // the first that is not empty (another drill's kept scratch) stops it.
            let mut up = path.parent();
            while let Some(dir) = up.filter(|d| d.starts_with(&store.root) && *d != store.root) {
                if fs::remove_dir(dir).is_err() {
                    break;
                }
                up = dir.parent();
            }
            Ok(())
        })
        .await
    }
}

/// The run's staging as temp files beside their destinations (`stage.rs`), promoted
/// by a rename under the destination's guard (`cas.rs`).
#[async_trait]
impl Lake for LocalStore {
    async fn stage(&self, dest_key: &str, run_id: &str, slot: Slot) -> Result<Box<dyn Upload>> {
        let n = match slot {
            Slot::First => 1,
            Slot::Second => 2,
        };
        self.start_stage(dest_key, run_id, n).await
    }

    async fn promote(&self, staged: &Staged, mode: &PutMode, _fence: Fence) -> Result<ObjectMeta> {
        // Always fenced here: the check and the rename are one step under the guard.
        let tmp = self.path(&staged.key)?;
        let dest = self.path(&staged.dest_key)?;
        let store = self.clone();
        let (mode, size, key) = (mode.clone(), staged.size, staged.dest_key.clone());
        if let Some(l) = staged.label.clone() {
            let tmp = tmp.clone();
            let kept = blocking(move || {
                label::set(&tmp, &l)
                    .map_err(|e| Error::store("label", tmp.display().to_string(), e))
            })
            .await?;
            if !kept {
                tracing::warn!(location = %self.location(&staged.dest_key), "this filesystem keeps no extended attributes: the publish carries no label, so only the input's own next run can repair its log entry after a crash");
            }
        }
        blocking(move || cas::promote_blocking(&store, &key, &tmp, &dest, &mode, size)).await
    }

    async fn labelled(&self, key: &str) -> Result<Option<(ObjectMeta, Option<String>)>> {
        let path = self.path(key)?;
        let store = self.clone();
        blocking(move || {
            let file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(store.err("open", &path, e)),
            };
            let md = file.metadata().map_err(|e| store.err("stat", &path, e))?;
            let l = label::get(&file).map_err(|e| store.err("read the label of", &path, e))?;
            Ok(Some((meta_of(&md), l)))
        })
        .await
    }

    async fn unsettled(&self, _folders: &[String]) -> Result<Option<Vec<String>>> {
        // The rename consumed the temp file: staging says nothing of what was published.
        Ok(None)
    }

    async fn fencing(&self, _dest_key: &str, _run_id: &str) -> Result<Fence> {
        // Promotion checks the destination and renames under one lock.
        Ok(Fence::new(CopyFence::Fenced))
    }

    fn with_run_gate(&self, gate: Gate) -> Arc<dyn Lake> {
        Arc::new(self.clone().with_gate(gate))
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
        blocking(move || stage::sweep_blocking(&store, &dest_keys, &run_id, which)).await
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

    pub(super) fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// A scratch tree goes whole, with the folders above it that it leaves empty;
    /// a folder that still holds something, and the root, stay.
    #[test]
    fn remove_tree_takes_the_folder_and_its_empty_parents_only() {
        let root = tempfile::tempdir().expect("tempdir");
        let base = root.path().join("lake");
        for f in [
            "drills/a/x/raw/p/d.jsonl",
            "drills/a/x/inbox/d.jsonl",
            "drills/b/keep.jsonl",
        ] {
            let path = base.join(f);
            fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            fs::write(path, b"{}\n").expect("write");
        }
        let store = LocalStore::new(&base);
        runtime().block_on(async {
            store.remove_tree("drills/a/x").await.expect("removed");
            // drills/a was left empty: gone; drills still holds b: kept.
            assert!(!base.join("drills/a").exists());
            assert!(base.join("drills/b/keep.jsonl").exists());
            store.remove_tree("drills/b").await.expect("removed");
            store
                .remove_tree("drills/none")
                .await
                .expect("a missing tree is removed");
        });
        assert!(!base.join("drills").exists(), "left empty, so removed");
        assert!(base.exists(), "the root stays");
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
