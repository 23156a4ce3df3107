//! What a run shows on stderr besides its log lines. On a terminal: a bar per input
//! being read (its name, stage, bytes, rate, ETA) and, in an inbox run, a bar per
//! input in flight above a footer over all inputs; otherwise a log line every few
//! seconds, so CronJob logs show the run is alive.
//!
//! The bars are one [`MultiProgress`] at the bottom of the terminal. Everything else
//! written to stderr while they are drawn goes above them, whole, through
//! [`Terminal::above_bars`]: log lines (the tracing writer [`LogLine`] that `main` installs),
//! the line each finished input leaves ([`result_line`]), the totals, hook messages;
//! stdout lines wait for the bars to be cleared when stdout is the same terminal
//! ([`Terminal::stdout_line`]). Bar lines are drawn by [`render_input`] and [`render_footer`]
//! (`format.rs`: pure functions of the numbers and the terminal's width), so each
//! fits the width it is drawn at, after a resize too.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use indicatif::{
    MultiProgress, ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressState, ProgressStyle,
};

mod format;
mod mode;
pub use format::*;
pub use mode::Mode;

/// Inputs smaller than this finish before a bar is worth drawing (a single run; an
/// inbox run shows every input in flight).
const MIN_BAR_BYTES: u64 = 4 << 20;
const LOG_EVERY: Duration = Duration::from_secs(5);
/// How often a bar is redrawn with nothing new (its rate and ETA still move).
const TICK: Duration = Duration::from_millis(250);
/// The widest a name column or a bar gets. Lines are never wider than they need
/// (not stretched to the terminal): a terminal made narrower, down to their width,
/// has nothing to rewrap.
const MAX_NAME: usize = 40;
const MAX_BAR: usize = 20;
/// The narrowest bar worth drawing; narrower, the bar is left out.
const MIN_BAR: usize = 10;

/// The bars of an inbox run: its footer and a bar per input in flight, by name.
#[derive(Default)]
struct Board {
    footer: Option<ProgressBar>,
    inputs: Vec<(String, ProgressBar)>,
    /// The longest input name of the run (characters): the column names are padded to.
    name_col: usize,
}

/// The process's terminal: its one set of bars, drawn on stderr when that is a
/// terminal (hidden otherwise), the board of an inbox run's bars, and every line
/// written above them. `main` makes one and hands it down (to the log writer, the
/// inbox, each run's stages); clones share it. Never a global.
#[derive(Clone)]
pub struct Terminal(Arc<Shared>);

struct Shared {
    multi: MultiProgress,
    board: Mutex<Board>,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal")
            .field("drawable", &self.drawable())
            .finish_non_exhaustive()
    }
}

impl Terminal {
    /// Bars on stderr if it is a terminal; none otherwise.
    pub fn stderr() -> Terminal {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::term_like_with_hz(Box::new(Screen::stderr()), 20)
        } else {
            ProgressDrawTarget::hidden()
        };
        Terminal::with_target(target)
    }

    fn with_target(target: ProgressDrawTarget) -> Terminal {
        Terminal(Arc::new(Shared {
            multi: MultiProgress::with_draw_target(target),
            board: Mutex::new(Board::default()),
        }))
    }

    fn board(&self) -> MutexGuard<'_, Board> {
        self.0.board.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether bars can be drawn at all: stderr is a terminal.
    pub fn drawable(&self) -> bool {
        !self.0.multi.is_hidden()
    }

    /// Run `write` (which writes whole lines to stderr or stdout) with the bars out
    /// of the way: cleared before, redrawn below after. Without bars it just runs.
    pub fn above_bars<R>(&self, write: impl FnOnce() -> R) -> R {
        if self.drawable() {
            self.0.multi.suspend(write)
        } else {
            write()
        }
    }

    /// One line on stderr, above the bars if there are any.
    pub fn say(&self, line: &str) {
        self.above_bars(|| {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{line}");
            let _ = err.flush();
        });
    }

    /// One line on stdout, flushed. When stdout is a terminal the bars (on stderr,
    /// most likely the same terminal) are cleared around it; the bytes are the same
    /// either way.
    pub fn stdout_line(&self, line: &str) {
        let write = || {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        };
        if std::io::stdout().is_terminal() {
            self.above_bars(write)
        } else {
            write()
        }
    }

    /// The tracing writer of one event (see [`LogLine`]):
    /// `tracing_subscriber::fmt().with_writer(move || terminal.log_line())`.
    pub fn log_line(&self) -> LogLine {
        LogLine {
            bytes: Vec::new(),
            terminal: self.clone(),
        }
    }
}

