//! When the bars are drawn (`--progress`, `-q`).

/// When to show a progress bar (`--progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Auto,
    Always,
    Never,
    /// `-q`: no bars and no line per input; an inbox run still says its totals on a
    /// terminal. Not a `--progress` value.
    Quiet,
}

impl Mode {
    /// The modes `--progress` takes, in the order it lists them (`Quiet` is `-q`'s).
    pub const CHOICES: [Mode; 3] = [Mode::Auto, Mode::Always, Mode::Never];

    /// The name `--progress` takes and `--dry-run` prints.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Always => "always",
            Mode::Never => "never",
            Mode::Quiet => "quiet",
        }
    }
}

/// A `--progress` value: one of [`Mode::CHOICES`].
impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Mode::CHOICES
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown progress mode {s:?}"))
    }
}
