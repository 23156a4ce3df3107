//! The stream stage: one pass over the input that hashes every byte, validates the
//! lines and writes accepted lines and quarantine records to staging as they come;
//! and a refusal, which drops that staging.

use bytes::Bytes;
use fixedbitset::FixedBitSet;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::ctx::{log_outcome, Ctx};
use super::hashed::Hashed;
use super::pass;
use super::replay::replay;
use super::resolve::digester;
use super::resolve::resolve;
use super::scan::{scan, Out, Scan};
use super::validator::{Counts, Sequencer};
use crate::compression::Encoder;
use crate::error::{Error, Result, Step, StepExt};
use crate::hook::{CrashPoint, PausePoint};
use crate::identity::Digester;
use crate::lease::Lease;
use crate::store::{Slot, Upload};
use crate::summary::{Action, Refusal, SpillReport, Summary};

/// What the stream stage produced.
pub(super) struct Streamed {
    pub(super) sha256: String,
    pub(super) counts: Counts,
    pub(super) refusal: Option<Refusal>,
    pub(super) data: Hashed,
    pub(super) quarantine: Option<Box<dyn Upload>>,
    /// Output lines the second pass drops (the merge of a spilled index found them).
    pub(super) drops: Option<FixedBitSet>,
    pub(super) spill: Option<SpillReport>,
}

/// One pass over the input: hash every byte, validate lines, and write accepted
/// lines and quarantine records to staging as they come.
pub(super) async fn stream(ctx: &Ctx<'_>, lease: &Lease) -> Result<Streamed> {
    let input = &ctx.input_location;
    let reader = ctx
        .input
        .read(&ctx.input_key, 0)
        .await
        .at(Step::Stream, input)?;
    ctx.trace.bytes_in(reader.size);
    let size = reader.size;
    let (out_tx, out_rx) = mpsc::channel::<Out>(4);
    let (out_tx, encoding) = encode_output(ctx, out_tx)?;
    let l = &ctx.layout;
    let data = ctx
        .lake
        .stage(&l.raw, &ctx.run_id, Slot::First)
        .await
        .map(Hashed::new)
        .at(Step::Stage, input)?;
    sweep_scratch(ctx);
    let plan = pass::spill_plan(ctx.cfg, &ctx.run_id, ctx.hooks);
    let v = Sequencer::new(
        ctx.cfg.contract.clone(),
        ctx.cfg.max_rejected_lines,
        reader.size,
    )
    .with_spill(plan);
    let digester = digester(ctx.hooks.pass());
    let progress =
        ctx.terminal
            .progress("land", &ctx.cfg.input_name, reader.size, ctx.cfg.progress);
    let encoder = encoded(encoding, input);
    let writer = write_staging(ctx, data, out_rx);
    let limits = pass::limits(ctx.cfg);
    // The pass, its resolution and a spilled run's replay all write through `out_tx`:
    // the staging writer ends when this drops it.
    let body = async move {
        let scanned = scan(
            reader,
            input,
            progress,
            limits,
            ctx.cfg.contract.clone(),
            Scan::Land(v, out_tx.clone()),
            digester,
            ctx.hooks.crash_at == Some(CrashPoint::WorkerPanic),
        )
        .await?;
        let (sha256, v) = scanned;
        let v = v.ok_or_else(|| Error::internal("stream", input, "validator missing"))?;
        let (v, drops, spill) = settle(ctx, v, digester, out_tx, size).await?;
        Ok::<_, Error>((sha256, v, drops, spill))
    };
    let (body, written, encoded) = tokio::join!(body, writer, encoder);
    let (data, quarantine) = written.at(Step::Stage, input)?;
    // A failed encoder left the staged object without its end: never publish it.
    let (sha256, v, drops, spill) = match encoded.and(body) {
        Ok(b) => b,
        Err(e) => {
            // Abort now rather than leave an incomplete upload for the next sweep.
            let _ = data.abort().await;
            if let Some(q) = quarantine {
                let _ = q.abort().await;
            }
            return Err(e).at(Step::Stream, input);
        }
    };
    lease.ensure_held().at(Step::Stream, input)?;
    Ok(Streamed {
        sha256,
        counts: v.counts(),
        refusal: v.refusal().cloned(),
        data,
        quarantine,
        drops,
        spill,
    })
}

