//! A contract compiled for the single pass ([`Table`]): flat arrays of key and enum
//! matchers as whole words, value kinds and the canonical prefixes in one buffer,
//! so checking a line needs no code per product.

use std::ops::Range;

use super::bytes::word_at;
use super::field::{FieldSpec, Kind};

/// A quoted word (`text"`, closing quote included) as whole words, so the single
/// pass recognises a key or an enum value with one or two word comparisons and no
/// search for its end.
#[derive(Debug, Clone, Copy)]
pub(super) struct Probe {
    /// Length of `text"`.
    pub(super) len: u8,
    /// Its first 8 bytes (little-endian; fewer, zero-padded, for short words)...
    pub(super) head: u64,
    pub(super) head_mask: u64,
    /// ... and its last 8 bytes (words of 8 bytes or more with the quote).
    pub(super) tail: u64,
}

impl Probe {
    fn new(text: &str) -> Probe {
        let word = |s: &[u8]| {
            let mut w = [0u8; 8];
            w[..s.len()].copy_from_slice(s);
            u64::from_le_bytes(w)
        };
        let q = format!("{text}\"").into_bytes();
        let n = q.len();
        Probe {
            // Field names and enum values are under 250 bytes (checked by compile).
            len: n.min(255) as u8,
            head: word(&q[..n.min(8)]),
            head_mask: if n >= 8 {
                u64::MAX
            } else {
                (1u64 << (8 * n)) - 1
            },
            tail: word(&q[n.saturating_sub(8)..]),
        }
    }

    /// Whether `b[k..]` starts with the word and its closing quote.
    #[inline(always)]
    pub(super) fn at(&self, b: &[u8], k: usize) -> bool {
        let n = usize::from(self.len);
        match word_at(b, k) {
            Some(w) if n >= 8 => w == self.head && word_at(b, k + n - 8) == Some(self.tail),
            Some(w) => w & self.head_mask == self.head,
            // Fewer than 8 bytes left: compare them one by one.
            None => b.get(k..k + n).is_some_and(|text| {
                text.iter()
                    .enumerate()
                    .all(|(j, &x)| u64::from(x) == (self.head >> (8 * j)) & 0xFF)
            }),
        }
    }
}

/// What the single pass checks of a value.
#[derive(Debug, Clone, Copy)]
pub(super) enum Value {
    String,
    /// The values' probes: `Table::enums[from..to]`.
    Enum(u16, u16),
    Integer {
        min: i64,
        max: i64,
    },
    Boolean,
    Time,
}

/// Bytes copied at once by [`put`].
pub(super) const BLOCK: usize = 32;

/// Copies `from[range]` to `buf[at..]` and returns the index after it. A short
/// range goes as one copy of a constant `BLOCK` bytes (what follows it lands
/// past the end and is overwritten or ignored), two vector moves where a
/// `memcpy` call of a few bytes costs more: a canonical form is some fifteen
/// short pieces. `buf` has a block of room past every piece (see [`write`]).
#[inline(always)]
pub(super) fn put(buf: &mut [u8], at: usize, from: &[u8], range: Range<usize>) -> usize {
    let n = range.len();
    let block = from
        .get(range.start..)
        .and_then(|rest| rest.first_chunk::<BLOCK>());
    match block {
        Some(block) if n <= BLOCK => buf[at..at + BLOCK].copy_from_slice(block),
        _ => buf[at..at + n].copy_from_slice(&from[range]),
    }
    at + n
}

/// One field as the single pass sees it.
#[derive(Debug)]
pub(super) struct Field {
    pub(super) key: Probe,
    pub(super) value: Value,
    pub(super) nullable: bool,
    /// `"name":` (with a leading `,` but for the first field) in `Table::prefixes`.
    pub(super) prefix: Range<usize>,
    /// Its length, and its first `BLOCK` bytes zero-padded: one copy of a constant
    /// size writes a short prefix without the checks of [`put`].
    pub(super) prefix_len: usize,
    pub(super) prefix_head: [u8; BLOCK],
}

