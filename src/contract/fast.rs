//! The single pass: for the line nearly every producer writes (one flat object of
//! the contract's fields, strings without escapes, valid values), check it and
//! write its canonical form in one walk over its bytes, instead of a UTF-8 check,
//! a scan, field checks and a canonical copy one after the other.
//!
//! It only ever *accepts*: anything it is not sure of (a prohibited, unknown or
//! repeated key, an escape, an invalid value, malformed JSON) makes it decline and
//! leave `out` as it was, and [`validate`](super::validate) then decides the line.
//! So every rule (order of reasons, duplicate keys, prohibited fields) stays the
//! slow path's; a property test holds the two byte-for-byte equal on what it takes.

use std::ops::Range;

use super::object::{is_json_whitespace, Field};
use super::scan::{bytes_equal, word_at, HI, LO};
use super::time::parse_event_time_bytes;

/// Where an accepted line's parts are, as found by [`canonicalize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    /// The event id's bytes (unescaped: the fast path takes no escapes) in `out`.
    pub event_id: Range<usize>,
}

/// End (index of the closing quote) of a string whose content starts at `i`, and
/// whether the content is all ASCII. `None` for an escape, a control character or
/// a missing quote. Word at a time: string bytes are most of every line.
fn string_end(b: &[u8], from: usize) -> Option<(usize, bool)> {
    let mut j = from;
    let mut high = 0u64;
    while let Some(w) = word_at(b, j) {
        // Lowest flag is a true one (see scan::bytes_equal).
        let special =
            bytes_equal(w, b'"') | bytes_equal(w, b'\\') | (w.wrapping_sub(LO * 0x20) & !w & HI);
        if special != 0 {
            let k = special.trailing_zeros() as usize; // bit 7 of the special byte
                                                       // High bits of the bytes before the special one only.
            high |= w & HI & ((1u64 << (k - 7)) - 1);
            j += k / 8;
            return (b[j] == b'"').then_some((j, high == 0));
        }
        high |= w & HI;
        j += 8;
    }
    while let Some(&c) = b.get(j) {
        match c {
            b'"' => return Some((j, high == 0)),
            b'\\' | 0..=0x1F => return None,
            0x80.. => high = 1,
            _ => {}
        }
        j += 1;
    }
    None
}

/// The contract field whose quoted name starts at `b[i]`, and the index after the
/// closing quote; `None` for any other key. Comparing with the seven names (closing
/// quote included) needs no scan for the end of the key.
fn field_key(b: &[u8], i: usize) -> Option<(Field, usize)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let k = &b[i + 1..];
    let (field, name): (Field, &[u8]) = match (k.first()?, k.get(2), k.get(6), k.get(7)) {
        (b'a', ..) => (Field::AttemptNumber, b"attempt_number\""),
        (b'c', ..) => (Field::Checkpoint, b"checkpoint\""),
        (b'e', _, Some(b'i'), _) => (Field::EventId, b"event_id\""),
        (b'e', _, Some(b't'), Some(b'i')) => (Field::EventTime, b"event_time\""),
        (b'e', _, Some(b't'), Some(b'y')) => (Field::EventType, b"event_type\""),
        (b'l', Some(b'a'), ..) => (Field::LearnerId, b"learner_id\""),
        (b'l', Some(b's'), ..) => (Field::LessonId, b"lesson_id\""),
        _ => return None,
    };
    k.starts_with(name).then_some((field, i + 1 + name.len()))
}

fn starts(b: &[u8], i: usize, literal: &[u8]) -> bool {
    b.get(i..i + literal.len()) == Some(literal)
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_json_whitespace(b[i]) {
        i += 1;
    }
    i
}

