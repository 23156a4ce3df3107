//! Compressed inputs and outputs (docs/design.md § 9): what an input's first bytes
//! say it is, the published name of a compressed input, the decoder thread that
//! turns a stream of stored bytes into a stream of content, and the encoders of
//! `--output-compression`.
//!
//! The input's identity stays the SHA-256 of its stored bytes (hashed before this
//! module sees them); only the line framer sees the decoded content. The name
//! decides only the published name; how a file is read is decided by its magic bytes.
//!
//! A crate of its own because both the line pass (`landing-pass`, which decodes
//! inputs) and the engine (the published names, the encoders, the recorded
//! `--output-compression`) use it; the engine re-exports it as `compression`. It
//! reads through `landing-store`'s `ObjectReader` and knows nothing of contracts,
//! lines or runs.

use std::future::Future;
use std::io::{Read, Write};

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

use landing_error::{Error, Result};
use landing_store::{Listed, ObjectReader};

/// Decoded content is handed on in pieces of at most this size, so decoding holds
/// at most this much (plus the decoder's own window) whatever the ratio or the line
/// lengths: the framer keeps no more than `--max-line-bytes` of one line.
pub const DECODED_CHUNK: usize = 1 << 20;

/// `--max-decompressed-bytes`' default: 1 TiB. A real day of events is far below
/// it; a stream that decodes to more is refused as a likely bomb.
pub const DEFAULT_MAX_DECOMPRESSED: u64 = 1 << 40;

/// Content bytes to size the dedup index for, of a compressed input of `stored`
/// bytes: JSONL of events compresses about ninefold (gzip -6 9.2x, zstd -3 8.8x on
/// the generated events), rounded up: an overestimate costs a little memory, an
/// underestimate a growth of the index late in the run.
pub fn expected_content(stored: u64) -> u64 {
    stored.saturating_mul(10)
}

/// How an input is stored, told by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Zstd,
}

impl Codec {
    /// The stored form's first bytes: gzip's `1f 8b 08` (deflate), zstd's frame
    /// magic `28 b5 2f fd`. No JSONL line starts with either (they are not UTF-8
    /// text a line of JSON begins with), so a plain file is never mistaken.
    /// `None`: plain (too short to be either counts as plain).
    pub fn sniff(head: &[u8]) -> Option<Codec> {
        if head.starts_with(&[0x1f, 0x8b, 0x08]) {
            Some(Codec::Gzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Codec::Zstd)
        } else {
            None
        }
    }

    /// Bytes [`Codec::sniff`] needs to decide.
    pub const SNIFF_LEN: usize = 4;
}

/// `--output-compression`: how published objects are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputCompression {
    #[default]
    None,
    Gzip,
    Zstd,
}

impl OutputCompression {
    /// Every choice, in the order of the flag's values.
    pub const ALL: [OutputCompression; 3] = [
        OutputCompression::None,
        OutputCompression::Gzip,
        OutputCompression::Zstd,
    ];

    /// What the published name gets after the input's name.
    pub fn suffix(self) -> &'static str {
        match self {
            OutputCompression::None => "",
            OutputCompression::Gzip => ".gz",
            OutputCompression::Zstd => ".zst",
        }
    }

    /// The name `--output-compression` takes, the checkpoint records and `--dry-run`
    /// prints.
    pub fn name(self) -> &'static str {
        match self {
            OutputCompression::None => "none",
            OutputCompression::Gzip => "gzip",
            OutputCompression::Zstd => "zstd",
        }
    }

    pub fn is_none(&self) -> bool {
        *self == OutputCompression::None
    }

    /// Is this the stored form of the object named `key`, by its suffix?
    pub fn of_key(key: &str) -> OutputCompression {
        if key.ends_with(".gz") {
            OutputCompression::Gzip
        } else if key.ends_with(".zst") {
            OutputCompression::Zstd
        } else {
            OutputCompression::None
        }
    }
}

impl std::str::FromStr for OutputCompression {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        OutputCompression::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown output compression {s:?}"))
    }
}

