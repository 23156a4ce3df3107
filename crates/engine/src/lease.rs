//! One run per (product, input) at a time. The lease is a small object created with
//! a conditional create (`If-None-Match: *` on S3; on a local disk a compare-and-swap
//! under a lock file in `locks/.cas/`, honest for one host only) holding the run id,
//! host, TTL and (for people) a wall-clock expiry. It is renewed while the run lasts,
//! each renewal a new version of the object.
//!
//! Whether a held lease has run out is judged by the observer's own clock, never by
//! comparing two hosts' wall clocks (the rule of the DynamoDB lock client): a run
//! that finds the lease held remembers its version and the instant it first saw it
//! ([`Sightings`], on its monotonic clock), and takes it over only once that same
//! version has stayed unchanged for the holder's TTL plus the margin, with a
//! conditional replace of that version, so two runs cannot both take it. A clock
//! hours ahead or behind changes nothing: a live holder's renewals keep changing the
//! version, and a dead holder's stays still.
//!
//! The holder keeps a monotonic deadline (last successful renewal + TTL − margin,
//! the margin being the longest a request can stay in flight on the server) and
//! checks it before every write, so a run that stalled or lost its renewals stops
//! before writing rather than after. The deadline is a [`Deadline`] shared with the
//! run's store, which checks it once more at the last instant of each write (inside
//! the file lock on a local lake), so a run frozen mid-write writes nothing when it
//! resumes. Release is a conditional overwrite with a
//! released record, never a DELETE: a retried DELETE could remove the next holder's
//! lease. Promotion and checkpoint stay conditional anyway (the fence).
//!
//! The released record also says whether its holder left the input's staging clean
//! (`clean`), so the next holder knows whether a sweep can find anything
//! ([`Inherited`]): a holder that died never released, so its lease is taken over,
//! never inherited clean.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;

use crate::rfc3339;
use time::OffsetDateTime;
use tokio::sync::{oneshot, Mutex};

use crate::error::{Error, Result};
use crate::store::{Deadline, PutMode, Store, Version};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub run_id: String,
    pub host: String,
    pub pid: u32,
    /// Kernel boot id and pid namespace of the holder: with them a run on the same
    /// machine and namespace can tell a dead holder from a live one at once.
    #[serde(default)]
    pub boot_id: String,
    #[serde(default)]
    pub pid_ns: String,
    pub acquired_at: String,
    /// The holder's wall clock plus its TTL at its last renewal: for people
    /// (`landing status`), never for a takeover decision.
    pub expires_at: String,
    /// The holder's TTL in milliseconds: how long an observer must see one version
    /// unchanged (plus the margin) before it takes the lease over. 0 in records of
    /// versions that did not write it: the observer's own TTL is used.
    #[serde(default)]
    pub ttl_ms: u64,
    /// How many times the holder renewed it: each renewal is a new version even
    /// where a version is a hash of the body (an S3 ETag is the body's MD5), so a
    /// watcher never mistakes a live holder for a still one.
    #[serde(default)]
    pub renewal: u64,
    /// Set by a holder that finished: the lease is free, whatever `expires_at` says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
    /// Set on release by a holder that left no staging of this input behind: it
    /// removed its own and every leftover its sweep found (or it needed none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clean: bool,
}

/// What a new holder knows of the staging the input's earlier runs left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inherited {
    /// No lease existed: no run of this input ever held one, unless one was deleted
    /// by hand (then the checkpoint tells: see the pipeline's sweep).
    Fresh,
    /// The previous holder released it clean: nothing to sweep.
    Clean,
    /// Taken over from a holder that died or stalled, or released by one that could
    /// not clean up (or by a version that did not say): sweep.
    Unknown,
}

impl LeaseRecord {
    /// When the lease runs out without a renewal.
    pub fn expires(&self) -> std::result::Result<OffsetDateTime, time::error::Parse> {
        OffsetDateTime::parse(&self.expires_at, &Rfc3339)
    }

    /// Has it run out by `at` on the reader's wall clock? For people only (`landing
    /// status`): another host's clock may be off by any amount. An expiry that does
    /// not parse never has.
    pub fn expired(&self, at: OffsetDateTime) -> bool {
        self.expires().is_ok_and(|t| t <= at)
    }

    /// Is its holder a live process of this machine and pid namespace? False where
    /// that cannot be told (another host or container).
    pub fn alive_here(&self) -> bool {
        same_kernel_and_ns(self) && pid_exists(self.pid) == Some(true)
    }

    /// The holder's TTL, where the record says it.
    fn ttl(&self) -> Option<Duration> {
        (self.ttl_ms > 0).then(|| Duration::from_millis(self.ttl_ms))
    }
}

/// What this process has seen of leases other runs hold: for each lease (by
/// location), the version it last read and the instant, on this process's monotonic
/// clock, it first read that version. A handle: every run of the process shares one,
/// so an inbox input found busy in its first pass keeps its first look in the second.
#[derive(Debug, Clone, Default)]
pub struct Sightings(Arc<std::sync::Mutex<std::collections::HashMap<String, Sighting>>>);

#[derive(Debug)]
struct Sighting {
    version: Version,
    since: Instant,
    /// When this version will have stayed unchanged long enough to be taken over.
    due: Option<Instant>,
}

