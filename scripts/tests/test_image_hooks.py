"""Unit tests of the image check's scan for test hooks: `strings` over a binary
finds a hook's variable or flag wherever it sits among other bytes, and finds
nothing in a binary without them. Offline: the "binaries" are files written here.

    python3 -m unittest discover -s scripts/tests -p 'test_image_hooks.py'
"""

import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from landing_test.infra import image  # noqa: E402


class TestHookNames(unittest.TestCase):
    def scan(self, content: bytes) -> list[str]:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "landing"
            path.write_bytes(content)
            return image.test_hook_names(path)

    def test_a_variable_among_binary_bytes_is_found(self):
        found = self.scan(b"\x7fELF\x00\x01\x02LANDING_CRASH_AT\x00\xff\xfeLANDING_LEASE_TTL\x00")
        self.assertEqual(found, ["LANDING_CRASH_AT"])

    def test_a_flag_inside_a_longer_string_is_found(self):
        found = self.scan(b"\x00\x00usage: --spill-every <N> hidden\x00\x00")
        self.assertEqual(found, ["spill-every"])

    def test_the_drills_flag_and_ordinary_variables_are_not_hooks(self):
        found = self.scan(b"\x00--crash-at <POINT>\x00LANDING_LEASE_WAIT\x00LANDING_MAX_MEMORY\x00")
        self.assertEqual(found, [])


if __name__ == "__main__":
    unittest.main()
