//! The command line: the subcommands, their arguments ([`args`]: every flag with
//! its `LANDING_*` variable), and the dispatch of a parsed command to the library.

pub mod args;

use clap::{Parser, Subcommand};

use args::{AuditArgs, CommonArgs, ContractArgs, DrillArgs, LogFormat, RunArgs};

use crate::config::{Config, RunPlan};
use crate::error::{Error, Result};
use crate::hook::Hooks;
use crate::pipeline;
use crate::shutdown::Shutdown;
use crate::summary::Summary;

#[derive(Debug, Parser)]
#[command(
    name = "landing",
    version,
    about = "Land closed JSONL files of learner progress events into a data lake's raw zone",
    long_about = None,
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Land one input (--input) or every input of an inbox (--inbox): publish,
    /// skip (unchanged) or refuse each.
    Run(RunArgs),
    /// Validate one input exactly as `run` would, writing nothing anywhere.
    Check(CommonArgs),
    /// Write a deterministic sample input (drills, tests, benchmarks).
    Generate(GenerateArgs),
    /// Rehearse the crash diagram against a store (scratch namespace under the lake).
    Drill(DrillArgs),
    /// Show the lake: one row per checkpointed input, leases held, staging leftovers
    /// (or one input's run history). Reads only.
    Status(StatusArgs),
    /// Check every checkpoint against its published object (--deep: read and check
    /// every line). Exit 0 clean, 1 with one line per finding. Reads only.
    Verify(VerifyArgs),
    /// Product contracts (docs/contracts.md): check a file, show the one in force,
    /// print the JSON Schema producers validate lines with.
    #[command(subcommand)]
    Contract(ContractCommand),
}

#[derive(Debug, Subcommand)]
pub enum ContractCommand {
    /// Validate one contract file: exit 0 and a JSON line naming it, or exit 2 with
    /// the problem.
    Check {
        /// The contract file (JSON).
        file: std::path::PathBuf,
    },
    /// Print the contract in force for a product (its file, as written).
    Show(ContractLookup),
    /// Print the JSON Schema (draft 2020-12) of one line of a product.
    Schema(ContractLookup),
}

#[derive(Debug, Clone, clap::Args)]
pub struct ContractLookup {
    /// The product (default: the --contract file's name, else progress).
    pub product: Option<String>,
    #[command(flatten)]
    pub contract: ContractArgs,
}

impl ContractLookup {
    fn resolve(&self) -> Result<&'static crate::contract::Contract> {
        crate::config::resolve_contract(self.product.as_deref(), self.contract.source())
            .map(|(_, c)| c)
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub audit: AuditArgs,
    /// Show the run records of this input name, newest first.
    #[arg(long)]
    pub history: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub audit: AuditArgs,
    /// Also read every published object: line count, canonical lines, unique
    /// event ids, quarantine record count.
    #[arg(long)]
    pub deep: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct GenerateArgs {
    /// Number of lines.
    #[arg(long)]
    pub lines: u64,
    /// Output file.
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// Lines per thousand that repeat an earlier event (exact retries).
    #[arg(long, default_value_t = 10)]
    pub duplicate_per_mille: u32,
    /// Lines per thousand that are malformed.
    #[arg(long, default_value_t = 0)]
    pub malformed_per_mille: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, default_value = "info", hide = true)]
    pub log_level: String,
}

impl Cli {
    pub fn log_format(&self) -> LogFormat {
        match &self.command {
            Command::Run(a) => a.common.log_format,
            Command::Check(c) => c.log_format,
            Command::Generate(_) => LogFormat::Text,
            Command::Drill(d) => d.log_format,
            Command::Status(s) => s.audit.log_format,
            Command::Verify(v) => v.audit.log_format,
            Command::Contract(_) => LogFormat::Text,
        }
    }

    /// Whether the command winds down on SIGTERM or SIGINT (a lease to release,
    /// staging to remove); the others keep the default and end at once.
    pub fn stops_cleanly(&self) -> bool {
        matches!(self.command, Command::Run(_))
    }

    pub fn log_level(&self) -> &str {
        match &self.command {
            Command::Run(a) => &a.common.log_level,
            Command::Check(c) => &c.log_level,
            Command::Generate(g) => &g.log_level,
            Command::Drill(d) => &d.log_level,
            Command::Status(s) => &s.audit.log_level,
            Command::Verify(v) => &v.audit.log_level,
            Command::Contract(_) => "warn",
        }
    }
}

/// What a command produced.
pub enum Outcome {
    Summary(Box<Summary>),
    Generated,
    Drill(Box<crate::drill::Report>, bool),
    /// Output already printed (inbox runs, status, verify); exit with this code.
    Exit(i32),
}

