//! The merge of a run's spilled records, and the decisions the in-memory index would
//! have made, taken per id digest in line order.
//!
//! The last merge runs on two threads: the runs are sorted by id digest, and the
//! digests are uniform, so records below [`SPLIT_KEY`] and from it on are two
//! independent halves of every run (a group never spans them), found by a binary
//! search in each run; their decisions are then joined.

use std::cmp::Reverse;
use std::collections::binary_heap::{BinaryHeap, PeekMut};
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Take};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use fixedbitset::FixedBitSet;

use super::{Record, Scratch};

/// Runs merged at once; more are merged in rounds first (each reader holds a buffer).
pub const FAN_IN: usize = 64;
/// Read buffer per run being merged (per half, in the last merge): 8 MiB at most
/// for [`FAN_IN`] runs, inside the budget's headroom. The runs are read back from
/// the page cache, where larger reads gain nothing; with 256 KiB a day of many
/// small runs (the fingerprint table's) held 32 MiB more than its budget.
pub const READ_BUFFER: usize = 64 << 10;
/// Where the last merge splits the id digests between its two threads: the middle
/// of a uniform 64-bit digest.
const SPLIT_KEY: u64 = 1 << 63;

/// What the merge decided.
#[derive(Debug, Default)]
pub struct Merged {
    /// Lines of the staged output to drop: later copies of an event.
    pub drops: FixedBitSet,
    /// Input lines the merge found to be duplicates (for counts at a refusal line).
    pub dup_lines: FixedBitSet,
    pub duplicates: u64,
    /// (line, id digest) of each suspect the merge found, in line order.
    pub suspects: Vec<(u64, u64)>,
    /// Runs merged, intermediate rounds included.
    pub runs_merged: u64,
    /// The first line the fingerprint table took for a copy that is none: its
    /// output line is missing, so the run must fail.
    pub wrong_copy: Option<u64>,
}

impl Merged {
    /// Add the decisions of the other half of the digests.
    fn join(&mut self, other: Merged) {
        self.drops.union_with(&other.drops);
        self.dup_lines.union_with(&other.dup_lines);
        self.duplicates += other.duplicates;
        self.suspects.extend(other.suspects);
        self.wrong_copy = match (self.wrong_copy, other.wrong_copy) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    fn wrong(&mut self, line: u64) {
        self.wrong_copy = Some(self.wrong_copy.map_or(line, |w| w.min(line)));
    }
}

/// Merge every run of `scratch`. `output_lines` and `input_lines` size the bitsets.
/// `between_rounds` is called after each round, the last one included, before its
/// runs are removed (the crash drill).
pub fn merge(
    scratch: &mut Scratch,
    output_lines: u64,
    input_lines: u64,
    mut between_rounds: impl FnMut(),
) -> io::Result<Merged> {
    let mut runs_merged = 0;
    while scratch.runs.len() > FAN_IN {
        let batch: Vec<PathBuf> = scratch.runs.drain(..FAN_IN).collect();
        let out = scratch.next_path();
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&out)?);
        let mut n = 0u64;
        let whole = batch
            .iter()
            .map(|p| Slice::whole(p))
            .collect::<io::Result<Vec<_>>>()?;
        merge_runs(&whole, |r| {
            n += 1;
            r.write(&mut w)
        })?;
        // Not synced, as the runs are not (`Scratch::spill`).
        w.into_inner().map_err(|e| e.into_error())?;
        for p in &batch {
            fs::remove_file(p)?;
        }
        scratch.bytes += n * Record::BYTES as u64;
        runs_merged += batch.len() as u64;
        scratch.runs.push(out);
        between_rounds();
    }
    let runs = std::mem::take(&mut scratch.runs);
    let (low, high) = split(&runs, SPLIT_KEY)?;
    let sizes = (output_lines, input_lines);
    let (merged, other) = std::thread::scope(|s| {
        let other = s.spawn(|| decide(&high, sizes));
        let merged = decide(&low, sizes);
        // A panic in the other half is a panic here.
        let other = other
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (merged, other)
    });
    let mut merged = merged?;
    merged.join(other?);
    merged.runs_merged = runs_merged + runs.len() as u64;
    between_rounds();
    for p in &runs {
        fs::remove_file(p)?;
    }
    merged.suspects.sort_unstable();
    Ok(merged)
}

