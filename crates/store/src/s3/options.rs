//! The S3 backend's options, with their defaults defined once: the command line
//! (`cli::args::S3Args`) shows and applies the constants in [`defaults`], and
//! [`S3Options::default`] is built from the same constants.

use std::time::Duration;

/// The default of every S3 option, in the units of its flag.
pub mod defaults {
    /// `--s3-part-size-mib`.
    pub const PART_SIZE_MIB: u64 = 16;
    /// `--s3-upload-concurrency`.
    pub const UPLOAD_CONCURRENCY: usize = 4;
    /// `--s3-copy-threshold` (S3 allows at most 5 GiB in one CopyObject).
    pub const COPY_THRESHOLD: u64 = 5 << 30;
    /// `--s3-max-attempts`.
    pub const MAX_ATTEMPTS: u32 = 5;
    /// `--s3-operation-timeout`, seconds.
    pub const OPERATION_TIMEOUT: u64 = 300;
    /// `--s3-attempt-timeout`, seconds.
    pub const ATTEMPT_TIMEOUT: u64 = 120;
    /// `--s3-read-timeout`, seconds.
    pub const READ_TIMEOUT: u64 = 60;
    /// `--s3-conditional-copy`.
    pub const CONDITIONAL_COPY: &str = "auto";
    /// Where staged outputs live under the store's root (not a flag: readers' grants
    /// and the bucket's lifecycle rules name it).
    pub const STAGING_PREFIX: &str = "staging/";
}

/// The smallest and largest part size S3 accepts, in MiB (all parts but the last).
pub const PART_SIZE_MIB_RANGE: std::ops::RangeInclusive<u64> = 5..=5 * 1024;

/// The SDK's checksum knobs: several S3-compatible servers mishandle the CRC32
/// checksums aws-sdk-s3 adds by default since January 2025.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumMode {
    WhenSupported,
    WhenRequired,
}

impl ChecksumMode {
    /// Every mode, in the order the checksum flags list them.
    pub const ALL: [ChecksumMode; 2] = [ChecksumMode::WhenSupported, ChecksumMode::WhenRequired];

    /// The SDK's spelling (`when_supported`), as in AWS_REQUEST_CHECKSUM_CALCULATION:
    /// what the checksum flags list and `--dry-run` prints.
    pub fn name(self) -> &'static str {
        match self {
            ChecksumMode::WhenSupported => "when_supported",
            ChecksumMode::WhenRequired => "when_required",
        }
    }

    /// The name with hyphens, as every other flag's values are spelled; accepted too.
    pub fn alias(self) -> &'static str {
        match self {
            ChecksumMode::WhenSupported => "when-supported",
            ChecksumMode::WhenRequired => "when-required",
        }
    }
}

/// A mode by its name or its alias.
impl std::str::FromStr for ChecksumMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ChecksumMode::ALL
            .into_iter()
            .find(|m| m.name() == s || m.alias() == s)
            .ok_or_else(|| format!("unknown checksum mode {s:?}"))
    }
}

/// Whether promotions use copy destination conditions (`--s3-conditional-copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionalCopy {
    Auto,
    On,
    Off,
}

impl ConditionalCopy {
    /// Every choice, in the order `--s3-conditional-copy` lists them.
    pub const ALL: [ConditionalCopy; 3] = [
        ConditionalCopy::Auto,
        ConditionalCopy::On,
        ConditionalCopy::Off,
    ];

    /// The name `--s3-conditional-copy` takes and `--dry-run` prints.
    pub fn name(self) -> &'static str {
        match self {
            ConditionalCopy::Auto => "auto",
            ConditionalCopy::On => "on",
            ConditionalCopy::Off => "off",
        }
    }
}

impl std::str::FromStr for ConditionalCopy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ConditionalCopy::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown conditional copy mode {s:?}"))
    }
}

