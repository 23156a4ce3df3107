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
//!
//! No code per product: the contract is compiled into a [`Table`] of flat arrays
//! (key and enum matchers as whole words, value kinds, the canonical prefixes in
//! one buffer), and the keys' order on the previous line predicts the next key.

use std::ops::Range;

use super::bytes::{bytes_equal, is_json_whitespace, word_at, HI, LO};
use super::field::MAX_FIELDS;
use super::spec::Contract;
use super::table::{put, Field, Table, Value, BLOCK};
use super::time::parse_event_time_bytes;

/// Where an accepted line's parts are, as found by [`canonicalize_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    /// The identity key's bytes (unescaped: the fast path takes no escapes) in `out`.
    pub id: Range<usize>,
}

/// What the single pass carries from one line of a batch to the next.
#[derive(Clone)]
pub struct Carry {
    /// The key order of the lines seen so far. A producer writes every line's keys
    /// in one order, so the key after field `k` is nearly always the one that
    /// followed it on the line before: one probe instead of a search.
    /// `next[k]`: the field after field `k` last time (`next[MAX_FIELDS]`: the
    /// first field); `u8::MAX` when unknown.
    next: [u8; MAX_FIELDS + 1],
    /// Where a line's canonical form is assembled before one copy into the output.
    scratch: Vec<u8>,
}

impl Default for Carry {
    fn default() -> Self {
        Carry {
            next: [u8::MAX; MAX_FIELDS + 1],
            scratch: Vec::new(),
        }
    }
}

/// End (index of the closing quote) of a string whose content starts at `i`, and
/// whether the content is all ASCII. `None` for an escape, a control character or
/// a missing quote. Sixteen bytes at a time where SSE2 is (every x86-64), then a
/// word at a time: string bytes are most of every line.
#[inline(always)]
fn string_end(b: &[u8], from: usize) -> Option<(usize, bool)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        let mut j = from;
        let mut high = 0u32;
        while let Some(chunk) = b.get(j..j + 16) {
            // SAFETY: SSE2 is part of every x86-64 (the target's baseline), and
            // `chunk` is 16 bytes in bounds (the load takes any alignment).
            let (non_ascii, any) = unsafe {
                let v = _mm_loadu_si128(chunk.as_ptr().cast());
                let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
                let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
                // Signed: below 0x20 is a control character, or a byte >= 0x80.
                let below = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
                let any = _mm_or_si128(_mm_or_si128(quote, backslash), below);
                (_mm_movemask_epi8(v), _mm_movemask_epi8(any))
            };
            // One bit per byte: the masks fit 16 bits, so the casts are lossless.
            let non_ascii = non_ascii as u32;
            let special = any as u32 & !non_ascii;
            if special != 0 {
                let k = special.trailing_zeros();
                high |= non_ascii & ((1 << k) - 1);
                let j = j + k as usize;
                return (b[j] == b'"').then_some((j, high == 0));
            }
            high |= non_ascii;
            j += 16;
        }
        string_end_words(b, j, high != 0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    string_end_words(b, from, false)
}

/// [`string_end`] a word at a time from `from`; `non_ascii`: bytes before `from`
/// were.
fn string_end_words(b: &[u8], from: usize, non_ascii: bool) -> Option<(usize, bool)> {
    let mut j = from;
    let mut high = u64::from(non_ascii) << 7;
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
/// field that followed `prev` last time is tried first.
#[inline(always)]
fn field_key(
    t: &Table,
    carry: &mut Carry,
    prev: usize,
    b: &[u8],
    i: usize,
) -> Option<(usize, usize)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let k = i + 1;
    let guess = usize::from(carry.next[prev]);
    let field = match t.fields.get(guess) {
        Some(f) if f.key.at(b, k) => guess,
        _ => {
            let f = t.lookup(b, k)?;
            // f < MAX_FIELDS: fits a byte.
            carry.next[prev] = f as u8;
            f
        }
    };
    Some((field, k + usize::from(t.fields[field].key.len)))
}

fn starts(b: &[u8], i: usize, literal: &[u8]) -> bool {
    b.get(i..i + literal.len()) == Some(literal)
}

