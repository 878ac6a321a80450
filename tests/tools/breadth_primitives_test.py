#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""No oneDNN reference primitive on the breadth suite's layers.

tests/data/breadth_primitive_cases.json.gz (written by bench/breadth/primitive_cases.py) holds every
distinct oneDNN-backed node of the breadth suite's 45 architectures as kiln optimizes them for
each channel block: convolutions (plain and blocked, fused with residuals and activations),
matrix products, pools and layout reorders, with their operand shapes at batch 1. This
test asks kiln which block this machine's kernels use (it optimizes a two-conv model and reads
the block it chose), rebuilds the cases of that block as ONNX models of independent nodes on
random data (constants where the model had initializers), runs them once with `kiln profile`,
and fails when any node planned a oneDNN reference implementation ("oneDNN ref..."), or when
kiln could not run a case at all. Run at every ISA level by CTest (tests/run_at_isa.sh), so an
AVX-512 machine also proves the AVX2 and baseline paths.

Usage: breadth_primitives_test.py --kiln build/kiln --cases tests/data/breadth_primitive_cases.json.gz
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, mapping, numpy_helper

# Nodes per generated model: bounds the memory of one kiln process.
CHUNK_BYTES = 512 << 20
TILE = np.random.default_rng(1).standard_normal(4096).astype(np.float32) * 0.1


def machine_block(kiln, work):
    """The channel block kiln's optimizer picks on this machine (16, 8 or 0)."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((32, 32, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 32, 1, 1)).astype(np.float32), "w2")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["a", "w2"], ["y"])], "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 8, 8])], [w1, w2])
    src, out = os.path.join(work, "probe.onnx"), os.path.join(work, "probe_opt.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    subprocess.run([kiln, "optimize", src, "--out", out], check=True, capture_output=True)
    for n in onnx.load(out).graph.node:
        for a in n.attribute:
            if a.name == "y_block" and a.i > 0:
                return a.i
    return 0


def make_attribute(a):
    value = next(v for k, v in a.items() if k != "name")
    return helper.make_attribute(a["name"], value)


def case_bytes(case):
    total = 0
    for i in case["inputs"]:
        if i is not None:
            total += 4 * int(np.prod(i["shape"]))
    return total


def build_model(cases, path):
    nodes, inputs, inits, outputs = [], [], [], []
    for k, c in enumerate(cases):
        names = []
        for j, spec in enumerate(c["inputs"]):
            if spec is None:
                names.append("")
                continue
            name = f"c{k}_in{j}"
            names.append(name)
            dtype = mapping.TENSOR_TYPE_TO_NP_TYPE[spec["dtype"]]
            if spec.get("constant"):
                # Values do not steer the choice of implementation: one random tile of 4096
                # values repeated fills any shape fast.
                count = int(np.prod(spec["shape"]))
                tile = TILE.astype(dtype) if np.issubdtype(dtype, np.floating) else \
                    (TILE * 8).astype(dtype)
                data = np.resize(tile, count).reshape(spec["shape"])
                inits.append(numpy_helper.from_array(data, name))
            else:
                inputs.append(helper.make_tensor_value_info(name, spec["dtype"], spec["shape"]))
        out = f"c{k}_out"
        outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, c["output"]))
        node = helper.make_node(c["op"], names, [out], name=f"case{k}_{c['model']}_{c['op']}",
                                domain=c["domain"])
        node.attribute.extend(make_attribute(a) for a in c["attributes"])
        nodes.append(node)
    graph = helper.make_graph(nodes, "breadth_primitives", inputs, outputs, inits)
    opsets = [helper.make_opsetid("", max(13, max(c["opset"] for c in cases
                                                  if c["domain"] == "") if any(
                                                      c["domain"] == "" for c in cases) else 17))]
    if any(c["domain"] == "ai.kiln" for c in cases):
        opsets.append(helper.make_opsetid("ai.kiln", 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--cases", required=True)
    args = ap.parse_args()
    with gzip.open(args.cases, "rt") as f:
        all_cases = json.load(f)["cases"]
    failures = []
    with tempfile.TemporaryDirectory() as work:
        block = machine_block(args.kiln, work)
        # Group by the opset the cases came with (one model imports one ONNX opset).
        mine = [c for c in all_cases if c["block"] == block]
        print(f"breadth_primitives: channel block {block}: {len(mine)} of {len(all_cases)} cases")
        if not mine:
            print("FAIL  no cases for this block")
            return 1
        groups = {}
        for c in mine:
            groups.setdefault(c["opset"] if c["domain"] == "" else 0, []).append(c)
        chunks = []
        for key in sorted(groups):
            chunk, size = [], 0
            for c in groups[key]:
                if chunk and size + case_bytes(c) > CHUNK_BYTES:
                    chunks.append(chunk)
                    chunk, size = [], 0
                chunk.append(c)
                size += case_bytes(c)
            if chunk:
                chunks.append(chunk)
        planned = 0
        for k, chunk in enumerate(chunks):
            path = os.path.join(work, f"chunk{k}.onnx")
            build_model(chunk, path)
            r = subprocess.run([args.kiln, "profile", path, "--iterations", "1", "--warmup", "0",
                                "--json"], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"chunk {k}: kiln profile failed: {r.stderr[-800:]}")
                continue
            doc = json.loads(r.stdout)
            for n in doc.get("nodes", []):
                planned += 1
                impl = n.get("implementation", "")
                if impl.startswith("oneDNN ref") or "oneDNN ref" in impl:
                    failures.append(f"{n['name']}: planned {impl}")
        print(f"breadth_primitives: {planned} nodes planned in {len(chunks)} models")
        if planned < len(mine):
            failures.append(f"only {planned} of {len(mine)} cases ran")
    for f in failures:
        print("FAIL  " + f)
    if not failures:
        print("PASS  no oneDNN reference primitive planned")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
