"""Debian packages the tests run, at the versions pinned in pins.DEBIAN_PINNED:
installed with apt-get when missing (root), then checked. A package installed at
another version is an error, never a silent pass: the tests were written against
the pinned behaviour (the Pushgateway's grouping and replace semantics, promtool's
unit-test format).

    PYTHONPATH=scripts python3 -m landing_test.debian PACKAGE...

No service is started by the install: the packages' init scripts ask
/usr/sbin/policy-rc.d, which Debian's container images ship answering "denied"
(101); where it is missing, one that denies is put there for the install and
removed afterwards. The tests start their own servers, on 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import pins
from .procs import Fatal

POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
LOCK_TIMEOUT = ["-o", "DPkg::Lock::Timeout=300"]


def log(msg: str) -> None:
    print(f"debian: {msg}", file=sys.stderr, flush=True)


def installed_version(pkg: str) -> str | None:
    """The installed version of `pkg`, or None."""
    p = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", pkg],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None
    status, _, version = p.stdout.partition("\t")
    return version.strip() if status.strip() == "install ok installed" else None


def mismatches(wanted: dict[str, str], installed: dict[str, str | None]) -> list[str]:
    """One line per package whose installed version is not its pin."""
    return [f"{pkg}: {installed.get(pkg) or 'not installed'}, pinned {ver}"
            for pkg, ver in wanted.items() if installed.get(pkg) != ver]


def _apt(args: list[str], out) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", *LOCK_TIMEOUT, *args]
    if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode:
        raise Fatal(f"{' '.join(cmd)} failed")


def ensure(packages: list[str]) -> dict[str, str]:
    """Install the missing ones of `packages` at their pins; fail on any other version."""
    unknown = [p for p in packages if p not in pins.DEBIAN_PINNED]
    if unknown:
        raise Fatal(f"no pin for Debian packages {unknown} in landing_test/pins.py")
    wanted = {p: pins.DEBIAN_PINNED[p] for p in packages}
    missing = [p for p in packages if installed_version(p) is None]
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise Fatal(f"Debian packages {missing} are missing; installing them needs root "
                        f"and apt-get (apt-get install {' '.join(f'{p}={wanted[p]}' for p in missing)})")
        log(f"installing Debian packages {', '.join(f'{p}={wanted[p]}' for p in missing)}")
        placed = not POLICY_RC_D.exists()
        if placed:
            POLICY_RC_D.write_text("#!/bin/sh\n# landing tests: start no service\nexit 101\n")
            POLICY_RC_D.chmod(0o755)
        try:
            _apt(["update"], sys.stderr)
            _apt(["install", "-y", *(f"{p}={wanted[p]}" for p in missing)], sys.stderr)
        finally:
            if placed:
                POLICY_RC_D.unlink()
    installed = {p: installed_version(p) for p in packages}
    wrong = mismatches(wanted, installed)
    if wrong:
        raise Fatal("Debian packages not at their pinned versions (landing_test/pins.py):\n  "
                    + "\n  ".join(wrong))
    return {p: v for p, v in installed.items() if v}


def main(argv: list[str]) -> int:
    try:
        got = ensure(argv)
    except Fatal as e:
        log(f"error: {e}")
        return 1
    log("Debian packages at their pins: " + ", ".join(f"{p} {v}" for p, v in got.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
