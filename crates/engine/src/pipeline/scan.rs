//! The one pass over an input: read, hash, frame, check on both cores, sequence
//! in input order, and hand published bytes and quarantine records to the writer.
//!
//! Threads: the reading task frames lines into batches; SHA-256 runs on a thread of
//! its own, and so does the decoder of a compressed input; [`WORKERS`] threads check batches; one sequencer applies them in the
//! order they were dealt, so every decision is the one a sequential pass makes.
//!
//! Completeness is proved, not assumed: a worker that panics or goes away closes
//! its channel, which must never read as the end of the input. Every thread is
//! joined, and unless the sequencer stopped on purpose (a refusal), the batches it
//! applied and the physical lines they cover must equal what the framer dealt.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::batch::{check_batch, Batch, Checked, Compare};
use super::validator::Sequencer;
use crate::compression::{self, Broken, Codec, Stored as _};
use crate::contract::{Contract, LineFramer};
use crate::error::{Error, Result};
use crate::identity::{hex, Digester};
use crate::progress::Progress;
use crate::store::ObjectReader;
use crate::summary::{Refusal, RefusalKind};

/// Input is read in chunks of this size.
const READ_CHUNK: usize = 1 << 20;
/// Output is handed to the store in pieces of at least this size.
pub(super) const FLUSH_AT: usize = 1 << 20;

/// Output of the sequencer, in input order.
pub(super) enum Out {
    Data(Bytes),
    Quarantine(Bytes),
}

/// Validation workers: both cores share the bulk of the work (see `validator`).
pub(super) const WORKERS: usize = 2;

/// What a scan does besides hashing every byte.
pub(super) enum Scan {
    /// Nothing: the hash alone (an unchanged input's rerun).
    Hash,
    /// Validate and count (`check`): published bytes and records are dropped.
    Check(Sequencer),
    /// Validate and send published bytes and quarantine records to the writer.
    Land(Sequencer, mpsc::Sender<Out>),
    /// Validate a published object (`verify --deep`), comparing each line with its
    /// canonical form; no hash (the checkpoint records the input's, not this one's).
    Verify(Sequencer),
}

