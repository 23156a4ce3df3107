"""Tests of the reference model (tests/model/landing_model.py).

    python3 -m unittest discover -s tests/model

(a) every hand-written case of cases.json against the model; (b) the golden file and
the shipped examples; (c) planted faults: each small bug planted into the model must
make at least one hand-written case fail, which shows the cases can catch a wrong
model; (d) the corpus generator is deterministic and makes what each kind promises.
"""

import base64
import contextlib
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
import landing_model as lm  # noqa: E402

CASES = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))
CONTRACT_FILES = {"progress": REPO / "contracts" / "progress.json",
                  "enrollment": REPO / "contracts" / "enrollment.json"}

# ---------------------------------------------------------------- building inputs
# Plain text assembly of what a case describes; no rule of the contract lives here.


def _pairs_text(pairs, spec):
    sep, colon = spec.get("sep", ","), spec.get("colon", ":")
    body = sep.join('"%s"%s%s' % (k, colon, v) for k, v in pairs)
    return spec.get("pre", "") + "{" + body + "}" + spec.get("post", "")


def _set(pairs, key, value):
    for p in pairs:
        if p[0] == key:
            p[1] = value
            return
    pairs.append([key, value])


def build_line(spec, bases):
    if isinstance(spec, str):
        return spec.encode("utf-8")
    if "latin1" in spec:
        return spec["latin1"].encode("latin-1")
    if "b64" in spec:
        return base64.b64decode(spec["b64"])
    base = bases[spec["base"]]
    pairs = [list(p) for p in base["pairs"]]
    if "id" in spec:
        _set(pairs, base["identity"], '"%s"' % spec["id"])
    for k, v in spec.get("set", {}).items():
        _set(pairs, k, v)
    for k, v in spec.get("sets", {}).items():
        _set(pairs, k, '"%s"' % v)
    pairs = [p for p in pairs if p[0] not in spec.get("drop", ())]
    pairs = [list(p) for p in spec.get("first", ())] + pairs + [list(p) for p in spec.get("add", ())]
    if spec.get("reverse"):
        pairs.reverse()
    if "fill" in spec:
        key, total = spec["fill"]
        _set(pairs, key, '""')
        short = len(_pairs_text(pairs, spec).encode("utf-8"))
        _set(pairs, key, '"%s"' % ("x" * (total - short)))
    text = _pairs_text(pairs, spec)
    if "fill_nest" in spec:  # "@" becomes that many nested arrays around an object
        depth = spec["fill_nest"]
        text = text.replace("@", "[" * depth + '{"a":[1,{}]}' + "]" * depth)
    return text.encode("utf-8")


