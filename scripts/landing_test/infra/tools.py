"""The `tools` check: installs the pinned tools of scripts/test-infra
(landing_test/pins.py) on first use."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .. import pins
from .. import debian
from ..procs import Fatal
from ..venvs import ServerVenvs, install_lock
from .common import CACHE, CHECKOV_VENV, INFRA_VENV, CheckFailed, log, require, run, tail

PYTHON = os.environ.get("LANDING_TEST_PYTHON", "python3")


def venv_ready(venv: Path, reqs: list[str]) -> bool:
    marker = venv / ".landing-requirements"
    return (
        (venv / "bin" / "python").exists()
        and marker.exists()
        and marker.read_text() == "\n".join(reqs) + "\n"
    )


def install_venv(venv: Path, reqs: list[str]) -> None:
    if venv_ready(venv, reqs):
        return
    ilog = CACHE / f"install-{venv.name}.log"
    log(f"installing {' '.join(reqs)} into {venv} (log: {ilog})")
    shutil.rmtree(venv, ignore_errors=True)
    with open(ilog, "w") as out:
        for cmd in (
            [PYTHON, "-m", "venv", venv],
            [venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check",
             "--no-input", *reqs],
        ):
            p = subprocess.run([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT)
            if p.returncode != 0:
                raise CheckFailed(
                    f"could not install {reqs} ({' '.join(map(str, cmd[:3]))} exited "
                    f"{p.returncode}); log {ilog}:\n{tail(ilog.read_text(), 25)}"
                )
    (venv / ".landing-requirements").write_text("\n".join(reqs) + "\n")


def install_moto() -> None:
    """scripts/test-servers' moto venv, reused (or installed at the same pins)."""
    venvs = ServerVenvs(str(CACHE))
    try:
        venvs.moto.install(venvs.moto_ok)
    except Fatal as e:
        raise CheckFailed(str(e))


def deb_installed(pkg: str) -> bool:
    p = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return p.returncode == 0 and p.stdout.strip() == "install ok installed"


def install_debian() -> None:
    packages = pins.DEBIAN_PACKAGES
    missing = [pkg for cmd, pkg in packages.items() if shutil.which(cmd) is None or not deb_installed(pkg)]
    if not missing:
        return
    require(os.geteuid() == 0, f"Debian packages {missing} are missing and installing them needs root")
    require(shutil.which("apt-get") is not None, f"Debian packages {missing} are missing and there is no apt-get")
    ilog = CACHE / "install-debian.log"
    log(f"installing Debian packages {' '.join(missing)} (log: {ilog})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with open(ilog, "w") as out:
        for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", *missing]):
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode:
                raise CheckFailed(f"{' '.join(cmd)} failed; log {ilog}:\n{tail(ilog.read_text(), 25)}")
    still = [cmd for cmd in packages if shutil.which(cmd) is None]
    require(not still, f"installed {missing} but {still} still not on PATH")


def check_tools(ctx) -> str:
    CACHE.mkdir(parents=True, exist_ok=True)
    # One installer at a time per cache: scripts/test-servers and a parallel run of
    # this script share it.
    try:
        with install_lock(str(CACHE)):
            install_debian()
            # promtool, for check k8s-alerts: pinned like the test servers.
            debian.ensure(["prometheus"])
            install_venv(INFRA_VENV, pins.INFRA_REQUIREMENTS)
            install_venv(CHECKOV_VENV, pins.CHECKOV_REQUIREMENTS)
            install_moto()
    except Fatal as e:
        raise CheckFailed(str(e))
    reqs = pins.INFRA_REQUIREMENTS + pins.CHECKOV_REQUIREMENTS
    return (f"podman {run(['podman', '--version']).stdout.split()[-1]}, {', '.join(reqs)}, "
            f"moto {pins.MOTO_VERSION}, prometheus {pins.DEBIAN_PINNED['prometheus']}")