/// Read the input once. Every stored byte is hashed on a thread of its own (the
/// SHA-256 returned; empty for [`Scan::Verify`], which hashes nothing); unless
/// the scan is [`Scan::Hash`], lines are framed here, checked by [`WORKERS`] threads
/// in parallel and sequenced in input order on another, which sends published
/// bytes and quarantine records to the writer ([`Scan::Land`]) or drops them. A
/// gzip or zstd input (told by its first bytes) is decoded on a thread of its own
/// between the read and the framer; a broken stream refuses the input. After a
/// refusal the input is still read to the end for its hash (and decoded, to tell
/// a broken stream), but no longer validated.
// The contract joined the limits and the digester as a setting of the scan;
// a settings struct for one private caller pair would only rename them.
#[allow(clippy::too_many_arguments)]
pub(super) async fn scan(
    reader: ObjectReader,
    input: &str,
    progress: Progress,
    limits: Limits,
    contract: Arc<Contract>,
    what: Scan,
    digester: Digester,
    panic_worker: bool,
) -> Result<(String, Option<Sequencer>)> {
    let (hash_tx, hasher, compare) = match what {
        Scan::Verify(_) => (None, None, Compare::Raw),
        _ => {
            let (tx, rx) = mpsc::channel::<Bytes>(16);
            (Some(tx), Some(spawn_hasher(rx)), Compare::No)
        }
    };
    let mut raw = Raw {
        size: reader.size,
        reader,
        input,
        progress,
        hash_tx,
        pending: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut validate = match what {
        Scan::Hash => None,
        Scan::Check(seq) | Scan::Verify(seq) => Some((seq, None)),
        Scan::Land(seq, out) => Some((seq, Some(out))),
    };
    // Only content is validated: a hash-only scan never looks at the stored form.
    let codec = match validate.as_mut() {
        Some((seq, _)) => {
            let codec = raw.sniff().await?;
            if codec.is_some() {
                seq.set_compressed(compression::expected_content(raw.size));
            }
            codec
        }
        None => None,
    };
    let (mut dealer, sequencer) = match validate {
        Some((seq, out)) => {
            let (txs, rxs): (Vec<_>, Vec<_>) =
                (0..WORKERS).map(|_| mpsc::channel::<Batch>(4)).unzip();
            let (checked, workers): (Vec<_>, Vec<_>) = rxs
                .into_iter()
                .enumerate()
                .map(|(i, rx)| {
                    spawn_checker(
                        rx,
                        contract.clone(),
                        digester,
                        compare,
                        panic_worker && i == WORKERS - 1,
                    )
                })
                .unzip();
            let stop2 = stop.clone();
            let seq = tokio::task::spawn_blocking(move || sequence(seq, checked, out, &stop2));
            let framer = LineFramer::new(limits.max_line_bytes);
            (Dealer::new(Some(framer), txs, stop), Some((seq, workers)))
        }
        None => (Dealer::new(None, Vec::new(), stop), None),
    };
    // A compressed input is decoded to its end even once validation stopped: a
    // damaged stream can decode to garbage lines before its checksum fails, and the
    // refusal must then name the stream, not a line.
    let broken = compression::decode_with(
        codec,
        limits.max_decompressed,
        raw.input,
        &mut raw,
        &mut dealer,
    )
    .await?;
    if broken.is_some() {
        // The decoder stopped; the hash still wants every stored byte.
        while raw.next_chunk().await?.is_some() {}
    }
    let lines_framed = dealer.lines_seen();
    let (dealt, lost_worker) = match broken {
        None => dealer.finish().await,
        // The content ended mid-stream: its last, partial line is no line at all.
        Some(_) => dealer.abandon(),
    };
    let Raw {
        hash_tx, progress, ..
    } = raw;
    drop(hash_tx);
    progress.finish();
    let sha = hashed(hasher, input).await?;
    let seq = match sequencer {
        Some((s, workers)) => {
            let (mut seq, stopped) = s
                .await
                .map_err(|e| Error::store("join sequencer", input, e))?;
            for w in workers {
                w.await
                    .map_err(|e| Error::store("join validation worker", input, e))?;
            }
            match broken {
                Some(b) => seq.refuse(broken_refusal(b, lines_framed + 1)),
                None if !stopped => prove_complete(input, &seq, dealt, lost_worker)?,
                None => {}
            }
            Some(seq)
        }
        None => None,
    };
    Ok((sha, seq))
}

/// SHA-256 of every stored byte, on a thread of its own.
fn spawn_hasher(mut rx: mpsc::Receiver<Bytes>) -> tokio::task::JoinHandle<String> {
    tokio::task::spawn_blocking(move || {
        let mut h = Sha256::new();
        while let Some(chunk) = rx.blocking_recv() {
            h.update(&chunk);
        }
        hex(&h.finalize())
    })
}

/// The hasher's SHA-256 once it has every byte; empty if nothing hashed.
async fn hashed(hasher: Option<tokio::task::JoinHandle<String>>, input: &str) -> Result<String> {
    match hasher {
        Some(h) => h.await.map_err(|e| Error::store("join hasher", input, e)),
        None => Ok(String::new()),
    }
}

/// What bounds a scan: the longest line kept, and (compressed inputs) the content a
/// stream may decode to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) max_line_bytes: usize,
    pub(super) max_decompressed: u64,
}

impl Limits {
    pub(super) fn of(cfg: &crate::config::Config) -> Limits {
        Limits {
            max_line_bytes: cfg.max_line_bytes,
            max_decompressed: cfg.max_decompressed_bytes,
        }
    }
}

fn broken_refusal(b: Broken, line: u64) -> Refusal {
    let kind = match b {
        Broken::Corrupt => RefusalKind::CorruptCompression,
        Broken::TooLarge => RefusalKind::DecompressedTooLarge,
    };
    Refusal {
        kind,
        line,
        field: None,
    }
}

