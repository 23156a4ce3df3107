//! Word-at-a-time byte tests shared by the scanners, the single pass and the
//! canonical writer: eight bytes of a line compared at once, where a byte loop
//! costs most of a line's time.

pub(super) const LO: u64 = 0x0101_0101_0101_0101;
pub(super) const HI: u64 = 0x8080_8080_8080_8080;

/// Reads 8 bytes at `i` as a little-endian word (byte `i` is the lowest).
pub(super) fn word_at(b: &[u8], i: usize) -> Option<u64> {
    let bytes: [u8; 8] = b.get(i..i + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// High bit set in each byte of `w` equal to `byte`. Bytes above a true match
/// may be falsely flagged (borrow), so only the lowest flag is meaningful.
pub(super) fn bytes_equal(w: u64, byte: u8) -> u64 {
    let x = w ^ (LO * u64::from(byte));
    x.wrapping_sub(LO) & !x & HI
}

/// Index of the first byte at or after `from` that JSON strings treat specially
/// (`"`, `\\`, or < 0x20), or `b.len()`. Word at a time: string bytes are most
/// of every line.
pub(super) fn find_special(b: &[u8], from: usize) -> usize {
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

pub(super) fn is_json_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}
