#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A strict parser of the Prometheus text exposition format 0.0.4, written independently of
kiln's writer, with the invariants a scraper relies on.

    families = parse(text)            # raises FormatError naming the line
    families["nv_inference_count"].samples  ->  [Sample(name, labels, value), ...]
    value(families, "nv_inference_count", model="add_sub", version="1")

Checked: every line is a HELP, TYPE, comment or sample line; metric and label names are valid;
label values use only the escapes \\\\ \\" \\n; numbers parse as Prometheus reads them (Go
floats, +Inf, -Inf, NaN); HELP and TYPE appear at most once per family and before its samples;
a family's samples are contiguous and named after it (_bucket/_sum/_count for histograms); no
series appears twice; counters are >= 0; each histogram series has increasing `le` bounds
ending in +Inf, non-decreasing cumulative counts, +Inf bucket == _count, and a _sum.

Run as a program with --check-command CMD: checks the parser on known-bad documents, then
parses what CMD prints.
"""
import argparse
import math
import re
import subprocess
import sys
from dataclasses import dataclass, field

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class FormatError(ValueError):
    pass


@dataclass
class Sample:
    name: str
    labels: dict
    value: float


@dataclass
class Family:
    name: str
    type: str = "untyped"
    help: str = None
    samples: list = field(default_factory=list)


def parse_value(text, where):
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    if not NUMBER.fullmatch(text):
        raise FormatError(f"{where}: '{text}' is not a number")
    return float(text)


def parse_labels(text, pos, where):
    """Parses `{...}` starting at text[pos] == '{'; returns (labels, position after '}')."""
    labels = {}
    pos += 1
    while True:
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        m = LABEL_NAME.match(text, pos)
        if not m:
            raise FormatError(f"{where}: bad label name at column {pos}")
        name = m.group(0)
        if name.startswith("__"):
            raise FormatError(f"{where}: reserved label name '{name}'")
        pos = m.end()
        if text[pos:pos + 2] != '="':
            raise FormatError(f"{where}: expected '=\"' after label '{name}'")
        pos += 2
        value = []
        while True:
            if pos >= len(text):
                raise FormatError(f"{where}: unterminated value of label '{name}'")
            c = text[pos]
            if c == "\\":
                nxt = text[pos + 1:pos + 2]
                if nxt not in ("\\", '"', "n"):
                    raise FormatError(f"{where}: bad escape '\\{nxt}' in label '{name}'")
                value.append("\n" if nxt == "n" else nxt)
                pos += 2
            elif c == '"':
                pos += 1
                break
            else:
                value.append(c)
                pos += 1
        if name in labels:
            raise FormatError(f"{where}: label '{name}' given twice")
        labels[name] = "".join(value)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == "}":
            continue
        else:
            raise FormatError(f"{where}: expected ',' or '}}' after label '{name}'")


def family_of(sample_name, families):
    for suffix in ("_bucket", "_sum", "_count"):
        if sample_name.endswith(suffix):
            base = sample_name[: -len(suffix)]
            if base in families and families[base].type == "histogram":
                return base
    return sample_name


def parse(text):
    if text and not text.endswith("\n"):
        raise FormatError("the document does not end with a newline")
    families = {}
    order = []         # family names in order of first appearance
    closed = set()     # families whose samples are over (another family's came after)
    current = None
    seen_series = set()
    for lineno, line in enumerate(text.split("\n")[:-1] if text else [], start=1):
        where = f"line {lineno}"
        if line == "":
            raise FormatError(f"{where}: empty line")
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not METRIC_NAME.fullmatch(name):
                    raise FormatError(f"{where}: bad metric name '{name}'")
                fam = families.get(name)
                if fam is None:
                    fam = families[name] = Family(name)
                    order.append(name)
                if fam.samples or name in closed:
                    raise FormatError(f"{where}: {parts[1]} of '{name}' after its samples")
                if parts[1] == "HELP":
                    if fam.help is not None:
                        raise FormatError(f"{where}: second HELP for '{name}'")
                    fam.help = parts[3] if len(parts) > 3 else ""
                    if re.search(r"\\[^\\n]", fam.help.replace("\\\\", "")):
                        raise FormatError(f"{where}: bad escape in HELP of '{name}'")
                else:
                    if fam.type != "untyped" or getattr(fam, "typed", False):
                        raise FormatError(f"{where}: second TYPE for '{name}'")
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise FormatError(f"{where}: bad TYPE line")
                    fam.type = parts[3]
                    fam.typed = True
                if current is not None and current != name:
                    closed.add(current)
                current = name
            continue  # other comments are allowed
        m = METRIC_NAME.match(line)
        if not m:
            raise FormatError(f"{where}: bad metric name")
        name = m.group(0)
        pos = m.end()
        labels = {}
        if pos < len(line) and line[pos] == "{":
            labels, pos = parse_labels(line, pos, where)
        rest = line[pos:]
        if not rest.startswith(" "):
            raise FormatError(f"{where}: expected a space before the value")
        fields = rest[1:].split(" ")
        if len(fields) not in (1, 2) or fields[0] == "":
            raise FormatError(f"{where}: expected 'value [timestamp]'")
        value = parse_value(fields[0], where)
        if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
            raise FormatError(f"{where}: bad timestamp '{fields[1]}'")
        fname = family_of(name, families)
        fam = families.get(fname)
        if fam is None:
            raise FormatError(f"{where}: sample '{name}' before the TYPE of its family")
        if fname in closed or (current is not None and current != fname):
            raise FormatError(f"{where}: samples of '{fname}' are not contiguous")
        current = fname
        if fam.type == "histogram" and name == fname:
            raise FormatError(f"{where}: histogram sample without _bucket/_sum/_count")
        if fam.type == "histogram" and name.endswith("_bucket") and "le" not in labels:
            raise FormatError(f"{where}: bucket without 'le'")
        key = (name, tuple(sorted(labels.items())))
        if key in seen_series:
            raise FormatError(f"{where}: series {name}{labels} appears twice")
        seen_series.add(key)
        if fam.type == "counter" and not (value >= 0):
            raise FormatError(f"{where}: counter '{name}' is {value}")
        fam.samples.append(Sample(name, labels, value))
    for fam in families.values():
        if fam.type == "histogram":
            check_histogram(fam)
    return families


def check_histogram(fam):
    series = {}
    for s in fam.samples:
        base = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        entry = series.setdefault(base, {"buckets": [], "sum": None, "count": None})
        if s.name.endswith("_bucket"):
            entry["buckets"].append((parse_value(s.labels["le"], f"{fam.name} le"), s.value))
        elif s.name.endswith("_sum"):
            entry["sum"] = s.value
        else:
            entry["count"] = s.value
    for base, e in series.items():
        where = f"histogram {fam.name}{dict(base)}"
        b = e["buckets"]
        if not b or b[-1][0] != math.inf:
            raise FormatError(f"{where}: no le=\"+Inf\" bucket last")
        for (le0, c0), (le1, c1) in zip(b, b[1:]):
            if not le0 < le1:
                raise FormatError(f"{where}: le {le0} then {le1} is not increasing")
            if not c0 <= c1:
                raise FormatError(f"{where}: cumulative count falls from {c0} to {c1}")
        if e["count"] is None or e["sum"] is None:
            raise FormatError(f"{where}: missing _count or _sum")
        if b[-1][1] != e["count"]:
            raise FormatError(f"{where}: +Inf bucket {b[-1][1]} != _count {e['count']}")


def value(families, name, **labels):
    """The value of the one sample `name` whose labels include `labels`."""
    fam = families.get(family_of(name, families))
    if fam is None:
        raise KeyError(f"no family for {name}")
    hits = [s for s in fam.samples if s.name == name
            and all(s.labels.get(k) == v for k, v in labels.items())]
    if len(hits) != 1:
        raise KeyError(f"{len(hits)} samples of {name} match {labels}")
    return hits[0].value


def buckets(families, name, **labels):
    """[(le, cumulative count)] of histogram `name` for the series with `labels`."""
    fam = families[name]
    out = [(parse_value(s.labels["le"], "le"), s.value) for s in fam.samples
           if s.name == name + "_bucket" and all(s.labels.get(k) == v for k, v in labels.items())]
    return out


BAD_DOCUMENTS = {
    "sample before TYPE": "x_total 1\n# TYPE x_total counter\n",
    "bad escape": '# TYPE a gauge\na{l="\\t"} 1\n',
    "unterminated label": '# TYPE a gauge\na{l="x} 1\n',
    "duplicate series": '# TYPE a gauge\na{l="x"} 1\na{l="x"} 2\n',
    "bad number": "# TYPE a gauge\na 1,5\n",
    "negative counter": "# TYPE a counter\na -1\n",
    "no +Inf": '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n',
    "+Inf != count": '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 1\n',
    "not cumulative": ('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="2"} 1\n'
                       'h_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n'),
    "interleaved": "# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\n",
    "split family": "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\n",
    "two TYPEs": "# TYPE a gauge\n# TYPE a counter\na 1\n",
    "no newline at end": "# TYPE a gauge\na 1",
    "empty line": "# TYPE a gauge\n\na 1\n",
    "bad label name": '# TYPE a gauge\na{1x="1"} 1\n',
}

GOOD_DOCUMENT = ('# HELP a A \\\\ help\\n text\n# TYPE a counter\na{l="q\\"\\\\\\n",m=""} 1.5e3\n'
                 '# TYPE h histogram\nh_bucket{le="0.5"} 1\nh_bucket{le="+Inf"} 3\n'
                 'h_sum 7\nh_count 3\n# TYPE g gauge\ng +Inf\ng{x="1"} NaN\n')


def self_test():
    for what, doc in BAD_DOCUMENTS.items():
        try:
            parse(doc)
        except FormatError:
            continue
        raise AssertionError(f"the parser accepted a document with {what}")
    fams = parse(GOOD_DOCUMENT)
    assert fams["a"].samples[0].labels == {"l": 'q"\\\n', "m": ""}, fams["a"].samples[0].labels
    assert fams["a"].samples[0].value == 1500.0
    assert value(fams, "h_count") == 3
    assert math.isinf(fams["g"].samples[0].value)
    assert math.isnan(value(fams, "g", x="1"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check-command", required=True,
                    help="program whose output must be a valid exposition document")
    args = ap.parse_args()
    self_test()
    out = subprocess.run([args.check_command], check=True, capture_output=True, text=True).stdout
    fams = parse(out)
    n = sum(len(f.samples) for f in fams.values())
    untyped = [f.name for f in fams.values() if not getattr(f, "typed", False)]
    if untyped:
        raise FormatError(f"families without TYPE: {untyped}")
    no_help = [f.name for f in fams.values() if f.help is None]
    if no_help:
        raise FormatError(f"families without HELP: {no_help}")
    print(f"ok: {len(fams)} families, {n} samples")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (FormatError, AssertionError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
