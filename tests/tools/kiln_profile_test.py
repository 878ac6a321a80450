#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of `kiln profile`: generates a small CNN (Conv, Relu, Conv, Relu,
GlobalAveragePool, Flatten, Gemm, Softmax; symbolic batch), a model with a symbolic non-batch
dim, a NonZero model (output shape set by the data) and a two-input Add, runs the command, and
checks the JSON report (fields, consistency, FLOP counts computed here from the shapes), the
Chrome trace (structure Perfetto reads), the text table, inputs read from files (--input,
--inputs, --inputs-dir: what the runs feed, the shapes they give), and the errors.

Usage: kiln_profile_test.py --kiln build/kiln
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

failures = []


def check(ok, what):
    print(("PASS  " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def make_cnn(path):
    rng = np.random.default_rng(0)

    def init(name, shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        [init("w1", (8, 3, 3, 3)), init("b1", (8,)), init("w2", (16, 8, 3, 3)),
         init("wf", (10, 16)), init("bf", (10,))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def make_seq_model(path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "seq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)


def make_nonzero_model(path):
    graph = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["y"], name="nonzero")], "nonzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, "n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)


def make_add_model(path):
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add")], "add",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)


def profile_json(kiln, args, what):
    """Runs profile --json; the report, or {} after a recorded failure."""
    r = run(kiln, args + ["--iterations", "2", "--warmup", "1", "--threads", "1", "--json"])
    check(r.returncode == 0, f"{what}: exits 0 ({r.stderr.strip()})")
    if r.returncode != 0:
        return {}
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        check(False, f"{what}: stdout is JSON ({e})")
        return {}


def check_file_inputs(kiln, tmp, cnn, seq):
    """Inputs read from files are what every run feeds."""
    rng = np.random.default_rng(1)
    # The CNN with a batch of 3 from a file: the reported shapes and the memory plan follow it.
    x3 = os.path.join(tmp, "x3.npy")
    np.save(x3, rng.standard_normal((3, 3, 16, 16)).astype(np.float32))
    rep = profile_json(kiln, [cnn, "--input", f"x={x3}", "--no-optimize"], "--input x=FILE")
    if rep:
        check(rep["inputs"] == [{"name": "x", "dtype": "FP32", "shape": [3, 3, 16, 16],
                                 "data": "file", "file": x3}], f"file input reported ({rep['inputs']})")
        check(rep["batch"] == 3, f"batch from the file's first dim ({rep['batch']})")
        check(rep["outputs"] == [{"name": "y", "dtype": "FP32", "shape": [3, 10]}],
              f"outputs for 3 items ({rep['outputs']})")
        want = 4 * (2 * 3 * 8 * 16 * 16 + 2 * 3 * 16 * 7 * 7 + 3 * 16 + 3 * 10)
        got = rep["memory_plan"]["unplanned_bytes"]
        check(got == want, f"memory plan of the file's shape: unplanned {got} == {want}")
    # The same file as .pb through --inputs-dir (ONNX test data layout) and through --inputs.
    tdir = os.path.join(tmp, "test_data_set_0")
    os.makedirs(tdir, exist_ok=True)
    with open(os.path.join(tdir, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(np.load(x3), "x").SerializeToString())
    rep = profile_json(kiln, [cnn, "--inputs-dir", tdir], "--inputs-dir with input_0.pb")
    if rep:
        check(rep["inputs"][0]["shape"] == [3, 3, 16, 16]
              and rep["inputs"][0]["file"] == os.path.join(tdir, "input_0.pb"),
              f"--inputs-dir input reported ({rep['inputs']})")
    rep = profile_json(kiln, [cnn, "--inputs", x3], "--inputs FILE")
    if rep:
        check(rep["inputs"][0]["file"] == x3, "--inputs input reported")

    # NonZero: the output's shape is set by the data, so it shows what the runs were fed.
    nz = os.path.join(tmp, "nonzero.onnx")
    make_nonzero_model(nz)
    data = np.zeros((5, 4), dtype=np.float32)
    data[0, 1], data[2, 3], data[4, 0] = 1.5, -2.0, 7.0
    nz_in = os.path.join(tmp, "nz_in.npy")
    np.save(nz_in, data)
    want_count = int(np.count_nonzero(data))
    rep = profile_json(kiln, [nz, "--input", f"x={nz_in}"], "NonZero on a file")
    if rep:
        check(rep["outputs"] == [{"name": "y", "dtype": "INT64", "shape": [2, want_count]}],
              f"NonZero of the file: [2, {want_count}] ({rep['outputs']})")
    rep = profile_json(kiln, [nz, "--batch", "5"], "NonZero on random data")
    if rep:
        # Random floats in [-1, 1) are all non-zero: every one of the 5 x 4 elements counts.
        check(rep["outputs"] == [{"name": "y", "dtype": "INT64", "shape": [2, 20]}],
              f"NonZero of random data: [2, 20] ({rep['outputs']})")

    # A file resolves a symbolic dim that would otherwise need --shape.
    s_in = os.path.join(tmp, "seq_in.npy")
    np.save(s_in, np.ones((2, 5, 4), dtype=np.float32))
    rep = profile_json(kiln, [seq, "--input", f"x={s_in}"], "symbolic dims from a file")
    if rep:
        check(rep["inputs"][0]["shape"] == [2, 5, 4] and rep["batch"] == 2
              and rep["outputs"][0]["shape"] == [2, 5, 4],
              f"file shape used ({rep['inputs']}, batch {rep['batch']})")

    # One input from a file, the other random.
    add = os.path.join(tmp, "add.onnx")
    make_add_model(add)
    a_in = os.path.join(tmp, "a_in.npy")
    np.save(a_in, np.ones((3, 4), dtype=np.float32))
    rep = profile_json(kiln, [add, "--input", f"a={a_in}", "--batch", "3"], "one file, one random")
    if rep:
        check([i["data"] for i in rep["inputs"]] == ["file", "random"]
              and [i["shape"] for i in rep["inputs"]] == [[3, 4], [3, 4]],
              f"a from the file, b random ({rep['inputs']})")

    # The text report names the file.
    r = run(kiln, [cnn, "--input", f"x={x3}", "--iterations", "2", "--warmup", "0"])
    check(r.returncode == 0 and f"x FP32[3,3,16,16] from {x3}" in r.stdout
          and "y FP32[3,10]" in r.stdout, "table names the input file and the output shape")

    # Errors name the input and the problem.
    wrong_dim = os.path.join(tmp, "wrong_dim.npy")
    np.save(wrong_dim, np.zeros((3, 3, 16, 15), dtype=np.float32))
    wrong_rank = os.path.join(tmp, "wrong_rank.npy")
    np.save(wrong_rank, np.zeros((3, 16, 16), dtype=np.float32))
    wrong_type = os.path.join(tmp, "wrong_type.npy")
    np.save(wrong_type, np.zeros((3, 3, 16, 16), dtype=np.int64))
    garbage = os.path.join(tmp, "garbage.txt")
    with open(garbage, "w") as f:
        f.write("not a tensor")
    errors = [
        ("wrong dim", [cnn, "--input", f"x={wrong_dim}"],
         f"input 'x' from '{wrong_dim}': expected shape FP32[batch,3,16,16], got [3,3,16,15] "
         "(dim 3 differs)"),
        ("wrong rank", [cnn, "--input", f"x={wrong_rank}"],
         f"input 'x' from '{wrong_rank}': expected shape FP32[batch,3,16,16] (rank 4), got "
         "[3,16,16]"),
        ("wrong dtype", [cnn, "--input", f"x={wrong_type}"],
         f"input 'x' from '{wrong_type}': expected datatype FP32, got INT64"),
        ("unknown input", [cnn, "--input", f"nope={x3}"], "model has no input 'nope' (inputs: x)"),
        ("not NAME=PATH", [cnn, "--input", x3], "is not NAME=PATH"),
        ("input twice", [cnn, "--input", f"x={x3}", "--inputs", x3], "input 'x' is given twice"),
        ("too many files", [cnn, "--inputs", f"{x3},{x3}"], "has 1 inputs but 2 files were given"),
        ("missing file", [cnn, "--input", "x=" + os.path.join(tmp, "none.npy")], "none.npy"),
        ("unknown format", [cnn, "--input", f"x={garbage}"], ".npy"),
        ("not a directory", [cnn, "--inputs-dir", os.path.join(tmp, "nodir")],
         "is not a directory"),
        ("--shape for a file input", [cnn, "--input", f"x={x3}", "--shape", "x:3,3,16,16"],
         "--shape applies to random inputs only"),
        ("unknown --device", [cnn, "--device", "gpu"],
         "--device 'gpu': expected cpu or cuda:N"),
        # This machine has no GPU (or this build no CUDA backend): the error says which.
        ("--device without the GPU", [cnn, "--device", "cuda:7"], "--device cuda:7: no such GPU"),
        ("malformed pool size", [cnn, "--device", "cuda:0", "--cuda-memory-pool-byte-size",
                                 "0=1024"], "expected GPU:BYTES"),
    ]
    for what, args, needle in errors:
        r = run(kiln, args + ["--iterations", "1", "--warmup", "0"])
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(lines) == 1 and lines[0].startswith("kiln profile: ")
              and needle in lines[0], f"error, {what}: {r.stderr.strip()!r}")


def run(kiln, args, env=None):
    return subprocess.run([kiln, "profile"] + args, capture_output=True, text=True, timeout=120,
                          env=env)


def check_thread_wait(kiln, cnn):
    """The idle-wait policy the report states, as base/thread_wait.h defines it: kiln re-executes
    itself with GOMP_SPINCOUNT=10000 unless the user set libgomp's variables or chose 'openmp'."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "KILN_THREAD_WAIT")}
    cases = [({}, "GOMP_SPINCOUNT=10000"),
             ({"GOMP_SPINCOUNT": "5"}, "GOMP_SPINCOUNT=5"),
             ({"OMP_WAIT_POLICY": "passive"}, "OMP_WAIT_POLICY=passive"),
             ({"KILN_THREAD_WAIT": "openmp"}, "OpenMP default")]
    for extra, want in cases:
        r = run(kiln, [cnn, "--iterations", "1", "--warmup", "0", "--json"], dict(base, **extra))
        got = json.loads(r.stdout).get("thread_wait") if r.returncode == 0 else r.stderr.strip()
        check(got == want, f"thread_wait with {extra or 'nothing set'}: {got!r} == {want!r}")
    r = run(kiln, [cnn, "--iterations", "1"], dict(base, KILN_THREAD_WAIT="spin"))
    check(r.returncode == 2 and "KILN_THREAD_WAIT" in r.stderr,
          f"a bad KILN_THREAD_WAIT is refused ({r.returncode}: {r.stderr.strip()!r})")


def check_widths(kiln, cnn):
    """The adaptive width report: at 2 threads the JSON says how many timed runs ran narrow (an
    integer between 0 and the iterations) and the switches; --fixed-threads says the widths do
    not adapt, and one thread has nothing to adapt."""
    for extra, adaptive in (([], True), (["--fixed-threads"], False)):
        r = run(kiln, [cnn, "--iterations", "40", "--warmup", "0", "--threads", "2", "--json"]
                + extra)
        rep = json.loads(r.stdout) if r.returncode == 0 else {}
        check(rep.get("adaptive_threads") is adaptive,
              f"2 threads {extra}: adaptive_threads {rep.get('adaptive_threads')} == {adaptive}")
        narrow = rep.get("narrow_runs", -1)
        check(0 <= narrow <= 40 and (adaptive or narrow == 0),
              f"2 threads {extra}: narrow_runs {narrow} in [0, 40] (0 when fixed)")
        check(isinstance(rep.get("width_switches"), int), "width_switches is reported")
    r = run(kiln, [cnn, "--iterations", "5", "--threads", "1", "--json"])
    rep = json.loads(r.stdout) if r.returncode == 0 else {}
    check(rep.get("adaptive_threads") is False, "one thread: adaptive_threads false")
    r = run(kiln, [cnn, "--iterations", "5", "--threads", "2"])
    check("widths      adaptive:" in r.stdout, "the text report has the widths line")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        cnn = os.path.join(tmp, "cnn.onnx")
        make_cnn(cnn)
        check_thread_wait(args.kiln, cnn)
        trace_path = os.path.join(tmp, "trace.json")
        batch, iterations, warmup = 4, 7, 2
        want_flops = {}
        # The graph as imported (node by node checks below); the optimized run is checked after.
        r = run(args.kiln, [cnn, "--batch", str(batch), "--iterations", str(iterations),
                            "--warmup", str(warmup), "--threads", "1", "--json",
                            "--trace", trace_path, "--no-optimize"])
        check(r.returncode == 0, f"profile --json exits 0 ({r.stderr.strip()})")
        lines = [l for l in r.stdout.splitlines() if l.strip()]
        check(len(lines) == 1, f"--json prints one line ({len(lines)})")
        check_widths(args.kiln, cnn)
        try:
            report = json.loads(r.stdout)
        except ValueError as e:
            report = {}
            check(False, f"stdout is JSON ({e})")
        for field in ("median_ms", "p99_ms", "items_per_s", "batch", "threads"):
            check(field in report, f"JSON has '{field}'")
        if report:
            check(report["batch"] == batch, f"batch {report['batch']} == {batch}")
            check(report["threads"] == 1, f"threads {report['threads']} == 1")
            check(report["iterations"] == iterations, "iterations echoed")
            check(0 < report["median_ms"] <= report["p99_ms"], "0 < median <= p99")
            want = batch * report["runs_per_s"]
            check(abs(report["items_per_s"] - want) <= 1e-3 * want,
                  f"items_per_s {report['items_per_s']} == batch x runs/s {want}")
            check(report["inputs"] == [{"name": "x", "dtype": "FP32", "shape": [batch, 3, 16, 16],
                                        "data": "random"}], f"inputs {report['inputs']}")
            check(report.get("outputs") == [{"name": "y", "dtype": "FP32", "shape": [batch, 10]}],
                  f"outputs {report.get('outputs')}")
            mp = report["memory_plan"]
            check(mp["planned"] and 0 < mp["arena_bytes"] <= mp["unplanned_bytes"],
                  f"memory plan arena {mp['arena_bytes']} <= unplanned {mp['unplanned_bytes']}")
            # Intermediates: c1 r1 (4x8x16x16), c2 r2 (4x16x7x7), p (4x16), logits (4x10). The
            # Flatten output f shares p's memory (a view op allocates nothing).
            want_unplanned = 4 * (2 * batch * 8 * 16 * 16 + 2 * batch * 16 * 7 * 7
                                  + batch * 16 + batch * 10)
            check(mp["unplanned_bytes"] == want_unplanned,
                  f"unplanned bytes {mp['unplanned_bytes']} == {want_unplanned}")
            nodes = {n["name"]: n for n in report["nodes"]}
            check(set(nodes) == {"conv1", "relu1", "conv2", "relu2", "pool", "flatten", "fc",
                                 "softmax"}, f"every node reported ({sorted(nodes)})")
            check(all(n["calls"] == iterations for n in report["nodes"]), "calls == iterations")
            totals = [n["total_ms"] for n in report["nodes"]]
            check(totals == sorted(totals, reverse=True), "nodes sorted by total time")
            check(abs(sum(n["percent"] for n in report["nodes"]) - 100) < 0.1, "percent sums to 100")
            # FLOPs: 2 * outputs * (Cin/group * kh * kw); Gemm 2 * M * N * K.
            want_flops.update({
                "conv1": 2 * batch * 8 * 16 * 16 * 3 * 3 * 3,
                "conv2": 2 * batch * 16 * 7 * 7 * 8 * 3 * 3,
                "fc": 2 * batch * 10 * 16,
            })
            for name, flops in want_flops.items():
                got = nodes.get(name, {}).get("flops", 0)
                check(abs(got - flops) <= 1e-6 * flops + 1, f"{name}: {got:.0f} FLOPs == {flops}")
                check(nodes.get(name, {}).get("gflops_per_s", 0) > 0, f"{name}: GFLOP/s > 0")
            check("gflops_per_s" not in nodes.get("relu1", {}), "no GFLOP/s for Relu")
            # Implementations: oneDNN's names for the convolutions (never one of its reference
            # implementations), oneDNN or kiln's GEMM for the Gemm (kiln's below AVX-512), none
            # for kiln's own Relu.
            for name in ("conv1", "conv2", "fc"):
                impl = nodes.get(name, {}).get("implementation", "")
                ok = impl.startswith("oneDNN ") or (name == "fc" and impl == "kiln gemm")
                check(ok and "oneDNN ref" not in impl,
                      f"{name}: implementation {impl!r} is a fast one, not oneDNN's reference")
            check(nodes.get("relu1", {}).get("implementation") == "",
                  f"relu1: no implementation beyond the provider ({nodes.get('relu1')})")
            check(all(n.get("device") == "cpu" for n in nodes.values()),
                  "every node reports device 'cpu' without --device")
            ops = {o["op_type"]: o for o in report.get("op_types", [])}
            check(ops.get("Conv", {}).get("nodes") == 2
                  and ops.get("Conv", {}).get("calls") == 2 * iterations,
                  f"op_types sums the two Conv nodes ({ops.get('Conv')})")
            want_ms = nodes["conv1"]["total_ms"] + nodes["conv2"]["total_ms"]
            check(abs(ops.get("Conv", {}).get("total_ms", 0) - want_ms) < 1e-3,
                  "op_types Conv time == conv1 + conv2")

        try:
            with open(trace_path) as f:
                trace = json.load(f)
        except (OSError, ValueError) as e:
            trace = {}
            check(False, f"trace is JSON ({e})")
        events = trace.get("traceEvents", [])
        xs = [e for e in events if e.get("ph") == "X"]
        check(len(xs) == iterations * (1 + 8), f"{len(xs)} X events == iterations x (run + 8 nodes)")
        ok = all(isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))
                 and e["dur"] >= 0 and "pid" in e and "tid" in e and isinstance(e.get("name"), str)
                 for e in xs)
        check(ok, "every X event has name, ts, dur >= 0, pid, tid")
        node_events = [e for e in xs if e.get("cat") != "run"]
        check(all("op_type" in e.get("args", {}) and "node" in e.get("args", {})
                  for e in node_events), "node events carry node name and op type in args")
        runs = [e for e in xs if e.get("cat") == "run"]
        check(len(runs) == iterations, f"{len(runs)} run events")
        if runs:
            first = runs[0]
            inside = [e for e in node_events
                      if first["ts"] <= e["ts"] <= first["ts"] + first["dur"] + 1e-3]
            check(len(inside) == 8, f"the first run's 8 node events lie inside it ({len(inside)})")

        # By default the optimized graph is profiled: Conv+Relu pairs run as FusedConv, with
        # the FLOPs of their convolutions.
        r = run(args.kiln, [cnn, "--batch", str(batch), "--iterations", "3", "--warmup", "1",
                            "--threads", "1", "--json"])
        check(r.returncode == 0, f"profile (optimized) exits 0 ({r.stderr.strip()})")
        if r.returncode == 0:
            rep = json.loads(r.stdout)
            check(rep.get("optimized") is True and rep.get("imported_nodes") == 8
                  and rep.get("nodes_run", 8) < 8,
                  f"optimized: {rep.get('imported_nodes')} -> {rep.get('nodes_run')} nodes")
            fused = [n for n in rep["nodes"] if n["op_type"] == "FusedConv"]
            check(len(fused) == 2 and sorted(n["flops"] for n in fused) ==
                  sorted([want_flops["conv1"], want_flops["conv2"]]),
                  f"two FusedConv nodes with the convolutions' FLOPs ({fused})")

        # The text table.
        r = run(args.kiln, [cnn, "--batch", "2", "--iterations", "3", "--warmup", "1",
                            "--threads", "1", "--no-optimize"])
        check(r.returncode == 0, "profile (table) exits 0")
        check("median" in r.stdout and "p99" in r.stdout and "items/s" in r.stdout,
              "table prints latency and throughput")
        check("GFLOP/s" in r.stdout and "conv1" in r.stdout and "Conv" in r.stdout,
              "table lists nodes with op types and GFLOP/s")

        # Symbolic dims beyond the batch need --shape.
        seq = os.path.join(tmp, "seq.onnx")
        make_seq_model(seq)
        r = run(args.kiln, [seq, "--iterations", "2"])
        check(r.returncode == 1 and "dim 1 ('seq') is symbolic" in r.stderr
              and "--shape x:" in r.stderr, f"unresolved dim named ({r.stderr.strip()})")
        r = run(args.kiln, [seq, "--iterations", "2", "--shape", "x:3,5,4", "--json"])
        check(r.returncode == 0, f"--shape resolves it ({r.stderr.strip()})")
        if r.returncode == 0:
            rep = json.loads(r.stdout)
            check(rep["inputs"][0]["shape"] == [3, 5, 4] and rep["batch"] == 3,
                  f"--shape used, batch from its first dim ({rep['inputs']}, {rep['batch']})")
        r = run(args.kiln, [seq, "--shape", "nope:1,2,3"])
        check(r.returncode == 1 and "'nope'" in r.stderr, "unknown --shape input named")
        r = run(args.kiln, [seq, "--shape", "x:1,2"])
        check(r.returncode == 1 and "rank 2" in r.stderr, "wrong --shape rank named")
        r = run(args.kiln, [os.path.join(tmp, "missing.onnx")])
        check(r.returncode == 1 and r.stderr.startswith("kiln profile:"), "missing model fails")

        check_file_inputs(args.kiln, tmp, cnn, seq)

    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
