//! `landing drill`: rehearse the crash diagram against the operator's own store.
//!
//! In a scratch namespace `drills/<drill id>/` under the lake, for each crash point
//! the drill publishes an old input, replaces it with a new one, runs the job as a
//! child process that kills itself at that point, looks at what a reader would
//! see, reruns the job plainly and checks the invariants:
//! - the published name holds the old bytes or the complete new bytes, nothing else;
//! - the checkpoint never names an input whose published bytes are absent;
//! - after the rerun the state equals a clean run's;
//! - no staging object or incomplete upload survives the rerun's sweep.
//!
//! It also drills a refusal (prohibited field) and an unchanged rerun (skip), and
//! checks the store's own promises the contract relies on: a conditional create is
//! refused the second time, `If-Match` with a wrong ETag is refused, a copy with a
//! destination condition is honoured (or reported as not fenced), and staged bytes
//! stay invisible until completion and promotion. A store that ignores
//! `If-None-Match` or `If-Match` on PutObject fails the drill: leases and checkpoints
//! would not be safe there.

use std::process::Stdio;
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::compression::{encode_all, OutputCompression};
use crate::config::DrillConfig;
use crate::error::{Error, Result};
use crate::identity::hex;
use crate::layout::Layout;
use crate::pipeline::{new_run_id, Validator};
use crate::store::s3::{ConditionalCopy, S3Options};
use crate::store::{CopyFence, Fence, Lake, Location, PutMode, Slot, Sweep, Version};
use crate::summary::Action;

const NAME: &str = "drill.jsonl";

/// One drilled scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: String,
    /// What a reader saw under the published name after the crash (or the run).
    pub visible_after: String,
    /// What the checkpoint named after the crash (or the run).
    pub checkpoint_after: String,
    /// What the plain rerun did.
    pub rerun: String,
    pub held: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub drill_id: String,
    pub lake: String,
    pub input_bytes: u64,
    pub rows: Vec<Row>,
    pub passed: bool,
}

/// Published bytes for `input` as a clean run produces them (pure, in-process).
fn expected_output(input: &[u8]) -> String {
    let mut v = Validator::new(1 << 20, u64::MAX, input.len() as u64, 1);
    let mut out = Sha256::new();
    for chunk in input.chunks(1 << 20) {
        v.feed(chunk);
        out.update(&v.sequencer().output()[..]);
        v.sequencer().output().clear();
    }
    v.finish();
    v.resolve(input, 1 << 20);
    out.update(&v.sequencer().output()[..]);
    hex(&out.finalize())
}

fn generated(size: u64, seed: u64) -> Vec<u8> {
    let spec = crate::generate::Spec {
        lines: size / 195 + 1,
        duplicate_per_mille: 10,
        malformed_per_mille: 0,
        seed,
    };
    let mut v = Vec::with_capacity(size as usize + 4096);
    // Writing into a Vec cannot fail.
    let _ = crate::generate::generate(&spec, &mut v);
    v
}

/// A scenario's own lake under the scratch namespace, and its store.
struct ScenarioLake {
    lake: Location,
    store: Arc<dyn Lake>,
    input_key: String,
    layout: Layout,
    /// How inputs are stored (`--compress`).
    compress: OutputCompression,
}

impl ScenarioLake {
    fn input_arg(&self) -> String {
        self.lake.join(&self.input_key).to_string()
    }

    /// Store `content` as the input, compressed as `--compress` says.
    async fn put_input(&self, content: &[u8]) -> Result<()> {
        self.store
            .put_small(
                &self.input_key,
                Bytes::from(encode_all(self.compress, content)),
                PutMode::Overwrite,
            )
            .await
            .map(|_| ())
    }

    /// SHA-256 of the published output's bytes, or "absent".
    async fn published(&self) -> Result<String> {
        let mut r = match self.store.read(&self.layout.raw, 0).await {
            Ok(r) => r,
            Err(Error::NotFound { .. }) => return Ok("absent".into()),
            Err(e) => return Err(e),
        };
        let mut h = Sha256::new();
        let mut buf = bytes::BytesMut::with_capacity(1 << 20);
        loop {
            buf.clear();
            let n = r.read_chunk(&mut buf).await.map_err(|e| {
                Error::store("read published", self.store.location(&self.layout.raw), e)
            })?;
            if n == 0 {
                return Ok(hex(&h.finalize()));
            }
            h.update(&buf);
        }
    }

    /// Input hash the checkpoint names, or "absent".
    async fn checkpoint(&self) -> Result<String> {
        Ok(
            crate::checkpoint::read(&*self.store, &self.layout.checkpoint, "progress", NAME)
                .await?
                .map_or_else(|| "absent".into(), |c| c.record.input_sha256),
        )
    }

