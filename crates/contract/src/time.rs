//! RFC 3339 event time (docs/design.md section 2): a mandatory offset, normalized to
//! UTC with trailing fraction zeros trimmed.

use std::fmt;

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
    /// The text's bytes (ASCII), without the UTF-8 check of [`as_str`](Self::as_str).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    /// The text and the unused bytes after it: a copy of constant size.
    pub(super) fn padded(&self) -> &[u8; UTC_TIME_CAPACITY] {
        &self.buf
    }

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

/// Digit bytes of `YYYY-MM-`, `DDTHH:MM` (only `DD` is read from it) and
/// `HH:MM:SS` as little-endian words (byte `k` of the text is byte `k` of the word),
/// and where their separators are.
const DATE_DIGITS: u64 = 0x00FF_FF00_FFFF_FFFF;
const DATE_DASHES: u64 = 0xFF00_00FF_0000_0000;
const DATE_DASH_BYTES: u64 = 0x2D00_002D_0000_0000;
const DAY_DIGITS: u64 = 0x0000_0000_0000_FFFF;
const CLOCK_DIGITS: u64 = 0xFFFF_00FF_FF00_FFFF;
const CLOCK_COLONS: u64 = 0x0000_FF00_00FF_0000;
const CLOCK_COLON_BYTES: u64 = 0x0000_3A00_003A_0000;
const ZEROS: u64 = 0x3030_3030_3030_3030;
const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;

/// Eight bytes as a little-endian word; `b` has at least eight.
fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// Whether the bytes of `w` under `digits` are ASCII digits and those under
/// `seps` equal those of `sep_bytes`.
fn digits_and(w: u64, digits: u64, seps: u64, sep_bytes: u64) -> bool {
    let (high, zeros) = (digits & HIGH_NIBBLES, digits & ZEROS);
    // `0x30..=0x3F` and, 6 added, still `0x3_`: `0x30..=0x39`. Adding 6 to a byte
    // of `0x3_` carries into no other byte.
    w & (high | seps) == zeros | sep_bytes
        && w.wrapping_add(digits & 0x0606_0606_0606_0606) & high == zeros
}

/// The two-digit values of the digits under `digits` (checked by [`digits_and`]):
/// byte `k` of the result is ten times digit `k` plus digit `k + 1`, at most 99,
/// so no byte carries into the next.
fn pairs(w: u64, digits: u64) -> u64 {
    let d = (w & digits) ^ (digits & ZEROS);
    d * 10 + (d >> 8)
}

fn byte(w: u64, k: u32) -> u32 {
    u32::from((w >> (8 * k)) as u8)
}

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

/// Parses an RFC 3339 timestamp with a mandatory offset (see docs/design.md section 2)
/// and returns the same instant in UTC, fraction trailing zeros trimmed.
///
/// Hand-rolled rather than `time`'s RFC 3339 parser so the accepted grammar is
/// exactly the contract's (`t`/space separator, `-00:00`, 1..=9 digits) and so
/// an out-of-range result is a `None`, never a panic. The offset is < 24 h, so
/// the date moves at most one day.
pub fn parse_event_time(s: &str) -> Option<UtcTime> {
    parse_event_time_bytes(s.as_bytes())
}

