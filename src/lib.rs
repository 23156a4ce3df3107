//! `landing` lands closed JSONL event files (any stream with a contract file) from
//! an inbox into the raw zone of a data lake, under a run contract: a retry, a crash at any
//! instant, an overlapping run or a bad file never doubles, tears or leaks data.
//!
//! Module map, in the order a run meets them. Dependencies point one way: `main.rs`
//! → `cli` → `config` → `pipeline`/`inbox` → `store`.
//!
//! - [`cli`]: the subcommands and their flags ([`cli::args`]: every flag with its
//!   `LANDING_*` variable, validated there into settings and hooks), and the dispatch
//!   of a parsed command.
//! - [`shutdown`]: the one cancellation token, cancelled by the first SIGTERM or
//!   SIGINT; `main` installs the handlers (for `run`) and hands it down through
//!   `cli`, `inbox` and `pipeline`; every wait that a signal may cut short selects on it.
//! - `config`: the validated settings every function takes instead of the environment.
//! - `hook`: crash and pause points, handed to the pipeline by the command line (hidden
//!   flags), the drill and the tests; a normal run has none.
//! - `layout`: the lake layout, the one place that names raw, quarantine, checkpoint,
//!   lease and run-record keys and reads them back from a listing; also how a key
//!   joins a [`store::Location`].
//! - [`lease`]: one run per (product, input) at a time; a compare-and-swap under a
//!   lock file (`locks/.cas/`) on a local disk, `If-None-Match: *` on S3, with an expiry, a monotonic deadline checked
//!   before every write (and, through the store's [`store::Gate`], once more at the
//!   last instant of each write), a conditional release, and the backoff of a run
//!   waiting for a held lease (`--lease-wait`).
//! - `checkpoint`: the record of the last success, read at start, written last
//!   with compare-and-swap; whether the published object is still the one it
//!   recorded (`Drift`: the skip rule, cheap skips and `verify`).
//! - `contract`: the progress-event contract, pure code, one file per set of
//!   rules: `frame.rs` (what a line is: the one `LineFramer`),
//!   `object.rs` (one line's keys and fields), `scan.rs` (the fast path for flat
//!   lines), `time.rs` (RFC 3339 event time), `canonical.rs` (the published form);
//!   `fast.rs` (the single pass: check a usual line and write its canonical
//!   form in one walk, anything unusual declined to `validate`), `quarantine.rs`
//!   (the quarantine record); `mod.rs` holds `validate` and the public types.
//! - [`identity`]: digests of canonical events and the fixed-size dedup index.
//! - `budget`: the memory budget (`--max-memory`, else the cgroup limit), divided
//!   by `--jobs`, and the dedup index's share of one run's part of it.
//! - `spill`: when the index reaches its share, sorted runs of digests in
//!   `--scratch-dir`, merged before the publish (`pipeline/resolve.rs` then drops
//!   later copies by a second pass over the staged output and checks full ids).
//! - `pipeline`: the run as named stages (lease, checkpoint, sweep, hash, stream,
//!   stage, publish, checkpoint, cleanup) over the [`store::Store`] trait; its one
//!   pass over the input frames lines (the contract's framer, packed into batches),
//!   checks them on both cores and decides in input order (`pipeline/scan.rs`,
//!   `pipeline/validator.rs`) while `pipeline/stream.rs` writes the staging.
//! - [`store`]: the narrow storage trait (stage, promote, sweep, small CAS writes),
//!   [`store::Location`] and [`store::open`], and the `local` and `s3` backends; where
//!   staged bytes live is each backend's business (S3: its staging prefix option);
//!   promotion is fenced on what the run saw when it decided (probed per store on S3);
//!   a run's writes pass its [`store::Gate`] (lease deadline, bounded local locks).
//! - `summary`: the one-line JSON summary printed on stdout, and the outcomes
//!   (`Action`) everything counts.
//! - `progress`: progress bars on a terminal (an inbox run: a bar per input in
//!   flight over a footer, a line per finished input, the totals), log lines and
//!   stdout lines written above them whole; periodic log lines without a terminal.
//! - `inbox`: `landing run --inbox`: lists an inbox, skips unchanged inputs
//!   cheaply, lands the others through `pipeline::run` up to `--jobs` at once,
//!   prints a line per input and the totals.
//! - `shard`: the `--match` glob and the fixed `--shard I/N` hash of input names.
//! - `history`: run records under `runs/` and the per-stage timing collector the
//!   pipeline fills.
//! - `metrics`: the run's measurements pushed to a Prometheus Pushgateway when it
//!   ends (`--pushgateway`): the groups, the metric names, the push and its timeout.
//! - `audit`: `landing status` and `landing verify`, read-only views of the lake.
//! - `drill`: `landing drill`, the crash diagram rehearsed against a real store.
//! - [`compression`]: gzip and zstd inputs told by their magic bytes, the
//!   published name of a compressed input, the decoder thread the one pass feeds,
//!   and the encoders of `--output-compression`.
//! - [`generate`]: deterministic sample inputs for drills, tests and benchmarks.
//! - [`error`]: the public error enum.

mod audit;
mod budget;
mod checkpoint;
pub mod cli;
pub mod compression;
mod config;
mod contract;
mod drill;
pub mod error;
pub mod generate;
mod history;
mod hook;
pub mod identity;
mod inbox;
mod layout;
pub mod lease;
mod metrics;
mod pipeline;
mod progress;
mod shard;
pub mod shutdown;
mod spill;
pub mod store;
mod summary;

pub use error::{Error, Result};
/// The tracing writer `main` installs: log lines go above the progress bars, whole.
pub use progress::LogLine;

/// Exit code: published, skipped or checked.
pub const EXIT_OK: i32 = 0;
/// Exit code: any operational failure.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code: usage or configuration error.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: the file was refused (sysexits EX_DATAERR).
pub const EXIT_REFUSED: i32 = 65;
/// Exit code: another run holds the lease (sysexits EX_TEMPFAIL).
pub const EXIT_BUSY: i32 = 75;

/// Exit code of a run stopped by SIGTERM (128 + 15, as a shell reports it).
pub const EXIT_SIGTERM: i32 = 143;
/// Exit code of a run stopped by SIGINT (128 + 2).
pub const EXIT_SIGINT: i32 = 130;

/// A UTC time as RFC 3339 (checkpoints, leases, run records).
pub(crate) fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        // Only years outside 0..=9999 fail to format; every time here is a clock
        // reading or one plus a lease TTL.
        .expect("a clock time formats as RFC 3339")
}

/// Version recorded in checkpoints.
pub const JOB_VERSION: &str = env!("CARGO_PKG_VERSION");
