//! One fixture per kind of backend: a local folder, the memory store, and an S3
//! server's fresh bucket, each empty and each the test's own.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use landing_store::conformance::{Fixture, Named};
use landing_store::local::LocalStore;
use landing_store::memory::MemoryStore;
use landing_store::s3::{S3Options, S3Store};
use landing_store::{CopyFence, Lake};

use crate::servers::Server;

/// Every S3 fixture keeps its lake under this prefix, so prefix joining is exercised.
const S3_PREFIX: &str = "lake";

/// A lake in a temp folder of its own.
pub struct Local {
    dir: tempfile::TempDir,
}

impl Local {
    pub fn new() -> Self {
        Local {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn lake_dir(&self) -> PathBuf {
        self.dir.path().join("lake")
    }
}

#[async_trait]
impl Fixture for Local {
    fn lake_with(&self, _: &S3Options) -> Box<dyn Lake> {
        Box::new(LocalStore::new(self.lake_dir()))
    }

    fn options(&self) -> S3Options {
        test_s3_config()
    }

    fn location_of(&self, key: &str) -> Named {
        Named::EndingWith(format!("lake/{key}"))
    }

    fn is_s3(&self) -> bool {
        false
    }

    fn stages_as_objects(&self) -> bool {
        false
    }

    fn fence(&self) -> CopyFence {
        CopyFence::Fenced
    }

    async fn all_keys(&self) -> BTreeSet<String> {
        let root = self.lake_dir();
        let mut keys = BTreeSet::new();
        walk(&root, &root, &mut keys);
        keys.retain(|k| !k.ends_with(".cas"));
        keys
    }
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    // Only a missing folder is empty; any other error fails the test.
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => panic!("reading {}: {e}", dir.display()),
    };
    for entry in entries {
        let entry = entry.expect("dir entry");
        let path = entry.path();
        if entry.file_type().expect("file type").is_dir() {
            walk(root, &path, out);
        } else {
            let rel = path.strip_prefix(root).expect("under root");
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
}

/// A memory store: every handle the fixture gives shares its objects.
pub struct Memory {
    store: MemoryStore,
}

impl Memory {
    pub fn new() -> Self {
        Memory {
            store: MemoryStore::new(),
        }
    }
}

#[async_trait]
impl Fixture for Memory {
    fn lake_with(&self, _: &S3Options) -> Box<dyn Lake> {
        Box::new(self.store.clone())
    }

    fn options(&self) -> S3Options {
        test_s3_config()
    }

    fn location_of(&self, key: &str) -> Named {
        Named::Exactly(format!("memory://{key}"))
    }

    fn is_s3(&self) -> bool {
        false
    }

    fn stages_as_objects(&self) -> bool {
        true
    }

    fn fence(&self) -> CopyFence {
        CopyFence::Fenced
    }

    async fn all_keys(&self) -> BTreeSet<String> {
        self.store.keys().into_iter().collect()
    }

    async fn incomplete_uploads(&self) -> BTreeSet<String> {
        self.store.uploads().into_iter().collect()
    }
}

/// A fresh bucket on one of the S3 test servers, with a raw client to inspect it.
pub struct S3 {
    server: Server,
    sdk: aws_config::SdkConfig,
    client: Client,
    bucket: String,
}

impl S3 {
    pub async fn new(server: Server, test: &str) -> Self {
        let sdk = server.sdk_config().await;
        let (client, bucket) = server.fresh_bucket(test).await;
        S3 {
            server,
            sdk,
            client,
            bucket,
        }
    }
}

fn relative(key: &str) -> &str {
    key.strip_prefix(S3_PREFIX)
        .and_then(|k| k.strip_prefix('/'))
        .unwrap_or(key)
}

#[async_trait]
impl Fixture for S3 {
    fn lake_with(&self, options: &S3Options) -> Box<dyn Lake> {
        Box::new(S3Store::from_sdk_config(
            &self.sdk,
            &self.bucket,
            S3_PREFIX,
            options,
        ))
    }

    fn options(&self) -> S3Options {
        test_s3_config()
    }

    fn location_of(&self, key: &str) -> Named {
        Named::Exactly(format!("s3://{}/{S3_PREFIX}/{key}", self.bucket))
    }

    fn is_s3(&self) -> bool {
        true
    }

    fn stages_as_objects(&self) -> bool {
        true
    }

    fn fence(&self) -> CopyFence {
        match self.server {
            Server::Seaweed => CopyFence::Fenced,
            Server::Moto => CopyFence::Ignored,
            Server::Localstack => CopyFence::Unsafe,
        }
    }

    async fn all_keys(&self) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            for o in page.expect("ListObjectsV2").contents() {
                keys.insert(relative(o.key().expect("key")).to_owned());
            }
        }
        keys
    }

    async fn incomplete_uploads(&self) -> BTreeSet<String> {
        let out = self
            .client
            .list_multipart_uploads()
            .bucket(&self.bucket)
            .send()
            .await
            .expect("ListMultipartUploads");
        assert!(
            !out.is_truncated().unwrap_or(false),
            "more uploads than one page"
        );
        out.uploads()
            .iter()
            .filter_map(|u| u.key())
            .map(|k| relative(k).to_owned())
            .collect()
    }

    async fn crc32(&self, key: &str) -> Option<String> {
        let head = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(format!("{S3_PREFIX}/{key}"))
            .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
            .send()
            .await
            .expect("HeadObject of the staged object");
        head.checksum_crc32().map(str::to_owned)
    }
}

/// S3 settings for tests: path-style, the smallest part S3 allows (so multi-part
/// paths run on small data), modest timeouts.
fn test_s3_config() -> S3Options {
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
