//! The event contract (docs/design.md section 2, docs/contracts.md): what a line is,
//! which lines a product's contract accepts, and the canonical (= published) form of
//! an accepted event. The contract itself is data ([`Contract`], `spec.rs`).
//!
//! Pure code: no I/O, no logging, no global state. Nothing here ever prints, logs
//! or embeds line content or a field value: a verdict carries a reason *code*, or
//! the *name* of a prohibited field, never data.
//!
//! Where each rule lives:
//!
//! - this file: the public surface: [`validate`], [`Verdict`], [`Event`],
//!   [`Reason`] (the quarantine reason codes);
//! - `spec.rs`: the contract file, checked and compiled ([`Contract`]);
//! - `schema.rs`: the JSON Schema a contract gives producers;
//! - `frame.rs`: what a line is: [`LineFramer`] splits a stream into numbered
//!   physical lines (BOM, `\r\n`, blank lines, `line_too_long`);
//! - `object.rs`: the rules for one line's object: keys (prohibited, duplicate,
//!   unknown, compared after unescaping), then each field's type and value;
//! - `scan.rs`: the fast scanner for flat objects without escapes, which nearly
//!   every line is; anything else goes to serde_json (in `object.rs`);
//! - `time.rs`: RFC 3339 event time, normalized to UTC ([`UtcTime`]);
//! - `fast.rs`: the single pass for the common line: checks it and writes its
//!   canonical form in one walk ([`canonicalize_with`]), or declines to [`validate`];
//! - `canonical.rs`: the canonical form, written by [`Event::write_canonical`];
//! - `quarantine.rs`: the quarantine record of a rejected line
//!   ([`write_quarantine_record`]).
//!
//! Hot path (tens of millions of lines a day): lines inside a chunk are handed out
//! as slices of that chunk; a flat object without escapes (nearly every line) is
//! read by a small borrowed scanner, anything else by serde_json (`&RawValue`,
//! `Cow`), and a differential test holds the two equal. An accepted event only
//! allocates when an identifier contains a JSON escape.

use std::borrow::Cow;
use std::fmt;

mod bytes;
mod canonical;
mod fast;
mod field;
mod frame;
mod object;
mod quarantine;
mod scan;
pub mod schema;
mod spec;
mod table;
mod time;

pub use self::fast::{canonicalize_with, Carry};
pub use self::frame::{Line, LineFramer, Resume};
pub use self::quarantine::write_quarantine_record;
pub use self::spec::{builtin, progress, progress_sha256, Contract};
pub use self::time::UtcTime;

/// The seven `progress` fields, in canonical (sorted) key order (the tests' reference).
#[cfg(test)]
pub const CONTRACT_FIELDS: [&str; 7] = [
    "attempt_number",
    "checkpoint",
    "event_id",
    "event_time",
    "event_type",
    "learner_id",
    "lesson_id",
];

/// Why a line was quarantined. [`Reason::code`] gives its stable snake_case code;
/// the per-field codes (`missing_<field>`, `invalid_<field>`) come from the contract,
/// so a per-field reason holds the field's index into [`Contract::fields`], and the
/// reason is plain data that outlives no contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    LineTooLong,
    InvalidUtf8,
    InvalidJson,
    NotAnObject,
    DuplicateKey,
    UnknownField,
    /// A required field (this index of [`Contract::fields`]) is absent: its
    /// `missing_<field>` code.
    Missing(usize),
    /// A field's value (this index of [`Contract::fields`]) breaks its type: its
    /// `invalid_<field>` code.
    Invalid(usize),
}

impl Reason {
    /// Stable snake_case code, as written to the quarantine file; `contract` is the
    /// one whose rules gave the reason.
    pub fn code(self, contract: &Contract) -> &str {
        match self {
            Reason::LineTooLong => "line_too_long",
            Reason::InvalidUtf8 => "invalid_utf8",
            Reason::InvalidJson => "invalid_json",
            Reason::NotAnObject => "not_an_object",
            Reason::DuplicateKey => "duplicate_key",
            Reason::UnknownField => "unknown_field",
            Reason::Missing(k) => &contract.fields[k].missing_code,
            Reason::Invalid(k) => &contract.fields[k].invalid_code,
        }
    }
}

