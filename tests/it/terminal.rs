//! What a person sees at a terminal: inbox runs of the built binary in a
//! real terminal, a detached tmux pane of a fixed size with a large scrollback.
//!
//! Each run stops at the `mid-stream` pause point of the inputs it starts first: its
//! stdin is a FIFO the test holds open, so the paused runs wait, their bars drawn,
//! and the screen in flight is captured at a known instant; closing the FIFO lets
//! every pause go on. The pane is captured again, with all of its scrollback, after
//! the run ended. No sleep stands in for a condition: the test polls the pane for
//! one, within a bound.
//!
//! tmux must be installed (`scripts/test` installs Debian's); without it these tests
//! fail, saying so.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::support::generated;

/// How long any awaited condition may take (a busy 2-core machine included).
const BOUND: Duration = Duration::from_secs(120);
const PAUSED: &str = "landing: paused at MidStream";

fn require_tmux() {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "tmux is not installed: the terminal tests run the binary in a real terminal, \
         a tmux pane. scripts/test installs it (Debian: apt-get install tmux)."
    );
}

/// One tmux server of the test's own (its socket in the test's temp dir) running one
/// pane; the server is killed on drop.
struct Pane {
    socket: PathBuf,
}

impl Pane {
    fn start(dir: &Path, width: usize, height: usize, command: &str) -> Pane {
        require_tmux();
        let conf = dir.join("tmux.conf");
        std::fs::write(
            &conf,
            "set -g history-limit 100000\nset -g status off\n\
             set -g remain-on-exit on\nset -g default-shell /bin/sh\n",
        )
        .unwrap();
        let pane = Pane {
            socket: dir.join("tmux.sock"),
        };
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&pane.socket)
            .arg("-f")
            .arg(&conf)
            .args(["new-session", "-d", "-s", "t"])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(command)
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        pane
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The visible screen (or, with `history`, the whole scrollback too), wrapped
    /// rows joined into their lines, trailing blanks cut; `escapes` keeps the colour
    /// and attribute escapes.
    fn capture(&self, history: bool, escapes: bool) -> Vec<String> {
        let mut args = vec!["capture-pane", "-p", "-J", "-t", "t"];
        if history {
            args.extend(["-S", "-"]);
        }
        if escapes {
            args.push("-e");
        }
        self.tmux(&args)
            .lines()
            .map(|l| l.trim_end().to_owned())
            .collect()
    }

    fn screen(&self) -> Vec<String> {
        self.capture(false, false)
    }

    fn scrollback(&self) -> Vec<String> {
        self.capture(true, false)
    }

