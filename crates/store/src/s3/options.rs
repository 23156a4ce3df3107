//! The S3 backend's options, with their defaults defined once: the command line
//! (`cli::args::S3Args`) shows and applies the constants in [`defaults`], and
//! [`S3Options::default`] is built from the same constants.

use std::time::Duration;

use clap::ValueEnum;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ChecksumMode {
    /// The SDK's spelling (`when_supported`), as in AWS_REQUEST_CHECKSUM_CALCULATION.
    #[value(name = "when_supported", alias = "when-supported")]
    WhenSupported,
    #[value(name = "when_required", alias = "when-required")]
    WhenRequired,
}

/// Whether promotions use copy destination conditions (`--s3-conditional-copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConditionalCopy {
    Auto,
    On,
    Off,
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
            conditional_copy: ConditionalCopy::from_str(CONDITIONAL_COPY, false)
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
        let name = |v: &dyn Fn() -> Option<clap::builder::PossibleValue>| {
            v().map(|p| p.get_name().to_owned()).unwrap_or_default()
        };
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
            name(&|| self.conditional_copy.to_possible_value()),
        ];
        if self.force_path_style {
            args.push("--s3-force-path-style".to_owned());
        }
        for (flag, mode) in [
            ("--s3-request-checksum", self.request_checksum),
            ("--s3-response-checksum", self.response_checksum),
        ] {
            if let Some(mode) = mode {
                args.extend([flag.to_owned(), name(&|| mode.to_possible_value())]);
            }
        }
        args
    }
}
