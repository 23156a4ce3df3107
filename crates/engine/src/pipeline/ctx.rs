//! What every stage of a run shares: the run's context ([`Ctx`]), what it saw of the
//! lake when it decided ([`Existing`]), what it staged ([`StagedRun`]), and how a run
//! names and logs itself. A leaf: the stages import it, it imports no stage.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use landing_pass::random_u64;
use time::OffsetDateTime;
use tracing::info;

use super::validator::Counts;
use crate::checkpoint::Current;
use crate::commit_log::Appender;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::history::Trace;
use crate::hook::Hooks;
use crate::layout::Layout;
use crate::progress::Terminal;
use crate::store::{Fence, Lake, ObjectMeta, Staged, Store};
use crate::summary::{Action, SpillReport, Summary};

/// Everything a stage needs, opened once per run.
pub(super) struct Ctx<'a> {
    pub(super) cfg: &'a Config,
    /// The input's identity before it was read (`--input-meta`, or a HEAD), recorded
    /// in the checkpoint for cheap skips.
    pub(super) input_meta: Option<ObjectMeta>,
    /// The checkpoint as read before the lease, if the caller read it ([`Opened`]).
    ///
    /// [`Opened`]: super::Opened
    pub(super) checkpoint_before_lease: Option<super::CheckpointRead>,
    pub(super) run_id: String,
    pub(super) input: Arc<dyn Store>,
    pub(super) input_key: String,
    pub(super) input_location: String,
    pub(super) lake: Arc<dyn Lake>,
    pub(super) layout: Layout,
    pub(super) hooks: Hooks,
    pub(super) terminal: &'a Terminal,
    pub(super) appender: &'a Appender,
    pub(super) trace: &'a Trace,
    /// Cleared when this run may leave staging of the input behind: a removal of its
    /// own failed, or its sweep left another run's leftovers. Its lease is released
    /// clean only if this stays set and the run succeeded (see [`Inherited`]).
    pub(super) clean: AtomicBool,
}

impl Ctx<'_> {
    /// This run's summary for `action`, before anything is counted.
    pub(super) fn summary(&self, action: Action) -> Summary {
        Summary::new(
            self.run_id.clone(),
            self.cfg.product.clone(),
            self.input_location.clone(),
            action,
        )
    }
}

/// A unique, sortable run id: UTC start time plus 32 random bits.
pub fn new_run_id() -> String {
    let now = OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z-{:08x}",
        now.year(),
        now.month() as u8,
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        random_u64() as u32
    )
}

/// Open the input as (store rooted at its folder or prefix, key of the input).
pub(super) async fn open_input(cfg: &Config) -> Result<(Arc<dyn Store>, String)> {
    let (root, name) = cfg.input.split_name().ok_or_else(|| {
        Error::Config(format!("{}: cannot take an input name from it", cfg.input))
    })?;
    let store = crate::store::open_read_only(&root, &cfg.s3).await?;
    Ok((store, name.to_owned()))
}

/// The published object and quarantine as the run saw them when it decided.
pub(super) struct Existing {
    pub(super) raw: Option<ObjectMeta>,
    pub(super) quarantine: Option<ObjectMeta>,
    /// Not read but inferred absent (`prepare::never_landed`): a fenced create that
    /// finds one there anyway reads it then.
    pub(super) assumed: bool,
}

impl Existing {
    pub(super) async fn read(ctx: &Ctx<'_>) -> Result<Self> {
        let (raw, quarantine) = tokio::try_join!(
            ctx.lake.head(&ctx.layout.raw),
            ctx.lake.head(&ctx.layout.quarantine)
        )?;
        Ok(Existing {
            raw,
            quarantine,
            assumed: false,
        })
    }

    /// Neither exists, inferred without a read.
    pub(super) fn assumed_absent() -> Self {
        Existing {
            raw: None,
            quarantine: None,
            assumed: true,
        }
    }
}

/// Staged outputs of a run that is going to publish, with what it decided on.
pub(super) struct StagedRun {
    pub(super) sha256: String,
    pub(super) counts: Counts,
    pub(super) data: Staged,
    /// SHA-256 of the staged data's bytes: what the publish makes visible.
    pub(super) published_sha256: String,
    pub(super) quarantine: Option<Staged>,
    pub(super) existing: Existing,
    pub(super) prior: Option<Current>,
    /// What the store's probe found: the promotions are sent under it.
    pub(super) fence: Fence,
    pub(super) spill: Option<SpillReport>,
}

pub(super) fn log_outcome(s: &Summary) {
    // Spelled as on stdout (`published`); a `None` reason records no field at all.
    let action = s.action.as_str();
    info!(
        input_sha256 = %s.input_sha256,
        action = %action,
        accepted_rows = s.accepted_rows,
        rejected_rows = s.rejected_rows,
        duplicate_rows = s.duplicate_rows,
        checkpoint_moved = s.checkpoint_moved,
        reason = s.reason.as_ref().map(tracing::field::display),
        "run finished"
    );
}
