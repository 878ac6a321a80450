#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What batch invariance costs: kiln's batch-invariant GEMM against oneDNN's matmul, whole models.

On CPUs without AVX-512 kiln runs matrix products with a weight matrix on its own GEMM, whose rows
do not depend on the batch (docs/kernels.md, "Batch invariance"); KILN_CPU_GEMM=onednn runs
oneDNN's jit sgemm instead, which is not batch-invariant. This script times each model at each
batch both ways with `kiln profile --json`, interleaved over --rounds, under an ISA cap that makes
an AVX-512 machine run its AVX2 code (default ONEDNN_MAX_CPU_ISA=AVX2, KILN_CPU_ISA=avx2), and
prints the median latency of each and the ratio (above 1: the invariant GEMM is faster).

  bench/compare/batch_invariance.py --kiln build/kiln [--models bert_tiny,bert_base,mobilenet_v2]
      [--batches 1,8] [--rounds 5] [--isa AVX2]

Models come from make_models.py (build/bench-models) plus the demo repository's digits MLP.
Not a test: nothing here gates CI. Results: bench/results/<date>-<commit>-batch-invariance.json.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402


def profile_ms(kiln, model, batch, iterations, warmup, threads, env):
    cmd = [kiln, "profile", model, "--batch", str(batch), "--iterations", str(iterations),
           "--warmup", str(warmup), "--threads", str(threads), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr[-1000:]}")
    doc = json.loads(out.stdout)
    matmul_ms = sum(n["total_ms"] / n["calls"] for n in doc["nodes"]
                    if n["op_type"] in ("MatMul", "Gemm", "FusedMatMul", "FusedGemm"))
    return doc["median_ms"], matmul_ms, doc["cpu"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", default="digits,bert_tiny,bert_base,mobilenet_v2,resnet50")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--isa", default="AVX2",
                    help="ONEDNN_MAX_CPU_ISA for both runs (KILN_CPU_ISA follows: avx2 for AVX2)")
    ap.add_argument("--models-dir", default="build/bench-models")
    ap.add_argument("--demo-dir", default="build/demo_models")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.kiln = os.path.abspath(args.kiln)
    models = args.models.split(",")
    generated = [m for m in models if m != "digits"]
    if generated:
        subprocess.run([sys.executable, os.path.join(HERE, "make_models.py"), "--out",
                        args.models_dir, "--models", ",".join(generated)], check=True)
    paths = {m: (os.path.join(args.demo_dir, "digits", "1", "model.onnx") if m == "digits"
                 else os.path.join(args.models_dir, m + ".onnx")) for m in models}
    base = dict(os.environ, ONEDNN_MAX_CPU_ISA=args.isa,
                KILN_CPU_ISA={"AVX2": "avx2", "SSE41": "scalar"}.get(args.isa, "avx512"))
    envs = {"kiln_gemm": dict(base), "onednn": dict(base, KILN_CPU_GEMM="onednn")}
    envs["kiln_gemm"].pop("KILN_CPU_GEMM", None)
    rows = []
    cpu_info = None
    for model in models:
        for batch in [int(b) for b in args.batches.split(",")]:
            times = {k: [] for k in envs}
            mm = {k: [] for k in envs}
            for rnd in range(args.rounds):
                for name, env in envs.items():
                    t, m, cpu_info = profile_ms(args.kiln, paths[model], batch, args.iterations,
                                                args.warmup, args.threads, env)
                    times[name].append(t)
                    mm[name].append(m)
            row = {"model": model, "batch": batch}
            for name in envs:
                row[f"{name}_ms"] = statistics.median(times[name])
                row[f"{name}_matmul_ms"] = statistics.median(mm[name])
            row["onednn_over_kiln_gemm"] = row["onednn_ms"] / row["kiln_gemm_ms"]
            rows.append(row)
            print(f"batch_invariance: {model} batch {batch}: kiln GEMM {row['kiln_gemm_ms']:.3f} "
                  f"ms, oneDNN {row['onednn_ms']:.3f} ms", file=sys.stderr, flush=True)
    print(f"\nISA cap ONEDNN_MAX_CPU_ISA={args.isa}, {args.threads} threads, medians of "
          f"{args.rounds} interleaved rounds\n")
    print("| model | batch | kiln GEMM ms | oneDNN ms | oneDNN/kiln | matmuls kiln ms | matmuls "
          "oneDNN ms |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['batch']} | {r['kiln_gemm_ms']:.3f} | {r['onednn_ms']:.3f} | "
              f"{r['onednn_over_kiln_gemm']:.2f}x | {r['kiln_gemm_matmul_ms']:.3f} | "
              f"{r['onednn_matmul_ms']:.3f} |")
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "commit": compare.git_commit(), "cpu": compare.cpu_model(), "kernels": cpu_info,
           "command": " ".join(sys.argv), "isa": args.isa, "threads": args.threads,
           "results": rows}
    out = args.out or os.path.join(HERE, "..", "results",
                                   f"{datetime.date.today().isoformat()}-{doc['commit']}-"
                                   "batch-invariance.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"results: {os.path.abspath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