/// The tracing writer: collects one formatted event and writes it to stderr in one
/// piece when dropped, above the bars if any are drawn (so a log line is never cut by
/// a bar's redraw, and bars are never left behind as stale copies).
#[derive(Debug)]
pub struct LogLine {
    bytes: Vec<u8>,
    terminal: Terminal,
}

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if self.bytes.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.bytes);
        self.terminal.above_bars(|| {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(&bytes);
            let _ = err.flush();
        });
    }
}

/// The size of the terminal on stderr, (columns, rows); 80×24 when it has none.
fn term_size() -> (usize, usize) {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ only fills the winsize passed to it.
    let rc = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) };
    if rc == 0 && ws.ws_col > 0 && ws.ws_row > 0 {
        (usize::from(ws.ws_col), usize::from(ws.ws_row))
    } else {
        (80, 24)
    }
}

/// The width of the terminal on stderr, in columns (80 when it has none).
pub fn width() -> usize {
    term_size().0
}

/// The bars' terminal: stderr, written once per frame, aware of resizes.
///
/// indicatif redraws the bars by moving the cursor up over as many rows as it drew
/// last time. When the terminal got narrower in between, a terminal that rewraps its
/// lines (tmux, VTE, iTerm2, kitty, ...) shows an old bar line wider than the new
/// width on more rows, and moving up over the old count would leave the rest behind
/// as stale copies. So the first move of a frame after a change of width goes up
/// over the rows the last frame's lines take at the new width, and erases everything
/// below (the bars are the bottom of the screen). Rows a terminal pushed into its
/// scrollback while rewrapping are out of reach; lines no wider than they need, and
/// no padding after the last one (indicatif fills it to the right edge, which tmux
/// rewraps too), keep that to shrinks below a bar line's own width.
struct Screen {
    size: TermSize,
    out: TermOut,
    state: Mutex<Frames>,
}

/// The terminal's (columns, rows), asked at each frame.
type TermSize = Box<dyn Fn() -> (usize, usize) + Send + Sync>;
/// Where a frame's bytes go, at once.
type TermOut = Box<dyn Fn(&[u8]) + Send + Sync>;

#[derive(Debug, Default)]
struct Frames {
    /// Bytes of the frame being drawn, written at its flush.
    buf: Vec<u8>,
    /// Columns of each line the frame being drawn wrote.
    drawing: Vec<usize>,
    /// The lines of the last frame on the screen, and the width it was drawn at.
    shown: Vec<usize>,
    shown_width: usize,
    /// The next call starts a frame.
    fresh: bool,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen").finish_non_exhaustive()
    }
}

/// Rows a line of `cols` columns takes on a terminal `width` wide.
fn rows(cols: usize, width: usize) -> usize {
    cols.div_ceil(width.max(1)).max(1)
}

impl Screen {
    fn stderr() -> Screen {
        Screen::new(
            Box::new(term_size),
            Box::new(|bytes| {
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(bytes);
                let _ = err.flush();
            }),
        )
    }

    fn new(size: TermSize, out: TermOut) -> Screen {
        Screen {
            size,
            out,
            state: Mutex::new(Frames {
                fresh: true,
                ..Frames::default()
            }),
        }
    }

