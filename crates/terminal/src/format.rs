//! How the screen reads: pure functions of the numbers and the width (name
//! shortening in terminal columns, humane sizes and rates, bar and line layouts).

use std::fmt::Write as _;
use std::time::Duration;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::{MAX_BAR, MAX_NAME, MIN_BAR};

/// Columns `s` takes on a terminal.
pub fn cols(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `s` padded with spaces to `col` columns.
pub(super) fn pad(s: &str, col: usize) -> String {
    let mut p = s.to_owned();
    p.extend(std::iter::repeat_n(' ', col.saturating_sub(cols(s))));
    p
}

/// The longest start of `s` within `max` columns.
pub(super) fn cut(s: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += UnicodeWidthChar::width(c).unwrap_or(0);
        if used > max {
            return &s[..i];
        }
    }
    s
}

/// `name` in at most `max` columns: whole if it fits, else a third of its start and
/// the rest of its end around an ellipsis (the end tells dated and numbered inputs
/// apart: `learner-pr…xport-part-0001.jsonl`).
pub fn shorten(name: &str, max: usize) -> String {
    if cols(name) <= max {
        return name.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let keep = max - 1;
    let head = cut(name, keep / 3);
    // The end: the shortest suffix within the columns left.
    let tail_max = keep - cols(head);
    let mut start = name.len();
    let mut used = 0;
    for (i, c) in name.char_indices().rev() {
        used += UnicodeWidthChar::width(c).unwrap_or(0);
        if used > tail_max {
            break;
        }
        start = i;
    }
    format!("{head}…{}", &name[start..])
}

/// A number with a unit: one decimal below 100, none from 100 on (`2.1`, `18.5`,
/// `210`).
pub(super) fn humane(x: f64) -> String {
    if !x.is_finite() || x <= 0.0 {
        "0".to_owned()
    } else if x < 99.95 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// Bytes in binary units: `512 B`, `18.5 MiB`, `111 MiB`, `1.2 GiB`.
pub fn size(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if !bytes.is_finite() || bytes < 1024.0 {
        return format!(
            "{} B",
            if bytes.is_finite() {
                bytes.max(0.0).round() as u64
            } else {
                0
            }
        );
    }
    let mut x = bytes / 1024.0;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
        // 1023.9 KiB reads better as 1.0 MiB than as 1024 KiB.
        if x < 1023.5 {
            break;
        }
        x /= 1024.0;
        unit = next;
    }
    format!("{} {unit}", humane(x))
}

/// Bytes read of all: `52.0/111 MiB`, or `512 KiB/111 MiB` in different units.
pub(super) fn sizes(pos: u64, len: u64) -> String {
    let (p, l) = (size(pos as f64), size(len as f64));
    match (p.split_once(' '), l.split_once(' ')) {
        (Some((pn, pu)), Some((ln, lu))) if pu == lu => format!("{pn}/{ln} {lu}"),
        _ => format!("{p}/{l}"),
    }
}

/// A byte rate: `210 MiB/s`.
pub fn byte_rate(per_sec: f64) -> String {
    format!("{}/s", size(per_sec))
}

/// A count rate: `2.1 inputs/s`.
pub fn count_rate(per_sec: f64, what: &str) -> String {
    format!("{} {what}/s", humane(per_sec))
}

/// An integer with thousands separators: `594,136`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut s = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            s.push(',');
        }
        s.push(c);
    }
    s
}

/// A duration as a person reads it: `0.7 s`, `12.0 s`, `2m 05s`, `1h 02m`.
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 59.95 {
        format!("{secs:.1} s")
    } else {
        let whole = d.as_secs() + u64::from(d.subsec_millis() >= 500);
        if whole < 3600 {
            format!("{}m {:02}s", whole / 60, whole % 60)
        } else {
            format!("{}h {:02}m", whole / 3600, whole % 3600 / 60)
        }
    }
}

/// A time left, rounded up to whole seconds: `eta 3s`, `eta 2m 05s`.
pub(super) fn eta(secs: f64) -> String {
    let whole = secs.max(0.0).ceil() as u64;
    if whole < 60 {
        format!("eta {whole}s")
    } else if whole < 3600 {
        format!("eta {}m {:02}s", whole / 60, whole % 60)
    } else {
        format!("eta {}h {:02}m", whole / 3600, whole % 3600 / 60)
    }
}

/// `[=====>     ]` of `width` cells inside the brackets.
pub(super) fn bar(fraction: f64, width: usize) -> String {
    let fraction = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let filled = (fraction * width as f64).floor() as usize;
    let mut s = String::with_capacity(width + 2);
    s.push('[');
    for i in 0..width {
        s.push(if i < filled {
            '='
        } else if i == filled {
            '>'
        } else {
            ' '
        });
    }
    s.push(']');
    s
}