impl Sightings {
    /// How long `version` of the lease at `location` has been seen unchanged: zero at
    /// the first look, and again whenever the version changed since the last one.
    fn unchanged_for(&self, location: &str, version: &Version) -> Duration {
        let now = Instant::now();
        // A poisoned map only means another run panicked while holding it; its
        // entries are whole (each update is one assignment).
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let s = seen.entry(location.to_owned()).or_insert_with(|| Sighting {
            version: version.clone(),
            since: now,
            due: None,
        });
        if s.version != *version {
            *s = Sighting {
                version: version.clone(),
                since: now,
                due: None,
            };
        }
        now.duration_since(s.since)
    }

    /// Record that the version last seen at `location` may be taken over once it has
    /// stayed unchanged for `needed`.
    fn needs(&self, location: &str, needed: Duration) {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = seen.get_mut(location) {
            s.due = Some(s.since + needed);
        }
    }

    /// When the lease at `location`, as last seen, may be taken over if it stays as
    /// it is: a run waiting for it looks again then, not a backoff step later.
    pub fn due(&self, location: &str) -> Option<Instant> {
        let seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        seen.get(location).and_then(|s| s.due)
    }

    /// Tests: pretend `version` at `location` was first seen `ago`.
    #[cfg(test)]
    fn seen(&self, location: &str, version: &Version, ago: Duration) {
        let since = Instant::now()
            .checked_sub(ago)
            .expect("a clock that far back");
        let mut seen = self.0.lock().unwrap();
        let version = version.clone();
        let due = None;
        seen.insert(
            location.to_owned(),
            Sighting {
                version,
                since,
                due,
            },
        );
    }
}

/// How a lease is held.
#[derive(Debug, Clone, Copy)]
pub struct LeaseOptions {
    /// Life of the lease without renewal.
    pub ttl: Duration,
    /// Subtracted from the TTL for the deadline: the longest one request can stay in
    /// flight on the server (S3's per-attempt timeout), so a write started before the
    /// deadline is over before the lease can expire.
    pub margin: Duration,
    /// Take over at once a lease whose holder provably died on this machine. Only
    /// for local lakes: on S3 a dead holder's request may still be executing on the
    /// server, so its lease must run out first.
    pub instant_takeover: bool,
}

/// A held lease; renewed in the background until [`Lease::release`].
pub struct Lease {
    store: Arc<dyn Store>,
    key: String,
    run_id: String,
    version: Arc<Mutex<Version>>,
    lost: Arc<AtomicBool>,
    deadline: Deadline,
    stop: Option<oneshot::Sender<()>>,
    renewer: Option<tokio::task::JoinHandle<()>>,
    inherited: Inherited,
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its whole length; gethostname NUL-terminates or truncates.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The kernel's boot id; empty where unknown, which never allows an instant takeover.
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The pid namespace; empty where unknown, which never allows an instant takeover.
fn pid_ns() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// True only when the holder provably is gone: its pid means the same process here,
/// and there is none. Another host or container waits for the expiry.
fn holder_is_dead(held: &LeaseRecord) -> bool {
    same_kernel_and_ns(held) && pid_exists(held.pid) == Some(false)
}

/// Does the holder's pid mean the same process here (same boot, same pid namespace)?
fn same_kernel_and_ns(held: &LeaseRecord) -> bool {
    let (boot, ns) = (&held.boot_id, &held.pid_ns);
    !boot.is_empty() && *boot == boot_id() && !ns.is_empty() && *ns == pid_ns()
}

/// Whether a process `pid` exists here; `None` where that cannot be told.
fn pid_exists(pid: u32) -> Option<bool> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    match (rc, std::io::Error::last_os_error().raw_os_error()) {
        // EPERM: it exists, owned by another user.
        (0, _) | (_, Some(libc::EPERM)) => Some(true),
        (_, Some(libc::ESRCH)) => Some(false),
        _ => None,
    }
}

fn record_for(run_id: &str, ttl: Duration, acquired_at: &str, renewal: u64) -> LeaseRecord {
    LeaseRecord {
        released: false,
        clean: false,
        run_id: run_id.to_owned(),
        host: hostname(),
        pid: std::process::id(),
        boot_id: boot_id(),
        pid_ns: pid_ns(),
        acquired_at: acquired_at.to_owned(),
        expires_at: rfc3339(now() + ttl),
        ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
        renewal,
    }
}

fn encode(r: &LeaseRecord) -> Bytes {
    // A struct of strings, integers and a bool has no map keys or values that JSON
    // cannot hold, so serialising it cannot fail; an empty lease body must never be written.
    Bytes::from(serde_json::to_vec(r).expect("a lease record serialises"))
}

impl Lease {
    /// Take the lease at `key` or fail with `Busy` naming the holder. `deadline` is
    /// the run's write deadline, set here and moved by every renewal; the store the
    /// lease is written through checks it too (see [`crate::store::Gate`]). A held
    /// lease is judged by what `seen` remembers of it (see [`Sightings`]).
    pub async fn acquire(
        store: Arc<dyn Store>,
        key: &str,
        run_id: &str,
        opts: LeaseOptions,
        deadline_cell: Deadline,
        seen: &Sightings,
    ) -> Result<Lease> {
        let acquired_at = rfc3339(now());
        let body = encode(&record_for(run_id, opts.ttl, &acquired_at, 0));
        // The lease can only have been written after this instant.
        let started = Instant::now();
        deadline_cell.set(Some(deadline(started, opts)));
        let (version, inherited) = match store.put_small(key, body.clone(), PutMode::Create).await {
            Ok(v) => (v, Inherited::Fresh),
            Err(Error::Precondition { .. }) => {
                Self::take_over(&*store, key, run_id, body, opts, seen).await?
            }
            Err(e) => return Err(e),
        };
        tracing::debug!(lease = %store.location(key), "lease acquired");
        let mut lease = Lease {
            store,
            key: key.to_owned(),
            run_id: run_id.to_owned(),
            version: Arc::new(Mutex::new(version)),
            lost: Arc::new(AtomicBool::new(false)),
            deadline: deadline_cell,
            stop: None,
            renewer: None,
            inherited,
        };
        lease.start_renewal(opts, acquired_at);
        Ok(lease)
    }

