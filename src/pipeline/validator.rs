//! The validation stage: framed lines in, published bytes and quarantine records
//! out, with counts and, at most once, a refusal. Pure and synchronous, so it can be
//! fed from any reader and tested without a store.

use crate::contract::{self, Line, LineFramer, Reason, Verdict};
use std::collections::VecDeque;

use crate::identity::{DedupIndex, Digests, Seen};
use crate::summary::{Refusal, RefusalKind, Rejected};

/// Row counts of one input.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub accepted: u64,
    pub rejected: u64,
    pub duplicates: u64,
}

/// How many quarantined lines `check` lists.
pub const CHECK_REASONS: usize = 20;

pub struct Validator {
    framer: LineFramer,
    state: State,
}

struct State {
    /// Sized from the first chunk (see [`DedupIndex::estimate_events`]).
    index: Option<DedupIndex>,
    input_size: u64,
    seed: u64,
    cap: u64,
    counts: Counts,
    out: Vec<u8>,
    quarantine: Vec<u8>,
    pending: VecDeque<Pending>,
    /// Canonical buffers of resolved events, reused.
    spare: Vec<Vec<u8>>,
    refusal: Option<Refusal>,
    first_rejects: Vec<Rejected>,
}

impl Validator {
    /// `cap`: quarantined lines tolerated; `input_size` pre-sizes the dedup index.
    pub fn new(max_line_bytes: usize, cap: u64, input_size: u64, seed: u64) -> Self {
        Validator {
            framer: LineFramer::new(max_line_bytes),
            state: State {
                index: None,
                input_size,
                seed,
                cap,
                counts: Counts::default(),
                out: Vec::with_capacity(2 << 20),
                quarantine: Vec::new(),
                pending: VecDeque::with_capacity(PREFETCH_DEPTH + 1),
                spare: Vec::new(),
                refusal: None,
                first_rejects: Vec::new(),
            },
        }
    }

    /// Validate the lines completed by `chunk`. After a refusal, input is ignored
    /// (the caller still hashes it).
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.state.refusal.is_some() {
            return;
        }
        if self.state.index.is_none() {
            let events = DedupIndex::estimate_events(self.state.input_size, chunk);
            self.state.index = Some(DedupIndex::with_capacity(events, self.state.seed));
        }
        let state = &mut self.state;
        if let Err(r) = self.framer.push(chunk, |line| state.line(line)) {
            self.state.refusal = Some(r);
        }
    }

    /// End of input: the last line may lack its newline.
    pub fn finish(&mut self) {
        if self.state.refusal.is_some() {
            return;
        }
        let state = &mut self.state;
        if let Err(r) = self.framer.finish(|line| state.line(line)).and_then(|()| state.drain()) {
            self.state.refusal = Some(r);
        }
    }

    pub fn refusal(&self) -> Option<&Refusal> {
        self.state.refusal.as_ref()
    }

    pub fn counts(&self) -> Counts {
        self.state.counts
    }

    /// Published bytes produced so far.
    pub fn output(&mut self) -> &mut Vec<u8> {
        &mut self.state.out
    }

    /// Quarantine records produced so far.
    pub fn quarantine(&mut self) -> &mut Vec<u8> {
        &mut self.state.quarantine
    }

    /// The first quarantined lines, for `check`.
    pub fn first_rejects(&self) -> &[Rejected] {
        &self.state.first_rejects
    }

    pub fn distinct_events(&self) -> usize {
        self.state.index.as_ref().map_or(0, DedupIndex::len)
    }
}

/// Accepted events wait this many lines between the prefetch of their index slot
/// and the insert, so the cache misses of a large index overlap.
const PREFETCH_DEPTH: usize = 8;

/// An accepted event whose index slot is being prefetched.
struct Pending {
    number: u64,
    digests: Digests,
    canonical: Vec<u8>,
}

impl State {
    fn line(&mut self, line: Line<'_>) -> Result<(), Refusal> {
        match line {
            Line::TooLong { number } => self.reject(number, Reason::LineTooLong),
            Line::Content { number, bytes } => match contract::validate(bytes) {
                Verdict::Accept(event) => self.accept(number, &event),
                Verdict::Quarantine(reason) => self.reject(number, reason),
                Verdict::Prohibited(field) => {
                    // Earlier lines decide first: one of them may be a collision.
                    self.drain()?;
                    Err(Refusal {
                        kind: RefusalKind::ProhibitedField,
                        line: number,
                        field: Some(field),
                    })
                }
            },
        }
    }

    /// Queue an accepted event behind a prefetch of its index slot.
    fn accept(&mut self, number: u64, event: &contract::Event<'_>) -> Result<(), Refusal> {
        let mut canonical = self.spare.pop().unwrap_or_default();
        canonical.clear();
        event.write_canonical(&mut canonical);
        let index = self
            .index
            .get_or_insert_with(|| DedupIndex::with_capacity(1024, self.seed));
        let digests = index.digests(event.event_id.as_bytes(), &canonical);
        index.prefetch(&digests);
        self.pending.push_back(Pending {
            number,
            digests,
            canonical,
        });
        if self.pending.len() > PREFETCH_DEPTH {
            self.resolve_oldest()?;
        }
        Ok(())
    }

