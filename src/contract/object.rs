//! Object validation: the rules for one line once it is known to be UTF-8.
//!
//! Both parsers (the fast scanner in `scan.rs` and serde_json here) record keys
//! through one [`ObjectBuilder`], so their key semantics cannot drift apart; then
//! [`verdict_for`] applies the rules in order: prohibited key, duplicate key,
//! unknown key, missing fields, each field's type and value.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::time::parse_event_time;
use super::{Event, EventType, Reason, Verdict, PROHIBITED_FIELDS};

/// Contract fields, indexed in canonical key order (same order as CONTRACT_FIELDS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    AttemptNumber = 0,
    Checkpoint = 1,
    EventId = 2,
    EventTime = 3,
    EventType = 4,
    LearnerId = 5,
    LessonId = 6,
}

/// Required fields in the order their absence is reported (the DESIGN table order).
const REQUIRED: [(Field, Reason); 6] = [
    (Field::EventId, Reason::MissingEventId),
    (Field::LearnerId, Reason::MissingLearnerId),
    (Field::LessonId, Reason::MissingLessonId),
    (Field::EventType, Reason::MissingEventType),
    (Field::AttemptNumber, Reason::MissingAttemptNumber),
    (Field::EventTime, Reason::MissingEventTime),
];

/// A recognised top-level key (small, so classification returns in registers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KnownKey {
    Field(Field),
    /// Index into PROHIBITED_FIELDS.
    Prohibited(u8),
}

/// A top-level key, compared after JSON unescaping.
pub(super) enum Key<'de> {
    Known(KnownKey),
    /// Kept only to detect a repeated unknown key (quarantine path, so a copy is fine).
    Unknown(Cow<'de, [u8]>),
}

impl<'de> Key<'de> {
    pub(super) fn borrowed(key: &'de [u8]) -> Self {
        match classify_key(key) {
            Some(known) => Key::Known(known),
            None => Key::Unknown(Cow::Borrowed(key)),
        }
    }
}

/// Runs for every key of every line: dispatch on length, then fixed-size
/// comparisons (inlined loads, no `memcmp` call).
fn classify_key(key: &[u8]) -> Option<KnownKey> {
    use KnownKey::{Field as F, Prohibited as P};
    Some(match key.len() {
        4 if is(key, b"name") => P(1),
        5 if is(key, b"email") => P(0),
        8 if is(key, b"event_id") => F(Field::EventId),
        9 if is(key, b"lesson_id") => F(Field::LessonId),
        10 if is(key, b"checkpoint") => F(Field::Checkpoint),
        10 if is(key, b"learner_id") => F(Field::LearnerId),
        10 if is(key, b"event_time") => F(Field::EventTime),
        10 if is(key, b"event_type") => F(Field::EventType),
        13 if is(key, b"payment_token") => P(2),
        14 if is(key, b"attempt_number") => F(Field::AttemptNumber),
        _ => return None,
    })
}

fn is<const N: usize>(key: &[u8], name: &[u8; N]) -> bool {
    matches!(<&[u8; N]>::try_from(key), Ok(k) if k == name)
}

/// Deserializes a key as bytes: serde_json then unescapes it without rejecting a
/// lone surrogate (it becomes WTF-8, which matches no known name), so such a key
/// is an unknown field rather than a reason to miss a prohibited key elsewhere.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_bytes(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Key<'de>, E> {
        Ok(Key::borrowed(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Key<'de>, E> {
        Ok(match classify_key(v) {
            Some(known) => Key::Known(known),
            None => Key::Unknown(Cow::Owned(v.to_vec())),
        })
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        self.visit_borrowed_bytes(v.as_bytes())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        self.visit_bytes(v.as_bytes())
    }
}