    fn frames(&self) -> MutexGuard<'_, Frames> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn text(&self, s: &str, newline: bool) {
        let mut f = self.frames();
        f.fresh = false;
        f.buf.extend_from_slice(s.as_bytes());
        if f.drawing.is_empty() {
            f.drawing.push(0);
        }
        if let Some(last) = f.drawing.last_mut() {
            *last += cols(s);
        }
        if newline {
            f.buf.push(b'\n');
            f.drawing.push(0);
        }
    }

    fn escape(&self, seq: &str) {
        let mut f = self.frames();
        f.fresh = false;
        f.buf.extend_from_slice(seq.as_bytes());
    }
}

impl indicatif::TermLike for Screen {
    fn width(&self) -> u16 {
        (self.size)().0.min(usize::from(u16::MAX)) as u16
    }

    fn height(&self) -> u16 {
        (self.size)().1.min(usize::from(u16::MAX)) as u16
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        let mut f = self.frames();
        if std::mem::take(&mut f.fresh) {
            // A frame begins by going back up over the last one.
            f.drawing.clear();
            let width = (self.size)().0;
            if f.shown_width != width && !f.shown.is_empty() {
                let up: usize = f.shown.iter().map(|&c| rows(c, width)).sum::<usize>() - 1;
                if up > 0 {
                    let _ = write!(f.buf, "\x1b[{up}A");
                }
                // What indicatif clears next is already blank; it ends up here.
                f.buf.extend_from_slice(b"\r\x1b[J");
                return Ok(());
            }
        }
        if n > 0 {
            let _ = write!(f.buf, "\x1b[{n}A");
        }
        Ok(())
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.escape(&format!("\x1b[{n}B"));
        }
        Ok(())
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.escape(&format!("\x1b[{n}C"));
        }
        Ok(())
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.escape(&format!("\x1b[{n}D"));
        }
        Ok(())
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.text(s, true);
        Ok(())
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.text(s, false);
        Ok(())
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.escape("\r\x1b[2K");
        Ok(())
    }

    fn flush(&self) -> std::io::Result<()> {
        let mut f = self.frames();
        // indicatif pads the last line to the right edge, to start any foreign write
        // on a new line; every write here goes through `above_bars` instead.
        let mut bytes = std::mem::take(&mut f.buf);
        let padded = bytes.iter().rev().take_while(|&&b| b == b' ').count();
        bytes.truncate(bytes.len() - padded);
        if let Some(last) = f.drawing.last_mut() {
            *last = last.saturating_sub(padded);
        }
        f.shown = std::mem::take(&mut f.drawing);
        if f.shown.iter().all(|&c| c == 0) {
            f.shown.clear();
        }
        f.shown_width = (self.size)().0;
        f.fresh = true;
        drop(f);
        if !bytes.is_empty() {
            (self.out)(&bytes);
        }
        Ok(())
    }
}

/// A style whose one key draws the whole line with `draw(state, width)`.
fn line_style(
    draw: impl Fn(&ProgressState, usize) -> String + Send + Sync + 'static,
) -> ProgressStyle {
    let draw = Arc::new(draw);
    ProgressStyle::with_template("{line}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key(
            "line",
            move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&draw(state, width()));
            },
        )
}

/// The style of an input's bar at `stage` (`start` before any is reached).
fn input_style(name: &str, name_col: usize, stage: &'static str) -> ProgressStyle {
    let name: Arc<str> = name.into();
    line_style(move |s, width| {
        let done = (stage != "start").then(|| (s.pos(), s.len().unwrap_or(0), s.per_sec()));
        render_input(&name, name_col, stage, done, width)
    })
}

impl Terminal {
    /// The inbox run's footer over `total` inputs, at the bottom of the terminal;
    /// `None` (the run logs its progress instead) without a terminal or with
    /// `--progress never`. `longest_name`: the longest input name, which the
    /// columns are padded to.
    pub fn footer(&self, total: usize, longest_name: usize, mode: Mode) -> Option<ProgressBar> {
        if matches!(mode, Mode::Never | Mode::Quiet) || !self.drawable() {
            return None;
        }
        let bar = self.0.multi.add(ProgressBar::new(total as u64));
        bar.set_style(line_style(move |s, width| {
            render_footer(
                s.pos(),
                s.len().unwrap_or(0),
                s.elapsed(),
                longest_name,
                width,
            )
        }));
        bar.enable_steady_tick(TICK);
        let mut b = self.board();
        b.footer = Some(bar.clone());
        b.name_col = longest_name;
        Some(bar)
    }

