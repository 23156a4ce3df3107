//! Fault injection: the job runs against SeaweedFS, moto and LocalStack through a proxy
//! (`support/proxy.rs`) that fails one chosen request the way S3 and networks do —
//! 500 InternalError, 503 SlowDown, a reset connection, a body cut short or stalled,
//! a 200 answer carrying an `<Error>`, or an answer lost after the server did the
//! work — while it replaces a previous publish with a ~12 MiB input (three 5 MiB
//! parts). Whatever the fault, the run contract holds (docs/design.md section 1):
//!
//! - the job either succeeds (a retryable fault, retried: the published bytes equal
//!   a clean run's) or exits 1 naming the step that failed;
//! - a reader sees exactly the old output or exactly the new one, nothing else;
//! - the checkpoint never names bytes that are not published;
//! - a plain rerun without faults recovers: new output, checkpoint on the new input,
//!   no staging left behind, and the run after it skips.
//!
//! Every test asserts that its fault actually fired.

use std::process::Stdio;
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use crate::support::proxy::{Fault, Match, Op, Proxy, Rule, RuleId, Times};
use crate::support::*;

const NAME: &str = "progress-2026-03-05.jsonl";
const LOG: &str = "raw/progress/_landing_log/";
const RAW: &str = "raw/progress/progress-2026-03-05.jsonl";
const CKPT: &str = "checkpoints/progress/progress-2026-03-05.jsonl.json";
/// Object-key prefixes as the proxy sees them (bucket excluded; the lake is `lake/`).
const INBOX: &str = "inbox/";
const LAKE_RAW: &str = "lake/raw/";
const LAKE_CKPT: &str = "lake/checkpoints/";
const LAKE_LOCKS: &str = "lake/locks/";
const LOCK: &str = "locks/progress/progress-2026-03-05.jsonl.lock";

/// Wall-time bound on any faulted run: a hang guard, not a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// The inputs and what a clean run publishes for each.
struct Refs {
    old_in: Vec<u8>,
    new_in: Vec<u8>,
    old_out: Vec<u8>,
    new_out: Vec<u8>,
    old_sha: String,
    new_sha: String,
}

fn refs() -> &'static Refs {
    static REFS: OnceLock<Refs> = OnceLock::new();
    REFS.get_or_init(|| {
        let old_in = generated(2_000, 21);
        // ~12 MiB: three parts of 5 MiB on S3.
        let new_in = generated(60_000, 22);
        let old_out = clean_output(&old_in);
        let new_out = clean_output(&new_in);
        assert!(
            new_out.len() > 10 << 20,
            "the new output must span several 5 MiB parts"
        );
        Refs {
            old_sha: sha256(&old_in),
            new_sha: sha256(&new_in),
            old_in,
            new_in,
            old_out,
            new_out,
        }
    })
}

fn clean_output(input: &[u8]) -> Vec<u8> {
    expected_publish(input)
}

fn ckpt_sha(w: &World) -> Option<String> {
    checkpoint_sha(w, CKPT)
}

/// `landing run` with a hard bound on its wall time: past `limit` the child is killed
/// and the test fails, instead of hanging the suite.
fn run_bounded(
    w: &World,
    input: &str,
    env: &[(&str, &str)],
    limit: Duration,
    proxy: &Proxy,
) -> (Run, Duration) {
    let lake = w.lake_arg();
    let mut cmd = w.command(&["run", "--input", input, "--lake", &lake], env);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let child = cmd.spawn().expect("spawn landing");
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for landing"),
        Err(_) => {
            // SAFETY: `pid` is our own child, not reaped yet: the waiter thread is
            // still blocked in wait().
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            let out = rx.recv().expect("waiter thread").expect("wait for landing");
            panic!(
                "landing did not finish within {limit:?} (killed)\nstderr:\n{}\nproxy:\n{}",
                String::from_utf8_lossy(&out.stderr),
                proxy.report()
            );
        }
    };
    let elapsed = started.elapsed();
    (Run::from_output(out), elapsed)
}

/// What the faulted run must end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Exit 0, the new output published (the SDK retried the fault away).
    Succeeds,
    /// Exit 1, the error naming this step.
    Fails(&'static str),
    /// Either of the above.
    Either(&'static str),
}

/// What a reader sees after a failed faulted run (beyond "old or new").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visible {
    /// The old output, checkpoint on the old input: nothing changed.
    Old,
    /// The new output, checkpoint still on the old input (crash table: "after publish").
    NewUnmarked,
    /// Old or new, as long as the contract holds.
    Any,
}

struct Case {
    name: &'static str,
    rule: Option<Rule>,
    /// More rules armed after the case's own (e.g. a slow server to let time pass).
    also: Vec<Rule>,
    env: Vec<(&'static str, &'static str)>,
    outcome: Outcome,
    after_failure: Visible,
}

impl Case {
    fn new(name: &'static str, rule: Rule, outcome: Outcome) -> Case {
        Case {
            name,
            rule: Some(rule),
            also: Vec::new(),
            env: Vec::new(),
            outcome,
            after_failure: Visible::Any,
        }
    }

