//! Identity: the input's SHA-256 helpers, and the per-event dedup index.
//!
//! The index maps a 64-bit digest of each `event_id` to a 128-bit digest of the
//! event's canonical form (never the id or the payload themselves): 24 bytes per
//! distinct event in an open-addressing table kept at most 85% full, so about 28
//! to 33 bytes per event. The digests are seeded per run, so nobody can craft
//! collisions in advance. An id digest is never taken for the id itself:
//! - an event whose id digest is known but whose canonical digest is not is a
//!   [`Seen::Suspect`]: kept for now, and the pipeline compares the full ids (a
//!   second read of the input) before it refuses anything as an `id_collision`;
//! - two events are collapsed only if their canonical digests are equal, and since
//!   the canonical form contains the `event_id`, that needs a 128-bit collision.
//!
//! The table is a multimap: one id digest may hold several canonical digests (two
//! ids sharing a digest), all of them in the one probe run that starts at its home.
//!
//! On a peak day the table is gigabytes and every insert is a cache miss, so the
//! table is sized once from an estimate (no rehash peak), backed by huge pages where
//! the kernel allows, and callers [`DedupIndex::prefetch`] a slot a few events before
//! they [`DedupIndex::insert`] into it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64_with_seed};

/// What the index says about an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// First occurrence of this `event_id`.
    New,
    /// Same `event_id`, same canonical form: a duplicate to collapse.
    Duplicate,
    /// A known id digest with a canonical form not seen under it: the same id with
    /// another payload (refuse the file) unless two ids share the digest (keep it).
    /// Recorded like [`Seen::New`] until the full ids are compared.
    Suspect,
}

/// The digests of one event: (id digest, canonical digest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digests {
    key: u64,
    value: [u64; 2],
}

impl Digests {
    /// The digests of an event under the run's `seed`.
    pub fn of(seed: u64, event_id: &[u8], canonical: &[u8]) -> Digests {
        Digester::new(seed).digest(event_id, canonical)
    }

    /// Digests from their parts (read back from a spill run).
    pub fn from_parts(key: u64, value: [u64; 2]) -> Digests {
        Digests { key, value }
    }

    /// The id digest (never 0).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The canonical digest.
    pub fn value(&self) -> [u64; 2] {
        self.value
    }
}

/// How a run digests its events: the run's seed, and (tests only) how many bits of
/// the id digest are kept, so distinct ids can be made to share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digester {
    seed: u64,
    key_mask: u64,
}

impl Digester {
    pub fn new(seed: u64) -> Digester {
        Digester {
            seed,
            key_mask: u64::MAX,
        }
    }

    /// Test hook: keep only the low `bits` of each id digest (1 to 64).
    pub fn with_key_bits(self, bits: u32) -> Digester {
        let key_mask = match bits {
            0 | 64.. => u64::MAX,
            b => (1u64 << b) - 1,
        };
        Digester { key_mask, ..self }
    }

    pub fn digest(&self, event_id: &[u8], canonical: &[u8]) -> Digests {
        // 0 marks an empty slot; move the one id digest that collides with it.
        let key = (xxh3_64_with_seed(event_id, self.seed) & self.key_mask).max(1);
        let d = xxh3_128_with_seed(canonical, self.seed);
        Digests {
            key,
            value: [d as u64, (d >> 64) as u64],
        }
    }

    /// The id digest alone (the second read of a suspect's input).
    pub fn key(&self, event_id: &[u8]) -> u64 {
        (xxh3_64_with_seed(event_id, self.seed) & self.key_mask).max(1)
    }
}

/// One slot: id digest (0 = empty) and canonical digest.
type Slot = [u64; 3];

/// Fixed-size entry per distinct `event_id`. It holds digests only: the seed they
/// were made with belongs to whoever computes them ([`Digests::of`]).
pub struct DedupIndex {
    slots: Vec<Slot>,
    len: usize,
    /// The thread faulting the table's pages in ahead of the inserts, if any.
    prefault: Option<Prefault>,
}

/// Linear probing stays short below this load.
const MAX_LOAD: f64 = 0.85;