/// One accepted field value, normalized. Strings borrow from the line unless they
/// contained a JSON escape.
#[derive(Clone, PartialEq, Eq)]
pub enum Value<'a> {
    Null,
    Str(Cow<'a, str>),
    /// One of the field's enum values (the contract's text).
    Enum(&'a str),
    Int(i64),
    Bool(bool),
    Time(UtcTime),
}

/// An accepted, normalized event: one value per contract field, in canonical
/// (sorted) order. `Debug` is redacted: an event must not reach a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Event<'a> {
    pub contract: &'a Contract,
    pub values: Vec<Value<'a>>,
}

impl<'a> Event<'a> {
    /// The value of the field `name` (`None`: no such field in the contract).
    #[cfg(test)]
    pub fn get(&self, name: &str) -> Option<&Value<'a>> {
        let k = self.contract.fields.iter().position(|f| f.name == name)?;
        self.values.get(k)
    }

    /// The identity key's text (a required string, so always present).
    pub fn id(&self) -> &str {
        match self.values.get(self.contract.identity) {
            Some(Value::Str(s)) => s,
            _ => "",
        }
    }
}

impl PartialEq for Contract {
    fn eq(&self, other: &Self) -> bool {
        self.sha256 == other.sha256
    }
}

impl Eq for Contract {}

/// Redacted: the variant only, never the value.
impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Value::Null => "Null",
            Value::Str(_) => "Str",
            Value::Enum(_) => "Enum",
            Value::Int(_) => "Int",
            Value::Bool(_) => "Bool",
            Value::Time(_) => "Time",
        })
    }
}

impl fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event").finish_non_exhaustive()
    }
}

/// The outcome for one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'a> {
    Accept(Event<'a>),
    Quarantine(Reason),
    /// A prohibited top-level key was present on a line that parses as a JSON
    /// object. Refuses the whole file.
    /// The index into [`Contract::prohibited`] of the name (never its value).
    Prohibited(usize),
}

/// Validates one physical line (without `\n` and trailing `\r`; never blank)
/// against `contract`.
///
/// Order: UTF-8, JSON syntax, object, prohibited key, duplicate key, unknown key,
/// missing fields, then field types/values in the contract file's order.
pub fn validate<'a>(contract: &'a Contract, line: &'a [u8]) -> Verdict<'a> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Verdict::Quarantine(Reason::InvalidUtf8);
    };
    object::verdict_for(contract, parse_object(contract, text))
}

/// Parses the whole line; any JSON error anywhere means `invalid_json`, even if a
/// prohibited key was already seen (the rule applies to lines that parse).
fn parse_object<'a>(contract: &Contract, text: &'a str) -> Result<object::RawObject<'a>, Reason> {
    match scan::scan_flat_object(contract, text) {
        Some(obj) => Ok(obj),
        None => object::parse_object_serde(contract, text),
    }
}

