#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Dynamic batching benchmark: requests/s and latency percentiles of `kiln serve` with dynamic
batching off and on, at several client concurrencies, on the demo models.

For every model and batching mode the script writes a one-model repository (the demo model's
ONNX file plus a config.pbtxt for that mode), starts `kiln serve` on it, drives it with `wrk`
(one connection per concurrent client, JSON inference requests, closed loop), and reads the
server's statistics endpoint to report the mean executed batch size. Ratios are printed against
the batching-off run of the same model and concurrency, measured in the same invocation.

Not a test: numbers depend on the machine; nothing here gates CI.

  bench/serve_batching.py --kiln build/kiln --models build/demo_models
  bench/serve_batching.py --kiln build/kiln --models build/demo_models --duration 5 \\
      --concurrency 1,8 --model add_sub --delays 0,500

Needs `wrk` (scripts/install-deps bench).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

MAX_BATCH = 32


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONFIG_TYPES = {1: "TYPE_FP32", 6: "TYPE_INT32", 7: "TYPE_INT64", 10: "TYPE_FP16",
                11: "TYPE_FP64", 9: "TYPE_BOOL", 2: "TYPE_UINT8", 3: "TYPE_INT8"}


def tensor_entries(values):
    """config.pbtxt entries for ONNX graph inputs/outputs whose first dim is the batch."""
    out = []
    for v in values:
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim[1:]]
        out.append(f'{{ name: "{v.name}" data_type: {CONFIG_TYPES[t.elem_type]} '
                   f'dims: [ {", ".join(str(d) for d in dims)} ] }}')
    return ", ".join(out)


def write_repo(root, models_dir, model, delay_us):
    """One-model repository; delay_us None = dynamic batching off. The config lists inputs and
    outputs in full, so auto-complete (which enables dynamic batching for a batching model
    without a scheduler) does not change the mode under test."""
    import onnx  # Debian's python3-onnx; only this bench needs it

    src = os.path.join(models_dir, model)
    dst = os.path.join(root, model)
    shutil.copytree(os.path.join(src, "1"), os.path.join(dst, "1"))
    graph = onnx.load(os.path.join(dst, "1", "model.onnx")).graph
    inits = {i.name for i in graph.initializer}
    lines = [f'name: "{model}"', 'platform: "onnxruntime_onnx"', f"max_batch_size: {MAX_BATCH}",
             f"input [ {tensor_entries(i for i in graph.input if i.name not in inits)} ]",
             f"output [ {tensor_entries(graph.output)} ]"]
    if delay_us is not None:
        lines.append(f"dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}")
    with open(os.path.join(dst, "config.pbtxt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def http_json(url, body=None, timeout=5):
    data = None if body is None else body.encode()
    req = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        text = r.read().decode()
        return json.loads(text) if text else None


def wait_ready(port, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kiln serve exited with {proc.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1)
            return
        except Exception:
            time.sleep(0.1)
    raise RuntimeError("kiln serve did not become ready")


def model_counts(port, model):
    try:
        stats = http_json(f"http://127.0.0.1:{port}/v2/models/{model}/stats")
        s = stats["model_stats"][0]
        return int(s["inference_count"]), int(s["execution_count"])
    except Exception:
        return None


def parse_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s)", text)
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


def run_wrk(url, body_file, concurrency, duration):
    script = body_file + ".lua"
    with open(script, "w") as f:
        f.write('local f = io.open("%s", "rb")\n' % body_file)
        f.write("wrk.method = \"POST\"\nwrk.body = f:read(\"*a\")\nf:close()\n")
        f.write('wrk.headers["Content-Type"] = "application/json"\n')
        # Count non-200 answers so a failing server cannot look fast.
        f.write("local bad = 0\nfunction response(status, headers, body)\n"
                "  if status ~= 200 then bad = bad + 1 end\nend\n"
                "function done(summary, latency, requests)\n"
                "  io.write(string.format(\"non200 %d\\n\", bad))\nend\n")
    out = subprocess.run(["wrk", "-t1", f"-c{concurrency}", f"-d{duration}s", "--latency",
                          "-s", script, url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    pct = {p: parse_ms(v) for p, v in re.findall(r"^\s+(50|99)%\s+(\S+)", out, re.M)}
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, pct.get("50"), pct.get("99"), int(errors.group(1)) if errors else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default="build/kiln", help="kiln binary (default build/kiln)")
    ap.add_argument("--models", default="build/demo_models", help="demo model repository")
    ap.add_argument("--model", action="append", help="model to run (repeatable; default add_sub "
                    "and digits)")
    ap.add_argument("--concurrency", default="1,8,32", help="client concurrencies (default 1,8,32)")
    ap.add_argument("--delays", default="0,500",
                    help="max_queue_delay_microseconds values to test with batching on")
    ap.add_argument("--duration", type=int, default=10, help="seconds per point (default 10)")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("serve_batching: wrk not found (scripts/install-deps bench)")
    models = args.model or ["add_sub", "digits"]
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    modes = [("off", None)] + [(f"on, delay {d} us", int(d)) for d in args.delays.split(",")]

    print(f"{'model':8} {'batching':18} {'conc':>4} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'batch':>6} {'x off':>6}")
    for model in models:
        body = os.path.join(args.models, model, "sample_request.json")
        baseline = {}
        for label, delay in modes:
            with tempfile.TemporaryDirectory(prefix="kiln-bench-") as root:
                write_repo(root, args.models, model, delay)
                port = free_port()
                log = open(os.path.join(root, "serve.log"), "w")
                proc = subprocess.Popen([args.kiln, "serve", "--model-repository", root,
                                         "--http-port", str(port), "--grpc-port", "0",
                                         "--metrics-port", "0"],
                                        stdout=log, stderr=log)
                try:
                    wait_ready(port, proc)
                    url = f"http://127.0.0.1:{port}/v2/models/{model}/infer"
                    body_copy = os.path.join(root, "body.json")
                    shutil.copy(body, body_copy)
                    for c in concurrencies:
                        before = model_counts(port, model)
                        rps, p50, p99, bad = run_wrk(url, body_copy, c, args.duration)
                        after = model_counts(port, model)
                        batch = "n/a"
                        if before and after and after[1] > before[1]:
                            batch = f"{(after[0] - before[0]) / (after[1] - before[1]):.2f}"
                        if delay is None:
                            baseline[c] = rps
                        ratio = rps / baseline[c] if baseline.get(c) else float("nan")
                        note = f"  ({bad} non-200)" if bad else ""
                        print(f"{model:8} {label:18} {c:4d} {rps:9.0f} {p50:8.2f} {p99:8.2f} "
                              f"{batch:>6} {ratio:6.2f}{note}", flush=True)
                finally:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(timeout=40)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    log.close()


if __name__ == "__main__":
    main()
