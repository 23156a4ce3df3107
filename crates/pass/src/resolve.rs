//! After the one pass: settle what the pass could not decide alone, before anything
//! is published. A spilled index's runs are merged (what they decide, the replay
//! writes, `replay.rs`, or the engine's second pass drops, through `filter.rs`),
//! and every suspect (a canonical form not seen under its id digest) has its full
//! id compared with the earlier lines', by a second read of the input: only the
//! same id with another payload refuses the file, at the line and with the counts
//! the in-memory pass would give.

use std::collections::{HashMap, HashSet};

use fixedbitset::FixedBitSet;

use crate::batch::LineSum;
use crate::compression;
use crate::contract::{self, Contract, Line, LineFramer, Resume, Verdict};
use crate::error::{Error, Result};
use crate::hook::{CrashPoint, PassHooks};
use crate::identity::Digester;
use crate::replay::Replay;
use crate::report::{Refusal, RefusalKind, SpillReport};
use crate::spill::{self, Merged, Scratch};
use crate::store::ObjectReader;
use crate::validator::{Counts, Sequencer, Spilled, Suspect, MAX_SUSPECTS};

/// This run's digests: a fresh seed, and the test hook's narrowed id digests.
pub fn digester(hooks: PassHooks) -> Digester {
    let d = Digester::new(crate::random_u64());
    match hooks.id_digest_bits {
        Some(bits) => d.with_key_bits(bits),
        None => d,
    }
}

/// What the resolution leaves for the stages after it.
#[derive(Debug, Default)]
pub struct Resolution {
    /// The lines a spilled run held back, to write by a replay (none if refused).
    pub replay: Option<Replay>,
    /// Lines of the staged output to drop (a second pass), if a spilled run that
    /// staged every line has later copies.
    pub drops: Option<FixedBitSet>,
    pub spill: Option<SpillReport>,
}

/// Settle the sequencer's outcome: merge its spill, check its suspects' ids (asking
/// `reread` for a fresh read of the input), and set its final counts and refusal.
pub async fn resolve<F, Fut>(
    seq: &mut Sequencer,
    contract: &Contract,
    digester: Digester,
    max_line_bytes: usize,
    input: &str,
    hooks: PassHooks,
    reread: F,
) -> Result<Resolution>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<ObjectReader>>,
{
    let spilled = seq.take_spilled();
    if let Some(failure) = seq.failure() {
        return Err(Error::store("spill", input, failure.to_owned()));
    }
    let broken = [
        RefusalKind::CorruptCompression,
        RefusalKind::DecompressedTooLarge,
    ];
    if seq.refusal().is_some_and(|r| broken.contains(&r.kind)) {
        // A broken stream refuses the file whatever its lines said: nothing to
        // merge or check (dropping the spill removes its scratch).
        return Ok(Resolution::default());
    }
    let from = spilled
        .as_ref()
        .and_then(|sp| Some((sp.from?, sp.sum, sp.resume)));
    let merged = match spilled {
        Some(sp) => {
            let sizes = (seq.output_lines(), seq.lines());
            Some(merge(sp, sizes, input, hooks).await?)
        }
        None => None,
    };
    let stop = seq.refusal().map_or(u64::MAX, |r| r.line);
    let mut suspects: Vec<Suspect> = seq
        .suspects()
        .iter()
        .copied()
        .chain(merged.iter().flat_map(|(m, _, _)| {
            m.suspects.iter().map(|&(line, key)| Suspect {
                line,
                key,
                counts: None,
            })
        }))
        .filter(|s| s.line < stop)
        .collect();
    suspects.sort_unstable_by_key(|s| s.line);
    let (dups_merged, dups_before) = merged
        .as_ref()
        .map_or((0, 0), |(m, _, before)| (m.duplicates, *before));
    if let Some(first) = merged
        .as_ref()
        .and_then(|(m, _, _)| m.dup_lines.ones().next())
    {
        seq.merged_duplicate(first as u64);
    }
    let mut counts = seq.counts();
    counts.accepted -= dups_merged;
    counts.duplicates += dups_merged;
    let mut refusal = seq.refusal().cloned();
    if !suspects.is_empty() {
        let reader = reread().await?;
        let checked =
            check_ids(reader, input, contract, digester, max_line_bytes, &suspects).await?;
        match checked {
            Some((s, prefix)) => {
                refusal = Some(Refusal {
                    kind: RefusalKind::IdCollision,
                    line: s.line,
                    field: None,
                });
                counts = s.counts.unwrap_or_else(|| {
                    let merged_before = merged.as_ref().map_or(0, |(m, _, _)| {
                        m.dup_lines.count_ones(..s.line as usize) as u64
                    });
                    let duplicates = dups_before + merged_before;
                    Counts {
                        accepted: prefix.accepts - duplicates,
                        rejected: prefix.rejects,
                        duplicates,
                    }
                });
            }
            None if seq.suspects().len() >= MAX_SUSPECTS && refusal.is_none() => {
                return Err(Error::store(
                    "check event ids",
                    input,
                    format!("more than {MAX_SUSPECTS} distinct event ids share id digests with others; the digests are broken"),
                ));
            }
            None => {}
        }
    }
    let published = refusal.is_none();
    seq.resolve(counts, refusal);
    ways(
        merged,
        from,
        published,
        (seq.output_lines(), seq.lines()),
        input,
    )
}

