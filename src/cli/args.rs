//! The command line's arguments (clap), each flag with its `LANDING_*` variable, and
//! their validation into the settings of `config` and the hooks of
//! `hook`. Defaults are named constants shared with the settings.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::budget::{parse_cgroup_limit, parse_size, Memory};
use crate::compression::{OutputCompression, DEFAULT_MAX_DECOMPRESSED};
use crate::config::{
    input_name, resolve_contract, AuditConfig, Config, ContractSource, DrillConfig, InboxConfig,
    Progress, RunPlan, DEFAULT_LEASE_TTL, DEFAULT_LEASE_WAIT,
};
use crate::error::{Error, Result};
use crate::hook::{CrashPoint, FreezePoint, Hooks, PausePoint};
use crate::store::s3::{defaults, ChecksumMode, ConditionalCopy, S3Options, PART_SIZE_MIB_RANGE};
use crate::store::Location;

/// Log format on stderr (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
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

    /// Test hook: spill the dedup index every N distinct events (and N records).
    #[arg(long, env = "LANDING_TEST_SPILL_EVERY", hide = true)]
    pub spill_every: Option<usize>,

    /// Test hook: keep only N bits of each id digest, so distinct ids share digests.
    #[arg(long, env = "LANDING_TEST_ID_DIGEST_BITS", hide = true)]
    pub id_digest_bits: Option<u32>,

    /// Log format on stderr.
    #[arg(
        long,
        env = "LANDING_LOG_FORMAT",
        value_enum,
        default_value = "text",
        help_heading = "Logging"
    )]
    pub log_format: LogFormat,

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
        value_enum,
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
        default_value = "auto",
        help_heading = "Output"
    )]
    pub progress: Progress,

    /// Push the run's metrics to this Prometheus Pushgateway when it ends
    /// (http(s)://host:port); a failed push is logged and changes nothing else.
    #[arg(long, env = "LANDING_PUSHGATEWAY", help_heading = "Output")]
    pub pushgateway: Option<String>,

    /// Seconds the push may take at most (it never delays the exit longer).
    #[arg(long, env = "LANDING_PUSHGATEWAY_TIMEOUT", default_value_t = crate::metrics::DEFAULT_TIMEOUT, help_heading = "Output")]
    pub pushgateway_timeout: u64,

    /// Drill hook: abort the process at a named point (crash drills and tests).
    #[arg(long, env = "LANDING_CRASH_AT", hide = true)]
    pub crash_at: Option<CrashPoint>,

    /// Test hook: pause at a named point until a line arrives on stdin.
    #[arg(long, env = "LANDING_PAUSE_AT", hide = true, value_enum)]
    pub pause_at: Option<PausePoint>,

    /// Test hook: stop the process (SIGSTOP) inside a named write.
    #[arg(long, env = "LANDING_FREEZE_AT", hide = true, value_enum)]
    pub freeze_at: Option<FreezePoint>,
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
    #[arg(long = "match", env = "LANDING_MATCH", default_value = crate::shard::DEFAULT_MATCH)]
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
    #[arg(long, value_enum, default_value = "none")]
    pub compress: OutputCompression,

    /// Log format on stderr.
    #[arg(
        long,
        env = "LANDING_LOG_FORMAT",
        value_enum,
        default_value = "text",
        help_heading = "Logging"
    )]
    pub log_format: LogFormat,

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
const DRILL_LEASE_TTL: u64 = 6;
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

    /// Log format on stderr.
    #[arg(
        long,
        env = "LANDING_LOG_FORMAT",
        value_enum,
        default_value = "text",
        help_heading = "Logging"
    )]
    pub log_format: LogFormat,

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
        value_enum,
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
        value_enum,
        ignore_case = true
    )]
    pub s3_request_checksum: Option<ChecksumMode>,

    /// Checksum validation on responses (also AWS_RESPONSE_CHECKSUM_VALIDATION).
    #[arg(
        long,
        env = "AWS_RESPONSE_CHECKSUM_VALIDATION",
        value_enum,
        ignore_case = true
    )]
    pub s3_response_checksum: Option<ChecksumMode>,
}

