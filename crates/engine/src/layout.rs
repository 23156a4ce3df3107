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
