//! What the line pass reports of an input, for the run's summary (the engine's
//! `summary` re-exports them): why a file was refused ([`Refusal`]), the first
//! quarantined lines ([`Rejected`]) and what a spill of the dedup index cost
//! ([`SpillReport`]).

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    ProhibitedField,
    IdCollision,
    RejectCap,
    /// A gzip or zstd input that is truncated or corrupt (docs/design.md § 9).
    CorruptCompression,
    /// A compressed input decoding to more than `--max-decompressed-bytes`.
    DecompressedTooLarge,
}

/// What a run's spill of its dedup index cost (a run whose index stayed within its
/// share has none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SpillReport {
    /// Bytes written to --scratch-dir (runs and intermediate merges).
    pub spilled_bytes: u64,
    /// Sorted runs the spill wrote.
    pub runs: u64,
    /// Runs merged, intermediate rounds included.
    pub runs_merged: u64,
    /// Whether the staged output was copied once more without later duplicates.
    pub second_pass: bool,
    /// Whether the lines after the spill were held back and written by a second read
    /// of the input (chosen when the index had collapsed copies before it spilled).
    pub replayed: bool,
}

/// Why a file was refused, and the physical line that decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub line: u64,
    /// For `prohibited_field`: the field's name (never its value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            RefusalKind::ProhibitedField => "prohibited_field",
            RefusalKind::IdCollision => "id_collision",
            RefusalKind::RejectCap => "reject_cap",
            RefusalKind::CorruptCompression => "corrupt_compression",
            RefusalKind::DecompressedTooLarge => "decompressed_too_large",
        };
        write!(f, "{kind} at line {}", self.line)?;
        if let Some(field) = &self.field {
            write!(f, " (field {field})")?;
        }
        Ok(())
    }
}

/// One quarantined line: its number and reason code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    pub line: u64,
    pub reason: String,
}
