//! Listings: one folder level (`Delimiter=/`), the leftovers `landing status`
//! reports, and the sweep of staging objects and incomplete multipart uploads.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use aws_smithy_types::DateTime;

use super::error::{content_length, map_err, protocol, Cond};
use super::upload::abort_upload;
use super::S3Store;
use crate::{Listed, Listing, ObjectMeta, Sweep, SweepReport, Version};
use landing_error::Result;

impl S3Store {
    /// [`Store::list`]: `ListObjectsV2` with `Delimiter=/` under `prefix/`, every page
    /// (1,000 keys each) followed, so sub-"folders" come back as common prefixes and
    /// are never descended into.
    pub(super) async fn list_prefix(&self, prefix: &str) -> Result<Listing> {
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
                let modified_ns = object.last_modified().map_or(0, DateTime::as_nanos);
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

    /// The staging folders of `folders` (one per product).
    fn staging_folders(&self, folders: &[String]) -> Vec<String> {
        let mut staging: Vec<String> = Vec::new();
        for folder in folders {
            let (f, _) = self.staging_folder(&format!("{folder}/"));
            if !staging.contains(&f) {
                staging.push(f);
            }
        }
        staging
    }

    /// Completed staging objects of `folders`, as full keys (incomplete uploads are
    /// not objects), from one listing per product without a delimiter: a server that
    /// keeps emptied run folders (SeaweedFS lists them as common prefixes) costs no
    /// request per folder.
    pub(super) async fn staged_keys(&self, folders: &[String]) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for folder in &self.staging_folders(folders) {
            let under = self.full_key(folder);
            let loc = self.loc_full(&under);
            let mut pages = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&under)
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| map_err("ListObjectsV2", &loc, e, Cond::None))?;
                out.extend(
                    page.contents()
                        .iter()
                        .filter_map(|o| o.key().map(str::to_owned)),
                );
            }
        }
        Ok(out)
    }

    async fn staged_in(&self, folder: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for run in self.list_prefix(folder).await?.folders {
            let run_folder = format!("{folder}{run}");
            let listing = self.list_prefix(&run_folder).await?;
            // A second pass stages under the run's `pass2/` (`Slot::Second`).
            let pass2 = format!("{run_folder}/{}", super::PASS2);
            let second = if listing.folders.iter().any(|d| d == super::PASS2) {
                self.list_prefix(&pass2).await?.files
            } else {
                Vec::new()
            };
            let files = listing
                .files
                .iter()
                .map(|f| format!("{run_folder}/{}", f.name));
            out.extend(files.chain(second.iter().map(|f| format!("{pass2}/{}", f.name))));
        }
        Ok(out)
    }

    /// [`crate::Lake::leftovers`]: staging objects and incomplete uploads.
    pub(super) async fn staging_leftovers(&self, folders: &[String]) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for folder in &self.staging_folders(folders) {
            for key in self.staged_in(folder).await? {
                out.push(self.loc_full(&self.full_key(&key)));
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

    /// [`crate::Lake::sweep`]: incomplete uploads and staging objects of the
    /// destinations' staging folders that [`Sweep::takes`].
    pub(super) async fn sweep_staging(
        &self,
        dest_keys: &[String],
        run_id: &str,
        which: Sweep,
    ) -> Result<SweepReport> {
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
        let now = SystemTime::now();
        let mut report = SweepReport::default();
        for (folder, names) in &folders {
            let prefix = self.full_key(folder);
            let kept = AtomicU64::new(0);
            // `<folder><run id>/[<scratch>/]<name>`: the run is the first segment.
            let eligible = |full: &str, when: Option<&DateTime>| -> bool {
                let Some(in_folder) = self
                    .relative_key(full)
                    .and_then(|k| k.strip_prefix(folder.as_str()))
                else {
                    return false;
                };
                let owner = in_folder.split('/').next().unwrap_or_default();
                let name = in_folder.rsplit('/').next().unwrap_or_default();
                let modified = when.and_then(|t| SystemTime::try_from(*t).ok());
                if !names.contains(name) {
                    return false;
                }
                let taken = which.takes(run_id, owner, modified, now);
                if !taken && which.leaves(run_id, owner) {
                    kept.fetch_add(1, Ordering::Relaxed);
                }
                taken
            };
            report.aborted_uploads += self.sweep_uploads(&prefix, &eligible).await?;
            report.deleted_objects += self.sweep_objects(&prefix, &eligible).await?;
            report.kept += kept.load(Ordering::Relaxed);
        }
        Ok(report)
    }

    /// Abort the incomplete uploads under `prefix` that `eligible` accepts.
    async fn sweep_uploads(
        &self,
        prefix: &str,
        eligible: &(dyn Fn(&str, Option<&DateTime>) -> bool + Sync),
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
        eligible: &(dyn Fn(&str, Option<&DateTime>) -> bool + Sync),
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

/// One incomplete multipart upload, as `ListMultipartUploads` describes it.
struct PendingUpload {
    /// The full key.
    key: String,
    id: String,
    initiated: Option<DateTime>,
}

/// ETags as HeadObject returns them (quoted); some servers list them bare.
fn quoted(etag: &str) -> String {
    if etag.starts_with('"') {
        etag.to_owned()
    } else {
        format!("\"{etag}\"")
    }
}