/// Run the parsed command; the summary is printed by the caller. `shutdown` is the
/// process's (see [`Cli::stops_cleanly`]).
pub async fn execute(cli: &Cli, shutdown: &Shutdown) -> Result<Outcome> {
    match &cli.command {
        Command::Run(args) => {
            let plan = args.plan()?;
            if args.dry_run {
                println!("{}", plan.to_json());
                return Ok(Outcome::Exit(crate::EXIT_OK));
            }
            let recorder = crate::metrics::Recorder::default();
            let outcome = match &plan {
                RunPlan::Single(cfg) => run_single(cfg, &args.hooks(), shutdown, &recorder).await,
                RunPlan::Inbox(ic) => crate::inbox::run(ic, &args.hooks(), shutdown, &recorder)
                    .await
                    .map(Outcome::Exit),
            };
            push_metrics(&plan, &recorder, &outcome).await;
            outcome
        }
        Command::Check(args) => Ok(Outcome::Summary(Box::new(
            pipeline::check(&args.check_config()?, args.hooks()).await?,
        ))),
        Command::Generate(g) => generate(g).map(|()| Outcome::Generated),
        Command::Drill(d) => {
            let cfg = d.config()?;
            let report = crate::drill::drill(&cfg).await?;
            Ok(Outcome::Drill(Box::new(report), cfg.json))
        }
        Command::Status(s) => {
            let cfg = s.audit.config()?;
            Ok(Outcome::Exit(
                crate::audit::status(&cfg, s.history.as_deref()).await?,
            ))
        }
        Command::Verify(v) => {
            let cfg = v.audit.config()?;
            Ok(Outcome::Exit(crate::audit::verify(&cfg, v.deep).await?))
        }
        Command::Contract(c) => contract(c).map(|()| Outcome::Exit(crate::EXIT_OK)),
    }
}

/// One input, with its run record; a failure keeps its error, which main prints
/// with its chain and maps to the exit code.
async fn run_single(
    cfg: &Config,
    hooks: &Hooks,
    shutdown: &Shutdown,
    recorder: &crate::metrics::Recorder,
) -> Result<Outcome> {
    match crate::inbox::land_one(cfg, hooks, shutdown, None, false, None).await {
        Some(landed) => {
            let summary = landed.result.as_ref().ok();
            recorder.landed(&cfg.input_name, landed.action, summary, &landed.measured);
            recorder.count(landed.action);
            Ok(Outcome::Summary(Box::new(landed.result?)))
        }
        // Only an input waiting for a --jobs slot is stopped before it starts; a
        // single run starts at once and reports a signal in its summary.
        None => Ok(Outcome::Exit(
            shutdown
                .signal()
                .map_or(crate::EXIT_FAILURE, |s| s.exit_code()),
        )),
    }
}

/// After a run, with its exit code known: push its metrics when `--pushgateway` is
/// set. Bounded by `--pushgateway-timeout`; never changes the outcome.
async fn push_metrics(
    plan: &RunPlan,
    recorder: &crate::metrics::Recorder,
    outcome: &Result<Outcome>,
) {
    let (cfg, shard) = match plan {
        RunPlan::Single(c) => (c, None),
        RunPlan::Inbox(i) => (&i.base, i.shard),
    };
    let Some(gw) = &cfg.pushgateway else { return };
    let exit_code = match outcome {
        Ok(Outcome::Summary(s)) => s.exit_code(),
        Ok(Outcome::Exit(code)) => *code,
        Ok(Outcome::Generated | Outcome::Drill(..)) => crate::EXIT_OK,
        Err(e) => e.exit_code(),
    };
    let end = crate::metrics::Ending {
        exit_code,
        ended_at: time::OffsetDateTime::now_utc().unix_timestamp_nanos() as f64 / 1e9,
        duration: recorder.elapsed(),
    };
    crate::metrics::push(gw, &cfg.product, shard, &recorder.night(), &end).await;
}

fn contract(c: &ContractCommand) -> Result<()> {
    match c {
        ContractCommand::Check { file } => {
            let k = crate::config::load_contract(file)?;
            let line = serde_json::json!({
                "contract": file.display().to_string(),
                "valid": true,
                "name": k.name,
                "version": k.version,
                "sha256": k.sha256,
                "fields": k.fields.len(),
                "reasons": k.reason_codes(),
            });
            println!("{line}");
        }
        ContractCommand::Show(l) => {
            let k = l.resolve()?;
            print!("{}", k.source);
            if !k.source.ends_with('\n') {
                println!();
            }
        }
        ContractCommand::Schema(l) => {
            let schema = crate::contract::schema::json_schema(l.resolve()?);
            // A Value always serialises.
            let text = serde_json::to_string_pretty(&schema).expect("a schema serialises");
            println!("{text}");
        }
    }
    Ok(())
}

fn generate(g: &GenerateArgs) -> Result<()> {
    let spec = crate::generate::Spec {
        lines: g.lines,
        duplicate_per_mille: g.duplicate_per_mille,
        malformed_per_mille: g.malformed_per_mille,
        seed: g.seed,
    };
    let location = g.out.display().to_string();
    let file = std::fs::File::create(&g.out).map_err(|e| Error::store("create", &location, e))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    crate::generate::generate(&spec, &mut w).map_err(|e| Error::store("write", &location, e))
}
