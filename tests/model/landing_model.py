#!/usr/bin/env python3
"""An independent reference model (test oracle) of landing's line contract.

Written only from docs/interface.md (sections 1-3) and docs/contracts.md, without
reading the Rust code. Given a contract and an input's bytes it says what landing
should do: publish (which canonical bytes, which quarantine records, which counts)
or refuse (why, at which line). Python 3.11 standard library only.

    python3 tests/model/landing_model.py --contract contracts/progress.json \
        [--max-rejected-lines N] [--max-line-bytes N] \
        [--out-published FILE] [--out-quarantine FILE] INPUT

Where the documents are silent or ambiguous, the model takes the most literal
reading; each such choice is numbered here so the tests can point at it.

READING 1: the input is split on "\n"; the piece after the last "\n" is a physical
  line only when it is not empty (a final newline does not add a line).
READING 2: "a trailing \r is dropped" drops exactly one "\r" at the end of a line.
READING 3: line_too_long measures the line without its "\n", without its dropped
  trailing "\r" and (line 1) without the ignored BOM; "longer than" is strictly more
  bytes than the limit.
READING 4: line_too_long is the first rule and comes before the blank-line skip: a
  whitespace-only line longer than the limit is quarantined line_too_long.
READING 5: "only whitespace" means JSON whitespace: space, tab and "\r" (a "\n"
  cannot be inside a line). Other characters (form feed, vertical tab, U+00A0...)
  make the line invalid_json.
READING 6 (now stated in interface.md § 2, Refused files): on a refusal the counts
  are those that stood before the deciding line (design.md, "Memory and spill", step
  5: "with the counts as they stood before it"), except that for reject_cap the
  reject that went over the cap is counted in rejected_rows and listed in
  quarantine_reasons (it "was quarantined"). Nothing is published and no quarantine
  bytes are written.
READING 7 (now stated in interface.md § 2, Refused files): the first refusal in line
  order decides; lines after it do not matter.
READING 8 (now stated in interface.md § 2, Quarantined lines): duplicate_key is a
  key repeated in the line's own (top-level) object, compared after unescaping; a
  key repeated inside a nested value (only possible in an unknown or invalid field)
  leaves that value's own verdict.
READING 9: a line with several prohibited keys names the first of them in the line's
  key order.
READING 10: a "±HH:MM" offset has HH 00-23 and MM 00-59 (RFC 3339 time-numoffset);
  "+24:00" or "+05:60" is invalid_<field>.
READING 11 (now stated in interface.md § 2): JSON has no nesting limit: a line
  nested deeper than Python's recursive parser goes is parsed again without
  recursion, with the same result.
READING 12: a contract without max_line_bytes uses 1 MiB (interface.md's default).
READING 13: corrupt_compression overrides every line-based outcome ("it names the
  stream, not a line, even when damaged content decoded to bad lines first"). The
  model gives no line and counts of 0 for it: how far a streaming reader got before
  the break depends on its buffering, so tests compare only the kind.
READING 14: an input with no accepted events (empty, only blank lines, or only
  quarantined lines within the cap) is published, as empty bytes.
READING 15: `null` for a field that is not nullable is invalid_<field>, also for an
  optional one; a required nullable field that is absent is missing_<field>.
READING 16: a BOM is recognised only as the first three bytes of the (decompressed)
  input; a BOM anywhere else is a character of its line (U+FEFF), so invalid_json.
READING 17 (now stated in interface.md § 1): "told by its first bytes": gzip is 1f
  8b 08 (RFC 1952's ID1, ID2 and its only compression method, deflate); an input
  starting 1f 8b with another third byte is plain (and so invalid_utf8 on line 1).
"""

import argparse
import hashlib
import json
import re
import sys
import zlib
from dataclasses import dataclass, field

