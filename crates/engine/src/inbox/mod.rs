//! `landing run --inbox`: land every input of a folder or S3 prefix (docs/design.md
//! section 6). Each input goes through [`crate::land`], the single-input contract
//! with its own lease, on a per-input copy of the configuration. Runs in flight
//! ([`Slots`]): `--jobs N` runs at once, each with 1/N of the memory budget; without
//! `--jobs`, bounded by memory: one run's budget, a small input charged by its size,
//! so many small inputs share it (up to [`crate::budget::IN_FLIGHT`] at once) and a
//! large one takes all of it. Cheap-skip checks hold no input and run 16 at once. One
//! input's refusal, failure or busy lease never stops the others.
//!
//! **Cheap skips.** Before running an input, the checkpoint is read (no lease: this
//! reads only) and the input skipped without being read when the listing's size and
//! identity (S3 ETag; local size, mtime, inode, ctime) equal those the checkpoint
//! recorded with its hash, and the published object it names is intact. Anything else
//! (no checkpoint, an older checkpoint without those fields, a different identity, a
//! changed publish, an unreadable checkpoint, `--rehash`) goes to the full run, which
//! decides under its lease (and takes the checkpoint read here as its own when its
//! lease is new: no run can have written one since). A cheap skip writes nothing but
//! its run record; staging
//! leftovers of an input that is only ever skipped are left to the bucket's lifecycle
//! rule (and swept by the input's next full run).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tracing::{info, warn};

use crate::commit_log::Appender;
use crate::compression::published_name;
use crate::config::InboxConfig;
use crate::error::{Error, Result};
use crate::history;
use crate::hook::Hooks;
use crate::land::{Checked, Input, Landed};
use crate::lease::Sightings;
use crate::pipeline::{Handles, Opened};
use crate::progress::Terminal;
use crate::shutdown::Shutdown;
use crate::store::{Lake, Listed, Store};
use crate::summary::{Action, Repairs, Signal, Summary, Totals};

mod report;

use report::{print_line, InboxProgress};

/// Inputs whose cheap skip is checked at once (a checkpoint GET and a HEAD each);
/// full runs are bounded by [`Slots`] on top of this.
const CHEAP_CONCURRENCY: usize = 16;

/// What full runs in flight may hold: `--jobs` runs' budgets, in MiB, and a count.
/// Both semaphores are fair, so a large input waiting for a whole share is not
/// overtaken by small ones that came after it.
pub struct Slots {
    memory: tokio::sync::Semaphore,
    count: tokio::sync::Semaphore,
    budget: crate::budget::Memory,
    /// `--jobs` was given: every input takes a whole share.
    explicit: bool,
    /// All of `memory`'s permits: no charge takes more.
    capacity: u32,
}

/// The permits of one full run, given back when it ends.
pub struct Slot<'a> {
    _memory: tokio::sync::SemaphorePermit<'a>,
    _count: tokio::sync::SemaphorePermit<'a>,
}

impl Slots {
    /// `explicit`: `--jobs` was given.
    pub fn new(budget: crate::budget::Memory, explicit: bool) -> Slots {
        let capacity = mib(budget.slot().saturating_mul(budget.jobs.max(1) as u64));
        Slots {
            memory: tokio::sync::Semaphore::new(capacity as usize),
            count: tokio::sync::Semaphore::new(budget.in_flight(explicit)),
            budget,
            explicit,
            capacity,
        }
    }

    /// The most inputs in flight at once.
    fn in_flight(&self) -> usize {
        self.budget.in_flight(self.explicit)
    }

    /// Wait until an input of `stored` bytes fits; `None` if the semaphores closed.
    pub async fn acquire(&self, stored: u64) -> Option<Slot<'_>> {
        let charge = match self.explicit {
            true => self.budget.slot(),
            false => self.budget.charge(stored),
        };
        let units = mib(charge).clamp(1, self.capacity);
        let count = self.count.acquire().await.ok()?;
        let memory = self.memory.acquire_many(units).await.ok()?;
        Some(Slot {
            _memory: memory,
            _count: count,
        })
    }
}

/// Bytes in whole MiB, rounded up (a semaphore counts at most `u32::MAX` at once).
fn mib(bytes: u64) -> u32 {
    u32::try_from(bytes.div_ceil(1 << 20)).unwrap_or(u32::MAX)
}