    /// What this holder knows of the staging earlier runs left (see [`Inherited`]).
    pub fn inherited(&self) -> Inherited {
        self.inherited
    }

    /// The lease exists: take it only if it was released, its holder provably died,
    /// or this process has seen the same version for the holder's TTL plus the
    /// margin; by replacing that exact version.
    async fn take_over(
        store: &dyn Store,
        key: &str,
        run_id: &str,
        body: Bytes,
        opts: LeaseOptions,
        seen: &Sightings,
    ) -> Result<(Version, Inherited)> {
        let location = store.location(key);
        let Some(current) = crate::store::get_small(store, key).await? else {
            // Deleted between our create and our read: one more create, no loop. Losing
            // that race too means another run holds it now. Deleted by hand, so
            // nothing is known of what its holder left.
            return match store.put_small(key, body, PutMode::Create).await {
                Err(Error::Precondition { .. }) => Err(Error::Busy {
                    location: location.clone(),
                    holder: "another run that created it just now".into(),
                    until: "it is released, or unchanged for its TTL".into(),
                }),
                other => other.map(|v| (v, Inherited::Unknown)),
            };
        };
        if let Ok(held) = serde_json::from_slice::<LeaseRecord>(&current.bytes) {
            if held.run_id == run_id {
                // Our own create landed but its answer was lost and the SDK's retry
                // met our object: the lease is ours, and it was absent before.
                return Ok((current.version, Inherited::Fresh));
            }
        }
        let held: LeaseRecord =
            serde_json::from_slice(&current.bytes).map_err(|e| Error::Corrupt {
                what: "lease",
                location: location.clone(),
                reason: format!("{e}; delete it once no run is active"),
            })?;
        // How long the holder's record must stay as it is before it is taken over: a
        // renewal started before the holder's deadline (TTL − margin after the
        // previous one began) has landed by then, and its writes are over.
        let needed = held.ttl().unwrap_or(opts.ttl) + opts.margin;
        let unchanged = seen.unchanged_for(&location, &current.version);
        seen.needs(&location, needed);
        // A waiting run looks again when the record becomes takeable (leasing.rs), so
        // a wait one second longer than `needed` takes a dead holder's lease.
        let busy = || Error::Busy {
            location: location.clone(),
            holder: format!("{} on {} (pid {})", held.run_id, held.host, held.pid),
            until: format!(
                "it is released, or its record stays unchanged for {}s by this run's clock \
                 (unchanged for {}s so far; the holder's clock gives {}); if that run is \
                 dead, a run with --lease-wait {} or more takes its lease over",
                needed.as_secs_f64().ceil(),
                unchanged.as_secs(),
                held.expires_at,
                needed.as_secs_f64().ceil() + 1.0
            ),
        };
        let dead = opts.instant_takeover && holder_is_dead(&held);
        if !held.released && !dead && unchanged < needed {
            return Err(busy());
        }
        let inherited = if held.released && held.clean {
            Inherited::Clean
        } else {
            Inherited::Unknown
        };
        match store
            .put_small(key, body, PutMode::Update(current.version))
            .await
        {
            Ok(v) if held.released => {
                tracing::debug!(lease = %location, previous_holder = %held.run_id, clean = held.clean, "lease was released; taken");
                Ok((v, inherited))
            }
            Ok(v) => {
                tracing::warn!(lease = %location, previous_holder = %held.run_id, unchanged_secs = unchanged.as_secs(), holder_dead = dead, "took over a stale lease");
                Ok((v, inherited))
            }
            // Our replace may have landed with its answer lost, so the SDK's retry met
            // our own record; otherwise someone else took it over (or renewed it) first.
            Err(Error::Precondition { .. }) => match crate::store::get_small(store, key).await? {
                Some(now) if record_names(&now.bytes, run_id) => Ok((now.version, inherited)),
                _ => Err(busy()),
            },
            Err(e) => Err(e),
        }
    }

