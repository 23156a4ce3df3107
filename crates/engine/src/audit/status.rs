//! `landing status`: what the lake holds per input, the leases held and the
//! leftovers, or one input's run history.

use serde::Serialize;
use serde_json::json;

use super::verify::published_findings;
use super::{checkpointed, in_order, open_lake, AUDIT_CONCURRENCY};
use crate::checkpoint;
use crate::config::AuditConfig;
use crate::error::Result;
use crate::history;
use crate::layout::{Folders, Layout};
use crate::lease::LeaseRecord;
use crate::store::{Lake, Store};

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
    // The commit log's latest number: what readers' cursors are compared with.
    let log_end = crate::commit_log::end(&*lake, &crate::commit_log::LogKeys::of(p)).await?;
    if cfg.json {
        println!(
            "{}",
            json!({"lake": cfg.lake.to_string(), "product": p, "inputs": rows, "leases": leases, "leftovers": leftovers, "log_end": log_end})
        );
    } else {
        print!("{}", status_table(&rows, &leases, &leftovers));
        println!(
            "
commit log: latest entry {log_end}"
        );
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
        row.last_action = last.action.as_str().to_owned();
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
        let Some(v) = crate::store::get_small(lake, &Layout::new(product, name).lock).await? else {
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
async fn leftovers(lake: &dyn Lake, product: &str) -> Result<Vec<String>> {
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
            r.action.as_str(),
            when(&r.ended_at),
            r.duration_s,
            r.bytes_in,
            r.bytes_out,
            detail
        ));
    }
    s
}
