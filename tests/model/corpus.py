#!/usr/bin/env python3
"""A seeded JSONL corpus for any landing contract file (Python standard library only).

    python3 tests/model/corpus.py --contract contracts/progress.json --seed 1 \
        --lines 10000 [--kind clean|mixed|collision|prohibited|times] --out FILE

Importable: generate(contract, seed, lines, kind) -> bytes, where contract is a path or
the parsed contract file. The same (contract, seed, lines, kind) always gives the same
bytes. The generator knows what a valid value of each type looks like and how to spell
one value several ways; it does not decide verdicts (that is the model's job).

- clean: valid lines, with exact duplicates and duplicates spelled differently (keys
  reordered, other whitespace, other escapes, the same instant at another offset,
  padded fractions, -0, null for an absent optional) spread across the file, some
  repeating a line from far before.
- mixed: clean lines plus bad lines of every reason code of the contract, blank and
  whitespace-only lines, CRLF endings, sometimes a BOM, sometimes no final newline,
  sometimes one line longer than the contract's max_line_bytes.
- collision: clean lines, one of which (line 2, the middle or the last line, chosen
  by the seed) reuses an earlier identity with another payload.
- prohibited: clean lines, one of which carries a prohibited key (sometimes escaped).
- times: clean lines whose time fields cover many offsets, fractions, separators and
  calendar edges (leap days, year and month ends, years 0000 and 9999), valid or not.
"""

import argparse
import datetime as dt
import json
import random

KINDS = ("clean", "mixed", "collision", "prohibited", "times")
ABSENT = object()
I64 = (-(1 << 63), (1 << 63) - 1)
EPOCH = dt.datetime(1970, 1, 1)
WORDS = ["alpha", "beta", "gamma", "delta", "sql-joins", "py-gen", "lrn", "c\u00e9l\u00e8ste",
         "\u4e2d\u6587", "emoji\U0001F600", "q\"uote", "back\\slash", "sl/ash", "sp ace",
         "del\x7f", "ls\u2028ep"]
OFFSETS = [0, 0, 0, 60, -60, 330, -300, 345, 540, -600, 840, -720, 1439, -1439, 30, -30]
BAD_TIMES = ["2026-03-02T08:00:00", "2026-03-02T08:00:00+0000", "2026-03-02T24:00:00Z",
             "2026-03-02T23:59:60Z", "2026-03-02T08:00:00.1234567890Z", "2026-02-30T08:00:00Z",
             "2023-02-29T08:00:00Z", "2026-03-02", "2026-13-01T00:00:00Z", "2026-03-02T08:00Z",
             "0000-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00", "2026-03-02T08:00:00 Z"]
EDGE_TIMES = ["0000-01-01T00:00:00Z", "0000-01-01T00:00:00-01:00", "0000-02-29T23:00:00-02:00",
              "9999-12-31T23:59:59.999999999Z", "9999-12-31T20:00:00+01:00", "2024-02-29T23:30:00-01:00",
              "2023-12-31T23:59:59.5-00:01", "2000-02-29T00:00:00+14:00", "1900-03-01T00:00:00+00:01",
              "2026-01-01T00:00:00.000000001+23:59", "2026-06-30T23:59:59-23:59"]


def load(contract):
    if isinstance(contract, dict):
        return contract
    with open(contract, "rb") as f:
        return json.loads(f.read().decode("utf-8"))


