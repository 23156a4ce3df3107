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
use super::batch::{check_batch, Batch};
use super::batch::{Checked, Item, LineSum, RawForm};
use super::spill_plan::SpillPlan;
use crate::contract::{self, Contract, Reason, Resume};
use crate::hook::CrashPoint;
use crate::identity::{DedupIndex, Digests, Seen};
use crate::spill::{Call, Fingerprints, Record, Scratch};
use crate::summary::{Refusal, RefusalKind, Rejected};

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
