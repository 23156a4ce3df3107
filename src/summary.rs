//! The one JSON line a run prints on stdout (docs/CONTRACT.md section 5). It carries
//! identifiers, counts, paths and reasons, never an event's content.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Published,
    Skipped,
    Refused,
    /// `landing check`: validated, nothing written.
    Checked,
    /// Stopped by SIGTERM or SIGINT before the publish: staging removed, lease released.
    Interrupted,
}

/// The signal that interrupted a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Signal {
    #[serde(rename = "SIGTERM")]
    Term,
    #[serde(rename = "SIGINT")]
    Int,
}

impl Signal {
    /// 128 + the signal number, as a shell reports a process the signal killed.
    pub fn exit_code(self) -> i32 {
        match self {
            Signal::Term => 128 + libc::SIGTERM,
            Signal::Int => 128 + libc::SIGINT,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    ProhibitedField,
    IdCollision,
    RejectCap,
}

/// Why a file was refused, and the physical line that decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub line: u64,
    /// For `prohibited_field`: the field's name (never its value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<&'static str>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            RefusalKind::ProhibitedField => "prohibited_field",
            RefusalKind::IdCollision => "id_collision",
            RefusalKind::RejectCap => "reject_cap",
        };
        write!(f, "{kind} at line {}", self.line)?;
        if let Some(field) = self.field {
            write!(f, " (field {field})")?;
        }
        Ok(())
    }
}

/// One quarantined line: its number and reason code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    pub line: u64,
    pub reason: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub run_id: String,
    pub product: String,
    pub input: String,
    pub input_sha256: String,
    pub action: Action,
    pub accepted_rows: u64,
    pub rejected_rows: u64,
    pub duplicate_rows: u64,
    pub published_path: Option<String>,
    pub quarantine_path: Option<String>,
    pub checkpoint_moved: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Refusal>,
    /// `landing check` only: the first quarantined lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantine_reasons: Option<Vec<Rejected>>,
    /// `interrupted` only: which signal stopped the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<Signal>,
}

impl Summary {
    /// A skip: the counts and paths are the checkpoint's, nothing was written.
    pub fn skipped(
        run_id: String,
        product: String,
        input: String,
        rec: &crate::checkpoint::Checkpoint,
    ) -> Summary {
        Summary {
            run_id,
            product,
            input,
            input_sha256: rec.input_sha256.clone(),
            action: Action::Skipped,
            accepted_rows: rec.accepted_rows,
            rejected_rows: rec.rejected_rows,
            duplicate_rows: rec.duplicate_rows,
            published_path: Some(rec.published_path.clone()),
            quarantine_path: rec.quarantine_path.clone(),
            checkpoint_moved: false,
            reason: None,
            quarantine_reasons: None,
            signal: None,
        }
    }

    /// Exit code for this outcome.
    pub fn exit_code(&self) -> i32 {
        if let Some(signal) = self.signal {
            signal.exit_code()
        } else if self.reason.is_some() {
            crate::EXIT_REFUSED
        } else {
            crate::EXIT_OK
        }
    }

    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and enums always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }
}