BOM = b"\xef\xbb\xbf"
GZIP_MAGIC = b"\x1f\x8b\x08"  # READING 17
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
DEFAULT_MAX_LINE_BYTES = 1 << 20  # READING 12
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
JSON_WS = b" \t\r"  # READING 5
DUP_KEY_NESTED = False  # READING 8

# ---------------------------------------------------------------- the contract


@dataclass
class Field:
    name: str
    type: str
    required: bool = True
    nullable: bool = False
    values: tuple = ()
    min: int = I64_MIN
    max: int = I64_MAX


@dataclass
class Contract:
    name: str
    identity: str
    prohibited: tuple
    fields: list
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    names: frozenset = frozenset()


def load_contract(path_or_dict):
    """A contract from a file path or an already parsed dict (docs/contracts.md § 1)."""
    spec = path_or_dict
    if not isinstance(spec, dict):
        with open(spec, "rb") as f:
            spec = json.loads(f.read().decode("utf-8"))
    fields = []
    for f in spec["fields"]:
        fields.append(Field(
            name=f["name"], type=f["type"],
            required=f.get("required", True), nullable=f.get("nullable", False),
            values=tuple(f.get("values", ())),
            min=f.get("min", I64_MIN), max=f.get("max", I64_MAX)))
    return Contract(
        name=spec["name"], identity=spec["identity"],
        prohibited=tuple(spec.get("prohibited", ())), fields=fields,
        max_line_bytes=spec.get("max_line_bytes", DEFAULT_MAX_LINE_BYTES),
        names=frozenset(f.name for f in fields))


# ---------------------------------------------------------------- JSON parsing


class IntLit(str):
    """A JSON number literal without fraction or exponent, kept as written."""


class FloatLit(str):
    """A JSON number literal with a fraction or an exponent (never an integer)."""


class Obj(dict):
    """A JSON object; `dup` says whether a key was repeated in it."""
    dup = False


class LineParser:
    """Strict JSON for one line: literals visible, NaN/Infinity refused, repeats seen."""

    def __init__(self):
        self.nested_dup = False
        self.decoder = json.JSONDecoder(
            object_pairs_hook=self._object, parse_int=IntLit,
            parse_float=FloatLit, parse_constant=self._constant)

    def _object(self, pairs):
        obj = Obj(pairs)
        if len(obj) != len(pairs):
            obj.dup = True
            self.nested_dup = True
        return obj

    @staticmethod
    def _constant(name):
        raise ValueError("not JSON: " + name)

    def parse(self, text):
        """(value, repeated key in a nested object) or raise ValueError."""
        self.nested_dup = False
        try:
            value = self.decoder.decode(text)
        except RecursionError:  # READING 11
            self.nested_dup = False
            value = self.parse_flat(text)
        return value, self.nested_dup

    def parse_flat(self, s):
        """The same parse with an explicit stack instead of recursion."""
        stack, i = [], ws(s, 0)
        while True:
            value, i = self.scalar_or_open(s, i, stack)
            if value is OPEN:
                continue
            while True:  # a value is complete: hand it to its container
                if not stack:
                    if ws(s, i) != len(s):
                        raise ValueError("extra data")
                    return value
                kind, items, key = stack[-1]
                items.append(value if kind == "[" else (key, value))
                i = ws(s, i)
                if s[i:i + 1] == ",":
                    i = ws(s, i + 1)
                    if kind == "{":
                        i = self.key(s, i, stack[-1])
                    break
                if s[i:i + 1] != ("]" if kind == "[" else "}"):
                    raise ValueError("expected , or a closing bracket")
                stack.pop()
                value, i = (items if kind == "[" else self._object(items)), i + 1

    def scalar_or_open(self, s, i, stack):
        c = s[i:i + 1]
        if c in ("[", "{"):
            j = ws(s, i + 1)
            if s[j:j + 1] == ("]" if c == "[" else "}"):
                return ([] if c == "[" else self._object([])), j + 1
            stack.append([c, [], None])
            return OPEN, (self.key(s, j, stack[-1]) if c == "{" else j)
        if c == '"':
            return json.decoder.scanstring(s, i + 1, True)
        m = NUMBER.match(s, i)
        if m:
            lit = FloatLit if m.group(1) or m.group(2) else IntLit
            return lit(m.group()), m.end()
        for word, value in (("true", True), ("false", False), ("null", None)):
            if s.startswith(word, i):
                return value, i + len(word)
        raise ValueError("expected a value")

    @staticmethod
    def key(s, i, frame):
        if s[i:i + 1] != '"':
            raise ValueError("expected a key")
        frame[2], i = json.decoder.scanstring(s, i + 1, True)
        i = ws(s, i)
        if s[i:i + 1] != ":":
            raise ValueError("expected :")
        return ws(s, i + 1)


