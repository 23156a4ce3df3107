//! The storage boundary, in two traits. [`Store`] holds the object primitives, the
//! size of `object_store`'s: list, read, head, small conditional writes, delete.
//! [`Lake`] is the run's staging layer over them: staging invisible until promoted,
//! the fenced promotion, a second staging for spilled runs, and the sweeps of
//! staging that interrupted runs left. The engine reads its inputs through a
//! `Store` and writes the lake through a `Lake`, so the run contract is written
//! once. Provider quirks (status codes, error bodies, encodings) are normalised
//! inside each backend into [`Error`] variants.
//!
//! Keys are `/`-separated and relative to the store's root (a folder, an S3 bucket
//! plus prefix, or a map in memory).
//!
//! Map:
//! - `location.rs`: [`Location`], a path or an S3 bucket and key;
//! - `gate.rs`: the run's write [`Gate`] (its lease [`Deadline`], its bounded local
//!   locks and the [`WriteObserver`] of drills and tests);
//! - `reader.rs`: [`ObjectReader`], a streaming read, in chunks or as an `AsyncRead`,
//!   and a local file's as blocking reads ([`BlockingRead`]);
//! - this file: [`open`], the [`Store`] and [`Lake`] traits and the values they
//!   speak in ([`ObjectMeta`], [`Version`], [`PutMode`], [`Staged`], [`Fence`]),
//!   and [`get_small`] over [`Store::read`];
//! - [`local`]: a folder on a local disk (temp file, fsync, rename; compare-and-swap
//!   under a lock file);
//! - [`s3`]: S3-compatible stores through aws-sdk-s3 (multipart staging,
//!   conditional writes, the copy fence probed once per store);
//! - [`memory`]: a map in this process, for tests and embedding (no [`Location`]
//!   names it, so no command line reaches it).
//! - `conformance` (feature `conformance`): the suite every backend must pass.
//!
//! The crate knows nothing of runs' progress, settings or the lake's folder names:
//! it builds only on `landing-error`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;

use landing_error::{Error, Result};

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod gate;
pub mod local;
mod location;
pub mod memory;
mod reader;
pub mod s3;

pub use gate::{Deadline, Gate, WriteEvent, WriteObserver, DEFAULT_LOCK_WAIT};
pub use location::Location;
pub use reader::{BlockingRead, ObjectReader};

use local::LocalStore;
use s3::{S3Options, S3Store};

/// Open the store rooted at `loc` to write: a folder (created if missing, so a first
/// run on a new machine needs no setup) or an S3 bucket plus prefix, configured by `s3`.
/// Writes are not tied to a lease (run records, the drill's own bookkeeping).
pub async fn open(loc: &Location, s3: &S3Options) -> Result<Arc<dyn Lake>> {
    open_gated(loc, s3, Gate::default()).await
}

/// [`open`] for one run: every write passes `gate` first.
pub async fn open_gated(loc: &Location, s3: &S3Options, gate: Gate) -> Result<Arc<dyn Lake>> {
    if let Location::Local(dir) = loc {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::store("create lake folder", dir.display().to_string(), e))?;
    }
    open_with(loc, s3, gate).await
}

/// Open the store rooted at `loc` without creating anything, to read: the input
/// side (an input's folder, an inbox). Listing the root of a folder or bucket that
/// does not exist is `NotFound`.
pub async fn open_read_only(loc: &Location, s3: &S3Options) -> Result<Arc<dyn Store>> {
    let store: Arc<dyn Store> = open_with(loc, s3, Gate::default()).await?;
    Ok(store)
}

/// [`open_read_only`] for a lake that is inspected, not written (`status`,
/// `verify`): its objects, and the leftovers of its runs' staging.
pub async fn open_lake_read_only(loc: &Location, s3: &S3Options) -> Result<Arc<dyn Lake>> {
    open_with(loc, s3, Gate::default()).await
}

async fn open_with(loc: &Location, s3: &S3Options, gate: Gate) -> Result<Arc<dyn Lake>> {
    Ok(match loc {
        Location::Local(dir) => Arc::new(LocalStore::new(dir.clone()).with_gate(gate)),
        Location::S3 { bucket, key } => {
            Arc::new(S3Store::from_env(bucket, key, s3).await?.with_gate(gate))
        }
    })
}

