//! In-memory backend: a map of keys to bytes in this process, for tests and for
//! embedding the engine. No [`Location`](crate::Location) names it, so no command
//! line reaches it. It passes the store conformance suite (`conformance`) with the
//! semantics the other backends have there:
//!
//! - every write makes a new version, an ETag (`"<16 hex digits>"`) from a counter of
//!   the store, so `If-Match` never mistakes a rewrite, even of the same bytes, for the
//!   version it read;
//! - staging is laid out as on S3 with its default staging prefix
//!   (`staging/<product>/<run id>/[pass2/]<name>`): an upload in progress is no object
//!   at all (as a multipart upload is not), only a registered upload that [`keys`]
//!   does not show and [`uploads`] does; its completion stores the staging object. A
//!   dropped upload stays registered, as an incomplete upload stays on S3, until a
//!   sweep takes it;
//! - promotion is a copy of the staging object over the published name, checked
//!   against its [`PutMode`] and the run's [`Gate`] under the one lock of the store, so it
//!   is always fenced; the staging object stays until deleted;
//! - the [`Gate`] is checked as the other backends check it: its deadline before a
//!   staging starts and before it completes, its deadline and write observer right
//!   before a small write or a promotion takes effect.
//!
//! [`keys`]: MemoryStore::keys
//! [`uploads`]: MemoryStore::uploads

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};

use super::{
    Capabilities, CopyFence, Fence, Gate, Lake, Listed, Listing, ObjectMeta, ObjectReader, PutMode,
    Slot, Staged, Store, Sweep, SweepReport, Upload, Version,
};
use landing_error::{Error, Result};

/// The zone that staging lives in (S3's default `--s3-staging-prefix`).
const STAGING: &str = "staging";
/// The staging subfolder of a run's second pass ([`Slot::Second`]), as on S3.
const PASS2: &str = "pass2";

/// A store held in memory. Clones share the same objects (as clones of an S3 store
/// share its bucket); [`MemoryStore::with_gate`] and [`Lake::with_run_gate`] give
/// another handle on them whose writes pass another gate.
#[derive(Clone, Default)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
    gate: Gate,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state();
        f.debug_struct("MemoryStore")
            .field("objects", &st.objects.len())
            .field("uploads", &st.uploads.len())
            .field("gate", &self.gate)
            .finish()
    }
}

/// What every handle on one memory store shares.
#[derive(Default)]
struct State {
    objects: BTreeMap<String, Object>,
    /// Stagings in progress, by upload number: started, neither completed nor aborted.
    uploads: BTreeMap<u64, Pending>,
    /// The last version or upload number handed out.
    counter: u64,
}

struct Object {
    body: Bytes,
    etag: String,
    modified: SystemTime,
    /// The label its promotion carried ([`Staged::label`]).
    label: Option<String>,
}

/// A staging in progress: where it will be stored, and since when.
struct Pending {
    key: String,
    started: SystemTime,
}

impl Object {
    fn meta(&self) -> ObjectMeta {
        ObjectMeta {
            size: self.body.len() as u64,
            version: Version::ETag(self.etag.clone()),
        }
    }
}

impl State {
    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// Store `body` under `key` as a new version.
    fn put(&mut self, key: &str, body: Bytes) -> &Object {
        let object = Object {
            body,
            etag: format!("\"{:016x}\"", self.next()),
            modified: SystemTime::now(),
            label: None,
        };
        self.objects.insert(key.to_owned(), object);
        &self.objects[key]
    }

    /// The objects whose key starts with `prefix`, in key order.
    fn under<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a String, &'a Object)> {
        self.objects
            .range(prefix.to_owned()..)
            .take_while(move |(k, _)| k.starts_with(prefix))
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// The same store, checking `gate` before its writes (see [`Gate`]).
    pub fn with_gate(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }

    /// For tests: every stored object's key, staging objects included, in key order
    /// (what a listing of a whole bucket shows). Uploads in progress are not objects:
    /// [`MemoryStore::uploads`].
    pub fn keys(&self) -> Vec<String> {
        self.state().objects.keys().cloned().collect()
    }

