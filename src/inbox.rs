//! `landing run --inbox`: land every input of a folder or S3 prefix (docs/design.md
//! section 6). Each input goes through [`pipeline::run`], the single-input contract
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
//! decides under its lease. A cheap skip writes nothing but its run record; staging
//! leftovers of an input that is only ever skipped are left to the bucket's lifecycle
//! rule (and swept by the input's next full run).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tracing::{info, warn};

use crate::checkpoint;
use crate::compression::published_name;
use crate::config::{Config, InboxConfig, Progress as Mode};
use crate::error::{Error, Result};
use crate::history::{self, RunRecord};
use crate::hook::Hooks;
use crate::layout::Layout;
use crate::lease::{LeaseRecord, Sightings};
use crate::pipeline;
use crate::progress;
use crate::shutdown::Shutdown;
use crate::store::{Listed, Location, Store};
use crate::summary::{Action, Signal, Summary, Totals};

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

/// How often a line reports the inbox's progress when there is no terminal.
const LOG_EVERY: Duration = Duration::from_secs(30);

/// The inputs of this run: listed once, filtered, in name order.
pub async fn select(ic: &InboxConfig) -> Result<Vec<Listed>> {
    let store = crate::store::open_read_only(&ic.inbox, &ic.base.s3).await?;
    // A typo or an unmounted volume must not be a quiet night with nothing to land.
    let listing = match store.list("").await {
        Err(Error::NotFound { .. }) => {
            return Err(Error::Config(format!(
                "--inbox {}: no such folder or bucket",
                ic.inbox
            )))
        }
        Err(Error::Store {
            op,
            location,
            source,
        }) if matches!(ic.inbox, Location::Local(_)) => {
            return Err(Error::Config(format!(
                "--inbox {}: cannot {op} {location}: {source}",
                ic.inbox
            )))
        }
        other => other?,
    };
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

/// The cheap skip: the listing equals what the checkpoint recorded and the published
/// object is intact. `None`: run the input in full.
async fn cheap_skip(lake: &dyn Store, cfg: &Config, listed: &Listed) -> Result<Option<Summary>> {
    let layout = Layout::new(&cfg.product, &listed.name).published_as(cfg.output_compression);
    let Some(cur) = checkpoint::read(lake, &layout.checkpoint, &cfg.product, &listed.name).await?
    else {
        return Ok(None);
    };
    let rec = &cur.record;
    if !rec.input.matches(&listed.meta)
        || checkpoint::published_drift(lake, &layout.raw, rec)
            .await?
            .is_some()
    {
        return Ok(None);
    }
    // A lease not released means a run of this input died, stalled or is still at
    // work, perhaps between its checkpoint and its cleanup: a full run takes the lease
    // (or answers busy) and sweeps what that run left, which no skip would.
    if !lease_released(lake, &layout.lock).await? {
        return Ok(None);
    }
    Ok(Some(Summary::skipped(
        pipeline::new_run_id(),
        cfg.product.clone(),
        cfg.input.to_string(),
        rec,
    )))
}

/// Is the input's lease absent or released? A record that does not parse is not: the
/// full run reports it.
async fn lease_released(lake: &dyn Store, key: &str) -> Result<bool> {
    Ok(match lake.get_small(key).await? {
        None => true,
        Some(v) => serde_json::from_slice::<LeaseRecord>(&v.bytes).is_ok_and(|r| r.released),
    })
}

/// An input that ran, or was skipped cheaply.
pub struct Landed {
    /// The summary, or the error that ended the run.
    pub result: Result<Summary>,
    /// The summary's action, or busy, conflict or failed.
    pub action: Action,
    /// The stdout line (section 4's schema; busy, conflict and failed runs get an
    /// `error`).
    pub line: Value,
    /// From the start of its run (after any wait for a `--jobs` slot) to its outcome.
    pub took: Duration,
    /// Its stages, bytes and lease waits, for the pushed metrics.
    pub measured: history::Measured,
}

/// Land one input: cheap skip or full run, then its run record. A full run waits
/// for its charge of `full_runs` first; `None` if a signal came before it got it
/// (the input was not started).
pub async fn land_one(
    cfg: &Config,
    hooks: &Hooks,
    shutdown: &Shutdown,
    lake: Option<&Arc<dyn Store>>,
    seen: &Sightings,
    try_cheap: bool,
    full_runs: Option<&Slots>,
) -> Option<Landed> {
    let (ran, trace) = history::traced(async {
        let started = Instant::now();
        if try_cheap {
            if let (Some(lake), Some(meta)) = (lake, &cfg.input_meta) {
                let listed = Listed {
                    name: cfg.input_name.clone(),
                    meta: meta.clone(),
                    modified_ns: 0,
                };
                match cheap_skip(&**lake, cfg, &listed).await {
                    Ok(Some(summary)) => {
                        history::begin(&summary.run_id);
                        history::lap("checkpoint-check");
                        return Some((Ok(summary), true, started));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        // The full run reports it properly, under its lease.
                        tracing::debug!(error = %e, "no cheap skip");
                    }
                }
            }
        }
        // Only full runs are charged: a cheap skip holds no input in memory.
        let stored = cfg.input_meta.as_ref().map_or(u64::MAX, |m| m.size);
        let _slot = match full_runs {
            Some(slots) => tokio::select! {
                biased;
                _ = shutdown.signalled() => return None,
                slot = slots.acquire(stored) => slot,
            },
            None => None,
        };
        // An inbox input in flight has its bar on a terminal until it finishes.
        let _bar = full_runs.and_then(|_| progress::in_flight(&cfg.input_name));
        let started = Instant::now();
        Some((
            pipeline::run(cfg, lake, hooks, shutdown, seen).await,
            false,
            started,
        ))
    })
    .await;
    let (result, cheap, started) = ran?;
    let took = started.elapsed();
    let (action, line, error) = match &result {
        Ok(summary) => (
            summary.action,
            serde_json::to_value(summary).unwrap_or(Value::Null),
            None,
        ),
        Err(e) => {
            let chain = history::error_chain(e);
            let action = Action::of_error(e);
            let (product, input) = (cfg.product.clone(), cfg.input.to_string());
            let line = Summary::unfinished(trace.run_id(), product, input, action, &chain);
            (action, line, Some(chain))
        }
    };
    if cheap {
        if let Ok(summary) = &result {
            info!(input = %cfg.input, input_sha256 = summary.input_sha256.as_str(), action = "skipped", "unchanged since its checkpoint; not read");
        }
    }
    // Busy runs reached no outcome and changed nothing: no record (the holder writes one).
    if action != Action::Busy {
        if let Some(run_id) = trace.run_id() {
            let opened;
            let lake = match lake {
                Some(l) => Some(l),
                None => {
                    opened = crate::store::open(&cfg.lake, &cfg.s3).await.ok();
                    opened.as_ref()
                }
            };
            match lake {
                Some(lake) => {
                    let mut rec = RunRecord::from_trace(
                        &trace,
                        &cfg.product,
                        &cfg.input_name,
                        &run_id,
                        action,
                        line.clone(),
                        error,
                    );
                    rec.contract = Some(crate::checkpoint::ContractStamp::of(cfg.contract));
                    history::write(&**lake, &rec).await;
                }
                None => warn!(input = %cfg.input, "lake unreachable; no run record written"),
            }
        }
    }
    Some(Landed {
        result,
        action,
        line,
        took,
        measured: trace.measured(),
    })
}

/// Progress over inputs: on a terminal, a footer under the inputs' bars and a line
/// per finished input; otherwise a log line per input and a periodic line.
struct InboxProgress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    /// The longest input name: the column results are lined up in.
    name_col: usize,
    started: Instant,
    last_log: Mutex<Instant>,
    /// Rows published so far (the totals line on a terminal).
    rows: std::sync::atomic::AtomicU64,
    /// `-q` at a terminal: no bars, no line per input, the totals at the end.
    quiet_totals: bool,
}

