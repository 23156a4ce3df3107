//! The memory budget of a run: how much it may hold, where that figure came from,
//! and the share left to the dedup index once the fixed costs of a run are paid.
//! Pure arithmetic: the command line reads `--max-memory` and the cgroup limit.

use std::fmt;

/// Where the budget came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--max-memory` / `LANDING_MAX_MEMORY`.
    Flag,
    /// The cgroup memory limit (a pod's `resources.limits.memory`), less headroom.
    Cgroup { limit: u64 },
    /// Neither: the index may grow as large as the day needs.
    Unlimited,
}

/// The budget of a whole process, and how many inputs share it (`--jobs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub total: Option<u64>,
    pub source: Source,
    pub jobs: usize,
}

/// What a process holds besides its runs' buffers and indexes: code, the runtime,
/// the SDK's clients and its connection pool.
pub const PROCESS_BASE: u64 = 48 << 20;
/// What one run holds besides its index: read chunks queued for the hasher and the
/// two validation workers, checked batches, the staging writer's queue (about 40
/// MiB, measured on the 5 M-line file), with headroom.
pub const RUN_BASE: u64 = 64 << 20;
/// The least index share a run accepts: below it, spills would be tiny and many.
pub const MIN_SHARE: u64 = 8 << 20;

/// Most inputs an inbox run without `--jobs` has in flight at once when they are
/// small: enough to keep a store's request latency hidden on two cores, few enough
/// that the runs' threads do not crowd them.
pub const IN_FLIGHT: usize = 16;
/// What a small input's run holds whatever its size: its threads, the framer's and
/// the writer's first buffers, its SDK requests.
pub const SMALL_RUN_BASE: u64 = 4 << 20;
/// A small input's run holds its content a few times over at most (read chunks,
/// checked batches, the staged output waiting for its single PUT) plus its index
/// (64 B per event, events of 200 B and more): charged four times the content.
pub const SMALL_RUN_PER_BYTE: u64 = 4;
/// A full run's charge without a budget (no `--max-memory`, no cgroup limit): what
/// decides which inputs count as small when nothing else does.
pub const UNBUDGETED_RUN: u64 = 512 << 20;

impl Memory {
    /// The budget from a cgroup limit, if there is one: the limit less an eighth
    /// (at least 64 MiB) for what the kernel charges the pod besides our heap
    /// (page cache of the files we write, thread stacks, allocator slack).
    pub fn from_cgroup(limit: Option<u64>, jobs: usize) -> Memory {
        match limit {
            Some(limit) => Memory {
                total: Some(limit.saturating_sub((limit / 8).max(64 << 20))),
                source: Source::Cgroup { limit },
                jobs,
            },
            None => Memory {
                total: None,
                source: Source::Unlimited,
                jobs,
            },
        }
    }

    pub fn from_flag(bytes: u64, jobs: usize) -> Memory {
        Memory {
            total: Some(bytes),
            source: Source::Flag,
            jobs,
        }
    }

    /// One run's share of the process budget: `--jobs` divides it.
    pub fn per_run(&self) -> Option<u64> {
        self.total
            .map(|t| t.saturating_sub(PROCESS_BASE) / self.jobs.max(1) as u64)
    }

    /// The index's share of one run: its budget less the run's buffers and, on S3,
    /// the parts it may hold in flight (`parts_in_flight` bytes).
    pub fn index_share(&self, parts_in_flight: u64) -> Option<u64> {
        self.per_run()
            .map(|r| r.saturating_sub(RUN_BASE + parts_in_flight))
    }

    /// A budget too small to run in is a configuration error, said at startup.
    pub fn check(&self, parts_in_flight: u64) -> Result<(), String> {
        match self.index_share(parts_in_flight) {
            Some(share) if share < MIN_SHARE => Err(format!(
                "--max-memory: {} leaves {} per run for the dedup index after the run's own buffers ({} + {} of S3 parts in flight{}); give at least {}",
                Bytes(self.total.unwrap_or(0)),
                Bytes(share),
                Bytes(RUN_BASE),
                Bytes(parts_in_flight),
                if self.jobs > 1 { format!(", --jobs {} sharing it", self.jobs) } else { String::new() },
                Bytes(self.need(parts_in_flight)),
            )),
            _ => Ok(()),
        }
    }

