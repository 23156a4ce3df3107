//! Object validation: the rules for one line once it is known to be UTF-8.
//!
//! Both parsers (the fast scanner in `scan.rs` and serde_json here) record keys
//! through one [`ObjectBuilder`], so their key semantics cannot drift apart; then
//! [`verdict_for`] applies the rules in order: prohibited key, duplicate key,
//! unknown key, missing fields, each field's type and value (in the contract
//! file's order).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::bytes::is_json_whitespace;
use super::field::{FieldSpec, Kind};
use super::spec::Contract;
use super::time::parse_event_time;
use super::{Event, Reason, Value, Verdict};

/// A recognised top-level key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KnownKey {
    /// Index of a contract field (canonical order).
    Field(usize),
    /// A prohibited name: its index into [`Contract::prohibited`].
    Prohibited(usize),
}

/// A top-level key, compared after JSON unescaping.
pub(super) enum Key<'de> {
    Known(KnownKey),
    /// Kept only to detect a repeated unknown key (quarantine path, so a copy is fine).
    Unknown(Cow<'de, [u8]>),
}

impl<'de> Key<'de> {
    pub(super) fn borrowed(c: &Contract, key: &'de [u8]) -> Self {
        match classify_key(c, key) {
            Some(known) => Key::Known(known),
            None => Key::Unknown(Cow::Borrowed(key)),
        }
    }
}

fn classify_key(c: &Contract, key: &[u8]) -> Option<KnownKey> {
    if let Some(k) = c.field_index(key) {
        return Some(KnownKey::Field(k));
    }
    c.prohibited_index(key).map(KnownKey::Prohibited)
}

/// Deserializes a key as bytes: serde_json then unescapes it without rejecting a
/// lone surrogate (it becomes WTF-8, which matches no known name), so such a key
/// is an unknown field rather than a reason to miss a prohibited key elsewhere.
struct KeySeed<'c>(&'c Contract);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_bytes(KeyVisitor(self.0))
    }
}

struct KeyVisitor<'c>(&'c Contract);

