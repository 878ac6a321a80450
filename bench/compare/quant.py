#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""INT8 and FP16 against FP32: `kiln quantize` on the comparison's CNNs, then speed, agreement, size.

For each model (ResNet-50, MobileNetV2 with seeded random weights, from make_models.py):
  1. calibration and evaluation sets of inputs drawn like normalized images (uniform [0, 1]
     pixels, ImageNet mean/std), written as inputs.npy;
  2. int8: `kiln quantize --per-channel` on the calibration set (the QDQ model and its report);
     fp16 / bf16: `kiln quantize --precision fp16` (half-precision weights, no calibration);
  3. `kiln validate` of each converted model on the evaluation set: top-1 agreement and mean
     cosine against the FP32 model;
  4. latency at --batch (default 8) of FP32 and each converted model, interleaved over --rounds:
     kiln (`kiln profile --json`) and ONNX Runtime (onnxruntime-node) running the very same files;
  5. a table, one row per model and precision, of the speed-up over FP32, agreement, cosine, file
     size ratio and the ratio of ONNX Runtime's latency to kiln's on that file (above 1: kiln is
     faster), and a JSON file.

  bench/compare/quant.py --kiln build/kiln [--models resnet50,mobilenet_v2] [--batch 8]
      [--precisions int8,fp16]

Not a test: nothing here gates CI. Needs what compare.py needs (`make bench-engine` installs it).
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import make_models  # noqa: E402


