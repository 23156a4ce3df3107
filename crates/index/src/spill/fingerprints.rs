//! The fingerprint table: what the index knew, in 8 bytes an event, so a spilled run
//! goes on deciding copies during its pass instead of holding every line back.
//!
//! Each slot holds 32 bits of the id digest and 32 bits of the canonical digest, in
//! an open-addressing table whose home slot comes from the id digest's high bits
//! (as the index's does). Every event kept so far is in it, so:
//! - an id fingerprint absent from the probe run means the id digest is new:
//!   certain, the same call the index makes;
//! - both fingerprints present is taken for a copy. It may be wrong (two events
//!   whose 64 bits of fingerprint agree), so the line is still recorded, and the
//!   merge checks every such call against the exact digests: a wrong one fails
//!   the run before anything is published;
//! - an id fingerprint present with another canonical fingerprint is kept and
//!   recorded: the merge decides it as it decides any recorded line (a first
//!   occurrence, or a suspect whose full id is compared).

use crate::identity::{prefetch_slot, zeroed_table, Digests, Prefault};

/// What the table says about an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Its id digest was never seen: a first occurrence.
    New,
    /// Both fingerprints were seen together: taken for a copy (the merge checks).
    Copy,
    /// Its id fingerprint was seen with another canonical fingerprint: kept, and
    /// decided by the merge.
    Kept,
}

/// Linear probing stays short below this load (as the index's).
const MAX_LOAD: f64 = 0.85;

/// The table of one spilled run.
pub struct Fingerprints {
    slots: Vec<u64>,
    len: usize,
    /// Events it takes before it is full.
    room: usize,
    /// Bits of the canonical fingerprint kept (32; fewer only in tests).
    value_mask: u64,
    prefault: Option<Prefault>,
}

impl Fingerprints {
    /// A table of at most `bytes` (room for 85% of its slots).
    pub fn within(bytes: usize) -> Fingerprints {
        let slots = (bytes / 8).max(16);
        Fingerprints::with_slots(slots, (slots as f64 * MAX_LOAD) as usize)
    }

    /// A table with room for exactly `events` (tests of the spill).
    pub fn with_room(events: usize) -> Fingerprints {
        let slots = (events as f64 / MAX_LOAD) as usize + 16;
        Fingerprints::with_slots(slots, events)
    }

    fn with_slots(slots: usize, room: usize) -> Fingerprints {
        let slots = zeroed_table::<u64>(slots);
        let prefault = Prefault::start(&slots);
        Fingerprints {
            slots,
            len: 0,
            room,
            value_mask: u64::from(u32::MAX),
            prefault,
        }
    }

    /// Test hook: keep only `bits` of the canonical fingerprint (0 to 32), so the
    /// table takes distinct events for copies and the merge must catch it.
    pub fn with_value_bits(mut self, bits: u32) -> Fingerprints {
        self.value_mask = match bits {
            32.. => u64::from(u32::MAX),
            b => (1u64 << b) - 1,
        };
        self
    }

    /// Bytes the table holds.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.slots.as_slice())
    }

    /// Has it taken all the events it has room for?
    pub fn is_full(&self) -> bool {
        self.len >= self.room
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Events it takes before it is full.
    pub fn room(&self) -> usize {
        self.room
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot of an event: id fingerprint (never 0, so 0 marks an empty slot)
    /// over canonical fingerprint.
    fn slot(&self, d: &Digests) -> u64 {
        let id = (d.key() & u64::from(u32::MAX)).max(1);
        id << 32 | (d.value()[0] & self.value_mask)
    }

    /// Home slot: the high bits of the id digest × slots; the fingerprint is its low
    /// bits, so a probe run compares bits the home did not already decide.
    fn home(&self, d: &Digests) -> usize {
        ((u128::from(d.key()) * self.slots.len() as u128) >> 64) as usize
    }

    /// Start loading the slot `d` will probe.
    pub fn prefetch(&self, d: &Digests) {
        prefetch_slot(&self.slots, self.home(d));
    }

    /// Call an event and remember it unless it is taken for a copy. The caller
    /// stops inserting once the table [`is_full`](Fingerprints::is_full): its room is
    /// below its slots, so a probe always ends at an empty slot.
    pub fn insert(&mut self, d: Digests) -> Call {
        let want = self.slot(&d);
        let n = self.slots.len();
        let mut i = self.home(&d);
        let mut known_id = false;
        loop {
            let s = self.slots[i];
            if s == 0 {
                self.slots[i] = want;
                self.len += 1;
                return if known_id { Call::Kept } else { Call::New };
            }
            if s == want {
                return Call::Copy;
            }
            known_id |= s >> 32 == want >> 32;
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }
}

impl Drop for Fingerprints {
    fn drop(&mut self) {
        // The thread must be done with the table's address before it is freed.
        if let Some(p) = self.prefault.take() {
            p.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Digester;

    fn d(id: u32, payload: u32) -> Digests {
        Digester::new(7).digest(&id.to_le_bytes(), format!("{id}:{payload}").as_bytes())
    }

    #[test]
    fn new_copy_and_kept_are_called_as_the_index_calls_them() {
        let mut t = Fingerprints::with_room(100);
        assert_eq!(t.insert(d(1, 0)), Call::New);
        assert_eq!(t.insert(d(2, 0)), Call::New);
        assert_eq!(t.insert(d(1, 0)), Call::Copy);
        assert_eq!(t.insert(d(1, 1)), Call::Kept);
        // Both forms of id 1 are remembered now.
        assert_eq!(t.insert(d(1, 1)), Call::Copy);
        assert_eq!(t.insert(d(1, 0)), Call::Copy);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn every_event_inserted_is_found_again_until_full() {
        let mut t = Fingerprints::with_room(5000);
        for i in 0..5000 {
            assert!(!t.is_full());
            assert_eq!(t.insert(d(i, 0)), Call::New, "event {i}");
        }
        assert!(t.is_full());
        for i in 0..5000 {
            assert_eq!(t.insert(d(i, 0)), Call::Copy, "event {i}");
        }
        assert_eq!(t.len(), 5000);
    }

    #[test]
    fn ids_sharing_a_digest_are_kept_not_copies() {
        let dg = Digester::new(7).with_key_bits(2);
        let mut t = Fingerprints::with_room(1000);
        let mut kept = 0;
        for i in 0..1000u32 {
            match t.insert(dg.digest(&i.to_le_bytes(), &i.to_be_bytes())) {
                Call::New => {}
                Call::Kept => kept += 1,
                Call::Copy => panic!("event {i} is not a copy"),
            }
        }
        // Three id digests: all but the first of each are kept for the merge.
        assert_eq!(kept, 997);
    }

    #[test]
    fn no_canonical_bits_takes_every_known_id_for_a_copy() {
        let dg = Digester::new(7).with_key_bits(2);
        let mut t = Fingerprints::with_room(100).with_value_bits(0);
        assert_eq!(t.insert(dg.digest(b"a", b"1")), Call::New);
        let copies = (0..50u32)
            .filter(|i| t.insert(dg.digest(&i.to_le_bytes(), b"other")) == Call::Copy)
            .count();
        // Three id digests: only the first event of each other digest is new.
        assert!(copies >= 48, "{copies}");
    }

    #[test]
    fn a_table_within_bytes_fits_them_and_fills_at_85_percent() {
        let t = Fingerprints::within(8 << 20);
        assert!(t.bytes() <= 8 << 20, "{}", t.bytes());
        assert_eq!(t.room, ((1usize << 20) as f64 * 0.85) as usize);
    }
}
