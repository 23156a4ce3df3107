//! The progress-event contract (DESIGN.md section 2): a line framer, a per-line
//! validator, and the writer of an accepted event's canonical (= published) form.
//!
//! Pure code: no I/O, no logging, no global state. Nothing here ever prints, logs
//! or embeds line content or a field value: a verdict carries a reason *code*, or
//! the *name* of a prohibited field, never data.
//!
//! Hot path (tens of millions of lines a day): lines inside a chunk are handed out
//! as slices of that chunk; a flat object without escapes (nearly every line) is
//! read by a small borrowed scanner, anything else by serde_json (`&RawValue`,
//! `Cow`), and a differential test holds the two equal. An accepted event only
//! allocates when an identifier contains a JSON escape.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Top-level keys that refuse the whole file (privacy breach).
pub const PROHIBITED_FIELDS: [&str; 3] = ["email", "name", "payment_token"];

/// The seven contract fields, in canonical (sorted) key order.
pub const CONTRACT_FIELDS: [&str; 7] = [
    "attempt_number",
    "checkpoint",
    "event_id",
    "event_time",
    "event_type",
    "learner_id",
    "lesson_id",
];

/// Why a line was quarantined. `code()` returns a stable snake_case reason code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    LineTooLong,
    InvalidUtf8,
    InvalidJson,
    NotAnObject,
    DuplicateKey,
    UnknownField,
    MissingEventId,
    MissingLearnerId,
    MissingLessonId,
    MissingEventType,
    MissingAttemptNumber,
    MissingEventTime,
    InvalidEventId,
    InvalidLearnerId,
    InvalidLessonId,
    InvalidEventType,
    InvalidAttemptNumber,
    InvalidEventTime,
    InvalidCheckpoint,
}

impl Reason {
    /// Every reason, in the order the rules are checked.
    pub const ALL: &'static [Reason] = &[
        Reason::LineTooLong,
        Reason::InvalidUtf8,
        Reason::InvalidJson,
        Reason::NotAnObject,
        Reason::DuplicateKey,
        Reason::UnknownField,
        Reason::MissingEventId,
        Reason::MissingLearnerId,
        Reason::MissingLessonId,
        Reason::MissingEventType,
        Reason::MissingAttemptNumber,
        Reason::MissingEventTime,
        Reason::InvalidEventId,
        Reason::InvalidLearnerId,
        Reason::InvalidLessonId,
        Reason::InvalidEventType,
        Reason::InvalidAttemptNumber,
        Reason::InvalidEventTime,
        Reason::InvalidCheckpoint,
    ];

    /// Stable snake_case code, as written to the quarantine file.
    pub fn code(self) -> &'static str {
        match self {
            Reason::LineTooLong => "line_too_long",
            Reason::InvalidUtf8 => "invalid_utf8",
            Reason::InvalidJson => "invalid_json",
            Reason::NotAnObject => "not_an_object",
            Reason::DuplicateKey => "duplicate_key",
            Reason::UnknownField => "unknown_field",
            Reason::MissingEventId => "missing_event_id",
            Reason::MissingLearnerId => "missing_learner_id",
            Reason::MissingLessonId => "missing_lesson_id",
            Reason::MissingEventType => "missing_event_type",
            Reason::MissingAttemptNumber => "missing_attempt_number",
            Reason::MissingEventTime => "missing_event_time",
            Reason::InvalidEventId => "invalid_event_id",
            Reason::InvalidLearnerId => "invalid_learner_id",
            Reason::InvalidLessonId => "invalid_lesson_id",
            Reason::InvalidEventType => "invalid_event_type",
            Reason::InvalidAttemptNumber => "invalid_attempt_number",
            Reason::InvalidEventTime => "invalid_event_time",
            Reason::InvalidCheckpoint => "invalid_checkpoint",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The two event types the contract allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Checkpoint,
    Completed,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Checkpoint => "checkpoint",
            EventType::Completed => "completed",
        }
    }
}

/// An accepted, normalized event. Identifiers borrow from the line unless they
/// contained a JSON escape. `Debug` is redacted: an event must not reach a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Event<'a> {
    pub event_id: Cow<'a, str>,
    pub learner_id: Cow<'a, str>,
    pub lesson_id: Cow<'a, str>,
    pub event_type: EventType,
    pub attempt_number: i32,
    pub event_time: UtcTime,
    pub checkpoint: Option<i64>,
}

impl fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event").finish_non_exhaustive()
    }
}

/// Longest normalized time: `YYYY-MM-DDTHH:MM:SS.fffffffffZ`.
const UTC_TIME_CAPACITY: usize = 30;

/// Normalized UTC time text, e.g. "2026-03-02T08:32:11.5Z": fixed-capacity inline
/// buffer (no heap). Only [`parse_event_time`] builds one, so it is always valid.
#[derive(Clone, Copy)]
pub struct UtcTime {
    buf: [u8; UTC_TIME_CAPACITY],
    len: u8,
}

impl UtcTime {
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and `-T:.Z` are ever written into `buf`, so this
        // cannot fail; `from_utf8` on <= 30 bytes costs nothing worth `unsafe`.
        std::str::from_utf8(&self.buf[..usize::from(self.len)]).expect("UtcTime is ASCII")
    }
}

