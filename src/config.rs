//! Configuration: the only module that reads the environment. Every option is a
//! flag with a `LANDING_<OPTION>` variable behind it (clap reads both); AWS
//! credentials, region and endpoint come from the SDK's standard chain and are never
//! part of this struct, so printing it can never leak a secret.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::error::{Error, Result};

/// Where an input or the lake lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local file (input) or folder (lake).
    Local(PathBuf),
    /// An S3 bucket and key (input) or prefix (lake, may be empty).
    S3 { bucket: String, key: String },
}

impl Location {
    pub fn parse(s: &str) -> Result<Self> {
        if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(Error::Config(format!("{s}: an S3 URL needs a bucket")));
            }
            return Ok(Location::S3 {
                bucket: bucket.to_owned(),
                key: key.trim_matches('/').to_owned(),
            });
        }
        if s.is_empty() {
            return Err(Error::Config("empty path".into()));
        }
        Ok(Location::Local(PathBuf::from(s)))
    }

    /// The input name: the last path segment.
    pub fn name(&self) -> Option<&str> {
        match self {
            Location::Local(p) => p.file_name().and_then(|n| n.to_str()),
            Location::S3 { key, .. } => key.rsplit('/').next().filter(|n| !n.is_empty()),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The SDK's checksum knobs: several S3-compatible servers mishandle the CRC32
/// checksums aws-sdk-s3 adds by default since January 2025.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ChecksumMode {
    /// The SDK's spelling (`when_supported`), as in AWS_REQUEST_CHECKSUM_CALCULATION.
    #[value(name = "when_supported", alias = "when-supported")]
    WhenSupported,
    #[value(name = "when_required", alias = "when-required")]
    WhenRequired,
}

/// A named instant at which a crash drill aborts the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// After the first output bytes were written to staging.
    MidStream,
    /// After part K of a multipart staging upload was uploaded (S3).
    AfterPart(u32),
    /// After staging completed, before promotion.
    AfterStaging,
    /// After promotion to the published name, before the checkpoint.
    AfterPublish,
    /// After the checkpoint, before cleanup.
    AfterCheckpoint,
    /// Not a kill: a validation worker panics mid-file (the run must fail, publishing
    /// nothing).
    WorkerPanic,
}

impl CrashPoint {
    /// Die here, abruptly, as a killed process would: SIGKILL to ourselves, so no
    /// destructor, flush or cleanup runs.
    pub fn fire(self) -> ! {
        eprintln!("landing: drill crash at {self}");
        // SAFETY: kill(2) on our own pid; SIGKILL cannot be caught.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        // SIGKILL is delivered before kill() returns to a single-threaded caller and
        // promptly otherwise; never continue past a crash point.
        std::process::abort()
    }
}

/// Test switch: where a run stops and waits for a line on stdin, so a test can make
/// another run overtake it at an exact point without sleeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PausePoint {
    /// After the first output bytes were written to staging.
    MidStream,
    /// After the lease's deadline was checked, right before promotion.
    BeforePromote,
    /// After staging completed, before the interrupt check (signal tests).
    AfterStaging,
}

impl PausePoint {
    /// Say where we are on stderr, then wait for one line (or end) on stdin.
    pub async fn wait(self) {
        eprintln!("landing: paused at {self:?}");
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)
        })
        .await;
    }
}

impl std::str::FromStr for CrashPoint {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "mid-stream" => CrashPoint::MidStream,
            "after-staging" => CrashPoint::AfterStaging,
            "after-publish" => CrashPoint::AfterPublish,
            "after-checkpoint" => CrashPoint::AfterCheckpoint,
            "worker-panic" => CrashPoint::WorkerPanic,
            other => match other.strip_prefix("after-part:").map(str::parse) {
                Some(Ok(k)) if k >= 1 => CrashPoint::AfterPart(k),
                _ => {
                    return Err(format!(
                        "unknown crash point {other:?} (mid-stream, after-part:K, after-staging, after-publish, after-checkpoint, worker-panic)"
                    ))
                }
            },
        })
    }
}

