//! The replay: a spilled run writes its output once. From the first record on, the
//! pass stages nothing (only the merge can tell a first occurrence from a later
//! copy); once the merge has decided, this second read of the input checks the
//! lines from the first recorded one on again, on both cores, and hands the kept
//! lines to the same staging writer and encoder, in order. Reading the input again
//! costs less than staging every line and then copying the staged output without
//! the copies, which writes the output twice. The bytes are an in-memory run's.
//!
//! The replay proves it read what the pass read: it must decide exactly as many
//! output lines, over exactly as many physical lines, and the numbers and canonical
//! digests of the lines it takes must sum to the pass's ([`LineSum`]). An input
//! edited under the run, even to another valid line of the same length, fails it.

use std::sync::Arc;

use bytes::Bytes;
use fixedbitset::FixedBitSet;
use tokio::sync::mpsc;

use crate::batch::{Batch, Checked, Compare, Decided, Item, LineSum};
use crate::compression;
use crate::contract::{Contract, LineFramer, Resume};
use crate::error::{Error, Result};
use crate::hook::{CrashPoint, PassHooks};
use crate::identity::Digester;
use crate::progress::Progress;
use crate::scan::{Out, FLUSH_AT};
use crate::store::ObjectReader;
use crate::workers::{start_workers, WORKERS};

/// What the pass left for the replay.
#[derive(Debug)]
pub struct Replay {
    /// Input line and output ordinal of the first held-back event.
    pub from: (u64, u64),
    /// Where framing starts again: the batch of that line (the content's start for
    /// a compressed input). The read starts at its offset.
    pub resume: Resume,
    /// Output lines the pass decided, and physical lines it framed.
    pub outputs: u64,
    pub lines: u64,
    /// Output ordinals the merge found to be later copies.
    pub drops: FixedBitSet,
    /// The held lines' numbers and canonical digests, summed by the pass.
    pub sum: LineSum,
}

/// The replay's sequencing, in input order: each accepted line from the first
/// held-back one on takes the next ordinal and is kept unless the merge dropped it.
pub struct Replayer<'a> {
    replay: &'a Replay,
    ordinal: u64,
    lines: u64,
    sum: LineSum,
}

impl<'a> Replayer<'a> {
    pub fn new(replay: &'a Replay) -> Self {
        Replayer {
            replay,
            ordinal: replay.from.1,
            lines: 0,
            sum: LineSum::default(),
        }
    }

    /// Append the kept lines of one checked batch to `out`.
    pub fn apply(&mut self, checked: &Checked, out: &mut Vec<u8>) -> Result<(), String> {
        self.lines = self.lines.max(checked.through_line());
        for &(number, item) in &checked.items {
            if let Item::Accept(d, _) = item {
                self.sum.add(number, d.value());
            }
        }
        for (number, d) in checked.verdicts() {
            match d {
                Decided::Accepted(line) => {
                    let dropped =
                        usize::try_from(self.ordinal).is_ok_and(|o| self.replay.drops.contains(o));
                    if !dropped {
                        out.extend_from_slice(line);
                    }
                    self.ordinal += 1;
                }
                Decided::Rejected => {}
                // The pass refused nothing (or there would be no replay).
                Decided::Prohibited => {
                    return Err(format!("line {number} reads differently the second time"))
                }
            }
        }
        Ok(())
    }

    /// The replay decided what the pass decided: as many output lines, over as many
    /// physical lines, the same lines.
    pub fn finish(&self) -> Result<(), String> {
        let r = self.replay;
        if (self.ordinal, self.lines) != (r.outputs, r.lines) {
            return Err(format!(
                "the input read differently the second time: {} output lines over {} lines, the pass had {} over {}",
                self.ordinal, self.lines, r.outputs, r.lines
            ));
        }
        if self.sum != r.sum {
            return Err(
                "the input read differently the second time: its lines are not the ones the pass held back"
                    .to_owned(),
            );
        }
        Ok(())
    }
}