    fn start_renewal(&mut self, opts: LeaseOptions, acquired_at: String) {
        let (tx, mut rx) = oneshot::channel();
        let store = self.store.clone();
        let key = self.key.clone();
        let run_id = self.run_id.clone();
        let version = self.version.clone();
        let lost = self.lost.clone();
        let deadline_cell = self.deadline.clone();
        // Renew well inside the window the deadline leaves (TTL − margin).
        let every = (opts.ttl.saturating_sub(opts.margin) / 3).max(Duration::from_millis(100));
        let retry = (every / 4).clamp(Duration::from_millis(50), Duration::from_secs(2));
        self.stop = Some(tx);
        self.renewer = Some(tokio::spawn(async move {
            let mut wait = every;
            let mut renewal = 0;
            loop {
                tokio::select! {
                    _ = &mut rx => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                let left = deadline_cell
                    .get()
                    .and_then(|until| until.checked_duration_since(Instant::now()));
                let Some(left) = left else {
                    // Mark it lost before saying so: whoever reads the log may act at once.
                    lost.store(true, Ordering::SeqCst);
                    tracing::error!(lease = %store.location(&key), "lease deadline passed without a renewal; the run stops before its next write");
                    return;
                };
                let started = Instant::now();
                renewal += 1;
                let body = encode(&record_for(&run_id, opts.ttl, &acquired_at, renewal));
                let mut v = version.lock().await;
                // A hanging renewal must not outlive the deadline it is meant to extend.
                let put = store.put_small(&key, body, PutMode::Update(v.clone()));
                let answer = tokio::time::timeout(left, put).await;
                let renewed = match answer {
                    Ok(Ok(new)) => {
                        *v = new;
                        true
                    }
                    // The renewal may have landed with its answer lost, so the SDK's
                    // retry met our own new version: still ours if it names our run.
                    Ok(Err(Error::Precondition { .. })) => {
                        if !Self::still_ours(&*store, &key, &run_id, &mut v).await {
                            lost.store(true, Ordering::SeqCst);
                            tracing::error!(lease = %store.location(&key), "lease taken by another run; the run stops before its next write");
                            return;
                        }
                        true
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(lease = %store.location(&key), error = %e, "lease renewal failed; retrying until the deadline");
                        false
                    }
                    Err(_) => {
                        tracing::warn!(lease = %store.location(&key), "lease renewal did not answer before the deadline");
                        false
                    }
                };
                if renewed {
                    deadline_cell.set(Some(deadline(started, opts)));
                    wait = every;
                } else {
                    wait = retry;
                }
            }
        }));
    }

    /// After a failed conditional renewal: is the lease still this run's? If so,
    /// adopt its current version.
    async fn still_ours(store: &dyn Store, key: &str, run_id: &str, version: &mut Version) -> bool {
        let Ok(Some(cur)) = crate::store::get_small(store, key).await else {
            return false;
        };
        match serde_json::from_slice::<LeaseRecord>(&cur.bytes) {
            Ok(held) if held.run_id == run_id => {
                *version = cur.version;
                true
            }
            _ => false,
        }
    }

    /// Fail if the lease could not be renewed: another run may have taken it over.
    pub fn ensure_held(&self) -> Result<()> {
        let past = self
            .deadline
            .get()
            .is_none_or(|until| Instant::now() >= until);
        if self.lost.load(Ordering::SeqCst) || past {
            return Err(Error::Conflict(format!(
                "conflict: lease {} was lost (not renewed before its deadline, or taken over); stopping before any further write",
                self.store.location(&self.key)
            )));
        }
        Ok(())
    }

    /// Stop renewing and mark the lease released, only if it is still our version.
    /// `clean`: this run left none of the input's staging behind (see [`Inherited`]).
    pub async fn release(mut self, clean: bool) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(h) = self.renewer.take() {
            let _ = h.await;
        }
        if self.lost.load(Ordering::SeqCst) {
            // Taken over by another run: it is theirs now.
            return Ok(());
        }
        // The run's writes are over. The release goes through even past the deadline:
        // it is conditional on our own version (below), so it cannot touch a lease
        // another run took meanwhile.
        self.deadline.set(None);
        // Even past our deadline this is safe: the release is conditional on our own
        // version, so a lease another run took meanwhile answers 412 and stays.
        let ours = self.version.lock().await.clone();
        let mut record = record_for(&self.run_id, Duration::ZERO, &rfc3339(now()), 0);
        record.released = true;
        record.clean = clean;
        match self
            .store
            .put_small(&self.key, encode(&record), PutMode::Update(ours))
            .await
        {
            Ok(_) => Ok(()),
            // Taken over (or our release landed and its answer was lost): not ours.
            Err(Error::Precondition { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Does the lease record in `bytes` name `run_id`?
fn record_names(bytes: &[u8], run_id: &str) -> bool {
    serde_json::from_slice::<LeaseRecord>(bytes).is_ok_and(|r| r.run_id == run_id)
}

/// The instant before which every write of the run must start.
fn deadline(renewed_at: Instant, opts: LeaseOptions) -> Instant {
    renewed_at + opts.ttl.saturating_sub(opts.margin)
}

/// The pauses between attempts of a run waiting for a held lease (`--lease-wait`):
/// jittered so that runs waiting for the same lease do not ask in step, and capped so
/// that a released or expired lease is seen within a few seconds.
pub fn wait_delays() -> impl Iterator<Item = Duration> {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times()
        .build()
}

impl Drop for Lease {
    fn drop(&mut self) {
        // A lease dropped on an error path stops renewing so it expires on schedule.
        if let Some(h) = self.renewer.take() {
            h.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::{Capabilities, Listing, ObjectMeta, ObjectReader};
    use async_trait::async_trait;

    /// A real local store with one scripted misbehaviour of the lease's writes.
    struct Scripted {
        inner: MemoryStore,
        fault: Fault,
        /// `Fault::FirstRenewalFails`: the failure happened.
        failed: Arc<AtomicBool>,
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Fault {
        /// Every other run wins the race to create the lease: the first create meets
        /// an existing lease, which is gone when read, and the second create meets a
        /// new one.
        AlwaysBeaten,
        /// Conditional replaces land but answer 412, as when the answer is lost and
        /// the SDK's retry meets the write that landed.
        ReplaceAnswerLost,
        /// Another run's record lands just before each conditional replace, which
        /// answers 412: another run took the lease over first.
        ReplaceRaced,
        /// The first conditional replace (a renewal) fails without writing, as a
        /// 500 would; the others land.
        FirstRenewalFails,
    }

    impl std::fmt::Display for Scripted {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.inner.fmt(f)
        }
    }

    impl Scripted {
        fn location(&self, key: &str) -> String {
            format!("{self}/{key}")
        }
    }

    #[async_trait]
    impl Store for Scripted {
        async fn read(&self, key: &str, offset: u64) -> Result<ObjectReader> {
            match self.fault {
                // The lease is gone by the time it is read.
                Fault::AlwaysBeaten => Err(Error::NotFound {
                    location: self.location(key),
                }),
                _ => self.inner.read(key, offset).await,
            }
        }
        async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
            self.inner.head(key).await
        }
        async fn put_small(&self, key: &str, body: Bytes, cond: PutMode) -> Result<Version> {
            let refused = Error::Precondition {
                location: self.location(key),
            };
            match (self.fault, &cond) {
                (Fault::AlwaysBeaten, PutMode::Create) => Err(refused),
                (Fault::ReplaceAnswerLost, PutMode::Update(_)) => {
                    self.inner.put_small(key, body, cond).await?;
                    Err(refused)
                }
                (Fault::FirstRenewalFails, PutMode::Update(_))
                    if !self.failed.swap(true, Ordering::SeqCst) =>
                {
                    Err(Error::Store {
                        op: "put",
                        location: self.location(key),
                        source: "injected failure".into(),
                    })
                }
                (Fault::ReplaceRaced, PutMode::Update(_)) => {
                    let thief = record_for("thief", Duration::from_secs(60), "now", 0);
                    self.inner
                        .put_small(key, encode(&thief), PutMode::Overwrite)
                        .await?;
                    Err(refused)
                }
                _ => self.inner.put_small(key, body, cond).await,
            }
        }
        async fn delete(&self, key: &str) -> Result<()> {
            self.inner.delete(key).await
        }
        async fn list(&self, prefix: &str) -> Result<Listing> {
            self.inner.list(prefix).await
        }
        fn capabilities(&self) -> Capabilities {
            self.inner.capabilities()
        }
    }

    fn scripted(objects: &MemoryStore, fault: Fault) -> Arc<dyn Store> {
        Arc::new(Scripted {
            inner: objects.clone(),
            fault,
            failed: Arc::new(AtomicBool::new(false)),
        })
    }

    fn opts(ttl: Duration) -> LeaseOptions {
        LeaseOptions {
            ttl,
            margin: Duration::ZERO,
            instant_takeover: false,
        }
    }

    /// A process that has seen no lease yet.
    fn fresh() -> Sightings {
        Sightings::default()
    }

    /// A process that has seen the current version of the lease at `key` for `ago`.
    async fn seen_for(store: &dyn Store, key: &str, ago: Duration) -> Sightings {
        let current = crate::store::get_small(store, key)
            .await
            .unwrap()
            .expect("a lease record");
        let seen = Sightings::default();
        seen.seen(&store.location(key), &current.version, ago);
        seen
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[tokio::test]
    async fn a_takeover_whose_answer_was_lost_is_ours() {
        let objects = MemoryStore::default();
        let expired = serde_json::json!({
            "run_id": "dead", "host": "h", "pid": 1, "acquired_at": "2020-01-01T00:00:00Z",
            "expires_at": "2020-01-01T00:05:00Z",
        });
        objects
            .put_small(
                "l.lock",
                Bytes::from(expired.to_string()),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
        let store = scripted(&objects, Fault::ReplaceAnswerLost);
        let seen = seen_for(&*store, "l.lock", HOUR).await;
        let lease = Lease::acquire(
            store,
            "l.lock",
            "me",
            opts(Duration::from_secs(60)),
            Deadline::default(),
            &seen,
        )
        .await
        .expect("the landed takeover is recognised as ours");
        assert!(lease.ensure_held().is_ok(), "the lease is held");
        let stored = crate::store::get_small(&objects, "l.lock")
            .await
            .unwrap()
            .expect("the lease record");
        let v: serde_json::Value = serde_json::from_slice(&stored.bytes).unwrap();
        assert_eq!(v["run_id"], "me", "the takeover landed: {v}");
    }

    #[tokio::test]
    async fn losing_the_second_create_race_is_busy() {
        let store = scripted(&MemoryStore::default(), Fault::AlwaysBeaten);
        let r = Lease::acquire(
            store,
            "l.lock",
            "run",
            opts(Duration::from_secs(60)),
            Deadline::default(),
            &fresh(),
        )
        .await;
        assert!(matches!(r, Err(Error::Busy { .. })), "{:?}", r.err());
    }

    #[tokio::test]
    async fn release_marks_the_lease_free_and_the_next_run_takes_it() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let a = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            opts(Duration::from_secs(60)),
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        a.release(false).await.unwrap();
        assert!(
            stored(&*store, "l.lock").await.released,
            "a released record"
        );
        let b = Lease::acquire(
            store.clone(),
            "l.lock",
            "b",
            opts(Duration::from_secs(60)),
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        b.ensure_held().unwrap();
        let held = stored(&*store, "l.lock").await;
        assert!(!held.released && held.run_id == "b", "b holds it: {held:?}");
    }

    #[tokio::test]
    async fn a_release_after_a_takeover_leaves_the_new_holder_alone() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let a = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            opts(Duration::from_secs(60)),
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        let other = encode(&record_for("b", Duration::from_secs(60), "now", 0));
        store
            .put_small("l.lock", other.clone(), PutMode::Overwrite)
            .await
            .unwrap();
        a.release(true).await.unwrap();
        let left = crate::store::get_small(&*store, "l.lock")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(left.bytes, other, "a's release changed b's lease");
    }

    /// A fresh lease, one released clean, one released otherwise and one taken over
    /// from a dead holder: only the clean release spares the next holder its sweep.
    #[tokio::test]
    async fn the_next_holder_knows_whether_the_last_one_left_staging_clean() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let seen = fresh();
        let take = |run: &'static str| {
            Lease::acquire(
                store.clone(),
                "l.lock",
                run,
                opts(Duration::from_secs(60)),
                Deadline::default(),
                &seen,
            )
        };
        let a = take("a").await.unwrap();
        assert_eq!(a.inherited(), Inherited::Fresh);
        a.release(true).await.unwrap();
        let b = take("b").await.unwrap();
        assert_eq!(b.inherited(), Inherited::Clean);
        b.release(false).await.unwrap();
        let c = take("c").await.unwrap();
        assert_eq!(c.inherited(), Inherited::Unknown, "released, not clean");
        c.release(true).await.unwrap();
        // A holder that died: an expired record, never released (it says nothing of
        // `clean`, and an older version's released record did not either).
        let dead = serde_json::json!({
            "run_id": "dead", "host": "h", "pid": 1, "acquired_at": "2020-01-01T00:00:00Z",
            "expires_at": "2020-01-01T00:01:00Z"
        });
        store
            .put_small("l.lock", dead.to_string().into(), PutMode::Overwrite)
            .await
            .unwrap();
        let dead_version = crate::store::get_small(&*store, "l.lock")
            .await
            .unwrap()
            .unwrap()
            .version;
        seen.seen(&store.location("l.lock"), &dead_version, HOUR);
        let d = take("d").await.unwrap();
        assert_eq!(d.inherited(), Inherited::Unknown, "taken over");
    }

    #[tokio::test]
    async fn the_deadline_stops_writes_when_renewals_cannot_land() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        // A TTL entirely eaten by the margin: the deadline is the moment of acquiring.
        let lease = Lease::acquire(
            store,
            "l.lock",
            "a",
            LeaseOptions {
                ttl: Duration::from_secs(60),
                margin: Duration::from_secs(60),
                instant_takeover: false,
            },
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        assert!(matches!(lease.ensure_held(), Err(Error::Conflict(_))));
    }

    fn held_by(run_id: &str, expires_at: &str, released: bool, clean: bool) -> LeaseRecord {
        LeaseRecord {
            run_id: run_id.into(),
            host: "h".into(),
            pid: 1,
            boot_id: String::new(),
            pid_ns: String::new(),
            acquired_at: "2020-01-01T00:00:00Z".into(),
            expires_at: expires_at.into(),
            ttl_ms: 0,
            renewal: 0,
            released,
            clean,
        }
    }

    /// The record at `key`, as stored.
    async fn stored(store: &dyn Store, key: &str) -> LeaseRecord {
        let v = crate::store::get_small(store, key)
            .await
            .unwrap()
            .expect("a lease record");
        serde_json::from_slice(&v.bytes).unwrap()
    }

    const FAR: &str = "2999-01-01T00:00:00Z";
    const PAST: &str = "2020-01-01T00:05:00Z";

    #[test]
    fn a_lease_has_expired_from_its_expiry_on_and_a_bad_expiry_never_has() {
        use time::macros::datetime;
        let r = held_by("a", PAST, false, false);
        assert!(!r.expired(datetime!(2020-01-01 0:04:59 UTC)));
        assert!(r.expired(datetime!(2020-01-01 0:05:00 UTC)));
        assert!(r.expired(datetime!(2020-01-01 0:05:01 UTC)));
        let bad = held_by("a", "soon", false, false);
        assert!(!bad.expired(datetime!(2999-01-01 0:00 UTC)));
    }

    #[test]
    fn a_new_record_names_its_run_and_expires_a_ttl_from_now() {
        let before = now();
        let r = record_for("a", Duration::from_secs(60), "then", 0);
        let expires = r.expires().unwrap();
        assert!(expires >= before + Duration::from_secs(59), "{expires}");
        assert!(expires <= now() + Duration::from_secs(61), "{expires}");
        assert_eq!((r.run_id.as_str(), r.acquired_at.as_str()), ("a", "then"));
        assert!(!r.released && !r.clean);
        assert!(record_names(&encode(&r), "a"));
        assert!(!record_names(&encode(&r), "b"));
        assert!(!record_names(b"{", "a"));
    }

    /// A busy answer leaves when the lease may be taken over if it stays as it is:
    /// one TTL plus the margin after this process first saw that version.
    #[tokio::test]
    async fn a_busy_lease_says_when_it_may_be_taken_over() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let o = with_margin(Duration::from_secs(30), Duration::from_secs(10));
        let _a = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            o,
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        let seen = fresh();
        let location = store.location("l.lock");
        assert_eq!(seen.due(&location), None, "nothing seen yet");
        let before = Instant::now();
        let b = Lease::acquire(store.clone(), "l.lock", "b", o, Deadline::default(), &seen).await;
        let after = Instant::now();
        assert!(matches!(b, Err(Error::Busy { .. })), "{:?}", b.err());
        let due = seen
            .due(&location)
            .expect("a busy look leaves its due instant");
        let needed = Duration::from_secs(40);
        assert!(due >= before + needed && due <= after + needed, "{due:?}");
        assert_eq!(seen.due(&store.location("other.lock")), None);
    }

    #[tokio::test]
    async fn a_live_lease_is_busy_for_another_run_and_names_its_holder() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let ttl = opts(Duration::from_secs(60));
        let a = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            ttl,
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        let b = Lease::acquire(
            store.clone(),
            "l.lock",
            "b",
            ttl,
            Deadline::default(),
            &fresh(),
        )
        .await;
        match b {
            Err(Error::Busy { holder, .. }) => assert!(holder.starts_with("a on "), "{holder}"),
            other => panic!("b took a live lease: {:?}", other.err()),
        }
        a.ensure_held().unwrap();
        assert_eq!(stored(&*store, "l.lock").await.run_id, "a");
    }

    #[tokio::test]
    async fn a_released_lease_is_taken_whatever_its_expiry() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let released = encode(&held_by("old", FAR, true, true));
        store
            .put_small("l.lock", released, PutMode::Overwrite)
            .await
            .unwrap();
        let ttl = opts(Duration::from_secs(60));
        let l = Lease::acquire(
            store.clone(),
            "l.lock",
            "new",
            ttl,
            Deadline::default(),
            &fresh(),
        )
        .await
        .expect("a released lease is free");
        assert_eq!(l.inherited(), Inherited::Clean);
        assert_eq!(stored(&*store, "l.lock").await.run_id, "new");
    }

    #[tokio::test]
    async fn a_takeover_another_run_won_first_is_busy() {
        let objects = MemoryStore::default();
        let expired = encode(&held_by("dead", PAST, false, false));
        objects
            .put_small("l.lock", expired, PutMode::Overwrite)
            .await
            .unwrap();
        let store = scripted(&objects, Fault::ReplaceRaced);
        let seen = seen_for(&*store, "l.lock", HOUR).await;
        let r = Lease::acquire(
            store.clone(),
            "l.lock",
            "me",
            opts(Duration::from_secs(60)),
            Deadline::default(),
            &seen,
        )
        .await;
        assert!(matches!(r, Err(Error::Busy { .. })), "{:?}", r.err());
        assert_eq!(stored(&*store, "l.lock").await.run_id, "thief");
    }

    /// A record by a holder with a 60 s TTL, stored at `l.lock`; its expiry as its
    /// own clock wrote it.
    async fn held_for_a_minute(store: &dyn Store, expires_at: &str) {
        let mut r = held_by("holder", expires_at, false, false);
        r.ttl_ms = 60_000;
        store
            .put_small("l.lock", encode(&r), PutMode::Overwrite)
            .await
            .unwrap();
    }

    fn with_margin(ttl: Duration, margin: Duration) -> LeaseOptions {
        LeaseOptions {
            margin,
            ..opts(ttl)
        }
    }

    #[test]
    fn a_version_is_unchanged_from_its_first_look_until_it_changes() {
        let seen = fresh();
        let (v1, v2) = (Version::ETag("v1".into()), Version::ETag("v2".into()));
        assert_eq!(seen.unchanged_for("l", &v1), Duration::ZERO, "first look");
        seen.seen("l", &v1, HOUR);
        assert!(seen.unchanged_for("l", &v1) >= HOUR);
        assert!(seen.unchanged_for("other", &v1) < HOUR, "another lease");
        assert!(seen.unchanged_for("l", &v2) < HOUR, "a renewal starts over");
        assert!(
            seen.unchanged_for("l", &v1) < HOUR,
            "and so does going back"
        );
    }

    /// An expiry long past by this host's clock (the holder's clock is behind, or
    /// ours is ahead) is not a takeover: the first look is.
    #[tokio::test]
    async fn a_past_expiry_does_not_free_a_lease_seen_for_the_first_time() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        held_for_a_minute(&*store, PAST).await;
        let o = with_margin(Duration::from_secs(30), Duration::from_secs(10));
        let seen = fresh();
        let r = Lease::acquire(store.clone(), "l.lock", "me", o, Deadline::default(), &seen);
        match r.await {
            Err(Error::Busy { until, .. }) => {
                assert!(until.contains("unchanged for 70s"), "{until}");
                // The holder's TTL (60 s) and the margin (10 s), and a second.
                assert!(
                    until.ends_with("a run with --lease-wait 71 or more takes its lease over"),
                    "{until}"
                );
            }
            other => panic!("took a lease at first look: {:?}", other.err()),
        }
        assert_eq!(stored(&*store, "l.lock").await.run_id, "holder");
    }

    /// The holder's TTL (60 s, from its record, not the observer's 30 s) plus the
    /// margin (10 s) of unchanged record, whatever its expiry says: far ahead (the
    /// holder's clock is ahead) is taken all the same.
    #[tokio::test]
    async fn a_lease_is_taken_over_once_one_version_stayed_for_its_ttl_and_margin() {
        for expires_at in [FAR, PAST] {
            let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
            held_for_a_minute(&*store, expires_at).await;
            let o = with_margin(Duration::from_secs(30), Duration::from_secs(10));
            let take = |seen: Sightings| {
                let store = store.clone();
                async move { Lease::acquire(store, "l.lock", "me", o, Deadline::default(), &seen).await }
            };
            let short = seen_for(&*store, "l.lock", Duration::from_secs(69)).await;
            let r = take(short).await;
            assert!(
                matches!(r, Err(Error::Busy { .. })),
                "69 s < 70 s: {:?}",
                r.err()
            );
            let long = seen_for(&*store, "l.lock", Duration::from_secs(71)).await;
            let l = take(long).await.expect("unchanged for 71 s");
            assert_eq!(l.inherited(), Inherited::Unknown, "taken over, so swept");
            assert_eq!(stored(&*store, "l.lock").await.run_id, "me", "{expires_at}");
        }
    }

    /// A renewal between two looks: the version the observer watched is gone, so
    /// its hour of watching counts for nothing.
    #[tokio::test]
    async fn a_renewed_lease_is_not_taken_over_whatever_was_seen_before() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        held_for_a_minute(&*store, PAST).await;
        let seen = seen_for(&*store, "l.lock", HOUR).await;
        // Local versions are (inode, mtime, size): a renewal writes a new file.
        held_for_a_minute(&*store, FAR).await;
        let o = opts(Duration::from_secs(60));
        let r = Lease::acquire(store.clone(), "l.lock", "me", o, Deadline::default(), &seen);
        assert!(matches!(r.await, Err(Error::Busy { .. })));
        assert_eq!(stored(&*store, "l.lock").await.run_id, "holder");
    }