def _gzip(data, how):
    if how == "single":
        return gzip.compress(data, mtime=0)
    if how == "multi":
        cut = len(data) // 2 + 7
        return gzip.compress(data[:cut], mtime=0) + gzip.compress(data[cut:], mtime=0)
    if how == "truncated":
        whole = gzip.compress(data, mtime=0)
        return whole[: len(whole) // 2]
    if how == "trailing":
        return gzip.compress(data, mtime=0) + b"garbage"
    if how == "trailing_newline":
        return gzip.compress(data, mtime=0) + b"\n"
    if how == "empty_member":
        return gzip.compress(data, mtime=0) + gzip.compress(b"", mtime=0)
    raise ValueError(how)


def build_input(case, bases=None):
    bases = bases or CASES["bases"]
    if "file" in case:
        return (REPO / case["file"]).read_bytes()
    eol = case.get("eol", "\n").encode()
    lines = [build_line(s, bases) for s in case["lines"]]
    data = eol.join(lines)
    if lines and case.get("final_eol", True):
        data += eol
    if case.get("bom"):
        data = b"\xef\xbb\xbf" + data
    if "gzip" in case:
        data = _gzip(data, case["gzip"])
    return data


# ---------------------------------------------------------------- checking outcomes

_CONTRACTS = {}


def contract(name):
    if name not in _CONTRACTS:
        _CONTRACTS[name] = lm.load_contract(str(CONTRACT_FILES[name]))
    return _CONTRACTS[name]


def verdict_code(v):
    if isinstance(v, tuple):
        return {"quarantine": "Q:", "prohibited": "P:"}[v[0]] + v[1]
    return {"accept": "A", "duplicate": "D", "blank": "B", "collision": "C"}[v]


def run_case(case):
    data = build_input(case)
    return lm.model(contract(case["contract"]), data,
                    max_rejected_lines=case.get("cap", 0),
                    max_line_bytes=case.get("max_line_bytes"))


def case_problems(case):
    """What differs between the model and the hand-written expectation ([] if none)."""
    exp, problems = case["expect"], []
    try:
        r = run_case(case)
    except Exception as e:  # a planted fault may crash the model: that is a catch too
        return ["model raised %r" % e]

    def differ(what, want, got):
        if want != got:
            problems.append("%s: want %r, got %r" % (what, want, got))

    differ("action", exp["action"], r.action)
    if "reason" in exp:
        want = exp["reason"]
        got = r.reason
        if want and want.get("kind") == "corrupt_compression" and got:
            got = {"kind": got.get("kind")}
        differ("reason", want, got)
    if "n" in exp:
        differ("counts", exp["n"], [r.accepted_rows, r.rejected_rows, r.duplicate_rows])
    if "v" in exp:
        differ("verdicts", exp["v"], [verdict_code(v) for v in r.lines])
    if "published" in exp:
        differ("published", "".join(l + "\n" for l in exp["published"]).encode("utf-8"), r.published)
    if "quarantine" in exp:
        differ("quarantine", exp["quarantine"].encode(), r.quarantine)
    try:  # split on "\n" only: str.splitlines() would also split at U+2028
        out = [json.loads(l) for l in r.published.decode("utf-8").split("\n")[:-1]]
    except ValueError as e:
        return problems + ["published is not JSON lines: %r" % e]
    if "times" in exp:
        base = {"progress": "p", "enrollment": "e"}[case["contract"]]
        key = CASES["bases"][base]["time"]
        differ("times", exp["times"], [o.get(key) for o in out])
    if "values" in exp:
        got = [{k: o.get(k, "<absent>") for k in want} for want, o in zip(exp["values"], out)]
        differ("values", exp["values"], got)
    return problems


def failing_cases():
    return [c["name"] for c in CASES["cases"] if case_problems(c)]


class HandWrittenCases(unittest.TestCase):
    def test_at_least_80_cases(self):
        self.assertGreaterEqual(len(CASES["cases"]), 80)
        names = [c["name"] for c in CASES["cases"]]
        self.assertEqual(len(names), len(set(names)), "case names are unique")

    def test_cases(self):
        for case in CASES["cases"]:
            with self.subTest(case=case["name"]):
                self.assertEqual(case_problems(case), [])


# ---------------------------------------------------------------- golden and examples


class GoldenAndExamples(unittest.TestCase):
    def test_golden_bytes(self):
        data = (REPO / "examples/inbox/progress-2026-03-02.jsonl").read_bytes()
        r = lm.model(contract("progress"), data, max_rejected_lines=1)
        self.assertEqual(r.action, "published")
        self.assertEqual((r.accepted_rows, r.duplicate_rows, r.rejected_rows), (5, 1, 1))
        self.assertEqual(r.published, (REPO / "tests/golden/progress-2026-03-02.jsonl").read_bytes())

    def test_prohibited_example(self):
        data = (REPO / "examples/inbox/progress-2026-03-03.jsonl").read_bytes()
        r = lm.model(contract("progress"), data)
        self.assertEqual(r.action, "refused")
        self.assertEqual(r.reason, {"kind": "prohibited_field", "line": 2, "field": "email"})

    def test_gzip_gives_plain_bytes(self):
        data = (REPO / "examples/inbox/progress-2026-03-02.jsonl").read_bytes()
        plain = lm.model(contract("progress"), data, 1)
        packed = lm.model(contract("progress"), gzip.compress(data), 1)
        self.assertEqual(plain.published, packed.published)

    def test_cli(self):
        with tempfile.TemporaryDirectory() as d:
            pub, quar = Path(d, "p"), Path(d, "q")
            out = subprocess.run(
                [sys.executable, str(HERE / "landing_model.py"), "--contract",
                 str(CONTRACT_FILES["progress"]), "--max-rejected-lines", "1",
                 "--out-published", str(pub), "--out-quarantine", str(quar),
                 str(REPO / "examples/inbox/progress-2026-03-02.jsonl")],
                check=True, capture_output=True, text=True).stdout
            summary = json.loads(out)
            golden = (REPO / "tests/golden/progress-2026-03-02.jsonl").read_bytes()
            self.assertEqual(summary["published_sha256"], hashlib.sha256(golden).hexdigest())
            self.assertEqual(summary["quarantine_reasons"], [{"line": 6, "reason": "invalid_json"}])
            self.assertEqual(pub.read_bytes(), golden)
            self.assertEqual(quar.read_bytes(), b'{"line":6,"reason":"invalid_json"}\n')
            zst = Path(d, "z")
            zst.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 8)
            rc = subprocess.run([sys.executable, str(HERE / "landing_model.py"), "--contract",
                                 str(CONTRACT_FILES["progress"]), str(zst)],
                                capture_output=True).returncode
            self.assertEqual(rc, 3)


