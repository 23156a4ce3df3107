//! What a line is: the framer splits a stream of arbitrary chunks into numbered
//! physical lines. A BOM at the very start is dropped, one `\r` before `\n` is
//! dropped, blank lines are skipped but counted, and a line longer than the
//! maximum is reported as too long without being buffered.

#[cfg(test)]
use super::{validate, Reason, Verdict};

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// One physical line handed out by [`LineFramer`]. Numbers are 1-based and count
/// every physical line, blank ones included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// A non-blank line, without `\n` and without one trailing `\r`. `trimmed`: the
    /// framer dropped bytes of it besides the newline (that `\r`, or the BOM before
    /// the first line), so `bytes` is not quite what the stream held.
    Content {
        number: u64,
        bytes: &'a [u8],
        trimmed: bool,
    },
    /// Longer than the maximum; its bytes were discarded.
    TooLong { number: u64 },
}

impl<'a> Line<'a> {
    pub fn number(&self) -> u64 {
        match *self {
            Line::Content { number, .. } | Line::TooLong { number } => number,
        }
    }

    /// The verdict for this line: `validate` for content, `line_too_long` otherwise
    /// (the pipeline's workers decide per batch; tests check lines one by one).
    #[cfg(test)]
    pub fn verdict(&self) -> Verdict<'a> {
        match *self {
            Line::Content { bytes, .. } => validate(crate::tests::progress(), bytes),
            Line::TooLong { .. } => Verdict::Quarantine(Reason::LineTooLong),
        }
    }
}

/// Where framing can start again mid-stream (a spilled run's replay): the content
/// offset of a line's first byte, and how many physical lines came before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resume {
    pub offset: u64,
    pub lines: u64,
}

/// Splits a stream into physical lines. Fed arbitrary chunks (a line may span
/// many chunks). Holds at most `max_line_bytes + 1` bytes of a partial line.
///
/// The only framer: the pipeline feeds it read chunks and packs the lines of each
/// into a batch for the validation workers (`Batch::frame` in `landing-pass`'s
/// `batch.rs`); [`lines_seen`](Self::lines_seen) is that batch's
/// `through_line`.
pub struct LineFramer {
    max_line_bytes: usize,
    /// Start of a line that spans chunks (<= max_line_bytes + 1 bytes, the +1
    /// being a possible `\r` before a `\n` in the next chunk).
    carry: Vec<u8>,
    /// The current partial line already exceeded the maximum: drop until `\n`.
    discarding: bool,
    /// Physical lines completed so far.
    lines: u64,
    /// `Some(k)`: still at stream start, `k` bytes of a BOM matched so far.
    bom_matched: Option<u8>,
    /// A BOM was dropped before the first line.
    bom_dropped: bool,
    /// Content bytes pushed so far.
    fed: u64,
    /// Content offset where the line being framed starts.
    line_start: u64,
}

impl LineFramer {
    pub fn new(max_line_bytes: usize) -> Self {
        LineFramer {
            max_line_bytes,
            carry: Vec::new(),
            discarding: false,
            lines: 0,
            bom_matched: Some(0),
            bom_dropped: false,
            fed: 0,
            line_start: 0,
        }
    }

    /// A framer that goes on from `at` ([`LineFramer::resume_point`]), fed the content
    /// from `at.offset` on: it frames exactly the lines a framer of the whole
    /// content frames from there, numbered alike. A BOM is only ever at offset 0.
    pub fn resume(max_line_bytes: usize, at: Resume) -> Self {
        let mut f = LineFramer::new(max_line_bytes);
        if at.offset > 0 {
            f.bom_matched = None;
            f.lines = at.lines;
            f.fed = at.offset;
            f.line_start = at.offset;
        }
        f
    }

    /// Where a framer could go on from, between two pushes: the start of the line
    /// not yet completed.
    pub fn resume_point(&self) -> Resume {
        Resume {
            offset: self.line_start,
            lines: self.lines,
        }
    }