impl S3Args {
    /// Validate the S3 flags.
    pub fn options(&self) -> Result<S3Options> {
        if !PART_SIZE_MIB_RANGE.contains(&self.s3_part_size_mib) {
            return Err(Error::Config(format!(
                "--s3-part-size-mib must be between {} and {} (S3 multipart limits), got {}",
                PART_SIZE_MIB_RANGE.start(),
                PART_SIZE_MIB_RANGE.end(),
                self.s3_part_size_mib
            )));
        }
        if self.s3_upload_concurrency == 0 || self.s3_max_attempts == 0 {
            return Err(Error::Config(
                "--s3-upload-concurrency and --s3-max-attempts must be at least 1".into(),
            ));
        }
        Ok(S3Options {
            force_path_style: self.s3_force_path_style,
            part_size: (self.s3_part_size_mib << 20) as usize,
            upload_concurrency: self.s3_upload_concurrency,
            copy_threshold: self.s3_copy_threshold,
            max_attempts: self.s3_max_attempts,
            operation_timeout: Duration::from_secs(self.s3_operation_timeout.max(1)),
            attempt_timeout: Duration::from_secs(self.s3_attempt_timeout.max(1)),
            conditional_copy: self.s3_conditional_copy,
            read_timeout: Duration::from_secs(self.s3_read_timeout.max(1)),
            request_checksum: self.s3_request_checksum,
            response_checksum: self.s3_response_checksum,
            ..S3Options::default()
        })
    }
}

impl RunArgs {
    /// The crash and pause hooks of this run (hidden flags; normally none).
    pub fn hooks(&self) -> Hooks {
        Hooks {
            crash_at: self.crash_at,
            pause_at: self.pause_at,
            freeze_at: self.freeze_at,
            ..self.common.hooks()
        }
    }

    /// Validate `landing run`'s arguments (every LANDING_* variable included).
    pub fn plan(&self) -> Result<RunPlan> {
        let a = self;
        let i = &a.inbox;
        match (&a.common.input, &i.inbox) {
            (Some(_), Some(_)) => Err(Error::Config(
                "give either --input (one file) or --inbox (a folder or prefix), not both".into(),
            )),
            (None, None) => Err(Error::Config(
                "give --input (one file) or --inbox (a folder or prefix)".into(),
            )),
            (Some(input), None) => {
                if i.shard.is_some() || i.shards.is_some() {
                    return Err(Error::Config("--shard and --shards need --inbox".into()));
                }
                Ok(RunPlan::Single(a.config(Location::parse(input)?)?))
            }
            (None, Some(inbox)) => {
                let inbox = absolute(Location::parse(inbox)?, "--inbox")?;
                if i.jobs.is_some_and(|j| j == 0 || j > 256) {
                    return Err(Error::Config("--jobs must be between 1 and 256".into()));
                }
                let shard = match (&i.shard, i.shards) {
                    (Some(s), _) => Some(s.parse::<crate::shard::Shard>().map_err(Error::Config)?),
                    (None, Some(n)) => {
                        let index = i.job_completion_index.ok_or_else(|| {
                            Error::Config(
                                "--shards needs JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job)"
                                    .into(),
                            )
                        })?;
                        Some(crate::shard::Shard::new(index, n).map_err(Error::Config)?)
                    }
                    (None, None) => None,
                };
                let mut base = a.config(inbox.clone())?;
                base.reland_other_contract = i.rehash;
                base.memory = a.common.memory(i.jobs.unwrap_or(1))?;
                base.memory
                    .check(base.parts_in_flight())
                    .map_err(Error::Config)?;
                Ok(RunPlan::Inbox(InboxConfig {
                    base,
                    inbox,
                    pattern: crate::shard::Glob::new(&i.pattern).map_err(Error::Config)?,
                    min_age: Duration::from_secs(i.min_age),
                    jobs: i.jobs,
                    shard,
                    rehash: i.rehash,
                }))
            }
        }
    }
}

