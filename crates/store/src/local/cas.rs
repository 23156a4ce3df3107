//! Compare-and-swap between processes on one host: every conditional write and every
//! promotion is checked and renamed into place under an advisory `flock` on a guard
//! file in `locks/.cas/`, a zone no reader is granted. A lock is only ever tried,
//! within the [`Gate`](crate::Gate)'s bound, so a stopped holder makes others
//! answer busy.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::stage::{write_guarded_temp, write_temp};
use super::{create_dirs, meta_of, metadata_opt, parent, sync_dir, LocalStore};
use crate::{ObjectMeta, PutMode, Version};
use landing_error::{Error, Result};

/// Where guard files live under the root: in the locks zone, hidden.
const GUARDS: &str = "locks/.cas";

impl LocalStore {
    /// The guard file serialising writes of `key`: `locks/.cas/<key>.cas`.
    pub(super) fn guard_path(&self, key: &str) -> Result<PathBuf> {
        self.path(&format!("{GUARDS}/{key}.cas"))
    }

    /// Take the guard of `key` within the gate's bound, or answer busy.
    pub(super) fn guard(&self, key: &str, dest: &Path) -> Result<File> {
        let guard = self.guard_path(key)?;
        match lock_guard(&guard, self.gate.lock_wait, || {}) {
            Ok(Some(f)) => Ok(f),
            Ok(None) => Err(Error::Busy {
                location: dest.display().to_string(),
                holder: format!(
                    "a process that held its write lock for more than {:.1} s (stopped or stalled mid-write)",
                    self.gate.lock_wait.as_secs_f64()
                ),
                until: "that process resumes or exits".into(),
            }),
            Err(e) => Err(self.err("lock", &guard, e)),
        }
    }
}

/// Exclusive advisory lock on the guard file at `path`, tried (never waited on) with
/// jittered backoff for up to `wait`; `None` if another process still holds it then.
/// The kernel drops the lock when its holder dies, so a crash never leaves it held;
/// only a stopped holder keeps it, and it must not stall everyone behind it.
/// `tried` is told of each try that found the lock held.
fn lock_guard(path: &Path, wait: Duration, mut tried: impl FnMut()) -> io::Result<Option<File>> {
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
            Err(fs::TryLockError::WouldBlock) => tried(),
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

/// Replace `dest` with `body` if `mode` allows. `Ok(None)`: the condition is false.
/// The caller holds the guard of `dest` (for a conditional write) and checked the gate.
pub(super) fn put_small_blocking(
    store: &LocalStore,
    key: &str,
    dest: &Path,
    body: &[u8],
    mode: &PutMode,
) -> Result<Option<Version>> {
    let io = |op, e| store.err(op, dest, e);
    // An unconditional write (run records: unique keys) needs no compare-and-swap. A
    // conditional one writes its temp file under the guard, at the one name the next
    // writer of the key takes over: a writer killed mid-write leaves nothing behind
    // for long (a commit log's entry is created once, by whoever comes next).
    let (_guard, (tmp, _tmp_lock)) = match mode {
        PutMode::Overwrite => (None, write_temp(dest, body).map_err(|e| io("write", e))?),
        _ => {
            let guard = store.guard(key, dest)?;
            let temp = write_guarded_temp(dest, body).map_err(|e| io("write", e))?;
            (Some(guard), temp)
        }
    };
    let current = metadata_opt(dest).map_err(|e| io("stat", e))?;
    let allowed = mode.allows(current.map(|md| meta_of(&md).version).as_ref());
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
    Ok(Some(meta_of(&md).version))
}

/// Publish the temp file `tmp` as `dest` (`key`) if `mode` allows what `dest` is, under the same guard as compare-and-swap on small files: the check and the
/// rename are one step for every writer on this host.
pub(super) fn promote_blocking(
    store: &LocalStore,
    key: &str,
    tmp: &Path,
    dest: &Path,
    mode: &PutMode,
    expected: u64,
) -> Result<ObjectMeta> {
    let _guard = store.guard(key, dest)?;
    let now = metadata_opt(dest).map_err(|e| store.err("stat", dest, e))?;
    if !mode.allows(now.map(|m| meta_of(&m).version).as_ref()) {
        return Err(Error::Precondition {
            location: dest.display().to_string(),
        });
    }
    store.gate.before_write(key, &dest.display().to_string())?;
    fs::rename(tmp, dest).map_err(|e| store.err("rename into place", dest, e))?;
    sync_dir(parent(dest)).map_err(|e| store.err("sync folder", dest, e))?;
    let md = fs::metadata(dest).map_err(|e| store.err("verify", dest, e))?;
    if md.len() != expected {
        return Err(Error::store(
            "verify",
            dest.display().to_string(),
            format!("published size {} differs from staged {expected}", md.len()),
        ));
    }
    Ok(meta_of(&md))
}

#[cfg(test)]
mod tests {
    use super::super::tests::runtime;
    use super::*;
    use crate::{Deadline, Gate, Store};
    use bytes::Bytes;

    /// A guard held by another open file (another process, or a stopped one) makes a
    /// conditional write answer busy within the gate's bound instead of waiting, after
    /// trying again within it (not at the first refusal); released, it is taken.
    #[test]
    fn a_held_guard_answers_busy_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let wait = Duration::from_millis(200);
        let gate = Gate::new(Deadline::default(), wait);
        let store = LocalStore::new(dir.path()).with_gate(gate);
        let path = store.guard_path("checkpoints/p/a.json").unwrap();
        let held = lock_guard(&path, wait, || {})
            .unwrap()
            .expect("the first lock is free");
        let mut refused = 0;
        let second = lock_guard(&path, wait, || refused += 1).unwrap();
        assert!(second.is_none(), "a held guard is not taken");
        assert!(
            refused >= 2,
            "gave up after {refused} try: no retry within the bound"
        );
        let r = runtime().block_on(store.put_small(
            "checkpoints/p/a.json",
            Bytes::from_static(b"{}"),
            PutMode::Create,
        ));
        assert!(matches!(r, Err(Error::Busy { .. })), "{r:?}");
        assert!(!dir.path().join("checkpoints/p/a.json").exists());
        drop(held);
        let r = runtime().block_on(store.put_small(
            "checkpoints/p/a.json",
            Bytes::from_static(b"{}"),
            PutMode::Create,
        ));
        assert!(r.is_ok(), "{r:?}");
    }

    /// Past the run's deadline, a write that got its lock writes nothing.
    #[test]
    fn a_passed_deadline_stops_the_write_inside_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let deadline = Deadline::default();
        deadline.set(Some(Instant::now()));
        let store = LocalStore::new(dir.path()).with_gate(Gate::new(deadline, Duration::ZERO));
        let r = runtime().block_on(store.put_small(
            "checkpoints/p/a.json",
            Bytes::from_static(b"{}"),
            PutMode::Create,
        ));
        assert!(matches!(r, Err(Error::Conflict(_))), "{r:?}");
        let left: Vec<_> = fs::read_dir(dir.path().join("checkpoints/p"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
