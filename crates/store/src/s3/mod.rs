//! The S3 backend: the run contract mapped onto S3 and S3-compatible servers.
//!
//! | contract step | S3 operations | file |
//! |---|---|---|
//! | read the input | one streaming `GetObject`, with a stall timeout on the body | `object.rs` |
//! | stage | `staging/<product>/<run id>/<name>`: held in memory up to one part; past it, `CreateMultipartUpload` and parts uploaded while the caller keeps writing | `upload.rs` |
//! | staging complete | an output within one part (or empty): one `PutObject`; else `CompleteMultipartUpload` | `upload.rs` |
//! | publish | `CopyObject` staging → `raw/…` with `If-Match: <raw ETag seen at the decision>` or `If-None-Match: *` (above `copy_threshold`: `UploadPartCopy` parts + a conditional `CompleteMultipartUpload`), then `HeadObject` to verify size and ETag | `copy.rs` |
//! | is the copy fenced? | a probe on scratch keys, once per store | `fence.rs` |
//! | checkpoint / lease | `PutObject` with `If-None-Match: *` or `If-Match: <etag>` | `object.rs` |
//! | clean up | `DeleteObject` on the staging key | `object.rs` |
//! | list, leftovers, sweep | `ListObjectsV2`; `ListMultipartUploads` + `AbortMultipartUpload`, `ListObjectsV2` + `DeleteObject` under the staging prefix | `list.rs` |
//!
//! Provider answers become the crate's [`Error`] in `error.rs`.
//!
//! Readers are never granted `staging/`, and a multipart upload is invisible until it
//! is completed, so nothing a reader can see changes before the copy; the copy is a
//! single atomic publish of the whole object.
//!
//! Checksums follow the SDK's `request_checksum_calculation` setting:
//! - `when_supported` (the SDK default): the staging upload names CRC32 in
//!   `CreateMultipartUpload`, each part carries its CRC32 (computed by the SDK, sent as
//!   a header because part bodies are in memory), and `CompleteMultipartUpload` lists
//!   every part's CRC32 as the server echoed it. The server validates each part and the
//!   composite checksum. (If Create names an algorithm, Complete must list every part's
//!   checksum; a server may reject per-part checksums when Create named none, which the
//!   SDK would send by default, so both ends name it.)
//!   `CopyObject` then asks for a CRC32 of the copy, so the published object carries a
//!   full-object checksum readers can validate (a server may otherwise copy the
//!   composite checksum without its `-N` suffix, which every SDK GET rejects as a
//!   mismatch).
//! - `when_required`: no checksum anywhere in the upload or the copy (none is required
//!   by `UploadPart` or `CopyObject`), for servers that mishandle them.
//!
//! The multipart copy used for very large promotions names no checksum algorithm:
//! `UploadPartCopy` carries no body, and Complete then needs no part checksums.
//!
//! Sweeps trust `Initiated` of `ListMultipartUploads` for the age of an upload; a
//! server that answers a fixed date there makes every incomplete upload look old.
//!
//! **Fencing a copy.** A copy's destination condition is what stops a late copy (a
//! killed run's request still executing on the server) from overwriting a newer
//! publish. Stores differ: AWS S3 honours it, some S3-compatible servers ignore it, and
//! some answer 412 but overwrite the destination's bytes anyway (docs/design.md,
//! "Which stores fence a copy", has the stores measured). So
//! [`Lake::fencing`] probes the store once per store value on two scratch keys in the
//! run's own staging (never `raw/`): a copy that must fail its condition, then a
//! read-back. [`Lake::promote`] takes the [`Fence`] that returned, so no promotion is
//! sent before the probe. Only a store that refused the copy *and* kept the bytes gets
//! conditional copies. Staging objects carry the run id as user metadata
//! (`x-amz-meta-landing-run-id`), which the copy keeps, so a 412 met by the SDK's retry
//! of our own landed copy is recognised as ours.
//!
//! Provider differences are normalised here: a false write condition is
//! [`Error::Precondition`] whether the server answers 412, 409
//! `ConditionalRequestConflict`, or 404 `NoSuchKey` (AWS, for `If-Match` on a missing
//! key; other servers answer 412).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{Region, RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::Client;
use bytes::Bytes;
use tokio::sync::OnceCell;

/// The staging subfolder of a run's second pass (`Slot::Second`).
const PASS2: &str = "pass2";

/// A request builder with `mode` as its `If-None-Match`/`If-Match` header, and the
/// condition it carries; `Err` for a version that is no ETag. A macro: the SDK's
/// builders share no trait for these.
macro_rules! conditioned {
    ($req:expr, $mode:expr) => {
        match $mode {
            $crate::PutMode::Overwrite => Ok(($req, $crate::s3::error::Cond::None)),
            $crate::PutMode::Create => {
                Ok(($req.if_none_match("*"), $crate::s3::error::Cond::IfAbsent))
            }
            $crate::PutMode::Update($crate::Version::ETag(etag)) => Ok((
                $req.if_match(etag.clone()),
                $crate::s3::error::Cond::IfMatch,
            )),
            $crate::PutMode::Update(v) => Err(format!("not an S3 version: {v:?}")),
        }
    };
}

