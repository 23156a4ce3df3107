//! `verify --deep`: every line of a published object read and checked against the
//! contract, and its quarantine's record count.

use std::collections::HashSet;

use tokio::io::AsyncReadExt;
use xxhash_rust::xxh3::xxh3_128;

use super::Finding;
use crate::checkpoint::Current;
use crate::contract::{canonicalize_with, validate, Carry, Contract, Line, LineFramer, Verdict};
use crate::error::Result;
use crate::layout::Layout;
use crate::store::Store;

/// Count the lines of an object and check each is the canonical form of a valid
/// event whose identity (the contract's `identity` field) was not seen before.
/// Reads the object once, as a stream; keeps a 128-bit digest per identity.
pub(super) async fn deep_findings(
    lake: &dyn Store,
    layout: &Layout,
    cur: &Current,
    contract: &Contract,
) -> Result<Vec<Finding>> {
    let rec = &cur.record;
    let name = &layout.input_name;
    let mut findings = Vec::new();
    let reader = lake.read(&layout.raw).await?;
    let raw_location = lake.location(&layout.raw);
    let mut framer = LineFramer::new(64 << 20);
    let mut ids: HashSet<u128> = HashSet::new();
    let mut lines = 0u64;
    let mut bad: (u64, Option<u64>) = (0, None);
    let mut dup: (u64, Option<u64>) = (0, None);
    let mut canonical = Vec::with_capacity(512);
    let mut carry = Carry::default();
    let mut last_byte = b'\n';
    let mut content_bytes = 0u64;
    let mut check = |line: Line<'_>| -> std::result::Result<(), ()> {
        lines += 1;
        let n = line.number();
        let ok = match line {
            Line::Content { bytes, .. } => {
                match canonical_id(contract, &mut carry, bytes, &mut canonical) {
                    Some(id) => {
                        if !ids.insert(id) {
                            dup.0 += 1;
                            dup.1.get_or_insert(n);
                        }
                        canonical == bytes
                    }
                    None => false,
                }
            }
            Line::TooLong { .. } => false,
        };
        if !ok {
            bad.0 += 1;
            bad.1.get_or_insert(n);
        }
        Ok(())
    };
    // A compressed object (--output-compression) is checked by its content.
    let broken = crate::compression::read_content(reader, &raw_location, |piece| {
        if let Some(&b) = piece.last() {
            last_byte = b;
        }
        content_bytes += piece.len() as u64;
        let _ = framer.push(piece, &mut check);
    })
    .await?;
    if broken.is_some() {
        findings.push(Finding::new(
            name,
            "corrupt_compression",
            format!("{raw_location} does not decode to its end (truncated or corrupt)"),
        ));
        findings.extend(quarantine_findings(lake, layout, cur).await?);
        return Ok(findings);
    }
    let _ = framer.finish(&mut check);
    if framer.lines_seen() != lines {
        // Blank lines are never published.
        bad.0 += framer.lines_seen() - lines;
    }
    if last_byte != b'\n' && (lines > 0 || content_bytes > 0) {
        bad.0 += 1;
        bad.1.get_or_insert(framer.lines_seen());
    }
    let tally = Tally { lines, bad, dup };
    findings.extend(tally.findings(name, &raw_location, rec.accepted_rows, contract));
    findings.extend(quarantine_findings(lake, layout, cur).await?);
    Ok(findings)
}

/// The canonical form of `line` (into `canonical`) and its identity's digest, if
/// `line` is a valid event: by the landing's single pass when it can vouch for the
/// line (most lines), else by the full rules.
fn canonical_id(
    contract: &Contract,
    carry: &mut Carry,
    line: &[u8],
    canonical: &mut Vec<u8>,
) -> Option<u128> {
    canonical.clear();
    if let Some(c) = canonicalize_with(contract, carry, line, canonical) {
        return Some(xxh3_128(&canonical[c.id]));
    }
    match validate(contract, line) {
        Verdict::Accept(ev) => {
            ev.write_canonical(canonical);
            Some(xxh3_128(ev.id().as_bytes()))
        }
        _ => None,
    }
}

/// What the one read of a published object counted.
struct Tally {
    lines: u64,
    /// Lines that are not the canonical form of a valid event, and the first.
    bad: (u64, Option<u64>),
    /// Lines whose identity an earlier line had, and the first.
    dup: (u64, Option<u64>),
}

impl Tally {
    /// The findings of the count: `line_count`, `not_canonical`, `duplicate_event_id`.
    fn findings(
        &self,
        name: &str,
        raw_location: &str,
        accepted_rows: u64,
        contract: &Contract,
    ) -> Vec<Finding> {
        let mut findings = Vec::new();
        if self.lines != accepted_rows {
            findings.push(Finding::new(
                name,
                "line_count",
                format!(
                    "{} has {} lines, the checkpoint recorded {} accepted rows",
                    raw_location, self.lines, accepted_rows
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

async fn quarantine_findings(
    lake: &dyn Store,
    layout: &Layout,
    cur: &Current,
) -> Result<Vec<Finding>> {
    let rec = &cur.record;
    let name = &layout.input_name;
    let qloc = lake.location(&layout.quarantine);
    let records = match lake.read(&layout.quarantine).await {
        Ok(mut r) => {
            let mut count = 0u64;
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let k = r
                    .body
                    .read(&mut buf)
                    .await
                    .map_err(|e| crate::Error::store("read", &qloc, e))?;
                if k == 0 {
                    break;
                }
                count += buf[..k].iter().filter(|&&b| b == b'\n').count() as u64;
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