    /// What a fresh sweep would still find: must be nothing after a rerun.
    async fn leftovers(&self) -> Result<u64> {
        let others = Sweep::Others {
            older_than: std::time::Duration::ZERO,
        };
        let r = self.store.sweep(&self.layout.written(), "", others).await?;
        Ok(r.aborted_uploads + r.deleted_objects)
    }

    /// Everything the scenario wrote: its scratch lake is its own.
    async fn remove(&self) -> Result<()> {
        self.store.remove_tree("").await
    }
}

/// Outcome of one child run.
struct Child {
    code: Option<i32>,
    killed: bool,
    /// The action on the child's stdout line (`None`: it printed none).
    action: Option<Action>,
    stderr: String,
}

impl Child {
    /// The child's outcome for a drill row: its action, or its exit code.
    fn outcome(&self) -> String {
        self.action.map_or_else(
            || format!("exit {:?}", self.code),
            |a| a.as_str().to_owned(),
        )
    }
}

async fn child(cfg: &DrillConfig, s: &ScenarioLake, crash_at: Option<&str>) -> Result<Child> {
    let exe =
        std::env::current_exe().map_err(|e| Error::store("find own executable", "landing", e))?;
    let lake = s.lake.to_string();
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args([
        "run",
        "--input",
        &s.input_arg(),
        "--lake",
        &lake,
        "--progress",
        "never",
    ])
    .args(&cfg.child_args)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    // A flag, not a variable: a release build reads no hook from its environment.
    if let Some(p) = crash_at {
        cmd.args(["--crash-at", p]);
    }
    let out = cmd
        .output()
        .await
        .map_err(|e| Error::store("run child", &lake, e))?;
    use std::os::unix::process::ExitStatusExt;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let action = serde_json::from_str::<serde_json::Value>(stdout.trim())
        .ok()
        .and_then(|v| serde_json::from_value(v["action"].clone()).ok());
    Ok(Child {
        code: out.status.code(),
        killed: out.status.signal() == Some(libc::SIGKILL),
        action,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Hashes the drill compares against.
struct Known {
    old_in: String,
    new_in: String,
    old_out: String,
    new_out: String,
}

impl Known {
    fn name_out(&self, sha: &str) -> String {
        match sha {
            s if s == self.old_out => "old bytes".into(),
            s if s == self.new_out => "new bytes".into(),
            "absent" => "absent".into(),
            _ => "OTHER BYTES".into(),
        }
    }

    fn name_in(&self, sha: &str) -> String {
        match sha {
            s if s == self.old_in => "old".into(),
            s if s == self.new_in => "new".into(),
            "absent" => "absent".into(),
            _ => "OTHER".into(),
        }
    }
}

async fn crash_scenario(
    cfg: &DrillConfig,
    s: &ScenarioLake,
    point: &str,
    k: &Known,
    inputs: (&[u8], &[u8]),
) -> Result<Row> {
    let mut violations = Vec::new();
    s.put_input(inputs.0).await?;
    let first = child(cfg, s, None).await?;
    if first.code != Some(0) {
        return Err(Error::Conflict(format!(
            "drill setup run failed: {}",
            first.stderr.trim()
        )));
    }
    s.put_input(inputs.1).await?;
    let crashed = child(cfg, s, Some(point)).await?;
    if !crashed.killed {
        violations.push(format!(
            "the job did not reach crash point {point} (exit {:?})",
            crashed.code
        ));
    }
    let visible = s.published().await?;
    let ckpt = s.checkpoint().await?;
    if visible != k.old_out && visible != k.new_out {
        violations.push("published name holds neither the old nor the complete new bytes".into());
    }
    if ckpt == k.new_in && visible != k.new_out {
        violations.push("checkpoint names the new input but its bytes are not published".into());
    }
    let rerun = child(cfg, s, None).await?;
    if rerun.code != Some(0) {
        violations.push(format!("plain rerun failed: {}", rerun.stderr.trim()));
    }
    if s.published().await? != k.new_out || s.checkpoint().await? != k.new_in {
        violations.push("after the rerun the state differs from a clean run's".into());
    }
    if s.leftovers().await? > 0 {
        violations.push("staging leftovers survived the rerun's sweep".into());
    }
    Ok(Row {
        scenario: format!("crash {point}"),
        visible_after: k.name_out(&visible),
        checkpoint_after: k.name_in(&ckpt),
        rerun: rerun.outcome(),
        held: violations.is_empty(),
        violations,
    })
}

async fn refusal_and_skip(
    cfg: &DrillConfig,
    s: &ScenarioLake,
    k: &Known,
    inputs: (&[u8], &[u8]),
) -> Result<Vec<Row>> {
    s.put_input(inputs.0).await?;
    let first = child(cfg, s, None).await?;
    if first.code != Some(0) {
        return Err(Error::Conflict(format!(
            "drill setup run failed: {}",
            first.stderr.trim()
        )));
    }
    let mut bad = inputs.1.to_vec();
    bad.extend_from_slice(b"{\"event_id\":\"x\",\"email\":\"drill@example.invalid\"}\n");
    s.put_input(&bad).await?;
    let refused = child(cfg, s, None).await?;
    let (visible, ckpt) = (s.published().await?, s.checkpoint().await?);
    let mut v = Vec::new();
    if refused.code != Some(crate::EXIT_REFUSED) {
        v.push(format!("expected exit 65, got {:?}", refused.code));
    }
    if visible != k.old_out || ckpt != k.old_in {
        v.push("the refusal changed the published object or the checkpoint".into());
    }
    if s.leftovers().await? > 0 {
        v.push("the refusal left staging behind".into());
    }
    let refusal = Row {
        scenario: "refusal (prohibited field)".into(),
        visible_after: k.name_out(&visible),
        checkpoint_after: k.name_in(&ckpt),
        rerun: refused.outcome(),
        held: v.is_empty(),
        violations: v,
    };
    s.put_input(inputs.0).await?;
    let before = s.store.head(&s.layout.raw).await?;
    let skip = child(cfg, s, None).await?;
    let mut v = Vec::new();
    if skip.action != Some(Action::Skipped) {
        v.push(format!("expected a skip, got {}", skip.outcome()));
    }
    if s.store.head(&s.layout.raw).await? != before {
        v.push("the skip rewrote the published object".into());
    }
    let skip_row = Row {
        scenario: "unchanged rerun".into(),
        visible_after: k.name_out(&s.published().await?),
        checkpoint_after: k.name_in(&s.checkpoint().await?),
        rerun: skip.outcome(),
        held: v.is_empty(),
        violations: v,
    };
    Ok(vec![refusal, skip_row])
}

/// A row about one promise of the store: what was observed, and whether it held.
fn promise(scenario: &str, observed: String, held: bool, violation: &str) -> Row {
    Row {
        scenario: scenario.to_owned(),
        visible_after: observed,
        checkpoint_after: "-".into(),
        rerun: "-".into(),
        held,
        violations: if held {
            Vec::new()
        } else {
            vec![violation.to_owned()]
        },
    }
}

/// What a conditional write answered, in a word.
fn answer(r: &Result<Version>) -> String {
    match r {
        Ok(_) => "written".into(),
        Err(Error::Precondition { .. }) => "412".into(),
        Err(e) => format!("error: {e}"),
    }
}

/// The store's promises that leases, checkpoints and promotion rely on.
async fn store_promises(cfg: &DrillConfig, s: &ScenarioLake, drill_id: &str) -> Result<Vec<Row>> {
    let store = &*s.store;
    let key = "promises/conditional";
    let body = || Bytes::from_static(b"{}");
    store.put_small(key, body(), PutMode::Create).await?;
    let again = store.put_small(key, body(), PutMode::Create).await;
    let create = promise(
        "store: create-if-absent twice",
        answer(&again),
        matches!(again, Err(Error::Precondition { .. })),
        "a second If-None-Match: * create succeeded: leases would not be exclusive",
    );
    let wrong = store
        .put_small(
            key,
            body(),
            PutMode::Update(Version::ETag("\"not-the-etag\"".into())),
        )
        .await;
    let if_match = promise(
        "store: If-Match wrong ETag",
        answer(&wrong),
        matches!(wrong, Err(Error::Precondition { .. })),
        "a write with a wrong If-Match succeeded: checkpoints could be overwritten blindly",
    );
    // What the store does, whatever --s3-conditional-copy says: `off` would skip the
    // probe and `on` would refuse an unfenced store.
    let probing = S3Options {
        conditional_copy: ConditionalCopy::Auto,
        ..cfg.s3.clone()
    };
    let probing = crate::store::open(&s.lake, &probing).await?;
    let fence = probing
        .fencing("promises/raw/probe.jsonl", drill_id)
        .await?;
    let copy = promise(
        "store: conditional copy",
        match fence.verdict() {
            CopyFence::Fenced => "fenced".into(),
            CopyFence::Ignored => "not fenced".into(),
            CopyFence::Unsafe => "unsafe".into(),
            CopyFence::Off => "off".into(),
        },
        true,
        "",
    );
    let hidden = staged_bytes_stay_hidden(cfg, &*probing, fence, drill_id).await?;
    store.delete(key).await?;
    Ok(vec![create, if_match, copy, hidden])
}

/// Staged bytes are invisible under every reader-facing name until completion (a
/// multipart upload is not an object) and promotion.
async fn staged_bytes_stay_hidden(
    cfg: &DrillConfig,
    store: &dyn Lake,
    fence: Fence,
    run: &str,
) -> Result<Row> {
    let dest = "promises/raw/hidden.jsonl";
    let mut up = store.stage(dest, run, Slot::First).await?;
    // More than one part, so at least one part is uploaded before completion.
    up.write(Bytes::from(vec![b'\n'; cfg.s3.part_size + (1 << 20)]))
        .await?;
    // What a reader lists: nothing under the destination's folder, before and after
    // the staging completes (a local temp file is a hidden name beside it, which a
    // listing leaves out; S3 stages under another prefix).
    let unseen = || async {
        Ok::<_, crate::error::Error>(
            store.head(dest).await?.is_none() && store.list("promises/raw").await?.files.is_empty(),
        )
    };
    let during = unseen().await?;
    let staged = up.complete().await?;
    let before_promote = unseen().await?;
    let promoted = store.promote(&staged, &PutMode::Create, fence).await?;
    let after = store
        .head(dest)
        .await?
        .is_some_and(|m| m.size == promoted.size);
    store.delete(&staged.key).await?;
    store.delete(dest).await?;
    let held = during && before_promote && after;
    Ok(promise(
        "store: staged bytes hidden",
        if held {
            "hidden".into()
        } else {
            "visible".into()
        },
        held,
        "staged bytes were visible before completion or promotion",
    ))
}

async fn scratch(cfg: &DrillConfig, drill_id: &str, scenario: &str) -> Result<ScenarioLake> {
    let lake = cfg.lake.join(&format!("drills/{drill_id}/{scenario}"));
    let store = crate::store::open(&lake, &cfg.s3).await?;
    Ok(ScenarioLake {
        lake,
        store,
        input_key: format!("inbox/{NAME}{}", cfg.compress.suffix()),
        layout: Layout::new("progress", NAME),
        compress: cfg.compress,
    })
}

/// Run every scenario; `passed` is true only if every invariant held.
pub async fn drill(cfg: &DrillConfig) -> Result<Report> {
    let drill_id = new_run_id();
    let old_in = generated(cfg.size / 4, 1);
    let new_in = generated(cfg.size, 2);
    // The input's identity is its stored bytes: compressed with --compress.
    let stored = |content: &[u8]| hex(&Sha256::digest(encode_all(cfg.compress, content)));
    let known = Known {
        old_in: stored(&old_in),
        new_in: stored(&new_in),
        old_out: expected_output(&old_in),
        new_out: expected_output(&new_in),
    };
    let lake = crate::store::open(&cfg.lake, &cfg.s3).await?;
    let mut points = vec!["mid-stream"];
    if lake.capabilities().multipart {
        points.push("after-part:1");
    }
    points.extend(["after-staging", "after-publish", "after-checkpoint"]);
    let mut rows = Vec::new();
    for point in points {
        let s = scratch(cfg, &drill_id, &point.replace(':', "-")).await?;
        tracing::info!(drill_id = %drill_id, scenario = point, "drilling");
        rows.push(crash_scenario(cfg, &s, point, &known, (&old_in, &new_in)).await?);
        if !cfg.keep {
            s.remove().await?;
        }
    }
    let s = scratch(cfg, &drill_id, "promises").await?;
    rows.extend(store_promises(cfg, &s, &drill_id).await?);
    if !cfg.keep {
        s.remove().await?;
    }
    let s = scratch(cfg, &drill_id, "refusal").await?;
    rows.extend(refusal_and_skip(cfg, &s, &known, (&old_in, &new_in)).await?);
    if !cfg.keep {
        s.remove().await?;
        // What is left of this drill's tree: folders, on a local lake.
        lake.remove_tree(&format!("drills/{drill_id}")).await?;
    }
    Ok(Report {
        passed: rows.iter().all(|r| r.held),
        drill_id,
        lake: cfg.lake.to_string(),
        input_bytes: new_in.len() as u64,
        rows,
    })
}

impl Report {
    /// The human table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "drill {} against {} ({} bytes of input)\n{:<28} {:<14} {:<12} {:<10} {}\n",
            self.drill_id,
            self.lake,
            self.input_bytes,
            "scenario",
            "visible after",
            "checkpoint",
            "rerun",
            "invariants"
        );
        for r in &self.rows {
            s.push_str(&format!(
                "{:<28} {:<14} {:<12} {:<10} {}\n",
                r.scenario,
                r.visible_after,
                r.checkpoint_after,
                r.rerun,
                if r.held {
                    "held".to_owned()
                } else {
                    format!("BROKEN: {}", r.violations.join("; "))
                }
            ));
        }
        s.push_str(if self.passed {
            "all invariants held\n"
        } else {
            "INVARIANTS BROKEN\n"
        });
        s
    }
}