    /// Take the footer off (its bar is cleared by the caller).
    pub fn end_footer(&self) {
        self.board().footer = None;
    }

    /// An input's run began: draw its bar (named, no stage yet) above the footer;
    /// `None` when the inbox run has no footer.
    pub fn in_flight(&self, name: &str) -> Option<InFlight> {
        let mut b = self.board();
        let footer = b.footer.clone()?;
        let bar = ProgressBar::new(0).with_finish(ProgressFinish::AndClear);
        bar.set_style(input_style(name, b.name_col, "start"));
        let bar = self.0.multi.insert_before(&footer, bar);
        bar.enable_steady_tick(TICK);
        b.inputs.push((name.to_owned(), bar));
        Some(InFlight {
            name: name.to_owned(),
            terminal: self.clone(),
        })
    }

    /// `stage` (`hash`, `land`, `check`, `replay`) reads `total` bytes of the input `name`:
    /// its bar, or a log line every few seconds.
    pub fn progress(&self, stage: &'static str, name: &str, total: u64, mode: Mode) -> Progress {
        let shown = match mode {
            Mode::Never | Mode::Quiet => None,
            _ => {
                let b = self.board();
                let own = b.inputs.iter().find(|(n, _)| n == name);
                if let Some((_, bar)) = own {
                    // An inbox input: its bar moves on to this stage.
                    bar.reset();
                    bar.set_length(total);
                    bar.set_style(input_style(name, b.name_col, stage));
                    Some((bar.clone(), true))
                } else if self.drawable() && (mode == Mode::Always || total >= MIN_BAR_BYTES) {
                    drop(b);
                    let bar = ProgressBar::new(total).with_finish(ProgressFinish::AndClear);
                    bar.set_style(input_style(name, 0, stage));
                    let bar = self.0.multi.add(bar);
                    bar.enable_steady_tick(TICK);
                    Some((bar, false))
                } else {
                    None
                }
            }
        };
        let now = Instant::now();
        let (bar, borrowed) = match shown {
            Some((bar, borrowed)) => (Some(bar), borrowed),
            None => (None, false),
        };
        Progress {
            bar,
            borrowed,
            total,
            done: 0,
            started: now,
            last_log: now,
            stage,
        }
    }
}

/// The bar of an inbox input in flight, from when its run got a slot until it is
/// dropped (the input finished).
pub struct InFlight {
    name: String,
    terminal: Terminal,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut b = self.terminal.board();
        if let Some(i) = b.inputs.iter().position(|(n, _)| *n == self.name) {
            let (_, bar) = b.inputs.swap_remove(i);
            bar.finish_and_clear();
        }
    }
}

/// Bytes of one input read by one stage ([`Terminal::progress`]): its bar on a
/// terminal, else a log line every few seconds.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// The bar is an inbox input's, which outlives this stage.
    borrowed: bool,
    total: u64,
    done: u64,
    started: Instant,
    last_log: Instant,
    stage: &'static str,
}