/// Lay out `{name}  {stage}  [bar]  {stats...}` in fewer than `width` columns (the
/// last column stays free, so no terminal wraps the line). The name is padded to
/// `name_col` (at most [`MAX_NAME`]) and shortened to make room; when even a short
/// name does not fit, the stats go from the last, then the bar.
pub(super) fn compose(
    name: &str,
    name_col: usize,
    stage: &str,
    fraction: f64,
    stats: &[String],
    width: usize,
) -> String {
    let avail = width.saturating_sub(1).max(1);
    let name_len = cols(name);
    let stage_cols = 2 + cols(stage).max(5);
    // (with a bar, how many stats), most complete first: the stats go from the
    // last down to the first, then the bar, then the first stat.
    let fewest = usize::from(!stats.is_empty());
    let mut tries: Vec<(bool, usize)> = (fewest..=stats.len()).rev().map(|k| (true, k)).collect();
    tries.extend((0..=fewest).rev().map(|k| (false, k)));
    for (i, &(with_bar, k)) in tries.iter().enumerate() {
        let tail: usize = stats[..k].iter().map(|s| 2 + cols(s)).sum();
        let bar_min = if with_bar { 2 + 2 + MIN_BAR } else { 0 };
        let room = avail.saturating_sub(stage_cols + bar_min + tail);
        let last = i + 1 == tries.len();
        if room < name_len.min(12) && !last {
            continue;
        }
        let col = name_len.max(name_col).min(MAX_NAME).min(room.max(1));
        let mut line = pad(&shorten(name, col), col);
        let _ = write!(line, "  {stage:<5}");
        if with_bar {
            let used = cols(&line) + 2 + 2 + tail;
            line.push_str("  ");
            line.push_str(&bar(
                fraction,
                avail.saturating_sub(used).clamp(MIN_BAR, MAX_BAR),
            ));
        }
        for s in &stats[..k] {
            line.push_str("  ");
            line.push_str(s);
        }
        // Only a terminal narrower than a short name gets here cut.
        return cut(&line, avail).trim_end().to_owned();
    }
    unreachable!("the last layout is always taken")
}

/// The bar line of an input: its name, the stage, and, once the stage reads,
/// `(bytes read, bytes in all, bytes per second)`:
/// `day3.jsonl  land   [=========>          ]  52.0/111 MiB  210 MiB/s  eta 1s`.
pub fn render_input(
    name: &str,
    name_col: usize,
    stage: &str,
    done: Option<(u64, u64, f64)>,
    width: usize,
) -> String {
    let mut stats = Vec::new();
    let fraction = match done {
        // Not reading yet: an empty bar.
        None => 0.0,
        Some((pos, len, per_sec)) => {
            stats.push(sizes(pos, len));
            stats.push(byte_rate(per_sec));
            if per_sec > 0.0 && pos < len {
                stats.push(eta((len - pos) as f64 / per_sec));
            }
            if len == 0 {
                1.0
            } else {
                pos as f64 / len as f64
            }
        }
    };
    compose(name, name_col, stage, fraction, &stats, width)
}

/// The footer of an inbox run, its bar lined up with the inputs' (`name_col`):
/// `inbox         [=====>     ]  2/6 inputs  2.1 inputs/s  eta 3s  1.0 s`.
pub fn render_footer(
    done: u64,
    total: u64,
    elapsed: Duration,
    name_col: usize,
    width: usize,
) -> String {
    let per_sec = done as f64 / elapsed.as_secs_f64().max(1e-3);
    let mut stats = vec![format!("{done}/{total} inputs")];
    if done > 0 {
        stats.push(count_rate(per_sec, "inputs"));
        if done < total {
            stats.push(eta((total - done) as f64 / per_sec));
        }
    }
    stats.push(duration(elapsed));
    let fraction = if total == 0 {
        1.0
    } else {
        done as f64 / total as f64
    };
    compose("inbox", name_col, "", fraction, &stats, width)
}

/// The line a finished input leaves: `day3.jsonl  published  594,136 rows  0.7 s`;
/// the name is whole (padded to `name_col`), `detail` shortened to fit `width`.
pub fn result_line(
    name: &str,
    name_col: usize,
    action: &str,
    detail: &str,
    took: Duration,
    width: usize,
) -> String {
    let mut line = format!("{}  {action:<9}", pad(name, name_col));
    let took = duration(took);
    if !detail.is_empty() {
        let used = cols(&line) + 2 + 2 + cols(&took);
        let room = width.saturating_sub(1).saturating_sub(used).max(20);
        line.push_str("  ");
        line.push_str(&shorten(&detail.replace(['\n', '\r'], " "), room));
    }
    line.push_str("  ");
    line.push_str(&took);
    line
}

/// The widest the totals line gets: a person's terminal is often 100 columns wide.
pub const TOTALS_COLS: usize = 100;

/// The inbox's last line for a person: the inputs, each count that is not zero
/// (`published` and `failed` always), the rows published, the time and the rate.
/// Past [`TOTALS_COLS`], "rows published" says only "rows", then the rate goes: the
/// counts are what a person reads it for.
pub fn totals_line(inputs: u64, counts: &[(&str, u64)], rows: u64, took: Duration) -> String {
    let mut head = format!("totals  {} inputs:", thousands(inputs));
    let shown = counts
        .iter()
        .filter(|(what, n)| *n > 0 || matches!(*what, "published" | "failed"));
    for (i, (what, n)) in shown.enumerate() {
        let sep = if i == 0 { " " } else { ", " };
        let _ = write!(head, "{sep}{} {what}", thousands(*n));
    }
    let per_sec = inputs as f64 / took.as_secs_f64().max(1e-3);
    let (rows, took, rate) = (
        thousands(rows),
        duration(took),
        count_rate(per_sec, "inputs"),
    );
    let full = format!("{head}  {rows} rows published  {took}  {rate}");
    if cols(&full) <= TOTALS_COLS {
        return full;
    }
    let short = format!("{head}  {rows} rows  {took}  {rate}");
    if cols(&short) <= TOTALS_COLS {
        return short;
    }
    format!("{head}  {rows} rows  {took}")
}
