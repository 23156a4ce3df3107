//! `landing verify`: whether what each checkpoint says is published is what the
//! lake holds (the findings are listed in the module map of `audit`).

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{json, Value};

use super::deep::deep_findings;
use super::finding::Finding;
use super::log_check::log_findings;
use super::{checkpointed, in_order, open_lake, AUDIT_CONCURRENCY};
use crate::checkpoint::{self, Current, Drift};
use crate::config::{AuditConfig, DeepConfig};
use crate::contract::Contract;
use crate::error::Result;
use crate::hook::Hooks;
use crate::layout::{Folders, Layout};
use crate::pipeline::Budget;
use crate::store::{Lake, Store};

/// The shallow checks: the published object exists with the recorded size and
/// ETag or file identity.
pub(super) async fn published_findings(
    lake: &dyn Store,
    layout: &Layout,
    cur: &Current,
) -> Result<Vec<Finding>> {
    let rec = &cur.record;
    let here = lake.location(&layout.raw);
    let Some(drift) = checkpoint::published_drift(lake, &layout.raw, rec).await? else {
        return Ok(Vec::new());
    };
    let (finding, detail) = match drift {
        Drift::Elsewhere => (
            "elsewhere",
            format!(
                "checkpoint names {} but this lake publishes it at {here}",
                rec.published_path
            ),
        ),
        Drift::Missing => ("missing", format!("{here} does not exist")),
        Drift::Size(size) => (
            "size",
            format!(
                "{here} has {size} bytes, the checkpoint recorded {}",
                rec.published_size
            ),
        ),
        Drift::Changed(version) => (
            "changed",
            format!(
                "{here} has the recorded size but not the recorded {} (it was rewritten or replaced)",
                version.name()
            ),
        ),
    };
    Ok(vec![Finding::new(&layout.input_name, finding, detail)])
}

/// What `verify` found of one checkpointed input.
struct Verified {
    findings: Vec<Finding>,
    /// The names its checkpoint gives to objects in the readers' zones (`raw/` and
    /// `quarantine/` keys).
    names: Vec<String>,
    /// Landed under another contract than the one in force.
    other_contract: Option<Finding>,
    /// Its checkpoint, when it reads (the log's checks compare with it).
    record: Option<checkpoint::Checkpoint>,
}

/// The notice for an input landed under another contract than `now`.
fn other_contract(name: &str, rec: &checkpoint::Checkpoint, now: &Contract) -> Option<Finding> {
    if rec.landed_under(now) {
        return None;
    }
    let then = rec.contract.as_ref().map_or_else(
        || "progress@1 (before contract files)".to_owned(),
        |s| {
            format!(
                "{}@{} ({})",
                s.name,
                s.version,
                s.sha256.get(..12).unwrap_or(&s.sha256)
            )
        },
    );
    let detail = format!(
        "landed under contract {then}; in force: {}; run --inbox --rehash re-lands it",
        now.label()
    );
    Some(Finding::new(name, "other_contract", detail))
}

/// Findings of one checkpointed input.
async fn verify_one(
    lake: &dyn Store,
    product: &str,
    name: &str,
    deep: Option<Budget>,
    contract: Option<Arc<Contract>>,
) -> Result<Verified> {
    let layout = Layout::new(product, name);
    let mut other = None;
    let mut record = None;
    let (findings, names) = match checkpoint::read(lake, &layout.checkpoint, product, name).await {
        Ok(Some(cur)) => {
            let layout = layout.published_as(cur.record.output_compression);
            let mut names = vec![layout.raw.clone()];
            if cur.record.quarantine_path.is_some() {
                names.push(layout.quarantine.clone());
            }
            other = contract
                .as_deref()
                .and_then(|c| other_contract(name, &cur.record, c));
            // Lines landed under another contract are checked against their own
            // rules by no one: --deep reads only those landed under this one.
            let deep_with = contract.zip(deep).filter(|_| other.is_none());
            let found = check_against_checkpoint(lake, &layout, &cur, deep_with).await?;
            record = Some(cur.record);
            (found, names)
        }
        Ok(None) => (Vec::new(), Vec::new()),
        Err(e @ crate::Error::Corrupt { .. }) => {
            let finding = Finding::new(name, "corrupt_checkpoint", e.to_string());
            // Whatever it published (in any stored form) is not an unnamed file:
            // that finding says enough.
            let mut names: Vec<String> = crate::compression::OutputCompression::ALL
                .into_iter()
                .map(|c| layout.raw_as(c))
                .collect();
            names.push(layout.quarantine.clone());
            (vec![finding], names)
        }
        Err(e) => return Err(e),
    };
    Ok(Verified {
        findings,
        names,
        other_contract: other,
        record,
    })
}

/// One checkpointed publish against the object its checkpoint names (and, with
/// `deep`, against the contract through the landing's own pass).
async fn check_against_checkpoint(
    lake: &dyn Store,
    layout: &Layout,
    cur: &Current,
    deep: Option<(Arc<Contract>, Budget)>,
) -> Result<Vec<Finding>> {
    let shallow = published_findings(lake, layout, cur).await?;
    // An object that is not the one the checkpoint describes: its lines say nothing more.
    let Some((contract, budget)) = deep.filter(|_| shallow.is_empty()) else {
        return Ok(shallow);
    };
    let mut all = shallow;
    all.extend(deep_findings(lake, layout, cur, &contract, &budget).await?);
    Ok(all)
}