/// The first index from `i` that is not JSON whitespace. Between tokens there is
/// usually none: one comparison says so (every whitespace byte is <= b' ').
#[inline(always)]
fn skip_ws(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(&c) if c > b' ' => i,
        _ => skip_ws_from(b, i),
    }
}

fn skip_ws_from(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_json_whitespace(b[i]) {
        i += 1;
    }
    i
}

/// End of the JSON integer at `b[i]` if it is written as serde_json (and so the
/// canonical form) writes it, `0` or an optional `-` and digits without a leading
/// zero but not `-0`, and its value is within `min..=max`. `None` for anything
/// else, including the start of a float.
fn integer(b: &[u8], i: usize, min: i64, max: i64) -> Option<usize> {
    let neg = b.get(i) == Some(&b'-');
    let digits = i + usize::from(neg);
    let (mut end, mut n) = (digits, 0u64);
    while let Some(d @ b'0'..=b'9') = b.get(end) {
        // Up to 19 digits fit a u64; more are outside i64 anyway.
        if end - digits == 19 {
            return None;
        }
        n = n * 10 + u64::from(d - b'0');
        end += 1;
    }
    let canonical = match end - digits {
        0 => false,
        1 => !(neg && n == 0), // `0` yes, `-0` no (canonical is `0`)
        _ => b[digits] != b'0',
    };
    // A float or exponent continues the number: not an integer.
    if !canonical || matches!(b.get(end), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    let value = if neg {
        0i64.checked_sub_unsigned(n)?
    } else {
        i64::try_from(n).ok()?
    };
    (min..=max).contains(&value).then_some(end)
}

/// A value's token on the line (for strings: content only, for times: content).
#[derive(Clone, Copy, Default)]
struct Slot {
    start: u32,
    end: u32,
}

/// `start == NULL`: the field was written as `null` (a nullable field).
const NULL: u32 = u32::MAX;

/// [`canonicalize_with`] on a line of its own (the tests' entry).
#[cfg(test)]
fn canonicalize(c: &Contract, line: &[u8], out: &mut Vec<u8>) -> Option<Canonical> {
    canonicalize_with(c, &mut Carry::default(), line, out)
}

/// Checks `line` against `c` and, if it is an accepted event the fast path can
/// vouch for, appends its canonical form (no newline) to `out`. `None`: undecided,
/// `out` untouched; call [`validate`](super::validate). `carry` goes from one
/// line of a batch (or a reread) to the next.
pub fn canonicalize_with(
    c: &Contract,
    carry: &mut Carry,
    line: &[u8],
    out: &mut Vec<u8>,
) -> Option<Canonical> {
    // Most contracts are small: their per-line table is cheaper to clear.
    if c.fields.len() <= 16 {
        walk::<16>(&c.fast, carry, line, out)
    } else {
        walk::<MAX_FIELDS>(&c.fast, carry, line, out)
    }
}

/// The end of the value of field `k` starting at `b[i]`, and its token as a [`Slot`];
/// `None` if the single pass cannot vouch for it.
#[inline(always)]
fn value(t: &Table, f: &Field, b: &[u8], i: usize) -> Option<(Slot, usize)> {
    if f.nullable && starts(b, i, b"null") {
        return Some((
            Slot {
                start: NULL,
                end: 0,
            },
            i + 4,
        ));
    }
    // Ranges are below u32::MAX: the line is (checked by `walk`).
    let token = |start: usize, end: usize| Slot {
        start: start as u32,
        end: end as u32,
    };
    match f.value {
        Value::String => {
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let (end, ascii) = string_end(b, i + 1)?;
            // Non-empty, and valid UTF-8 (the only bytes of the line that may be
            // non-ASCII are inside strings).
            if end == i + 1 || (!ascii && std::str::from_utf8(&b[i + 1..end]).is_err()) {
                return None;
            }
            Some((token(i, end + 1), end + 1))
        }
        Value::Enum(from, to) => {
            // `value"` right after the opening quote is the whole string: enum
            // values hold no quote, backslash or control character.
            if b.get(i) != Some(&b'"') {
                return None;
            }
            // A plain loop: `find` with this closure was not inlined.
            for p in &t.enums[usize::from(from)..usize::from(to)] {
                if p.at(b, i + 1) {
                    let end = i + 1 + usize::from(p.len);
                    return Some((token(i, end), end));
                }
            }
            None
        }
        Value::Integer { min, max } => {
            let end = integer(b, i, min, max)?;
            Some((token(i, end), end))
        }
        Value::Boolean => {
            let end = if starts(b, i, b"true") {
                i + 4
            } else if starts(b, i, b"false") {
                i + 5
            } else {
                return None;
            };
            Some((token(i, end), end))
        }
        Value::Time => {
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let (end, ascii) = string_end(b, i + 1)?;
            ascii.then(|| (token(i + 1, end), end + 1))
        }
    }
}

/// [`canonicalize_with`] with a table of `N >= fields` value slots.
#[inline(always)]
fn walk<const N: usize>(
    t: &Table,
    carry: &mut Carry,
    line: &[u8],
    out: &mut Vec<u8>,
) -> Option<Canonical> {
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
    let mut prev = MAX_FIELDS;
    loop {
        // A contract field's name, spelled plainly; anything else (prohibited,
        // unknown, escaped) is the slow path's to judge.
        let (k, key_end) = field_key(t, carry, prev, b, i)?;
        prev = k;
        let bit = 1u64 << k;
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let (slot, value_end) = value(t, &t.fields[k], b, skip_ws(b, i + 1))?;
        slots[k] = slot;
        i = skip_ws(b, value_end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    if skip_ws(b, i + 1) != b.len() || seen & t.required != t.required {
        return None;
    }
    write(t, b, &slots, seen, &mut carry.scratch, out)
}

/// The canonical form, exactly as Event::write_canonical writes it: the strings
/// hold nothing serde_json escapes, so they are copied as they are. It is put
/// together in `scratch`, then appended to `out` in one copy; a time is parsed
/// here, and if it is invalid nothing is appended.
#[inline(always)]
fn write(
    t: &Table,
    b: &[u8],
    slots: &[Slot],
    seen: u64,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Option<Canonical> {
    // The form is at most the line (a time never grows in UTC), the prefixes and
    // `null`s; plus a block of room past the last piece.
    let room = b.len() + t.prefixes.len() + 6 * t.fields.len() + 2 * BLOCK;
    if scratch.len() < room {
        scratch.resize(room, 0);
    }
    let buf = &mut scratch[..];
    buf[0] = b'{';
    let mut at = 1;
    let mut id = 0..0;
    for (k, f) in t.fields.iter().enumerate() {
        let s = slots[k];
        at = if f.prefix_len <= BLOCK {
            buf[at..at + BLOCK].copy_from_slice(&f.prefix_head);
            at + f.prefix_len
        } else {
            put(buf, at, &t.prefixes, f.prefix.clone())
        };
        if seen & (1u64 << k) == 0 || s.start == NULL {
            at = put(buf, at, NULL_PADDED, 0..4);
            continue;
        }
        let token = s.start as usize..s.end as usize;
        if let Value::Time = f.value {
            let time = parse_event_time_bytes(&b[token])?;
            // The whole buffer (a constant-size copy), then the quote after the text.
            let padded = time.padded();
            buf[at] = b'"';
            buf[at + 1..at + 1 + padded.len()].copy_from_slice(padded);
            at += 1 + time.as_bytes().len();
            buf[at] = b'"';
            at += 1;
        } else {
            if k == t.identity {
                // The token is `"…"`: the id is between the quotes.
                id = at + 1..at + token.len() - 1;
            }
            at = put(buf, at, b, token);
        }
    }
    buf[at] = b'}';
    let start = out.len();
    out.extend_from_slice(&buf[..at + 1]);
    Some(Canonical {
        id: start + id.start..start + id.end,
    })
}

/// `null`, padded to a block for [`put`].
const NULL_PADDED: &[u8; BLOCK] = b"null\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::progress;
    use crate::tests::{with, Rng, GOOD};
    use crate::{validate, Verdict};

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

    /// `field_key` on a fresh order, as for a line's first key.
    fn key(b: &[u8]) -> Option<(usize, usize)> {
        field_key(&progress().fast, &mut Carry::default(), MAX_FIELDS, b, 0)
    }

    #[test]
    fn field_key_knows_exactly_the_seven_names() {
        use crate::CONTRACT_FIELDS;
        for (n, name) in CONTRACT_FIELDS.iter().enumerate() {
            let line = format!("\"{name}\":1");
            assert_eq!(key(line.as_bytes()), Some((n, name.len() + 2)), "{name}");
            // Whatever field the order guesses, the key found is the one written.
            for guess in 0..CONTRACT_FIELDS.len() {
                let mut order = Carry::default();
                order.next[MAX_FIELDS] = guess as u8;
                let found = field_key(&progress().fast, &mut order, MAX_FIELDS, line.as_bytes(), 0);
                assert_eq!(found, Some((n, name.len() + 2)), "{name} guessed {guess}");
                assert_eq!(usize::from(order.next[MAX_FIELDS]), n, "learnt");
            }
            // A longer or shorter name, or the name unquoted, is not it.
            assert_eq!(key(format!("\"{name}x\"").as_bytes()), None);
            assert_eq!(
                key(format!("\"{}\"", &name[..name.len() - 1]).as_bytes()),
                None
            );
            assert_eq!(key(name.as_bytes()), None);
        }
        for other in [
            "\"email\"",
            "\"name\"",
            "\"event_idx\"",
            "\"event_\\u0069d\"",
            "\"\"",
            "\"e",
        ] {
            assert_eq!(key(other.as_bytes()), None, "{other}");
        }
    }

    /// One order carried over lines whose keys come in changing orders (as the
    /// checker carries it over a batch) gives the same answers as a fresh one.
    #[test]
    fn a_carried_key_order_changes_no_answer() {
        let mut rng = Rng(5);
        let fields = [
            r#""event_id":"evt-1""#,
            r#""learner_id":"l""#,
            r#""lesson_id":"m""#,
            r#""event_type":"completed""#,
            r#""attempt_number":2"#,
            r#""event_time":"2026-03-02T14:02:11Z""#,
            r#""checkpoint":null"#,
            r#""email":"x""#,
        ];
        let mut order = Carry::default();
        for n in 0..2000 {
            let mut picked: Vec<&str> = fields[..7 + usize::from(n % 10 == 0)].to_vec();
            // Mostly one order, now and then a shuffle, like a mixed inbox.
            if n % 7 == 0 {
                for j in (1..picked.len()).rev() {
                    picked.swap(j, rng.below(j + 1));
                }
            }
            let line = format!("{{{}}}", picked.join(","));
            let (mut carried, mut fresh) = (Vec::new(), Vec::new());
            let a = canonicalize_with(progress(), &mut order, line.as_bytes(), &mut carried);
            let b = canonicalize(progress(), line.as_bytes(), &mut fresh);
            assert_eq!((a, carried), (b, fresh), "{line}");
        }
    }

    /// [`string_end`], and its word-at-a-time tail alone, against a byte loop.
    fn assert_string_end(hay: &[u8], from: usize) {
        let naive = hay[from..]
            .iter()
            .position(|&c| matches!(c, b'"' | b'\\' | 0..=0x1F))
            .filter(|&k| hay[from + k] == b'"')
            .map(|k| (from + k, hay[from..from + k].is_ascii()));
        assert_eq!(string_end(hay, from), naive, "{hay:?} from {from}");
        let words = string_end_words(hay, from, false);
        assert_eq!(words, naive, "{hay:?} from {from}");
    }

    #[test]
    fn string_end_matches_a_byte_loop() {
        let mut rng = Rng(11);
        let pool = [b'a', b'"', b'\\', 0x1F, 0x20, 0x7F, 0x80, 0xC3, 0xA9, b'0'];
        for _ in 0..50_000 {
            let len = rng.below(40);
            let hay: Vec<u8> = (0..len).map(|_| pool[rng.below(pool.len())]).collect();
            let from = rng.below(len + 1);
            assert_string_end(&hay, from);
        }
    }

    /// Strings as producers write them, longer than one 16-byte step: one special
    /// byte (or none) at any place, non-ASCII bytes before or after it.
    #[test]
    fn string_end_matches_a_byte_loop_on_long_strings() {
        let mut rng = Rng(12);
        let special = [b'"', b'\\', 0x00, 0x1F];
        let plain = [b'a', b'0', b' ', 0x7F, b'~'];
        for _ in 0..50_000 {
            let len = 1 + rng.below(80);
            let mut hay: Vec<u8> = (0..len).map(|_| plain[rng.below(plain.len())]).collect();
            if rng.below(8) != 0 {
                hay[rng.below(len)] = special[rng.below(special.len())];
            }
            if rng.below(3) == 0 {
                let at = rng.below(len);
                if hay[at].is_ascii_alphanumeric() {
                    hay[at] = [0x80, 0xC3, 0xFF][rng.below(3)];
                }
            }
            let from = rng.below(len + 1);
            assert_string_end(&hay, from);
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
        let c = crate::Contract::load(include_bytes!("../../../contracts/enrollment.json"))
            .expect("enrollment contract");
        let agree = |line: &[u8]| {
            let mut fast = b"p".to_vec();
            let taken = canonicalize(&c, line, &mut fast);
            let shown = String::from_utf8_lossy(line);
            match (taken, validate(&c, line)) {
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
                accepted +=
                    usize::from(matches!(validate(&c, text.as_bytes()), Verdict::Accept(_)));
            }
        }
        assert!(taken > 200, "fast path took only {taken}");
        assert!(
            taken * 10 >= accepted * 9,
            "took {taken} of {accepted} accepted"
        );
        // The canonical form: sorted keys, null for the absent optional field.
        let mut out = Vec::new();
        canonicalize(&c, seeds[2].as_bytes(), &mut out).expect("taken");
        assert_eq!(
            String::from_utf8(out).expect("UTF-8"),
            r#"{"action":"enrolled","cohort":null,"course_id":"c","enrolled_at":"2026-03-02T10:00:00Z","enrollment_id":"e","learner_id":"l","paid":true,"seats":7}"#
        );
    }

    /// The fast path on `c` either declines (writing nothing) or gives exactly the
    /// slow path's canonical bytes; a fresh `Carry` each time, so its scratch buffer
    /// holds nothing of an earlier line that could hide a short copy.
    fn agrees_on(c: &Contract, line: &str) -> bool {
        let mut fast = Vec::new();
        match (
            canonicalize(c, line.as_bytes(), &mut fast),
            validate(c, line.as_bytes()),
        ) {
            (None, _) => {
                assert!(fast.is_empty(), "declined but wrote, for {line}");
                false
            }
            (Some(k), Verdict::Accept(event)) => {
                let mut slow = Vec::new();
                event.write_canonical(&mut slow);
                assert_eq!(
                    String::from_utf8_lossy(&fast),
                    String::from_utf8_lossy(&slow)
                );
                assert_eq!(&fast[k.id], event.id().as_bytes(), "{line}");
                true
            }
            (Some(_), other) => panic!("fast path accepted {line}, slow path says {other:?}"),
        }
    }

    /// A contract of `n` string fields `f0`, `f1`, …: `f0` required and the identity,
    /// the others optional and nullable.
    fn wide(n: usize) -> std::sync::Arc<Contract> {
        let fields: Vec<String> = (0..n)
            .map(|k| {
                let optional = if k == 0 {
                    ""
                } else {
                    r#","required":false,"nullable":true"#
                };
                format!(r#"{{"name":"f{k}","type":"string"{optional}}}"#)
            })
            .collect();
        let file = format!(
            r#"{{"name":"wide","version":"1","identity":"f0","max_line_bytes":65536,"prohibited":[],"fields":[{}]}}"#,
            fields.join(",")
        );
        Contract::load(file.as_bytes()).expect("a valid contract")
    }

    /// Strings longer than `put`'s block (32 bytes) are copied whole, and so are
    /// those around it, into a fresh buffer.
    #[test]
    fn strings_longer_than_a_block_are_copied_whole() {
        for n in [1usize, 31, 32, 33, 63, 64, 65, 100, 1000] {
            let id: String = (0..n).map(|k| char::from(b'a' + (k % 26) as u8)).collect();
            let line = GOOD.replace("evt_1001", &id);
            assert!(assert_agrees(line.as_bytes()), "{n}-byte id not taken");
            let mut out = Vec::new();
            canonicalize(progress(), line.as_bytes(), &mut out).expect("taken");
            let text = String::from_utf8(out).expect("UTF-8");
            assert!(
                text.contains(&format!(r#""event_id":"{id}","event_time""#)),
                "{text}"
            );
        }
    }

    /// Field names whose prefix (`,"name":`) fits the 32-byte block, fills it, or
    /// runs past it: each is written whole, in either place of the form.
    #[test]
    fn field_names_longer_than_a_block_are_written_whole() {
        for len in [1usize, 26, 27, 28, 29, 30, 31, 32, 60, 200] {
            let names: Vec<String> = ["a", "b", "c"]
                .iter()
                .map(|first| format!("{first}{}", "x".repeat(len - 1)))
                .collect();
            let fields: Vec<String> = names
                .iter()
                .map(|n| format!(r#"{{"name":"{n}","type":"string"}}"#))
                .collect();
            let file = format!(
                r#"{{"name":"long","version":"1","identity":"{}","max_line_bytes":65536,"prohibited":[],"fields":[{}]}}"#,
                names[0],
                fields.join(",")
            );
            let c = Contract::load(file.as_bytes()).expect("a valid contract");
            let line = format!(
                r#"{{"{}":"v2","{}":"v0","{}":"v1"}}"#,
                names[2], names[0], names[1]
            );
            let mut out = Vec::new();
            canonicalize(&c, line.as_bytes(), &mut out).expect("taken");
            let want = format!(
                r#"{{"{}":"v0","{}":"v1","{}":"v2"}}"#,
                names[0], names[1], names[2]
            );
            assert_eq!(String::from_utf8(out).expect("UTF-8"), want, "{len}");
        }
    }

    /// More than 19 digits cannot be an i64: declined (the slow path quarantines
    /// them), never read on into an overflow.
    #[test]
    fn integers_of_twenty_digits_and_more_are_declined() {
        for digits in [19usize, 20, 21, 25, 40] {
            let line = with("attempt_number", Some(&"9".repeat(digits)));
            let mut out = Vec::new();
            assert_eq!(
                canonicalize(progress(), line.as_bytes(), &mut out),
                None,
                "{digits} digits"
            );
            assert!(out.is_empty());
        }
        // 18 digits fit, and the contract's bound decides.
        let line = with("checkpoint", Some(&"9".repeat(18)));
        assert!(assert_agrees(line.as_bytes()), "18 digits not taken");
    }

    /// Contracts of more than 16 fields take the wider per-line table, and every
    /// width gets room for its canonical form: the line's bytes, the prefixes, a
    /// `null` for each absent field and a block past the last piece, from the
    /// smallest line (one field, one byte) to the longest.
    #[test]
    fn every_width_of_contract_gets_room_for_its_form() {
        for n in [1usize, 2, 3, 8, 16, 17, 20, 40, 64] {
            let c = wide(n);
            let all: Vec<String> = (0..n).map(|k| format!(r#""f{k}":"v""#)).collect();
            for line in [
                r#"{"f0":"v"}"#.to_string(),
                format!("{{{}}}", all.join(",")),
                format!(
                    "{{{}}}",
                    all.iter().rev().cloned().collect::<Vec<_>>().join(",")
                ),
            ] {
                assert!(agrees_on(&c, &line), "{n} fields: not taken: {line}");
            }
        }
        // The form of the smallest line of a wide contract, spelled out.
        let mut out = Vec::new();
        canonicalize(&wide(3), br#"{"f0":"v"}"#, &mut out).expect("taken");
        assert_eq!(out, br#"{"f0":"v","f1":null,"f2":null}"#);
    }
}
