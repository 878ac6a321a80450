#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Contention: how much slower kiln and ONNX Runtime get while other work shares the machine.

A server never has its cores to itself: its own HTTP and gRPC threads, other instances and
models, sidecars and other processes run beside the intra-op threads. This script measures each
engine's latency on a quiet machine and then while one competing load runs, and prints the
slowdown factor (contended median / quiet median) of both, side by side:

  quiet        nothing else runs
  busy         one plain busy loop (one core spinning, no synchronization)
  openmp       an OpenMP program (libgomp, as many threads as cores) running many short parallel
               regions back to back: frequently synchronizing threads, the pattern of llama.cpp's
               per-operation barriers and of other OpenMP inference processes (compiled from
               omp_barriers.c on first use with gcc -fopenmp)
  openblas     NumPy matrix products on OpenBLAS (Debian's libopenblas0-openmp: OpenMP threads)
  torch        PyTorch eager convolutions (its own OpenMP pool)
  kiln         a second kiln process running MobileNetV2 at the same thread count
  llamacpp     llama.cpp generating text, one token at a time, with as many threads as cores
               (per token a graph whose threads meet at a spinning barrier after every
               operation): the npm package node-llama-cpp's prebuilt CPU binary (llama_load.mjs)
               running a random-weight Llama model that make_gguf.py writes on first use
               (build/bench-models); its token rate is printed when it is stopped

Every engine gets --threads intra-op threads (default: the machine's cores). Within each load
the engines run alternately for --rounds rounds (rotating which goes first); a figure is the
median over rounds of the per-round median. The competing process starts, warms up for
--settle seconds, and is killed after its rounds.

  bench/contention/run.py --kiln build/kiln                            # every load, default models
  bench/contention/run.py --kiln build/kiln --loads quiet,openmp --models bert_tiny --rounds 5

Environment variables given to this script reach kiln (GOMP_SPINCOUNT, OMP_WAIT_POLICY,
KILN_THREAD_WAIT, ...), so a design can be compared against another by running the script
twice. Results: a table on stdout and JSON in bench/results/<date>-<commit>-contention.json.
Needs what bench/compare/compare.py needs (scripts/install-deps bench; onnxruntime-node in
build/bench-node, with node-llama-cpp for the llamacpp load: `scripts/install-deps bench` puts
them there, pinned; no download or build of llama.cpp itself: the prebuilt binary comes as an
npm package). Not a test: nothing here gates CI.
"""
import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "compare"))
import compare  # noqa: E402
import make_models  # noqa: E402

LOADS = ("quiet", "busy", "openmp", "openblas", "torch", "kiln", "llamacpp")

# The llamacpp load: node-llama-cpp and its prebuilt llama.cpp binary, which
# `scripts/install-deps bench` installs into the node folder (pinned there); it never fetches or
# compiles llama.cpp, and at run time no GPU is tried.
LLAMA_MODEL = "llama_random.gguf"
LLAMA_NODE_ENV = {"NODE_LLAMA_CPP_SKIP_DOWNLOAD": "true", "NODE_LLAMA_CPP_GPU": "false"}


def ensure_llama_model(models_dir):
    path = os.path.join(models_dir, LLAMA_MODEL)
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "make_gguf.py"), "--out", path],
                       check=True)
    return path


def competitor_command(load, args, work):
    threads = str(args.threads)
    py = "/usr/bin/python3"
    if load == "busy":
        return [py, "-c", "while True: pass"], {}
    if load == "openmp":
        exe = os.path.join(work, "omp_barriers")
        if not os.path.exists(exe):
            subprocess.run(["gcc", "-O2", "-fopenmp", os.path.join(HERE, "omp_barriers.c"),
                            "-o", exe], check=True)
        return [exe], {"OMP_NUM_THREADS": threads}
    if load == "openblas":
        code = ("import numpy as np\n"
                "a = np.random.rand(384, 384).astype(np.float32)\n"
                "while True: a = (a @ a) * 1e-3 + 1.0\n")
        return [py, "-c", code], {"OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
    if load == "torch":
        code = ("import torch\n"
                f"torch.set_num_threads({threads})\n"
                "x = torch.randn(1, 32, 56, 56); c = torch.nn.Conv2d(32, 32, 3, padding=1)\n"
                "with torch.no_grad():\n"
                "    while True: c(x)\n")
        return [py, "-c", code], {}
    if load == "kiln":
        model = os.path.join(args.models_dir, "mobilenet_v2.onnx")
        return [args.kiln, "profile", model, "--batch", "1", "--threads", threads,
                "--iterations", "100000000", "--warmup", "0", "--shape",
                "input:1,3,224,224"], {}
    if load == "llamacpp":
        model = ensure_llama_model(args.models_dir)
        return ["node", os.path.join(HERE, "llama_load.mjs"), "--model", model, "--threads",
                threads, "--node-dir", args.node_dir], LLAMA_NODE_ENV
    raise ValueError(load)


def competitor_log(p, lines=1):
    """The last lines the competing process wrote to stderr (its log in the work folder)."""
    with open(p.log_path, errors="replace") as f:
        return [l.rstrip() for l in f.readlines() if l.strip()][-lines:]


def start_competitor(load, args, work):
    if load == "quiet":
        return None
    cmd, env = competitor_command(load, args, work)
    log_path = os.path.join(work, f"{load}.log")
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, env=dict(os.environ, **env), stdout=subprocess.DEVNULL,
                             stderr=log, start_new_session=True)
    p.log_path = log_path
    time.sleep(args.settle)
    if p.poll() is not None:
        raise RuntimeError(f"competing load '{load}' exited early ({p.returncode}): " +
                           " / ".join(competitor_log(p, 5)))
    return p


def stop_competitor(p):
    """Kills the competing process group; prints the last line it logged (llamacpp's rate)."""
    if p is None:
        return
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    for line in competitor_log(p):
        print(f"contention: competitor's last report: {line}", file=sys.stderr, flush=True)


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", default="bert_tiny,mobilenet_v2")
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--settle", type=float, default=2.0,
                    help="seconds a competing load runs before the first measurement")
    ap.add_argument("--models-dir", default="build/bench-models")
    ap.add_argument("--node-dir", default="build/bench-node")
    ap.add_argument("--label", default="", help="a name for this configuration in the output")
    ap.add_argument("--vs-env", action="append", default=[], metavar="VAR=VALUE",
                    help="also run kiln with these environment variables (repeatable), "
                         "interleaved with the others: e.g. KILN_THREAD_WAIT=openmp to compare "
                         "kiln's thread-wait policy with OpenMP's default under every load")
    ap.add_argument("--out", default=None, help="JSON path (default: bench/results/...)")
    args = ap.parse_args()
    args.kiln, args.models_dir, args.node_dir = (os.path.abspath(p) for p in
                                                 (args.kiln, args.models_dir, args.node_dir))

    vs_env = dict(v.split("=", 1) for v in args.vs_env)
    vs_label = " ".join(args.vs_env)
    loads = [l for l in args.loads.split(",") if l]
    for l in loads:
        if l not in LOADS:
            ap.error(f"unknown load '{l}' (known: {', '.join(LOADS)})")
    models = [m for m in args.models.split(",") if m]
    needed = set(models) | ({"mobilenet_v2"} if "kiln" in loads else set())
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare", "make_models.py"),
                    "--out", args.models_dir, "--models", ",".join(sorted(needed))], check=True)
    compare.ensure_node(args.node_dir)
    if "llamacpp" in loads:
        compare.ensure_node(args.node_dir, "node-llama-cpp")
        ensure_llama_model(args.models_dir)

    results = []
    with tempfile.TemporaryDirectory(prefix="kiln-contention-") as work:
        runners = {}
        for m in models:
            mw = os.path.join(work, m)
            os.makedirs(mw, exist_ok=True)
            runners[m] = compare.Runner(args, m, 1, mw)
        # One untimed round of each engine first: the first processes of a run pay for cold
        # caches and page faults, which would inflate the quiet baseline of every slowdown.
        for m in models:
            runners[m].kiln_time()
            runners[m].ort_time()
        for load in loads:
            p = start_competitor(load, args, work)
            try:
                for m in models:
                    r = runners[m]
                    engines = ["kiln", "ort"] + (["kiln_vs"] if vs_env else [])
                    per = {e: [] for e in engines}
                    for rnd in range(args.rounds):
                        k = rnd % len(engines)
                        for e in engines[k:] + engines[:k]:
                            if e == "ort":
                                med, _ = r.ort_time()
                            elif e == "kiln":
                                med, _ = r.kiln_time()
                            else:
                                saved = dict(os.environ)
                                os.environ.update(vs_env)
                                try:
                                    med, _ = r.kiln_time()
                                finally:
                                    os.environ.clear()
                                    os.environ.update(saved)
                            per[e].append(med)
                    row = {"load": load, "model": m, "load_average": load_average()}
                    for e in engines:
                        row[f"{e}_ms"] = statistics.median(per[e])
                        row[f"{e}_rounds_ms"] = per[e]
                    results.append(row)
                    vs = f"   kiln ({vs_label}) {row['kiln_vs_ms']:9.3f} ms" if vs_env else ""
                    print(f"{load:9s} {m:14s} kiln {row['kiln_ms']:9.3f} ms   ORT "
                          f"{row['ort_ms']:9.3f} ms{vs}   (load average "
                          f"{row['load_average']:.1f})", flush=True)
            finally:
                stop_competitor(p)
            time.sleep(1.0)

    quiet = {r["model"]: r for r in results if r["load"] == "quiet"}
    print(f"\n{'load':9s} {'model':14s} {'kiln ms':>9s} {'ORT ms':>9s} {'kiln/ORT':>8s} "
          f"{'kiln slowdown':>13s} {'ORT slowdown':>12s}"
          + (f" {'vs ms':>9s} {'vs slowdown':>11s} {'kiln/vs':>7s}" if vs_env else ""))
    for r in results:
        q = quiet.get(r["model"])
        ks = r["kiln_ms"] / q["kiln_ms"] if q else float("nan")
        os_ = r["ort_ms"] / q["ort_ms"] if q else float("nan")
        r["kiln_slowdown"], r["ort_slowdown"] = ks, os_
        line = (f"{r['load']:9s} {r['model']:14s} {r['kiln_ms']:9.3f} {r['ort_ms']:9.3f} "
                f"{r['kiln_ms'] / r['ort_ms']:8.2f} {ks:12.2f}x {os_:11.2f}x")
        if vs_env:
            vss = r["kiln_vs_ms"] / q["kiln_vs_ms"] if q else float("nan")
            r["kiln_vs_slowdown"] = vss
            line += f" {r['kiln_vs_ms']:9.3f} {vss:10.2f}x {r['kiln_ms'] / r['kiln_vs_ms']:7.2f}"
        print(line)

    commit = compare.git_commit()
    env = {k: v for k, v in os.environ.items()
           if k.startswith(("GOMP_", "OMP_", "KILN_", "ONEDNN_"))}
    doc = {"date": datetime.date.today().isoformat(), "commit": commit,
           "cpu": compare.cpu_model(), "threads": args.threads, "label": args.label,
           "environment": env, "vs_env": vs_env, "rounds": args.rounds,
           "iterations": args.iterations,
           "results": results}
    out = args.out or os.path.join(
        ROOT, "bench", "results",
        f"{doc['date']}-{commit}-contention{'-' + args.label if args.label else ''}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
