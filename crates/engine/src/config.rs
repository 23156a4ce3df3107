//! Validated settings: what every other function takes instead of the environment.
//! The command line (`cli`) parses flags and their `LANDING_*` variables into these;
//! AWS credentials, region and endpoint come from the SDK's standard chain and are
//! never part of them, so printing them can never leak a secret.

use std::sync::Arc;
use std::time::Duration;

use crate::contract::Contract;
use crate::error::{Error, Result};
use crate::store::s3::S3Options;
use crate::store::Location;

/// `--lease-ttl`'s default, seconds. With the default S3 attempt timeout (120 s) as
/// the margin, a holder renews every (180 − 120) / 3 = 20 s: 180 PutObject requests an
/// hour per input in flight. A killed holder blocks its input for at most this long.
pub const DEFAULT_LEASE_TTL: u64 = 180;

/// `--lease-wait`'s default, seconds: answer busy at once, as a person at a terminal
/// expects. Unattended runs set it to cover one TTL (k8s/20-configmap.yaml).
pub const DEFAULT_LEASE_WAIT: u64 = 0;

/// The validated configuration of one run; functions take this, never the environment.
#[derive(Debug, Clone)]
pub struct Config {
    pub input: Location,
    pub input_name: String,
    pub lake: Location,
    pub product: String,
    /// The product's contract (docs/contracts.md), loaded once at startup.
    pub contract: Arc<crate::contract::Contract>,
    /// `--rehash` (an inbox run): read every input rather than skip an unchanged one
    /// from its listing, and re-land one that was landed under another contract.
    pub rehash: bool,
    pub max_rejected_lines: u64,
    pub max_line_bytes: usize,
    /// A compressed input decoding to more is refused (`--max-decompressed-bytes`).
    pub max_decompressed_bytes: u64,
    /// How published objects are stored (`--output-compression`).
    pub output_compression: crate::compression::OutputCompression,
    pub lease_ttl: Duration,
    /// How long a run waits for a lease another run holds before answering busy.
    pub lease_wait: Duration,
    pub sweep_age: Duration,
    pub progress: crate::progress::Mode,
    pub s3: S3Options,
    /// The input's size and identity as an inbox listing saw them, recorded in the
    /// checkpoint for cheap skips (a single-input run asks the store instead).
    pub input_meta: Option<crate::store::ObjectMeta>,
    /// The memory budget (`--max-memory`, else the cgroup limit) and its derivation.
    pub memory: crate::budget::Memory,
    /// Where the dedup index spills when it passes its share (`--scratch-dir`).
    pub scratch_dir: std::path::PathBuf,
    /// Where `run` pushes its metrics when it ends (`--pushgateway`); none: nothing is sent.
    pub pushgateway: Option<crate::metrics::Pushgateway>,
}

impl Config {
    /// Bytes of S3 parts a run may hold in flight (none on a local lake).
    pub fn parts_in_flight(&self) -> u64 {
        self.lake.write_buffer(&self.s3)
    }

    /// The dedup index's share of one run's budget, if there is a budget.
    pub fn index_share(&self) -> Option<u64> {
        self.memory.index_share(self.parts_in_flight())
    }
}

/// An inbox run: the settings shared by every input plus how inputs are chosen.
#[derive(Debug, Clone)]
pub struct InboxConfig {
    /// Per-input settings; `input` and `input_name` are set for each input.
    pub base: Config,
    pub inbox: Location,
    pub pattern: crate::shard::Glob,
    pub min_age: Duration,
    /// `--jobs`; `None`: bounded by memory (see `inbox::Slots`).
    pub jobs: Option<usize>,
    pub shard: Option<crate::shard::Shard>,
}

/// What `landing run` was asked to do.
#[derive(Debug, Clone)]
pub enum RunPlan {
    Single(Config),
    Inbox(InboxConfig),
}

