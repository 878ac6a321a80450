#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ONNX backend conformance runner for kiln.

Walks the ONNX backend test data (Debian package libonnx-testdata: node/, pytorch-converted/,
pytorch-operator/, simple/; each case is model.onnx + test_data_set_N/{input_K.pb, output_K.pb}),
runs every data set through `kiln run MODEL --inputs-dir SET --output-dir OUT`, and compares the
outputs with the expected ones: rtol 1e-3 and atol 1e-5 for floating point, exact for integers,
bools and strings. Sequence and optional outputs (SequenceProto / OptionalProto files, read as
the model's declared output type says) are compared element by element with the same
tolerances; an empty optional matches only an empty optional. Cases whose models use
random-output ops are checked for shape and dtype only and counted separately.

Every case gets one status:
  pass         every output of every data set matches
  fail         kiln ran but an output differs (the detail names the output and max error), or
               a node ran on a oneDNN reference primitive (`kiln run --implementations`), which
               kiln never plans
  unsupported  kiln refused the model at load (an op, opset, type or value kind it lacks)
  error        kiln failed in another way (the detail is its one-line reason)
  random       a random-output op: shapes and dtypes checked, values cannot be
Results go to a per-case table (--table, Markdown). With --baseline FILE, the run fails when a
case listed in FILE no longer passes; --write-baseline FILE records the passing cases.

Examples:
  run_conformance.py --kiln build/kiln                       # every folder, summary + table
  run_conformance.py --kiln build/kiln --filter 'node/test_(add|sub)' -v
  run_conformance.py --kiln build/kiln --baseline tests/conformance/baseline.txt
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

FOLDERS = ["node", "pytorch-converted", "pytorch-operator", "simple"]
RANDOM_OPS = {"Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal",
              "RandomNormalLike", "Multinomial", "Dropout:train"}
RTOL, ATOL = 1e-3, 1e-5
UNSUPPORTED_MARKERS = ("is not supported", "kiln supports",
                       "not supported", "unsupported")


def find_testdata():
    for root in ("/usr/share/libonnx-testdata/data", "/usr/local/share/libonnx-testdata/data"):
        if os.path.isdir(os.path.join(root, "node")):
            return root
    return None


def list_cases(testdata, folders, pattern):
    rx = re.compile(pattern) if pattern else None
    cases = []
    for folder in folders:
        d = os.path.join(testdata, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            key = f"{folder}/{name}"
            if rx and not rx.search(key):
                continue
            if os.path.isfile(os.path.join(d, name, "model.onnx")):
                cases.append((key, os.path.join(d, name)))
    return cases


class _None:
    """The value of an empty optional (an OptionalProto of elem_type UNDEFINED)."""

    def __repr__(self):
        return "none"


NONE = _None()


def value_kind(type_proto):
    """'tensor', 'sequence' or 'optional' for a graph output's TypeProto (unset: 'tensor')."""
    kind = type_proto.WhichOneof("value") if type_proto is not None else None
    return {"sequence_type": "sequence", "optional_type": "optional"}.get(kind, "tensor")


def _sequence_to_list(seq):
    if seq.elem_type not in (onnx.SequenceProto.TENSOR, onnx.SequenceProto.UNDEFINED) or \
            seq.sparse_tensor_values or seq.sequence_values or seq.map_values or \
            seq.optional_values:
        raise ValueError(f"a sequence of elem_type {seq.elem_type}, not of tensors")
    return [numpy_helper.to_array(t) for t in seq.tensor_values]


def load_value(path, kind):
    """The value stored in a .pb file as the output's declared kind says: a numpy array (a
    TensorProto), a list of arrays (a SequenceProto), or for an OptionalProto NONE, an array or
    a list. Raises on bytes that are not such a message."""
    with open(path, "rb") as f:
        data = f.read()
    if kind == "sequence":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return _sequence_to_list(seq)
    if kind == "optional":
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        if opt.elem_type == onnx.OptionalProto.UNDEFINED:
            if opt.HasField("tensor_value") or opt.HasField("sequence_value"):
                raise ValueError("an OptionalProto of elem_type UNDEFINED that holds a value")
            return NONE
        if opt.elem_type == onnx.OptionalProto.TENSOR:
            return numpy_helper.to_array(opt.tensor_value)
        if opt.elem_type == onnx.OptionalProto.SEQUENCE:
            return _sequence_to_list(opt.sequence_value)
        raise ValueError(f"an optional of elem_type {opt.elem_type}")
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def describe(v):
    if v is NONE:
        return "none"
    if isinstance(v, list):
        return f"a sequence of {len(v)}"
    return f"a tensor {v.dtype}{list(v.shape)}"


def compare(got, want, random_case):
    if got.shape != want.shape:
        return False, f"shape {list(got.shape)} != expected {list(want.shape)}"
    if got.dtype != want.dtype:
        return False, f"dtype {got.dtype} != expected {want.dtype}"
    if random_case:
        return True, "shape and dtype"
    if want.dtype.kind in "fc":
        g, w = got.astype(np.float64), want.astype(np.float64)
        ok = np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True)
        finite = np.isfinite(g) & np.isfinite(w)
        err = float(np.max(np.abs(g[finite] - w[finite]))) if finite.any() else 0.0
        return bool(ok), f"max abs error {err:.3g}"
    return bool(np.array_equal(got, want)), "exact"


def compare_value(got, want, random_case):
    """compare() for values of any kind: tensors as compare() does, sequences element by element
    with the same tolerances, nones by kind. The detail of a match is 'exact', 'shape and dtype'
    or the worst 'max abs error'."""
    if want is NONE or got is NONE:
        if want is got:
            return True, "exact"
        return False, f"got {describe(got)}, expected {describe(want)}"
    if isinstance(want, list) or isinstance(got, list):
        if not (isinstance(want, list) and isinstance(got, list)):
            return False, f"got {describe(got)}, expected {describe(want)}"
        if len(got) != len(want):
            return False, f"a sequence of {len(got)} elements, expected {len(want)}"
        details = []
        for k, (g, w) in enumerate(zip(got, want)):
            ok, detail = compare(g, w, random_case)
            if not ok:
                return False, f"element {k}: {detail}"
            details.append(detail)
        errors = [float(d.split()[-1]) for d in details if d.startswith("max abs error")]
        if errors:
            return True, f"max abs error {max(errors):.3g}"
        return True, details[0] if details else "exact"
    return compare(got, want, random_case)


def load_model(path):
    try:
        return onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001
        return None


def model_ops(m):
    """Op types the model uses; a Dropout given a training_mode input counts as 'Dropout:train'
    (its mask and output are random, like the random ops')."""
    if m is None:
        return set()
    ops = set()

    def walk(g):
        for n in g.node:
            ops.add(n.op_type)
            if n.op_type == "Dropout" and len(n.input) > 2 and n.input[2]:
                ops.add("Dropout:train")
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sub in a.graphs:
                    walk(sub)
    walk(m.graph)
    return ops


def reference_primitives(path):
    """The nodes of a `kiln run --implementations` file that ran a oneDNN reference primitive
    ("oneDNN ref:any", ...), which kiln must never plan (docs/kernels.md); "" when none."""
    found = []
    with open(path) as f:
        for line in f:
            node, op, _, impl = (line.rstrip("\n").split("\t") + ["", "", "", ""])[:4]
            if any(i.startswith("oneDNN ref") for i in impl.split(", ")):
                found.append(f"node {node} ({op}): {impl}")
    return "; ".join(found)


def run_case(kiln, key, case_dir, timeout, workdir):
    model = os.path.join(case_dir, "model.onnx")
    proto = load_model(model)
    random_case = bool(model_ops(proto) & RANDOM_OPS)
    kinds = [value_kind(o.type) for o in proto.graph.output] if proto is not None else []
    sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_"))
    if not sets:
        return key, "error", "no test_data_set_* folder"
    details = []
    for s in sets:
        set_dir = os.path.join(case_dir, s)
        out = os.path.join(workdir, key.replace("/", "__"), s)
        try:
            impls = out + ".implementations"
            os.makedirs(os.path.dirname(impls), exist_ok=True)
            r = subprocess.run([kiln, "run", model, "--inputs-dir", set_dir, "--output-dir", out,
                                "--implementations", impls],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return key, "error", f"timed out after {timeout} s"
        if r.returncode != 0:
            msg = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
            msg = msg.removeprefix("kiln run: ")
            if r.returncode < 0:
                return key, "error", f"crashed with signal {-r.returncode}: {msg}"
            status = "unsupported" if any(m in msg for m in UNSUPPORTED_MARKERS) else "error"
            return key, status, msg
        slow = reference_primitives(impls)
        if slow:
            return key, "fail", f"{s}: planned oneDNN's reference implementation: {slow}"
        n = len([f for f in os.listdir(set_dir) if re.fullmatch(r"output_\d+\.pb", f)])
        for i in range(n):
            kind = kinds[i] if i < len(kinds) else "tensor"
            try:
                want = load_value(os.path.join(set_dir, f"output_{i}.pb"), kind)
            except Exception as e:  # noqa: BLE001 - expected data this runner cannot read
                return key, "error", f"{s}: expected output {i} ({kind}) is unreadable: {e}"
            got_path = os.path.join(out, f"output_{i}.pb")
            if not os.path.exists(got_path):
                return key, "fail", f"{s}: output {i} was not written"
            try:
                got = load_value(got_path, kind)
            except Exception as e:  # noqa: BLE001 - kiln wrote something else
                return key, "fail", f"{s}: output {i} is not a valid {kind} file: {e}"
            ok, detail = compare_value(got, want, random_case)
            if not ok:
                return key, "fail", f"{s}: output {i}: {detail}"
            details.append(detail)
        shutil.rmtree(out, ignore_errors=True)
    worst = max((float(d.split()[-1]) for d in details if d.startswith("max abs error")),
                default=None)
    detail = "exact" if worst is None else f"max abs error {worst:.3g}"
    return key, ("random" if random_case else "pass"), detail


def write_table(path, results):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("| case | status | detail |\n|---|---|---|\n")
        for key in sorted(results):
            status, detail = results[key]
            f.write(f"| {key} | {status} | {detail.replace('|', '/')} |\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", required=True, help="path of the kiln binary")
    ap.add_argument("--testdata", help="folder holding node/, pytorch-converted/, ... "
                    "(default: the libonnx-testdata package's)")
    ap.add_argument("--folders", default=",".join(FOLDERS), help="comma-separated folders")
    ap.add_argument("--filter", help="regex over 'folder/case' selecting the cases to run")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel cases")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per data set")
    ap.add_argument("--table", help="write the per-case Markdown table here")
    ap.add_argument("--baseline", help="fail if a case listed in this file does not pass")
    ap.add_argument("--write-baseline", help="write the passing cases to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    a = ap.parse_args()

    testdata = a.testdata or find_testdata()
    if not testdata or not os.path.isdir(os.path.join(testdata, "node")):
        print("ONNX test data not found: install libonnx-testdata or pass --testdata")
        return 2
    if not os.access(a.kiln, os.X_OK):
        print(f"kiln binary not found at {a.kiln}")
        return 2
    folders = [f for f in a.folders.split(",") if f]
    cases = list_cases(testdata, folders, a.filter)
    start = time.monotonic()
    results = {}
    with tempfile.TemporaryDirectory(prefix="kiln-conformance-") as work:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            futures = [pool.submit(run_case, a.kiln, key, d, a.timeout, work) for key, d in cases]
            for fut in concurrent.futures.as_completed(futures):
                key, status, detail = fut.result()
                results[key] = (status, detail)
                if a.verbose:
                    print(f"{status:12s} {key}: {detail}", flush=True)
    elapsed = time.monotonic() - start

    if a.table:
        write_table(a.table, results)
    print(f"\nONNX conformance ({testdata}), {len(results)} cases in {elapsed:.1f} s")
    print(f"{'folder':20s} {'pass':>6s} {'fail':>6s} {'unsup':>6s} {'error':>6s} {'random':>6s}"
          f" {'total':>6s}")
    for folder in folders:
        rows = [s for k, (s, _) in results.items() if k.startswith(folder + "/")]
        counts = [rows.count(s) for s in ("pass", "fail", "unsupported", "error", "random")]
        print(f"{folder:20s} " + " ".join(f"{c:6d}" for c in counts) + f" {len(rows):6d}")
    crashed = sorted(k for k, (s, d) in results.items() if d.startswith("crashed"))
    for k in crashed:
        print(f"CRASH {k}: {results[k][1]}")

    passing = sorted(k for k, (s, _) in results.items() if s in ("pass", "random"))
    if a.write_baseline:
        with open(a.write_baseline, "w") as f:
            f.write("# ONNX backend test cases kiln passes (run_conformance.py "
                    "--write-baseline); random-output cases are checked for shape and dtype.\n")
            f.writelines(k + "\n" for k in passing)
        print(f"baseline of {len(passing)} cases written to {a.write_baseline}")

    regressions = []
    if a.baseline:
        with open(a.baseline) as f:
            expected = [l.strip() for l in f if l.strip() and not l.startswith("#")]
        if a.filter:  # only the baseline cases this run selected
            expected = [k for k in expected if k in results]
        for k in expected:
            if k not in results:
                regressions.append((k, "case not found in the test data"))
            elif results[k][0] not in ("pass", "random"):
                regressions.append((k, f"{results[k][0]}: {results[k][1]}"))
        new = sorted(set(passing) - set(expected))
        for k, why in regressions:
            print(f"REGRESSION {k}: {why}")
        if new:
            print(f"{len(new)} passing cases are not in the baseline yet (update it with "
                  f"--write-baseline): {', '.join(new[:20])}{' ...' if len(new) > 20 else ''}")
        print(f"baseline: {len(expected) - len(regressions)} of {len(expected)} cases still pass")
    # The closing line counts baseline cases when a baseline is checked, else all cases.
    if a.baseline:
        print(f"{len(expected) - len(regressions)} passed, {len(regressions)} failed")
    else:
        print(f"{len(passing)} passed, {len(results) - len(passing)} failed")
    return 1 if regressions or crashed else 0


if __name__ == "__main__":
    sys.exit(main())
