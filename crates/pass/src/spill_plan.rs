//! When and how a sequencer spills its dedup index ([`crate::spill`]): its share
//! of the budget, and how that share is cut between the index, the fingerprint
//! table after it, the record buffers and the merge's bitsets.

use std::path::PathBuf;

use crate::hook::PassHooks;
use crate::identity::DedupIndex;
use crate::spill::{Fingerprints, Record};

/// Where and when a sequencer spills its index (see [`crate::spill`]).
#[derive(Debug, Clone)]
pub struct SpillPlan {
    pub scratch_dir: PathBuf,
    pub run_id: String,
    /// The index's share of the run's memory budget, bytes.
    pub share: usize,
    /// Test hook: spill every this many distinct events (and records).
    pub every: Option<usize>,
    pub hooks: PassHooks,
}

impl SpillPlan {
    /// The plan of an index whose share of the budget is `share` (`None`: no budget,
    /// so no spill unless a test hook says every N events).
    pub fn of(
        share: Option<u64>,
        scratch_dir: &std::path::Path,
        run_id: &str,
        hooks: PassHooks,
    ) -> Option<SpillPlan> {
        if share.is_none() && hooks.spill_every.is_none() {
            return None;
        }
        Some(SpillPlan {
            scratch_dir: scratch_dir.to_owned(),
            run_id: run_id.to_owned(),
            share: share.map_or(usize::MAX, |s| usize::try_from(s).unwrap_or(usize::MAX)),
            every: hooks.spill_every,
            hooks,
        })
    }

    /// The index may take three quarters of the share; the rest is the buffer the
    /// index is written out through when it spills.
    pub fn index_bytes(&self) -> usize {
        self.share / 4 * 3
    }

    pub fn index_events(&self) -> usize {
        self.every
            .unwrap_or_else(|| DedupIndex::events_within(self.index_bytes()))
            .max(1)
    }

    /// Records buffered before a run is written, leaving room for the bitsets of the
    /// merge (a bit per input line and per output line, `lines` estimated) and for
    /// the fingerprint table while it lives (`table` bytes).
    pub fn records_per_run(&self, lines: usize, table: usize) -> usize {
        self.every.unwrap_or_else(|| {
            let bitsets = lines / 4;
            (self.share.saturating_sub(bitsets + table) / Record::BYTES).max(1024)
        })
    }

    /// The fingerprint table a spill makes: the index's room less the merge's
    /// bitsets, at 8 bytes an event, so the record buffers keep the rest of the
    /// share (a test hook: twice `every` events, or as many as it says).
    pub fn fingerprints(&self, lines: usize) -> Fingerprints {
        let table = match (self.hooks.spill_table, self.every) {
            (Some(n), _) => Fingerprints::with_room(n),
            (None, Some(every)) => Fingerprints::with_room(every.saturating_mul(2)),
            (None, None) => Fingerprints::within(self.index_bytes().saturating_sub(lines / 4)),
        };
        match self.hooks.fingerprint_bits {
            Some(bits) => table.with_value_bits(bits),
            None => table,
        }
    }
}