    fn env(mut self, k: &'static str, v: &'static str) -> Case {
        self.env.push((k, v));
        self
    }

    fn also(mut self, rule: Rule) -> Case {
        self.also.push(rule);
        self
    }

    fn leaves(mut self, v: Visible) -> Case {
        self.after_failure = v;
        self
    }
}

/// What a faulted run did, for case-specific assertions.
struct Done {
    run: Run,
    elapsed: Duration,
    proxy: Proxy,
    rule: Option<RuleId>,
    succeeded: bool,
}

impl Done {
    fn fired(&self) -> usize {
        self.rule.map_or(0, |id| self.proxy.fired(id))
    }

    fn matched(&self) -> usize {
        self.rule.map_or(0, |id| self.proxy.matched(id))
    }

    fn context(&self) -> String {
        format!(
            "exit {:?} in {:?}\nstderr:\n{}\nproxy:\n{}",
            self.run.code,
            self.elapsed,
            self.run.stderr,
            self.proxy.report()
        )
    }
}

/// Publish the old input plainly, run the new one through the proxy with the case's
/// fault armed, check the contract, then check that a plain rerun recovers.
fn check(server: Server, case: Case) -> Done {
    let r = refs();
    let (w, input) = publish_old(server, case.name, r);

    // --- the faulted run
    let mut done = faulted_run(&w, &input, server, &case);
    let ctx = format!("[{} on {}] {}", case.name, server.name(), done.context());
    assert_fault_fired(&done, &case, &ctx);
    done.succeeded = exited_as_expected(&done.run, case.outcome, &ctx);
    let (raw, sha) = assert_old_or_new(&w, r, &ctx);
    assert_end_state(&done, case.after_failure, r, &raw, &sha, &ctx);
    print_faulted_run(&w, &done, &case, server, r, &raw, &sha);

    // --- a plain rerun recovers, and the one after it skips.
    assert_rerun_recovers(&w, &input, r, &sha, &ctx);
    done
}

/// Set up the world the faulted run starts from: the old input published by a plain
/// run, no lease record, and the new input in the inbox. Returns the world and the
/// input's URL.
fn publish_old(server: Server, name: &str, r: &Refs) -> (World, String) {
    let mut w = World::new(Kind::S3(server), &format!("fault-{name}"));
    w.env.push(("LANDING_S3_PART_SIZE_MIB".into(), "5".into()));
    let input = w.put_input(NAME, &r.old_in);
    let first = w.run(&input, &[]);
    assert_eq!(
        first.code,
        Some(0),
        "plain publish of the old input: {}",
        first.stderr
    );
    assert!(w.get(RAW).unwrap() == r.old_out);
    // That run left a released lease record; start the faulted run from no lease at
    // all, so the lease cases meet the create and renewal steps they name.
    w.delete(LOCK);
    w.put_input(NAME, &r.new_in);
    (w, input)
}

/// Run the job through a fresh proxy armed with the case's rules, under the hang
/// guard; `succeeded` is left for the caller to judge.
fn faulted_run(w: &World, input: &str, server: Server, case: &Case) -> Done {
    let proxy = Proxy::start(&server.endpoint());
    let rule = case.rule.clone().map(|rule| proxy.arm(rule));
    for extra in &case.also {
        proxy.arm(extra.clone());
    }
    let url = proxy.url();
    let mut env: Vec<(&str, &str)> = vec![
        ("AWS_ENDPOINT_URL", url.as_str()),
        ("LANDING_S3_OPERATION_TIMEOUT", "30"),
        ("LANDING_S3_READ_TIMEOUT", "10"),
    ];
    env.extend(case.env.iter().copied());
    let (run, elapsed) = run_bounded(w, input, &env, HANG_GUARD, &proxy);
    Done {
        run,
        elapsed,
        proxy,
        rule,
        succeeded: false,
    }
}

/// The fault happened, as many times as armed: a test whose fault never fired
/// proves nothing.
fn assert_fault_fired(done: &Done, case: &Case, ctx: &str) {
    if let Some(rule) = &case.rule {
        match rule.times {
            Times::Once => assert_eq!(done.fired(), 1, "the fault must fire once\n{ctx}"),
            Times::Always => assert!(done.fired() >= 1, "the fault never fired\n{ctx}"),
        }
    }
}

/// Succeeds or fails cleanly, naming the step, as the case expects. Returns whether
/// the run succeeded.
fn exited_as_expected(run: &Run, outcome: Outcome, ctx: &str) -> bool {
    match (run.code, outcome) {
        (Some(0), Outcome::Succeeds | Outcome::Either(_)) => true,
        (Some(1), Outcome::Fails(step) | Outcome::Either(step)) => {
            let named = format!("failed at step {step}");
            assert!(
                run.stderr.contains(&named),
                "the error must name step `{step}`\n{ctx}"
            );
            false
        }
        _ => panic!("expected {outcome:?}\n{ctx}"),
    }
}

