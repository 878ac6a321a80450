#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Breadth suite: kiln against ONNX Runtime on every model bench/breadth/export_models.py writes.

For every model file of the manifest and every batch size it was exported for, the script:
  1. checks agreement: one run each of kiln (`kiln run`) and ONNX Runtime (onnxruntime-node) on
     the same real inputs; the max abs difference of every output is reported (a large one, or a
     shape that differs, is flagged with "(!)");
  2. times both, interleaved: --rounds rounds, each running kiln (`kiln profile --json`) and ONNX
     Runtime for the same number of timed runs (chosen so that one engine's round takes about
     --target-s seconds; at least 3, at most 100) after a warm-up, alternating which engine goes
     first; an engine's figure is the median over rounds of its per-round median;
  3. records kiln's GFLOP/s (where kiln can count the model's FLOPs), its three most expensive
     nodes (share of node time and oneDNN implementation), and whether any node planned a oneDNN
     reference implementation.

Summary: the geometric mean of kiln/ORT latency per batch size, the models above 1.3x, the worst
five. Results: a Markdown table and JSON in bench/results/<date>-<commit>-breadth[-LABEL].{md,json}
stamped with the commit, the CPU and the ISA levels.

Both engines get --threads intra-op threads (default: the machine's cores); ONNX Runtime runs
with graph optimization level "all", sequential execution, one inter-op thread. --isa avx2 runs
kiln as on an AVX2 machine (ONEDNN_MAX_CPU_ISA=AVX2, KILN_CPU_ISA=avx2); ONNX Runtime has no such
setting and keeps the machine's full ISA, so on an AVX-512 machine that ratio is pessimistic for
kiln and the AVX2 machine's own run is the one that counts.

  bench/breadth/export_models.py --out build/breadth-models          # once (about 30 minutes)
  bench/breadth/run.py --kiln build/kiln                              # the whole suite
  bench/breadth/run.py --kiln build/kiln --only resnet50,swin_t --opsets 17 --batches 1

Needs scripts/install-deps bench and onnxruntime-node in build/bench-node (`make bench-engine`).
Not a test: nothing here gates CI.
"""
import argparse
import datetime
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "compare"))
import compare  # noqa: E402  (cpu_model, git_commit, ensure_node)

ISA_ENV = {"avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "KILN_CPU_ISA": "avx2"},
           "avx512": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "KILN_CPU_ISA": "avx512"}}
RATIO_LIMIT = 1.3


class Case:
    """One model file at one batch size, with its inputs in the formats both engines read."""

    def __init__(self, args, entry, batch, work):
        import numpy as np
        self.np = np
        self.args = args
        self.entry = entry
        self.batch = batch
        self.work = work
        self.path = os.path.join(args.models_dir, entry["file"])
        self.inputs = []
        for spec in entry["inputs"][str(batch)]:
            npy = os.path.join(args.models_dir, spec["file"])
            raw = os.path.join(work, spec["name"] + ".bin")
            a = np.load(npy)
            a.tofile(raw)
            self.inputs.append({"name": spec["name"], "npy": npy, "raw": raw,
                                "shape": list(a.shape), "dtype": str(a.dtype)})
        self.kiln_env = dict(os.environ, **ISA_ENV.get(args.isa, {}))

    # --- kiln ----------------------------------------------------------------------------
    def kiln_profile(self, iterations, warmup):
        cmd = [self.args.kiln, "profile", self.path, "--threads", str(self.args.threads),
               "--iterations", str(iterations), "--warmup", str(warmup), "--json"]
        for i in self.inputs:
            cmd += ["--input", f"{i['name']}={i['npy']}"]
        out = subprocess.run(cmd, capture_output=True, text=True, env=self.kiln_env)
        if out.returncode != 0:
            raise RuntimeError(f"kiln profile failed ({out.returncode}): {out.stderr[-1500:]}")
        return json.loads(out.stdout)

    def kiln_outputs(self):
        out_dir = os.path.join(self.work, "kiln_out")
        os.makedirs(out_dir, exist_ok=True)
        cmd = [self.args.kiln, "run", self.path, "--output-dir", out_dir, "--output-format",
               "npy", "--threads", str(self.args.threads)]
        for i in self.inputs:
            cmd += ["--input", f"{i['name']}={i['npy']}"]
        out = subprocess.run(cmd, capture_output=True, text=True, env=self.kiln_env)
        if out.returncode != 0:
            raise RuntimeError(f"kiln run failed ({out.returncode}): {out.stderr[-1500:]}")
        outs, k = [], 0
        while os.path.exists(os.path.join(out_dir, f"output_{k}.npy")):
            outs.append(self.np.load(os.path.join(out_dir, f"output_{k}.npy")))
            k += 1
        return outs

    # --- ONNX Runtime --------------------------------------------------------------------
    def ort(self, iterations, warmup, output_dir=None):
        spec = {"model": self.path, "threads": self.args.threads, "warmup": warmup,
                "iterations": iterations, "output_dir": output_dir,
                "inputs": [{"name": i["name"], "shape": i["shape"], "file": i["raw"],
                            "dtype": i["dtype"]} for i in self.inputs]}
        spec_path = os.path.join(self.work, "ort_spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        env = dict(os.environ, NODE_PATH=os.path.join(self.args.node_dir, "node_modules"))
        out = subprocess.run(["node", os.path.join(ROOT, "bench", "compare", "ort_runner.cjs"),
                              spec_path], capture_output=True, text=True, env=env,
                             cwd=self.args.node_dir)
        if out.returncode != 0:
            raise RuntimeError(f"ONNX Runtime failed: {out.stderr[-1500:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])["times_ms"]

    def ort_outputs(self, names):
        out_dir = os.path.join(self.work, "ort_out")
        os.makedirs(out_dir, exist_ok=True)
        self.ort(1, 0, out_dir)
        outs = []
        for name in names:
            with open(os.path.join(out_dir, f"{name}.json")) as f:
                dims = json.load(f)
            with open(os.path.join(out_dir, f"{name}.type")) as f:
                dtype = {"float32": "<f4", "int64": "<i8", "int32": "<i4",
                         "bool": "?"}.get(f.read().strip(), "<f4")
            outs.append(self.np.fromfile(os.path.join(out_dir, f"{name}.bin"),
                                         dtype).reshape(dims))
        return outs


def output_names(path):
    import onnx
    model = onnx.load(path, load_external_data=False)
    return [o.name for o in model.graph.output]


def agreement(case):
    """Max abs difference per output between kiln and ONNX Runtime, and whether it is large."""
    names = output_names(case.path)
    ref = case.ort_outputs(names)
    got = case.kiln_outputs()
    worst, flagged, notes = 0.0, False, []
    for name, r, g in zip(names, ref, got):
        if r.shape != g.shape:
            flagged = True
            notes.append(f"{name}: shape {list(g.shape)} vs ORT {list(r.shape)}")
            continue
        if r.size == 0:
            continue
        err = float(abs(g.astype("f8") - r.astype("f8")).max())
        # Relative to the output's own magnitude: models with random weights can have outputs
        # far below 1 (logits of 1e-6), where an absolute tolerance would accept anything.
        scale = max(1e-30, float(abs(r.astype("f8")).max()))
        worst = max(worst, err / scale)
        if err > 1e-3 * scale:
            flagged = True
            notes.append(f"{name}: max abs diff {err:.3g} (max |ORT| {scale:.3g})")
    if len(got) != len(ref):
        flagged = True
        notes.append(f"{len(got)} outputs vs ORT {len(ref)}")
    return {"max_rel_diff": worst, "flagged": flagged, "notes": notes}


def top_nodes(doc, n=3):
    nodes = sorted(doc.get("nodes", []), key=lambda x: -x.get("total_ms", 0))[:n]
    return [{"name": x["name"], "op_type": x["op_type"], "percent": x.get("percent", 0),
             "implementation": x.get("implementation", "") or x.get("provider", "")}
            for x in nodes]


def reference_primitives(doc):
    return sorted({x["name"] for x in doc.get("nodes", [])
                   if x.get("implementation", "").startswith("oneDNN ref")})


def run_case(args, entry, batch):
    work = tempfile.mkdtemp(prefix=f"kiln-breadth-{entry['id']}-{batch}-")
    try:
        case = Case(args, entry, batch, work)
        row = {"id": entry["id"], "model": entry["model"], "family": entry["family"],
               "opset": entry["opset"], "batch": batch}
        row["agreement"] = agreement(case)
        # Calibrate: one short kiln profile gives the per-run time.
        probe = case.kiln_profile(3, 1)
        per_run = max(probe["median_ms"], 0.01)
        iterations = int(min(100, max(3, args.target_s * 1000.0 / per_run)))
        warmup = max(1, min(10, iterations // 5))
        kiln_ms, ort_ms, last = [], [], probe
        for rnd in range(args.rounds):
            order = ("kiln", "ort") if rnd % 2 == 0 else ("ort", "kiln")
            for e in order:
                if e == "kiln":
                    last = case.kiln_profile(iterations, warmup)
                    kiln_ms.append(last["median_ms"])
                else:
                    ort_ms.append(statistics.median(case.ort(iterations, warmup)))
        row.update({"iterations": iterations, "rounds": args.rounds,
                    "kiln_ms": statistics.median(kiln_ms), "ort_ms": statistics.median(ort_ms),
                    "kiln_rounds_ms": kiln_ms, "ort_rounds_ms": ort_ms})
        row["ratio"] = row["kiln_ms"] / row["ort_ms"]
        gflop = last.get("gflop_per_run") or 0
        if gflop > 0:
            row["gflop_per_run"] = gflop
            row["kiln_gflop_per_s"] = gflop / (row["kiln_ms"] / 1000.0)
            row["ort_gflop_per_s"] = gflop / (row["ort_ms"] / 1000.0)
        row["top_nodes"] = top_nodes(last)
        row["reference_primitives"] = reference_primitives(last)
        return row
    finally:
        shutil.rmtree(work, ignore_errors=True)


def geomean(values):
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize(rows):
    out = {}
    ok = [r for r in rows if "ratio" in r]
    for batch in sorted({r["batch"] for r in ok}):
        rs = [r for r in ok if r["batch"] == batch]
        out[f"batch_{batch}"] = {"models": len(rs), "geomean_ratio": geomean(r["ratio"] for r in rs),
                                 "above_limit": sorted((r["id"] for r in rs
                                                        if r["ratio"] > RATIO_LIMIT))}
    out["all"] = {"models": len(ok), "geomean_ratio": geomean(r["ratio"] for r in ok)}
    out["worst"] = [{"id": r["id"], "batch": r["batch"], "ratio": r["ratio"]}
                    for r in sorted(ok, key=lambda r: -r["ratio"])[:5]]
    out["failed"] = [{"id": r["id"], "batch": r["batch"], "error": r["error"]}
                     for r in rows if "error" in r]
    out["reference_primitives"] = sorted({r["id"] for r in ok if r["reference_primitives"]})
    out["disagreements"] = sorted({f"{r['id']} b{r['batch']}" for r in ok
                                   if r["agreement"]["flagged"]})
    return out


def markdown(doc):
    lines = [f"# Breadth suite: kiln vs ONNX Runtime ({doc['date'][:10]}, commit {doc['commit']})",
             "", f"CPU: {doc['cpu']}; {doc['threads']} threads; kiln ISA: {doc['isa']}; "
             f"{doc['rounds']} interleaved rounds; command: `{doc['command']}`", "",
             "| model | opset | batch | kiln ms | ORT ms | kiln/ORT | kiln GFLOP/s | top nodes "
             "(share, implementation) | agreement |", "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['opset']} | {r['batch']} | - | - | - | - | "
                         f"failed: {r['error'][:120]} | - |")
            continue
        tops = "; ".join(f"{t['op_type']} {t['percent']:.0f}% {t['implementation']}"
                         for t in r["top_nodes"])
        agree = "ok" if not r["agreement"]["flagged"] else \
            "(!) " + "; ".join(r["agreement"]["notes"])[:160]
        flops = f"{r['kiln_gflop_per_s']:.1f}" if "kiln_gflop_per_s" in r else "-"
        mark = " (!)" if r["ratio"] > RATIO_LIMIT else ""
        lines.append(f"| {r['model']} | {r['opset']} | {r['batch']} | {r['kiln_ms']:.2f} | "
                     f"{r['ort_ms']:.2f} | {r['ratio']:.2f}{mark} | {flops} | {tops} | {agree} |")
    s = doc["summary"]
    lines += ["", "## Summary", ""]
    for key, v in s.items():
        if key.startswith("batch_"):
            lines.append(f"- {key.replace('_', ' ')}: {v['models']} models, geometric mean "
                         f"kiln/ORT {v['geomean_ratio']:.3f}; above {RATIO_LIMIT}x: "
                         f"{', '.join(v['above_limit']) or 'none'}")
    lines.append(f"- all: {s['all']['models']} runs, geometric mean {s['all']['geomean_ratio']:.3f}")
    lines.append("- worst five: " + ", ".join(f"{w['id']} b{w['batch']} {w['ratio']:.2f}x"
                                             for w in s["worst"]))
    lines.append(f"- oneDNN reference primitives planned: "
                 f"{', '.join(s['reference_primitives']) or 'none'}")
    lines.append(f"- outputs that disagree with ONNX Runtime: "
                 f"{', '.join(s['disagreements']) or 'none'}")
    if s["failed"]:
        lines.append("- failed: " + ", ".join(f"{f['id']} b{f['batch']}" for f in s["failed"]))
    return "\n".join(lines) + "\n"


def write_results(args, rows, final):
    """Writes the JSON results (after every case, so an interrupted run keeps what it measured:
    the file is named ...-partial.json until the suite ends) and returns (doc, stem)."""
    isa = args.isa if args.isa != "native" else "native (the machine's)"
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "commit": compare.git_commit(), "cpu": compare.cpu_model(), "threads": args.threads,
           "isa": isa, "command": " ".join(sys.argv), "rounds": args.rounds,
           "target_s": args.target_s, "results": rows, "summary": summarize(rows)}
    stem = args.out[:-5] if args.out and args.out.endswith(".json") else args.out or os.path.join(
        ROOT, "bench", "results", f"{datetime.date.today().isoformat()}-{doc['commit']}-breadth"
        + (f"-{args.label}" if args.label else ""))
    os.makedirs(os.path.dirname(os.path.abspath(stem)), exist_ok=True)
    with open(stem + (".json" if final else "-partial.json"), "w") as f:
        json.dump(doc, f, indent=1)
    if final and os.path.exists(stem + "-partial.json"):
        os.remove(stem + "-partial.json")
    return doc, stem


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True, help="the kiln executable")
    ap.add_argument("--models-dir", default="build/breadth-models",
                    help="export_models.py's folder (with manifest.json)")
    ap.add_argument("--node-dir", default="build/bench-node")
    ap.add_argument("--only", default="", help="comma-separated architectures (default: all)")
    ap.add_argument("--opsets", default="", help="comma-separated opsets (default: all)")
    ap.add_argument("--batches", default="", help="comma-separated batch sizes (default: all)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--target-s", type=float, default=1.0,
                    help="seconds of timed runs per engine and round (sets the iterations)")
    ap.add_argument("--isa", choices=["native", "avx2", "avx512"], default="native",
                    help="kiln's ISA level (ONNX Runtime keeps the machine's)")
    ap.add_argument("--label", default="", help="suffix of the results files")
    ap.add_argument("--out", default=None, help="JSON results file (default in bench/results/)")
    args = ap.parse_args()
    args.kiln = os.path.abspath(args.kiln)
    args.models_dir = os.path.abspath(args.models_dir)
    args.node_dir = os.path.abspath(args.node_dir)
    manifest_path = os.path.join(args.models_dir, "manifest.json")
    if not os.path.exists(manifest_path):
        sys.exit(f"breadth: {manifest_path} not found; run bench/breadth/export_models.py "
                 f"--out {args.models_dir} first")
    compare.ensure_node(args.node_dir)
    with open(manifest_path) as f:
        entries = json.load(f)["models"]
    only = set(filter(None, args.only.split(",")))
    opsets = {int(o) for o in filter(None, args.opsets.split(","))}
    batches = {int(b) for b in filter(None, args.batches.split(","))}
    todo = [(e, b) for e in entries for b in e["batches"]
            if (not only or e["model"] in only) and (not opsets or e["opset"] in opsets)
            and (not batches or b in batches)]
    if not todo:
        sys.exit("breadth: nothing selected")
    rows = []
    t_start = time.time()
    for k, (entry, batch) in enumerate(todo):
        try:
            row = run_case(args, entry, batch)
            agree = "" if not row["agreement"]["flagged"] else \
                "  (!) " + "; ".join(row["agreement"]["notes"])
            print(f"breadth [{k + 1}/{len(todo)}] {entry['id']} b{batch}: kiln "
                  f"{row['kiln_ms']:.2f} ms, ORT {row['ort_ms']:.2f} ms, "
                  f"{row['ratio']:.2f}x{agree}  ({time.time() - t_start:.0f} s)",
                  file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001 (one failing model does not stop the suite)
            row = {"id": entry["id"], "model": entry["model"], "family": entry["family"],
                   "opset": entry["opset"], "batch": batch,
                   "error": " ".join(str(e).split())[:2000]}
            print(f"breadth [{k + 1}/{len(todo)}] {entry['id']} b{batch}: FAILED {row['error']}",
                  file=sys.stderr, flush=True)
        rows.append(row)
        write_results(args, rows, final=False)

    doc, stem = write_results(args, rows, final=True)
    text = markdown(doc)
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)
    print(f"results: {os.path.abspath(stem)}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
