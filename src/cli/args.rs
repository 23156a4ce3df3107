//! The command line's arguments (clap), each flag with its `LANDING_*` variable;
//! `settings.rs` validates them into the engine's settings and the run's hooks.
//! Defaults are named constants shared with the settings.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use landing_engine::compression::{OutputCompression, DEFAULT_MAX_DECOMPRESSED};
use landing_engine::config::{ContractSource, DEFAULT_LEASE_TTL, DEFAULT_LEASE_WAIT};
use landing_engine::progress::Mode as ProgressMode;
use landing_store::s3::{defaults, ChecksumMode, ConditionalCopy};

use super::choice::choice;
use super::hooks::{LineHooks, RunHooks};

/// Log format on stderr (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// A checksum mode as `--s3-request-checksum` and `--s3-response-checksum` list it.
fn checksum_mode(mode: ChecksumMode) -> PossibleValue {
    let value = PossibleValue::new(mode.name()).alias(mode.alias());
    match mode {
        ChecksumMode::WhenSupported => value
            .help("The SDK's spelling (`when_supported`), as in AWS_REQUEST_CHECKSUM_CALCULATION"),
        ChecksumMode::WhenRequired => value,
    }
}

/// `--log-format`, the same on every command that logs.
#[derive(Debug, Clone, Args)]
pub struct LogFormatArg {
    /// Log format on stderr.
    #[arg(
        long,
        env = "LANDING_LOG_FORMAT",
        value_enum,
        default_value = "text",
        help_heading = "Logging"
    )]
    pub log_format: LogFormat,
}

/// Options shared by `run` and `check`.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Input: a local path or s3://bucket/key (`run` takes --inbox instead for many).
    #[arg(long, env = "LANDING_INPUT", help_heading = "Input")]
    pub input: Option<String>,

    /// Product name: selects the contract and the lake prefixes (default: the
    /// --contract file's name, else progress).
    #[arg(long, env = "LANDING_PRODUCT", help_heading = "Input")]
    pub product: Option<String>,

    #[command(flatten)]
    pub contract: ContractArgs,

    /// Longest accepted line in bytes; longer lines are quarantined as
    /// line_too_long (default: the contract's max_line_bytes).
    #[arg(long, env = "LANDING_MAX_LINE_BYTES", help_heading = "Limits")]
    pub max_line_bytes: Option<usize>,

    /// A gzip or zstd input whose content decodes to more bytes than this is refused
    /// as a likely bomb (decompressed_too_large). Default 1 TiB.
    #[arg(long, env = "LANDING_MAX_DECOMPRESSED_BYTES", default_value_t = DEFAULT_MAX_DECOMPRESSED, help_heading = "Limits")]
    pub max_decompressed_bytes: u64,

    /// Quarantined lines tolerated before the file is refused (0: fail closed).
    #[arg(
        long,
        env = "LANDING_MAX_REJECTED_LINES",
        default_value_t = 0,
        help_heading = "Limits"
    )]
    pub max_rejected_lines: u64,

    /// Memory budget of the process (`512MiB`, `3GiB`, bytes, or `unlimited`). By
    /// default the cgroup memory limit less headroom, else unlimited. Past its share
    /// the dedup index spills to --scratch-dir; --jobs divides the budget.
    #[arg(long, env = "LANDING_MAX_MEMORY", help_heading = "Limits")]
    pub max_memory: Option<String>,

    /// Folder for the dedup index's spill runs (default: the system temp folder).
    #[arg(long, env = "LANDING_SCRATCH_DIR", help_heading = "Limits")]
    pub scratch_dir: Option<PathBuf>,

    #[command(flatten)]
    pub line_hooks: LineHooks,

    #[command(flatten)]
    pub log: LogFormatArg,

    /// Log filter (tracing-subscriber syntax, e.g. `info` or `landing=debug`).
    /// Default `info`; `warn` at a terminal showing progress bars, where each input's
    /// result line already says what an INFO line would. -v and -q override it.
    #[arg(long, env = "LANDING_LOG_LEVEL", help_heading = "Logging")]
    pub log_level: Option<String>,

    #[command(flatten)]
    pub s3: S3Args,
}

