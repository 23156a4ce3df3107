//! The S3 test servers: SDK configurations, admin clients and fresh buckets built
//! from the `LANDING_TEST_*` variables that `scripts/test-servers` exports. A missing
//! variable fails the test (it never skips): the suite is only meaningful against
//! real servers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::Client;
use landing_store::s3::S3Options;

/// An S3-compatible server started by `scripts/test-servers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// SeaweedFS: on-disk, honours copy conditions.
    Seaweed,
    /// moto: in memory, ignores copy conditions, dates every upload 2010.
    Moto,
    /// LocalStack: a failed conditional CopyObject answers 412 but corrupts the
    /// destination.
    Localstack,
}

impl Server {
    pub fn name(self) -> &'static str {
        match self {
            Server::Seaweed => "seaweed",
            Server::Moto => "moto",
            Server::Localstack => "localstack",
        }
    }

    fn var(self, what: &str) -> String {
        let name = format!("LANDING_TEST_{}_{what}", self.name().to_uppercase());
        std::env::var(&name).unwrap_or_else(|_| {
            panic!("{name} not set: run the tests through scripts/test-servers")
        })
    }

    fn endpoint(self) -> String {
        self.var("ENDPOINT")
    }

    /// SDK configuration for this server: its endpoint and static credentials, region
    /// `us-east-1`; everything else (checksum settings included) from the environment.
    pub async fn sdk_config(self) -> SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(self.endpoint())
            .region(Region::from_static("us-east-1"))
            .credentials_provider(Credentials::new(
                self.var("ACCESS_KEY"),
                self.var("SECRET_KEY"),
                None,
                None,
                "landing-test",
            ))
            .load()
            .await
    }

    /// A fresh, uniquely named bucket for `test`, and a raw client (path-style) to
    /// inspect it with.
    pub async fn fresh_bucket(self, sdk: &SdkConfig, test: &str) -> (Client, String) {
        // Response checksums are not validated: the checks compare the bytes they
        // read with what they expect, and LocalStack keeps a stale CRC32 on the
        // copy-fence probe's target after the conditional CopyObject that replaces it.
        let conf = aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(true)
            .response_checksum_validation(
                aws_sdk_s3::config::ResponseChecksumValidation::WhenRequired,
            )
            .build();
        let client = Client::from_conf(conf);
        let bucket = unique_bucket(test);
        client
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "create bucket {bucket} on {} ({}): {}",
                    self.name(),
                    self.endpoint(),
                    aws_sdk_s3::error::DisplayErrorContext(e)
                )
            });
        (client, bucket)
    }
}

/// A bucket name unique within this machine: `conf-<test>-<nanos>-<pid>-<n>`, cut to
/// S3's 63-character limit and to its alphabet (lowercase letters, digits, `-`).
fn unique_bucket(test: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let suffix = format!("-{nanos:x}-{}-{n}", std::process::id());
    let mut stem: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    stem.truncate(63 - "conf-".len() - suffix.len());
    let stem = stem.trim_matches('-');
    format!("conf-{stem}{suffix}")
}

/// S3 settings for tests: path-style, the smallest part S3 allows (so multi-part
/// paths run on small data), modest timeouts.
pub fn test_s3_config() -> S3Options {
    S3Options {
        force_path_style: true,
        part_size: 5 << 20,
        upload_concurrency: 2,
        max_attempts: 3,
        operation_timeout: Duration::from_secs(120),
        read_timeout: Duration::from_secs(30),
        ..S3Options::default()
    }
}