impl std::fmt::Display for CrashPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CrashPoint::MidStream => f.write_str("mid-stream"),
            CrashPoint::AfterPart(k) => write!(f, "after-part:{k}"),
            CrashPoint::AfterStaging => f.write_str("after-staging"),
            CrashPoint::AfterPublish => f.write_str("after-publish"),
            CrashPoint::AfterCheckpoint => f.write_str("after-checkpoint"),
            CrashPoint::WorkerPanic => f.write_str("worker-panic"),
        }
    }
}

/// Options shared by `run` and `check`.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Input: a local path or s3://bucket/key (`run` takes --inbox instead for many).
    #[arg(long, env = "LANDING_INPUT")]
    pub input: Option<String>,

    /// Product name; selects the event contract and the lake prefixes.
    #[arg(long, env = "LANDING_PRODUCT", default_value = "progress")]
    pub product: String,

    /// Longest accepted line in bytes; longer lines are quarantined as line_too_long.
    #[arg(long, env = "LANDING_MAX_LINE_BYTES", default_value_t = 1 << 20)]
    pub max_line_bytes: usize,

    /// Quarantined lines tolerated before the file is refused (0: fail closed).
    #[arg(long, env = "LANDING_MAX_REJECTED_LINES", default_value_t = 0)]
    pub max_rejected_lines: u64,

    /// Log format on stderr.
    #[arg(long, env = "LANDING_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Log filter (tracing-subscriber syntax, e.g. `info` or `landing=debug`).
    #[arg(long, env = "LANDING_LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    #[command(flatten)]
    pub s3: S3Args,
}

/// Options of `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Lake root: a folder (created if missing) or s3://bucket/prefix.
    #[arg(long, env = "LANDING_LAKE", default_value = "./lake")]
    pub lake: String,

    /// Seconds a lease lives without renewal; a dead holder blocks no longer than this.
    #[arg(long, env = "LANDING_LEASE_TTL", default_value_t = 300)]
    pub lease_ttl: u64,

    /// Sweep leftovers (staging objects, temp files) of crashed runs older than this many seconds.
    #[arg(long, env = "LANDING_SWEEP_AGE", default_value_t = 0)]
    pub sweep_age: u64,

    /// Show a progress bar on a terminal (auto), always, or never.
    #[arg(long, env = "LANDING_PROGRESS", default_value = "auto")]
    pub progress: Progress,

    /// Drill switch: abort the process at a named point (crash drills and tests).
    #[arg(long, env = "LANDING_CRASH_AT", hide = true)]
    pub crash_at: Option<CrashPoint>,

    /// Test switch: pause at a named point until a line arrives on stdin.
    #[arg(long, env = "LANDING_PAUSE_AT", hide = true, value_enum)]
    pub pause_at: Option<PausePoint>,
    #[command(flatten)]
    pub inbox: InboxArgs,

    /// Validate the whole configuration (flags and LANDING_* variables), print the
    /// resolved settings as one JSON line (no secrets) and exit 0, touching no store.
    #[arg(long, env = "LANDING_DRY_RUN")]
    pub dry_run: bool,
}

/// Options of an inbox run (`landing run --inbox`), DESIGN.md section 6.
#[derive(Debug, Clone, Args)]
pub struct InboxArgs {
    /// Land every file directly under this folder or s3://bucket/prefix/ (no recursion)
    /// instead of one --input.
    #[arg(long, env = "LANDING_INBOX")]
    pub inbox: Option<String>,

    /// Only names matching this glob (`*` any run of characters, `?` one character).
    #[arg(long = "match", env = "LANDING_MATCH", default_value = "*.jsonl")]
    pub pattern: String,

    /// Only inputs whose last modification is at least this many seconds old.
    #[arg(long, env = "LANDING_MIN_AGE", default_value_t = 0)]
    pub min_age: u64,

    /// Inputs landed at once; memory is bounded by N times one run's budget.
    #[arg(long, env = "LANDING_JOBS", default_value_t = 1)]
    pub jobs: usize,

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
    /// checkpoint's (no cheap skips).
    #[arg(long, env = "LANDING_REHASH")]
    pub rehash: bool,
}