impl<'de> serde::Deserialize<'de> for OutputCompression {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The suffixes a compressed input's name may carry; the published name drops it.
const INPUT_SUFFIXES: [&str; 2] = [".gz", ".zst"];

/// The name an input publishes under, keys its checkpoint and its lease:
/// `day.jsonl.gz` and `day.jsonl.zst` are `day.jsonl`, so they and `day.jsonl` are
/// one input.
pub fn published_name(input_name: &str) -> &str {
    INPUT_SUFFIXES
        .iter()
        .find_map(|s| input_name.strip_suffix(s))
        .unwrap_or(input_name)
}

/// Split off the inputs of one listing that publish under one name (`x.jsonl`
/// beside `x.jsonl.gz` or `x.jsonl.zst`): landing either would replace the other's
/// events, and which one the producer meant is not the job's to guess. Returns the
/// inputs to land and those to report (none of them is landed).
pub fn one_form_each(inputs: Vec<Listed>) -> (Vec<Listed>, Vec<Listed>) {
    let mut by_name: std::collections::HashMap<&str, usize> = Default::default();
    for l in &inputs {
        *by_name.entry(published_name(&l.name)).or_default() += 1;
    }
    let clash: std::collections::HashSet<String> = by_name
        .into_iter()
        .filter(|&(_, n)| n > 1)
        .map(|(name, _)| name.to_owned())
        .collect();
    inputs
        .into_iter()
        .partition(|l| !clash.contains(published_name(&l.name)))
}

/// Why a compressed stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// Truncated, corrupt, or followed by bytes that are no further member or frame.
    Corrupt,
    /// Decodes to more than `--max-decompressed-bytes`: a likely bomb.
    TooLarge,
}

/// Stored bytes arriving on a channel, read as a `std::io::Read` on a blocking thread.
struct ChannelReader {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(b) => self.current = b,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        bytes::Buf::advance(&mut self.current, n);
        Ok(n)
    }
}

/// Decode the stored bytes arriving on `stored` (every gzip member, every zstd
/// frame) and send the content on `out` in pieces of at most [`DECODED_CHUNK`],
/// or one [`Broken`] and stop. Stops quietly when `out` is closed (the reader no
/// longer wants content); the sender of `stored` then finds it closed too.
/// Runs on a blocking thread: decoding is CPU work.
pub fn spawn_decoder(
    codec: Codec,
    stored: mpsc::Receiver<Bytes>,
    out: mpsc::Sender<Result<Bytes, Broken>>,
    max_decompressed: u64,
) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(move || {
        let src = ChannelReader {
            rx: stored,
            current: Bytes::new(),
        };
        let mut decoder: Box<dyn Read> = match codec {
            Codec::Gzip => Box::new(flate2::read::MultiGzDecoder::new(src)),
            Codec::Zstd => match zstd::stream::read::Decoder::new(src) {
                Ok(d) => Box::new(d),
                Err(_) => {
                    let _ = out.blocking_send(Err(Broken::Corrupt));
                    return;
                }
            },
        };
        let mut total = 0u64;
        loop {
            let mut buf = BytesMut::zeroed(DECODED_CHUNK);
            let (filled, broken) = fill(&mut *decoder, &mut buf);
            total += filled as u64;
            if total > max_decompressed {
                let _ = out.blocking_send(Err(Broken::TooLarge));
                return;
            }
            if filled > 0 {
                // What decoded before a break is handed on first: the refusal names
                // the line being decoded when the stream broke (interface.md section 2).
                buf.truncate(filled);
                if out.blocking_send(Ok(buf.freeze())).is_err() {
                    return;
                }
            }
            if broken {
                let _ = out.blocking_send(Err(Broken::Corrupt));
                return;
            }
            if filled == 0 {
                return;
            }
        }
    })
}

/// Stored bytes, chunk by chunk, in order: what [`decode_with`] reads.
pub trait Stored: Send {
    /// The next chunk; `None` at the end.
    fn next_chunk(&mut self) -> impl Future<Output = Result<Option<Bytes>>> + Send;
}