/// What a reader sees: the old output or the complete new one, and a checkpoint
/// that never runs ahead of the publish. Returns the published bytes and the
/// checkpointed input hash.
fn assert_old_or_new(w: &World, r: &Refs, ctx: &str) -> (Vec<u8>, String) {
    let raw = w.get(RAW).expect("a published object exists");
    let sha = ckpt_sha(w).expect("a checkpoint exists");
    assert!(
        raw == r.old_out || raw == r.new_out,
        "published bytes ({} bytes) are neither the old nor the new output\n{ctx}",
        raw.len()
    );
    assert!(
        sha == r.old_sha || sha == r.new_sha,
        "checkpoint names {sha}\n{ctx}"
    );
    if sha == r.new_sha {
        assert!(
            raw == r.new_out,
            "the checkpoint names the new input but the new output is not published\n{ctx}"
        );
    }
    let visible: Vec<String> = w
        .snapshot()
        .into_keys()
        .filter(|k| !k.starts_with("staging/") && !k.starts_with(LOG))
        .collect();
    assert_eq!(
        visible,
        vec![CKPT.to_owned(), RAW.to_owned()],
        "objects outside staging and the commit log\n{ctx}"
    );
    assert_log_old_or_new(w, r, &sha, ctx);
    (raw, sha)
}

/// The commit log under a fault: gap-free, every entry names the old or the new
/// output's bytes, and a checkpoint of the new input follows its entry (the log is
/// written before the checkpoint).
fn assert_log_old_or_new(w: &World, r: &Refs, sha: &str, ctx: &str) {
    let log = crate::commit_log::read_log(w, "progress").unwrap_or_else(|e| panic!("{e}\n{ctx}"));
    let outputs = [sha256(&r.old_out), sha256(&r.new_out)];
    for e in &log {
        assert!(
            outputs.iter().any(|o| e["published_sha256"] == o.as_str()),
            "log entry {} names bytes of neither output\n{ctx}",
            e["sequence"]
        );
    }
    if sha == r.new_sha {
        let last = log.last().expect("an entry for the checkpointed publish");
        assert!(
            crate::commit_log::names_published(w, last, RAW),
            "the checkpoint names the new input, but the log's latest entry does not name the published object\n{ctx}"
        );
    }
}

/// A success published and checkpointed the new input; a failure left what the
/// case says a reader must see.
fn assert_end_state(
    done: &Done,
    after_failure: Visible,
    r: &Refs,
    raw: &[u8],
    sha: &str,
    ctx: &str,
) {
    if done.succeeded {
        assert!(
            raw == r.new_out,
            "a successful run must publish the new output\n{ctx}"
        );
        assert_eq!(
            sha, r.new_sha,
            "a successful run must checkpoint the new input\n{ctx}"
        );
        assert_eq!(done.run.action(), "published", "{ctx}");
    } else {
        match after_failure {
            Visible::Old => {
                assert!(
                    raw == r.old_out,
                    "the old output must stay published\n{ctx}"
                );
                assert_eq!(
                    sha, r.old_sha,
                    "the checkpoint must stay on the old input\n{ctx}"
                );
            }
            Visible::NewUnmarked => {
                assert!(raw == r.new_out, "the new output must be published\n{ctx}");
                assert_eq!(
                    sha, r.old_sha,
                    "the checkpoint must stay on the old input\n{ctx}"
                );
            }
            Visible::Any => {}
        }
    }
}

/// Summarise the faulted run on stderr, with the job's error chain and warnings, so
/// a passing suite still shows what each fault did.
fn print_faulted_run(
    w: &World,
    done: &Done,
    case: &Case,
    server: Server,
    r: &Refs,
    raw: &[u8],
    sha: &str,
) {
    eprintln!(
        "[{} on {}] faulted run: exit {:?} in {:.1?}, fired {} of {} matching; published {}, checkpoint {}; leftovers {:?}",
        case.name,
        server.name(),
        done.run.code,
        done.elapsed,
        done.fired(),
        done.matched(),
        if raw == r.new_out { "new" } else { "old" },
        if sha == r.new_sha { "new" } else { "old" },
        w.leftovers()
    );
    for line in done.run.stderr.lines() {
        if line.starts_with("landing: error")
            || line.starts_with("  caused by")
            || (line.contains("WARN") && line.contains(": landing::"))
        {
            eprintln!("    {line}");
        }
    }
}

/// A plain rerun without faults recovers (new output, checkpoint on the new input,
/// no staging left), and the run after it skips.
fn assert_rerun_recovers(w: &World, input: &str, r: &Refs, sha: &str, ctx: &str) {
    let rerun = w.run(input, &[]);
    let expected = if sha == r.new_sha {
        "skipped"
    } else {
        "published"
    };
    assert_eq!(rerun.code, Some(0), "rerun: {}\n{ctx}", rerun.stderr);
    assert_eq!(rerun.action(), expected, "rerun: {}", rerun.stdout);
    assert!(
        w.get(RAW).unwrap() == r.new_out,
        "rerun must publish the new output"
    );
    assert_eq!(ckpt_sha(w).unwrap(), r.new_sha);
    assert!(
        w.leftovers().is_empty(),
        "leftovers after the rerun: {:?}",
        w.leftovers()
    );
    let again = w.run(input, &[]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.action(), "skipped");
}

