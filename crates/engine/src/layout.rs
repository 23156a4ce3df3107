//! The lake layout (docs/interface.md section 4): the one place that names the keys
//! of the raw zone, quarantine, checkpoints, leases and run records, and reads those
//! names back from a listing. Staged bytes are the store's business (see
//! [`crate::store::Lake::stage`]); joining a key to a location is
//! [`crate::store::Location::join`].

use crate::compression::OutputCompression;

/// The lake's zones, the first segment of every key. Readers are granted `raw/` (and
/// `quarantine/` for data owners); everything the job uses to coordinate lives in
/// the other zones.
pub const RAW: &str = "raw";
pub const QUARANTINE: &str = "quarantine";
pub const CHECKPOINTS: &str = "checkpoints";
pub const LOCKS: &str = "locks";
pub const RUNS: &str = "runs";

/// The readers' commit log of a product sits in its raw folder, under a name that
/// engines and globs skip (a leading `_`, as Delta's `_delta_log/`): a glob of
/// `raw/<product>/*.jsonl` still sees only published data.
pub const LOG_FOLDER: &str = "_landing_log";
/// Digits of an entry's sequence number in its name: every `u64`, zero-padded, so
/// that listing order is commit order.
const SEQUENCE_DIGITS: usize = 20;

/// What follows the input name in its checkpoint's and its lease's file names, and
/// the run id in a run record's.
const CHECKPOINT_SUFFIX: &str = ".json";
const LOCK_SUFFIX: &str = ".lock";
const RUN_RECORD_SUFFIX: &str = ".json";

/// The folders of one product, relative to the lake's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folders {
    pub raw: String,
    pub quarantine: String,
    pub checkpoints: String,
    pub locks: String,
    pub runs: String,
}

impl Folders {
    pub fn of(product: &str) -> Self {
        Folders {
            raw: format!("{RAW}/{product}"),
            quarantine: format!("{QUARANTINE}/{product}"),
            checkpoints: format!("{CHECKPOINTS}/{product}"),
            locks: format!("{LOCKS}/{product}"),
            runs: format!("{RUNS}/{product}"),
        }
    }

    /// The input whose checkpoint a file listed in `checkpoints` is; `None` for a
    /// temp file or anything else.
    pub fn checkpoint_input(file_name: &str) -> Option<&str> {
        named(file_name, CHECKPOINT_SUFFIX)
    }

    /// The input whose lease a file listed in `locks` is.
    pub fn lock_input(file_name: &str) -> Option<&str> {
        named(file_name, LOCK_SUFFIX)
    }

    /// The run whose record a file listed in one input's run records is.
    pub fn run_record_id(file_name: &str) -> Option<&str> {
        named(file_name, RUN_RECORD_SUFFIX)
    }
}

/// `file_name` without `suffix`; hidden names are temp files of the job, never records.
fn named<'a>(file_name: &'a str, suffix: &str) -> Option<&'a str> {
    file_name
        .strip_suffix(suffix)
        .filter(|_| !file_name.starts_with('.'))
}

/// Where one input's objects live in the lake.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The published events: `raw/<product>/<input name>`, plus `.gz` or `.zst`
    /// when they are stored compressed ([`Layout::published_as`]).
    pub raw: String,
    /// The quarantined lines' records: `quarantine/<product>/<input name>.rejects.jsonl`.
    pub quarantine: String,
    /// The record of the last success: `checkpoints/<product>/<input name>.json`.
    pub checkpoint: String,
    /// The lease: `locks/<product>/<input name>.lock`.
    pub lock: String,
    /// The run records' folder: `runs/<product>/<input name>`.
    pub runs: String,
    pub input_name: String,
    raw_folder: String,
}

impl Layout {
    pub fn new(product: &str, input_name: &str) -> Self {
        let f = Folders::of(product);
        Layout {
            raw: format!("{}/{input_name}", f.raw),
            quarantine: format!("{}/{input_name}.rejects.jsonl", f.quarantine),
            checkpoint: format!("{}/{input_name}{CHECKPOINT_SUFFIX}", f.checkpoints),
            lock: format!("{}/{input_name}{LOCK_SUFFIX}", f.locks),
            runs: format!("{}/{input_name}", f.runs),
            input_name: input_name.to_owned(),
            raw_folder: f.raw,
        }
    }

    /// The same input with its published events stored as `c` says (the input's
    /// name plus `.gz` or `.zst`); the other keys do not change.
    pub fn published_as(mut self, c: OutputCompression) -> Self {
        self.raw = self.raw_as(c);
        self
    }

    /// The published key of this input when stored as `c`.
    pub fn raw_as(&self, c: OutputCompression) -> String {
        format!("{}/{}{}", self.raw_folder, self.input_name, c.suffix())
    }

    /// Every key a run of this input writes through staging or a temp file: what a
    /// sweep of its leftovers covers (the published key in every stored form, so a
    /// run under another `--output-compression` still sweeps them).
    pub fn written(&self) -> Vec<String> {
        let mut keys: Vec<String> = OutputCompression::ALL
            .iter()
            .map(|&c| self.raw_as(c))
            .collect();
        keys.extend([self.quarantine.clone(), self.checkpoint.clone()]);
        keys
    }