/// The listing of `store`, opened at the folder or prefix `loc` that a run is told
/// to read (`what` names the flag, `--inbox`). One that does not exist, or a local
/// folder that cannot be read (a typo, an unmounted volume, a permission), is a
/// configuration error naming it; an S3 failure stays a store error, which a retry
/// may cure.
pub async fn list_root(store: &dyn Store, loc: &Location, what: &str) -> Result<Listing> {
    match store.list("").await {
        Err(Error::NotFound { .. }) => Err(Error::Config(format!(
            "{what} {loc}: no such folder or bucket"
        ))),
        Err(Error::Store {
            op,
            location,
            source,
        }) if matches!(loc, Location::Local(_)) => Err(Error::Config(format!(
            "{what} {loc}: cannot {op} {location}: {source}"
        ))),
        other => other,
    }
}

/// What the skip rule compares: the published object's size and its version marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub size: u64,
    pub version: Version,
}

/// Which version of an object this is, in the store's own terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// S3 ETag as returned by the server (quotes included).
    ETag(String),
    /// A local file's identity. The ctime and inode change on every write, rename or
    /// metadata change and no tool can set them back, so a same-size copy made with
    /// `cp -p` or `rsync -a` (which restore the mtime) is told apart from the original.
    File {
        mtime_ns: i128,
        ino: u64,
        ctime_ns: i128,
    },
}

impl Version {
    /// What this kind of marker is called in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Version::ETag(_) => "ETag",
            Version::File { .. } => "file identity",
        }
    }
}

impl ObjectMeta {
    /// The S3 ETag, if this is an S3 object.
    pub fn etag(&self) -> Option<&str> {
        match &self.version {
            Version::ETag(e) => Some(e),
            Version::File { .. } => None,
        }
    }
}

/// Whether a promotion can be fenced (see [`Lake::promote`]), as probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFence {
    /// The store honours the destination condition and keeps the bytes on a 412.
    Fenced,
    /// The store ignores destination conditions on copies (which S3-compatible
    /// servers do: the S3 backend's module doc).
    Ignored,
    /// The store answers 412 but changes the destination anyway.
    Unsafe,
    /// Conditional copies switched off (`--s3-conditional-copy off`).
    Off,
}

impl std::fmt::Display for CopyFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CopyFence::Fenced => "fenced",
            CopyFence::Ignored => "not fenced (the store ignores copy conditions)",
            CopyFence::Unsafe => "conditional copy unsafe (412 but the destination changed)",
            CopyFence::Off => "not fenced (conditional copies off)",
        })
    }
}

/// What [`Lake::fencing`] found on one store, and the proof that it ran: only a
/// backend makes one, and [`Lake::promote`] takes it, so no promotion can be sent
/// before the store's copy conditions were probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence(CopyFence);

impl Fence {
    /// Private to `store`: backends make fences, callers only pass them on.
    fn new(verdict: CopyFence) -> Self {
        Fence(verdict)
    }

    pub fn verdict(self) -> CopyFence {
        self.0
    }
}

impl std::fmt::Display for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// What holding a lease on a store must allow for (see the engine's `lease::LeaseOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// A holder that provably died on this machine can be taken over at once: its
    /// writes died with it (a local lake). On S3 a dead holder's request may still
    /// be executing on the server.
    pub instant_takeover: bool,
    /// How long a write sent before the lease's deadline can still take effect on
    /// the store's side (S3: one attempt's timeout). `None` where every write checks
    /// the deadline under a lock at its last instant (a local lake).
    pub in_flight: Option<Duration>,
    /// A staged write goes up in parts (an S3 multipart upload): the write observer
    /// sees each part end, and an upload in progress is no object at all, not even
    /// under its staging key. A local lake writes a hidden temp file instead.
    pub multipart: bool,
}

/// One entry of a [`Store::list`]: a file or object directly under the listed folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The name below the listed folder (never holds `/`).
    pub name: String,
    /// Size and identity, as [`Store::head`] returns them for this key.
    pub meta: ObjectMeta,
    /// Last modification, nanoseconds since the Unix epoch (`--min-age`).
    pub modified_ns: i128,
}