impl InboxProgress {
    fn new(inputs: &[Listed], mode: Mode) -> Self {
        let total = inputs.len();
        let name_col = inputs
            .iter()
            .map(|l| progress::cols(&l.name))
            .max()
            .unwrap_or(0);
        let now = Instant::now();
        InboxProgress {
            quiet_totals: mode == Mode::Quiet && progress::terminal(),
            bar: progress::footer(total, name_col, mode),
            total,
            name_col,
            started: now,
            last_log: Mutex::new(now),
            rows: Default::default(),
        }
    }

    fn done(&self, n: usize, input: &str, landed: &Landed) {
        let action = landed.action.as_str();
        if let Ok(s) = &landed.result {
            if s.action == Action::Published {
                self.rows.fetch_add(s.accepted_rows, Ordering::Relaxed);
            }
        }
        if let Some(bar) = &self.bar {
            let width = progress::width();
            let detail = result_detail(landed);
            let line =
                progress::result_line(input, self.name_col, action, &detail, landed.took, width);
            progress::say(&line);
            bar.inc(1);
            return;
        }
        info!(input, action, done = n, total = self.total, "input done");
        let mut last = self.last_log.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() >= LOG_EVERY {
            *last = Instant::now();
            let secs = self.started.elapsed().as_secs_f64().max(1e-9);
            info!(
                done = n,
                total = self.total,
                inputs_per_sec = format!("{:.1}", n as f64 / secs),
                "inbox progress"
            );
        }
    }

