//! Steps 1 and 2 of the validation stage (`validator.rs` has the map):
//!
//! 1. **frame** (sequential, cheap): the contract's [`LineFramer`] splits the stream
//!    into physical lines and [`Batch::frame`] packs each read chunk's lines into a
//!    [`Batch`] (offsets into the shared chunk; only lines spanning chunks are copied).
//! 2. **check** (parallel, the bulk of the work): [`check_batch`] validates each line,
//!    writes the canonical form and computes the event's digests. Pure.

use bytes::Bytes;

use crate::contract::{self, Contract, Line, LineFramer, Reason, Verdict};
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
        let mut batch = Batch::default();
        let _ = framer.finish(|line| {
            batch.add(line, 0, 0, from);
            Ok::<(), std::convert::Infallible>(())
        });
        batch.through_line = framer.lines_seen();
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
pub(super) enum Item {
    /// Canonical bytes end at this offset of [`Checked::canonical`].
    Accept(Digests, usize),
    Reject(Reason),
    /// The index of the name in the contract's `prohibited` list.
    Prohibited(usize),
}

/// A batch after step 2.
#[derive(Debug, Default)]
pub struct Checked {
    pub(super) canonical: Vec<u8>,
    pub(super) items: Vec<(u64, Item)>,
    pub(super) through_line: u64,
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

/// Step 2: validate every line of a batch, canonicalise and digest the accepted.
pub fn check_batch(batch: &Batch, contract: &Contract, digester: Digester) -> Checked {
    let mut out = Checked {
        canonical: Vec::with_capacity(batch.chunk.len() + batch.side.len()),
        items: Vec::with_capacity(batch.lines.len()),
        through_line: batch.through_line,
    };
    // The batch's lines mostly share one key order: each line's predicts the next.
    let mut carry = contract::Carry::default();
    for &(number, src) in &batch.lines {
        let item = match src {
            Src::TooLong => Item::Reject(Reason::LineTooLong),
            src => {
                let line = batch.bytes(src);
                let start = out.canonical.len();
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
