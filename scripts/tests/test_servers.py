"""Unit tests of scripts/test-servers' start-up decisions (landing_test/servers.py):
readiness and port races, the SeaweedFS identities and their self-check, the sweep
of aborted runs, and the command line. Offline (no server, no botocore), standard
library only.

    python3 -m unittest discover -s scripts/tests
"""

import contextlib
import fnmatch
import io
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from landing_test import procs, servers, venvs  # noqa: E402
from landing_test.s3 import S3Error  # noqa: E402


def quiet():
    """Swallow what a failing start-up prints (the server's log tail)."""
    return contextlib.redirect_stderr(io.StringIO())


class FakeProc:
    def __init__(self, returncode=None):
        self.returncode = returncode
        self.pid = 0

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        return self.returncode


class FakeServer(servers.Server):
    """A server whose process, S3 answer and listening sockets are scripted."""

    def __init__(self, run_dir, exited=None, log="", answers=True, listens=True):
        super().__init__("Fake", "1.0", run_dir, "MARK=fake")
        os.makedirs(os.path.dirname(self.logfile), exist_ok=True)
        with open(self.logfile, "w") as f:
            f.write(log)
        self.proc, self.port = FakeProc(exited), 4566
        self.answers, self.listens = answers, listens
        self.stopped = self.started = 0

    def credentials(self):
        return "ak", "sk"

    def answers_s3(self):
        if isinstance(self.answers, Exception):
            raise self.answers
        if not self.answers:
            raise ConnectionRefusedError(111, "Connection refused")

    def listens_on(self, port):
        return self.listens

    def stop(self, grace):
        self.stopped += 1

    def start(self):
        self.started += 1


class ReadinessTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def test_ready_when_it_answers_s3_on_its_own_port(self):
        self.assertEqual(FakeServer(self.dir).wait_ready(0, poll=0), "ready")

    def test_another_process_answering_on_the_port_is_not_ready(self):
        with quiet(), self.assertRaisesRegex(procs.Fatal, "something else answers on port 4566"):
            FakeServer(self.dir, listens=False).wait_ready(0, poll=0)

    def test_an_s3_error_or_no_answer_is_not_ready(self):
        s = FakeServer(self.dir, answers=S3Error(403, "SignatureDoesNotMatch"))
        with quiet(), self.assertRaisesRegex(procs.Fatal, "not ready .* S3Error: 403 SignatureDoesNotMatch"):
            s.wait_ready(0, poll=0)
        with quiet(), self.assertRaisesRegex(procs.Fatal, "ConnectionRefusedError"):
            FakeServer(self.dir, answers=False).wait_ready(0, poll=0)

    def test_an_exit_is_a_port_race_only_if_the_log_says_so(self):
        clash = "listen tcp 127.0.0.1:18333: bind: address already in use\n"
        self.assertEqual(FakeServer(self.dir, exited=1, log=clash).wait_ready(5, poll=0), "clash")
        with quiet(), self.assertRaisesRegex(procs.Fatal, r"exited \(status 1\) before answering"):
            FakeServer(self.dir, exited=1, log="panic: bad flag\n").wait_ready(5, poll=0)

    def test_a_server_that_survives_a_clash_is_stopped_and_retried(self):
        s = FakeServer(self.dir, log="twisted.internet.error.CannotListenError: Couldn't listen on "
                                     "127.0.0.1:4566: [Errno 98] Address already in use.\n")
        s.survives_port_clash = True
        self.assertEqual(s.wait_ready(5, poll=0), "clash")
        self.assertEqual(s.stopped, 1)

    def test_port_races_are_retried_twice(self):
        s = FakeServer(self.dir)
        outcomes = iter(["clash", "clash", "ready"])
        with quiet(), mock.patch.object(s, "wait_ready", lambda timeout: next(outcomes)):
            s.start_and_wait(5)
        self.assertEqual(s.started, 2)
        s = FakeServer(self.dir)
        with quiet(), mock.patch.object(s, "wait_ready", lambda timeout: "clash"), \
                self.assertRaisesRegex(procs.Fatal, "lost a port race three times"):
            s.start_and_wait(5)

    def test_port_clash_messages(self):
        for line in ("bind: address already in use",
                     "CannotListenError: Couldn't listen on 127.0.0.1:4566",
                     "OSError: [Errno 98] Address already in use",
                     "Port 5000 is not available on 127.0.0.1"):
            self.assertRegex(line, servers.PORT_CLASH)
        for line in ("Ready.", "Start Seaweed S3 API Server on 127.0.0.1:8333", "Running on http://127.0.0.1:5000"):
            self.assertNotRegex(line, servers.PORT_CLASH)