    #[test]
    fn a_record_says_its_holders_ttl() {
        let r = record_for("a", Duration::from_millis(1500), "then", 0);
        assert_eq!(r.ttl_ms, 1500);
        assert_eq!(r.ttl(), Some(Duration::from_millis(1500)));
        assert_eq!(
            held_by("a", PAST, false, false).ttl(),
            None,
            "an older record"
        );
    }

    /// A live lease of this machine whose holder is gone: the pid of a child that
    /// exited and was reaped.
    #[cfg(target_os = "linux")]
    async fn a_dead_holders_lease(store: &dyn Store) {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let mut ghost = record_for("ghost", Duration::from_secs(60), "then", 0);
        ghost.pid = pid;
        store
            .put_small("l.lock", encode(&ghost), PutMode::Overwrite)
            .await
            .unwrap();
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_dead_holder_is_taken_over_at_once_only_when_asked() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        a_dead_holders_lease(&*store).await;
        let wait = opts(Duration::from_secs(60)); // instant_takeover: false
        let r = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            wait,
            Deadline::default(),
            &fresh(),
        )
        .await;
        assert!(matches!(r, Err(Error::Busy { .. })), "{:?}", r.err());
        let at_once = LeaseOptions {
            instant_takeover: true,
            ..wait
        };
        let l = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            at_once,
            Deadline::default(),
            &fresh(),
        )
        .await
        .expect("the holder is gone");
        assert_eq!(l.inherited(), Inherited::Unknown);
        assert_eq!(stored(&*store, "l.lock").await.run_id, "a");
    }

    /// A TTL of 1.5 s, renewed every 500 ms: by the fourth renewal the TTL has passed
    /// since the lease was taken, so only renewals can have kept it.
    const SHORT: Duration = Duration::from_millis(1500);

    /// Wait, polling the stored record, until the holder has renewed it `n` times
    /// (the renewal counter it writes); a bound only a hang would reach.
    async fn until_renewed(store: &dyn Store, key: &str, n: u64) -> LeaseRecord {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let r = stored(store, key).await;
            if r.renewal >= n {
                return r;
            }
            assert!(
                Instant::now() < until,
                "renewed {} times, not {n}",
                r.renewal
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn renewals_keep_the_lease_past_its_ttl() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let lease = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            opts(SHORT),
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        let first = stored(&*store, "l.lock").await;
        assert_eq!(first.renewal, 0, "a fresh lease is not renewed yet");
        let later = until_renewed(&*store, "l.lock", 4).await;
        lease.ensure_held().expect("renewed before its deadline");
        assert_eq!(later.run_id, "a");
        assert!(
            later.expires().unwrap() > first.expires().unwrap(),
            "the expiry moved on"
        );
    }

    #[tokio::test]
    async fn a_renewal_whose_answer_was_lost_keeps_the_lease() {
        let store = scripted(&MemoryStore::default(), Fault::ReplaceAnswerLost);
        // Fresh (a create): then every renewal lands but answers 412.
        let lease = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            opts(SHORT),
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        // Four renewals landed, each answered 412: the TTL has passed since the take.
        until_renewed(&*store, "l.lock", 4).await;
        lease.ensure_held().expect("still ours after lost answers");
        assert_eq!(stored(&*store, "l.lock").await.run_id, "a");
    }

    #[tokio::test]
    async fn a_failed_renewal_is_retried_well_before_the_deadline() {
        let store = scripted(&MemoryStore::default(), Fault::FirstRenewalFails);
        // Renewals every 500 ms, a retry 125 ms after a failure: the first renewal
        // fails at 500 ms, its retry lands long before the deadline at 1.5 s.
        let lease = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            opts(SHORT),
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        // The failed first renewal's retry and three more landed: past the TTL.
        until_renewed(&*store, "l.lock", 4).await;
        lease.ensure_held().expect("the retry renewed it");
        assert_eq!(stored(&*store, "l.lock").await.run_id, "a");
    }

    #[tokio::test]
    async fn a_renewal_that_finds_another_holder_loses_the_lease() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let lease = Lease::acquire(
            store.clone(),
            "l.lock",
            "a",
            opts(SHORT),
            Deadline::default(),
            &fresh(),
        )
        .await
        .unwrap();
        let other = encode(&held_by("b", FAR, false, false));
        store
            .put_small("l.lock", other.clone(), PutMode::Overwrite)
            .await
            .unwrap();
        // The next renewal finds b's record and gives the lease up.
        let until = Instant::now() + Duration::from_secs(60);
        while lease.ensure_held().is_ok() {
            assert!(Instant::now() < until, "the lease was never given up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(matches!(lease.ensure_held(), Err(Error::Conflict(_))));
        let left = crate::store::get_small(&*store, "l.lock")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(left.bytes, other, "b's lease is left alone");
    }
}