mod copy;
mod error;
mod fence;
mod list;
mod object;
mod options;
mod upload;

pub use options::{defaults, ChecksumMode, ConditionalCopy, S3Options, PART_SIZE_MIB_RANGE};

use super::{
    Capabilities, CopyFence, Fence, Gate, Lake, Listing, ObjectMeta, ObjectReader, PutMode, Slot,
    Staged, Store, Sweep, SweepReport, Upload, Version,
};
use landing_error::{Error, Result};

/// User metadata naming the run that staged an object (kept by CopyObject).
const RUN_ID_META: &str = "landing-run-id";

/// User metadata holding a promotion's label ([`Staged::label`]), percent-encoded:
/// a header value carries printable ASCII only.
const LABEL_META: &str = "landing-label";

/// Escaped in a label's header value: controls and non-ASCII (always), `%` (so that
/// decoding is exact) and the space (servers trim it at either end).
const LABEL_ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%').add(b' ');

fn encode_label(label: &str) -> String {
    percent_encoding::utf8_percent_encode(label, LABEL_ESCAPED).to_string()
}

fn decode_label(value: &str) -> Option<String> {
    percent_encoding::percent_decode_str(value)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// A lake (or input) on S3: a bucket and a key prefix.
#[derive(Clone)]
pub struct S3Store {
    client: Client,
    bucket: String,
    /// Without leading or trailing `/`; may be empty.
    prefix: String,
    cfg: S3Options,
    /// Whether multipart uploads carry CRC32 part checksums (see the module doc).
    part_checksums: bool,
    /// Checked right before each write to a lease, checkpoint or published name.
    gate: Gate,
    /// The copy-fence probe's verdict for this store, once probed (see `fence.rs`).
    fence_verdict: Arc<OnceCell<CopyFence>>,
    /// Set once this store was seen to refuse a second create (see `fence.rs`).
    creates_exclusive: Arc<OnceCell<()>>,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("cfg", &self.cfg)
            .field("part_checksums", &self.part_checksums)
            .field("fence_verdict", &self.fence_verdict.get())
            .field("creates_exclusive", &self.creates_exclusive.get().is_some())
            .finish_non_exhaustive()
    }
}

impl S3Store {
    /// Build from the AWS standard chain (environment, profile, web identity), applying
    /// `cfg`. Without any configured region, `us-east-1` is assumed (what S3-compatible
    /// servers expect; AWS redirects are not followed either way). Callers open stores
    /// with [`crate::open`].
    pub(super) async fn from_env(bucket: &str, prefix: &str, cfg: &S3Options) -> Result<Self> {
        if bucket.is_empty() {
            return Err(Error::Config("an S3 location needs a bucket".into()));
        }
        let region = aws_config::meta::region::RegionProviderChain::default_provider()
            .or_else(Region::from_static("us-east-1"));
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(region)
            .load()
            .await;
        Ok(Self::from_sdk_config(&sdk, bucket, prefix, cfg))
    }

    /// Build from an explicit SDK configuration (tests pass an endpoint and static
    /// credentials), applying `cfg` on top of it.
    pub fn from_sdk_config(
        sdk: &aws_config::SdkConfig,
        bucket: &str,
        prefix: &str,
        cfg: &S3Options,
    ) -> Self {
        // The per-attempt bound is what limits how long one request can stay in flight
        // on the server; the lease TTL is validated against it (see config).
        let mut timeouts = TimeoutConfig::builder()
            .operation_timeout(cfg.operation_timeout)
            .operation_attempt_timeout(cfg.attempt_timeout);
        if let Some(existing) = sdk.timeout_config() {
            timeouts = timeouts.take_unset_from(existing.to_builder());
        }
        let mut builder = aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(cfg.force_path_style)
            .retry_config(RetryConfig::standard().with_max_attempts(cfg.max_attempts))
            .timeout_config(timeouts.build());
        if let Some(mode) = cfg.request_checksum {
            builder = builder.request_checksum_calculation(match mode {
                ChecksumMode::WhenSupported => RequestChecksumCalculation::WhenSupported,
                ChecksumMode::WhenRequired => RequestChecksumCalculation::WhenRequired,
            });
        }
        if let Some(mode) = cfg.response_checksum {
            builder = builder.response_checksum_validation(match mode {
                ChecksumMode::WhenSupported => ResponseChecksumValidation::WhenSupported,
                ChecksumMode::WhenRequired => ResponseChecksumValidation::WhenRequired,
            });
        }
        let conf = builder.build();
        let part_checksums = !matches!(
            conf.request_checksum_calculation(),
            Some(RequestChecksumCalculation::WhenRequired)
        );
        S3Store {
            client: Client::from_conf(conf),
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
            cfg: cfg.clone(),
            part_checksums,
            gate: Gate::default(),
            fence_verdict: Arc::default(),
            creates_exclusive: Arc::default(),
        }
    }

