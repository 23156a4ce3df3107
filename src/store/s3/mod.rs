//! The S3 backend: the run contract mapped onto S3 (and S3-compatible servers:
//! SeaweedFS, MinIO, LocalStack, moto).
//!
//! | contract step | S3 operations |
//! |---|---|
//! | read the input | one streaming `GetObject`, with a stall timeout on the body |
//! | stage | `CreateMultipartUpload` on `staging/<product>/<run id>/<name>`, parts uploaded while the caller keeps writing |
//! | staging complete | `CompleteMultipartUpload` (an empty output is a plain empty `PutObject`) |
//! | publish | `CopyObject` staging → `raw/…` with `If-Match: <raw ETag seen at the decision>` or `If-None-Match: *` (above `copy_threshold`: `UploadPartCopy` parts + a conditional `CompleteMultipartUpload`), then `HeadObject` to verify size and ETag |
//! | checkpoint / lease | `PutObject` with `If-None-Match: *` or `If-Match: <etag>` |
//! | clean up | `DeleteObject` on the staging key |
//! | sweep | `ListMultipartUploads` + `AbortMultipartUpload`, `ListObjectsV2` + `DeleteObject` under the staging prefix |
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
//!   checksum; LocalStack rejects per-part checksums when Create named none, which the
//!   SDK would send by default, so both ends name it.)
//!   `CopyObject` then asks for a CRC32 of the copy, so the published object carries a
//!   full-object checksum readers can validate (moto would otherwise copy the composite
//!   checksum without its `-N` suffix, which every SDK GET rejects as a mismatch).
//! - `when_required`: no checksum anywhere in the upload or the copy (none is required
//!   by `UploadPart` or `CopyObject`), for servers that mishandle them.
//!
//! The multipart copy used for very large promotions names no checksum algorithm:
//! `UploadPartCopy` carries no body, and Complete then needs no part checksums.
//!
//! Sweeps trust `Initiated` of `ListMultipartUploads` for the age of an upload; moto
//! answers a fixed 2010 date there, so on moto every incomplete upload looks old.
//!
//! **Fencing a copy.** A copy's destination condition is what stops a late copy (a
//! killed run's request still executing on the server) from overwriting a newer
//! publish. Stores differ: AWS S3 and SeaweedFS 4.48 honour it, moto 5.2.5 ignores it,
//! and LocalStack 4.14.0 answers 412 but overwrites the destination's bytes anyway. So
//! [`Store::fencing`] probes the store once per process on two scratch keys in the
//! run's own staging (never `raw/`): a copy that must fail its condition, then a
//! read-back. A promotion in a process that never probed is sent unconditional.
//! Only a store that refused the copy *and* kept the bytes gets conditional copies.
//! Staging objects carry the run id as user metadata (`x-amz-meta-landing-run-id`),
//! which the copy keeps, so a 412 met by the SDK's retry of our own landed copy is
//! recognised as ours.
//!
//! Provider differences are normalised here: a false write condition is
//! [`Error::Precondition`] whether the server answers 412, 409
//! `ConditionalRequestConflict`, or 404 `NoSuchKey` (AWS and moto, for `If-Match` on a
//! missing key; SeaweedFS answers 412).

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{Region, RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use bytes::{Bytes, BytesMut};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::task::JoinSet;

mod options;

pub use options::{defaults, ChecksumMode, ConditionalCopy, S3Options, PART_SIZE_MIB_RANGE};

use super::{
    Condition, CopyFence, Expect, Gate, Listed, Listing, ObjectMeta, ObjectReader, Staged, Store,
    Sweep, SweepReport, Upload, Version, Versioned,
};
use crate::error::{Error, Result};

/// S3's smallest allowed part, for all parts but the last.
const MIN_PART: u64 = 5 << 20;
/// S3's largest allowed part.
const MAX_PART: u64 = 5 << 30;
/// S3's largest part number.
const MAX_PARTS: u64 = 10_000;

/// Characters kept as they are in a percent-encoded key segment (RFC 3986 unreserved).
const KEY_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A request builder with `cond` as its `If-None-Match`/`If-Match` header, and the
/// condition it carries. A macro: the SDK's builders share no trait for these.
macro_rules! conditioned {
    ($req:expr, $cond:expr) => {
        match $cond {
            Condition::None => ($req, Cond::None),
            Condition::IfAbsent => ($req.if_none_match("*"), Cond::IfAbsent),
            Condition::IfMatch(etag) => ($req.if_match(etag.clone()), Cond::IfMatch),
        }
    };
}

/// How one read of a small object ended: whole, or with its body failed after the
/// response head (which the SDK does not retry).
enum SmallRead {
    Done(Option<Versioned>),
    BodyFailed(Error),
}

/// User metadata naming the run that staged an object (kept by CopyObject).
const RUN_ID_META: &str = "landing-run-id";

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
}

/// The probe's verdict per bucket, taken once per process: every input of an inbox
/// run lands in the same lake.
static FENCES: std::sync::Mutex<Vec<(String, CopyFence)>> = std::sync::Mutex::new(Vec::new());

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("cfg", &self.cfg)
            .field("part_checksums", &self.part_checksums)
            .finish_non_exhaustive()
    }
}

