//! What a run hands the line pass (`landing-pass`) from its settings: the limits of
//! a scan and where and when its index spills. The pass takes no `Config`; these are
//! the only settings it reads.

use landing_pass::scan::Limits;
use landing_pass::spill_plan::SpillPlan;

use crate::config::Config;
use crate::hook::Hooks;

/// What bounds a scan, from the run's settings.
pub(super) fn limits(cfg: &Config) -> Limits {
    Limits {
        max_line_bytes: cfg.max_line_bytes,
        max_decompressed: cfg.max_decompressed_bytes,
    }
}

/// Where and when this run's index spills: with a budget, past its share of it
/// (`crate::budget`); without one, never (unless a test hook says every N events).
pub(super) fn spill_plan(cfg: &Config, run_id: &str, hooks: Hooks) -> Option<SpillPlan> {
    SpillPlan::of(cfg.index_share(), &cfg.scratch_dir, run_id, hooks.pass())
}