    /// The same store, checking `gate` right before every write (see [`Gate`]).
    pub fn with_gate(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }

    /// The SDK client (tests and tools use it for raw checks).
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The staging folder of `dest_key` (ending in `/`) and its name. Staging mirrors
    /// the destination's folder without its zone (`raw/progress/a.jsonl` →
    /// `staging/progress/`), so every output of one product is swept in one listing.
    fn staging_folder<'k>(&self, dest_key: &'k str) -> (String, &'k str) {
        let (dir, name) = dest_key.rsplit_once('/').unwrap_or(("", dest_key));
        let below_zone = dir.split_once('/').map_or("", |(_, rest)| rest);
        let folder = [self.cfg.staging_prefix.trim_matches('/'), below_zone]
            .iter()
            .filter(|p| !p.is_empty())
            .fold(String::new(), |acc, p| acc + p + "/");
        (folder, name)
    }

    /// Where `run_id` stages `dest_key`: `<staging folder><run id>/[<scratch>/]<name>`.
    fn staging_key(&self, dest_key: &str, run_id: &str, scratch: Option<&str>) -> String {
        let (folder, name) = self.staging_folder(dest_key);
        match scratch {
            Some(s) => format!("{folder}{run_id}/{s}/{name}"),
            None => format!("{folder}{run_id}/{name}"),
        }
    }

    /// The full object key of a store-relative key.
    fn full_key(&self, key: &str) -> String {
        join_key(&self.prefix, key)
    }

    /// The store-relative key of a full object key (`None` outside the prefix).
    fn relative_key<'a>(&self, full: &'a str) -> Option<&'a str> {
        if self.prefix.is_empty() {
            Some(full)
        } else {
            full.strip_prefix(self.prefix.as_str())?.strip_prefix('/')
        }
    }

    fn loc_full(&self, full_key: &str) -> String {
        format!("s3://{}/{}", self.bucket, full_key)
    }
}

/// Join a store prefix and a relative key.
fn join_key(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}/{key}")
    }
}

/// `s3://<bucket>[/<prefix>]`: the root a key's location starts with.
impl std::fmt::Display for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.prefix.as_str() {
            "" => write!(f, "s3://{}", self.bucket),
            prefix => write!(f, "s3://{}/{prefix}", self.bucket),
        }
    }
}

/// The object primitives, each in the file of its concern.
#[async_trait]
impl Store for S3Store {
    async fn list(&self, prefix: &str) -> Result<Listing> {
        self.list_prefix(prefix).await
    }

    async fn read(&self, key: &str, offset: u64) -> Result<ObjectReader> {
        self.read_object(key, offset).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        self.head_object(key).await
    }

    async fn put_small(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Version> {
        self.put_small_object(key, body, &mode).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.delete_object(key).await
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            instant_takeover: false,
            in_flight: Some(self.cfg.attempt_timeout),
            multipart: true,
        }
    }
}

/// The run's staging under `staging/` (`upload.rs`), promoted by a fenced copy
/// (`copy.rs`, `fence.rs`), swept with its incomplete uploads (`list.rs`).
#[async_trait]
impl Lake for S3Store {
    async fn stage(&self, dest_key: &str, run_id: &str, slot: Slot) -> Result<Box<dyn Upload>> {
        // A second slot sits under the run's own staging folder, so its sweeps take it
        // like the first.
        let scratch = (slot == Slot::Second).then_some(PASS2);
        self.start_upload(dest_key, run_id, scratch).await
    }

    async fn promote(&self, staged: &Staged, mode: &PutMode, fence: Fence) -> Result<ObjectMeta> {
        self.promote_staged(staged, mode, fence).await
    }

    async fn fencing(&self, dest_key: &str, run_id: &str) -> Result<Fence> {
        self.fence(dest_key, run_id).await
    }

    async fn labelled(&self, key: &str) -> Result<Option<(ObjectMeta, Option<String>)>> {
        self.head_labelled(key).await
    }

    async fn unsettled(&self, folders: &[String]) -> Result<Option<Vec<String>>> {
        let keys = self.staged_keys(folders).await?;
        let names = keys.iter().filter_map(|k| k.rsplit('/').next());
        Ok(Some(names.map(str::to_owned).collect()))
    }

    fn with_run_gate(&self, gate: Gate) -> Arc<dyn Lake> {
        Arc::new(self.clone().with_gate(gate))
    }

    async fn leftovers(&self, folders: &[String]) -> Result<Vec<String>> {
        self.staging_leftovers(folders).await
    }

    async fn sweep(&self, dest_keys: &[String], run_id: &str, which: Sweep) -> Result<SweepReport> {
        self.sweep_staging(dest_keys, run_id, which).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_join_under_the_prefix() {
        assert_eq!(join_key("", "raw/a"), "raw/a");
        assert_eq!(join_key("lake/x", "raw/a"), "lake/x/raw/a");
    }
}
