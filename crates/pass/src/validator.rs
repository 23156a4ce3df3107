//! The validation stage, in three steps so both cores can share it while the
//! result stays exactly that of a sequential pass:
//!
//! 1. **frame** and 2. **check**: `batch.rs` ([`Batch`], [`check_batch`]).
//! 3. **sequence** (sequential, in input order): [`Sequencer`] consults the dedup
//!    index, applies the reject cap, and emits published bytes and quarantine
//!    records, deciding at most one refusal, always the first in line order.
//!
//! `whole.rs` strings the three together on one thread, for callers that do not
//! need the parallel pipeline (drills, tests).

use std::sync::Arc;

#[cfg(doc)]
use crate::batch::{check_batch, Batch};
use crate::batch::{Checked, Item, LineSum, RawForm};
use crate::contract::{self, Contract, Reason, Resume};
use crate::hook::CrashPoint;
use crate::identity::{DedupIndex, Digests, Seen};
use crate::report::{Refusal, RefusalKind, Rejected};
use crate::spill::{Call, Fingerprints, Record, Scratch};
use crate::spill_plan::SpillPlan;

/// Row counts of one input.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub accepted: u64,
    pub rejected: u64,
    pub duplicates: u64,
}

/// How many quarantined lines `check` lists.
pub const CHECK_REASONS: usize = 20;

/// Accepted events are inserted this many items after their slot was prefetched,
/// so the cache misses of a large index overlap.
const PREFETCH_DISTANCE: usize = 8;

/// A canonical form not seen under its id digest (see [`Seen::Suspect`]), with the
/// counts as they stood before its line, should it turn out to refuse the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suspect {
    pub line: u64,
    pub key: u64,
    pub counts: Option<Counts>,
}

/// Suspects held before the sequencer stops to have them checked. Real data has
/// one (the first real collision refuses the file); more mean forced digests.
pub const MAX_SUSPECTS: usize = 4096;

/// A sequencer that has spilled: the writer of its runs and the buffer of the next.
pub struct Spilled {
    pub writer: crate::spill::Writer,
    pub buffer: Vec<Record>,
    buffer_cap: usize,
    /// Duplicates the index collapsed before it spilled (all before any record).
    pub dups_before: u64,
    /// What the index knew, and every event kept since, while it has room: lines
    /// are decided as they come (and recorded, for the merge to check).
    table: Option<Fingerprints>,
    /// Buffers of records once the table is gone (they take its room).
    full_cap: usize,
    /// Once the table is full: hold accepted lines back for the replay (else
    /// stage them as they come).
    hold: bool,
    /// Holding back: the first recorded event's input line and output ordinal. From
    /// it on, nothing is staged during the pass; the replay writes the lines kept.
    pub from: Option<(u64, u64)>,
    /// The held lines' numbers and canonical digests, summed: what the replay
    /// must read again.
    pub sum: LineSum,
    /// Where the replay starts framing: the batch of the first held line (the
    /// content's start if it is compressed, whose offsets are not stored ones).
    pub resume: Resume,
}

/// Step 3: the order-dependent decisions.
pub struct Sequencer {
    /// The contract the lines were checked against: it names reasons and fields.
    contract: Arc<Contract>,
    index: Option<DedupIndex>,
    plan: Option<SpillPlan>,
    spilled: Option<Spilled>,
    /// Output lines decided so far (a record's ordinal): staged, or, once the index
    /// spilled, held back for the replay.
    ordinal: u64,
    suspects: Vec<Suspect>,
    /// An I/O failure of the spill (scratch dir, what failed).
    failure: Option<String>,
    input_size: u64,
    cap: u64,
    counts: Counts,
    out: Vec<u8>,
    quarantine: Vec<u8>,
    refusal: Option<Refusal>,
    first_rejects: Vec<Rejected>,
    /// Batches applied, and the physical lines they cover: the proof that every
    /// framed batch was checked and sequenced before anything is published.
    batches: u64,
    through_line: u64,
    /// How the lines stand against their canonical forms, if the checkers compared.
    raw: RawForm,
    /// The first line that repeats an earlier event (the index's, or the merge's).
    first_duplicate: Option<u64>,
    /// Where the batch being applied can be framed again from.
    resume: Resume,
    /// The input is compressed: a replay reads it from its start.
    compressed: bool,
}

impl Sequencer {
    /// `cap`: quarantined lines tolerated; `input_size` sizes the dedup index.
    pub fn new(contract: Arc<Contract>, cap: u64, input_size: u64) -> Self {
        Sequencer {
            contract,
            index: None,
            plan: None,
            spilled: None,
            ordinal: 0,
            suspects: Vec::new(),
            failure: None,
            input_size,
            cap,
            counts: Counts::default(),
            out: Vec::with_capacity(2 << 20),
            quarantine: Vec::new(),
            refusal: None,
            first_rejects: Vec::new(),
            batches: 0,
            through_line: 0,
            raw: RawForm::default(),
            first_duplicate: None,
            resume: Resume::default(),
            compressed: false,
        }
    }