/// Options of `landing drill`.
#[derive(Debug, Clone, Args)]
pub struct DrillArgs {
    /// Lake to drill against: a folder or s3://bucket/prefix. The drill works in a
    /// scratch namespace `drills/<drill id>/` under it and removes it afterwards.
    #[arg(long, env = "LANDING_LAKE", default_value = "./lake")]
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

    /// Log format on stderr.
    #[arg(long, env = "LANDING_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Log filter.
    #[arg(long, env = "LANDING_LOG_LEVEL", default_value = "warn")]
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
    #[arg(long, env = "LANDING_LAKE", default_value = "./lake")]
    pub lake: String,

    /// Product whose checkpoints are examined.
    #[arg(long, env = "LANDING_PRODUCT", default_value = "progress")]
    pub product: String,

    /// Print JSON instead of a table (status) or text lines (verify).
    #[arg(long)]
    pub json: bool,

    /// Log format on stderr.
    #[arg(long, env = "LANDING_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Log filter. (The SDK warns on every GET of an object with a multipart
    /// checksum, which `verify --deep` reads by design: quiet by default.)
    #[arg(
        long,
        env = "LANDING_LOG_LEVEL",
        default_value = "warn,aws_sdk_s3::http_response_checksum=error"
    )]
    pub log_level: String,

    #[command(flatten)]
    pub s3: S3Args,
}

/// Validated settings of `status` and `verify`.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    pub lake: Location,
    pub product: String,
    pub json: bool,
    pub s3: S3Config,
}

impl AuditConfig {
    pub fn from_args(a: &AuditArgs) -> Result<Self> {
        let ok = !a.product.is_empty()
            && a.product
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !ok {
            return Err(Error::Config(format!(
                "--product must match [a-z0-9_-]+, got {:?}",
                a.product
            )));
        }
        let lake = match Location::parse(&a.lake)? {
            Location::Local(p) => Location::Local(
                std::path::absolute(&p)
                    .map_err(|e| Error::Config(format!("--lake {}: {e}", p.display())))?,
            ),
            s3 => s3,
        };
        Ok(AuditConfig {
            lake,
            product: a.product.clone(),
            json: a.json,
            s3: a.s3.to_config(None)?,
        })
    }
}

/// Validated drill settings.
#[derive(Debug, Clone)]
pub struct DrillConfig {
    pub lake: Location,
    pub size: u64,
    pub json: bool,
    pub keep: bool,
    pub s3: S3Config,
    /// The S3 flags to hand to each child run, so it talks to the same store.
    pub child_args: Vec<String>,
}

impl DrillConfig {
    pub fn from_args(a: &DrillArgs) -> Result<Self> {
        let s3 = a.s3.to_config(None)?;
        let mut child_args = vec![
            "--s3-part-size-mib".to_owned(),
            a.s3.s3_part_size_mib.to_string(),
            "--s3-upload-concurrency".to_owned(),
            a.s3.s3_upload_concurrency.to_string(),
            "--s3-copy-threshold".to_owned(),
            a.s3.s3_copy_threshold.to_string(),
            "--s3-max-attempts".to_owned(),
            a.s3.s3_max_attempts.to_string(),
            "--s3-read-timeout".to_owned(),
            a.s3.s3_read_timeout.to_string(),
            "--s3-operation-timeout".to_owned(),
            a.s3.s3_operation_timeout.to_string(),
            "--s3-attempt-timeout".to_owned(),
            a.s3.s3_attempt_timeout.min(DRILL_LEASE_TTL / 2).to_string(),
            "--s3-conditional-copy".to_owned(),
            value_name(a.s3.s3_conditional_copy),
        ];
        if a.s3.s3_force_path_style {
            child_args.push("--s3-force-path-style".to_owned());
        }
        for (flag, mode) in [
            ("--s3-request-checksum", a.s3.s3_request_checksum),
            ("--s3-response-checksum", a.s3.s3_response_checksum),
        ] {
            if let Some(mode) = mode {
                child_args.extend([flag.to_owned(), value_name(mode)]);
            }
        }
        // Children hold short leases, so the drill waits seconds, not minutes, for a
        // crashed child's lease to expire on S3. The attempt timeout stays below the
        // TTL, as every run requires.
        child_args.extend(["--lease-ttl".to_owned(), DRILL_LEASE_TTL.to_string()]);
        if a.size_mib == 0 || a.size_mib > 64 * 1024 {
            return Err(Error::Config(
                "--size-mib must be between 1 and 65536".into(),
            ));
        }
        Ok(DrillConfig {
            lake: Location::parse(&a.lake)?,
            size: a.size_mib << 20,
            json: a.json,
            keep: a.keep,
            s3,
            child_args,
        })
    }
}