/// How a spilled run writes what it kept: a replay of the lines it held back
/// (`from`: the first of them), or a second pass over its staged output if the
/// merge found copies in it; neither if it is refused. Besides, its spill report.
fn ways(
    merged: Option<(Merged, Scratch, u64)>,
    from: Option<((u64, u64), LineSum, Resume)>,
    published: bool,
    (outputs, lines): (u64, u64),
    input: &str,
) -> Result<Resolution> {
    let Some((m, scratch, _)) = merged else {
        return Ok(Resolution::default());
    };
    let (replay, drops) = match from {
        Some((from, _, _))
            if published && m.drops.ones().next().is_some_and(|o| (o as u64) < from.1) =>
        {
            // A staged line before the replay is a copy: the fingerprint table called
            // it new or kept, which it never does for a copy (every kept event is in
            // it). A replay cannot drop it, so the run fails rather than publish it.
            return Err(Error::store(
                "merge spilled index",
                input,
                "a line staged before the replay is a copy; nothing is published".to_owned(),
            ));
        }
        Some((from, sum, resume)) if published => {
            let r = Replay {
                from,
                resume,
                outputs,
                lines,
                drops: m.drops,
                sum,
            };
            (Some(r), None)
        }
        None if published && m.duplicates > 0 => (None, Some(m.drops)),
        _ => (None, None),
    };
    let spill = SpillReport {
        spilled_bytes: scratch.bytes,
        runs: scratch.spills,
        runs_merged: m.runs_merged,
        second_pass: drops.is_some(),
        replayed: replay.is_some(),
    };
    Ok(Resolution {
        replay,
        drops,
        spill: Some(spill),
    })
}

/// Write the last buffer out and merge every run (blocking I/O, off the runtime).
/// `outputs` and `lines` (staged output lines, input lines) size its bitsets.
async fn merge(
    sp: Spilled,
    (outputs, lines): (u64, u64),
    input: &str,
    hooks: PassHooks,
) -> Result<(Merged, Scratch, u64)> {
    tokio::task::spawn_blocking(move || {
        let dir = sp.writer.dir().to_owned();
        let fail = |e: std::io::Error| spill::describe_failure(&dir, &e);
        let mut scratch = sp.writer.finish(sp.buffer).map_err(fail)?;
        let m = spill::merge(&mut scratch, outputs, lines, || {
            hooks.crash(CrashPoint::Merge)
        })
        .map_err(fail)?;
        if let Some(line) = m.wrong_copy {
            // Its output line is missing: nothing may be published.
            return Err(format!(
                "the fingerprint table took line {line} for a copy of an earlier event and it is none \
                 (64 bits of fingerprint agreed by chance); nothing is published: run again, a new run draws new digests"
            ));
        }
        Ok::<_, String>((m, scratch, sp.dups_before))
    })
    .await
    .map_err(|e| Error::store("merge spilled index", input, e))?
    .map_err(|e| Error::store("merge spilled index", input, e))
}

