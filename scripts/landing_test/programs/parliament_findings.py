"""Reads {name: policy document} as JSON on stdin and prints {name: [[issue,
detail], ...]}, parliament's findings (community auditors included). Run by the
infra venv's interpreter; scripts/test-infra's parliament check.
"""

import json
import sys

from parliament import analyze_policy_string

if __name__ == "__main__":
    out = {}
    for name, doc in json.load(sys.stdin).items():
        p = analyze_policy_string(doc, include_community_auditors=True)
        out[name] = sorted({(f.issue, str(f.detail)) for f in p.findings})
    print(json.dumps(out))