/// After the pass: resolve what it left open (`landing-pass`'s `resolve`) and, for
/// a spilled run, write the lines it held back (its `replay`) through `out_tx`.
async fn settle(
    ctx: &Ctx<'_>,
    mut v: Sequencer,
    digester: Digester,
    out_tx: mpsc::Sender<Out>,
    first_size: u64,
) -> Result<(Sequencer, Option<FixedBitSet>, Option<SpillReport>)> {
    let input = &ctx.input_location;
    info!(distinct_events = v.distinct_events(), "stream complete");
    let reread = || ctx.input.read(&ctx.input_key, 0);
    let max_line = ctx.cfg.max_line_bytes;
    let contract = &ctx.cfg.contract;
    let resolution = resolve(
        &mut v,
        contract,
        digester,
        max_line,
        input,
        ctx.hooks.pass(),
        reread,
    )
    .await?;
    if let Some(s) = &resolution.spill {
        info!(
            spilled_bytes = s.spilled_bytes,
            runs = s.runs,
            runs_merged = s.runs_merged,
            second_pass = s.second_pass,
            replayed = s.replayed,
            "spilled index merged"
        );
        ctx.trace.lap("merge");
    }
    if let Some(r) = resolution.replay {
        let terminal = ctx.terminal;
        let progress =
            terminal.progress("replay", &ctx.cfg.input_name, first_size, ctx.cfg.progress);
        ctx.hooks.pause(PausePoint::BeforeReplay, terminal).await;
        // From the first held line's batch on: the lines before it are staged.
        let at = r.resume.offset;
        let reader = match at {
            0 => ctx.input.read(&ctx.input_key, 0).await?,
            at => ctx.input.read(&ctx.input_key, at).await?,
        };
        let (c, hooks) = (contract.clone(), ctx.hooks.pass());
        if at + reader.size != first_size {
            // Not the bytes the pass hashed: an input must not change under a run.
            let why = format!(
                "the input changed during the run: {first_size} bytes at the first read, {} at the second",
                at + reader.size
            );
            return Err(Error::store("replay", input, why));
        }
        replay(
            reader, input, max_line, c, digester, r, out_tx, hooks, progress,
        )
        .await?;
        ctx.trace.lap("replay");
    }
    Ok((v, resolution.drops, resolution.spill))
}

/// Remove the scratch of runs that died (their lock is free); a failure only warns.
fn sweep_scratch(ctx: &Ctx<'_>) {
    match crate::spill::sweep(&ctx.cfg.scratch_dir) {
        Ok(removed) => {
            for dir in removed {
                info!(scratch = %dir.display(), "removed the spill scratch of a run that died");
            }
        }
        Err(e) => {
            warn!(scratch_dir = %ctx.cfg.scratch_dir.display(), error = %e, "could not sweep the spill scratch")
        }
    }
}

