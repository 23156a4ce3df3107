//! `landing status` and `landing verify` (docs/design.md section 7): what the lake holds,
//! read-only. Neither takes a lease or writes anything.
//!
//! `verify` findings, one per line, each naming the input (RUNBOOK.md says what to do
//! about each):
//!
//! | finding | what differs |
//! |---|---|
//! | `corrupt_checkpoint` | the checkpoint does not parse or names another input |
//! | `elsewhere` | the checkpoint's `published_path` is not this lake's `raw/` key |
//! | `missing` | the published object is absent |
//! | `size` | the published object's size is not the recorded one |
//! | `changed` | same size, but its ETag (S3) or file identity (local) is not the recorded one |
//! | `line_count` | (`--deep`) its line count is not `accepted_rows` |
//! | `not_canonical` | (`--deep`) a line is not the canonical form of a valid event |
//! | `corrupt_compression` | (`--deep`) a compressed published object does not decode to its end |
//! | `duplicate_event_id` | (`--deep`) two lines share an identity (the contract's `identity` field, which the message names; `event_id` for `progress`) |
//! | `quarantine_missing` | (`--deep`) `rejected_rows` > 0 but no quarantine object |
//! | `quarantine_count` | (`--deep`) the quarantine holds another number of records |
//! | `unnamed` | a file under `raw/` or `quarantine/` that no checkpoint names (the readers' zones hold only published data) |
//! | `leftover` | a run's temp file, or a guard file of an earlier version, under `raw/` or `quarantine/` |
//!
//! Beside the findings, `verify` lists each input landed under another contract
//! than the one in force (`other_contract`): a notice, not a drift (exit code
//! unchanged); `run --inbox --rehash` re-lands them.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use crate::checkpoint::{self, Current, Drift};
use crate::config::AuditConfig;
use crate::contract::Contract;
use crate::error::Result;
use crate::history;

mod deep;
use crate::layout::{Folders, Layout};
use crate::lease::LeaseRecord;
use crate::store::Store;
use deep::deep_findings;

/// Inputs examined at once by `status` and `verify` (small requests each).
const AUDIT_CONCURRENCY: usize = 8;

/// Run `f` for every name, up to `n` at once; results in the order of `names`.
async fn in_order<T, F, Fut>(
    lake: &Arc<dyn Store>,
    product: &str,
    names: Vec<String>,
    n: usize,
    f: F,
) -> Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(Arc<dyn Store>, String, String) -> Fut,
    Fut: std::future::Future<Output = Result<T>> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    let mut out: Vec<Option<T>> = Vec::new();
    out.resize_with(names.len(), || None);
    for (i, name) in names.into_iter().enumerate() {
        while tasks.len() >= n.max(1) {
            let (j, r) = join(&mut tasks).await?;
            out[j] = Some(r?);
        }
        let fut = f(lake.clone(), product.to_owned(), name);
        tasks.spawn(async move { (i, fut.await) });
    }
    while !tasks.is_empty() {
        let (j, r) = join(&mut tasks).await?;
        out[j] = Some(r?);
    }
    Ok(out.into_iter().flatten().collect())
}

async fn join<T: 'static>(tasks: &mut tokio::task::JoinSet<T>) -> Result<T> {
    match tasks.join_next().await {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(crate::Error::store("join audit task", "lake", e)),
        None => Err(crate::Error::store("join audit task", "lake", "no task")),
    }
}

/// Names of the checkpointed inputs of `product`, in name order.
async fn checkpointed(lake: &dyn Store, product: &str) -> Result<Vec<String>> {
    let listing = lake.list(&Folders::of(product).checkpoints).await?;
    Ok(listing
        .files
        .into_iter()
        .filter_map(|f| Folders::checkpoint_input(&f.name).map(str::to_owned))
        .collect())
}

async fn open_lake(cfg: &AuditConfig) -> Result<Arc<dyn Store>> {
    crate::store::open_read_only(&cfg.lake, &cfg.s3).await
}

