//! The canonical form of an accepted event: both its identity (what is digested
//! for dedup) and the published line.

use super::bytes::find_special;
use super::{Event, Value};

/// Appends `s` as a JSON string escaped exactly as serde_json does: `"`, `\`,
/// the short escapes `\b \t \n \f \r`, other C0 controls as `\u00xx`; everything
/// else (DEL, `/`, non-ASCII) verbatim.
fn write_json_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    loop {
        let i = find_special(bytes, start);
        out.extend_from_slice(&bytes[start..i]);
        let Some(&b) = bytes.get(i) else {
            break;
        };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0A => out.extend_from_slice(b"\\n"),
            0x0C => out.extend_from_slice(b"\\f"),
            0x0D => out.extend_from_slice(b"\\r"),
            _ => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xF)]);
            }
        }
        start = i + 1;
    }
    out.push(b'"');
}

/// Appends the decimal form of `n`, as serde_json writes it (both use `itoa`).
fn write_i64(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

impl Event<'_> {
    /// Append the canonical form: compact JSON, keys sorted, every contract field
    /// (`null` for an absent optional one), strings escaped as serde_json escapes
    /// them, NO trailing newline. This is both the identity form and the published
    /// line.
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        for (f, v) in self.contract.fields.iter().zip(&self.values) {
            out.extend_from_slice(&f.prefix);
            match v {
                Value::Null => out.extend_from_slice(b"null"),
                Value::Str(s) => write_json_str(out, s),
                // Enum values and normalized times hold nothing JSON escapes (the
                // contract checks enum values when it loads).
                Value::Enum(s) => {
                    out.push(b'"');
                    out.extend_from_slice(s.as_bytes());
                    out.push(b'"');
                }
                Value::Time(t) => {
                    out.push(b'"');
                    out.extend_from_slice(t.as_bytes());
                    out.push(b'"');
                }
                Value::Int(n) => write_i64(out, *n),
                Value::Bool(true) => out.extend_from_slice(b"true"),
                Value::Bool(false) => out.extend_from_slice(b"false"),
            }
        }
        out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{accept, int, text, with, GOOD};

    fn canonical(line: &str) -> String {
        let mut out = Vec::new();
        accept(line).write_canonical(&mut out);
        String::from_utf8(out).expect("canonical output is UTF-8")
    }

    #[test]
    fn canonical_form_is_sorted_compact_with_null_checkpoint() {
        assert_eq!(
            canonical(GOOD),
            r#"{"attempt_number":1,"checkpoint":null,"event_id":"evt_1001","event_time":"2026-03-02T14:02:11Z","event_type":"completed","learner_id":"lrn_1042","lesson_id":"les_07"}"#
        );
        assert_eq!(
            canonical(&with("checkpoint", Some("-42"))),
            r#"{"attempt_number":1,"checkpoint":-42,"event_id":"evt_1001","event_time":"2026-03-02T14:02:11Z","event_type":"completed","learner_id":"lrn_1042","lesson_id":"les_07"}"#
        );
        assert!(!canonical(GOOD).ends_with('\n'));
    }

    #[test]
    fn canonical_form_is_valid_json_equal_to_serde_json_sorted_output() {
        let line = r#"{"event_id":"q\"b\\s/é😀\u007f","learner_id":"l","lesson_id":"m","event_type":"checkpoint","attempt_number":2147483647,"event_time":"2026-03-02T14:02:11.5+01:00","checkpoint":-9223372036854775808}"#;
        let ours = canonical(line);
        let e = accept(line);
        // serde_json::Map is a BTreeMap (sorted keys) without preserve_order.
        let mut map = serde_json::Map::new();
        map.insert("attempt_number".into(), int(&e, "attempt_number").into());
        map.insert("checkpoint".into(), int(&e, "checkpoint").into());
        for name in [
            "event_id",
            "event_time",
            "event_type",
            "learner_id",
            "lesson_id",
        ] {
            map.insert(name.into(), text(&e, name).into());
        }
        let theirs = serde_json::to_string(&serde_json::Value::Object(map)).expect("serializes");
        assert_eq!(ours, theirs);
    }

    #[test]
    fn string_escaping_matches_serde_json_for_every_ascii_char() {
        let mut all = String::new();
        for c in (0u8..=0x7F).map(char::from).chain(['é', '\u{2028}', '😀']) {
            let s = format!("a{c}b{c}");
            let mut out = Vec::new();
            write_json_str(&mut out, &s);
            assert_eq!(
                String::from_utf8(out).expect("utf-8"),
                serde_json::to_string(&s).expect("serializes"),
                "{c:?}"
            );
            all.push(c);
        }
        let mut out = Vec::new();
        write_json_str(&mut out, &all);
        assert_eq!(out, serde_json::to_vec(&all).expect("serializes"));
    }

    #[test]
    fn integers_are_written_like_serde_json() {
        for n in [0, 1, -1, 9, 10, -10, 1234567890, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            write_i64(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }

    #[test]
    fn canonical_identity_ignores_order_whitespace_offset_spelling_and_absent_null() {
        let variants = [
            GOOD.to_string(),
            r#"{ "event_time" : "2026-03-02T14:02:11Z" , "attempt_number" : 1, "lesson_id":"les_07","learner_id":"lrn_1042","event_type":"completed","event_id":"evt_1001" }"#.to_string(),
            with("event_time", Some(r#""2026-03-02T14:02:11z""#)),
            with("event_time", Some(r#""2026-03-02 14:02:11-00:00""#)),
            with("event_time", Some(r#""2026-03-02T19:32:11.000+05:30""#)),
            with("checkpoint", Some("null")),
            with("checkpoint", Some(" null ")),
            with("event_id", Some(r#""evt_\u0031001""#)),
        ];
        let first = canonical(&variants[0]);
        for v in &variants {
            assert_eq!(canonical(v), first, "{v}");
        }
    }

    #[test]
    fn canonical_identity_differs_for_a_different_payload() {
        let base = canonical(GOOD);
        for v in [
            with("checkpoint", Some("0")),
            with("attempt_number", Some("2")),
            with("event_type", Some(r#""checkpoint""#)),
            with("event_time", Some(r#""2026-03-02T14:02:11.001Z""#)),
            with("event_time", Some(r#""2026-03-02T14:02:11+01:00""#)),
            with("learner_id", Some(r#""lrn_1043""#)),
            with("lesson_id", Some(r#""les_08""#)),
        ] {
            assert_ne!(canonical(&v), base, "{v}");
        }
    }
}