impl S3Store {
    /// Build from the AWS standard chain (environment, profile, web identity), applying
    /// `cfg`. Without any configured region, `us-east-1` is assumed (what S3-compatible
    /// servers expect; AWS redirects are not followed either way).
    pub async fn from_env(bucket: &str, prefix: &str, cfg: &S3Options) -> Result<Self> {
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
        }
    }

    /// The same store, checking `gate` right before every write (see [`Gate`]).
    pub fn with_gate(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }

    /// One GetObject of a small object, read whole; a failed body is told apart.
    async fn get_small_once(&self, key: &str) -> Result<SmallRead> {
        let full = self.full_key(key);
        let loc = self.loc_full(&full);
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&full)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                return match map_err("GetObject", &loc, e, Cond::None) {
                    Error::NotFound { .. } => Ok(SmallRead::Done(None)),
                    e => Err(e),
                }
            }
        };
        let version = out
            .e_tag()
            .ok_or_else(|| protocol("GetObject", &loc, "answer carries no ETag"))?
            .to_owned();
        match out.body.collect().await {
            Ok(body) => Ok(SmallRead::Done(Some(Versioned {
                bytes: body.into_bytes(),
                version,
            }))),
            Err(e) => Ok(SmallRead::BodyFailed(Error::store("GetObject", &loc, e))),
        }
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

    /// The SDK client (tests and tools use it for raw checks).
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
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

    /// Copy a whole object with one `CopyObject` (at most 5 GiB); returns the new ETag.
    async fn copy_whole(&self, src: &str, dst: &str, cond: &Condition) -> Result<String> {
        let loc = self.loc_full(dst);
        let req = self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(dst)
            .copy_source(copy_source(&self.bucket, src));
        let (mut req, c) = conditioned!(req, cond);
        if self.part_checksums {
            // Ask for a checksum of the copy: AWS and moto then store a full-object
            // CRC32 that readers can validate. Without it moto copies the staging
            // object's composite CRC32 without its `-N` suffix, and every SDK GET of the
            // published object fails with a checksum mismatch.
            req = req.checksum_algorithm(ChecksumAlgorithm::Crc32);
        }
        let out = req
            .send()
            .await
            .map_err(|e| map_err("CopyObject", &loc, e, c))?;
        // A 200 with an <Error> body is mapped to an error by the SDK; a result without
        // an ETag is not a success either.
        out.copy_object_result()
            .and_then(|r| r.e_tag())
            .map(str::to_owned)
            .ok_or_else(|| {
                protocol(
                    "CopyObject",
                    &loc,
                    "answer carries no CopyObjectResult ETag",
                )
            })
    }

    /// Copy with `UploadPartCopy` parts into a multipart upload on `dst` (required above
    /// 5 GiB); returns the new ETag. A failed copy aborts its upload.
    async fn copy_multipart(
        &self,
        src: &str,
        dst: &str,
        size: u64,
        run_id: &str,
        cond: &Condition,
    ) -> Result<String> {
        let loc = self.loc_full(dst);
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(dst)
            .metadata(RUN_ID_META, run_id)
            .send()
            .await
            .map_err(|e| map_err("CreateMultipartUpload", &loc, e, Cond::None))?;
        let upload_id = created
            .upload_id()
            .ok_or_else(|| protocol("CreateMultipartUpload", &loc, "answer carries no UploadId"))?
            .to_owned();
        let result = self.copy_parts(src, dst, size, &upload_id, cond).await;
        if result.is_err() {
            if let Err(e) = abort_upload(&self.client, &self.bucket, dst, &upload_id, &loc).await {
                tracing::warn!(location = %loc, error = %e, "could not abort the failed multipart copy; a sweep or lifecycle rule will");
            }
        }
        result
    }

    async fn copy_parts(
        &self,
        src: &str,
        dst: &str,
        size: u64,
        upload_id: &str,
        cond: &Condition,
    ) -> Result<String> {
        let loc = self.loc_full(dst);
        let part = copy_part_size(size, self.cfg.part_size as u64);
        let source = copy_source(&self.bucket, src);
        let mut tasks: JoinSet<Result<CompletedPart>> = JoinSet::new();
        let mut parts = Vec::new();
        let mut start = 0u64;
        let mut number = 0i32;
        while start < size {
            let end = (start + part).min(size) - 1;
            number += 1;
            while tasks.len() >= self.cfg.upload_concurrency.max(1) {
                parts.push(join_part(&mut tasks, "UploadPartCopy", &loc).await?);
            }
            let req = self
                .client
                .upload_part_copy()
                .bucket(&self.bucket)
                .key(dst)
                .upload_id(upload_id)
                .part_number(number)
                .copy_source(&source)
                .copy_source_range(format!("bytes={start}-{end}"));
            let loc = loc.clone();
            tasks.spawn(async move {
                let out = req
                    .send()
                    .await
                    .map_err(|e| map_err("UploadPartCopy", &loc, e, Cond::None))?;
                let etag = out
                    .copy_part_result()
                    .and_then(|r| r.e_tag())
                    .ok_or_else(|| {
                        protocol(
                            "UploadPartCopy",
                            &loc,
                            "answer carries no CopyPartResult ETag",
                        )
                    })?;
                Ok(CompletedPart::builder()
                    .part_number(number)
                    .e_tag(etag)
                    .build())
            });
            start = end + 1;
        }
        while !tasks.is_empty() {
            parts.push(join_part(&mut tasks, "UploadPartCopy", &loc).await?);
        }
        complete_upload(
            &self.client,
            &self.bucket,
            dst,
            upload_id,
            parts,
            &loc,
            cond,
        )
        .await
    }

    /// Abort the incomplete uploads under `prefix` that `eligible` accepts.
    async fn sweep_uploads(
        &self,
        prefix: &str,
        eligible: &(dyn Fn(&str, Option<&aws_smithy_types::DateTime>) -> bool + Sync),
    ) -> Result<u64> {
        let mut aborted = 0;
        for upload in self.uploads(prefix).await? {
            if eligible(&upload.key, upload.initiated.as_ref()) {
                let uloc = self.loc_full(&upload.key);
                abort_upload(&self.client, &self.bucket, &upload.key, &upload.id, &uloc).await?;
                tracing::info!(location = %uloc, upload_id = %upload.id, "aborted a leftover multipart upload");
                aborted += 1;
            }
        }
        Ok(aborted)
    }

    /// The incomplete multipart uploads under `prefix` (a full key prefix), every
    /// page of `ListMultipartUploads` followed.
    async fn uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>> {
        let loc = self.loc_full(prefix);
        let mut found = Vec::new();
        let mut key_marker: Option<String> = None;
        let mut id_marker: Option<String> = None;
        loop {
            let out = self
                .client
                .list_multipart_uploads()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_key_marker(key_marker.clone())
                .set_upload_id_marker(id_marker.clone())
                .send()
                .await
                .map_err(|e| map_err("ListMultipartUploads", &loc, e, Cond::None))?;
            for upload in out.uploads() {
                let (Some(key), Some(id)) = (upload.key(), upload.upload_id()) else {
                    continue;
                };
                found.push(PendingUpload {
                    key: key.to_owned(),
                    id: id.to_owned(),
                    initiated: upload.initiated().copied(),
                });
            }
            if !out.is_truncated().unwrap_or(false) {
                break;
            }
            let next = (
                out.next_key_marker().map(str::to_owned),
                out.next_upload_id_marker().map(str::to_owned),
            );
            // Guard against servers that say "truncated" without moving the markers.
            if next.0.is_none() || next == (key_marker.clone(), id_marker.clone()) {
                break;
            }
            (key_marker, id_marker) = next;
        }
        Ok(found)
    }

    /// Delete the objects under `prefix` that `eligible` accepts.
    async fn sweep_objects(
        &self,
        prefix: &str,
        eligible: &(dyn Fn(&str, Option<&aws_smithy_types::DateTime>) -> bool + Sync),
    ) -> Result<u64> {
        let loc = self.loc_full(prefix);
        let mut deleted = 0;
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| map_err("ListObjectsV2", &loc, e, Cond::None))?;
            for object in page.contents() {
                let Some(key) = object.key() else { continue };
                if eligible(key, object.last_modified()) {
                    let oloc = self.loc_full(key);
                    self.client
                        .delete_object()
                        .bucket(&self.bucket)
                        .key(key)
                        .send()
                        .await
                        .map_err(|e| map_err("DeleteObject", &oloc, e, Cond::None))?;
                    tracing::info!(location = %oloc, "deleted a leftover staging object");
                    deleted += 1;
                }
            }
        }
        Ok(deleted)
    }
}

