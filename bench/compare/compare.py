#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Engine comparison: kiln against ONNX Runtime and PyTorch on the same ONNX files and inputs.

For every model and batch size the script:
  1. checks that the engines agree: one run each of kiln (`kiln run`), ONNX Runtime
     (onnxruntime-node, the CPU library ONNX Runtime ships) and PyTorch eager on the same
     inputs; max abs error against ONNX Runtime's output is reported, and a large one is flagged;
  2. times them interleaved: --rounds rounds, each running kiln (`kiln profile --json`), ONNX
     Runtime, PyTorch eager and TorchScript (torch.jit.trace) for --iterations timed runs after
     --warmup untimed ones, in a rotating order so that no engine always runs first; the figure
     of an engine is the median over rounds of its per-round median (and of its per-round p99);
  3. prints a table of latency (ms), throughput (items/s) and the ratios peer/kiln of median
     latency (above 1: kiln is faster), kiln's GFLOP/s and its share of the machine's FP32 GEMM
     peak, and kiln's planned activation memory against the unplanned sum; and writes
     everything to a JSON file stamped with the commit and the CPU.

The FP32 peak is measured first, in the same run: one MatMul [2048,2048] x [2048,2048] (the
"gemm" model at batch 2048) timed by kiln and by ONNX Runtime; the faster one is the peak
(--no-peak skips it). Default batches (--batches auto): 1, 8 and 32 for the CNNs, 1 and 8 for
the others.