impl Progress {
    /// A stage that draws no bar (`verify --deep`): a log line every few seconds.
    pub fn logged(stage: &'static str, total: u64) -> Progress {
        let now = Instant::now();
        Progress {
            bar: None,
            borrowed: false,
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

    /// The stage read everything: its own bar goes; an inbox input's stays, full,
    /// until the input finishes.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            if self.borrowed {
                bar.set_position(self.total);
            } else {
                bar.finish_and_clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_spelled_as_the_flag_takes_them() {
        assert_eq!(Mode::CHOICES.map(Mode::name), ["auto", "always", "never"]);
        for m in Mode::CHOICES {
            assert_eq!(m.name().parse(), Ok(m));
        }
        // `-q` sets it; `--progress` does not take it.
        assert_eq!(Mode::Quiet.name(), "quiet");
        assert!("quiet".parse::<Mode>().is_err());
        assert!("Auto".parse::<Mode>().is_err());
    }

    #[test]
    fn names_are_shortened_in_the_middle() {
        assert_eq!(shorten("day3.jsonl", 20), "day3.jsonl");
        assert_eq!(shorten("day3.jsonl", 10), "day3.jsonl");
        assert_eq!(
            shorten("events-2026-03-02-part-0001.jsonl", 15),
            "even…0001.jsonl"
        );
        assert_eq!(
            shorten("learner-progress-2026-03-01-export-part-0001.jsonl", 32),
            "learner-pr…xport-part-0001.jsonl"
        );
        assert_eq!(
            shorten("learner-progress-2026-03-01-export-part-0001.jsonl", 12),
            "lea…01.jsonl"
        );
        assert_eq!(cols(&shorten("events-2026-03-02-part-0001.jsonl", 15)), 15);
        assert_eq!(shorten("abcdef", 1), "…");
        assert_eq!(shorten("abcdef", 0), "");
        // Wide characters count two columns.
        assert_eq!(shorten("日本語のファイル名.jsonl", 14), "日本…名.jsonl");
        assert_eq!(shorten("日本語のファイル名.jsonl", 15), "日本…ル名.jsonl");
        assert_eq!(pad("日本", 6), "日本  ");
    }

    #[test]
    fn rates_and_sizes_are_humane() {
        assert_eq!(count_rate(2.0833, "inputs"), "2.1 inputs/s");
        assert_eq!(count_rate(14.9237, "inputs"), "14.9 inputs/s");
        assert_eq!(count_rate(149.5, "inputs"), "150 inputs/s");
        assert_eq!(count_rate(0.0, "inputs"), "0 inputs/s");
        assert_eq!(byte_rate(210.4 * 1048576.0), "210 MiB/s");
        assert_eq!(byte_rate(242.94 * 1048576.0), "243 MiB/s");
        assert_eq!(byte_rate(9.5 * 1048576.0), "9.5 MiB/s");
        assert_eq!(byte_rate(f64::NAN), "0 B/s");
        assert_eq!(size(0.0), "0 B");
        assert_eq!(size(512.0), "512 B");
        assert_eq!(size(1023.9 * 1024.0), "1.0 MiB");
        assert_eq!(size(18.5 * 1048576.0), "18.5 MiB");
        assert_eq!(size(110.99 * 1048576.0), "111 MiB");
        assert_eq!(size(3.4 * 1073741824.0), "3.4 GiB");
        assert_eq!(thousands(594_136), "594,136");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(0), "0");
        assert_eq!(duration(Duration::from_millis(700)), "0.7 s");
        assert_eq!(duration(Duration::from_millis(12_340)), "12.3 s");
        assert_eq!(duration(Duration::from_secs(125)), "2m 05s");
        assert_eq!(duration(Duration::from_secs(3720)), "1h 02m");
        assert_eq!(eta(2.1), "eta 3s");
        assert_eq!(eta(125.0), "eta 2m 05s");
    }

    #[test]
    fn bars_fill_from_the_left() {
        assert_eq!(bar(0.0, 5), "[>    ]");
        assert_eq!(bar(0.5, 10), "[=====>    ]");
        assert_eq!(bar(1.0, 5), "[=====]");
        assert_eq!(bar(f64::NAN, 3), "[>  ]");
    }

    #[test]
    fn an_input_line_names_its_input_and_fits_the_width() {
        let mib = 1048576;
        let line = render_input(
            "day3.jsonl",
            10,
            "land",
            Some((52 * mib, 111 * mib, 210.0 * mib as f64)),
            150,
        );
        assert!(line.starts_with("day3.jsonl  land   ["), "{line}");
        assert_eq!(
            line,
            "day3.jsonl  land   [=========>          ]  52.0/111 MiB  210 MiB/s  eta 1s"
        );
        // No wider than it needs: a terminal shrunk to 80 columns rewraps nothing.
        assert!(cols(&line) < 80);
        assert_eq!(sizes(512 << 10, 111 * mib), "512 KiB/111 MiB");
        let long = "events-2026-03-02T00-00-00Z-part-0001-of-0024.jsonl";
        for width in [80, 100, 150, 200] {
            let line = render_input(
                long,
                cols(long),
                "land",
                Some((52 * mib, 111 * mib, 2e8)),
                width,
            );
            assert!(cols(&line) < width, "{width}: {line}");
            assert!(line.starts_with("events-"), "{width}: {line}");
            assert!(line.contains(".jsonl  land"), "{width}: {line}");
            assert!(
                line.contains('[') && line.contains("MiB/s"),
                "{width}: {line}"
            );
        }
        // Narrow terminals lose the ETA, the rate, then the bar, never the name.
        for width in [20, 30, 40, 50, 60] {
            let line = render_input(
                "day3.jsonl",
                10,
                "land",
                Some((52 * mib, 111 * mib, 2e8)),
                width,
            );
            assert!(cols(&line) < width, "{width}: {line}");
            assert!(line.starts_with("day3.jsonl"), "{width}: {line}");
        }
        // Before its first stage: the name and an empty bar.
        let line = render_input("day3.jsonl", 12, "start", None, 80);
        assert_eq!(line, "day3.jsonl    start  [>                   ]");
        // The name column lines the inputs up.
        let a = render_input("a.jsonl", 10, "land", Some((1, 2, 1.0)), 120);
        let b = render_input("day10.jsonl", 10, "land", Some((1, 2, 1.0)), 120);
        assert_eq!(a.find('['), Some(19), "{a}");
        assert_eq!(b.find('['), Some(20), "{b}");
    }

    #[test]
    fn the_footer_counts_inputs() {
        let line = render_footer(2, 6, Duration::from_millis(960), 10, 150);
        assert_eq!(
            line,
            "inbox              [======>             ]  2/6 inputs  2.1 inputs/s  eta 2s  1.0 s"
        );
        // Its bar lines up with the inputs'.
        let input = render_input("day3.jsonl", 10, "land", Some((1, 2, 1.0)), 150);
        assert_eq!(line.find('['), input.find('['));
        let line = render_footer(0, 6, Duration::from_millis(100), 10, 80);
        assert!(line.ends_with("]  0/6 inputs  0.1 s"), "{line}");
        for width in [20, 40, 80] {
            assert!(cols(&render_footer(3, 6, Duration::from_secs(2), 10, width)) < width);
        }
    }

    /// The bars drawn by indicatif through a [`Screen`] of a width the test sets.
    struct Drawn {
        width: Arc<std::sync::atomic::AtomicUsize>,
        out: Arc<Mutex<Vec<u8>>>,
        bars: Vec<ProgressBar>,
        _multi: MultiProgress,
    }

    impl Drawn {
        fn new(width: usize, lines: &[usize]) -> Drawn {
            use std::sync::atomic::AtomicUsize;
            let w = Arc::new(AtomicUsize::new(width));
            let out = Arc::new(Mutex::new(Vec::new()));
            let (w2, out2) = (w.clone(), out.clone());
            let screen = Screen::new(
                Box::new(move || (w2.load(std::sync::atomic::Ordering::Relaxed), 30)),
                Box::new(move |b| out2.lock().unwrap().extend_from_slice(b)),
            );
            let multi =
                MultiProgress::with_draw_target(ProgressDrawTarget::term_like(Box::new(screen)));
            let bars = lines
                .iter()
                .map(|&n| {
                    let bar = multi.add(ProgressBar::new(10));
                    bar.set_style(ProgressStyle::with_template("{msg}").unwrap());
                    bar.set_message("x".repeat(n));
                    bar
                })
                .collect();
            Drawn {
                width: w,
                out,
                bars,
                _multi: multi,
            }
        }

        /// Redraw every bar; what the terminal got since the last call.
        fn frame(&self) -> String {
            for b in &self.bars {
                b.tick();
            }
            String::from_utf8(std::mem::take(&mut *self.out.lock().unwrap())).unwrap()
        }
    }

    #[test]
    fn a_narrower_terminal_gets_the_rewrapped_bars_erased() {
        let d = Drawn::new(150, &[92, 92, 60]);
        let first = d.frame();
        assert!(first.contains(&"x".repeat(92)));
        // No padding to the right edge after the last line.
        assert!(first.ends_with(&"x".repeat(60)), "{first:?}");
        // Same width: up over the three lines' rows, as indicatif counts them.
        let same = d.frame();
        assert!(same.starts_with("\x1b[2A"), "{same:?}");
        assert!(!same.contains("\x1b[J"), "{same:?}");
        // 80 columns: the 92-column lines now take two rows each, five in all.
        d.width.store(80, std::sync::atomic::Ordering::Relaxed);
        let narrower = d.frame();
        assert!(narrower.starts_with("\x1b[4A\r\x1b[J"), "{narrower:?}");
        // Wider again: each line one row.
        d.width.store(200, std::sync::atomic::Ordering::Relaxed);
        let wider = d.frame();
        assert!(wider.starts_with("\x1b[2A\r\x1b[J"), "{wider:?}");
        assert_eq!(rows(0, 80), 1);
        assert_eq!(rows(80, 80), 1);
        assert_eq!(rows(81, 80), 2);
    }

    #[test]
    fn finished_inputs_and_totals_read_as_sentences() {
        assert_eq!(
            result_line(
                "day3.jsonl",
                10,
                "published",
                "594,136 rows",
                Duration::from_millis(700),
                150
            ),
            "day3.jsonl  published  594,136 rows  0.7 s"
        );
        assert_eq!(
            result_line(
                "a.jsonl",
                10,
                "skipped",
                "12 rows",
                Duration::from_millis(20),
                150
            ),
            "a.jsonl     skipped    12 rows  0.0 s"
        );
        let err = "x".repeat(200);
        let line = result_line("a.jsonl", 7, "failed", &err, Duration::ZERO, 80);
        assert!(cols(&line) < 80, "{line}");
        assert_eq!(
            totals_line(6, &[("published", 5), ("skipped", 1), ("failed", 0)], 594_136, Duration::from_secs(3)),
            "totals  6 inputs: 5 published, 1 skipped, 0 failed  594,136 rows published  3.0 s  2.0 inputs/s"
        );
    }

    #[test]
    fn the_totals_leave_out_zero_counts_and_fit_100_columns() {
        let five = |p, s, r, b, f| {
            [
                ("published", p),
                ("skipped", s),
                ("refused", r),
                ("busy", b),
                ("failed", f),
            ]
        };
        // A quiet night: the zeros but failed left out.
        assert_eq!(
            totals_line(6, &five(6, 0, 0, 0, 0), 594_136, Duration::from_secs(3)),
            "totals  6 inputs: 6 published, 0 failed  594,136 rows published  3.0 s  2.0 inputs/s"
        );
        // Past 100 columns "rows published" says "rows"; past it still, no rate.
        assert_eq!(
            totals_line(1_000, &five(990, 5, 2, 1, 2), 5_000_000, Duration::from_secs(725)),
            "totals  1,000 inputs: 990 published, 5 skipped, 2 refused, 1 busy, 2 failed  5,000,000 rows  12m 05s"
        );
        assert_eq!(
            totals_line(1_000, &five(996, 0, 2, 0, 2), 5_000_000, Duration::from_secs(725)),
            "totals  1,000 inputs: 996 published, 2 refused, 2 failed  5,000,000 rows  12m 05s  1.4 inputs/s"
        );
        let line = totals_line(
            1_000,
            &five(990, 5, 2, 1, 2),
            5_000_000,
            Duration::from_secs(725),
        );
        assert!(cols(&line) <= 100, "{} columns: {line}", cols(&line));
    }
}