    /// Bound the index by `plan`: past its share it spills to scratch.
    pub fn with_spill(mut self, plan: Option<SpillPlan>) -> Self {
        self.plan = plan;
        self
    }

    /// Batches applied so far, and the physical lines they covered.
    pub fn progress(&self) -> (u64, u64) {
        (self.batches, self.through_line)
    }

    /// Apply one checked batch, in input order. Nothing happens after a refusal, a
    /// spill failure or too many suspects.
    pub fn apply(&mut self, checked: &Checked) {
        if self.stopped() {
            return;
        }
        self.batches += 1;
        self.resume = checked.resume;
        self.through_line = self.through_line.max(checked.through_line);
        self.raw.add(checked.raw);
        if self.index.is_none() && self.spilled.is_none() {
            // Size the index once, from the first batch's average line length.
            let mut events = DedupIndex::estimate_events(
                self.input_size,
                checked.items.len(),
                checked.canonical.len(),
            );
            if let Some(p) = &self.plan {
                events = events.min(p.index_events());
            }
            self.index = Some(DedupIndex::with_capacity(events));
        }
        let mut start = 0;
        for (i, &(number, item)) in checked.items.iter().enumerate() {
            if let Some(&(_, Item::Accept(d, _))) = checked.items.get(i + PREFETCH_DISTANCE) {
                self.prefetch(&d);
            }
            let decided = match item {
                Item::Accept(d, end) => {
                    let line = &checked.canonical[start..end];
                    start = end;
                    self.accept(number, d, line);
                    None
                }
                Item::Reject(reason) => reject(
                    &self.contract,
                    &mut self.counts,
                    self.cap,
                    &mut self.quarantine,
                    &mut self.first_rejects,
                    number,
                    reason,
                ),
                Item::Prohibited(k) => {
                    let field = self.contract.prohibited[k].clone();
                    Some(refusal(RefusalKind::ProhibitedField, number, Some(field)))
                }
            };
            if let Some(r) = decided {
                self.refusal = Some(r);
                return;
            }
            if self.failure.is_some() || self.suspects.len() >= MAX_SUSPECTS {
                return;
            }
        }
    }

    /// Start loading the slot an event a few lines on will probe (index or table).
    fn prefetch(&self, d: &Digests) {
        if let Some(index) = &self.index {
            index.prefetch(d);
        } else if let Some(table) = self.spilled.as_ref().and_then(|sp| sp.table.as_ref()) {
            table.prefetch(d);
        }
    }

    /// Has the sequencer stopped deciding (a refusal, a spill failure, or as many
    /// suspects as it holds)?
    pub fn stopped(&self) -> bool {
        self.refusal.is_some() || self.failure.is_some() || self.suspects.len() >= MAX_SUSPECTS
    }

    /// One accepted event: through the index, or recorded once it has spilled.
    fn accept(&mut self, number: u64, d: Digests, line: &[u8]) {
        if self.spilled.is_some() {
            self.accept_spilled(number, d, line);
            return;
        }
        if self.must_spill() {
            self.spill();
            if self.failure.is_none() {
                self.accept(number, d, line);
            }
            return;
        }
        let Some(index) = self.index.as_mut() else {
            return;
        };
        match index.insert(d) {
            Seen::New => self.emit(line),
            Seen::Duplicate => {
                self.counts.duplicates += 1;
                self.first_duplicate.get_or_insert(number);
            }
            Seen::Suspect => {
                self.suspects.push(Suspect {
                    line: number,
                    key: d.key(),
                    counts: Some(self.counts),
                });
                self.emit(line);
            }
        }
    }

    /// One accepted event after the spill: called by the fingerprint table while it
    /// has room, else held back or staged as it comes; recorded either way.
    fn accept_spilled(&mut self, number: u64, d: Digests, line: &[u8]) {
        let Some(sp) = self.spilled.as_mut() else {
            return;
        };
        if sp.table.as_ref().is_some_and(Fingerprints::is_full) {
            self.leave_table();
            self.accept_spilled(number, d, line);
            return;
        }
        let call = sp.table.as_mut().map(|t| t.insert(d));
        let ordinal = match call {
            Some(Call::Copy) => Record::COPY,
            _ => self.ordinal,
        };
        sp.buffer.push(Record::new(d, number, ordinal));
        let full = sp.buffer.len() >= sp.buffer_cap;
        match call {
            Some(Call::Copy) => {
                self.counts.duplicates += 1;
                self.first_duplicate.get_or_insert(number);
            }
            Some(Call::New | Call::Kept) => self.emit(line),
            None if sp.hold => {
                // Only the merge can tell whether it is a first occurrence.
                if sp.from.is_none() {
                    sp.from = Some((number, self.ordinal));
                    if !self.compressed {
                        sp.resume = self.resume;
                    }
                }
                sp.sum.add(number, d.value());
                self.counts.accepted += 1;
                self.ordinal += 1;
            }
            None => self.emit(line),
        }
        if full {
            self.write_run();
        }
    }