/// Counts of the lines before a suspect, from the second read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prefix {
    accepts: u64,
    rejects: u64,
}

/// Read the input again up to the last suspect and compare full ids: the first
/// suspect whose id an earlier accepted line already had is a real collision.
async fn check_ids(
    reader: ObjectReader,
    input: &str,
    contract: &Contract,
    digester: Digester,
    max_line_bytes: usize,
    suspects: &[Suspect],
) -> Result<Option<(Suspect, Prefix)>> {
    let mut ids = IdCheck::new(contract, digester, max_line_bytes, suspects);
    // The content, decoded when the input is compressed: what the first pass framed.
    // A stream broken now was whole then (the hash matched), so it cannot be.
    compression::read_content(reader, input, |piece| {
        if !ids.done() {
            ids.feed(piece)
        }
    })
    .await?;
    Ok(ids.finish())
}

/// The second read's state: the ids seen under the suspects' digests.
pub struct IdCheck<'a> {
    contract: &'a Contract,
    framer: LineFramer,
    digester: Digester,
    suspects: &'a [Suspect],
    next: usize,
    keys: HashSet<u64>,
    seen: HashMap<u64, Vec<Vec<u8>>>,
    prefix: Prefix,
    found: Option<(Suspect, Prefix)>,
    canonical: Vec<u8>,
    /// The single pass's state from line to line (its scratch buffer, key order).
    carry: contract::Carry,
}

impl<'a> IdCheck<'a> {
    pub fn new(
        contract: &'a Contract,
        digester: Digester,
        max_line_bytes: usize,
        suspects: &'a [Suspect],
    ) -> Self {
        IdCheck {
            contract,
            framer: LineFramer::new(max_line_bytes),
            digester,
            suspects,
            next: 0,
            keys: suspects.iter().map(|s| s.key).collect(),
            seen: HashMap::new(),
            prefix: Prefix::default(),
            found: None,
            canonical: Vec::new(),
            carry: contract::Carry::default(),
        }
    }

    fn done(&self) -> bool {
        self.found.is_some() || self.next >= self.suspects.len()
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        let mut framer = std::mem::replace(&mut self.framer, LineFramer::new(1));
        let _ = framer.push(chunk, |line| {
            self.line(line);
            Ok::<(), std::convert::Infallible>(())
        });
        self.framer = framer;
    }

    pub fn finish(mut self) -> Option<(Suspect, Prefix)> {
        let mut framer = std::mem::replace(&mut self.framer, LineFramer::new(1));
        let _ = framer.finish(|line| {
            self.line(line);
            Ok::<(), std::convert::Infallible>(())
        });
        self.found
    }