/// Where [`decode_with`] hands the content, piece by piece, in order.
pub trait Content: Send {
    fn take(&mut self, piece: Bytes) -> impl Future<Output = Result<()>> + Send;
}

/// Content handed to a plain function.
pub struct Each<F>(pub F);

impl<F: FnMut(&[u8]) + Send> Content for Each<F> {
    async fn take(&mut self, piece: Bytes) -> Result<()> {
        (self.0)(&piece);
        Ok(())
    }
}

/// An object's stored bytes.
pub struct ObjectChunks<'a> {
    pub reader: ObjectReader,
    pub location: &'a str,
}

impl Stored for ObjectChunks<'_> {
    async fn next_chunk(&mut self) -> Result<Option<Bytes>> {
        let mut buf = BytesMut::with_capacity(DECODED_CHUNK);
        let n = self
            .reader
            .read_chunk(&mut buf)
            .await
            .map_err(|e| Error::store("read", self.location, e))?;
        Ok((n > 0).then(|| buf.freeze()))
    }
}

/// The one decode loop: the chunks of `stored` are decoded as `codec` (`None`: they
/// are the content) and each piece of content goes to `content`, in order. Reading,
/// decoding (on a blocking thread) and taking overlap. `Ok(Some)`: the stream is
/// broken, or decodes to more than `limit` bytes; what it decoded to before that was
/// taken. An error of either side stops both; the taker's error wins.
///
/// Once the decoder stops early (a broken stream) `stored` is read no further: a
/// caller that must see every stored byte (the input's hash) drains the rest.
pub async fn decode_with(
    codec: Option<Codec>,
    limit: u64,
    location: &str,
    stored: &mut impl Stored,
    content: &mut impl Content,
) -> Result<Option<Broken>> {
    let Some(codec) = codec else {
        while let Some(chunk) = stored.next_chunk().await? {
            content.take(chunk).await?;
        }
        return Ok(None);
    };
    let (stored_tx, stored_rx) = mpsc::channel::<Bytes>(4);
    let (out_tx, mut out_rx) = mpsc::channel(4);
    let decoder = spawn_decoder(codec, stored_rx, out_tx, limit);
    let feed = async move {
        while let Some(chunk) = stored.next_chunk().await? {
            if stored_tx.send(chunk).await.is_err() {
                // The decoder stopped (a broken stream, or the taker failed).
                break;
            }
        }
        Ok::<(), Error>(())
    };
    // `move`: when the taker ends, the content channel closes and the decoder stops.
    let taken = async move {
        while let Some(piece) = out_rx.recv().await {
            match piece {
                Ok(b) => content.take(b).await?,
                Err(broken) => return Ok(Some(broken)),
            }
        }
        Ok::<_, Error>(None)
    };
    let (fed, taken) = tokio::join!(feed, taken);
    let broken = taken?;
    fed?;
    decoder
        .await
        .map_err(|e| Error::internal("join decoder", location, e))?;
    Ok(broken)
}

/// Read an object's content to the end, decoding it when its first bytes say it is
/// gzip or zstd; `f` gets each piece in order. `Ok(Some)`: the stream is broken
/// (what it decoded to before that was given to `f`).
pub async fn read_content(
    reader: ObjectReader,
    location: &str,
    f: impl FnMut(&[u8]) + Send,
) -> Result<Option<Broken>> {
    read_content_into(reader, location, &mut Each(f)).await
}

/// [`read_content`], handing each piece to `content`.
pub async fn read_content_into(
    reader: ObjectReader,
    location: &str,
    content: &mut impl Content,
) -> Result<Option<Broken>> {
    let mut stored = ObjectChunks { reader, location };
    read_stored_into(&mut stored, location, content).await
}