/// The inputs of this run in `inbox` (opened at `ic.inbox`): listed once, filtered,
/// in name order.
pub async fn select(ic: &InboxConfig, inbox: &dyn Store) -> Result<Vec<Listed>> {
    // A typo or an unmounted volume must not be a quiet night with nothing to land.
    let listing = crate::store::list_root(inbox, &ic.inbox, "--inbox").await?;
    let files = listing.files.len();
    let now_ns = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
    let min_age_ns = ic.min_age.as_nanos() as i128;
    let mut young = 0;
    let inputs: Vec<Listed> = listing
        .files
        .into_iter()
        .filter(|f| {
            // Hidden names are the job's own temp files; control characters never
            // make a key.
            !f.name.starts_with('.') && !f.name.chars().any(char::is_control)
        })
        .filter(|f| ic.pattern.matches(&f.name))
        // By the published name: `x.jsonl` and `x.jsonl.gz` are one input, one shard.
        .filter(|f| ic.shard.is_none_or(|s| s.takes(published_name(&f.name))))
        .filter(|f| {
            let old_enough = now_ns - f.modified_ns >= min_age_ns;
            young += usize::from(!old_enough);
            old_enough
        })
        .collect();
    info!(
        inbox = %ic.inbox,
        files,
        listed = inputs.len(),
        too_young = young,
        shard = ic.shard.map(|s| s.to_string()).unwrap_or_default(),
        "inbox listed"
    );
    Ok(inputs)
}

/// What every worker of an inbox run shares.
struct Shared {
    ic: InboxConfig,
    hooks: Hooks,
    lake: Option<Arc<dyn Lake>>,
    /// The inbox, read by every input's run.
    inbox: Arc<dyn Store>,
    /// What the inputs' runs saw of leases held by others: an input found busy in
    /// the first pass keeps its first look in the second.
    sightings: Sightings,
    log: Appender,
    progress: InboxProgress,
    finished: AtomicUsize,
    totals: Mutex<Totals>,
    /// No input is started after a signal.
    shutdown: Shutdown,
    full_runs: Slots,
    recorder: crate::metrics::Recorder,
}

impl Shared {
    fn count(&self, action: Action) {
        let mut totals = self.totals.lock().unwrap_or_else(|p| p.into_inner());
        totals.add(action);
    }
}

/// An input of this run, and how long its run may wait for its lease.
#[derive(Clone)]
struct Item {
    listed: Listed,
    wait: Duration,
}

/// `landing run --inbox`: prints one line per input as it finishes, then the totals
/// line; returns the exit code. With `--lease-wait`, inputs whose lease another run
/// holds are set aside in a first pass over the free ones, then run again, each
/// waiting for its lease within what is left of `--lease-wait` since it was found busy.
pub async fn run(
    ic: &InboxConfig,
    hooks: &Hooks,
    shutdown: &Shutdown,
    terminal: &Terminal,
    recorder: &crate::metrics::Recorder,
) -> Result<i32> {
    // Opened once: every input's run reads through it (one SDK client for all).
    let inbox = crate::store::open_read_only(&ic.inbox, &ic.base.s3).await?;
    let inputs = select(ic, &*inbox).await?;
    let (inputs, clashing) = crate::compression::one_form_each(inputs);
    // The lake shared by the cheap skips and the run records.
    let lake = match crate::store::open(&ic.base.lake, &ic.base.s3).await {
        Ok(l) => Some(l),
        Err(e) => {
            // Every input will fail to connect too, and say so on its own line.
            warn!(error = %e, "cannot open the lake");
            None
        }
    };
    let shared = Arc::new(Shared {
        ic: ic.clone(),
        hooks: *hooks,
        lake,
        inbox,
        sightings: Sightings::default(),
        log: Appender::default(),
        progress: InboxProgress::new(
            &[&inputs[..], &clashing[..]].concat(),
            ic.base.progress,
            terminal,
        ),
        finished: AtomicUsize::new(0),
        totals: Mutex::new(Totals::default()),
        shutdown: shutdown.clone(),
        full_runs: Slots::new(ic.base.memory, ic.jobs.is_some()),
        recorder: recorder.clone(),
    });
    // SIGTERM/SIGINT: the runs in flight stop on their own (they share the token);
    // no input is started after it.
    let listener = tokio::spawn(say_when_stopped(shutdown.clone()));
    for listed in &clashing {
        report_clash(&shared, listed, &clashing);
    }
    let wait = ic.base.lease_wait;
    let landed: BTreeSet<String> = inputs
        .iter()
        .chain(&clashing)
        .map(|l| published_name(&l.name).to_owned())
        .collect();
    let first: Vec<Item> = inputs
        .into_iter()
        .map(|listed| Item {
            listed,
            wait: Duration::ZERO,
        })
        .collect();
    let busy = land_pass(&shared, first, !wait.is_zero()).await;
    if !busy.is_empty() {
        info!(
            inputs = busy.len(),
            wait_secs = wait.as_secs(),
            "free inputs done; waiting for the leases of the busy ones"
        );
        land_pass(&shared, busy, false).await;
    }
    let log = repair_log(&shared, &landed).await;
    if let Ok(r) = &log {
        recorder.repaired(r);
    }
    listener.abort();
    let totals = *shared.totals.lock().unwrap_or_else(|p| p.into_inner());
    let signal = shutdown.signal();
    recorder.outcomes(totals);
    print_totals(ic, &totals, signal, &log, &shared.progress.terminal);
    shared.progress.finish(&totals);
    // A failed repair exits as a failed input does, without counting as an input.
    let code = match &log {
        Err(_) => crate::error::EXIT_FAILURE,
        Ok(_) => totals.exit_code(),
    };
    Ok(signal.map_or(code, Signal::exit_code))
}