impl DedupIndex {
    /// An index with room for `events` distinct events without growing.
    pub fn with_capacity(events: usize) -> Self {
        let slots = ((events.max(16) as f64) / MAX_LOAD) as usize + 1;
        let slots = zeroed_table(slots);
        let prefault = Prefault::start(&slots);
        DedupIndex {
            slots,
            len: 0,
            prefault,
        }
    }

    /// Estimate the distinct events of an input of `input_size` bytes from its
    /// first batch: `lines` lines whose canonical forms total `canonical_bytes`
    /// (lines in a day's file have similar lengths). 10% headroom, so a slightly
    /// low estimate does not trigger a rehash (which briefly holds the old and the
    /// new table together); an average below 64 bytes counts as 64, so a batch of
    /// short odd lines cannot size a huge table.
    pub fn estimate_events(input_size: u64, lines: usize, canonical_bytes: usize) -> usize {
        let avg = (canonical_bytes as u64 / lines.max(1) as u64).max(64);
        (input_size / avg * 11 / 10) as usize + 1024
    }

    /// Home slot of a key: the high bits of key × capacity (uniform for any size).
    fn home(&self, key: u64) -> usize {
        ((key as u128 * self.slots.len() as u128) >> 64) as usize
    }

    /// Start loading the slot `d` will probe, so a later insert finds it in cache.
    pub fn prefetch(&self, d: &Digests) {
        prefetch_slot(&self.slots, self.home(d.key));
    }

    /// Record an event by its digests.
    pub fn insert(&mut self, d: Digests) -> Seen {
        if (self.len + 1) as f64 > self.slots.len() as f64 * MAX_LOAD {
            self.grow();
        }
        let n = self.slots.len();
        let mut i = self.home(d.key);
        let mut known_id = false;
        loop {
            let slot = &mut self.slots[i];
            if slot[0] == 0 {
                *slot = [d.key, d.value[0], d.value[1]];
                self.len += 1;
                return if known_id { Seen::Suspect } else { Seen::New };
            }
            if slot[0] == d.key {
                if slot[1..] == d.value {
                    return Seen::Duplicate;
                }
                known_id = true;
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }

    /// Would the next insert grow the table?
    pub fn would_grow(&self) -> bool {
        (self.len + 1) as f64 > self.slots.len() as f64 * MAX_LOAD
    }

    /// Every entry, in no particular order (a spill dumps the index).
    pub fn entries(&self) -> impl Iterator<Item = Digests> + '_ {
        self.slots.iter().filter(|s| s[0] != 0).map(|s| Digests {
            key: s[0],
            value: [s[1], s[2]],
        })
    }

    /// Bytes the table holds (the memory budget counts them).
    pub fn table_bytes(&self) -> usize {
        std::mem::size_of_val(self.slots.as_slice())
    }

    /// Bytes a table for `events` distinct events takes.
    #[cfg(test)]
    pub fn bytes_for(events: usize) -> usize {
        (((events.max(16) as f64) / MAX_LOAD) as usize + 1) * std::mem::size_of::<Slot>()
    }

    /// Distinct events a table of at most `bytes` holds.
    pub fn events_within(bytes: usize) -> usize {
        ((bytes / std::mem::size_of::<Slot>()) as f64 * MAX_LOAD) as usize
    }

    /// An estimate was low: move to a table half as large again.
    fn grow(&mut self) {
        let bigger = DedupIndex::with_capacity(self.slots.len() * 3 / 2);
        // Dropping the old table (below) first stops and joins its prefault thread.
        let old = std::mem::replace(self, bigger);
        // Entries sharing an id digest each take a slot of their own again.
        for d in old.entries() {
            self.insert(d);
        }
    }

    /// Distinct event ids seen.
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots allocated (for tests of sizing).
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        (self.slots.len() as f64 * MAX_LOAD) as usize
    }
}

impl Drop for DedupIndex {
    fn drop(&mut self) {
        // The thread must be done with the table's address before it is freed.
        if let Some(p) = self.prefault.take() {
            p.stop();
        }
    }
}

/// A spare thread that asks the kernel to fault the table in, front to back, so the
/// inserts (one thread, on the critical path) rarely wait for the kernel to zero a
/// fresh page: on a peak day that is over a GiB of first touches.
/// `MADV_POPULATE_WRITE` (Linux 5.14) maps zeroed pages without accessing the
/// memory, so it never races with the inserts: a page already there is left as is.
pub(crate) struct Prefault {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Prefault {
    /// Stop faulting and wait for the thread: call it before the table is freed.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }

    /// Faulted per call, so a drop waits at most for one piece.
    const PIECE: usize = 16 << 20;
    /// Smaller tables are faulted in by the inserts.
    const MIN_BYTES: usize = 8 << 20;

    #[cfg(target_os = "linux")]
    pub(crate) fn start<T>(table: &[T]) -> Option<Prefault> {
        let bytes = std::mem::size_of_val(table);
        if bytes < Self::MIN_BYTES {
            return None; // small: faulting it in costs less than a thread
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (start, stop2) = (table.as_ptr() as usize, stop.clone());
        let thread = std::thread::Builder::new()
            .name("index-prefault".into())
            .spawn(move || {
                let page = 4096;
                let (first, end) = ((start + page - 1) & !(page - 1), start + bytes);
                let mut at = first;
                while at < end && !stop2.load(Ordering::Relaxed) {
                    let len = Self::PIECE.min((end - at) & !(page - 1));
                    if len == 0 {
                        break;
                    }
                    // SAFETY: [at, at+len) lies inside the table, which outlives this
                    // thread (DedupIndex::drop joins it first). MADV_POPULATE_WRITE only
                    // maps pages, never changes their contents. An error (an older
                    // kernel: EINVAL) just ends the prefault; inserts fault as before.
                    let r = unsafe {
                        libc::madvise(at as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE)
                    };
                    if r != 0 {
                        break;
                    }
                    at += len;
                }
            })
            .ok()?;
        Some(Prefault { stop, thread })
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn start<T>(_table: &[T]) -> Option<Prefault> {
        None
    }
}

/// Start loading `table[i]` into the cache (a table's slot a few events ahead).
pub(crate) fn prefetch_slot<T>(table: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = table.as_ptr().wrapping_add(i).cast::<i8>();
        // SAFETY: a prefetch is a hint; it never faults, even on a bad address
        // (and callers pass a slot inside the table).
        #[allow(unused_unsafe)]
        unsafe {
            std::arch::x86_64::_mm_prefetch(p, std::arch::x86_64::_MM_HINT_T0)
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (table, i);
}

/// Tables from this size on are offered to transparent huge pages. Below it they
/// do not pay: on the 5 M-event day (a 140 MiB table) five alternating pairs took
/// the same median wall time with and without them (1.83 s, 1.86 s), but a fault on
/// a huge page may compact memory first (`defrag` is `madvise` by default), and the
/// run's system time swung from 0.52 s to 1.43 s with them, 0.68-0.78 s without.
pub(crate) const HUGE_PAGES_FROM: usize = 1 << 30;

/// A zeroed table. `vec!` of zeroes comes from calloc, so pages are only touched
/// when used; on Linux a table of [`HUGE_PAGES_FROM`] or more is also offered to
/// transparent huge pages, which cuts the TLB misses of random inserts into a
/// multi-GiB table.
pub(crate) fn zeroed_table<T: Clone + Default>(slots: usize) -> Vec<T> {
    // `T::default()` is all zero bytes for the slot types here (u64 words), so
    // `vec!` takes the zeroed allocation.
    let table = vec![T::default(); slots];
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = slots * std::mem::size_of::<T>();
        if bytes >= HUGE_PAGES_FROM {
            let start = table.as_ptr() as usize;
            let aligned = (start + HUGE - 1) & !(HUGE - 1);
            let len = (start + bytes - aligned) & !(HUGE - 1);
            // SAFETY: the range lies inside the table's own allocation; MADV_HUGEPAGE
            // only changes how the kernel backs it, never its contents. A failure
            // (THP disabled) is harmless and ignored.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            }
        }
    }
    table
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

    impl DedupIndex {
        /// Record an event by its id and canonical bytes, digested under seed 7.
        fn observe(&mut self, event_id: &[u8], canonical: &[u8]) -> Seen {
            self.insert(Digests::of(7, event_id, canonical))
        }
    }

    #[test]
    fn same_canonical_form_is_a_duplicate() {
        let mut ix = DedupIndex::with_capacity(0);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::Duplicate);
        assert_eq!(ix.len(), 1);
    }

    #[test]
    fn same_id_different_payload_is_a_suspect() {
        let mut ix = DedupIndex::with_capacity(0);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.observe(b"e1", b"{\"a\":2}"), Seen::Suspect);
        // Both forms are known now: either one again is a duplicate.
        assert_eq!(ix.observe(b"e1", b"{\"a\":2}"), Seen::Duplicate);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::Duplicate);
        assert_eq!(ix.len(), 2);
    }