/// The stored bytes as read: each chunk counted by the progress bar and hashed
/// before anything else sees it.
struct Raw<'a> {
    reader: ObjectReader,
    size: u64,
    input: &'a str,
    progress: Progress,
    /// `None`: nothing hashes ([`Scan::Verify`]).
    hash_tx: Option<mpsc::Sender<Bytes>>,
    /// Bytes read to tell the stored form, not yet handed on.
    pending: Option<Bytes>,
}

impl Raw<'_> {
    /// Read the first bytes (at least [`Codec::SNIFF_LEN`], unless the input is
    /// shorter) and tell the stored form; they are handed on by the next `next`.
    async fn sniff(&mut self) -> Result<Option<Codec>> {
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        while buf.len() < Codec::SNIFF_LEN {
            if self.read_into(&mut buf).await? == 0 {
                break;
            }
        }
        let codec = Codec::sniff(&buf);
        self.pending = Some(buf.freeze()).filter(|b| !b.is_empty());
        Ok(codec)
    }

    async fn read_into(&mut self, buf: &mut BytesMut) -> Result<usize> {
        self.reader
            .read_chunk(buf)
            .await
            .map_err(|e| Error::store("read input", self.input, e))
    }
}

impl compression::Stored for Raw<'_> {
    /// The next chunk of stored bytes, hashed and counted; `None` at the end.
    async fn next_chunk(&mut self) -> Result<Option<Bytes>> {
        let chunk = match self.pending.take() {
            Some(b) => b,
            None => {
                let mut buf = BytesMut::with_capacity(READ_CHUNK);
                if self.read_into(&mut buf).await? == 0 {
                    return Ok(None);
                }
                buf.freeze()
            }
        };
        self.progress.inc(chunk.len() as u64);
        if let Some(tx) = &self.hash_tx {
            if tx.send(chunk.clone()).await.is_err() {
                return Err(Error::store("hash input", self.input, "hasher stopped"));
            }
        }
        Ok(Some(chunk))
    }
}

impl compression::Content for Dealer {
    async fn take(&mut self, piece: Bytes) -> Result<()> {
        self.deal(piece).await;
        Ok(())
    }
}

/// Frames content into batches and deals them round-robin to the workers.
struct Dealer {
    framer: Option<LineFramer>,
    txs: Vec<mpsc::Sender<Batch>>,
    next: usize,
    /// Physical lines seen: framed, then, once validation stopped, counted by their
    /// newlines, so a stream that breaks later names the line it broke in.
    lines: u64,
    /// Lines are counted (a validating scan; a hash-only scan counts none).
    counting: bool,
    lost_worker: bool,
    stop: Arc<AtomicBool>,
}

impl Dealer {
    fn new(
        framer: Option<LineFramer>,
        txs: Vec<mpsc::Sender<Batch>>,
        stop: Arc<AtomicBool>,
    ) -> Self {
        Dealer {
            counting: framer.is_some(),
            framer,
            txs,
            next: 0,
            lines: 0,
            lost_worker: false,
            stop,
        }
    }

    /// Physical lines seen so far (complete ones: ended by a newline).
    fn lines_seen(&self) -> u64 {
        self.lines
    }

    async fn deal(&mut self, chunk: Bytes) {
        let Some(f) = self.framer.as_mut() else {
            if self.counting {
                self.lines += memchr::memchr_iter(b'\n', &chunk).count() as u64;
            }
            return;
        };
        if self.stop.load(Ordering::Relaxed) {
            // Refused, or the writer failed: only the hash is still wanted, and the
            // line count (a compressed stream may still break further on).
            self.framer = None;
            self.txs.clear();
            self.lines += memchr::memchr_iter(b'\n', &chunk).count() as u64;
            return;
        }
        let batch = Batch::frame(f, chunk);
        self.lines = f.lines_seen();
        if self.txs[self.next % WORKERS].send(batch).await.is_err() {
            // A worker is gone; unless the sequencer stopped, that is a failure
            // (reported after every thread is joined).
            self.lost_worker = !self.stop.load(Ordering::Relaxed);
            self.framer = None;
            self.txs.clear();
        }
        self.next += 1;
    }

