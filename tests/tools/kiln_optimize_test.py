#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of `kiln optimize` and of `kiln run`'s optimizer flags.

Builds three small models with onnx.helper (random weights, symbolic batch dim): a CNN
(Conv+BatchNormalization+Relu, a residual block, global pooling, Gemm+Relu), a transformer
block (LayerNorm decomposition, MatMul+bias+GELU (erf form), multi-head attention with a mask)
and a Relu6 / SiLU / HardSwish MLP. For each: `kiln optimize` writes the optimized model, which
must pass ONNX's checker, hold the expected ai.kiln operators, and compute the same outputs as
the original under `kiln run --no-optimize` (rtol 1e-4); `kiln run` with its default
optimization must agree too. Also checks --list-passes, --disable-pass, --weight-precision
(half-precision weights: FLOAT16 / BFLOAT16 initializers, outputs equal to the FP32 model with
its weights rounded by numpy), and the errors.

Usage: kiln_optimize_test.py --kiln build/kiln
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

failures = []
rng = np.random.default_rng(5)


def check(ok, what):
    print(("PASS  " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, array, name=None):
        self.n += 1
        name = name or f"c{self.n}"
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def rand(self, *shape, lo=-1.0, hi=1.0):
        return self.const(rng.uniform(lo, hi, size=shape).astype(np.float32))

    def op(self, op_type, inputs, **attrs):
        self.n += 1
        out = f"t{self.n}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"n{self.n}", **attrs))
        return out

    def model(self, inputs, outputs, opset=13):
        g = helper.make_graph(self.nodes, "g", inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def scalar(b, v):
    return b.const(np.array(v, dtype=np.float32))


def cnn():
    b = Builder()

    def conv_bn(x, cin, cout):
        c = b.op("Conv", [x, b.rand(cout, cin, 3, 3), b.rand(cout)], pads=[1, 1, 1, 1])
        return b.op("BatchNormalization", [c, b.rand(cout, lo=0.5, hi=1.5), b.rand(cout),
                                           b.rand(cout), b.rand(cout, lo=0.2, hi=2.0)])

    a = b.op("Relu", [conv_bn("x", 3, 8)])
    r = b.op("Relu", [b.op("Add", [conv_bn(a, 8, 8), a])])
    p = b.op("Flatten", [b.op("GlobalAveragePool", [r])])
    y = b.op("Relu", [b.op("Gemm", [p, b.rand(8, 5), b.rand(5)])])
    b.nodes[-1].output[0] = "y"
    return b.model([f32("x", ["N", 3, 8, 8])], [f32("y", ["N", 5])]), \
        {"FusedConv": 2, "FusedGemm": 1}


def transformer():
    b = Builder()
    S, H, D = 6, 2, 4
    E = H * D
    mean = b.op("ReduceMean", ["x"], axes=[-1])
    d = b.op("Sub", ["x", mean])
    var = b.op("ReduceMean", [b.op("Pow", [d, scalar(b, 2.0)])], axes=[-1])
    n = b.op("Div", [d, b.op("Sqrt", [b.op("Add", [var, scalar(b, 1e-5)])])])
    ln = b.op("Add", [b.op("Mul", [n, b.rand(E)]), b.rand(E)])

    # The batch dim as PyTorch exports x.view(x.shape[0], ...): Shape -> Gather -> Unsqueeze ->
    # Concat, which ONNX's shape inference cannot see through (kiln's type_propagation can).
    batch = b.op("Unsqueeze", [b.op("Gather", [b.op("Shape", ["x"]),
                                               b.const(np.array(0, dtype=np.int64))]),
                               b.const(np.array([0], dtype=np.int64))])

    def heads(t):
        shape = b.op("Concat", [batch, b.const(np.array([S, H, D], dtype=np.int64))], axis=0)
        r = b.op("Reshape", [t, shape])
        return b.op("Transpose", [r], perm=[0, 2, 1, 3])

    def proj(t):
        return b.op("Add", [b.op("MatMul", [t, b.rand(E, E)]), b.rand(E)])

    q, k, v = heads(proj(ln)), heads(proj(ln)), heads(proj(ln))
    kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = b.op("Div", [b.op("MatMul", [q, kt]), scalar(b, np.sqrt(D))])
    p = b.op("Softmax", [b.op("Add", [s, "mask"])], axis=-1)
    o = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    o = b.op("Reshape", [o, b.op("Concat", [batch, b.const(np.array([S, -1], dtype=np.int64))],
                                 axis=0)])
    h = proj(o)
    u = b.op("Div", [h, scalar(b, np.sqrt(2.0))])
    g = b.op("Mul", [b.op("Mul", [h, scalar(b, 0.5)]),
                     b.op("Add", [b.op("Erf", [u]), scalar(b, 1.0)])])
    b.op("Add", [g, "x"])
    b.nodes[-1].output[0] = "y"
    return b.model([f32("x", ["N", S, E]), f32("mask", ["N", 1, 1, S])], [f32("y", ["N", S, E])]), \
        {"LayerNormalization": 1, "Attention": 1, "FusedMatMul": 4}


def mlp():
    b = Builder()
    h = b.op("MatMul", ["x", b.rand(6, 6)])
    h = b.op("Clip", [b.op("Add", [h, b.rand(6)]), scalar(b, 0.0), scalar(b, 6.0)])
    h2 = b.op("Add", [b.op("MatMul", [h, b.rand(6, 6)]), b.rand(6)])
    h2 = b.op("Mul", [h2, b.op("Sigmoid", [h2])])
    b.op("HardSwish", [b.op("MatMul", [h2, b.rand(6, 3)])])
    b.nodes[-1].output[0] = "y"
    m = b.model([f32("x", ["N", 6])], [f32("y", ["N", 3])], opset=14)
    return m, {"FusedMatMul": 3}


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def run_outputs(kiln, tmp, what, cases):
    """`kiln run` of each (label, model, flags, inputs) case; output 0 of those that ran, by label
    (a failed run is a check failure naming `what` and the label)."""
    outs = {}
    for label, m, flags, inputs in cases:
        od = os.path.join(tmp, f"{what}_{label.replace(' ', '_')}")
        r = run([kiln, "run", m, "--inputs", inputs, "--output-dir", od, "--output-format", "npy"]
                + flags)
        check(r.returncode == 0, f"{what}: kiln run {label} ({r.stderr.strip()})")
        if r.returncode == 0:
            outs[label] = np.load(os.path.join(od, "output_0.npy"))
    return outs


def bf16_round(a):
    """FP32 values rounded to BFLOAT16 (nearest even) and back, computed from the bits."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32)


def wide_cnn(weights, bf16_gemm_input=False):
    """Conv (W 32x16x3x3) + Relu + Flatten + Gemm (B 2048x10): weights large enough to narrow.
    With `bf16_gemm_input`, the Gemm's input is rounded to BFLOAT16 first (two Casts), as kiln's
    BF16 matmul rounds it on a CPU with BF16 dot products."""
    b = Builder()
    c = b.op("Relu", [b.op("Conv", ["x", b.const(weights["w"]), b.const(weights["b"])],
                           pads=[1, 1, 1, 1])])
    f = b.op("Flatten", [c])
    if bf16_gemm_input:
        f = b.op("Cast", [b.op("Cast", [f], to=TensorProto.BFLOAT16)], to=TensorProto.FLOAT)
    y = b.op("Gemm", [f, b.const(weights["g"]), b.const(weights["c"])])
    b.nodes[-1].output[0] = "y"
    return b.model([f32("x", ["N", 16, 8, 8])], [f32("y", ["N", 10])])


def check_half_weights(kiln, tmp):
    """`kiln optimize --weight-precision fp16|bf16` writes half initializers read by ai.kiln ops;
    the file runs and matches the FP32 model with its weights rounded here (numpy), and `kiln
    profile` reports the halved weight bytes."""
    weights = {"w": rng.uniform(-0.3, 0.3, size=(32, 16, 3, 3)).astype(np.float32),
               "b": rng.uniform(-1, 1, size=(32,)).astype(np.float32),
               "g": rng.uniform(-0.1, 0.1, size=(2048, 10)).astype(np.float32),
               "c": rng.uniform(-1, 1, size=(10,)).astype(np.float32)}
    path = os.path.join(tmp, "wide.onnx")
    onnx.save(wide_cnn(weights), path)
    x = os.path.join(tmp, "wide_x.npy")
    x_values = rng.uniform(-1, 1, size=(2, 16, 8, 8)).astype(np.float32)
    np.save(x, x_values)
    rounders = {"fp16": lambda a: a.astype(np.float16).astype(np.float32), "bf16": bf16_round}
    # On a CPU with BF16 dot products kiln's convolution and Gemm with BF16 weights compute in
    # BF16: their inputs (the graph input x, the Gemm's input) are rounded to BF16 too, so the
    # reference rounds x and the Gemm's input as well.
    # What the kernels compute with here, as kiln reports it (ONEDNN_MAX_CPU_ISA lowers it).
    r = run([kiln, "profile", path, "--iterations", "1", "--warmup", "0", "--json"])
    bf16_dots = r.returncode == 0 and \
        __import__("json").loads(r.stdout)["cpu"]["bf16_dot_products"]
    x_bf16 = os.path.join(tmp, "wide_x_bf16.npy")
    np.save(x_bf16, bf16_round(x_values))
    for precision, proto_type in [("fp16", TensorProto.FLOAT16), ("bf16", TensorProto.BFLOAT16)]:
        out = os.path.join(tmp, f"wide.{precision}.onnx")
        r = run([kiln, "optimize", path, "--out", out, "--weight-precision", precision])
        check(r.returncode == 0 and f"weight precision {precision}" in r.stdout,
              f"{precision}: kiln optimize --weight-precision exits 0 ({r.stderr.strip()})")
        if r.returncode != 0:
            continue
        opt = onnx.load(out)
        inits = {i.name: i for i in opt.graph.initializer}
        half = [n.op_type for n in opt.graph.node
                if n.domain == "ai.kiln" and len(n.input) > 1 and n.input[1] in inits and
                inits[n.input[1]].data_type == proto_type]
        check(sorted(half) == ["FusedConv", "FusedGemm"],
              f"{precision}: the conv and gemm weights are {precision} initializers ({half})")
        rounded = dict(weights, w=rounders[precision](weights["w"]),
                       g=rounders[precision](weights["g"]))
        rpath = os.path.join(tmp, f"wide_rounded_{precision}.onnx")
        onnx.save(wide_cnn(rounded, bf16_gemm_input=precision == "bf16" and bf16_dots), rpath)
        ref_x = x_bf16 if precision == "bf16" and bf16_dots else x
        outs = run_outputs(kiln, tmp, f"wide_{precision}", [
            ("half file", out, ["--no-optimize"], x),
            ("auto on the half file", out, [], x),
            ("flag on the original", path, ["--weight-precision", precision], x),
            ("rounded FP32", rpath, ["--no-optimize"], ref_x)])
        want = outs.get("rounded FP32")
        for label, got in outs.items():
            if label == "rounded FP32" or want is None:
                continue
            ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
            diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("nan")
            check(ok, f"{precision}: {label} matches the FP32 model with rounded weights "
                      f"(max abs difference {diff:.3g})")
    sizes = {}
    for precision in ["fp32", "fp16"]:
        r = run([kiln, "profile", path, "--iterations", "2", "--warmup", "1", "--json",
                 "--weight-precision", precision])
        check(r.returncode == 0, f"kiln profile --weight-precision {precision} ({r.stderr.strip()})")
        if r.returncode == 0:
            j = __import__("json").loads(r.stdout)
            check(j.get("weight_precision") == precision,
                  f"profile reports weight_precision {precision}")
            sizes[precision] = j.get("weight_bytes", 0)
    if len(sizes) == 2:
        # The narrowed weights halve; the biases (42 floats) stay FP32.
        check(sizes["fp16"] * 2 - 42 * 4 == sizes["fp32"],
              f"weight bytes halve ({sizes['fp32']} -> {sizes['fp16']})")
    r = run([kiln, "optimize", path, "--out", os.path.join(tmp, "x.onnx"),
             "--weight-precision", "fp8"])
    check(r.returncode != 0 and "fp8" in r.stderr, "an unknown --weight-precision is an error")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    args = ap.parse_args()
    kiln = args.kiln

    r = run([kiln, "optimize", "--list-passes"])
    check(r.returncode == 0 and "constant_folding" in r.stdout and
          "attention_fusion" in r.stdout, "--list-passes lists the passes")

    with tempfile.TemporaryDirectory() as tmp:
        for name, make in [("cnn", cnn), ("transformer", transformer), ("mlp", mlp)]:
            model, want_ops = make()
            onnx.checker.check_model(model)
            path = os.path.join(tmp, f"{name}.onnx")
            onnx.save(model, path)
            opt_path = os.path.join(tmp, f"{name}.opt.onnx")
            r = run([kiln, "optimize", path, "--out", opt_path])
            check(r.returncode == 0, f"{name}: kiln optimize exits 0 ({r.stderr.strip()})")
            if r.returncode != 0:
                continue
            print(r.stdout)
            check("bias_activation_fusion" in r.stdout and "nodes:" in r.stdout,
                  f"{name}: the pass table is printed")
            opt = onnx.load(opt_path)
            try:
                onnx.checker.check_model(opt)
                check(True, f"{name}: the optimized model passes the ONNX checker")
            except Exception as e:  # noqa: BLE001
                check(False, f"{name}: the optimized model passes the ONNX checker: {e}")
            check(any(o.domain == "ai.kiln" and o.version == 1 for o in opt.opset_import),
                  f"{name}: ai.kiln opset import")
            counts = {}
            for n in opt.graph.node:
                if n.domain == "ai.kiln":
                    counts[n.op_type] = counts.get(n.op_type, 0) + 1
            for op, count in want_ops.items():
                check(counts.get(op, 0) == count,
                      f"{name}: {count} x ai.kiln {op} (got {counts.get(op, 0)})")
            check(len(opt.graph.node) < len(model.graph.node),
                  f"{name}: fewer nodes ({len(model.graph.node)} -> {len(opt.graph.node)})")

            # Same outputs: original unoptimized, optimized file, original with default opt.
            inputs = []
            for i, vi in enumerate(model.graph.input):
                dims = [d.dim_value if d.dim_value > 0 else 3
                        for d in vi.type.tensor_type.shape.dim]
                arr = rng.uniform(-1, 1, size=dims).astype(np.float32)
                p = os.path.join(tmp, f"{name}_in{i}.npy")
                np.save(p, arr)
                inputs.append(p)
            feeds = ",".join(inputs)
            outs = run_outputs(kiln, tmp, name, [
                ("original", path, ["--no-optimize"], feeds),
                ("optimized file", opt_path, ["--no-optimize"], feeds),
                ("default run", path, [], feeds),
                ("one pass off", path, ["--disable-pass", "bias_activation_fusion"], feeds)])
            base = outs.get("original")
            for label, got in outs.items():
                if label == "original" or base is None:
                    continue
                ok = got.shape == base.shape and np.allclose(got, base, rtol=1e-4, atol=1e-5)
                err = float(np.max(np.abs(got - base))) if got.shape == base.shape else -1
                check(ok, f"{name}: {label} matches the original (max abs err {err:.2e})")

        check_half_weights(kiln, tmp)

        r = run([kiln, "optimize", os.path.join(tmp, "cnn.onnx"), "--out",
                 os.path.join(tmp, "x.onnx"), "--disable-pass", "no_such_pass"])
        check(r.returncode == 1 and "unknown optimizer pass 'no_such_pass'" in r.stderr,
              "unknown --disable-pass is an error naming the pass")
        r = run([kiln, "optimize", os.path.join(tmp, "missing.onnx"), "--out",
                 os.path.join(tmp, "x.onnx")])
        check(r.returncode == 1 and "missing.onnx" in r.stderr, "missing model is an error")
        r = run([kiln, "optimize", os.path.join(tmp, "cnn.onnx")])
        check(r.returncode == 1 and "--out" in r.stderr, "--out is required")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
