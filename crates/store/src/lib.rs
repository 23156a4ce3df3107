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
//! - `reader.rs`: [`ObjectReader`], a streaming read, in chunks or as an `AsyncRead`,
//!   and a local file's as blocking reads ([`BlockingRead`]);
//! - this file: [`open`], the [`Store`] and [`Lake`] traits and the values they
//!   speak in ([`ObjectMeta`], [`Version`], [`Condition`], [`Staged`], [`Fence`]),
//!   and the run's write [`Gate`] (its lease deadline, its bounded local locks and
//!   the [`WriteObserver`] of drills and tests);
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
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;

use landing_error::{Error, Result};

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod local;
mod location;
pub mod memory;
mod reader;
pub mod s3;

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

/// The instant before which a run's writes must start: its lease's deadline (see
/// the engine's `lease`). The lease moves it on every renewal; unset, nothing is checked.
#[derive(Debug, Clone, Default)]
pub struct Deadline(Arc<std::sync::Mutex<Option<Instant>>>);

impl Deadline {
    pub fn set(&self, at: Option<Instant>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = at;
    }

    pub fn get(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True once the deadline is set and past.
    pub fn passed(&self) -> bool {
        self.get().is_some_and(|d| Instant::now() >= d)
    }
}

/// How long a local write waits for a file lock held by another process unless told
/// otherwise: far above a healthy holder's hold (one rename and fsync).
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Who hears of a run's writes from inside a backend: the crash and freeze points of
/// drills and tests, handed down by the engine in the run's [`Gate`]. The store
/// knows nothing of what they do; a normal run has no observer.
pub trait WriteObserver: Send + Sync + std::fmt::Debug {
    /// The last instant before the write of `key` (relative to the store's root)
    /// takes effect, before the gate checks the deadline once more.
    fn before_write(&self, key: &str);
    /// Right after part `number` of a multipart staging upload was acknowledged.
    fn after_part(&self, number: u32);
}

/// What a backend checks at the last instant before a write reaches readers, the
/// checkpoint or the lease (on a local lake: while it holds the file lock; on S3: right
/// before the request). A run that was frozen (SIGSTOP, a paused VM, a stalled mount)
/// past its lease's deadline then writes nothing when it resumes. Also how long a
/// local file lock is waited for before the write answers busy, so a frozen holder
/// never blocks another run, and the run's [`WriteObserver`], if any.
#[derive(Debug, Clone)]
pub struct Gate {
    pub deadline: Deadline,
    pub lock_wait: Duration,
    observer: Option<Arc<dyn WriteObserver>>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate::new(Deadline::default(), DEFAULT_LOCK_WAIT)
    }
}

impl Gate {
    pub fn new(deadline: Deadline, lock_wait: Duration) -> Self {
        Gate {
            deadline,
            lock_wait,
            observer: None,
        }
    }

    /// The same gate, its writes told to `observer` (drills and tests).
    pub fn observed_by(mut self, observer: Option<Arc<dyn WriteObserver>>) -> Self {
        self.observer = observer;
        self
    }

    /// Called by a backend right before the write of `key` (relative to the store's
    /// root) at `location` takes effect. `Conflict` once the deadline has passed.
    pub fn before_write(&self, key: &str, location: &str) -> Result<()> {
        if let Some(o) = &self.observer {
            o.before_write(key);
        }
        if self.deadline.passed() {
            return Err(Error::Conflict(format!(
                "conflict: this run's lease deadline passed before its write to {location} (the run was stopped or stalled); nothing was written. Rerun to reconcile"
            )));
        }
        Ok(())
    }

    /// Called by a backend right before a write to the run's staging: `Conflict` once
    /// the deadline has passed, so a run that stalled past it adds nothing to
    /// staging after another run took its lease and swept (no freeze points here).
    pub fn before_staging(&self, location: &str) -> Result<()> {
        if self.deadline.passed() {
            return Err(Error::Conflict(format!(
                "conflict: this run's lease deadline passed before its staging write to {location} (the run was stopped or stalled); nothing was written. Rerun to reconcile"
            )));
        }
        Ok(())
    }

