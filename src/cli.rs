//! The command line: `landing run` and `landing check`, and the mapping from an
//! outcome to the process exit code.

use clap::{Parser, Subcommand};

use crate::config::{CommonArgs, Config, DrillArgs, DrillConfig, LogFormat, RunArgs};
use crate::error::{Error, Result};
use crate::pipeline;
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

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Land one input: publish it, skip it (unchanged) or refuse it.
    Run(RunArgs),
    /// Validate one input exactly as `run` would, writing nothing anywhere.
    Check(CommonArgs),
    /// Write a deterministic sample input (drills, tests, benchmarks).
    Generate(GenerateArgs),
    /// Rehearse the crash diagram against a store (scratch namespace under the lake).
    Drill(DrillArgs),
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
        }
    }

    pub fn log_level(&self) -> &str {
        match &self.command {
            Command::Run(a) => &a.common.log_level,
            Command::Check(c) => &c.log_level,
            Command::Generate(g) => &g.log_level,
            Command::Drill(d) => &d.log_level,
        }
    }
}

/// What a command produced.
pub enum Outcome {
    Summary(Box<Summary>),
    Generated,
    Drill(Box<crate::drill::Report>, bool),
}

/// Run the parsed command; the summary is printed by the caller.
pub async fn execute(cli: &Cli) -> Result<Outcome> {
    match &cli.command {
        Command::Run(args) => Ok(Outcome::Summary(Box::new(
            pipeline::run(&Config::for_run(args)?).await?,
        ))),
        Command::Check(args) => Ok(Outcome::Summary(Box::new(
            pipeline::check(&Config::for_check(args)?).await?,
        ))),
        Command::Generate(g) => generate(g).map(|()| Outcome::Generated),
        Command::Drill(d) => {
            let cfg = DrillConfig::from_args(d)?;
            let report = crate::drill::drill(&cfg).await?;
            Ok(Outcome::Drill(Box::new(report), cfg.json))
        }
    }
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
