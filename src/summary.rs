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

impl Action {
    /// As spelled on stdout and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Published => "published",
            Action::Skipped => "skipped",
            Action::Refused => "refused",
            Action::Checked => "checked",
            Action::Interrupted => "interrupted",
        }
    }
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
    /// The one constructor: a run of `input` that ended in `action`, before anything
    /// was counted or written. Each outcome sets what it adds with struct-update
    /// syntax (`Summary { accepted_rows, ..Summary::new(…) }`).
    pub fn new(run_id: String, product: String, input: String, action: Action) -> Summary {
        Summary {
            run_id,
            product,
            input,
            input_sha256: String::new(),
            action,
            accepted_rows: 0,
            rejected_rows: 0,
            duplicate_rows: 0,
            published_path: None,
            quarantine_path: None,
            checkpoint_moved: false,
            reason: None,
            quarantine_reasons: None,
            signal: None,
        }
    }

    /// A skip: the counts and paths are the checkpoint's, nothing was written.
    pub fn skipped(
        run_id: String,
        product: String,
        input: String,
        rec: &crate::checkpoint::Checkpoint,
    ) -> Summary {
        Summary {
            input_sha256: rec.input_sha256.clone(),
            accepted_rows: rec.accepted_rows,
            rejected_rows: rec.rejected_rows,
            duplicate_rows: rec.duplicate_rows,
            published_path: Some(rec.published_path.clone()),
            quarantine_path: rec.quarantine_path.clone(),
            ..Summary::new(run_id, product, input, Action::Skipped)
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
        // Strings, numbers, enums and string-keyed maps: serialising cannot fail, and
        // an empty summary line must never be printed.
        serde_json::to_string(self).expect("a summary serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logs spell an action exactly as the stdout summary does.
    #[test]
    fn actions_are_spelled_as_on_stdout() {
        for a in [
            Action::Published,
            Action::Skipped,
            Action::Refused,
            Action::Checked,
            Action::Interrupted,
        ] {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
    }
}
