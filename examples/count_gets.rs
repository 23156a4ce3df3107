//! Counts the GetObject requests a command sends under one S3 prefix: `scripts/bench`
//! shows with it how many inputs an unchanged inbox run reads.
//!
//! usage: count_gets BUCKET/PREFIX/ -- COMMAND [ARGS...]
//!        count_gets --by-kind -- COMMAND [ARGS...]
//!
//! Starts the end-to-end tests' proxy (`tests/it/support/proxy.rs`, no fault armed) in
//! front of `AWS_ENDPOINT_URL`, runs COMMAND with `AWS_ENDPOINT_URL` pointing at the
//! proxy (COMMAND's stdout goes to stderr), then prints the number of path-style
//! GetObject requests under `/BUCKET/PREFIX/` on stdout and exits with COMMAND's
//! status (128+N if signal N ended it). With `--by-kind`, it prints every request
//! COMMAND sent instead, counted by operation, as one JSON object (`{"GetObject":N,
//! ...}`, operations never sent left out): the requests per input of an inbox of
//! small files.

#[allow(dead_code)]
#[path = "../tests/it/support/proxy.rs"]
mod proxy;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};
use std::time::Duration;

use proxy::{Op, Proxy};

const USAGE: &str =
    "usage: count_gets BUCKET/PREFIX/ -- COMMAND [ARGS...] | count_gets --by-kind -- COMMAND [ARGS...]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [under, sep, command @ ..] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if sep != "--" || command.is_empty() {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let Ok(upstream) = std::env::var("AWS_ENDPOINT_URL") else {
        eprintln!("count_gets: AWS_ENDPOINT_URL is not set (the S3 server to count in front of)");
        return ExitCode::from(2);
    };
    let proxy = Proxy::start(&upstream);
    let status = match Command::new(&command[0])
        .args(&command[1..])
        .env("AWS_ENDPOINT_URL", proxy.url())
        .stdout(std::io::stderr())
        .status()
    {
        Ok(status) => status,
        Err(e) => {
            eprintln!("count_gets: cannot run {}: {e}", command[0]);
            return ExitCode::from(127);
        }
    };
    // Every request COMMAND sent has been answered once it exited; this also lets the
    // proxy see the connections it left close.
    proxy.wait_idle(Duration::from_secs(30));
    if under == "--by-kind" {
        let mut kinds = std::collections::BTreeMap::new();
        for s in proxy.seen() {
            *kinds.entry(format!("{:?}", s.op)).or_insert(0usize) += 1;
        }
        let fields: Vec<String> = kinds.iter().map(|(k, n)| format!("\"{k}\":{n}")).collect();
        println!("{{{}}}", fields.join(","));
    } else {
        let target = format!("/{under}");
        let gets = proxy
            .seen()
            .iter()
            .filter(|s| s.op == Op::GetObject && s.target.starts_with(&target))
            .count();
        println!("{gets}");
    }
    let code = status
        .code()
        .or_else(|| status.signal().map(|n| 128 + n))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