/// Every top-level key of one object, seen in full before any rule is applied.
/// Values are kept as raw JSON text (valid JSON, no surrounding whitespace).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct RawObject<'a> {
    pub(super) fields: [Option<&'a str>; 7],
    prohibited: Option<&'static str>,
    duplicate: bool,
    unknown: bool,
    /// Every string on the line is free of escapes and control characters (set
    /// by the fast scanner), so string values need no further scan.
    pub(super) plain_strings: bool,
}

/// Records keys in line order. Shared by both parsers so their key semantics
/// cannot drift apart.
#[derive(Default)]
pub(super) struct ObjectBuilder<'a> {
    pub(super) obj: RawObject<'a>,
    /// Quarantine path only: kept to tell a repeated unknown key from a new one.
    unknown_keys: Vec<Cow<'a, [u8]>>,
}

impl<'a> ObjectBuilder<'a> {
    /// Records one key; returns the slot whose raw value must be kept, if any.
    pub(super) fn key(&mut self, key: Key<'a>) -> Option<Field> {
        match key {
            Key::Known(KnownKey::Field(field)) if self.obj.fields[field as usize].is_none() => {
                Some(field)
            }
            Key::Known(KnownKey::Field(_)) => {
                self.obj.duplicate = true;
                None
            }
            Key::Known(KnownKey::Prohibited(i)) => {
                // i < 3 by construction in classify_key.
                let name = PROHIBITED_FIELDS[usize::from(i)];
                self.obj.prohibited.get_or_insert(name);
                None
            }
            Key::Unknown(name) => {
                self.unknown_keys.push(name);
                None
            }
        }
    }

    pub(super) fn finish(mut self) -> RawObject<'a> {
        if !self.unknown_keys.is_empty() {
            self.obj.unknown = true;
            self.unknown_keys.sort_unstable();
            if self.unknown_keys.windows(2).any(|w| w[0] == w[1]) {
                self.obj.duplicate = true;
            }
        }
        self.obj
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = RawObject<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject<'de>, A::Error> {
        let mut builder = ObjectBuilder::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            // Values we do not keep are still parsed (IgnoredAny), so invalid JSON
            // anywhere on the line is caught. serde_json skips them iteratively,
            // without its 128-level recursion limit.
            match builder.key(key) {
                Some(field) => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    builder.obj.fields[field as usize] = Some(raw.get());
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(builder.finish())
    }
}

pub(super) fn is_json_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The exact parser: serde_json over the whole line.
pub(super) fn parse_object_serde(text: &str) -> Result<RawObject<'_>, Reason> {
    let first = text.bytes().find(|&b| !is_json_whitespace(b));
    if first != Some(b'{') {
        // Not an object if it is valid JSON at all. IgnoredAny accepts any valid
        // value (including a lone-surrogate string) without depth limit.
        return Err(match serde_json::from_str::<IgnoredAny>(text) {
            Ok(_) => Reason::NotAnObject,
            Err(_) => Reason::InvalidJson,
        });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let obj = (&mut de)
        .deserialize_map(ObjectVisitor)
        .map_err(|_| Reason::InvalidJson)?;
    de.end().map_err(|_| Reason::InvalidJson)?;
    Ok(obj)
}

/// A JSON string value, unescaped. `None` for any other JSON type (incl. null) or
/// for a string holding a lone surrogate escape, which is not valid text.
fn json_string(raw: &str, plain: bool) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    // A byte loop: values are short, a memchr call costs more than it saves.
    if plain || !inner.bytes().any(|b| b == b'\\') {
        // No escapes: the text between the quotes is the value (both parsers
        // reject raw control characters inside strings).
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
}

/// Non-empty string without U+0000..=U+001F (checked after unescaping).
fn identifier(raw: &str, plain: bool) -> Option<Cow<'_, str>> {
    let s = json_string(raw, plain)?;
    if s.is_empty() || (!plain && s.bytes().any(|b| b < 0x20)) {
        return None;
    }
    Some(s)
}

