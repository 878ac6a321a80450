#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Collects the oneDNN-backed nodes of the breadth suite into test cases.

`make test` cannot export the breadth models (PyTorch, half an hour), yet it must fail when any
of them would plan a oneDNN reference primitive. This script reads what kiln makes of every
breadth model, optimized as each channel block has it (16: AVX-512, 8: AVX2, 0: below), and
writes every distinct Conv / FusedConv / MatMul / Gemm / FusedMatMul / FusedGemm / MaxPool /
AveragePool / BlockedPool / ReorderToBlocked / ReorderFromBlocked / QConv / QMatMul node with
the shapes of its operands at batch 1 to a gzipped JSON file (the suite's own runs report the
reference primitives of batch 8 too: bench/breadth/run.py). These ops mean the same at opsets 13
and 17, so a node is recorded once, at opset 17. tests/tools/breadth_primitives_test.py rebuilds
each node on random data and fails on a reference implementation.

  bench/breadth/primitive_cases.py --kiln build/kiln --models-dir build/breadth-models \\
      --out tests/data/breadth_primitive_cases.json.gz

The machine must reach the blocks it collects: AVX-512 for 16 (ONEDNN_MAX_CPU_ISA=AVX2 gives 8,
SSE41 gives 0).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

OPS = {("", "Conv"), ("", "MatMul"), ("", "Gemm"), ("", "MaxPool"), ("", "AveragePool"),
       ("ai.kiln", "FusedConv"), ("ai.kiln", "FusedMatMul"), ("ai.kiln", "FusedGemm"),
       ("ai.kiln", "BlockedPool"), ("ai.kiln", "ReorderToBlocked"),
       ("ai.kiln", "ReorderFromBlocked"), ("ai.kiln", "QConv"), ("ai.kiln", "QMatMul")}
# The ISA that gives each channel block (kernels/target.h).
BLOCK_ENV = {16: {}, 8: {"ONEDNN_MAX_CPU_ISA": "AVX2", "KILN_CPU_ISA": "avx2"},
             0: {"ONEDNN_MAX_CPU_ISA": "SSE41", "KILN_CPU_ISA": "scalar"}}


def attribute_json(a):
    import onnx
    t = a.type
    if t == onnx.AttributeProto.INT:
        return {"name": a.name, "i": a.i}
    if t == onnx.AttributeProto.INTS:
        return {"name": a.name, "ints": list(a.ints)}
    if t == onnx.AttributeProto.FLOAT:
        return {"name": a.name, "f": a.f}
    if t == onnx.AttributeProto.FLOATS:
        return {"name": a.name, "floats": list(a.floats)}
    if t == onnx.AttributeProto.STRING:
        return {"name": a.name, "s": a.s.decode()}
    return None


def shape_of(types, name, symbols):
    """The dims of value `name`, symbolic dims given by `symbols` (the graph inputs' symbols
    with the sizes of the suite's inputs); None when a dim is unknown or another symbol."""
    t = types.get(name)
    if t is None or not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.dim_param in symbols:
            dims.append(symbols[d.dim_param])
        else:
            return None
    return dims


def input_symbols(model_path, entry, models_dir, batch):
    """{symbol: size} of the original model's graph inputs at `batch` (from its .npy inputs)."""
    import numpy as np
    import onnx
    g = onnx.load(model_path, load_external_data=False).graph
    specs = {i["name"]: i for i in entry["inputs"][str(batch)]}
    symbols = {}
    for i in g.input:
        if i.name not in specs:
            continue
        shape = np.load(os.path.join(models_dir, specs[i.name]["file"]), mmap_mode="r").shape
        for d, size in zip(i.type.tensor_type.shape.dim, shape):
            if d.dim_param:
                symbols[d.dim_param] = int(size)
    return symbols


def collect(path, block, symbols):
    import onnx
    m = onnx.load(path)
    g = m.graph
    types = {v.name: v.type.tensor_type for v in list(g.value_info) + list(g.input) +
             list(g.output)}
    inits = {i.name: i for i in g.initializer}
    for i in g.initializer:
        types[i.name] = onnx.helper.make_tensor_type_proto(i.data_type, list(i.dims)).tensor_type
    opsets = {o.domain: o.version for o in m.opset_import}
    cases = []
    for n in g.node:
        if (n.domain, n.op_type) not in OPS:
            continue
        for _ in [0]:
            inputs, ok = [], True
            for name in n.input:
                if not name:
                    inputs.append(None)
                    continue
                dims = shape_of(types, name, symbols)
                if dims is None:
                    ok = False
                    break
                entry = {"shape": dims, "dtype": types[name].elem_type}
                if name in inits:
                    entry["constant"] = True
                inputs.append(entry)
            out = shape_of(types, n.output[0], symbols)
            if not ok or out is None:
                continue
            attrs = [x for x in (attribute_json(a) for a in n.attribute) if x is not None]
            cases.append({"op": n.op_type, "domain": n.domain,
                          "opset": 17 if n.domain == "" else opsets.get(n.domain, 1),
                          "attributes": attrs, "inputs": inputs, "output": out,
                          "block": block})
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models-dir", default="build/breadth-models")
    ap.add_argument("--out", default="tests/data/breadth_primitive_cases.json.gz")
    ap.add_argument("--blocks", default="16,8,0")
    args = ap.parse_args()
    with open(os.path.join(args.models_dir, "manifest.json")) as f:
        entries = json.load(f)["models"]
    seen, cases = set(), []
    with tempfile.TemporaryDirectory() as work:
        for block in (int(b) for b in args.blocks.split(",")):
            env = dict(os.environ, **BLOCK_ENV[block])
            for e in entries:
                if e["family"] == "detection" and e["batches"] != [1]:
                    continue  # the same layers as the batch-1 file, larger
                out = os.path.join(work, e["id"] + ".onnx")
                r = subprocess.run([args.kiln, "optimize", os.path.join(args.models_dir, e["file"]),
                                    "--out", out], capture_output=True, text=True, env=env)
                if r.returncode != 0:
                    print(f"primitive_cases: {e['id']} (block {block}): kiln optimize failed: "
                          f"{r.stderr[-500:]}", file=sys.stderr)
                    continue
                new = 0
                symbols = input_symbols(os.path.join(args.models_dir, e["file"]), e,
                                        args.models_dir, 1)
                for c in collect(out, block, symbols):
                    key = json.dumps(c, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        c["model"] = e["id"]
                        cases.append(c)
                        new += 1
                os.remove(out)
                print(f"primitive_cases: {e['id']} block {block}: {new} new cases", file=sys.stderr,
                      flush=True)
    cases.sort(key=lambda c: (c["block"], c["domain"], c["op"], c["model"]))
    with gzip.open(args.out, "wt") as f:
        json.dump({"generated_by": "bench/breadth/primitive_cases.py", "cases": cases}, f,
                  separators=(",", ":"))
        f.write("\n")
    print(f"primitive_cases: {len(cases)} cases written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
