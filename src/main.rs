//! Thin entry point: parse, set up logging, listen for SIGTERM/SIGINT, run, print
//! the summary, map the outcome to an exit code, print the error chain.

use std::io::IsTerminal;
use std::process::ExitCode;

mod cli;

use clap::Parser;
use cli::args::LogFormat;
use cli::Cli;
use landing_engine::progress::Terminal;
use landing_engine::shutdown::Shutdown;
use tracing_subscriber::EnvFilter;

/// Logs on stderr, each event written whole and above any progress bars of
/// `terminal` ([`landing_engine::progress::LogLine`]); colours only on a terminal
/// and without `NO_COLOR` (<https://no-color.org>: set and not empty).
fn init_tracing(format: LogFormat, level: &str, terminal: &Terminal) {
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let terminal = terminal.clone();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || terminal.log_line());
    match format {
        LogFormat::Json => builder.json().with_current_span(true).init(),
        LogFormat::Text => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            builder
                .with_ansi(std::io::stderr().is_terminal() && !no_color)
                .init()
        }
    }
}

/// The pipeline passes 1 MiB buffers between threads. glibc serves allocations that
/// large with fresh mmaps (or trims them back to the kernel), so every buffer would
/// be page-faulted in again: raise both thresholds so freed buffers are reused.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_allocator() {
    // SAFETY: mallopt only adjusts allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}

fn main() -> ExitCode {
    tune_allocator();
    // clap prints usage errors and exits with code 2 itself.
    let cli = Cli::parse();
    // At a terminal with bars, each input's result line says what its INFO lines
    // would: the default is quieter there; elsewhere nothing changes.
    // The process's one terminal, handed down to everything that draws or writes
    // above the bars.
    let terminal = Terminal::stderr();
    let bars = cli.draws_bars() && terminal.drawable();
    init_tracing(cli.log_format(), &cli.log_level(bars), &terminal);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("landing: error: cannot start the async runtime: {e}");
            return ExitCode::from(landing_error::EXIT_FAILURE as u8);
        }
    };
    let outcome = runtime.block_on(async {
        // Before any work, so no signal can arrive unheard; only `run` has anything
        // to wind down.
        let shutdown = if cli.stops_cleanly() {
            Shutdown::listen()
                .map_err(|e| landing_error::Error::internal("listen for signals", "landing", e))?
        } else {
            Shutdown::default()
        };
        cli::execute(&cli, &shutdown, &terminal).await
    });
    // Every task of the run has ended; only a metrics push cut off by its timeout can
    // leave a name lookup on the blocking pool, and the exit does not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(cli::Outcome::Summary(summary)) => {
            println!("{}", summary.to_json());
            ExitCode::from(summary.exit_code() as u8)
        }
        Ok(cli::Outcome::Generated) => ExitCode::SUCCESS,
        Ok(cli::Outcome::Exit(code)) => ExitCode::from(code as u8),
        Ok(cli::Outcome::Drill { report, json }) => {
            if json {
                // A report of strings and bools always serialises.
                println!(
                    "{}",
                    serde_json::to_string(&report).expect("a drill report serialises")
                );
            } else {
                print!("{}", report.table());
            }
            if report.passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(landing_error::EXIT_FAILURE as u8)
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "run failed");
            eprintln!("landing: error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
