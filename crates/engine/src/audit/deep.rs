//! `verify --deep`: every line of a published object read and checked against the
//! contract, and its quarantine's record count.
//!
//! The read is the landing's own pass (`pipeline::read_published`): both cores,
//! the dedup index within the memory budget, spilling past its share as a run
//! does. A published object must come out of it unchanged: every line accepted
//! and already canonical, no copy of an earlier event, newline-terminated.

use std::sync::Arc;

use super::finding::Finding;
use crate::checkpoint::Current;
use crate::contract::Contract;
use crate::error::Result;
use crate::layout::Layout;
use crate::pipeline::{read_published, Budget, Published};
use crate::progress::Progress;
use crate::store::Store;
use crate::summary::RefusalKind;

/// Count the lines of an object and check each is the canonical form of a valid
/// event whose identity (the contract's `identity` field) was not seen before.
pub(super) async fn deep_findings(
    lake: &dyn Store,
    layout: &Layout,
    cur: &Current,
    contract: &Arc<Contract>,
    budget: &Budget,
) -> Result<Vec<Finding>> {
    let name = &layout.input_name;
    let reader = lake.read(&layout.raw, 0).await?;
    let raw_location = lake.location(&layout.raw);
    let progress = Progress::logged("verify", reader.size);
    let reread = || lake.read(&layout.raw, 0);
    let p = read_published(
        reader,
        &raw_location,
        contract.clone(),
        budget,
        progress,
        reread,
    )
    .await?;
    let spill = p.spill.unwrap_or_default();
    tracing::info!(
        input = %name,
        lines = p.lines,
        spilled_bytes = spill.spilled_bytes,
        spill_runs = spill.runs,
        index_share = %budget
            .share
            .map_or_else(|| "unlimited".to_owned(), |b| b.to_string()),
        "verify --deep read"
    );
    let mut findings = Vec::new();
    let broken = [
        RefusalKind::CorruptCompression,
        RefusalKind::DecompressedTooLarge,
    ];
    if p.refusal.as_ref().is_some_and(|r| broken.contains(&r.kind)) {
        findings.push(Finding::new(
            name,
            "corrupt_compression",
            format!("{raw_location} does not decode to its end (truncated or corrupt)"),
        ));
    } else {
        let tally = Tally::of(&p);
        findings.extend(tally.findings(name, &raw_location, cur.record.accepted_rows, contract));
    }
    findings.extend(quarantine_findings(lake, layout, cur).await?);
    Ok(findings)
}

/// What the one read of a published object counted.
struct Tally {
    /// Lines with content (`None`: the read stopped at a line, so not all were
    /// counted).
    lines: Option<u64>,
    /// Lines that are not the canonical form of a valid event, and the first.
    bad: (u64, Option<u64>),
    /// Lines whose identity an earlier line had, and the first.
    dup: (u64, Option<u64>),
}

impl Tally {
    fn of(p: &Published) -> Tally {
        let c = p.counts;
        let content = c.accepted + c.rejected + c.duplicates;
        let mut bad = (
            c.rejected + p.raw.differs,
            first(p.first_reject, p.raw.first),
        );
        let mut dup = (c.duplicates, p.first_duplicate);
        let lines = match &p.refusal {
            None => {
                // Blank lines are never published.
                bad.0 += p.lines.saturating_sub(content);
                Some(content)
            }
            // Two lines of one identity with other content.
            Some(r) if r.kind == RefusalKind::IdCollision => {
                dup = (dup.0 + 1, first(dup.1, Some(r.line)));
                None
            }
            Some(r) => {
                bad = (bad.0 + 1, first(bad.1, Some(r.line)));
                None
            }
        };
        if p.raw.unterminated {
            bad = (bad.0 + 1, first(bad.1, Some(p.lines)));
        }
        Tally { lines, bad, dup }
    }

    /// The findings of the count: `line_count`, `not_canonical`, `duplicate_event_id`.
    fn findings(
        &self,
        name: &str,
        raw_location: &str,
        accepted_rows: u64,
        contract: &Contract,
    ) -> Vec<Finding> {
        let mut findings = Vec::new();
        if let Some(lines) = self.lines.filter(|&n| n != accepted_rows) {
            findings.push(Finding::new(
                name,
                "line_count",
                format!(
                    "{raw_location} has {lines} lines, the checkpoint recorded {accepted_rows} accepted rows"
                ),
            ));
        }
        if self.bad.0 > 0 {
            findings.push(Finding::new(
                name,
                "not_canonical",
                format!(
                    "{} lines are not the canonical form of a valid event (first at line {}) or the object is not newline-terminated",
                    self.bad.0,
                    self.bad.1.unwrap_or(0)
                ),
            ));
        }
        if self.dup.0 > 0 {
            findings.push(Finding::new(
                name,
                "duplicate_event_id",
                format!(
                    "{} lines repeat an earlier {} (first at line {})",
                    self.dup.0,
                    contract.fields[contract.identity].name,
                    self.dup.1.unwrap_or(0)
                ),
            ));
        }
        findings
    }
}

/// The earlier of two first lines.
fn first(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        _ => a.or(b),
    }
}

async fn quarantine_findings(
    lake: &dyn Store,
    layout: &Layout,
    cur: &Current,
) -> Result<Vec<Finding>> {
    let rec = &cur.record;
    let name = &layout.input_name;
    let qloc = lake.location(&layout.quarantine);
    let records = match lake.read(&layout.quarantine, 0).await {
        Ok(mut r) => {
            let mut count = 0u64;
            let mut buf = bytes::BytesMut::with_capacity(1 << 16);
            loop {
                buf.clear();
                let k = r
                    .read_chunk(&mut buf)
                    .await
                    .map_err(|e| crate::Error::store("read", &qloc, e))?;
                if k == 0 {
                    break;
                }
                count += buf.iter().filter(|&&b| b == b'\n').count() as u64;
            }
            Some(count)
        }
        Err(crate::Error::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    Ok(match records {
        None if rec.rejected_rows > 0 => vec![Finding::new(
            name,
            "quarantine_missing",
            format!(
                "{qloc} does not exist, the checkpoint recorded {} rejected rows",
                rec.rejected_rows
            ),
        )],
        Some(n) if n != rec.rejected_rows => vec![Finding::new(
            name,
            "quarantine_count",
            format!(
                "{qloc} holds {n} records, the checkpoint recorded {} rejected rows",
                rec.rejected_rows
            ),
        )],
        _ => Vec::new(),
    })
}
