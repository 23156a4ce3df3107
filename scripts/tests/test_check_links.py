"""Unit tests of scripts/check-links.

    python3 -m unittest discover -s scripts/tests -p 'test_check_links.py'
    scripts/check-links --self-test            (the same tests)
"""

import contextlib
import importlib.machinery
import importlib.util
import io
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "check-links"
_loader = importlib.machinery.SourceFileLoader("check_links", str(SCRIPT))
_spec = importlib.util.spec_from_loader("check_links", _loader)
cl = importlib.util.module_from_spec(_spec)
sys.modules["check_links"] = cl  # dataclasses look their module up there
_loader.exec_module(cl)


class Tree:
    """A throwaway repository: write(path, text) then problems()."""

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory()
        self.root = Path(self._dir.name)

    def write(self, rel, text):
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")

    def problems(self):
        return [str(p) for p in cl.check(self.root)]

    def close(self):
        self._dir.cleanup()


class SlugTest(unittest.TestCase):
    def test_github_slugs(self):
        cases = {
            "Busy (exit 75) and a stuck lease": "busy-exit-75-and-a-stuck-lease",
            "Reading `landing status`": "reading-landing-status",
            "`landing verify` findings and what to do": "landing-verify-findings-and-what-to-do",
            "landing — runbook": "landing--runbook",
            "IAM: exactly what the job is granted": "iam-exactly-what-the-job-is-granted",
            "1. Build the image": "1-build-the-image",
            "The `event_id` rule": "the-event_id-rule",
            "**Bold** and [a link](x.md)": "bold-and-a-link",
        }
        for heading, slug in cases.items():
            self.assertEqual(cl.github_slug(heading), slug, heading)

    def test_repeated_headings_are_numbered_and_setext_counts(self):
        text = "# Top\n\n## Usage\n\n## Usage\n\nSecond title\n------------\n\n```\n# not a heading\n```\n"
        self.assertEqual(cl.anchors_of(text), {"top", "usage", "usage-1", "second-title"})


class MarkdownTest(unittest.TestCase):
    def setUp(self):
        self.t = Tree()
        self.addCleanup(self.t.close)
        self.t.write("docs/guide.md", "# Guide\n\n## 2. The part\n")

    def test_good_links_pass(self):
        self.t.write(
            "README.md",
            """
            # Readme
            See [the guide](docs/guide.md), [its part](docs/guide.md#2-the-part),
            [here](#readme), ![img](docs/) and [ext](https://example.com/x#y).

            [ref]: docs/guide.md#guide
            """,
        )
        self.assertEqual(self.t.problems(), [])

    def test_missing_file_anchor_and_escape_are_reported_with_their_line(self):
        self.t.write(
            "README.md",
            """
            # Readme

            [gone](docs/nothing.md)
            [bad anchor](docs/guide.md#no-such-part) and [self](#nowhere)
            [outside](../shared/DESIGN.md)
            """,
        )
        self.assertEqual(
            self.t.problems(),
            [
                "README.md:3: broken link docs/nothing.md: no such file",
                "README.md:4: broken link docs/guide.md#no-such-part: no heading #no-such-part in docs/guide.md",
                "README.md:4: broken link #nowhere: no heading #nowhere in README.md",
                "README.md:5: broken link ../shared/DESIGN.md: outside the repository",
            ],
        )

    def test_links_in_code_are_text(self):
        self.t.write(
            "README.md",
            """
            # Readme
            `[not a link](missing.md)`

            ```sh
            echo "[nor this](missing.md)"
            ```
            """,
        )
        self.assertEqual(self.t.problems(), [])

    def test_relative_to_the_linking_file(self):
        self.t.write("docs/other.md", "[up](../README.md) [sibling](guide.md#guide) [wrong](README.md)\n")
        self.t.write("README.md", "# Readme\n")
        self.assertEqual(self.t.problems(), ["docs/other.md:1: broken link README.md: no such file"])

    def test_main_exit_codes(self):
        self.t.write("README.md", "[ok](docs/guide.md)\n")
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(cl.main(["--root", str(self.t.root)]), 0)
        self.t.write("README.md", "[gone](nothing.md)\n")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            self.assertEqual(cl.main(["--root", str(self.t.root)]), 1)
        self.assertEqual(out.getvalue(), "README.md:1: broken link nothing.md: no such file\n")


class RustDocTest(unittest.TestCase):
    def setUp(self):
        self.t = Tree()
        self.addCleanup(self.t.close)
        self.t.write("docs/design.md", "# Design\n\n## 1. One\n\n## 2. Two\n")
        self.t.write("scripts/test", "#!/bin/sh\n")
        self.t.write("RUNBOOK.md", "# Runbook\n")

    def test_existing_paths_and_sections_pass(self):
        self.t.write(
            "src/lib.rs",
            """
            //! The contract (docs/design.md section 2); operators: RUNBOOK.md.
            //! Run `scripts/test`; keys look like `runs/<product>/<run id>.json`.
            /// Both halves: docs/design.md sections 1 and
            /// 2, and `scripts/*`.
            //! Upstream: https://github.com/o/r/blob/main/docs/GONE.md is not fetched.
            // DESIGN.md in a plain comment is not documentation.
            fn f() {}
            """,
        )
        self.assertEqual(self.t.problems(), [])

    def test_missing_paths_and_sections_are_reported(self):
        self.t.write(
            "src/a.rs",
            """
            //! See DESIGN.md section 2 and docs/design.md section 9.
            //! The tests live in tests/gone/ and ../shared/notes.md.
            """,
        )
        self.assertEqual(
            self.t.problems(),
            [
                "src/a.rs:1: broken link DESIGN.md: no such file",
                "src/a.rs:1: broken link docs/design.md section 9: no heading '## 9. ...' in docs/design.md",
                "src/a.rs:2: broken link ../shared/notes.md: outside the repository",
                "src/a.rs:2: broken link tests/gone/: no such file",
            ],
        )


if __name__ == "__main__":
    unittest.main()