fn upload_part(n: u32) -> Match {
    Match::op(Op::UploadPart).query("partNumber", &n.to_string())
}

/// GET of the input: the first is the skip rule's hash pass (a checkpoint exists), the
/// second the streaming pass.
fn input_get() -> Match {
    Match::method("GET").key_under(INBOX)
}

// ------------------------------------------------------------------ cases

/// Without a fault the proxy is transparent: the run publishes the clean bytes, and
/// the proxy saw every S3 step of the contract.
fn proxy_forwards_faithfully(server: Server) {
    let done = check(
        server,
        Case {
            name: "no-fault",
            rule: None,
            also: Vec::new(),
            env: Vec::new(),
            outcome: Outcome::Succeeds,
            after_failure: Visible::Any,
        },
    );
    let p = &done.proxy;
    let ctx = done.context();
    assert_eq!(p.count(Op::UploadPart), 3, "{ctx}");
    assert_eq!(p.count(Op::CreateMultipartUpload), 1, "{ctx}");
    assert_eq!(p.count(Op::CompleteMultipartUpload), 1, "{ctx}");
    assert_eq!(p.count(Op::CopyObject), 1, "{ctx}");
    let seen = p.settled();
    assert!(
        seen.iter().all(|s| s.status.is_some_and(|c| c < 500)),
        "every request answered, none failed by the server\n{ctx}"
    );
    let gets = seen
        .iter()
        .filter(|s| s.op == Op::GetObject && s.key.starts_with(INBOX))
        .count();
    assert_eq!(
        gets, 2,
        "hash pass + stream pass over the changed input\n{ctx}"
    );
    assert!(
        seen.iter().any(|s| s.op == Op::PutObject
            && s.key.starts_with(LAKE_CKPT)
            && s.status == Some(200)),
        "checkpoint written through the proxy\n{ctx}"
    );
}

/// 503 SlowDown once on UploadPart 2: a throttle, retried by the SDK.
fn upload_part_slowdown_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "part-503-once",
            Rule::new(upload_part(2), Fault::SlowDown),
            Outcome::Succeeds,
        ),
    );
    assert_eq!(
        done.matched(),
        2,
        "part 2 sent twice (the retry)\n{}",
        done.context()
    );
}

/// 500 InternalError on every attempt at UploadPart 2: the run fails at `stage`,
/// nothing a reader sees changes.
fn upload_part_500_always(server: Server) {
    let done = check(
        server,
        Case::new(
            "part-500-always",
            Rule::new(upload_part(2), Fault::InternalError).always(),
            Outcome::Fails("stage"),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "3")
        .leaves(Visible::Old),
    );
    assert_eq!(done.fired(), 3, "every attempt failed\n{}", done.context());
    assert!(
        done.run.stderr.contains("InternalError"),
        "{}",
        done.context()
    );
}

/// The connection resets (no answer) once on UploadPart 2: retried, success.
fn upload_part_reset_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "part-reset-once",
            Rule::new(upload_part(2), Fault::Reset),
            Outcome::Succeeds,
        ),
    );
    assert_eq!(done.matched(), 2, "{}", done.context());
}

/// UploadPart 1 reaches the server but its answer is lost: the retry uploads the same
/// part again, success.
fn upload_part_answer_lost_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "part-ack-lost",
            Rule::new(upload_part(1), Fault::ResetAfterForward),
            Outcome::Succeeds,
        ),
    );
    assert_eq!(done.matched(), 2, "{}", done.context());
}

/// 500 on every CreateMultipartUpload: fails at `stage` before any part.
fn create_upload_500_always(server: Server) {
    let done = check(
        server,
        Case::new(
            "create-500-always",
            Rule::new(Match::op(Op::CreateMultipartUpload), Fault::InternalError).always(),
            Outcome::Fails("stage"),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "2")
        .leaves(Visible::Old),
    );
    assert_eq!(done.proxy.count(Op::UploadPart), 0, "{}", done.context());
}

/// 503 SlowDown once on the streaming GET of the input (before any body byte): the
/// SDK retries the request, success.
fn input_get_slowdown_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "input-503-once",
            Rule::new(input_get(), Fault::SlowDown).skip(1),
            Outcome::Succeeds,
        ),
    );
    assert_eq!(
        done.matched(),
        3,
        "hash pass, throttled stream pass, retry\n{}",
        done.context()
    );
}