/// The command-line spelling of a value, to hand a setting on to a child run.
fn value_name(v: impl ValueEnum) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Progress {
    Auto,
    Always,
    Never,
}

/// S3 options; ignored for local inputs and lakes.
#[derive(Debug, Clone, Args)]
pub struct S3Args {
    /// Path-style addressing (MinIO, LocalStack, SeaweedFS).
    #[arg(long, env = "LANDING_S3_FORCE_PATH_STYLE")]
    pub s3_force_path_style: bool,

    /// Multipart part size in MiB (5 MiB minimum for all parts but the last).
    #[arg(long, env = "LANDING_S3_PART_SIZE_MIB", default_value_t = 16)]
    pub s3_part_size_mib: u64,

    /// Parts uploaded concurrently while parsing continues.
    #[arg(long, env = "LANDING_S3_UPLOAD_CONCURRENCY", default_value_t = 4)]
    pub s3_upload_concurrency: usize,

    /// Objects larger than this many bytes are promoted with UploadPartCopy instead of
    /// CopyObject (S3 allows at most 5 GiB in one CopyObject).
    #[arg(long, env = "LANDING_S3_COPY_THRESHOLD", default_value_t = 5 << 30)]
    pub s3_copy_threshold: u64,

    /// Maximum attempts per S3 request (SDK standard retry mode).
    #[arg(long, env = "LANDING_S3_MAX_ATTEMPTS", default_value_t = 5)]
    pub s3_max_attempts: u32,

    /// Seconds an S3 operation may take, all its retries included (streaming bodies
    /// are bounded by --s3-read-timeout instead).
    #[arg(long, env = "LANDING_S3_OPERATION_TIMEOUT", default_value_t = 300)]
    pub s3_operation_timeout: u64,

    /// Seconds one attempt of an S3 request may take. This bounds how long a request
    /// can stay in flight on the server, so --lease-ttl must exceed it.
    #[arg(long, env = "LANDING_S3_ATTEMPT_TIMEOUT", default_value_t = 120)]
    pub s3_attempt_timeout: u64,

    /// Fence promotions with copy destination conditions: auto (probe the store and
    /// use them where they are honoured safely), on (refuse to start otherwise), off.
    #[arg(
        long,
        env = "LANDING_S3_CONDITIONAL_COPY",
        value_enum,
        default_value = "auto"
    )]
    pub s3_conditional_copy: ConditionalCopy,

    /// Seconds a streaming read may stall before the run fails (the SDK has no body timeout).
    #[arg(long, env = "LANDING_S3_READ_TIMEOUT", default_value_t = 60)]
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

/// Whether promotions use copy destination conditions (`--s3-conditional-copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConditionalCopy {
    Auto,
    On,
    Off,
}

/// S3 settings after validation.
#[derive(Debug, Clone)]
pub struct S3Config {
    pub force_path_style: bool,
    pub part_size: usize,
    pub upload_concurrency: usize,
    pub copy_threshold: u64,
    pub max_attempts: u32,
    pub operation_timeout: Duration,
    pub attempt_timeout: Duration,
    pub conditional_copy: ConditionalCopy,
    pub read_timeout: Duration,
    pub request_checksum: Option<ChecksumMode>,
    pub response_checksum: Option<ChecksumMode>,
    /// Drill switch, checked by the multipart uploader after each part.
    pub crash_at: Option<CrashPoint>,
}

