//! The dedup index of `landing`: which events a run has already accepted, in bounded
//! memory. Pure data structures over bytes and local scratch files: no store, no
//! async runtime, no contract (the engine hands it digests of canonical events).
//!
//! - [`identity`]: the digests of an event (its id and its canonical form), the
//!   fixed-size in-memory index that says whether an event is new, a copy, or a
//!   suspect whose full id must be compared, and the table's memory (huge pages
//!   where they pay, a prefault thread).
//! - [`spill`]: when the index reaches its share of the memory budget, sorted runs of
//!   digests in a scratch directory per run, a fingerprint table that keeps deciding
//!   while it has room, and the merge that decides per id exactly as the index
//!   would have.

// `DedupIndex::len` counts the distinct ids a run accepted, for its report; no
// caller asks whether an index is empty.
#![allow(clippy::len_without_is_empty)]

pub mod identity;
pub mod spill;