/// 500 on every read of the checkpoint: fails at `read-checkpoint`, nothing changes.
fn read_checkpoint_500_always(server: Server) {
    check(
        server,
        Case::new(
            "ckpt-read-500",
            Rule::new(
                Match::op(Op::GetObject).key_under(LAKE_CKPT),
                Fault::InternalError,
            )
            .always(),
            Outcome::Fails("read-checkpoint"),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "2")
        .leaves(Visible::Old),
    );
}

/// 500 on every ListMultipartUploads of the sweep: fails at `sweep`, nothing changes.
fn sweep_list_500_always(server: Server) {
    check(
        server,
        Case::new(
            "sweep-500",
            Rule::new(Match::op(Op::ListMultipartUploads), Fault::InternalError).always(),
            Outcome::Fails("sweep"),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "2")
        .leaves(Visible::Old),
    );
}

/// 500 on every DeleteObject of staging after the checkpoint: cleanup is best
/// effort, the run succeeds and the next run sweeps the staging object.
fn cleanup_delete_500_always(server: Server) {
    check(
        server,
        Case::new(
            "cleanup-500",
            Rule::new(
                Match::op(Op::DeleteObject)
                    .key_under("lake/staging/progress/")
                    // The staging object, not the copy-condition probe's scratch keys.
                    .when(|r| !r.key().contains("/probe-")),
                Fault::InternalError,
            )
            .always(),
            Outcome::Succeeds,
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "2"),
    );
}

/// The streaming read of the input is cut short after 1 MiB (headers promised the
/// whole length): the run fails at `stream` (a streaming body is not retried).
fn input_cut_short_while_streaming(server: Server) {
    check(
        server,
        Case::new(
            "input-cut-stream",
            Rule::new(input_get(), Fault::CutBody { after: 1 << 20 }).skip(1),
            Outcome::Either("stream"),
        )
        .leaves(Visible::Old),
    );
}

/// The skip rule's hash pass over the input is cut short: the run fails at `hash`.
fn input_cut_short_while_hashing(server: Server) {
    check(
        server,
        Case::new(
            "input-cut-hash",
            Rule::new(input_get(), Fault::CutBody { after: 1 << 20 }),
            Outcome::Either("hash"),
        )
        .leaves(Visible::Old),
    );
}

/// The streaming read stalls after 1 MiB with the connection held open: with a 2 s
/// read timeout the run fails at `stream` in bounded time instead of hanging.
fn input_stalls_while_streaming(server: Server) {
    let done = check(
        server,
        Case::new(
            "input-stall-stream",
            Rule::new(input_get(), Fault::StallBody { after: 1 << 20 }).skip(1),
            Outcome::Fails("stream"),
        )
        .env("LANDING_S3_READ_TIMEOUT", "2")
        .leaves(Visible::Old),
    );
    // The stalled body never ends: only the job's own timeout ends the run, so its
    // failure at this step (within the hang guard) is the proof, not a clock.
    assert!(done.run.stderr.contains("stalled"), "{}", done.context());
}

/// CompleteMultipartUpload answers 200 with an InternalError body (not performed):
/// the SDK reads the body as an error, and InternalError is retryable for S3, so the
/// retry completes the upload.
fn complete_error_in_200_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "complete-200-error",
            Rule::new(
                Match::op(Op::CompleteMultipartUpload),
                Fault::error_in_200("InternalError"),
            ),
            Outcome::Succeeds,
        ),
    );
    assert_eq!(done.matched(), 2, "Complete retried\n{}", done.context());
}

/// CompleteMultipartUpload answers 200 with an InternalError body on every attempt:
/// fails at `stage`, the old output stays.
fn complete_error_in_200_always(server: Server) {
    let done = check(
        server,
        Case::new(
            "complete-200-error-always",
            Rule::new(
                Match::op(Op::CompleteMultipartUpload),
                Fault::error_in_200("InternalError"),
            )
            .always(),
            Outcome::Fails("stage"),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "3")
        .leaves(Visible::Old),
    );
    assert_eq!(done.fired(), 3, "{}", done.context());
    assert_eq!(
        done.proxy.count(Op::CopyObject),
        0,
        "nothing promoted\n{}",
        done.context()
    );
}

/// CompleteMultipartUpload is performed but its answer is lost (reset): the SDK
/// retries Complete on an upload that is already complete.
fn complete_answer_lost_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "complete-ack-lost",
            Rule::new(
                Match::op(Op::CompleteMultipartUpload),
                Fault::ResetAfterForward,
            ),
            Outcome::Succeeds,
        ),
    );
    // Lost once, then retried: the fault fired once and the retry reached the server.
    assert_eq!(done.fired(), 1, "{}", done.context());
    assert_eq!(done.matched(), 2, "{}", done.context());
}

/// CopyObject answers 200 with an InternalError body on every attempt (never
/// performed): the run fails at `publish`, the old output stays.
fn copy_error_in_200_always(server: Server) {
    let done = check(
        server,
        Case::new(
            "copy-200-error-always",
            Rule::new(
                Match::method("PUT")
                    .header("x-amz-copy-source")
                    .key_under(LAKE_RAW),
                Fault::error_in_200("InternalError"),
            )
            .always(),
            Outcome::Fails("publish"),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "3")
        .leaves(Visible::Old),
    );
    assert_eq!(done.fired(), 3, "{}", done.context());
}