impl AuditArgs {
    /// Validate `status` and `verify` arguments.
    pub fn config(&self) -> Result<AuditConfig> {
        let explicit = self.contract.contract.is_some() || self.contract.contracts_dir.is_some();
        let (product, contract) =
            match resolve_contract(self.product.as_deref(), self.contract.source()) {
                Ok((p, c)) => (p, Some(c)),
                // Without a contract source, `status` still reads a product that has no
                // built-in contract; `verify` then skips what needs one.
                Err(_) if !explicit && self.product.is_some() => {
                    let p = self.product.clone().unwrap_or_default();
                    crate::config::path_safe_product(&p)?;
                    (p, None)
                }
                Err(e) => return Err(e),
            };
        Ok(AuditConfig {
            lake: absolute(Location::parse(&self.lake)?, "--lake")?,
            product,
            contract,
            json: self.json,
            s3: self.s3.options()?,
        })
    }
}

impl DrillArgs {
    /// Validate `landing drill` arguments; its child runs get the same S3 settings.
    pub fn config(&self) -> Result<DrillConfig> {
        if self.size_mib == 0 || self.size_mib > 64 * 1024 {
            return Err(Error::Config(
                "--size-mib must be between 1 and 65536".into(),
            ));
        }
        let s3 = self.s3.options()?;
        // Children hold short leases, so the rerun after a crash on S3 waits seconds,
        // not minutes, to take the crashed child's lease over (one TTL plus the
        // margin after its first look, polling at most every 5 s): their lease wait
        // is three TTLs. Their attempt timeout stays below the TTL, as every run
        // requires.
        let child = S3Options {
            attempt_timeout: s3
                .attempt_timeout
                .min(Duration::from_secs(DRILL_LEASE_TTL / 2)),
            ..s3.clone()
        };
        let mut child_args = child.to_args();
        child_args.extend([
            "--lease-ttl".to_owned(),
            DRILL_LEASE_TTL.to_string(),
            "--lease-wait".to_owned(),
            (3 * DRILL_LEASE_TTL).to_string(),
        ]);
        Ok(DrillConfig {
            lake: Location::parse(&self.lake)?,
            size: self.size_mib << 20,
            json: self.json,
            keep: self.keep,
            compress: self.compress,
            s3,
            child_args,
        })
    }
}

impl CommonArgs {
    /// The settings `run` and `check` share; `input_name` is left empty for an inbox,
    /// whose inputs are named as they are listed.
    fn config(&self, input: Location, lake: Location, is_inbox: bool) -> Result<Config> {
        let (product, contract) =
            resolve_contract(self.product.as_deref(), self.contract.source())?;
        let max_line_bytes = self.max_line_bytes.unwrap_or(contract.max_line_bytes);
        if max_line_bytes == 0 {
            return Err(Error::Config("--max-line-bytes must be at least 1".into()));
        }
        if self.max_decompressed_bytes == 0 {
            return Err(Error::Config(
                "--max-decompressed-bytes must be at least 1".into(),
            ));
        }
        let input_name = if is_inbox {
            String::new()
        } else {
            input_name(&input)?
        };
        Ok(Config {
            input,
            input_name,
            lake,
            product,
            contract,
            reland_other_contract: false,
            max_rejected_lines: self.max_rejected_lines,
            max_line_bytes,
            max_decompressed_bytes: self.max_decompressed_bytes,
            output_compression: OutputCompression::None,
            lease_ttl: Duration::from_secs(DEFAULT_LEASE_TTL),
            lease_wait: Duration::from_secs(DEFAULT_LEASE_WAIT),
            sweep_age: Duration::ZERO,
            progress: Progress::Auto,
            s3: self.s3.options()?,
            input_meta: None,
            memory: self.memory(1)?,
            scratch_dir: self.scratch_dir.clone().unwrap_or_else(std::env::temp_dir),
            pushgateway: None,
        })
        .and_then(|cfg: Config| {
            cfg.memory
                .check(cfg.parts_in_flight())
                .map_err(Error::Config)?;
            Ok(cfg)
        })
    }