#[async_trait]
impl Store for S3Store {
    fn location(&self, key: &str) -> String {
        self.loc_full(&self.full_key(key))
    }

    async fn list(&self, prefix: &str) -> Result<Listing> {
        self.list_prefix(prefix).await
    }

    async fn read(&self, key: &str) -> Result<ObjectReader> {
        let full = self.full_key(key);
        let loc = self.loc_full(&full);
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&full)
            .send()
            .await
            .map_err(|e| map_err("GetObject", &loc, e, Cond::None))?;
        let size = content_length(out.content_length(), "GetObject", &loc)?;
        let body = StallTimeout::new(
            Box::pin(out.body.into_async_read()),
            self.cfg.read_timeout,
            loc,
        );
        Ok(ObjectReader {
            body: Box::new(body),
            size,
        })
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        let full = self.full_key(key);
        let loc = self.loc_full(&full);
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(&full)
            .send()
            .await
        {
            Ok(out) => Ok(Some(ObjectMeta {
                size: content_length(out.content_length(), "HeadObject", &loc)?,
                version: Version::ETag(
                    out.e_tag()
                        .ok_or_else(|| protocol("HeadObject", &loc, "answer carries no ETag"))?
                        .to_owned(),
                ),
            })),
            Err(e) => match map_err("HeadObject", &loc, e, Cond::None) {
                Error::NotFound { .. } => Ok(None),
                e => Err(e),
            },
        }
    }

    async fn get_small(&self, key: &str) -> Result<Option<Versioned>> {
        // The SDK retries a request until its response head arrives; a body that then
        // stalls (its stalled-stream protection) or breaks is not retried. Seen on
        // LocalStack under heavy load with a lease body. Small objects are read whole,
        // so the read is simply repeated, as many times as a request may be tried.
        let mut attempt = 1;
        loop {
            match self.get_small_once(key).await? {
                SmallRead::Done(v) => return Ok(v),
                SmallRead::BodyFailed(e) if attempt < self.cfg.max_attempts => {
                    tracing::debug!(error = %e, attempt, "small object body failed; reading it again");
                    attempt += 1;
                }
                SmallRead::BodyFailed(e) => return Err(e),
            }
        }
    }

    async fn put_small(&self, key: &str, body: Bytes, cond: Condition) -> Result<String> {
        let full = self.full_key(key);
        let loc = self.loc_full(&full);
        self.gate.before_write(key, &loc)?;
        let req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(&full)
            .content_length(body.len() as i64)
            .body(ByteStream::from(body));
        let (req, c) = conditioned!(req, cond);
        let out = req
            .send()
            .await
            .map_err(|e| map_err("PutObject", &loc, e, c))?;
        out.e_tag()
            .map(str::to_owned)
            .ok_or_else(|| protocol("PutObject", &loc, "answer carries no ETag"))
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let full = self.full_key(key);
        let loc = self.loc_full(&full);
        match self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(&full)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => match map_err("DeleteObject", &loc, e, Cond::None) {
                Error::NotFound { .. } => Ok(()),
                e => Err(e),
            },
        }
    }

    async fn stage(&self, dest_key: &str, run_id: &str) -> Result<Box<dyn Upload>> {
        let staging_key = self.staging_key(dest_key, run_id, None);
        let full = self.full_key(&staging_key);
        let loc = self.loc_full(&full);
        let mut req = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(&full)
            .metadata(RUN_ID_META, run_id);
        if self.part_checksums {
            req = req.checksum_algorithm(ChecksumAlgorithm::Crc32);
        }
        let out = req
            .send()
            .await
            .map_err(|e| map_err("CreateMultipartUpload", &loc, e, Cond::None))?;
        let upload_id = out
            .upload_id()
            .ok_or_else(|| protocol("CreateMultipartUpload", &loc, "answer carries no UploadId"))?
            .to_owned();
        let crash_after = self.cfg.crash_after_part;
        let part_size = (self.cfg.part_size as u64).clamp(MIN_PART, MAX_PART) as usize;
        Ok(Box::new(S3Upload {
            ctx: Arc::new(PartCtx {
                client: self.client.clone(),
                bucket: self.bucket.clone(),
                key: full,
                upload_id,
                location: loc,
                checksums: self.part_checksums,
                crash_after,
                run_id: run_id.to_owned(),
            }),
            staging_key,
            dest_key: dest_key.to_owned(),
            part_size,
            concurrency: self.cfg.upload_concurrency.max(1),
            buf: BytesMut::new(),
            size: 0,
            next_part: 1,
            in_flight: JoinSet::new(),
            done: Vec::new(),
            failed: false,
        }))
    }

    async fn promote(&self, staged: &Staged, expect: &Expect) -> Result<ObjectMeta> {
        let src = self.full_key(&staged.key);
        let dst = self.full_key(&staged.dest_key);
        let loc = self.loc_full(&dst);
        let fence = self.known_fence().unwrap_or(CopyFence::Off);
        let cond = match (fence, expect) {
            (CopyFence::Fenced, Expect::Absent) => Condition::IfAbsent,
            (CopyFence::Fenced, Expect::Version(Version::ETag(e))) => Condition::IfMatch(e.clone()),
            (CopyFence::Fenced, Expect::Version(v)) => {
                return Err(protocol(
                    "CopyObject",
                    &loc,
                    format!("not an S3 version: {v:?}"),
                ))
            }
            _ => Condition::None,
        };
        let run_id = staged_run_id(&staged.key);
        self.gate.before_write(&staged.dest_key, &loc)?;
        let copied = if staged.size <= self.cfg.copy_threshold {
            self.copy_whole(&src, &dst, &cond).await
        } else {
            self.copy_multipart(&src, &dst, staged.size, run_id, &cond)
                .await
        };
        let copied_etag = match copied {
            Ok(etag) => Some(etag),
            // The SDK retried a copy whose first attempt landed (its answer was lost):
            // the destination is then our own copy, which the run id metadata proves.
            Err(Error::Precondition { .. })
                if object_is_runs(&self.client, &self.bucket, &dst, run_id, staged.size, &loc)
                    .await? =>
            {
                tracing::info!(location = %loc, "the copy landed though its answer was lost");
                None
            }
            // Our staging object is gone: a run that took the lease after ours was
            // lost swept it. Nothing was replaced.
            Err(Error::NotFound { .. }) => {
                return Err(Error::Conflict(format!(
                    "conflict: this run's staging object {} is gone (another run swept it after this run's lease was lost); nothing was published",
                    self.loc_full(&src)
                )))
            }
            Err(e) => return Err(e),
        };
        // Verify what a reader will now see before the caller checkpoints it.
        let meta = self.head(&staged.dest_key).await?.ok_or_else(|| {
            protocol(
                "HeadObject",
                &loc,
                "the published object is missing after the copy",
            )
        })?;
        if meta.size != staged.size {
            return Err(protocol(
                "HeadObject",
                &loc,
                format!(
                    "the published object has {} bytes, {} were staged",
                    meta.size, staged.size
                ),
            ));
        }
        let head_etag = meta.etag().unwrap_or_default();
        if let Some(copied_etag) = copied_etag.filter(|e| unquote(head_etag) != unquote(e)) {
            return Err(protocol(
                "HeadObject",
                &loc,
                format!(
                    "the published object has ETag {head_etag}, the copy answered {copied_etag}"
                ),
            ));
        }
        Ok(meta)
    }

    async fn fencing(&self, dest_key: &str, run_id: &str) -> Result<CopyFence> {
        let verdict = match (self.cfg.conditional_copy, self.known_fence()) {
            (ConditionalCopy::Off, _) => CopyFence::Off,
            (_, Some(known)) => known,
            (_, None) => {
                let source = self.staging_key(dest_key, run_id, Some("probe-source"));
                let target = self.staging_key(dest_key, run_id, Some("probe-target"));
                let probed = self.probe_copy_fence((&source, &target)).await?;
                let mut fences = FENCES.lock().unwrap_or_else(|p| p.into_inner());
                fences.push((self.bucket.clone(), probed));
                probed
            }
        };
        if self.cfg.conditional_copy == ConditionalCopy::On && verdict != CopyFence::Fenced {
            return Err(Error::Config(format!(
                "--s3-conditional-copy on, but copies to s3://{} cannot be fenced: {verdict}; use auto or off",
                self.bucket
            )));
        }
        Ok(verdict)
    }

    async fn discard(&self, staged: &Staged) -> Result<()> {
        self.delete(&staged.key).await
    }

    async fn leftovers(&self, folders: &[String]) -> Result<Vec<String>> {
        // Completed staging objects under `<staging folder><run id>/`, one folder per
        // product (incomplete uploads are not objects; the sweep aborts those).
        let mut staging: Vec<String> = Vec::new();
        for folder in folders {
            let (f, _) = self.staging_folder(&format!("{folder}/"));
            if !staging.contains(&f) {
                staging.push(f);
            }
        }
        let mut out = Vec::new();
        for folder in &staging {
            for run in self.list(folder).await?.folders {
                let run_folder = format!("{folder}{run}");
                for f in self.list(&run_folder).await?.files {
                    out.push(self.location(&format!("{run_folder}/{}", f.name)));
                }
            }
            // A killed run's upload is not an object yet; the bucket bills its parts.
            for u in self.uploads(&self.full_key(folder)).await? {
                let started = u
                    .initiated
                    .and_then(|t| t.fmt(aws_smithy_types::date_time::Format::DateTime).ok())
                    .unwrap_or_else(|| "at an unknown time".to_owned());
                out.push(format!(
                    "{} (incomplete multipart upload, started {started})",
                    self.loc_full(&u.key)
                ));
            }
        }
        Ok(out)
    }

    async fn sweep(&self, dest_keys: &[String], run_id: &str, which: Sweep) -> Result<SweepReport> {
        // Staging folder → the staged names swept in it (one folder per product).
        let mut folders: Vec<(String, HashSet<&str>)> = Vec::new();
        for key in dest_keys {
            let (folder, name) = self.staging_folder(key);
            match folders.iter_mut().find(|(f, _)| *f == folder) {
                Some((_, names)) => {
                    names.insert(name);
                }
                None => folders.push((folder, HashSet::from([name]))),
            }
        }
        let this_run = format!("/{run_id}/");
        let now = SystemTime::now();
        let mut report = SweepReport::default();
        for (folder, names) in &folders {
            let eligible = |full: &str, when: Option<&aws_smithy_types::DateTime>| -> bool {
                let Some(rel) = self.relative_key(full) else {
                    return false;
                };
                let name = rel.rsplit('/').next().unwrap_or(rel);
                let wanted = match which {
                    Sweep::Own => rel.contains(&this_run),
                    Sweep::Others { older_than } => {
                        // An unknown age is never old enough.
                        let old = when
                            .and_then(|t| SystemTime::try_from(*t).ok())
                            .map(|t| now.duration_since(t).unwrap_or(Duration::ZERO) >= older_than)
                            .unwrap_or(false);
                        !rel.contains(&this_run) && old
                    }
                };
                names.contains(name) && wanted
            };
            let prefix = self.full_key(folder);
            report.aborted_uploads += self.sweep_uploads(&prefix, &eligible).await?;
            report.deleted_objects += self.sweep_objects(&prefix, &eligible).await?;
        }
        Ok(report)
    }
}