    /// The key of one run's record.
    pub fn run_record(&self, run_id: &str) -> String {
        format!("{}/{run_id}{RUN_RECORD_SUFFIX}", self.runs)
    }
}

/// The keys of one product's commit log (docs/interface.md section 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogKeys {
    /// `raw/<product>/_landing_log`.
    pub folder: String,
    /// The hint of the latest sequence number: `<folder>/_last`.
    pub last: String,
    /// Where snapshots of every key's latest entry go: `<folder>/_snapshots`.
    pub snapshots: String,
}

impl LogKeys {
    pub fn of(product: &str) -> Self {
        let folder = format!("{}/{LOG_FOLDER}", Folders::of(product).raw);
        LogKeys {
            last: format!("{folder}/_last"),
            snapshots: format!("{folder}/_snapshots"),
            folder,
        }
    }

    /// Entry `sequence`: `<folder>/00000000000000000042.json`.
    pub fn entry(&self, sequence: u64) -> String {
        format!("{}/{sequence:0SEQUENCE_DIGITS$}.json", self.folder)
    }

    /// The snapshot taken at entry `sequence`.
    pub fn snapshot(&self, sequence: u64) -> String {
        format!("{}/{sequence:0SEQUENCE_DIGITS$}.json", self.snapshots)
    }

    /// The sequence number a file listed in the log's folder (or its snapshots') is
    /// named for; `None` for the hint, temp files or anything else.
    pub fn sequence_of(file_name: &str) -> Option<u64> {
        let digits = file_name.strip_suffix(".json")?;
        if digits.len() != SEQUENCE_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys docs/interface.md promises; downstream jobs and IAM policies name them.
    #[test]
    fn keys_match_the_documented_layout() {
        let l = Layout::new("progress", "day.jsonl");
        assert_eq!(l.raw, "raw/progress/day.jsonl");
        assert_eq!(l.quarantine, "quarantine/progress/day.jsonl.rejects.jsonl");
        assert_eq!(l.checkpoint, "checkpoints/progress/day.jsonl.json");
        assert_eq!(l.lock, "locks/progress/day.jsonl.lock");
        assert_eq!(l.run_record("r-1"), "runs/progress/day.jsonl/r-1.json");
        let gz = l.clone().published_as(OutputCompression::Gzip);
        assert_eq!(gz.raw, "raw/progress/day.jsonl.gz");
        assert_eq!(gz.checkpoint, l.checkpoint, "one checkpoint per input");
        let zst = l.clone().published_as(OutputCompression::Zstd);
        assert_eq!(zst.raw, "raw/progress/day.jsonl.zst");
        assert_eq!(zst.lock, l.lock, "one lease per input");
        assert!(l.written().contains(&gz.raw) && gz.written().contains(&l.raw));
        let log = LogKeys::of("progress");
        assert_eq!(
            log.entry(42),
            "raw/progress/_landing_log/00000000000000000042.json"
        );
        assert_eq!(log.last, "raw/progress/_landing_log/_last");
        assert_eq!(
            log.snapshot(1000),
            "raw/progress/_landing_log/_snapshots/00000000000000001000.json"
        );
        assert_eq!(
            log.entry(u64::MAX),
            "raw/progress/_landing_log/18446744073709551615.json"
        );
    }

    /// Entry names read back as their numbers, and sort as they do.
    #[test]
    fn log_entry_names_read_back_in_commit_order() {
        let log = LogKeys::of("p");
        let file = |n: u64| log.entry(n).rsplit('/').next().unwrap().to_owned();
        for n in [0, 1, 9, 10, 99_999, u64::MAX] {
            assert_eq!(LogKeys::sequence_of(&file(n)), Some(n));
        }
        assert!(file(9) < file(10) && file(99_999) < file(100_000));
        assert_eq!(LogKeys::sequence_of("_last"), None);
        assert_eq!(LogKeys::sequence_of("42.json"), None);
        assert_eq!(
            LogKeys::sequence_of(".00000000000000000042.json.tmp-1"),
            None
        );
        assert_eq!(LogKeys::sequence_of("0000000000000000004x.json"), None);
    }

    /// A listing reads back the names the keys were made of; temp files are none.
    #[test]
    fn listed_names_read_back() {
        let l = Layout::new("progress", "day.jsonl");
        let file = |key: &str| key.rsplit('/').next().unwrap().to_owned();
        assert_eq!(
            Folders::checkpoint_input(&file(&l.checkpoint)),
            Some("day.jsonl")
        );
        assert_eq!(Folders::lock_input(&file(&l.lock)), Some("day.jsonl"));
        assert_eq!(
            Folders::run_record_id(&file(&l.run_record("r-1"))),
            Some("r-1")
        );
        assert_eq!(Folders::checkpoint_input(".day.jsonl.json.tmp-1"), None);
        assert_eq!(Folders::lock_input(".day.jsonl.lock"), None);
        assert_eq!(Folders::lock_input("day.jsonl.lock.cas"), None);
    }
}