    /// Calls `sink` for each complete non-blank line in order. Returns early with
    /// the sink's Err (the rest of that chunk is then dropped: stop feeding).
    pub fn push<E>(
        &mut self,
        chunk: &[u8],
        mut sink: impl FnMut(Line<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = self.fed;
        self.fed += chunk.len() as u64;
        let mut rest = self.skip_bom(chunk);
        while let Some(i) = find_newline(rest) {
            let piece = &rest[..i];
            rest = &rest[i + 1..];
            self.lines += 1;
            // `rest` lies in `chunk` (skip_bom returns a tail of it).
            self.line_start = start + (rest.as_ptr() as usize - chunk.as_ptr() as usize) as u64;
            if self.carry.is_empty() && !self.discarding {
                // Whole line inside this chunk: hand out a slice, no copy.
                let bom = self.bom_at_line();
                emit(
                    self.max_line_bytes,
                    (self.lines, bom),
                    piece,
                    false,
                    &mut sink,
                )?;
            } else {
                self.append(piece);
                let result = emit(
                    self.max_line_bytes,
                    (self.lines, self.bom_at_line()),
                    &self.carry,
                    self.discarding,
                    &mut sink,
                );
                self.carry.clear();
                self.discarding = false;
                result?;
            }
        }
        self.append(rest);
        Ok(())
    }

    /// End of input: the last line without a trailing newline is still a line.
    pub fn finish<E>(&mut self, mut sink: impl FnMut(Line<'_>) -> Result<(), E>) -> Result<(), E> {
        // A stream that is only a BOM prefix: those bytes are content.
        if let Some(k) = self.bom_matched.take() {
            self.append(&BOM[..usize::from(k)]);
        }
        if self.carry.is_empty() && !self.discarding {
            return Ok(());
        }
        self.lines += 1;
        let result = emit(
            self.max_line_bytes,
            (self.lines, self.bom_at_line()),
            &self.carry,
            self.discarding,
            &mut sink,
        );
        self.carry.clear();
        self.discarding = false;
        result
    }

    /// Is the line being completed the first, with a BOM dropped before it?
    fn bom_at_line(&self) -> bool {
        self.bom_dropped && self.lines == 1
    }

    /// Physical lines completed so far (blank and too-long lines included).
    pub fn lines_seen(&self) -> u64 {
        self.lines
    }

    /// Capacity of the carry buffer: proof that a long line is not held whole.
    #[cfg(test)]
    fn buffered_capacity(&self) -> usize {
        self.carry.capacity()
    }

    /// Drops a BOM at the very start of the stream, even split across chunks.
    fn skip_bom<'c>(&mut self, chunk: &'c [u8]) -> &'c [u8] {
        let Some(mut k) = self.bom_matched else {
            return chunk;
        };
        let mut i = 0;
        while usize::from(k) < BOM.len() && i < chunk.len() && chunk[i] == BOM[usize::from(k)] {
            k += 1;
            i += 1;
        }
        if usize::from(k) == BOM.len() {
            self.bom_matched = None;
            self.bom_dropped = true;
            return &chunk[i..];
        }
        if i == chunk.len() {
            // Still a BOM prefix: decide with the next chunk.
            self.bom_matched = Some(k);
            return &[];
        }
        // Not a BOM: the bytes matched so far belong to the first line.
        self.bom_matched = None;
        self.append(&BOM[..usize::from(k)]);
        &chunk[i..]
    }

    /// Adds part of a spanning line to the carry, or starts discarding once the
    /// line cannot fit. Capacity grows by doubling but never past the limit.
    fn append(&mut self, piece: &[u8]) {
        if self.discarding || piece.is_empty() {
            return;
        }
        let limit = self.max_line_bytes.saturating_add(1);
        let needed = self.carry.len() + piece.len();
        if needed > limit {
            self.discarding = true;
            self.carry.clear();
            return;
        }
        if needed > self.carry.capacity() {
            let target = needed.max(self.carry.capacity() * 2).min(limit);
            self.carry.reserve_exact(target - self.carry.len());
        }
        self.carry.extend_from_slice(piece);
    }
}

