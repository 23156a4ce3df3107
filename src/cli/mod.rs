//! The command line: the subcommands, their arguments ([`args`]: every flag with
//! its `LANDING_*` variable), and the dispatch of a parsed command to the library.

pub mod args;
mod choice;
mod hooks;
mod settings;

use clap::{Parser, Subcommand};

use args::{AuditArgs, CommonArgs, ContractArgs, DrillArgs, LogFormat, RunArgs};

use landing_engine::commit_log::Appender;
use landing_engine::config::{Config, RunPlan};
use landing_engine::hook::Hooks;
use landing_engine::land::Input;
use landing_engine::lease::Sightings;
use landing_engine::pipeline::{self, Handles, Opened};
use landing_engine::progress::Terminal;
use landing_engine::shutdown::Shutdown;
use landing_engine::summary::Summary;
use landing_error::{Error, Result};

#[derive(Debug, Parser)]
#[command(
    name = "landing",
    version,
    about = "Land closed JSONL event files (any stream with a contract file) into a data lake's raw zone, crash-safe",
    long_about = "Land closed JSONL event files (any stream with a contract file) into the raw zone \
of a data lake on S3-compatible storage or a local folder. Each line is checked against its product's contract file \
(docs/contracts.md); a retry, a crash, an overlapping run or a bad file never doubles, \
tears or leaks data, and every run prints what it did.",
    after_help = "Examples:\n  \
landing run --input examples/inbox/progress-2026-03-02.jsonl --max-rejected-lines 1\n  \
landing run --inbox s3://inbox/progress/ --lake s3://lake/raw-zone\n  \
landing check --input day.jsonl\n  \
landing status --lake ./lake\n\n\
Exit codes: 0 ok, 1 error, 2 usage, 65 refused, 75 busy or conflict, 130/143 interrupted."
)]
pub struct Cli {
    /// More log lines on stderr: -v INFO (at a terminal they are hidden behind the
    /// bars by default), -vv DEBUG. Overrides --log-level.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, help_heading = "Logging")]
    pub verbose: u8,

    /// Only errors on stderr, and an inbox run's totals; no bars. Overrides
    /// --log-level.
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "verbose",
        help_heading = "Logging"
    )]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Land one input (--input) or every input of an inbox (--inbox): publish,
    /// skip (unchanged) or refuse each.
    #[command(after_help = "Examples:\n  \
landing run --input examples/inbox/progress-2026-03-02.jsonl --max-rejected-lines 1\n  \
landing run --input day.jsonl --lake s3://lake-bucket/lake --lease-wait 240\n  \
landing run --inbox s3://inbox-bucket/progress/ --lake s3://lake-bucket/lake --min-age 300\n  \
landing run --input day.jsonl --product enrollment --contracts-dir contracts\n  \
landing run --inbox ./inbox --dry-run")]
    Run(RunArgs),
    /// Validate one input exactly as `run` would, writing nothing anywhere.
    #[command(after_help = "Examples:\n  \
landing check --input day.jsonl\n  \
landing check --input day.jsonl.gz --max-rejected-lines 10\n  \
landing check --input day.jsonl --contract contracts/enrollment.json")]
    Check(CommonArgs),
    /// Write a deterministic sample input (drills, tests, benchmarks).
    #[command(after_help = "Example:\n  landing generate --lines 1000000 --out day.jsonl")]
    Generate(GenerateArgs),
    /// Rehearse the crash diagram against a store (scratch namespace under the lake).
    #[command(after_help = "Examples:\n  \
landing drill --lake ./lake\n  \
landing drill --lake s3://lake-bucket/lake --size-mib 24 --json")]
    Drill(DrillArgs),
    /// Show the lake: one row per checkpointed input, leases held, staging leftovers
    /// (or one input's run history). Reads only.
    #[command(after_help = "Examples:\n  \
landing status --lake ./lake\n  \
landing status --lake s3://lake-bucket/lake --history progress-2026-03-02.jsonl\n  \
landing status --lake ./lake --product enrollment --contracts-dir contracts --json")]
    Status(StatusArgs),
    /// Check every checkpoint against its published object (--deep: read and check
    /// every line). Exit 0 clean, 1 with one line per finding. Reads only.
    #[command(after_help = "Examples:\n  \
landing verify --lake ./lake\n  \
landing verify --lake s3://lake-bucket/lake --deep --json")]
    Verify(VerifyArgs),
    /// Read the product's commit log, as a downstream job does: the entries after a
    /// cursor (--since N) as JSON lines, then {"cursor":N}; without --since, each
    /// published object's latest entry. Reads only `raw/`.
    #[command(after_help = "Examples:\n  \