/// What lies directly under a folder (local) or `prefix/` (S3, `Delimiter=/`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Files (objects), in name order.
    pub files: Vec<Listed>,
    /// Sub-folders (common prefixes), names only, in name order.
    pub folders: Vec<String>,
}

/// How a write treats what is already under its key: the one condition of small
/// writes (checkpoint, lease, log entry) and of promotions. A false condition is
/// `Precondition`, whatever the provider's status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutMode {
    /// Write whatever is there.
    Overwrite,
    /// Create only: nothing may be under the key (`If-None-Match: *`).
    Create,
    /// Replace only this version, as read earlier (`If-Match: <etag>`).
    Update(Version),
}

impl PutMode {
    /// The mode that replaces exactly what `meta` describes (a head or a listing):
    /// `Create` where nothing was there.
    pub fn replacing(meta: Option<&ObjectMeta>) -> Self {
        meta.map_or(PutMode::Create, |m| PutMode::Update(m.version.clone()))
    }

    /// Would this mode write over `current` (its version, `None` if absent)?
    pub fn allows(&self, current: Option<&Version>) -> bool {
        match self {
            PutMode::Overwrite => true,
            PutMode::Create => current.is_none(),
            PutMode::Update(v) => current == Some(v),
        }
    }
}

/// A small object read whole, with its version for [`PutMode::Update`].
#[derive(Debug, Clone)]
pub struct Versioned {
    pub bytes: Bytes,
    pub version: Version,
}

/// How many times [`get_small`] reads an object whose body failed mid-read. The S3
/// SDK retries a request only until its response head arrives; a body that then
/// stalls or breaks is not retried (seen on LocalStack under load with a lease body).
const SMALL_READ_ATTEMPTS: u32 = 3;

/// Read a small object whole with its version, or `None` if absent. The version and
/// the bytes come from one read, so they describe one version.
pub async fn get_small(store: &dyn Store, key: &str) -> Result<Option<Versioned>> {
    let mut attempt = 1;
    loop {
        let mut reader = match store.read(key, 0).await {
            Ok(r) => r,
            Err(Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let version = reader.version.clone().ok_or_else(|| {
            Error::store("read", store.location(key), "the store named no version")
        })?;
        match reader.read_all().await {
            Ok(bytes) => return Ok(Some(Versioned { bytes, version })),
            Err(e) if attempt < SMALL_READ_ATTEMPTS => {
                tracing::debug!(error = %e, attempt, "small object body failed; reading it again");
                attempt += 1;
            }
            Err(e) => return Err(Error::store("read", store.location(key), e)),
        }
    }
}

/// Which staging of a destination a run writes: a spilled run's second pass stages
/// a filtered copy beside the first while it still reads the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    First,
    Second,
}

/// A completed staging object, not yet visible under its published name.
#[derive(Debug, Clone)]
pub struct Staged {
    /// Key of the staged bytes (the temp file or the staging object).
    pub key: String,
    pub dest_key: String,
    pub size: u64,
    /// A short printable note the promote stores with the published object, read
    /// back by [`Lake::labelled`] (S3 user metadata, a local file's extended
    /// attribute): set by the caller before [`Lake::promote`], at most
    /// [`LABEL_MAX`] bytes.
    pub label: Option<String>,
}

/// The longest [`Staged::label`]: S3 allows 2 KiB of user metadata per object, and
/// the run id takes some of it.
pub const LABEL_MAX: usize = 1800;

/// Which leftovers a sweep removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Other runs' leftovers at least this old; never the current run's own.
    Others { older_than: Duration },
    /// The current run's own staging, after it was interrupted.
    Own,
}

impl Sweep {
    /// Does this sweep by run `run_id` take a leftover written by run `owner`, last
    /// modified at `modified`? Both backends ask here, each after parsing its own
    /// names. An unknown age is never old enough; a time ahead of this host's clock
    /// is no age at all.
    pub fn takes(
        self,
        run_id: &str,
        owner: &str,
        modified: Option<SystemTime>,
        now: SystemTime,
    ) -> bool {
        match self {
            Sweep::Own => owner == run_id,
            Sweep::Others { older_than } => {
                owner != run_id
                    && modified.is_some_and(|t| {
                        now.duration_since(t).unwrap_or(Duration::ZERO) >= older_than
                    })
            }
        }
    }

