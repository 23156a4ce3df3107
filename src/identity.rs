//! Identity: the input's SHA-256, and the per-event dedup index.
//!
//! The index maps a 64-bit digest of each `event_id` to a 128-bit digest of the
//! event's canonical form (never the id or the payload themselves), 24 bytes of
//! payload per distinct event. The digests are seeded per run, so nobody can craft
//! collisions in advance. A collision can only err towards refusing a file, never
//! towards silently collapsing two different events:
//! - two ids sharing an id digest with different canonical digests look like an
//!   `id_collision` and refuse the file (a false refusal, safe);
//! - two events are collapsed only if their canonical digests are equal, and since
//!   the canonical form contains the `event_id`, that needs a 128-bit collision.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use nohash_hasher::NoHashHasher;
use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64_with_seed};

/// What the index says about an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// First occurrence of this `event_id`.
    New,
    /// Same `event_id`, same canonical form: a duplicate to collapse.
    Duplicate,
    /// Same `event_id`, different canonical form: refuse the file.
    Collision,
}

/// Keys are already uniform digests, so the map must not hash them again.
type IdMap = HashMap<u64, [u64; 2], BuildHasherDefault<NoHashHasher<u64>>>;

/// Fixed-size entry per distinct `event_id`.
pub struct DedupIndex {
    map: IdMap,
    seed: u64,
}

/// Headroom over an estimated event count, so a slightly low estimate does not
/// trigger a rehash (which briefly holds the old and the new table together).
const PRESIZE_HEADROOM: f64 = 1.1;

impl DedupIndex {
    /// An index with room for `events` distinct events without growing.
    pub fn with_capacity(events: usize, seed: u64) -> Self {
        DedupIndex {
            map: IdMap::with_capacity_and_hasher(events, Default::default()),
            seed,
        }
    }

    /// Estimate the distinct events of an input of `input_size` bytes from a sample
    /// of its start (the first chunk): lines in a day's file have similar lengths.
    pub fn estimate_events(input_size: u64, sample: &[u8]) -> usize {
        let lines = sample.iter().filter(|&&b| b == b'\n').count().max(1);
        let avg = (sample.len() / lines).max(1) as f64;
        (input_size as f64 / avg * PRESIZE_HEADROOM) as usize + 1024
    }

    /// Record an event by its id and canonical bytes.
    pub fn observe(&mut self, event_id: &[u8], canonical: &[u8]) -> Seen {
        let key = xxh3_64_with_seed(event_id, self.seed);
        let d = xxh3_128_with_seed(canonical, self.seed);
        let value = [d as u64, (d >> 64) as u64];
        match self.map.entry(key) {
            Entry::Vacant(v) => {
                v.insert(value);
                Seen::New
            }
            Entry::Occupied(o) if *o.get() == value => Seen::Duplicate,
            Entry::Occupied(_) => Seen::Collision,
        }
    }

    /// Distinct event ids seen.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Hex form of a SHA-256 digest.
pub fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_canonical_form_is_a_duplicate() {
        let mut ix = DedupIndex::with_capacity(0, 7);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::Duplicate);
        assert_eq!(ix.len(), 1);
    }

    #[test]
    fn same_id_different_payload_is_a_collision() {
        let mut ix = DedupIndex::with_capacity(0, 7);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.observe(b"e1", b"{\"a\":2}"), Seen::Collision);
    }

    #[test]
    fn different_ids_are_distinct_events() {
        let mut ix = DedupIndex::with_capacity(0, 7);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.observe(b"e2", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.len(), 2);
    }

    #[test]
    fn presizing_avoids_growth() {
        let mut ix = DedupIndex::with_capacity(10_000, 1);
        let cap = ix.map.capacity();
        assert!(cap >= 10_000);
        for i in 0..10_000u32 {
            ix.observe(&i.to_le_bytes(), &i.to_be_bytes());
        }
        assert_eq!(ix.map.capacity(), cap);
    }

    #[test]
    fn estimate_scales_the_sample_to_the_input() {
        let sample = b"0123456789\n".repeat(100); // 11-byte lines
        let est = DedupIndex::estimate_events(11_000_000, &sample);
        assert!((1_100_000..1_250_000).contains(&est), "{est}");
        // A sample without a newline (one giant line) gives a small estimate.
        assert!(DedupIndex::estimate_events(1 << 30, &[b'x'; 4096]) < 300_000);
    }

    #[test]
    fn hex_is_lowercase_and_padded() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
