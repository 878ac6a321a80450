#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Transformer MLP matrix products against the machine's FP32 GEMM peak.

The peak is measured in the same run, as bench/compare/compare.py does: a 2048^3 MatMul timed by
kiln and by ONNX Runtime, the faster one's GFLOP/s. Then each MLP shape runs as one model, X
[M, K] x W [K, N] + bias with GELU (the fused node a transformer's up projection becomes; the
down projection has no activation), on kiln (`kiln profile`, the node's own time) at the
requested ISA levels, and the table gives GFLOP/s and the share of the peak. Shapes: ViT-B/16's
MLP at batch 1 and 8 (197 and 1576 tokens), BERT-base's at sequence 128 (batch 1 and 8), the
breadth suite's encoder_small (384 -> 1536) and GPT-style decoder chunk (32 tokens, 512 -> 2048).

  bench/kernels/transformer_gemm.py --kiln build/kiln [--isa native,avx2] [--rounds 3]

--isa avx2 restricts kiln (ONEDNN_MAX_CPU_ISA=AVX2, KILN_CPU_ISA=avx2) and measures the peak the
same way (kiln at AVX2; ONNX Runtime has no such setting, so at AVX2 the peak is kiln's alone).
Writes bench/results/<date>-<commit>-transformer-gemm.json. Not a test.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "compare"))
import compare  # noqa: E402

# name: (M, K, N, gelu)
SHAPES = {
    "vit_b16_up_b1": (197, 768, 3072, True),
    "vit_b16_down_b1": (197, 3072, 768, False),
    "vit_b16_up_b8": (1576, 768, 3072, True),
    "vit_b16_down_b8": (1576, 3072, 768, False),
    "bert_base_up_b1": (128, 768, 3072, True),
    "bert_base_down_b1": (128, 3072, 768, False),
    "bert_base_up_b8": (1024, 768, 3072, True),
    "encoder_small_up_b1": (128, 384, 1536, True),
    "decoder_chunk_up_b1": (32, 512, 2048, True),
}
ISA_ENV = {"native": {}, "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "KILN_CPU_ISA": "avx2"}}
PEAK_N = 2048


def mlp_model(path, m, k, n, gelu):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((k, n)) * 0.02).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(n) * 0.02).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mlp"),
             helper.make_node("Add", ["mm", "b"], ["h" if gelu else "y"], name="bias")]
    if gelu:  # the erf form, as torch exports nn.GELU
        c = numpy_helper.from_array(np.array(2 ** -0.5, np.float32), "c")
        one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
        half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
        nodes += [helper.make_node("Mul", ["h", "c"], ["s"]), helper.make_node("Erf", ["s"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["a"]),
                  helper.make_node("Mul", ["h", "a"], ["ha"]),
                  helper.make_node("Mul", ["ha", "half"], ["y"])]
        inits = [w, b, c, one, half]
    else:
        inits = [w, b]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def peak_model(path):
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((PEAK_N, PEAK_N)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="gemm")], "peak",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [PEAK_N, PEAK_N])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             [PEAK_N, PEAK_N])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def kiln_gflops(args, path, env, iterations):
    """GFLOP/s of the model's most expensive node (the matrix product), mean over the runs, at
    a fixed width: the kernel's speed (the thread governor's probes would mix in 1-thread runs)."""
    out = subprocess.run([args.kiln, "profile", path, "--threads", str(args.threads),
                          "--iterations", str(iterations), "--warmup", "3", "--fixed-threads",
                          "--json"],
                         capture_output=True, text=True, env=dict(os.environ, **env), check=True)
    doc = json.loads(out.stdout)
    node = max(doc["nodes"], key=lambda n: n.get("flops", 0))
    return node["gflops_per_s"], node.get("implementation", ""), doc["median_ms"]


def ort_gflops(args, path, work, flop):
    spec = {"model": path, "threads": args.threads, "warmup": 2, "iterations": 5,
            "inputs": [{"name": "x", "shape": [PEAK_N, PEAK_N], "file": os.path.join(work, "x.bin"),
                        "dtype": "float32"}]}
    np.ones((PEAK_N, PEAK_N), np.float32).tofile(spec["inputs"][0]["file"])
    with open(os.path.join(work, "spec.json"), "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, NODE_PATH=os.path.join(args.node_dir, "node_modules"))
    out = subprocess.run(["node", os.path.join(ROOT, "bench", "compare", "ort_runner.cjs"),
                          os.path.join(work, "spec.json")], capture_output=True, text=True,
                         env=env, cwd=args.node_dir, check=True)
    times = json.loads(out.stdout.strip().splitlines()[-1])["times_ms"]
    return flop / (statistics.median(times) / 1000.0) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--isa", default="native,avx2")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--node-dir", default="build/bench-node")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.kiln = os.path.abspath(args.kiln)
    args.node_dir = os.path.abspath(args.node_dir)
    compare.ensure_node(args.node_dir)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        peak_path = os.path.join(work, "peak.onnx")
        peak_model(peak_path)
        for name, (m, k, n, gelu) in SHAPES.items():
            mlp_model(os.path.join(work, name + ".onnx"), m, k, n, gelu)
        for isa in args.isa.split(","):
            env = ISA_ENV[isa]
            peak = {"kiln": 0.0}
            if isa == "native":
                peak["ort"] = 0.0
            got = {name: [] for name in SHAPES}
            impl = {}
            for _ in range(args.rounds):  # interleaved: the peak and every shape each round
                peak["kiln"] = max(peak["kiln"], kiln_gflops(args, peak_path, env, 5)[0])
                if "ort" in peak:
                    peak["ort"] = max(peak["ort"], ort_gflops(args, peak_path, work,
                                                              2.0 * PEAK_N ** 3))
                for name, (m, k, n, _) in SHAPES.items():
                    g, impl[name], _ = kiln_gflops(args, os.path.join(work, name + ".onnx"), env,
                                                   max(5, int(2e9 / (2 * m * k * n))))
                    got[name].append(g)
            best = max(peak.values())
            print(f"\nISA {isa}: FP32 GEMM peak {best:.1f} GFLOP/s (2048^3; " +
                  ", ".join(f"{e} {v:.1f}" for e, v in peak.items()) + ")")
            print(f"{'shape':<22} {'M x K x N':>18} {'GFLOP/s':>8} {'of peak':>8}  implementation")
            for name, (m, k, n, _) in SHAPES.items():
                g = statistics.median(got[name])
                print(f"{name:<22} {f'{m}x{k}x{n}':>18} {g:8.1f} {100 * g / best:7.0f}%  "
                      f"{impl[name]}")
                rows.append({"isa": isa, "shape": name, "m": m, "k": k, "n": n,
                             "gflop_per_s": g, "rounds": got[name], "peak_gflop_per_s": best,
                             "peak_by_engine": peak, "of_peak": g / best,
                             "implementation": impl[name]})
    commit = compare.git_commit()
    out = args.out or os.path.join(ROOT, "bench", "results",
                                   f"{datetime.date.today().isoformat()}-{commit}-transformer-gemm"
                                   ".json")
    with open(out, "w") as f:
        json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                   "commit": commit, "cpu": compare.cpu_model(), "threads": args.threads,
                   "command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
