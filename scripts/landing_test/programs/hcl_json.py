"""Prints {file: its HCL as plain JSON values} for each .tf/.tfvars file named. Run
by the infra venv's interpreter (python-hcl2); scripts/test-infra's terraform check.

    python hcl_json.py FILE...
"""

import json
import sys

import hcl2


def norm(v):
    """python-hcl2 8 keeps the quotes of string literals and labels and adds
    __is_block__ / __comments__ markers: reduce to plain values."""
    if isinstance(v, dict):
        return {norm(k): norm(x) for k, x in v.items() if k not in ("__is_block__", "__comments__")}
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, str) and len(v) >= 2 and v[0] == v[-1] == '"':
        return v[1:-1]
    return v


if __name__ == "__main__":
    out = {}
    for name in sys.argv[1:]:
        with open(name) as fh:
            out[name] = norm(hcl2.load(fh))
    print(json.dumps(out, default=str))