    /// For tests: the staging keys of uploads in progress (started, neither completed
    /// nor aborted; a dropped upload stays), in key order (what S3's
    /// `ListMultipartUploads` shows).
    pub fn uploads(&self) -> Vec<String> {
        let st = self.state();
        let keys: BTreeSet<&String> = st.uploads.values().map(|p| &p.key).collect();
        keys.into_iter().cloned().collect()
    }

    /// The lock of the shared state. No holder panics mid-change (a write observer
    /// that panics does so before anything changed), so a poisoned lock is taken over.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start an upload into the staging key of `dest_key` by `run_id`.
    fn start_upload(
        &self,
        dest_key: &str,
        run_id: &str,
        scratch: Option<&str>,
    ) -> Result<Box<dyn Upload>> {
        let key = staging_key(dest_key, run_id, scratch);
        self.gate.before_staging(&self.location(&key))?;
        let mut st = self.state();
        let id = st.next();
        let started = SystemTime::now();
        st.uploads.insert(
            id,
            Pending {
                key: key.clone(),
                started,
            },
        );
        Ok(Box::new(MemoryUpload {
            store: self.clone(),
            id,
            buf: BytesMut::new(),
            staged: Staged {
                key,
                dest_key: dest_key.to_owned(),
                size: 0,
                label: None,
            },
        }))
    }
}

/// The staging folder of `dest_key` (ending in `/`) and its name, as on S3: the
/// destination's folder without its zone (`raw/progress/a.jsonl` →
/// `staging/progress/`), so every output of one product is swept in one folder.
fn staging_folder(dest_key: &str) -> (String, &str) {
    let (dir, name) = dest_key.rsplit_once('/').unwrap_or(("", dest_key));
    let below_zone = dir.split_once('/').map_or("", |(_, rest)| rest);
    let folder = match below_zone {
        "" => format!("{STAGING}/"),
        below => format!("{STAGING}/{below}/"),
    };
    (folder, name)
}

/// Where `run_id` stages `dest_key`: `<staging folder><run id>/[<scratch>/]<name>`.
fn staging_key(dest_key: &str, run_id: &str, scratch: Option<&str>) -> String {
    let (folder, name) = staging_folder(dest_key);
    match scratch {
        Some(s) => format!("{folder}{run_id}/{s}/{name}"),
        None => format!("{folder}{run_id}/{name}"),
    }
}

fn nanos(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

impl std::fmt::Display for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("memory:/")
    }
}