/// [`parse_event_time`] on the bytes of a JSON string's content: the grammar is
/// ASCII, so any other byte is a `None` and no UTF-8 check is needed first.
// A hot-path parser (every accepted line's event time): one straight pass over
// fixed positions, its digits read in place, which split into helpers would read
// in pieces and bounds-check again.
#[allow(clippy::too_many_lines)]
pub(super) fn parse_event_time_bytes(b: &[u8]) -> Option<UtcTime> {
    // `YYYY-MM-DDTHH:MM:SS` as three words: `YYYY-MM-`, `DD` (and the separator,
    // checked alone), `HH:MM:SS`. A word's digits and separators are checked at
    // once, where a byte at a time was a third of the parser's instructions.
    let (date, day_word, clock) = match (b.get(..8), b.get(8..16), b.get(11..19)) {
        // Nineteen bytes at least; the zone, a 20th at least, is matched below.
        (Some(d), Some(w), Some(c)) => (word(d), word(w), word(c)),
        _ => return None,
    };
    if !digits_and(date, DATE_DIGITS, DATE_DASHES, DATE_DASH_BYTES)
        || !digits_and(day_word, DAY_DIGITS, 0, 0)
        || !matches!(b[10], b'T' | b't' | b' ')
        || !digits_and(clock, CLOCK_DIGITS, CLOCK_COLONS, CLOCK_COLON_BYTES)
    {
        return None;
    }
    let (date, day_word, clock) = (
        pairs(date, DATE_DIGITS),
        pairs(day_word, DAY_DIGITS),
        pairs(clock, CLOCK_DIGITS),
    );
    // Four digits, so 0..=9999 and the cast is lossless.
    let year = (byte(date, 0) * 100 + byte(date, 2)) as i32;
    let month = byte(date, 5);
    let day = byte(day_word, 0);
    let hour = byte(clock, 0);
    let minute = byte(clock, 3);
    let second = byte(clock, 6);

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

    // The text as written, with `T`: only what the offset moved is rewritten (most
    // times are written in UTC or keep their date). All values are in range for
    // their width (checked above): casts are lossless.
    let mut buf = [0u8; UTC_TIME_CAPACITY];
    buf[..19].copy_from_slice(&b[..19]);
    buf[10] = b'T';
    let ascii = |v: u32| b'0' + (v % 10) as u8;
    if (y, mo, d) != (year, month, day) {
        let y = y as u32;
        buf[..4].copy_from_slice(&[ascii(y / 1000), ascii(y / 100), ascii(y / 10), ascii(y)]);
        buf[5..7].copy_from_slice(&[ascii(mo / 10), ascii(mo)]);
        buf[8..10].copy_from_slice(&[ascii(d / 10), ascii(d)]);
    }
    if offset_minutes != 0 {
        let (hh, mi) = (minutes as u32 / 60, minutes as u32 % 60);
        buf[11..13].copy_from_slice(&[ascii(hh / 10), ascii(hh)]);
        buf[14..16].copy_from_slice(&[ascii(mi / 10), ascii(mi)]);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn utc_times_differ_by_their_text_and_hash_as_it() {
        use std::hash::BuildHasher;
        let a = parse_event_time("2026-03-02T14:02:11Z").expect("valid");
        let b = parse_event_time("2026-03-02T14:02:12Z").expect("valid");
        assert_ne!(a, b);
        assert_eq!(a.as_bytes(), b"2026-03-02T14:02:11Z");
        assert_eq!(&a.padded()[..20], b"2026-03-02T14:02:11Z");
        assert_eq!(a.padded()[20..], [0; 10]);
        let s = std::collections::hash_map::RandomState::new();
        assert_eq!(s.hash_one(a), s.hash_one("2026-03-02T14:02:11Z"));
    }

    #[test]
    fn event_time_rolls_exactly_at_midnight() {
        // 23:00 at -01:00 is midnight UTC the next day; 01:00 at +01:00 is midnight.
        let cases = [
            ("2026-03-01T23:00:00-01:00", "2026-03-02T00:00:00Z"),
            ("2026-03-02T01:00:00+01:00", "2026-03-02T00:00:00Z"),
        ];
        for (input, expected) in cases {
            assert_eq!(utc(input).as_deref(), Some(expected), "{input}");
        }
    }

    #[test]
    fn event_time_rejects_another_separator_anywhere() {
        let good = "2026-03-02T14:02:11Z";
        for (at, allowed) in [
            (4, &b"-"[..]),
            (7, b"-"),
            (10, b"Tt "),
            (13, b":"),
            (16, b":"),
        ] {
            for c in (0..=255u8).filter(|c| !allowed.contains(c)) {
                let mut bad = good.as_bytes().to_vec();
                bad[at] = c;
                assert!(parse_event_time_bytes(&bad).is_none(), "{c:#x} at {at}");
            }
        }
    }

    #[test]
    fn event_time_rejects_a_non_digit_in_every_number() {
        // ':' is the byte after '9': as a digit it would be 10 ("20:6" a year 2106).
        let good = "2026-03-02T14:02:11+05:30";
        assert!(utc(good).is_some());
        let digits = [
            0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 23, 24,
        ];
        for at in digits {
            for c in (0..=255u8).filter(|c| !c.is_ascii_digit()) {
                let mut bad = good.as_bytes().to_vec();
                bad[at] = c;
                assert!(parse_event_time_bytes(&bad).is_none(), "{c:#x} at {at}");
            }
        }
    }
}