OPEN = object()
WHITESPACE = re.compile(r"[ \t\n\r]*")
NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def ws(s, i):
    """The index after the JSON whitespace at i."""
    return WHITESPACE.match(s, i).end()


# ---------------------------------------------------------------- time grammar

TIME_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))")


def is_leap(y):
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


def days_in_month(y, m):
    return [31, 29 if is_leap(y) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]


def days_from_civil(y, m, d):
    """Days from 1970-01-01 in the proleptic Gregorian calendar (any year)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z):
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


def valid_date(y, m, d):
    return 1 <= m <= 12 and 1 <= d <= days_in_month(y, m)


def valid_clock(hh, mi, ss):
    return hh <= 23 and mi <= 59 and ss <= 59  # no hour 24, no leap second


def offset_seconds(zulu, sign, oh, om):
    """The offset east of UTC in seconds, or None (READING 10)."""
    if zulu:
        return 0
    oh, om = int(oh), int(om)
    if oh > 23 or om > 59:
        return None
    return (oh * 60 + om) * 60 * (1 if sign == "+" else -1)


def trim_fraction(frac):
    """".5" for "500"; "" when there is no fraction or it is all zeros."""
    trimmed = (frac or "").rstrip("0")
    return "." + trimmed if trimmed else ""


def time_to_utc(text):
    """The canonical UTC form of an RFC 3339 time with an offset, or None."""
    m = TIME_RE.fullmatch(text)
    if not m:
        return None
    y, mo, d, hh, mi, ss = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    frac, zulu, sign, oh, om = m.group(7, 8, 9, 10, 11)
    offset = offset_seconds(zulu, sign, oh, om)
    if not valid_date(y, mo, d) or not valid_clock(hh, mi, ss) or offset is None:
        return None
    secs = days_from_civil(y, mo, d) * 86400 + hh * 3600 + mi * 60 + ss - offset
    days, rem = divmod(secs, 86400)
    uy, um, ud = civil_from_days(days)
    if not 0 <= uy <= 9999:  # the UTC instant must lie in years 0000-9999
        return None
    return "%04d-%02d-%02dT%02d:%02d:%02d%sZ" % (
        uy, um, ud, rem // 3600, rem // 60 % 60, rem % 60, trim_fraction(frac))


# ---------------------------------------------------------------- field types

CONTROL = re.compile("[\x00-\x1f]")
SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n",
            "\r": "\\r", "\t": "\\t"}
ESCAPE_TABLE = {i: "\\u%04x" % i for i in range(0x20)}
ESCAPE_TABLE.update({ord(k): v for k, v in _ESCAPES.items()})


def json_string(s):
    """A string as serde_json writes it: only '"', '\\' and controls escaped."""
    return '"' + s.translate(ESCAPE_TABLE) + '"'


def check_string(f, v):
    if type(v) is not str or not v or CONTROL.search(v) or SURROGATE.search(v):
        return None
    return json_string(v)


def check_enum(f, v):
    if type(v) is not str or v not in f.values:
        return None
    return json_string(v)


def check_integer(f, v):
    if not isinstance(v, IntLit):
        return None
    digits = v.lstrip("-")
    if len(digits) > 40:  # far outside any 64-bit bound; avoids huge int() calls
        return None
    n = int(v)
    if not f.min <= n <= f.max:
        return None
    return str(n)  # "-0" becomes "0"


def check_boolean(f, v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    return None


def check_time(f, v):
    if type(v) is not str:
        return None
    utc = time_to_utc(v)
    return None if utc is None else json_string(utc)


CHECKS = {"string": check_string, "enum": check_enum, "integer": check_integer,
          "boolean": check_boolean, "time": check_time}


def check_value(f, v):
    """The canonical JSON text of a field's value, or None when it is invalid."""
    if v is None:
        return "null" if f.nullable else None  # READING 15
    return CHECKS[f.type](f, v)


