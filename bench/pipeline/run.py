#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The image pipeline's overlap: an ensemble of stages against the same work as one sequential
function per request, served by kiln on the same threads, driven by kiln bench at one
concurrency.

  bench/pipeline/run.py --kiln build/kiln [--classifier mlp|digits] [--size 256]
                        [--pre-batch 8] [--pre-instances 2]
                        [--concurrency 16] [--seconds 4] [--rounds 3]

  pipeline    an ensemble IMAGE -> pre (kiln_image) -> clf -> top (kiln_classify) -> CLASSES;
              every stage a model with its own dynamic batching (500 us delay), so one batch
              decodes while another classifies and the classifier runs batches of requests:
              pre up to --pre-batch images on --pre-instances instances (decoding gains
              nothing from batching, so small batches keep images flowing), clf and top up to
              16 on one instance each
  sequential  one graph doing the same per request (ai.kiln ImagePreprocess, the classifier's
              nodes, ai.kiln TopKClassify), no batching, 2 instances (one per core here): each
              request decoded, classified and ranked in turn by one instance
Classifiers:
  mlp     a 1000-class classifier on 32x32 RGB crops: the upload (a SIZE x SIZE JPEG) resized
          to 36 on its shorter side, center-cropped to 32x32, normalized with ImageNet's
          mean / std, then Flatten -> Gemm 3072x2048 -> Relu -> Gemm 2048x1000 -> Softmax
          (random weights, 33 MB), top 5. Its weights are read once per batch, so batching the
          classifier pays, as it does for real classifiers' large layers.
  digits  the demo's digits MLP on 8x8 gray (64 -> 64 -> 10, 19 KB), top 3: stages of a few
          microseconds, where the ensemble's own overhead dominates.
