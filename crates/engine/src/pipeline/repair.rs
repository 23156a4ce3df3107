//! The log's repair by any run of a product: the entry of a publish whose run died
//! between its publish and its entry, written from the pending entry the publish
//! carried as its label (`log_entry::pending`), under that input's lease.
//!
//! After its inputs, a run looks for such publishes where they can be: inputs whose
//! staging a run left behind (on S3 the staged object outlives the promote until the
//! run's cleanup; one listing of the product's staging, empty on a quiet lake), or,
//! where staging cannot say (a local lake), every lease of the product not released.
//! For each, it takes the lease as a run of that input would (a dead holder's is
//! taken over once it provably died or stayed unchanged for its TTL plus the margin,
//! within `--lease-wait`; a holder whose record moves is alive and writes its own
//! entry), then writes the entry only if the object is still that publish, its
//! quarantine came with it, no checkpoint names it and no entry since the
//! checkpoint's names it. It then sweeps what the dead run left, as the input's own
//! run would after a takeover. The checkpoint is left as it was: the input's next
//! run republishes, and its entry names the repaired one as replaced.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{stream, StreamExt};
use time::OffsetDateTime;
use tracing::{info, warn};

use super::ctx::new_run_id;
use super::leasing::{lease_options, lock_wait};
use super::Handles;
use crate::checkpoint;
use crate::commit_log::{self, Entry, LogKeys, REPLACED_LOOKBACK};
use crate::compression::OutputCompression;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::layout::{Folders, Layout};
use crate::lease::{Lease, LeaseRecord};
use crate::store::{get_small, Deadline, Gate, Lake, Store, Sweep, Version};
use crate::summary::{Repaired, Repairs};

/// Leases looked at, and waited for, at once.
const LOOKS_AT_ONCE: usize = 16;

/// What became of one input looked at.
enum Looked {
    Repaired(Repaired),
    /// Its lease is held by a run that may have died.
    Held,
    /// Nothing to write: no publish of a dead run lacks its entry, or a live run
    /// holds the lease and writes its own.
    Settled,
}

/// Repair the log of `cfg.product` after this process's runs of `landed` (inputs
/// whose own runs handle their leases). Reads only, on a quiet lake: one listing of
/// the product's staging (S3), or of its leases (a local lake).
pub async fn repair_log(
    cfg: &Config,
    lake: &Arc<dyn Lake>,
    handles: Handles<'_>,
    landed: &BTreeSet<String>,
) -> Result<Repairs> {
    let mut out = Repairs::default();
    let inputs = candidates(cfg, &**lake, landed).await?;
    // Looked at together: a wait for one holder's TTL is not paid once per input.
    let looked: Vec<(String, Result<Looked>)> = stream::iter(inputs)
        .map(|input| async move {
            let looked = match handles.shutdown.signal() {
                Some(_) => Ok(Looked::Held),
                None => look_at(cfg, lake, handles, &input).await,
            };
            (input, looked)
        })
        .buffered(LOOKS_AT_ONCE)
        .collect()
        .await;
    for (input, looked) in looked {
        match looked? {
            Looked::Repaired(r) => out.repaired.push(r),
            Looked::Held => out.pending.push(input),
            Looked::Settled => {}
        }
    }
    if !out.pending.is_empty() {
        warn!(inputs = ?out.pending, wait_secs = cfg.lease_wait.as_secs(), "inputs whose lease a run may have died holding, with its log entry missing: a run with --lease-wait of at least the TTL plus the margin repairs it (RUNBOOK, a missing log entry)");
    }
    Ok(out)
}

/// Inputs of the product that may have a publish without its entry, other than
/// `landed`, in name order.
async fn candidates(
    cfg: &Config,
    lake: &dyn Lake,
    landed: &BTreeSet<String>,
) -> Result<Vec<String>> {
    let folders = Folders::of(&cfg.product);
    let staged = lake
        .unsettled(&[folders.raw.clone(), folders.quarantine.clone()])
        .await?;
    if staged.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let leases = lake.list(&folders.locks).await?;
    let inputs = leases
        .files
        .iter()
        .filter_map(|f| Folders::lock_input(&f.name))
        .filter(|input| !landed.contains(*input))
        .filter(|input| match &staged {
            None => true,
            Some(names) => staged_for(&cfg.product, input, names),
        });
    Ok(inputs.map(str::to_owned).collect())
}