/// [`read_content_into`] from stored chunks of any source (the replay counts them).
pub async fn read_stored_into(
    stored: &mut impl Stored,
    location: &str,
    content: &mut impl Content,
) -> Result<Option<Broken>> {
    let mut first = stored.next_chunk().await?.unwrap_or_default();
    while first.len() < Codec::SNIFF_LEN {
        let Some(more) = stored.next_chunk().await? else {
            break;
        };
        first = [first, more].concat().into();
    }
    let codec = Codec::sniff(&first);
    let mut stored = Prefixed {
        first: Some(first).filter(|b| !b.is_empty()),
        rest: stored,
    };
    decode_with(codec, u64::MAX, location, &mut stored, content).await
}

/// [`read_stored_into`] of stored bytes known to be plain content (a replay's read
/// from mid-content): nothing is sniffed.
pub async fn read_plain_into(
    stored: &mut impl Stored,
    location: &str,
    content: &mut impl Content,
) -> Result<Option<Broken>> {
    decode_with(None, u64::MAX, location, stored, content).await
}

/// Stored chunks after the bytes read to tell their codec.
struct Prefixed<'s, S> {
    first: Option<Bytes>,
    rest: &'s mut S,
}

impl<S: Stored> Stored for Prefixed<'_, S> {
    async fn next_chunk(&mut self) -> Result<Option<Bytes>> {
        match self.first.take() {
            Some(b) => Ok(Some(b)),
            None => self.rest.next_chunk().await,
        }
    }
}

/// Read until `buf` is full or the stream ends; the bytes read.
/// Fill `buf` from `r`: the bytes read, and whether a read error (a broken stream)
/// stopped it; the bytes read before the error are kept.
fn fill(r: &mut dyn Read, buf: &mut [u8]) -> (usize, bool) {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return (n, true),
        }
    }
    (n, false)
}

/// Gzip level of `--output-compression gzip`: 6, gzip's own default.
const GZIP_LEVEL: u32 = 6;
/// Zstd level of `--output-compression zstd`: 3, zstd's own default.
const ZSTD_LEVEL: i32 = 3;

/// Content reaches the compressor in blocks of exactly this size (the last one
/// excepted), so the stored bytes depend on the content alone, not on how the
/// pipeline happened to cut it.
const ENCODE_BLOCK: usize = 1 << 20;

/// A streaming encoder of published bytes: content in, stored bytes out, in order.
pub struct Encoder {
    codec: Compressor,
    pending: Vec<u8>,
}

enum Compressor {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Compressor {
    fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Compressor::Gzip(e) => e.write_all(data),
            Compressor::Zstd(e) => e.write_all(data),
        }
    }

    fn take(&mut self) -> Vec<u8> {
        match self {
            Compressor::Gzip(e) => std::mem::take(e.get_mut()),
            Compressor::Zstd(e) => std::mem::take(e.get_mut()),
        }
    }
}

impl Encoder {
    /// `None` for [`OutputCompression::None`]: the bytes go as they are.
    pub fn new(c: OutputCompression) -> std::io::Result<Option<Encoder>> {
        let codec = match c {
            OutputCompression::None => return Ok(None),
            // flate2's header has no name and mtime 0: equal content, equal bytes.
            OutputCompression::Gzip => Compressor::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(GZIP_LEVEL),
            )),
            OutputCompression::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)?;
                // The frame records its checksum: a reader detects a damaged object.
                e.include_checksum(true)?;
                Compressor::Zstd(e)
            }
        };
        Ok(Some(Encoder {
            codec,
            pending: Vec::with_capacity(ENCODE_BLOCK),
        }))
    }

    /// Compress `data`; the stored bytes ready so far (possibly none).
    pub fn write(&mut self, mut data: &[u8]) -> std::io::Result<Vec<u8>> {
        while !data.is_empty() {
            let n = (ENCODE_BLOCK - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.pending.len() == ENCODE_BLOCK {
                self.codec.write(&self.pending)?;
                self.pending.clear();
            }
        }
        Ok(self.codec.take())
    }

    /// The rest of the stored bytes: the stream's end (gzip trailer, zstd epilogue).
    pub fn finish(mut self) -> std::io::Result<Vec<u8>> {
        self.codec.write(&self.pending)?;
        let mut out = self.codec.take();
        out.extend(match self.codec {
            Compressor::Gzip(e) => e.finish()?,
            Compressor::Zstd(e) => e.finish()?,
        });
        Ok(out)
    }
}