/// `--output-compression`: published bytes are compressed on a thread of their own
/// between the sequencer and the staging writer; quarantine records pass as they
/// are. Returns the sender the sequencer writes to, and the encoder's thread.
fn encode_output(
    ctx: &Ctx<'_>,
    to_writer: mpsc::Sender<Out>,
) -> Result<(mpsc::Sender<Out>, Encoding)> {
    let input = &ctx.input_location;
    let encoder = Encoder::new(ctx.cfg.output_compression)
        .map_err(|e| Error::store("start output encoder", input, e))
        .at(Step::Stage, input)?;
    let Some(mut enc) = encoder else {
        return Ok((to_writer, None));
    };
    let (tx, mut rx) = mpsc::channel::<Out>(4);
    let thread = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        let mut stored: Vec<u8> = Vec::new();
        let send = |stored: &mut Vec<u8>, at_least: usize| {
            if stored.is_empty() || stored.len() < at_least {
                return true;
            }
            let data = Bytes::from(std::mem::take(stored));
            to_writer.blocking_send(Out::Data(data)).is_ok()
        };
        while let Some(out) = rx.blocking_recv() {
            match out {
                Out::Data(content) => {
                    stored.extend(enc.write(&content)?);
                    if !send(&mut stored, FLUSH_OUT) {
                        return Ok(());
                    }
                }
                quarantine @ Out::Quarantine(_) => {
                    if to_writer.blocking_send(quarantine).is_err() {
                        return Ok(());
                    }
                }
            }
        }
        // The sequencer is done: the stream's end goes last.
        stored.extend(enc.finish()?);
        send(&mut stored, 0);
        Ok(())
    });
    Ok((tx, Some(thread)))
}

/// The output encoder's thread, if the output is compressed.
type Encoding = Option<tokio::task::JoinHandle<std::io::Result<()>>>;

/// The encoder's outcome; `Ok` without one.
async fn encoded(encoding: Encoding, input: &str) -> Result<()> {
    match encoding {
        None => Ok(()),
        Some(thread) => thread
            .await
            .map_err(|e| Error::internal("join output encoder", input, e))?
            .map_err(|e| Error::store("compress output", input, e)),
    }
}

/// Compressed output is handed to the store in pieces of at least this size.
const FLUSH_OUT: usize = 1 << 20;

/// The staging writer: takes the validator's output in order and writes it.
async fn write_staging(
    ctx: &Ctx<'_>,
    mut data: Hashed,
    mut rx: mpsc::Receiver<Out>,
) -> Result<(Hashed, Option<Box<dyn Upload>>)> {
    let mut quarantine: Option<Box<dyn Upload>> = None;
    let mut wrote_any = false;
    while let Some(out) = rx.recv().await {
        let written = match out {
            Out::Data(bytes) => data.write(bytes).await,
            Out::Quarantine(bytes) => flush_quarantine(ctx, &mut quarantine, bytes).await,
        };
        if let Err(e) = written {
            let _ = data.abort().await;
            if let Some(q) = quarantine {
                let _ = q.abort().await;
            }
            return Err(e);
        }
        if !wrote_any {
            wrote_any = true;
            ctx.hooks.crash(CrashPoint::MidStream);
            ctx.hooks.pause(PausePoint::MidStream, ctx.terminal).await;
        }
    }
    Ok((data, quarantine))
}

/// Quarantine records go through staging too, opened on the first reject.
async fn flush_quarantine(
    ctx: &Ctx<'_>,
    upload: &mut Option<Box<dyn Upload>>,
    records: Bytes,
) -> Result<()> {
    if upload.is_none() {
        let l = &ctx.layout;
        *upload = Some(
            ctx.lake
                .stage(&l.quarantine, &ctx.run_id, Slot::First)
                .await?,
        );
    }
    match upload.as_mut() {
        Some(u) => u.write(records).await,
        None => Ok(()),
    }
}

/// A refused file publishes nothing: drop the staging, leave raw and checkpoint alone.
pub(super) async fn refuse(ctx: &Ctx<'_>, streamed: Streamed, refusal: Refusal) -> Result<Summary> {
    let input = &ctx.input_location;
    streamed.data.abort().await.at(Step::Cleanup, input)?;
    if let Some(q) = streamed.quarantine {
        q.abort().await.at(Step::Cleanup, input)?;
    }
    let summary = Summary {
        input_sha256: streamed.sha256,
        accepted_rows: streamed.counts.accepted,
        rejected_rows: streamed.counts.rejected,
        duplicate_rows: streamed.counts.duplicates,
        reason: Some(refusal),
        spill: streamed.spill,
        ..ctx.summary(Action::Refused)
    };
    log_outcome(&summary);
    Ok(summary)
}