    #[test]
    fn ids_sharing_a_digest_keep_their_own_entries_through_growth() {
        let d = Digester::new(7).with_key_bits(2);
        let mut ix = DedupIndex::with_capacity(16);
        let mut suspects = 0;
        for i in 0..1000u32 {
            match ix.insert(d.digest(&i.to_le_bytes(), &i.to_be_bytes())) {
                Seen::New => {}
                Seen::Suspect => suspects += 1,
                Seen::Duplicate => panic!("event {i} is not a duplicate"),
            }
        }
        // Three digests for a thousand ids (1, 2, 3: 0 marks an empty slot and
        // becomes 1): all but the first of each are suspects.
        assert_eq!(suspects, 997);
        assert_eq!(ix.len(), 1000);
        for i in 0..1000u32 {
            let again = ix.insert(d.digest(&i.to_le_bytes(), &i.to_be_bytes()));
            assert_eq!(again, Seen::Duplicate);
        }
    }

    #[test]
    fn different_ids_are_distinct_events() {
        let mut ix = DedupIndex::with_capacity(0);
        assert_eq!(ix.observe(b"e1", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.observe(b"e2", b"{\"a\":1}"), Seen::New);
        assert_eq!(ix.len(), 2);
    }

    #[test]
    fn presizing_avoids_growth() {
        let mut ix = DedupIndex::with_capacity(10_000);
        let slots = ix.slots.len();
        for i in 0..10_000u32 {
            assert_eq!(ix.observe(&i.to_le_bytes(), &i.to_be_bytes()), Seen::New);
        }
        assert_eq!(ix.slots.len(), slots);
    }

    #[test]
    fn grows_past_an_estimate_and_keeps_every_entry() {
        let mut ix = DedupIndex::with_capacity(16);
        for i in 0..50_000u32 {
            assert_eq!(ix.observe(&i.to_le_bytes(), &i.to_be_bytes()), Seen::New);
        }
        assert_eq!(ix.len(), 50_000);
        for i in 0..50_000u32 {
            assert_eq!(
                ix.observe(&i.to_le_bytes(), &i.to_be_bytes()),
                Seen::Duplicate
            );
        }
        for i in 0..50_000u32 {
            assert_eq!(ix.observe(&i.to_le_bytes(), b"other"), Seen::Suspect);
        }
    }

    #[test]
    fn prefetch_then_insert_is_the_same_as_insert() {
        let mut ix = DedupIndex::with_capacity(100);
        let d = Digests::of(7, b"e1", b"x");
        ix.prefetch(&d);
        assert_eq!(ix.insert(d), Seen::New);
        assert_eq!(ix.observe(b"e1", b"x"), Seen::Duplicate);
    }

    #[test]
    fn estimate_scales_the_first_batch_to_the_input() {
        // 100 lines of 200 canonical bytes: 1.1 x (20 MB / 200 B) + 1024.
        assert_eq!(
            DedupIndex::estimate_events(20_000_000, 100, 20_000),
            111_024
        );
        // Short lines count as 64 bytes; an empty first batch does not divide by 0.
        assert_eq!(DedupIndex::estimate_events(6_400, 100, 1_000), 1_134);
        assert_eq!(DedupIndex::estimate_events(6_400, 0, 0), 1_134);
    }

    #[test]
    fn a_large_table_is_prefaulted_and_behaves_the_same() {
        let mut ix = DedupIndex::with_capacity(1_000_000); // 28 MiB of slots
        #[cfg(target_os = "linux")]
        assert!(ix.prefault.is_some());
        for i in 0..100_000u32 {
            assert_eq!(ix.observe(&i.to_le_bytes(), &i.to_be_bytes()), Seen::New);
        }
        for i in 0..100_000u32 {
            assert_eq!(
                ix.observe(&i.to_le_bytes(), &i.to_be_bytes()),
                Seen::Duplicate
            );
        }
        assert_eq!(ix.len(), 100_000);
        // Small tables get no thread.
        assert!(DedupIndex::with_capacity(1000).prefault.is_none());
        drop(ix); // joins the prefault thread
    }

    #[test]
    fn hex_is_lowercase_and_padded() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }

