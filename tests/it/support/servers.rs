//! S3 test servers as the tests see them: SDK configurations, admin clients and fresh
//! buckets built from the `LANDING_TEST_*` variables that `scripts/test-servers`
//! exports. A missing variable fails the test (it never skips): the suite is only
//! meaningful against real servers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::Client;

/// An S3-compatible server started by `scripts/test-servers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// SeaweedFS 4.48: on-disk, per-prefix identities, honours copy conditions.
    Seaweed,
    /// moto 5.2.5: in memory, AWS-like error codes.
    Moto,
    /// LocalStack 4.14.0 (community, S3 only, host mode): what users run locally.
    /// Never send it a conditional CopyObject whose destination bytes matter: a failed
    /// condition answers 412 but corrupts the destination.
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

    pub fn endpoint(self) -> String {
        self.var("ENDPOINT")
    }

    pub fn access_key(self) -> String {
        self.var("ACCESS_KEY")
    }

    pub fn secret_key(self) -> String {
        self.var("SECRET_KEY")
    }

    /// SDK configuration for this server: its endpoint and static credentials, region
    /// `us-east-1`; everything else (checksum settings included) from the environment,
    /// so `AWS_REQUEST_CHECKSUM_CALCULATION=when_required` exercises that mode.
    pub async fn sdk_config(self) -> SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(self.endpoint())
            .region(Region::from_static("us-east-1"))
            .credentials_provider(Credentials::new(
                self.access_key(),
                self.secret_key(),
                None,
                None,
                "landing-test",
            ))
            .load()
            .await
    }

    /// A raw client for setting up and inspecting buckets (path-style addressing).
    pub async fn admin_client(self) -> Client {
        let sdk = self.sdk_config().await;
        // Response checksums are not validated: the tests compare the bytes they read
        // with what they expect, and LocalStack keeps a stale CRC32 on the copy-fence
        // probe's target after the conditional CopyObject that replaces it, so every
        // read of that leftover would fail the SDK's check.
        let conf = aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .response_checksum_validation(
                aws_sdk_s3::config::ResponseChecksumValidation::WhenRequired,
            )
            .build();
        Client::from_conf(conf)
    }

    /// Create a fresh, uniquely named bucket for `test`; returns the admin client and
    /// the bucket name.
    pub async fn fresh_bucket(self, test: &str) -> (Client, String) {
        let client = self.admin_client().await;
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

    /// Environment for running the `landing` binary against this server.
    pub fn process_env(self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", self.access_key()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_key()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("LANDING_S3_FORCE_PATH_STYLE", "true".to_owned()),
        ]
    }
}

/// A bucket name unique within this machine: `conf-<test>-<nanos>-<n>`, cut to S3's
/// 63-character limit and to its alphabet (lowercase letters, digits, `-`).
pub fn unique_bucket(test: &str) -> String {
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
