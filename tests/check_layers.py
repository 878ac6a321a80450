#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Fails, naming file, line, include and rule, when an #include "..." crosses kiln's layers.

Every #include "..." in src/, tools/ and tests/ is resolved to a file of the tree (the including
file's folder first, then src/, then the checkout root; a header generated from a .proto counts
as that .proto's neighbour), both ends are mapped to their parts, and the edge is checked against
the table in tests/layers.txt (docs/architecture.md). Includes of headers outside the tree
("onnx/onnx_pb.h" and the like) are not kiln's layers and are skipped. Part of make test (CTest
`layers`, label style).

  tests/check_layers.py [--root DIR] [--table FILE] [--edges]

--edges prints every part-to-part edge with its include count and an example instead of checking.
"""

import argparse
import os
import re
import sys
from collections import defaultdict

SCANNED = ("src", "tools", "tests")
SOURCE = re.compile(r"\.(h|cc|inc|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GENERATED = re.compile(r"^(.*?)\.(grpc\.pb|pb)\.h$")


def fail_table(path, lineno, message):
    sys.exit(f"check_layers: {path}:{lineno}: {message}")


def read_table(path):
    """{part: [entries]} in file order."""
    table = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            part, sep, rest = line.partition(":")
            part = part.strip()
            if not sep or not re.fullmatch(r"[a-z_]+", part):
                fail_table(path, lineno, f"expected 'PART: ENTRY ...', got '{line}'")
            if part in table:
                fail_table(path, lineno, f"part '{part}' is declared twice")
            table[part] = rest.split()
    for part, entries in table.items():
        for e in entries:
            if e.split("/", 1)[0] not in table:
                sys.exit(f"check_layers: {path}: '{part}' allows '{e}', which names no part")
    return table


def part_of(rel):
    """The part of a checkout-relative path: src/<part>/..., tools, tests."""
    first, _, rest = rel.partition("/")
    if first == "src":
        return rest.split("/", 1)[0] if "/" in rest else None
    return first


def key_of(rel):
    """The path entries are matched against: under src/ without the prefix, else as is."""
    return rel[len("src/"):] if rel.startswith("src/") else rel


def find_proto(root, stem):
    """The checkout-relative folder of <stem>.proto under src/, or None."""
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        if stem + ".proto" in files:
            return os.path.relpath(dirpath, root)
    return None


def resolve(root, including, header, parts, protos):
    """Checkout-relative path of `header` included from `including`; None for an outside one.

    Raises ValueError when the include names a part but no such header exists.
    """
    here = os.path.dirname(including)
    for base in (here, "src", ""):
        candidate = os.path.normpath(os.path.join(base, header))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    m = GENERATED.match(header)
    if m:
        stem = os.path.basename(m.group(1))
        if stem not in protos:
            protos[stem] = find_proto(root, stem)
        if protos[stem] is not None:
            return os.path.join(protos[stem], os.path.basename(header))
    if header.split("/", 1)[0] in parts:
        raise ValueError("no such header in the tree")
    return None


def allowed(entries, part, target_part, target_key):
    if target_part == part:
        return True
    for e in entries:
        if target_key == e or target_key.startswith(e.rstrip("/") + "/"):
            return True
    return False


def scan(root):
    for top in SCANNED:
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(files):
                if SOURCE.search(name):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--root", default=os.path.dirname(here), help="the checkout (default: ..)")
    ap.add_argument("--table", default=os.path.join(here, "layers.txt"))
    ap.add_argument("--edges", action="store_true", help="print the edges, check nothing")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    table = read_table(args.table)
    table_path = os.path.abspath(args.table)
    inside = table_path.startswith(root + os.sep)
    table_name = os.path.relpath(table_path, root) if inside else table_path

    protos = {}
    errors = []
    edges = defaultdict(list)
    files = 0
    for rel in scan(root):
        part = part_of(rel)
        if part is None:  # a file directly in src/ (none but CMakeLists.txt today)
            continue
        files += 1
        if part not in table:
            errors.append(f"{rel}: part '{part}' is not declared in {table_name}")
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for lineno, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = m.group(1)
            try:
                target = resolve(root, rel, header, table, protos)
            except ValueError as e:
                errors.append(f'{rel}:{lineno}: #include "{header}": {e}')
                continue
            if target is None:
                continue
            target_part = part_of(target)
            if target_part is None or target_part == part:
                continue
            edges[(part, target_part)].append(f'{rel}:{lineno} "{header}"')
            if not allowed(table[part], part, target_part, key_of(target)):
                rule = " ".join(table[part]) or "nothing outside itself"
                errors.append(f'{rel}:{lineno}: #include "{header}": {part} may not include '
                              f"{target_part} ({table_name}: '{part}: {rule}')")

    if args.edges:
        for (a, b), where in sorted(edges.items()):
            print(f"{a} -> {b}: {len(where)} (e.g. {where[0]})")
        return 0
    if errors:
        print(f"check_layers: {len(errors)} include(s) break the layers of {table_name} "
              f"(docs/architecture.md):")
        for e in errors:
            print(f"  {e}")
        return 1
    print(f"check_layers: {files} files, {sum(len(w) for w in edges.values())} includes "
          f"between {len(edges)} pairs of parts, all allowed by {table_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
