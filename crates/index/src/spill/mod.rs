//! Spill: when the dedup index reaches its share of the memory budget, the run goes
//! on with bounded memory by sorting and scanning, as the lesson prescribes for a map
//! that does not fit. It never skips the duplicate and collision check.
//!
//! - At the first spill the index is written out, sorted by id digest, as a run of
//!   records marked [`Record::FIRST`] (first occurrences, never dropped), and freed.
//! - The dumped events are read back into a [`Fingerprints`] table (8 bytes an event
//!   instead of the index's 24 and more). While it has room it decides each line as
//!   it comes, as the index did: a new id is staged, a line it takes for a copy is
//!   dropped (recorded as [`Record::COPY`]), another payload under a known id is
//!   staged and left to the merge.
//! - Every accepted event after the spill is recorded as (id digest, canonical
//!   digest, line, output ordinal); a buffer of records that reaches its share is
//!   sorted and written out as one more run. Once the table is full it is freed,
//!   and each line is held back for a replay if copies came before, else staged.
//! - Before anything is published, [`merge`] merges the runs and decides per id
//!   digest exactly what the in-memory index would have: the first occurrence stays,
//!   a later equal canonical form is a duplicate (the replay, a second read of the
//!   input, skips its line; a staged one is dropped by a second pass over the staged
//!   output), a canonical form not seen under that digest is a suspect (the pipeline
//!   compares full ids before it refuses anything). A line the table took for a copy
//!   that is none fails the run: its output line is missing.
//!
//! Scratch lives in a directory per run under `--scratch-dir`, holding a lock its
//! run keeps while alive; a later run removes any such directory whose lock is free
//! (its run died), and a run removes its own when it ends.

pub mod fingerprints;
pub mod merge;

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::identity::Digests;

pub use fingerprints::{Call, Fingerprints};
pub use merge::{merge, Merged};

/// One spilled event: 40 bytes on disk, little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub key: u64,
    pub value: [u64; 2],
    /// Physical line of the input (0 for an index entry dumped at the first spill).
    pub line: u64,
    /// Line of the staged output, or [`Record::FIRST`].
    pub ordinal: u64,
}

impl Record {
    pub const BYTES: usize = 40;
    /// The ordinal of an entry the index held: a first occurrence, never dropped.
    pub const FIRST: u64 = u64::MAX;
    /// The ordinal of a line the fingerprint table took for a copy: it has no
    /// output line, and the merge checks the call.
    pub const COPY: u64 = u64::MAX - 1;

    pub fn new(d: Digests, line: u64, ordinal: u64) -> Record {
        Record {
            key: d.key(),
            value: d.value(),
            line,
            ordinal,
        }
    }

    /// Runs are sorted by id digest, then by line: a group's first is its first line.
    fn sort_key(&self) -> (u64, u64) {
        (self.key, self.line)
    }

    fn write(&self, w: &mut impl Write) -> io::Result<()> {
        let mut b = [0u8; Record::BYTES];
        for (i, v) in [
            self.key,
            self.value[0],
            self.value[1],
            self.line,
            self.ordinal,
        ]
        .into_iter()
        .enumerate()
        {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        w.write_all(&b)
    }

    fn read(b: &[u8; Record::BYTES]) -> Record {
        let at = |i: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[i * 8..i * 8 + 8]);
            u64::from_le_bytes(v)
        };
        Record {
            key: at(0),
            value: [at(1), at(2)],
            line: at(3),
            ordinal: at(4),
        }
    }
}

/// Prefix of a run's scratch directory under `--scratch-dir`.
const DIR_PREFIX: &str = "landing-spill-";
/// Prefix of a directory being born: it takes its lock before it is renamed to
/// [`DIR_PREFIX`], so a sweep never sees a live run's directory unlocked.
const BORN_PREFIX: &str = ".landing-spill-born-";
/// A directory still being born after this long had its run die while creating it.
const BORN_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(60);
/// The file a live run keeps locked inside its scratch directory.
const LOCK_FILE: &str = "owner.lock";

