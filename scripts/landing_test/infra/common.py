"""What every check of scripts/test-infra uses: paths, failing, running commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
CACHE = Path(os.environ.get("LANDING_TEST_CACHE") or Path.home() / ".cache" / "landing-test")
INFRA_VENV = CACHE / "infra-venv"
CHECKOV_VENV = CACHE / "checkov-venv"


class CheckFailed(Exception):
    pass


def log(msg: str) -> None:
    print(f"infra: {msg}", file=sys.stderr, flush=True)


def require(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def run(cmd, *, check=True, timeout=600, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    p = subprocess.run([str(c) for c in cmd], timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise CheckFailed(
            f"{' '.join(map(str, cmd))[:300]} exited {p.returncode}:\n"
            + tail((p.stdout or "") + (p.stderr or ""))
        )
    return p


def tail(text: str, n: int = 40) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join("    " + line for line in lines[-n:])


def infra_python(program: str, *args, **kw) -> subprocess.CompletedProcess:
    """Run programs/PROGRAM with the infra venv's interpreter (kubernetes-validate,
    hcl2, parliament, boto3 live there, not in the interpreter running this script)."""
    return run([INFRA_VENV / "bin" / "python", PROGRAMS / program, *args], **kw)