    /// Insert the oldest pending event: publish it, collapse it, or refuse.
    fn resolve_oldest(&mut self) -> Result<(), Refusal> {
        let (Some(p), Some(index)) = (self.pending.pop_front(), self.index.as_mut()) else {
            return Ok(());
        };
        let seen = index.insert(p.digests);
        match seen {
            Seen::New => {
                self.counts.accepted += 1;
                self.out.extend_from_slice(&p.canonical);
                self.out.push(b'\n');
            }
            Seen::Duplicate => self.counts.duplicates += 1,
            Seen::Collision => {
                return Err(Refusal {
                    kind: RefusalKind::IdCollision,
                    line: p.number,
                    field: None,
                })
            }
        }
        self.spare.push(p.canonical);
        Ok(())
    }

    /// Resolve every pending event, in input order.
    fn drain(&mut self) -> Result<(), Refusal> {
        while !self.pending.is_empty() {
            self.resolve_oldest()?;
        }
        Ok(())
    }

    fn reject(&mut self, number: u64, reason: Reason) -> Result<(), Refusal> {
        // Counts and the cap are decided in line order.
        self.drain()?;
        self.counts.rejected += 1;
        if self.counts.rejected > self.cap {
            return Err(Refusal {
                kind: RefusalKind::RejectCap,
                line: number,
                field: None,
            });
        }
        if self.first_rejects.len() < CHECK_REASONS {
            self.first_rejects.push(Rejected {
                line: number,
                reason: reason.code(),
            });
        }
        // {"line":N,"reason":"code"} — the line number and code, never the content.
        self.quarantine.extend_from_slice(b"{\"line\":");
        self.quarantine
            .extend_from_slice(itoa::Buffer::new().format(number).as_bytes());
        self.quarantine.extend_from_slice(b",\"reason\":\"");
        self.quarantine.extend_from_slice(reason.code().as_bytes());
        self.quarantine.extend_from_slice(b"\"}\n");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"event_id":"e1","learner_id":"l","lesson_id":"s","event_type":"completed","attempt_number":1,"event_time":"2026-03-02T10:00:00Z"}"#;

    fn run(input: &str, cap: u64) -> Validator {
        let mut v = Validator::new(1 << 20, cap, input.len() as u64, 1);
        // Feed in small chunks so lines span chunk boundaries.
        for chunk in input.as_bytes().chunks(7) {
            v.feed(chunk);
        }
        v.finish();
        v
    }

    #[test]
    fn accepts_and_collapses_an_exact_retry() {
        let retry = r#"{"event_time":"2026-03-02T10:00:00+00:00","attempt_number":1,"lesson_id":"s","learner_id":"l","event_type":"completed","event_id":"e1","checkpoint":null}"#;
        let mut v = run(&format!("{GOOD}\n{retry}\n"), 0);
        assert_eq!(
            v.counts(),
            Counts {
                accepted: 1,
                rejected: 0,
                duplicates: 1
            }
        );
        assert!(v.refusal().is_none());
        assert_eq!(v.output().iter().filter(|&&b| b == b'\n').count(), 1);
    }

    #[test]
    fn collision_refuses_at_the_second_line() {
        let other = GOOD.replace("\"attempt_number\":1", "\"attempt_number\":2");
        let v = run(&format!("{GOOD}\n\n{other}\n"), 0);
        let r = v.refusal().unwrap();
        assert_eq!((r.kind, r.line), (RefusalKind::IdCollision, 3));
    }

    #[test]
    fn cap_of_n_accepts_n_rejects_and_refuses_the_next() {
        let v = run(&format!("{GOOD}\nnot json\n[1]\n"), 2);
        assert!(v.refusal().is_none());
        assert_eq!(v.counts().rejected, 2);
        let v = run(&format!("{GOOD}\nnot json\n[1]\n{{}}\n"), 2);
        let r = v.refusal().unwrap();
        assert_eq!((r.kind, r.line), (RefusalKind::RejectCap, 4));
    }

    #[test]
    fn quarantine_records_carry_line_and_reason_only() {
        let mut v = run(&format!("not json secret@example.com\n{GOOD}\n"), 5);
        let q = String::from_utf8(v.quarantine().clone()).unwrap();
        assert_eq!(q, "{\"line\":1,\"reason\":\"invalid_json\"}\n");
        assert_eq!(v.first_rejects()[0].reason, "invalid_json");
    }

    #[test]
    fn prohibited_field_refuses_and_names_the_field() {
        let bad = GOOD.replace("\"lesson_id\"", "\"email\":\"x@y\",\"lesson_id\"");
        let v = run(&format!("{GOOD}\n{bad}\n"), 100);
        let r = v.refusal().unwrap();
        assert_eq!(
            (r.kind, r.line, r.field),
            (RefusalKind::ProhibitedField, 2, Some("email"))
        );
    }
}