/// One incomplete multipart upload, as `ListMultipartUploads` describes it.
struct PendingUpload {
    /// The full key.
    key: String,
    id: String,
    initiated: Option<aws_smithy_types::DateTime>,
}

/// What is shared by the tasks uploading one staging object's parts.
struct PartCtx {
    client: Client,
    bucket: String,
    key: String,
    upload_id: String,
    location: String,
    checksums: bool,
    crash_after: Option<u32>,
    run_id: String,
}

impl PartCtx {
    async fn upload_part(&self, number: i32, body: Bytes) -> Result<CompletedPart> {
        let len = body.len();
        let mut req = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .part_number(number)
            .content_length(len as i64)
            // Built from `Bytes`, so the SDK can replay the body on a retry.
            .body(ByteStream::from(body));
        if self.checksums {
            req = req.checksum_algorithm(ChecksumAlgorithm::Crc32);
        }
        let out = req
            .send()
            .await
            .map_err(|e| map_err("UploadPart", &self.location, e, Cond::None))?;
        let etag = out
            .e_tag()
            .ok_or_else(|| protocol("UploadPart", &self.location, "answer carries no ETag"))?;
        let mut part = CompletedPart::builder().part_number(number).e_tag(etag);
        if self.checksums {
            // The upload named CRC32, so Complete must list every part's checksum.
            let crc = out.checksum_crc32().ok_or_else(|| {
                protocol(
                    "UploadPart",
                    &self.location,
                    "the server did not echo the part's CRC32; set AWS_REQUEST_CHECKSUM_CALCULATION=when_required for this server",
                )
            })?;
            part = part.checksum_crc32(crc);
        }
        tracing::debug!(location = %self.location, part = number, bytes = len, "uploaded part");
        if self.crash_after == Some(number as u32) {
            // Crash drill: die right after part K was acknowledged, leaving an
            // incomplete multipart upload behind.
            crate::hook::CrashPoint::AfterPart(number as u32).fire();
        }
        Ok(part.build())
    }
}

