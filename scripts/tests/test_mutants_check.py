"""Unit tests of `scripts/mutants --check`'s comparison: the code a mutant can touch
(up to the inline test module, no `use` lines, comments or blank lines), and the
verdict between a module now and at its run.

    python3 -m unittest discover -s scripts/tests -p 'test_mutants_check.py'
"""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "landing_test"))

import mutants_check as m  # noqa: E402

THEN = """use crate::x;
/// Doc.
pub fn f(a: u8) -> u8 {
    a + 1
}

#[cfg(test)]
mod tests {
    fn t() {}
}
"""


class Code(unittest.TestCase):
    def test_imports_comments_and_tests_are_not_code(self):
        self.assertEqual(m.code(THEN), ["pub fn f(a: u8) -> u8 {", "a + 1", "}"])

    def test_a_test_only_item_above_the_module_is_code(self):
        text = "#[cfg(test)]\nfn helper() {}\n" + THEN
        self.assertEqual(m.code(text)[:2], ["#[cfg(test)]", "fn helper() {}"])


class Verdict(unittest.TestCase):
    def test_a_moved_import_and_new_tests_leave_it_unchanged(self):
        now = THEN.replace("use crate::x;", "use landing_contract::x;").replace("fn t() {}", "fn u() {}")
        self.assertEqual(m.verdict(m.code(now), m.code(THEN)), "unchanged")

    def test_an_operator_changed_is_a_change(self):
        now = THEN.replace("a + 1", "a - 1")
        self.assertEqual(m.verdict(m.code(now), m.code(THEN)), "changed")

    def test_a_function_split_out_whole_is_not_a_change(self):
        both = THEN.replace("pub fn f", "pub fn g(b: u8) -> u8 {\n    b\n}\npub fn f")
        self.assertEqual(m.verdict(m.code(THEN), m.code(both)), "split out of its file, its code unchanged")


if __name__ == "__main__":
    unittest.main()
