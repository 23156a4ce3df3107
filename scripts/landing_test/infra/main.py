"""Runs the checks of scripts/test-infra (its docstring is the usage)."""

from __future__ import annotations

import argparse
import subprocess
import os
import time
import traceback
from pathlib import Path

from .common import ROOT, CheckFailed, log
from .image import check_dockerfile, check_image
from .k8s import check_contracts_configmap, check_exit_codes, check_k8s_args, check_k8s_policy, check_k8s_schema
from .monitoring import check_k8s_alerts
from .policies import check_iam, check_parliament
from .terraform import check_checkov, check_terraform
from .tools import check_tools

# name (for --only) -> check, in the order they run; each returns a one-line detail or
# raises CheckFailed.
CHECKS = {
    "tools": check_tools,
    "exit-codes": check_exit_codes,
    "k8s-schema": check_k8s_schema,
    "k8s-policy": check_k8s_policy,
    "k8s-args": check_k8s_args,
    "k8s-alerts": check_k8s_alerts,
    "k8s-contracts": check_contracts_configmap,
    "terraform": check_terraform,
    "dockerfile": check_dockerfile,
    "checkov": check_checkov,
    "parliament": check_parliament,
    "iam": check_iam,
    "image": check_image,
}


class Ctx:
    def __init__(self, binary: Path):
        self.binary = binary


def main(doc: str, argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="scripts/test-infra", description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=None,
                    help="the landing binary to test (default: debug/landing in the target "
                         "directory cargo metadata names)")
    ap.add_argument("--only", default="", help="comma-separated check names (tools always runs)")
    opts = ap.parse_args(argv)
    wanted = [c for c in opts.only.split(",") if c] or list(CHECKS)
    unknown = set(wanted) - set(CHECKS)
    if unknown:
        ap.error(f"unknown checks {sorted(unknown)}; known: {', '.join(CHECKS)}")
    binary = opts.binary or str(Path(subprocess.run(
        [str(ROOT / "scripts" / "target-dir")], check=True, capture_output=True, text=True,
    ).stdout.strip()) / "debug" / "landing")
    ctx = Ctx(Path(binary).resolve())
    results = []
    start = time.monotonic()
    # `--only tools` needs no binary: scripts/test installs the tools while it builds.
    if wanted != ["tools"] and (not ctx.binary.is_file() or not os.access(ctx.binary, os.X_OK)):
        log(f"FAIL binary: {ctx.binary} is not an executable file "
            "(scripts/test builds it with `cargo build --all-targets`)")
        print("infra: 0 passed, 1 failed")
        return 1
    for name in ["tools"] + [c for c in CHECKS if c in wanted and c != "tools"]:
        t0 = time.monotonic()
        try:
            if name != "tools" and results and not results[0][1]:
                raise CheckFailed("not run: the tools could not be installed")
            detail = CHECKS[name](ctx)
            ok = True
        except CheckFailed as e:
            detail, ok = str(e), False
        except Exception:  # noqa: BLE001 - a crash of a check is its failure, reported in full
            detail, ok = traceback.format_exc(), False
        dt = time.monotonic() - t0
        results.append((name, ok, detail, dt))
        log(f"{'ok  ' if ok else 'FAIL'} {name} ({dt:.1f} s): {detail}")
    failed = [r for r in results if not r[1]]
    log(f"summary ({time.monotonic() - start:.0f} s):")
    for name, ok, detail, dt in results:
        log(f"  {'ok  ' if ok else 'FAIL'} {name:11} {dt:6.1f} s")
    print(f"infra: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0