impl RunPlan {
    /// The resolved settings as one JSON object (`--dry-run`). Holds no secret: AWS
    /// credentials never enter the configuration.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let cfg = match self {
            RunPlan::Single(c) => c,
            RunPlan::Inbox(i) => &i.base,
        };
        let s3 = &cfg.s3;
        // Values are spelled as their flags take them.
        let mut v = json!({
            "dry_run": true,
            "lake": cfg.lake.to_string(),
            "product": cfg.product,
            "contract": {
                "name": cfg.contract.name,
                "version": cfg.contract.version,
                "sha256": cfg.contract.sha256,
            },
            "max_rejected_lines": cfg.max_rejected_lines,
            "max_line_bytes": cfg.max_line_bytes,
            "max_decompressed_bytes": cfg.max_decompressed_bytes,
            "output_compression": cfg.output_compression.name(),
            "lease_ttl": cfg.lease_ttl.as_secs(),
            "lease_wait": cfg.lease_wait.as_secs(),
            "sweep_age": cfg.sweep_age.as_secs(),
            "progress": cfg.progress.name(),
            "memory": {
                "budget_bytes": cfg.memory.total,
                "per_run_bytes": cfg.memory.per_run(),
                "index_share_bytes": cfg.index_share(),
                "derived": cfg.memory.describe(cfg.parts_in_flight()),
            },
            "scratch_dir": cfg.scratch_dir.display().to_string(),
            "pushgateway": cfg.pushgateway.as_ref().map(|p| json!({
                "url": p.url,
                "timeout": p.timeout.as_secs(),
            })),
            "s3": {
                "force_path_style": s3.force_path_style,
                "part_size_mib": s3.part_size >> 20,
                "upload_concurrency": s3.upload_concurrency,
                "copy_threshold": s3.copy_threshold,
                "max_attempts": s3.max_attempts,
                "operation_timeout": s3.operation_timeout.as_secs(),
                "attempt_timeout": s3.attempt_timeout.as_secs(),
                "read_timeout": s3.read_timeout.as_secs(),
                "conditional_copy": s3.conditional_copy.name(),
                "request_checksum": s3.request_checksum.map(|m| m.name()),
                "response_checksum": s3.response_checksum.map(|m| m.name()),
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
                v["jobs"] = i.jobs.map_or(json!("auto"), |n| json!(n));
                v["shard"] = json!(i.shard.map(|s| s.to_string()));
                v["rehash"] = json!(i.base.rehash);
            }
        }
        v
    }
}

/// Validated settings of `verify --deep`'s reads: the process's memory budget
/// (divided among the objects read at once) and where their indexes spill.
#[derive(Debug, Clone)]
pub struct DeepConfig {
    pub memory: crate::budget::Memory,
    pub scratch_dir: std::path::PathBuf,
    /// Test hook: spill every this many distinct events (as `run`'s hidden flag).
    pub spill_every: Option<usize>,
}

/// Validated settings of `status` and `verify`.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    pub lake: Location,
    pub product: String,
    /// The contract in force (`None`: a product without one; `verify` then skips
    /// the contract comparison and `--deep`).
    pub contract: Option<Arc<Contract>>,
    pub json: bool,
    pub s3: S3Options,
}

/// Validated drill settings.
#[derive(Debug, Clone)]
pub struct DrillConfig {
    pub lake: Location,
    pub size: u64,
    pub json: bool,
    pub keep: bool,
    /// How the generated inputs are stored (`--compress`).
    pub compress: crate::compression::OutputCompression,
    pub s3: S3Options,
    /// The S3 flags to hand to each child run, so it talks to the same store.
    pub child_args: Vec<String>,
}

/// A product name is used in keys: keep it path-safe.
pub fn path_safe_product(product: &str) -> Result<()> {
    let ok = !product.is_empty()
        && product
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !ok {
        return Err(Error::Config(format!(
            "--product must match [a-z0-9_-]+, got {product:?}"
        )));
    }
    Ok(())
}

/// Where a run's contract comes from (`--contract`, `--contracts-dir`, or neither).
#[derive(Debug, Clone, Copy, Default)]
pub struct ContractSource<'a> {
    pub file: Option<&'a std::path::Path>,
    pub dir: Option<&'a std::path::Path>,
}

/// Reads and compiles one contract file; the error names the file and the problem.
pub fn load_contract(path: &std::path::Path) -> Result<Arc<Contract>> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Config(format!("contract {}: {e}", path.display())))?;
    Contract::load(&bytes).map_err(|e| Error::Config(format!("contract {}: {e}", path.display())))
}