/// The decisions over one half of the digests of every run.
fn decide(slices: &[Slice], (output_lines, input_lines): (u64, u64)) -> io::Result<Merged> {
    let mut merged = Merged {
        drops: FixedBitSet::with_capacity(output_lines as usize + 1),
        dup_lines: FixedBitSet::with_capacity(input_lines as usize + 1),
        ..Merged::default()
    };
    let mut group = Group::default();
    merge_runs(slices, |r| {
        group.decide(r, &mut merged);
        Ok(())
    })?;
    Ok(merged)
}

/// The records of one run between two byte offsets.
struct Slice<'a> {
    path: &'a Path,
    start: u64,
    end: u64,
}

impl<'a> Slice<'a> {
    fn whole(path: &'a Path) -> io::Result<Slice<'a>> {
        let end = fs::metadata(path)?.len();
        Ok(Slice {
            path,
            start: 0,
            end,
        })
    }

    fn open(&self) -> io::Result<BufReader<Take<File>>> {
        let mut f = File::open(self.path)?;
        f.seek(SeekFrom::Start(self.start))?;
        Ok(BufReader::with_capacity(
            READ_BUFFER,
            f.take(self.end - self.start),
        ))
    }
}

/// Each run cut where its id digests reach `key`: the slices below, and from it on.
fn split(runs: &[PathBuf], key: u64) -> io::Result<(Vec<Slice<'_>>, Vec<Slice<'_>>)> {
    let (mut low, mut high) = (Vec::new(), Vec::new());
    for p in runs {
        let f = File::open(p)?;
        let end = f.metadata()?.len();
        // The first record whose id digest is `key` or more (runs are sorted by it).
        let (mut lo, mut hi) = (0, end / Record::BYTES as u64);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let mut b = [0u8; Record::BYTES];
            f.read_exact_at(&mut b, mid * Record::BYTES as u64)?;
            if Record::read(&b).key < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let cut = lo * Record::BYTES as u64;
        low.push(Slice {
            path: p,
            start: 0,
            end: cut,
        });
        high.push(Slice {
            path: p,
            start: cut,
            end,
        });
    }
    Ok((low, high))
}

/// The canonical digests seen so far under one id digest.
#[derive(Default)]
struct Group {
    key: Option<u64>,
    values: Vec<[u64; 2]>,
}

impl Group {
    /// One record, in (id digest, line) order: what the in-memory index would say.
    /// A line the fingerprint table took for a copy must be one.
    fn decide(&mut self, r: Record, m: &mut Merged) {
        let called_copy = r.ordinal == Record::COPY;
        if self.key != Some(r.key) {
            self.key = Some(r.key);
            self.values.clear();
            self.values.push(r.value);
            if called_copy {
                m.wrong(r.line);
            }
            return;
        }
        if self.values.contains(&r.value) {
            m.dup_lines.grow(r.line as usize + 1);
            // An index entry is never a copy of another: only recorded lines are.
            if called_copy {
                // Counted as a duplicate by the pass already; no output line.
                m.dup_lines.insert(r.line as usize);
            } else if r.ordinal != Record::FIRST {
                m.drops.grow(r.ordinal as usize + 1);
                m.drops.insert(r.ordinal as usize);
                m.dup_lines.insert(r.line as usize);
                m.duplicates += 1;
            }
            return;
        }
        if called_copy {
            m.wrong(r.line);
            return;
        }
        self.values.push(r.value);
        // Index entries that share a digest were suspects when they went in.
        if r.ordinal != Record::FIRST {
            m.suspects.push((r.line, r.key));
        }
    }
}

/// Stream the records of sorted `slices` in (id digest, line) order. The heap holds
/// only each run's sort key; the head records stay beside it.
fn merge_runs(slices: &[Slice], mut each: impl FnMut(Record) -> io::Result<()>) -> io::Result<()> {
    let mut readers = slices
        .iter()
        .map(Slice::open)
        .collect::<io::Result<Vec<_>>>()?;
    let mut heads = Vec::with_capacity(readers.len());
    let mut heap = BinaryHeap::with_capacity(readers.len());
    for (i, r) in readers.iter_mut().enumerate() {
        let head = next(r)?;
        if let Some(rec) = head {
            heap.push(Reverse((rec.key, rec.line, i)));
        }
        heads.push(head);
    }
    while let Some(mut top) = heap.peek_mut() {
        let Reverse((_, _, i)) = *top;
        if let Some(rec) = heads[i] {
            each(rec)?;
        }
        heads[i] = next(&mut readers[i])?;
        match heads[i] {
            // Replacing the top sifts it down once: half the work of a pop and a push.
            Some(rec) => *top = Reverse((rec.key, rec.line, i)),
            None => {
                PeekMut::pop(top);
            }
        }
    }
    Ok(())
}

fn next(r: &mut impl Read) -> io::Result<Option<Record>> {
    let mut b = [0u8; Record::BYTES];
    match r.read_exact(&mut b) {
        Ok(()) => Ok(Some(Record::read(&b))),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: u64, v: u64, line: u64, ordinal: u64) -> Record {
        Record {
            key,
            value: [v, v],
            line,
            ordinal,
        }
    }

    fn spill(s: &mut Scratch, recs: &[Record]) {
        s.spill(&mut recs.to_vec()).unwrap();
    }

    #[test]
    fn duplicates_and_suspects_across_runs_keep_the_first_line() {
        let root = tempfile::tempdir().unwrap();
        let mut s = Scratch::create(root.path(), "r").unwrap();
        // The index dump: key 1 (value 10) and key 2 (values 20, 21: a shared digest).
        spill(
            &mut s,
            &[
                rec(1, 10, 0, Record::FIRST),
                rec(2, 20, 0, Record::FIRST),
                rec(2, 21, 0, Record::FIRST),
            ],
        );
        // Later runs: a copy of key 1 (dup), a new payload under key 1 (suspect),
        // a copy of the shared digest's second value (dup), and a new key 3 twice.
        spill(&mut s, &[rec(3, 30, 9, 2), rec(1, 10, 7, 0)]);
        spill(
            &mut s,
            &[rec(2, 21, 8, 1), rec(1, 11, 10, 3), rec(3, 30, 12, 4)],
        );
        let m = merge(&mut s, 5, 12, || {}).unwrap();
        assert_eq!(m.duplicates, 3);
        assert_eq!(m.drops.ones().collect::<Vec<_>>(), [0, 1, 4]);
        assert_eq!(m.dup_lines.ones().collect::<Vec<_>>(), [7, 8, 12]);
        assert_eq!(m.suspects, [(10, 1)]);
        assert_eq!(m.runs_merged, 3);
        assert_eq!(s.runs(), 0);
    }

    /// Lines the fingerprint table took for copies: a real copy is a duplicate line
    /// with no output line to drop (the pass counted it); one that is the first of
    /// its id digest, or another payload under it, is the table's error.
    #[test]
    fn copies_the_table_called_are_checked() {
        let root = tempfile::tempdir().unwrap();
        let mut s = Scratch::create(root.path(), "r").unwrap();
        spill(&mut s, &[rec(1, 10, 0, Record::FIRST)]);
        // Line 4 copies key 1 (right); line 6 is key 2's first (wrong); line 8 is
        // another payload under key 1 (wrong); line 9, a staged copy, is dropped.
        spill(
            &mut s,
            &[
                rec(1, 10, 4, Record::COPY),
                rec(2, 20, 6, Record::COPY),
                rec(1, 11, 8, Record::COPY),
                rec(1, 10, 9, 0),
            ],
        );
        let m = merge(&mut s, 1, 9, || {}).unwrap();
        assert_eq!(m.duplicates, 1);
        assert_eq!(m.drops.ones().collect::<Vec<_>>(), [0]);
        assert_eq!(m.dup_lines.ones().collect::<Vec<_>>(), [4, 9]);
        assert_eq!(m.wrong_copy, Some(6));
        assert!(m.suspects.is_empty());

        // Right calls only: nothing is wrong.
        let mut s = Scratch::create(root.path(), "r").unwrap();
        spill(&mut s, &[rec(1, 10, 0, Record::FIRST)]);
        spill(&mut s, &[rec(3, 30, 2, 0), rec(3, 30, 5, Record::COPY)]);
        spill(&mut s, &[rec(1, 10, 3, Record::COPY)]);
        let m = merge(&mut s, 1, 5, || {}).unwrap();
        assert_eq!((m.duplicates, m.wrong_copy), (0, None));
        assert_eq!(m.dup_lines.ones().collect::<Vec<_>>(), [3, 5]);
    }

    #[test]
    fn many_runs_merge_in_rounds_with_the_same_decisions() {
        let root = tempfile::tempdir().unwrap();
        let mut s = Scratch::create(root.path(), "r").unwrap();
        // 200 runs of one record each; key k's copies at lines k and 1000 + k.
        for k in 0..100u64 {
            spill(&mut s, &[rec(k + 1, k, k + 1, k)]);
            spill(&mut s, &[rec(k + 1, k, 1000 + k, 100 + k)]);
        }
        let mut rounds = 0;
        assert_eq!(s.bytes, 200 * 40, "200 records of 40 bytes spilled");
        let m = merge(&mut s, 200, 1100, || rounds += 1).unwrap();
        // 200 runs, 64 at a time: three rounds leave 8 + 3 runs for the last merge.
        assert_eq!(rounds, 4);
        assert_eq!(m.runs_merged, 3 * 64 + 11);
        assert_eq!(s.bytes, (200 + 3 * 64) * 40, "the rounds' runs counted too");
        assert_eq!(m.duplicates, 100);
        assert_eq!(
            m.drops.ones().collect::<Vec<_>>(),
            (100..200).collect::<Vec<_>>()
        );
        assert!(m.suspects.is_empty());
    }

    /// Groups on both sides of the split, at its edge and at the ends of the digest
    /// range, across runs: the two threads decide as one would.
    #[test]
    fn both_halves_of_the_digests_are_decided_and_joined() {
        let root = tempfile::tempdir().unwrap();
        let mut s = Scratch::create(root.path(), "r").unwrap();
        let (below, at, top) = (SPLIT_KEY - 1, SPLIT_KEY, u64::MAX);
        // The index dump: one event under each of the four digests.
        spill(
            &mut s,
            &[
                rec(1, 1, 0, Record::FIRST),
                rec(below, 2, 0, Record::FIRST),
                rec(at, 3, 0, Record::FIRST),
                rec(top, 4, 0, Record::FIRST),
            ],
        );
        // Copies under `below` (line 5) and `at` (line 6), a new payload under
        // `top` (line 7: a suspect), and a copy of key 1 (line 9).
        spill(&mut s, &[rec(below, 2, 5, 0), rec(at, 3, 6, 1)]);
        spill(&mut s, &[rec(1, 1, 9, 3), rec(top, 40, 7, 2)]);
        let m = merge(&mut s, 4, 9, || {}).unwrap();
        assert_eq!(m.duplicates, 3);
        assert_eq!(m.drops.ones().collect::<Vec<_>>(), [0, 1, 3]);
        assert_eq!(m.dup_lines.ones().collect::<Vec<_>>(), [5, 6, 9]);
        assert_eq!(m.suspects, [(7, top)]);
        assert_eq!(m.runs_merged, 3);
        assert_eq!(s.runs(), 0);
    }

    /// Each run is cut before its first record with a digest of the upper half; a
    /// run all on one side gives the other an empty slice.
    #[test]
    fn split_cuts_each_run_at_the_first_digest_of_the_upper_half() {
        let root = tempfile::tempdir().unwrap();
        let mut s = Scratch::create(root.path(), "r").unwrap();
        let mid = SPLIT_KEY;
        let runs: [&[u64]; 3] = [&[1, 5, mid - 1, mid, mid, u64::MAX], &[1, 2], &[mid]];
        for keys in runs {
            let recs: Vec<Record> = keys.iter().map(|&k| rec(k, 0, 1, 0)).collect();
            spill(&mut s, &recs);
        }
        let (low, high) = split(&s.runs, SPLIT_KEY).unwrap();
        let cuts: Vec<(u64, u64, u64)> = low
            .iter()
            .zip(&high)
            .map(|(l, h)| (l.end, h.start, h.end))
            .collect();
        assert_eq!(cuts, [(120, 120, 240), (80, 80, 80), (0, 0, 40)]);
        assert!(low.iter().all(|l| l.start == 0));
    }

    /// Exactly `FAN_IN` runs merge in one pass, with no round before it.
    #[test]
    fn fan_in_runs_merge_at_once() {
        let root = tempfile::tempdir().unwrap();
        let mut s = Scratch::create(root.path(), "r").unwrap();
        for k in 0..FAN_IN as u64 {
            spill(&mut s, &[rec(k + 1, k, k + 1, k)]);
        }
        let mut rounds = 0;
        let m = merge(&mut s, 64, 65, || rounds += 1).unwrap();
        assert_eq!((rounds, m.runs_merged), (1, 64));
        assert_eq!(s.bytes, 64 * 40, "no intermediate run written");
    }

    /// A run that cannot be read fails the merge; only its end is the end.
    #[test]
    fn a_run_that_cannot_be_read_fails_the_merge() {
        let root = tempfile::tempdir().unwrap();
        let mut s = Scratch::create(root.path(), "r").unwrap();
        spill(&mut s, &[rec(1, 1, 1, 0)]);
        // A link to a directory opens on Linux, reading it fails (EISDIR), and
        // removing it (the link) succeeds: only the read can fail the merge.
        let dir = root.path().join("not-a-run");
        fs::create_dir(&dir).unwrap();
        let link = root.path().join("run-link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        s.runs.push(link);
        let e = merge(&mut s, 2, 2, || {}).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EISDIR), "{e}");
    }
}