/// Read the input again and send the kept lines from the first held-back one on to
/// `out` (the staging writer, or the encoder before it). `progress` counts the
/// stored bytes read (the `replay` bar).
// The scan's settings and the replay's own: a struct for one caller would only
// rename them.
#[allow(clippy::too_many_arguments)]
pub async fn replay(
    reader: ObjectReader,
    input: &str,
    max_line_bytes: usize,
    contract: Arc<Contract>,
    digester: Digester,
    replay: Replay,
    out: mpsc::Sender<Out>,
    hooks: PassHooks,
    progress: Progress,
) -> Result<()> {
    let mut stored = Counted {
        chunks: compression::ObjectChunks {
            reader,
            location: input,
        },
        progress,
    };
    let (txs, checked, workers) = start_workers(&contract, digester, Compare::No, false);
    let at = replay.resume;
    let mut dealer = ReplayDealer {
        framer: LineFramer::resume(max_line_bytes, at),
        from: replay.from.0,
        txs,
        next: 0,
        input,
        lost: false,
    };
    let seq = tokio::task::spawn_blocking(move || sequence(&replay, checked, &out, hooks));
    // `reader` starts at the resume offset: mid-content, the bytes are plain (a
    // compressed input resumes at 0), and a line there must not be sniffed.
    stored.progress.inc(at.offset);
    let read = if at.offset > 0 {
        compression::read_plain_into(&mut stored, input, &mut dealer).await
    } else {
        compression::read_stored_into(&mut stored, input, &mut dealer).await
    };
    drop(stored);
    let read = match read {
        // The pass hashed this stream whole: a broken one now is another stream.
        Ok(Some(b)) => Err(Error::store(
            "replay",
            input,
            format!("the input reads as a broken stream the second time ({b:?})"),
        )),
        Ok(None) => dealer.finish().await,
        Err(e) => Err(e),
    };
    let lost = dealer.lost;
    drop(dealer);
    let sequenced = seq
        .await
        .map_err(|e| Error::internal("join replay", input, e))?;
    workers.join(input).await?;
    match (read, sequenced) {
        // A failed read leaves the sequencer short of lines: the read says why.
        (Err(e), _) if !lost => Err(e),
        (_, Err(e)) => Err(Error::store("replay", input, e)),
        (read, Ok(())) => read,
    }
}

/// The stored bytes as they are read, counted on the replay's bar; the bar is done
/// when the read is.
struct Counted<'a> {
    chunks: compression::ObjectChunks<'a>,
    progress: Progress,
}

impl compression::Stored for Counted<'_> {
    async fn next_chunk(&mut self) -> Result<Option<Bytes>> {
        let chunk = self.chunks.next_chunk().await?;
        if let Some(c) = &chunk {
            self.progress.inc(c.len() as u64);
        }
        Ok(chunk)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.progress.finish();
    }
}

/// Frames the content, from the first held-back line on, into batches dealt
/// round-robin to the workers.
struct ReplayDealer<'a> {
    framer: LineFramer,
    from: u64,
    txs: Vec<mpsc::Sender<Batch>>,
    next: usize,
    input: &'a str,
    /// A worker or the sequencer went away: its own error says why.
    lost: bool,
}

impl ReplayDealer<'_> {
    async fn send(&mut self, batch: Batch) -> Result<()> {
        let tx = &self.txs[self.next % WORKERS];
        self.next += 1;
        let sent = tx.send(batch).await;
        self.lost |= sent.is_err();
        sent.map_err(|_| Error::store("replay", self.input, "a replay worker stopped"))
    }

    /// The last line, which may lack its newline.
    async fn finish(&mut self) -> Result<()> {
        let last = Batch::finish_from(&mut self.framer, self.from);
        self.send(last).await
    }
}

impl compression::Content for ReplayDealer<'_> {
    async fn take(&mut self, piece: Bytes) -> Result<()> {
        let batch = Batch::frame_from(&mut self.framer, piece, self.from);
        self.send(batch).await
    }
}

/// Take checked batches round-robin (the order dealt), keep what the merge kept,
/// and send it on in pieces of [`FLUSH_AT`].
fn sequence(
    replay: &Replay,
    mut checked: Vec<mpsc::Receiver<Checked>>,
    out: &mpsc::Sender<Out>,
    hooks: PassHooks,
) -> Result<(), String> {
    let mut r = Replayer::new(replay);
    let mut buf = Vec::with_capacity(FLUSH_AT * 2);
    let mut sent = false;
    let mut send = |buf: &mut Vec<u8>| -> Result<(), String> {
        let data = Bytes::from(std::mem::replace(buf, Vec::with_capacity(FLUSH_AT * 2)));
        out.blocking_send(Out::Data(data))
            .map_err(|_| "the staging writer stopped".to_owned())?;
        if !sent {
            sent = true;
            hooks.crash(CrashPoint::Replay);
        }
        Ok(())
    };
    let mut k = 0;
    while let Some(batch) = checked[k % WORKERS].blocking_recv() {
        k += 1;
        r.apply(&batch, &mut buf)?;
        if buf.len() >= FLUSH_AT {
            send(&mut buf)?;
        }
    }
    if !buf.is_empty() {
        send(&mut buf)?;
    }
    r.finish()
}

