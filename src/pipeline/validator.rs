//! The validation stage, in three steps so both cores can share it while the
//! result stays exactly that of a sequential pass:
//!
//! 1. **frame** (sequential, cheap): the contract's [`LineFramer`] splits the stream
//!    into physical lines and [`Batch::frame`] packs each read chunk's lines into a
//!    [`Batch`] (offsets into the shared chunk; only lines spanning chunks are copied).
//! 2. **check** (parallel, the bulk of the work): [`check_batch`] validates each line,
//!    writes the canonical form and computes the event's digests. Pure.
//! 3. **sequence** (sequential, in input order): [`Sequencer`] consults the dedup
//!    index, applies the reject cap, and emits published bytes and quarantine
//!    records, deciding at most one refusal, always the first in line order.
//!
//! [`Validator`] strings the three together on one thread, for callers that do not
//! need the parallel pipeline (drills, tests).

use bytes::Bytes;

use crate::contract::{self, Line, LineFramer, Reason, Verdict};
use crate::identity::{DedupIndex, Digests, Seen};
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

/// Where a framed line's bytes are.
#[derive(Debug, Clone, Copy)]
enum Src {
    /// In the batch's chunk.
    Chunk(usize, usize),
    /// In the batch's side buffer (a line that spanned chunks).
    Side(usize, usize),
    TooLong,
}

/// The lines framed from one read chunk.
#[derive(Debug, Default)]
pub struct Batch {
    chunk: Bytes,
    side: Vec<u8>,
    lines: Vec<(u64, Src)>,
    /// Physical lines of the input framed up to and including this batch.
    through_line: u64,
}

impl Batch {
    /// Step 1: frame the lines completed by `chunk`, packed per read chunk.
    pub fn frame(framer: &mut LineFramer, chunk: Bytes) -> Batch {
        let mut batch = Batch {
            chunk: chunk.clone(),
            side: Vec::new(),
            lines: Vec::with_capacity(chunk.len() / 128),
            through_line: 0,
        };
        let base = chunk.as_ptr() as usize;
        let end = base + chunk.len();
        let _ = framer.push(&chunk, |line| {
            batch.add(line, base, end);
            Ok::<(), std::convert::Infallible>(())
        });
        batch.through_line = framer.lines_seen();
        batch
    }

    /// End of input: the last line may lack its newline.
    pub fn finish(framer: &mut LineFramer) -> Batch {
        let mut batch = Batch::default();
        let _ = framer.finish(|line| {
            batch.add(line, 0, 0);
            Ok::<(), std::convert::Infallible>(())
        });
        batch.through_line = framer.lines_seen();
        batch
    }

    /// Record a line: by offset when it lies in the chunk, else by copy.
    fn add(&mut self, line: Line<'_>, base: usize, end: usize) {
        match line {
            Line::TooLong { number } => self.lines.push((number, Src::TooLong)),
            Line::Content { number, bytes } => {
                let p = bytes.as_ptr() as usize;
                let src = if p >= base && p + bytes.len() <= end && base != end {
                    Src::Chunk(p - base, p - base + bytes.len())
                } else {
                    let start = self.side.len();
                    self.side.extend_from_slice(bytes);
                    Src::Side(start, self.side.len())
                };
                self.lines.push((number, src));
            }
        }
    }

    fn bytes(&self, src: Src) -> &[u8] {
        match src {
            Src::Chunk(a, b) => &self.chunk[a..b],
            Src::Side(a, b) => &self.side[a..b],
            Src::TooLong => &[],
        }
    }
}