/// Validated S3 settings; ignored by local stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Options {
    pub force_path_style: bool,
    pub part_size: usize,
    pub upload_concurrency: usize,
    pub copy_threshold: u64,
    pub max_attempts: u32,
    pub operation_timeout: Duration,
    pub attempt_timeout: Duration,
    pub conditional_copy: ConditionalCopy,
    pub read_timeout: Duration,
    pub request_checksum: Option<ChecksumMode>,
    pub response_checksum: Option<ChecksumMode>,
    /// Prefix of per-run staging folders, relative to the store's root.
    pub staging_prefix: String,
}

impl Default for S3Options {
    fn default() -> Self {
        use defaults::*;
        S3Options {
            force_path_style: false,
            part_size: (PART_SIZE_MIB << 20) as usize,
            upload_concurrency: UPLOAD_CONCURRENCY,
            copy_threshold: COPY_THRESHOLD,
            max_attempts: MAX_ATTEMPTS,
            operation_timeout: Duration::from_secs(OPERATION_TIMEOUT),
            attempt_timeout: Duration::from_secs(ATTEMPT_TIMEOUT),
            conditional_copy: CONDITIONAL_COPY
                .parse()
                .expect("the default is one of the values"),
            read_timeout: Duration::from_secs(READ_TIMEOUT),
            request_checksum: None,
            response_checksum: None,
            staging_prefix: STAGING_PREFIX.to_owned(),
        }
    }
}

impl S3Options {
    /// These settings as `landing run` flags, so a child run (the drill's) talks to the
    /// store exactly as its parent does. Every setting a flag can carry is here; the
    /// unit test parses the flags back and compares whole structs.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "--s3-part-size-mib".to_owned(),
            (self.part_size >> 20).to_string(),
            "--s3-upload-concurrency".to_owned(),
            self.upload_concurrency.to_string(),
            "--s3-copy-threshold".to_owned(),
            self.copy_threshold.to_string(),
            "--s3-max-attempts".to_owned(),
            self.max_attempts.to_string(),
            "--s3-read-timeout".to_owned(),
            self.read_timeout.as_secs().to_string(),
            "--s3-operation-timeout".to_owned(),
            self.operation_timeout.as_secs().to_string(),
            "--s3-attempt-timeout".to_owned(),
            self.attempt_timeout.as_secs().to_string(),
            "--s3-conditional-copy".to_owned(),
            self.conditional_copy.name().to_owned(),
        ];
        if self.force_path_style {
            args.push("--s3-force-path-style".to_owned());
        }
        for (flag, mode) in [
            ("--s3-request-checksum", self.request_checksum),
            ("--s3-response-checksum", self.response_checksum),
        ] {
            if let Some(mode) = mode {
                args.extend([flag.to_owned(), mode.name().to_owned()]);
            }
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_modes_are_spelled_as_the_sdk_spells_them() {
        assert_eq!(ChecksumMode::WhenSupported.name(), "when_supported");
        assert_eq!(ChecksumMode::WhenRequired.name(), "when_required");
        assert_eq!(ChecksumMode::WhenSupported.alias(), "when-supported");
        assert_eq!(ChecksumMode::WhenRequired.alias(), "when-required");
        for m in ChecksumMode::ALL {
            assert_eq!(m.name().parse(), Ok(m));
            assert_eq!(m.alias().parse(), Ok(m));
        }
        assert!("when".parse::<ChecksumMode>().is_err());
    }

    #[test]
    fn conditional_copy_is_spelled_as_the_flag_takes_it() {
        assert_eq!(
            ConditionalCopy::ALL.map(ConditionalCopy::name),
            ["auto", "on", "off"]
        );
        for c in ConditionalCopy::ALL {
            assert_eq!(c.name().parse(), Ok(c));
        }
        assert!("yes".parse::<ConditionalCopy>().is_err());
        assert_eq!(S3Options::default().conditional_copy, ConditionalCopy::Auto);
    }
}