landing feed --lake ./lake --since 0\n  \
landing feed --lake s3://lake-bucket/lake --product enrollment --since 41\n  \
landing feed --lake ./lake --since 41 --files")]
    Feed(FeedArgs),
    /// Product contracts (docs/contracts.md): check a file, show the one in force,
    /// print the JSON Schema producers validate lines with.
    #[command(subcommand)]
    #[command(after_help = "Examples:\n  \
landing contract check contracts/enrollment.json\n  \
landing contract show enrollment --contracts-dir contracts\n  \
landing contract schema progress > progress.schema.json")]
    Contract(ContractCommand),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish), or write
    /// every shell's into a folder.
    #[command(after_help = "Examples:\n  \
landing completions bash > ~/.local/share/bash-completion/completions/landing\n  \
landing completions zsh > \"${fpath[1]}/_landing\"\n  \
landing completions fish > ~/.config/fish/completions/landing.fish\n  \
landing completions --out-dir /usr/local/share/landing/completions")]
    Completions {
        /// The shell whose script is printed.
        #[arg(required_unless_present = "out_dir")]
        shell: Option<clap_complete::Shell>,
        /// Write each shell's script here under its usual name (landing.bash,
        /// _landing, landing.fish, _landing.ps1, landing.elv) instead.
        #[arg(long, conflicts_with = "shell")]
        out_dir: Option<std::path::PathBuf>,
    },
    /// Print the man page (roff), or write one page per command into a folder.
    #[command(after_help = "Examples:\n  \
landing man | man -l -\n  \
landing man --out-dir /usr/share/man/man1")]
    Man {
        /// Write landing.1 and landing-<command>.1 here instead of printing
        /// landing.1.
        #[arg(long)]
        out_dir: Option<std::path::PathBuf>,
    },
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
    fn resolve(&self) -> Result<std::sync::Arc<landing_contract::Contract>> {
        landing_engine::config::resolve_contract(self.product.as_deref(), self.contract.source())
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

    /// Memory budget of --deep's reads (`512MiB`, `3GiB`, bytes, or `unlimited`),
    /// as `run`'s: by default the cgroup memory limit less headroom. Past its share
    /// an object's id index spills to --scratch-dir.
    #[arg(long, env = "LANDING_MAX_MEMORY", help_heading = "Limits")]
    pub max_memory: Option<String>,

    /// Folder for --deep's index spill runs (default: the system temp folder).
    #[arg(long, env = "LANDING_SCRATCH_DIR", help_heading = "Limits")]
    pub scratch_dir: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub deep_hooks: hooks::DeepHooks,
}

#[derive(Debug, Clone, clap::Args)]
pub struct FeedArgs {
    #[command(flatten)]
    pub audit: AuditArgs,
    /// The last entry the reader has read (0: from the first). Without it, the
    /// current state: each published object's latest entry.
    #[arg(long)]
    pub since: Option<u64>,
    /// Print only the published objects' locations, one per line, each once.
    #[arg(long)]
    pub files: bool,
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
            Command::Run(a) => a.common.log.log_format,
            Command::Check(c) => c.log.log_format,
            Command::Drill(d) => d.log.log_format,
            Command::Status(s) => s.audit.log.log_format,
            Command::Verify(v) => v.audit.log.log_format,
            Command::Feed(f) => f.audit.log.log_format,
            Command::Generate(_)
            | Command::Contract(_)
            | Command::Completions { .. }
            | Command::Man { .. } => LogFormat::Text,
        }
    }

    /// Whether the command winds down on SIGTERM or SIGINT (a lease to release,
    /// staging to remove); the others keep the default and end at once.
    pub fn stops_cleanly(&self) -> bool {
        matches!(self.command, Command::Run(_))
    }

    /// The log filter: `-q` errors only, `-v` INFO, `-vv` DEBUG; else `--log-level`;
    /// else the command's default, which for `run` and `check` is INFO, or WARN when
    /// `bars` (stderr is a terminal showing progress bars, whose result lines say what
    /// the INFO lines would).
    pub fn log_level(&self, bars: bool) -> String {
        if self.quiet {
            return "error".into();
        }
        match self.verbose {
            0 => {}
            1 => return "info".into(),
            _ => return "debug".into(),
        }
        let common = match &self.command {
            Command::Run(a) => &a.common.log_level,
            Command::Check(c) => &c.log_level,
            Command::Generate(g) => return g.log_level.clone(),
            Command::Drill(d) => return d.log_level.clone(),
            Command::Status(s) => return s.audit.log_level.clone(),
            Command::Verify(v) => return v.audit.log_level.clone(),
            Command::Feed(f) => return f.audit.log_level.clone(),
            Command::Contract(_) | Command::Completions { .. } | Command::Man { .. } => {
                return "warn".into()
            }
        };
        match common {
            Some(level) => level.clone(),
            None if bars => "warn".into(),
            None => "info".into(),
        }
    }

    /// Whether this command draws progress bars on a terminal: `run` and `check`
    /// with text logs, unless `--progress never` or `-q`.
    pub fn draws_bars(&self) -> bool {
        match &self.command {
            Command::Run(a) => {
                !self.quiet
                    && a.common.log.log_format == LogFormat::Text
                    && a.progress != landing_engine::progress::Mode::Never
            }
            Command::Check(c) => !self.quiet && c.log.log_format == LogFormat::Text,
            _ => false,
        }
    }
}

