"""What the project's source checks read of a Rust file: where its unit tests begin.
Shared by scripts/check-sizes and `scripts/mutants --check`. Standard library only."""

from __future__ import annotations

import re

TEST_MODULE = re.compile(r"^(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def lines_before_tests(lines: list[str]) -> int:
    """The lines before the first `#[cfg(test)]` that starts a line and opens an
    inline module (after any further attributes); all of them when there is none."""
    for n, line in enumerate(lines):
        if line.startswith("#[cfg(test)]") and opens_module(lines[n + 1:]):
            return n
    return len(lines)


def opens_module(rest: list[str]) -> bool:
    """Does the item after a `#[cfg(test)]` (its further attributes and blank lines
    skipped) open an inline module?"""
    for line in rest:
        stripped = line.strip()
        if not stripped or stripped.startswith("#["):
            continue
        return bool(TEST_MODULE.match(stripped))
    return False