/// A contract compiled for the single pass; fields in canonical order.
#[derive(Debug)]
pub(super) struct Table {
    pub(super) fields: Vec<Field>,
    pub(super) required: u64,
    pub(super) identity: usize,
    /// Field indices grouped by their name's first byte:
    /// `by_first[first[b]..first[b + 1]]` start with byte `b`.
    pub(super) by_first: Vec<u8>,
    pub(super) first: Box<[u16]>,
    pub(super) enums: Vec<Probe>,
    /// The fields' prefixes one after the other, and a block of padding.
    pub(super) prefixes: Vec<u8>,
}

impl Table {
    /// `fields` in canonical order, at most [`MAX_FIELDS`]; names and enum values
    /// already checked (non-empty, under 250 bytes, nothing JSON escapes).
    pub(super) fn new(fields: &[FieldSpec], identity: usize) -> Table {
        let mut enums = Vec::new();
        let mut value = |f: &FieldSpec| match &f.kind {
            Kind::String => Value::String,
            Kind::Enum(vs) => {
                // At most 64 fields of few values each: u16 is plenty.
                let from = enums.len() as u16;
                enums.extend(vs.iter().map(|v| Probe::new(v)));
                Value::Enum(from, enums.len() as u16)
            }
            Kind::Integer { min, max } => Value::Integer {
                min: *min,
                max: *max,
            },
            Kind::Boolean => Value::Boolean,
            Kind::Time => Value::Time,
        };
        let mut prefixes = Vec::new();
        let table: Vec<Field> = fields
            .iter()
            .map(|f| {
                let at = prefixes.len();
                prefixes.extend_from_slice(&f.prefix);
                let mut prefix_head = [0u8; BLOCK];
                let n = f.prefix.len().min(BLOCK);
                prefix_head[..n].copy_from_slice(&f.prefix[..n]);
                Field {
                    key: Probe::new(&f.name),
                    value: value(f),
                    nullable: f.nullable,
                    prefix: at..prefixes.len(),
                    prefix_len: f.prefix.len(),
                    prefix_head,
                }
            })
            .collect();
        prefixes.resize(prefixes.len() + BLOCK, 0);
        let mut by_first: Vec<u8> = (0..fields.len() as u8).collect();
        by_first.sort_by_key(|&k| (fields[usize::from(k)].name.as_bytes()[0], k));
        let mut first = vec![0u16; 257];
        for b in 0..256 {
            let n = fields
                .iter()
                .filter(|f| usize::from(f.name.as_bytes()[0]) == b);
            first[b + 1] = first[b] + n.count() as u16;
        }
        Table {
            fields: table,
            required: fields
                .iter()
                .enumerate()
                .filter(|(_, f)| f.required)
                .fold(0u64, |m, (k, _)| m | 1 << k),
            identity,
            by_first,
            first: first.into_boxed_slice(),
            enums,
            prefixes,
        }
    }

    /// The field whose `name"` starts at `b[k]`, trying those sharing its first byte.
    pub(super) fn lookup(&self, b: &[u8], k: usize) -> Option<usize> {
        let first = usize::from(*b.get(k)?);
        let (from, to) = (self.first[first], self.first[first + 1]);
        self.by_first[usize::from(from)..usize::from(to)]
            .iter()
            .map(|&f| usize::from(f))
            .find(|&f| self.fields[f].key.at(b, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Probe::at` against a byte-by-byte test, for words shorter and longer than a
    /// word of 8 bytes, at every position of lines that end right after the word,
    /// where fewer than 8 bytes are left.
    #[test]
    fn a_probe_matches_exactly_the_word_and_its_quote() {
        let words = [
            "a",
            "ab",
            "f0",
            "seats",
            "abcdefg",
            "abcdefgh",
            "event_id",
            "enrolled_at",
        ];
        for w in words {
            let probe = Probe::new(w);
            let quoted = format!("{w}\"");
            for hay in [
                format!("\"{w}\""),
                format!("{{\"{w}\":1}}"),
                format!("x\"{w}x\""),
                format!("\"{w}"),
                format!("\"{}\"", &w[..w.len() - 1]),
                format!("\"a{w}\""),
                format!("\"{}\"", w.to_uppercase()),
                "\"event_ie\"".to_string(),
            ] {
                let b = hay.as_bytes();
                for k in 0..=b.len() {
                    let want = b[k..].starts_with(quoted.as_bytes());
                    assert_eq!(probe.at(b, k), want, "{w:?} in {hay:?} at {k}");
                }
            }
        }
    }
}