/// What a command produced.
pub enum Outcome {
    Summary(Box<Summary>),
    Generated,
    /// A drill's report, printed as JSON (`--json`) or as a table.
    Drill {
        report: Box<landing_engine::drill::Report>,
        json: bool,
    },
    /// Output already printed (inbox runs, status, verify); exit with this code.
    Exit(i32),
}

/// Run the parsed command; the summary is printed by the caller. `shutdown` is the
/// process's (see [`Cli::stops_cleanly`]), and so is `terminal`, its bars and the
/// lines written above them.
pub async fn execute(cli: &Cli, shutdown: &Shutdown, terminal: &Terminal) -> Result<Outcome> {
    match &cli.command {
        Command::Run(args) => {
            let quiet;
            let args = if cli.quiet {
                // -q: no bars and no line per input (an inbox run still says its totals).
                let mut a = args.clone();
                a.progress = landing_engine::progress::Mode::Quiet;
                quiet = a;
                &quiet
            } else {
                args
            };
            let plan = args.plan()?;
            if args.dry_run {
                println!("{}", plan.to_json());
                return Ok(Outcome::Exit(landing_error::EXIT_OK));
            }
            let recorder = landing_engine::metrics::Recorder::default();
            let outcome = match &plan {
                RunPlan::Single(cfg) => {
                    let handles = Handles {
                        shutdown,
                        sightings: &Sightings::default(),
                        log: &Appender::default(),
                        terminal,
                    };
                    run_single(cfg, &args.hooks(), handles, &recorder).await
                }
                RunPlan::Inbox(ic) => {
                    landing_engine::inbox::run(ic, &args.hooks(), shutdown, terminal, &recorder)
                        .await
                        .map(Outcome::Exit)
                }
            };
            push_metrics(&plan, &recorder, &outcome).await;
            outcome
        }
        Command::Check(args) => Ok(Outcome::Summary(Box::new(
            pipeline::check(&args.check_config()?, args.hooks(), terminal).await?,
        ))),
        Command::Generate(g) => generate(g).map(|()| Outcome::Generated),
        Command::Drill(d) => {
            let cfg = d.config()?;
            let report = landing_engine::drill::drill(&cfg).await?;
            Ok(Outcome::Drill {
                report: Box::new(report),
                json: cfg.json,
            })
        }
        Command::Status(s) => {
            let cfg = s.audit.config()?;
            Ok(Outcome::Exit(
                landing_engine::audit::status(&cfg, s.history.as_deref()).await?,
            ))
        }
        Command::Verify(v) => {
            let cfg = v.audit.config()?;
            let deep = v.deep_config()?;
            Ok(Outcome::Exit(
                landing_engine::audit::verify(&cfg, deep.as_ref()).await?,
            ))
        }
        Command::Feed(f) => {
            let cfg = f.audit.config()?;
            let req = landing_engine::audit::FeedRequest {
                since: f.since,
                files: f.files,
            };
            Ok(Outcome::Exit(landing_engine::audit::feed(&cfg, req).await?))
        }
        Command::Contract(c) => contract(c).map(|()| Outcome::Exit(landing_error::EXIT_OK)),
        Command::Completions { shell, out_dir } => {
            completions(*shell, out_dir.as_deref()).map(|()| Outcome::Exit(landing_error::EXIT_OK))
        }
        Command::Man { out_dir } => {
            man(out_dir.as_deref()).map(|()| Outcome::Exit(landing_error::EXIT_OK))
        }
    }
}