    /// Poll the visible screen until `cond` holds; fail after [`BOUND`].
    fn wait_for(&self, what: &str, cond: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + BOUND;
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not on the screen within {BOUND:?}; the scrollback:\n{}",
                self.scrollback().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait for the pane's shell to end (tmux has read all it wrote) and for the
    /// exit status it wrote to `status_file`.
    fn wait_exit(&self, status_file: &Path) -> i32 {
        let deadline = Instant::now() + BOUND;
        loop {
            let dead = self.tmux(&["display-message", "-p", "-t", "t", "#{pane_dead}"]);
            let status = std::fs::read_to_string(status_file).unwrap_or_default();
            if dead.trim() == "1" && status.ends_with('\n') {
                return status.trim().parse().expect("an exit status");
            }
            assert!(
                Instant::now() < deadline,
                "the run did not end within {BOUND:?}; the scrollback:\n{}",
                self.scrollback().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn resize(&self, width: usize, height: usize) {
        self.tmux(&[
            "resize-window",
            "-t",
            "t",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// A folder with an inbox of generated inputs.
struct Inbox {
    dir: TempDir,
    names: Vec<String>,
}

fn inbox(names: &[&str], lines: u64) -> Inbox {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("inbox")).unwrap();
    for (i, name) in names.iter().enumerate() {
        std::fs::write(
            dir.path().join("inbox").join(name),
            generated(lines, 24 + i as u64),
        )
        .unwrap();
    }
    Inbox {
        dir,
        names: names.iter().map(|n| n.to_string()).collect(),
    }
}

/// The environment of every run: clean, as `World::command` gives it, plus `extra`.
fn run_env(dir: &Path, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", dir.display().to_string()),
        (
            "AWS_CONFIG_FILE",
            dir.join("no-aws-config").display().to_string(),
        ),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.join("no-aws-creds").display().to_string(),
        ),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ("LANDING_LOG_LEVEL", "info".into()),
        ("LANDING_PAUSE_AT", "mid-stream".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    env
}

fn run_args(jobs: usize, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["run", "--inbox", "inbox", "--lake", "lake", "--jobs"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(jobs.to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// An inbox run in a pane: stderr is the terminal, stdout goes to `stdout.jsonl`,
/// stdin is a FIFO the test holds open until [`TtyRun::go_on`]. The pane's shell
/// waits for the run and writes its exit status to `exit.status` (tmux itself may
/// not report it).
struct TtyRun {
    pane: Pane,
    fifo: Option<File>,
    stdout: PathBuf,
    status: PathBuf,
}

impl TtyRun {
    fn start(
        inbox: &Inbox,
        (width, height): (usize, usize),
        args: &[String],
        env: &[(String, String)],
    ) -> TtyRun {
        let dir = inbox.dir.path();
        let fifo = dir.join("stdin.fifo");
        let _ = std::fs::remove_file(&fifo);
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo(3) with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let stdout = dir.join("stdout.jsonl");
        let status = dir.join("exit.status");
        let _ = std::fs::remove_file(&status);
        let mut cmd = format!(
            "cd {} && env -i TERM=\"$TERM\"",
            sh_quote(&dir.display().to_string())
        );
        for (k, v) in env {
            cmd.push(' ');
            cmd.push_str(&sh_quote(&format!("{k}={v}")));
        }
        cmd.push(' ');
        cmd.push_str(&sh_quote(env!("CARGO_BIN_EXE_landing")));
        for a in args {
            cmd.push(' ');
            cmd.push_str(&sh_quote(a));
        }
        cmd.push_str(&format!(
            " <{} >{}; echo $? >{}",
            sh_quote(&fifo.display().to_string()),
            sh_quote(&stdout.display().to_string()),
            sh_quote(&status.display().to_string()),
        ));
        let pane = Pane::start(dir, width, height, &cmd);
        // The writing end opens once the pane's shell opened the reading one.
        let deadline = Instant::now() + BOUND;
        let writer = loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
            {
                Ok(f) => break f,
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                    assert!(
                        Instant::now() < deadline,
                        "the pane never opened its stdin; the pane:\n{}",
                        pane.scrollback().join("\n")
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("open the FIFO: {e}"),
            }
        };
        TtyRun {
            pane,
            fifo: Some(writer),
            stdout,
            status,
        }
    }

    /// End of stdin: every pause, now and later, goes on.
    fn go_on(&mut self) {
        self.fifo = None;
    }

    /// Let the run finish; its exit status, final screen, scrollback and stdout.
    fn finish(mut self) -> Finished {
        self.go_on();
        let code = self.pane.wait_exit(&self.status);
        Finished {
            code,
            screen: self.pane.screen(),
            scrollback: self.pane.scrollback(),
            colored: self.pane.capture(true, true).join("\n").contains("\x1b["),
            stdout: std::fs::read_to_string(&self.stdout).expect("stdout of the run"),
        }
    }
}

struct Finished {
    code: i32,
    screen: Vec<String>,
    scrollback: Vec<String>,
    /// The pane showed any colour or attribute.
    colored: bool,
    stdout: String,
}

/// A bar line: it holds `[`, then only `=`, `>` and blanks, then `]`.
fn is_bar(line: &str) -> bool {
    line.split('[').skip(1).any(|after| {
        after.split_once(']').is_some_and(|(inside, _)| {
            !inside.is_empty() && inside.chars().all(|c| matches!(c, '=' | '>' | ' '))
        })
    })
}

/// How many log-line heads (`<timestamp>  INFO `) a line holds.
fn log_heads(line: &str) -> usize {
    ["Z TRACE ", "Z DEBUG ", "Z  INFO ", "Z  WARN ", "Z ERROR "]
        .iter()
        .map(|h| line.matches(h).count())
        .sum()
}

/// A whole text log line: a timestamp, a level and a message, once.
fn is_log_line(line: &str) -> bool {
    let Some((ts, _)) = line.split_once(' ') else {
        return false;
    };
    let b = ts.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && ts.ends_with('Z')
        && ts[..4].bytes().all(|c| c.is_ascii_digit())
        && log_heads(line) == 1
}

fn is_pane_dead(line: &str) -> bool {
    line.starts_with("Pane is dead")
}

fn thousands(n: u64) -> String {
    let d = n.to_string();
    let mut s = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            s.push(',');
        }
        s.push(c);
    }
    s
}

/// The input a bar's or result's label names: the name whole, or its start and end
/// around an ellipsis; it must name exactly one of `names`.
fn named<'a>(label: &str, names: &'a [String]) -> &'a str {
    let hits: Vec<&String> = names
        .iter()
        .filter(|n| match label.split_once('…') {
            None => label == n.as_str(),
            Some((head, tail)) => n.starts_with(head) && n.ends_with(tail),
        })
        .collect();
    assert_eq!(hits.len(), 1, "{label:?} names one of {names:?}");
    hits[0]
}

/// The bars in all of the scrollback in flight: one per input in flight, each naming
/// its input, reading (`land`), then the footer; at the bottom, each narrower than
/// the terminal, and no other bar line anywhere (no stale copy). Returns the inputs
/// in flight.
fn check_bars(
    scrollback: &[String],
    names: &[String],
    in_flight: usize,
    width: usize,
) -> Vec<String> {
    let lines: Vec<&String> = scrollback.iter().filter(|l| !l.is_empty()).collect();
    let bars: Vec<&String> = lines.iter().copied().filter(|l| is_bar(l)).collect();
    let all = scrollback.join("\n");
    assert_eq!(
        bars.len(),
        in_flight + 1,
        "the bars, and no stale copy:\n{all}"
    );
    assert_eq!(
        lines[lines.len() - bars.len()..],
        bars[..],
        "the bars are at the bottom:\n{all}"
    );
    for bar in &bars {
        assert!(bar.chars().count() < width, "{bar:?} fits {width} columns");
    }
    let footer = bars[in_flight];
    assert!(
        footer.starts_with("inbox ") && footer.contains(&format!("]  0/{} inputs", names.len())),
        "{footer:?}"
    );
    let mut inputs = Vec::new();
    for bar in &bars[..in_flight] {
        let (label, rest) = bar.split_once("  ").expect("a name, then the stage");
        assert!(rest.trim_start().starts_with("land "), "{bar:?}");
        assert!(bar.contains(" MiB"), "{bar:?}");
        inputs.push(named(label, names).to_owned());
    }
    let distinct: BTreeSet<&String> = inputs.iter().collect();
    assert_eq!(distinct.len(), in_flight, "one bar per input: {inputs:?}");
    inputs
}

/// What the run printed on stdout: one line per input by name, and the totals line.
fn stdout_lines(stdout: &str) -> (Vec<serde_json::Value>, serde_json::Value) {
    let mut lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a stdout line is JSON"))
        .collect();
    let totals = lines.pop().expect("a totals line");
    (lines, totals)
}

/// The scrollback after a run with bars: every line is whole, and one of a whole log
/// line (`json_logs`: a JSON object), the line of a finished input, the totals, a
/// pause message. One line per input, matching its stdout line; the totals last.
fn check_final(fin: &Finished, names: &[String], json_logs: bool) {
    let all = fin.scrollback.join("\n");
    assert_eq!(fin.code, 0, "the run failed:\n{all}");
    let (inputs, totals) = stdout_lines(&fin.stdout);
    assert_eq!(inputs.len(), names.len(), "{}", fin.stdout);
    let mut results = Vec::new();
    let mut totals_lines = Vec::new();
    for line in fin.scrollback.iter().filter(|l| !l.is_empty()) {
        if line == PAUSED || is_pane_dead(line) {
            continue;
        }
        if json_logs {
            if line.starts_with('{') {
                let v: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("a torn JSON log line ({e}): {line:?}\n{all}"));
                assert!(v["timestamp"].is_string(), "{line}");
                continue;
            }
        } else if is_log_line(line) {
            continue;
        }
        assert_eq!(
            log_heads(line),
            0,
            "a log line glued to another: {line:?}\n{all}"
        );
        if line.starts_with("totals  ") {
            totals_lines.push(line.clone());
            continue;
        }
        let (label, rest) = line
            .split_once("  ")
            .unwrap_or_else(|| panic!("a torn or stray line: {line:?}\n{all}"));
        assert!(
            rest.trim_start().starts_with("published  "),
            "a torn or stray line: {line:?}\n{all}"
        );
        results.push((named(label.trim_end(), names).to_owned(), line.clone()));
    }
    assert!(!is_bar(&all), "no bar is left after the run:\n{all}");
    // One line per input: `day1.jsonl  published  19,802 rows  0.3 s`.
    let mut seen = BTreeSet::new();
    for (name, line) in &results {
        assert!(seen.insert(name.clone()), "{name} has one line:\n{all}");
        let out = inputs
            .iter()
            .find(|v| {
                v["input"]
                    .as_str()
                    .is_some_and(|i| i.ends_with(&format!("/{name}")))
            })
            .expect("its stdout line");
        let rows = out["accepted_rows"].as_u64().expect("accepted_rows");
        let fields: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .collect();
        assert_eq!(fields.len(), 4, "{line:?}");
        assert_eq!(fields[1], "published", "{line:?}");
        assert_eq!(fields[2], format!("{} rows", thousands(rows)), "{line:?}");
        assert!(
            fields[3].ends_with(" s") || fields[3].contains('m'),
            "{line:?}"
        );
    }
    assert_eq!(seen.len(), names.len(), "a line per input:\n{all}");
    // The totals, once, as the screen's last word.
    let n = names.len();
    let rows: u64 = inputs
        .iter()
        .map(|v| v["accepted_rows"].as_u64().unwrap())
        .sum();
    assert_eq!(totals_lines.len(), 1, "{all}");
    assert!(
        totals_lines[0].starts_with(&format!(
            "totals  {n} inputs: {n} published, 0 failed  {} rows published  ",
            thousands(rows)
        )),
        "{:?}",
        totals_lines[0]
    );
    assert_eq!(totals["totals"]["published"], n as u64);
    let last = fin
        .screen
        .iter()
        .rev()
        .find(|l| !l.is_empty() && !is_pane_dead(l))
        .expect("a final screen");
    assert_eq!(
        last, &totals_lines[0],
        "the final screen ends with the totals"
    );
}

/// Text log lines end as whole lines do: one `inbox listed`, and per input one
/// `stream complete` and one `run finished`, each with its last field.
fn check_log_lines_whole(scrollback: &[String], inputs: usize) {
    let all = scrollback.join("\n");
    let count = |msg: &str, end: &dyn Fn(&str) -> bool| {
        let lines: Vec<&String> = scrollback.iter().filter(|l| l.contains(msg)).collect();
        for l in &lines {
            assert!(is_log_line(l) && end(l), "a whole log line: {l:?}\n{all}");
        }
        lines.len()
    };
    assert_eq!(count(": inbox listed ", &|l| l.ends_with("shard=\"\"")), 1);
    let digits = |l: &str| {
        l.rsplit('=')
            .next()
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    assert_eq!(
        count(": stream complete ", &|l| l.contains("distinct_events=")
            && digits(l)),
        inputs
    );
    assert_eq!(
        count(": run finished ", &|l| l.ends_with("checkpoint_moved=true")),
        inputs
    );
    assert_eq!(
        count(": inbox run finished ", &|l| l.ends_with("failed=0")),
        1
    );
    assert_eq!(
        scrollback
            .iter()
            .filter(|l| l.contains("paused at"))
            .count(),
        inputs,
        "a whole pause line per input:\n{all}"
    );
}

/// Two inputs paused mid-stream, and their bars drawn at that stage.
fn paused_with_bars(screen: &[String]) -> bool {
    screen.iter().filter(|l| *l == PAUSED).count() == 2
        && screen
            .iter()
            .filter(|l| is_bar(l) && l.contains("  land "))
            .count()
            == 2
}

/// Stdout lines with their run ids blanked.
fn without_run_ids(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|l| {
            let l = match l.split_once("\"run_id\":\"") {
                Some((head, tail)) => {
                    let (_, rest) = tail.split_once('"').expect("a run id ends");
                    format!("{head}\"run_id\":\"RUN\"{rest}")
                }
                None => l.to_owned(),
            };
            // The commit log numbers publishes in the order the jobs finish them,
            // which two runs of one inbox need not share (`log_sequences` checks them).
            match l.split_once("\"log_sequence\":") {
                Some((head, tail)) => {
                    let rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
                    format!("{head}\"log_sequence\":SEQ{rest}")
                }
                None => l,
            }
        })
        .collect()
}

/// The commit log numbers a run's published inputs name, in order: 1 to N for an
/// inbox landed into a fresh lake, each once.
fn log_sequences(stdout: &str) -> Vec<u64> {
    let mut seqs: Vec<u64> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["action"] == "published")
        .map(|v| {
            v["log_sequence"]
                .as_u64()
                .expect("a publish names its entry")
        })
        .collect();
    seqs.sort_unstable();
    seqs
}

/// The acceptance run of the issue: `--jobs 2` over six inputs in a 150×30 pane.
#[test]
fn an_inbox_run_at_150_columns() {
    let names = [
        "day1.jsonl",
        "day2.jsonl",
        "day3.jsonl",
        "day4.jsonl",
        "day5.jsonl",
        "events-2026-03-02T00-00-00Z-part-0001-of-0024.jsonl",
    ];
    let inbox = inbox(&names, 20_000);
    let (args, env) = (run_args(2, &[]), run_env(inbox.dir.path(), &[]));
    let mut run = TtyRun::start(&inbox, (150, 30), &args, &env);

    // In flight: the first two inputs paused mid-stream.
    run.pane
        .wait_for("two inputs paused, their bars drawn", paused_with_bars);
    let scrollback = run.pane.scrollback();
    let in_flight = check_bars(&scrollback, &inbox.names, 2, 150);
    // At 150 columns a name fits whole; the long one is cut to 40 columns.
    for bar in scrollback
        .iter()
        .filter(|l| is_bar(l) && !l.starts_with("inbox"))
    {
        let whole = in_flight.iter().any(|n| bar.starts_with(&format!("{n}  ")));
        let long = bar.starts_with("events-2026-") && bar.contains('…');
        assert!(whole || long, "{bar:?}");
    }

    run.go_on();
    let fin = run.finish();
    check_final(&fin, &inbox.names, false);
    check_log_lines_whole(&fin.scrollback, names.len());
    assert!(
        fin.colored,
        "log levels are coloured on a terminal without NO_COLOR"
    );

    // Stdout is unchanged by the terminal: the same run without one (same paths: the
    // first lake moved aside) prints the same bytes but for run ids, the order in
    // which the two jobs finished and so the log numbers of their publishes.
    std::fs::rename(
        inbox.dir.path().join("lake"),
        inbox.dir.path().join("lake-tty"),
    )
    .unwrap();
    let plain = Command::new(env!("CARGO_BIN_EXE_landing"))
        .args(&args)
        .current_dir(inbox.dir.path())
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .expect("run landing");
    let plain_err = String::from_utf8_lossy(&plain.stderr);
    assert_eq!(plain.status.code(), Some(0), "{plain_err}");
    assert!(
        !is_bar(&plain_err) && !plain_err.contains("totals  "),
        "{plain_err}"
    );
    let plain_out = String::from_utf8_lossy(&plain.stdout);
    let all: Vec<u64> = (1..=names.len() as u64).collect();
    assert_eq!(log_sequences(&fin.stdout), all, "entries of the tty run");
    assert_eq!(log_sequences(&plain_out), all, "entries of the piped run");
    let (mut tty, mut piped) = (without_run_ids(&fin.stdout), without_run_ids(&plain_out));
    assert_eq!(tty.pop(), piped.pop(), "the totals line");
    tty.sort();
    piped.sort();
    assert_eq!(tty, piped, "the input lines");
    assert!(fin.stdout.ends_with('\n') && !fin.stdout.contains('\x1b'));
}

/// 80 columns, long names, `NO_COLOR`, and the terminal made narrower mid-run.
#[test]
fn an_inbox_run_at_80_columns_survives_a_resize() {
    let names: Vec<String> = (1..=4)
        .map(|i| format!("learner-progress-2026-03-0{i}-export-part-000{i}.jsonl"))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let inbox = inbox(&refs, 20_000);
    let env = run_env(inbox.dir.path(), &[("NO_COLOR", "1")]);
    let mut run = TtyRun::start(&inbox, (80, 24), &run_args(2, &[]), &env);

    run.pane
        .wait_for("two inputs paused, their bars drawn", paused_with_bars);
    let scrollback = run.pane.scrollback();
    let before = check_bars(&scrollback, &inbox.names, 2, 80);
    for bar in scrollback
        .iter()
        .filter(|l| is_bar(l) && !l.starts_with("inbox"))
    {
        assert!(
            bar.contains('…'),
            "a 50-column name is shortened at 80: {bar:?}"
        );
    }

    // Narrower than the bar lines: the terminal rewraps them; the next frame erases
    // them and draws the bars at 60 columns, with no stale copy left.
    run.pane.resize(60, 24);
    run.pane.wait_for("the bars redrawn at 60 columns", |s| {
        let bars: Vec<&String> = s.iter().filter(|l| is_bar(l)).collect();
        bars.len() == 3 && bars.iter().all(|b| b.chars().count() < 60)
    });
    let after = check_bars(&run.pane.scrollback(), &inbox.names, 2, 60);
    assert_eq!(before, after, "the same inputs in flight");

    run.go_on();
    let fin = run.finish();
    check_final(&fin, &inbox.names, false);
    check_log_lines_whole(&fin.scrollback, names.len());
    assert!(
        !fin.colored,
        "NO_COLOR: no colour at all:\n{}",
        fin.scrollback.join("\n")
    );
}

/// `--log-format json` on a terminal: the bars as with text logs, every JSON log line
/// whole above them.
#[test]
fn json_logs_stay_whole_above_the_bars() {
    let names = ["a.jsonl", "b.jsonl", "c.jsonl"];
    let inbox = inbox(&names, 20_000);
    let env = run_env(inbox.dir.path(), &[("LANDING_LOG_FORMAT", "json")]);
    let mut run = TtyRun::start(&inbox, (120, 30), &run_args(2, &[]), &env);
    run.pane
        .wait_for("two inputs paused, their bars drawn", paused_with_bars);
    check_bars(&run.pane.scrollback(), &inbox.names, 2, 120);
    run.go_on();
    let fin = run.finish();
    check_final(&fin, &inbox.names, true);
    let logs = fin.scrollback.iter().filter(|l| l.starts_with('{')).count();
    assert!(
        logs >= 2 * names.len() + 2,
        "the JSON log lines:\n{}",
        fin.scrollback.join("\n")
    );
}

/// `--progress never` on a terminal: no bar, not one bar character, in flight or
/// after; the logs say what the bars would have.
#[test]
fn progress_never_draws_no_bar() {
    let names = ["a.jsonl", "b.jsonl", "c.jsonl"];
    let inbox = inbox(&names, 20_000);
    let env = run_env(inbox.dir.path(), &[]);
    let mut run = TtyRun::start(
        &inbox,
        (120, 30),
        &run_args(2, &["--progress", "never"]),
        &env,
    );
    let screen = run.pane.wait_for("two inputs paused", |s| {
        s.iter().filter(|l| *l == PAUSED).count() == 2
    });
    let no_bars = |lines: &[String]| {
        let all = lines.join("\n");
        assert!(!is_bar(&all), "a bar:\n{all}");
        for mark in ["[=", "=>", "[>", "inputs/s", "MiB/s", "totals  "] {
            assert!(!all.contains(mark), "{mark:?} on the screen:\n{all}");
        }
    };
    no_bars(&screen);
    run.go_on();
    let fin = run.finish();
    assert_eq!(fin.code, 0, "{}", fin.scrollback.join("\n"));
    no_bars(&fin.scrollback);
    check_log_lines_whole(&fin.scrollback, names.len());
    for line in fin.scrollback.iter().filter(|l| !l.is_empty()) {
        assert!(
            is_log_line(line) || line == PAUSED || is_pane_dead(line),
            "only whole log lines: {line:?}"
        );
    }
    let done = fin
        .scrollback
        .iter()
        .filter(|l| l.contains(": input done "))
        .count();
    assert_eq!(done, names.len(), "an `input done` log line per input");
}

/// The environment of a run that leaves the log level to the terminal default (no
/// `LANDING_LOG_LEVEL`).
fn default_level_env(dir: &Path) -> Vec<(String, String)> {
    let mut env = run_env(dir, &[]);
    env.retain(|(k, _)| k != "LANDING_LOG_LEVEL");
    env
}

/// Six inputs at 100 columns with the default log level: each input's result line
/// and the totals, and no INFO line repeating them; a warning still shows.
#[test]
fn the_default_at_a_terminal_says_each_fact_once() {
    let names = [
        "progress-2026-04-01.jsonl",
        "progress-2026-04-02.jsonl",
        "progress-2026-04-03.jsonl",
        "progress-2026-04-04.jsonl",
        "progress-2026-04-05.jsonl",
        "progress-2026-04-06.jsonl",
    ];
    let inbox = inbox(&names, 20_000);
    let env = default_level_env(inbox.dir.path());
    let mut run = TtyRun::start(&inbox, (100, 30), &run_args(2, &[]), &env);
    run.pane
        .wait_for("two inputs paused, their bars drawn", paused_with_bars);
    check_bars(&run.pane.scrollback(), &inbox.names, 2, 100);
    run.go_on();
    let fin = run.finish();
    check_final(&fin, &inbox.names, false);
    let all = fin.scrollback.join("\n");
    eprintln!(
        "the final screen at 100 columns:\n{}",
        fin.screen.join("\n")
    );
    assert_eq!(
        fin.scrollback.iter().filter(|l| is_log_line(l)).count(),
        0,
        "no log line at the default level:\n{all}"
    );
    assert!(!all.contains(" INFO "), "{all}");
}

/// `-v` at a terminal brings the INFO lines back, whole above the bars.
#[test]
fn verbose_shows_info_lines_at_a_terminal() {
    let names = ["a.jsonl", "b.jsonl", "c.jsonl"];
    let inbox = inbox(&names, 20_000);
    let env = default_level_env(inbox.dir.path());
    let mut run = TtyRun::start(&inbox, (120, 30), &run_args(2, &["-v"]), &env);
    run.pane
        .wait_for("two inputs paused, their bars drawn", paused_with_bars);
    run.go_on();
    let fin = run.finish();
    check_final(&fin, &inbox.names, false);
    check_log_lines_whole(&fin.scrollback, names.len());
}

/// `-q` at a terminal: no bar, no line per input, no log line; only the totals.
#[test]
fn quiet_shows_only_the_totals_at_a_terminal() {
    let names = ["a.jsonl", "b.jsonl", "c.jsonl"];
    let inbox = inbox(&names, 20_000);
    let env = default_level_env(inbox.dir.path());
    let mut run = TtyRun::start(&inbox, (120, 30), &run_args(2, &["-q"]), &env);
    run.pane.wait_for("two inputs paused", |s| {
        s.iter().filter(|l| *l == PAUSED).count() == 2
    });
    run.go_on();
    let fin = run.finish();
    let all = fin.scrollback.join("\n");
    assert_eq!(fin.code, 0, "{all}");
    assert!(!is_bar(&all), "a bar:\n{all}");
    let shown: Vec<&String> = fin
        .scrollback
        .iter()
        .filter(|l| !l.is_empty() && *l != PAUSED && !is_pane_dead(l))
        .collect();
    assert_eq!(shown.len(), 1, "only the totals:\n{all}");
    assert!(
        shown[0].starts_with("totals  3 inputs: 3 published, 0 failed  "),
        "{all}"
    );
    // stdout is unchanged: a line per input and the totals.
    let (inputs, totals) = stdout_lines(&fin.stdout);
    assert_eq!(inputs.len(), names.len());
    assert_eq!(totals["totals"]["published"], 3);
}

/// A spilled run's replay reads the input a second time with a bar of its own,
/// `replay` (drawn while the run waits at the before-replay pause), and the run
/// then ends published.
#[test]
fn a_replay_draws_its_own_bar() {
    let names = ["day1.jsonl"];
    let inbox = inbox(&names, 20_000);
    let args = run_args(1, &[]);
    let env = run_env(
        inbox.dir.path(),
        &[
            ("LANDING_PAUSE_AT", "before-replay"),
            ("LANDING_TEST_SPILL_EVERY", "500"),
            ("LANDING_TEST_SPILL_REPLAY", "true"),
        ],
    );
    let mut run = TtyRun::start(&inbox, (150, 30), &args, &env);
    run.pane.wait_for(
        "the run paused before its replay, its bar drawn",
        |screen| {
            screen
                .iter()
                .any(|l| l == "landing: paused at BeforeReplay")
                && screen
                    .iter()
                    .any(|l| is_bar(l) && l.starts_with("day1.jsonl") && l.contains("  replay "))
        },
    );
    run.go_on();
    let fin = run.finish();
    assert_eq!(fin.code, 0, "{}", fin.scrollback.join("\n"));
    let (inputs, _) = stdout_lines(&fin.stdout);
    assert_eq!(inputs.len(), 1, "{}", fin.stdout);
    assert_eq!(inputs[0]["action"], "published", "{}", fin.stdout);
    assert_eq!(inputs[0]["spill"]["replayed"], true, "{}", fin.stdout);
}