    /// Is a leftover of run `owner` that this sweep does not take one that stays
    /// behind (another run's), rather than the sweeping run's own?
    pub fn leaves(self, run_id: &str, owner: &str) -> bool {
        matches!(self, Sweep::Others { .. }) && owner != run_id
    }
}

/// What a sweep removed, and what it found but left.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    pub aborted_uploads: u64,
    pub deleted_objects: u64,
    /// Other runs' leftovers of these destinations that stay: younger than
    /// `older_than`, or (local) still locked by a live writer. A run that leaves
    /// some does not release its lease clean (see the engine's `lease::Inherited`).
    pub kept: u64,
}

/// The object primitives: what a backend must offer to be read and written at all,
/// the size of `object_store`'s `ObjectStore`. Inputs are read through it
/// ([`open_read_only`]), and so are the lake's checkpoints, leases and run records.
/// Nothing here knows of runs: no run ids, no staging, no sweeps ([`Lake`]).
/// A store displays as its root, for messages (`location` of a key: the root and the key).
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Display {
    /// What lies directly under the folder `prefix` ("" for the root), without
    /// recursion: files with their size and identity, and sub-folder names. A
    /// missing folder is an empty listing. S3 pages through `ListObjectsV2`.
    async fn list(&self, prefix: &str) -> Result<Listing>;

    /// Remove every object under the folder `prefix` ("" for the root): a scratch
    /// tree, such as a drill's, never a zone of the lake. This default walks
    /// [`Store::list`] and deletes each object; a local lake removes the folder
    /// whole, and the folders above it (below the root) that it leaves empty.
    async fn remove_tree(&self, prefix: &str) -> Result<()> {
        let under = |folder: &str, name: &str| {
            if folder.is_empty() {
                name.to_owned()
            } else {
                format!("{folder}/{name}")
            }
        };
        let mut folders = vec![prefix.to_owned()];
        while let Some(folder) = folders.pop() {
            let listing = self.list(&folder).await?;
            for f in &listing.files {
                self.delete(&under(&folder, &f.name)).await?;
            }
            folders.extend(listing.folders.iter().map(|d| under(&folder, d)));
        }
        Ok(())
    }

    /// Open `key` for one streaming read of its bytes from `offset` on (0 for the
    /// whole object; below its size); the reader's size is the bytes left, and its
    /// version the version read. `NotFound` if absent.
    async fn read(&self, key: &str, offset: u64) -> Result<ObjectReader>;

    /// Size and change marker of `key`, or `None` if absent.
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>>;

    /// Write a small object in `mode`; returns its new version.
    async fn put_small(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Version>;

    /// Delete `key`; absent is not an error.
    async fn delete(&self, key: &str) -> Result<()>;

    /// What holding a lease on this store must allow for.
    fn capabilities(&self) -> Capabilities;
}

impl dyn Store + '_ {
    /// Full human-readable location of a key, for messages and summaries: the
    /// store's root and the key.
    pub fn location(&self, key: &str) -> String {
        locate(self, key)
    }
}

impl dyn Lake + '_ {
    /// The location of a key on a lake, as on a store.
    pub fn location(&self, key: &str) -> String {
        locate(self, key)
    }
}

pub(crate) fn locate(root: &dyn std::fmt::Display, key: &str) -> String {
    format!("{root}/{key}")
}

/// The run's staging layer over the primitives: how a run writes the lake under the
/// run contract. Outputs are staged where no reader looks, under names that carry the
/// run id, then promoted over their published name in one fenced step; what an
/// interrupted run leaves is found ([`Lake::leftovers`]) and swept by run and age
/// ([`Lake::sweep`]). Where staged bytes live is each backend's business.
#[async_trait]
pub trait Lake: Store {
    /// Start staging the output that run `run_id` will publish at `dest_key`; no reader
    /// can see it until [`Lake::promote`]. Where staged bytes live is the backend's
    /// business (a hidden temp file beside the destination, or an S3 staging key); both
    /// carry the run id, so [`Lake::sweep`] can tell runs apart. The second `slot`
    /// stages beside the first (a spilled run's filtered copy), which stays readable
    /// until deleted; both are swept as the run's staging.
    async fn stage(&self, dest_key: &str, run_id: &str, slot: Slot) -> Result<Box<dyn Upload>>;