/// The same, once: InternalError is retryable, the retried copy publishes.
fn copy_error_in_200_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "copy-200-error-once",
            Rule::new(
                Match::op(Op::CopyObject).key_under(LAKE_RAW),
                Fault::error_in_200("InternalError"),
            ),
            Outcome::Succeeds,
        ),
    );
    assert_eq!(done.matched(), 2, "{}", done.context());
}

/// CopyObject is performed, but the client is told it failed (200 with an error
/// body): the retried copy writes the same bytes again, success.
fn copy_done_but_error_in_200(server: Server) {
    check(
        server,
        Case::new(
            "copy-done-200-error",
            Rule::new(
                Match::op(Op::CopyObject).key_under(LAKE_RAW),
                Fault::error_in_200_after_forward("InternalError"),
            ),
            Outcome::Succeeds,
        ),
    );
}

/// CopyObject is performed, then every attempt is told it failed: the new output is
/// published but the run fails at `publish`, and the checkpoint must not move (crash
/// table: "after publish").
fn copy_done_but_error_in_200_always(server: Server) {
    check(
        server,
        Case::new(
            "copy-done-200-error-always",
            Rule::new(
                Match::op(Op::CopyObject).key_under(LAKE_RAW),
                Fault::error_in_200_after_forward("InternalError"),
            )
            .always(),
            Outcome::Fails("publish"),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "2")
        .leaves(Visible::NewUnmarked),
    );
}

/// CopyObject is performed but its answer is lost (reset): the retried copy is
/// idempotent, success.
fn copy_answer_lost_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "copy-ack-lost",
            Rule::new(
                Match::op(Op::CopyObject).key_under(LAKE_RAW),
                Fault::ResetAfterForward,
            ),
            Outcome::Succeeds,
        ),
    );
    // Lost once, then retried: the fault fired once and the retry reached the server.
    assert_eq!(done.fired(), 1, "{}", done.context());
    assert_eq!(done.matched(), 2, "{}", done.context());
}

/// CopyObject is performed but its answer stalls after the status line and headers
/// (a hung connection): the operation timeout (3 s here) ends the attempt, and the run
/// fails at `publish` in bounded time; the copy landed, so the new output is visible
/// and the checkpoint must not move.
fn copy_answer_stalls(server: Server) {
    check(
        server,
        Case::new(
            "copy-stall",
            Rule::new(
                Match::op(Op::CopyObject).key_under(LAKE_RAW),
                Fault::StallBody { after: 0 },
            )
            .always(),
            Outcome::Fails("publish"),
        )
        .env("LANDING_S3_OPERATION_TIMEOUT", "3")
        .leaves(Visible::NewUnmarked),
    );
    // The stalled body never ends: only the job's own timeout ends the run, so its
    // failure at this step (within the hang guard) is the proof, not a clock.
}

/// CopyObject is performed but its answer is lost, and the HeadObject that would
/// prove the published object is this run's own copy then fails (503 on every
/// attempt): the copy is done, so the new output is published, but the checkpoint
/// must not move. (The first HEAD of raw/ is the one the run decided on; a copy that
/// answers sends none.) Only where the copy is fenced: elsewhere the retried copy is
/// unconditional and answers.
fn copy_answer_lost_then_head_503_always(server: Server) {
    check(
        server,
        Case::new(
            "copy-lost-head-503",
            Rule::new(
                Match::op(Op::CopyObject).key_under(LAKE_RAW),
                Fault::ResetAfterForward,
            ),
            Outcome::Fails("publish"),
        )
        .also(
            Rule::new(
                Match::op(Op::HeadObject).key_under(LAKE_RAW),
                Fault::SlowDown,
            )
            .skip(1)
            .always(),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "2")
        .leaves(Visible::NewUnmarked),
    );
}

/// 503 SlowDown on every attempt at the checkpoint PUT: fails at `checkpoint` in the
/// crash table's "after publish" state (new output, old checkpoint); the rerun
/// republishes the same bytes and checkpoints.
fn checkpoint_put_503_always(server: Server) {
    let done = check(
        server,
        Case::new(
            "ckpt-503-always",
            Rule::new(
                Match::op(Op::PutObject).key_under(LAKE_CKPT),
                Fault::SlowDown,
            )
            .always(),
            Outcome::Fails("checkpoint"),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "3")
        .leaves(Visible::NewUnmarked),
    );
    assert_eq!(
        done.fired(),
        3,
        "every attempt throttled\n{}",
        done.context()
    );
}

/// 503 once on the checkpoint PUT: retried, success.
fn checkpoint_put_slowdown_once(server: Server) {
    check(
        server,
        Case::new(
            "ckpt-503-once",
            Rule::new(
                Match::op(Op::PutObject).key_under(LAKE_CKPT),
                Fault::SlowDown,
            ),
            Outcome::Succeeds,
        ),
    );
}

