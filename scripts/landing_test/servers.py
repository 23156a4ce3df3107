"""The three S3 test servers and one run of scripts/test-servers (its usage and what
it exports: see that program's docstring, `__doc__` here)."""

import glob
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import pins
from .procs import (Fatal, abandoned, ensure_std_fds, exposed, find_processes, free_ports,
                    listeners, log, owner_record, set_pdeathsig, signal_pids, stop_processes)
from .s3 import S3, TRANSPORT_ERRORS, S3Error
from .venvs import ServerVenvs, tail

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")

LOCALSTACK_KEY = "test"
LP_BUCKET = "landing-lp"
MOTO_ACCESS_KEY = "landing-test-moto"
MOTO_SECRET_KEY = "landing-test-moto-secret"
MARK_VAR = "_TEST_SERVERS_RUN"
# Set for the second half of a run, after it re-ran itself with the moto venv's
# interpreter: "START CACHE" (the monotonic clock at the start, the cache folder).
INSTALLED_VAR = "_TEST_SERVERS_INSTALLED"
RUN_PREFIX = "landing-test."
PORT_CLASH = re.compile(
    r"address already in use|port allocation failed|not available on|couldn't listen on",
    re.IGNORECASE,
)
# LocalStack (Twisted) keeps running when its gateway cannot listen, so a clash is read
# from the log while the process lives, not only after it died.

VERSIONS = "SeaweedFS %s, moto %s and LocalStack %s" % (
    pins.SEAWEED_VERSION, pins.MOTO_VERSION, pins.LOCALSTACK_VERSION)