    /// The table is full: free it, give its room to the record buffers, and choose
    /// how the lines from here on are written. Copies so far promise copies later,
    /// which the second pass would drop by writing the output twice: hold them back.
    fn leave_table(&mut self) {
        let hook = self.plan.as_ref().and_then(|p| p.hooks.spill_replay);
        let copies = self.counts.duplicates > 0;
        if let Some(sp) = self.spilled.as_mut() {
            sp.table = None;
            sp.hold = hook.unwrap_or(copies);
            sp.buffer_cap = sp.full_cap;
        }
        // The next buffer is reserved at the larger size.
        if self
            .spilled
            .as_ref()
            .is_some_and(|sp| !sp.buffer.is_empty())
        {
            self.write_run();
        }
    }

    fn emit(&mut self, line: &[u8]) {
        self.counts.accepted += 1;
        self.ordinal += 1;
        self.out.extend_from_slice(line);
    }

    /// Is the index at its share (or would its next growth pass it)?
    fn must_spill(&self) -> bool {
        let (Some(plan), Some(index)) = (&self.plan, &self.index) else {
            return false;
        };
        // A growth briefly holds the old table and one half as large again.
        index.len() >= plan.index_events()
            || (index.would_grow() && index.table_bytes() / 2 * 5 > plan.index_bytes())
    }

    /// Write the index out as sorted runs, free it, and record from now on.
    fn spill(&mut self) {
        let (Some(plan), Some(index)) = (self.plan.clone(), self.index.take()) else {
            return;
        };
        let done = (|| -> std::io::Result<Spilled> {
            let started = std::time::Instant::now();
            let mut scratch = Scratch::create(&plan.scratch_dir, &plan.run_id)?;
            // The index is written through two buffers of the rest of the share,
            // sorted at once.
            let cap = plan
                .every
                .unwrap_or((plan.share - plan.index_bytes()) / Record::BYTES / 2)
                .max(1);
            let events = index.len();
            let mut bufs = [0, 1].map(|_| Vec::with_capacity(cap.min(events)));
            let crash = || plan.hooks.crash(CrashPoint::Spill);
            for d in index.entries() {
                let i = usize::from(bufs[0].len() == cap);
                bufs[i].push(Record::new(d, 0, Record::FIRST));
                if bufs[1].len() == cap {
                    let [a, b] = &mut bufs;
                    scratch.spill_two(a, b, crash)?;
                }
            }
            let [a, b] = &mut bufs;
            scratch.spill_two(a, b, crash)?;
            drop(bufs);
            drop(index);
            let dumped = started.elapsed();
            let lines = self.lines_expected();
            let mut table = plan.fingerprints(lines);
            scratch.fill(&mut table)?;
            tracing::debug!(
                events,
                runs = scratch.spills,
                dump_ms = dumped.as_millis() as u64,
                table_ms = (started.elapsed() - dumped).as_millis() as u64,
                table_room = table.room(),
                "dedup index spilled; fingerprint table filled"
            );
            // Two buffers share the room: one fills while the other is written.
            let full_cap = (plan.records_per_run(lines, 0) / 2).max(1);
            let buffer_cap = (plan.records_per_run(lines, table.bytes()) / 2).max(1);
            Ok(Spilled {
                writer: crate::spill::Writer::start(scratch, buffer_cap)?,
                // Reserved whole: a growing Vec would briefly hold its old and new
                // buffers; untouched pages of the reservation are not resident.
                buffer: Vec::with_capacity(buffer_cap),
                buffer_cap,
                dups_before: self.counts.duplicates,
                table: Some(table),
                full_cap,
                hold: false,
                from: None,
                sum: LineSum::default(),
                resume: Resume::default(),
            })
        })();
        match done {
            Ok(s) => self.spilled = Some(s),
            Err(e) => self.fail(&plan.scratch_dir, e),
        }
    }

    /// The input's lines, estimated at the spill from the bytes framed so far (10%
    /// headroom; 64-byte lines before any byte is framed): they size the merge's
    /// bitsets, which the spill leaves room for.
    fn lines_expected(&self) -> usize {
        let (lines, offset) = (self.through_line, self.resume.offset);
        let estimate = match offset {
            0 => self.input_size / 64,
            o => {
                u64::try_from(u128::from(self.input_size) * u128::from(lines) / u128::from(o))
                    .unwrap_or(u64::MAX)
                    / 10
                    * 11
            }
        };
        usize::try_from(estimate).unwrap_or(usize::MAX)
    }

