//! Runs a test steps through by hand: a run stopped at a pause point ([`Paused`]:
//! the binary stops at the named `LANDING_PAUSE_AT` point, says so on stderr and waits
//! for a line on stdin), signals to a child ([`signal`]) and waiting until a child
//! stopped itself ([`wait_stopped`], for `LANDING_FREEZE_AT`). Interleavings are
//! driven by these, never by sleeps.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::world::{Run, World};

/// A run stopped at a pause point, with its stderr drained on a thread that also
/// hands each line over, so a test can wait for what the run says.
pub struct Paused {
    child: Child,
    lines: Receiver<String>,
    stderr: JoinHandle<String>,
    stdout: JoinHandle<String>,
}

impl Paused {
    /// Start `landing run --input INPUT --lake LAKE` with `LANDING_PAUSE_AT=point` and
    /// wait until it is there.
    pub fn start(w: &World, input: &str, point: &str, env: &[(&str, &str)]) -> Paused {
        let lake = w.lake_arg();
        Paused::start_args(w, &["run", "--input", input, "--lake", &lake], point, env)
    }

    /// Start `landing ARGS...` (an inbox run, say) with `LANDING_PAUSE_AT=point` and
    /// wait until it is there. An inbox run pauses at that point in each input's run:
    /// [`Paused::finish`] lets every one of them go on.
    pub fn start_args(w: &World, args: &[&str], point: &str, env: &[(&str, &str)]) -> Paused {
        let mut all_env = vec![("LANDING_PAUSE_AT", point)];
        all_env.extend_from_slice(env);
        let mut cmd = w.command(args, &all_env);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn landing");
        let (tx, lines) = std::sync::mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(err).lines() {
                let line = line.unwrap_or_default();
                let _ = tx.send(line.clone());
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let mut out = child.stdout.take().expect("stdout");
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let paused = Paused {
            child,
            lines,
            stderr,
            stdout,
        };
        paused.wait_for_line("landing: paused at");
        paused
    }

    /// Block until the run writes a stderr line containing `needle`; fail if it exits
    /// first.
    pub fn wait_for_line(&self, needle: &str) {
        self.wait_for_lines(&[needle]);
    }

    /// Block until the run has written, in any order, a stderr line containing each
    /// of `needles`; fail if it exits first.
    pub fn wait_for_lines(&self, needles: &[&str]) {
        let mut left: Vec<&str> = needles.to_vec();
        if left.is_empty() {
            return;
        }
        for line in self.lines.iter() {
            left.retain(|n| !line.contains(n));
            if left.is_empty() {
                return;
            }
        }
        panic!("the run ended without saying {left:?}");
    }

    /// Block until the run has written `n` more stderr lines containing `needle`;
    /// fail if it exits first, or if they do not come within `bound` (the bound only
    /// decides how long a failing test takes).
    pub fn wait_for_count(&self, needle: &str, n: usize, bound: Duration) {
        let deadline = Instant::now() + bound;
        let mut left = n;
        while left > 0 {
            let wait = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(wait) {
                Ok(line) if line.contains(needle) => left -= 1,
                Ok(_) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{left} of {n} lines saying {needle:?} did not come within {bound:?}")
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the run ended with {left} of {n} lines saying {needle:?} to come")
                }
            }
        }
    }

    /// Send `sig` to the run.
    pub fn signal(&self, sig: i32) {
        signal(&self.child, sig);
    }

    /// Let the run go on (a line, then the end of its stdin, so any later pause
    /// point goes on at once too) and collect its outcome.
    pub fn finish(mut self) -> Run {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let status = self.child.wait().expect("wait");
        let stdout = self.stdout.join().unwrap_or_default();
        let stderr = self.stderr.join().unwrap_or_default();
        Run::from_output(std::process::Output {
            status,
            stdout: stdout.into_bytes(),
            stderr: stderr.into_bytes(),
        })
    }

    /// Wait until the run logged `needle` (it is still paused), then let it go on.
    pub fn finish_after_log(self, needle: &str) -> Run {
        self.wait_for_line(needle);
        self.finish()
    }
}

/// Send `sig` to `child`.
pub fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0, "kill({}, {sig})", child.id());
}

/// Wait until `child` is stopped (state `T` in /proc), as a run frozen at a
/// `LANDING_FREEZE_AT` point stops itself; fail if it ends first or is not stopped
/// within `bound`.
pub fn wait_stopped(child: &mut Child, bound: Duration) {
    let stat = format!("/proc/{}/stat", child.id());
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("the run ended ({status}) instead of freezing");
        }
        let text = std::fs::read_to_string(&stat).unwrap_or_default();
        // `pid (comm) S ...`: the state follows the last ')'.
        let state = text
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next());
        if state == Some("T") {
            return;
        }
        assert!(Instant::now() < deadline, "the run never froze ({bound:?})");
        std::thread::sleep(Duration::from_millis(10));
    }
}
