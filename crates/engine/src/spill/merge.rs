//! The merge of a run's spilled records, and the decisions the in-memory index would
//! have made, taken per id digest in line order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read};
use std::path::PathBuf;

use fixedbitset::FixedBitSet;

use super::{Record, Scratch};

/// Runs merged at once; more are merged in rounds first (each reader holds a buffer).
pub const FAN_IN: usize = 64;
/// Read buffer per run being merged.
pub const READ_BUFFER: usize = 256 << 10;

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
    let mut merged = Merged {
        drops: FixedBitSet::with_capacity(output_lines as usize + 1),
        dup_lines: FixedBitSet::with_capacity(input_lines as usize + 1),
        ..Merged::default()
    };
    while scratch.runs.len() > FAN_IN {
        let batch: Vec<PathBuf> = scratch.runs.drain(..FAN_IN).collect();
        let out = scratch.next_path();
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&out)?);
        let mut n = 0u64;
        merge_runs(&batch, |r| {
            n += 1;
            r.write(&mut w)
        })?;
        w.into_inner().map_err(|e| e.into_error())?.sync_data()?;
        for p in &batch {
            fs::remove_file(p)?;
        }
        scratch.bytes += n * Record::BYTES as u64;
        merged.runs_merged += batch.len() as u64;
        scratch.runs.push(out);
        between_rounds();
    }
    let runs = std::mem::take(&mut scratch.runs);
    merged.runs_merged += runs.len() as u64;
    let mut group = Group::default();
    merge_runs(&runs, |r| {
        group.decide(r, &mut merged);
        Ok(())
    })?;
    between_rounds();
    for p in &runs {
        fs::remove_file(p)?;
    }
    merged.suspects.sort_unstable();
    Ok(merged)
}

/// The canonical digests seen so far under one id digest.
#[derive(Default)]
struct Group {
    key: Option<u64>,
    values: Vec<[u64; 2]>,
}

impl Group {
    /// One record, in (id digest, line) order: what the in-memory index would say.
    fn decide(&mut self, r: Record, m: &mut Merged) {
        if self.key != Some(r.key) {
            self.key = Some(r.key);
            self.values.clear();
            self.values.push(r.value);
            return;
        }
        if self.values.contains(&r.value) {
            // An index entry is never a copy of another: only staged lines drop.
            if r.ordinal != Record::FIRST {
                m.drops.grow(r.ordinal as usize + 1);
                m.drops.insert(r.ordinal as usize);
                m.dup_lines.grow(r.line as usize + 1);
                m.dup_lines.insert(r.line as usize);
                m.duplicates += 1;
            }
            return;
        }
        self.values.push(r.value);
        // Index entries that share a digest were suspects when they went in.
        if r.ordinal != Record::FIRST {
            m.suspects.push((r.line, r.key));
        }
    }
}

/// Stream the records of sorted `runs` in (id digest, line) order.
fn merge_runs(runs: &[PathBuf], mut each: impl FnMut(Record) -> io::Result<()>) -> io::Result<()> {
    let mut readers = runs
        .iter()
        .map(|p| Ok(BufReader::with_capacity(READ_BUFFER, File::open(p)?)))
        .collect::<io::Result<Vec<_>>>()?;
    let mut heap = BinaryHeap::with_capacity(readers.len());
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some(rec) = next(r)? {
            heap.push(Reverse(((rec.key, rec.line, i), Keyed(rec))));
        }
    }
    while let Some(Reverse(((_, _, i), Keyed(rec)))) = heap.pop() {
        each(rec)?;
        if let Some(rec) = next(&mut readers[i])? {
            heap.push(Reverse(((rec.key, rec.line, i), Keyed(rec))));
        }
    }
    Ok(())
}

/// A record in the heap, ordered only by the key beside it.
struct Keyed(Record);

impl PartialEq for Keyed {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Keyed {}
impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Keyed {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

fn next(r: &mut BufReader<File>) -> io::Result<Option<Record>> {
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
