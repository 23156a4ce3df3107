//! Steps 1 and 2 of the validation stage (`validator.rs` has the map):
//!
//! 1. **frame** (sequential, cheap): the contract's [`LineFramer`] splits the stream
//!    into physical lines and [`Batch::frame`] packs each read chunk's lines into a
//!    [`Batch`] (offsets into the shared chunk; only lines spanning chunks are copied).
//! 2. **check** (parallel, the bulk of the work): [`check_batch`] validates each line,
//!    writes the canonical form and computes the event's digests. Pure.
//!
//! [`LineSum`] is how a spilled run's replay proves it read what the pass read.

use bytes::Bytes;

use crate::contract::{self, Contract, Line, LineFramer, Reason, Resume, Verdict};
use crate::identity::{Digester, Digests};

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
    /// The input's last line, which has no newline, is in this batch.
    unterminated: bool,
    /// Lines the framer trimmed besides their newline (a `\r`, a BOM), in order.
    trimmed: Vec<u64>,
    /// Where framing could start again to frame this batch's lines (a replay).
    resume: Resume,
}

impl Batch {
    /// Step 1: frame the lines completed by `chunk`, packed per read chunk.
    pub fn frame(framer: &mut LineFramer, chunk: Bytes) -> Batch {
        Batch::frame_from(framer, chunk, 0)
    }

    /// [`Batch::frame`], keeping only the lines numbered `from` or later (a replay).
    pub fn frame_from(framer: &mut LineFramer, chunk: Bytes, from: u64) -> Batch {
        let mut batch = Batch {
            chunk: chunk.clone(),
            side: Vec::new(),
            lines: Vec::with_capacity(chunk.len() / 128),
            through_line: 0,
            unterminated: false,
            trimmed: Vec::new(),
            resume: framer.resume_point(),
        };
        let base = chunk.as_ptr() as usize;
        let end = base + chunk.len();
        let _ = framer.push(&chunk, |line| {
            batch.add(line, base, end, from);
            Ok::<(), std::convert::Infallible>(())
        });
        batch.through_line = framer.lines_seen();
        batch
    }

    /// End of input: the last line may lack its newline.
    pub fn finish(framer: &mut LineFramer) -> Batch {
        Batch::finish_from(framer, 0)
    }

    /// [`Batch::finish`], keeping the last line only if it is numbered `from` or later.
    pub fn finish_from(framer: &mut LineFramer, from: u64) -> Batch {
        let mut batch = Batch {
            resume: framer.resume_point(),
            ..Batch::default()
        };
        let before = framer.lines_seen();
        let _ = framer.finish(|line| {
            batch.add(line, 0, 0, from);
            Ok::<(), std::convert::Infallible>(())
        });
        batch.through_line = framer.lines_seen();
        batch.unterminated = batch.through_line > before;
        batch
    }

