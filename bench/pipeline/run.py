#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The image pipeline's overlap: an ensemble of stages against the same work as one sequential
function per request, served by kiln on the same threads, driven by kiln bench at one
concurrency.

  bench/pipeline/run.py --kiln build/kiln [--demo build/demo_models] [--size 160]
                        [--concurrency 16] [--seconds 4] [--rounds 3]

  pipeline    digits_pipeline: IMAGE -> digits_image (kiln_image: decode, gray, 8x8 by area)
              -> digits (the MLP); each stage a model with its own dynamic batching and one
              instance, so one batch decodes while another classifies (2 instances in all)
  sequential  digits_sequential: one graph doing the same (ai.kiln ImagePreprocess, Reshape, the
              MLP's Gemm / Relu / Gemm / Softmax), no batching, 2 instances: each request decoded
              and classified in turn by one instance
The upload is one held-out digit (tools/demo/digit_images) scaled to SIZE x SIZE, as a PNG. The
rounds interleave the two; the ratio is of the median throughputs (issue target: >= 1.5x).
Writes bench/results/<date>-<commit>-pipeline.{md,json}.
"""
import argparse
import base64
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "llm"))
import stamp  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_repo(repo, demo):
    shutil.copytree(os.path.join(demo, "digits"), os.path.join(repo, "digits"))
    for name in ("digits_image", "digits_pipeline"):
        shutil.copytree(os.path.join(demo, name), os.path.join(repo, name))
    # One instance per stage.
    for name in ("digits_image",):
        with open(os.path.join(repo, name, "config.pbtxt"), "a") as f:
            f.write("instance_group [ { kind: KIND_CPU count: 1 } ]\n"
                    "dynamic_batching { max_queue_delay_microseconds: 500 }\n")
    with open(os.path.join(repo, "digits", "config.pbtxt"), "w") as f:
        f.write('max_batch_size: 4\ninstance_group [ { kind: KIND_CPU count: 1 } ]\n'
                'dynamic_batching { max_queue_delay_microseconds: 500 }\n')
    # The sequential model: the same steps in one graph, no batching.
    mlp = onnx.load(os.path.join(demo, "digits", "1", "model.onnx"))
    init = {t.name: numpy_helper.to_array(t) for t in mlp.graph.initializer}
    nodes = [
        helper.make_node("ImagePreprocess", ["IMAGE"], ["image"], domain="ai.kiln",
                         color="GRAY", resize=[8, 8], filter="area"),
        helper.make_node("Reshape", ["image", "shape"], ["pixels"]),
    ] + list(mlp.graph.node)
    graph = helper.make_graph(
        nodes, "digits_sequential",
        [helper.make_tensor_value_info("IMAGE", TensorProto.STRING, [1])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v, k) for k, v in init.items()]
        + [numpy_helper.from_array(np.array([1, 64], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("ai.kiln", 1)])
    os.makedirs(os.path.join(repo, "digits_sequential", "1"))
    onnx.save(model, os.path.join(repo, "digits_sequential", "1", "model.onnx"))
    with open(os.path.join(repo, "digits_sequential", "config.pbtxt"), "w") as f:
        f.write('max_batch_size: 0\n'
                'input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
                'output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 1, 10 ] } ]\n'
                'instance_group [ { kind: KIND_CPU count: 2 } ]\n')


def make_input(path, size):
    digit = Image.open(os.path.join(ROOT, "tools", "demo", "digit_images", "digit_0.png"))
    big = digit.resize((size, size), Image.BILINEAR)
    tmp = path + ".png"
    big.save(tmp)
    data = open(tmp, "rb").read()
    raw = struct.pack("<I", len(data)) + data
    with open(path, "w") as f:
        json.dump({"data": [{"IMAGE": {"b64": base64.b64encode(raw).decode()}}]}, f)
    return len(data)


def bench(kiln, port, model, data, concurrency, seconds):
    out = tempfile.mktemp(suffix=".json")
    cmd = [kiln, "bench", "-m", model, "-u", f"127.0.0.1:{port}", "--input-data", data,
           "--concurrency-range", str(concurrency), "-p", str(seconds * 1000),
           "--warmup-interval", "1000", "-r", "4", "--json", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 10 + 60)
    if r.returncode != 0:
        raise RuntimeError(f"kiln bench {model}: {r.stderr.strip()[-500:]}")
    with open(out) as f:
        point = json.load(f)["points"][-1]
    os.unlink(out)
    return point["throughput"], point.get("p50_us")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--demo", default=os.path.join(ROOT, "build", "demo_models"))
    ap.add_argument("--size", type=int, default=160)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-pipeline-")
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    make_repo(repo, args.demo)
    data = os.path.join(work, "image.json")
    png_bytes = make_input(data, args.size)
    http, grpc, metrics = free_port(), free_port(), free_port()
    server = subprocess.Popen([args.kiln, "serve", "--model-repository", repo, "--http-port",
                               str(http), "--grpc-port", str(grpc), "--metrics-port",
                               str(metrics)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    results = {"pipeline": [], "sequential": []}
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", http), timeout=1) as s:
                    s.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
                    if b" 200 " in s.recv(256):
                        break
            except OSError:
                pass
            time.sleep(0.3)
        for r in range(args.rounds):
            for name, model in (("pipeline", "digits_pipeline"),
                                ("sequential", "digits_sequential")):
                tput, p50 = bench(args.kiln, http, model, data, args.concurrency, args.seconds)
                results[name].append({"throughput": tput, "p50_us": p50})
                print(f"round {r}: {name} {tput:.1f} infer/s (p50 {p50} us)", file=sys.stderr)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(x["throughput"] for x in v) for k, v in results.items()}
    ratio = med["pipeline"] / med["sequential"]
    commit, cpu = stamp.commit(), stamp.cpu_name()
    day = datetime.date.today().isoformat()
    cmd = " ".join(["bench/pipeline/run.py"] + sys.argv[1:])
    text = (f"# image pipeline overlap ({day}, {commit}, {cpu}, {os.cpu_count()} CPUs)\n\n"
            f"`{cmd}`: a {args.size}x{args.size} PNG ({png_bytes} bytes), concurrency "
            f"{args.concurrency}, {args.rounds} interleaved rounds, medians.\n\n"
            "| serving | infer/s (rounds) | median |\n|---|---|---:|\n")
    for k in ("pipeline", "sequential"):
        rounds = ", ".join(f"{x['throughput']:.1f}" for x in results[k])
        text += f"| {k} | {rounds} | {med[k]:.1f} |\n"
    text += f"\npipeline / sequential: **{ratio:.2f}x** (target >= 1.5x)\n"
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"{day}-{commit}-pipeline")
    with open(base + ".md", "w") as f:
        f.write(text)
    with open(base + ".json", "w") as f:
        json.dump({"commit": commit, "cpu": cpu, "command": cmd, "rounds": results,
                   "median": med, "ratio": ratio}, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