/// Files in the product's readers' zones (`raw/`, `quarantine/`) that no checkpoint
/// names, and the job's own leftovers there.
async fn unnamed_findings(
    lake: &dyn Lake,
    product: &str,
    named: &HashSet<String>,
) -> Result<Vec<Finding>> {
    let f = Folders::of(product);
    let mut out = Vec::new();
    for folder in [&f.raw, &f.quarantine] {
        for file in lake.list(folder).await?.files {
            let key = format!("{folder}/{}", file.name);
            if !named.contains(&key) {
                let detail = format!(
                    "{} is in a readers' zone but no checkpoint names it",
                    lake.location(&key)
                );
                out.push(Finding::new(&file.name, "unnamed", detail));
            }
        }
    }
    let zones = [lake.location(&f.raw), lake.location(&f.quarantine)];
    for left in lake
        .leftovers(&[f.raw.clone(), f.quarantine.clone()])
        .await?
    {
        // On S3 staging lives outside the readers' zones: only what is inside counts.
        if zones.iter().any(|z| left.starts_with(&format!("{z}/"))) {
            let name = left.rsplit('/').next().unwrap_or(&left).to_owned();
            let detail = format!(
                "{left}: a run's temp file (in flight or crashed) or an earlier version's guard file; the input's next run removes it"
            );
            out.push(Finding::new(&name, "leftover", detail));
        }
    }
    Ok(out)
}

/// Objects `verify --deep` reads at once: each takes both cores already; two keep
/// the store's latency hidden between small objects.
pub const DEEP_READS: usize = 2;

/// One deep read's share of the budget: the process's, less its base, divided
/// among the `reads` at once (at most [`DEEP_READS`], which `DeepConfig::memory`
/// counts as its jobs; a lake of one published object gives it the whole budget),
/// less a run's buffers, as a landing's index share is.
fn budget(d: &DeepConfig, reads: usize) -> Budget {
    let memory = crate::budget::Memory {
        jobs: reads.clamp(1, d.memory.jobs.max(1)),
        ..d.memory
    };
    Budget {
        share: memory.index_share(0),
        scratch_dir: d.scratch_dir.clone(),
        hooks: Hooks {
            spill_every: d.spill_every,
            ..Hooks::default()
        },
    }
}

/// `landing verify`: one line per finding, then a totals line; exit 0 clean, 1 drift.
/// `deep`: also read every published object ([`DEEP_READS`] at once, sharing its
/// memory budget).
pub async fn verify(cfg: &AuditConfig, deep: Option<&DeepConfig>) -> Result<i32> {
    if deep.is_some() && cfg.contract.is_none() {
        return Err(crate::Error::Config(format!(
            "verify --deep needs the contract of product {:?}: give --contract or --contracts-dir",
            cfg.product
        )));
    }
    let contract = cfg.contract.clone();
    let lake = open_lake(cfg).await?;
    let names = checkpointed(&*lake, &cfg.product).await?;
    let checked = names.len();
    // --deep reads objects whole, each on both cores with its own index.
    let n = if deep.is_some() {
        DEEP_READS
    } else {
        AUDIT_CONCURRENCY
    };
    let budget = deep.map(|d| budget(d, n.min(names.len())));
    let all = in_order(&lake, &cfg.product, names, n, move |lake, p, name| {
        let (contract, budget) = (contract.clone(), budget.clone());
        async move { verify_one(&*lake, &p, &name, budget, contract).await }
    })
    .await?;
    let named: HashSet<String> = all.iter().flat_map(|v| v.names.iter().cloned()).collect();
    let others: Vec<Finding> = all
        .iter()
        .filter_map(|v| v.other_contract.clone())
        .collect();
    // The log is checked against the inputs whose object is what their checkpoint
    // says: a drifted one has its finding already, and its next run fixes both.
    let records: Vec<(String, checkpoint::Checkpoint)> = all
        .iter()
        .filter(|v| v.findings.is_empty())
        .filter_map(|v| Some((v.record.as_ref()?.input_name.clone(), v.record.clone()?)))
        .collect();
    let drifted: HashSet<String> = all
        .iter()
        .filter(|v| !v.findings.is_empty())
        .filter_map(|v| v.findings.first().map(|f| f.input_name.clone()))
        .collect();
    let mut every: Vec<Vec<Finding>> = all.into_iter().map(|v| v.findings).collect();
    every.push(unnamed_findings(&*lake, &cfg.product, &named).await?);
    every.push(log_findings(&*lake, &cfg.product, &records, &drifted).await?);
    for f in &others {
        if cfg.json {
            println!(
                "{}",
                serde_json::to_string(f).expect("a finding serialises")
            );
        } else {
            println!("{}: {}: {}", f.input_name, f.finding, f.detail);
        }
    }
    let mut total = 0usize;
    for findings in every {
        for f in findings {
            total += 1;
            if cfg.json {
                println!(
                    "{}",
                    serde_json::to_string(&f).expect("a finding serialises")
                );
            } else {
                println!("{}: {}: {}", f.input_name, f.finding, f.detail);
            }
        }
    }
    let summary: Value = json!({
        "lake": cfg.lake.to_string(),
        "product": cfg.product,
        "deep": deep.is_some(),
        "checked": checked,
        "findings": total,
        "other_contract": others.len(),
    });
    if cfg.json {
        println!("{summary}");
    } else {
        println!(
            "verified {} checkpointed inputs{}: {}{}",
            checked,
            if deep.is_some() { " (deep)" } else { "" },
            if total == 0 {
                "clean".to_owned()
            } else {
                format!("{total} findings")
            },
            if others.is_empty() {
                String::new()
            } else {
                format!(" ({} landed under another contract)", others.len())
            }
        );
    }
    Ok(if total == 0 {
        crate::EXIT_OK
    } else {
        crate::EXIT_FAILURE
    })
}