    /// Hand the buffered records to the writer, as one more sorted run.
    fn write_run(&mut self) {
        let Some(sp) = self.spilled.as_mut() else {
            return;
        };
        let full = std::mem::take(&mut sp.buffer);
        match sp.writer.swap(full) {
            // A buffer of the table's days is too small once the table is gone.
            Ok(empty) if empty.capacity() < sp.buffer_cap => {
                drop(empty);
                sp.buffer = Vec::with_capacity(sp.buffer_cap);
            }
            Ok(empty) => sp.buffer = empty,
            Err(e) => {
                let dir = sp.writer.dir().to_owned();
                self.fail(&dir, e);
            }
        }
    }

    fn fail(&mut self, dir: &std::path::Path, e: std::io::Error) {
        self.failure = Some(crate::spill::describe_failure(dir, &e));
    }

    /// The spill's failure, if it failed: an operational error, never a refusal.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Suspects found in memory, in line order.
    pub fn suspects(&self) -> &[Suspect] {
        &self.suspects
    }

    /// The spill, if the index spilled, with its last buffer still to write.
    pub fn take_spilled(&mut self) -> Option<Spilled> {
        self.spilled.take()
    }

    /// Output lines decided (staged, or held back for the replay).
    pub fn output_lines(&self) -> u64 {
        self.ordinal
    }

    /// Physical lines sequenced.
    pub fn lines(&self) -> u64 {
        self.through_line
    }

    /// Set the outcome the merge and the id check decided.
    pub fn resolve(&mut self, counts: Counts, refusal: Option<Refusal>) {
        if let Some(r) = &refusal {
            // Rejects after the deciding line were never reached; a cap refusal's own
            // line is the reject that broke the cap, and stays listed.
            let last = match r.kind {
                RefusalKind::RejectCap => r.line,
                _ => r.line.saturating_sub(1),
            };
            self.first_rejects.retain(|x| x.line <= last);
        }
        self.counts = counts;
        self.refusal = refusal;
    }

    pub fn refusal(&self) -> Option<&Refusal> {
        self.refusal.as_ref()
    }

    /// Refuse the input for a reason outside its lines (a broken compressed
    /// stream). It replaces a line's refusal: lines decoded from a damaged stream
    /// are not what the producer wrote, so their verdicts say nothing.
    pub fn refuse(&mut self, r: Refusal) {
        self.refusal = Some(r);
    }