/// One line's verdict after step 2.
#[derive(Debug, Clone, Copy)]
enum Item {
    /// Canonical bytes end at this offset of [`Checked::canonical`].
    Accept(Digests, usize),
    Reject(Reason),
    Prohibited(&'static str),
}

/// A batch after step 2.
#[derive(Debug, Default)]
pub struct Checked {
    canonical: Vec<u8>,
    items: Vec<(u64, Item)>,
    through_line: u64,
}

/// Step 2: validate every line of a batch, canonicalise and digest the accepted.
pub fn check_batch(batch: &Batch, seed: u64) -> Checked {
    let mut out = Checked {
        canonical: Vec::with_capacity(batch.chunk.len() + batch.side.len()),
        items: Vec::with_capacity(batch.lines.len()),
        through_line: batch.through_line,
    };
    for &(number, src) in &batch.lines {
        let item = match src {
            Src::TooLong => Item::Reject(Reason::LineTooLong),
            src => {
                let line = batch.bytes(src);
                let start = out.canonical.len();
                // The single pass takes nearly every line; what it declines, the
                // full rules decide.
                match contract::canonicalize(line, &mut out.canonical) {
                    Some(c) => {
                        let canonical = &out.canonical[start..];
                        let digests = Digests::of(seed, &out.canonical[c.event_id], canonical);
                        out.canonical.push(b'\n');
                        Item::Accept(digests, out.canonical.len())
                    }
                    None => slow_item(line, &mut out.canonical, seed),
                }
            }
        };
        out.items.push((number, item));
    }
    out
}

/// One line through [`contract::validate`], the full rules.
fn slow_item(line: &[u8], canonical: &mut Vec<u8>, seed: u64) -> Item {
    match contract::validate(line) {
        Verdict::Accept(event) => {
            let start = canonical.len();
            event.write_canonical(canonical);
            let digests = Digests::of(seed, event.event_id.as_bytes(), &canonical[start..]);
            canonical.push(b'\n');
            Item::Accept(digests, canonical.len())
        }
        Verdict::Quarantine(reason) => Item::Reject(reason),
        Verdict::Prohibited(field) => Item::Prohibited(field),
    }
}

/// Accepted events are inserted this many items after their slot was prefetched,
/// so the cache misses of a large index overlap.
const PREFETCH_DISTANCE: usize = 8;

/// Step 3: the order-dependent decisions.
pub struct Sequencer {
    index: Option<DedupIndex>,
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
}

impl Sequencer {
    /// `cap`: quarantined lines tolerated; `input_size` sizes the dedup index.
    pub fn new(cap: u64, input_size: u64) -> Self {
        Sequencer {
            index: None,
            input_size,
            cap,
            counts: Counts::default(),
            out: Vec::with_capacity(2 << 20),
            quarantine: Vec::new(),
            refusal: None,
            first_rejects: Vec::new(),
            batches: 0,
            through_line: 0,
        }
    }

    /// Batches applied so far, and the physical lines they covered.
    pub fn progress(&self) -> (u64, u64) {
        (self.batches, self.through_line)
    }

