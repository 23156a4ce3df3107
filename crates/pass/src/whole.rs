//! The validation stage on one thread over an input held whole in memory: frame,
//! check and sequence one after the other, then the full-id check of any digest
//! collision. For callers that do not need the parallel pipeline (drills, tests).

use bytes::Bytes;
use std::sync::Arc;

use crate::batch::{check_batch, Batch, Compare};
use crate::contract::{self, Contract, LineFramer};
use crate::identity::Digester;
use crate::report::{Refusal, RefusalKind};
use crate::resolve::IdCheck;
use crate::validator::{Sequencer, Suspect};

/// All three steps on the caller's thread.
pub struct Validator {
    contract: Arc<Contract>,
    framer: LineFramer,
    seq: Sequencer,
    digester: Digester,
}

impl Validator {
    pub fn new(max_line_bytes: usize, cap: u64, input_size: u64, seed: u64) -> Self {
        let contract = contract::progress();
        Validator {
            seq: Sequencer::new(contract.clone(), cap, input_size),
            contract,
            framer: LineFramer::new(max_line_bytes),
            digester: Digester::new(seed),
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        let batch = Batch::frame(&mut self.framer, Bytes::copy_from_slice(chunk));
        self.seq.apply(&check_batch(
            &batch,
            &self.contract,
            self.digester,
            Compare::No,
        ));
    }

    pub fn finish(&mut self) {
        let batch = Batch::finish(&mut self.framer);
        self.seq.apply(&check_batch(
            &batch,
            &self.contract,
            self.digester,
            Compare::No,
        ));
    }

    /// Compare the full ids of any suspects against `input`, the bytes fed.
    pub fn resolve(&mut self, input: &[u8], max_line_bytes: usize) {
        let d = self.digester;
        resolve_in_memory(&mut self.seq, &self.contract, d, max_line_bytes, input);
    }

    pub fn sequencer(&mut self) -> &mut Sequencer {
        &mut self.seq
    }
}

/// The Validator's resolution, over the whole input in memory (drills, tests).
fn resolve_in_memory(
    seq: &mut Sequencer,
    contract: &Contract,
    digester: Digester,
    max_line_bytes: usize,
    input: &[u8],
) {
    let stop = seq.refusal().map_or(u64::MAX, |r| r.line);
    let suspects: Vec<Suspect> = seq
        .suspects()
        .iter()
        .copied()
        .filter(|s| s.line < stop)
        .collect();
    if suspects.is_empty() {
        return;
    }
    let mut ids = IdCheck::new(contract, digester, max_line_bytes, &suspects);
    ids.feed(input);
    let refusal = ids.finish().map(|(s, _)| {
        (
            s,
            Refusal {
                kind: RefusalKind::IdCollision,
                line: s.line,
                field: None,
            },
        )
    });
    match refusal {
        Some((s, r)) => seq.resolve(s.counts.unwrap_or_default(), Some(r)),
        None => {
            let (counts, r) = (seq.counts(), seq.refusal().cloned());
            seq.resolve(counts, r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Rejected;
    use crate::validator::Counts;

    const GOOD: &str = r#"{"event_id":"e1","learner_id":"l","lesson_id":"s","event_type":"completed","attempt_number":1,"event_time":"2026-03-02T10:00:00Z"}"#;

    fn run(input: &str, cap: u64) -> Validator {
        let mut v = Validator::new(1 << 20, cap, input.len() as u64, 1);
        // Feed in small chunks so lines span chunk boundaries.
        for chunk in input.as_bytes().chunks(7) {
            v.feed(chunk);
        }
        v.finish();
        v.resolve(input.as_bytes(), 1 << 20);
        v
    }

    #[test]
    fn accepts_and_collapses_an_exact_retry() {
        let retry = r#"{"event_time":"2026-03-02T10:00:00+00:00","attempt_number":1,"lesson_id":"s","learner_id":"l","event_type":"completed","event_id":"e1","checkpoint":null}"#;
        let mut v = run(&format!("{GOOD}\n{retry}\n"), 0);
        let s = v.sequencer();
        assert_eq!(
            s.counts(),
            Counts {
                accepted: 1,
                rejected: 0,
                duplicates: 1
            }
        );
        assert!(s.refusal().is_none());
        assert_eq!(s.output().iter().filter(|&&b| b == b'\n').count(), 1);
    }

    #[test]
    fn collision_refuses_at_the_second_line() {
        let other = GOOD.replace("\"attempt_number\":1", "\"attempt_number\":2");
        let mut v = run(&format!("{GOOD}\n\n{other}\n"), 0);
        let r = v.sequencer().refusal().unwrap();
        assert_eq!((r.kind, r.line), (RefusalKind::IdCollision, 3));
    }

    #[test]
    fn the_first_refusal_in_line_order_wins() {
        // A collision on line 2 comes before the reject that would break the cap.
        let other = GOOD.replace("\"attempt_number\":1", "\"attempt_number\":2");
        let mut v = run(&format!("{GOOD}\n{other}\nnot json\n"), 0);
        let r = v.sequencer().refusal().unwrap();
        assert_eq!((r.kind, r.line), (RefusalKind::IdCollision, 2));
        assert_eq!(v.sequencer().counts().rejected, 0);
    }

    #[test]
    fn cap_of_n_accepts_n_rejects_and_refuses_the_next() {
        let mut v = run(&format!("{GOOD}\nnot json\n[1]\n"), 2);
        assert!(v.sequencer().refusal().is_none());
        assert_eq!(v.sequencer().counts().rejected, 2);
        let mut v = run(&format!("{GOOD}\nnot json\n[1]\n{{}}\n"), 2);
        let r = v.sequencer().refusal().unwrap();
        assert_eq!((r.kind, r.line), (RefusalKind::RejectCap, 4));
    }

    #[test]
    fn the_reject_that_breaks_the_cap_is_listed_with_its_reason() {
        // Under the default cap 0 a one-line file with one bad line is refused as
        // reject_cap; `check` must still name that line's reason.
        let mut v = run("not json\n", 0);
        let r = v.sequencer().refusal().unwrap();
        assert_eq!((r.kind, r.line), (RefusalKind::RejectCap, 1));
        assert_eq!(
            v.sequencer().first_rejects(),
            [Rejected {
                line: 1,
                reason: "invalid_json".into()
            }]
        );
        // Nothing of a refused file reaches the quarantine.
        assert!(v.sequencer().quarantine().is_empty());
    }

    #[test]
    fn quarantine_records_carry_line_and_reason_only() {
        let mut v = run(&format!("not json secret@example.com\n{GOOD}\n"), 5);
        let q = String::from_utf8(v.sequencer().quarantine().clone()).unwrap();
        assert_eq!(q, "{\"line\":1,\"reason\":\"invalid_json\"}\n");
        assert_eq!(v.sequencer().first_rejects()[0].reason, "invalid_json");
    }

    #[test]
    fn prohibited_field_refuses_and_names_the_field() {
        let bad = GOOD.replace("\"lesson_id\"", "\"email\":\"x@y\",\"lesson_id\"");
        let mut v = run(&format!("{GOOD}\n{bad}\n"), 100);
        let r = v.sequencer().refusal().unwrap();
        assert_eq!(
            (r.kind, r.line, r.field.as_deref()),
            (RefusalKind::ProhibitedField, 2, Some("email"))
        );
    }

    #[test]
    fn lines_spanning_chunks_and_too_long_lines_keep_their_numbers() {
        let long = "x".repeat(100);
        let mut v = Validator::new(50, 5, 0, 1);
        let input = format!("{GOOD}\n{long}\n\n{GOOD}");
        for chunk in input.as_bytes().chunks(3) {
            v.feed(chunk);
        }
        v.finish();
        let s = v.sequencer();
        assert_eq!(
            s.first_rejects(),
            [
                Rejected {
                    line: 1,
                    reason: "line_too_long".into()
                },
                Rejected {
                    line: 2,
                    reason: "line_too_long".into()
                },
                Rejected {
                    line: 4,
                    reason: "line_too_long".into()
                },
            ]
        );
    }
}