# ---------------------------------------------------------------- planted faults


def _keep_last_duplicate(self, identity, canonical):
    if canonical in self.canon_seen:
        self.out.remove(canonical)
        self.out.append(canonical)
        return "duplicate"
    return ORIGINAL["see"](self, identity, canonical)


def _report_first_reject(result, reason):
    if reason.get("kind") == "reject_cap" and result.quarantine_reasons:
        reason = dict(reason, line=result.quarantine_reasons[0][0])
    return ORIGINAL["refuse"](result, reason)


def _minus_zero_invalid(f, v):
    return None if v == "-0" else ORIGINAL["check_integer"](f, v)


def _float_integers(f, v):
    if isinstance(v, lm.FloatLit) and float(v).is_integer():
        v = lm.IntLit(str(int(float(v))))
    return ORIGINAL["check_integer"](f, v)


def _blank_lines_not_numbered(data):
    n = 0
    for _, raw in ORIGINAL["frame"](data):
        if raw.strip(b" \t\r"):
            n += 1
        yield n, raw


def _keep_cr(data):
    if data.startswith(lm.BOM):
        data = data[3:]
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    yield from enumerate(pieces, 1)


def _omit_nulls(parts):
    return ORIGINAL["canonical_line"]([p for p in parts if p[1] != "null"])


def _reversed_offset(zulu, sign, oh, om):
    s = ORIGINAL["offset_seconds"](zulu, sign, oh, om)
    return None if s is None else -s


def _too_deep(self, s):
    raise ValueError("too deep")


ORIGINAL = {"see": lm.Dedup.see, "refuse": lm.refuse, "check_integer": lm.check_integer,
            "frame": lm.frame, "canonical_line": lm.canonical_line,
            "offset_seconds": lm.offset_seconds}

P = mock.patch.object
FAULTS = {
    "keep the last duplicate instead of the first": lambda: P(lm.Dedup, "see", _keep_last_duplicate),
    "do not trim fraction zeros": lambda: P(lm, "trim_fraction", lambda f: "." + f if f else ""),
    "accept hour 24": lambda: P(lm, "valid_clock", lambda h, m, s: h <= 24 and m <= 59 and s <= 59),
    "accept second 60": lambda: P(lm, "valid_clock", lambda h, m, s: h <= 23 and m <= 59 and s <= 60),
    "do not sort keys": lambda: P(lm, "sort_parts", list),
    "reject cap off by one": lambda: P(lm, "over_cap", lambda n, cap: n >= cap),
    "report the first reject instead of the one over the cap": lambda: P(lm, "refuse", _report_first_reject),
    "treat -0 as invalid": lambda: mock.patch.dict(lm.CHECKS, integer=_minus_zero_invalid),
    "accept 1.0 as an integer": lambda: mock.patch.dict(lm.CHECKS, integer=_float_integers),
    "ignore the BOM": lambda: P(lm, "BOM", b"\x00\x00\x00\x00"),
    "count blank lines out of line numbers": lambda: P(lm, "frame", _blank_lines_not_numbered),
    "keep the trailing CR": lambda: P(lm, "frame", _keep_cr),
    "forget null for an absent optional field": lambda: P(lm, "canonical_line", _omit_nulls),
    "add the offset instead of subtracting it": lambda: P(lm, "offset_seconds", _reversed_offset),
    "Julian leap years": lambda: P(lm, "is_leap", lambda y: y % 4 == 0),
    "accept +HHMM offsets": lambda: P(lm, "TIME_RE", re.compile(
        lm.TIME_RE.pattern.replace("([0-9]{2}):([0-9]{2}))", "([0-9]{2}):?([0-9]{2}))"))),
    "accept lone surrogates": lambda: P(lm, "SURROGATE", re.compile("(?!)")),
    "escape non-ASCII in output": lambda: P(lm, "json_string", json.dumps),
    "accept NaN as a number": lambda: P(lm.LineParser, "_constant", staticmethod(float)),
    "treat any whitespace as blank": lambda: P(lm, "is_blank", lambda raw: not raw.decode("latin-1").strip()),
    "report keys repeated in nested objects": lambda: P(lm, "DUP_KEY_NESTED", True),
    "take 1f 8b alone for gzip": lambda: P(lm, "GZIP_MAGIC", b"\x1f\x8b"),
    "give up on deep nesting": lambda: P(lm.LineParser, "parse_flat", _too_deep),
}