/// A staging object being written as a multipart upload.
struct S3Upload {
    ctx: Arc<PartCtx>,
    staging_key: String,
    dest_key: String,
    part_size: usize,
    concurrency: usize,
    /// Bytes of the next part, not yet sent.
    buf: BytesMut,
    /// Bytes written so far.
    size: u64,
    next_part: i32,
    in_flight: JoinSet<Result<CompletedPart>>,
    done: Vec<CompletedPart>,
    /// A part failed: the upload can only be aborted.
    failed: bool,
}

impl S3Upload {
    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(protocol(
                "UploadPart",
                &self.ctx.location,
                "an earlier part failed; the upload can only be aborted",
            ));
        }
        Ok(())
    }

    /// Start uploading one part, waiting first while `concurrency` parts are in flight.
    async fn send(&mut self, body: Bytes) -> Result<()> {
        while self.in_flight.len() >= self.concurrency {
            self.reap().await?;
        }
        if self.next_part as u64 > MAX_PARTS {
            self.failed = true;
            return Err(protocol(
                "UploadPart",
                &self.ctx.location,
                format!(
                    "more than {MAX_PARTS} parts of {} bytes; raise the part size",
                    self.part_size
                ),
            ));
        }
        let number = self.next_part;
        self.next_part += 1;
        let ctx = Arc::clone(&self.ctx);
        self.in_flight
            .spawn(async move { ctx.upload_part(number, body).await });
        Ok(())
    }

    /// Wait for one in-flight part.
    async fn reap(&mut self) -> Result<()> {
        match join_part(&mut self.in_flight, "UploadPart", &self.ctx.location).await {
            Ok(part) => {
                self.done.push(part);
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }
}

#[async_trait]
impl Upload for S3Upload {
    fn key(&self) -> &str {
        &self.staging_key
    }

    async fn write(&mut self, mut data: Bytes) -> Result<()> {
        self.check_usable()?;
        self.size += data.len() as u64;
        while !data.is_empty() {
            if self.buf.is_empty() && data.len() >= self.part_size {
                // A whole part from the caller's buffer: no copy.
                let part = data.split_to(self.part_size);
                self.send(part).await?;
                continue;
            }
            let take = (self.part_size - self.buf.len()).min(data.len());
            if self.buf.capacity() == 0 {
                self.buf.reserve(self.part_size);
            }
            self.buf.extend_from_slice(&data.split_to(take));
            if self.buf.len() == self.part_size {
                let part = std::mem::take(&mut self.buf).freeze();
                self.send(part).await?;
            }
        }
        Ok(())
    }

    async fn complete(mut self: Box<Self>) -> Result<Staged> {
        self.check_usable()?;
        let ctx = Arc::clone(&self.ctx);
        if self.size == 0 {
            // An empty output has no valid multipart form on every server (a single
            // zero-byte part is not accepted everywhere): write an empty object instead
            // and drop the upload.
            ctx.client
                .put_object()
                .bucket(&ctx.bucket)
                .key(&ctx.key)
                .metadata(RUN_ID_META, &ctx.run_id)
                .content_length(0)
                .body(ByteStream::from(Bytes::new()))
                .send()
                .await
                .map_err(|e| map_err("PutObject", &ctx.location, e, Cond::None))?;
            if let Err(e) = abort_upload(
                &ctx.client,
                &ctx.bucket,
                &ctx.key,
                &ctx.upload_id,
                &ctx.location,
            )
            .await
            {
                tracing::warn!(location = %ctx.location, error = %e, "could not abort the unused multipart upload; a sweep or lifecycle rule will");
            }
        } else {
            if !self.buf.is_empty() {
                let last = std::mem::take(&mut self.buf).freeze();
                self.send(last).await?;
            }
            while !self.in_flight.is_empty() {
                self.reap().await?;
            }
            let parts = std::mem::take(&mut self.done);
            let completed = complete_upload(
                &ctx.client,
                &ctx.bucket,
                &ctx.key,
                &ctx.upload_id,
                parts,
                &ctx.location,
                &Condition::None,
            )
            .await;
            let completed = match completed {
                // LocalStack answers a retried Complete (its first answer lost) with
                // NoSuchUpload: the upload is gone because it completed. Our object,
                // by run id and size, proves it.
                Err(e) if is_no_such_upload(&e) => {
                    if object_is_runs(
                        &ctx.client,
                        &ctx.bucket,
                        &ctx.key,
                        &ctx.run_id,
                        self.size,
                        &ctx.location,
                    )
                    .await?
                    {
                        tracing::info!(location = %ctx.location, "the Complete landed though its answer was lost");
                        Ok(String::new())
                    } else {
                        Err(e)
                    }
                }
                other => other,
            };
            if let Err(e) = completed {
                // Leave nothing for the sweep: a failed Complete aborts its upload.
                let _ = abort_upload(
                    &ctx.client,
                    &ctx.bucket,
                    &ctx.key,
                    &ctx.upload_id,
                    &ctx.location,
                )
                .await;
                return Err(e);
            }
        }
        tracing::debug!(location = %ctx.location, bytes = self.size, "staging complete");
        Ok(Staged {
            key: self.staging_key.clone(),
            dest_key: self.dest_key.clone(),
            size: self.size,
        })
    }

    async fn abort(mut self: Box<Self>) -> Result<()> {
        // Cancel parts still in flight first, so none lands after the abort.
        self.in_flight.abort_all();
        while self.in_flight.join_next().await.is_some() {}
        let ctx = &self.ctx;
        abort_upload(
            &ctx.client,
            &ctx.bucket,
            &ctx.key,
            &ctx.upload_id,
            &ctx.location,
        )
        .await
    }
}

impl S3Store {
    /// The probe's verdict for this bucket, if this process already has one.
    fn known_fence(&self) -> Option<CopyFence> {
        let fences = FENCES.lock().unwrap_or_else(|p| p.into_inner());
        fences
            .iter()
            .find(|(b, _)| *b == self.bucket)
            .map(|(_, f)| *f)
    }
}

/// Is this the failure of a request on a multipart upload that no longer exists?
fn is_no_such_upload(e: &Error) -> bool {
    match e {
        Error::Store { source, .. } => source
            .downcast_ref::<Failure>()
            .is_some_and(|f| f.code.as_deref() == Some("NoSuchUpload")),
        _ => false,
    }
}

/// Does `key` hold an object of `size` bytes written by run `run_id` (its user
/// metadata)? How a write whose answer was lost is told apart from another's.
async fn object_is_runs(
    client: &Client,
    bucket: &str,
    key: &str,
    run_id: &str,
    size: u64,
    loc: &str,
) -> Result<bool> {
    match client.head_object().bucket(bucket).key(key).send().await {
        Ok(out) => Ok(!run_id.is_empty()
            && out.content_length() == Some(size as i64)
            && out
                .metadata()
                .and_then(|m| m.get(RUN_ID_META))
                .map(String::as_str)
                == Some(run_id)),
        Err(e) => match map_err("HeadObject", loc, e, Cond::None) {
            Error::NotFound { .. } => Ok(false),
            e => Err(e),
        },
    }
}

/// The run id inside a staging key `staging/<product>/<run id>/<name>`.
fn staged_run_id(key: &str) -> &str {
    let mut segments = key.rsplit('/');
    segments.next();
    segments.next().unwrap_or_default()
}

impl S3Store {
    /// Does this store honour a copy's destination condition, and safely? Runs on
    /// scratch keys only: LocalStack 4.14.0 answers 412 to a failed condition and
    /// still overwrites the destination's bytes, so never on a key that matters.
    pub async fn probe_copy_fence(&self, scratch: (&str, &str)) -> Result<CopyFence> {
        let (src, dst) = scratch;
        let target = Bytes::from_static(b"landing probe: the bytes that must survive");
        let result = self.probe_on(src, dst, target).await;
        for key in [src, dst] {
            if let Err(e) = self.delete(key).await {
                tracing::warn!(error = %e, "could not remove a probe scratch object");
            }
        }
        let verdict = result?;
        tracing::info!(copy_fence = %verdict, bucket = %self.bucket, "probed copy conditions");
        Ok(verdict)
    }

    async fn probe_on(&self, src: &str, dst: &str, target: Bytes) -> Result<CopyFence> {
        // Longer than the target: LocalStack's corruption (the target's length in
        // source bytes) then reads back whole, and differs.
        let source = Bytes::from_static(
            b"landing probe source: these bytes must never reach the probe's target object",
        );
        self.put_small(src, source, Condition::None).await?;
        let etag = self.put_small(dst, target.clone(), Condition::None).await?;
        let (full_src, full_dst) = (self.full_key(src), self.full_key(dst));
        // Must fail: the target exists.
        let refused = match self
            .copy_whole(&full_src, &full_dst, &Condition::IfAbsent)
            .await
        {
            Ok(_) => false,
            Err(Error::Precondition { .. }) => true,
            Err(e) => return Err(e),
        };
        // A target that no longer reads back (a body shorter than its length) is not
        // intact either.
        let intact = match self.get_small(dst).await {
            Ok(kept) => kept.is_some_and(|k| k.bytes == target),
            Err(e) => {
                tracing::warn!(error = %e, "the probe's target does not read back after a refused copy");
                false
            }
        };
        if !intact {
            return Ok(if refused {
                CopyFence::Unsafe
            } else {
                CopyFence::Ignored
            });
        }
        if !refused {
            return Ok(CopyFence::Ignored);
        }
        // Must succeed: the right ETag.
        match self
            .copy_whole(&full_src, &full_dst, &Condition::IfMatch(etag))
            .await
        {
            Ok(_) => Ok(CopyFence::Fenced),
            Err(Error::Precondition { .. }) => Ok(CopyFence::Unsafe),
            Err(e) => Err(e),
        }
    }
}

/// Wait for one part task; a panicked or cancelled task is an error too.
async fn join_part(
    tasks: &mut JoinSet<Result<CompletedPart>>,
    op: &'static str,
    loc: &str,
) -> Result<CompletedPart> {
    match tasks.join_next().await {
        Some(Ok(result)) => result,
        Some(Err(join)) => Err(Error::store(op, loc, join)),
        None => Err(protocol(op, loc, "no part in flight")),
    }
}

/// `CompleteMultipartUpload` with `parts` sorted by number; returns the ETag.
async fn complete_upload(
    client: &Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    mut parts: Vec<CompletedPart>,
    loc: &str,
    cond: &Condition,
) -> Result<String> {
    parts.sort_by_key(|p| p.part_number());
    let req = client
        .complete_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        );
    let (req, c) = conditioned!(req, cond);
    let out = req
        .send()
        .await
        .map_err(|e| map_err("CompleteMultipartUpload", loc, e, c))?;
    // Complete can answer 200 and fail in the body; the SDK maps that to an error, and a
    // success always names the ETag.
    out.e_tag()
        .map(str::to_owned)
        .ok_or_else(|| protocol("CompleteMultipartUpload", loc, "answer carries no ETag"))
}

