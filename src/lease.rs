//! One run per (product, input) at a time. The lease is a small object created with
//! a conditional create (`If-None-Match: *` on S3, an exclusive create on a local
//! disk, honest for one host only) holding the run id, host and an expiry. It is
//! renewed while the run lasts; an expired lease (its holder died) is taken over
//! with a conditional replace of the exact version read, so two runs cannot both
//! take it. The checkpoint write stays conditional anyway, so a holder whose lease
//! expired while it stalled still cannot overwrite a newer checkpoint.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::sync::{oneshot, Mutex};

use crate::error::{Error, Result};
use crate::store::{Condition, Store};

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
    pub expires_at: String,
}

/// A held lease; renewed in the background until [`Lease::release`].
pub struct Lease {
    store: Arc<dyn Store>,
    key: String,
    run_id: String,
    version: Arc<Mutex<String>>,
    lost: Arc<AtomicBool>,
    stop: Option<oneshot::Sender<()>>,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

fn rfc3339(t: OffsetDateTime) -> String {
    // Formatting a UTC OffsetDateTime as RFC 3339 cannot fail for years 0..=9999.
    t.format(&Rfc3339).unwrap_or_default()
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

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn pid_ns() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// True only when the holder provably is gone: same kernel boot, same pid namespace
/// (so its pid means the same process here), and no such process. Anything else,
/// such as another host or container, waits for the expiry.
fn holder_is_dead(held: &LeaseRecord) -> bool {
    if held.boot_id.is_empty()
        || held.boot_id != boot_id()
        || held.pid_ns.is_empty()
        || held.pid_ns != pid_ns()
    {
        return false;
    }
    let Ok(pid) = libc::pid_t::try_from(held.pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

fn record_for(run_id: &str, ttl: Duration, acquired_at: &str) -> LeaseRecord {
    LeaseRecord {
        run_id: run_id.to_owned(),
        host: hostname(),
        pid: std::process::id(),
        boot_id: boot_id(),
        pid_ns: pid_ns(),
        acquired_at: acquired_at.to_owned(),
        expires_at: rfc3339(now() + ttl),
    }
}

fn encode(r: &LeaseRecord) -> Bytes {
    // A struct of strings always serializes.
    Bytes::from(serde_json::to_vec(r).unwrap_or_default())
}

impl Lease {
    /// Take the lease at `key` or fail with `Busy` naming the holder.
    pub async fn acquire(
        store: Arc<dyn Store>,
        key: &str,
        run_id: &str,
        ttl: Duration,
    ) -> Result<Lease> {
        let acquired_at = rfc3339(now());
        let body = encode(&record_for(run_id, ttl, &acquired_at));
        let version = match store
            .put_small(key, body.clone(), Condition::IfAbsent)
            .await
        {
            Ok(v) => v,
            Err(Error::Precondition { .. }) => Self::take_over(&*store, key, run_id, body).await?,
            Err(e) => return Err(e),
        };
        tracing::debug!(lease = %store.location(key), "lease acquired");
        let mut lease = Lease {
            store,
            key: key.to_owned(),
            run_id: run_id.to_owned(),
            version: Arc::new(Mutex::new(version)),
            lost: Arc::new(AtomicBool::new(false)),
            stop: None,
            renewer: None,
        };
        lease.start_renewal(ttl, acquired_at);
        Ok(lease)
    }

    /// The lease exists: take it only if it has expired, by replacing that exact version.
    async fn take_over(store: &dyn Store, key: &str, run_id: &str, body: Bytes) -> Result<String> {
        let location = store.location(key);
        let Some(current) = store.get_small(key).await? else {
            // Released between our create and our read: one more create, no loop.
            return store.put_small(key, body, Condition::IfAbsent).await;
        };
        if let Ok(held) = serde_json::from_slice::<LeaseRecord>(&current.bytes) {
            if held.run_id == run_id {
                // Our own create landed but its answer was lost and the SDK's retry
                // met our object: the lease is ours.
                return Ok(current.version);
            }
        }
        let held: LeaseRecord =
            serde_json::from_slice(&current.bytes).map_err(|e| Error::Corrupt {
                what: "lease",
                location: location.clone(),
                reason: format!("{e}; delete it once no run is active"),
            })?;
        let expires =
            OffsetDateTime::parse(&held.expires_at, &Rfc3339).map_err(|e| Error::Corrupt {
                what: "lease",
                location: location.clone(),
                reason: format!("bad expires_at: {e}"),
            })?;
        let busy = || Error::Busy {
            location: location.clone(),
            holder: format!("{} on {} (pid {})", held.run_id, held.host, held.pid),
            expires_at: held.expires_at.clone(),
        };
        let dead = holder_is_dead(&held);
        if expires > now() && !dead {
            return Err(busy());
        }
        match store
            .put_small(key, body, Condition::IfMatch(current.version))
            .await
        {
            Ok(v) => {
                tracing::warn!(lease = %location, previous_holder = %held.run_id, expired_at = %held.expires_at, holder_dead = dead, "took over a stale lease");
                Ok(v)
            }
            // Someone else took it over (or renewed it) first.
            Err(Error::Precondition { .. }) => Err(busy()),
            Err(e) => Err(e),
        }
    }

    fn start_renewal(&mut self, ttl: Duration, acquired_at: String) {
        let (tx, mut rx) = oneshot::channel();
        let store = self.store.clone();
        let key = self.key.clone();
        let run_id = self.run_id.clone();
        let version = self.version.clone();
        let lost = self.lost.clone();
        let every = (ttl / 3).max(Duration::from_millis(200));
        self.stop = Some(tx);
        self.renewer = Some(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut rx => return,
                    _ = tokio::time::sleep(every) => {}
                }
                let mut v = version.lock().await;
                let body = encode(&record_for(&run_id, ttl, &acquired_at));
                match store
                    .put_small(&key, body, Condition::IfMatch(v.clone()))
                    .await
                {
                    Ok(new) => *v = new,
                    // The renewal may have landed with its answer lost, so the SDK's
                    // retry met our own new version: still ours if it names our run.
                    Err(Error::Precondition { .. })
                        if Self::still_ours(&*store, &key, &run_id, &mut v).await => {}
                    Err(e) => {
                        tracing::error!(lease = %store.location(&key), error = %e, "lease renewal failed; the run stops before its next write");
                        lost.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            }
        }));
    }

    /// After a failed conditional renewal: is the lease still this run's? If so,
    /// adopt its current version.
    async fn still_ours(store: &dyn Store, key: &str, run_id: &str, version: &mut String) -> bool {
        let Ok(Some(cur)) = store.get_small(key).await else {
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
        if self.lost.load(Ordering::SeqCst) {
            return Err(Error::Conflict(format!(
                "lease {} was lost (renewal failed); stopping before any further write",
                self.store.location(&self.key)
            )));
        }
        Ok(())
    }

    /// Stop renewing and delete the lease if it is still ours.
    pub async fn release(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(h) = self.renewer.take() {
            let _ = h.await;
        }
        if self.lost.load(Ordering::SeqCst) {
            return Ok(());
        }
        let ours = self.version.lock().await.clone();
        // Delete only our own version; a lease taken over by another run stays.
        match self.store.get_small(&self.key).await? {
            Some(cur) if cur.version == ours => self.store.delete(&self.key).await,
            _ => Ok(()),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // A lease dropped on an error path stops renewing so it expires on schedule.
        if let Some(h) = self.renewer.take() {
            h.abort();
        }
    }
}