/// The product and its contract: `--contract FILE` (the product defaults to the
/// contract's name and must equal it), `--contracts-dir DIR` (`DIR/<product>.json`),
/// or the contract compiled into the binary (`progress`).
pub fn resolve_contract(
    product: Option<&str>,
    source: ContractSource<'_>,
) -> Result<(String, Arc<Contract>)> {
    if let Some(p) = product {
        path_safe_product(p)?;
    }
    // The file the contract came from, named by the message when it is for another
    // product (docs/contracts.md section 4).
    let (product, contract, file) = match (source.file, source.dir) {
        (Some(_), Some(_)) => {
            return Err(Error::Config(
                "give either --contract (one file) or --contracts-dir, not both".into(),
            ))
        }
        (Some(file), None) => {
            let c = load_contract(file)?;
            (
                product.unwrap_or(&c.name).to_owned(),
                c,
                Some(file.to_owned()),
            )
        }
        (None, Some(dir)) => {
            let product = product.unwrap_or("progress").to_owned();
            let file = dir.join(format!("{product}.json"));
            let c = load_contract(&file)?;
            (product, c, Some(file))
        }
        (None, None) => {
            let product = product.unwrap_or("progress").to_owned();
            let c = crate::contract::builtin(&product).ok_or_else(|| {
                Error::Config(format!(
                    "no contract for product {product:?}: give --contract FILE or --contracts-dir DIR (only \"progress\" is built in)"
                ))
            })?;
            (product, c, None)
        }
    };
    if contract.name != product {
        let source = file.map_or_else(
            || "the built-in contract".to_owned(),
            |f| format!("contract {}", f.display()),
        );
        return Err(Error::Config(format!(
            "{source}: the contract is for product {:?}, not {product:?}",
            contract.name
        )));
    }
    Ok((product, contract))
}

/// An input's name as it publishes, keys its checkpoint and its lease: the file
/// name without a `.gz` or `.zst` suffix. It becomes part of published keys; hidden
/// names are reserved for temp files, so they are never valid inputs.
pub fn input_name(input: &Location) -> Result<String> {
    let name = input
        .name()
        .map(crate::compression::published_name)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Error::Config(format!("{input}: cannot take an input name from it")))?;
    if name.starts_with('.') || name.chars().any(|c| c.is_control()) {
        return Err(Error::Config(format!(
            "{input}: input names may not start with '.' or hold control characters"
        )));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_names_exclude_hidden_and_empty() {
        assert_eq!(
            input_name(&Location::parse("/in/a.jsonl").unwrap()).unwrap(),
            "a.jsonl"
        );
        assert!(input_name(&Location::parse("/in/.a.jsonl.tmp").unwrap()).is_err());
        assert!(input_name(&Location::parse("s3://b/").unwrap()).is_err());
        assert_eq!(
            input_name(&Location::parse("/in/a.jsonl.gz").unwrap()).unwrap(),
            "a.jsonl"
        );
        assert_eq!(
            input_name(&Location::parse("s3://b/in/a.jsonl.zst").unwrap()).unwrap(),
            "a.jsonl"
        );
        assert!(input_name(&Location::parse("/in/.gz").unwrap()).is_err());
    }

    #[test]
    fn product_must_be_path_safe_and_have_a_contract() {
        let none = ContractSource::default();
        let (product, c) = resolve_contract(None, none).unwrap();
        assert_eq!(
            (product.as_str(), c.name.as_str()),
            ("progress", "progress")
        );
        assert!(resolve_contract(Some("../x"), none).is_err());
        assert!(resolve_contract(Some("Progress"), none).is_err());
        let e = resolve_contract(Some("orders"), none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no contract for product \"orders\""), "{e}");
    }

    #[test]
    fn contracts_come_from_a_file_or_a_folder_and_name_their_product() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contracts");
        let file = dir.join("enrollment.json");
        let from_file = ContractSource {
            file: Some(&file),
            dir: None,
        };
        let (product, c) = resolve_contract(None, from_file).unwrap();
        assert_eq!(
            (product.as_str(), c.name.as_str()),
            ("enrollment", "enrollment")
        );
        let e = resolve_contract(Some("progress"), from_file)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("enrollment.json")
                && e.contains("for product \"enrollment\", not \"progress\""),
            "{e}"
        );
        let from_dir = ContractSource {
            file: None,
            dir: Some(&dir),
        };
        assert_eq!(
            resolve_contract(Some("enrollment"), from_dir)
                .unwrap()
                .1
                .name,
            "enrollment"
        );
        assert_eq!(
            resolve_contract(None, from_dir).unwrap().1.sha256,
            crate::contract::progress().sha256
        );
        let e = resolve_contract(Some("orders"), from_dir)
            .unwrap_err()
            .to_string();
        assert!(e.contains("orders.json"), "{e}");
        let bad = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(bad.path(), b"{\"name\":1}").unwrap();
        let e = load_contract(bad.path()).unwrap_err().to_string();
        assert!(
            e.contains(&bad.path().display().to_string()) && e.contains("not a contract"),
            "{e}"
        );
    }
}
