//! The quarantine record: what the lake keeps about a rejected line.
//!
//! One JSON object per line, `{"line":N,"reason":"code"}`: the physical line number
//! and the reason code, never the line's content (it may hold personal data).

use super::{Contract, Reason};

/// Appends the record of line `line` (1-based, physical) quarantined for `reason`
/// under `contract`, newline included.
pub fn write_quarantine_record(out: &mut Vec<u8>, line: u64, reason: Reason, contract: &Contract) {
    out.extend_from_slice(b"{\"line\":");
    out.extend_from_slice(itoa::Buffer::new().format(line).as_bytes());
    out.extend_from_slice(b",\"reason\":\"");
    // Codes are snake_case ASCII: nothing to escape.
    out.extend_from_slice(reason.code(contract).as_bytes());
    out.extend_from_slice(b"\"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_is_one_json_line_of_line_number_and_reason_code() {
        let mut out = Vec::new();
        let p = crate::tests::progress();
        write_quarantine_record(&mut out, 7, Reason::InvalidJson, p);
        write_quarantine_record(&mut out, u64::MAX, Reason::LineTooLong, p);
        assert_eq!(
            String::from_utf8(out.clone()).expect("ASCII"),
            "{\"line\":7,\"reason\":\"invalid_json\"}\n\
             {\"line\":18446744073709551615,\"reason\":\"line_too_long\"}\n"
        );
        // Every reason gives valid JSON with exactly the two keys.
        let all = [
            Reason::InvalidUtf8,
            Reason::DuplicateKey,
            Reason::UnknownField,
        ]
        .into_iter()
        .chain((0..p.fields.len()).map(Reason::Missing))
        .chain((0..p.fields.len()).map(Reason::Invalid));
        for (i, r) in all.enumerate() {
            let mut one = Vec::new();
            write_quarantine_record(&mut one, i as u64 + 1, r, p);
            assert_eq!(one.last(), Some(&b'\n'));
            let v: serde_json::Value = serde_json::from_slice(&one).expect("valid JSON");
            assert_eq!(
                v,
                serde_json::json!({"line": i as u64 + 1, "reason": r.code(p)})
            );
        }
    }
}
