//! Promotion: the staging object copied over the published name in one atomic
//! publish (`CopyObject`, or `UploadPartCopy` parts above `copy_threshold`), under
//! the destination condition the store's fence allows.

use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedPart, MetadataDirective};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tokio::task::JoinSet;

use super::error::{map_err, protocol, Cond};
use super::object::runs_object;
use super::upload::{abort_upload, complete_upload, join_part, MAX_PART, MAX_PARTS, MIN_PART};
use super::{encode_label, S3Store, LABEL_META, RUN_ID_META};
use crate::{CopyFence, Fence, ObjectMeta, PutMode, Staged, Version};
use landing_error::{Error, Result};

/// What a promotion stores as the published object's user metadata.
#[derive(Clone, Copy)]
pub(super) struct Label<'a> {
    pub(super) run_id: &'a str,
    pub(super) label: Option<&'a str>,
}

/// Characters kept as they are in a percent-encoded key segment (RFC 3986 unreserved).
const KEY_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl S3Store {
    /// [`crate::Lake::promote`]: copy the staging object over the published
    /// name, under the destination condition `fence` allows.
    pub(super) async fn promote_staged(
        &self,
        staged: &Staged,
        mode: &PutMode,
        fence: Fence,
    ) -> Result<ObjectMeta> {
        let src = self.full_key(&staged.key);
        let dst = self.full_key(&staged.dest_key);
        let loc = self.loc_full(&dst);
        // A store that does not fence copies gets no condition it would ignore or
        // break on (see `fence.rs`).
        let cond = match fence.verdict() {
            CopyFence::Fenced => mode.clone(),
            _ => PutMode::Overwrite,
        };
        let run_id = staged_run_id(&staged.key);
        self.gate.before_write(&staged.dest_key, &loc)?;
        let label = Label {
            run_id,
            label: staged.label.as_deref(),
        };
        let copied = if staged.size <= self.cfg.copy_threshold {
            self.copy_whole(&src, &dst, &cond, Some(label)).await
        } else {
            self.copy_multipart(&src, &dst, staged.size, label, &cond)
                .await
        };
        match copied {
            // The copy's answer names what a reader now sees: its ETag, and the
            // staged size, since the source is this run's own staging object (another
            // run can only delete it, which fails the copy). S3 reads after writes
            // are strongly consistent, so a HEAD here would only repeat the answer.
            Ok(etag) => Ok(ObjectMeta {
                size: staged.size,
                version: Version::ETag(quoted(etag)),
            }),
            // The SDK retried a copy whose first attempt landed (its answer was lost):
            // the destination is then our own copy, which the run id metadata proves.
            Err(Error::Precondition { location }) => {
                match runs_object(&self.client, &self.bucket, &dst, run_id, staged.size, &loc)
                    .await?
                {
                    Some(meta) => {
                        tracing::info!(location = %loc, "the copy landed though its answer was lost");
                        Ok(meta)
                    }
                    None => Err(Error::Precondition { location }),
                }
            }
            // Our staging object is gone: a run that took the lease after ours was
            // lost swept it. Nothing was replaced.
            Err(Error::NotFound { .. }) => Err(Error::Conflict(format!(
                "conflict: this run's staging object {} is gone (another run swept it after this run's lease was lost); nothing was published",
                self.loc_full(&src)
            ))),
            Err(e) => Err(e),
        }
    }

    /// Copy a whole object with one `CopyObject` (at most 5 GiB); returns the new ETag.
    /// With a `label`, the copy's user metadata is replaced by the run id and the label
    /// (`x-amz-metadata-directive: REPLACE`); without, the source's is kept.
    pub(super) async fn copy_whole(
        &self,
        src: &str,
        dst: &str,
        cond: &PutMode,
        label: Option<Label<'_>>,
    ) -> Result<String> {
        let loc = self.loc_full(dst);
        let mut req = self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(dst)
            .copy_source(copy_source(&self.bucket, src));
        if let Some(Label {
            run_id,
            label: Some(l),
        }) = label
        {
            req = req
                .metadata_directive(MetadataDirective::Replace)
                .metadata(RUN_ID_META, run_id)
                .metadata(LABEL_META, encode_label(l));
        }
        let (mut req, c) = conditioned!(req, cond).map_err(|e| protocol("CopyObject", &loc, e))?;
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
        label: Label<'_>,
        cond: &PutMode,
    ) -> Result<String> {
        let loc = self.loc_full(dst);
        let mut create = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(dst)
            .metadata(RUN_ID_META, label.run_id);
        if let Some(l) = label.label {
            create = create.metadata(LABEL_META, encode_label(l));
        }
        let created = create
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
        cond: &PutMode,
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
}

/// The run id inside a staging key `staging/<product>/<run id>/[pass2/]<name>`.
fn staged_run_id(key: &str) -> &str {
    let mut segments = key.rsplit('/');
    segments.next();
    match segments.next() {
        Some(super::PASS2) => segments.next().unwrap_or_default(),
        other => other.unwrap_or_default(),
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

/// An ETag in the quoted form HeadObject answers (RFC 9110 entity-tag), which
/// checkpoints record: SeaweedFS sends a CopyObjectResult ETag without its quotes.
fn quoted(etag: String) -> String {
    if etag.len() >= 2 && etag.starts_with('"') && etag.ends_with('"') {
        etag
    } else {
        format!("\"{}\"", etag.trim_matches('"'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn etags_take_the_quoted_form_head_answers() {
        assert_eq!(quoted("abc".into()), "\"abc\"");
        assert_eq!(quoted("\"abc\"".into()), "\"abc\"");
        assert_eq!(quoted("\"abc-2\"".into()), "\"abc-2\"");
        assert_eq!(quoted(String::new()), "\"\"");
        assert_eq!(quoted("\"".into()), "\"\"");
    }

    #[test]
    fn staged_keys_name_their_run() {
        assert_eq!(staged_run_id("staging/progress/r1/a.jsonl"), "r1");
        assert_eq!(staged_run_id("staging/progress/r1/pass2/a.jsonl"), "r1");
        assert_eq!(staged_run_id("a.jsonl"), "");
    }
}