/// The conditional checkpoint PUT is performed but its answer is lost: the SDK's
/// retry carries the old If-Match and gets 412. The job must recognise its own
/// checkpoint (same input, same published object) rather than fail or overwrite.
fn checkpoint_put_answer_lost_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "ckpt-ack-lost",
            Rule::new(
                Match::op(Op::PutObject).key_under(LAKE_CKPT),
                Fault::ResetAfterForward,
            ),
            Outcome::Succeeds,
        ),
    );
    assert_eq!(
        done.matched(),
        2,
        "the checkpoint PUT was retried\n{}",
        done.context()
    );
    // This run wrote the checkpoint; its summary must say so.
    let summary = done.run.summary.as_ref().expect("summary");
    assert_eq!(
        summary["checkpoint_moved"],
        true,
        "the run's own checkpoint write landed (answer lost): checkpoint_moved must be true\n{}",
        done.context()
    );
}

/// The conditional create of the lease (`If-None-Match: *`) is performed but its
/// answer is lost: the retry gets 412 against the run's own lease. The run must
/// recognise its own lease (same run id) instead of exiting busy against itself.
fn lease_create_answer_lost_once(server: Server) {
    let done = check(
        server,
        Case::new(
            "lease-ack-lost",
            Rule::new(
                Match::op(Op::PutObject)
                    .key_under(LAKE_LOCKS)
                    .header("if-none-match"),
                Fault::ResetAfterForward,
            ),
            Outcome::Succeeds,
        ),
    );
    // Lost once, then retried: the fault fired once and the retry reached the server.
    assert_eq!(done.fired(), 1, "{}", done.context());
    assert_eq!(done.matched(), 2, "{}", done.context());
}

/// A lease renewal (`If-Match: <etag>`) is performed but its answer is lost: the
/// retry gets 412 against the run's own renewed lease. The run must recognise its
/// own lease instead of declaring it lost and failing. A slow CopyObject (2 s) makes
/// sure renewals happen during the run.
fn lease_renewal_answer_lost_once(server: Server) {
    check(
        server,
        Case::new(
            "lease-renew-ack-lost",
            Rule::new(
                Match::op(Op::PutObject)
                    .key_under(LAKE_LOCKS)
                    .header("if-match"),
                Fault::ResetAfterForward,
            ),
            Outcome::Succeeds,
        )
        .also(Rule::new(
            Match::op(Op::CopyObject).key_under(LAKE_RAW),
            Fault::Delay { ms: 2_000 },
        ))
        // The TTL must exceed the per-attempt timeout; renewals then come every
        // (TTL - attempt timeout) / 3, several during the delayed copy.
        .env("LANDING_LEASE_TTL", "6")
        .env("LANDING_S3_ATTEMPT_TIMEOUT", "3"),
    );
}

/// 503 on every attempt at taking the lease: fails at `lease`, nothing changes.
fn lease_put_503_always(server: Server) {
    let done = check(
        server,
        Case::new(
            "lease-503-always",
            Rule::new(
                Match::op(Op::PutObject).key_under(LAKE_LOCKS),
                Fault::SlowDown,
            )
            .always(),
            Outcome::Fails("lease"),
        )
        .env("LANDING_S3_MAX_ATTEMPTS", "2")
        .leaves(Visible::Old),
    );
    assert_eq!(
        done.proxy.count(Op::GetObject),
        0,
        "no input read without the lease\n{}",
        done.context()
    );
}

matrix! {
    s3 proxy_forwards_faithfully: [seaweed, moto, localstack];
    s3 upload_part_slowdown_once: [seaweed, moto, localstack];
    s3 upload_part_500_always: [seaweed, moto, localstack];
    s3 upload_part_reset_once: [seaweed, moto, localstack];
    s3 upload_part_answer_lost_once: [seaweed, localstack];
    s3 create_upload_500_always: [seaweed, localstack];
    s3 input_get_slowdown_once: [seaweed, moto, localstack];
    s3 read_checkpoint_500_always: [seaweed, localstack];
    s3 sweep_list_500_always: [seaweed, localstack];
    s3 cleanup_delete_500_always: [seaweed, localstack];
    s3 input_cut_short_while_streaming: [seaweed, moto, localstack];
    s3 input_cut_short_while_hashing: [seaweed, localstack];
    s3 input_stalls_while_streaming: [seaweed, moto, localstack];
    s3 complete_error_in_200_once: [seaweed, moto, localstack];
    s3 complete_error_in_200_always: [seaweed, localstack];
    s3 complete_answer_lost_once: [seaweed, moto, localstack];
    s3 copy_error_in_200_always: [seaweed, moto, localstack];
    s3 copy_error_in_200_once: [seaweed, moto, localstack];
    s3 copy_done_but_error_in_200: [seaweed, localstack];
    s3 copy_done_but_error_in_200_always: [seaweed, localstack];
    s3 copy_answer_lost_once: [seaweed, localstack];
    s3 copy_answer_stalls: [seaweed, localstack];
    s3 copy_answer_lost_then_head_503_always: [seaweed];
    s3 checkpoint_put_503_always: [seaweed, moto, localstack];
    s3 checkpoint_put_slowdown_once: [seaweed, localstack];
    s3 checkpoint_put_answer_lost_once: [seaweed, moto, localstack];
    s3 lease_put_503_always: [seaweed, localstack];
    s3 lease_create_answer_lost_once: [seaweed, moto, localstack];
    s3 lease_renewal_answer_lost_once: [seaweed, localstack];
}