/// `AbortMultipartUpload`; an upload that is already gone is fine.
async fn abort_upload(
    client: &Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    loc: &str,
) -> Result<()> {
    match client
        .abort_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => {
            let f = Failure::from_sdk(&e);
            if f.code.as_deref() == Some("NoSuchUpload") {
                Ok(())
            } else {
                Err(Error::store("AbortMultipartUpload", loc, f))
            }
        }
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

/// `x-amz-copy-source` value: the SDK does not URL-encode it (aws-sdk-rust#1357), so keys
/// with spaces, `+` or non-ASCII characters would otherwise copy the wrong object or
/// fail with NoSuchKey. Each segment is percent-encoded; `/` is kept.
fn copy_source(bucket: &str, key: &str) -> String {
    let mut out = String::with_capacity(bucket.len() + key.len() * 3 + 1);
    out.push_str(bucket);
    for segment in key.split('/') {
        out.push('/');
        out.extend(utf8_percent_encode(segment, KEY_SEGMENT));
    }
    out
}

/// Part size for a multipart copy of `size` bytes: the configured size, scaled up so
/// there are at most 10,000 parts, and never under S3's 5 MiB minimum.
fn copy_part_size(size: u64, configured: u64) -> u64 {
    configured
        .max(MIN_PART)
        .max(size.div_ceil(MAX_PARTS))
        .min(MAX_PART)
}

fn unquote(etag: &str) -> &str {
    etag.trim_matches('"')
}

fn content_length(len: Option<i64>, op: &'static str, loc: &str) -> Result<u64> {
    len.and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| protocol(op, loc, "answer carries no Content-Length"))
}