    /// What one full run may hold: its share of the budget (`--jobs` divides it), or
    /// without a budget [`UNBUDGETED_RUN`].
    pub fn slot(&self) -> u64 {
        self.per_run().unwrap_or(UNBUDGETED_RUN)
    }

    /// What an inbox run charges an input of `stored` bytes against its runs' memory
    /// (`--jobs` full runs' worth): a small input its content's worth, sized as the
    /// index sizes it (a compressed input's content is estimated from its stored
    /// size), so that many small inputs share one run's budget; an input whose charge
    /// reaches a full run's share takes that share.
    pub fn charge(&self, stored: u64) -> u64 {
        let content = crate::compression::expected_content(stored);
        SMALL_RUN_BASE
            .saturating_add(content.saturating_mul(SMALL_RUN_PER_BYTE))
            .min(self.slot())
    }

    /// The most inputs an inbox run has in flight: `--jobs` when given, else
    /// [`IN_FLIGHT`] when they are small enough to share the budget ([`Self::charge`]).
    pub fn in_flight(&self, explicit_jobs: bool) -> usize {
        if explicit_jobs {
            self.jobs.max(1)
        } else {
            IN_FLIGHT.max(self.jobs)
        }
    }

    /// The least total budget that runs.
    pub fn need(&self, parts_in_flight: u64) -> u64 {
        PROCESS_BASE + (RUN_BASE + parts_in_flight + MIN_SHARE) * self.jobs.max(1) as u64
    }

    /// How the budget was derived, in words (the run's log and `--dry-run`).
    pub fn describe(&self, parts_in_flight: u64) -> String {
        let origin = match self.source {
            Source::Flag => "from --max-memory".to_owned(),
            Source::Cgroup { limit } => format!(
                "from the cgroup memory limit {} less headroom",
                Bytes(limit)
            ),
            Source::Unlimited => {
                return "unlimited (no --max-memory and no cgroup memory limit): the dedup index never spills".to_owned()
            }
        };
        format!(
            "{} {origin}; per run {} (--jobs {}); dedup index share {} before it spills",
            Bytes(self.total.unwrap_or(0)),
            Bytes(self.per_run().unwrap_or(0)),
            self.jobs,
            Bytes(self.index_share(parts_in_flight).unwrap_or(0)),
        )
    }
}

/// Parse a size: bytes, or a number with a suffix (`512MiB`, `1.5GiB`, `2G`, `64k`).
/// Binary and decimal suffixes mean what they say (`GiB` = 2^30, `GB` = 10^9).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 512MiB, 2GiB, 1073741824)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        u => {
            return Err(format!(
                "{s:?}: unknown size unit {u:?} (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ))
        }
    };
    Ok((n * mult as f64) as u64)
}

/// A byte count as people read it (`256.0 MiB`).
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        match self.0 {
            n if n >= 1 << 30 => write!(f, "{:.1} GiB", b / (1u64 << 30) as f64),
            n if n >= 1 << 20 => write!(f, "{:.1} MiB", b / (1u64 << 20) as f64),
            n if n >= 1 << 10 => write!(f, "{:.1} KiB", b / 1024.0),
            n => write!(f, "{n} B"),
        }
    }
}

