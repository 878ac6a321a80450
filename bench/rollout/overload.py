#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Precision by service class at 2x overload (docs/rollouts.md): throughput and p99 of a
guaranteed and a best-effort client sharing one model, with best-effort requests moved to the
model's INT8 variant under overload ("with") and without ("without"), in the same server, runs
interleaved.

  bench/rollout/overload.py --kiln build/kiln [--overload 2] [--guaranteed-share 0.25]
                            [--seconds 5] [--rounds 3] [--threshold-us 3000]

The model: a small CNN (3 x Conv 3x3 with 64 channels on 28x28, global pool, Gemm; random
weights), INT8 variant calibrated at load on random inputs; max_batch_size 8, 500 us batching
delay, at most 32 queued requests (beyond that 429: the bench counts them as errors).
Both models have the INT8 variant loaded; "without" has overload_queue_us 0 (best-effort
requests stay on FP32), "with" has --threshold-us.

Capacity C is the FP32 model's closed-loop throughput at concurrency 8 (guaranteed requests).
Each run then offers --overload x C requests/s open loop (Poisson arrivals) from two kiln bench
processes at once: the guaranteed client (--guaranteed-share of the rate, no parameter) and the
best-effort client (the rest, "service_class": "best_effort"). Reported per client: answered
infer/s, p99 of the answered requests, and the requests refused (429). Medians over rounds.
Writes bench/results/<date>-<commit>-rollout-overload.{md,json}.
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "llm"))
import stamp  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def conv_model(channels=64, size=28, seed=0):
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    prev, cin = "image", 16
    for i in range(3):
        w = (rng.standard_normal((channels, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9)))
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array((0.01 * rng.standard_normal(channels))
                                          .astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev, cin = f"r{i}", channels
    inits += [numpy_helper.from_array((rng.standard_normal((channels, 10)) * 0.3)
                                      .astype(np.float32), "wf"),
              numpy_helper.from_array(np.zeros(10, np.float32), "bf")]
    nodes += [helper.make_node("GlobalAveragePool", [prev], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"]),
              helper.make_node("Gemm", ["flat", "wf", "bf"], ["logits"])]
    graph = helper.make_graph(
        nodes, "convnet",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 16, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def make_repo(repo, threshold_us):
    for name, overload_us in (("without", 0), ("with", threshold_us)):
        d = os.path.join(repo, name)
        os.makedirs(os.path.join(d, "1"))
        os.makedirs(os.path.join(d, "calib"))
        onnx.save(conv_model(), os.path.join(d, "1", "model.onnx"))
        np.save(os.path.join(d, "calib", "inputs.npy"),
                np.random.default_rng(1).random((32, 16, 28, 28), dtype=np.float32))
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write(f'name: "{name}"\nmax_batch_size: 8\n'
                    'dynamic_batching { max_queue_delay_microseconds: 500 '
                    'default_queue_policy { max_queue_size: 32 } }\n'
                    'optimization { calibration_dir: "calib" }\n'
                    f'rollout {{ precision_variants: "int8" best_effort_precision: "int8" '
                    f'overload_queue_us: {overload_us} }}\n' if overload_us else
                    f'name: "{name}"\nmax_batch_size: 8\n'
                    'dynamic_batching { max_queue_delay_microseconds: 500 '
                    'default_queue_policy { max_queue_size: 32 } }\n'
                    'optimization { calibration_dir: "calib" }\n'
                    'rollout { precision_variants: "int8" }\n')


def bench_cmd(kiln, port, model, out, seconds, level, extra):
    return [kiln, "bench", "-m", model, "-u", f"127.0.0.1:{port}", "-p", str(seconds * 1000),
            "--warmup-interval", "1000", "-r", "3", "--json", out, "-q"] + level + extra


def point(path):
    with open(path) as f:
        p = json.load(f)["points"][-1]
    return {"throughput": p["throughput"], "p99_us": p["p99_us"], "p50_us": p["p50_us"],
            "errors": p.get("errors", 0), "offered": p.get("request_rate")}


def capacity(kiln, port, work, seconds):
    out = os.path.join(work, "capacity.json")
    r = subprocess.run(bench_cmd(kiln, port, "without", out, seconds,
                                 ["--concurrency-range", "8"], []),
                       capture_output=True, text=True, timeout=seconds * 10 + 60)
    if r.returncode != 0:
        raise SystemExit(f"kiln bench: {r.stderr[-500:]}")
    return point(out)["throughput"]


def overload_run(kiln, port, work, model, rate_g, rate_b, seconds):
    outs = {c: os.path.join(work, f"{model}-{c}.json") for c in ("guaranteed", "best_effort")}
    procs = {}
    for client, rate, extra in (
            ("guaranteed", rate_g, []),
            ("best_effort", rate_b, ["--request-parameter", "service_class:best_effort:string"])):
        procs[client] = subprocess.Popen(
            bench_cmd(kiln, port, model, outs[client], seconds,
                      ["--request-rate-range", f"{rate:.0f}", "--request-distribution",
                       "poisson"], extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    result = {}
    for client, p in procs.items():
        _, err = p.communicate(timeout=seconds * 10 + 120)
        if p.returncode != 0:
            raise SystemExit(f"kiln bench ({model}, {client}): {err[-500:]}")
        result[client] = point(outs[client])
    return result


def moves(metrics_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith('kiln_precision_overload_moves_total{model="with",version="1",'
                           'precision="int8"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--overload", type=float, default=2.0)
    ap.add_argument("--guaranteed-share", type=float, default=0.25)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threshold-us", type=int, default=3000)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-overload-")
    repo = os.path.join(work, "repo")
    make_repo(repo, args.threshold_us)
    http, grpc, metrics = free_port(), free_port(), free_port()
    log = open(os.path.join(work, "serve.log"), "w+")
    server = subprocess.Popen([args.kiln, "serve", "--model-repository", repo, "--http-port",
                               str(http), "--grpc-port", str(grpc), "--metrics-port",
                               str(metrics)], stdout=log, stderr=subprocess.STDOUT)
    runs = {"without": [], "with": []}
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready") as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.3)
        else:
            log.seek(0)
            raise SystemExit(f"kiln serve did not become ready: {log.read()[-2000:]}")
        cap = statistics.median(capacity(args.kiln, http, work, args.seconds) for _ in range(2))
        total = args.overload * cap
        rate_g = total * args.guaranteed_share
        rate_b = total - rate_g
        print(f"capacity (FP32, concurrency 8): {cap:.0f} infer/s; offering {total:.0f}/s "
              f"({rate_g:.0f} guaranteed + {rate_b:.0f} best-effort)", file=sys.stderr)
        for r in range(args.rounds):
            for model in ("without", "with"):
                res = overload_run(args.kiln, http, work, model, rate_g, rate_b, args.seconds)
                runs[model].append(res)
                print(f"round {r} {model}: " + "; ".join(
                    f"{c} {v['throughput']:.0f}/s p99 {v['p99_us'] / 1000:.1f} ms "
                    f"({v['errors']} refused)" for c, v in res.items()), file=sys.stderr)
        moved = moves(metrics)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.seek(0)
        chosen = [line for line in log.read().splitlines() if "best-effort" in line]
        log.close()
        shutil.rmtree(work, ignore_errors=True)

    def med(model, client, key):
        return statistics.median(run[client][key] for run in runs[model])

    def total_tput(model):
        return statistics.median(sum(run[c]["throughput"] for c in run) for run in runs[model])

    commit, cpu = stamp.commit(), stamp.cpu_name()
    day = datetime.date.today().isoformat()
    cmd = " ".join(["bench/rollout/overload.py"] + sys.argv[1:])
    text = (f"# precision by service class at {args.overload:g}x overload ({day}, {commit}, "
            f"{cpu}, {os.cpu_count()} CPUs)\n\n"
            f"`{cmd}`: capacity {cap:.0f} infer/s (FP32, closed loop at concurrency 8); offered "
            f"{total:.0f}/s open loop, {rate_g:.0f}/s guaranteed + {rate_b:.0f}/s best-effort; "
            f"{args.rounds} interleaved rounds of {args.seconds} s windows, medians. "
            f"Overload threshold {args.threshold_us} us; best-effort requests moved to INT8 "
            f"over all rounds: {moved:.0f}.\n\n"
            "| serving | client | answered infer/s | p50 ms | p99 ms | refused (429) |\n"
            "|---|---|---:|---:|---:|---:|\n")
    for model in ("without", "with"):
        for client in ("guaranteed", "best_effort"):
            text += (f"| {model} | {client} | {med(model, client, 'throughput'):.0f} | "
                     f"{med(model, client, 'p50_us') / 1000:.1f} | "
                     f"{med(model, client, 'p99_us') / 1000:.1f} | "
                     f"{med(model, client, 'errors'):.0f} |\n")
        text += f"| {model} | total | {total_tput(model):.0f} | | | |\n"
    ratio = total_tput("with") / total_tput("without")
    p99_g = med("without", "guaranteed", "p99_us") / med("with", "guaranteed", "p99_us")
    text += (f"\nanswered throughput with / without: **{ratio:.2f}x**; guaranteed p99 without / "
             f"with: **{p99_g:.2f}x**\n")
    if chosen:
        text += "\nAt load: " + chosen[-1].split(" ", 3)[-1] + "\n"
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"{day}-{commit}-rollout-overload")
    with open(base + ".md", "w") as f:
        f.write(text)
    with open(base + ".json", "w") as f:
        json.dump({"commit": commit, "cpu": cpu, "command": cmd, "capacity": cap,
                   "offered": {"guaranteed": rate_g, "best_effort": rate_b}, "runs": runs,
                   "moved": moved, "throughput_ratio": ratio, "guaranteed_p99_ratio": p99_g},
                  f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