impl MemoryStore {
    /// Full human-readable location of `key`: the root and the key.
    pub fn location(&self, key: &str) -> String {
        crate::locate(self, key)
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn list(&self, prefix: &str) -> Result<Listing> {
        let folder = prefix.trim_matches('/');
        let under = match folder {
            "" => String::new(),
            f => format!("{f}/"),
        };
        let st = self.state();
        let mut listing = Listing::default();
        let mut folders = BTreeSet::new();
        for (key, object) in st.under(&under) {
            let rest = &key[under.len()..];
            match rest.split_once('/') {
                Some((dir, _)) if !dir.is_empty() => {
                    folders.insert(dir.to_owned());
                }
                // Not a name below the folder (`inbox//x`, `inbox/` itself).
                Some(_) => {}
                None if rest.is_empty() => {}
                None => listing.files.push(Listed {
                    name: rest.to_owned(),
                    meta: object.meta(),
                    modified_ns: nanos(object.modified),
                }),
            }
        }
        listing.folders = folders.into_iter().collect();
        Ok(listing)
    }

    async fn read(&self, key: &str, offset: u64) -> Result<ObjectReader> {
        let object = self
            .state()
            .objects
            .get(key)
            .map(|o| (o.body.clone(), o.meta()));
        let (body, meta) = object.ok_or_else(|| Error::NotFound {
            location: self.location(key),
        })?;
        let at = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(body.len());
        let rest = body.slice(at..);
        let size = rest.len() as u64;
        Ok(ObjectReader::new(std::io::Cursor::new(rest), size).with_version(meta.version))
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        Ok(self.state().objects.get(key).map(Object::meta))
    }

    async fn put_small(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Version> {
        let location = self.location(key);
        let mut st = self.state();
        let allowed = mode.allows(st.objects.get(key).map(|o| o.meta().version).as_ref());
        // The last instant before the write, lock held, as on a local lake: a run past
        // its lease's deadline writes nothing, whatever the condition.
        self.gate.before_write(key, &location)?;
        if !allowed {
            return Err(Error::Precondition { location });
        }
        Ok(st.put(key, body).meta().version)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.state().objects.remove(key);
        Ok(())
    }

    fn capabilities(&self) -> Capabilities {
        // Its writes live and die with this process, and each checks the deadline
        // under the store's lock at its last instant.
        Capabilities {
            instant_takeover: true,
            in_flight: None,
            multipart: false,
        }
    }
}

/// Staging laid out as on S3, promoted by a copy under the store's lock.
#[async_trait]
impl Lake for MemoryStore {
    async fn stage(&self, dest_key: &str, run_id: &str, slot: Slot) -> Result<Box<dyn Upload>> {
        // A second slot sits under the run's own staging folder, so its sweeps take it
        // like the first.
        let scratch = (slot == Slot::Second).then_some(PASS2);
        self.start_upload(dest_key, run_id, scratch)
    }

    async fn promote(&self, staged: &Staged, mode: &PutMode, _fence: Fence) -> Result<ObjectMeta> {
        // Always fenced: the check and the copy are one step under the lock.
        let location = self.location(&staged.dest_key);
        let mut st = self.state();
        let now = st.objects.get(&staged.dest_key).map(|o| o.meta().version);
        if !mode.allows(now.as_ref()) {
            return Err(Error::Precondition { location });
        }
        self.gate.before_write(&staged.dest_key, &location)?;
        let Some(body) = st.objects.get(&staged.key).map(|o| o.body.clone()) else {
            return Err(Error::Conflict(format!(
                "conflict: this run's staging object {} is gone (another run swept it after this run's lease was lost); nothing was published",
                self.location(&staged.key)
            )));
        };
        if body.len() as u64 != staged.size {
            return Err(Error::store(
                "verify",
                location,
                format!(
                    "the staging object has {} bytes, {} were staged",
                    body.len(),
                    staged.size
                ),
            ));
        }
        let object = st.put(&staged.dest_key, body);
        let meta = object.meta();
        let key = staged.dest_key.clone();
        if let Some(o) = st.objects.get_mut(&key) {
            o.label = staged.label.clone();
        }
        Ok(meta)
    }

    async fn labelled(&self, key: &str) -> Result<Option<(ObjectMeta, Option<String>)>> {
        let st = self.state();
        Ok(st.objects.get(key).map(|o| (o.meta(), o.label.clone())))
    }

    async fn unsettled(&self, _folders: &[String]) -> Result<Option<Vec<String>>> {
        // Readers of every lease are cheap here.
        Ok(None)
    }

    async fn fencing(&self, _dest_key: &str, _run_id: &str) -> Result<Fence> {
        // Promotion checks the destination and copies under one lock.
        Ok(Fence::new(CopyFence::Fenced))
    }

    fn with_run_gate(&self, gate: Gate) -> Arc<dyn Lake> {
        Arc::new(self.clone().with_gate(gate))
    }

    async fn leftovers(&self, folders: &[String]) -> Result<Vec<String>> {
        // Staging objects in a run's folder of each product, then uploads in progress.
        let mut staging: Vec<String> = Vec::new();
        for folder in folders {
            let (f, _) = staging_folder(&format!("{folder}/"));
            if !staging.contains(&f) {
                staging.push(f);
            }
        }
        let st = self.state();
        let mut out = Vec::new();
        for folder in &staging {
            for (key, _) in st.under(folder) {
                if key[folder.len()..].contains('/') {
                    out.push(self.location(key));
                }
            }
            for p in st
                .uploads
                .values()
                .filter(|p| p.key.starts_with(folder.as_str()))
            {
                let started = time::OffsetDateTime::from(p.started)
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_else(|_| "at an unknown time".to_owned());
                out.push(format!(
                    "{} (incomplete upload, started {started})",
                    self.location(&p.key)
                ));
            }
        }
        Ok(out)
    }

    async fn sweep(&self, dest_keys: &[String], run_id: &str, which: Sweep) -> Result<SweepReport> {
        // Staging folder → the staged names swept in it (one folder per product).
        let mut folders: Vec<(String, HashSet<&str>)> = Vec::new();
        for key in dest_keys {
            let (folder, name) = staging_folder(key);
            match folders.iter_mut().find(|(f, _)| *f == folder) {
                Some((_, names)) => {
                    names.insert(name);
                }
                None => folders.push((folder, HashSet::from([name]))),
            }
        }
        let now = SystemTime::now();
        let mut report = SweepReport::default();
        let mut st = self.state();
        for (folder, names) in &folders {
            // `<folder><run id>/[<scratch>/]<name>`: the run is the first segment.
            let mut eligible = |key: &str, modified: SystemTime| -> bool {
                let Some(in_folder) = key.strip_prefix(folder.as_str()) else {
                    return false;
                };
                let owner = in_folder.split('/').next().unwrap_or_default();
                let name = in_folder.rsplit('/').next().unwrap_or_default();
                if !names.contains(name) {
                    return false;
                }
                let taken = which.takes(run_id, owner, Some(modified), now);
                report.kept += u64::from(!taken && which.leaves(run_id, owner));
                taken
            };
            let uploads = st.uploads.len();
            st.uploads.retain(|_, p| !eligible(&p.key, p.started));
            let aborted = (uploads - st.uploads.len()) as u64;
            let taken: Vec<String> = st
                .under(folder)
                .filter(|(key, object)| eligible(key, object.modified))
                .map(|(key, _)| key.clone())
                .collect();
            for key in &taken {
                st.objects.remove(key);
            }
            report.aborted_uploads += aborted;
            report.deleted_objects += taken.len() as u64;
        }
        Ok(report)
    }
}

/// A staging being written: its bytes held by the handle until it completes, its
/// upload registered in the store (a leftover if the handle is dropped).
struct MemoryUpload {
    store: MemoryStore,
    id: u64,
    buf: BytesMut,
    staged: Staged,
}

#[async_trait]
impl Upload for MemoryUpload {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        self.buf.extend_from_slice(&data);
        self.staged.size += data.len() as u64;
        Ok(())
    }

    async fn complete(self: Box<Self>) -> Result<Staged> {
        let location = self.store.location(&self.staged.key);
        let mut st = self.store.state();
        if let Err(e) = self.store.gate.before_staging(&location) {
            // Past the deadline: our own upload goes, so no sweep has to find it.
            st.uploads.remove(&self.id);
            return Err(e);
        }
        if st.uploads.remove(&self.id).is_none() {
            return Err(Error::store(
                "complete staging",
                location,
                "the upload is gone (a sweep aborted it)",
            ));
        }
        st.put(&self.staged.key, self.buf.freeze());
        Ok(self.staged)
    }

    async fn abort(self: Box<Self>) -> Result<()> {
        self.store.state().uploads.remove(&self.id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    const RUN: &str = "20260301T020304Z-0a1b2c3d";

    /// Versions come from a counter: a rewrite of the same bytes is a new version, so
    /// a condition on the one read before it fails.
    #[tokio::test]
    async fn every_write_is_a_new_version() {
        let store = MemoryStore::new();
        let key = "checkpoints/p/a.json";
        let body = Bytes::from_static(b"{}");
        let v1 = store
            .put_small(key, body.clone(), PutMode::Create)
            .await
            .unwrap();
        let v2 = store
            .put_small(key, body.clone(), PutMode::Update(v1.clone()))
            .await
            .unwrap();
        assert_ne!(v1, v2);
        let stale = store.put_small(key, body, PutMode::Update(v1)).await;
        assert!(
            matches!(stale, Err(Error::Precondition { .. })),
            "{stale:?}"
        );
        let head = store.head(key).await.unwrap().expect("present");
        assert_eq!(head.version, v2);
        assert!(matches!(&v2, Version::ETag(_)), "{v2:?}");
        assert_eq!(
            crate::get_small(&store, key)
                .await
                .unwrap()
                .expect("present")
                .version,
            v2
        );
    }

    /// An upload is no object until it completes; promotion copies the staging
    /// object, which stays until deleted; a dropped upload stays until swept.
    #[tokio::test]
    async fn staging_is_an_upload_then_an_object_then_a_copy() {
        let store = MemoryStore::new();
        let mut up = store
            .stage("raw/p/a.jsonl", RUN, Slot::First)
            .await
            .unwrap();
        up.write(Bytes::from_static(b"{\"x\":1}\n")).await.unwrap();
        let key = format!("staging/p/{RUN}/a.jsonl");
        assert_eq!((store.keys(), store.uploads()), (vec![], vec![key.clone()]));
        let staged = up.complete().await.unwrap();
        assert_eq!((store.keys(), store.uploads()), (vec![key.clone()], vec![]));
        let fence = store.fencing("raw/p/a.jsonl", RUN).await.unwrap();
        let meta = store
            .promote(&staged, &PutMode::Create, fence)
            .await
            .unwrap();
        assert_eq!(meta.size, 8);
        assert_eq!(store.keys(), ["raw/p/a.jsonl".to_owned(), key.clone()]);
        store.delete(&staged.key).await.unwrap();
        assert_eq!(store.keys(), ["raw/p/a.jsonl"]);
        let again = store.promote(&staged, &PutMode::Create, fence).await;
        assert!(
            matches!(again, Err(Error::Precondition { .. })),
            "{again:?}"
        );

        let dropped = store
            .stage(&staged.dest_key, RUN, Slot::Second)
            .await
            .unwrap();
        drop(dropped);
        assert_eq!(store.uploads(), [format!("staging/p/{RUN}/pass2/a.jsonl")]);
        let left = store.leftovers(&["raw/p".to_owned()]).await.unwrap();
        assert_eq!(left.len(), 1, "{left:?}");
        let dest = ["raw/p/a.jsonl".to_owned()];
        let report = store.sweep(&dest, RUN, Sweep::Own).await.unwrap();
        assert_eq!((report.aborted_uploads, report.deleted_objects), (1, 0));
        assert!(store.uploads().is_empty());
    }

    /// A sweep that aborted an upload makes its completion fail, storing nothing.
    #[tokio::test]
    async fn a_swept_upload_does_not_complete() {
        let store = MemoryStore::new();
        let up = store
            .stage("raw/p/a.jsonl", RUN, Slot::First)
            .await
            .unwrap();
        let others = Sweep::Others {
            older_than: Duration::ZERO,
        };
        let report = store
            .sweep(&["raw/p/a.jsonl".to_owned()], "another", others)
            .await
            .unwrap();
        assert_eq!(report.aborted_uploads, 1);
        assert!(up.complete().await.is_err());
        assert!(store.keys().is_empty());
    }

    /// A run's handle shares the objects; past its deadline its writes fail, and
    /// another handle's do not.
    #[tokio::test]
    async fn a_run_gate_stops_only_its_own_writes() {
        let store = MemoryStore::new();
        let gate = Gate::default();
        let run = store.with_run_gate(gate.clone());
        let body = Bytes::from_static(b"held");
        run.put_small("locks/p/a.lock", body.clone(), PutMode::Create)
            .await
            .unwrap();
        assert!(store.head("locks/p/a.lock").await.unwrap().is_some());
        gate.deadline.set(Some(Instant::now()));
        let late = run
            .put_small("locks/p/b.lock", body.clone(), PutMode::Overwrite)
            .await;
        assert!(matches!(late, Err(Error::Conflict(_))), "{late:?}");
        assert!(run.stage("raw/p/a.jsonl", RUN, Slot::First).await.is_err());
        store
            .put_small("locks/p/b.lock", body, PutMode::Overwrite)
            .await
            .unwrap();
        assert_eq!(store.keys(), ["locks/p/a.lock", "locks/p/b.lock"]);
    }
}