/// `landing completions`: one shell's script on stdout, or every shell's in a folder.
fn completions(
    shell: Option<clap_complete::Shell>,
    out_dir: Option<&std::path::Path>,
) -> Result<()> {
    use clap_complete::Shell;
    let script = |shell: Shell| {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        // Into memory first: clap_complete panics on a write error (a closed pipe).
        let mut bytes = Vec::new();
        clap_complete::generate(shell, &mut cmd, "landing", &mut bytes);
        bytes
    };
    let Some(dir) = out_dir else {
        // clap requires the shell when no folder is given.
        return shell.map_or(Ok(()), |s| print_bytes(&script(s)));
    };
    let location = dir.display().to_string();
    std::fs::create_dir_all(dir).map_err(|e| Error::store("create", &location, e))?;
    for (shell, name) in [
        (Shell::Bash, "landing.bash"),
        (Shell::Zsh, "_landing"),
        (Shell::Fish, "landing.fish"),
        (Shell::PowerShell, "_landing.ps1"),
        (Shell::Elvish, "landing.elv"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, script(shell))
            .map_err(|e| Error::store("write", path.display().to_string(), e))?;
    }
    Ok(())
}

/// Write generated text to stdout; a reader that closed the pipe early (`| head`)
/// is no error.
fn print_bytes(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::store("write", "stdout", e))
        }
        _ => Ok(()),
    }
}

/// `landing man`: the tool's page on stdout, or with `--out-dir` one page for the
/// tool and one per command (`landing-run.1`, `landing-contract-check.1`, ...).
fn man(out_dir: Option<&std::path::Path>) -> Result<()> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let Some(dir) = out_dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .map_err(|e| Error::store("render", "the man page", e))?;
        return print_bytes(&page);
    };
    let location = dir.display().to_string();
    std::fs::create_dir_all(dir).map_err(|e| Error::store("create", &location, e))?;
    clap_mangen::generate_to(cmd, dir).map_err(|e| Error::store("write man pages", &location, e))
}

/// One input, with its run record; a failure keeps its error, which main prints
/// with its chain and maps to the exit code.
async fn run_single(
    cfg: &Config,
    hooks: &Hooks,
    handles: Handles<'_>,
    recorder: &landing_engine::metrics::Recorder,
) -> Result<Outcome> {
    let input = Input {
        cfg,
        hooks,
        handles,
        lake: None,
        opened: Opened::default(),
        recorder,
    };
    let landed = input.land().await;
    let mut summary = landed.result?;
    let mine = std::iter::once(cfg.input_name.clone()).collect();
    let repairs = landing_engine::land::repair_log(cfg, None, handles, &mine).await?;
    recorder.repaired(&repairs);
    summary.log_repairs = (!repairs.is_empty()).then_some(repairs);
    Ok(Outcome::Summary(Box::new(summary)))
}

/// After a run, with its exit code known: push its metrics when `--pushgateway` is
/// set. Bounded by `--pushgateway-timeout`; never changes the outcome.
async fn push_metrics(
    plan: &RunPlan,
    recorder: &landing_engine::metrics::Recorder,
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
        Ok(Outcome::Generated | Outcome::Drill { .. }) => landing_error::EXIT_OK,
        Err(e) => e.exit_code(),
    };
    let end = landing_metrics::Ending {
        exit_code,
        ended_at: time::OffsetDateTime::now_utc().unix_timestamp_nanos() as f64 / 1e9,
        duration: recorder.elapsed(),
    };
    landing_metrics::push(gw, &cfg.product, shard, &recorder.night(), &end).await;
}

fn contract(c: &ContractCommand) -> Result<()> {
    match c {
        ContractCommand::Check { file } => {
            let k = landing_engine::config::load_contract(file)?;
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
            let schema = landing_contract::schema::json_schema(&*l.resolve()?);
            // A Value always serialises.
            let text = serde_json::to_string_pretty(&schema).expect("a schema serialises");
            println!("{text}");
        }
    }
    Ok(())
}

fn generate(g: &GenerateArgs) -> Result<()> {
    let spec = landing_engine::generate::Spec {
        lines: g.lines,
        duplicate_per_mille: g.duplicate_per_mille,
        malformed_per_mille: g.malformed_per_mille,
        seed: g.seed,
    };
    let location = g.out.display().to_string();
    let file = std::fs::File::create(&g.out).map_err(|e| Error::store("create", &location, e))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    landing_engine::generate::generate(&spec, &mut w)
        .map_err(|e| Error::store("write", &location, e))
}
