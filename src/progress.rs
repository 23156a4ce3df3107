//! Progress for long inputs: a bar (bytes, rate, ETA) when stderr is a terminal,
//! otherwise a log line every few seconds so CronJob logs show the run is alive.

use std::io::IsTerminal;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::config::Progress as Mode;

/// Inputs smaller than this finish before a bar is worth drawing.
const MIN_BAR_BYTES: u64 = 4 << 20;
const LOG_EVERY: Duration = Duration::from_secs(5);

static MULTI: OnceLock<MultiProgress> = OnceLock::new();

/// The shared set of bars of an inbox run: once asked for, every byte bar is drawn
/// under the inbox's bar instead of on its own.
pub fn multi() -> &'static MultiProgress {
    MULTI.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

pub struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    done: u64,
    started: Instant,
    last_log: Instant,
    stage: &'static str,
}

impl Progress {
    pub fn new(stage: &'static str, total: u64, mode: Mode) -> Self {
        let show = match mode {
            Mode::Always => true,
            Mode::Never => false,
            Mode::Auto => total >= MIN_BAR_BYTES && std::io::stderr().is_terminal(),
        };
        let bar = show.then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(stage);
            match MULTI.get() {
                Some(multi) => multi.add(bar),
                None => bar,
            }
        });
        let now = Instant::now();
        Progress {
            bar,
            total,
            done: 0,
            started: now,
            last_log: now,
            stage,
        }
    }

    pub fn inc(&mut self, n: u64) {
        self.done += n;
        if let Some(bar) = &self.bar {
            bar.inc(n);
            return;
        }
        if self.last_log.elapsed() >= LOG_EVERY {
            self.last_log = Instant::now();
            let secs = self.started.elapsed().as_secs_f64().max(1e-9);
            tracing::info!(
                stage = self.stage,
                bytes_done = self.done,
                bytes_total = self.total,
                mib_per_sec = format!("{:.1}", self.done as f64 / secs / 1048576.0),
                "progress"
            );
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
