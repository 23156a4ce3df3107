"""Prints {distribution: installed version or null} as JSON for each distribution
named on the command line. Run by a venv's own interpreter (venvs.Venv.versions)."""

import importlib.metadata
import json
import sys


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    print(json.dumps({d: version(d) for d in sys.argv[1:]}))
