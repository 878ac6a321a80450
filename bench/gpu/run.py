#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kiln on a GPU against PyTorch on the same machine, same precision (FP16), in one run.

  bench/gpu/run.py --kiln PATH --ceilings PATH [--out DIR] [--iterations 50] [--no-compile]

What it measures, in this order (ratios are kiln / PyTorch: above 1 means kiln is faster):
  ceilings   kiln_gpu_ceilings: device copy bandwidth and a BF16 cuBLASLt GEMM (the GPU's limits)
  latency    ResNet-50 at batch 1 and 32, BERT-base (seq 128) at batch 1 and 8, FP16 behind FP32
             inputs (bench/gpu/models.py): `kiln profile --device cuda:0` median against PyTorch
             eager (channels-last for ResNet-50) and, at ResNet-50 batch 32 and BERT batch 8,
             torch.compile. Both sides time the same work: the FP32 input copied from pinned host
             memory to the GPU, the network, the output copied back (CUDA events, medians).
  serving    ResNet-50 FP16 served by `kiln serve` (KIND_GPU, dynamic batching to 32) and driven
             by `kiln bench` over HTTP binary at concurrency 64 with 224x224 FP32 images: the
             throughput with 1 and with 2 streams per instance (kiln.gpu_streams), the overlap of
             copies and compute.
Targets (issue): >= 1.0x eager everywhere, >= 0.8x torch.compile at batch 32, overlap >= 1.3x.
Writes <out>/gpu-bench.json and <out>/gpu-bench.md and prints the table last.
"""
import argparse
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402

LATENCY = [("resnet50", 1), ("resnet50", 32), ("bert_base", 1), ("bert_base", 8)]
COMPILE_AT = {("resnet50", 32), ("bert_base", 8)}


def log(msg):
    print(f"[bench/gpu] {msg}", file=sys.stderr, flush=True)


def ceilings(path):
    try:
        out = subprocess.run([path], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-400:]}
    return json.loads(out.stdout)


def kiln_latency(kiln, model_path, batch, iterations):
    cmd = [kiln, "profile", model_path, "--device", "cuda:0", "--batch", str(batch),
           "--iterations", str(iterations), "--warmup", "10", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip()[-600:])
    return json.loads(out.stdout)["median_ms"]


def torch_latency(module, args, iterations, channels_last=False):
    """Median ms of: pinned host inputs -> GPU, module, output -> host."""
    import torch
    host = [a.pin_memory() for a in args]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once():
        dev = [h.cuda(non_blocking=True) for h in host]
        if channels_last:
            dev = [d.contiguous(memory_format=torch.channels_last) for d in dev]
        return module(*dev).cpu()

    with torch.no_grad():
        for _ in range(10):
            once()
        times = []
        for _ in range(iterations):
            start.record()
            once()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serving(kiln, model_path, streams, seconds):
    """Throughput (inferences/s) of kiln serve + kiln bench at concurrency 64."""
    repo = tempfile.mkdtemp(prefix="kiln-gpu-repo-")
    os.makedirs(os.path.join(repo, "resnet50", "1"))
    shutil.copy(model_path, os.path.join(repo, "resnet50", "1", "model.onnx"))
    with open(os.path.join(repo, "resnet50", "config.pbtxt"), "w") as f:
        f.write(f"""max_batch_size: 32
instance_group {{ kind: KIND_GPU count: 1 gpus: [ 0 ] }}
dynamic_batching {{ preferred_batch_size: [ 32 ] max_queue_delay_microseconds: 2000 }}
parameters {{ key: "kiln.gpu_streams" value: {{ string_value: "{streams}" }} }}
""")
    http, grpc, metrics = free_port(), free_port(), free_port()
    server = subprocess.Popen([kiln, "serve", "--model-repository", repo, "--http-port", str(http),
                               "--grpc-port", str(grpc), "--metrics-port", str(metrics)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        ready = False
        while time.time() < deadline and server.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", http), timeout=1) as s:
                    s.sendall(b"GET /v2/models/resnet50/ready HTTP/1.1\r\nHost: x\r\n\r\n")
                    if b" 200 " in s.recv(256):
                        ready = True
                        break
            except OSError:
                pass
            time.sleep(0.5)
        if not ready:
            err = server.stderr.read() if server.poll() is not None else "not ready in 120 s"
            raise RuntimeError(f"kiln serve: {err[-600:]}")
        report = os.path.join(repo, "bench.json")
        cmd = [kiln, "bench", "-m", "resnet50", "-u", f"127.0.0.1:{http}", "-b", "1",
               "--concurrency-range", "64", "-p", str(seconds * 1000), "--warmup-interval", "2000",
               "-r", "3", "--json", report, "-q"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 6 + 60)
        if out.returncode != 0:
            raise RuntimeError(f"kiln bench: {out.stderr.strip()[-600:]}")
        with open(report) as f:
            points = json.load(f)["points"]
        return points[-1]["throughput"]
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(repo, ignore_errors=True)


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--ceilings", required=True, help="kiln_gpu_ceilings binary")
    ap.add_argument("--out", default=".")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--serve-seconds", type=int, default=4)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import torch
    results = {"torch": torch.__version__, "ceilings": ceilings(args.ceilings), "latency": [],
               "serving": {}, "errors": []}
    log(f"ceilings: {results['ceilings']}")
    work = tempfile.mkdtemp(prefix="kiln-gpu-models-")
    paths = {}
    for name in ("resnet50", "bert_base"):
        path = os.path.join(work, f"{name}_fp16.onnx")
        try:
            log(f"exporting {name}")
            models.export(name, path)
            paths[name] = path
        except Exception as e:  # noqa: BLE001
            results["errors"].append(f"export {name}: {e}")
    for name, batch in LATENCY:
        if name not in paths:
            continue
        row = {"model": name, "batch": batch}
        module = models.half_module(name).cuda()
        args_cpu = models.inputs(name, batch)
        cl = name == "resnet50"
        if cl:
            module = module.to(memory_format=torch.channels_last)
        try:
            row["kiln_ms"] = kiln_latency(args.kiln, paths[name], batch, args.iterations)
        except Exception as e:  # noqa: BLE001
            results["errors"].append(f"kiln {name} b{batch}: {e}")
        row["eager_ms"] = torch_latency(module, args_cpu, args.iterations, cl)
        if (name, batch) in COMPILE_AT and not args.no_compile:
            try:
                log(f"torch.compile {name} b{batch}")
                compiled = torch.compile(module)
                row["compile_ms"] = torch_latency(compiled, args_cpu, args.iterations, cl)
            except Exception as e:  # noqa: BLE001
                results["errors"].append(f"torch.compile {name} b{batch}: {e}")
        log(f"{row}")
        results["latency"].append(row)
        del module
        torch.cuda.empty_cache()
    if "resnet50" in paths:
        for streams in (1, 2):
            try:
                log(f"serving with {streams} stream(s)")
                results["serving"][streams] = serving(args.kiln, paths["resnet50"], streams,
                                                      args.serve_seconds)
            except Exception as e:  # noqa: BLE001
                results["errors"].append(f"serving {streams} streams: {e}")
    shutil.rmtree(work, ignore_errors=True)

    c = results["ceilings"]
    lines = [f"# kiln on {c.get('gpu', 'GPU')} vs PyTorch {results['torch']} (FP16)", "",
             f"ceilings: device copy {c.get('device_copy_gb_per_s', 'n/a')} GB/s, pinned H2D "
             f"{c.get('h2d_pinned_gb_per_s', 'n/a')} GB/s, BF16 GEMM "
             f"{c.get('bf16_gemm_tflops', 'n/a')} TFLOP/s", "",
             "| model | batch | kiln ms | eager ms | kiln/eager | compile ms | kiln/compile |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results["latency"]:
        k, e, cm = r.get("kiln_ms"), r.get("eager_ms"), r.get("compile_ms")
        fmt = lambda v: f"{v:.3f}" if v else "n/a"  # noqa: E731
        lines.append(f"| {r['model']} | {r['batch']} | {fmt(k)} | {fmt(e)} | {ratio(e, k)} | "
                     f"{fmt(cm)} | {ratio(cm, k) if cm else 'n/a'} |")
    s1, s2 = results["serving"].get(1), results["serving"].get(2)
    lines += ["", f"serving ResNet-50 FP16, HTTP binary, concurrency 64: 1 stream {s1} infer/s, "
              f"2 streams {s2} infer/s, overlap {ratio(s2, s1)}",
              "CUDA graphs: not implemented (optimization.cuda.graphs is accepted and ignored)"]
    for e in results["errors"]:
        lines.append(f"error: {e}")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "gpu-bench.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out, "gpu-bench.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