/// Compress `content` whole (tests, drills and benchmarks).
pub fn encode_all(c: OutputCompression, content: &[u8]) -> Vec<u8> {
    match Encoder::new(c) {
        Ok(Some(mut e)) => {
            // Writing into a Vec cannot fail.
            let mut out = e.write(content).unwrap_or_default();
            out.extend(e.finish().unwrap_or_default());
            out
        }
        _ => content.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_compressions_are_spelled_as_the_flag_takes_them() {
        let names = OutputCompression::ALL.map(OutputCompression::name);
        assert_eq!(names, ["none", "gzip", "zstd"]);
        for c in OutputCompression::ALL {
            assert_eq!(c.name().parse(), Ok(c));
        }
        assert!("Gzip".parse::<OutputCompression>().is_err());
        assert!("".parse::<OutputCompression>().is_err());
    }

    async fn decode(stored: &[u8], limit: u64, piece: usize) -> (Vec<u8>, Option<Broken>, usize) {
        let codec = Codec::sniff(stored).expect("compressed");
        let (tx, rx) = mpsc::channel(4);
        let (out_tx, mut out_rx) = mpsc::channel(4);
        let h = spawn_decoder(codec, rx, out_tx, limit);
        let pieces: Vec<Bytes> = stored.chunks(piece).map(Bytes::copy_from_slice).collect();
        let feed = async move {
            for p in pieces {
                if tx.send(p).await.is_err() {
                    break;
                }
            }
        };
        let take = async {
            let (mut content, mut broken, mut largest) = (Vec::new(), None, 0);
            while let Some(r) = out_rx.recv().await {
                match r {
                    Ok(b) => {
                        largest = largest.max(b.len());
                        content.extend_from_slice(&b);
                    }
                    Err(e) => broken = Some(e),
                }
            }
            (content, broken, largest)
        };
        let ((), got) = tokio::join!(feed, take);
        h.await.unwrap();
        got
    }

    fn lines(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("{{\"event_id\":\"e{i}\"}}\n").into_bytes())
            .collect()
    }

    #[test]
    fn sniff_tells_the_stored_form_by_magic_bytes() {
        let plain = lines(3);
        assert_eq!(Codec::sniff(&plain), None);
        let gz = encode_all(OutputCompression::Gzip, &plain);
        let zst = encode_all(OutputCompression::Zstd, &plain);
        assert_eq!(Codec::sniff(&gz), Some(Codec::Gzip));
        assert_eq!(Codec::sniff(&zst), Some(Codec::Zstd));
        assert_eq!(Codec::sniff(&[]), None);
        assert_eq!(Codec::sniff(&[0x1f]), None);
    }

    #[test]
    fn two_forms_of_one_input_are_split_off() {
        let listed = |name: &str| Listed {
            name: name.to_owned(),
            meta: landing_store::ObjectMeta {
                size: 1,
                version: landing_store::Version::ETag("e".into()),
            },
            modified_ns: 0,
        };
        let names = [
            "a.jsonl",
            "a.jsonl.gz",
            "b.jsonl.zst",
            "c.jsonl",
            "c.jsonl.zst",
        ];
        let (land, clash) = one_form_each(names.map(listed).to_vec());
        let n = |v: &[Listed]| v.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
        assert_eq!(n(&land), ["b.jsonl.zst"]);
        assert_eq!(
            n(&clash),
            ["a.jsonl", "a.jsonl.gz", "c.jsonl", "c.jsonl.zst"]
        );
    }

    #[test]
    fn published_names_drop_the_compression_suffix() {
        assert_eq!(published_name("day.jsonl.gz"), "day.jsonl");
        assert_eq!(published_name("day.jsonl.zst"), "day.jsonl");
        assert_eq!(published_name("day.jsonl"), "day.jsonl");
        assert_eq!(published_name("day.gz.jsonl"), "day.gz.jsonl");
        assert_eq!(
            OutputCompression::of_key("raw/p/day.jsonl.gz"),
            OutputCompression::Gzip
        );
        assert_eq!(
            OutputCompression::of_key("raw/p/day.jsonl"),
            OutputCompression::None
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_member_and_frame_decodes_in_bounded_pieces() {
        let content = lines(200_000);
        let (a, b) = content.split_at(content.len() / 3);
        for c in [OutputCompression::Gzip, OutputCompression::Zstd] {
            // Two members (gzip) or two frames (zstd), concatenated as `cat` does.
            let mut stored = encode_all(c, a);
            stored.extend(encode_all(c, b));
            let (got, broken, largest) = decode(&stored, u64::MAX, 7777).await;
            assert_eq!(broken, None, "{c:?}");
            assert!(got == content, "{c:?}: content differs");
            assert!(largest <= DECODED_CHUNK, "{c:?}: piece of {largest} bytes");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn truncated_corrupt_and_trailing_garbage_are_corrupt() {
        let content = lines(50_000);
        for c in [OutputCompression::Gzip, OutputCompression::Zstd] {
            let stored = encode_all(c, &content);
            let truncated = &stored[..stored.len() - 5];
            assert_eq!(
                decode(truncated, u64::MAX, 4096).await.1,
                Some(Broken::Corrupt),
                "{c:?} truncated"
            );
            let half = &stored[..stored.len() / 2];
            assert_eq!(
                decode(half, u64::MAX, 4096).await.1,
                Some(Broken::Corrupt),
                "{c:?} half"
            );
            let mut flipped = stored.clone();
            let mid = flipped.len() / 2;
            for b in &mut flipped[mid..mid + 16] {
                *b ^= 0x5a;
            }
            assert_eq!(
                decode(&flipped, u64::MAX, 4096).await.1,
                Some(Broken::Corrupt),
                "{c:?} corrupt"
            );
            let mut trailing = stored.clone();
            trailing.extend_from_slice(b"not a member\n");
            assert_eq!(
                decode(&trailing, u64::MAX, 4096).await.1,
                Some(Broken::Corrupt),
                "{c:?} trailing"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_decoding_past_the_limit_is_too_large() {
        // 64 MiB of one byte, no newline: a small file, a huge stream.
        let bomb = vec![b'a'; 64 << 20];
        for c in [OutputCompression::Gzip, OutputCompression::Zstd] {
            let stored = encode_all(c, &bomb);
            assert!(stored.len() < 1 << 20);
            let (got, broken, largest) = decode(&stored, 8 << 20, 1 << 16).await;
            assert_eq!(broken, Some(Broken::TooLarge), "{c:?}");
            assert!(got.len() <= 8 << 20, "{c:?}: decoded {} bytes", got.len());
            assert!(largest <= DECODED_CHUNK);
        }
    }

    #[test]
    fn output_encoders_round_trip_and_are_deterministic() {
        let content = lines(100_000);
        for c in [OutputCompression::Gzip, OutputCompression::Zstd] {
            let mut e = Encoder::new(c).unwrap().unwrap();
            let mut stored = Vec::new();
            for piece in content.chunks(3000) {
                stored.extend(e.write(piece).unwrap());
            }
            stored.extend(e.finish().unwrap());
            assert!(
                stored == encode_all(c, &content),
                "{c:?}: not deterministic"
            );
            let mut back = Vec::new();
            match c {
                OutputCompression::Gzip => {
                    flate2::read::MultiGzDecoder::new(&stored[..])
                        .read_to_end(&mut back)
                        .unwrap();
                }
                _ => {
                    zstd::stream::read::Decoder::new(&stored[..])
                        .unwrap()
                        .read_to_end(&mut back)
                        .unwrap();
                }
            };
            assert!(back == content, "{c:?}: round trip differs");
        }
        assert!(Encoder::new(OutputCompression::None).unwrap().is_none());
    }
}