    /// End of content: deal the last line. The batches and lines dealt (`None` if
    /// validation stopped early), and whether a worker was lost.
    async fn finish(mut self) -> (Option<(u64, u64)>, bool) {
        let Some(mut f) = self.framer.take() else {
            return (None, self.lost_worker);
        };
        let last = Batch::finish(&mut f);
        if self.txs[self.next % WORKERS].send(last).await.is_err() {
            self.lost_worker = !self.stop.load(Ordering::Relaxed);
        }
        (
            Some((self.next as u64 + 1, f.lines_seen())),
            self.lost_worker,
        )
    }

    /// Stop without dealing the rest: the workers drain what they have and end.
    fn abandon(self) -> (Option<(u64, u64)>, bool) {
        (None, self.lost_worker)
    }
}

/// Every batch framed was checked and sequenced, covering every physical line.
fn prove_complete(
    input: &str,
    seq: &Sequencer,
    dealt: Option<(u64, u64)>,
    lost_worker: bool,
) -> Result<()> {
    let applied = seq.progress();
    match dealt {
        Some(dealt) if !lost_worker && applied == dealt => Ok(()),
        _ => Err(Error::store(
            "validate",
            input,
            format!(
                "validation incomplete: {} batches ({} lines) sequenced, {} dealt; a validation worker failed",
                applied.0,
                applied.1,
                dealt.map_or_else(|| "not all".to_owned(), |(b, l)| format!("{b} batches ({l} lines)"))
            ),
        )),
    }
}

/// A validation worker: checks batches as they come, in its own order.
/// `panic_mid_file` is the `worker-panic` drill: fail on the second batch.
pub(super) fn spawn_checker(
    mut rx: mpsc::Receiver<Batch>,
    contract: Arc<Contract>,
    digester: Digester,
    compare: Compare,
    panic_mid_file: bool,
) -> (mpsc::Receiver<Checked>, tokio::task::JoinHandle<()>) {
    let (tx, out) = mpsc::channel::<Checked>(4);
    let handle = tokio::task::spawn_blocking(move || {
        let mut n = 0;
        while let Some(batch) = rx.blocking_recv() {
            n += 1;
            assert!(
                !(panic_mid_file && n == 2),
                "drill: validation worker panics mid-file"
            );
            if tx
                .blocking_send(check_batch(&batch, &contract, digester, compare))
                .is_err()
            {
                return;
            }
        }
    });
    (out, handle)
}

/// The sequencer: takes checked batches round-robin from the workers (the order
/// the framer dealt them), so decisions follow input order exactly.
fn sequence(
    mut seq: Sequencer,
    mut checked: Vec<mpsc::Receiver<Checked>>,
    out: Option<mpsc::Sender<Out>>,
    stop: &AtomicBool,
) -> (Sequencer, bool) {
    let send = |seq: &mut Sequencer, at_least: usize| -> bool {
        let Some(out) = &out else {
            seq.output().clear();
            seq.quarantine().clear();
            return true;
        };
        if !seq.output().is_empty() && seq.output().len() >= at_least {
            let data = Bytes::from(std::mem::replace(
                seq.output(),
                Vec::with_capacity(FLUSH_AT * 2),
            ));
            if out.blocking_send(Out::Data(data)).is_err() {
                return false;
            }
        }
        if !seq.quarantine().is_empty() && seq.quarantine().len() >= at_least {
            let q = Bytes::from(std::mem::take(seq.quarantine()));
            if out.blocking_send(Out::Quarantine(q)).is_err() {
                return false;
            }
        }
        true
    };
    let mut k = 0;
    while let Some(batch) = checked[k % WORKERS].blocking_recv() {
        k += 1;
        seq.apply(&batch);
        // Stopped: a refusal, a failed spill, or suspects to check before going on.
        if seq.stopped() || !send(&mut seq, FLUSH_AT) {
            stop.store(true, Ordering::Relaxed);
            return (seq, true);
        }
    }
    // A closed channel ends the loop whether the input ended or a worker died; the
    // caller tells them apart by counting.
    let flushed = send(&mut seq, 0);
    (seq, !flushed)
}
