//! The one JSON line a run prints on stdout (docs/interface.md section 5). It carries
//! identifiers, counts, paths and reasons, never an event's content.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Published,
    Skipped,
    Refused,
    /// `landing check`: validated, nothing written.
    Checked,
    /// Stopped by SIGTERM or SIGINT before the publish: staging removed, lease released.
    Interrupted,
    /// Another run held the lease (exit 75); no summary, nothing written.
    Busy,
    /// Another writer moved what the run decided on, or the lease was lost (exit 75).
    Conflict,
    /// Any other error ended the run (exit 1).
    Failed,
    /// An inbox input a signal stopped before its run began; on no line, counted by
    /// the totals line's `not_started`.
    NotStarted,
}

impl Action {
    /// Every action, in the order declared (an action's index into [`Outcomes`]).
    pub const ALL: [Action; 9] = [
        Action::Published,
        Action::Skipped,
        Action::Refused,
        Action::Checked,
        Action::Interrupted,
        Action::Busy,
        Action::Conflict,
        Action::Failed,
        Action::NotStarted,
    ];

    /// As spelled on stdout and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Published => "published",
            Action::Skipped => "skipped",
            Action::Refused => "refused",
            Action::Checked => "checked",
            Action::Interrupted => "interrupted",
            Action::Busy => "busy",
            Action::Conflict => "conflict",
            Action::Failed => "failed",
            Action::NotStarted => "not_started",
        }
    }

    /// The outcome of a run that ended in `e`, reaching no summary.
    pub fn of_error(e: &crate::Error) -> Action {
        match e.root() {
            crate::Error::Busy { .. } => Action::Busy,
            crate::Error::Conflict(_) => Action::Conflict,
            _ => Action::Failed,
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
    /// Its number: 15 or 2.
    pub fn number(self) -> i32 {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Int => libc::SIGINT,
        }
    }

    /// 128 + the signal number, as a shell reports a process the signal killed.
    pub fn exit_code(self) -> i32 {
        match self {
            Signal::Term => crate::EXIT_SIGTERM,
            Signal::Int => crate::EXIT_SIGINT,
        }
    }
}

pub use landing_pass::report::{Refusal, RefusalKind, Rejected, SpillReport};

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
    /// The commit log entry of this publish, or for a skip of the publish it found
    /// (absent for a day landed before the log existed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_sequence: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Refusal>,
    /// `landing check` only: the first quarantined lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantine_reasons: Option<Vec<Rejected>>,
    /// `interrupted` only: which signal stopped the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<Signal>,
    /// Only when the dedup index spilled to scratch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spill: Option<SpillReport>,
    /// What the repair of the product's log after the run did, when it did anything
    /// (`landing run --input`; an inbox run says it on its totals line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_repairs: Option<Repairs>,
}

/// What the repair of a product's log did: nothing at all on a quiet lake.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Repairs {
    /// Entries written for publishes whose runs died before writing them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<Repaired>,
    /// Inputs whose lease a run holds that may have died: its record did not
    /// change within `--lease-wait` (none, by default). A later run looks again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
}

impl Repairs {
    pub fn is_empty(&self) -> bool {
        self.repaired.is_empty() && self.pending.is_empty()
    }
}

/// One entry written by a repair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repaired {
    pub input_name: String,
    pub sequence: u64,
    /// The run that published it and died before its entry.
    pub run_id: String,
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
            log_sequence: None,
            reason: None,
            quarantine_reasons: None,
            signal: None,
            spill: None,
            log_repairs: None,
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
            log_sequence: rec.log_sequence,
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

    /// The line of a run that reached no summary (busy, conflict or failed): a
    /// summary's keys with nothing counted, no input hash, and the error chain. The
    /// run id is `null` when the run never got one.
    pub fn unfinished(
        run_id: Option<String>,
        product: String,
        input: String,
        action: Action,
        error: &str,
    ) -> serde_json::Value {
        let empty = Summary::new(run_id.clone().unwrap_or_default(), product, input, action);
        // As in `to_json`: serialising a summary cannot fail.
        let mut line = serde_json::to_value(empty).expect("a summary serialises");
        line["run_id"] = serde_json::json!(run_id);
        line["input_sha256"] = serde_json::Value::Null;
        line["error"] = serde_json::json!(error);
        line
    }
}

/// How many inputs ended in each [`Action`]: the one outcome count, shared by the
/// inbox's totals line, the pushed metrics and the exit code of an inbox run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcomes([u64; Action::ALL.len()]);