/// Is one of `names` (staged objects' last key segments) a key a run of `input`
/// writes?
fn staged_for(product: &str, input: &str, names: &[String]) -> bool {
    Layout::new(product, input)
        .written()
        .iter()
        .filter_map(|k| k.rsplit('/').next())
        .any(|n| names.iter().any(|s| s == n))
}

/// Take `input`'s lease if its holder is gone (or it was released unclean), and
/// write the entry its last publish lacks.
async fn look_at(
    cfg: &Config,
    lake: &Arc<dyn Lake>,
    handles: Handles<'_>,
    input: &str,
) -> Result<Looked> {
    let layout = Layout::new(&cfg.product, input);
    let Some(first) = get_small(&**lake, &layout.lock).await? else {
        return Ok(Looked::Settled);
    };
    match serde_json::from_slice::<LeaseRecord>(&first.bytes) {
        Ok(r) if r.released => return Ok(Looked::Settled),
        // A run of this machine holds it: it writes its own entry.
        Ok(r) if r.alive_here() => return Ok(Looked::Settled),
        Ok(_) => {}
        Err(e) => {
            warn!(input, error = %e, "a lease that does not parse; left alone");
            return Ok(Looked::Settled);
        }
    }
    let run_id = new_run_id();
    let deadline = Deadline::default();
    let gated = lake.with_run_gate(Gate::new(deadline.clone(), lock_wait(cfg)));
    let lease = match take(
        cfg,
        &gated,
        handles,
        &layout,
        &run_id,
        deadline,
        first.version,
    )
    .await?
    {
        Taken::Lease(lease) => lease,
        Taken::Alive => return Ok(Looked::Settled),
        Taken::Undecided => return Ok(Looked::Held),
    };
    let done = repair_input(cfg, &*gated, handles, &layout).await;
    // A run that takes a lease over sweeps what its holder left, as the input's own
    // run would: a later cheap skip of the input takes no lease and sweeps nothing.
    let clean = done.is_ok() && sweep(cfg, &*gated, &layout, &run_id).await;
    if let Err(e) = lease.release(clean).await {
        warn!(input, error = %e, "could not release the lease taken for a repair; it expires on its own");
    }
    Ok(match done? {
        Some(r) => Looked::Repaired(r),
        None => Looked::Settled,
    })
}

/// What became of an attempt to take a lease for a repair.
enum Taken {
    Lease(Lease),
    /// Its record changed: the holder is alive and writes its own entry (or it was
    /// released).
    Alive,
    /// Unchanged until the wait ran out or a signal came: maybe dead.
    Undecided,
}

/// Sweep the leftovers of `layout`'s input that `--sweep-age` allows; is nothing
/// left?
async fn sweep(cfg: &Config, lake: &dyn Lake, layout: &Layout, run_id: &str) -> bool {
    let others = Sweep::Others {
        older_than: cfg.sweep_age,
    };
    match lake.sweep(&layout.written(), run_id, others).await {
        Ok(report) => {
            if report.aborted_uploads + report.deleted_objects > 0 {
                info!(input = %layout.input_name, aborted_uploads = report.aborted_uploads, deleted_objects = report.deleted_objects, "swept leftovers of a dead run");
            }
            report.kept == 0
        }
        Err(e) => {
            warn!(input = %layout.input_name, error = %e, "could not sweep a dead run's leftovers; the input's next run does");
            false
        }
    }
}

