//! The integration tests, one crate (one link of the AWS SDK instead of one per file).
//! Each module was a test crate of its own; `cargo test --test it kill::` runs one of
//! them. Bodies that run on several backends are expanded by [`matrix!`] (in
//! `support`), so a test's name is `<module>::<body>::<backend>`.

// The suites drive the binary's test hooks (pause points, crash points by variable,
// spill sizes), which only a build with this feature has.
#[cfg(not(feature = "test-hooks"))]
compile_error!("the integration tests need the binary's test hooks: `cargo test --features test-hooks` (scripts/test passes it)");

#[macro_use]
mod support;

mod cli;
mod commit_log;
mod compressed;
mod contracts;
mod crash;
mod drill;
mod e2e;
mod faults;
mod fencing;
mod inbox;
mod kill;
mod lease;
mod metrics;
mod model;
mod nemesis;
mod s3;
mod skew;
mod small;
mod spill;
mod terminal;
mod unattended;