/// An answer that is well-formed HTTP but not what S3 promises.
fn protocol(op: &'static str, loc: &str, what: impl Into<String>) -> Error {
    Error::store(op, loc, Failure::protocol(what.into()))
}

/// The write condition a request carried, which decides how its errors read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    None,
    IfAbsent,
    IfMatch,
}

/// What a failed S3 call means for the contract.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    NotFound,
    NoBucket,
    Precondition,
    Other,
}

/// The private, precise error of one S3 call: HTTP status, S3 error code and message.
/// Never holds a request's headers, so never a credential.
#[derive(Debug)]
struct Failure {
    status: Option<u16>,
    code: Option<String>,
    message: Option<String>,
    /// The SDK's own description (dispatch, timeout, decoding failures).
    detail: String,
}

impl Failure {
    fn from_sdk<E>(err: &SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        Failure {
            status: err.raw_response().map(|r| r.status().as_u16()),
            code: err.code().map(str::to_owned),
            message: err.message().map(str::to_owned),
            // A service error's SDK description dumps the whole response, headers
            // included; status, code and message say all a caller needs.
            detail: match err {
                SdkError::ServiceError(_) => "the server answered with an error".to_owned(),
                other => DisplayErrorContext(other).to_string(),
            },
        }
    }

    fn protocol(what: String) -> Self {
        Failure {
            status: None,
            code: None,
            message: None,
            detail: what,
        }
    }

    fn kind(&self, cond: Cond) -> Kind {
        let code = self.code.as_deref();
        match (self.status, code) {
            (_, Some("PreconditionFailed")) | (Some(412), _) => Kind::Precondition,
            // A concurrent conditional write won the race (AWS).
            (_, Some("ConditionalRequestConflict")) if cond != Cond::None => Kind::Precondition,
            // AWS and moto answer If-Match on a missing key with 404 NoSuchKey.
            (_, Some("NoSuchKey")) | (Some(404), Some("NotFound")) if cond == Cond::IfMatch => {
                Kind::Precondition
            }
            (_, Some("NoSuchKey")) => Kind::NotFound,
            // The bucket named by --lake or --inbox: a setting to correct, not a retry.
            (_, Some("NoSuchBucket")) => Kind::NoBucket,
            // HEAD answers carry no body, hence no code; the SDK names them NotFound.
            (Some(404), None | Some("NotFound")) => Kind::NotFound,
            _ => Kind::Other,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.code, self.status) {
            (Some(code), status) => {
                if let Some(status) = status {
                    write!(f, "HTTP {status} ")?;
                }
                f.write_str(code)?;
                if let Some(message) = &self.message {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            (None, Some(status)) => write!(f, "HTTP {status}: {}", self.detail),
            (None, None) => f.write_str(&self.detail),
        }
    }
}

impl std::error::Error for Failure {}

/// Map an SDK error into the public error for `op` on `loc`.
fn map_err<E>(op: &'static str, loc: &str, err: SdkError<E, HttpResponse>, cond: Cond) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let failure = Failure::from_sdk(&err);
    match failure.kind(cond) {
        Kind::NotFound => Error::NotFound {
            location: loc.to_owned(),
        },
        Kind::NoBucket => Error::Config(format!("{loc}: {failure}: the bucket does not exist")),
        Kind::Precondition => Error::Precondition {
            location: loc.to_owned(),
        },
        Kind::Other => Error::store(op, loc, failure),
    }
}

/// A streaming body that fails a read stalled longer than `timeout`: the SDK bounds
/// requests, not the consumption of a streaming body.
struct StallTimeout {
    inner: Pin<Box<dyn AsyncRead + Send>>,
    timeout: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    armed: bool,
    location: String,
}

impl StallTimeout {
    fn new(inner: Pin<Box<dyn AsyncRead + Send>>, timeout: Duration, location: String) -> Self {
        StallTimeout {
            inner,
            timeout,
            timer: Box::pin(tokio::time::sleep(timeout)),
            armed: false,
            location,
        }
    }
}

impl AsyncRead for StallTimeout {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.inner.as_mut().poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.armed = false;
                Poll::Ready(result)
            }
            Poll::Pending => {
                if !this.armed {
                    let deadline = tokio::time::Instant::now() + this.timeout;
                    this.timer.as_mut().reset(deadline);
                    this.armed = true;
                }
                match this.timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "reading {} stalled for more than {} s",
                            this.location,
                            this.timeout.as_secs_f64()
                        ),
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl S3Store {
    /// [`Store::list`]: `ListObjectsV2` with `Delimiter=/` under `prefix/`, every page
    /// (1,000 keys each) followed, so sub-"folders" come back as common prefixes and
    /// are never descended into.
    async fn list_prefix(&self, prefix: &str) -> Result<Listing> {
        let folder = match prefix.trim_matches('/') {
            "" => self.prefix.clone(),
            p => self.full_key(p),
        };
        let under = if folder.is_empty() {
            String::new()
        } else {
            format!("{folder}/")
        };
        let loc = self.loc_full(&under);
        let mut listing = Listing::default();
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(&under)
            .delimiter("/")
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| map_err("ListObjectsV2", &loc, e, Cond::None))?;
            for object in page.contents() {
                let Some(name) = object.key().and_then(|k| k.strip_prefix(under.as_str())) else {
                    continue;
                };
                // A zero-byte "folder marker" object named `prefix/` is not an input.
                if name.is_empty() || name.contains('/') {
                    continue;
                }
                let etag = object
                    .e_tag()
                    .ok_or_else(|| protocol("ListObjectsV2", &loc, "an entry carries no ETag"))?;
                let size = content_length(object.size(), "ListObjectsV2", &loc)?;
                let modified_ns = object
                    .last_modified()
                    .map_or(0, aws_smithy_types::DateTime::as_nanos);
                listing.files.push(Listed {
                    name: name.to_owned(),
                    meta: ObjectMeta {
                        size,
                        version: Version::ETag(quoted(etag)),
                    },
                    modified_ns,
                });
            }
            for p in page.common_prefixes() {
                if let Some(name) = p
                    .prefix()
                    .and_then(|k| k.strip_prefix(under.as_str()))
                    .map(|n| n.trim_end_matches('/'))
                    .filter(|n| !n.is_empty())
                {
                    listing.folders.push(name.to_owned());
                }
            }
        }
        listing.files.sort_by(|a, b| a.name.cmp(&b.name));
        listing.folders.sort();
        Ok(listing)
    }
}

