"""The slowest tests of scripts/test's last run, from nextest's JUnit reports
(target/nextest/<profile>/junit.xml, one per phase): `python3 -m
landing_test.slowest [N] [TARGET_DIR]` prints the N slowest (20 by default), each
with its seconds and phase. Standard library only."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

PHASES = ("default", "kill", "nemesis")


def slowest(target: Path, n: int) -> list[tuple[float, str, str]]:
    rows = []
    for phase in PHASES:
        report = target / "nextest" / phase / "junit.xml"
        if not report.is_file():
            continue
        for case in ET.parse(report).getroot().iter("testcase"):
            rows.append((float(case.get("time", "0")), case.get("name", "?"), phase))
    rows.sort(key=lambda r: r[0], reverse=True)
    return rows[:n]


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 20
    target = Path(argv[1]) if len(argv) > 1 else Path("target")
    rows = slowest(target, n)
    print(f"the {len(rows)} slowest tests:")
    for secs, name, phase in rows:
        print(f"{secs:8.1f} s  {phase:8} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
