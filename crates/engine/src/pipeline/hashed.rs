//! The data's staging upload, hashed as it is written: the SHA-256 of the bytes a
//! publish makes visible (compressed when the output is), for the commit log's entry
//! and the checkpoint, without reading the staged object back.

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::identity::hex;
use crate::store::{Staged, Upload};

pub(super) struct Hashed {
    upload: Box<dyn Upload>,
    sha: Sha256,
}

impl Hashed {
    pub(super) fn new(upload: Box<dyn Upload>) -> Self {
        Hashed {
            upload,
            sha: Sha256::new(),
        }
    }

    pub(super) async fn write(&mut self, data: Bytes) -> Result<()> {
        self.sha.update(&data);
        self.upload.write(data).await
    }

    /// The completed staging and the SHA-256 of everything written to it.
    pub(super) async fn complete(self) -> Result<(Staged, String)> {
        let staged = self.upload.complete().await?;
        Ok((staged, hex(&self.sha.finalize())))
    }

    pub(super) async fn abort(self) -> Result<()> {
        self.upload.abort().await
    }
}