/// End of a JSON integer at `i` written as serde_json (and so the canonical form)
/// writes it: `0`, or an optional `-` and digits without a leading zero, but not
/// `-0`. `None` for anything else, including the start of a float.
fn canonical_integer(b: &[u8], i: usize) -> Option<usize> {
    let digits = i + usize::from(b.get(i) == Some(&b'-'));
    let end = digits
        + b[digits..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
    let ok = match b.get(digits..end)? {
        [] => false,
        [b'0'] => digits == i, // `0` yes, `-0` no (canonical is `0`)
        [b'0', ..] => false,
        _ => true,
    };
    // A float or exponent continues the number: not an integer.
    (ok && !matches!(b.get(end), Some(b'.' | b'e' | b'E'))).then_some(end)
}

/// The parts of one line, as ranges of the line.
#[derive(Default)]
struct Parts {
    ids: [Option<Range<usize>>; 3], // event_id, learner_id, lesson_id
    event_type: Option<&'static [u8]>,
    attempt_number: Option<Range<usize>>,
    event_time: Option<Range<usize>>,
    checkpoint: Option<Range<usize>>, // None: absent; "null" included as a range
}

/// Checks `line` and, if it is an accepted event the fast path can vouch for,
/// appends its canonical form (no newline) to `out`. `None`: undecided, `out`
/// untouched; call [`validate`](super::validate).
pub fn canonicalize(line: &[u8], out: &mut Vec<u8>) -> Option<Canonical> {
    let b = line;
    let mut p = Parts::default();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    loop {
        // A contract field's name, spelled plainly; anything else (prohibited,
        // unknown, escaped) is the slow path's to judge.
        let (field, key_end) = field_key(b, i)?;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let value_end = match field {
            Field::EventId | Field::LearnerId | Field::LessonId => {
                let slot = match field {
                    Field::EventId => 0,
                    Field::LearnerId => 1,
                    _ => 2,
                };
                if b.get(i) != Some(&b'"') || p.ids[slot].is_some() {
                    return None;
                }
                let (end, ascii) = string_end(b, i + 1)?;
                // Non-empty, and valid UTF-8 (the only bytes of the line that may
                // be non-ASCII are inside strings).
                if end == i + 1 || (!ascii && std::str::from_utf8(&b[i + 1..end]).is_err()) {
                    return None;
                }
                p.ids[slot] = Some(i + 1..end);
                end + 1
            }
            Field::EventType => {
                if p.event_type.is_some() {
                    return None;
                }
                let (kind, len): (&'static [u8], usize) = if starts(b, i, b"\"checkpoint\"") {
                    (b"checkpoint", 12)
                } else if starts(b, i, b"\"completed\"") {
                    (b"completed", 11)
                } else {
                    return None;
                };
                p.event_type = Some(kind);
                i + len
            }
            Field::AttemptNumber => {
                if p.attempt_number.is_some() || !matches!(b.get(i), Some(b'1'..=b'9')) {
                    return None;
                }
                let end = canonical_integer(b, i)?;
                // At most i32::MAX (10 digits): compare as text of equal length.
                if end - i > 10 || (end - i == 10 && &b[i..end] > b"2147483647".as_slice()) {
                    return None;
                }
                p.attempt_number = Some(i..end);
                end
            }
            Field::EventTime => {
                if b.get(i) != Some(&b'"') || p.event_time.is_some() {
                    return None;
                }
                let (end, ascii) = string_end(b, i + 1)?;
                if !ascii {
                    return None;
                }
                p.event_time = Some(i + 1..end);
                end + 1
            }
            Field::Checkpoint => {
                if p.checkpoint.is_some() {
                    return None;
                }
                let end = if starts(b, i, b"null") {
                    i + 4
                } else {
                    let end = canonical_integer(b, i)?;
                    let digits = end - i - usize::from(b[i] == b'-');
                    // Up to 18 digits always fit an i64; longer ones are checked.
                    if digits > 18
                        && std::str::from_utf8(&b[i..end])
                            .ok()?
                            .parse::<i64>()
                            .is_err()
                    {
                        return None;
                    }
                    end
                };
                p.checkpoint = Some(i..end);
                end
            }
        };
        i = skip_ws(b, value_end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    if skip_ws(b, i + 1) != b.len() {
        return None;
    }
    let [Some(event_id), Some(learner_id), Some(lesson_id)] = p.ids else {
        return None;
    };
    let (Some(event_type), Some(attempt), Some(time)) =
        (p.event_type, p.attempt_number, p.event_time)
    else {
        return None;
    };
    let time = parse_event_time_bytes(&b[time])?;

    // The canonical form, exactly as Event::write_canonical writes it: the strings
    // hold nothing serde_json escapes, so they are copied as they are.
    out.reserve(b.len() + 64);
    out.extend_from_slice(b"{\"attempt_number\":");
    out.extend_from_slice(&b[attempt]);
    out.extend_from_slice(b",\"checkpoint\":");
    match p.checkpoint {
        Some(r) => out.extend_from_slice(&b[r]),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"event_id\":\"");
    let id_start = out.len();
    out.extend_from_slice(&b[event_id]);
    let id = id_start..out.len();
    out.extend_from_slice(b"\",\"event_time\":\"");
    out.extend_from_slice(time.as_bytes());
    out.extend_from_slice(b"\",\"event_type\":\"");
    out.extend_from_slice(event_type);
    out.extend_from_slice(b"\",\"learner_id\":\"");
    out.extend_from_slice(&b[learner_id]);
    out.extend_from_slice(b"\",\"lesson_id\":\"");
    out.extend_from_slice(&b[lesson_id]);
    out.extend_from_slice(b"\"}");
    Some(Canonical { event_id: id })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::tests::{with, Rng, GOOD};
    use crate::contract::{validate, Verdict};

    /// The fast path either declines (and leaves `out` alone) or gives exactly the
    /// slow path's canonical bytes for a line the slow path accepts. Returns
    /// whether it took the line.
    fn assert_agrees(line: &[u8]) -> bool {
        let mut fast = b"prefix".to_vec();
        let taken = canonicalize(line, &mut fast);
        let shown = String::from_utf8_lossy(line);
        match (taken, validate(line)) {
            (None, _) => {
                assert_eq!(fast, b"prefix", "declined but wrote, for {shown}");
                false
            }
            (Some(c), Verdict::Accept(event)) => {
                let mut slow = b"prefix".to_vec();
                event.write_canonical(&mut slow);
                assert_eq!(
                    String::from_utf8_lossy(&fast),
                    String::from_utf8_lossy(&slow),
                    "canonical form of {shown}"
                );
                assert_eq!(&fast[c.event_id], event.event_id.as_bytes(), "{shown}");
                true
            }
            (Some(_), other) => panic!("fast path accepted {shown}, slow path says {other:?}"),
        }
    }

    #[test]
    fn takes_the_common_shapes() {
        let reordered = r#"{"checkpoint":3,"event_time":"2026-03-02T19:32:11.120+05:30","attempt_number":4,"event_type":"checkpoint","lesson_id":"lesson-00104","learner_id":"learner-0075822","event_id":"evt-000000000007"}"#;
        for line in [
            GOOD.to_string(),
            reordered.to_string(),
            with("checkpoint", Some("null")),
            with("checkpoint", Some("-9223372036854775808")),
            with("checkpoint", Some("0")),
            with("attempt_number", Some("2147483647")),
            with("event_id", Some("\"é😀\u{7f}/x\"")),
            format!(" \t{}\r ", with("event_type", Some(r#""checkpoint""#))),
            r#"{"attempt_number":1,"checkpoint":null,"event_id":"e","event_time":"2026-03-02T14:02:11Z","event_type":"completed","learner_id":"l","lesson_id":"m"}"#.to_string(),
            r#"{ "event_id" : "e" , "learner_id":"l","lesson_id":"m","event_type":"completed","attempt_number":1,"event_time":"2026-03-02 14:02:11.000-00:00" }"#.to_string(),
        ] {
            assert!(assert_agrees(line.as_bytes()), "not taken: {line}");
        }
    }

    #[test]
    fn declines_whatever_the_slow_path_must_decide() {
        for line in [
            GOOD.replace('}', r#","event_id":"x"}"#), // duplicate key
            GOOD.replace('}', r#","email":"x"}"#),    // prohibited
            GOOD.replace('}', r#","colour":1}"#),     // unknown
            GOOD.replace("evt_1001", r"evt\u0031"),   // escape
            with("checkpoint", Some("-0")),           // not canonical
            with("checkpoint", Some("9223372036854775808")), // too large
            with("checkpoint", Some("1.0")),
            with("checkpoint", Some("01")),
            with("attempt_number", Some("0")),
            with("attempt_number", Some("2147483648")),
            with("attempt_number", Some("1e0")),
            with("event_id", Some(r#""""#)),
            with("event_id", Some("1")),
            with("event_type", Some(r#""started""#)),
            with("event_time", Some(r#""2026-02-30T00:00:00Z""#)),
            with("lesson_id", None),
            GOOD.replace('}', ",}"),
            format!("{GOOD} x"),
            GOOD[..GOOD.len() - 1].to_string(),
        ] {
            assert!(!assert_agrees(line.as_bytes()), "taken: {line}");
        }
        let mut bad_utf8 = GOOD.as_bytes().to_vec();
        let at = GOOD.find("evt_").expect("GOOD has an id");
        bad_utf8[at] = 0xC3;
        assert!(!assert_agrees(&bad_utf8));
    }

    #[test]
    fn field_key_knows_exactly_the_seven_names() {
        use crate::contract::CONTRACT_FIELDS;
        for (n, name) in CONTRACT_FIELDS.iter().enumerate() {
            let line = format!("\"{name}\":1");
            let (field, end) = field_key(line.as_bytes(), 0).expect("a contract field");
            assert_eq!((field as usize, end), (n, name.len() + 2), "{name}");
            // A longer or shorter name, or the name unquoted, is not it.
            assert_eq!(field_key(format!("\"{name}x\"").as_bytes(), 0), None);
            assert_eq!(
                field_key(format!("\"{}\"", &name[..name.len() - 1]).as_bytes(), 0),
                None
            );
            assert_eq!(field_key(name.as_bytes(), 0), None);
        }
        for other in [
            "\"email\"",
            "\"name\"",
            "\"event_idx\"",
            "\"event_\\u0069d\"",
            "\"\"",
            "\"e",
        ] {
            assert_eq!(field_key(other.as_bytes(), 0), None, "{other}");
        }
    }

    #[test]
    fn string_end_matches_a_byte_loop() {
        let mut rng = Rng(11);
        let pool = [b'a', b'"', b'\\', 0x1F, 0x20, 0x7F, 0x80, 0xC3, 0xA9, b'0'];
        for _ in 0..50_000 {
            let len = rng.below(40);
            let hay: Vec<u8> = (0..len).map(|_| pool[rng.below(pool.len())]).collect();
            let from = rng.below(len + 1);
            let naive = hay[from..]
                .iter()
                .position(|&c| matches!(c, b'"' | b'\\' | 0..=0x1F))
                .filter(|&k| hay[from + k] == b'"')
                .map(|k| (from + k, hay[from..from + k].is_ascii()));
            assert_eq!(string_end(&hay, from), naive, "{hay:?} from {from}");
        }
    }

    /// Property: over lines mutated at random from producer-shaped seeds, the fast
    /// path never disagrees with the slow path, and takes most of the valid ones.
    #[test]
    fn agrees_with_the_slow_path_on_mutated_lines() {
        let seeds = [
            r#"{"event_id":"evt-000000000001","learner_id":"learner-0041489","lesson_id":"lesson-01190","event_type":"checkpoint","attempt_number":4,"event_time":"2026-03-02T00:00:09.255+00:00","checkpoint":4}"#.to_string(),
            r#"{"checkpoint":null,"event_time":"2026-03-02T05:30:20.995+05:30","attempt_number":1,"event_type":"completed","lesson_id":"lesson-00141","learner_id":"learner-0058935","event_id":"evt-000000000002"}"#.to_string(),
            r#"{"attempt_number":12,"checkpoint":-7,"event_id":"é","event_time":"2026-12-31T23:59:59.999999999-00:30","event_type":"completed","learner_id":"l","lesson_id":"m"}"#.to_string(),
            GOOD.to_string(),
        ];
        let alphabet: Vec<char> = "{}[]\",:\\ \t0123456789-+.eEtrufalsnZTz_xé\u{1}"
            .chars()
            .collect();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut taken, mut accepted) = (0, 0);
        for seed in &seeds {
            assert!(assert_agrees(seed.as_bytes()), "seed not taken: {seed}");
            for _ in 0..5000 {
                let text = rng.mutate(seed, &alphabet);
                if assert_agrees(text.as_bytes()) {
                    taken += 1;
                }
                if matches!(validate(text.as_bytes()), Verdict::Accept(_)) {
                    accepted += 1;
                }
            }
        }
        // Both ways exercised, and the fast path takes nearly every accepted line
        // (it declines only escapes, `-0` and the like).
        assert!(taken > 1000, "fast path took only {taken}");
        assert!(
            taken * 10 >= accepted * 9,
            "took {taken} of {accepted} accepted"
        );
    }
}