impl Default for S3Config {
    fn default() -> Self {
        S3Config {
            force_path_style: false,
            part_size: 16 << 20,
            upload_concurrency: 4,
            copy_threshold: 5 << 30,
            max_attempts: 5,
            operation_timeout: Duration::from_secs(300),
            attempt_timeout: Duration::from_secs(120),
            conditional_copy: ConditionalCopy::Auto,
            read_timeout: Duration::from_secs(60),
            request_checksum: None,
            response_checksum: None,
            crash_at: None,
        }
    }
}

/// The validated configuration of one run; functions take this, never the environment.
#[derive(Debug, Clone)]
pub struct Config {
    pub input: Location,
    pub input_name: String,
    pub lake: Location,
    pub product: String,
    pub max_rejected_lines: u64,
    pub max_line_bytes: usize,
    pub lease_ttl: Duration,
    pub sweep_age: Duration,
    pub progress: Progress,
    pub crash_at: Option<CrashPoint>,
    pub pause_at: Option<PausePoint>,
    pub s3: S3Config,
    /// The input's size and identity as an inbox listing saw them, recorded in the
    /// checkpoint for cheap skips (a single-input run asks the store instead).
    pub input_meta: Option<crate::store::ObjectMeta>,
}

/// An inbox run: the settings shared by every input plus how inputs are chosen.
#[derive(Debug, Clone)]
pub struct InboxConfig {
    /// Per-input settings; `input` and `input_name` are set for each input.
    pub base: Config,
    pub inbox: Location,
    pub pattern: crate::shard::Glob,
    pub min_age: Duration,
    pub jobs: usize,
    pub shard: Option<crate::shard::Shard>,
    pub rehash: bool,
}

/// What `landing run` was asked to do.
#[derive(Debug, Clone)]
pub enum RunPlan {
    Single(Config),
    Inbox(InboxConfig),
}

impl RunPlan {
    /// Validate `landing run`'s arguments (every LANDING_* variable included).
    pub fn from_args(a: &RunArgs) -> Result<Self> {
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
                Ok(RunPlan::Single(Config::for_run(
                    a,
                    Location::parse(input)?,
                )?))
            }
            (None, Some(inbox)) => {
                let inbox = match Location::parse(inbox)? {
                    Location::Local(p) => Location::Local(
                        std::path::absolute(&p)
                            .map_err(|e| Error::Config(format!("--inbox {}: {e}", p.display())))?,
                    ),
                    s3 => s3,
                };
                if i.jobs == 0 || i.jobs > 256 {
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
                let base = Config::for_run(a, inbox.clone())?;
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

    /// The resolved settings as one JSON object (`--dry-run`). Holds no secret: AWS
    /// credentials never enter the configuration.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let cfg = match self {
            RunPlan::Single(c) => c,
            RunPlan::Inbox(i) => &i.base,
        };
        let s3 = &cfg.s3;
        let mode = |m: Option<ChecksumMode>| {
            m.map(|m| match m {
                ChecksumMode::WhenSupported => "when_supported",
                ChecksumMode::WhenRequired => "when_required",
            })
        };
        let mut v = json!({
            "dry_run": true,
            "lake": cfg.lake.to_string(),
            "product": cfg.product,
            "max_rejected_lines": cfg.max_rejected_lines,
            "max_line_bytes": cfg.max_line_bytes,
            "lease_ttl": cfg.lease_ttl.as_secs(),
            "sweep_age": cfg.sweep_age.as_secs(),
            "progress": format!("{:?}", cfg.progress).to_lowercase(),
            "s3": {
                "force_path_style": s3.force_path_style,
                "part_size_mib": s3.part_size >> 20,
                "upload_concurrency": s3.upload_concurrency,
                "copy_threshold": s3.copy_threshold,
                "max_attempts": s3.max_attempts,
                "operation_timeout": s3.operation_timeout.as_secs(),
                "read_timeout": s3.read_timeout.as_secs(),
                "request_checksum": mode(s3.request_checksum),
                "response_checksum": mode(s3.response_checksum),
            },
        });
        match self {
            RunPlan::Single(c) => {
                v["input"] = json!(c.input.to_string());
                v["input_name"] = json!(c.input_name);
            }
            RunPlan::Inbox(i) => {
                v["inbox"] = json!(i.inbox.to_string());
                v["match"] = json!(i.pattern.as_str());
                v["min_age"] = json!(i.min_age.as_secs());
                v["jobs"] = json!(i.jobs);
                v["shard"] = json!(i.shard.map(|s| s.to_string()));
                v["rehash"] = json!(i.rehash);
            }
        }
        v
    }
}

