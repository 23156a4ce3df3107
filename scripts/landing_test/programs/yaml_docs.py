"""Prints the YAML documents of a file (the empty ones left out) as a JSON list. Run
by the infra venv's interpreter (PyYAML); scripts/test-infra reads k8s/ with it.

    python yaml_docs.py FILE
"""

import json
import sys

import yaml

if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps([d for d in yaml.safe_load_all(f) if d is not None]))
