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

use super::object::is_json_whitespace;
use super::scan::{bytes_equal, word_at, HI, LO};
use super::spec::{Contract, Kind, MAX_FIELDS};
use super::time::parse_event_time_bytes;

/// Where an accepted line's parts are, as found by [`canonicalize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    /// The identity key's bytes (unescaped: the fast path takes no escapes) in `out`.
    pub id: Range<usize>,
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
/// closing quote; `None` for any other key (prohibited, unknown, escaped). The
/// fields sharing the key's first byte are tried, each with one or two word
/// comparisons of `name"`: no search for the key's end.
#[inline]
fn field_key(c: &Contract, b: &[u8], i: usize) -> Option<(usize, usize)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let k = i + 1;
    let first = usize::from(*b.get(k)?);
    let (from, to) = (c.probe_start[first], c.probe_start[first + 1]);
    for p in &c.probes[usize::from(from)..usize::from(to)] {
        let n = usize::from(p.len);
        let hit = match word_at(b, k) {
            Some(w) if n >= 8 => w == p.head && word_at(b, k + n - 8) == Some(p.tail),
            Some(w) => w & p.head_mask == p.head,
            // Fewer than 8 bytes left: compare them one by one.
            None => b.get(k..k + n).is_some_and(|key| {
                key.iter()
                    .enumerate()
                    .all(|(j, &x)| u64::from(x) == (p.head >> (8 * j)) & 0xFF)
            }),
        };
        if hit {
            return Some((usize::from(p.field), k + n));
        }
    }
    None
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

/// The value of the canonical integer text `t` (`-?[1-9][0-9]*` or `0`), `None`
/// outside i64.
fn integer_value(t: &[u8]) -> Option<i64> {
    let (neg, digits) = match t {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, t),
    };
    if digits.len() > 19 {
        return None;
    }
    // Up to 19 digits fit a u64.
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    if neg {
        0i64.checked_sub_unsigned(n)
    } else {
        i64::try_from(n).ok()
    }
}

/// A value's token on the line (for strings: content only, for times: content).
#[derive(Clone, Copy, Default)]
struct Slot {
    start: u32,
    end: u32,
}

/// `start == NULL`: the field was written as `null` (a nullable field).
const NULL: u32 = u32::MAX;

/// Checks `line` against `c` and, if it is an accepted event the fast path can
/// vouch for, appends its canonical form (no newline) to `out`. `None`: undecided,
/// `out` untouched; call [`validate`](super::validate).
pub fn canonicalize(c: &Contract, line: &[u8], out: &mut Vec<u8>) -> Option<Canonical> {
    // Most contracts are small: their per-line table is cheaper to clear.
    if c.fields.len() <= 16 {
        walk::<16>(c, line, out)
    } else {
        walk::<MAX_FIELDS>(c, line, out)
    }
}

