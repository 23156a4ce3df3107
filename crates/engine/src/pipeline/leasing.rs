//! The run's first stage: take the input's lease, waiting for it within
//! `--lease-wait` while another run holds it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::info;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::history::Trace;
use crate::lease::{Lease, LeaseOptions, Sightings};
use crate::shutdown::Shutdown;
use crate::store::{Deadline, Lake, Store};
use crate::summary::Signal;

/// How long a local file lock is waited for, and the lease's margin where no write
/// can outlive its check of the deadline: a tenth of the TTL.
pub(super) fn lock_wait(cfg: &Config) -> Duration {
    cfg.lease_ttl / 10
}

/// How the lease is held on `lake`, as its capabilities say (see [`LeaseOptions`]).
pub(super) fn lease_options(cfg: &Config, lake: &dyn Store) -> LeaseOptions {
    let caps = lake.capabilities();
    LeaseOptions {
        ttl: cfg.lease_ttl,
        margin: caps.in_flight.unwrap_or(lock_wait(cfg)),
        instant_takeover: caps.instant_takeover,
    }
}

/// How long after a held lease becomes takeable a waiting run looks again: the
/// monotonic clock's sleep may wake a little early.
const DUE_SLACK: Duration = Duration::from_millis(20);

/// Which lease a run takes, and what its process has seen of it.
pub(super) struct Leasing<'a> {
    pub(super) lake: &'a Arc<dyn Lake>,
    pub(super) key: &'a str,
    pub(super) run_id: &'a str,
    pub(super) sightings: &'a Sightings,
    pub(super) trace: &'a Trace,
}

/// Take the input's lease. While another run holds it, poll with jittered backoff for
/// up to `--lease-wait` (until it is released, or its holder's record stayed
/// unchanged for a TTL: see [`crate::lease`]), then answer busy. A signal stops the
/// wait (`Err(signal)`); it never interrupts an attempt, whose write may land after
/// it was abandoned.
pub(super) async fn take_lease(
    cfg: &Config,
    l: &Leasing<'_>,
    deadline: Deadline,
    shutdown: &Shutdown,
) -> Result<std::result::Result<Lease, Signal>> {
    let opts = lease_options(cfg, &**l.lake);
    let until = Instant::now() + cfg.lease_wait;
    let mut delays = crate::lease::wait_delays();
    let mut waiting = false;
    loop {
        let attempt = Lease::acquire(
            l.lake.clone(),
            l.key,
            l.run_id,
            opts,
            deadline.clone(),
            l.sightings,
        );
        let busy = match attempt.await {
            Err(e @ Error::Busy { .. }) => e,
            other => {
                if waiting {
                    info!("lease free; the run goes on");
                }
                return other.map(Ok);
            }
        };
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(busy);
        }
        if !waiting {
            waiting = true;
            l.trace.lease_waited();
            info!(error = %busy, wait_secs = left.as_secs(), "lease held by another run; waiting for it");
        }
        let pause = delays.next().unwrap_or(left).min(left);
        // A holder's record that may be taken over before the next backoff step is
        // looked at again right then: a dead holder delays a run by its TTL plus the
        // margin, not by up to one more step (5 s) on top.
        let due = l
            .sightings
            .due(&l.lake.location(l.key))
            .map(|d| d.saturating_duration_since(Instant::now()))
            .filter(|d| !d.is_zero());
        let pause = due.map_or(pause, |d| pause.min(d + DUE_SLACK));
        tokio::select! {
            biased;
            signal = shutdown.signalled() => return Ok(Err(signal)),
            () = tokio::time::sleep(pause) => {}
        }
    }
}