/// The text of a JSON integer literal (`-?[0-9]+`), `None` for floats (`1.0`,
/// `1e0`), strings, booleans, null and containers. `raw` is already valid JSON.
fn json_integer(raw: &str) -> Option<&str> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(raw)
}

fn build_event<'a>(obj: &RawObject<'a>) -> Result<Event<'a>, Reason> {
    let (f, plain) = (&obj.fields, obj.plain_strings);
    for (field, reason) in REQUIRED {
        if f[field as usize].is_none() {
            return Err(reason);
        }
    }
    // Every required slot is Some (checked just above); `get` keeps this panic-free.
    let get = |field: Field, reason: Reason| f[field as usize].ok_or(reason);

    let event_id = identifier(get(Field::EventId, Reason::MissingEventId)?, plain)
        .ok_or(Reason::InvalidEventId)?;
    let learner_id = identifier(get(Field::LearnerId, Reason::MissingLearnerId)?, plain)
        .ok_or(Reason::InvalidLearnerId)?;
    let lesson_id = identifier(get(Field::LessonId, Reason::MissingLessonId)?, plain)
        .ok_or(Reason::InvalidLessonId)?;
    let event_type = get(Field::EventType, Reason::MissingEventType)?;
    let event_type = match json_string(event_type, plain).as_deref() {
        Some("checkpoint") => EventType::Checkpoint,
        Some("completed") => EventType::Completed,
        _ => return Err(Reason::InvalidEventType),
    };
    let attempt_number = json_integer(get(Field::AttemptNumber, Reason::MissingAttemptNumber)?)
        .and_then(|s| s.parse::<i32>().ok())
        .filter(|&n| n >= 1)
        .ok_or(Reason::InvalidAttemptNumber)?;
    let event_time = json_string(get(Field::EventTime, Reason::MissingEventTime)?, plain)
        .and_then(|s| parse_event_time(&s))
        .ok_or(Reason::InvalidEventTime)?;
    let checkpoint = match f[Field::Checkpoint as usize] {
        None | Some("null") => None,
        Some(raw) => Some(
            json_integer(raw)
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or(Reason::InvalidCheckpoint)?,
        ),
    };
    Ok(Event {
        event_id,
        learner_id,
        lesson_id,
        event_type,
        attempt_number,
        event_time,
        checkpoint,
    })
}