    /// Apply one checked batch, in input order. Nothing happens after a refusal.
    pub fn apply(&mut self, checked: &Checked) {
        if self.refusal.is_some() {
            return;
        }
        self.batches += 1;
        self.through_line = self.through_line.max(checked.through_line);
        let index = self.index.get_or_insert_with(|| {
            // Size the index once, from the first batch's average line length.
            DedupIndex::with_capacity(DedupIndex::estimate_events(
                self.input_size,
                checked.items.len(),
                checked.canonical.len(),
            ))
        });
        let mut start = 0;
        for (i, &(number, item)) in checked.items.iter().enumerate() {
            if let Some(&(_, Item::Accept(d, _))) = checked.items.get(i + PREFETCH_DISTANCE) {
                index.prefetch(&d);
            }
            let decided = match item {
                Item::Accept(d, end) => {
                    let line = &checked.canonical[start..end];
                    start = end;
                    match index.insert(d) {
                        Seen::New => {
                            self.counts.accepted += 1;
                            self.out.extend_from_slice(line);
                            None
                        }
                        Seen::Duplicate => {
                            self.counts.duplicates += 1;
                            None
                        }
                        Seen::Collision => Some(refusal(RefusalKind::IdCollision, number, None)),
                    }
                }
                Item::Reject(reason) => reject(
                    &mut self.counts,
                    self.cap,
                    &mut self.quarantine,
                    &mut self.first_rejects,
                    number,
                    reason,
                ),
                Item::Prohibited(field) => {
                    Some(refusal(RefusalKind::ProhibitedField, number, Some(field)))
                }
            };
            if let Some(r) = decided {
                self.refusal = Some(r);
                return;
            }
        }
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

    /// The content size the dedup index is sized from, when it is not the stored
    /// size (a compressed input). Only before the first batch.
    pub fn set_input_size(&mut self, bytes: u64) {
        self.input_size = bytes;
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

    pub fn distinct_events(&self) -> usize {
        self.index.as_ref().map_or(0, DedupIndex::len)
    }
}

fn refusal(kind: RefusalKind, line: u64, field: Option<&'static str>) -> Refusal {
    Refusal { kind, line, field }
}

/// Count a quarantined line; over the cap it refuses the file.
fn reject(
    counts: &mut Counts,
    cap: u64,
    quarantine: &mut Vec<u8>,
    first: &mut Vec<Rejected>,
    number: u64,
    reason: Reason,
) -> Option<Refusal> {
    counts.rejected += 1;
    if counts.rejected > cap {
        return Some(refusal(RefusalKind::RejectCap, number, None));
    }
    if first.len() < CHECK_REASONS {
        first.push(Rejected {
            line: number,
            reason: reason.code(),
        });
    }
    contract::write_quarantine_record(quarantine, number, reason);
    None
}

/// All three steps on the caller's thread.
pub struct Validator {
    framer: LineFramer,
    seq: Sequencer,
    seed: u64,
}

impl Validator {
    pub fn new(max_line_bytes: usize, cap: u64, input_size: u64, seed: u64) -> Self {
        Validator {
            framer: LineFramer::new(max_line_bytes),
            seq: Sequencer::new(cap, input_size),
            seed,
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        let batch = Batch::frame(&mut self.framer, Bytes::copy_from_slice(chunk));
        self.seq.apply(&check_batch(&batch, self.seed));
    }

    pub fn finish(&mut self) {
        let batch = Batch::finish(&mut self.framer);
        self.seq.apply(&check_batch(&batch, self.seed));
    }

    pub fn sequencer(&mut self) -> &mut Sequencer {
        &mut self.seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"event_id":"e1","learner_id":"l","lesson_id":"s","event_type":"completed","attempt_number":1,"event_time":"2026-03-02T10:00:00Z"}"#;

    fn run(input: &str, cap: u64) -> Validator {
        let mut v = Validator::new(1 << 20, cap, input.len() as u64, 1);
        // Feed in small chunks so lines span chunk boundaries.
        for chunk in input.as_bytes().chunks(7) {
            v.feed(chunk);
        }
        v.finish();
        v
    }

    #[test]
    fn accepts_and_collapses_an_exact_retry() {
        let retry = r#"{"event_time":"2026-03-02T10:00:00+00:00","attempt_number":1,"lesson_id":"s","learner_id":"l","event_type":"completed","event_id":"e1","checkpoint":null}"#;
        let mut v = run(&format!("{GOOD}\n{retry}\n"), 0);
        let s = v.sequencer();
        assert_eq!(
            s.counts(),
            Counts {
                accepted: 1,
                rejected: 0,
                duplicates: 1
            }
        );
        assert!(s.refusal().is_none());
        assert_eq!(s.output().iter().filter(|&&b| b == b'\n').count(), 1);
    }

    #[test]
    fn collision_refuses_at_the_second_line() {
        let other = GOOD.replace("\"attempt_number\":1", "\"attempt_number\":2");
        let mut v = run(&format!("{GOOD}\n\n{other}\n"), 0);
        let r = v.sequencer().refusal().unwrap();
        assert_eq!((r.kind, r.line), (RefusalKind::IdCollision, 3));
    }

    #[test]
    fn the_first_refusal_in_line_order_wins() {
        // A collision on line 2 comes before the reject that would break the cap.
        let other = GOOD.replace("\"attempt_number\":1", "\"attempt_number\":2");
        let mut v = run(&format!("{GOOD}\n{other}\nnot json\n"), 0);
        let r = v.sequencer().refusal().unwrap();
        assert_eq!((r.kind, r.line), (RefusalKind::IdCollision, 2));
        assert_eq!(v.sequencer().counts().rejected, 0);
    }

    #[test]
    fn cap_of_n_accepts_n_rejects_and_refuses_the_next() {
        let mut v = run(&format!("{GOOD}\nnot json\n[1]\n"), 2);
        assert!(v.sequencer().refusal().is_none());
        assert_eq!(v.sequencer().counts().rejected, 2);
        let mut v = run(&format!("{GOOD}\nnot json\n[1]\n{{}}\n"), 2);
        let r = v.sequencer().refusal().unwrap();
        assert_eq!((r.kind, r.line), (RefusalKind::RejectCap, 4));
    }

    #[test]
    fn quarantine_records_carry_line_and_reason_only() {
        let mut v = run(&format!("not json secret@example.com\n{GOOD}\n"), 5);
        let q = String::from_utf8(v.sequencer().quarantine().clone()).unwrap();
        assert_eq!(q, "{\"line\":1,\"reason\":\"invalid_json\"}\n");
        assert_eq!(v.sequencer().first_rejects()[0].reason, "invalid_json");
    }

    #[test]
    fn prohibited_field_refuses_and_names_the_field() {
        let bad = GOOD.replace("\"lesson_id\"", "\"email\":\"x@y\",\"lesson_id\"");
        let mut v = run(&format!("{GOOD}\n{bad}\n"), 100);
        let r = v.sequencer().refusal().unwrap();
        assert_eq!(
            (r.kind, r.line, r.field),
            (RefusalKind::ProhibitedField, 2, Some("email"))
        );
    }

    #[test]
    fn lines_spanning_chunks_and_too_long_lines_keep_their_numbers() {
        let long = "x".repeat(100);
        let mut v = Validator::new(50, 5, 0, 1);
        let input = format!("{GOOD}\n{long}\n\n{GOOD}");
        for chunk in input.as_bytes().chunks(3) {
            v.feed(chunk);
        }
        v.finish();
        let s = v.sequencer();
        assert_eq!(
            s.first_rejects(),
            [
                Rejected {
                    line: 1,
                    reason: "line_too_long"
                },
                Rejected {
                    line: 2,
                    reason: "line_too_long"
                },
                Rejected {
                    line: 4,
                    reason: "line_too_long"
                },
            ]
        );
    }
}
