//! The second pass: a spilled run that staged every line as it came (no copy seen
//! before its spill, so none expected after it) and whose merge then found later
//! copies, copies its staged output to a second staging without them (the lines
//! kept by `landing-pass`'s `Filter`). The other way a spilled run ends is the
//! replay (`landing-pass`'s `replay`), which the sequencer chooses at the spill
//! when the index had already collapsed copies: it writes the output once, at the
//! price of a second read of the input.

use bytes::Bytes;
use fixedbitset::FixedBitSet;

use landing_pass::filter::Filter;

use super::hashed::Hashed;
use crate::compression::{self, Codec, Encoder, OutputCompression};
use crate::error::{Error, Result};
use crate::hook::{CrashPoint, Hooks};
use crate::store::{Lake, Slot, Staged};

/// The second pass: copy the staged output to a second staging, without the lines
/// the merge found to be later copies, then delete the first. Both are staging:
/// nothing is published before this is done. A compressed output is decoded and
/// encoded again; the encoder's blocks depend on the content alone, so the bytes
/// are those of an in-memory run.
pub(super) async fn second_pass(
    lake: &dyn Lake,
    first: Staged,
    drops: &FixedBitSet,
    run_id: &str,
    hooks: Hooks,
    output: OutputCompression,
) -> Result<(Staged, String)> {
    let location = lake.location(&first.key);
    let reader = lake.read(&first.key, 0).await?;
    let encoder =
        Encoder::new(output).map_err(|e| Error::store("start output encoder", &location, e))?;
    let out = Hashed::new(lake.stage(&first.dest_key, run_id, Slot::Second).await?);
    let mut rewrite = Rewrite {
        filter: Filter::default(),
        drops,
        encoder,
        out,
        location: &location,
        hooks,
        wrote: false,
    };
    let codec = match output {
        OutputCompression::None => None,
        OutputCompression::Gzip => Some(Codec::Gzip),
        OutputCompression::Zstd => Some(Codec::Zstd),
    };
    let mut stored = compression::ObjectChunks {
        reader,
        location: &location,
    };
    let decoded =
        compression::decode_with(codec, u64::MAX, &location, &mut stored, &mut rewrite).await;
    let done = match decoded {
        Ok(None) => rewrite.finish().await,
        Ok(Some(b)) => Err(Error::store(
            "decode staged output",
            &location,
            format!("{b:?}"),
        )),
        Err(e) => Err(e),
    };
    if let Err(e) = done {
        let _ = rewrite.out.abort().await;
        return Err(e);
    }
    let staged = rewrite.out.complete().await?;
    lake.delete(&first.key).await?;
    Ok(staged)
}

/// The second pass's writer: the content without the dropped lines, encoded again
/// when the output is compressed, into the second staging.
struct Rewrite<'a> {
    filter: Filter,
    drops: &'a FixedBitSet,
    encoder: Option<Encoder>,
    out: Hashed,
    location: &'a str,
    hooks: Hooks,
    wrote: bool,
}

impl compression::Content for Rewrite<'_> {
    async fn take(&mut self, piece: Bytes) -> Result<()> {
        let mut stored = self.filter.push(&piece, self.drops);
        if let Some(e) = self.encoder.as_mut() {
            let coded = e.write(&stored);
            stored =
                Bytes::from(coded.map_err(|e| Error::store("compress output", self.location, e))?);
        }
        if !stored.is_empty() {
            self.out.write(stored).await?;
            if !self.wrote {
                self.wrote = true;
                self.hooks.crash(CrashPoint::SecondPass);
            }
        }
        Ok(())
    }
}

impl Rewrite<'_> {
    /// The last, unterminated line and the encoder's end.
    async fn finish(&mut self) -> Result<()> {
        let tail = self.filter.finish(self.drops);
        let tail = match self.encoder.take() {
            None => tail,
            Some(mut e) => {
                let end = e.write(&tail).and_then(|mut v| {
                    v.extend(e.finish()?);
                    Ok(v)
                });
                Bytes::from(end.map_err(|e| Error::store("compress output", self.location, e))?)
            }
        };
        if !tail.is_empty() {
            self.out.write(tail).await?;
        }
        Ok(())
    }
}