impl fmt::Display for UtcTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for UtcTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for UtcTime {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for UtcTime {}

impl std::hash::Hash for UtcTime {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

/// The outcome for one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'a> {
    Accept(Event<'a>),
    Quarantine(Reason),
    /// A prohibited top-level key was present on a line that parses as a JSON
    /// object. Refuses the whole file.
    Prohibited(&'static str), // the field NAME from PROHIBITED_FIELDS (never its value)
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

/// Contract fields, indexed in canonical key order (same order as CONTRACT_FIELDS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
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
enum KnownKey {
    Field(Field),
    /// Index into PROHIBITED_FIELDS.
    Prohibited(u8),
}

/// A top-level key, compared after JSON unescaping.
enum Key<'de> {
    Known(KnownKey),
    /// Kept only to detect a repeated unknown key (quarantine path, so a copy is fine).
    Unknown(Cow<'de, [u8]>),
}

impl<'de> Key<'de> {
    fn borrowed(key: &'de [u8]) -> Self {
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
struct RawObject<'a> {
    fields: [Option<&'a str>; 7],
    prohibited: Option<&'static str>,
    duplicate: bool,
    unknown: bool,
    /// Every string on the line is free of escapes and control characters (set
    /// by the fast scanner), so string values need no further scan.
    plain_strings: bool,
}

/// Records keys in line order. Shared by both parsers so their key semantics
/// cannot drift apart.
#[derive(Default)]
struct ObjectBuilder<'a> {
    obj: RawObject<'a>,
    /// Quarantine path only: kept to tell a repeated unknown key from a new one.
    unknown_keys: Vec<Cow<'a, [u8]>>,
}

impl<'a> ObjectBuilder<'a> {
    /// Records one key; returns the slot whose raw value must be kept, if any.
    fn key(&mut self, key: Key<'a>) -> Option<Field> {
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

    fn finish(mut self) -> RawObject<'a> {
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

fn is_json_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_json_whitespace(b[i]) {
        i += 1;
    }
    i
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Reads 8 bytes at `i` as a little-endian word (byte `i` is the lowest).
fn word_at(b: &[u8], i: usize) -> Option<u64> {
    let bytes: [u8; 8] = b.get(i..i + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// High bit set in each byte of `w` equal to `byte`. Bytes above a true match
/// may be falsely flagged (borrow), so only the lowest flag is meaningful.
fn bytes_equal(w: u64, byte: u8) -> u64 {
    let x = w ^ (LO * u64::from(byte));
    x.wrapping_sub(LO) & !x & HI
}

/// Index of the first byte at or after `from` that JSON strings treat specially
/// (`"`, `\\`, or < 0x20), or `b.len()`. Word at a time: string bytes are most
/// of every line.
fn find_special(b: &[u8], from: usize) -> usize {
    let mut j = from;
    while let Some(w) = word_at(b, j) {
        // Lowest flag is a true one (see bytes_equal; same borrow argument for `< 0x20`).
        let special =
            bytes_equal(w, b'"') | bytes_equal(w, b'\\') | (w.wrapping_sub(LO * 0x20) & !w & HI);
        if special != 0 {
            return j + (special.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while j < b.len() && !matches!(b[j], b'"' | b'\\' | 0..=0x1F) {
        j += 1;
    }
    j
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
fn scan_flat_object(text: &str) -> Option<RawObject<'_>> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let mut builder = ObjectBuilder::default();
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
            if let Some(field) = builder.key(Key::borrowed(key)) {
                // Both ends sit next to ASCII bytes, so they are char boundaries;
                // `get` keeps it panic-free regardless.
                builder.obj.fields[field as usize] = Some(text.get(i..value_end)?);
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

/// The exact parser: serde_json over the whole line.
fn parse_object_serde(text: &str) -> Result<RawObject<'_>, Reason> {
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

/// Parses the whole line; any JSON error anywhere means `invalid_json`, even if a
/// prohibited key was already seen (the rule applies to lines that parse).
fn parse_object(text: &str) -> Result<RawObject<'_>, Reason> {
    match scan_flat_object(text) {
        Some(obj) => Ok(obj),
        None => parse_object_serde(text),
    }
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

/// Validates one physical line (without `\n` and trailing `\r`; never blank).
///
/// Order: UTF-8, JSON syntax, object, prohibited key, duplicate key, unknown key,
/// missing fields, then field types/values in contract-table order.
pub fn validate(line: &[u8]) -> Verdict<'_> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Verdict::Quarantine(Reason::InvalidUtf8);
    };
    verdict_for(parse_object(text))
}

/// Rules 3-6 on a parsed line.
fn verdict_for(parsed: Result<RawObject<'_>, Reason>) -> Verdict<'_> {
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

// ---------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------

/// Value of two ASCII digits; `None` if either is not a digit.
fn two_digits(hi: u8, lo: u8) -> Option<u32> {
    let (h, l) = (hi.wrapping_sub(b'0'), lo.wrapping_sub(b'0'));
    (h < 10 && l < 10).then(|| u32::from(h) * 10 + u32::from(l))
}

fn is_leap(year: i32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(year) => 29,
        _ => 28,
    }
}

/// Parses an RFC 3339 timestamp with a mandatory offset (see DESIGN.md section 2)
/// and returns the same instant in UTC, fraction trailing zeros trimmed.
///
/// Hand-rolled rather than `time`'s RFC 3339 parser so the accepted grammar is
/// exactly the contract's (`t`/space separator, `-00:00`, 1..=9 digits) and so
/// an out-of-range result is a `None`, never a panic. The offset is < 24 h, so
/// the date moves at most one day.
pub fn parse_event_time(s: &str) -> Option<UtcTime> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let d2 = |i: usize| two_digits(b[i], b[i + 1]);
    // Four digits, so 0..=9999 and the cast is lossless.
    let year = (d2(0)? * 100 + d2(2)?) as i32;
    let month = d2(5)?;
    let day = d2(8)?;
    let hour = d2(11)?;
    let minute = d2(14)?;
    let second = d2(17)?;

    let mut rest = &b[19..];
    let mut fraction: &[u8] = &[];
    if let Some((b'.', after)) = rest.split_first() {
        let n = after.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return None;
        }
        fraction = &after[..n];
        rest = &after[n..];
    }
    let offset_minutes: i32 = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let oh = two_digits(*h1, *h2)?;
            let om = two_digits(*m1, *m2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            // At most 23*60+59, lossless.
            let m = (oh * 60 + om) as i32;
            if *sign == b'-' {
                -m
            } else {
                m
            }
        }
        _ => return None,
    };
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }

    // local = UTC + offset, so UTC = local - offset. Values are tiny: lossless.
    let mut minutes = (hour * 60 + minute) as i32 - offset_minutes;
    let (mut y, mut mo, mut d) = (year, month, day);
    if minutes < 0 {
        minutes += 24 * 60;
        if d > 1 {
            d -= 1;
        } else if mo > 1 {
            mo -= 1;
            d = days_in_month(y, mo);
        } else {
            y -= 1;
            mo = 12;
            d = 31;
        }
    } else if minutes >= 24 * 60 {
        minutes -= 24 * 60;
        if d < days_in_month(y, mo) {
            d += 1;
        } else if mo < 12 {
            mo += 1;
            d = 1;
        } else {
            y += 1;
            mo = 1;
            d = 1;
        }
    }
    if !(0..=9999).contains(&y) {
        return None;
    }
    let fraction = match fraction.iter().rposition(|&c| c != b'0') {
        Some(last) => &fraction[..=last],
        None => &[][..],
    };

    // All values are in range for their width (checked above): casts are lossless.
    let ascii = |v: u32| b'0' + (v % 10) as u8;
    let (y, hh, mi) = (y as u32, minutes as u32 / 60, minutes as u32 % 60);
    let mut buf = [0u8; UTC_TIME_CAPACITY];
    buf[..19].copy_from_slice(&[
        ascii(y / 1000),
        ascii(y / 100),
        ascii(y / 10),
        ascii(y),
        b'-',
        ascii(mo / 10),
        ascii(mo),
        b'-',
        ascii(d / 10),
        ascii(d),
        b'T',
        ascii(hh / 10),
        ascii(hh),
        b':',
        ascii(mi / 10),
        ascii(mi),
        b':',
        ascii(second / 10),
        ascii(second),
    ]);
    let mut len = 19;
    if !fraction.is_empty() {
        buf[19] = b'.';
        buf[20..20 + fraction.len()].copy_from_slice(fraction);
        len = 20 + fraction.len();
    }
    buf[len] = b'Z';
    // At most 19 + 1 + 9 + 1 = 30 bytes: fits the buffer and a u8.
    Some(UtcTime {
        buf,
        len: (len + 1) as u8,
    })
}

// ---------------------------------------------------------------------------
// Canonical form
// ---------------------------------------------------------------------------

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

/// Appends the decimal form of `n` without going through `fmt`.
fn write_i64(out: &mut Vec<u8>, n: i64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[at..]);
}

impl Event<'_> {
    /// Append the canonical form: compact JSON, keys sorted
    /// (attempt_number, checkpoint, event_id, event_time, event_type, learner_id, lesson_id),
    /// `"checkpoint":null` when absent, strings escaped as serde_json escapes them, NO trailing newline.
    /// This is both the identity form and the published line.
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"attempt_number\":");
        write_i64(out, i64::from(self.attempt_number));
        out.extend_from_slice(b",\"checkpoint\":");
        match self.checkpoint {
            Some(n) => write_i64(out, n),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"event_id\":");
        write_json_str(out, &self.event_id);
        // Normalized time and event type are plain ASCII: no escaping needed.
        out.extend_from_slice(b",\"event_time\":\"");
        out.extend_from_slice(self.event_time.as_str().as_bytes());
        out.extend_from_slice(b"\",\"event_type\":\"");
        out.extend_from_slice(self.event_type.as_str().as_bytes());
        out.extend_from_slice(b"\",\"learner_id\":");
        write_json_str(out, &self.learner_id);
        out.extend_from_slice(b",\"lesson_id\":");
        write_json_str(out, &self.lesson_id);
        out.push(b'}');
    }
}

// ---------------------------------------------------------------------------
// Line framing
// ---------------------------------------------------------------------------

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// One physical line handed out by [`LineFramer`]. Numbers are 1-based and count
/// every physical line, blank ones included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// A non-blank line, without `\n` and without one trailing `\r`.
    Content { number: u64, bytes: &'a [u8] },
    /// Longer than the maximum; its bytes were discarded.
    TooLong { number: u64 },
}

impl<'a> Line<'a> {
    pub fn number(&self) -> u64 {
        match *self {
            Line::Content { number, .. } | Line::TooLong { number } => number,
        }
    }

    /// The verdict for this line: `validate` for content, `line_too_long` otherwise.
    pub fn verdict(&self) -> Verdict<'a> {
        match *self {
            Line::Content { bytes, .. } => validate(bytes),
            Line::TooLong { .. } => Verdict::Quarantine(Reason::LineTooLong),
        }
    }
}

/// Splits a stream into physical lines. Fed arbitrary chunks (a line may span
/// many chunks). Holds at most `max_line_bytes + 1` bytes of a partial line.
pub struct LineFramer {
    max_line_bytes: usize,
    /// Start of a line that spans chunks (<= max_line_bytes + 1 bytes, the +1
    /// being a possible `\r` before a `\n` in the next chunk).
    carry: Vec<u8>,
    /// The current partial line already exceeded the maximum: drop until `\n`.
    discarding: bool,
    /// Physical lines completed so far.
    lines: u64,
    /// `Some(k)`: still at stream start, `k` bytes of a BOM matched so far.
    bom_matched: Option<u8>,
}

impl LineFramer {
    pub fn new(max_line_bytes: usize) -> Self {
        LineFramer {
            max_line_bytes,
            carry: Vec::new(),
            discarding: false,
            lines: 0,
            bom_matched: Some(0),
        }
    }

    /// Calls `sink` for each complete non-blank line in order. Returns early with
    /// the sink's Err (the rest of that chunk is then dropped: stop feeding).
    pub fn push<E>(
        &mut self,
        chunk: &[u8],
        mut sink: impl FnMut(Line<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut rest = self.skip_bom(chunk);
        while let Some(i) = find_newline(rest) {
            let piece = &rest[..i];
            rest = &rest[i + 1..];
            self.lines += 1;
            if self.carry.is_empty() && !self.discarding {
                // Whole line inside this chunk: hand out a slice, no copy.
                emit(self.max_line_bytes, self.lines, piece, false, &mut sink)?;
            } else {
                self.append(piece);
                let result = emit(
                    self.max_line_bytes,
                    self.lines,
                    &self.carry,
                    self.discarding,
                    &mut sink,
                );
                self.carry.clear();
                self.discarding = false;
                result?;
            }
        }
        self.append(rest);
        Ok(())
    }

    /// End of input: the last line without a trailing newline is still a line.
    pub fn finish<E>(&mut self, mut sink: impl FnMut(Line<'_>) -> Result<(), E>) -> Result<(), E> {
        // A stream that is only a BOM prefix: those bytes are content.
        if let Some(k) = self.bom_matched.take() {
            self.append(&BOM[..usize::from(k)]);
        }
        if self.carry.is_empty() && !self.discarding {
            return Ok(());
        }
        self.lines += 1;
        let result = emit(
            self.max_line_bytes,
            self.lines,
            &self.carry,
            self.discarding,
            &mut sink,
        );
        self.carry.clear();
        self.discarding = false;
        result
    }

    /// Physical lines completed so far (blank and too-long lines included).
    pub fn lines_seen(&self) -> u64 {
        self.lines
    }

    /// Capacity of the carry buffer: proof that a long line is not held whole.
    pub fn buffered_capacity(&self) -> usize {
        self.carry.capacity()
    }

    /// Drops a BOM at the very start of the stream, even split across chunks.
    fn skip_bom<'c>(&mut self, chunk: &'c [u8]) -> &'c [u8] {
        let Some(mut k) = self.bom_matched else {
            return chunk;
        };
        let mut i = 0;
        while usize::from(k) < BOM.len() && i < chunk.len() && chunk[i] == BOM[usize::from(k)] {
            k += 1;
            i += 1;
        }
        if usize::from(k) == BOM.len() {
            self.bom_matched = None;
            return &chunk[i..];
        }
        if i == chunk.len() {
            // Still a BOM prefix: decide with the next chunk.
            self.bom_matched = Some(k);
            return &[];
        }
        // Not a BOM: the bytes matched so far belong to the first line.
        self.bom_matched = None;
        self.append(&BOM[..usize::from(k)]);
        &chunk[i..]
    }

    /// Adds part of a spanning line to the carry, or starts discarding once the
    /// line cannot fit. Capacity grows by doubling but never past the limit.
    fn append(&mut self, piece: &[u8]) {
        if self.discarding || piece.is_empty() {
            return;
        }
        let limit = self.max_line_bytes.saturating_add(1);
        let needed = self.carry.len() + piece.len();
        if needed > limit {
            self.discarding = true;
            self.carry.clear();
            return;
        }
        if needed > self.carry.capacity() {
            let target = needed.max(self.carry.capacity() * 2).min(limit);
            self.carry.reserve_exact(target - self.carry.len());
        }
        self.carry.extend_from_slice(piece);
    }
}

/// Applies the per-line framing rules: drop one `\r`, too long, blank.
fn emit<E>(
    max_line_bytes: usize,
    number: u64,
    bytes: &[u8],
    discarded: bool,
    sink: &mut impl FnMut(Line<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    // Length wins over blankness: a line we did not keep cannot be inspected.
    if discarded || bytes.len() > max_line_bytes {
        return sink(Line::TooLong { number });
    }
    if bytes.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
        return Ok(());
    }
    sink(Line::Content { number, bytes })
}

/// Position of the first `\n`, scanning a word at a time (the crate has no
/// direct `memchr` dependency).
fn find_newline(hay: &[u8]) -> Option<usize> {
    let mut words = hay.chunks_exact(8);
    let mut offset = 0;
    for word in &mut words {
        // chunks_exact(8) yields exactly 8 bytes, so the conversion cannot fail.
        let w = u64::from_le_bytes(word.try_into().expect("8-byte chunk"));
        let nl = bytes_equal(w, b'\n');
        if nl != 0 {
            return Some(offset + (nl.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| offset + i)
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const GOOD: &str = r#"{"event_id":"evt_1001","learner_id":"lrn_1042","lesson_id":"les_07","event_type":"completed","attempt_number":1,"event_time":"2026-03-02T14:02:11+00:00"}"#;

    fn accept(line: &str) -> Event<'_> {
        match validate(line.as_bytes()) {
            Verdict::Accept(e) => e,
            other => panic!("expected accept for {line}, got {other:?}"),
        }
    }

    fn reason(line: &str) -> Reason {
        match validate(line.as_bytes()) {
            Verdict::Quarantine(r) => r,
            other => panic!("expected quarantine for {line}, got {other:?}"),
        }
    }

    fn canonical(line: &str) -> String {
        let mut out = Vec::new();
        accept(line).write_canonical(&mut out);
        String::from_utf8(out).expect("canonical output is UTF-8")
    }

    /// GOOD with one field replaced by raw JSON text (or removed with `None`).
    fn with(field: &str, value: Option<&str>) -> String {
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
        let codes: Vec<&str> = Reason::ALL.iter().map(|r| r.code()).collect();
        assert_eq!(codes, expected);
        assert_eq!(Reason::ALL.iter().collect::<HashSet<_>>().len(), 19);
        assert_eq!(Reason::InvalidJson.to_string(), "invalid_json");
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
            if let Verdict::Quarantine(r) = validate(line) {
                seen.insert(r);
            }
        }
        // line_too_long comes from the framer.
        let mut framer = LineFramer::new(4);
        framer
            .push(b"0123456789\n", |line| {
                if let Verdict::Quarantine(r) = line.verdict() {
                    seen.insert(r);
                }
                Ok::<(), ()>(())
            })
            .expect("sink never fails");
        for r in Reason::ALL {
            assert!(seen.contains(r), "{} never produced", r.code());
        }
    }

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
    fn event_debug_never_shows_values() {
        let shown = format!("{:?}", validate(GOOD.as_bytes()));
        assert!(shown.contains("Accept"));
        for value in ["evt_1001", "lrn_1042", "les_07", "completed", "2026"] {
            assert!(!shown.contains(value), "{shown}");
        }
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

    // ----- invalid_utf8 / invalid_json / not_an_object ----------------------

    #[test]
    fn invalid_utf8_is_checked_before_anything() {
        assert_eq!(validate(&[0xFF]), Verdict::Quarantine(Reason::InvalidUtf8));
        // Even an otherwise prohibited line: it does not parse.
        let mut line = br#"{"email":"x","event_id":""#.to_vec();
        line.extend_from_slice(&[0xC3, 0x28]);
        line.extend_from_slice(b"\"}");
        assert_eq!(validate(&line), Verdict::Quarantine(Reason::InvalidUtf8));
        // Overlong / surrogate encodings are invalid UTF-8 too.
        assert_eq!(
            validate(b"\"\xED\xA0\x80\""),
            Verdict::Quarantine(Reason::InvalidUtf8)
        );
    }

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

    // ----- event_time ------------------------------------------------------

    fn utc(s: &str) -> Option<String> {
        parse_event_time(s).map(|t| t.to_string())
    }

    #[test]
    fn event_time_normalizes_offsets_and_fractions() {
        let cases = [
            ("2026-03-02T14:02:11.500+05:30", "2026-03-02T08:32:11.5Z"),
            ("2026-03-01 23:30:00-01:00", "2026-03-02T00:30:00Z"),
            ("2026-03-02T14:02:11Z", "2026-03-02T14:02:11Z"),
            ("2026-03-02t14:02:11z", "2026-03-02T14:02:11Z"),
            ("2026-03-02T14:02:11+00:00", "2026-03-02T14:02:11Z"),
            ("2026-03-02T14:02:11-00:00", "2026-03-02T14:02:11Z"),
            ("2026-03-02T14:02:11.000Z", "2026-03-02T14:02:11Z"),
            ("2026-03-02T14:02:11.0Z", "2026-03-02T14:02:11Z"),
            (
                "2026-03-02T14:02:11.123456789Z",
                "2026-03-02T14:02:11.123456789Z",
            ),
            ("2026-03-02T14:02:11.120000000Z", "2026-03-02T14:02:11.12Z"),
            (
                "2026-03-02T14:02:11.000000001Z",
                "2026-03-02T14:02:11.000000001Z",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(utc(input).as_deref(), Some(expected), "{input}");
        }
    }

    #[test]
    fn event_time_rolls_days_months_years_and_leap_days() {
        let cases = [
            // Leap day accepted, and rollover into / out of it.
            ("2024-02-29T12:00:00Z", "2024-02-29T12:00:00Z"),
            ("2024-02-28T23:30:00-01:00", "2024-02-29T00:30:00Z"),
            ("2024-03-01T00:30:00+01:00", "2024-02-29T23:30:00Z"),
            ("2023-03-01T00:30:00+01:00", "2023-02-28T23:30:00Z"),
            ("2000-02-28T23:00:00-02:00", "2000-02-29T01:00:00Z"),
            // Month and year boundaries.
            ("2026-04-30T22:00:00-03:00", "2026-05-01T01:00:00Z"),
            ("2026-12-31T23:59:59.9-23:59", "2027-01-01T23:58:59.9Z"),
            ("2027-01-01T00:00:00+14:00", "2026-12-31T10:00:00Z"),
            ("2026-03-02T00:00:00+23:59", "2026-03-01T00:01:00Z"),
            // Edges of the year range.
            ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"),
            ("9999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"),
        ];
        for (input, expected) in cases {
            assert_eq!(utc(input).as_deref(), Some(expected), "{input}");
        }
    }

    #[test]
    fn event_time_rejects_non_rfc3339_and_impossible_values() {
        for bad in [
            "2026-03-02T14:02:11",             // naive
            "2026-03-02T14:02:11+0530",        // ±HHMM
            "2026-03-02T14:02:11+05",          // ±HH
            "2026-03-02T24:00:00Z",            // hour 24
            "2026-03-02T14:60:00Z",            // minute 60
            "2026-03-02T14:02:60Z",            // leap second
            "2026-03-02T14:02:11.Z",           // empty fraction
            "2026-03-02T14:02:11.1234567890Z", // 10 digits
            "2026-03-02T14:02:11,5Z",          // comma fraction
            "2026-03-02T14:02:11+24:00",       // offset hour
            "2026-03-02T14:02:11+05:60",       // offset minute
            "2026-02-30T00:00:00Z",            // Feb 30
            "2026-02-29T00:00:00Z",            // not a leap year
            "1900-02-29T00:00:00Z",            // century, not leap
            "2026-04-31T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-01-00T00:00:00Z",
            "2026-03-02",        // date only
            "2026-03-02T14:02Z", // no seconds
            "2026-03-02T14:02:11ZZ",
            "2026-03-02T14:02:11Z ",
            " 2026-03-02T14:02:11Z",
            "2026-03-02  14:02:11Z",
            "2026-03-02_14:02:11Z",
            "26-03-02T14:02:11Z",
            "+2026-03-02T14:02:11Z",
            "20260-03-02T14:02:11Z",
            "2026-3-02T14:02:11Z",
            "2026-03-02T4:02:11Z",
            "2026-03-02T14:02:11UTC",
            "2026-03-02T14:02:11+5:30",
            "2026-03-02T14:02:11+05:3",
            "2026-03-02T14:02:11\u{2212}05:00",
            "２０２６-03-02T14:02:11Z",
            "0000-01-01T00:30:00+01:00", // before year 0
            "9999-12-31T23:30:00-01:00", // after year 9999
            "",
        ] {
            assert_eq!(utc(bad), None, "{bad:?}");
        }
    }

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

    #[test]
    fn event_time_matches_time_crate_arithmetic() {
        use time::{Date, Month, PrimitiveDateTime, Time, UtcOffset};
        let dates = [
            (2024, 2, 28),
            (2024, 2, 29),
            (2024, 3, 1),
            (2023, 2, 28),
            (2023, 3, 1),
            (2026, 12, 31),
            (2027, 1, 1),
            (2026, 6, 30),
            (2100, 2, 28),
            (2000, 2, 29),
            (1, 1, 1),
        ];
        let times = [
            (0, 0, 0),
            (0, 59, 59),
            (12, 30, 15),
            (23, 59, 59),
            (5, 5, 5),
        ];
        let offsets: Vec<i32> = (-(23 * 60 + 59)..=(23 * 60 + 59)).step_by(37).collect();
        for &(y, m, d) in &dates {
            for &(hh, mm, ss) in &times {
                for &off in &offsets {
                    let sign = if off < 0 { '-' } else { '+' };
                    let a = off.unsigned_abs();
                    let input = format!(
                        "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.25{sign}{:02}:{:02}",
                        a / 60,
                        a % 60
                    );
                    let month = Month::try_from(m as u8).expect("valid month");
                    let local = PrimitiveDateTime::new(
                        Date::from_calendar_date(y, month, d).expect("valid date"),
                        Time::from_hms_milli(hh, mm, ss, 250).expect("valid time"),
                    );
                    let offset = UtcOffset::from_whole_seconds(off * 60).expect("valid offset");
                    let u = local.assume_offset(offset).to_offset(UtcOffset::UTC);
                    let expected = format!(
                        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.25Z",
                        u.year(),
                        u8::from(u.month()),
                        u.day(),
                        u.hour(),
                        u.minute(),
                        u.second()
                    );
                    assert_eq!(utc(&input).as_deref(), Some(expected.as_str()), "{input}");
                }
            }
        }
    }

    #[test]
    fn utc_time_is_inline_displayable_and_comparable() {
        let a = parse_event_time("2026-03-02T14:02:11.500+05:30").expect("valid");
        let b = parse_event_time("2026-03-02T08:32:11.5Z").expect("valid");
        assert_eq!(a, b);
        assert_eq!(format!("{a}"), "2026-03-02T08:32:11.5Z");
        assert_eq!(format!("{a:?}"), "\"2026-03-02T08:32:11.5Z\"");
        assert!(std::mem::size_of::<UtcTime>() <= 32);
    }

    // ----- canonical form --------------------------------------------------

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
        map.insert("attempt_number".into(), e.attempt_number.into());
        map.insert("checkpoint".into(), e.checkpoint.into());
        map.insert("event_id".into(), e.event_id.to_string().into());
        map.insert("event_time".into(), e.event_time.to_string().into());
        map.insert("event_type".into(), e.event_type.as_str().into());
        map.insert("learner_id".into(), e.learner_id.to_string().into());
        map.insert("lesson_id".into(), e.lesson_id.to_string().into());
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

    // ----- framer ----------------------------------------------------------

    #[derive(Debug, PartialEq, Eq)]
    enum Got {
        Content(u64, Vec<u8>),
        TooLong(u64),
    }

    fn frame(input: &[u8], chunk_size: usize, max: usize) -> Vec<Got> {
        let mut framer = LineFramer::new(max);
        let mut got = Vec::new();
        let mut sink = |line: Line<'_>| {
            got.push(match line {
                Line::Content { number, bytes } => Got::Content(number, bytes.to_vec()),
                Line::TooLong { number } => Got::TooLong(number),
            });
            Ok::<(), ()>(())
        };
        for chunk in input.chunks(chunk_size.max(1)) {
            framer.push(chunk, &mut sink).expect("sink never fails");
        }
        if input.is_empty() {
            framer.push(&[], &mut sink).expect("sink never fails");
        }
        framer.finish(&mut sink).expect("sink never fails");
        got
    }

    /// The same result for every chunking of the input.
    fn frame_all_chunkings(input: &[u8], max: usize) -> Vec<Got> {
        let whole = frame(input, input.len().max(1), max);
        for size in 1..=input.len() {
            assert_eq!(frame(input, size, max), whole, "chunk size {size}");
        }
        whole
    }

    fn c(n: u64, s: &str) -> Got {
        Got::Content(n, s.as_bytes().to_vec())
    }

    #[test]
    fn framer_splits_lines_drops_cr_and_keeps_last_unterminated_line() {
        let got = frame_all_chunkings(b"a\r\nb\nc\r", 100);
        assert_eq!(got, vec![c(1, "a"), c(2, "b"), c(3, "c")]);
        let got = frame_all_chunkings(b"a\nlast", 100);
        assert_eq!(got, vec![c(1, "a"), c(2, "last")]);
        // Only one \r is dropped.
        assert_eq!(frame_all_chunkings(b"x\r\r\n", 100), vec![c(1, "x\r")]);
        // A terminating newline does not create an extra line.
        assert_eq!(frame_all_chunkings(b"a\n", 100), vec![c(1, "a")]);
        assert_eq!(frame_all_chunkings(b"", 100), vec![]);
    }

    #[test]
    fn framer_skips_blank_and_whitespace_lines_but_counts_them() {
        let got = frame_all_chunkings(b"\n  \n\t\r\n\r\na\n \t \nb\n\n   ", 100);
        assert_eq!(got, vec![c(5, "a"), c(7, "b")]);
        // Other whitespace (form feed) is content, for validate to reject.
        assert_eq!(frame_all_chunkings(b"\x0c\n", 100), vec![c(1, "\x0c")]);
    }

    #[test]
    fn framer_ignores_bom_at_stream_start_even_split() {
        let got = frame_all_chunkings(b"\xEF\xBB\xBF{\"a\":1}\n{}\n", 100);
        assert_eq!(got, vec![c(1, "{\"a\":1}"), c(2, "{}")]);
        let mut framer = LineFramer::new(100);
        let mut got = Vec::new();
        for part in [&b"\xEF"[..], b"\xBB", b"\xBFx", b"\n"] {
            framer
                .push(part, |l| {
                    got.push(l.number());
                    assert_eq!(
                        l,
                        Line::Content {
                            number: 1,
                            bytes: b"x"
                        }
                    );
                    Ok::<(), ()>(())
                })
                .expect("ok");
        }
        assert_eq!(got, vec![1]);
        // A BOM followed by a newline is a blank first line.
        assert_eq!(
            frame_all_chunkings(b"\xEF\xBB\xBF\nx", 100),
            vec![c(2, "x")]
        );
    }

    #[test]
    fn framer_keeps_bom_only_at_start_and_partial_bom_as_content() {
        // A second BOM (not at stream start) is content.
        assert_eq!(
            frame_all_chunkings(b"\xEF\xBB\xBFa\n\xEF\xBB\xBFb", 100),
            vec![c(1, "a"), Got::Content(2, b"\xEF\xBB\xBFb".to_vec())]
        );
        // A partial BOM followed by something else is kept.
        assert_eq!(
            frame_all_chunkings(b"\xEF\xBBx\n", 100),
            vec![Got::Content(1, b"\xEF\xBBx".to_vec())]
        );
        // Stream that is only a partial BOM: still a line.
        assert_eq!(
            frame_all_chunkings(b"\xEF\xBB", 100),
            vec![Got::Content(1, b"\xEF\xBB".to_vec())]
        );
        // Only a full BOM: nothing.
        assert_eq!(frame_all_chunkings(b"\xEF\xBB\xBF", 100), vec![]);
    }

    #[test]
    fn framer_joins_a_line_spanning_chunks() {
        let line = GOOD.as_bytes();
        let mut input = line.to_vec();
        input.extend_from_slice(b"\r\n");
        input.extend_from_slice(line);
        let got = frame_all_chunkings(&input, 1024);
        assert_eq!(got, vec![c(1, GOOD), c(2, GOOD)]);
    }

    #[test]
    fn framer_passes_in_chunk_lines_without_copying() {
        let chunk = b"first\nsecond\nthird\n";
        let range = chunk.as_ptr_range();
        let mut framer = LineFramer::new(100);
        let mut n = 0;
        framer
            .push(chunk, |line| {
                let Line::Content { bytes, .. } = line else {
                    panic!("unexpected {line:?}")
                };
                assert!(range.contains(&bytes.as_ptr()), "line was copied");
                n += 1;
                Ok::<(), ()>(())
            })
            .expect("ok");
        assert_eq!(n, 3);
        assert_eq!(framer.buffered_capacity(), 0);
    }

    #[test]
    fn framer_flags_too_long_lines_in_any_chunking() {
        // max 5: "12345" fits (also with \r), "123456" does not.
        let input = b"12345\r\n123456\nok\n1234567890123\r\nend";
        let got = frame_all_chunkings(input, 5);
        assert_eq!(
            got,
            vec![
                c(1, "12345"),
                Got::TooLong(2),
                c(3, "ok"),
                Got::TooLong(4),
                c(5, "end"),
            ]
        );
        // Unterminated too-long last line.
        assert_eq!(
            frame_all_chunkings(b"ok\n1234567", 5),
            vec![c(1, "ok"), Got::TooLong(2)]
        );
        // Whitespace-only but too long: still too long (see emit).
        assert_eq!(frame_all_chunkings(b"       \n", 5), vec![Got::TooLong(1)]);
    }

    #[test]
    fn framer_too_long_line_in_one_byte_chunks_then_valid_line() {
        let mut input = vec![b'x'; 5000];
        input.push(b'\n');
        input.extend_from_slice(GOOD.as_bytes());
        input.push(b'\n');
        let got = frame(&input, 1, 1024);
        assert_eq!(got, vec![Got::TooLong(1), c(2, GOOD)]);
        let Got::Content(_, bytes) = &got[1] else {
            unreachable!()
        };
        assert!(matches!(validate(bytes), Verdict::Accept(_)));
    }

    #[test]
    fn framer_does_not_buffer_a_long_line() {
        const MIB: usize = 1 << 20;
        let max = 1024;
        let chunk = vec![b'a'; MIB];
        let mut framer = LineFramer::new(max);
        let mut got = Vec::new();
        let mut sink = |line: Line<'_>| {
            got.push(match line {
                Line::Content { number, bytes } => Got::Content(number, bytes.to_vec()),
                Line::TooLong { number } => Got::TooLong(number),
            });
            Ok::<(), ()>(())
        };
        // Start the long line mid-chunk so the carry path is exercised.
        framer.push(b"{}\naaa", &mut sink).expect("ok");
        for _ in 0..64 {
            framer.push(&chunk, &mut sink).expect("ok");
            assert!(framer.buffered_capacity() <= max + 1, "carry grew");
        }
        framer.push(b"\n{\"b\":2}", &mut sink).expect("ok");
        framer.finish(&mut sink).expect("ok");
        assert!(framer.buffered_capacity() <= max + 1);
        assert_eq!(got, vec![c(1, "{}"), Got::TooLong(2), c(3, "{\"b\":2}")]);
        assert_eq!(framer.lines_seen(), 3);
    }

    #[test]
    fn framer_stops_at_sink_error() {
        let mut framer = LineFramer::new(100);
        let mut seen = Vec::new();
        let result = framer.push(b"a\nb\nc\n", |line| {
            seen.push(line.number());
            if line.number() == 2 {
                Err("stop")
            } else {
                Ok(())
            }
        });
        assert_eq!(result, Err("stop"));
        assert_eq!(seen, vec![1, 2]);
        // finish propagates too.
        let mut framer = LineFramer::new(100);
        framer.push(b"x", |_| Ok::<(), &str>(())).expect("ok");
        assert_eq!(framer.finish(|_| Err("stop")), Err("stop"));
    }

    #[test]
    fn line_verdict_maps_too_long_and_content() {
        assert_eq!(
            Line::TooLong { number: 3 }.verdict(),
            Verdict::Quarantine(Reason::LineTooLong)
        );
        assert_eq!(Line::TooLong { number: 3 }.number(), 3);
        let line = Line::Content {
            number: 1,
            bytes: GOOD.as_bytes(),
        };
        assert!(matches!(line.verdict(), Verdict::Accept(_)));
    }

    #[test]
    fn find_newline_matches_naive_search() {
        let mut data: Vec<u8> = (0..300u32).map(|i| (i * 37 % 251) as u8).collect();
        data.retain(|&b| b != b'\n');
        for len in 0..data.len() {
            for pos in [None, Some(0), Some(len / 2), Some(len.saturating_sub(1))] {
                let mut hay = data[..len].to_vec();
                if let Some(p) = pos {
                    if p < hay.len() {
                        hay[p] = b'\n';
                    }
                }
                // Bytes that are near '\n' (0x0B, 0x8A) must not match.
                hay.extend_from_slice(&[0x0B, 0x8A, 0x09]);
                let naive = hay.iter().position(|&b| b == b'\n');
                assert_eq!(find_newline(&hay), naive, "len {len} pos {pos:?}");
            }
        }
    }

    // ----- fast scanner vs serde_json -------------------------------------

    /// Small deterministic PRNG (xorshift64*), so the test needs no extra crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// The fast scanner must never disagree with serde_json: it either gives
    /// the same object (and so the same verdict) or declines.
    fn assert_scanners_agree(text: &str) -> bool {
        let slow = parse_object_serde(text);
        match scan_flat_object(text) {
            Some(mut fast) => {
                fast.plain_strings = false;
                assert_eq!(Ok(&fast), slow.as_ref(), "object for {text:?}");
                fast.plain_strings = true;
                assert_eq!(
                    verdict_for(Ok(fast)),
                    verdict_for(parse_object_serde(text)),
                    "verdict for {text:?}"
                );
                true
            }
            None => false,
        }
    }

    #[test]
    fn fast_scanner_takes_common_lines_and_declines_the_rest() {
        assert!(scan_flat_object(GOOD).is_some());
        assert!(scan_flat_object(&with("checkpoint", Some(" -12 "))).is_some());
        assert!(scan_flat_object(" { } ").is_some());
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
            assert!(scan_flat_object(declined).is_none(), "{declined}");
            assert_scanners_agree(declined);
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
                let mut chars: Vec<char> = seed.chars().collect();
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(chars.len() + 1);
                    let c = alphabet[rng.below(alphabet.len())];
                    match rng.below(3) {
                        0 if at < chars.len() => {
                            chars.remove(at);
                        }
                        1 if at < chars.len() => chars[at] = c,
                        _ => chars.insert(at, c),
                    }
                }
                let text: String = chars.into_iter().collect();
                if assert_scanners_agree(&text) {
                    fast_hits += 1;
                    if matches!(validate(text.as_bytes()), Verdict::Accept(_)) {
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