/// Options of `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Lake root: a folder (created if missing) or s3://bucket/prefix.
    #[arg(
        long,
        env = "LANDING_LAKE",
        default_value = "./lake",
        help_heading = "Lake"
    )]
    pub lake: String,

    /// Seconds a lease lives without renewal; a dead holder blocks no longer than this.
    #[arg(long, env = "LANDING_LEASE_TTL", default_value_t = DEFAULT_LEASE_TTL, help_heading = "Lake")]
    pub lease_ttl: u64,

    /// Seconds to wait for an input whose lease another run holds (polling with
    /// jittered backoff until it is released or expires) before answering busy (75).
    /// An inbox run lands the free inputs first, then waits for the busy ones.
    #[arg(long, env = "LANDING_LEASE_WAIT", default_value_t = DEFAULT_LEASE_WAIT, help_heading = "Lake")]
    pub lease_wait: u64,

    /// How published objects are stored: none (plain JSONL), gzip (level 6, the
    /// name gets `.gz`) or zstd (level 3, `.zst`). The checkpoint records it;
    /// changing it republishes each input under its new name on its next run.
    #[arg(
        long,
        env = "LANDING_OUTPUT_COMPRESSION",
        value_parser = choice(&OutputCompression::ALL, |c| c.name().into()),
        default_value = "none",
        help_heading = "Lake"
    )]
    pub output_compression: OutputCompression,

    /// Sweep leftovers (staging objects, temp files) of crashed runs older than this many seconds.
    #[arg(
        long,
        env = "LANDING_SWEEP_AGE",
        default_value_t = 0,
        help_heading = "Lake"
    )]
    pub sweep_age: u64,

    /// Show a progress bar on a terminal (auto), always, or never.
    #[arg(
        long,
        env = "LANDING_PROGRESS",
        value_parser = choice(&ProgressMode::CHOICES, |p| p.name().into()),
        default_value = "auto",
        help_heading = "Output"
    )]
    pub progress: ProgressMode,

    /// Push the run's metrics to this Prometheus Pushgateway when it ends
    /// (http(s)://host:port); a failed push is logged and changes nothing else.
    #[arg(long, env = "LANDING_PUSHGATEWAY", help_heading = "Output")]
    pub pushgateway: Option<String>,

    /// Seconds the push may take at most (it never delays the exit longer).
    #[arg(long, env = "LANDING_PUSHGATEWAY_TIMEOUT", default_value_t = landing_engine::metrics::DEFAULT_TIMEOUT, help_heading = "Output")]
    pub pushgateway_timeout: u64,

    #[command(flatten)]
    pub run_hooks: RunHooks,

    #[command(flatten)]
    pub inbox: InboxArgs,

    /// Validate the whole configuration (flags and LANDING_* variables), print the
    /// resolved settings as one JSON line (no secrets) and exit 0, touching no store.
    #[arg(long, env = "LANDING_DRY_RUN")]
    pub dry_run: bool,
}

/// Options of an inbox run (`landing run --inbox`), docs/design.md section 6.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Inbox")]
pub struct InboxArgs {
    /// Land every file directly under this folder or s3://bucket/prefix/ (no recursion)
    /// instead of one --input.
    #[arg(long, env = "LANDING_INBOX")]
    pub inbox: Option<String>,

    /// Only names matching one of these globs, separated by commas (`*` any run of
    /// characters, `?` one character). Compressed inputs are told by their first
    /// bytes, not by their names.
    #[arg(long = "match", env = "LANDING_MATCH", default_value = landing_engine::shard::DEFAULT_MATCH)]
    pub pattern: String,

    /// Only inputs whose last modification is at least this many seconds old.
    #[arg(long, env = "LANDING_MIN_AGE", default_value_t = 0)]
    pub min_age: u64,

    /// Inputs landed at once, each with 1/N of the memory budget. Unset: bounded by memory, small inputs sharing one run's budget by their size (up to 16 at once).
    #[arg(long, env = "LANDING_JOBS")]
    pub jobs: Option<usize>,

