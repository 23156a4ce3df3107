//! The hooks a run takes from its command line, hidden from `--help`.
//!
//! `--crash-at` is in every build: `landing drill` rehearses the crash table by
//! starting this binary with it, so it is a flag the drill writes, never read from
//! the environment. Everything else (pausing, freezing inside a write, resizing the
//! dedup index's spill) exists only in a build with the `test-hooks` feature, which
//! `scripts/test` enables and a release build or the image never does; only that
//! build reads hooks from `LANDING_*` variables. So no variable set in a pod can
//! crash, pause, freeze or resize a production run: a release binary does not
//! contain their names (`scripts/test-infra` checks the image with `strings`).

use clap::Args;

#[cfg(feature = "test-hooks")]
use clap::builder::PossibleValue;

#[cfg(feature = "test-hooks")]
use super::choice::choice;

use landing_engine::hook::{CrashPoint, Hooks};
#[cfg(feature = "test-hooks")]
use landing_engine::hook::{FreezePoint, PausePoint};

/// The hooks of the line pass, which `run` and `check` share.
#[derive(Debug, Clone, Default, Args)]
pub struct LineHooks {
    /// Test hook: spill the dedup index every N distinct events (and N records).
    #[cfg(feature = "test-hooks")]
    #[arg(long, env = "LANDING_TEST_SPILL_EVERY", hide = true)]
    pub spill_every: Option<usize>,

    /// Test hook: after a spill, replay (`true`) or stage as lines come (`false`),
    /// instead of choosing by the copies seen before the spill.
    #[cfg(feature = "test-hooks")]
    #[arg(long, env = "LANDING_TEST_SPILL_REPLAY", hide = true)]
    pub spill_replay: Option<bool>,

    /// Test hook: keep only N bits of each id digest, so distinct ids share digests.
    #[cfg(feature = "test-hooks")]
    #[arg(long, env = "LANDING_TEST_ID_DIGEST_BITS", hide = true)]
    pub id_digest_bits: Option<u32>,

    /// Test hook: after a spill, the fingerprint table's room in events.
    #[cfg(feature = "test-hooks")]
    #[arg(long, env = "LANDING_TEST_SPILL_TABLE", hide = true)]
    pub spill_table: Option<usize>,

    /// Test hook: keep only N bits of the fingerprint table's canonical fingerprint.
    #[cfg(feature = "test-hooks")]
    #[arg(long, env = "LANDING_TEST_FINGERPRINT_BITS", hide = true)]
    pub fingerprint_bits: Option<u32>,
}

impl LineHooks {
    /// As the engine's [`Hooks`]; without `test-hooks`, none.
    #[cfg(feature = "test-hooks")]
    pub fn hooks(&self) -> Hooks {
        Hooks {
            spill_every: self.spill_every.filter(|&n| n > 0),
            spill_replay: self.spill_replay,
            id_digest_bits: self.id_digest_bits,
            spill_table: self.spill_table,
            fingerprint_bits: self.fingerprint_bits,
            ..Hooks::default()
        }
    }

    /// As the engine's [`Hooks`]; without `test-hooks`, none.
    #[cfg(not(feature = "test-hooks"))]
    pub fn hooks(&self) -> Hooks {
        Hooks::default()
    }
}

/// The hooks only `run` takes: where it dies, waits or freezes.
#[derive(Debug, Clone, Default, Args)]
pub struct RunHooks {
    /// Drill hook: kill the process at a named point (`landing drill` passes it).
    #[arg(long, hide = true)]
    #[cfg_attr(feature = "test-hooks", arg(env = "LANDING_CRASH_AT"))]
    pub crash_at: Option<CrashPoint>,

    /// Test hook: pause at a named point until a line arrives on stdin.
    #[cfg(feature = "test-hooks")]
    #[arg(
        long,
        env = "LANDING_PAUSE_AT",
        hide = true,
        value_parser = choice(&PausePoint::ALL, |p| PossibleValue::new(p.name()).help(p.describe()))
    )]
    pub pause_at: Option<PausePoint>,

    /// Test hook: stop the process (SIGSTOP) inside a named write.
    #[cfg(feature = "test-hooks")]
    #[arg(
        long,
        env = "LANDING_FREEZE_AT",
        hide = true,
        value_parser = choice(&FreezePoint::ALL, |p| PossibleValue::new(p.name()).help(p.describe()))
    )]
    pub freeze_at: Option<FreezePoint>,
}

impl RunHooks {
    /// These hooks over the line pass's `line`.
    pub fn over(&self, line: Hooks) -> Hooks {
        Hooks {
            crash_at: self.crash_at,
            #[cfg(feature = "test-hooks")]
            pause_at: self.pause_at,
            #[cfg(feature = "test-hooks")]
            freeze_at: self.freeze_at,
            ..line
        }
    }
}

/// The hook of `verify --deep`.
#[derive(Debug, Clone, Default, Args)]
pub struct DeepHooks {
    /// Test hook: spill --deep's index every N distinct events.
    #[cfg(feature = "test-hooks")]
    #[arg(long, env = "LANDING_TEST_SPILL_EVERY", hide = true)]
    pub spill_every: Option<usize>,
}

impl DeepHooks {
    /// Spill every this many distinct events; without `test-hooks`, never early.
    pub fn spill_every(&self) -> Option<usize> {
        #[cfg(feature = "test-hooks")]
        return self.spill_every.filter(|&n| n > 0);
        #[cfg(not(feature = "test-hooks"))]
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        line: LineHooks,
        #[command(flatten)]
        run: RunHooks,
    }

    #[derive(Parser)]
    struct Verify {
        #[command(flatten)]
        deep: DeepHooks,
    }

    #[test]
    fn the_drills_crash_point_is_a_flag_in_every_build() {
        let cli = Run::try_parse_from(["t", "--crash-at", "mid-stream"]).unwrap();
        let hooks = cli.run.over(cli.line.hooks());
        assert_eq!(hooks.crash_at, Some(CrashPoint::MidStream));
    }

    #[cfg(not(feature = "test-hooks"))]
    #[test]
    fn without_the_feature_no_test_hook_is_a_flag() {
        for flag in [
            "--pause-at",
            "--freeze-at",
            "--spill-every",
            "--spill-table",
        ] {
            assert!(
                Run::try_parse_from(["t", flag, "1"]).is_err(),
                "{flag} parsed"
            );
        }
        assert!(Verify::try_parse_from(["t", "--spill-every", "1"]).is_err());
        let cli = Run::try_parse_from(["t"]).unwrap();
        assert_eq!(cli.run.over(cli.line.hooks()), Hooks::default());
    }

    #[cfg(feature = "test-hooks")]
    #[test]
    fn with_the_feature_the_test_hooks_are_flags() {
        let cli = Run::try_parse_from(["t", "--spill-every", "3", "--spill-table", "0"]).unwrap();
        let hooks = cli.run.over(cli.line.hooks());
        assert_eq!((hooks.spill_every, hooks.spill_table), (Some(3), Some(0)));
        let cli = Verify::try_parse_from(["t", "--spill-every", "3"]).unwrap();
        assert_eq!(cli.deep.spill_every(), Some(3));
        for p in PausePoint::ALL {
            let cli = Run::try_parse_from(["t", "--pause-at", p.name()]).unwrap();
            assert_eq!(cli.run.pause_at, Some(p));
        }
        for p in FreezePoint::ALL {
            let cli = Run::try_parse_from(["t", "--freeze-at", p.name()]).unwrap();
            assert_eq!(cli.run.freeze_at, Some(p));
        }
    }
}