class PlantedFaults(unittest.TestCase):
    def test_model_is_clean(self):
        self.assertEqual(failing_cases(), [])

    def test_each_fault_is_caught(self):
        self.assertGreaterEqual(len(FAULTS), 10)
        for name, plant in FAULTS.items():
            with self.subTest(fault=name):
                with plant():
                    caught = failing_cases()
                self.assertTrue(caught, "no hand-written case catches: " + name)


# ---------------------------------------------------------------- the corpus generator


class Corpus(unittest.TestCase):
    KINDS = ("clean", "mixed", "collision", "prohibited", "times")

    def test_deterministic(self):
        for name in CONTRACT_FILES:
            for kind in self.KINDS:
                a = corpus.generate(contract_spec(name), 7, 300, kind)
                b = corpus.generate(contract_spec(name), 7, 300, kind)
                self.assertEqual(a, b)
                self.assertNotEqual(a, corpus.generate(contract_spec(name), 8, 300, kind))

    def test_kinds(self):
        for name in CONTRACT_FILES:
            c = contract(name)
            for seed in range(4):
                clean = lm.model(c, corpus.generate(contract_spec(name), seed, 400, "clean"))
                self.assertEqual((clean.action, clean.rejected_rows), ("published", 0))
                self.assertGreater(clean.duplicate_rows, 0)
                mixed = lm.model(c, corpus.generate(contract_spec(name), seed, 400, "mixed"), 10**6)
                self.assertEqual(mixed.action, "published")
                self.assertGreater(mixed.rejected_rows, 0)
                coll = lm.model(c, corpus.generate(contract_spec(name), seed, 400, "collision"), 10**6)
                self.assertEqual(coll.reason and coll.reason["kind"], "id_collision")
                proh = lm.model(c, corpus.generate(contract_spec(name), seed, 400, "prohibited"), 10**6)
                self.assertEqual(proh.reason and proh.reason["kind"], "prohibited_field")
                times = lm.model(c, corpus.generate(contract_spec(name), seed, 400, "times"), 10**6)
                self.assertEqual(times.action, "published")

    def test_every_reason_code_appears_in_mixed(self):
        for name in CONTRACT_FILES:
            c = contract(name)
            seen = set()
            for s in range(3):
                r = lm.model(c, corpus.generate(contract_spec(name), s, 2000, "mixed"), 10**6)
                seen.update(code for _, code in r.quarantine_reasons)
            want = {"invalid_utf8", "invalid_json", "not_an_object", "duplicate_key", "unknown_field"}
            want |= {"missing_" + f.name for f in c.fields if f.required}
            want |= {"invalid_" + f.name for f in c.fields}
            self.assertEqual(want - seen, set())


def contract_spec(name):
    return json.loads(CONTRACT_FILES[name].read_text(encoding="utf-8"))


if __name__ == "__main__":
    unittest.main()
