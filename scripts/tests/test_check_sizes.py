"""scripts/check-sizes: a Rust source over 600 lines before its tests fails the suite."""

import subprocess
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "check-sizes"


class CheckSizes(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def write(self, rel: str, code_lines: int, test_lines: int = 0) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "fn f() {}\n" * code_lines
        if test_lines:
            text += "#[cfg(test)]\nmod tests {\n" + "    // t\n" * test_lines + "}\n"
        path.write_text(text)

    def run_it(self) -> subprocess.CompletedProcess:
        return subprocess.run([str(SCRIPT), "--root", str(self.root)], capture_output=True, text=True)

    def test_files_at_the_limit_pass_whatever_their_tests(self) -> None:
        self.write("src/main.rs", 600, test_lines=900)
        self.write("crates/engine/src/lib.rs", 10)
        p = self.run_it()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("2 source files", p.stderr)

    def test_a_file_one_line_over_fails_and_is_named(self) -> None:
        self.write("src/main.rs", 10)
        self.write("crates/store/src/s3/upload.rs", 601, test_lines=3)
        p = self.run_it()
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout.strip(), "crates/store/src/s3/upload.rs: 601 lines before its tests (limit 600)")

    def test_a_file_without_tests_counts_all_its_lines(self) -> None:
        self.write("src/cli/args.rs", 700)
        p = self.run_it()
        self.assertEqual(p.returncode, 1)
        self.assertIn("src/cli/args.rs: 700 lines", p.stdout)

    def test_a_test_only_item_near_the_top_does_not_stop_the_count(self) -> None:
        path = self.root / "crates/contract/src/frame.rs"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "use std::io;\n#[cfg(test)]\nuse std::fmt;\n" + "fn f() {}\n" * 700
        text += "#[cfg(test)]\n#[allow(clippy::all)]\nmod tests {\n    // t\n}\n"
        path.write_text(text)
        p = self.run_it()
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout.strip(), "crates/contract/src/frame.rs: 703 lines before its tests (limit 600)")

    def test_integration_tests_are_not_measured(self) -> None:
        self.write("tests/it/kill.rs", 2000)
        p = self.run_it()
        self.assertEqual(p.returncode, 0, p.stdout)


if __name__ == "__main__":
    unittest.main()