impl<'de> Visitor<'de> for KeyVisitor<'_> {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Key<'de>, E> {
        Ok(Key::borrowed(self.0, v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Key<'de>, E> {
        Ok(match classify_key(self.0, v) {
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
/// Values are kept as raw JSON text (valid JSON, no surrounding whitespace), one
/// slot per contract field in canonical order.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct RawObject<'a> {
    pub(super) fields: Vec<Option<&'a str>>,
    prohibited: Option<usize>,
    duplicate: bool,
    unknown: bool,
    /// Every string on the line is free of escapes and control characters (set
    /// by the fast scanner), so string values need no further scan.
    pub(super) plain_strings: bool,
}

/// Records keys in line order. Shared by both parsers so their key semantics
/// cannot drift apart.
pub(super) struct ObjectBuilder<'a> {
    pub(super) obj: RawObject<'a>,
    /// Quarantine path only: kept to tell a repeated unknown key from a new one.
    unknown_keys: Vec<Cow<'a, [u8]>>,
}

impl<'a> ObjectBuilder<'a> {
    pub(super) fn new(c: &Contract) -> Self {
        ObjectBuilder {
            obj: RawObject {
                fields: vec![None; c.fields.len()],
                prohibited: None,
                duplicate: false,
                unknown: false,
                plain_strings: false,
            },
            unknown_keys: Vec::new(),
        }
    }

    /// Records one key; returns the slot whose raw value must be kept, if any.
    pub(super) fn key(&mut self, key: Key<'a>) -> Option<usize> {
        match key {
            Key::Known(KnownKey::Field(k)) if self.obj.fields[k].is_none() => Some(k),
            Key::Known(KnownKey::Field(_)) => {
                self.obj.duplicate = true;
                None
            }
            Key::Known(KnownKey::Prohibited(name)) => {
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

struct ObjectVisitor<'c>(&'c Contract);

impl<'de> Visitor<'de> for ObjectVisitor<'_> {
    type Value = RawObject<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject<'de>, A::Error> {
        let mut builder = ObjectBuilder::new(self.0);
        while let Some(key) = map.next_key_seed(KeySeed(self.0))? {
            // Values we do not keep are still parsed (IgnoredAny), so invalid JSON
            // anywhere on the line is caught. serde_json skips them iteratively,
            // without its 128-level recursion limit.
            match builder.key(key) {
                Some(k) => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    builder.obj.fields[k] = Some(raw.get());
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(builder.finish())
    }
}

/// The exact parser: serde_json over the whole line.
pub(super) fn parse_object_serde<'a>(c: &Contract, text: &'a str) -> Result<RawObject<'a>, Reason> {
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
        .deserialize_map(ObjectVisitor(c))
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

/// One present, non-null value checked against its field's type.
fn field_value<'a>(f: &'a FieldSpec, raw: &'a str, plain: bool) -> Option<Value<'a>> {
    Some(match &f.kind {
        Kind::String => Value::Str(identifier(raw, plain)?),
        Kind::Enum(values) => {
            let s = json_string(raw, plain)?;
            Value::Enum(values.iter().find(|v| **v == *s)?.as_str())
        }
        Kind::Integer { min, max } => {
            let n = json_integer(raw)?.parse::<i64>().ok()?;
            Value::Int((*min..=*max).contains(&n).then_some(n)?)
        }
        Kind::Boolean => match raw {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return None,
        },
        Kind::Time => Value::Time(parse_event_time(&json_string(raw, plain)?)?),
    })
}

fn build_event<'a>(c: &'a Contract, obj: &RawObject<'a>) -> Result<Event<'a>, Reason> {
    for &k in &c.check {
        let f = &c.fields[k];
        if f.required && obj.fields[k].is_none() {
            return Err(Reason::Missing(k));
        }
    }
    let mut values = vec![Value::Null; c.fields.len()];
    for &k in &c.check {
        let f = &c.fields[k];
        values[k] = match obj.fields[k] {
            None => Value::Null,
            Some("null") if f.nullable => Value::Null,
            Some(raw) => field_value(f, raw, obj.plain_strings).ok_or(Reason::Invalid(k))?,
        };
    }
    Ok(Event {
        contract: c,
        values,
    })
}

/// Rules 3-6 on a parsed line.
pub(super) fn verdict_for<'a>(
    c: &'a Contract,
    parsed: Result<RawObject<'a>, Reason>,
) -> Verdict<'a> {
    let obj = match parsed {
        Ok(obj) => obj,
        Err(reason) => return Verdict::Quarantine(reason),
    };
    if let Some(k) = obj.prohibited {
        return Verdict::Prohibited(k);
    }
    if obj.duplicate {
        return Verdict::Quarantine(Reason::DuplicateKey);
    }
    if obj.unknown {
        return Verdict::Quarantine(Reason::UnknownField);
    }
    match build_event(c, &obj) {
        Ok(event) => Verdict::Accept(event),
        Err(reason) => Verdict::Quarantine(reason),
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use crate::tests::progress;
    use crate::tests::{accept, int, invalid, missing, prohibited, reason, text, with, GOOD};
    use crate::{validate, Reason, Value};

    const PROHIBITED_FIELDS: [&str; 3] = ["email", "name", "payment_token"];

    // ----- accept ----------------------------------------------------------

    #[test]
    fn accepts_a_valid_event_borrowing_identifiers() {
        let e = accept(GOOD);
        assert_eq!(text(&e, "event_id"), "evt_1001");
        assert_eq!(text(&e, "learner_id"), "lrn_1042");
        assert_eq!(text(&e, "lesson_id"), "les_07");
        assert_eq!(e.get("event_type"), Some(&Value::Enum("completed")));
        assert_eq!(int(&e, "attempt_number"), Some(1));
        assert_eq!(text(&e, "event_time"), "2026-03-02T14:02:11Z");
        assert_eq!(int(&e, "checkpoint"), None);
        assert!(matches!(
            e.get("event_id"),
            Some(Value::Str(Cow::Borrowed(_)))
        ));
        assert!(matches!(
            e.get("learner_id"),
            Some(Value::Str(Cow::Borrowed(_)))
        ));
        assert!(matches!(
            e.get("lesson_id"),
            Some(Value::Str(Cow::Borrowed(_)))
        ));
    }

    #[test]
    fn accepts_surrounding_whitespace_and_checkpoint_type() {
        let line = format!(" \t{}\r ", with("event_type", Some(r#""checkpoint""#)));
        assert_eq!(
            accept(&line).get("event_type"),
            Some(&Value::Enum("checkpoint"))
        );
    }

    #[test]
    fn unescapes_identifiers_and_keys() {
        let line = r#"{"event_\u0069d":"a\"b\\c\u00e9\ud83d\ude00","learner_id":"l","lesson_id":"\/x","event_type":"c\u006fmpleted","attempt_number":1,"event_time":"2026-03-02\u005414:02:11Z"}"#;
        let e = accept(line);
        assert_eq!(text(&e, "event_id"), "a\"b\\cé😀");
        assert_eq!(text(&e, "lesson_id"), "/x");
        assert_eq!(e.get("event_type"), Some(&Value::Enum("completed")));
        assert!(matches!(e.get("event_id"), Some(Value::Str(Cow::Owned(_)))));
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
            let v = validate(progress(), line.as_bytes());
            assert_eq!(v, prohibited(name));
            assert!(!format!("{v:?}").contains("secret-value"));
        }
        // Any value type, even null.
        assert_eq!(
            validate(progress(), with("email", Some("null")).as_bytes()),
            prohibited("email")
        );
    }

    #[test]
    fn prohibited_beats_every_other_rule() {
        // duplicate key, repeated email, unknown field, missing and invalid fields
        let dup = with("email", Some("1")).replace('}', r#","event_id":"x"}"#);
        assert_eq!(validate(progress(), dup.as_bytes()), prohibited("email"));
        assert_eq!(
            validate(progress(), br#"{"email":1,"email":2}"#),
            prohibited("email")
        );
        assert_eq!(
            validate(
                progress(),
                br#"{"colour":1,"payment_token":"t","colour":2}"#
            ),
            prohibited("payment_token")
        );
        assert_eq!(validate(progress(), br#"{"name":"n"}"#), prohibited("name"));
        assert_eq!(
            validate(
                progress(),
                br#"{"event_id":5,"attempt_number":"x","name":"n"}"#
            ),
            prohibited("name")
        );
        // The first prohibited key in line order is named.
        assert_eq!(
            validate(progress(), br#"{"name":"n","email":"e"}"#),
            prohibited("name")
        );
    }

    #[test]
    fn prohibited_key_is_matched_after_unescaping() {
        assert_eq!(
            validate(progress(), br#"{"e\u006dail":"x"}"#),
            prohibited("email")
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
        assert_eq!(validate(progress(), deep.as_bytes()), prohibited("email"));
    }

    #[test]
    fn nested_prohibited_key_is_not_top_level() {
        assert_eq!(
            reason(&with("event_id", Some(r#"{"email":"x"}"#))),
            invalid("event_id")
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
    fn distinct_unknown_keys_are_unknown_not_duplicate() {
        let two = GOOD.replace('}', r#","x":1,"y":2}"#);
        assert_eq!(reason(&two), Reason::UnknownField);
        // On the serde path too (an escape sends the line there).
        let escaped = GOOD.replace('}', r#","\u0078":1,"y":2}"#);
        assert_eq!(reason(&escaped), Reason::UnknownField);
    }

    #[test]
    fn the_serde_path_borrows_strings_without_escapes() {
        // An escaped id sends the line to serde_json; the other strings have no
        // escape and are still borrowed from the line.
        let line = with("event_id", Some(r#""e\u0031""#));
        let e = accept(&line);
        assert_eq!(text(&e, "event_id"), "e1");
        assert!(matches!(e.get("event_id"), Some(Value::Str(Cow::Owned(_)))));
        for field in ["learner_id", "lesson_id"] {
            let v = e.get(field);
            assert!(matches!(v, Some(Value::Str(Cow::Borrowed(_)))), "{field}");
        }
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
            ("event_id", missing("event_id")),
            ("learner_id", missing("learner_id")),
            ("lesson_id", missing("lesson_id")),
            ("event_type", missing("event_type")),
            ("attempt_number", missing("attempt_number")),
            ("event_time", missing("event_time")),
        ] {
            assert_eq!(reason(&with(field, None)), r, "{field}");
        }
        assert_eq!(reason("{}"), missing("event_id"));
        // Missing is reported before an invalid value in another field.
        let line =
            with("event_id", Some("1")).replace(r#","event_time":"2026-03-02T14:02:11+00:00""#, "");
        assert_eq!(reason(&line), missing("event_time"));
        // checkpoint is optional.
        assert_eq!(int(&accept(GOOD), "checkpoint"), None);
    }

    // ----- identifiers -----------------------------------------------------

    #[test]
    fn identifiers_reject_wrong_type_empty_control_and_lone_surrogate() {
        for (field, r) in [
            ("event_id", invalid("event_id")),
            ("learner_id", invalid("learner_id")),
            ("lesson_id", invalid("lesson_id")),
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
                invalid("event_type"),
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
                invalid("attempt_number"),
                "{bad}"
            );
        }
        assert_eq!(
            int(
                &accept(&with("attempt_number", Some("2147483647"))),
                "attempt_number"
            ),
            Some(i64::from(i32::MAX))
        );
        assert_eq!(
            int(
                &accept(&with("attempt_number", Some("7"))),
                "attempt_number"
            ),
            Some(7)
        );
    }

    // ----- checkpoint ------------------------------------------------------

    #[test]
    fn checkpoint_is_optional_i64_or_null() {
        assert_eq!(
            int(&accept(&with("checkpoint", Some("null"))), "checkpoint"),
            None
        );
        assert_eq!(
            int(&accept(&with("checkpoint", Some(" null\t"))), "checkpoint"),
            None
        );
        assert_eq!(
            int(&accept(&with("checkpoint", Some(" 12 "))), "checkpoint"),
            Some(12)
        );
        assert_eq!(
            int(&accept(&with("checkpoint", Some("0"))), "checkpoint"),
            Some(0)
        );
        assert_eq!(
            int(&accept(&with("checkpoint", Some("-0"))), "checkpoint"),
            Some(0)
        );
        assert_eq!(
            int(
                &accept(&with("checkpoint", Some("-9223372036854775808"))),
                "checkpoint"
            ),
            Some(i64::MIN)
        );
        assert_eq!(
            int(
                &accept(&with("checkpoint", Some("9223372036854775807"))),
                "checkpoint"
            ),
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
                invalid("checkpoint"),
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
                invalid("event_time"),
                "{bad}"
            );
        }
    }
}
