#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes ResNet-50 and MobileNetV2 (torchvision architectures, random weights) as FP32 ONNX
models and as QDQ models in the format of op/kiln_ops.h's INT8 section, for comparing kiln's
FP32 and INT8 throughput:

    /usr/bin/python3 bench/kernels/make_qdq_models.py /tmp/models
    build/kiln profile /tmp/models/resnet50_fp32.onnx --batch 8 --threads 2
    build/kiln profile /tmp/models/resnet50_qdq.onnx --batch 8 --threads 2

Weights are quantized per output channel from their own range (symmetric INT8); activation
scales come from the ranges of one calibration batch of random images run through the FP32 model
by kiln itself (`kiln run`, every intermediate made a graph output; the kiln binary is
build/kiln or the second argument), so INT8 and FP32 outputs are comparable, though the weights
are random. Structure follows the contract: QuantizeLinear ->
DequantizeLinear on the input of every Conv / Gemm and on its output (after the Relu / Clip
that follows it), INT8 weights with a per-channel DequantizeLinear, INT32 biases with scale
x_scale * w_scale, so residual Adds see DequantizeLinear on both inputs.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, helper, numpy_helper


def export_fp32(model, path):
    model.eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, x, path, opset_version=13, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "N"}, "output": {0: "N"}},
                      do_constant_folding=True)


def calibrate(fp32_path, kiln):
    """Ranges (min, max) of every FP32 tensor of the model on 4 random images."""
    m = onnx.load(fp32_path)
    inferred = onnx.shape_inference.infer_shapes(m)
    outputs = {o.name for o in m.graph.output}
    for vi in inferred.graph.value_info:
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT and vi.name not in outputs:
            m.graph.output.append(vi)
    names = [o.name for o in m.graph.output]
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "calib.onnx")
        onnx.save(m, model)
        x = np.random.default_rng(0).standard_normal((4, 3, 224, 224)).astype(np.float32)
        np.save(os.path.join(d, "x.npy"), x)
        subprocess.run([kiln, "run", model, "--input", f"input={d}/x.npy", "--output-dir",
                        f"{d}/out", "--output-format", "npy", "--no-optimize"], check=True)
        ranges = {}
        for i, name in enumerate(names):
            t = np.load(f"{d}/out/output_{i}.npy")
            ranges[name] = (float(min(t.min(), 0.0)), float(max(t.max(), 0.0)))
        ranges["input"] = (float(min(x.min(), 0.0)), float(max(x.max(), 0.0)))
    return ranges


def act_params(rng):
    """UINT8 scale and zero point covering [lo, hi] (which contains 0)."""
    lo, hi = rng
    scale = max(hi - lo, 1e-6) / 255.0
    return scale, int(np.clip(np.rint(-lo / scale), 0, 255))


