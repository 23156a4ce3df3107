"""Run by tests/it/contracts.rs with the pinned python-jsonschema venv:
    python schema_verdicts.py SCHEMA.json LINES.hex
LINES.hex holds one input line per row, hex-encoded (lines may be any bytes). For each
row it prints one JSON object: "verdict" ("accept" or "reject", as a producer checking
the line with python-jsonschema would decide) and "blind", the rules JSON Schema
cannot express that the line touches (docs/contracts.md lists them):
  duplicate_key     a key repeated inside the object (json.loads keeps the last)
  integral_float    an integer field written with a fraction or exponent (1.0, 1e0)
  lone_surrogate    a string holding an unpaired surrogate escape
  calendar          a time that matches the grammar but names no instant in range
                    (30 February, or a UTC year outside 0000-9999)
"""

import datetime
import json
import re
import sys

import jsonschema

TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|([+-])(\d{2}):(\d{2}))$"
)


def reject_constant(name):
    raise ValueError("not JSON: " + name)


def has_surrogate(v):
    if isinstance(v, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in v)
    if isinstance(v, list):
        return any(has_surrogate(x) for x in v)
    if isinstance(v, dict):
        return any(has_surrogate(k) or has_surrogate(x) for k, x in v.items())
    return False


def no_instant(text):
    m = TIME.match(text) if isinstance(text, str) else None
    if not m:
        return False
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    if mo < 1 or mo > 12 or h > 23 or mi > 59 or s > 59:
        return False  # the pattern already rejects these
    # Years below 400 are shifted by one Gregorian cycle (same leap years), so the
    # years 0 and -1 that the offset can reach are representable.
    shift = 400 if y < 400 else 0
    try:
        day = datetime.date(y + shift, mo, d)
    except ValueError:
        return True
    if m.group(8) in ("Z", "z"):
        offset = 0
    else:
        sign = -1 if m.group(9) == "-" else 1
        offset = sign * (int(m.group(10)) * 60 + int(m.group(11)))
    days = (h * 60 + mi - offset) // 1440
    try:
        year = (day + datetime.timedelta(days=days)).year - shift
    except OverflowError:
        return True
    return not 0 <= year <= 9999


def main(schema_path, lines_path):
    with open(schema_path) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    props = schema.get("properties", {})

    def kinds(name):
        s = props.get(name, {})
        alts = s.get("anyOf", [s])
        return {a.get("type") for a in alts}, any(a.get("pattern") for a in alts if a.get("type") == "string")

    out = []
    with open(lines_path) as f:
        for row in f:
            raw = bytes.fromhex(row.strip())
            blind = []
            try:
                text = raw.decode("utf-8")
                pairs_seen = []

                def hook(pairs):
                    pairs_seen.append([k for k, _ in pairs])
                    return dict(pairs)

                doc = json.loads(text, object_pairs_hook=hook, parse_constant=reject_constant)
            except ValueError:
                out.append({"verdict": "reject", "blind": []})
                continue
            if isinstance(doc, dict):
                top = pairs_seen[-1]
                if len(top) != len(set(top)):
                    blind.append("duplicate_key")
                for k, v in doc.items():
                    types, timed = kinds(k)
                    if isinstance(v, float) and "integer" in types and v.is_integer():
                        blind.append("integral_float")
                    if timed and no_instant(v):
                        blind.append("calendar")
                if has_surrogate(doc):
                    blind.append("lone_surrogate")
            verdict = "accept" if validator.is_valid(doc) else "reject"
            out.append({"verdict": verdict, "blind": sorted(set(blind))})
    for o in out:
        print(json.dumps(o))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