/// Land `items`, full runs as [`Slots`] allow. With `defer_busy`, an input whose
/// lease is held is neither counted nor printed but returned, with the wait it has
/// left (`--lease-wait` from now), for a later pass.
async fn land_pass(shared: &Arc<Shared>, items: Vec<Item>, defer_busy: bool) -> Vec<Item> {
    let items = Arc::new(items);
    let next = Arc::new(AtomicUsize::new(0));
    let deferred = Arc::new(Mutex::new(Vec::new()));
    let mut workers = tokio::task::JoinSet::new();
    let checkers = shared
        .full_runs
        .in_flight()
        .max(CHEAP_CONCURRENCY)
        .min(items.len().max(1));
    for _ in 0..checkers {
        let (shared, items, next, deferred) = (
            shared.clone(),
            items.clone(),
            next.clone(),
            deferred.clone(),
        );
        workers.spawn(async move {
            loop {
                if shared.shutdown.signal().is_some() {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let found_busy_at = Instant::now();
                let Some(landed) = land_item(&shared, item).await else {
                    shared.count(Action::NotStarted);
                    continue;
                };
                let action = landed.action;
                if defer_busy && action == Action::Busy {
                    let wait = shared.ic.base.lease_wait;
                    let left = wait.saturating_sub(found_busy_at.elapsed());
                    deferred
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(Item {
                            listed: item.listed.clone(),
                            wait: left,
                        });
                    continue;
                }
                shared.count(action);
                print_line(&shared.progress.terminal, &landed.line);
                let n = shared.finished.fetch_add(1, Ordering::Relaxed) + 1;
                shared.progress.done(n, &item.listed.name, &landed);
            }
        });
    }
    while let Some(joined) = workers.join_next().await {
        if let Err(e) = joined {
            // A panicking input is a bug; the others go on, and the run fails.
            warn!(error = %e, "an inbox worker stopped");
            shared
                .totals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .add(Action::Failed);
        }
    }
    // Inputs no worker took: a signal came first.
    let taken = next.load(Ordering::Relaxed).min(items.len());
    for _ in taken..items.len() {
        shared.count(Action::NotStarted);
    }
    let mut deferred = std::mem::take(&mut *deferred.lock().unwrap_or_else(|p| p.into_inner()));
    deferred.sort_by(|a, b| a.listed.name.cmp(&b.listed.name));
    deferred
}

/// After the inputs, the repair of the product's log (`crate::pipeline::repair_log`):
/// its outcome for the totals line, an error as its message.
async fn repair_log(
    shared: &Shared,
    landed: &BTreeSet<String>,
) -> std::result::Result<Repairs, String> {
    let handles = Handles {
        shutdown: &shared.shutdown,
        sightings: &shared.sightings,
        log: &shared.log,
        terminal: &shared.progress.terminal,
    };
    let repaired = crate::land::repair_log(&shared.ic.base, shared.lake.as_ref(), handles, landed);
    repaired.await.map_err(|e| {
        warn!(error = %e, "the repair of the product's log failed");
        history::error_chain(&e)
    })
}

/// An input that shares its published name with another of this run: a failed
/// line with an `error` naming them all; nothing is read or written.
fn report_clash(shared: &Shared, listed: &Listed, clashing: &[Listed]) {
    let name = published_name(&listed.name);
    let others: Vec<&str> = clashing
        .iter()
        .filter(|l| published_name(&l.name) == name)
        .map(|l| l.name.as_str())
        .collect();
    let error = format!(
        "{} are one input, published as {name}: neither was landed; keep one in the inbox (RUNBOOK, two forms of one input)",
        others.join(" and ")
    );
    warn!(input = %listed.name, error = %error, "two forms of one input");
    let (product, input) = (
        shared.ic.base.product.clone(),
        shared.ic.inbox.join(&listed.name),
    );
    let line = Summary::unfinished(None, product, input.to_string(), Action::Failed, &error);
    shared.count(Action::Failed);
    print_line(&shared.progress.terminal, &line);
    let n = shared.finished.fetch_add(1, Ordering::Relaxed) + 1;
    let landed = Landed {
        result: Err(Error::Conflict(error)),
        action: Action::Failed,
        line,
        took: Duration::ZERO,
        measured: history::Measured::default(),
    };
    shared.progress.done(n, &listed.name, &landed);
}

/// One input of the inbox, with its own configuration: its cheap skip (unless
/// `--rehash`), else its full run once its charge of the memory budget is free.
/// `None` if a signal came before that (the input was not started).
async fn land_item(shared: &Shared, item: &Item) -> Option<Landed> {
    let ic = &shared.ic;
    let mut cfg = ic.base.clone();
    cfg.input = ic.inbox.join(&item.listed.name);
    cfg.input_name = published_name(&item.listed.name).to_owned();
    cfg.input_meta = Some(item.listed.meta.clone());
    cfg.lease_wait = item.wait;
    let input = Input {
        cfg: &cfg,
        hooks: &shared.hooks,
        handles: Handles {
            shutdown: &shared.shutdown,
            sightings: &shared.sightings,
            log: &shared.log,
            terminal: &shared.progress.terminal,
        },
        lake: shared.lake.as_ref(),
        opened: Opened {
            input: Some((&shared.inbox, &item.listed.name)),
            checkpoint: None,
        },
        recorder: &shared.recorder,
    };
    let read = match ic.base.rehash {
        true => None,
        false => match input.unchanged().await {
            Checked::Unchanged(landed) => return Some(*landed),
            Checked::Changed(read) => Some(read),
            Checked::Unknown => None,
        },
    };
    // Only full runs are charged: a cheap skip holds no input in memory.
    let _slot = tokio::select! {
        biased;
        _ = shared.shutdown.signalled() => return None,
        slot = shared.full_runs.acquire(item.listed.meta.size) => slot,
    };
    // An input in flight has its bar on a terminal until it finishes.
    let _bar = shared.progress.terminal.in_flight(&cfg.input_name);
    let opened = Opened {
        checkpoint: read.as_deref(),
        ..input.opened
    };
    Some(Input { opened, ..input }.land().await)
}

/// The totals line on stdout, and its log line.
fn print_totals(
    ic: &InboxConfig,
    totals: &Totals,
    signal: Option<Signal>,
    log: &std::result::Result<Repairs, String>,
    terminal: &Terminal,
) {
    let mut line = BTreeMap::new();
    line.insert("inbox", json!(ic.inbox.to_string()));
    if let Some(s) = ic.shard {
        line.insert("shard", json!(s.to_string()));
    }
    line.insert("totals", json!(totals));
    match log {
        Ok(r) if r.is_empty() => {}
        Ok(r) => {
            line.insert("log_repairs", json!(r));
        }
        Err(e) => {
            line.insert("log_repairs", json!({ "error": e }));
        }
    }
    if let Some(signal) = signal {
        line.insert("not_started", json!(totals.get(Action::NotStarted)));
        warn!(
            signal = signal.number(),
            not_started = totals.get(Action::NotStarted),
            "stopped by a signal; the next run lands the rest"
        );
    }
    print_line(terminal, &json!(line));
    info!(
        inputs = totals.inputs(),
        published = totals.get(Action::Published),
        skipped = totals.get(Action::Skipped),
        refused = totals.get(Action::Refused),
        busy = totals.get(Action::Busy),
        failed = totals.get(Action::Failed),
        "inbox run finished"
    );
}

/// Say so when a signal stops the inbox.
async fn say_when_stopped(shutdown: Shutdown) {
    let signal = shutdown.signalled().await;
    info!(
        signal = signal.number(),
        "signal received: no further input is started"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_orders_failed_refused_busy() {
        let mut t = Totals::default();
        assert_eq!(t.exit_code(), 0);
        t.add(Action::Skipped);
        t.add(Action::Published);
        assert_eq!(t.exit_code(), 0);
        t.add(Action::Busy);
        assert_eq!(t.exit_code(), 75);
        t.add(Action::Refused);
        assert_eq!(t.exit_code(), 65);
        t.add(Action::Failed);
        assert_eq!(t.exit_code(), 1);
        t.add(Action::NotStarted);
        assert_eq!(
            (t.inputs(), t.get(Action::NotStarted)),
            (5, 1),
            "not started is not an input"
        );
    }
}