# ---------------------------------------------------------------- one line


def is_blank(raw):
    return not raw.strip(JSON_WS)


def decode_line(contract, raw, parser, max_line_bytes):
    """The verdict of one framed line (no "\n", no trailing "\r").

    One of: ("blank",), ("quarantine", code), ("prohibited", key),
    ("event", identity, canonical line)."""
    if len(raw) > max_line_bytes:  # READINGS 3, 4
        return ("quarantine", "line_too_long")
    if is_blank(raw):
        return ("blank",)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ("quarantine", "invalid_utf8")
    try:
        obj, nested_dup = parser.parse(text)
    except ValueError:
        return ("quarantine", "invalid_json")
    if not isinstance(obj, Obj):
        return ("quarantine", "not_an_object")
    return check_object(contract, obj, nested_dup)


def check_object(contract, obj, nested_dup):
    """Rules from the prohibited key on, in the order of docs/contracts.md § 3."""
    for key in obj:  # first occurrences, in line order (READING 9)
        if key in contract.prohibited:
            return ("prohibited", key)
    if obj.dup or (nested_dup and DUP_KEY_NESTED):
        return ("quarantine", "duplicate_key")
    if any(key not in contract.names for key in obj):
        return ("quarantine", "unknown_field")
    for f in contract.fields:
        if f.required and f.name not in obj:
            return ("quarantine", "missing_" + f.name)
    parts = []
    for f in contract.fields:
        text = check_value(f, obj[f.name]) if f.name in obj else "null"
        if text is None:
            return ("quarantine", "invalid_" + f.name)
        parts.append((f.name, text))
    return ("event", obj[contract.identity], canonical_line(parts))


def canonical_line(parts):
    """Every declared field, keys sorted by byte value, no whitespace."""
    return "{" + ",".join(json_string(k) + ":" + v for k, v in sort_parts(parts)) + "}"


def sort_parts(parts):
    return sorted(parts, key=lambda p: p[0].encode("utf-8"))


# ---------------------------------------------------------------- the file


def frame(data):
    """The physical lines of a plain input, numbered from 1 (READINGS 1, 2, 16)."""
    if data.startswith(BOM):
        data = data[len(BOM):]
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    for n, piece in enumerate(pieces, 1):
        yield n, piece[:-1] if piece.endswith(b"\r") else piece


class CorruptCompression(Exception):
    pass


class Unsupported(Exception):
    pass


def gunzip(data):
    """All members of a gzip stream; CorruptCompression on truncation or trailing bytes."""
    out = []
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(d.decompress(data))
            out.append(d.flush())
        except zlib.error as e:
            raise CorruptCompression(str(e)) from e
        if not d.eof:
            raise CorruptCompression("truncated")
        data = d.unused_data
    return b"".join(out)


def plain_bytes(data):
    if data.startswith(ZSTD_MAGIC):
        raise Unsupported("zstd input is out of the model's scope")
    if data.startswith(GZIP_MAGIC):
        return gunzip(data)
    return data


@dataclass
class Result:
    action: str = "published"
    reason: dict = None
    accepted_rows: int = 0
    rejected_rows: int = 0
    duplicate_rows: int = 0
    published: bytes = b""
    quarantine: bytes = b""
    quarantine_reasons: list = field(default_factory=list)
    lines: list = field(default_factory=list)