The rounds interleave the two; the ratio is of the median throughputs (issue target: >= 1.5x).
Both answers are checked to be the same classes before timing. Writes
bench/results/<date>-<commit>-pipeline-<classifier>.{md,json}.
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
import urllib.error
import urllib.request

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


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def classifier_nodes(kind, demo, x):
    """The classifier's nodes, initializers and class count, reading x ([N, C, H, W])."""
    if kind == "digits":
        mlp = onnx.load(os.path.join(demo, "digits", "1", "model.onnx"))
        init = list(mlp.graph.initializer)
        nodes = [helper.make_node("Reshape", [x, "flat_shape"], [mlp.graph.input[0].name])]
        init.append(numpy_helper.from_array(np.array([-1, 64], np.int64), "flat_shape"))
        nodes += list(mlp.graph.node)
        return nodes, init, mlp.graph.output[0].name, 10
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((3072, 2048)) / np.sqrt(3072)).astype(np.float32)
    w2 = (rng.standard_normal((2048, 1000)) / np.sqrt(2048)).astype(np.float32)
    init = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(np.zeros(2048, np.float32), "b1"),
            numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(np.zeros(1000, np.float32), "b2")]
    nodes = [helper.make_node("Flatten", [x], ["flat"], axis=1),
             helper.make_node("Gemm", ["flat", "w1", "b1"], ["h"]),
             helper.make_node("Relu", ["h"], ["hr"]),
             helper.make_node("Gemm", ["hr", "w2", "b2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1)]
    return nodes, init, "probabilities", 1000


def make_repo(repo, demo, kind, pre_instances, pre_batch):
    digits = kind == "digits"
    k = 3 if digits else 5
    pre = ('parameters { key: "color" value { string_value: "GRAY" } }\n'
           'parameters { key: "resize" value { string_value: "8,8" } }\n'
           'parameters { key: "filter" value { string_value: "area" } }\n' if digits else
           'parameters { key: "resize" value { string_value: "36" } }\n'
           'parameters { key: "crop" value { string_value: "32,32" } }\n'
           'parameters { key: "mean" value { string_value: "0.485,0.456,0.406" } }\n'
           'parameters { key: "std" value { string_value: "0.229,0.224,0.225" } }\n')
    chw = [1, 8, 8] if digits else [3, 32, 32]
    batching = "dynamic_batching { max_queue_delay_microseconds: 500 }\n"
    write(os.path.join(repo, "pre", "config.pbtxt"),
          f'backend: "kiln_image"\nmax_batch_size: {pre_batch}\n{pre}'
          f'instance_group [ {{ kind: KIND_CPU count: {pre_instances} }} ]\n{batching}')
    os.makedirs(os.path.join(repo, "pre", "1"))
    # The classifier alone, batching.
    nodes, init, out, classes = classifier_nodes(kind, demo, "x")
    g = helper.make_graph(nodes, "clf",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"] + chw)],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", classes])],
                          init)
    os.makedirs(os.path.join(repo, "clf", "1"))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(repo, "clf", "1", "model.onnx"))
    write(os.path.join(repo, "clf", "config.pbtxt"),
          f'max_batch_size: 16\n'
          f'input [ {{ name: "x" data_type: TYPE_FP32 dims: {chw} }} ]\n'
          f'output [ {{ name: "{out}" data_type: TYPE_FP32 dims: [ {classes} ] }} ]\n'
          f'instance_group [ {{ kind: KIND_CPU count: 1 }} ]\n{batching}')
    write(os.path.join(repo, "top", "config.pbtxt"),
          f'backend: "kiln_classify"\nmax_batch_size: 16\n'
          f'input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ {classes} ] }} ]\n'
          f'output [ {{ name: "CLASSES" data_type: TYPE_STRING dims: [ {k} ] }} ]\n'
          f'parameters {{ key: "k" value {{ string_value: "{k}" }} }}\n'
          f'instance_group [ {{ kind: KIND_CPU count: 1 }} ]\n{batching}')
    os.makedirs(os.path.join(repo, "top", "1"))
    write(os.path.join(repo, "pipeline", "config.pbtxt"), f'''platform: "ensemble"
max_batch_size: {min(16, pre_batch)}
input [ {{ name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "CLASSES" data_type: TYPE_STRING dims: [ {k} ] }} ]
ensemble_scheduling {{ step [
  {{ model_name: "pre" model_version: -1
    input_map {{ key: "IMAGE" value: "IMAGE" }} output_map {{ key: "OUTPUT" value: "pixels" }} }},
  {{ model_name: "clf" model_version: -1
    input_map {{ key: "x" value: "pixels" }} output_map {{ key: "{out}" value: "scores" }} }},
  {{ model_name: "top" model_version: -1
    input_map {{ key: "INPUT" value: "scores" }} output_map {{ key: "CLASSES" value: "CLASSES" }} }}
] }}
''')
    os.makedirs(os.path.join(repo, "pipeline", "1"))
    # The sequential model: the same steps in one graph, no batching.
    pre_attrs = (dict(color="GRAY", resize=[8, 8], filter="area") if digits else
                 dict(color="RGB", resize=[36], crop=[32, 32], filter="bilinear",
                      mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]))
    nodes, init, out, classes = classifier_nodes(kind, demo, "image")
    nodes = ([helper.make_node("ImagePreprocess", ["IMAGE"], ["image"], domain="ai.kiln",
                               **pre_attrs)] + nodes +
             [helper.make_node("TopKClassify", [out], ["CLASSES", "top_scores", "top_indices"],
                               domain="ai.kiln", k=k)])
    graph = helper.make_graph(
        nodes, "sequential",
        [helper.make_tensor_value_info("IMAGE", TensorProto.STRING, [1])],
        [helper.make_tensor_value_info("CLASSES", TensorProto.STRING, [1, k])], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("ai.kiln", 1)])
    os.makedirs(os.path.join(repo, "sequential", "1"))
    onnx.save(model, os.path.join(repo, "sequential", "1", "model.onnx"))
    write(os.path.join(repo, "sequential", "config.pbtxt"),
          'max_batch_size: 0\n'
          'input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
          f'output [ {{ name: "CLASSES" data_type: TYPE_STRING dims: [ 1, {k} ] }} ]\n'
          'instance_group [ { kind: KIND_CPU count: 2 } ]\n')


def make_input(path, size, kind):
    digit = Image.open(os.path.join(ROOT, "tools", "demo", "digit_images", "digit_0.png"))
    big = digit.convert("RGB").resize((size, size), Image.BILINEAR)
    tmp = path + (".png" if kind == "digits" else ".jpg")
    big.save(tmp, **({} if kind == "digits" else {"quality": 90}))
    data = open(tmp, "rb").read()
    raw = struct.pack("<I", len(data)) + data
    with open(path, "w") as f:
        json.dump({"data": [{"IMAGE": {"b64": base64.b64encode(raw).decode()}}]}, f)
    return data