    /// Called by a backend right after part `number` of a multipart staging upload
    /// was acknowledged.
    pub fn after_part(&self, number: u32) {
        if let Some(o) = &self.observer {
            o.after_part(number);
        }
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

/// What a promotion expects to replace: the published object as the run saw it when
/// it decided. The store refuses the promotion (`Precondition`) if it changed since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Nothing was published under the name.
    Absent,
    /// This version was published.
    Version(Version),
}

impl Expect {
    pub fn from_head(meta: Option<&ObjectMeta>) -> Self {
        meta.map_or(Expect::Absent, |m| Expect::Version(m.version.clone()))
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

/// A condition on a small-object write (checkpoint, lease).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// Write unconditionally.
    None,
    /// Create only; fail with `Precondition` if the key exists (`If-None-Match: *`).
    IfAbsent,
    /// Replace only the version read earlier (`If-Match: <etag>`).
    IfMatch(String),
}

/// A small object read whole, with the version token to use in [`Condition::IfMatch`].
#[derive(Debug, Clone)]
pub struct Versioned {
    pub bytes: Bytes,
    pub version: String,
}

/// A completed staging object, not yet visible under its published name.
#[derive(Debug, Clone)]
pub struct Staged {
    /// Key of the staged bytes (the temp file or the staging object).
    pub key: String,
    pub dest_key: String,
    pub size: u64,
}

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
#[async_trait]
pub trait Store: Send + Sync {
    /// Full human-readable location of a key, for messages and summaries.
    fn location(&self, key: &str) -> String;

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

    /// Open `key` for one streaming read. `NotFound` if absent.
    async fn read(&self, key: &str) -> Result<ObjectReader>;

    /// Open `key` for one streaming read of its bytes from `offset` on (below its
    /// size); the reader's size is the bytes left. `NotFound` if absent.
    async fn read_from(&self, key: &str, offset: u64) -> Result<ObjectReader>;

    /// Size and change marker of `key`, or `None` if absent.
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>>;

    /// Read a small object whole with its version token, or `None` if absent.
    async fn get_small(&self, key: &str) -> Result<Option<Versioned>>;

    /// Write a small object under `cond`; returns the new version token.
    /// A false condition is `Precondition`, whatever the provider's status code.
    async fn put_small(&self, key: &str, body: Bytes, cond: Condition) -> Result<String>;

    /// Delete `key`; absent is not an error.
    async fn delete(&self, key: &str) -> Result<()>;

    /// What holding a lease on this store must allow for.
    fn capabilities(&self) -> Capabilities;
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
    /// carry the run id, so [`Lake::sweep`] can tell runs apart.
    async fn stage(&self, dest_key: &str, run_id: &str) -> Result<Box<dyn Upload>>;

    /// Publish staged bytes under their destination atomically (a reader sees the old
    /// object or the new one), make it durable, verify it, and return its metadata.
    /// `expect` fences the write: if the destination is no longer what the run saw
    /// when it decided, nothing is replaced and the answer is `Precondition` (where
    /// `fence`, from [`Lake::fencing`] on this store, says a copy can be fenced).
    async fn promote(&self, staged: &Staged, expect: &Expect, fence: Fence) -> Result<ObjectMeta>;

    /// A second staging of `first`'s destination, beside it, for a filtered copy of
    /// it (a spilled run's second pass, the engine's `spill`). Like `stage`, it belongs to
    /// the run and is swept as its staging; `first` stays readable until discarded.
    async fn restage(&self, first: &Staged, run_id: &str) -> Result<Box<dyn Upload>>;

    /// Whether [`Lake::promote`] is fenced on this store: probed once per store
    /// value, then kept in it. A probe writes only scratch objects in the staging of
    /// `dest_key` by `run_id`, so a sweep removes them if the run dies mid-probe.
    async fn fencing(&self, dest_key: &str, run_id: &str) -> Result<Fence>;

    /// The same store (same client, same copy-fence verdict) whose writes pass `gate`:
    /// one run's handle on a lake that an inbox run opened once for all its inputs.
    fn with_run_gate(&self, gate: Gate) -> Arc<dyn Lake>;

    /// Remove a staging object once the checkpoint is written. Absent is fine. This
    /// default deletes the staging key (S3); a local lake removes its temp file
    /// without the lock and fsync of [`Store::delete`].
    async fn discard(&self, staged: &Staged) -> Result<()> {
        self.delete(&staged.key).await
    }

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
    /// Where the bytes are being staged (for messages, and the drill's visibility check).
    fn key(&self) -> &str;
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