class Gen:
    def __init__(self, spec, seed, kind):
        self.spec, self.kind = spec, kind
        self.r = random.Random("%s/%s/%s" % (spec.get("name"), seed, kind))
        self.fields = spec["fields"]
        self.identity = spec["identity"]
        self.prohibited = list(spec.get("prohibited", []))
        self.max_line = spec.get("max_line_bytes", 1 << 20)
        self.counter = 0
        self.events = []

    # ------------------------------------------------------------ semantic values

    def new_time(self):
        r = self.r
        if self.kind == "times" and r.random() < 0.3:
            y = r.choice([1, 2, 1999, 2000, 2023, 2024, 2100, 9998])
            base = dt.datetime(y, r.choice([1, 2, 12]), r.choice([1, 28]), r.choice([0, 23]), r.choice([0, 59]), r.choice([0, 59]))
        else:
            base = EPOCH + dt.timedelta(seconds=r.randrange(0, 4_102_444_800))
        frac = r.choice(["", "", "5", "25", "123456789", "000000001", "1", "999"])
        return (base, frac)

    def new_value(self, f):
        r, t = self.r, f["type"]
        if not f.get("required", True) and r.random() < 0.2:
            return ABSENT
        if f.get("nullable", False) and r.random() < 0.2:
            return None
        if f["name"] == self.identity:
            self.counter += 1
            return "%s-%d" % (r.choice(["evt", "id", "x\u00e9"]), self.counter)
        if t == "string":
            return r.choice(WORDS) + ("" if r.random() < 0.5 else "-%d" % r.randrange(1000))
        if t == "enum":
            return r.choice(f["values"])
        if t == "integer":
            lo, hi = f.get("min", I64[0]), f.get("max", I64[1])
            pick = r.random()
            if pick < 0.1:
                return lo
            if pick < 0.2:
                return hi
            if pick < 0.3 and lo <= 0 <= hi:
                return 0
            if r.random() < 0.7:
                start = min(max(lo, -50), hi)
                return r.randint(start, min(hi, start + 1000))
            return r.randint(lo, hi)
        if t == "boolean":
            return r.random() < 0.5
        if t == "time":
            return self.new_time()
        raise ValueError("unknown type " + t)

    def new_event(self):
        ev = {f["name"]: self.new_value(f) for f in self.fields}
        self.events.append(ev)
        return ev

    # ------------------------------------------------------------ spellings

    def str_text(self, s, plain):
        if plain:
            return json.dumps(s, ensure_ascii=False)
        r = self.r
        text = json.dumps(s, ensure_ascii=r.random() < 0.5)
        if r.random() < 0.5 and len(s) > 0 and s[0].isascii() and s[0].isalnum():
            text = '"\\u%04x' % ord(s[0]) + text[2:]
        return text

    def time_text(self, value, plain):
        base, frac = value
        r = self.r
        if plain:
            return '"%04d-%02d-%02dT%02d:%02d:%02d%sZ"' % (
                base.year, base.month, base.day, base.hour, base.minute, base.second,
                "." + frac if frac else "")
        off = r.choice(OFFSETS)
        try:
            local = base + dt.timedelta(minutes=off)
        except OverflowError:
            local, off = base, 0
        sep = r.choice("TTTt ")
        digits = frac + "0" * r.randrange(0, 10 - len(frac)) if r.random() < 0.3 else frac
        if not frac and r.random() < 0.1:
            digits = "000"
        if off == 0:
            zone = r.choice(["Z", "z", "+00:00", "-00:00"])
        else:
            zone = "%s%02d:%02d" % ("+" if off > 0 else "-", abs(off) // 60, abs(off) % 60)
        stamp = "%04d-%02d-%02d%s%02d:%02d:%02d" % (local.year, local.month, local.day, sep, local.hour, local.minute, local.second)
        return '"%s%s%s"' % (stamp, "." + digits if digits else "", zone)

    def value_text(self, f, v, plain):
        if v is None:
            return "null"
        t = f["type"]
        if t in ("string", "enum"):
            return self.str_text(v, plain)
        if t == "integer":
            return "-0" if v == 0 and not plain and self.r.random() < 0.5 else str(v)
        if t == "boolean":
            return "true" if v else "false"
        return self.time_text(v, plain)

    def pairs(self, ev, plain=True):
        out = []
        for f in self.fields:
            v = ev[f["name"]]
            if v is ABSENT:
                if not plain and f.get("nullable") and self.r.random() < 0.5:
                    out.append([f["name"], "null"])
                continue
            if v is None and not plain and not f.get("required", True) and self.r.random() < 0.5:
                continue  # null and absent are the same for an optional nullable field
            out.append([f["name"], self.value_text(f, v, plain)])
        if not plain:
            self.r.shuffle(out)
        return out

    def render(self, pairs, plain=True):
        if plain:
            return "{" + ",".join('"%s":%s' % (k, v) for k, v in pairs) + "}"
        ws = lambda: self.r.choice(["", "", " ", "  ", "\t"])
        body = ",".join('%s"%s"%s:%s%s%s' % (ws(), k, ws(), ws(), v, ws()) for k, v in pairs)
        return ws() + "{" + body + "}" + ws()

    # ------------------------------------------------------------ lines

    def good_line(self):
        """A new event, an exact repeat, or a repeat spelled differently."""
        r = self.r
        if self.events and r.random() < 0.2:
            ev = r.choice(self.events) if r.random() < 0.5 else self.events[-1]
            return self.render(self.pairs(ev, plain=False), plain=False) if r.random() < 0.6 else self.render(self.pairs(ev))
        ev = self.new_event()
        return self.render(self.pairs(ev)) if r.random() < 0.7 else self.render(self.pairs(ev, False), False)

    def bad_value(self, f):
        r, t = self.r, f["type"]
        choices = ['""', "1", "[]", "{}", '"a\\u0001"', '"\\ud800"', "true"]
        if not f.get("nullable", False):
            choices.append("null")
        if t == "enum":
            choices = ['"%s "' % f["values"][0], '"bogus"', "1"] + (["null"] if not f.get("nullable") else [])
        elif t == "integer":
            lo, hi = f.get("min", I64[0]), f.get("max", I64[1])
            choices = ["1.0", "1e0", '"1"', "true", str(lo - 1), str(hi + 1), "0.5", "-0.0"]
        elif t == "boolean":
            choices = ['"true"', "1", "0", '"false"'] + (["null"] if not f.get("nullable") else [])
        elif t == "time":
            choices = ['"%s"' % s for s in BAD_TIMES] + ["1772438400"]
        return r.choice(choices)

    def bad_line(self):
        """A line with one or more faults, chosen among every reason code."""
        r = self.r
        ev = self.new_event()
        self.events.pop()  # a bad line is not an event a later line may repeat
        pairs = self.pairs(ev)
        required = [f for f in self.fields if f.get("required", True)]
        kind = r.choice(["utf8", "json", "object", "dupkey", "unknown", "missing", "invalid", "invalid",
                         "invalid", "two"])
        if kind == "utf8":
            text = self.render(pairs).encode("utf-8")
            cut = text.index(b":") + 2
            return text[:cut] + r.choice([b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82"]) + text[cut:]
        if kind == "json":
            text = self.render(pairs)
            text = r.choice([text[:-1], text[:-1] + ",}", text + "x", text.replace(":", "=", 1),
                             text[:-1] + ',"k":NaN}', "{'a':1}", text + text])
        elif kind == "object":
            text = r.choice(["[]", "1", '"s"', "null", "true", "[" + self.render(pairs) + "]"])
        elif kind == "dupkey":
            k, v = r.choice(pairs)
            pairs.insert(r.randrange(len(pairs) + 1), [k, v if r.random() < 0.5 else "0"])
            text = self.render(pairs)
        elif kind == "unknown":
            pairs.insert(r.randrange(len(pairs) + 1), ["zz_unknown_%d" % r.randrange(9), "1"])
            text = self.render(pairs)
        elif kind == "missing" and required:
            gone = r.choice(required)["name"]
            text = self.render([p for p in pairs if p[0] != gone])
        elif kind == "two" and len(self.fields) > 1:
            a, b = r.sample(self.fields, 2)
            pairs = [p for p in pairs if p[0] not in (a["name"], b["name"])]
            pairs += [[a["name"], self.bad_value(a)], [b["name"], self.bad_value(b)]]
            r.shuffle(pairs)
            text = self.render(pairs)
        else:
            f = r.choice(self.fields)
            pairs = [p for p in pairs if p[0] != f["name"]] + [[f["name"], self.bad_value(f)]]
            text = self.render(pairs, plain=False)
        return text.encode("utf-8")

    def too_long_line(self):
        ev = self.new_event()
        self.events.pop()
        pairs = self.pairs(ev)
        text = self.render(pairs)
        pad = "x" * (self.max_line - len(text.encode("utf-8")) + 1 + self.r.randrange(3))
        return (text[:-1] + ',"zz_pad":"%s"}' % pad).encode("utf-8")

    def time_fields(self):
        return [f for f in self.fields if f["type"] == "time"]

    def edge_time_line(self):
        ev = self.new_event()
        pairs = self.pairs(ev)
        for f in self.time_fields():
            for p in pairs:
                if p[0] == f["name"]:
                    p[1] = '"%s"' % self.r.choice(EDGE_TIMES + BAD_TIMES[:4])
        self.events.pop()  # its spelling is fixed text: never repeated
        return self.render(pairs, plain=False)


def _same(f, a, b):
    """Whether two semantic values of field f are one value (absent is null)."""
    a, b = (None if a is ABSENT else a), (None if b is ABSENT else b)
    if f["type"] == "time" and a is not None and b is not None:
        return a[0] == b[0] and a[1].rstrip("0") == b[1].rstrip("0")
    return a == b and type(a) is type(b)


def _collision_line(g, ev):
    """ev's identity with another payload, or None if no field can differ."""
    others = [f for f in g.fields if f["name"] != g.identity]
    g.r.shuffle(others)
    for f in others:
        for _ in range(20):
            v = g.new_value(f)
            if not _same(f, v, ev[f["name"]]):
                return g.render(g.pairs(dict(ev, **{f["name"]: v}), plain=False), plain=False)
    return None


def generate(contract, seed, lines, kind="clean"):
    if kind not in KINDS:
        raise ValueError("kind must be one of " + ", ".join(KINDS))
    g = Gen(load(contract), seed, kind)
    r = g.r
    out = []
    special = {}
    if kind == "collision" and lines >= 2:
        special[r.choice([1, lines // 2, lines - 1])] = "collision"
    if kind == "prohibited" and g.prohibited:
        special[r.randrange(lines)] = "prohibited"
    if kind == "mixed" and r.random() < 0.5 and lines > 10:
        special[r.randrange(lines)] = "too_long"
    for i in range(lines):
        what = special.get(i)
        if what == "collision":
            line = _collision_line(g, g.events[-1] if i == 1 else r.choice(g.events))
            line = (line or g.good_line()).encode("utf-8")
        elif what == "prohibited":
            pairs = g.pairs(g.new_event())
            key = r.choice(g.prohibited)
            if r.random() < 0.5:
                key = "\\u%04x" % ord(key[0]) + key[1:]
            pairs.insert(r.randrange(len(pairs) + 1), [key, r.choice(['"x"', "null", "1", "{}"])])
            line = g.render(pairs).encode("utf-8")
        elif what == "too_long":
            line = g.too_long_line()
        elif kind == "mixed" and r.random() < 0.08:
            line = r.choice([b"", b"", b"  ", b"\t", b" \t "])
        elif kind == "mixed" and r.random() < 0.25:
            line = g.bad_line()
        elif kind == "times" and g.time_fields() and r.random() < 0.15:
            line = g.edge_time_line().encode("utf-8")
        else:
            line = g.good_line().encode("utf-8")
        out.append(line)
    eols = [b"\r\n" if kind == "mixed" and r.random() < 0.2 else b"\n" for _ in out]
    data = b"".join(l + e for l, e in zip(out, eols))
    if kind == "mixed" and out and r.random() < 0.3:
        data = data[: -len(eols[-1])] if out[-1].strip() else data
    if kind == "mixed" and r.random() < 0.35:
        data = b"\xef\xbb\xbf" + data
    return data


def main(argv=None):
    ap = argparse.ArgumentParser(description="A seeded JSONL corpus for a landing contract.")
    ap.add_argument("--contract", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--lines", type=int, required=True)
    ap.add_argument("--kind", default="clean", choices=KINDS)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    data = generate(args.contract, args.seed, args.lines, args.kind)
    with open(args.out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
