//! `verify --deep`'s read of a published object: the landing's own pass (both
//! cores, the dedup index spilling past its share of the memory budget, the merge
//! and the id check), with no hash and nothing written, and each accepted line
//! compared with its canonical form. A published object is what a landing of it
//! would publish again unchanged: every line accepted, none a copy, each already
//! canonical. What differs is counted here; `audit` words the findings.

use std::path::PathBuf;
use std::sync::Arc;

use super::batch::RawForm;
use super::ctx::new_run_id;
use super::resolve::{digester, resolve};
use super::scan::{scan, Limits, Scan};
use super::spill_plan::SpillPlan;
use super::validator::{Counts, Sequencer};
use crate::contract::Contract;
use crate::error::Result;
use crate::hook::Hooks;
use crate::progress::Progress;
use crate::store::ObjectReader;
use crate::summary::{Refusal, SpillReport};

/// A published line is at most this long: longer than any `--max-line-bytes` a
/// landing takes, so only a damaged object has one.
const MAX_PUBLISHED_LINE: usize = 64 << 20;

/// How much a deep read may hold, and where its index spills.
#[derive(Debug, Clone)]
pub struct Budget {
    /// The index's share of the memory budget (`None`: it never spills).
    pub share: Option<u64>,
    pub scratch_dir: PathBuf,
    /// Test hooks (`spill_every`, `spill_replay`); normally none.
    pub hooks: Hooks,
}

/// What one read of a published object found.
#[derive(Debug, Clone)]
pub struct Published {
    /// Accepted lines, lines the contract rejects, and later copies of an event.
    pub counts: Counts,
    /// The first rejected line, and the first copy of an earlier event.
    pub first_reject: Option<u64>,
    pub first_duplicate: Option<u64>,
    /// What stopped the read early: a line with a prohibited field, two lines of one
    /// identity with other content (`IdCollision`), or a broken compressed stream.
    pub refusal: Option<Refusal>,
    /// Accepted lines not in their canonical form; a last line without newline.
    pub raw: RawForm,
    /// Physical lines read, blank ones included.
    pub lines: u64,
    /// What the index's spill cost, if it spilled.
    pub spill: Option<SpillReport>,
}

/// Read one published object through the landing's pass. `reread` opens it again
/// (the id check of suspects reads the lines it needs a second time).
pub async fn read_published<F, Fut>(
    reader: ObjectReader,
    location: &str,
    contract: Arc<Contract>,
    budget: &Budget,
    progress: Progress,
    reread: F,
) -> Result<Published>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<ObjectReader>>,
{
    let plan = SpillPlan::of(
        budget.share,
        &budget.scratch_dir,
        &new_run_id(),
        budget.hooks.pass(),
    );
    // No cap: every rejected line is counted, none refuses the object.
    let seq = Sequencer::new(contract.clone(), u64::MAX, reader.size).with_spill(plan);
    let d = digester(budget.hooks.pass());
    let limits = Limits {
        max_line_bytes: MAX_PUBLISHED_LINE,
        max_decompressed: u64::MAX,
    };
    let (_, seq) = scan(
        reader,
        location,
        progress,
        limits,
        contract.clone(),
        Scan::Verify(seq),
        d,
        false,
    )
    .await?;
    let mut seq = seq.ok_or_else(|| crate::Error::internal("verify", location, "no validator"))?;
    let resolution = resolve(
        &mut seq,
        &contract,
        d,
        MAX_PUBLISHED_LINE,
        location,
        budget.hooks.pass(),
        reread,
    )
    .await?;
    Ok(Published {
        counts: seq.counts(),
        first_reject: seq.first_rejects().first().map(|r| r.line),
        first_duplicate: seq.first_duplicate(),
        refusal: seq.refusal().cloned(),
        raw: seq.raw_form(),
        lines: seq.lines(),
        spill: resolution.spill,
    })
}