    /// The input is compressed: the dedup index is sized from its expected content
    /// size `bytes`, and a replay reads it from its start (its content offsets are
    /// not offsets of the stored bytes). Only before the first batch.
    pub fn set_compressed(&mut self, bytes: u64) {
        self.input_size = bytes;
        self.compressed = true;
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Published bytes produced so far.
    pub fn output(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Quarantine records produced so far.
    pub fn quarantine(&mut self) -> &mut Vec<u8> {
        &mut self.quarantine
    }

    /// The first quarantined lines, for `check`.
    pub fn first_rejects(&self) -> &[Rejected] {
        &self.first_rejects
    }

    /// The merge found a copy at `line`.
    pub fn merged_duplicate(&mut self, line: u64) {
        self.first_duplicate = Some(self.first_duplicate.map_or(line, |f| f.min(line)));
    }

    /// The first line that repeats an earlier event.
    pub fn first_duplicate(&self) -> Option<u64> {
        self.first_duplicate
    }

    /// The lines against their canonical forms (only counted by `verify --deep`).
    pub fn raw_form(&self) -> RawForm {
        self.raw
    }

    pub fn distinct_events(&self) -> usize {
        self.index.as_ref().map_or(0, DedupIndex::len)
    }
}

fn refusal(kind: RefusalKind, line: u64, field: Option<String>) -> Refusal {
    Refusal { kind, line, field }
}

/// Count a quarantined line; over the cap it refuses the file.
fn reject(
    contract: &Contract,
    counts: &mut Counts,
    cap: u64,
    quarantine: &mut Vec<u8>,
    first: &mut Vec<Rejected>,
    number: u64,
    reason: Reason,
) -> Option<Refusal> {
    counts.rejected += 1;
    // The line that breaks the cap is listed too: a producer refused as `reject_cap`
    // must see that line's reason code (a one-bad-line file under the default cap 0).
    if first.len() < CHECK_REASONS {
        first.push(Rejected {
            line: number,
            reason: reason.code(contract).to_owned(),
        });
    }
    if counts.rejected > cap {
        return Some(refusal(RefusalKind::RejectCap, number, None));
    }
    contract::write_quarantine_record(quarantine, number, reason, contract);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::PassHooks;
    use crate::identity::Digester;
    use std::path::Path;

    /// A line of a checked batch made by hand.
    #[derive(Debug, Clone, Copy)]
    enum Row {
        /// Accepted event `n`: its canonical form is `e<n>`, its id too, so equal
        /// numbers are exact copies.
        Event(u64),
        /// Quarantined as invalid JSON.
        Bad,
    }

    /// Events `from..=to`, one a line.
    fn events(from: u64, to: u64) -> Vec<Row> {
        (from..=to).map(Row::Event).collect()
    }

    /// The batch after step 2 of `rows`, numbered from `first`, framed from `resume`.
    fn checked(first: u64, rows: &[Row], resume: Resume) -> Checked {
        let mut c = Checked {
            through_line: first + rows.len() as u64 - 1,
            resume,
            ..Checked::default()
        };
        for (number, row) in (first..).zip(rows) {
            let item = match *row {
                Row::Event(n) => {
                    let line = format!("e{n}");
                    let d = Digester::new(7).digest(line.as_bytes(), line.as_bytes());
                    c.canonical.extend_from_slice(line.as_bytes());
                    c.canonical.push(b'\n');
                    Item::Accept(d, c.canonical.len())
                }
                Row::Bad => Item::Reject(Reason::InvalidJson),
            };
            c.items.push((number, item));
        }
        c
    }

    /// The published lines of events `from..=to`.
    fn published(from: u64, to: u64) -> String {
        (from..=to).map(|n| format!("e{n}\n")).collect()
    }

    fn output(seq: &mut Sequencer) -> String {
        String::from_utf8(seq.output().clone()).unwrap()
    }

    fn plain(cap: u64) -> Sequencer {
        Sequencer::new(contract::progress(), cap, 0)
    }

    /// A sequencer of an input of unknown size (its index sized at the estimate's
    /// floor, 1024 events) whose index's share of the budget is `share` bytes
    /// (`None`: no budget).
    fn spilling(dir: &Path, share: Option<u64>, hooks: PassHooks) -> Sequencer {
        let plan = SpillPlan::of(share, dir, "r", hooks);
        assert!(plan.is_some());
        plain(0).with_spill(plan)
    }

    /// Spill every 4 distinct events (the table then has room for 8).
    fn every_4() -> PassHooks {
        PassHooks {
            spill_every: Some(4),
            ..PassHooks::default()
        }
    }

    /// The spill's runs, its last buffer written too: the records of each, in the
    /// order they were written.
    fn runs(sp: Spilled) -> Vec<u64> {
        let scratch = sp.writer.finish(sp.buffer).unwrap();
        let mut paths: Vec<_> = std::fs::read_dir(scratch.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "run"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len() / Record::BYTES as u64)
            .collect()
    }

    fn entries(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn a_spill_into_a_scratch_dir_that_cannot_be_made_fails_naming_it_and_stops() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("a-file");
        std::fs::write(&file, b"").unwrap();
        let dir = file.join("scratch");
        let hooks = PassHooks {
            spill_every: Some(2),
            ..PassHooks::default()
        };
        let plan = SpillPlan::of(None, &dir, "r", hooks);
        let mut seq = Sequencer::new(contract::progress(), 5, 0).with_spill(plan);
        // Line 3 spills and fails: line 4's reject is never reached.
        let rows = [Row::Event(1), Row::Event(2), Row::Event(3), Row::Bad];
        seq.apply(&checked(1, &rows, Resume::default()));
        let failure = seq.failure().expect("the spill failed").to_owned();
        assert!(
            failure.starts_with(&format!("spill to scratch under {}: ", dir.display())),
            "{failure}"
        );
        assert!(seq.stopped());
        assert_eq!(
            seq.counts(),
            Counts {
                accepted: 2,
                rejected: 0,
                duplicates: 0
            }
        );
        assert!(seq.quarantine().is_empty());
        // A later batch is not applied at all.
        seq.apply(&checked(5, &[Row::Bad], Resume::default()));
        assert_eq!(seq.progress(), (1, 4));
        assert_eq!(seq.counts().rejected, 0);
        assert_eq!(output(&mut seq), published(1, 2));
        assert!(seq.refusal().is_none());
    }

    #[test]
    fn refuse_replaces_the_refusal_of_a_line_and_stops_the_sequencer() {
        let mut seq = plain(0);
        seq.apply(&checked(1, &[Row::Event(1), Row::Bad], Resume::default()));
        assert_eq!(
            seq.refusal(),
            Some(&refusal(RefusalKind::RejectCap, 2, None))
        );
        let broken = refusal(RefusalKind::CorruptCompression, 3, None);
        seq.refuse(broken.clone());
        assert_eq!(seq.refusal(), Some(&broken));
        // And a sequencer that had decided nothing stops at it.
        let mut seq = plain(10);
        seq.apply(&checked(1, &[Row::Event(1)], Resume::default()));
        seq.refuse(broken.clone());
        assert!(seq.stopped());
        seq.apply(&checked(2, &[Row::Bad, Row::Event(2)], Resume::default()));
        assert_eq!(seq.progress(), (1, 1));
        assert_eq!(seq.refusal(), Some(&broken));
        assert_eq!(output(&mut seq), published(1, 1));
    }

    #[test]
    fn a_cap_refusal_keeps_the_reject_that_broke_the_cap_listed() {
        // Cap 2: the third reject, line 4, refuses the file.
        let mut seq = plain(2);
        let rows = [Row::Bad, Row::Event(1), Row::Bad, Row::Bad];
        seq.apply(&checked(1, &rows, Resume::default()));
        let cap = refusal(RefusalKind::RejectCap, 4, None);
        assert_eq!(seq.refusal(), Some(&cap));
        let counts = seq.counts();
        seq.resolve(counts, Some(cap.clone()));
        let lines: Vec<u64> = seq.first_rejects().iter().map(|r| r.line).collect();
        assert_eq!(lines, [1, 3, 4]);
        assert_eq!(seq.refusal(), Some(&cap));
    }

    #[test]
    fn another_refusal_drops_the_rejects_at_and_after_its_line() {
        let mut seq = plain(10);
        let rows = [Row::Bad, Row::Event(1), Row::Bad, Row::Event(2), Row::Bad];
        seq.apply(&checked(1, &rows, Resume::default()));
        assert_eq!(seq.first_rejects().len(), 3);
        // The id check found line 4 a collision: lines 4 and 5 were never reached.
        let before = Counts {
            accepted: 1,
            rejected: 2,
            duplicates: 0,
        };
        let collision = refusal(RefusalKind::IdCollision, 4, None);
        seq.resolve(before, Some(collision.clone()));
        let lines: Vec<u64> = seq.first_rejects().iter().map(|r| r.line).collect();
        assert_eq!(lines, [1, 3]);
        assert_eq!(seq.counts(), before);
        assert_eq!(seq.refusal(), Some(&collision));
        // A collision on a reject's own line drops that line too.
        let mut seq = plain(10);
        seq.apply(&checked(1, &rows, Resume::default()));
        let at_3 = refusal(RefusalKind::IdCollision, 3, None);
        seq.resolve(before, Some(at_3));
        let lines: Vec<u64> = seq.first_rejects().iter().map(|r| r.line).collect();
        assert_eq!(lines, [1]);
    }

    #[test]
    fn only_the_first_twenty_rejects_are_listed() {
        let mut seq = plain(100);
        seq.apply(&checked(1, &[Row::Bad; 25], Resume::default()));
        assert_eq!(seq.counts().rejected, 25);
        let listed: Vec<Rejected> = (1..=20)
            .map(|line| Rejected {
                line,
                reason: "invalid_json".into(),
            })
            .collect();
        assert_eq!(seq.first_rejects(), listed);
        let records = seq.quarantine().iter().filter(|&&b| b == b'\n').count();
        assert_eq!(records, 25);
    }

    #[test]
    fn the_first_duplicate_is_the_earliest_of_the_index_and_the_merge() {
        let mut seq = plain(0);
        assert_eq!(seq.first_duplicate(), None);
        seq.merged_duplicate(9);
        assert_eq!(seq.first_duplicate(), Some(9));
        seq.merged_duplicate(7);
        assert_eq!(seq.first_duplicate(), Some(7));
        seq.merged_duplicate(12);
        assert_eq!(seq.first_duplicate(), Some(7));
        // The index's own, line 4, is earlier than the merge's.
        let mut seq = plain(0);
        let rows = [1, 2, 3, 2, 4].map(Row::Event);
        seq.apply(&checked(1, &rows, Resume::default()));
        assert_eq!(seq.first_duplicate(), Some(4));
        seq.merged_duplicate(9);
        assert_eq!(seq.first_duplicate(), Some(4));
    }

    #[test]
    fn the_raw_form_adds_up_every_batch() {
        let mut seq = plain(0);
        let mut first = checked(1, &events(1, 3), Resume::default());
        first.raw = RawForm {
            differs: 1,
            first: Some(2),
            unterminated: false,
        };
        let mut last = checked(4, &events(4, 6), Resume::default());
        last.raw = RawForm {
            differs: 2,
            first: Some(5),
            unterminated: true,
        };
        seq.apply(&first);
        seq.apply(&last);
        assert_eq!(
            seq.raw_form(),
            RawForm {
                differs: 3,
                first: Some(2),
                unterminated: true
            }
        );
    }

    #[test]
    fn distinct_events_counts_each_event_once() {
        let mut seq = plain(0);
        let rows = [1, 2, 1, 3, 2].map(Row::Event);
        seq.apply(&checked(1, &rows, Resume::default()));
        assert_eq!(seq.distinct_events(), 3);
        assert_eq!(
            seq.counts(),
            Counts {
                accepted: 3,
                rejected: 0,
                duplicates: 2
            }
        );
        assert_eq!(output(&mut seq), published(1, 3));
    }

    #[test]
    fn lines_are_estimated_at_64_bytes_each_before_any_byte_is_framed() {
        let seq = Sequencer::new(contract::progress(), 0, 6400);
        assert_eq!(seq.lines_expected(), 100);
    }

    #[test]
    fn lines_are_estimated_from_the_bytes_framed_with_ten_percent_headroom() {
        // 10 lines in the first 100 bytes of 1000: 100 lines, and 10% more.
        let mut seq = Sequencer::new(contract::progress(), 0, 1000);
        seq.apply(&Checked {
            through_line: 10,
            resume: Resume {
                offset: 100,
                lines: 10,
            },
            ..Checked::default()
        });
        assert_eq!(seq.lines_expected(), 110);
        // 1000 lines in 150 kB of a GB: 6_666_666 lines, 666_666 of headroom.
        let mut seq = Sequencer::new(contract::progress(), 0, 1_000_000_000);
        seq.apply(&Checked {
            through_line: 1000,
            resume: Resume {
                offset: 150_000,
                lines: 1000,
            },
            ..Checked::default()
        });
        assert_eq!(seq.lines_expected(), 7_333_326);
    }

    #[test]
    fn a_compressed_input_is_sized_from_its_content_bytes() {
        // 640 bytes stored, 64_000 once decompressed: 1000 lines of 64 bytes.
        let mut seq = Sequencer::new(contract::progress(), 0, 640);
        seq.set_compressed(64_000);
        assert_eq!(seq.lines_expected(), 1000);
    }

    #[test]
    fn the_index_spills_once_it_holds_its_share_of_events_and_not_before() {
        let root = tempfile::tempdir().unwrap();
        let mut seq = spilling(root.path(), None, every_4());
        seq.apply(&checked(1, &events(1, 4), Resume::default()));
        assert_eq!(seq.distinct_events(), 4);
        assert_eq!(entries(root.path()), 0);
        seq.apply(&checked(5, &events(5, 5), Resume::default()));
        assert_eq!(entries(root.path()), 1);
        assert!(seq.take_spilled().is_some());
        assert_eq!(output(&mut seq), published(1, 5));
    }

    /// An index sized for 1024 events has 1205 slots of 24 bytes, 28_920 bytes; its
    /// growth briefly holds it and one half as large again: 72_300 bytes.
    #[test]
    fn the_index_spills_when_its_growth_would_pass_its_share() {
        let root = tempfile::tempdir().unwrap();
        // 96_396 bytes: the index's 3/4 is 72_297 bytes (room for 2560 events).
        let mut seq = spilling(root.path(), Some(96_396), PassHooks::default());
        seq.apply(&checked(1, &events(1, 1024), Resume::default()));
        assert_eq!(seq.distinct_events(), 1024);
        assert_eq!(entries(root.path()), 0);
        // The 1025th would grow it.
        seq.apply(&checked(1025, &events(1025, 1025), Resume::default()));
        assert_eq!(entries(root.path()), 1);
        assert!(seq.take_spilled().is_some());
        assert_eq!(seq.counts().accepted, 1025);
    }

    #[test]
    fn a_growth_that_fits_the_share_does_not_spill() {
        let root = tempfile::tempdir().unwrap();
        // 96_400 bytes: the index's 3/4 is 72_300 bytes, just what its growth holds.
        let mut seq = spilling(root.path(), Some(96_400), PassHooks::default());
        seq.apply(&checked(1, &events(1, 1030), Resume::default()));
        assert_eq!(seq.distinct_events(), 1030);
        assert_eq!(entries(root.path()), 0);
        assert!(seq.take_spilled().is_none());
    }

    #[test]
    fn the_index_is_dumped_in_runs_of_half_the_rest_of_the_share() {
        let root = tempfile::tempdir().unwrap();
        // 4000 bytes: the index has 3000 (106 events), the dump 1000 bytes, two
        // buffers of 12 records of 40 bytes.
        let mut seq = spilling(root.path(), Some(4000), PassHooks::default());
        seq.apply(&checked(1, &events(1, 106), Resume::default()));
        assert_eq!(entries(root.path()), 0);
        seq.apply(&checked(107, &events(107, 107), Resume::default()));
        // 106 events in runs of 12, then the record of event 107.
        let sp = seq.take_spilled().expect("it spilled");
        assert_eq!(runs(sp), [12, 12, 12, 12, 12, 12, 12, 12, 10, 1]);
        assert_eq!(output(&mut seq), published(1, 107));
    }

    /// Spilling every 4 events: the index is dumped as one run of 4, records are
    /// written in runs of 2 (half the plan's 4), during the table's days (room for
    /// 8: events 5 to 8) and after.
    #[test]
    fn records_are_written_in_runs_of_half_the_plan_s_records() {
        let root = tempfile::tempdir().unwrap();
        let mut seq = spilling(root.path(), None, every_4());
        seq.apply(&checked(1, &events(1, 11), Resume::default()));
        let sp = seq.take_spilled().expect("it spilled");
        assert_eq!(runs(sp), [4, 2, 2, 2, 1]);
    }

    #[test]
    fn without_copies_before_the_table_filled_the_lines_after_it_are_staged() {
        let root = tempfile::tempdir().unwrap();
        let mut seq = spilling(root.path(), None, every_4());
        seq.apply(&checked(1, &events(1, 9), Resume::default()));
        let later = Resume {
            offset: 900,
            lines: 9,
        };
        seq.apply(&checked(10, &events(10, 11), later));
        assert_eq!(output(&mut seq), published(1, 11));
        assert_eq!(seq.output_lines(), 11);
        let sp = seq.take_spilled().expect("it spilled");
        assert_eq!(sp.from, None);
        assert_eq!(sp.sum, LineSum::default());
        assert_eq!(sp.resume, Resume::default());
    }

    /// Line 3 copies line 1 before the spill (line 6); the table (room for 8) is
    /// full after line 9: lines 10 on are held back for the replay.
    fn held(root: &Path, compressed: bool) -> Spilled {
        let mut seq = spilling(root, None, every_4());
        if compressed {
            seq.set_compressed(64_000);
        }
        let rows = [1, 2, 1, 3, 4, 5, 6, 7, 8].map(Row::Event);
        seq.apply(&checked(1, &rows, Resume::default()));
        let second = Resume {
            offset: 900,
            lines: 9,
        };
        seq.apply(&checked(10, &events(9, 11), second));
        let third = Resume {
            offset: 1200,
            lines: 12,
        };
        seq.apply(&checked(13, &events(12, 12), third));
        assert_eq!(output(&mut seq), published(1, 8));
        assert_eq!(seq.output_lines(), 12);
        assert_eq!(
            seq.counts(),
            Counts {
                accepted: 12,
                rejected: 0,
                duplicates: 1
            }
        );
        let sp = seq.take_spilled().expect("it spilled");
        // From line 10, output line 8 (counted from 0), on.
        assert_eq!(sp.from, Some((10, 8)));
        let mut sum = LineSum::default();
        for (line, n) in [(10, 9), (11, 10), (12, 11), (13, 12)] {
            let e = format!("e{n}");
            let d = Digester::new(7).digest(e.as_bytes(), e.as_bytes());
            sum.add(line, d.value());
        }
        assert_eq!(sp.sum, sum);
        sp
    }

    #[test]
    fn after_copies_the_lines_past_the_table_are_held_from_their_first_batch() {
        let root = tempfile::tempdir().unwrap();
        let sp = held(root.path(), false);
        assert_eq!(
            sp.resume,
            Resume {
                offset: 900,
                lines: 9
            }
        );
    }

    #[test]
    fn a_compressed_input_s_held_lines_are_replayed_from_its_start() {
        let root = tempfile::tempdir().unwrap();
        let sp = held(root.path(), true);
        assert_eq!(sp.resume, Resume::default());
    }

    /// Share 80_000 bytes: the index (3/4) spills when its growth (72_300 bytes,
    /// 1024 events) would pass 60_000, dumped in runs of 250. Records take 80_000
    /// bytes less the table's: a table with room for 1028 events (1225 slots, 9800
    /// bytes) leaves buffers of 877 records; once it is gone, buffers of 1000.
    #[test]
    fn the_buffer_after_the_table_is_reserved_at_the_larger_size() {
        let root = tempfile::tempdir().unwrap();
        let hooks = PassHooks {
            spill_table: Some(1028),
            ..PassHooks::default()
        };
        let mut seq = spilling(root.path(), Some(80_000), hooks);
        // Events 1025 to 1028 fill the table; 1029 comes after it.
        seq.apply(&checked(1, &events(1, 1029), Resume::default()));
        assert_eq!(output(&mut seq), published(1, 1029));
        let sp = seq.take_spilled().expect("it spilled");
        assert_eq!(sp.buffer.len(), 1);
        assert!(sp.buffer.capacity() >= 1000, "{}", sp.buffer.capacity());
        assert_eq!(runs(sp), [250, 250, 250, 250, 24, 4, 1]);
    }
}
