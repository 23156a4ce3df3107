"""scripts/target-dir names the directory cargo builds into, as cargo resolves it."""

import os
import subprocess
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "target-dir"


class TargetDir(unittest.TestCase):
    def run_it(self, **env: str) -> str:
        full = {k: v for k, v in os.environ.items() if k != "CARGO_TARGET_DIR"}
        full.update(env)
        return subprocess.run([str(SCRIPT)], env=full, check=True, capture_output=True,
                              text=True).stdout.strip()

    def test_cargo_target_dir_is_honoured(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(self.run_it(CARGO_TARGET_DIR=d), d)

    def test_default_is_the_checkouts_target(self) -> None:
        self.assertEqual(self.run_it(), str(SCRIPT.parents[1] / "target"))


if __name__ == "__main__":
    unittest.main()