def quantize(fp32_path, qdq_path, ranges):
    m = onnx.load(fp32_path)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    graph_outputs = {o.name for o in g.output}
    new_nodes = []  # (after node name or None, node)
    new_inits = []
    quantized = {}  # tensor -> (scale, dq output)
    dq_outputs = {}  # dq output -> scale
    counter = [0]

    def fresh(base):
        counter[0] += 1
        return f"{base}_{counter[0]}"

    def add_init(name, array, dtype=None):
        t = numpy_helper.from_array(array, name)
        if dtype is not None:
            t.data_type = dtype
        new_inits.append(t)
        return name

    def qdq(tensor, scale, zp):
        """QuantizeLinear -> DequantizeLinear after `tensor`; readers read the DQ output."""
        if tensor in quantized or tensor in dq_outputs or tensor in graph_outputs:
            return
        s = add_init(fresh(tensor + "_scale"), np.array(scale, dtype=np.float32))
        z = add_init(fresh(tensor + "_zp"), np.array(zp, dtype=np.uint8))
        q_out, dq_out = fresh(tensor + "_q"), fresh(tensor + "_dq")
        readers = list(consumers.get(tensor, []))
        for r in readers:
            for k, name in enumerate(r.input):
                if name == tensor:
                    r.input[k] = dq_out
        new_nodes.append((tensor, helper.make_node("QuantizeLinear", [tensor, s, z], [q_out])))
        new_nodes.append((tensor, helper.make_node("DequantizeLinear", [q_out, s, z], [dq_out])))
        quantized[tensor] = (scale, dq_out)
        dq_outputs[dq_out] = scale

    producers = {o: n for n in g.node for o in n.output}
    for n in list(g.node):
        if n.op_type not in ("Conv", "Gemm"):
            continue
        x, w = n.input[0], n.input[1]
        if w not in inits:
            continue
        # Input activation.
        if x in ranges:
            qdq(x, *act_params(ranges[x]))
        x_scale = quantized[x][0] if x in quantized else dq_outputs[x]
        # Weight: per output channel, symmetric INT8.
        wf = numpy_helper.to_array(inits[w]).astype(np.float32)
        axis = 0
        flat = np.abs(wf.reshape(wf.shape[0], -1)).max(axis=1)
        ws = np.maximum(flat / 127.0, 1e-8).astype(np.float32)
        wq = np.clip(np.rint(wf / ws.reshape((-1,) + (1,) * (wf.ndim - 1))), -127, 127).astype(
            np.int8)
        wq_name = add_init(w + "_quantized", wq)
        ws_name = add_init(w + "_scale", ws)
        wz_name = add_init(w + "_zp", np.zeros(ws.shape, dtype=np.int8))
        w_dq = fresh(w + "_dq")
        new_nodes.append((None, helper.make_node("DequantizeLinear", [wq_name, ws_name, wz_name],
                                                 [w_dq], axis=axis)))
        n.input[1] = w_dq
        if len(n.input) > 2 and n.input[2] in inits:
            b = numpy_helper.to_array(inits[n.input[2]]).astype(np.float32)
            bs = (x_scale * ws).astype(np.float32)
            bq = np.rint(b / bs).astype(np.int32)
            bq_name = add_init(n.input[2] + "_quantized", bq)
            bs_name = add_init(n.input[2] + "_scale", bs)
            bz_name = add_init(n.input[2] + "_zp", np.zeros(bs.shape, dtype=np.int32))
            b_dq = fresh(n.input[2] + "_dq")
            new_nodes.append((None, helper.make_node("DequantizeLinear",
                                                     [bq_name, bs_name, bz_name], [b_dq], axis=0)))
            n.input[2] = b_dq
        # Output, after a following Relu / Clip.
        out = n.output[0]
        readers = consumers.get(out, [])
        if len(readers) == 1 and readers[0].op_type in ("Relu", "Clip"):
            qdq(readers[0].output[0], *act_params(ranges[readers[0].output[0]]))
        else:
            qdq(out, *act_params(ranges[out]))

    # Insert each new node right after its tensor's producer (or at the front).
    order = list(g.node)
    del g.node[:]
    pending_front = [node for t, node in new_nodes if t is None or t not in producers]
    by_tensor = {}
    for t, node in new_nodes:
        if t is not None and t in producers:
            by_tensor.setdefault(t, []).append(node)
    g.node.extend(pending_front)
    for n in order:
        g.node.append(n)
        for o in n.output:
            g.node.extend(by_tensor.get(o, []))
    used = {i for n in g.node for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    g.initializer.extend(new_inits)
    onnx.checker.check_model(m)
    onnx.save(m, qdq_path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    kiln = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "kiln")
    torch.manual_seed(0)
    for name, ctor in (("resnet50", torchvision.models.resnet50),
                       ("mobilenetv2", torchvision.models.mobilenet_v2)):
        fp32 = f"{out}/{name}_fp32.onnx"
        export_fp32(ctor(), fp32)
        quantize(fp32, f"{out}/{name}_qdq.onnx", calibrate(fp32, kiln))
        print("wrote", fp32, f"{out}/{name}_qdq.onnx")


if __name__ == "__main__":
    main()
