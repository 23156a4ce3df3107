//! What an inbox run shows while it goes: on a terminal a footer under the bars of
//! the inputs in flight and a line per finished input, else log lines; the stdout
//! lines, above the bars.

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::info;

use super::Landed;
use crate::progress::Mode;
use crate::progress::{self, Terminal};
use crate::store::Listed;
use crate::summary::{Action, Totals};

/// How often a line reports the inbox's progress when there is no terminal.
const LOG_EVERY: Duration = Duration::from_secs(30);

/// Progress over inputs: on a terminal, a footer under the inputs' bars and a line
/// per finished input; otherwise a log line per input and a periodic line.
pub(super) struct InboxProgress {
    pub(super) terminal: Terminal,
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    /// The longest input name: the column results are lined up in.
    name_col: usize,
    started: Instant,
    last_log: Mutex<Instant>,
    /// Rows published so far (the totals line on a terminal).
    rows: std::sync::atomic::AtomicU64,
    /// `-q` at a terminal: no bars, no line per input, the totals at the end.
    quiet_totals: bool,
}

impl InboxProgress {
    pub(super) fn new(inputs: &[Listed], mode: Mode, terminal: &Terminal) -> Self {
        let total = inputs.len();
        let name_col = inputs
            .iter()
            .map(|l| progress::cols(&l.name))
            .max()
            .unwrap_or(0);
        let now = Instant::now();
        InboxProgress {
            quiet_totals: mode == Mode::Quiet && terminal.drawable(),
            bar: terminal.footer(total, name_col, mode),
            terminal: terminal.clone(),
            total,
            name_col,
            started: now,
            last_log: Mutex::new(now),
            rows: Default::default(),
        }
    }

    pub(super) fn done(&self, n: usize, input: &str, landed: &Landed) {
        let action = landed.action.as_str();
        if let Ok(s) = &landed.result {
            if s.action == Action::Published {
                self.rows.fetch_add(s.accepted_rows, Ordering::Relaxed);
            }
        }
        if let Some(bar) = &self.bar {
            let width = progress::width();
            let detail = result_detail(landed);
            let line =
                progress::result_line(input, self.name_col, action, &detail, landed.took, width);
            self.terminal.say(&line);
            bar.inc(1);
            return;
        }
        info!(input, action, done = n, total = self.total, "input done");
        let mut last = self.last_log.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() >= LOG_EVERY {
            *last = Instant::now();
            let secs = self.started.elapsed().as_secs_f64().max(1e-9);
            info!(
                done = n,
                total = self.total,
                inputs_per_sec = format!("{:.1}", n as f64 / secs),
                "inbox progress"
            );
        }
    }

    /// Clear the footer; on a terminal, the totals take its place.
    pub(super) fn finish(&self, totals: &Totals) {
        match &self.bar {
            Some(bar) => {
                self.terminal.end_footer();
                bar.finish_and_clear();
            }
            None if self.quiet_totals => {}
            None => return,
        }
        let mut counts: Vec<(&str, u64)> = [
            Action::Published,
            Action::Skipped,
            Action::Refused,
            Action::Busy,
            Action::Failed,
        ]
        .map(|a| (a.as_str(), totals.get(a)))
        .to_vec();
        for (what, a) in [
            ("conflict", Action::Conflict),
            ("interrupted", Action::Interrupted),
            ("not started", Action::NotStarted),
        ] {
            if totals.get(a) > 0 {
                counts.push((what, totals.get(a)));
            }
        }
        let rows = self.rows.load(Ordering::Relaxed);
        self.terminal.say(&progress::totals_line(
            totals.inputs(),
            &counts,
            rows,
            self.started.elapsed(),
        ));
    }
}

/// What a finished input's line says after its action: its rows, why it was refused,
/// or its error.
fn result_detail(landed: &Landed) -> String {
    match &landed.result {
        Ok(s) => match &s.reason {
            Some(reason) => reason.to_string(),
            None if matches!(s.action, Action::Published | Action::Skipped) => {
                let mut d = format!("{} rows", progress::thousands(s.accepted_rows));
                if s.rejected_rows > 0 {
                    d.push_str(&format!(
                        ", {} quarantined",
                        progress::thousands(s.rejected_rows)
                    ));
                }
                d
            }
            None => String::new(),
        },
        Err(e) => e.to_string(),
    }
}

pub(super) fn print_line(terminal: &Terminal, v: &Value) {
    terminal.stdout_line(&v.to_string());
}
