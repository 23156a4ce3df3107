//! Staging on a local lake: a hidden temp file beside its destination
//! (`.<name>.<run id>.tmp`, never a valid input name), locked while its writer
//! lives, and the sweep of the temp files that dead or interrupted runs left.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;

use super::{blocking, create_dirs, file_name, parent, sync_dir, LocalStore};
use crate::{Staged, Sweep, SweepReport, Upload};
use landing_error::{Error, Result};

impl LocalStore {
    /// [`crate::Lake::stage`]: a fresh, locked temp file named by the run.
    pub(super) async fn start_stage(
        &self,
        dest_key: &str,
        run_id: &str,
        pass: u8,
    ) -> Result<Box<dyn Upload>> {
        let dest = self.path(dest_key)?;
        self.gate.before_staging(&dest.display().to_string())?;
        let tmp = match pass {
            1 => temp_path(&dest, run_id),
            n => temp_path(&dest, &format!("{run_id}.p{n}")),
        };
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
                label: None,
            },
            write_behind: WriteBehind::default(),
        }))
    }
}

/// Write `body` to the one temp file of a guarded write of `dest` (its writer holds
/// `dest`'s guard), replacing what a writer killed mid-write left there: the next
/// guarded write of the key takes it over, so no sweep has to find it. Named as a
/// small write's temp file (`w0-0`: pid 0 is no writer), so sweeps and `verify` know it.
pub(super) fn write_guarded_temp(dest: &Path, body: &[u8]) -> io::Result<(PathBuf, File)> {
    let tmp = temp_path(dest, GUARDED_TAG);
    create_dirs(parent(&tmp))?;
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    f.lock()?;
    f.write_all(body)?;
    f.sync_all()?;
    Ok((tmp, f))
}

/// The tag of a guarded write's temp file ([`write_guarded_temp`]).
const GUARDED_TAG: &str = "w0-0";

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
pub(super) fn write_temp(dest: &Path, body: &[u8]) -> io::Result<(PathBuf, File)> {
    let tmp = temp_path(dest, &unique_tag());
    let mut f = create_temp(&tmp)?;
    f.write_all(body)?;
    f.sync_all()?;
    Ok((tmp, f))
}

/// The tag of a temp file of `dest_name` (`.<dest_name>.<tag>.tmp`), if `entry` is
/// one. The whole name must parse, tag included, so `.day.jsonl.<run>.tmp` is never
/// taken for a temp file of an input named `day`.
/// The tag of a run's later pass (`<run id>.p2`) names that run.
fn temp_tag<'a>(entry: &'a str, dest_name: &str) -> Option<&'a str> {
    let tag = entry
        .strip_prefix('.')?
        .strip_prefix(dest_name)?
        .strip_prefix('.')?
        .strip_suffix(".tmp")?;
    let run = tag
        .rsplit_once(".p")
        .filter(|(run, n)| is_run_id(run) && !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
        .map_or(tag, |(run, _)| run);
    (is_run_id(run) || is_write_tag(tag)).then_some(run)
}

/// `YYYYMMDDTHHMMSSZ-xxxxxxxx`, the shape of the engine's `pipeline::new_run_id`.
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

/// [`crate::Lake::sweep`]: the temp files beside each destination that the
/// sweep [`Sweep::takes`], and the guard files an earlier version left there.
pub(super) fn sweep_blocking(
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
            if !which.takes(run_id, tag, md.modified().ok(), now) {
                report.kept += u64::from(which.leaves(run_id, tag));
                continue;
            }
            if remove_unless_live(&entry.path()).map_err(|e| root.err("sweep", &entry.path(), e))? {
                report.deleted_objects += 1;
                removed = true;
            } else if entry.path().exists() {
                // A live writer holds it (a frozen run, say).
                report.kept += 1;
            }
        }
        if removed {
            sync_dir(dir).map_err(|e| root.err("sync after sweep", dir, e))?;
        }
    }
    Ok(report)
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
        assert_eq!(
            temp_tag(&format!(".a.jsonl.{RUN}.p2.tmp"), "a.jsonl"),
            Some(RUN)
        );
        assert_eq!(temp_tag(".a.jsonl.x.p2.tmp", "a.jsonl"), None);
        assert_eq!(temp_tag(&format!(".ab.jsonl.{RUN}.tmp"), "a.jsonl"), None);
        assert_eq!(temp_tag("a.jsonl", "a.jsonl"), None);
        assert_eq!(temp_tag(".a.jsonl..tmp", "a.jsonl"), None);
        // An input named `day` never claims the temp files of `day.jsonl`.
        assert_eq!(temp_tag(&format!(".day.jsonl.{RUN}.tmp"), "day"), None);
        assert_eq!(temp_tag(".day.jsonl.w1-2.tmp", "day"), None);
    }

    #[test]
    fn run_ids_have_one_shape() {
        assert!(is_run_id("20260301T020304Z-0a1b2c3d"));
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
}