/// Applies the per-line framing rules: drop one `\r`, too long, blank.
/// `bom`: a BOM was dropped before this line.
fn emit<E>(
    max_line_bytes: usize,
    (number, bom): (u64, bool),
    bytes: &[u8],
    discarded: bool,
    sink: &mut impl FnMut(Line<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let cr = bytes.strip_suffix(b"\r");
    let trimmed = bom || cr.is_some();
    let bytes = cr.unwrap_or(bytes);
    // Length wins over blankness: a line we did not keep cannot be inspected.
    if discarded || bytes.len() > max_line_bytes {
        return sink(Line::TooLong { number });
    }
    if bytes.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
        return Ok(());
    }
    sink(Line::Content {
        number,
        bytes,
        trimmed,
    })
}

/// Position of the first `\n`. Every input byte passes here: `memchr` searches
/// with SIMD where the CPU has it.
fn find_newline(hay: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', hay)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::GOOD;

    #[derive(Debug, PartialEq, Eq)]
    enum Got {
        Content(u64, Vec<u8>),
        TooLong(u64),
    }

    fn frame(input: &[u8], chunk_size: usize, max: usize) -> Vec<Got> {
        let mut chunks: Vec<&[u8]> = input.chunks(chunk_size.max(1)).collect();
        if input.is_empty() {
            chunks.push(&[]);
        }
        frame_from(LineFramer::new(max), &chunks)
    }

    /// The same result for every chunking of the input.
    fn frame_all_chunkings(input: &[u8], max: usize) -> Vec<Got> {
        let whole = frame(input, input.len().max(1), max);
        for size in 1..=input.len() {
            assert_eq!(frame(input, size, max), whole, "chunk size {size}");
        }
        whole
    }

    fn c(n: u64, s: &str) -> Got {
        Got::Content(n, s.as_bytes().to_vec())
    }

    /// Frame `chunks` in order, from `framer`, collecting what it emits.
    fn frame_from(mut framer: LineFramer, chunks: &[&[u8]]) -> Vec<Got> {
        let mut got = Vec::new();
        let mut sink = |line: Line<'_>| {
            got.push(match line {
                Line::Content { number, bytes, .. } => Got::Content(number, bytes.to_vec()),
                Line::TooLong { number } => Got::TooLong(number),
            });
            Ok::<(), ()>(())
        };
        for chunk in chunks {
            framer.push(chunk, &mut sink).expect("sink never fails");
        }
        framer.finish(&mut sink).expect("sink never fails");
        got
    }

    /// Between any two pushes, under every chunking, a framer resumed at the resume
    /// point and fed the content from its offset frames exactly the lines the whole
    /// framing gives after it: a BOM, `\r\n`, blank and too-long lines, and lines
    /// spanning chunks included.
    #[test]
    fn a_framer_resumed_at_its_resume_point_frames_the_same_lines() {
        let input: &[u8] =
            b"\xEF\xBB\xBFa\nbb\r\n\n0123456789abc\nccc\r\r\nd\n\n0123456789abcdef\ne\r";
        let whole = frame(input, input.len(), 8);
        for size in 1..=input.len() {
            let chunks: Vec<&[u8]> = input.chunks(size).collect();
            let mut framer = LineFramer::new(8);
            for k in 0..=chunks.len() {
                let at = framer.resume_point();
                let offset = usize::try_from(at.offset).unwrap();
                // The line not yet completed starts after the last `\n` pushed, and
                // every `\n` before it ended a physical line.
                let fed = &input[..(size * k).min(input.len())];
                let expected = Resume {
                    offset: fed
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(0, |i| i as u64 + 1),
                    lines: fed.iter().filter(|&&b| b == b'\n').count() as u64,
                };
                assert_eq!(at, expected, "size {size}, push {k}");
                let resumed = frame_from(LineFramer::resume(8, at), &[&input[offset..]]);
                let after: Vec<&Got> = whole
                    .iter()
                    .filter(|g| match g {
                        Got::Content(n, _) | Got::TooLong(n) => *n > at.lines,
                    })
                    .collect();
                assert_eq!(
                    resumed.iter().collect::<Vec<_>>(),
                    after,
                    "size {size}, push {k}: {at:?}"
                );
                if let Some(chunk) = chunks.get(k) {
                    framer.push(chunk, |_| Ok::<(), ()>(())).unwrap();
                }
            }
        }
    }

    #[test]
    fn framer_says_which_lines_it_trimmed_under_every_chunking() {
        // A BOM before line 1, a `\r` dropped from lines 2 and 5 (the last, without
        // its newline); line 3 keeps one of its two; line 4 is as read.
        let input = b"\xEF\xBB\xBFa\nb\r\nc\r\r\nd\ne\r";
        for size in 1..=input.len() {
            let mut framer = LineFramer::new(100);
            let mut got = Vec::new();
            let mut sink = |line: Line<'_>| {
                if let Line::Content {
                    number, trimmed, ..
                } = line
                {
                    got.push((number, trimmed));
                }
                Ok::<(), ()>(())
            };
            for chunk in input.chunks(size) {
                framer.push(chunk, &mut sink).expect("ok");
            }
            framer.finish(&mut sink).expect("ok");
            let want = [(1, true), (2, true), (3, true), (4, false), (5, true)];
            assert_eq!(got, want, "chunk size {size}");
        }
    }

    #[test]
    fn framer_splits_lines_drops_cr_and_keeps_last_unterminated_line() {
        let got = frame_all_chunkings(b"a\r\nb\nc\r", 100);
        assert_eq!(got, vec![c(1, "a"), c(2, "b"), c(3, "c")]);
        let got = frame_all_chunkings(b"a\nlast", 100);
        assert_eq!(got, vec![c(1, "a"), c(2, "last")]);
        // Only one \r is dropped.
        assert_eq!(frame_all_chunkings(b"x\r\r\n", 100), vec![c(1, "x\r")]);
        // A terminating newline does not create an extra line.
        assert_eq!(frame_all_chunkings(b"a\n", 100), vec![c(1, "a")]);
        assert_eq!(frame_all_chunkings(b"", 100), vec![]);
    }

    #[test]
    fn framer_skips_blank_and_whitespace_lines_but_counts_them() {
        let got = frame_all_chunkings(b"\n  \n\t\r\n\r\na\n \t \nb\n\n   ", 100);
        assert_eq!(got, vec![c(5, "a"), c(7, "b")]);
        // Other whitespace (form feed) is content, for validate to reject.
        assert_eq!(frame_all_chunkings(b"\x0c\n", 100), vec![c(1, "\x0c")]);
    }

    #[test]
    fn framer_ignores_bom_at_stream_start_even_split() {
        let got = frame_all_chunkings(b"\xEF\xBB\xBF{\"a\":1}\n{}\n", 100);
        assert_eq!(got, vec![c(1, "{\"a\":1}"), c(2, "{}")]);
        let mut framer = LineFramer::new(100);
        let mut got = Vec::new();
        for part in [&b"\xEF"[..], b"\xBB", b"\xBFx", b"\n"] {
            framer
                .push(part, |l| {
                    got.push(l.number());
                    assert_eq!(
                        l,
                        Line::Content {
                            number: 1,
                            bytes: b"x",
                            trimmed: true
                        }
                    );
                    Ok::<(), ()>(())
                })
                .expect("ok");
        }
        assert_eq!(got, vec![1]);
        // A BOM followed by a newline is a blank first line.
        assert_eq!(
            frame_all_chunkings(b"\xEF\xBB\xBF\nx", 100),
            vec![c(2, "x")]
        );
    }

    #[test]
    fn framer_keeps_bom_only_at_start_and_partial_bom_as_content() {
        // A second BOM (not at stream start) is content.
        assert_eq!(
            frame_all_chunkings(b"\xEF\xBB\xBFa\n\xEF\xBB\xBFb", 100),
            vec![c(1, "a"), Got::Content(2, b"\xEF\xBB\xBFb".to_vec())]
        );
        // A partial BOM followed by something else is kept.
        assert_eq!(
            frame_all_chunkings(b"\xEF\xBBx\n", 100),
            vec![Got::Content(1, b"\xEF\xBBx".to_vec())]
        );
        // Stream that is only a partial BOM: still a line.
        assert_eq!(
            frame_all_chunkings(b"\xEF\xBB", 100),
            vec![Got::Content(1, b"\xEF\xBB".to_vec())]
        );
        // Only a full BOM: nothing.
        assert_eq!(frame_all_chunkings(b"\xEF\xBB\xBF", 100), vec![]);
    }

    #[test]
    fn framer_joins_a_line_spanning_chunks() {
        let line = GOOD.as_bytes();
        let mut input = line.to_vec();
        input.extend_from_slice(b"\r\n");
        input.extend_from_slice(line);
        let got = frame_all_chunkings(&input, 1024);
        assert_eq!(got, vec![c(1, GOOD), c(2, GOOD)]);
    }

    #[test]
    fn framer_passes_in_chunk_lines_without_copying() {
        let chunk = b"first\nsecond\nthird\n";
        let range = chunk.as_ptr_range();
        let mut framer = LineFramer::new(100);
        let mut n = 0;
        framer
            .push(chunk, |line| {
                let Line::Content { bytes, .. } = line else {
                    panic!("unexpected {line:?}")
                };
                assert!(range.contains(&bytes.as_ptr()), "line was copied");
                n += 1;
                Ok::<(), ()>(())
            })
            .expect("ok");
        assert_eq!(n, 3);
        assert_eq!(framer.buffered_capacity(), 0);
    }

    #[test]
    fn framer_flags_too_long_lines_in_any_chunking() {
        // max 5: "12345" fits (also with \r), "123456" does not.
        let input = b"12345\r\n123456\nok\n1234567890123\r\nend";
        let got = frame_all_chunkings(input, 5);
        assert_eq!(
            got,
            vec![
                c(1, "12345"),
                Got::TooLong(2),
                c(3, "ok"),
                Got::TooLong(4),
                c(5, "end"),
            ]
        );
        // Unterminated too-long last line.
        assert_eq!(
            frame_all_chunkings(b"ok\n1234567", 5),
            vec![c(1, "ok"), Got::TooLong(2)]
        );
        // Whitespace-only but too long: still too long (see emit).
        assert_eq!(frame_all_chunkings(b"       \n", 5), vec![Got::TooLong(1)]);
    }

    #[test]
    fn framer_too_long_line_in_one_byte_chunks_then_valid_line() {
        let mut input = vec![b'x'; 5000];
        input.push(b'\n');
        input.extend_from_slice(GOOD.as_bytes());
        input.push(b'\n');
        let got = frame(&input, 1, 1024);
        assert_eq!(got, vec![Got::TooLong(1), c(2, GOOD)]);
        let Got::Content(_, bytes) = &got[1] else {
            unreachable!()
        };
        assert!(matches!(
            validate(crate::tests::progress(), bytes),
            Verdict::Accept(_)
        ));
    }

    #[test]
    fn framer_does_not_buffer_a_long_line() {
        const MIB: usize = 1 << 20;
        let max = 1024;
        let chunk = vec![b'a'; MIB];
        let mut framer = LineFramer::new(max);
        let mut got = Vec::new();
        let mut sink = |line: Line<'_>| {
            got.push(match line {
                Line::Content { number, bytes, .. } => Got::Content(number, bytes.to_vec()),
                Line::TooLong { number } => Got::TooLong(number),
            });
            Ok::<(), ()>(())
        };
        // Start the long line mid-chunk so the carry path is exercised.
        framer.push(b"{}\naaa", &mut sink).expect("ok");
        for _ in 0..64 {
            framer.push(&chunk, &mut sink).expect("ok");
            assert!(framer.buffered_capacity() <= max + 1, "carry grew");
        }
        framer.push(b"\n{\"b\":2}", &mut sink).expect("ok");
        framer.finish(&mut sink).expect("ok");
        assert!(framer.buffered_capacity() <= max + 1);
        assert_eq!(got, vec![c(1, "{}"), Got::TooLong(2), c(3, "{\"b\":2}")]);
        assert_eq!(framer.lines_seen(), 3);
    }

    #[test]
    fn framer_keeps_nothing_of_a_line_it_is_discarding() {
        let mut framer = LineFramer::new(4);
        let mut got = Vec::new();
        let mut sink = |line: Line<'_>| {
            got.push(line.number());
            Ok::<(), ()>(())
        };
        framer.push(b"123456", &mut sink).expect("ok");
        assert!(framer.carry.is_empty(), "too long: dropped");
        framer.push(b"78", &mut sink).expect("ok");
        assert!(
            framer.carry.is_empty(),
            "the rest of the line is dropped too"
        );
        framer.push(b"\nab", &mut sink).expect("ok");
        assert_eq!(framer.carry, b"ab");
        assert_eq!(got, vec![1]);
    }

    #[test]
    fn framer_grows_its_carry_by_doubling_up_to_the_limit_only() {
        // 100-byte pieces of a 1000-byte line: 100, 200, 400, 800, then the limit
        // (1001), never the 1600 that doubling alone would reach.
        let mut framer = LineFramer::new(1000);
        let piece = [b'a'; 100];
        let mut capacities = Vec::new();
        for _ in 0..10 {
            framer.push(&piece, |_| Ok::<(), ()>(())).expect("ok");
            capacities.push(framer.buffered_capacity());
        }
        let doubling = [100, 200, 400, 400, 800, 800, 800, 800, 1001, 1001];
        assert_eq!(capacities, doubling);
        let mut got = Vec::new();
        framer
            .push(b"\n", |line| {
                got.push(line.number());
                Ok::<(), ()>(())
            })
            .expect("ok");
        assert_eq!(got, vec![1]);
    }

    #[test]
    fn framer_stops_at_sink_error() {
        let mut framer = LineFramer::new(100);
        let mut seen = Vec::new();
        let result = framer.push(b"a\nb\nc\n", |line| {
            seen.push(line.number());
            if line.number() == 2 {
                Err("stop")
            } else {
                Ok(())
            }
        });
        assert_eq!(result, Err("stop"));
        assert_eq!(seen, vec![1, 2]);
        // finish propagates too.
        let mut framer = LineFramer::new(100);
        framer.push(b"x", |_| Ok::<(), &str>(())).expect("ok");
        assert_eq!(framer.finish(|_| Err("stop")), Err("stop"));
    }

    #[test]
    fn line_verdict_maps_too_long_and_content() {
        assert_eq!(
            Line::TooLong { number: 3 }.verdict(),
            Verdict::Quarantine(Reason::LineTooLong)
        );
        assert_eq!(Line::TooLong { number: 3 }.number(), 3);
        let line = Line::Content {
            number: 1,
            bytes: GOOD.as_bytes(),
            trimmed: false,
        };
        assert!(matches!(line.verdict(), Verdict::Accept(_)));
    }

    #[test]
    fn find_newline_matches_naive_search() {
        let mut data: Vec<u8> = (0..300u32).map(|i| (i * 37 % 251) as u8).collect();
        data.retain(|&b| b != b'\n');
        for len in 0..data.len() {
            for pos in [None, Some(0), Some(len / 2), Some(len.saturating_sub(1))] {
                let mut hay = data[..len].to_vec();
                if let Some(p) = pos {
                    if p < hay.len() {
                        hay[p] = b'\n';
                    }
                }
                // Bytes that are near '\n' (0x0B, 0x8A) must not match.
                hay.extend_from_slice(&[0x0B, 0x8A, 0x09]);
                let naive = hay.iter().position(|&b| b == b'\n');
                assert_eq!(find_newline(&hay), naive, "len {len} pos {pos:?}");
            }
        }
    }
}