    /// Publish staged bytes under their destination atomically (a reader sees the old
    /// object or the new one), make it durable, verify it, and return its metadata.
    /// `mode` fences the write: if the destination is no longer what the run saw
    /// when it decided, nothing is replaced and the answer is `Precondition` (where
    /// `fence`, from [`Lake::fencing`] on this store, says a copy can be fenced).
    /// Once the checkpoint is written, the run deletes the staged key
    /// ([`Store::delete`]).
    async fn promote(&self, staged: &Staged, mode: &PutMode, fence: Fence) -> Result<ObjectMeta>;

    /// Whether [`Lake::promote`] is fenced on this store: probed once per store
    /// value, then kept in it. A probe writes only scratch objects in the staging of
    /// `dest_key` by `run_id`, so a sweep removes them if the run dies mid-probe.
    async fn fencing(&self, dest_key: &str, run_id: &str) -> Result<Fence>;

    /// The object at `key` and the label its promote stored with it
    /// ([`Staged::label`]; `None` if the promote carried none, or the filesystem
    /// keeps no extended attributes); `None` if there is no object.
    async fn labelled(&self, key: &str) -> Result<Option<(ObjectMeta, Option<String>)>>;

    /// The names (last key segment) of staged objects that runs left under the
    /// staging of `folders`, running or dead: where a run that died after a promote
    /// and before its cleanup is to be looked for. `None` where a promote consumes
    /// the staged bytes (a local lake renames its temp file), so staging cannot say.
    async fn unsettled(&self, folders: &[String]) -> Result<Option<Vec<String>>>;

    /// The same store (same client, same copy-fence verdict) whose writes pass `gate`:
    /// one run's handle on a lake that an inbox run opened once for all its inputs.
    fn with_run_gate(&self, gate: Gate) -> Arc<dyn Lake>;

    /// Leftovers of writes into `folders` that a sweep would remove at any age (staging
    /// objects and incomplete multipart uploads on S3; temp files, and guard files an
    /// earlier version kept beside published names, on a local lake), as locations:
    /// what `landing status` reports. Reads only.
    async fn leftovers(&self, folders: &[String]) -> Result<Vec<String>>;

    /// Remove leftovers that writing `dest_keys` may have left (incomplete uploads,
    /// staging objects, temp files): other runs' leftovers old enough, or `run_id`'s own.
    async fn sweep(&self, dest_keys: &[String], run_id: &str, which: Sweep) -> Result<SweepReport>;
}

/// An output being staged. Bytes are written in order; nothing is visible to readers.
#[async_trait]
pub trait Upload: Send {
    async fn write(&mut self, data: Bytes) -> Result<()>;
    /// Make the staged bytes complete and durable.
    async fn complete(self: Box<Self>) -> Result<Staged>;
    /// Drop everything staged so far.
    async fn abort(self: Box<Self>) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_take_their_own_leftovers_or_old_ones_of_others() {
        let now = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let others = Sweep::Others { older_than: hour };
        let old = Some(now - 2 * hour);
        assert!(Sweep::Own.takes("r1", "r1", None, now));
        assert!(!Sweep::Own.takes("r1", "r2", old, now));
        assert!(others.takes("r1", "r2", old, now));
        assert!(!others.takes("r1", "r1", old, now), "never the run's own");
        assert!(!others.takes("r1", "r2", Some(now), now), "too young");
        assert!(!others.takes("r1", "r2", None, now), "unknown age");
        let any_age = Sweep::Others {
            older_than: Duration::ZERO,
        };
        assert!(
            any_age.takes("r1", "r2", Some(now + hour), now),
            "a time ahead of this clock is age zero"
        );
    }
}
