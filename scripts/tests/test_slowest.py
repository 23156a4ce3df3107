"""Unit tests of landing_test.slowest: the slowest tests across the phases' JUnit
reports, slowest first, each named with its phase; a missing phase is skipped.

    python3 -m unittest discover -s scripts/tests -p 'test_slowest.py'
"""

import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from landing_test import slowest  # noqa: E402

REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="landing::it">{cases}</testsuite></testsuites>
"""


def write(target: Path, phase: str, cases: dict[str, float]) -> None:
    d = target / "nextest" / phase
    d.mkdir(parents=True)
    body = "".join(f'<testcase name="{n}" time="{t}"/>' for n, t in cases.items())
    (d / "junit.xml").write_text(REPORT.format(cases=body))


class Slowest(unittest.TestCase):
    def test_the_slowest_across_phases_first(self):
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp)
            write(target, "default", {"e2e::a": 1.5, "drill::b": 70.0})
            write(target, "kill", {"kill::c": 480.25})
            rows = slowest.slowest(target, 2)
        self.assertEqual(rows, [(480.25, "kill::c", "kill"), (70.0, "drill::b", "default")])


if __name__ == "__main__":
    unittest.main()
