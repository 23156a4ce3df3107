//! `landing check`: the run's one pass and its resolution over an input, with
//! nothing written anywhere.

use super::ctx::{log_outcome, new_run_id, open_input};
use super::pass::{limits, spill_plan};
use super::resolve::{digester, resolve};
use super::scan::{scan, Scan};
use super::validator::Sequencer;
use crate::config::Config;
use crate::error::{Error, Result, Step, StepExt};
use crate::hook::Hooks;
use crate::progress::Terminal;
use crate::summary::{Action, Summary};

/// `landing check`: the same validation, nothing written anywhere.
pub async fn check(cfg: &Config, hooks: Hooks, terminal: &Terminal) -> Result<Summary> {
    let run_id = new_run_id();
    let input_location = cfg.input.to_string();
    let span = tracing::info_span!("check", run_id = %run_id, product = %cfg.product, input = %input_location);
    let _enter = span.enter();
    let (input, key) = open_input(cfg).await.at(Step::Connect, &input_location)?;
    let reader = input
        .read(&key, 0)
        .await
        .at(Step::Stream, &input_location)?;
    let plan = spill_plan(cfg, &run_id, hooks);
    let v =
        Sequencer::new(cfg.contract.clone(), cfg.max_rejected_lines, reader.size).with_spill(plan);
    let progress = terminal.progress("check", &cfg.input_name, reader.size, cfg.progress);
    let d = digester(hooks.pass());
    let (sha256, v) = scan(
        reader,
        &input_location,
        progress,
        limits(cfg),
        cfg.contract.clone(),
        Scan::Check(v),
        d,
        false,
    )
    .await
    .at(Step::Stream, &input_location)?;
    let mut v = v.ok_or_else(|| Error::internal("check", &input_location, "validator missing"))?;
    let reread = || input.read(&key, 0);
    let resolution = resolve(
        &mut v,
        &cfg.contract,
        d,
        cfg.max_line_bytes,
        &input_location,
        hooks.pass(),
        reread,
    )
    .await
    .at(Step::Stream, &input_location)?;
    let c = v.counts();
    let summary = Summary {
        input_sha256: sha256,
        accepted_rows: c.accepted,
        rejected_rows: c.rejected,
        duplicate_rows: c.duplicates,
        reason: v.refusal().cloned(),
        quarantine_reasons: Some(v.first_rejects().to_vec()),
        spill: resolution.spill,
        ..Summary::new(run_id, cfg.product.clone(), input_location, Action::Checked)
    };
    log_outcome(&summary);
    Ok(summary)
}