    /// Clear the footer; on a terminal, the totals take its place.
    fn finish(&self, totals: &Totals) {
        match &self.bar {
            Some(bar) => {
                progress::end_footer();
                bar.finish_and_clear();
            }
            None if self.quiet_totals => {}
            None => return,
        }
        let mut counts = vec![
            ("published", totals.published),
            ("skipped", totals.skipped),
            ("refused", totals.refused),
            ("busy", totals.busy),
            ("failed", totals.failed),
        ];
        for (what, n) in [
            ("conflict", totals.conflict),
            ("interrupted", totals.interrupted),
            ("not started", totals.not_started),
        ] {
            if n > 0 {
                counts.push((what, n));
            }
        }
        let rows = self.rows.load(Ordering::Relaxed);
        progress::say(&progress::totals_line(
            totals.inputs,
            &counts,
            rows,
            self.started.elapsed(),
        ));
    }
}

/// What a finished input's line says after its action: its rows, why it was refused,
/// or its error.
fn result_detail(landed: &Landed) -> String {
    match &landed.result {
        Ok(s) => match &s.reason {
            Some(reason) => reason.to_string(),
            None if matches!(s.action, Action::Published | Action::Skipped) => {
                let mut d = format!("{} rows", progress::thousands(s.accepted_rows));
                if s.rejected_rows > 0 {
                    d.push_str(&format!(
                        ", {} quarantined",
                        progress::thousands(s.rejected_rows)
                    ));
                }
                d
            }
            None => String::new(),
        },
        Err(e) => e.to_string(),
    }
}

fn print_line(v: &Value) {
    progress::stdout_line(&v.to_string());
}

/// What every worker of an inbox run shares.
struct Shared {
    ic: InboxConfig,
    hooks: Hooks,
    lake: Option<Arc<dyn Store>>,
    /// What the inputs' runs saw of leases held by others: an input found busy in
    /// the first pass keeps its first look in the second.
    seen: Sightings,
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
    recorder: &crate::metrics::Recorder,
) -> Result<i32> {
    let inputs = select(ic).await?;
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
        seen: Sightings::default(),
        progress: InboxProgress::new(&[&inputs[..], &clashing[..]].concat(), ic.base.progress),
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
    listener.abort();
    let totals = *shared.totals.lock().unwrap_or_else(|p| p.into_inner());
    let signal = shutdown.signal();
    recorder.outcomes(totals.by_action());
    print_totals(ic, &totals, signal);
    shared.progress.finish(&totals);
    Ok(signal.map_or_else(|| totals.exit_code(), Signal::exit_code))
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
                let summary = landed.result.as_ref().ok();
                let measured = &landed.measured;
                shared
                    .recorder
                    .landed(&item.listed.name, action, summary, measured);
                print_line(&landed.line);
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
                .failed += 1;
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
    print_line(&line);
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

/// One input of the inbox through [`land_one`], with its own configuration.
async fn land_item(shared: &Shared, item: &Item) -> Option<Landed> {
    let ic = &shared.ic;
    let mut cfg = ic.base.clone();
    cfg.input = ic.inbox.join(&item.listed.name);
    cfg.input_name = published_name(&item.listed.name).to_owned();
    cfg.input_meta = Some(item.listed.meta.clone());
    cfg.lease_wait = item.wait;
    land_one(
        &cfg,
        &shared.hooks,
        &shared.shutdown,
        shared.lake.as_ref(),
        &shared.seen,
        !ic.rehash,
        Some(&shared.full_runs),
    )
    .await
}

/// The totals line on stdout, and its log line.
fn print_totals(ic: &InboxConfig, totals: &Totals, signal: Option<Signal>) {
    let mut line = BTreeMap::new();
    line.insert("inbox", json!(ic.inbox.to_string()));
    if let Some(s) = ic.shard {
        line.insert("shard", json!(s.to_string()));
    }
    line.insert("totals", json!(totals));
    if let Some(signal) = signal {
        line.insert("not_started", json!(totals.not_started));
        warn!(
            signal = signal.number(),
            not_started = totals.not_started,
            "stopped by a signal; the next run lands the rest"
        );
    }
    print_line(&json!(line));
    info!(
        inputs = totals.inputs,
        published = totals.published,
        skipped = totals.skipped,
        refused = totals.refused,
        busy = totals.busy,
        failed = totals.failed,
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
            (t.inputs, t.not_started),
            (5, 1),
            "not started is not an input"
        );
    }
}
