//! The parsed flags made into settings: each subcommand's arguments validated
//! once into the engine's `Config` (and its kin) and the run's hooks. Nothing below
//! the command line reads a flag or a `LANDING_*` variable.

use std::path::PathBuf;
use std::time::Duration;

use landing_engine::budget::{parse_cgroup_limit, parse_size, Memory};
use landing_engine::compression::OutputCompression;
use landing_engine::config::{
    input_name, resolve_contract, AuditConfig, Config, DeepConfig, DrillConfig, InboxConfig,
    RunPlan, DEFAULT_LEASE_TTL, DEFAULT_LEASE_WAIT,
};
use landing_engine::hook::Hooks;
use landing_engine::progress::Mode as ProgressMode;
use landing_error::{Error, Result};
use landing_store::s3::{S3Options, PART_SIZE_MIB_RANGE};
use landing_store::Location;

use super::args::*;

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
    /// The hooks of this run (hidden flags; normally none).
    pub fn hooks(&self) -> Hooks {
        self.run_hooks.over(self.common.hooks())
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
                    (Some(s), _) => Some(
                        s.parse::<landing_engine::shard::Shard>()
                            .map_err(Error::Config)?,
                    ),
                    (None, Some(n)) => {
                        let index = i.job_completion_index.ok_or_else(|| {
                            Error::Config(
                                "--shards needs JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job)"
                                    .into(),
                            )
                        })?;
                        Some(landing_engine::shard::Shard::new(index, n).map_err(Error::Config)?)
                    }
                    (None, None) => None,
                };
                let mut base = a.config(inbox.clone())?;
                base.rehash = i.rehash;
                base.memory = a.common.memory(i.jobs.unwrap_or(1))?;
                base.memory
                    .check(base.parts_in_flight())
                    .map_err(Error::Config)?;
                Ok(RunPlan::Inbox(InboxConfig {
                    base,
                    inbox,
                    pattern: landing_engine::shard::Glob::new(&i.pattern).map_err(Error::Config)?,
                    min_age: Duration::from_secs(i.min_age),
                    jobs: i.jobs,
                    shard,
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
                    landing_engine::config::path_safe_product(&p)?;
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
            rehash: false,
            max_rejected_lines: self.max_rejected_lines,
            max_line_bytes,
            max_decompressed_bytes: self.max_decompressed_bytes,
            output_compression: OutputCompression::None,
            lease_ttl: Duration::from_secs(DEFAULT_LEASE_TTL),
            lease_wait: Duration::from_secs(DEFAULT_LEASE_WAIT),
            sweep_age: Duration::ZERO,
            progress: ProgressMode::Auto,
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
        self.line_hooks.hooks()
    }

    /// The budget from --max-memory, else from the cgroup limit, for `jobs` runs.
    fn memory(&self, jobs: usize) -> Result<Memory> {
        memory(self.max_memory.as_deref(), jobs)
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
            .map(|url| landing_engine::metrics::Pushgateway::new(url, self.pushgateway_timeout))
            .transpose()?;
        Ok(cfg)
    }
}

/// The budget from --max-memory, else from the cgroup limit, for `jobs` runs.
fn memory(max_memory: Option<&str>, jobs: usize) -> Result<Memory> {
    match max_memory.map(str::trim) {
        Some("unlimited") => Ok(Memory::from_cgroup(None, jobs)),
        Some(s) => {
            let bytes = parse_size(s).map_err(|e| Error::Config(format!("--max-memory: {e}")))?;
            Ok(Memory::from_flag(bytes, jobs))
        }
        None => Ok(Memory::from_cgroup(cgroup_memory_limit(), jobs)),
    }
}

impl crate::cli::VerifyArgs {
    /// `--deep`'s budget and scratch folder (`None` without --deep).
    pub fn deep_config(&self) -> Result<Option<DeepConfig>> {
        if !self.deep {
            return Ok(None);
        }
        let memory = memory(
            self.max_memory.as_deref(),
            landing_engine::audit::DEEP_READS,
        )?;
        // `check`'s message names --jobs, which verify does not have.
        if memory.check(0).is_err() {
            return Err(Error::Config(format!(
                "--max-memory: {} is too little for verify --deep, which reads {} objects at once, each with a run's buffers; give at least {}",
                landing_engine::budget::Bytes(memory.total.unwrap_or(0)),
                landing_engine::audit::DEEP_READS,
                landing_engine::budget::Bytes(memory.need(0)),
            )));
        }
        Ok(Some(DeepConfig {
            memory,
            scratch_dir: self.scratch_dir.clone().unwrap_or_else(std::env::temp_dir),
            spill_every: self.deep_hooks.spill_every(),
        }))
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