/// The totals line of an inbox run is its outcome counts.
pub type Totals = Outcomes;

impl Outcomes {
    /// One more input ended in `action`.
    pub fn add(&mut self, action: Action) {
        self.0[action as usize] += 1;
    }

    /// How many inputs ended in `action`.
    pub fn get(&self, action: Action) -> u64 {
        self.0[action as usize]
    }

    /// Inputs the run took up: every outcome but `not_started` (a signal came
    /// first) and `checked` (`landing check` never runs an inbox).
    pub fn inputs(&self) -> u64 {
        Action::ALL
            .iter()
            .filter(|a| !matches!(a, Action::NotStarted | Action::Checked))
            .map(|a| self.get(*a))
            .sum()
    }

    /// 1 if any input failed, else 65 if any was refused, else 75 if any was busy
    /// (or in conflict).
    pub fn exit_code(&self) -> i32 {
        if self.get(Action::Failed) > 0 {
            crate::EXIT_FAILURE
        } else if self.get(Action::Refused) > 0 {
            crate::EXIT_REFUSED
        } else if self.get(Action::Busy) + self.get(Action::Conflict) > 0 {
            crate::EXIT_BUSY
        } else {
            crate::EXIT_OK
        }
    }
}

/// The totals line's keys (docs/interface.md): `conflict` and `interrupted` only
/// when they happened; `not_started` is the line's own key, beside the totals.
impl Serialize for Outcomes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("inputs", &self.inputs())?;
        for a in [
            Action::Published,
            Action::Skipped,
            Action::Refused,
            Action::Busy,
            Action::Failed,
        ] {
            m.serialize_entry(a.as_str(), &self.get(a))?;
        }
        for a in [Action::Conflict, Action::Interrupted] {
            if self.get(a) > 0 {
                m.serialize_entry(a.as_str(), &self.get(a))?;
            }
        }
        m.end()
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
            Action::Busy,
            Action::Conflict,
            Action::Failed,
            Action::NotStarted,
        ] {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
    }

    /// Busy and conflict end a run that changed nothing (exit 75), anything else
    /// fails it; the chain's root decides.
    #[test]
    fn an_error_is_busy_a_conflict_or_a_failure() {
        let busy = crate::Error::Busy {
            location: "l".into(),
            holder: "h".into(),
            until: "u".into(),
        };
        assert_eq!(Action::of_error(&busy), Action::Busy);
        let conflict = crate::Error::Conflict("c".into());
        assert_eq!(Action::of_error(&conflict), Action::Conflict);
        let config = crate::Error::Config("x".into());
        assert_eq!(Action::of_error(&config), Action::Failed);
    }

    #[test]
    fn signals_have_their_numbers_and_the_shells_exit_codes() {
        assert_eq!((Signal::Term.number(), Signal::Term.exit_code()), (15, 143));
        assert_eq!((Signal::Int.number(), Signal::Int.exit_code()), (2, 130));
    }

    #[test]
    fn a_refusal_names_its_kind_line_and_field() {
        let r = Refusal {
            kind: RefusalKind::ProhibitedField,
            line: 2,
            field: Some("email".into()),
        };
        assert_eq!(r.to_string(), "prohibited_field at line 2 (field email)");
        let r = Refusal {
            kind: RefusalKind::RejectCap,
            line: 9,
            field: None,
        };
        assert_eq!(r.to_string(), "reject_cap at line 9");
    }

    /// A skip says what the checkpoint says, and exits 0; a refusal exits 65, a
    /// signal 128 + its number. The line is one JSON object with these values.
    #[test]
    fn a_skip_reports_the_checkpoint_and_each_outcome_its_exit_code() {
        let rec: crate::checkpoint::Checkpoint = serde_json::from_value(serde_json::json!({
            "product": "progress", "input_name": "a.jsonl", "input_sha256": "ab",
            "accepted_rows": 7, "rejected_rows": 2, "duplicate_rows": 1,
            "published_path": "raw/progress/a.jsonl", "published_size": 10,
            "quarantine_path": "quarantine/progress/a.jsonl",
            "committed_at": "2026-01-01T00:00:00Z", "run_id": "old", "job_version": "0",
        }))
        .unwrap();
        let s = Summary::skipped("r".into(), "progress".into(), "/in/a.jsonl".into(), &rec);
        assert_eq!(
            s.to_json(),
            r#"{"run_id":"r","product":"progress","input":"/in/a.jsonl","input_sha256":"ab","action":"skipped","accepted_rows":7,"rejected_rows":2,"duplicate_rows":1,"published_path":"raw/progress/a.jsonl","quarantine_path":"quarantine/progress/a.jsonl","checkpoint_moved":false}"#
        );
        assert_eq!(s.exit_code(), 0);
        // A day landed since the commit log existed: the skip names its entry.
        let mut logged = rec.clone();
        logged.log_sequence = Some(41);
        let s41 = Summary::skipped("r".into(), "progress".into(), "/in/a.jsonl".into(), &logged);
        assert!(
            s41.to_json()
                .ends_with(r#""checkpoint_moved":false,"log_sequence":41}"#),
            "{}",
            s41.to_json()
        );
        let refused = Summary {
            reason: Some(Refusal {
                kind: RefusalKind::IdCollision,
                line: 3,
                field: None,
            }),
            ..s.clone()
        };
        assert_eq!(refused.exit_code(), 65);
        let stopped = Summary {
            signal: Some(Signal::Int),
            ..s
        };
        assert_eq!(stopped.exit_code(), 130);
    }

    /// An inbox run's totals: each action counted once (not-started apart from the
    /// inputs), and the exit code of the worst outcome: failed 1, refused 65, busy or
    /// conflict 75, else 0.
    #[test]
    fn totals_count_each_outcome_and_exit_with_the_worst() {
        let mut t = Totals::default();
        assert_eq!(t.exit_code(), 0);
        for a in [
            Action::Published,
            Action::Skipped,
            Action::Skipped,
            Action::NotStarted,
        ] {
            t.add(a);
        }
        assert_eq!(
            (
                t.inputs(),
                t.get(Action::Published),
                t.get(Action::Skipped),
                t.get(Action::NotStarted)
            ),
            (3, 1, 2, 1)
        );
        assert_eq!(t.exit_code(), 0);
        t.add(Action::Conflict);
        assert_eq!(t.exit_code(), 75, "a conflict alone");
        let mut b = Totals::default();
        b.add(Action::Busy);
        assert_eq!(b.exit_code(), 75, "a busy input alone");
        t.add(Action::Refused);
        assert_eq!(t.exit_code(), 65);
        t.add(Action::Failed);
        assert_eq!(t.exit_code(), 1);
        t.add(Action::Interrupted);
        let counts: Vec<u64> = Action::ALL.iter().map(|a| t.get(*a)).collect();
        // Published, skipped, refused, checked, interrupted, busy, conflict, failed,
        // not started.
        assert_eq!(counts, [1, 2, 1, 0, 1, 0, 1, 1, 1]);
        assert_eq!(t.inputs(), 7);
        assert!(Action::ALL
            .iter()
            .enumerate()
            .all(|(i, a)| *a as usize == i));
        // A run record spells its action by name, and reads it back.
        let json = serde_json::to_string(&Action::NotStarted).unwrap();
        assert_eq!(json, r#""not_started""#);
        assert_eq!(
            serde_json::from_str::<Action>(&json).unwrap(),
            Action::NotStarted
        );
        // The totals line shows conflict and interrupted only when they happened.
        assert_eq!(
            serde_json::to_string(&b).unwrap(),
            r#"{"inputs":1,"published":0,"skipped":0,"refused":0,"busy":1,"failed":0}"#
        );
        assert!(serde_json::to_string(&t)
            .unwrap()
            .ends_with(r#""failed":1,"conflict":1,"interrupted":1}"#));
    }

    /// The line of a run without a summary: the keys and values inbox lines have
    /// always had (they are read by scripts).
    #[test]
    fn an_unfinished_line_keeps_its_keys() {
        let line = Summary::unfinished(None, "p".into(), "/in/a".into(), Action::Busy, "e");
        assert_eq!(
            line.to_string(),
            r#"{"accepted_rows":0,"action":"busy","checkpoint_moved":false,"duplicate_rows":0,"error":"e","input":"/in/a","input_sha256":null,"product":"p","published_path":null,"quarantine_path":null,"rejected_rows":0,"run_id":null}"#
        );
        let line = Summary::unfinished(
            Some("r".into()),
            "p".into(),
            "i".into(),
            Action::Failed,
            "e",
        );
        assert_eq!(line["run_id"], "r");
    }
}