/// Rules 3-6 on a parsed line.
pub(super) fn verdict_for(parsed: Result<RawObject<'_>, Reason>) -> Verdict<'_> {
    let obj = match parsed {
        Ok(obj) => obj,
        Err(reason) => return Verdict::Quarantine(reason),
    };
    if let Some(name) = obj.prohibited {
        return Verdict::Prohibited(name);
    }
    if obj.duplicate {
        return Verdict::Quarantine(Reason::DuplicateKey);
    }
    if obj.unknown {
        return Verdict::Quarantine(Reason::UnknownField);
    }
    match build_event(&obj) {
        Ok(event) => Verdict::Accept(event),
        Err(reason) => Verdict::Quarantine(reason),
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use crate::contract::tests::{accept, reason, with, GOOD};
    use crate::contract::{validate, EventType, Reason, Verdict, PROHIBITED_FIELDS};

    // ----- accept ----------------------------------------------------------

    #[test]
    fn accepts_a_valid_event_borrowing_identifiers() {
        let e = accept(GOOD);
        assert_eq!(e.event_id, "evt_1001");
        assert_eq!(e.learner_id, "lrn_1042");
        assert_eq!(e.lesson_id, "les_07");
        assert_eq!(e.event_type, EventType::Completed);
        assert_eq!(e.attempt_number, 1);
        assert_eq!(e.event_time.as_str(), "2026-03-02T14:02:11Z");
        assert_eq!(e.checkpoint, None);
        assert!(matches!(e.event_id, Cow::Borrowed(_)));
        assert!(matches!(e.learner_id, Cow::Borrowed(_)));
        assert!(matches!(e.lesson_id, Cow::Borrowed(_)));
    }

    #[test]
    fn accepts_surrounding_whitespace_and_checkpoint_type() {
        let line = format!(" \t{}\r ", with("event_type", Some(r#""checkpoint""#)));
        assert_eq!(accept(&line).event_type, EventType::Checkpoint);
    }

    #[test]
    fn unescapes_identifiers_and_keys() {
        let line = r#"{"event_\u0069d":"a\"b\\c\u00e9\ud83d\ude00","learner_id":"l","lesson_id":"\/x","event_type":"c\u006fmpleted","attempt_number":1,"event_time":"2026-03-02\u005414:02:11Z"}"#;
        let e = accept(line);
        assert_eq!(e.event_id, "a\"b\\cé😀");
        assert_eq!(e.lesson_id, "/x");
        assert_eq!(e.event_type, EventType::Completed);
        assert!(matches!(e.event_id, Cow::Owned(_)));
    }

    // ----- invalid_json / not_an_object ------------------------------------

    #[test]
    fn invalid_json_is_quarantined() {
        for line in [
            "{",
            "}",
            "{\"event_id\":}",
            "{\"a\":1,}",
            "{\"a\":1} x",
            "{\"a\":1}{\"b\":2}",
            "{'a':1}",
            "{\"a\":NaN}",
            "{\"a\":01}",
            "{\"a\":\"\\x\"}",
            "{\"a\":\"\u{1}\"}",
            "nul",
            "[1,",
            "\"abc",
        ] {
            assert_eq!(reason(line), Reason::InvalidJson, "{line:?}");
        }
        // Raw control character inside a contract string is a JSON error, not a
        // field error.
        assert_eq!(
            reason(&with("event_id", Some("\"a\u{1}b\""))),
            Reason::InvalidJson
        );
    }

    #[test]
    fn prohibited_key_on_unparseable_line_is_invalid_json() {
        assert_eq!(reason(r#"{"email":"x","#), Reason::InvalidJson);
        assert_eq!(reason(r#"{"email":"x"} trailing"#), Reason::InvalidJson);
    }

    #[test]
    fn valid_json_non_objects_are_not_an_object() {
        for line in [
            "[1]",
            "[]",
            "1",
            "-1.5e3",
            "true",
            "null",
            "\"str\"",
            "\"\\ud800\"",
            " [{\"email\":\"x\"}] ",
        ] {
            assert_eq!(reason(line), Reason::NotAnObject, "{line:?}");
        }
    }

    // ----- prohibited ------------------------------------------------------

    #[test]
    fn each_prohibited_field_refuses_by_name() {
        for name in PROHIBITED_FIELDS {
            let line = with(name, Some(r#""secret-value""#));
            let v = validate(line.as_bytes());
            assert_eq!(v, Verdict::Prohibited(name));
            assert!(!format!("{v:?}").contains("secret-value"));
        }
        // Any value type, even null.
        assert_eq!(
            validate(with("email", Some("null")).as_bytes()),
            Verdict::Prohibited("email")
        );
    }

    #[test]
    fn prohibited_beats_every_other_rule() {
        // duplicate key, repeated email, unknown field, missing and invalid fields
        let dup = with("email", Some("1")).replace('}', r#","event_id":"x"}"#);
        assert_eq!(validate(dup.as_bytes()), Verdict::Prohibited("email"));
        assert_eq!(
            validate(br#"{"email":1,"email":2}"#),
            Verdict::Prohibited("email")
        );
        assert_eq!(
            validate(br#"{"colour":1,"payment_token":"t","colour":2}"#),
            Verdict::Prohibited("payment_token")
        );
        assert_eq!(validate(br#"{"name":"n"}"#), Verdict::Prohibited("name"));
        assert_eq!(
            validate(br#"{"event_id":5,"attempt_number":"x","name":"n"}"#),
            Verdict::Prohibited("name")
        );
        // The first prohibited key in line order is named.
        assert_eq!(
            validate(br#"{"name":"n","email":"e"}"#),
            Verdict::Prohibited("name")
        );
    }

    #[test]
    fn prohibited_key_is_matched_after_unescaping() {
        assert_eq!(
            validate(br#"{"e\u006dail":"x"}"#),
            Verdict::Prohibited("email")
        );
    }

    #[test]
    fn prohibited_key_is_found_beside_deep_nesting_and_lone_surrogate_keys() {
        // Deeper than serde_json's 128-level recursion limit.
        let deep = format!(
            r#"{{"x":{}1{},"\ud800":1,"email":"e"}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert_eq!(validate(deep.as_bytes()), Verdict::Prohibited("email"));
    }

    #[test]
    fn nested_prohibited_key_is_not_top_level() {
        assert_eq!(
            reason(&with("event_id", Some(r#"{"email":"x"}"#))),
            Reason::InvalidEventId
        );
    }

    // ----- duplicate / unknown ----------------------------------------------

    #[test]
    fn repeated_key_is_duplicate_key() {
        // Same value twice is still a duplicate.
        let same = GOOD.replace('}', r#","event_id":"evt_1001"}"#);
        assert_eq!(reason(&same), Reason::DuplicateKey);
        // Escaped spelling of the same key.
        let escaped = GOOD.replace('}', r#","\u0065vent_id":"evt_1001"}"#);
        assert_eq!(reason(&escaped), Reason::DuplicateKey);
        // A repeated unknown key: duplicate is checked before unknown.
        assert_eq!(
            reason(&GOOD.replace('}', r#","x":1,"y":2,"x":3}"#)),
            Reason::DuplicateKey
        );
        // Repeated checkpoint.
        assert_eq!(
            reason(&with("checkpoint", Some("1")).replace('}', r#","checkpoint":null}"#)),
            Reason::DuplicateKey
        );
    }

    #[test]
    fn key_outside_contract_is_unknown_field() {
        assert_eq!(reason(&with("colour", Some("1"))), Reason::UnknownField);
        assert_eq!(reason(&with("Event_id", Some("1"))), Reason::UnknownField);
        assert_eq!(reason(&with("\\ud800", Some("1"))), Reason::UnknownField);
        // Unknown beats missing fields.
        assert_eq!(reason(r#"{"x":1}"#), Reason::UnknownField);
        // Unknown with empty key.
        assert_eq!(reason(&with("", Some("1"))), Reason::UnknownField);
    }

    // ----- missing ---------------------------------------------------------

    #[test]
    fn missing_required_fields_in_table_order() {
        for (field, r) in [
            ("event_id", Reason::MissingEventId),
            ("learner_id", Reason::MissingLearnerId),
            ("lesson_id", Reason::MissingLessonId),
            ("event_type", Reason::MissingEventType),
            ("attempt_number", Reason::MissingAttemptNumber),
            ("event_time", Reason::MissingEventTime),
        ] {
            assert_eq!(reason(&with(field, None)), r, "{field}");
        }
        assert_eq!(reason("{}"), Reason::MissingEventId);
        // Missing is reported before an invalid value in another field.
        let line =
            with("event_id", Some("1")).replace(r#","event_time":"2026-03-02T14:02:11+00:00""#, "");
        assert_eq!(reason(&line), Reason::MissingEventTime);
        // checkpoint is optional.
        assert_eq!(accept(GOOD).checkpoint, None);
    }

    // ----- identifiers -----------------------------------------------------

    #[test]
    fn identifiers_reject_wrong_type_empty_control_and_lone_surrogate() {
        for (field, r) in [
            ("event_id", Reason::InvalidEventId),
            ("learner_id", Reason::InvalidLearnerId),
            ("lesson_id", Reason::InvalidLessonId),
        ] {
            for bad in [
                "null",
                "1",
                "true",
                "[\"a\"]",
                "{}",
                "\"\"",
                "\"\\u0000\"",
                "\"a\\nb\"",
                "\"a\\u001fb\"",
                "\"tab\\t\"",
                "\"\\ud800\"",
                "\"x\\udc00\"",
                "\"\\ud800\\u0041\"",
            ] {
                assert_eq!(reason(&with(field, Some(bad))), r, "{field}={bad}");
            }
            // Allowed: space, DEL (U+007F is not in U+0000..U+001F), non-ASCII, pairs.
            for good in ["\" \"", "\"a\u{7f}b\"", "\"ü\"", "\"\\ud83d\\ude00\""] {
                accept(&with(field, Some(good)));
            }
        }
    }

    // ----- event_type ------------------------------------------------------

    #[test]
    fn event_type_must_be_exactly_checkpoint_or_completed() {
        for bad in [
            "\"Completed\"",
            "\"started\"",
            "\"completed \"",
            "\"\"",
            "1",
            "null",
            "true",
            "[\"completed\"]",
        ] {
            assert_eq!(
                reason(&with("event_type", Some(bad))),
                Reason::InvalidEventType,
                "{bad}"
            );
        }
    }

    // ----- attempt_number --------------------------------------------------

    #[test]
    fn attempt_number_is_an_integer_in_sql_integer_range() {
        for bad in [
            "0",
            "-0",
            "-1",
            "2147483648",
            "99999999999999999999999",
            "1.0",
            "1e0",
            "1E2",
            "\"1\"",
            "true",
            "null",
            "[1]",
        ] {
            assert_eq!(
                reason(&with("attempt_number", Some(bad))),
                Reason::InvalidAttemptNumber,
                "{bad}"
            );
        }
        assert_eq!(
            accept(&with("attempt_number", Some("2147483647"))).attempt_number,
            i32::MAX
        );
        assert_eq!(accept(&with("attempt_number", Some("7"))).attempt_number, 7);
    }

    // ----- checkpoint ------------------------------------------------------

    #[test]
    fn checkpoint_is_optional_i64_or_null() {
        assert_eq!(accept(&with("checkpoint", Some("null"))).checkpoint, None);
        assert_eq!(
            accept(&with("checkpoint", Some(" null\t"))).checkpoint,
            None
        );
        assert_eq!(
            accept(&with("checkpoint", Some(" 12 "))).checkpoint,
            Some(12)
        );
        assert_eq!(accept(&with("checkpoint", Some("0"))).checkpoint, Some(0));
        assert_eq!(accept(&with("checkpoint", Some("-0"))).checkpoint, Some(0));
        assert_eq!(
            accept(&with("checkpoint", Some("-9223372036854775808"))).checkpoint,
            Some(i64::MIN)
        );
        assert_eq!(
            accept(&with("checkpoint", Some("9223372036854775807"))).checkpoint,
            Some(i64::MAX)
        );
        for bad in [
            "true",
            "false",
            "1.5",
            "1.0",
            "1e3",
            "\"1\"",
            "9223372036854775808",
            "-9223372036854775809",
            "[]",
            "{}",
        ] {
            assert_eq!(
                reason(&with("checkpoint", Some(bad))),
                Reason::InvalidCheckpoint,
                "{bad}"
            );
        }
    }

    // ----- event_time field (the grammar is tested in time.rs) --------------

    #[test]
    fn event_time_field_rejects_wrong_type_and_bad_text() {
        for bad in [
            "null",
            "1",
            "1772460131",
            "true",
            "\"\"",
            "\"2026-03-02T14:02:11\"",
            "\"2026-02-29T00:00:00Z\"",
            "[\"2026-03-02T14:02:11Z\"]",
        ] {
            assert_eq!(
                reason(&with("event_time", Some(bad))),
                Reason::InvalidEventTime,
                "{bad}"
            );
        }
    }
}