    fn line(&mut self, line: Line<'_>) {
        if self.done() {
            return;
        }
        let (number, id) = match line {
            Line::TooLong { number } => (number, None),
            Line::Content { number, bytes, .. } => (number, self.id_of(bytes)),
        };
        let suspect = self.suspects[self.next];
        let is_suspect = number == suspect.line;
        let Some(id) = id else {
            self.prefix.rejects += 1;
            return;
        };
        let key = self.digester.key(&id);
        if is_suspect {
            self.next += 1;
            if self.seen.get(&key).is_some_and(|ids| ids.contains(&id)) {
                self.found = Some((suspect, self.prefix));
                return;
            }
        }
        if self.keys.contains(&key) {
            let ids = self.seen.entry(key).or_default();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        self.prefix.accepts += 1;
    }

    /// The event id of an accepted line; `None` for a quarantined one. A prohibited
    /// field refuses the file at its line, which no suspect reaches.
    fn id_of(&mut self, line: &[u8]) -> Option<Vec<u8>> {
        self.canonical.clear();
        if let Some(c) =
            contract::canonicalize_with(self.contract, &mut self.carry, line, &mut self.canonical)
        {
            return Some(self.canonical[c.id].to_vec());
        }
        match contract::validate(self.contract, line) {
            Verdict::Accept(event) => Some(event.id().as_bytes().to_vec()),
            Verdict::Quarantine(_) | Verdict::Prohibited(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{check_batch, Batch, Compare};
    use crate::filter::Filter;
    use crate::replay::replay_in_memory;
    use crate::report::Rejected;
    use crate::spill_plan::SpillPlan;
    use bytes::Bytes;

    /// Everything a run decides about an input, to compare two ways of deciding it.
    #[derive(Debug, PartialEq, Eq)]
    struct Outcome {
        /// Published bytes: none for a refused file, whose staging is dropped.
        output: String,
        quarantine: Vec<u8>,
        counts: Counts,
        refusal: Option<Refusal>,
        first_rejects: Vec<Rejected>,
    }

    /// One pass over `input` as the pipeline makes it (chunks of 64 bytes), spilling
    /// every `every` events if given, then the resolution and any second pass.
    async fn land(input: &[u8], cap: u64, every: Option<usize>, bits: Option<u32>) -> Outcome {
        land_with(input, cap, every, bits, None).await
    }

    /// [`land`], with the way a spilled run writes what it kept pinned (`replay`).
    async fn land_with(
        input: &[u8],
        cap: u64,
        every: Option<usize>,
        bits: Option<u32>,
        replay: Option<bool>,
    ) -> Outcome {
        let hooks = PassHooks {
            spill_every: every,
            id_digest_bits: bits,
            spill_replay: replay,
            ..PassHooks::default()
        };
        land_hooks(input, cap, hooks).await.unwrap().0
    }

    /// [`land`], with any spill hooks (the fingerprint table's room and bits); also
    /// the spill's report (how the kept lines were written).
    async fn land_hooks(
        input: &[u8],
        cap: u64,
        hooks: PassHooks,
    ) -> Result<(Outcome, Option<SpillReport>)> {
        let root = tempfile::tempdir().unwrap();
        let every = hooks.spill_every;
        let plan = every.map(|_| SpillPlan {
            scratch_dir: root.path().to_owned(),
            run_id: "r".into(),
            share: usize::MAX,
            every,
            hooks,
        });
        let d = digester(hooks);
        let progress = contract::progress();
        let mut seq = Sequencer::new(progress.clone(), cap, input.len() as u64).with_spill(plan);
        let mut framer = LineFramer::new(200);
        let (mut output, mut quarantine) = (Vec::new(), Vec::new());
        let mut take = |seq: &mut Sequencer| {
            output.append(seq.output());
            quarantine.append(seq.quarantine());
        };
        for chunk in input.chunks(64) {
            let batch = Batch::frame(&mut framer, Bytes::copy_from_slice(chunk));
            seq.apply(&check_batch(&batch, &progress, d, Compare::No));
            take(&mut seq);
        }
        seq.apply(&check_batch(
            &Batch::finish(&mut framer),
            &progress,
            d,
            Compare::No,
        ));
        take(&mut seq);
        let bytes = input.to_vec();
        let reread = || async move {
            let size = bytes.len() as u64;
            Ok(ObjectReader::new(std::io::Cursor::new(bytes), size))
        };
        let resolved = resolve(&mut seq, &progress, d, 200, "input", hooks, reread).await;
        // Nothing of a spill is left once it is resolved, or once it failed.
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
        let r = resolved?;
        if let Some(drops) = &r.drops {
            let mut f = Filter::default();
            let mut kept = f.push(&output, drops).to_vec();
            kept.extend_from_slice(&f.finish(drops));
            output = kept;
        }
        if let Some(replay) = &r.replay {
            // The replay: the lines from the first held-back one on, checked again.
            replay_in_memory(input, (64, 200), &progress, d, replay, &mut output).unwrap();
        }
        let refused = seq.refusal().is_some();
        let outcome = Outcome {
            output: if refused {
                String::new()
            } else {
                String::from_utf8(output).unwrap()
            },
            quarantine,
            counts: seq.counts(),
            refusal: seq.refusal().cloned(),
            first_rejects: seq.first_rejects().to_vec(),
        };
        Ok((outcome, r.spill))
    }

    /// A line of event `id` with payload `p`.
    fn ev(id: u32, p: u32) -> String {
        format!(
            r#"{{"event_id":"e{id}","learner_id":"l","lesson_id":"s","event_type":"completed","attempt_number":{},"event_time":"2026-03-02T10:00:00Z"}}"#,
            p + 1
        )
    }

    /// A deterministic mix: new events, exact copies of earlier ones, bad lines, and
    /// (with `collide_at`) one earlier id with another payload at that line.
    fn mix(lines: u32, seed: u32, collide_at: Option<u32>) -> String {
        let mut out = String::new();
        let mut x = seed.wrapping_mul(2654435761).max(1);
        for n in 1..=lines {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let line = if Some(n) == collide_at {
                ev(n / 2, 7)
            } else {
                match x % 10 {
                    0..=2 if n > 1 => ev(x % (n - 1) + 1, 0), // a copy of an earlier event (or a new one)
                    3 => "not json".to_owned(),
                    _ => ev(n, 0),
                }
            };
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    #[tokio::test]
    async fn a_spilled_run_decides_exactly_as_the_index_does() {
        for seed in 1..=4 {
            for collide_at in [None, Some(2), Some(77), Some(199)] {
                let input = mix(200, seed, collide_at);
                for cap in [0, 30, 1000] {
                    let expected = land(input.as_bytes(), cap, None, None).await;
                    for every in [1, 7, 50] {
                        // The table's room (twice `every`, none, more than the day,
                        // where the way after it is never chosen) and that way.
                        let ways = [None, Some(true), Some(false)];
                        let rooms = [None, Some(0)]
                            .into_iter()
                            .flat_map(|t| ways.map(|w| (t, w)));
                        for (table, replay) in rooms.chain([(Some(10_000), None)]) {
                            let hooks = PassHooks {
                                spill_every: Some(every),
                                spill_replay: replay,
                                spill_table: table,
                                ..PassHooks::default()
                            };
                            let (spilled, _) =
                                land_hooks(input.as_bytes(), cap, hooks).await.unwrap();
                            assert_eq!(
                                spilled, expected,
                                "seed {seed}, collision at {collide_at:?}, cap {cap}, spill every {every}, table {table:?}, replay {replay:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[tokio::test]
    async fn ids_sharing_a_digest_never_refuse_or_drop_an_event() {
        // 500 distinct events and 100 exact copies, ids squeezed into 3 digests.
        let mut input: String = (1..=500).map(|i| ev(i, 0) + "\n").collect();
        input.extend((1..=100).map(|i| ev(i * 3, 0) + "\n"));
        let plain = land(input.as_bytes(), 0, None, None).await;
        assert_eq!(plain.refusal, None);
        assert_eq!((plain.counts.accepted, plain.counts.duplicates), (500, 100));
        for every in [None, Some(1), Some(9), Some(64)] {
            let squeezed = land(input.as_bytes(), 0, every, Some(2)).await;
            assert_eq!(squeezed, plain, "spill every {every:?}");
        }
        // And a real collision among them is still found, at its line.
        input.push_str(&(ev(250, 1) + "\n"));
        for every in [None, Some(5)] {
            let o = land(input.as_bytes(), 0, every, Some(2)).await;
            let r = o.refusal.expect("refused");
            assert_eq!((r.kind, r.line), (RefusalKind::IdCollision, 601));
            assert_eq!((o.counts.accepted, o.counts.duplicates), (500, 100));
        }
    }

    #[tokio::test]
    async fn duplicates_at_the_edges_of_runs_are_dropped() {
        // Spill every 4: copies of the first and last event of each run of 4.
        let mut input: String = (1..=16).map(|i| ev(i, 0) + "\n").collect();
        for i in [1, 4, 5, 8, 9, 12, 13, 16] {
            input.push_str(&(ev(i, 0) + "\n"));
        }
        let o = land(input.as_bytes(), 0, Some(4), None).await;
        assert_eq!(o, land(input.as_bytes(), 0, None, None).await);
        assert_eq!((o.counts.accepted, o.counts.duplicates), (16, 8));
        let plain: String = (1..=16).map(|i| ev(i, 0) + "\n").collect();
        assert_eq!(
            o.output.len(),
            land(plain.as_bytes(), 0, None, None).await.output.len()
        );
    }

    /// A day whose table never fills decides every copy during its pass: no replay,
    /// no second pass, whatever copies came before or after the spill.
    #[tokio::test]
    async fn a_table_with_room_decides_every_copy_in_the_pass() {
        let input = mix(400, 3, None);
        let expected = land(input.as_bytes(), 1000, None, None).await;
        assert!(expected.counts.duplicates > 20, "{:?}", expected.counts);
        for replay in [None, Some(true), Some(false)] {
            let hooks = PassHooks {
                spill_every: Some(10),
                spill_table: Some(10_000),
                spill_replay: replay,
                ..PassHooks::default()
            };
            let (o, spill) = land_hooks(input.as_bytes(), 1000, hooks).await.unwrap();
            assert_eq!(o, expected, "replay {replay:?}");
            let spill = spill.expect("it spilled");
            assert!(spill.runs > 1, "{spill:?}");
            assert!(!spill.replayed && !spill.second_pass, "{spill:?}");
        }
        // A table that fills part way: the copies after it are replayed or dropped.
        let hooks = PassHooks {
            spill_every: Some(10),
            spill_table: Some(60),
            ..PassHooks::default()
        };
        let (o, spill) = land_hooks(input.as_bytes(), 1000, hooks).await.unwrap();
        assert_eq!(o, expected);
        assert!(spill.expect("it spilled").replayed);
    }

    /// A table that takes distinct events for copies (no canonical bits, ids in
    /// three digests) fails the run at the merge, and leaves no scratch behind.
    #[tokio::test]
    async fn a_copy_the_table_called_wrongly_fails_the_run() {
        let input: String = (1..=100).map(|i| ev(i, 0) + "\n").collect();
        let hooks = PassHooks {
            spill_every: Some(5),
            id_digest_bits: Some(2),
            fingerprint_bits: Some(0),
            ..PassHooks::default()
        };
        let err = land_hooks(input.as_bytes(), 0, hooks).await.unwrap_err();
        let source = std::error::Error::source(&err).map(ToString::to_string);
        let text = format!("{err}: {}", source.unwrap_or_default());
        assert!(
            text.contains("the fingerprint table took line") && text.contains("run again"),
            "{text}"
        );
        // With its canonical bits the same squeezed day lands whole.
        let hooks = PassHooks {
            fingerprint_bits: None,
            ..hooks
        };
        let (o, _) = land_hooks(input.as_bytes(), 0, hooks).await.unwrap();
        assert_eq!(o, land(input.as_bytes(), 0, None, None).await);
        assert_eq!((o.counts.accepted, o.counts.duplicates), (100, 0));
    }

    /// More suspects than the sequencer holds, none of them a real collision (5,000
    /// distinct ids in four digests): the digests are broken, and the run fails
    /// rather than publish a day it stopped deciding part way.
    #[tokio::test]
    async fn more_suspects_than_held_without_a_collision_fail_the_run() {
        let input: String = (1..=5000).map(|i| ev(i, 0) + "\n").collect();
        let hooks = PassHooks {
            id_digest_bits: Some(2),
            ..PassHooks::default()
        };
        let err = land_hooks(input.as_bytes(), 0, hooks).await.unwrap_err();
        let source = std::error::Error::source(&err).map(ToString::to_string);
        let text = format!("{err}: {}", source.unwrap_or_default());
        assert!(
            text.contains("more than 4096 distinct event ids share id digests"),
            "{text}"
        );
        // Below the bound the same squeezed ids land whole.
        let fewer: String = (1..=3000).map(|i| ev(i, 0) + "\n").collect();
        let o = land_hooks(fewer.as_bytes(), 0, hooks).await.unwrap().0;
        assert_eq!((o.counts.accepted, o.refusal), (3000, None));
    }
}