/// The cgroup limit in a `memory.max` (v2) or `memory.limit_in_bytes` (v1) file:
/// `max`, or v1's "no limit" (a page-rounded i64::MAX), is none.
pub fn parse_cgroup_limit(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    t.parse::<u64>().ok().filter(|&n| n < 1 << 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_and_decimal_suffixes() {
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size(" 64 KiB ").unwrap(), 64 << 10);
        assert_eq!(parse_size("1TiB").unwrap(), 1_099_511_627_776);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5 parsecs").is_err());
    }

    #[test]
    fn the_cgroup_limit_is_a_number_or_none() {
        assert_eq!(parse_cgroup_limit("3758096384\n"), Some(3758096384));
        assert_eq!(parse_cgroup_limit("max\n"), None);
        assert_eq!(parse_cgroup_limit("9223372036854771712"), None);
        // 2^60 bytes and above read as no limit; just below is a limit.
        assert_eq!(parse_cgroup_limit("1152921504606846976"), None);
        assert_eq!(
            parse_cgroup_limit("1152921504606846975"),
            Some(1_152_921_504_606_846_975)
        );
    }

    #[test]
    fn a_cgroup_limit_keeps_an_eighth_as_headroom_and_jobs_divide_it() {
        let m = Memory::from_cgroup(Some(4 << 30), 2);
        assert_eq!(m.total, Some((4 << 30) - (512 << 20)));
        assert_eq!(
            m.per_run(),
            Some(((4 << 30) - (512 << 20) - PROCESS_BASE) / 2)
        );
        let share = m.index_share(80 << 20).unwrap();
        assert_eq!(share, m.per_run().unwrap() - RUN_BASE - (80 << 20));
        // A small limit still keeps 64 MiB.
        let small = Memory::from_cgroup(Some(256 << 20), 1);
        assert_eq!(small.total, Some(192 << 20));
        assert_eq!(Memory::from_cgroup(None, 4).per_run(), None);
    }

    #[test]
    fn a_budget_too_small_says_what_it_needs() {
        let m = Memory::from_flag(100 << 20, 4);
        let e = m.check(0).unwrap_err();
        assert!(e.contains("--jobs 4"), "{e}");
        // 48 MiB for the process, then per run 64 MiB of buffers and an 8 MiB index.
        assert!(e.ends_with("give at least 336.0 MiB"), "{e}");
        assert!(
            Memory::from_flag(336 << 20, 4).check(0).is_ok(),
            "what it asks for runs"
        );
        assert!(Memory::from_flag((336 << 20) - 4, 4).check(0).is_err());
        // S3 parts in flight (16 MiB) count against each run's share too.
        let e = Memory::from_flag(100 << 20, 1).check(16 << 20).unwrap_err();
        assert!(e.ends_with("give at least 136.0 MiB"), "{e}");
        assert!(Memory::from_flag(256 << 20, 1).check(0).is_ok());
        assert!(Memory::from_cgroup(None, 8).check(1 << 30).is_ok());
    }

    #[test]
    fn small_inputs_share_a_run_and_large_ones_take_a_whole_share() {
        let m = Memory::from_flag(1 << 30, 2);
        let slot = m.slot();
        assert_eq!(slot, ((1 << 30) - PROCESS_BASE) / 2);
        // 216 KB, a thousand events: charged its estimated content four times over.
        let small = m.charge(216_000);
        assert_eq!(small, SMALL_RUN_BASE + 4 * 10 * 216_000);
        assert_eq!(
            small,
            4_194_304 + 8_640_000,
            "4 MiB and four times its content"
        );
        assert!(
            (2 * slot) / small >= IN_FLIGHT as u64,
            "sixteen such inputs fit in two runs' budgets"
        );
        // A day of a gigabyte takes a whole run's share, never more.
        assert_eq!(m.charge(1 << 30), slot);
        assert_eq!(m.charge(u64::MAX), slot);
        // Without a budget, a nominal share decides what is small.
        let u = Memory::from_cgroup(None, 1);
        assert_eq!(u.charge(1 << 30), UNBUDGETED_RUN);
        assert!(u.charge(216_000) < UNBUDGETED_RUN / 16);
    }

    #[test]
    fn byte_counts_read_as_people_read_them() {
        assert_eq!(Bytes(100).to_string(), "100 B");
        assert_eq!(Bytes(2048).to_string(), "2.0 KiB");
        assert_eq!(Bytes(3 << 19).to_string(), "1.5 MiB");
        assert_eq!(Bytes(5 << 30).to_string(), "5.0 GiB");
    }

    #[test]
    fn inputs_in_flight_are_jobs_when_given() {
        assert_eq!(Memory::from_flag(1 << 30, 1).in_flight(false), IN_FLIGHT);
        assert_eq!(Memory::from_flag(1 << 30, 1).in_flight(true), 1);
        assert_eq!(Memory::from_flag(64 << 30, 64).in_flight(true), 64);
    }

    #[test]
    fn the_description_says_where_the_budget_came_from() {
        let d = Memory::from_flag(256 << 20, 1).describe(0);
        assert!(d.starts_with("256.0 MiB from --max-memory"), "{d}");
        let c = Memory::from_cgroup(Some(3584 << 20), 1).describe(0);
        assert!(c.contains("cgroup memory limit 3.5 GiB"), "{c}");
        assert!(Memory::from_cgroup(None, 1)
            .describe(0)
            .starts_with("unlimited"));
    }
}
