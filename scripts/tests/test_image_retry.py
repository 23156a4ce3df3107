"""Unit tests of the image check's podman retry: only podman's own re-exec fault
(the sealed memfd copy of its binary) is retried, each attempt gets its own
arguments, and any other failure stops the check at once. Offline: podman is
replaced by a scripted stand-in.

    python3 -m unittest discover -s scripts/tests -p 'test_image_retry.py'
"""

import subprocess
import sys
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from landing_test.infra import image  # noqa: E402
from landing_test.infra.common import CheckFailed  # noqa: E402

FAULT = "Close_Fd sealing memfd copy: Device or resource busy\n"


def answers(*outcomes):
    """A podman stand-in that answers each call with the next (returncode, stderr)."""
    calls = []
    script = iter(outcomes)

    def fake(*args, check=True, **kw):
        calls.append(args)
        code, err = next(script)
        return subprocess.CompletedProcess(["podman", *args], code, stdout="STEP 1/1\n", stderr=err)

    return fake, calls


class RetryTest(unittest.TestCase):
    def build(self, *outcomes):
        fake, calls = answers(*outcomes)
        with mock.patch.object(image, "podman", fake):
            result = image.podman_build(lambda attempt: ("-t", f"img-{attempt}"), "the test build")
        return result, calls

    def test_success_at_once_retries_nothing(self):
        (out, retries), calls = self.build((0, ""))
        self.assertEqual(retries, 0)
        self.assertEqual(calls, [("build", "-t", "img-1")])
        self.assertIn("STEP 1/1", out)

    def test_the_reexec_fault_is_retried_with_the_next_attempts_arguments(self):
        (_, retries), calls = self.build((1, FAULT), (1, FAULT), (0, ""))
        self.assertEqual(retries, 2)
        self.assertEqual(calls, [("build", "-t", "img-1"), ("build", "-t", "img-2"), ("build", "-t", "img-3")])

    def test_any_other_failure_stops_at_the_first_attempt(self):
        fake, calls = answers((1, "Error: building at STEP \"RUN ...\": exit status 65\n"), (0, ""))
        with mock.patch.object(image, "podman", fake):
            with self.assertRaises(CheckFailed) as e:
                image.podman_build(lambda attempt: ("-t", f"img-{attempt}"), "the test build")
        self.assertEqual(len(calls), 1)
        self.assertIn("the test build failed (attempt 1)", str(e.exception))
        self.assertIn("exit status 65", str(e.exception))

    def test_the_fault_every_time_fails_after_the_last_attempt(self):
        fake, calls = answers(*[(1, FAULT)] * image.BUILD_ATTEMPTS)
        with mock.patch.object(image, "podman", fake):
            with self.assertRaises(CheckFailed) as e:
                image.podman_build(lambda attempt: ("-t", f"img-{attempt}"), "the test build")
        self.assertEqual(len(calls), 3)
        self.assertIn(f"(attempt {image.BUILD_ATTEMPTS})", str(e.exception))
        self.assertIn("sealing memfd copy", str(e.exception))


if __name__ == "__main__":
    unittest.main()