/// Tests of the public surface, and the helpers the tests of every file share.
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::OnceLock;

    /// The `progress` contract, compiled once for the whole test binary so that
    /// verdicts can borrow it from any helper.
    pub(crate) fn progress() -> &'static Contract {
        static PROGRESS: OnceLock<std::sync::Arc<Contract>> = OnceLock::new();
        PROGRESS.get_or_init(crate::progress)
    }

    /// The verdict that refuses a line for the `progress` prohibited key `name`.
    pub(crate) fn prohibited(name: &str) -> Verdict<'static> {
        let names = &progress().prohibited;
        Verdict::Prohibited(
            names
                .iter()
                .position(|p| p == name)
                .expect("a prohibited name"),
        )
    }

    /// The index of the `progress` field `name`.
    pub(crate) fn field(name: &str) -> usize {
        let fields = &progress().fields;
        fields
            .iter()
            .position(|f| f.name == name)
            .expect("a progress field")
    }

    /// A small deterministic PRNG (xorshift64*) for the generated-line tests of the
    /// scanner and the single pass, so they need no extra crate.
    pub(super) struct Rng(pub(super) u64);

    impl Rng {
        pub(super) fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        pub(super) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        /// `seed` with one to three characters removed, replaced or inserted (drawn
        /// from `alphabet`): lines near a valid one, where the rules' edges are.
        pub(super) fn mutate(&mut self, seed: &str, alphabet: &[char]) -> String {
            let mut chars: Vec<char> = seed.chars().collect();
            for _ in 0..1 + self.below(3) {
                let at = self.below(chars.len() + 1);
                let c = alphabet[self.below(alphabet.len())];
                match self.below(3) {
                    0 if at < chars.len() => {
                        chars.remove(at);
                    }
                    1 if at < chars.len() => chars[at] = c,
                    _ => chars.insert(at, c),
                }
            }
            chars.into_iter().collect()
        }
    }

    pub(super) const GOOD: &str = r#"{"event_id":"evt_1001","learner_id":"lrn_1042","lesson_id":"les_07","event_type":"completed","attempt_number":1,"event_time":"2026-03-02T14:02:11+00:00"}"#;

    /// The `progress` field `name`'s reason codes.
    pub(super) fn missing(name: &str) -> Reason {
        Reason::Missing(field(name))
    }

    pub(super) fn invalid(name: &str) -> Reason {
        Reason::Invalid(field(name))
    }

    /// A string field's text in an accepted event.
    pub(super) fn text<'e>(e: &'e Event<'_>, name: &str) -> &'e str {
        match e.get(name) {
            Some(Value::Str(s)) => s,
            Some(Value::Enum(s)) => s,
            Some(Value::Time(t)) => t.as_str(),
            other => panic!("{name} is not text: {other:?}"),
        }
    }

    /// An integer field's value (`None`: null) in an accepted event.
    pub(super) fn int(e: &Event<'_>, name: &str) -> Option<i64> {
        match e.get(name) {
            Some(Value::Int(n)) => Some(*n),
            Some(Value::Null) => None,
            other => panic!("{name} is not an integer: {other:?}"),
        }
    }

    pub(super) fn accept(line: &str) -> Event<'_> {
        match validate(progress(), line.as_bytes()) {
            Verdict::Accept(e) => e,
            other => panic!("expected accept for {line}, got {other:?}"),
        }
    }

    pub(super) fn reason(line: &str) -> Reason {
        match validate(progress(), line.as_bytes()) {
            Verdict::Quarantine(r) => r,
            other => panic!("expected quarantine for {line}, got {other:?}"),
        }
    }

    /// GOOD with one field replaced by raw JSON text (or removed with `None`).
    pub(super) fn with(field: &str, value: Option<&str>) -> String {
        let mut pairs: Vec<(String, String)> = vec![
            ("event_id".into(), r#""evt_1001""#.into()),
            ("learner_id".into(), r#""lrn_1042""#.into()),
            ("lesson_id".into(), r#""les_07""#.into()),
            ("event_type".into(), r#""completed""#.into()),
            ("attempt_number".into(), "1".into()),
            ("event_time".into(), r#""2026-03-02T14:02:11+00:00""#.into()),
        ];
        match pairs.iter_mut().find(|(k, _)| k == field) {
            Some(pair) => match value {
                Some(v) => pair.1 = v.into(),
                None => pairs.retain(|(k, _)| k != field),
            },
            None => {
                if let Some(v) = value {
                    pairs.push((field.into(), v.into()));
                }
            }
        }
        let body: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", body.join(","))
    }

    // ----- reasons ---------------------------------------------------------

    #[test]
    fn reason_codes_are_exact_distinct_and_complete() {
        let expected = [
            "line_too_long",
            "invalid_utf8",
            "invalid_json",
            "not_an_object",
            "duplicate_key",
            "unknown_field",
            "missing_event_id",
            "missing_learner_id",
            "missing_lesson_id",
            "missing_event_type",
            "missing_attempt_number",
            "missing_event_time",
            "invalid_event_id",
            "invalid_learner_id",
            "invalid_lesson_id",
            "invalid_event_type",
            "invalid_attempt_number",
            "invalid_event_time",
            "invalid_checkpoint",
        ];
        let codes = progress().reason_codes();
        assert_eq!(codes, expected);
        assert_eq!(codes.iter().collect::<HashSet<_>>().len(), 19);
        let p = progress();
        assert_eq!(Reason::InvalidJson.code(p), "invalid_json");
        assert_eq!(missing("event_id").code(p), "missing_event_id");
        assert_eq!(invalid("checkpoint").code(p), "invalid_checkpoint");
    }

    #[test]
    fn every_reason_code_is_produced() {
        let mut seen = HashSet::new();
        let lines: Vec<Vec<u8>> = vec![
            vec![b'{', 0xFF, b'}'],
            b"{".to_vec(),
            b"[1]".to_vec(),
            with("event_id", Some("1"))
                .replace('}', r#","event_id":"x"}"#)
                .into_bytes(),
            with("colour", Some("1")).into_bytes(),
            with("event_id", None).into_bytes(),
            with("learner_id", None).into_bytes(),
            with("lesson_id", None).into_bytes(),
            with("event_type", None).into_bytes(),
            with("attempt_number", None).into_bytes(),
            with("event_time", None).into_bytes(),
            with("event_id", Some("1")).into_bytes(),
            with("learner_id", Some("1")).into_bytes(),
            with("lesson_id", Some("1")).into_bytes(),
            with("event_type", Some(r#""started""#)).into_bytes(),
            with("attempt_number", Some("0")).into_bytes(),
            with("event_time", Some(r#""2026-03-02T14:02:11""#)).into_bytes(),
            with("checkpoint", Some("true")).into_bytes(),
        ];
        for line in &lines {
            if let Verdict::Quarantine(r) = validate(progress(), line) {
                seen.insert(r.code(progress()));
            }
        }
        // line_too_long comes from the framer.
        let mut framer = LineFramer::new(4);
        framer
            .push(b"0123456789\n", |line| {
                if let Verdict::Quarantine(r) = line.verdict() {
                    seen.insert(r.code(progress()));
                }
                Ok::<(), ()>(())
            })
            .expect("sink never fails");
        for r in progress().reason_codes() {
            assert!(seen.contains(r), "{r} never produced");
        }
    }

    // ----- validate ------------------------------------------------------

    #[test]
    fn event_debug_never_shows_values() {
        let shown = format!("{:?}", validate(progress(), GOOD.as_bytes()));
        assert!(shown.contains("Accept"));
        for value in ["evt_1001", "lrn_1042", "les_07", "completed", "2026"] {
            assert!(!shown.contains(value), "{shown}");
        }
    }

    #[test]
    fn debug_shows_variants_only_and_an_event_not_at_all() {
        let shown: Vec<String> = [
            Value::Null,
            Value::Str("evt_1001".into()),
            Value::Enum("completed"),
            Value::Int(7),
            Value::Bool(true),
        ]
        .iter()
        .map(|v| format!("{v:?}"))
        .collect();
        assert_eq!(shown, ["Null", "Str", "Enum", "Int", "Bool"]);
        let e = accept(GOOD);
        assert_eq!(format!("{e:?}"), "Event { .. }");
        assert_eq!(format!("{:?}", e.get("event_time").unwrap()), "Time");
    }

    #[test]
    fn contracts_are_equal_when_their_files_are() {
        let text = r#"{"name":"t","version":"1","identity":"id","max_line_bytes":9,"prohibited":[],"fields":[{"name":"id","type":"string"}]}"#;
        let a = Contract::load(text.as_bytes()).expect("valid");
        let b = Contract::load(text.as_bytes()).expect("valid");
        assert_eq!(a, b, "two loads of one file");
        assert_ne!(&*a, progress());
        assert_eq!(progress(), progress());
    }

    #[test]
    fn invalid_utf8_is_checked_before_anything() {
        assert_eq!(
            validate(progress(), &[0xFF]),
            Verdict::Quarantine(Reason::InvalidUtf8)
        );
        // Even an otherwise prohibited line: it does not parse.
        let mut line = br#"{"email":"x","event_id":""#.to_vec();
        line.extend_from_slice(&[0xC3, 0x28]);
        line.extend_from_slice(b"\"}");
        assert_eq!(
            validate(progress(), &line),
            Verdict::Quarantine(Reason::InvalidUtf8)
        );
        // Overlong / surrogate encodings are invalid UTF-8 too.
        assert_eq!(
            validate(progress(), b"\"\xED\xA0\x80\""),
            Verdict::Quarantine(Reason::InvalidUtf8)
        );
    }
}
