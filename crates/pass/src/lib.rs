//! The line pass of `landing`: from the bytes of an input to the decisions of a
//! sequential pass, on both cores. It frames lines with the contract's framer, packs
//! them into batches, checks them on worker threads, sequences them in input order
//! against the dedup index (spilling it when it outgrows its share), and settles what
//! one pass cannot decide alone (a spill's merge, the full ids of suspects) before
//! the engine publishes anything.
//!
//! - [`batch`]: frame a chunk's lines into a batch and check a batch (pure).
//! - [`workers`]: the worker threads that check the batches the dealer deals them.
//! - [`validator`]: the sequencer: the dedup index, the reject cap, the published
//!   bytes and quarantine records, the first refusal in line order, a spill.
//! - [`spill_plan`]: when a sequencer spills its index, and how its share is cut.
//! - [`scan`]: the one pass over an input: read, hash, decode, frame, check, sequence.
//! - [`resolve`]: after the pass: merge a spilled index, compare suspects' full ids.
//! - [`replay`]: a spilled run's second read of the input, writing what the merge kept.
//! - [`filter`]: the staged output's lines less those the merge dropped (second pass).
//! - [`whole`]: the three steps on one thread over an input held in memory.
//! - [`hook`]: the crash points of a run and the test hooks the pass takes.
//! - [`report`]: what the pass reports for the run's summary (refusals, rejects, spill).
//!
//! It builds on `landing-contract` (the rules of a line), `landing-index` (the dedup
//! index and its spill), `landing-compression` (decoding compressed inputs),
//! `landing-store` (the reader of an object), `landing-terminal` (a pass's progress)
//! and `landing-error`. It knows nothing of the run around it: no settings, lease,
//! checkpoint, lake layout, staging, publish or commit log; the engine (above it)
//! hands it its limits, its spill plan and its hooks, and writes what it decides.

pub mod batch;
pub mod filter;
pub mod hook;
pub mod replay;
pub mod report;
pub mod resolve;
pub mod scan;
pub mod spill_plan;
pub mod validator;
pub mod whole;
pub mod workers;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use time::OffsetDateTime;

// The layers below, under the names the pass's modules use for them.
use landing_compression as compression;
use landing_contract as contract;
use landing_error as error;
use landing_index::{identity, spill};
use landing_store as store;
use landing_terminal as progress;

/// Per-process randomness from std's randomly keyed hasher (no extra dependency).
pub fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(OffsetDateTime::now_utc().unix_timestamp_nanos() as u128);
    h.finish()
}