Every engine gets the same intra-op thread count (--threads, default: the machine's cores); ONNX
Runtime runs with graph optimization level "all", sequential execution, one inter-op thread.

  bench/compare/compare.py --kiln build/kiln                 # every model, default batches
  bench/compare/compare.py --kiln build/kiln --models bert_tiny,mlp --batches 1 --rounds 5

Needs python3-torch, python3-torchvision and libopenblas0-openmp (scripts/install-deps bench),
Node.js and the npm package onnxruntime-node (`make bench-engine` installs it into
build/bench-node). Not a test: nothing here gates CI.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_models  # noqa: E402

ENGINES = ("kiln", "ort", "torch", "torchscript")


def percentile(values, p):
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit():
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Runner:
    def __init__(self, args, model, batch, work):
        import numpy as np
        self.np = np
        self.args = args
        self.model = model
        self.batch = batch
        self.path = os.path.join(args.models_dir, model + ".onnx")
        self.work = work
        self.inputs = make_models.make_inputs(model, batch)
        self.input_files = {}
        for name, a in self.inputs.items():
            npy = os.path.join(work, f"{name}.npy")
            np.save(npy, a)
            raw = os.path.join(work, f"{name}.bin")
            a.astype("<f4").tofile(raw)
            self.input_files[name] = (npy, raw)
        self.torch_module = None
        self.torchscript = None
        self.kiln_facts = {}

    # --- kiln ----------------------------------------------------------------------------
    def kiln_time(self):
        cmd = [self.args.kiln, "profile", self.path, "--batch", str(self.batch),
               "--threads", str(self.args.threads), "--iterations", str(self.args.iterations),
               "--warmup", str(self.args.warmup), "--json"]
        for name, a in self.inputs.items():
            cmd += ["--shape", f"{name}:{','.join(str(d) for d in a.shape)}"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"kiln profile failed ({out.returncode}): {out.stderr[-2000:]}")
        doc = json.loads(out.stdout)
        plan = doc.get("memory_plan") or {}
        self.kiln_facts = {"kiln_gflop_per_run": doc.get("gflop_per_run")}
        if plan.get("unplanned_bytes"):
            self.kiln_facts.update({
                "kiln_arena_bytes": plan["arena_bytes"],
                "kiln_unplanned_bytes": plan["unplanned_bytes"],
                "kiln_memory_planned_ratio": plan["arena_bytes"] / plan["unplanned_bytes"]})
        return doc["median_ms"], doc["p99_ms"]

    def kiln_outputs(self):
        out_dir = os.path.join(self.work, "kiln_out")
        os.makedirs(out_dir, exist_ok=True)
        cmd = [self.args.kiln, "run", self.path, "--output-dir", out_dir, "--output-format", "npy"]
        for name, (npy, _) in self.input_files.items():
            cmd += ["--input", f"{name}={npy}"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"kiln run failed ({out.returncode}): {out.stderr[-2000:]}")
        return self.np.load(os.path.join(out_dir, "output_0.npy"))

    # --- ONNX Runtime ----------------------------------------------------------------------
    def ort(self, iterations, warmup, output_dir=None):
        spec = {"model": self.path, "threads": self.args.threads, "warmup": warmup,
                "iterations": iterations, "output_dir": output_dir,
                "inputs": [{"name": n, "shape": list(self.inputs[n].shape), "file": raw}
                           for n, (_, raw) in self.input_files.items()]}
        spec_path = os.path.join(self.work, "ort_spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        env = dict(os.environ, NODE_PATH=os.path.join(self.args.node_dir, "node_modules"))
        out = subprocess.run(["node", os.path.join(HERE, "ort_runner.cjs"), spec_path],
                             capture_output=True, text=True, env=env,
                             cwd=self.args.node_dir)
        if out.returncode != 0:
            raise RuntimeError(f"ONNX Runtime runner failed: {out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])["times_ms"]

    def ort_time(self):
        times = self.ort(self.args.iterations, self.args.warmup)
        return statistics.median(times), percentile(times, 99)

    def ort_outputs(self):
        out_dir = os.path.join(self.work, "ort_out")
        os.makedirs(out_dir, exist_ok=True)
        self.ort(1, 0, out_dir)
        with open(os.path.join(out_dir, "output.json")) as f:
            dims = json.load(f)
        return self.np.fromfile(os.path.join(out_dir, "output.bin"), "<f4").reshape(dims)

    # --- PyTorch ---------------------------------------------------------------------------
    def _torch_args(self):
        import torch
        return tuple(torch.from_numpy(a) for a in self.inputs.values())

    def _time_torch(self, fn):
        import torch
        args = self._torch_args()
        with torch.no_grad():
            for _ in range(self.args.warmup):
                fn(*args)
            times = []
            for _ in range(self.args.iterations):
                t0 = time.perf_counter()
                fn(*args)
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times), percentile(times, 99)

    def torch_time(self):
        if self.torch_module is None:
            self.torch_module = make_models.build_module(self.model)
        return self._time_torch(self.torch_module)

    def torchscript_time(self):
        import torch
        if self.torchscript is None:
            if self.torch_module is None:
                self.torch_module = make_models.build_module(self.model)
            with torch.no_grad():
                self.torchscript = torch.jit.freeze(
                    torch.jit.trace(self.torch_module, self._torch_args()))
        return self._time_torch(self.torchscript)

    def torch_outputs(self):
        import torch
        if self.torch_module is None:
            self.torch_module = make_models.build_module(self.model)
        with torch.no_grad():
            return self.torch_module(*self._torch_args()).numpy()


def measure_peak(args, engines):
    """FP32 GEMM GFLOP/s of kiln and ONNX Runtime on one 2048^3 MatMul; the best is the peak."""
    n = make_models.GEMM
    flop = 2.0 * n * n * n
    work = tempfile.mkdtemp(prefix="kiln-compare-peak-")
    try:
        r = Runner(args, "gemm", n, work)
        timers = {"kiln": r.kiln_time, "ort": r.ort_time}
        best = {}
        for _ in range(max(1, args.rounds)):
            for e in [e for e in engines if e in timers]:
                med, _ = timers[e]()
                best[e] = max(best.get(e, 0.0), flop / (med / 1000.0) / 1e9)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"gflop_per_s": max(best.values()), "by_engine": best, "m": n, "k": n, "n": n}


def ensure_node(node_dir, package="onnxruntime-node"):
    """The npm peers in node_dir (onnxruntime-node, node-llama-cpp): `scripts/install-deps bench`
    installs them there, at their pinned versions, when `package` is missing."""
    if os.path.isdir(os.path.join(node_dir, "node_modules", package)):
        return
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "scripts", "install-deps")
    print(f"compare: {package} is not in {node_dir}; running scripts/install-deps bench",
          file=sys.stderr, flush=True)
    subprocess.run([script, "bench"], check=True,
                   env=dict(os.environ, KILN_BENCH_NODE_DIR=os.path.abspath(node_dir)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True, help="the kiln executable")
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base,bert_tiny,mlp")
    ap.add_argument("--batches", default="auto",
                    help="comma-separated batch sizes, or auto: 1,8,32 for CNNs, else 1,8")
    ap.add_argument("--no-peak", action="store_true", help="skip the FP32 GEMM peak measurement")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help=f"subset of {','.join(ENGINES)} (kiln is always run)")
    ap.add_argument("--models-dir", default="build/bench-models")
    ap.add_argument("--node-dir", default="build/bench-node")
    ap.add_argument("--out", default=None, help="JSON results file (default "
                    "bench/results/<date>-<commit>-engine.json)")
    args = ap.parse_args()
    args.kiln = os.path.abspath(args.kiln)
    args.models_dir = os.path.abspath(args.models_dir)
    args.node_dir = os.path.abspath(args.node_dir)
    sys.path.insert(0, HERE)
    from make_models import MODELS  # noqa: E402 (the generator's list is the only one)
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(MODELS)})")
    unknown = [e for e in args.engines.split(",") if e not in ENGINES]
    if unknown:
        ap.error(f"unknown engine(s) {', '.join(unknown)} (known: {', '.join(ENGINES)})")
    engines = ["kiln"] + [e for e in args.engines.split(",") if e != "kiln"]
    if "ort" in engines:
        ensure_node(args.node_dir)
    import torch
    torch.set_num_threads(args.threads)
    models = args.models.split(",")
    subprocess.run([sys.executable, os.path.join(HERE, "make_models.py"), "--out",
                    args.models_dir, "--models", ",".join(models + ([] if args.no_peak else
                                                                     ["gemm"]))], check=True)

    peak = None
    if not args.no_peak:
        peak = measure_peak(args, engines)
        print(f"compare: FP32 GEMM peak {peak['gflop_per_s']:.1f} GFLOP/s (" +
              ", ".join(f"{e} {v:.1f}" for e, v in peak["by_engine"].items()) + ")",
              file=sys.stderr, flush=True)

    def batches_of(model):
        if args.batches != "auto":
            return [int(b) for b in args.batches.split(",")]
        return [1, 8, 32] if model in ("resnet50", "mobilenet_v2") else [1, 8]

    results = []
    for model in models:
        for batch in batches_of(model):
            work = tempfile.mkdtemp(prefix=f"kiln-compare-{model}-{batch}-")
            try:
                r = Runner(args, model, batch, work)
                row = {"model": model, "batch": batch, "threads": args.threads}
                # Agreement, against ONNX Runtime (or PyTorch without it).
                ref_name = "ort" if "ort" in engines else "torch"
                ref = r.ort_outputs() if ref_name == "ort" else r.torch_outputs()
                row["reference"] = ref_name
                for name, fn in (("kiln", r.kiln_outputs), ("torch", r.torch_outputs)):
                    if name != "kiln" and name not in engines:
                        continue
                    got = fn()
                    err = float(abs(got.astype("f8") - ref.astype("f8")).max()) \
                        if got.shape == ref.shape else float("inf")
                    row[f"{name}_max_abs_err"] = err
                    row[f"{name}_max_ref"] = float(abs(ref).max())
                # Timing, interleaved.
                per = {e: [] for e in engines}
                timers = {"kiln": r.kiln_time, "ort": r.ort_time, "torch": r.torch_time,
                          "torchscript": r.torchscript_time}
                for rnd in range(args.rounds):
                    order = engines[rnd % len(engines):] + engines[:rnd % len(engines)]
                    for e in order:
                        per[e].append(timers[e]())
                    print(f"compare: {model} batch {batch} round {rnd + 1}/{args.rounds}: " +
                          ", ".join(f"{e} {per[e][-1][0]:.2f} ms" for e in engines),
                          file=sys.stderr, flush=True)
                row.update(r.kiln_facts)
                if peak is not None and row.get("kiln_gflop_per_run"):
                    med = statistics.median(m for m, _ in per["kiln"])
                    row["kiln_gflop_per_s"] = row["kiln_gflop_per_run"] / (med / 1000.0)
                    row["kiln_of_peak"] = row["kiln_gflop_per_s"] / peak["gflop_per_s"]
                for e in engines:
                    med = statistics.median(m for m, _ in per[e])
                    row[f"{e}_median_ms"] = med
                    row[f"{e}_p99_ms"] = statistics.median(p for _, p in per[e])
                    row[f"{e}_items_per_s"] = batch * 1000.0 / med
                    if e != "kiln":
                        row[f"{e}_over_kiln"] = med / row["kiln_median_ms"]
                results.append(row)
            finally:
                shutil.rmtree(work, ignore_errors=True)

    print()
    head = ["model", "batch", "kiln ms"] + [f"{e} ms" for e in engines[1:]] + \
        ["kiln items/s"] + [f"{e}/kiln" for e in engines[1:]] + \
        ["kiln GFLOP/s", "of peak", "memory planned/unplanned", "kiln max err"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in results:
        cells = [row["model"], str(row["batch"]), f"{row['kiln_median_ms']:.2f}"]
        cells += [f"{row[f'{e}_median_ms']:.2f}" for e in engines[1:]]
        cells += [f"{row['kiln_items_per_s']:.1f}"]
        cells += [f"{row[f'{e}_over_kiln']:.2f}x" for e in engines[1:]]
        cells += [f"{row['kiln_gflop_per_s']:.1f}" if "kiln_gflop_per_s" in row else "-",
                  f"{100 * row['kiln_of_peak']:.0f}%" if "kiln_of_peak" in row else "-",
                  f"{100 * row['kiln_memory_planned_ratio']:.0f}%"
                  if "kiln_memory_planned_ratio" in row else "-"]
        err = row["kiln_max_abs_err"]
        flag = "" if err <= 1e-3 * max(1.0, row["kiln_max_ref"]) else " (!)"
        cells += [f"{err:.2e}{flag}"]
        print("| " + " | ".join(cells) + " |")
    print("\nratios: peer median latency / kiln median latency (above 1: kiln is faster)")
    if peak is not None:
        print(f"peak: FP32 GEMM {peak['gflop_per_s']:.1f} GFLOP/s on this machine at "
              f"{args.threads} threads (the faster of " +
              ", ".join(f"{e} {v:.1f}" for e, v in peak["by_engine"].items()) + ")")

    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "commit": git_commit(), "cpu": cpu_model(), "threads": args.threads,
           "command": " ".join(sys.argv), "rounds": args.rounds,
           "iterations": args.iterations, "peak": peak, "results": results}
    out = args.out or os.path.join(
        HERE, "..", "results",
        f"{datetime.date.today().isoformat()}-{doc['commit']}-engine.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"results: {os.path.abspath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