const MIN_PART: u64 = 5;

impl S3Args {
    fn to_config(&self, crash_at: Option<CrashPoint>) -> Result<S3Config> {
        if self.s3_part_size_mib < MIN_PART || self.s3_part_size_mib > 5 * 1024 {
            return Err(Error::Config(format!(
                "--s3-part-size-mib must be between {MIN_PART} and 5120 (S3 multipart limits), got {}",
                self.s3_part_size_mib
            )));
        }
        if self.s3_upload_concurrency == 0 || self.s3_max_attempts == 0 {
            return Err(Error::Config(
                "--s3-upload-concurrency and --s3-max-attempts must be at least 1".into(),
            ));
        }
        Ok(S3Config {
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
            crash_at,
        })
    }
}

/// A product name is used in keys: keep it path-safe.
pub fn validate_product(product: &str) -> Result<()> {
    let ok = !product.is_empty()
        && product
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !ok {
        return Err(Error::Config(format!(
            "--product must match [a-z0-9_-]+, got {product:?}"
        )));
    }
    if product != "progress" {
        return Err(Error::Config(format!(
            "no event contract for product {product:?}; only \"progress\" is defined"
        )));
    }
    Ok(())
}

/// An input name becomes part of published keys; hidden names are reserved for
/// temp files, so they are never valid inputs.
pub fn input_name(input: &Location) -> Result<String> {
    let name = input
        .name()
        .ok_or_else(|| Error::Config(format!("{input}: cannot take an input name from it")))?;
    if name.starts_with('.') || name.chars().any(|c| c.is_control()) {
        return Err(Error::Config(format!(
            "{input}: input names may not start with '.' or hold control characters"
        )));
    }
    Ok(name.to_owned())
}

impl Config {
    fn from_common(
        c: &CommonArgs,
        input: Location,
        lake: Location,
        crash_at: Option<CrashPoint>,
        is_inbox: bool,
    ) -> Result<Self> {
        validate_product(&c.product)?;
        if c.max_line_bytes == 0 {
            return Err(Error::Config("--max-line-bytes must be at least 1".into()));
        }
        // An inbox: each input's name is set when it is listed.
        let input_name = if is_inbox {
            String::new()
        } else {
            input_name(&input)?
        };
        Ok(Config {
            input,
            input_name,
            lake,
            product: c.product.clone(),
            max_rejected_lines: c.max_rejected_lines,
            max_line_bytes: c.max_line_bytes,
            lease_ttl: Duration::from_secs(300),
            sweep_age: Duration::ZERO,
            progress: Progress::Auto,
            crash_at,
            pause_at: None,
            s3: c.s3.to_config(crash_at)?,
            input_meta: None,
        })
    }