/// A run's scratch directory and the sorted runs written into it so far. Dropping
/// it removes the directory.
pub struct Scratch {
    dir: PathBuf,
    /// Held (locked) while this run lives; the kernel drops the lock if it dies.
    _lock: File,
    runs: Vec<PathBuf>,
    /// Bytes written to scratch in all (runs, and the intermediate merges).
    pub bytes: u64,
    /// Runs written by spills (not counting intermediate merges).
    pub spills: u64,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Best effort: what is left is swept by the next run (its lock is free).
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Scratch {
    /// A fresh, locked directory under `root` (created if missing). It is made and
    /// locked under a name the sweep leaves alone, then renamed into place (atomic):
    /// made under its final name, a concurrent run's sweep could find it without
    /// its lock, take it for a dead run's and remove it.
    pub fn create(root: &Path, run_id: &str) -> io::Result<Scratch> {
        fs::create_dir_all(root)?;
        let born = tempfile::Builder::new()
            .prefix(&format!("{BORN_PREFIX}{run_id}-"))
            .tempdir_in(root)?;
        let lock = File::create(born.path().join(LOCK_FILE))?;
        lock.lock()?;
        let name = born
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let suffix = name.as_deref().and_then(|n| n.strip_prefix(BORN_PREFIX));
        let Some(suffix) = suffix else {
            return Err(io::Error::other("scratch directory named unexpectedly"));
        };
        let dir = root.join(format!("{DIR_PREFIX}{suffix}"));
        fs::rename(born.path(), &dir)?;
        // Renamed: the born path is gone, so there is nothing for `born` to remove.
        let _ = born.keep();
        Ok(Scratch {
            dir,
            _lock: lock,
            runs: Vec::new(),
            bytes: 0,
            spills: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Sort `records` and write them out as one run; the buffer is left empty.
    pub fn spill(&mut self, records: &mut Vec<Record>) -> io::Result<()> {
        records.sort_unstable_by_key(Record::sort_key);
        self.write_sorted(records)
    }

    /// [`Scratch::spill`] of two buffers, sorted at once on two threads: the index
    /// dump, which the whole pass waits for while both cores would otherwise idle.
    /// `after_each` runs after each run is written (the crash drill).
    pub fn spill_two(
        &mut self,
        a: &mut Vec<Record>,
        b: &mut Vec<Record>,
        mut after_each: impl FnMut(),
    ) -> io::Result<()> {
        std::thread::scope(|s| {
            s.spawn(|| b.sort_unstable_by_key(Record::sort_key));
            a.sort_unstable_by_key(Record::sort_key);
        });
        for records in [a, b] {
            if !records.is_empty() {
                self.write_sorted(records)?;
                after_each();
            }
        }
        Ok(())
    }

    /// Write sorted `records` out as one run; the buffer is left empty.
    fn write_sorted(&mut self, records: &mut Vec<Record>) -> io::Result<()> {
        let path = self.next_path();
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
        for r in records.iter() {
            r.write(&mut w)?;
        }
        // Not synced: only this process reads a run back, through the page cache,
        // and a crash loses the run with it. Syncing made the pass (waiting on the
        // index dump) wait for the disk, behind the output's own writeback.
        w.into_inner().map_err(|e| e.into_error())?;
        self.bytes += (records.len() * Record::BYTES) as u64;
        self.spills += 1;
        self.runs.push(path);
        records.clear();
        Ok(())
    }

    /// Every event of the runs written so far (the index, dumped), into `table`:
    /// read back from scratch, as the index is freed before the table is made. It
    /// stops when the table is full: a full table is never consulted (an event
    /// missing from it could be taken for new).
    pub fn fill(&self, table: &mut Fingerprints) -> io::Result<()> {
        for path in &self.runs {
            let mut r = io::BufReader::with_capacity(1 << 20, File::open(path)?);
            let mut b = [0u8; Record::BYTES];
            loop {
                match io::Read::read_exact(&mut r, &mut b) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
                if table.is_full() {
                    return Ok(());
                }
                let rec = Record::read(&b);
                table.insert(Digests::from_parts(rec.key, rec.value));
            }
        }
        Ok(())
    }

    fn next_path(&self) -> PathBuf {
        self.dir
            .join(format!("{:06}.{}.run", self.runs.len(), self.bytes))
    }

    #[cfg(test)]
    pub fn runs(&self) -> usize {
        self.runs.len()
    }
}

/// Writes full buffers out as runs on a thread of its own, so the sequencer (the
/// one serial stage of a run) only appends records while a run is sorted and
/// written. Two buffers at most: the one filling and the one being written.
pub struct Writer {
    tx: Option<std::sync::mpsc::SyncSender<Vec<Record>>>,
    back: std::sync::mpsc::Receiver<Vec<Record>>,
    spare: Option<Vec<Record>>,
    thread: Option<std::thread::JoinHandle<io::Result<Scratch>>>,
    dir: PathBuf,
}

impl Writer {
    /// Start writing into `scratch`; `cap` records per buffer.
    pub fn start(mut scratch: Scratch, cap: usize) -> io::Result<Writer> {
        // Rendezvous: a send returns once the writer took the buffer (it is idle).
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Record>>(0);
        let (back_tx, back) = std::sync::mpsc::channel();
        let dir = scratch.path().to_owned();
        let thread = std::thread::Builder::new()
            .name("spill-writer".into())
            .spawn(move || {
                for mut full in rx {
                    scratch.spill(&mut full)?;
                    // The sequencer may be gone (a refusal); the buffer is then dropped.
                    let _ = back_tx.send(full);
                }
                Ok(scratch)
            })?;
        Ok(Writer {
            tx: Some(tx),
            back,
            spare: Some(Vec::with_capacity(cap)),
            thread: Some(thread),
            dir,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Hand a full buffer over and take an empty one (waiting for the writer if it is
    /// still writing the previous). An error is the writer's: the spill failed.
    pub fn swap(&mut self, full: Vec<Record>) -> io::Result<Vec<Record>> {
        let sent = self.tx.as_ref().map(|tx| tx.send(full));
        if !matches!(sent, Some(Ok(()))) {
            return Err(self.stop());
        }
        match self.spare.take() {
            Some(v) => Ok(v),
            None => self.back.recv().map_err(|_| self.stop()),
        }
    }

    /// Write `last` out too, and wait for every run: the scratch, ready to merge.
    pub fn finish(mut self, mut last: Vec<Record>) -> io::Result<Scratch> {
        self.tx = None;
        let mut scratch = self.join()?;
        if !last.is_empty() {
            scratch.spill(&mut last)?;
        }
        Ok(scratch)
    }

    /// The writer stopped: its error.
    fn stop(&mut self) -> io::Error {
        self.tx = None;
        match self.join() {
            Err(e) => e,
            Ok(_) => io::Error::other("the spill writer stopped"),
        }
    }

    fn join(&mut self) -> io::Result<Scratch> {
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the spill writer panicked")),
            None => Err(io::Error::other("the spill writer already stopped")),
        }
    }
}

/// Remove the scratch directories under `root` whose run is gone (their lock is
/// free). A directory whose lock is held belongs to a live run and is left alone.
pub fn sweep(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let entries = match fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let dir = entry.path();
        let orphan = if name.starts_with(DIR_PREFIX) {
            match File::open(dir.join(LOCK_FILE)) {
                // try_lock fails while the owner holds it.
                Ok(f) => f.try_lock().is_ok(),
                // No lock file: renamed into place without one, which no run does.
                Err(e) if e.kind() == io::ErrorKind::NotFound => true,
                Err(e) => return Err(e),
            }
        } else if name.starts_with(BORN_PREFIX) {
            // Being born takes microseconds; one this old lost its run.
            let age = entry.metadata()?.modified()?.elapsed().unwrap_or_default();
            age > BORN_MAX_AGE
        } else {
            false
        };
        if orphan {
            fs::remove_dir_all(&dir)?;
            removed.push(dir);
        }
    }
    Ok(removed)
}

/// Is this error a full disk (or quota)? The message then says so plainly.
pub fn is_disk_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// The message of a failed spill: it names the scratch directory, and says so when
/// the disk is full. Nothing is published after it (an operational failure).
pub fn describe_failure(dir: &Path, e: &io::Error) -> String {
    if is_disk_full(e) {
        format!(
            "scratch disk full under {} ({e}): give --scratch-dir more room (RUNBOOK: sizing memory and scratch)",
            dir.display()
        )
    } else {
        format!("spill to scratch under {}: {e}", dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: u64, line: u64) -> Record {
        Record {
            key,
            value: [key * 3, key * 5],
            line,
            ordinal: line,
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let r = rec(0xdead_beef, 42);
        let mut b = Vec::new();
        r.write(&mut b).unwrap();
        assert_eq!(b.len(), Record::BYTES);
        assert_eq!(Record::read(b.as_slice().try_into().unwrap()), r);
    }

    #[test]
    fn scratch_is_removed_when_its_run_ends_and_swept_when_orphaned() {
        let root = tempfile::tempdir().unwrap();
        let mut s = Scratch::create(root.path(), "r1").unwrap();
        let mut recs = vec![rec(2, 1), rec(1, 2)];
        s.spill(&mut recs).unwrap();
        assert!(recs.is_empty());
        assert_eq!((s.runs(), s.bytes), (1, 80));
        // A live run's directory is not swept.
        assert!(sweep(root.path()).unwrap().is_empty());
        let path = s.path().to_owned();
        drop(s);
        assert!(!path.exists());
        // An orphan (its lock free, as after a crash) is.
        let orphan = root.path().join(format!("{DIR_PREFIX}r0-x"));
        fs::create_dir(&orphan).unwrap();
        File::create(orphan.join(LOCK_FILE)).unwrap();
        fs::write(orphan.join("000000.0.run"), b"x").unwrap();
        assert_eq!(sweep(root.path()).unwrap(), vec![orphan.clone()]);
        assert!(!orphan.exists());
    }

    #[test]
    fn a_directory_being_born_is_swept_only_once_its_run_is_long_dead() {
        let root = tempfile::tempdir().unwrap();
        // A live run's directory only ever appears under its final name locked.
        let live = Scratch::create(root.path(), "r1").unwrap();
        let names: Vec<String> = fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(
            names[0].starts_with(&format!("{DIR_PREFIX}r1-")),
            "{names:?}"
        );
        assert!(File::open(live.path().join(LOCK_FILE))
            .unwrap()
            .try_lock()
            .is_err());
        // A run that died while creating its directory: left alone while young
        // (it may still be taking its lock), swept once old.
        let born = root.path().join(format!("{BORN_PREFIX}r2-x"));
        fs::create_dir(&born).unwrap();
        assert!(sweep(root.path()).unwrap().is_empty());
        let old = std::time::SystemTime::now() - 2 * BORN_MAX_AGE;
        File::open(&born).unwrap().set_modified(old).unwrap();
        assert_eq!(sweep(root.path()).unwrap(), vec![born.clone()]);
        assert!(live.path().exists());
    }
}
