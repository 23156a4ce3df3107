//! The one pass over an input: read, hash, frame, check on both cores, sequence
//! in input order, and hand published bytes and quarantine records to the writer.
//!
//! Threads: the reading task frames lines into batches; a local file is read and
//! hashed on a thread of its own (each chunk hashed while still in that core's
//! cache), a stream's bytes are hashed on one; the decoder of a compressed input
//! has one too; [`WORKERS`] threads check batches; one sequencer applies them in the
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

use crate::batch::{Batch, Checked, Compare};
use crate::compression::{self, Broken, Codec, Stored as _};
use crate::contract::{Contract, LineFramer};
use crate::error::{Error, Result};
use crate::identity::{hex, Digester};
use crate::progress::Progress;
use crate::report::{Refusal, RefusalKind};
use crate::store::{BlockingRead, ObjectReader};
use crate::validator::Sequencer;
use crate::workers::{start_workers, WORKERS};

/// Input is read in chunks of this size.
const READ_CHUNK: usize = 1 << 20;
/// Output is handed to the store in pieces of at least this size.
pub const FLUSH_AT: usize = 1 << 20;

/// Output of the sequencer, in input order.
pub enum Out {
    Data(Bytes),
    Quarantine(Bytes),
}

/// What a scan does besides hashing every byte.
pub enum Scan {
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

/// Read the input once. Every stored byte is hashed off the runtime (the
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
pub async fn scan(
    reader: ObjectReader,
    input: &str,
    progress: Progress,
    limits: Limits,
    contract: Arc<Contract>,
    what: Scan,
    digester: Digester,
    panic_worker: bool,
) -> Result<(String, Option<Sequencer>)> {
    let hashing = !matches!(what, Scan::Verify(_));
    let compare = if hashing { Compare::No } else { Compare::Raw };
    let size = reader.size;
    let hash_only = matches!(what, Scan::Hash);
    let read = match reader.into_blocking() {
        Ok(file) if hash_only => return Ok((hash_file(file, progress, input).await?, None)),
        read => read,
    };
    let (source, hasher) = start_reading(read, hashing);
    let mut raw = Raw {
        source,
        size,
        input,
        progress,
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
            let (txs, checked, workers) = start_workers(&contract, digester, compare, panic_worker);
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
        source, progress, ..
    } = raw;
    // The hasher's channel closes: it has every byte.
    drop(source);
    progress.finish();
    let sha = hashed(hasher, input).await?;
    let seq = match sequencer {
        Some((s, workers)) => {
            let (mut seq, stopped) = s
                .await
                .map_err(|e| Error::internal("join sequencer", input, e))?;
            workers.join(input).await?;
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

/// Start reading: a local file on a thread of its own that hashes as it reads; a
/// stream here, hashed on a thread of its own (unless nothing hashes). The thread's
/// handle yields the SHA-256 (empty if nothing hashes).
fn start_reading(
    read: std::result::Result<BlockingRead, ObjectReader>,
    hashing: bool,
) -> (Source, Option<tokio::task::JoinHandle<String>>) {
    match read {
        Ok(file) => {
            let (tx, rx) = mpsc::channel(4);
            (
                Source::Thread(rx),
                Some(spawn_file_reader(file, hashing, tx)),
            )
        }
        Err(stream) if hashing => {
            let (tx, rx) = mpsc::channel::<Bytes>(16);
            (Source::Here(stream, Some(tx)), Some(spawn_hasher(rx)))
        }
        Err(stream) => (Source::Here(stream, None), None),
    }
}

/// A hash-only scan of a local file (an unchanged input's rerun): read and hashed
/// on one thread, through one buffer, so each chunk is hashed while it is still in
/// that core's cache.
async fn hash_file(mut file: BlockingRead, mut progress: Progress, input: &str) -> Result<String> {
    let span = tracing::Span::current();
    let (sha, progress) = tokio::task::spawn_blocking(move || {
        let _in_run = span.enter();
        let mut h = Sha256::new();
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        loop {
            buf.clear();
            match file.read_chunk(&mut buf) {
                Ok(0) => break,
                Ok(n) => progress.inc(n as u64),
                Err(e) => return (Err(e), progress),
            }
            h.update(&buf);
        }
        (Ok(hex(&h.finalize())), progress)
    })
    .await
    .map_err(|e| Error::internal("join hasher", input, e))?;
    progress.finish();
    sha.map_err(|e| Error::store("read input", input, e))
}

/// A local file read on a thread of its own, which hashes each chunk (unless
/// `hashing` is off) right after reading it, then hands it on; its SHA-256 (empty
/// if not hashing) once the file ends. A read error is handed on as the next chunk.
/// The thread's end is no proof that the file ended (a panic ends it too): the
/// scan joins it before it trusts what it read.
fn spawn_file_reader(
    mut file: BlockingRead,
    hashing: bool,
    tx: mpsc::Sender<std::io::Result<Bytes>>,
) -> tokio::task::JoinHandle<String> {
    tokio::task::spawn_blocking(move || {
        let mut h = hashing.then(Sha256::new);
        loop {
            let mut buf = BytesMut::with_capacity(READ_CHUNK);
            let chunk = match file.read_chunk(&mut buf) {
                Ok(0) => break,
                Ok(_) => buf.freeze(),
                Err(e) => {
                    // The scan stops on it; nothing is hashed past it.
                    let _ = tx.blocking_send(Err(e));
                    break;
                }
            };
            if let Some(h) = h.as_mut() {
                h.update(&chunk);
            }
            if tx.blocking_send(Ok(chunk)).is_err() {
                break; // the scan stopped reading
            }
        }
        h.map(|h| hex(&h.finalize())).unwrap_or_default()
    })
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
        Some(h) => h
            .await
            .map_err(|e| Error::internal("join hasher", input, e)),
        None => Ok(String::new()),
    }
}

/// What bounds a scan: the longest line kept, and (compressed inputs) the content a
/// stream may decode to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_line_bytes: usize,
    pub max_decompressed: u64,
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
    source: Source,
    size: u64,
    input: &'a str,
    progress: Progress,
    /// Bytes read to tell the stored form, not yet handed on.
    pending: Option<Bytes>,
}

/// Where the stored bytes come from.
enum Source {
    /// A local file, read and hashed on a thread of its own ([`spawn_file_reader`]).
    Thread(mpsc::Receiver<std::io::Result<Bytes>>),
    /// A stream, read here; each chunk goes to the hasher thread (`None`: nothing
    /// hashes, [`Scan::Verify`]).
    Here(ObjectReader, Option<mpsc::Sender<Bytes>>),
}

impl Raw<'_> {
    /// Read the first bytes (at least [`Codec::SNIFF_LEN`], unless the input is
    /// shorter) and tell the stored form; they are handed on by the next `next`.
    async fn sniff(&mut self) -> Result<Option<Codec>> {
        let mut head = BytesMut::new();
        while head.len() < Codec::SNIFF_LEN {
            match self.read().await? {
                Some(chunk) if head.is_empty() => head = BytesMut::from(chunk),
                Some(chunk) => head.extend_from_slice(&chunk),
                None => break,
            }
        }
        let codec = Codec::sniff(&head);
        self.pending = Some(head.freeze()).filter(|b| !b.is_empty());
        Ok(codec)
    }

    /// The next chunk as read (hashed already if a thread read it); `None` at the end.
    async fn read(&mut self) -> Result<Option<Bytes>> {
        let read = match &mut self.source {
            Source::Thread(rx) => match rx.recv().await {
                Some(read) => read.map(Some),
                None => Ok(None),
            },
            Source::Here(reader, hash_tx) => {
                let mut buf = BytesMut::with_capacity(READ_CHUNK);
                match reader.read_chunk(&mut buf).await {
                    Ok(0) => Ok(None),
                    Ok(_) => {
                        let chunk = buf.freeze();
                        if let Some(tx) = hash_tx {
                            if tx.send(chunk.clone()).await.is_err() {
                                return Err(Error::store(
                                    "hash input",
                                    self.input,
                                    "hasher stopped",
                                ));
                            }
                        }
                        Ok(Some(chunk))
                    }
                    Err(e) => Err(e),
                }
            }
        };
        read.map_err(|e| Error::store("read input", self.input, e))
    }
}

impl compression::Stored for Raw<'_> {
    /// The next chunk of stored bytes, hashed and counted; `None` at the end.
    async fn next_chunk(&mut self) -> Result<Option<Bytes>> {
        let chunk = match self.pending.take() {
            Some(b) => b,
            None => match self.read().await? {
                Some(b) => b,
                None => return Ok(None),
            },
        };
        self.progress.inc(chunk.len() as u64);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// 3 MiB + 7 bytes, (i mod 251): several read chunks and a short last one.
    fn pattern() -> Vec<u8> {
        (0..(3usize << 20) + 7).map(|i| (i % 251) as u8).collect()
    }
    /// `openssl dgst -sha256` of [`pattern`].
    const PATTERN_SHA: &str = "f578a61853ca2f4272dba551bd868420e22302fbb6d6dfc0cc80da1d2c7b779f";

    const GOOD: &str = r#"{"event_id":"e1","learner_id":"l","lesson_id":"s","event_type":"completed","attempt_number":1,"event_time":"2026-03-02T10:00:00Z"}"#;
    /// `openssl dgst -sha256` of GOOD and a newline, 10,000 times.
    const GOOD_SHA: &str = "bc13c14a941bb09f322df40adacbc62a2b9b91ed1f0c8dbea6184b573fa0f853";

    fn file_of(bytes: &[u8]) -> (tempfile::NamedTempFile, ObjectReader) {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(bytes).expect("write");
        let file = std::fs::File::open(f.path()).expect("open");
        (f, ObjectReader::file(file, bytes.len() as u64))
    }

    fn stream_of(bytes: Vec<u8>) -> ObjectReader {
        let n = bytes.len() as u64;
        ObjectReader::new(std::io::Cursor::new(bytes), n)
    }

    async fn run(reader: ObjectReader, what: Scan) -> Result<(String, Option<Sequencer>)> {
        let limits = Limits {
            max_line_bytes: 1 << 20,
            max_decompressed: u64::MAX,
        };
        let progress = Progress::logged("test", reader.size);
        let contract = crate::contract::progress();
        scan(
            reader,
            "in.jsonl",
            progress,
            limits,
            contract,
            what,
            Digester::new(7),
            false,
        )
        .await
    }

    fn check(size: usize) -> Scan {
        Scan::Check(Sequencer::new(crate::contract::progress(), 0, size as u64))
    }

    #[tokio::test]
    async fn a_hash_only_scan_of_a_file_or_a_stream_is_the_sha256_of_every_byte() {
        let (_keep, file) = file_of(&pattern());
        assert!(file.size > 3 * READ_CHUNK as u64);
        let (sha, seq) = run(file, Scan::Hash).await.expect("file");
        assert_eq!((sha.as_str(), seq.is_none()), (PATTERN_SHA, true));
        let (sha, _) = run(stream_of(pattern()), Scan::Hash).await.expect("stream");
        assert_eq!(sha, PATTERN_SHA);
    }

    #[tokio::test]
    async fn a_validating_scan_of_a_file_or_a_stream_hashes_every_byte_and_counts_every_line() {
        let input = format!("{GOOD}\n").repeat(10_000);
        assert!(input.len() > READ_CHUNK);
        let (_keep, file) = file_of(input.as_bytes());
        let (sha, seq) = run(file, check(input.len())).await.expect("file");
        assert_eq!(sha, GOOD_SHA);
        let c = seq.expect("a sequencer").counts();
        assert_eq!((c.accepted, c.duplicates, c.rejected), (1, 9_999, 0));
        let (sha, _) = run(stream_of(input.clone().into_bytes()), check(input.len()))
            .await
            .expect("stream");
        assert_eq!(sha, GOOD_SHA);
    }

    #[tokio::test]
    async fn a_file_that_cannot_be_read_is_an_error_naming_the_read_not_an_end() {
        // read(2) of a directory fails (EISDIR): the first read of the "file".
        let dir = tempfile::tempdir().expect("temp dir");
        for what in [Scan::Hash, check(10)] {
            let file = std::fs::File::open(dir.path()).expect("open the directory");
            match run(ObjectReader::file(file, 10), what).await {
                Err(e) => assert!(e.to_string().contains("read input"), "{e}"),
                Ok((sha, _)) => panic!("an unreadable file scanned to an end, hash {sha}"),
            }
        }
    }
}