    /// Configuration of `landing run` for `input` (one file, or an inbox whose
    /// inputs are filled in one by one).
    pub fn for_run(a: &RunArgs, input: Location) -> Result<Self> {
        let lake = match Location::parse(&a.lake)? {
            // Checkpoints record where they published; `lake` and `./lake` must name
            // the same place, so a local lake is made absolute once, here.
            Location::Local(p) => Location::Local(
                std::path::absolute(&p)
                    .map_err(|e| Error::Config(format!("--lake {}: {e}", p.display())))?,
            ),
            s3 => s3,
        };
        let is_inbox = a.inbox.inbox.is_some();
        let mut cfg = Self::from_common(&a.common, input, lake, a.crash_at, is_inbox)?;
        if a.lease_ttl == 0 {
            return Err(Error::Config(
                "--lease-ttl must be at least 1 second".into(),
            ));
        }
        cfg.lease_ttl = Duration::from_secs(a.lease_ttl);
        // A request can stay in flight on the server for one attempt's timeout; a lease
        // that expires sooner lets the next holder start while our write may land.
        if matches!(cfg.lake, Location::S3 { .. }) && cfg.lease_ttl <= cfg.s3.attempt_timeout {
            return Err(Error::Config(format!(
                "--lease-ttl ({} s) must exceed --s3-attempt-timeout ({} s): a request still in flight on the server must not outlive the lease",
                a.lease_ttl,
                cfg.s3.attempt_timeout.as_secs()
            )));
        }
        cfg.pause_at = a.pause_at;
        cfg.sweep_age = Duration::from_secs(a.sweep_age);
        cfg.progress = a.progress;
        Ok(cfg)
    }

    /// Configuration of `landing check`: no lake, nothing written.
    pub fn for_check(c: &CommonArgs) -> Result<Self> {
        let input = c
            .input
            .as_deref()
            .ok_or_else(|| Error::Config("check needs --input".into()))?;
        Self::from_common(
            c,
            Location::parse(input)?,
            Location::Local(PathBuf::new()),
            None,
            false,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_s3_and_local_locations() {
        assert_eq!(
            Location::parse("s3://b/p/q/").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                key: "p/q".into()
            }
        );
        assert_eq!(
            Location::parse("s3://b").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                key: "".into()
            }
        );
        assert!(Location::parse("s3:///k").is_err());
        assert_eq!(
            Location::parse("lake").unwrap(),
            Location::Local(PathBuf::from("lake"))
        );
    }

    #[test]
    fn input_names_exclude_hidden_and_empty() {
        assert_eq!(
            input_name(&Location::parse("/in/a.jsonl").unwrap()).unwrap(),
            "a.jsonl"
        );
        assert!(input_name(&Location::parse("/in/.a.jsonl.tmp").unwrap()).is_err());
        assert!(input_name(&Location::parse("s3://b/").unwrap()).is_err());
    }

    #[test]
    fn product_must_be_path_safe_and_known() {
        assert!(validate_product("progress").is_ok());
        assert!(validate_product("../x").is_err());
        assert!(validate_product("Progress").is_err());
        assert!(validate_product("orders").is_err());
    }

    /// Every S3 setting of `landing drill` reaches its child runs (the drill rebuilds
    /// their command lines, which once silently dropped the checksum modes).
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
        let d = DrillConfig::from_args(&args).unwrap();
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
        let RunPlan::Single(c) = RunPlan::from_args(&run).unwrap() else {
            panic!("not a single-input run")
        };
        let c = c.s3;
        let p = &d.s3;
        assert_eq!(
            (
                c.force_path_style,
                c.part_size,
                c.upload_concurrency,
                c.copy_threshold
            ),
            (
                p.force_path_style,
                p.part_size,
                p.upload_concurrency,
                p.copy_threshold
            )
        );
        assert_eq!(
            (
                c.max_attempts,
                c.operation_timeout,
                c.attempt_timeout,
                c.read_timeout
            ),
            (
                p.max_attempts,
                p.operation_timeout,
                p.attempt_timeout,
                p.read_timeout
            )
        );
        assert_eq!(
            (c.conditional_copy, c.request_checksum, c.response_checksum),
            (p.conditional_copy, p.request_checksum, p.response_checksum)
        );
    }

    #[test]
    fn crash_points_round_trip() {
        for s in [
            "mid-stream",
            "after-part:3",
            "after-staging",
            "after-publish",
            "after-checkpoint",
            "worker-panic",
        ] {
            assert_eq!(s.parse::<CrashPoint>().unwrap().to_string(), s);
        }
        assert!("after-part:0".parse::<CrashPoint>().is_err());
        assert!("later".parse::<CrashPoint>().is_err());
    }
}