    /// Take only shard I of N (`I/N`, 0 <= I < N) by a stable hash of the input name.
    #[arg(long, env = "LANDING_SHARD", conflicts_with = "shards")]
    pub shard: Option<String>,

    /// Number of shards in a Kubernetes Indexed Job; I comes from JOB_COMPLETION_INDEX.
    #[arg(long, env = "LANDING_SHARDS")]
    pub shards: Option<u64>,

    /// The pod's index in an Indexed Job (set by Kubernetes).
    #[arg(long, env = "JOB_COMPLETION_INDEX", hide = true)]
    pub job_completion_index: Option<u64>,

    /// Read and hash every input, even one whose listed size and identity equal the
    /// checkpoint's (no cheap skips), and re-land an unchanged input that was landed
    /// under another contract (name, version or file).
    #[arg(long, env = "LANDING_REHASH")]
    pub rehash: bool,
}

/// Options of `landing drill`.
#[derive(Debug, Clone, Args)]
pub struct DrillArgs {
    /// Lake to drill against: a folder or s3://bucket/prefix. The drill works in a
    /// scratch namespace `drills/<drill id>/` under it and removes it afterwards.
    #[arg(
        long,
        env = "LANDING_LAKE",
        default_value = "./lake",
        help_heading = "Lake"
    )]
    pub lake: String,

    /// Size of the generated input in MiB (use more than two S3 parts to drill
    /// the multipart path).
    #[arg(long, default_value_t = 12)]
    pub size_mib: u64,

    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Keep the scratch namespace for inspection.
    #[arg(long)]
    pub keep: bool,

    /// Store the generated inputs compressed (`drill.jsonl.gz` or `.zst`), as
    /// producers that compress write them.
    #[arg(
        long,
        value_parser = choice(&OutputCompression::ALL, |c| c.name().into()),
        default_value = "none"
    )]
    pub compress: OutputCompression,

    #[command(flatten)]
    pub log: LogFormatArg,

    /// Log filter (tracing-subscriber syntax); -v and -q override it.
    #[arg(
        long,
        env = "LANDING_LOG_LEVEL",
        default_value = "warn",
        help_heading = "Logging"
    )]
    pub log_level: String,

    #[command(flatten)]
    pub s3: S3Args,
}

/// Lease TTL (seconds) of the drill's child runs.
pub(super) const DRILL_LEASE_TTL: u64 = 6;
/// Options of `landing status` and `landing verify` (both only read).
#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    /// Lake root: a folder or s3://bucket/prefix.
    #[arg(
        long,
        env = "LANDING_LAKE",
        default_value = "./lake",
        help_heading = "Lake"
    )]
    pub lake: String,

    /// Product whose checkpoints are examined (default: the --contract file's
    /// name, else progress).
    #[arg(long, env = "LANDING_PRODUCT")]
    pub product: Option<String>,

    #[command(flatten)]
    pub contract: ContractArgs,

    /// Print JSON instead of a table (status) or text lines (verify).
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub log: LogFormatArg,

    /// Log filter; -v and -q override it. (The SDK warns on every GET of an object
    /// with a multipart checksum, which `verify --deep` reads by design: quiet by
    /// default.)
    #[arg(
        long,
        env = "LANDING_LOG_LEVEL",
        default_value = "warn,aws_sdk_s3::http_response_checksum=error",
        help_heading = "Logging"
    )]
    pub log_level: String,

    #[command(flatten)]
    pub s3: S3Args,
}

/// Where the product's contract comes from (docs/contracts.md).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Input")]
pub struct ContractArgs {
    /// The product's contract file (JSON). Default: --contracts-dir, else the
    /// contract built into the binary (progress).
    #[arg(long, env = "LANDING_CONTRACT")]
    pub contract: Option<PathBuf>,

    /// A folder of contract files, `<product>.json` each (a ConfigMap on k8s).
    #[arg(long, env = "LANDING_CONTRACTS_DIR")]
    pub contracts_dir: Option<PathBuf>,
}

impl ContractArgs {
    pub fn source(&self) -> ContractSource<'_> {
        ContractSource {
            file: self.contract.as_deref(),
            dir: self.contracts_dir.as_deref(),
        }
    }
}