    /// Record a line numbered `from` or later: by offset when it lies in the chunk,
    /// else by copy.
    fn add(&mut self, line: Line<'_>, base: usize, end: usize, from: u64) {
        if line.number() < from {
            return;
        }
        match line {
            Line::TooLong { number } => self.lines.push((number, Src::TooLong)),
            Line::Content {
                number,
                bytes,
                trimmed,
            } => {
                if trimmed {
                    self.trimmed.push(number);
                }
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

/// An order-sensitive sum over accepted lines of (line number, canonical digest):
/// the pass sums the lines it holds back, the replay the lines it takes again, and
/// equal sums prove the replay read the lines the pass decided on. The line number
/// in each term makes it order-sensitive; being a sum, batches can be added as
/// they come.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LineSum([u64; 2]);

impl LineSum {
    pub fn add(&mut self, line: u64, digest: [u64; 2]) {
        let at = mix(line.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        self.0[0] = self.0[0].wrapping_add(mix(digest[0] ^ at));
        self.0[1] = self.0[1].wrapping_add(mix(digest[1].wrapping_add(at)));
    }
}

/// The splitmix64 finaliser: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One line's verdict after step 2.
#[derive(Debug, Clone, Copy)]
pub enum Item {
    /// Canonical bytes end at this offset of [`Checked::canonical`].
    Accept(Digests, usize),
    Reject(Reason),
    /// The index of the name in the contract's `prohibited` list.
    Prohibited(usize),
}

/// A batch after step 2.
#[derive(Debug, Default)]
pub struct Checked {
    pub canonical: Vec<u8>,
    pub items: Vec<(u64, Item)>,
    pub through_line: u64,
    /// Compared with their canonical form ([`Compare::Raw`]): how its lines stand.
    pub raw: RawForm,
    /// Where framing could start again to frame these lines (a replay).
    pub resume: Resume,
}

/// Whether the checkers also compare each accepted line with its canonical form:
/// `verify --deep` reads published lines, which must be canonical already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    No,
    Raw,
}

/// How the lines read stand against their canonical forms ([`Compare::Raw`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RawForm {
    /// Accepted lines whose bytes are not their canonical form, and the first.
    pub differs: u64,
    pub first: Option<u64>,
    /// The input's last line has no newline.
    pub unterminated: bool,
}

impl RawForm {
    /// Add a later batch's.
    pub fn add(&mut self, later: RawForm) {
        self.differs += later.differs;
        self.first = self.first.or(later.first);
        self.unterminated |= later.unterminated;
    }

    fn differ(&mut self, number: u64) {
        self.differs += 1;
        self.first.get_or_insert(number);
    }
}

/// A line's verdict as [`Checked::verdicts`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided<'a> {
    /// The canonical bytes, with their newline.
    Accepted(&'a [u8]),
    Rejected,
    Prohibited,
}

impl Checked {
    /// Each line's number and verdict, in order.
    pub fn verdicts(&self) -> impl Iterator<Item = (u64, Decided<'_>)> {
        let mut start = 0;
        self.items.iter().map(move |&(number, item)| {
            let d = match item {
                Item::Accept(_, end) => {
                    let line = &self.canonical[start..end];
                    start = end;
                    Decided::Accepted(line)
                }
                Item::Reject(_) => Decided::Rejected,
                Item::Prohibited(_) => Decided::Prohibited,
            };
            (number, d)
        })
    }

    /// Physical lines of the input framed up to and including this batch.
    pub fn through_line(&self) -> u64 {
        self.through_line
    }
}

/// Step 2: validate every line of a batch, canonicalise and digest the accepted
/// (and, with [`Compare::Raw`], compare each accepted line with its canonical form).
pub fn check_batch(
    batch: &Batch,
    contract: &Contract,
    digester: Digester,
    compare: Compare,
) -> Checked {
    let mut out = Checked {
        canonical: Vec::with_capacity(batch.chunk.len() + batch.side.len()),
        items: Vec::with_capacity(batch.lines.len()),
        through_line: batch.through_line,
        resume: batch.resume,
        raw: RawForm {
            unterminated: batch.unterminated,
            ..RawForm::default()
        },
    };
    // The batch's lines mostly share one key order: each line's predicts the next.
    let mut carry = contract::Carry::default();
    let mut trimmed = batch.trimmed.iter().peekable();
    for &(number, src) in &batch.lines {
        let was_trimmed = trimmed.next_if_eq(&&number).is_some();
        let start = out.canonical.len();
        let item = match src {
            Src::TooLong => Item::Reject(Reason::LineTooLong),
            src => {
                let line = batch.bytes(src);
                // The single pass takes nearly every line; what it declines, the
                // full rules decide.
                match contract::canonicalize_with(contract, &mut carry, line, &mut out.canonical) {
                    Some(c) => {
                        let canonical = &out.canonical[start..];
                        let digests = digester.digest(&out.canonical[c.id], canonical);
                        out.canonical.push(b'\n');
                        Item::Accept(digests, out.canonical.len())
                    }
                    None => slow_item(contract, line, &mut out.canonical, digester),
                }
            }
        };
        if let (Compare::Raw, Item::Accept(_, end)) = (compare, item) {
            // The canonical form ends with the newline the framer took off the line;
            // a `\r` or BOM it took too was in the object.
            if was_trimmed || out.canonical[start..end - 1] != *batch.bytes(src) {
                out.raw.differ(number);
            }
        }
        out.items.push((number, item));
    }
    out
}

/// One line through [`contract::validate`], the full rules.
fn slow_item(
    contract: &Contract,
    line: &[u8],
    canonical: &mut Vec<u8>,
    digester: Digester,
) -> Item {
    match contract::validate(contract, line) {
        Verdict::Accept(event) => {
            let start = canonical.len();
            event.write_canonical(canonical);
            let digests = digester.digest(event.id().as_bytes(), &canonical[start..]);
            canonical.push(b'\n');
            Item::Accept(digests, canonical.len())
        }
        Verdict::Quarantine(reason) => Item::Reject(reason),
        Verdict::Prohibited(field) => Item::Prohibited(field),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A progress event in canonical form (keys sorted, the optional `checkpoint`
    /// written as null, no spaces), as docs/design.md defines it.
    fn ev(id: &str) -> String {
        format!(
            r#"{{"attempt_number":1,"checkpoint":null,"event_id":"{id}","event_time":"2026-03-02T10:00:00Z","event_type":"completed","learner_id":"l-1","lesson_id":"s-1"}}"#
        )
    }

    #[test]
    fn compare_counts_lines_not_in_canonical_form_and_an_unterminated_last() {
        let contract = crate::contract::progress();
        let d = Digester::new(7);
        let spaced = ev("b").replace(',', ", ");
        let input = format!("{}\n{spaced}\n{}\n\n{}", ev("a"), ev("c"), ev("d"));
        let mut framer = LineFramer::new(1 << 16);
        let batch = Batch::frame(&mut framer, Bytes::from(input));
        let checked = check_batch(&batch, &contract, d, Compare::Raw);
        assert_eq!(
            checked.raw,
            RawForm {
                differs: 1,
                first: Some(2),
                unterminated: false
            }
        );
        // Without the comparison nothing is counted.
        let plain = check_batch(&batch, &contract, d, Compare::No);
        assert_eq!(plain.raw, RawForm::default());
        let last = Batch::finish(&mut framer);
        let checked = check_batch(&last, &contract, d, Compare::Raw);
        assert_eq!(
            checked.raw,
            RawForm {
                differs: 0,
                first: None,
                unterminated: true
            }
        );
        // A last line ended by its newline leaves nothing to finish.
        let mut framer = LineFramer::new(1 << 16);
        let _ = Batch::frame(&mut framer, Bytes::from(format!("{}\n", ev("a"))));
        assert!(!Batch::finish(&mut framer).unterminated);
    }

    #[test]
    fn compare_counts_a_bom_and_a_cr_the_framer_dropped() {
        let contract = crate::contract::progress();
        let d = Digester::new(7);
        // Canonical lines all, but for a BOM before line 1 and a `\r` after line 3.
        let input = format!(
            "\u{FEFF}{}\n{}\n{}\r\n{}\n",
            ev("a"),
            ev("b"),
            ev("c"),
            ev("d")
        );
        let mut framer = LineFramer::new(1 << 16);
        let batch = Batch::frame(&mut framer, Bytes::from(input));
        let checked = check_batch(&batch, &contract, d, Compare::Raw);
        assert_eq!(
            checked.raw,
            RawForm {
                differs: 2,
                first: Some(1),
                unterminated: false
            }
        );
    }

    /// Each line of a batch by where its bytes are: in the chunk (by offset), in the
    /// side buffer (copied), or too long (none).
    fn places(batch: &Batch) -> Vec<(u64, &'static str, Vec<u8>)> {
        let place = |src: Src| match src {
            Src::Chunk(..) => "chunk",
            Src::Side(..) => "side",
            Src::TooLong => "too long",
        };
        batch
            .lines
            .iter()
            .map(|&(n, src)| (n, place(src), batch.bytes(src).to_vec()))
            .collect()
    }

    #[test]
    fn lines_inside_a_chunk_are_kept_by_offset_and_a_spanning_line_by_copy() {
        let mut framer = LineFramer::new(8);
        let first = Batch::frame(&mut framer, Bytes::from_static(b"ab\ncde\nf"));
        assert_eq!(
            places(&first),
            [(1, "chunk", b"ab".to_vec()), (2, "chunk", b"cde".to_vec())]
        );
        // Line 3 began in the first chunk: its bytes are copied out of the framer.
        let second = Batch::frame(&mut framer, Bytes::from_static(b"gh\n0123456789\nij"));
        assert_eq!(
            places(&second),
            [(3, "side", b"fgh".to_vec()), (4, "too long", Vec::new())]
        );
        let last = Batch::finish(&mut framer);
        assert_eq!(places(&last), [(5, "side", b"ij".to_vec())]);
    }

    #[test]
    fn a_batch_resumes_at_the_start_of_the_line_it_had_not_completed() {
        let mut framer = LineFramer::new(8);
        let first = Batch::frame(&mut framer, Bytes::from_static(b"ab\ncd"));
        assert_eq!(
            first.resume,
            Resume {
                offset: 0,
                lines: 0
            }
        );
        let second = Batch::frame(&mut framer, Bytes::from_static(b"e\nfg"));
        assert_eq!(
            second.resume,
            Resume {
                offset: 3,
                lines: 1
            }
        );
        let last = Batch::finish(&mut framer);
        assert_eq!(
            last.resume,
            Resume {
                offset: 7,
                lines: 2
            }
        );
        assert_eq!((last.through_line, last.unterminated), (3, true));
    }

    /// `mix` is splitmix64's finaliser: from state `k` times the golden gamma it gives
    /// the reference generator's outputs for seed 0 (Vigna's splitmix64.c).
    #[test]
    fn mix_is_the_splitmix64_finaliser() {
        let gamma: u64 = 0x9E37_79B9_7F4A_7C15;
        assert_eq!(mix(gamma), 0xE220_A839_7B1D_CDAF);
        assert_eq!(mix(gamma.wrapping_mul(2)), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(mix(gamma.wrapping_mul(3)), 0x06C4_5D18_8009_454F);
    }

    /// The expected sums were computed apart (Python, from the definition in
    /// LineSum's doc: each term mixes the digest with the mixed line number).
    #[test]
    fn a_line_sum_adds_mixed_terms_and_depends_on_which_line_held_which_event() {
        let (x, y) = (
            [0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210],
            [0x1111_1111_1111_1111, 0x2222_2222_2222_2222],
        );
        let mut sum = LineSum::default();
        sum.add(1, x);
        sum.add(2, y);
        assert_eq!(sum, LineSum([0x03C1_BCC3_2D92_7E7E, 0xCDE8_22B6_16C9_2F48]));
        let mut swapped = LineSum::default();
        swapped.add(2, x);
        swapped.add(1, y);
        assert_eq!(
            swapped,
            LineSum([0x1AB8_17FB_1B06_2E88, 0xC949_AC7D_C401_C0DA])
        );
        // Terms commute: batches may be summed as they come.
        let mut later_first = LineSum::default();
        later_first.add(2, y);
        later_first.add(1, x);
        assert_eq!(later_first, sum);
    }

    #[test]
    fn raw_forms_add_up_keep_the_first_line_and_any_unterminated_end() {
        let mut total = RawForm::default();
        total.add(RawForm {
            differs: 2,
            first: Some(5),
            unterminated: false,
        });
        total.add(RawForm {
            differs: 3,
            first: Some(9),
            unterminated: true,
        });
        total.add(RawForm::default());
        assert_eq!(
            total,
            RawForm {
                differs: 5,
                first: Some(5),
                unterminated: true
            }
        );
    }
}