// ------------------------------------------------------------------ the proxy itself

/// What the job does not send but the SDK may: an aws-chunked streaming upload (a
/// body read from a file, with a trailing CRC32). Through the proxy it arrives whole.
#[test]
fn proxy_forwards_aws_chunked_uploads() {
    let server = Server::Seaweed;
    let proxy = Proxy::start(&server.endpoint());
    let bytes = generated(20_000, 5);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let got = rt.block_on(async {
        let (admin, bucket) = server.fresh_bucket("proxy-aws-chunked").await;
        let sdk = server.sdk_config().await;
        let via_proxy = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&sdk)
                .endpoint_url(proxy.url())
                .force_path_style(true)
                .build(),
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("body");
        std::fs::write(&path, &bytes).expect("write body");
        let body = aws_sdk_s3::primitives::ByteStream::from_path(&path)
            .await
            .expect("body from path");
        via_proxy
            .put_object()
            .bucket(&bucket)
            .key("streamed")
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{}\n{}",
                    aws_sdk_s3::error::DisplayErrorContext(e),
                    proxy.report()
                )
            });
        admin
            .get_object()
            .bucket(&bucket)
            .key("streamed")
            .send()
            .await
            .expect("get")
            .body
            .collect()
            .await
            .expect("body")
            .into_bytes()
    });
    assert!(got == bytes, "the object differs from what was uploaded");
    assert!(
        proxy
            .seen()
            .iter()
            .any(|s| s.op == Op::PutObject && s.framing.contains("aws-chunked")),
        "the upload was not aws-chunked, so this test proves nothing\n{}",
        proxy.report()
    );
}

/// HTTP/1.1 framing through the proxy, byte for byte, on one keep-alive client
/// connection: a chunked request with trailers answered with a chunked response, then
/// a Content-Length request answered with a Content-Length response.
#[test]
fn proxy_relays_chunked_and_length_framing_byte_for_byte() {
    use std::io::{BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};

    let upstream = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let up_addr = upstream.local_addr().unwrap();
    let req1 = b"PUT /b/k1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nTransfer-Encoding: chunked\r\nx-amz-trailer: x-amz-checksum-crc32\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-amz-checksum-crc32: AAAAAA==\r\n\r\n".to_vec();
    let resp1 = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nETag: \"e1\"\r\n\r\n3\r\nabc\r\n0\r\n\r\n".to_vec();
    let req2 = b"PUT /b/k2 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Length: 4\r\n\r\nwxyz".to_vec();
    let resp2 = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nETag: \"e2\"\r\n\r\nok".to_vec();

    // The upstream: one connection per request (the proxy opens a fresh one each time);
    // it reads each request by its known length and answers.
    let server = {
        let (req1, resp1, req2, resp2) = (req1.clone(), resp1.clone(), req2.clone(), resp2.clone());
        std::thread::spawn(move || {
            let mut got = Vec::new();
            for (req, resp) in [(req1, resp1), (req2, resp2)] {
                let (mut sock, _) = upstream.accept().expect("accept");
                let mut buf = vec![0u8; req.len()];
                sock.read_exact(&mut buf).expect("read request");
                sock.write_all(&resp).expect("answer");
                got.push(buf);
            }
            got
        })
    };

    let proxy = Proxy::start(&format!("http://{up_addr}"));
    let addr = proxy.url().trim_start_matches("http://").to_owned();
    let mut client = TcpStream::connect(addr).expect("connect to the proxy");
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut read_exactly = |n: usize| {
        let mut b = vec![0u8; n];
        reader.read_exact(&mut b).expect("read answer");
        b
    };
    client.write_all(&req1).unwrap();
    assert_eq!(read_exactly(resp1.len()), resp1);
    client.write_all(&req2).unwrap();
    assert_eq!(read_exactly(resp2.len()), resp2);
    // Both handles of the connection, so the proxy sees it end.
    drop(client);
    drop(reader);
    let got = server.join().expect("upstream thread");
    assert_eq!(got, vec![req1, req2], "the upstream received other bytes");
    let seen = proxy.settled();
    assert_eq!(seen.len(), 2, "{}", proxy.report());
    assert_eq!(seen[0].framing, "chunked");
    assert_eq!(seen[1].framing, "length 4");
    assert!(
        seen.iter().all(|s| s.status == Some(200)),
        "{}",
        proxy.report()
    );
}
