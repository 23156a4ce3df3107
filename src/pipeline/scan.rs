//! The one pass over an input: read, hash, frame, check on both cores, sequence
//! in input order, and hand published bytes and quarantine records to the writer.
//!
//! Threads: the reading task frames lines into batches; SHA-256 runs on a thread of
//! its own; [`WORKERS`] threads check batches; one sequencer applies them in the
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
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::validator::{check_batch, Batch, Checked, Sequencer};
use crate::contract::{Contract, LineFramer};
use crate::error::{Error, Result};
use crate::identity::{hex, Digester};
use crate::progress::Progress;
use crate::store::ObjectReader;

/// Input is read in chunks of this size.
const READ_CHUNK: usize = 1 << 20;
/// Output is handed to the store in pieces of at least this size.
const FLUSH_AT: usize = 1 << 20;

/// Output of the sequencer, in input order.
pub(super) enum Out {
    Data(Bytes),
    Quarantine(Bytes),
}

/// Validation workers: both cores share the bulk of the work (see `validator`).
const WORKERS: usize = 2;

/// What a scan does besides hashing every byte.
pub(super) enum Scan {
    /// Nothing: the hash alone (an unchanged input's rerun).
    Hash,
    /// Validate and count (`check`): published bytes and records are dropped.
    Check(Sequencer),
    /// Validate and send published bytes and quarantine records to the writer.
    Land(Sequencer, mpsc::Sender<Out>),
}

/// Read the input once. Every byte is hashed on a thread of its own; unless the
/// scan is [`Scan::Hash`], lines are framed here, checked by [`WORKERS`] threads in
/// parallel and sequenced in input order on another, which sends published bytes
/// and quarantine records to the writer ([`Scan::Land`]) or drops them. After a
/// refusal the input is still read to the end for its hash, but no longer validated.
// The contract joined the framing limit and the digester as a setting of the scan;
// a settings struct for one private caller pair would only rename them.
#[allow(clippy::too_many_arguments)]
pub(super) async fn scan(
    mut reader: ObjectReader,
    input: &str,
    mut progress: Progress,
    max_line_bytes: usize,
    contract: &'static Contract,
    what: Scan,
    digester: Digester,
    panic_worker: bool,
) -> Result<(String, Option<Sequencer>)> {
    let (hash_tx, mut hash_rx) = mpsc::channel::<Bytes>(16);
    let hasher = tokio::task::spawn_blocking(move || {
        let mut h = Sha256::new();
        while let Some(chunk) = hash_rx.blocking_recv() {
            h.update(&chunk);
        }
        hex(&h.finalize())
    });
    let stop = Arc::new(AtomicBool::new(false));
    let validate = match what {
        Scan::Hash => None,
        Scan::Check(seq) => Some((seq, None)),
        Scan::Land(seq, out) => Some((seq, Some(out))),
    };
    let (mut framer, mut batch_txs, sequencer) = match validate {
        Some((seq, out)) => {
            let (txs, rxs): (Vec<_>, Vec<_>) =
                (0..WORKERS).map(|_| mpsc::channel::<Batch>(4)).unzip();
            let (checked, workers): (Vec<_>, Vec<_>) = rxs
                .into_iter()
                .enumerate()
                .map(|(i, rx)| {
                    spawn_checker(rx, contract, digester, panic_worker && i == WORKERS - 1)
                })
                .unzip();
            let stop2 = stop.clone();
            let seq = tokio::task::spawn_blocking(move || sequence(seq, checked, out, &stop2));
            let framer = LineFramer::new(max_line_bytes);
            (Some(framer), txs, Some((seq, workers)))
        }
        None => (None, Vec::new(), None),
    };
    let mut next = 0usize;
    let mut lost_worker = false;
    loop {
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        let n = reader
            .body
            .read_buf(&mut buf)
            .await
            .map_err(|e| Error::store("read input", input, e))?;
        if n == 0 {
            break;
        }
        let chunk = buf.freeze();
        progress.inc(n as u64);
        if hash_tx.send(chunk.clone()).await.is_err() {
            return Err(Error::store("hash input", input, "hasher stopped"));
        }
        if let Some(f) = framer.as_mut() {
            if stop.load(Ordering::Relaxed) {
                // Refused, or the writer failed: only the hash is still wanted.
                framer = None;
                batch_txs.clear();
                continue;
            }
            let batch = Batch::frame(f, chunk);
            if batch_txs[next % WORKERS].send(batch).await.is_err() {
                // A worker is gone; unless the sequencer stopped, that is a failure
                // (reported below, after every thread is joined).
                lost_worker = !stop.load(Ordering::Relaxed);
                framer = None;
                batch_txs.clear();
            }
            next += 1;
        }
    }
    let mut dealt = None;
    if let Some(mut f) = framer {
        let last = Batch::finish(&mut f);
        if batch_txs[next % WORKERS].send(last).await.is_err() {
            lost_worker = !stop.load(Ordering::Relaxed);
        }
        dealt = Some((next as u64 + 1, f.lines_seen()));
    }
    drop(batch_txs);
    drop(hash_tx);
    progress.finish();
    let sha = hasher
        .await
        .map_err(|e| Error::store("join hasher", input, e))?;
    let seq = match sequencer {
        Some((s, workers)) => {
            let (seq, stopped) = s
                .await
                .map_err(|e| Error::store("join sequencer", input, e))?;
            for w in workers {
                w.await
                    .map_err(|e| Error::store("join validation worker", input, e))?;
            }
            if !stopped {
                prove_complete(input, &seq, dealt, lost_worker)?;
            }
            Some(seq)
        }
        None => None,
    };
    Ok((sha, seq))
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
fn spawn_checker(
    mut rx: mpsc::Receiver<Batch>,
    contract: &'static Contract,
    digester: Digester,
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
                .blocking_send(check_batch(&batch, contract, digester))
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