/// S3 options; ignored for local inputs and lakes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "S3")]
pub struct S3Args {
    /// Path-style addressing (MinIO, LocalStack, SeaweedFS).
    #[arg(long, env = "LANDING_S3_FORCE_PATH_STYLE")]
    pub s3_force_path_style: bool,

    /// Multipart part size in MiB (5 MiB minimum for all parts but the last).
    #[arg(long, env = "LANDING_S3_PART_SIZE_MIB", default_value_t = defaults::PART_SIZE_MIB)]
    pub s3_part_size_mib: u64,

    /// Parts uploaded concurrently while parsing continues.
    #[arg(long, env = "LANDING_S3_UPLOAD_CONCURRENCY", default_value_t = defaults::UPLOAD_CONCURRENCY)]
    pub s3_upload_concurrency: usize,

    /// Objects larger than this many bytes are promoted with UploadPartCopy instead of
    /// CopyObject (S3 allows at most 5 GiB in one CopyObject).
    #[arg(long, env = "LANDING_S3_COPY_THRESHOLD", default_value_t = defaults::COPY_THRESHOLD)]
    pub s3_copy_threshold: u64,

    /// Maximum attempts per S3 request (SDK standard retry mode).
    #[arg(long, env = "LANDING_S3_MAX_ATTEMPTS", default_value_t = defaults::MAX_ATTEMPTS)]
    pub s3_max_attempts: u32,

    /// Seconds an S3 operation may take, all its retries included (streaming bodies
    /// are bounded by --s3-read-timeout instead).
    #[arg(long, env = "LANDING_S3_OPERATION_TIMEOUT", default_value_t = defaults::OPERATION_TIMEOUT)]
    pub s3_operation_timeout: u64,

    /// Seconds one attempt of an S3 request may take. This bounds how long a request
    /// can stay in flight on the server, so --lease-ttl must exceed it.
    #[arg(long, env = "LANDING_S3_ATTEMPT_TIMEOUT", default_value_t = defaults::ATTEMPT_TIMEOUT)]
    pub s3_attempt_timeout: u64,