    #[test]
    fn digests_are_the_seeded_xxh3_halves_and_the_masked_id_hash() {
        // The reference: xxh3 itself, the 128-bit canonical digest split low, high.
        let wide = xxh3_128_with_seed(b"{\"a\":1}", 7);
        let d = Digests::of(7, b"e1", b"{\"a\":1}");
        assert_eq!(d.value(), [wide as u64, (wide >> 64) as u64]);
        assert_ne!(d.value()[1], 0, "the high half is kept");
        assert_eq!(d.key(), xxh3_64_with_seed(b"e1", 7).max(1));
        assert_eq!(Digester::new(7).key(b"e1"), d.key());
        assert_eq!(Digests::from_parts(5, [6, 8]).key(), 5);
        assert_eq!(Digests::from_parts(5, [6, 8]).value(), [6, 8]);
    }

    #[test]
    fn key_bits_keep_exactly_the_low_bits_of_the_id_digest() {
        // Three bits: id digests 0 to 7, and 0 (the empty-slot marker) becomes 1.
        let d = Digester::new(7).with_key_bits(3);
        let keys: std::collections::BTreeSet<u64> =
            (0..1000u32).map(|i| d.key(&i.to_le_bytes())).collect();
        assert_eq!(keys, (1..=7).collect());
        for i in 0..1000u32 {
            let id = i.to_le_bytes();
            assert_eq!(d.digest(&id, b"c").key(), d.key(&id));
            assert_eq!(d.key(&id), (xxh3_64_with_seed(&id, 7) & 7).max(1));
        }
        // 0 and 64 bits (or more) keep the whole digest.
        for bits in [0, 64, 65] {
            let whole = Digester::new(7).with_key_bits(bits);
            assert_eq!(whole.key(b"e1"), xxh3_64_with_seed(b"e1", 7).max(1));
        }
    }

    #[test]
    fn sizes_are_slots_of_24_bytes_kept_at_most_85_percent_full() {
        // 16 events at least: 16 / 0.85 = 18.8, so 18 + 1 = 19 slots of 24 bytes.
        assert_eq!(DedupIndex::bytes_for(0), 19 * 24);
        assert_eq!(DedupIndex::bytes_for(1000), 1177 * 24); // 1000 / 0.85 = 1176.5
        assert_eq!(DedupIndex::events_within(19 * 24), 16); // 19 x 0.85 = 16.15
        assert_eq!(DedupIndex::events_within(1177 * 24 + 23), 1000);
        let ix = DedupIndex::with_capacity(1000);
        assert_eq!(ix.table_bytes(), 1177 * 24);
        assert_eq!(ix.capacity(), 1000);
        let small = DedupIndex::with_capacity(0);
        assert_eq!(small.table_bytes(), 19 * 24);
        assert_eq!(small.capacity(), 16);
    }

    #[test]
    fn would_grow_says_when_the_next_insert_passes_85_percent() {
        // 19 slots: the 17th entry would make them 89% full (16 / 19 is 84%).
        let mut ix = DedupIndex::with_capacity(0);
        assert!(ix.is_empty());
        for i in 0..16u32 {
            assert!(!ix.would_grow(), "after {i} entries");
            assert_eq!(ix.observe(&i.to_le_bytes(), b"c"), Seen::New);
            assert!(!ix.is_empty());
        }
        assert!(ix.would_grow());
        assert_eq!(ix.table_bytes(), 19 * 24, "not grown yet");
        assert_eq!(ix.observe(b"x", b"c"), Seen::New);
        // Grown to a table for 19 x 3 / 2 = 28 events: 28 / 0.85 = 32.9, 33 slots.
        assert_eq!(ix.table_bytes(), 33 * 24);
        assert!(!ix.would_grow());
        assert_eq!(ix.len(), 17);
        assert_eq!(ix.entries().count(), 17);
    }
}
