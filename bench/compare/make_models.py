#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the ONNX models of the engine comparison (bench/compare/compare.py) into a folder.

Every model has random weights (seeded), a symbolic batch dimension, and is exported with
Debian's python3-torch so that kiln, ONNX Runtime and PyTorch run the very same network:

  resnet50      torchvision ResNet-50, input [N,3,224,224]
  mobilenet_v2  torchvision MobileNetV2, input [N,3,224,224]
  bert_base     a BERT-base-like encoder: 12 layers, hidden 768, 12 heads, FFN 3072,
                sequence 128
  bert_tiny     a bert-tiny-like encoder: 2 layers, hidden 128, 2 heads, FFN 512, sequence 128
  bert          a 4-layer BERT-style encoder (hidden 256, 4 heads, FFN 1024, sequence 128)
                The encoders are written out op by op so the export has the patterns an
                optimizer must find: LayerNorm as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/
                Mul/Add, GELU in its Erf form, attention as MatMul, scale, additive mask,
                Softmax, MatMul. Inputs: hidden states [N,128,H] and an additive mask [N,1,1,128].
  mlp           the 3-layer MLP (784-512-512-10, ReLU) of a small classifier
  gemm          one FP32 MatMul [N,2048] x [2048,2048]: run at batch 2048 it measures the
                machine's FP32 GEMM peak (compare.py's peak line)

  bench/compare/make_models.py --out build/bench-models [--models resnet50,bert]

A model file that already exists is kept (delete it to regenerate). The PyTorch modules are also
what compare.py times for the eager and TorchScript columns (build_module()).
"""
import argparse
import math
import os
import sys

MODELS = ("resnet50", "mobilenet_v2", "bert_base", "bert_tiny", "bert", "mlp", "gemm")
SEQ = 128
# Encoder sizes: layers, hidden, heads, FFN.
BERTS = {"bert_base": (12, 768, 12, 3072), "bert_tiny": (2, 128, 2, 512),
         "bert": (4, 256, 4, 1024)}
GEMM = 2048
# Per-item input shapes by model (the batch dim comes first at run time); one output, "output".
SHAPES = {"resnet50": {"input": (3, 224, 224)}, "mobilenet_v2": {"input": (3, 224, 224)},
          "mlp": {"input": (784,)}, "gemm": {"input": (GEMM,)}}
SHAPES.update({name: {"hidden": (SEQ, size[1]), "mask": (1, 1, SEQ)}
               for name, size in BERTS.items()})


def _torch():
    import torch
    return torch


def build_bert(layers=4, hidden=256, heads=4, ffn=1024):
    torch = _torch()
    nn = torch.nn

    class LayerNorm(nn.Module):
        def __init__(self, d, eps=1e-12):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))
            self.bias = nn.Parameter(0.1 * torch.randn(d))
            self.eps = eps

        def forward(self, x):
            mean = x.mean(-1, keepdim=True)
            var = (x - mean).pow(2).mean(-1, keepdim=True)
            return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(hidden, hidden)
            self.k = nn.Linear(hidden, hidden)
            self.v = nn.Linear(hidden, hidden)
            self.o = nn.Linear(hidden, hidden)
            self.ln1 = LayerNorm(hidden)
            self.f1 = nn.Linear(hidden, ffn)
            self.f2 = nn.Linear(ffn, hidden)
            self.ln2 = LayerNorm(hidden)

        def split(self, x):
            n, s, _ = x.shape
            return x.view(n, s, heads, hidden // heads).transpose(1, 2)

        def forward(self, x, mask):
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hidden // heads) + mask
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
            n, _, s, _ = ctx.shape
            ctx = ctx.transpose(1, 2).reshape(n, s, hidden)
            x = self.ln1(x + self.o(ctx))
            h = self.f1(x)
            h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
            return self.ln2(x + self.f2(h))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Layer() for _ in range(layers))

        def forward(self, x, mask):
            # mask: [N,1,1,S] additive (0 keep, -10000 masked)
            for layer in self.layers:
                x = layer(x, mask)
            return x

    return Bert()


def build_module(name):
    """The PyTorch module of `name` in eval mode, with seeded random weights."""
    torch = _torch()
    if name not in SHAPES:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    torch.manual_seed(0)
    if name in ("resnet50", "mobilenet_v2"):
        import torchvision
        return getattr(torchvision.models, name)(weights=None).eval()
    if name in BERTS:
        layers, hidden, heads, ffn = BERTS[name]
        return build_bert(layers, hidden, heads, ffn).eval()
    nn = torch.nn
    if name == "gemm":
        return nn.Linear(GEMM, GEMM, bias=False).eval()
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10)).eval()


def make_inputs(name, batch, seed=0):
    """Random inputs for `batch` items, as numpy float32 arrays by input name."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = {}
    for input_name, shape in SHAPES[name].items():
        if input_name == "mask":
            m = np.zeros((batch,) + shape, np.float32)
            m[..., shape[-1] * 3 // 4:] = -10000.0  # the last quarter of each sequence is padding
            out[input_name] = m
        else:
            out[input_name] = rng.standard_normal((batch,) + shape).astype(np.float32)
    return out


def export(name, path):
    torch = _torch()
    module = build_module(name)
    shapes, outputs = SHAPES[name], ["output"]
    args = tuple(torch.from_numpy(a) for a in make_inputs(name, 1).values())
    dynamic = {n: {0: "batch"} for n in list(shapes) + outputs}
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(module, args, tmp, input_names=list(shapes), output_names=outputs,
                          dynamic_axes=dynamic, opset_version=13, do_constant_folding=True)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for <model>.onnx")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        path = os.path.join(args.out, name + ".onnx")
        if os.path.exists(path):
            continue
        print(f"make_models: exporting {name} -> {path}", file=sys.stderr, flush=True)
        export(name, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
