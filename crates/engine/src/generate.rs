//! Deterministic generator of progress-event JSONL for drills, tests and the
//! benchmark: about 200 bytes a line, with a chosen share of exact duplicates
//! (retries with reordered keys) and malformed lines, mixed offsets and fractional
//! seconds. The same seed always gives the same bytes.

use std::io::{self, Write};

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub lines: u64,
    /// Per mille of lines that repeat an earlier event (reordered keys, other offset).
    pub duplicate_per_mille: u32,
    /// Per mille of lines that are malformed (quarantined).
    pub malformed_per_mille: u32,
    pub seed: u64,
}

/// xorshift64*: tiny, fast and reproducible; quality is irrelevant here.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const OFFSETS: [(&str, i64); 5] = [
    ("Z", 0),
    ("+00:00", 0),
    ("+05:30", 330),
    ("-04:00", -240),
    ("+09:00", 540),
];

/// Write one event for event number `n` with the offset variant `variant`.
fn write_event(
    out: &mut impl Write,
    n: u64,
    rng_bits: u64,
    variant: usize,
    reorder: bool,
) -> io::Result<()> {
    let learner = rng_bits % 100_000;
    let lesson = (rng_bits >> 20) % 4_000;
    let attempt = 1 + (rng_bits >> 40) % 5;
    let completed = (rng_bits >> 45) & 3 == 0;
    // Seconds since 2026-03-02T00:00:00Z, spread over the day.
    let secs = (n * 7 + (rng_bits >> 50) % 7) % 86_400;
    let millis = (rng_bits >> 8) % 1000;
    let (suffix, offset_min) = OFFSETS[variant % OFFSETS.len()];
    // Local wall time = UTC + offset; stay on 2026-03-02 by wrapping the UTC second.
    let local = (secs as i64 + offset_min * 60).rem_euclid(86_400);
    let day = 2 + (secs as i64 + offset_min * 60).div_euclid(86_400);
    let time = format!(
        "2026-03-{:02}T{:02}:{:02}:{:02}.{:03}{}",
        day,
        local / 3600,
        local / 60 % 60,
        local % 60,
        millis,
        suffix
    );
    let kind = if completed { "completed" } else { "checkpoint" };
    let checkpoint = if completed {
        "null".to_string()
    } else {
        ((rng_bits >> 30) % 12).to_string()
    };
    if reorder {
        writeln!(
            out,
            r#"{{"checkpoint":{checkpoint},"event_time":"{time}","attempt_number":{attempt},"event_type":"{kind}","lesson_id":"lesson-{lesson:05}","learner_id":"learner-{learner:07}","event_id":"evt-{n:012}"}}"#
        )
    } else {
        writeln!(
            out,
            r#"{{"event_id":"evt-{n:012}","learner_id":"learner-{learner:07}","lesson_id":"lesson-{lesson:05}","event_type":"{kind}","attempt_number":{attempt},"event_time":"{time}","checkpoint":{checkpoint}}}"#
        )
    }
}

/// Write `spec.lines` lines to `out`.
pub fn generate(spec: &Spec, out: &mut impl Write) -> io::Result<()> {
    // Spread the seed over all bits; xorshift needs a non-zero state.
    let mut rng = Rng(spec.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut events = 0u64;
    for _ in 0..spec.lines {
        let roll = rng.below(1000) as u32;
        if roll < spec.malformed_per_mille {
            // Truncated JSON, as a producer cut off mid-write would leave.
            writeln!(out, r#"{{"event_id":"evt-bad-{events}","learner_id":"#)?;
        } else if roll < spec.malformed_per_mille + spec.duplicate_per_mille && events > 0 {
            // An exact retry of an earlier event, encoded differently.
            let n = events - 1 - rng.below(events.min(1000));
            let bits = seed_bits(spec.seed, n);
            write_event(out, n, bits, 1 + (bits as usize % 3), true)?;
        } else {
            let bits = seed_bits(spec.seed, events);
            write_event(out, events, bits, bits as usize % 3, false)?;
            events += 1;
        }
    }
    out.flush()
}

/// The random bits of event `n`, so a duplicate can regenerate the same event.
fn seed_bits(seed: u64, n: u64) -> u64 {
    Rng(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1).next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(spec: Spec) -> Vec<u8> {
        let mut v = Vec::new();
        generate(&spec, &mut v).unwrap();
        v
    }

    #[test]
    fn same_seed_same_bytes_and_about_200_bytes_a_line() {
        let spec = Spec {
            lines: 1000,
            duplicate_per_mille: 20,
            malformed_per_mille: 5,
            seed: 42,
        };
        let a = gen(spec);
        assert_eq!(a, gen(spec));
        let per_line = a.len() / 1000;
        assert!((150..=260).contains(&per_line), "{per_line} bytes a line");
        assert_ne!(a, gen(Spec { seed: 43, ..spec }));
    }
}
