//! The engine of `landing`: everything a run is made of, over the layers below it.
//! `landing` lands closed JSONL event files (any stream with a contract file) from
//! an inbox into the raw zone of a data lake, under a run contract: a retry, a crash
//! at any instant, an overlapping run or a bad file never doubles, tears or leaks data.
//!
//! It builds on crates of the workspace, which never name it: `landing-error` (the
//! one error enum and the exit codes), `landing-contract` (the rules of a line,
//! pure), `landing-store` (the `Store` trait and its local and S3 backends),
//! `landing-index` (the dedup index), `landing-terminal` (progress), and
//! `landing-compression` and `landing-pass` (the line pass: frame, check, sequence,
//! spill, merge, replay). The engine keeps the run around the pass: its stages,
//! lease, checkpoint and commit log. The binary (the root package: its command
//! line, tracing and exit codes) is the only crate above it. Inside, dependencies point one way: `inbox` → `land` → `pipeline`
//! → `lease`, `checkpoint`, `layout` → the store.
//!
//! Module map, in the order a run meets them:
//!
//! - [`shutdown`]: the one cancellation token, cancelled by the first SIGTERM or
//!   SIGINT; `main` installs the handlers (for `run`) and hands it down through
//!   `inbox` and `pipeline`; every wait that a signal may cut short selects on it.
//! - [`config`]: the validated settings every function takes instead of the environment.
//! - [`hook`]: crash, pause and freeze points, handed to the pipeline by the command
//!   line (hidden flags), the drill and the tests; those that fire inside a write
//!   reach the store as the `WriteObserver` of the run's gate. A normal run has none.
//! - `layout`: the lake layout, the one place that names raw, quarantine, checkpoint,
//!   lease and run-record keys and reads them back from a listing.
//! - [`lease`]: one run per (product, input) at a time; a compare-and-swap under a
//!   lock file (`locks/.cas/`) on a local disk, `If-None-Match: *` on S3, judged by
//!   the observer's own clock, with a monotonic deadline checked before every write
//!   (and, through the store's gate, once more at the last instant of each write), a
//!   conditional release, and the backoff of a run waiting for a held lease.
//! - `checkpoint`: the record of the last success, read at start, written last
//!   with compare-and-swap; whether the published object is still the one it
//!   recorded (`Drift`: the skip rule, cheap skips and `verify`).
//! - [`commit_log`]: the readers' commit log of a product under
//!   `raw/<product>/_landing_log/`: an entry per publish, numbered without gaps,
//!   created and never overwritten, written between the publish and the checkpoint;
//!   the hint of its end, the snapshots, and what `landing feed` reads.
//! - `identity` (from `landing-index`): digests of canonical events and the
//!   fixed-size dedup index.
//! - [`budget`]: the memory budget (`--max-memory`, else the cgroup limit), divided
//!   by `--jobs`, and the dedup index's share of one run's part of it.
//! - `spill` (from `landing-index`): when the index reaches its share, sorted runs of digests in
//!   `--scratch-dir`, merged before the publish (`landing-pass`'s `resolve` checks
//!   full ids; what the merge kept is written by its `replay`, a second read of the
//!   input, or by `pipeline/second_pass.rs`, a filtered copy of the staged output).
//! - [`pipeline`]: the run, read top-down: `pipeline/mod.rs` is the sequence
//!   (connect, lease, prepare, skip rule, stream, stage, publish, checkpoint, tidy,
//!   release) and each stage a module that hands its result to the next; its one
//!   pass over the input frames lines (the contract's framer, packed into batches),
//!   checks them on both cores and decides in input order (the line pass, crate
//!   `landing-pass`: `scan`, `validator`) while `pipeline/stream.rs` writes the
//!   staging; `pipeline/pass.rs` hands the pass its limits and spill plan.
//!   `pipeline/repair.rs` runs after a process's inputs: the log entry of a publish
//!   whose run died before writing it, from the label the publish carried.
//! - [`summary`]: the one-line JSON summary printed on stdout, and the outcomes
//!   (`Action`) everything counts.
//! - [`progress`] (`landing-terminal`): the process's `Terminal` handle: progress bars on a terminal (an
//!   inbox run: a bar per input in flight over a footer, a line per finished input,
//!   the totals), log lines and stdout lines written above them whole; periodic log
//!   lines without a terminal.
//! - [`land`]: landing one input, the same for `landing run --input` and each input
//!   of an inbox: the cheap skip or the run through `pipeline::run`, then its run
//!   record and its metrics; and the log's repair after them (`land::repair_log`).
//! - [`inbox`]: `landing run --inbox`: lists an inbox, hands each input to `land`
//!   (its cheap skip, then its full run up to `--jobs` at once), prints a line per
//!   input and the totals.
//! - [`shard`]: the `--match` glob and the fixed `--shard I/N` hash of input names.
//! - `history`: run records under `runs/` and the per-stage timer (`Trace`) each
//!   input's run is handed and fills.
//! - [`metrics`]: what a run measured, summed over its inputs by the `Recorder`
//!   every input adds to, and the `--pushgateway` settings; the `landing-metrics`
//!   crate above this one encodes and pushes it when the run ends.
//! - [`audit`]: `landing status` and `landing verify`, read-only views of the lake;
//!   `verify --deep` reads each published object through the landing's own pass.
//! - [`drill`]: `landing drill`, the crash diagram rehearsed against a real store.
//! - [`compression`] (`landing-compression`): gzip and zstd inputs told by their magic bytes, the
//!   published name of a compressed input, the decoder thread the one pass feeds,
//!   and the encoders of `--output-compression`.
//! - [`generate`]: deterministic sample inputs for drills, tests and benchmarks.

pub mod audit;
pub mod budget;
mod checkpoint;
pub mod commit_log;
pub mod config;
pub mod drill;
pub mod generate;
mod history;
pub mod hook;
pub mod inbox;
pub mod land;
mod layout;
pub mod lease;
pub mod metrics;
pub mod pipeline;
pub mod shard;
pub mod shutdown;
pub mod summary;

// The layers below, under the names the engine's modules use for them.
/// Compressed inputs and outputs, from `landing-compression`, under the name the
/// engine's modules and the binary use for it.
pub use landing_compression as compression;
pub(crate) use landing_contract as contract;
pub(crate) use landing_error as error;
pub(crate) use landing_index::{identity, spill};
pub(crate) use landing_store as store;
/// The terminal, from `landing-terminal`, under the name the engine's modules and
/// the binary use for it.
pub use landing_terminal as progress;

pub use landing_error::{Error, Result};
pub use landing_error::{
    EXIT_BUSY, EXIT_FAILURE, EXIT_OK, EXIT_REFUSED, EXIT_SIGINT, EXIT_SIGTERM, EXIT_USAGE,
};

/// A UTC time as RFC 3339 (checkpoints, leases, run records).
pub(crate) fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        // Only years outside 0..=9999 fail to format; every time here is a clock
        // reading or one plus a lease TTL.
        .expect("a clock time formats as RFC 3339")
}

/// Version recorded in checkpoints.
pub const JOB_VERSION: &str = env!("CARGO_PKG_VERSION");