class FakeSeaweed:
    """An S3 client of one SeaweedFS identity (None: a wrong secret), enforcing the
    identity's actions as SeaweedFS documents them: `Action` everywhere,
    `Action:bucket` on the bucket, `Action:bucket/prefix*` on the keys under it."""

    def __init__(self, identity, store):
        self.actions = identity["actions"] if identity else []
        self.store = store

    def check(self, action, bucket, key=None):
        for a in self.actions:
            name, _, scope = a.partition(":")
            if name == "Admin" or (name == action and (
                    not scope or scope == bucket or (key is not None and fnmatch.fnmatch(bucket + "/" + key, scope)))):
                return
        raise S3Error(403, "AccessDenied" if self.actions else "SignatureDoesNotMatch")

    def put(self, bucket, key, body):
        self.check("Write", bucket, key)
        self.store[key] = body

    def get(self, bucket, key):
        self.check("Read", bucket, key)
        if key not in self.store:
            raise S3Error(404, "NoSuchKey")
        return self.store[key]

    def delete(self, bucket, key):
        self.check("Write", bucket, key)
        self.store.pop(key, None)

    def key_count(self, bucket, prefix=""):
        self.check("List", bucket)
        return sum(1 for k in self.store if k.startswith(prefix))


class SeaweedIdentitiesTest(unittest.TestCase):
    KEYS = {"admin": ("A", "a"), "lp": ("L", "l"), "reader": ("R", "r")}

    def self_check(self, config):
        ids = {i["name"]: i for i in config["identities"]}
        store = {}
        clients = [FakeSeaweed(ids[n], store) for n in ("admin", "job-lp", "reader")]
        return servers.identity_failures(*clients, FakeSeaweed(None, store), "landing-lp"), store

    def test_the_identities_written_pass_the_self_check(self):
        config = servers.seaweed_identities(self.KEYS, "landing-lp")
        failures, store = self.self_check(config)
        self.assertEqual(failures, [])
        self.assertEqual(store, {}, "the self-check leaves the bucket empty")
        creds = {i["name"]: i["credentials"][0]["accessKey"] for i in config["identities"]}
        self.assertEqual(creds, {"admin": "A", "job-lp": "L", "reader": "R"})

    def test_a_too_wide_grant_is_caught(self):
        config = servers.seaweed_identities(self.KEYS, "landing-lp")
        reader = next(i for i in config["identities"] if i["name"] == "reader")
        reader["actions"][0] = "Read:landing-lp/lake/*"
        failures, _ = self.self_check(config)
        self.assertEqual(failures, ["reader GET lake/staging/*: expected 403, got allowed"])

    def test_a_missing_grant_is_caught(self):
        config = servers.seaweed_identities(self.KEYS, "landing-lp")
        lp = next(i for i in config["identities"] if i["name"] == "job-lp")
        lp["actions"].remove("List:landing-lp")
        failures, _ = self.self_check(config)
        self.assertEqual(failures, ["job-lp LIST: expected allowed, got 403 AccessDenied"])

    def test_a_server_that_checks_no_signature_is_caught(self):
        config = servers.seaweed_identities(self.KEYS, "landing-lp")
        ids = {i["name"]: i for i in config["identities"]}
        store = {}
        admin = FakeSeaweed(ids["admin"], store)
        failures = servers.identity_failures(admin, FakeSeaweed(ids["job-lp"], store),
                                             FakeSeaweed(ids["reader"], store), admin, "landing-lp")
        self.assertEqual(failures, ["admin key with a wrong secret: expected 403, got allowed"])


