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

/// Smallest line we expect on average; used to pre-size the index from the input
/// size so it does not rehash (and briefly double its memory) on a peak day.
const BYTES_PER_EVENT_ESTIMATE: u64 = 160;
/// Cap for pre-sizing: ~100 million events. Beyond it the map grows as usual.
const MAX_PRESIZE: u64 = 100_000_000;

impl DedupIndex {
    /// An index sized for an input of `input_size` bytes.
    pub fn with_input_size(input_size: u64, seed: u64) -> Self {
        let cap = (input_size / BYTES_PER_EVENT_ESTIMATE).min(MAX_PRESIZE) as usize;
        DedupIndex {
            map: IdMap::with_capacity_and_hasher(cap, Default::default()),
            seed,
        }
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
        let mut ix = DedupIndex::with_input_size(0, 7);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::Duplicate);
        assert_eq!(ix.len(), 1);
    }

    #[test]
    fn same_id_different_payload_is_a_collision() {
        let mut ix = DedupIndex::with_input_size(0, 7);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.observe(b"e1", b"{\"a\":2}"), Seen::Collision);
    }

    #[test]
    fn different_ids_are_distinct_events() {
        let mut ix = DedupIndex::with_input_size(0, 7);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.observe(b"e2", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.len(), 2);
    }

    #[test]
    fn presizing_avoids_growth() {
        let mut ix = DedupIndex::with_input_size(160 * 10_000, 1);
        let cap = ix.map.capacity();
        assert!(cap >= 10_000);
        for i in 0..10_000u32 {
            ix.observe(&i.to_le_bytes(), &i.to_be_bytes());
        }
        assert_eq!(ix.map.capacity(), cap);
    }

    #[test]
    fn hex_is_lowercase_and_padded() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
