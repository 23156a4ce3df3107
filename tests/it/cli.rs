//! The command line as a newcomer meets it: the help says what the tool is and shows
//! command lines to copy, shell completions work in a real bash, the man pages
//! render without a warning, and `-v`/`-q` set how much stderr says (without a
//! terminal, the default is unchanged). The terminal default is in `terminal`.

use std::process::Command;

use crate::support::*;

fn landing(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_landing"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("run landing")
}

fn stdout(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).expect("UTF-8")
}

/// The tool's help names what it lands today, and each everyday command's help ends
/// with examples; flags are grouped under headings.
#[test]
fn help_says_what_the_tool_is_and_shows_examples() {
    let top = stdout(&landing(&["--help"]));
    assert!(top.contains("any stream with a contract file"), "{top}");
    assert!(!top.contains("learner progress events"), "{top}");
    for cmd in ["run", "check", "status", "verify", "drill", "contract"] {
        let help = stdout(&landing(&[cmd, "--help"]));
        assert!(
            help.contains("Examples:\n  landing "),
            "`landing {cmd} --help` has no examples:\n{help}"
        );
    }
    let run = stdout(&landing(&["run", "--help"]));
    for heading in ["Input:", "Limits:", "Lake:", "Logging:", "S3:", "Inbox:"] {
        assert!(
            run.lines().any(|l| l == heading),
            "no {heading} heading:\n{run}"
        );
    }
}

/// `landing completions bash`, loaded into a real bash, completes a subcommand and a
/// flag of `run`.
#[test]
fn bash_completes_subcommands_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("landing.bash");
    std::fs::write(&script, landing(&["completions", "bash"]).stdout).unwrap();
    let complete = |words: &[&str]| {
        let words: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let words = words.join(" ");
        // COMP_WORDS as bash fills them for `landing <words><TAB>`.
        let program = format!(
            "source {}\nCOMP_WORDS=(landing {words})\nCOMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n\
             COMP_LINE=\"${{COMP_WORDS[*]}}\"\nCOMP_POINT=${{#COMP_LINE}}\n\
             _landing landing \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let o = Command::new("bash")
            .arg("--norc")
            .arg("-c")
            .arg(program)
            .output()
            .expect("bash runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(complete(&["ru"]), ["run"]);
    assert_eq!(complete(&["ver"]), ["verify"]);
    assert_eq!(complete(&["run", "--max-rej"]), ["--max-rejected-lines"]);
    let contract = complete(&["contract", ""]);
    for sub in ["check", "show", "schema"] {
        assert!(contract.iter().any(|c| c == sub), "{contract:?}");
    }
}

/// `landing man --out-dir` writes a page for the tool and one per command; `man -l`
/// renders each with groff's warnings on and prints none. `landing man` alone prints
/// the tool's page.
#[test]
fn man_pages_render_without_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    stdout(&landing(&["man", "--out-dir", out.to_str().unwrap()]));
    let mut pages: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for want in [
        "landing.1",
        "landing-run.1",
        "landing-check.1",
        "landing-status.1",
        "landing-verify.1",
        "landing-drill.1",
        "landing-contract-check.1",
    ] {
        assert!(pages.iter().any(|p| p == want), "{want} in {pages:?}");
    }
    for page in &pages {
        let o = Command::new("man")
            .args(["--warnings", "-l", "-Tutf8"])
            .arg(out.join(page))
            .env("MANWIDTH", "100")
            .output()
            .expect("man runs (Debian's man-db; scripts/test installs it)");
        let warnings = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && warnings.is_empty(),
            "{page}: {warnings}"
        );
        assert!(!o.stdout.is_empty(), "{page} renders to nothing");
    }
    let page = stdout(&landing(&["man"]));
    assert!(
        page.starts_with(".ie") || page.contains(".TH landing 1"),
        "{page}"
    );
}

/// Without a terminal the default log level is unchanged (INFO, every field); `-q`
/// leaves only errors, `-v` INFO and `-vv` DEBUG, whatever LANDING_LOG_LEVEL says.
#[test]
fn verbosity_switches_without_a_terminal() {
    let w = World::new(Kind::Local, "verbosity");
    let input = w.put_input("day.jsonl", format!("{}\n", event("a", 1)).as_bytes());
    let lake = w.lake_arg();
    // `env` None: no LANDING_LOG_LEVEL at all (the World sets `info` otherwise).
    let run = |flags: &[&str], level: Option<&str>| {
        let mut args = flags.to_vec();
        args.extend(["run", "--input", &input, "--lake", &lake]);
        let mut cmd = w.command(&args, &[]);
        match level {
            Some(l) => cmd.env("LANDING_LOG_LEVEL", l),
            None => cmd.env_remove("LANDING_LOG_LEVEL"),
        };
        let r = Run::from_output(cmd.output().expect("run landing"));
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        r.stderr
    };
    let plain = run(&[], None);
    assert!(
        plain.contains(" INFO ") && plain.contains("action=published"),
        "{plain}"
    );
    let quiet = run(&["-q"], None);
    assert!(quiet.is_empty(), "-q prints nothing on success: {quiet}");
    let quiet = run(&["-q"], Some("debug"));
    assert!(quiet.is_empty(), "-q wins over LANDING_LOG_LEVEL: {quiet}");
    let verbose = run(&["-v"], Some("error"));
    assert!(
        verbose.contains(" INFO ") && !verbose.contains(" DEBUG "),
        "{verbose}"
    );
    let debug = run(&["-vv"], None);
    assert!(debug.contains(" DEBUG "), "{debug}");
    let both = w.landing(
        &["-q", "-v", "run", "--input", &input, "--lake", &lake],
        &[],
    );
    assert_eq!(both.code, Some(2), "-q and -v conflict: {}", both.stderr);
}