def image_like(n, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
    return ((rng.random((n, 3, 224, 224), dtype=np.float32) - mean) / std).astype(np.float32)


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", default="resnet50,mobilenet_v2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--calib-samples", type=int, default=32)
    ap.add_argument("--eval-samples", type=int, default=64)
    ap.add_argument("--method", default="percentile")
    ap.add_argument("--precisions", default="int8,fp16",
                    help="comma-separated subset of int8, fp16, bf16")
    ap.add_argument("--models-dir", default="build/bench-models")
    ap.add_argument("--node-dir", default="build/bench-node")
    ap.add_argument("--no-ort", action="store_true", help="kiln only")
    ap.add_argument("--target-cpu", default=None,
                    help="passed to kiln quantize (native, avx2 or vnni); default: kiln's own")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.kiln = os.path.abspath(args.kiln)
    args.models_dir = os.path.abspath(args.models_dir)
    args.node_dir = os.path.abspath(args.node_dir)
    if not args.no_ort:
        compare.ensure_node(args.node_dir)
    import numpy as np
    models = args.models.split(",")
    precisions = args.precisions.split(",")
    for prec in precisions:
        if prec not in ("int8", "fp16", "bf16"):
            ap.error(f"unknown precision '{prec}' in --precisions (int8, fp16, bf16)")
    subprocess.run([sys.executable, os.path.join(HERE, "make_models.py"), "--out",
                    args.models_dir, "--models", ",".join(models)], check=True)
    rows = []
    for model in models:
        fp32 = os.path.join(args.models_dir, model + ".onnx")
        work = tempfile.mkdtemp(prefix=f"kiln-quant-{model}-")
        try:
            calib, val = os.path.join(work, "calib"), os.path.join(work, "val")
            for d, n, seed in ((calib, args.calib_samples, 1), (val, args.eval_samples, 2)):
                os.makedirs(d)
                np.save(os.path.join(d, "inputs.npy"), image_like(n, seed))
            row = {"model": model, "batch": args.batch, "threads": args.threads,
                   "method": args.method, "fp32_bytes": os.path.getsize(fp32), "precisions": {}}
            files = {}
            for prec in precisions:
                path = os.path.join(work, f"{model}.{prec}.onnx")
                if prec == "int8":
                    print(f"quant: {model}: kiln quantize ({args.method}, per channel)",
                          file=sys.stderr, flush=True)
                    target = ["--target-cpu", args.target_cpu] if args.target_cpu else []
                    report = run_json([args.kiln, "quantize", fp32, "--calib-dir", calib, "--out",
                                       path, "--method", args.method, "--per-channel",
                                       "--batch-size", "8", "--json", "--quiet", "--threads",
                                       str(args.threads)] + target)
                else:
                    print(f"quant: {model}: kiln quantize --precision {prec}", file=sys.stderr,
                          flush=True)
                    report = run_json([args.kiln, "quantize", fp32, "--out", path, "--precision",
                                       prec, "--json", "--quiet"])
                print(f"quant: {model}: kiln validate {prec}", file=sys.stderr, flush=True)
                val_doc = run_json([args.kiln, "validate", path, "--data", val, "--reference",
                                    fp32, "--precision", prec, "--batch-size", str(args.batch),
                                    "--json", "--quiet", "--threads", str(args.threads)])
                files[prec] = path
                p = {"bytes": os.path.getsize(path), "validate": val_doc,
                     "quantize_report": report,
                     "agreement_top1": val_doc.get("agreement_top1"),
                     "mean_cosine": val_doc.get("mean_cosine")}
                p["size_ratio"] = p["bytes"] / row["fp32_bytes"]
                row["precisions"][prec] = p
                if prec == "int8":
                    # The keys of the INT8-only results files, kept comparable.
                    row.update({"int8_bytes": p["bytes"], "validate": val_doc,
                                "quantize_report": report, "size_ratio": p["size_ratio"],
                                "agreement_top1": p["agreement_top1"],
                                "mean_cosine": p["mean_cosine"]})
            # Timing, interleaved: the same inputs for every file and both engines.
            runner = compare.Runner(args, model, args.batch, work)
            per = {}
            for rnd in range(args.rounds):
                for prec, path in [("fp32", fp32)] + list(files.items()):
                    runner.path = path
                    per.setdefault(f"kiln_{prec}", []).append(runner.kiln_time()[0])
                    if not args.no_ort:
                        per.setdefault(f"ort_{prec}", []).append(runner.ort_time()[0])
                print(f"quant: {model} batch {args.batch} round {rnd + 1}/{args.rounds}: " +
                      ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in per.items()), file=sys.stderr,
                      flush=True)
            for k, v in per.items():
                row[f"{k}_ms"] = statistics.median(v)
            for prec in files:
                row[f"kiln_{prec}_speedup"] = row["kiln_fp32_ms"] / row[f"kiln_{prec}_ms"]
                if not args.no_ort:
                    row[f"ort_{prec}_speedup"] = row["ort_fp32_ms"] / row[f"ort_{prec}_ms"]
                    row[f"ort_{prec}_over_kiln_{prec}"] = (row[f"ort_{prec}_ms"] /
                                                           row[f"kiln_{prec}_ms"])
            rows.append(row)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    head = ["model", "precision", "batch", "kiln fp32 ms", "kiln ms", "speed-up", "agree top1",
            "mean cosine", "size"]
    if not args.no_ort:
        head += ["ort fp32 ms", "ort ms", "ort/kiln"]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        for prec, p in r["precisions"].items():
            cells = [r["model"], prec, str(r["batch"]), f"{r['kiln_fp32_ms']:.1f}",
                     f"{r[f'kiln_{prec}_ms']:.1f}", f"{r[f'kiln_{prec}_speedup']:.2f}x",
                     f"{p['agreement_top1']:.1f}%", f"{p['mean_cosine']:.4f}",
                     f"{100 * p['size_ratio']:.1f}%"]
            if not args.no_ort:
                cells += [f"{r['ort_fp32_ms']:.1f}", f"{r[f'ort_{prec}_ms']:.1f}",
                          f"{r[f'ort_{prec}_over_kiln_{prec}']:.2f}x"]
            print("| " + " | ".join(cells) + " |")
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "commit": compare.git_commit(), "cpu": compare.cpu_model(),
           "command": " ".join(sys.argv),
           # The ISA caps in force (docs/kernels.md): they decide which kernels ran.
           "env": {k: os.environ.get(k) for k in ("ONEDNN_MAX_CPU_ISA", "KILN_CPU_ISA",
                                                  "KILN_CPU_GEMM", "OMP_WAIT_POLICY")},
           "results": rows}
    out = args.out or os.path.join(HERE, "..", "results",
                                   f"{datetime.date.today().isoformat()}-{doc['commit']}-"
                                   f"{'-'.join(precisions)}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"results: {os.path.abspath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