/// The lease of `layout`'s input, as a waiting run would take it within
/// `--lease-wait`, except that a holder whose record changes is alive.
async fn take(
    cfg: &Config,
    lake: &Arc<dyn Lake>,
    handles: Handles<'_>,
    layout: &Layout,
    run_id: &str,
    deadline: Deadline,
    first: Version,
) -> Result<Taken> {
    let opts = lease_options(cfg, &**lake);
    let until = Instant::now() + cfg.lease_wait;
    let location = lake.location(&layout.lock);
    loop {
        let store: Arc<dyn Store> = lake.clone();
        let attempt = Lease::acquire(
            store,
            &layout.lock,
            run_id,
            opts,
            deadline.clone(),
            handles.sightings,
        );
        match attempt.await {
            Ok(lease) => return Ok(Taken::Lease(lease)),
            Err(Error::Busy { .. }) => {}
            Err(e) => return Err(e),
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Taken::Undecided);
        }
        let due = handles
            .sightings
            .due(&location)
            .map(|d| d.saturating_duration_since(Instant::now()));
        let pause = due.unwrap_or(Duration::from_secs(5)).min(left) + Duration::from_millis(20);
        tokio::select! {
            biased;
            _ = handles.shutdown.signalled() => return Ok(Taken::Undecided),
            () = tokio::time::sleep(pause) => {}
        }
        let now = get_small(&**lake, &layout.lock).await?;
        if now.is_some_and(|v| v.version != first) {
            return Ok(Taken::Alive);
        }
    }
}

/// Under the input's lease: write the entry of its published object if that is a
/// publish no entry names.
async fn repair_input(
    cfg: &Config,
    lake: &dyn Lake,
    handles: Handles<'_>,
    layout: &Layout,
) -> Result<Option<Repaired>> {
    let input = layout.input_name.as_str();
    let prior = checkpoint::read(lake, &layout.checkpoint, &cfg.product, input).await?;
    let keys = LogKeys::of(&cfg.product);
    for form in OutputCompression::ALL {
        let key = layout.raw_as(form);
        let Some((meta, Some(label))) = lake.labelled(&key).await? else {
            continue;
        };
        let Some(pending) = commit_log::from_label(&label) else {
            continue;
        };
        if pending.key != key || pending.product != cfg.product || pending.input_name != input {
            continue;
        }
        if prior.as_ref().is_some_and(|c| c.record.matches(&meta)) {
            return Ok(None);
        }
        if !quarantine_came_with(lake, &pending).await? {
            info!(input, run_id = %pending.run_id, "the publish's quarantine is not the same run's: left to the input's next run");
            return Ok(None);
        }
        let floor = prior
            .as_ref()
            .and_then(|c| c.record.log_sequence)
            .unwrap_or(0);
        let end = commit_log::end(lake, &keys).await?;
        if end.saturating_sub(floor) > REPLACED_LOOKBACK {
            info!(input, "too many entries since its checkpoint to prove none names the publish: left to the input's next run");
            return Ok(None);
        }
        let named = commit_log::latest_of(lake, &keys, &key, floor).await?;
        if named.is_some_and(|e| e.names(&meta)) {
            return Ok(None);
        }
        let entry = Entry {
            committed_at: crate::rfc3339(OffsetDateTime::now_utc()),
            published_size: meta.size,
            published: Some(meta.version.clone()),
            ..pending
        };
        let run_id = entry.run_id.clone();
        let sequence = commit_log::append(lake, &keys, entry, handles.log).await?;
        info!(input, sequence, publishing_run = %run_id, "wrote the log entry of a publish whose run stopped before writing it");
        return Ok(Some(Repaired {
            input_name: input.to_owned(),
            sequence,
            run_id,
        }));
    }
    Ok(None)
}

/// Did the quarantine the pending entry names come with the same run's data (its
/// label names that run)? True where it names none.
async fn quarantine_came_with(lake: &dyn Lake, pending: &Entry) -> Result<bool> {
    let Some(q) = &pending.quarantine_key else {
        return Ok(true);
    };
    let label = lake.labelled(q).await?.and_then(|(_, l)| l);
    Ok(label
        .and_then(|l| commit_log::from_label(&l))
        .is_some_and(|e| e.run_id == pending.run_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An input is looked at when staging holds any object its runs write: its
    /// published name in any stored form, or its quarantine; never another input's.
    #[test]
    fn staging_names_the_inputs_it_belongs_to() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(staged_for("p", "a.jsonl", &names(&["a.jsonl"])));
        assert!(staged_for("p", "a.jsonl", &names(&["a.jsonl.zst"])));
        assert!(staged_for(
            "p",
            "a.jsonl",
            &names(&["a.jsonl.rejects.jsonl"])
        ));
        assert!(!staged_for(
            "p",
            "a.jsonl",
            &names(&["b.jsonl", "aa.jsonl"])
        ));
        assert!(!staged_for("p", "a.jsonl", &[]));
    }
}
