//! Is a promotion fenced on this store, and does it refuse a second create? Probed
//! once per store value on scratch keys before the first promotion, and kept in it:
//! the verdicts belong to this endpoint and bucket, not to a name.

use bytes::Bytes;

use super::{ConditionalCopy, S3Store};
use crate::{CopyFence, Fence, PutMode};
use landing_error::{Error, Result};

impl S3Store {
    /// [`crate::Lake::fencing`]: the probe's verdict, probed on the first call
    /// (concurrent callers wait for that one probe); a failed probe is tried again by
    /// the next call.
    pub(super) async fn fence(&self, dest_key: &str, run_id: &str) -> Result<Fence> {
        let probe_create = || async {
            let scratch = self.staging_key(dest_key, run_id, Some("probe-create"));
            self.probe_create(&scratch).await
        };
        self.creates_exclusive.get_or_try_init(probe_create).await?;
        let verdict = match self.cfg.conditional_copy {
            ConditionalCopy::Off => CopyFence::Off,
            ConditionalCopy::Auto | ConditionalCopy::On => {
                let probe = || async {
                    let source = self.staging_key(dest_key, run_id, Some("probe-source"));
                    let target = self.staging_key(dest_key, run_id, Some("probe-target"));
                    self.probe_copy_fence((&source, &target)).await
                };
                *self.fence_verdict.get_or_try_init(probe).await?
            }
        };
        if self.cfg.conditional_copy == ConditionalCopy::On && verdict != CopyFence::Fenced {
            return Err(Error::Config(format!(
                "--s3-conditional-copy on, but copies to s3://{} cannot be fenced: {verdict}; use auto or off",
                self.bucket
            )));
        }
        Ok(Fence::new(verdict))
    }

    /// Does this store refuse a second create of a key (`If-None-Match: *`)? Leases,
    /// checkpoints and the commit log's numbers rest on it: a store that ignored the
    /// header would let two runs hold one lease or take one entry number, so it is
    /// refused here, before the first publish, rather than trusted. On a scratch key.
    async fn probe_create(&self, key: &str) -> Result<()> {
        let first = Bytes::from_static(b"landing probe: the first create");
        let result = async {
            self.put_small_object(key, first.clone(), &PutMode::Overwrite)
                .await?;
            let second = Bytes::from_static(b"landing probe: a second create of the same key");
            match self.put_small_object(key, second, &PutMode::Create).await {
                Err(Error::Precondition { .. }) => {}
                Ok(_) => return Ok(false),
                Err(e) => return Err(e),
            }
            let kept = crate::get_small(self, key).await?;
            Ok(kept.is_some_and(|k| k.bytes == first))
        }
        .await;
        if let Err(e) = self.delete_object(key).await {
            tracing::warn!(error = %e, "could not remove a probe scratch object");
        }
        if result? {
            tracing::info!(bucket = %self.bucket, "probed conditional creates: a second create is refused");
            return Ok(());
        }
        Err(Error::Config(format!(
            "s3://{}: a second create of one key with If-None-Match: * was not refused; leases, checkpoints and the commit log rely on it, so landing cannot run against this store",
            self.bucket
        )))
    }

    /// Does this store honour a copy's destination condition, and safely? Runs on
    /// scratch keys only: LocalStack 4.14.0 answers 412 to a failed condition and
    /// still overwrites the destination's bytes, so never on a key that matters.
    async fn probe_copy_fence(&self, scratch: (&str, &str)) -> Result<CopyFence> {
        let (src, dst) = scratch;
        let target = Bytes::from_static(b"landing probe: the bytes that must survive");
        let result = self.probe_on(src, dst, target).await;
        for key in [src, dst] {
            if let Err(e) = self.delete_object(key).await {
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
        self.put_small_object(src, source, &PutMode::Overwrite)
            .await?;
        let etag = self
            .put_small_object(dst, target.clone(), &PutMode::Overwrite)
            .await?;
        let (full_src, full_dst) = (self.full_key(src), self.full_key(dst));
        // Must fail: the target exists.
        let refused = match self
            .copy_whole(&full_src, &full_dst, &PutMode::Create, None)
            .await
        {
            Ok(_) => false,
            Err(Error::Precondition { .. }) => true,
            Err(e) => return Err(e),
        };
        // A target that no longer reads back (a body shorter than its length) is not
        // intact either.
        let intact = match crate::get_small(self, dst).await {
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
            .copy_whole(&full_src, &full_dst, &PutMode::Update(etag), None)
            .await
        {
            Ok(_) => Ok(CopyFence::Fenced),
            Err(Error::Precondition { .. }) => Ok(CopyFence::Unsafe),
            Err(e) => Err(e),
        }
    }
}
