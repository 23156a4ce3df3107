//! Staging: the multipart upload a run writes its output into, part by part while
//! the caller keeps writing, and the multipart calls the copy shares.

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use bytes::{Bytes, BytesMut};
use tokio::task::JoinSet;

use super::error::{is_no_such_upload, map_err, protocol, Cond, Failure};
use super::object::runs_object;
use super::{S3Store, RUN_ID_META};
use crate::{Gate, PutMode, Staged, Upload};
use landing_error::{Error, Result};

/// S3's smallest allowed part, for all parts but the last.
pub(super) const MIN_PART: u64 = 5 << 20;
/// S3's largest allowed part.
pub(super) const MAX_PART: u64 = 5 << 30;
/// S3's largest part number.
pub(super) const MAX_PARTS: u64 = 10_000;

impl S3Store {
    /// [`crate::Lake::stage`]: the run's staging key, written by a single
    /// `PutObject` when the output fits in one part, else by a multipart upload
    /// started once the first part is full.
    pub(super) async fn start_upload(
        &self,
        dest_key: &str,
        run_id: &str,
        scratch: Option<&str>,
    ) -> Result<Box<dyn Upload>> {
        let staging_key = self.staging_key(dest_key, run_id, scratch);
        let full = self.full_key(&staging_key);
        let loc = self.loc_full(&full);
        // Nothing is sent yet, but a run past its deadline starts no staging at all.
        self.gate.before_staging(&loc)?;
        let part_size = (self.cfg.part_size as u64).clamp(MIN_PART, MAX_PART) as usize;
        Ok(Box::new(S3Upload {
            target: Target {
                client: self.client.clone(),
                bucket: self.bucket.clone(),
                key: full,
                location: loc,
                checksums: self.part_checksums,
                gate: self.gate.clone(),
                run_id: run_id.to_owned(),
            },
            ctx: None,
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
}

/// Where a staging object goes, and who writes it.
#[derive(Clone)]
struct Target {
    client: Client,
    bucket: String,
    key: String,
    location: String,
    checksums: bool,
    /// Its hooks fire inside a part's upload (crash drills).
    gate: Gate,
    run_id: String,
}

impl Target {
    /// `CreateMultipartUpload`: the output does not fit in one part.
    async fn create(&self) -> Result<PartCtx> {
        self.gate.before_staging(&self.location)?;
        let mut req = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.key)
            .metadata(RUN_ID_META, &self.run_id);
        if self.checksums {
            req = req.checksum_algorithm(ChecksumAlgorithm::Crc32);
        }
        let out = req
            .send()
            .await
            .map_err(|e| map_err("CreateMultipartUpload", &self.location, e, Cond::None))?;
        let upload_id = out
            .upload_id()
            .ok_or_else(|| {
                protocol(
                    "CreateMultipartUpload",
                    &self.location,
                    "answer carries no UploadId",
                )
            })?
            .to_owned();
        Ok(PartCtx {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            key: self.key.clone(),
            upload_id,
            location: self.location.clone(),
            checksums: self.checksums,
            gate: self.gate.clone(),
            run_id: self.run_id.clone(),
        })
    }

    /// The whole output in one `PutObject` (it fits in one part, or is empty: an
    /// empty output has no multipart form every server accepts). Two requests fewer
    /// than a multipart upload of one part, which matters for many small inputs.
    async fn put_whole(&self, body: Bytes) -> Result<()> {
        self.gate.before_staging(&self.location)?;
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(&self.key)
            .metadata(RUN_ID_META, &self.run_id)
            .content_length(body.len() as i64)
            // Built from `Bytes`, so the SDK can replay the body on a retry.
            .body(ByteStream::from(body));
        if self.checksums {
            req = req.checksum_algorithm(ChecksumAlgorithm::Crc32);
        }
        req.send()
            .await
            .map_err(|e| map_err("PutObject", &self.location, e, Cond::None))?;
        Ok(())
    }
}

/// What is shared by the tasks uploading one staging object's parts.
struct PartCtx {
    client: Client,
    bucket: String,
    key: String,
    upload_id: String,
    location: String,
    checksums: bool,
    /// Its hooks fire inside a part's upload (crash drills).
    gate: Gate,
    run_id: String,
}

impl PartCtx {
    async fn upload_part(&self, number: i32, body: Bytes) -> Result<CompletedPart> {
        self.gate.before_staging(&self.location)?;
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
        // Crash drills: die right after this part was acknowledged, leaving an
        // incomplete multipart upload behind.
        self.gate.after_part(number as u32);
        Ok(part.build())
    }
}

/// A staging object being written: held in memory until it passes one part, then a
/// multipart upload.
struct S3Upload {
    target: Target,
    /// The multipart upload, once the output passed one part.
    ctx: Option<Arc<PartCtx>>,
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
                &self.target.location,
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
                &self.target.location,
                format!(
                    "more than {MAX_PARTS} parts of {} bytes; raise the part size",
                    self.part_size
                ),
            ));
        }
        let ctx = match &self.ctx {
            Some(ctx) => Arc::clone(ctx),
            None => {
                let created = self.target.create().await;
                let ctx = Arc::new(created.inspect_err(|_| self.failed = true)?);
                self.ctx = Some(Arc::clone(&ctx));
                ctx
            }
        };
        let number = self.next_part;
        self.next_part += 1;
        self.in_flight
            .spawn(async move { ctx.upload_part(number, body).await });
        Ok(())
    }

    /// Wait for one in-flight part.
    async fn reap(&mut self) -> Result<()> {
        match join_part(&mut self.in_flight, "UploadPart", &self.target.location).await {
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
        match self.ctx.clone() {
            None => {
                // Never passed one part: no multipart upload was started.
                let whole = std::mem::take(&mut self.buf).freeze();
                self.target.put_whole(whole).await?;
            }
            Some(ctx) => self.complete_parts(&ctx).await?,
        }
        tracing::debug!(location = %self.target.location, bytes = self.size, "staging complete");
        Ok(Staged {
            key: self.staging_key.clone(),
            dest_key: self.dest_key.clone(),
            size: self.size,
            label: None,
        })
    }

    async fn abort(mut self: Box<Self>) -> Result<()> {
        // Nothing was sent before the first part was full.
        let Some(ctx) = self.ctx.clone() else {
            return Ok(());
        };
        // Cancel parts still in flight first, so none lands after the abort.
        self.in_flight.abort_all();
        while self.in_flight.join_next().await.is_some() {}
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

impl S3Upload {
    /// The last part, then `CompleteMultipartUpload`.
    async fn complete_parts(&mut self, ctx: &PartCtx) -> Result<()> {
        if !self.buf.is_empty() {
            let last = std::mem::take(&mut self.buf).freeze();
            self.send(last).await?;
        }
        while !self.in_flight.is_empty() {
            self.reap().await?;
        }
        let parts = std::mem::take(&mut self.done);
        if let Err(e) = ctx.gate.before_staging(&ctx.location) {
            // Past the deadline: our own upload goes, so no sweep has to find it.
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
        let completed = complete_upload(
            &ctx.client,
            &ctx.bucket,
            &ctx.key,
            &ctx.upload_id,
            parts,
            &ctx.location,
            &PutMode::Overwrite,
        )
        .await;
        let completed = match completed {
            // LocalStack answers a retried Complete (its first answer lost) with
            // NoSuchUpload: the upload is gone because it completed. Our object,
            // by run id and size, proves it.
            Err(e) if is_no_such_upload(&e) => {
                if runs_object(
                    &ctx.client,
                    &ctx.bucket,
                    &ctx.key,
                    &ctx.run_id,
                    self.size,
                    &ctx.location,
                )
                .await?
                .is_some()
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
        Ok(())
    }
}

/// Wait for one part task; a panicked or cancelled task is an error too.
pub(super) async fn join_part(
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
pub(super) async fn complete_upload(
    client: &Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    mut parts: Vec<CompletedPart>,
    loc: &str,
    cond: &PutMode,
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
    let (req, c) =
        conditioned!(req, cond).map_err(|e| protocol("CompleteMultipartUpload", loc, e))?;
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
pub(super) async fn abort_upload(
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
            if f.is_no_such_upload() {
                Ok(())
            } else {
                Err(Error::store("AbortMultipartUpload", loc, f))
            }
        }
    }
}
