"""`scripts/mutants --check`: which modules changed since their last mutation run.

Reads scripts/mutants.runs (the module now, its path at the run, the commit whose
tree was run, the date) and compares each module's code now with its code at that
commit, both cut at their unit tests (the inline `#[cfg(test)] mod` that check-sizes
stops at too) and without `use` lines, comments and blank lines: what a mutant can
change. A module whose code differs, that was split or moved since (its code now is
not found whole in the file it came from), or that was never run is named. Exit 0
when every listed module is as it was run, 1 otherwise. Standard library only.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rust_source import lines_before_tests  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "scripts" / "mutants.runs"


def code(text: str) -> list[str]:
    """The lines a mutant can touch: up to the inline test module, without `use`
    lines, comments and blank lines, each stripped of its indentation."""
    lines = text.splitlines()
    lines = lines[:lines_before_tests(lines)]
    out = []
    for line in lines:
        s = line.strip()
        if not s or s.startswith("//") or s.startswith("use ") or s.startswith("pub use "):
            continue
        out.append(s)
    return out


def contains(whole: list[str], part: list[str]) -> bool:
    """Is `part` found in `whole` as one run of consecutive lines?"""
    if not part:
        return True
    n = len(part)
    return any(whole[i:i + n] == part for i in range(len(whole) - n + 1))


def verdict(now: list[str], then: list[str]) -> str:
    if now == then:
        return "unchanged"
    if contains(then, now):
        return "split out of its file, its code unchanged"
    return "changed"


def rows(path: Path) -> list[tuple[str, str, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        module, old, commit, date = line.split("\t")
        out.append((module, old, commit, date))
    return out


def at(commit: str, path: str) -> str | None:
    p = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
                       capture_output=True, text=True)
    return p.stdout if p.returncode == 0 else None


def main(argv: list[str]) -> int:
    stale = 0
    for module, old, commit, date in rows(RUNS):
        if commit == "-":
            print(f"never run   {module}")
            stale += 1
            continue
        then = at(commit, old)
        if then is None:
            print(f"unknown     {module}: {old} is not in {commit}")
            stale += 1
            continue
        now = code((ROOT / module).read_text())
        v = verdict(now, code(then))
        if v == "changed":
            stale += 1
            print(f"changed     {module} (run at {commit}, {date})")
        else:
            print(f"ok          {module} (run at {commit}, {date}): {v}")
    print(f"scripts/mutants --check: {stale} module(s) to run again", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
