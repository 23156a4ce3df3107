//! The fast path for the shape nearly every line has: one flat object of
//! scalars, no escapes. It reads the line in place and records keys through the
//! same [`ObjectBuilder`] as serde_json; it declines (returns `None`, never a
//! wrong answer) anything else. A differential test holds the two equal.

use super::bytes::{find_special, is_json_whitespace};
use super::object::{Key, ObjectBuilder, RawObject};
use super::spec::Contract;

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_json_whitespace(b[i]) {
        i += 1;
    }
    i
}

/// End (after the closing quote) of a string starting at `b[i] == '"'` that has
/// no escape and no control character; `None` for anything else.
fn scan_plain_string(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let end = find_special(b, i + 1);
    (b.get(end) == Some(&b'"')).then_some(end + 1)
}

/// End of a run of at least one ASCII digit starting at `i`.
fn scan_digits(b: &[u8], i: usize) -> Option<usize> {
    let n = b
        .get(i..)?
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    (n > 0).then_some(i + n)
}

/// End of a JSON scalar (plain string, number, `true`, `false`, `null`) at `i`;
/// `None` for containers, escapes or anything malformed.
fn scan_scalar(b: &[u8], i: usize) -> Option<usize> {
    let literal = |word: &[u8]| {
        b.get(i..i + word.len())
            .filter(|w| *w == word)
            .map(|_| i + word.len())
    };
    match *b.get(i)? {
        b'"' => scan_plain_string(b, i),
        b't' => literal(b"true"),
        b'f' => literal(b"false"),
        b'n' => literal(b"null"),
        b'-' | b'0'..=b'9' => {
            // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
            let mut j = i + usize::from(b[i] == b'-');
            j = match b.get(j)? {
                b'0' => j + 1,
                b'1'..=b'9' => scan_digits(b, j)?,
                _ => return None,
            };
            if b.get(j) == Some(&b'.') {
                j = scan_digits(b, j + 1)?;
            }
            if matches!(b.get(j), Some(b'e' | b'E')) {
                j += 1;
                if matches!(b.get(j), Some(b'+' | b'-')) {
                    j += 1;
                }
                j = scan_digits(b, j)?;
            }
            Some(j)
        }
        _ => None,
    }
}

/// Fast path for the shape nearly every line has: one flat object of scalars,
/// no escapes. Returns `None` (never a wrong answer) for anything else, which
/// then goes through serde_json. A differential test holds the two equal.
pub(super) fn scan_flat_object<'a>(c: &Contract, text: &'a str) -> Option<RawObject<'a>> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let mut builder = ObjectBuilder::new(c);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            let key_end = scan_plain_string(b, i)?;
            let key = &b[i + 1..key_end - 1];
            i = skip_ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
            let value_end = scan_scalar(b, i)?;
            if let Some(field) = builder.key(Key::borrowed(c, key)) {
                // Both ends sit next to ASCII bytes, so they are char boundaries;
                // `get` keeps it panic-free regardless.
                builder.obj.fields[field] = Some(text.get(i..value_end)?);
            }
            i = skip_ws(b, value_end);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    builder.obj.plain_strings = true;
    (skip_ws(b, i) == b.len()).then(|| builder.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{parse_object_serde, verdict_for};
    use crate::tests::progress;
    use crate::tests::{with, Rng, GOOD};
    use crate::{validate, Verdict};

    /// The fast scanner must never disagree with serde_json: it either gives
    /// the same object (and so the same verdict) or declines.
    fn assert_scanners_agree(text: &str) -> bool {
        let slow = parse_object_serde(progress(), text);
        match scan_flat_object(progress(), text) {
            Some(mut fast) => {
                fast.plain_strings = false;
                assert_eq!(Ok(&fast), slow.as_ref(), "object for {text:?}");
                fast.plain_strings = true;
                assert_eq!(
                    verdict_for(progress(), Ok(fast)),
                    verdict_for(progress(), parse_object_serde(progress(), text)),
                    "verdict for {text:?}"
                );
                true
            }
            None => false,
        }
    }

    #[test]
    fn fast_scanner_takes_common_lines_and_declines_the_rest() {
        assert!(scan_flat_object(progress(), GOOD).is_some());
        assert!(scan_flat_object(progress(), &with("checkpoint", Some(" -12 "))).is_some());
        assert!(scan_flat_object(progress(), " { } ").is_some());
        for declined in [
            r#"{"event_id":"a\"b"}"#,
            r#"{"e\u006dail":1}"#,
            r#"{"x":[1]}"#,
            r#"{"x":{}}"#,
            "[1]",
            "{",
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":tru}"#,
            "{\"a\":\"\u{1}\"}",
        ] {
            assert!(
                scan_flat_object(progress(), declined).is_none(),
                "{declined}"
            );
            assert_scanners_agree(declined);
        }
    }

    /// Numbers that start with `0` (`checkpoint: 0` is common) are scanned in
    /// place like any other, their text whole, not left to serde_json.
    #[test]
    fn numbers_starting_with_zero_are_scanned_in_place() {
        for v in ["0", "-0", "0.5", "-0.25", "0e3", "0E-2", "0.0e+1"] {
            let line = with("checkpoint", Some(v));
            assert!(assert_scanners_agree(&line), "{v} not scanned in place");
            let raw = scan_flat_object(progress(), &line).expect("scanned");
            assert!(raw.fields.contains(&Some(v)), "{v}: {:?}", raw.fields);
        }
    }

    #[test]
    fn fast_scanner_agrees_with_serde_json_on_mutated_lines() {
        let seeds = [
            GOOD.to_string(),
            with("checkpoint", Some("-9223372036854775808")),
            with("attempt_number", Some("1.5e+3")),
            with("colour", Some("true")),
            with("email", Some("false")),
            GOOD.replace('}', r#","event_id":"x"}"#),
            r#"{ "event_time" : "2026-03-02 14:02:11.5-01:00" ,"event_id":"é😀","learner_id":"l","lesson_id":"m","event_type":"checkpoint","attempt_number":2,"checkpoint":null }"#.to_string(),
            "{}".to_string(),
        ];
        let alphabet: Vec<char> = "{}[]\",:\\ \t0123456789-+.eEtrufalsnZ_xé\u{1}"
            .chars()
            .collect();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut fast_hits, mut accepted) = (0, 0);
        for seed in &seeds {
            assert!(assert_scanners_agree(seed), "seed not on fast path: {seed}");
            for _ in 0..3000 {
                let text = rng.mutate(seed, &alphabet);
                if assert_scanners_agree(&text) {
                    fast_hits += 1;
                    if matches!(validate(progress(), text.as_bytes()), Verdict::Accept(_)) {
                        accepted += 1;
                    }
                }
            }
        }
        // The comparison must actually exercise the fast path, both ways.
        assert!(fast_hits > 2000, "fast path taken only {fast_hits} times");
        assert!(accepted > 100, "only {accepted} mutated lines accepted");
    }

    #[test]
    fn find_special_matches_naive_search() {
        let mut rng = Rng(7);
        let pool = [b'a', b'"', b'\\', 0x1F, 0x20, 0x7F, 0x80, 0xFF, b'0', 0x00];
        for _ in 0..20_000 {
            let len = rng.below(40);
            let hay: Vec<u8> = (0..len).map(|_| pool[rng.below(pool.len())]).collect();
            let from = rng.below(len + 1);
            let naive = hay[from..]
                .iter()
                .position(|&b| matches!(b, b'"' | b'\\' | 0..=0x1F))
                .map_or(len, |i| from + i);
            assert_eq!(find_special(&hay, from), naive, "{hay:?} from {from}");
        }
    }
}