/// [`canonicalize`] with a table of `N >= c.fields.len()` value slots.
#[inline(always)]
fn walk<const N: usize>(c: &Contract, line: &[u8], out: &mut Vec<u8>) -> Option<Canonical> {
    let b = line;
    if b.len() >= NULL as usize {
        return None;
    }
    let mut slots = [Slot::default(); N];
    let mut seen = 0u64;
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    loop {
        // A contract field's name, spelled plainly; anything else (prohibited,
        // unknown, escaped) is the slow path's to judge.
        let (k, key_end) = field_key(c, b, i)?;
        let bit = 1u64 << k;
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let f = &c.fields[k];
        // Ranges are below u32::MAX: the line is (checked above).
        let (start, end, value_end) = if f.nullable && starts(b, i, b"null") {
            (NULL, 0, i + 4)
        } else {
            match &f.kind {
                Kind::String => {
                    if b.get(i) != Some(&b'"') {
                        return None;
                    }
                    let (end, ascii) = string_end(b, i + 1)?;
                    // Non-empty, and valid UTF-8 (the only bytes of the line that
                    // may be non-ASCII are inside strings).
                    if end == i + 1 || (!ascii && std::str::from_utf8(&b[i + 1..end]).is_err()) {
                        return None;
                    }
                    (i as u32, end as u32 + 1, end + 1)
                }
                Kind::Enum(values) => {
                    if b.get(i) != Some(&b'"') {
                        return None;
                    }
                    let (end, _) = string_end(b, i + 1)?;
                    let text = &b[i + 1..end];
                    if !values.iter().any(|v| v.as_bytes() == text) {
                        return None;
                    }
                    (i as u32, end as u32 + 1, end + 1)
                }
                Kind::Integer { min, max } => {
                    let end = canonical_integer(b, i)?;
                    let n = integer_value(&b[i..end])?;
                    if n < *min || n > *max {
                        return None;
                    }
                    (i as u32, end as u32, end)
                }
                Kind::Boolean => {
                    let end = if starts(b, i, b"true") {
                        i + 4
                    } else if starts(b, i, b"false") {
                        i + 5
                    } else {
                        return None;
                    };
                    (i as u32, end as u32, end)
                }
                Kind::Time => {
                    if b.get(i) != Some(&b'"') {
                        return None;
                    }
                    let (end, ascii) = string_end(b, i + 1)?;
                    if !ascii {
                        return None;
                    }
                    (i as u32 + 1, end as u32, end + 1)
                }
            }
        };
        slots[k] = Slot { start, end };
        i = skip_ws(b, value_end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    if skip_ws(b, i + 1) != b.len() || seen & c.required_mask != c.required_mask {
        return None;
    }

    // The canonical form, exactly as Event::write_canonical writes it: the strings
    // hold nothing serde_json escapes, so they are copied as they are. A time is
    // parsed here; if it is invalid, what was written is taken back.
    let mark = out.len();
    out.reserve(b.len() + 16 * c.fields.len());
    out.push(b'{');
    let mut id = 0..0;
    for (k, f) in c.fields.iter().enumerate() {
        out.extend_from_slice(&f.prefix);
        let s = slots[k];
        if seen & (1u64 << k) == 0 || s.start == NULL {
            out.extend_from_slice(b"null");
            continue;
        }
        let token = &b[s.start as usize..s.end as usize];
        if let Kind::Time = f.kind {
            let Some(time) = parse_event_time_bytes(token) else {
                out.truncate(mark);
                return None;
            };
            out.push(b'"');
            out.extend_from_slice(time.as_bytes());
            out.push(b'"');
        } else {
            if k == c.identity {
                // The token is `"…"`: the id is between the quotes.
                id = out.len() + 1..out.len() + token.len() - 1;
            }
            out.extend_from_slice(token);
        }
    }
    out.push(b'}');
    Some(Canonical { id })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::tests::{with, Rng, GOOD};
    use crate::contract::{progress, validate, Verdict};

    /// The fast path either declines (and leaves `out` alone) or gives exactly the
    /// slow path's canonical bytes for a line the slow path accepts. Returns
    /// whether it took the line.
    fn assert_agrees(line: &[u8]) -> bool {
        let mut fast = b"prefix".to_vec();
        let taken = canonicalize(progress(), line, &mut fast);
        let shown = String::from_utf8_lossy(line);
        match (taken, validate(progress(), line)) {
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
                assert_eq!(&fast[c.id], event.id().as_bytes(), "{shown}");
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
            let (field, end) = field_key(progress(), line.as_bytes(), 0).expect("a contract field");
            assert_eq!((field, end), (n, name.len() + 2), "{name}");
            // A longer or shorter name, or the name unquoted, is not it.
            assert_eq!(
                field_key(progress(), format!("\"{name}x\"").as_bytes(), 0),
                None
            );
            assert_eq!(
                field_key(
                    progress(),
                    format!("\"{}\"", &name[..name.len() - 1]).as_bytes(),
                    0
                ),
                None
            );
            assert_eq!(field_key(progress(), name.as_bytes(), 0), None);
        }
        for other in [
            "\"email\"",
            "\"name\"",
            "\"event_idx\"",
            "\"event_\\u0069d\"",
            "\"\"",
            "\"e",
        ] {
            assert_eq!(field_key(progress(), other.as_bytes(), 0), None, "{other}");
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
                if matches!(validate(progress(), text.as_bytes()), Verdict::Accept(_)) {
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

    /// The same property for a contract with every type (boolean, a nullable
    /// string, bounded integers): the single pass is generic, not `progress`'s.
    #[test]
    fn agrees_with_the_slow_path_for_another_contract() {
        let c = crate::contract::Contract::load(include_bytes!("../../contracts/enrollment.json"))
            .expect("enrollment contract");
        let agree = |line: &[u8]| {
            let mut fast = b"p".to_vec();
            let taken = canonicalize(c, line, &mut fast);
            let shown = String::from_utf8_lossy(line);
            match (taken, validate(c, line)) {
                (None, _) => {
                    assert_eq!(fast, b"p", "declined but wrote, for {shown}");
                    false
                }
                (Some(k), Verdict::Accept(event)) => {
                    let mut slow = b"p".to_vec();
                    event.write_canonical(&mut slow);
                    assert_eq!(
                        String::from_utf8_lossy(&fast),
                        String::from_utf8_lossy(&slow)
                    );
                    assert_eq!(&fast[k.id], event.id().as_bytes(), "{shown}");
                    true
                }
                (Some(_), other) => panic!("fast path accepted {shown}, slow path says {other:?}"),
            }
        };
        let seeds = [
            r#"{"enrollment_id":"enr-1","learner_id":"l-1","course_id":"c-1","action":"enrolled","seats":1,"paid":true,"enrolled_at":"2026-03-02T10:00:00.5+01:00","cohort":"spring"}"#,
            r#"{"cohort":null,"paid":false,"seats":1000,"action":"withdrawn","enrolled_at":"2026-03-02 10:00:00Z","course_id":"c","learner_id":"é","enrollment_id":"x"}"#,
            r#"{"enrollment_id":"e","learner_id":"l","course_id":"c","action":"enrolled","seats":7,"paid":true,"enrolled_at":"2026-03-02T10:00:00Z"}"#,
        ];
        let alphabet: Vec<char> = "{}[]\",:\\ \t0123456789-+.eEtrufalsnZT_xé\u{1}"
            .chars()
            .collect();
        let mut rng = Rng(42);
        let (mut taken, mut accepted) = (0, 0);
        for seed in seeds {
            assert!(agree(seed.as_bytes()), "seed not taken: {seed}");
            for _ in 0..5000 {
                let text = rng.mutate(seed, &alphabet);
                taken += usize::from(agree(text.as_bytes()));
                accepted += usize::from(matches!(validate(c, text.as_bytes()), Verdict::Accept(_)));
            }
        }
        assert!(taken > 200, "fast path took only {taken}");
        assert!(
            taken * 10 >= accepted * 9,
            "took {taken} of {accepted} accepted"
        );
        // The canonical form: sorted keys, null for the absent optional field.
        let mut out = Vec::new();
        canonicalize(c, seeds[2].as_bytes(), &mut out).expect("taken");
        assert_eq!(
            String::from_utf8(out).expect("UTF-8"),
            r#"{"action":"enrolled","cohort":null,"course_id":"c","enrolled_at":"2026-03-02T10:00:00Z","enrollment_id":"e","learner_id":"l","paid":true,"seats":7}"#
        );
    }
}