/// ETags as HeadObject returns them (quoted); some servers list them bare.
fn quoted(etag: &str) -> String {
    if etag.starts_with('"') {
        etag.to_owned()
    } else {
        format!("\"{etag}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read one HTTP request's head from `sock`; false if the client hung up first.
    fn read_request(sock: &mut std::net::TcpStream) -> bool {
        use std::io::Read;
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match sock.read(&mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        true
    }

    /// A store that talks to a hand-made socket at `addr` instead of a server.
    fn store_at(addr: std::net::SocketAddr, cfg: S3Options) -> S3Store {
        let sdk = aws_config::SdkConfig::builder()
            .endpoint_url(format!("http://{addr}"))
            .region(Region::from_static("us-east-1"))
            .credentials_provider(aws_sdk_s3::config::SharedCredentialsProvider::new(
                aws_sdk_s3::config::Credentials::new("test", "test", None, None, "test"),
            ))
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let cfg = S3Options {
            force_path_style: true,
            ..cfg
        };
        S3Store::from_sdk_config(&sdk, "bucket", "lake", &cfg)
    }

    /// A small object whose body breaks after the response head (which the SDK does
    /// not retry) is read again: the second answer is whole.
    #[tokio::test]
    async fn a_small_read_whose_body_breaks_is_repeated() {
        use std::io::Write;

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let answers: [&[u8]; 2] = [
                // The head promises 10 bytes; the connection closes after 3.
                b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nETag: \"e\"\r\n\r\n012",
                b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nETag: \"e\"\r\n\r\n0123456789",
            ];
            for answer in answers {
                let (mut sock, _) = listener.accept().expect("accept");
                if !read_request(&mut sock) {
                    return;
                }
                sock.write_all(answer).expect("answer");
            }
        });
        let cfg = S3Options {
            max_attempts: 2,
            ..S3Options::default()
        };
        let got = store_at(addr, cfg)
            .get_small("locks/progress/a.jsonl.lock")
            .await
            .expect("the second read is whole")
            .expect("present");
        assert_eq!(&got.bytes[..], b"0123456789");
        assert_eq!(got.version, "\"e\"");
        tokio::task::spawn_blocking(move || server.join())
            .await
            .expect("join")
            .expect("server thread");
    }

    #[test]
    fn copy_source_encodes_each_segment() {
        assert_eq!(
            copy_source("b", "lake/raw/progress/día 1+2.jsonl"),
            "b/lake/raw/progress/d%C3%ADa%201%2B2.jsonl"
        );
        assert_eq!(copy_source("b", "a/c++/x~y-z_.j"), "b/a/c%2B%2B/x~y-z_.j");
    }

    #[test]
    fn copy_parts_stay_within_s3_limits() {
        assert_eq!(copy_part_size(12 << 20, 5 << 20), 5 << 20);
        assert_eq!(copy_part_size(12 << 20, 1), MIN_PART);
        let huge = 5u64 << 40; // 5 TiB, the S3 object maximum
        let part = copy_part_size(huge, 16 << 20);
        assert!(huge.div_ceil(part) <= MAX_PARTS);
        assert!(part <= MAX_PART);
    }

    fn failure(status: u16, code: Option<&str>) -> Failure {
        Failure {
            status: Some(status),
            code: code.map(str::to_owned),
            message: None,
            detail: String::new(),
        }
    }

    #[test]
    fn conditional_failures_are_preconditions_whatever_the_status() {
        let f = failure(412, Some("PreconditionFailed"));
        assert_eq!(f.kind(Cond::IfAbsent), Kind::Precondition);
        assert_eq!(f.kind(Cond::IfMatch), Kind::Precondition);
        let f = failure(409, Some("ConditionalRequestConflict"));
        assert_eq!(f.kind(Cond::IfMatch), Kind::Precondition);
        assert_eq!(f.kind(Cond::None), Kind::Other);
        let f = failure(404, Some("NoSuchKey"));
        assert_eq!(f.kind(Cond::IfMatch), Kind::Precondition);
        assert_eq!(f.kind(Cond::None), Kind::NotFound);
        assert_eq!(failure(404, None).kind(Cond::None), Kind::NotFound);
        assert_eq!(
            failure(404, Some("NoSuchBucket")).kind(Cond::None),
            Kind::NoBucket
        );
        assert_eq!(
            failure(403, Some("AccessDenied")).kind(Cond::None),
            Kind::Other
        );
    }

    /// A body that stops arriving fails the read after `read_timeout`, instead of
    /// hanging until the SDK's stalled-stream protection (if ever). The server is a
    /// socket that answers GetObject with 10 of 100 promised bytes, then stays silent
    /// until the client hangs up.
    #[tokio::test]
    async fn a_stalled_body_fails_the_read_with_a_timeout() {
        use std::io::{Read, Write};
        use tokio::io::AsyncReadExt;

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut sock, _) = listener.accept().expect("accept");
            if !read_request(&mut sock) {
                return;
            }
            sock.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nETag: \"e\"\r\n\r\n0123456789",
            )
            .expect("answer");
            // Silent until the client closes the connection.
            let mut buf = [0u8; 4096];
            while matches!(sock.read(&mut buf), Ok(n) if n > 0) {}
        });

        let cfg = S3Options {
            max_attempts: 1,
            read_timeout: Duration::from_millis(300),
            ..S3Options::default()
        };
        let store = store_at(addr, cfg);
        let mut reader = store
            .read("inbox/a.jsonl")
            .await
            .expect("GetObject answered");
        assert_eq!(reader.size, 100);
        let mut got = Vec::new();
        let err = reader
            .body
            .read_to_end(&mut got)
            .await
            .expect_err("a stalled body must fail");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(
            err.to_string().contains("s3://bucket/lake/inbox/a.jsonl"),
            "{err}"
        );
        assert_eq!(got, b"0123456789");
        // Hang up, and wait for the server off the runtime thread, which must stay free
        // to drive the connection's close.
        drop(reader);
        tokio::task::spawn_blocking(move || server.join())
            .await
            .expect("join")
            .expect("server thread");
    }

    #[test]
    fn keys_join_under_the_prefix() {
        assert_eq!(join_key("", "raw/a"), "raw/a");
        assert_eq!(join_key("lake/x", "raw/a"), "lake/x/raw/a");
    }
}
