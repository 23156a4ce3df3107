//! The filter of what a spilled run's merge kept: the staged output's lines, less
//! those the merge found to be later copies (by ordinal), for the second pass.

use bytes::Bytes;
use fixedbitset::FixedBitSet;

/// Drops output lines by ordinal, across chunk boundaries.
#[derive(Default)]
pub struct Filter {
    ordinal: usize,
    partial: Vec<u8>,
}

impl Filter {
    pub fn push(&mut self, chunk: &[u8], drops: &FixedBitSet) -> Bytes {
        let mut kept = Vec::with_capacity(chunk.len() + self.partial.len());
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', chunk) {
            let line = &chunk[start..=end];
            if !drops.contains(self.ordinal) {
                kept.extend_from_slice(&self.partial);
                kept.extend_from_slice(line);
            }
            self.partial.clear();
            self.ordinal += 1;
            start = end + 1;
        }
        self.partial.extend_from_slice(&chunk[start..]);
        Bytes::from(kept)
    }

    /// Every staged line ends in a newline; a tail without one is kept as it is.
    pub fn finish(&mut self, drops: &FixedBitSet) -> Bytes {
        if self.partial.is_empty() || drops.contains(self.ordinal) {
            return Bytes::new();
        }
        Bytes::from(std::mem::take(&mut self.partial))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_drops_lines_by_ordinal_across_chunks() {
        let mut drops = FixedBitSet::with_capacity(8);
        drops.insert(1);
        drops.insert(3);
        let text = b"a0\nb1\nc2\nd3\ne4";
        let mut f = Filter::default();
        let mut out = Vec::new();
        for chunk in text.chunks(2) {
            out.extend_from_slice(&f.push(chunk, &drops));
        }
        out.extend_from_slice(&f.finish(&drops));
        assert_eq!(out, b"a0\nc2\ne4");
    }
}