def answer(port, model, image):
    """The CLASSES a model answers for the image (sent with the binary tensor extension)."""
    shape = [1] if model == "sequential" else [1, 1]  # the sequential model does not batch
    header = json.dumps({"inputs": [{"name": "IMAGE", "datatype": "BYTES", "shape": shape,
                                     "parameters": {"binary_data_size": len(image) + 4}}],
                         "outputs": [{"name": "CLASSES", "parameters": {"binary_data": False}}]})
    payload = header.encode() + struct.pack("<I", len(image)) + image
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{model}/infer",
                                 data=payload, headers={
                                     "Inference-Header-Content-Length": str(len(header)),
                                     "Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            out = json.load(r)["outputs"][0]
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{model}: {e.code} {e.read().decode(errors='replace')}")
    return [str(v) for v in out["data"]]


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


def step_report(port):
    """Per step of the pipeline: requests, mean queue and compute per request, and the mean batch
    size its model ran (from the statistics extension)."""
    def stats(model):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/{model}/stats") as r:
            return json.load(r)["model_stats"][0]
    lines = ["| step | model | requests | queue us / request | compute us / request | "
             "mean batch |", "|---|---|---:|---:|---:|---:|"]
    for st in stats("pipeline").get("ensemble_steps", []):
        n = st["success"]["count"] or 1
        compute = sum(st[k]["ns"] for k in ("compute_input", "compute_infer", "compute_output"))
        m = stats(st["model"])
        batch = m["inference_count"] / max(1, m["execution_count"])
        lines.append(f"| {st['step']} | {st['model']} | {st['success']['count']} | "
                     f"{st['queue']['ns'] / n / 1e3:.0f} | {compute / n / 1e3:.0f} | {batch:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--demo", default=os.path.join(ROOT, "build", "demo_models"))
    ap.add_argument("--classifier", choices=("mlp", "digits"), default="mlp")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--pre-instances", type=int, default=2)
    ap.add_argument("--pre-batch", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-pipeline-")
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    make_repo(repo, args.demo, args.classifier, args.pre_instances, args.pre_batch)
    data = os.path.join(work, "image.json")
    image = make_input(data, args.size, args.classifier)
    http, grpc, metrics = free_port(), free_port(), free_port()
    server = subprocess.Popen([args.kiln, "serve", "--model-repository", repo, "--http-port",
                               str(http), "--grpc-port", str(grpc), "--metrics-port",
                               str(metrics)], stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(work, "serve.log"), "w"))
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
        answers = {m: answer(http, m, image) for m in ("pipeline", "sequential")}
        print(f"answers: {answers}", file=sys.stderr)
        if len(set(map(tuple, answers.values()))) != 1:
            raise SystemExit(f"the two models answer differently: {answers}")
        for r in range(args.rounds):
            for name, model in (("pipeline", "pipeline"), ("sequential", "sequential")):
                tput, p50 = bench(args.kiln, http, model, data, args.concurrency, args.seconds)
                results[name].append({"throughput": tput, "p50_us": p50})
                print(f"round {r}: {name} {tput:.1f} infer/s (p50 {p50} us)", file=sys.stderr)
        steps = step_report(http)
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
    kind = "PNG" if args.classifier == "digits" else "JPEG"
    text = (f"# image pipeline overlap, {args.classifier} classifier ({day}, {commit}, {cpu}, "
            f"{os.cpu_count()} CPUs)\n\n"
            f"`{cmd}`: a {args.size}x{args.size} {kind} ({len(image)} bytes), concurrency "
            f"{args.concurrency}, {args.rounds} interleaved rounds, medians; answer "
            f"{answers['pipeline']}.\n\n"
            "| serving | infer/s (rounds) | median |\n|---|---|---:|\n")
    for k in ("pipeline", "sequential"):
        rounds = ", ".join(f"{x['throughput']:.1f}" for x in results[k])
        text += f"| {k} | {rounds} | {med[k]:.1f} |\n"
    text += f"\npipeline / sequential: **{ratio:.2f}x** (target >= 1.5x)\n"
    text += ("\nThe pipeline's steps over all rounds (compute is charged in full to every request "
             "of a batch):\n\n" + steps)
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"{day}-{commit}-pipeline-{args.classifier}")
    with open(base + ".md", "w") as f:
        f.write(text)
    with open(base + ".json", "w") as f:
        json.dump({"commit": commit, "cpu": cpu, "command": cmd, "rounds": results,
                   "median": med, "ratio": ratio}, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