/// One row of `status`.
#[derive(Debug, Clone, Serialize)]
pub struct StatusRow {
    pub input_name: String,
    pub last_action: String,
    pub last_at: String,
    pub accepted_rows: Option<u64>,
    pub rejected_rows: Option<u64>,
    pub duplicate_rows: Option<u64>,
    pub input_sha256: Option<String>,
    /// Whether the published object is what the checkpoint recorded.
    pub intact: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LeaseRow {
    pub input_name: String,
    pub holder: String,
    pub host: String,
    pub pid: u32,
    pub expires_at: String,
    pub expired: bool,
}

/// `landing status`: rows, leases and leftovers, or one input's history.
pub async fn status(cfg: &AuditConfig, history_of: Option<&str>) -> Result<i32> {
    let lake = open_lake(cfg).await?;
    let p = &cfg.product;
    if let Some(name) = history_of {
        let records = history::read_all(&*lake, p, name).await?;
        if cfg.json {
            println!(
                "{}",
                json!({"product": p, "input_name": name, "runs": records})
            );
        } else {
            print!("{}", history_table(name, &records));
        }
        return Ok(crate::EXIT_OK);
    }
    let names = checkpointed(&*lake, p).await?;
    let rows = in_order(
        &lake,
        p,
        names,
        AUDIT_CONCURRENCY,
        |lake, p, name| async move { status_row(&*lake, &p, &name).await },
    )
    .await?;
    let leases = leases(&*lake, p).await?;
    let leftovers = leftovers(&*lake, p).await?;
    if cfg.json {
        println!(
            "{}",
            json!({"lake": cfg.lake.to_string(), "product": p, "inputs": rows, "leases": leases, "leftovers": leftovers})
        );
    } else {
        print!("{}", status_table(&rows, &leases, &leftovers));
    }
    Ok(crate::EXIT_OK)
}

async fn status_row(lake: &dyn Store, product: &str, name: &str) -> Result<StatusRow> {
    let layout = Layout::new(product, name);
    let mut row = StatusRow {
        input_name: name.to_owned(),
        last_action: "unknown".into(),
        last_at: String::new(),
        accepted_rows: None,
        rejected_rows: None,
        duplicate_rows: None,
        input_sha256: None,
        intact: false,
        problem: None,
    };
    match checkpoint::read(lake, &layout.checkpoint, product, name).await {
        Ok(Some(cur)) => {
            let rec = &cur.record;
            let layout = layout.published_as(rec.output_compression);
            row.last_action = "published".into();
            row.last_at = rec.committed_at.clone();
            row.accepted_rows = Some(rec.accepted_rows);
            row.rejected_rows = Some(rec.rejected_rows);
            row.duplicate_rows = Some(rec.duplicate_rows);
            row.input_sha256 = Some(rec.input_sha256.clone());
            row.intact = published_findings(lake, &layout, &cur).await?.is_empty();
        }
        Ok(None) => row.problem = Some("checkpoint vanished while listing".into()),
        Err(e) => row.problem = Some(e.to_string()),
    }
    if let Some(last) = history::latest(lake, product, name).await? {
        row.last_action = last.action;
        row.last_at = last.ended_at;
    }
    Ok(row)
}

/// Leases held: lease objects not marked released (expired ones included, marked).
async fn leases(lake: &dyn Store, product: &str) -> Result<Vec<LeaseRow>> {
    let folder = Folders::of(product).locks;
    let now = time::OffsetDateTime::now_utc();
    let mut out = Vec::new();
    for f in lake.list(&folder).await?.files {
        let Some(name) = Folders::lock_input(&f.name) else {
            continue;
        };
        let Some(v) = lake.get_small(&Layout::new(product, name).lock).await? else {
            continue;
        };
        let row = match serde_json::from_slice::<LeaseRecord>(&v.bytes) {
            // A finished run leaves its lease behind marked released: not held.
            Ok(l) if l.released => continue,
            Ok(l) => LeaseRow {
                input_name: name.to_owned(),
                expired: l.expired(now),
                holder: l.run_id,
                host: l.host,
                pid: l.pid,
                expires_at: l.expires_at,
            },
            Err(_) => LeaseRow {
                input_name: name.to_owned(),
                holder: "<unreadable lease>".into(),
                host: String::new(),
                pid: 0,
                expires_at: String::new(),
                expired: false,
            },
        };
        out.push(row);
    }
    Ok(out)
}

/// Staging leftovers of the product's outputs, as the store finds them (S3 staging
/// objects, local hidden temp files beside published names, checkpoints and leases).
async fn leftovers(lake: &dyn Store, product: &str) -> Result<Vec<String>> {
    let f = Folders::of(product);
    lake.leftovers(&[f.raw, f.quarantine, f.checkpoints, f.locks])
        .await
}

/// An RFC 3339 time to the second.
fn when(t: &str) -> String {
    match t.get(..19) {
        Some(s) if t.len() > 19 => format!("{s}Z"),
        _ => t.to_owned(),
    }
}

fn short(sha: &Option<String>) -> String {
    sha.as_deref()
        .map(|s| s[..s.len().min(12)].to_owned())
        .unwrap_or_default()
}

fn opt(n: Option<u64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_else(|| "-".into())
}

fn status_table(rows: &[StatusRow], leases: &[LeaseRow], leftovers: &[String]) -> String {
    let w = rows
        .iter()
        .map(|r| r.input_name.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut s = format!(
        "{:<w$}  {:<11}  {:<20}  {:>9}  {:>8}  {:>10}  {:<12}  {}\n",
        "input", "last", "at", "accepted", "rejected", "duplicates", "sha256", "published"
    );
    for r in rows {
        let published = match (&r.problem, r.intact) {
            (Some(p), _) => format!("? {p}"),
            (None, true) => "intact".into(),
            (None, false) => "DRIFT (run landing verify)".into(),
        };
        s.push_str(&format!(
            "{:<w$}  {:<11}  {:<20}  {:>9}  {:>8}  {:>10}  {:<12}  {}\n",
            r.input_name,
            r.last_action,
            when(&r.last_at),
            opt(r.accepted_rows),
            opt(r.rejected_rows),
            opt(r.duplicate_rows),
            short(&r.input_sha256),
            published
        ));
    }
    s.push_str(&format!("\n{} checkpointed inputs\n", rows.len()));
    s.push_str(&format!("\nleases held: {}\n", leases.len()));
    for l in leases {
        s.push_str(&format!(
            "  {}  run {} on {} (pid {})  expires {}{}\n",
            l.input_name,
            l.holder,
            l.host,
            l.pid,
            l.expires_at,
            if l.expired { " (expired)" } else { "" }
        ));
    }
    s.push_str(&format!("\nstaging leftovers: {}\n", leftovers.len()));
    for l in leftovers {
        s.push_str(&format!("  {l}\n"));
    }
    s
}

fn history_table(name: &str, records: &[history::RunRecord]) -> String {
    let mut s = format!("runs of {name}, newest first: {}\n", records.len());
    s.push_str(&format!(
        "{:<26}  {:<11}  {:<20}  {:>8}  {:>12}  {:>12}  {}\n",
        "run id", "action", "ended", "seconds", "bytes in", "bytes out", "stages (s) / error"
    ));
    for r in records {
        let detail = match &r.error {
            Some(e) => e.clone(),
            None => r
                .stages
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        s.push_str(&format!(
            "{:<26}  {:<11}  {:<20}  {:>8.3}  {:>12}  {:>12}  {}\n",
            r.run_id,
            r.action,
            when(&r.ended_at),
            r.duration_s,
            r.bytes_in,
            r.bytes_out,
            detail
        ));
    }
    s
}

/// One drift of `verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub input_name: String,
    pub finding: &'static str,
    pub detail: String,
}

impl Finding {
    fn new(input: &str, finding: &'static str, detail: impl Into<String>) -> Self {
        Finding {
            input_name: input.to_owned(),
            finding,
            detail: detail.into(),
        }
    }
}

/// The shallow checks: the published object exists with the recorded size and
/// ETag or file identity.
async fn published_findings(
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
    deep: bool,
    contract: Option<&'static Contract>,
) -> Result<Verified> {
    let layout = Layout::new(product, name);
    let mut other = None;
    let (findings, names) = match checkpoint::read(lake, &layout.checkpoint, product, name).await {
        Ok(Some(cur)) => {
            let layout = layout.published_as(cur.record.output_compression);
            let mut names = vec![layout.raw.clone()];
            if cur.record.quarantine_path.is_some() {
                names.push(layout.quarantine.clone());
            }
            other = contract.and_then(|c| other_contract(name, &cur.record, c));
            // Lines landed under another contract are checked against their own
            // rules by no one: --deep reads only those landed under this one.
            let deep_with = contract.filter(|_| deep && other.is_none());
            (
                check_published(lake, &layout, &cur, deep_with).await?,
                names,
            )
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
    })
}

async fn check_published(
    lake: &dyn Store,
    layout: &Layout,
    cur: &Current,
    deep: Option<&'static Contract>,
) -> Result<Vec<Finding>> {
    let shallow = published_findings(lake, layout, cur).await?;
    // An object that is not the one the checkpoint describes: its lines say nothing more.
    let Some(contract) = deep.filter(|_| shallow.is_empty()) else {
        return Ok(shallow);
    };
    let mut all = shallow;
    all.extend(deep_findings(lake, layout, cur, contract).await?);
    Ok(all)
}

/// Files in the product's readers' zones (`raw/`, `quarantine/`) that no checkpoint
/// names, and the job's own leftovers there.
async fn unnamed_findings(
    lake: &dyn Store,
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

/// `landing verify`: one line per finding, then a totals line; exit 0 clean, 1 drift.
pub async fn verify(cfg: &AuditConfig, deep: bool) -> Result<i32> {
    if deep && cfg.contract.is_none() {
        return Err(crate::Error::Config(format!(
            "verify --deep needs the contract of product {:?}: give --contract or --contracts-dir",
            cfg.product
        )));
    }
    let contract = cfg.contract;
    let lake = open_lake(cfg).await?;
    let names = checkpointed(&*lake, &cfg.product).await?;
    let checked = names.len();
    // --deep reads objects whole: fewer at once bounds memory (one id set each).
    let n = if deep { 2 } else { AUDIT_CONCURRENCY };
    let all = in_order(
        &lake,
        &cfg.product,
        names,
        n,
        move |lake, p, name| async move { verify_one(&*lake, &p, &name, deep, contract).await },
    )
    .await?;
    let named: HashSet<String> = all.iter().flat_map(|v| v.names.iter().cloned()).collect();
    let others: Vec<Finding> = all
        .iter()
        .filter_map(|v| v.other_contract.clone())
        .collect();
    let mut every: Vec<Vec<Finding>> = all.into_iter().map(|v| v.findings).collect();
    every.push(unnamed_findings(&*lake, &cfg.product, &named).await?);
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
        "deep": deep,
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
            if deep { " (deep)" } else { "" },
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