/// The replay on one thread over `input` held in memory, in chunks of `chunk`
/// bytes, framed as the pass did (`max_line`), appending the kept lines to `out`
/// (unit tests).
#[cfg(test)]
pub fn replay_in_memory(
    input: &[u8],
    (chunk, max_line): (usize, usize),
    contract: &Contract,
    digester: Digester,
    replay: &Replay,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    use crate::batch::check_batch;
    let mut framer = LineFramer::resume(max_line, replay.resume);
    let mut replayer = Replayer::new(replay);
    let offset = usize::try_from(replay.resume.offset).map_err(|e| e.to_string())?;
    for piece in input[offset..].chunks(chunk) {
        let piece = Bytes::copy_from_slice(piece);
        let batch = Batch::frame_from(&mut framer, piece, replay.from.0);
        replayer.apply(&check_batch(&batch, contract, digester, Compare::No), out)?;
    }
    let last = Batch::finish_from(&mut framer, replay.from.0);
    replayer.apply(&check_batch(&last, contract, digester, Compare::No), out)?;
    replayer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract;

    /// A progress event in canonical form (keys sorted, the optional `checkpoint`
    /// written as null, no spaces), as docs/design.md defines it.
    fn ev(id: u32) -> String {
        format!(
            r#"{{"attempt_number":1,"checkpoint":null,"event_id":"e{id}","event_time":"2026-03-02T10:00:00Z","event_type":"completed","learner_id":"l","lesson_id":"s"}}"#
        )
    }

    const SEED: u64 = 7;

    /// What the pass held: lines `held` (number, canonical form) from line `from`
    /// (ordinal `ordinal`) on, summed with their xxh3-128 digests; `drops` ordinals.
    fn replay(
        (from, ordinal): (u64, u64),
        (outputs, lines): (u64, u64),
        held: &[(u64, String)],
        drops: &[usize],
    ) -> Replay {
        let mut bits = FixedBitSet::with_capacity(outputs as usize);
        drops.iter().for_each(|&o| bits.insert(o));
        let mut sum = LineSum::default();
        for (n, line) in held {
            let d = xxhash_rust::xxh3::xxh3_128_with_seed(line.as_bytes(), SEED);
            sum.add(*n, [d as u64, (d >> 64) as u64]);
        }
        Replay {
            from: (from, ordinal),
            resume: Resume::default(),
            outputs,
            lines,
            drops: bits,
            sum,
        }
    }

    /// Replay `input` in chunks of 50.
    fn run(input: &str, r: &Replay) -> (String, Result<(), String>) {
        let mut out = Vec::new();
        let c = contract::progress();
        let done = replay_in_memory(
            input.as_bytes(),
            (50, 1000),
            &c,
            Digester::new(SEED),
            r,
            &mut out,
        );
        (String::from_utf8(out).unwrap(), done)
    }

    #[test]
    fn keeps_the_lines_from_the_first_held_back_one_except_the_dropped() {
        // Lines 1-2 were staged by the pass (ordinals 0-1); line 3 is quarantined;
        // lines 4-6 were held back as ordinals 2-4, and the merge dropped ordinal 3.
        // Line 6 was read with spaces: the pass held its canonical form.
        let spaced = ev(6).replace(',', ", ");
        let input = [ev(1), ev(2), "not json".into(), ev(4), ev(5), spaced];
        let held = [(4, ev(4)), (5, ev(5)), (6, ev(6))];
        let (out, done) = run(&input.join("\n"), &replay((4, 2), (5, 6), &held, &[3]));
        assert_eq!(done, Ok(()));
        assert_eq!(out, format!("{}\n{}\n", ev(4), ev(6)));
        // Resumed at line 3's first byte (the batch the pass held line 4 in), or at
        // line 4's: the same lines, the same checks.
        for (lines, before) in [(2, &input[..2]), (3, &input[..3])] {
            let offset = before.iter().map(|l| l.len() + 1).sum::<usize>() as u64;
            let mut r = replay((4, 2), (5, 6), &held, &[3]);
            r.resume = Resume { offset, lines };
            let (resumed, done) = run(&input.join("\n"), &r);
            assert_eq!((resumed.as_str(), done), (out.as_str(), Ok(())), "{offset}");
        }
    }

    #[test]
    fn an_input_that_reads_differently_fails_the_replay() {
        let input = [ev(1), ev(2), ev(3)].join("\n");
        let held = [(2, ev(2)), (3, ev(3))];
        // The pass decided 4 output lines over 4 lines: the input lost one since.
        let (_, done) = run(&input, &replay((2, 1), (4, 4), &held, &[]));
        let e = done.unwrap_err();
        assert!(
            e.contains("3 output lines over 3 lines, the pass had 4 over 4"),
            "{e}"
        );
    }

    #[test]
    fn a_held_line_edited_in_place_fails_the_replay() {
        // The pass held e2 and e3; the input now has e9 where e3 was: as many lines,
        // of the same length, all valid.
        let held = [(2, ev(2)), (3, ev(3))];
        let r = replay((2, 1), (3, 3), &held, &[]);
        let (_, done) = run(&[ev(1), ev(2), ev(3)].join("\n"), &r);
        assert_eq!(done, Ok(()));
        let (_, done) = run(&[ev(1), ev(2), ev(9)].join("\n"), &r);
        let e = done.unwrap_err();
        assert!(e.contains("not the ones the pass held back"), "{e}");
        // The held lines in another order are not the lines held either.
        let (_, done) = run(&[ev(1), ev(3), ev(2)].join("\n"), &r);
        assert!(done
            .unwrap_err()
            .contains("not the ones the pass held back"));
    }
}