    /// The test hooks `check` shares with `run` (hidden flags; normally none).
    pub fn hooks(&self) -> Hooks {
        Hooks {
            spill_every: self.spill_every.filter(|&n| n > 0),
            id_digest_bits: self.id_digest_bits,
            ..Hooks::default()
        }
    }

    /// The budget from --max-memory, else from the cgroup limit, for `jobs` runs.
    fn memory(&self, jobs: usize) -> Result<Memory> {
        match self.max_memory.as_deref().map(str::trim) {
            Some("unlimited") => Ok(Memory::from_cgroup(None, jobs)),
            Some(s) => {
                let bytes =
                    parse_size(s).map_err(|e| Error::Config(format!("--max-memory: {e}")))?;
                Ok(Memory::from_flag(bytes, jobs))
            }
            None => Ok(Memory::from_cgroup(cgroup_memory_limit(), jobs)),
        }
    }

    /// Configuration of `landing check`: no lake, nothing written.
    pub fn check_config(&self) -> Result<Config> {
        let input = self
            .input
            .as_deref()
            .ok_or_else(|| Error::Config("check needs --input".into()))?;
        self.config(
            Location::parse(input)?,
            Location::Local(PathBuf::new()),
            false,
        )
    }
}

impl RunArgs {
    /// Configuration of `landing run` for `input` (one file, or an inbox whose
    /// inputs are filled in one by one).
    fn config(&self, input: Location) -> Result<Config> {
        // Checkpoints record where they published; `lake` and `./lake` must name the
        // same place, so a local lake is made absolute once, here.
        let lake = absolute(Location::parse(&self.lake)?, "--lake")?;
        let is_inbox = self.inbox.inbox.is_some();
        let mut cfg = self.common.config(input, lake, is_inbox)?;
        if self.lease_ttl == 0 {
            return Err(Error::Config(
                "--lease-ttl must be at least 1 second".into(),
            ));
        }
        cfg.lease_ttl = Duration::from_secs(self.lease_ttl);
        cfg.lease_wait = Duration::from_secs(self.lease_wait);
        // A request can stay in flight on the server for one attempt's timeout; a lease
        // that expires sooner lets the next holder start while our write may land.
        if matches!(cfg.lake, Location::S3 { .. }) && cfg.lease_ttl <= cfg.s3.attempt_timeout {
            return Err(Error::Config(format!(
                "--lease-ttl ({} s) must exceed --s3-attempt-timeout ({} s): a request still in flight on the server must not outlive the lease",
                self.lease_ttl,
                cfg.s3.attempt_timeout.as_secs()
            )));
        }
        cfg.sweep_age = Duration::from_secs(self.sweep_age);
        cfg.output_compression = self.output_compression;
        cfg.progress = self.progress;
        cfg.pushgateway = self
            .pushgateway
            .as_deref()
            .map(|url| crate::metrics::Pushgateway::new(url, self.pushgateway_timeout))
            .transpose()?;
        Ok(cfg)
    }
}

/// A local location made absolute (an S3 one as it is), naming `flag` on failure.
/// The cgroup memory limit of this process, if one is set (v2, then v1).
fn cgroup_memory_limit() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
    .and_then(|t| parse_cgroup_limit(&t))
}

fn absolute(loc: Location, flag: &str) -> Result<Location> {
    Ok(match loc {
        Location::Local(p) => Location::Local(
            std::path::absolute(&p)
                .map_err(|e| Error::Config(format!("{flag} {}: {e}", p.display())))?,
        ),
        s3 => s3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