    /// Fence promotions with copy destination conditions: auto (probe the store and
    /// use them where they are honoured safely), on (refuse to start otherwise), off.
    #[arg(
        long,
        env = "LANDING_S3_CONDITIONAL_COPY",
        value_parser = choice(&ConditionalCopy::ALL, |c| c.name().into()),
        default_value = defaults::CONDITIONAL_COPY
    )]
    pub s3_conditional_copy: ConditionalCopy,

    /// Seconds a streaming read may stall before the run fails (the SDK has no body timeout).
    #[arg(long, env = "LANDING_S3_READ_TIMEOUT", default_value_t = defaults::READ_TIMEOUT)]
    pub s3_read_timeout: u64,

    /// Checksum calculation on requests (also AWS_REQUEST_CHECKSUM_CALCULATION).
    #[arg(
        long,
        env = "AWS_REQUEST_CHECKSUM_CALCULATION",
        value_parser = choice(&ChecksumMode::ALL, checksum_mode),
        ignore_case = true
    )]
    pub s3_request_checksum: Option<ChecksumMode>,

    /// Checksum validation on responses (also AWS_RESPONSE_CHECKSUM_VALIDATION).
    #[arg(
        long,
        env = "AWS_RESPONSE_CHECKSUM_VALIDATION",
        value_parser = choice(&ChecksumMode::ALL, checksum_mode),
        ignore_case = true
    )]
    pub s3_response_checksum: Option<ChecksumMode>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use landing_engine::config::RunPlan;

    fn run_args(flags: &[&str]) -> RunArgs {
        use clap::Parser;
        let mut line = vec!["landing", "run", "--input", "x"];
        line.extend(flags);
        match crate::cli::Cli::try_parse_from(line).unwrap().command {
            crate::cli::Command::Run(run) => run,
            _ => panic!("not a run"),
        }
    }

    /// Each name a choice flag lists parses to the value of that name; the checksum
    /// flags also take the hyphenated alias, in any case.
    #[test]
    fn choice_flags_take_each_value_by_its_name() {
        for c in OutputCompression::ALL {
            let run = run_args(&["--output-compression", c.name()]);
            assert_eq!(run.output_compression, c);
        }
        for p in ProgressMode::CHOICES {
            assert_eq!(run_args(&["--progress", p.name()]).progress, p);
        }
        for c in ConditionalCopy::ALL {
            let run = run_args(&["--s3-conditional-copy", c.name()]);
            assert_eq!(run.common.s3.s3_conditional_copy, c);
        }
        for m in ChecksumMode::ALL {
            let upper = m.alias().to_uppercase();
            for given in [m.name(), m.alias(), &upper] {
                let run = run_args(&["--s3-request-checksum", given]);
                assert_eq!(run.common.s3.s3_request_checksum, Some(m), "{given}");
            }
        }
        let run = run_args(&[]);
        assert_eq!(run.output_compression, OutputCompression::None);
        assert_eq!(run.progress, ProgressMode::Auto);
        assert_eq!(run.common.s3.s3_conditional_copy, ConditionalCopy::Auto);
        assert_eq!(run.common.s3.s3_request_checksum, None);
    }

    /// Every S3 setting of `landing drill` reaches its child runs (their command lines
    /// once silently dropped the checksum modes).
    #[test]
    fn drill_forwards_every_s3_setting_to_its_children() {
        use clap::Parser;
        let drill = crate::cli::Cli::try_parse_from([
            "landing",
            "drill",
            "--lake",
            "s3://b/p",
            "--s3-force-path-style",
            "--s3-part-size-mib",
            "7",
            "--s3-upload-concurrency",
            "3",
            "--s3-copy-threshold",
            "12345",
            "--s3-max-attempts",
            "4",
            "--s3-operation-timeout",
            "99",
            "--s3-attempt-timeout",
            "2",
            "--s3-read-timeout",
            "17",
            "--s3-conditional-copy",
            "off",
            "--s3-request-checksum",
            "when_required",
            "--s3-response-checksum",
            "when_required",
        ])
        .unwrap();
        let crate::cli::Command::Drill(args) = drill.command else {
            panic!("not a drill")
        };
        let d = args.config().unwrap();
        let mut child = vec![
            "landing",
            "run",
            "--input",
            "/in/a.jsonl",
            "--lake",
            "s3://b/p",
        ];
        child.extend(d.child_args.iter().map(String::as_str));
        let run = crate::cli::Cli::try_parse_from(child).unwrap();
        let crate::cli::Command::Run(run) = run.command else {
            panic!("not a run")
        };
        let RunPlan::Single(c) = run.plan().unwrap() else {
            panic!("not a single-input run")
        };
        // Each value given to the drill arrives in the child as given...
        let s3 = &c.s3;
        assert!(s3.force_path_style);
        assert_eq!(s3.part_size, 7 << 20);
        assert_eq!(s3.upload_concurrency, 3);
        assert_eq!(s3.copy_threshold, 12345);
        assert_eq!(s3.max_attempts, 4);
        assert_eq!(s3.operation_timeout, std::time::Duration::from_secs(99));
        assert_eq!(s3.attempt_timeout, std::time::Duration::from_secs(2));
        assert_eq!(s3.read_timeout, std::time::Duration::from_secs(17));
        assert_eq!(s3.conditional_copy, ConditionalCopy::Off);
        assert_eq!(s3.request_checksum, Some(ChecksumMode::WhenRequired));
        assert_eq!(s3.response_checksum, Some(ChecksumMode::WhenRequired));
        // ...and whole structs: a setting added later and not forwarded fails here.
        assert_eq!(c.s3, d.s3);
        // A short lease, and a wait long enough to take a crashed child's over: its
        // TTL (6 s) plus the margin (the attempt timeout, 2 s) plus a 5 s poll.
        assert_eq!(c.lease_ttl, std::time::Duration::from_secs(6));
        assert_eq!(c.lease_wait, std::time::Duration::from_secs(18));
        assert!(
            c.lease_wait >= c.lease_ttl + s3.attempt_timeout + std::time::Duration::from_secs(5)
        );
    }
}