class SweepTest(unittest.TestCase):
    def test_an_aborted_run_is_stopped_and_removed_a_live_one_kept(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        dead = subprocess.Popen(["true"])
        dead.wait()
        aborted = tempfile.mkdtemp(prefix=servers.RUN_PREFIX, dir=tmp.name)
        live = tempfile.mkdtemp(prefix=servers.RUN_PREFIX, dir=tmp.name)
        with open(os.path.join(aborted, "owner.pid"), "w") as f:
            f.write("%d 1\n" % dead.pid)
        with open(os.path.join(live, "owner.pid"), "w") as f:
            f.write(procs.owner_record())
        # A server the aborted run left running, started as the run starts them.
        os.makedirs(os.path.join(aborted, "logs"))
        server = servers.Server("moto", "1", aborted, "%s=%s:moto" % (servers.MARK_VAR, aborted))
        server.spawn(["sleep", "30"], dict(os.environ), aborted)
        leftover = server.proc
        self.addCleanup(leftover.wait)
        self.addCleanup(leftover.kill)
        self.assertEqual(server.pids(), [leftover.pid])
        runner = servers.Runner(venvs.ServerVenvs(tmp.name))
        with quiet(), mock.patch.object(tempfile, "gettempdir", return_value=tmp.name):
            runner.sweep_aborted_runs()
        self.assertEqual(leftover.wait(5), -15)
        self.assertFalse(os.path.exists(aborted))
        self.assertTrue(os.path.exists(live))


class CommandLineTest(unittest.TestCase):
    def test_usage(self):
        with quiet() as err:
            self.assertEqual(servers.main([]), 2)
        self.assertIn("usage: scripts/test-servers -- COMMAND", err.getvalue())
        with quiet() as err:
            self.assertEqual(servers.main(["--"]), 2)

    def test_a_bad_timeout_is_refused_before_anything_starts(self):
        with quiet() as err, mock.patch.dict(os.environ, {"LANDING_TEST_READY_TIMEOUT": "2m"}):
            self.assertEqual(servers.main(["--", "true"]), 1)
        self.assertIn("LANDING_TEST_READY_TIMEOUT must be a whole number", err.getvalue())

    def test_only_the_rerun_in_the_moto_venv_skips_the_install(self):
        v = venvs.ServerVenvs("/nonexistent/cache")
        with mock.patch.dict(os.environ, {servers.INSTALLED_VAR: "12.5 /nonexistent/cache"}):
            self.assertIsNone(servers.installed_here(v))  # not running in the moto venv
            self.assertNotIn(servers.INSTALLED_VAR, os.environ, "COMMAND must not inherit it")
        with mock.patch.dict(os.environ, {servers.INSTALLED_VAR: "12.5 /nonexistent/cache"}), \
                mock.patch.object(sys, "prefix", v.moto.path):
            self.assertEqual(servers.installed_here(v), 12.5)
        with mock.patch.dict(os.environ, {servers.INSTALLED_VAR: "12.5 /another/cache"}), \
                mock.patch.object(sys, "prefix", v.moto.path):
            self.assertIsNone(servers.installed_here(v))

    def test_servers_get_no_aws_settings_of_the_caller(self):
        with mock.patch.dict(os.environ, {"AWS_PROFILE": "prod", "S3_BUCKET": "b", "KEEP": "1"}):
            env = servers.clean_env(drop=("S3_BUCKET",))
        self.assertNotIn("AWS_PROFILE", env)
        self.assertNotIn("S3_BUCKET", env)
        self.assertEqual(env["KEEP"], "1")


class PinsTest(unittest.TestCase):
    def test_localstack_caps(self):
        good = {"localstack-core": "4.14.0", "cbor2": "5.6.5", "cryptography": "44.0.3",
                "pyOpenSSL": "24.3.0", "service-identity": "24.2.0"}
        self.assertTrue(venvs.localstack_versions_ok(good))
        for dist, bad in (("cbor2", "6.0.0"), ("pyOpenSSL", "25.1.0"), ("service-identity", None),
                          ("localstack-core", "4.15.0")):
            self.assertFalse(venvs.localstack_versions_ok(dict(good, **{dist: bad})), dist)
        self.assertFalse(venvs.localstack_versions_ok(None))


if __name__ == "__main__":
    unittest.main()