USAGE = """\
usage: scripts/test-servers -- COMMAND [ARGS...]

Starts %s on 127.0.0.1
(installing them on first use), runs COMMAND with LANDING_TEST_* variables describing
them, stops the servers, and exits with COMMAND's exit code. --help tells more.
""" % VERSIONS


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def clean_env(drop=()):
    """This environment without AWS_* settings (profile, endpoint, keys, ...) and `drop`."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in drop}


# ---------------------------------------------------------------- servers


class Server:
    """One server process (restarted on another port after a lost port race)."""

    # Whether the process keeps running after failing to listen (then a port race is
    # read from its log while it lives, not only after it exited).
    survives_port_clash = False

    def __init__(self, name, version, run_dir, mark):
        """`mark`: the NAME=VALUE its process and whatever that starts carry in their
        environment (the run's mark with a ":<server>" suffix)."""
        self.name, self.version = name, version
        self.run_dir = run_dir
        self.logfile = os.path.join(run_dir, "logs", name.lower() + ".log")
        self.mark = mark
        self.proc = None
        self.port = None

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def spawn(self, argv, env, cwd):
        # Keep an earlier attempt's log apart, so only the current one is judged.
        if os.path.exists(self.logfile) and os.path.getsize(self.logfile):
            with open(self.logfile, "rb") as src, open(self.logfile + ".earlier", "ab") as dst:
                shutil.copyfileobj(src, dst)
        env = dict(env)
        name, _, value = self.mark.partition("=")
        env[name] = value
        with open(self.logfile, "wb") as out:
            try:
                self.proc = subprocess.Popen(
                    argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, preexec_fn=set_pdeathsig,
                )
            except OSError as e:
                raise Fatal("could not start %s (%s): %s" % (self.name, argv[0], e))

    def log_text(self):
        try:
            with open(self.logfile, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def port_clash(self):
        return bool(PORT_CLASH.search(self.log_text()))

    def credentials(self):
        raise NotImplementedError

    def answers_s3(self):
        """A signed ListBuckets; raises S3Error or a TRANSPORT_ERRORS one if it fails."""
        S3(self.endpoint, *self.credentials(), timeout=5).list_buckets()

    def wait_ready(self, timeout, poll=0.2):
        """'ready', 'clash' (lost a port race: stopped, retry elsewhere) or a Fatal."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            if self.proc.poll() is not None:
                if self.port_clash():
                    return "clash"
                self.fail("%s exited (status %s) before answering on %s"
                          % (self.name, self.proc.returncode, self.endpoint))
            if self.survives_port_clash and self.port_clash():
                self.stop(5)
                return "clash"
            try:
                self.answers_s3()
                # Not some other process that took the port first (it would answer
                # while this server fails to listen).
                if self.listens_on(self.port):
                    return "ready"
                last = "something else answers on port %d" % self.port
            except (S3Error,) + TRANSPORT_ERRORS as e:
                last = "%s: %s" % (type(e).__name__, e)
            if time.monotonic() > deadline:
                self.fail("%s not ready on %s after %d s: %s" % (self.name, self.endpoint, timeout, last))
            time.sleep(poll)

    def fail(self, why):
        log("last lines of the %s log (%s):" % (self.name, self.logfile))
        tail(self.logfile, 40, "    ")
        raise Fatal("%s did not start: %s" % (self.name, why))

    def start_and_wait(self, timeout):
        for attempt in (1, 2, 3):
            outcome = self.wait_ready(timeout)
            if outcome == "ready":
                return
            if attempt == 3:
                self.fail("lost a port race three times")
            log("%s lost a port race, retrying on other ports" % self.name)
            self.proc.wait()
            self.start()

    def listens_on(self, port):
        return any(p == port and proto.startswith("tcp") for proto, _, p in listeners(self.pids()))

    def exposed(self):
        """Its listeners on anything but loopback, as text."""
        return exposed(listeners(self.pids()))

    def pids(self):
        if self.proc is None:
            return []
        return find_processes([self.mark], roots=[self.proc.pid])

    def stop_signal(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.terminate()
            except OSError:
                pass

    def stop(self, grace):
        if self.proc is None:
            return
        self.stop_signal()
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            log("%s did not stop after %d s, killing it" % (self.name, grace))
            self.proc.kill()
            self.proc.wait()
        # Whatever it started and left behind.
        signal_pids(find_processes([self.mark]), signal.SIGKILL)


def seaweed_identities(keys, bucket):
    """SeaweedFS's -s3.config: admin (everything), reader (lake/raw/*, list), job-lp
    (read inbox/*, read and write lake/*, list), each with its (access, secret) key
    from `keys`."""

    def creds(who):
        return [{"accessKey": keys[who][0], "secretKey": keys[who][1]}]

    b = bucket
    return {
        "identities": [
            {"name": "admin", "credentials": creds("admin"),
             "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
            {"name": "reader", "credentials": creds("reader"),
             "actions": ["Read:%s/lake/raw/*" % b, "List:%s" % b]},
            {"name": "job-lp", "credentials": creds("lp"),
             "actions": ["Read:%s/inbox/*" % b, "Read:%s/lake/*" % b, "Write:%s/lake/*" % b,
                         "List:%s" % b]},
        ]
    }


def identity_failures(admin, lp, reader, forged, bucket):
    """Proves the SeaweedFS identities are enforced as intended, with one S3 client
    each (`forged`: the admin key with a wrong secret): a list of what did not hold.
    Leaves the bucket as it found it."""
    b, failures = bucket, []

    def expect(what, allowed, fn):
        try:
            fn()
            ok, got = allowed, "allowed"
        except S3Error as e:
            ok, got = (not allowed) and e.status == 403, "%s %s" % (e.status, e.code)
        if not ok:
            failures.append("%s: expected %s, got %s" % (what, "allowed" if allowed else "403", got))

    probe = ".test-servers-probe"
    inbox, staging, raw = "inbox/" + probe, "lake/staging/" + probe, "lake/raw/" + probe
    body = b"probe\n"
    try:
        admin.put(b, inbox, body)
        expect("job-lp GET inbox/*", True, lambda: lp.get(b, inbox))
        expect("job-lp PUT inbox/*", False, lambda: lp.put(b, inbox, body))
        expect("job-lp PUT lake/staging/*", True, lambda: lp.put(b, staging, body))
        expect("job-lp PUT lake/raw/*", True, lambda: lp.put(b, raw, body))
        expect("job-lp PUT outside inbox/ and lake/", False, lambda: lp.put(b, probe, body))
        expect("job-lp LIST", True, lambda: lp.key_count(b, "lake/"))
        expect("reader GET lake/raw/*", True, lambda: reader.get(b, raw))
        expect("reader GET lake/staging/*", False, lambda: reader.get(b, staging))
        expect("reader PUT lake/raw/*", False, lambda: reader.put(b, raw, body))
        expect("admin key with a wrong secret", False, lambda: forged.key_count(b))
    except (S3Error,) + TRANSPORT_ERRORS as e:
        failures.append("admin request failed: %s" % e)
    finally:
        for key in (inbox, staging, raw, probe):
            try:
                admin.delete(b, key)
            except (S3Error,) + TRANSPORT_ERRORS:
                pass
    try:
        left = admin.key_count(b)
    except (S3Error,) + TRANSPORT_ERRORS as e:
        left, failures = 0, failures + ["listing %s as admin failed: %s" % (b, e)]
    if left:
        failures.append("bucket %s not empty after the self-check (%d objects)" % (b, left))
    return failures


class Seaweed(Server):
    def __init__(self, venv, run_dir, mark):
        super().__init__("SeaweedFS", pins.SEAWEED_VERSION, run_dir, mark)
        self.venv = venv
        self.identities = os.path.join(run_dir, "identities.json")
        self.keys = self.write_identities()
        self.ports = []

    def write_identities(self):
        def cred(prefix):
            return prefix + secrets.token_hex(8).upper(), secrets.token_hex(20)

        keys = {"admin": cred("LTADMIN"), "lp": cred("LTJOBLP"), "reader": cred("LTREADER")}
        fd = os.open(self.identities, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(seaweed_identities(keys, LP_BUCKET), f, indent=1)
        return keys

    def credentials(self):
        return self.keys["admin"]

    def start(self):
        master, volume, filer, s3, admin = free_ports(5, 0)
        self.ports = [master, volume, filer, s3, admin]
        self.port = s3
        # Recorded so that a later run can remove this run's sockets if it is aborted.
        with open(os.path.join(self.run_dir, "seaweed.ports"), "w") as f:
            f.write(" ".join(str(p) for p in self.ports))
        data, tmp = os.path.join(self.run_dir, "seaweed-data"), os.path.join(self.run_dir, "seaweed-tmp")
        for d in (data, tmp):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        argv = [
            self.venv.bin("weed"), "-logtostderr", "mini", "-dir=" + data, "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1", "-s3.config=" + self.identities, "-master.telemetry=false",
            "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false",
            "-volume.preStopSeconds=0",
            # Each bucket is a SeaweedFS collection with volumes of its own; with the
            # default 128 MB volumes the suite runs out after ~70 buckets (PutObject
            # then answers 500 InternalError). 16 MB volumes and an automatic volume
            # count leave room for the hundreds of buckets the suite creates.
            "-volume.max=0", "-master.volumeSizeLimitMB=16",
        ]
        # Every listener gets a chosen port (gRPC = HTTP + 10000, which the embedded
        # admin worker assumes).
        for flag, port in (("master", master), ("volume", volume), ("filer", filer),
                           ("s3", s3), ("admin", admin)):
            argv += ["-%s.port=%d" % (flag, port), "-%s.port.grpc=%d" % (flag, port + 10000)]
        # Unix socket paths are limited to ~107 bytes; SeaweedFS's default is /tmp.
        if len(self.run_dir) < 80:
            argv += ["-s3.localSocket=" + os.path.join(self.run_dir, "seaweed-s3.sock"),
                     "-filer.localSocket=" + os.path.join(self.run_dir, "seaweed-filer.sock")]
        # weed mini turns AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY into an extra identity
        # and S3_BUCKET into a bucket: keep the caller's values away from it. Its logs
        # go to stderr only (by default glog also writes weed.* files into $TMPDIR).
        env = clean_env(drop=("S3_BUCKET", "S3_TABLE_BUCKET", "S3_EXTERNAL_URL"))
        env["TMPDIR"] = tmp
        self.argv, self.env = argv, env
        self.spawn(argv, env, self.run_dir)

    def restart(self, timeout):
        """Stop the server (SIGTERM, as a rolling restart does) and start it again on
        the same ports and data: what a client sees of a store that restarts."""
        self.stop(20)
        self.spawn(self.argv, self.env, self.run_dir)
        if self.wait_ready(timeout) != "ready":
            self.fail("its ports were taken while it restarted")

    def remove_sockets(self):
        remove_seaweed_sockets(self.ports)

    def setup(self):
        """Create the bucket as admin, then prove the identities are enforced as intended."""
        ep, b = self.endpoint, LP_BUCKET
        admin = S3(ep, *self.keys["admin"])
        try:
            admin.create_bucket(b)
        except S3Error as e:
            if e.code != "BucketAlreadyOwnedByYou":
                raise Fatal("SeaweedFS: creating bucket %s failed: %s" % (b, e))
        failures = identity_failures(admin, S3(ep, *self.keys["lp"]), S3(ep, *self.keys["reader"]),
                                     S3(ep, self.keys["admin"][0], "0" * 40), b)
        if failures:
            raise Fatal("SeaweedFS identities self-check failed:\n  " + "\n  ".join(failures))


def remove_seaweed_sockets(ports):
    # SeaweedFS keeps gRPC unix sockets in /tmp named after its ports; it removes them
    # on a clean stop, not when killed.
    for p in ports:
        for q in (p, p + 10000):
            for sock in glob.glob("/tmp/seaweedfs-*-%d.sock" % q):
                try:
                    os.remove(sock)
                except OSError:
                    pass


class Moto(Server):
    def __init__(self, venv, run_dir, mark):
        super().__init__("moto", pins.MOTO_VERSION, run_dir, mark)
        self.venv = venv

    def credentials(self):
        return MOTO_ACCESS_KEY, MOTO_SECRET_KEY

    def start(self):
        (self.port,) = free_ports(0, 1)
        argv = [self.venv.bin("moto_server"), "-H", "127.0.0.1", "-p", str(self.port)]
        self.spawn(argv, clean_env(), self.run_dir)


class Localstack(Server):
    # Its Twisted gateway logs CannotListenError and the runtime goes on ("Ready.").
    survives_port_clash = True

    def __init__(self, venv, run_dir, mark):
        super().__init__("LocalStack", pins.LOCALSTACK_VERSION, run_dir, mark)
        self.venv = venv
        self.home = os.path.join(run_dir, "localstack")

    def credentials(self):
        return LOCALSTACK_KEY, LOCALSTACK_KEY

    def start(self):
        (self.port,) = free_ports(0, 1)
        shutil.rmtree(self.home, ignore_errors=True)
        root, tmp = os.path.join(self.home, "root"), os.path.join(self.home, "tmp")
        for d in (root, tmp):
            os.makedirs(d)
        # A clean environment: LocalStack reads many variables (DEBUG, PERSISTENCE,
        # DOCKER_*, ...) and the caller's must not change how it runs.
        env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}
        env.update(
            HOME=self.home,  # its plugin cache goes to ~/.cache
            TMPDIR=tmp,
            SERVICES="s3",
            GATEWAY_LISTEN="127.0.0.1:%d" % self.port,
            LOCALSTACK_HOST="127.0.0.1:%d" % self.port,
            PERSISTENCE="0",
            SKIP_SSL_CERT_DOWNLOAD="1",
            DISABLE_EVENTS="1",  # no analytics
            DNS_ADDRESS="0",  # no DNS server (it would bind 0.0.0.0:53 as root)
            EAGER_SERVICE_LOADING="1",
            OVERRIDE_IN_DOCKER="0",  # else it writes to /var/lib/localstack
            FILESYSTEM_ROOT=root,
            LANDING_TEST_LOCALSTACK_S3_DIR=os.path.join(self.home, "s3-storage"),
            PYTHONDONTWRITEBYTECODE="1",
        )
        self.spawn([self.venv.python, os.path.join(PROGRAMS, "localstack_launcher.py")], env, self.home)


# ---------------------------------------------------------------- the run


class Runner:
    def __init__(self, venvs):
        self.venvs = venvs
        self.run_dir = None
        self.servers = []
        self.cmd = None
        self.cleaned = False

    @property
    def cmd_mark(self):
        return "%s=%s" % (MARK_VAR, self.run_dir)

    # -- run dir and leftovers of aborted runs

    def sweep_aborted_runs(self):
        """Stop what runs killed without a chance to clean up left running, then delete
        their folders."""
        for old in glob.glob(os.path.join(tempfile.gettempdir(), RUN_PREFIX + "*")):
            if not abandoned(old):
                continue
            # The command's mark, and the servers' (the same with a ":<server>" suffix).
            mark = "%s=%s" % (MARK_VAR, old)
            stop_processes(lambda: find_processes([mark], prefix=True), 5,
                           "leftovers of the aborted run %s" % old)
            try:
                with open(os.path.join(old, "seaweed.ports")) as f:
                    remove_seaweed_sockets([int(p) for p in f.read().split()])
            except (OSError, ValueError):
                pass
            shutil.rmtree(old, ignore_errors=True)

    def make_run_dir(self):
        self.run_dir = tempfile.mkdtemp(prefix=RUN_PREFIX)
        with open(os.path.join(self.run_dir, "owner.pid"), "w") as f:
            f.write(owner_record())
        os.makedirs(os.path.join(self.run_dir, "logs"))

    # -- servers

    def start_servers(self, timeout):
        seaweed = Seaweed(self.venvs.seaweed, self.run_dir, self.cmd_mark + ":seaweedfs")
        moto = Moto(self.venvs.moto, self.run_dir, self.cmd_mark + ":moto")
        localstack = Localstack(self.venvs.localstack, self.run_dir, self.cmd_mark + ":localstack")
        self.servers = [seaweed, moto, localstack]
        t0 = time.monotonic()
        for s in self.servers:
            s.start()
        for s in self.servers:
            s.start_and_wait(timeout)
        seaweed.setup()
        for s in self.servers:
            beyond = s.exposed()
            if beyond:
                raise Fatal("%s listens beyond loopback: %s" % (s.name, ", ".join(beyond)))
        log(", ".join("%s %s on %s" % (s.name, s.version, s.endpoint) for s in self.servers)
            + " (ready in %.0f s)" % (time.monotonic() - t0))
        return seaweed, moto, localstack

    def exports(self, seaweed, moto, localstack):
        k = seaweed.keys
        return {
            "LANDING_TEST_S3": "1",
            "LANDING_TEST_SEAWEED_ENDPOINT": seaweed.endpoint,
            "LANDING_TEST_SEAWEED_ACCESS_KEY": k["admin"][0],
            "LANDING_TEST_SEAWEED_SECRET_KEY": k["admin"][1],
            "LANDING_TEST_SEAWEED_LP_ACCESS_KEY": k["lp"][0],
            "LANDING_TEST_SEAWEED_LP_SECRET_KEY": k["lp"][1],
            "LANDING_TEST_SEAWEED_READER_ACCESS_KEY": k["reader"][0],
            "LANDING_TEST_SEAWEED_READER_SECRET_KEY": k["reader"][1],
            "LANDING_TEST_SEAWEED_LP_BUCKET": LP_BUCKET,
            "LANDING_TEST_MOTO_ENDPOINT": moto.endpoint,
            "LANDING_TEST_MOTO_ACCESS_KEY": MOTO_ACCESS_KEY,
            "LANDING_TEST_MOTO_SECRET_KEY": MOTO_SECRET_KEY,
            "LANDING_TEST_LOCALSTACK_ENDPOINT": localstack.endpoint,
            "LANDING_TEST_LOCALSTACK_ACCESS_KEY": LOCALSTACK_KEY,
            "LANDING_TEST_LOCALSTACK_SECRET_KEY": LOCALSTACK_KEY,
            "LANDING_TEST_DUCKDB_PYTHON": self.venvs.duckdb.python,
            "LANDING_TEST_JSONSCHEMA_PYTHON": self.venvs.jsonschema.python,
            "LANDING_TEST_SERVERS_PID": str(os.getpid()),
        }

    def restart_seaweed(self, timeout):
        """SIGUSR1: restart SeaweedFS in place (the nemesis's store restart). Further
        SIGUSR1s are ignored until it answers again."""
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        t0 = time.monotonic()
        seaweed = next(s for s in self.servers if isinstance(s, Seaweed))
        seaweed.restart(timeout)
        log("SeaweedFS restarted (SIGUSR1) in %.1f s" % (time.monotonic() - t0))
        signal.signal(signal.SIGUSR1, lambda *_: self.restart_seaweed(timeout))

    # -- the command

    def command_pids(self):
        return find_processes([self.cmd_mark], roots=[self.cmd.pid] if self.cmd else [])

    def stop_command(self, grace, why):
        if self.run_dir is None:
            return
        stop_processes(self.command_pids, grace, why)
        if self.cmd is not None:
            try:
                self.cmd.wait(5)
            except subprocess.TimeoutExpired:
                pass

    def run_command(self, argv, exports):
        env = dict(os.environ)
        env.update(exports)
        # COMMAND and everything it starts carry this variable, so that whatever it
        # leaves running (an orphan keeps it too) can be found and stopped; processes
        # started with a cleared environment are found as its descendants while it lives.
        env[MARK_VAR] = self.run_dir
        log("running: %s" % " ".join(argv))
        try:
            self.cmd = subprocess.Popen(argv, env=env)
        except FileNotFoundError:
            log("%s: command not found" % argv[0])
            return 127
        except PermissionError:
            log("%s: permission denied" % argv[0])
            return 126
        except OSError as e:
            log("%s: %s" % (argv[0], e))
            return 126
        rc = self.cmd.wait()
        return 128 - rc if rc < 0 else rc

    # -- cleanup

    def cleanup(self):
        if self.cleaned or self.run_dir is None:
            return
        self.cleaned = True
        self.stop_command(5, "the command exited but left processes running")
        # TERM all first so they shut down in parallel.
        for s in self.servers:
            s.stop_signal()
        for s in self.servers:
            s.stop(20)
        for s in self.servers:
            if isinstance(s, Seaweed):
                s.remove_sockets()
        log_dir = os.environ.get("LANDING_TEST_LOG_DIR")
        logs = os.path.join(self.run_dir, "logs")
        if log_dir and os.path.isdir(logs):
            try:
                os.makedirs(log_dir, exist_ok=True)
                for name in os.listdir(logs):
                    shutil.copy(os.path.join(logs, name), log_dir)
            except OSError as e:
                log("could not copy the server logs to %s: %s" % (log_dir, e))
        shutil.rmtree(self.run_dir, ignore_errors=True)
        if self.servers:
            log("servers stopped, data removed")


SIGNAL_NAMES = {signal.SIGINT: "INT", signal.SIGTERM: "TERM", signal.SIGHUP: "HUP"}


def on_signal(signum, _frame):
    for s in SIGNAL_NAMES:
        signal.signal(s, signal.SIG_IGN)
    raise Interrupted(signum)


def installed_here(venvs):
    """The monotonic start time if this process is the second half of a run (the
    servers installed, re-run by the moto venv's interpreter), else None."""
    start, _, cache = os.environ.pop(INSTALLED_VAR, "").partition(" ")
    if cache != venvs.cache or os.path.realpath(sys.prefix) != os.path.realpath(venvs.moto.path):
        return None
    try:
        return float(start)
    except ValueError:
        return None


def rerun_in_moto_venv(venvs, argv, start):
    """Replace this process (same pid) by this program run with the moto venv's
    interpreter, whose botocore signs the S3 calls (s3.py)."""
    for s in SIGNAL_NAMES:
        signal.signal(s, signal.SIG_DFL)
    os.environ[INSTALLED_VAR] = "%f %s" % (start, venvs.cache)
    program = os.path.abspath(sys.argv[0])
    try:
        os.execv(venvs.moto.python, [venvs.moto.python, program, "--"] + argv)
    except OSError as e:
        raise Fatal("could not run %s with %s: %s" % (program, venvs.moto.python, e))


def main(argv, doc=None):
    """scripts/test-servers ARGV; `doc` (that program's docstring) is what --help prints."""
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(doc + "\nThe versions started: %s.\n" % VERSIONS if doc else USAGE)
        return 0
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.stderr.write(USAGE)
        return 2
    timeout = os.environ.get("LANDING_TEST_READY_TIMEOUT", "120")
    if not timeout.isdigit():
        log("ERROR: LANDING_TEST_READY_TIMEOUT must be a whole number of seconds")
        return 1
    ensure_std_fds()
    cache = os.environ.get("LANDING_TEST_CACHE") or os.path.join(
        os.environ.get("HOME") or "/root", ".cache", "landing-test")
    venvs = ServerVenvs(cache)
    runner = Runner(venvs)
    for s in SIGNAL_NAMES:
        signal.signal(s, on_signal)
    rc = 1
    try:
        t0 = installed_here(venvs)
        if t0 is None:
            t0 = time.monotonic()
            venvs.install()
            rerun_in_moto_venv(venvs, argv, t0)
        runner.sweep_aborted_runs()
        runner.make_run_dir()
        servers = runner.start_servers(int(timeout))
        log("servers installed and started in %.0f s" % (time.monotonic() - t0))
        signal.signal(signal.SIGUSR1, lambda *_: runner.restart_seaweed(int(timeout)))
        rc = runner.run_command(argv, runner.exports(*servers))
    except Interrupted as e:
        log("got SIG%s, stopping" % SIGNAL_NAMES[e.signum])
        runner.stop_command(10, "interrupted")
        rc = 128 + e.signum
    except Fatal as e:
        log("ERROR: %s" % e)
        rc = 1
    finally:
        for s in list(SIGNAL_NAMES) + [signal.SIGUSR1]:
            signal.signal(s, signal.SIG_IGN)
        runner.cleanup()
    return rc