class Dedup:
    """Events by canonical line and by identity, in order of first occurrence."""

    def __init__(self):
        self.out, self.canon_seen, self.ids = [], set(), set()

    def see(self, identity, canonical):
        """"accept", "duplicate" (same canonical line) or "collision" (same id)."""
        if canonical in self.canon_seen:
            return "duplicate"
        if identity in self.ids:
            return "collision"
        self.canon_seen.add(canonical)
        self.ids.add(identity)
        self.out.append(canonical)
        return "accept"


def over_cap(rejects, cap):
    """More lines quarantined than --max-rejected-lines allows."""
    return rejects > cap


def refuse(result, reason):
    """READING 6: counts as they stood; nothing published, no quarantine bytes."""
    result.action, result.reason = "refused", reason
    result.published = result.quarantine = b""
    return result


def quarantine_record(line, code):
    return '{"line":%d,"reason":"%s"}\n' % (line, code)


def model(contract, data, max_rejected_lines=0, max_line_bytes=None):
    """What landing does with one input (READINGS 6, 7, 13, 14)."""
    if not isinstance(contract, Contract):
        contract = load_contract(contract)
    limit = contract.max_line_bytes if max_line_bytes is None else max_line_bytes
    result = Result()
    try:
        data = plain_bytes(data)
    except CorruptCompression:
        return refuse(result, {"kind": "corrupt_compression"})
    parser, dedup = LineParser(), Dedup()
    for n, raw in frame(data):
        verdict = decode_line(contract, raw, parser, limit)
        kind = verdict[0]
        if kind == "blank":
            result.lines.append("blank")
        elif kind == "prohibited":
            result.lines.append(verdict)
            return refuse(result, {"kind": "prohibited_field", "line": n, "field": verdict[1]})
        elif kind == "quarantine":
            result.lines.append(verdict)
            result.quarantine_reasons.append((n, verdict[1]))
            result.rejected_rows += 1
            if over_cap(result.rejected_rows, max_rejected_lines):
                return refuse(result, {"kind": "reject_cap", "line": n})
        else:
            seen = dedup.see(verdict[1], verdict[2])
            result.lines.append(seen)
            if seen == "collision":
                return refuse(result, {"kind": "id_collision", "line": n})
            if seen == "duplicate":
                result.duplicate_rows += 1
            else:
                result.accepted_rows += 1
    result.published = "".join(c + "\n" for c in dedup.out).encode("utf-8")
    result.quarantine = "".join(
        quarantine_record(n, c) for n, c in result.quarantine_reasons).encode()
    return result


# ---------------------------------------------------------------- command line


def summary(result):
    return {
        "action": result.action,
        "reason": result.reason,
        "accepted_rows": result.accepted_rows,
        "rejected_rows": result.rejected_rows,
        "duplicate_rows": result.duplicate_rows,
        "quarantine_reasons": [{"line": n, "reason": c} for n, c in result.quarantine_reasons],
        "published_sha256": hashlib.sha256(result.published).hexdigest(),
        "published_size": len(result.published),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--contract", required=True)
    ap.add_argument("--max-rejected-lines", type=int, default=0)
    ap.add_argument("--max-line-bytes", type=int, default=None)
    ap.add_argument("--out-published")
    ap.add_argument("--out-quarantine")
    ap.add_argument("input")
    args = ap.parse_args(argv)
    with open(args.input, "rb") as f:
        data = f.read()
    try:
        result = model(load_contract(args.contract), data,
                       args.max_rejected_lines, args.max_line_bytes)
    except Unsupported as e:
        print("landing_model: " + str(e), file=sys.stderr)
        return 3
    for path, content in ((args.out_published, result.published),
                          (args.out_quarantine, result.quarantine)):
        if path:
            with open(path, "wb") as f:
                f.write(content)
    print(json.dumps(summary(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
