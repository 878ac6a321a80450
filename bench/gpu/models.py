# SPDX-License-Identifier: Apache-2.0
"""The networks of bench/gpu, as PyTorch modules with seeded random weights, and their ONNX export.

The GPU machine has PyTorch but not torchvision or the onnx package, so ResNet-50 is written out
here (torchvision's architecture: bottleneck blocks [3, 4, 6, 3], stride on the 3x3 conv) and the
BERT-base encoder is bench/compare/make_models.py's. Both compute in FP16 behind FP32 inputs and
outputs (a Cast at each end), so that kiln, PyTorch eager and torch.compile run the very same
FP16 network on the same FP32 data.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compare"))


def _torch():
    import torch
    return torch


def resnet50():
    torch = _torch()
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + (x if self.down is None else self.down(x)))

    class ResNet50(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
                                      nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(3, stride=2, padding=1))
            blocks, cin = [], 64
            for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(count):
                    blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                    cin = width * 4
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(2048, 1000)

        def forward(self, x):
            x = self.blocks(self.stem(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    return ResNet50()



def half_module(name):
    """The FP16 network `name` ("resnet50" or "bert_base") behind FP32 inputs and outputs, in eval
    mode with seeded random weights (BatchNorm statistics randomized so they are not identity)."""
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(0)
    if name == "resnet50":
        inner = resnet50()
        for m in inner.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    elif name == "bert_base":
        import make_models
        inner = make_models.build_bert(12, 768, 12, 3072)
    else:
        raise ValueError(name)
    inner = inner.eval().half()

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, *xs):
            return self.inner(*(x.half() for x in xs)).float()

    return Wrapped().eval()


SEQ = 128


def inputs(name, batch, device="cpu"):
    """FP32 inputs of `name` for `batch` items, seeded."""
    torch = _torch()
    g = torch.Generator().manual_seed(batch)
    if name == "resnet50":
        return (torch.randn(batch, 3, 224, 224, generator=g).to(device),)
    hidden = torch.randn(batch, SEQ, 768, generator=g)
    mask = torch.zeros(batch, 1, 1, SEQ)
    mask[..., SEQ * 3 // 4:] = -10000.0
    return (hidden.to(device), mask.to(device))


def input_names(name):
    return ["input"] if name == "resnet50" else ["hidden", "mask"]


def export(name, path):
    """Writes the ONNX file of half_module(name), batch dimension symbolic, opset 17. Tries the
    TorchScript exporter, then the dynamo one; raises with both errors when neither works."""
    torch = _torch()
    module = half_module(name).cuda()
    args = inputs(name, 1, "cuda")
    names = input_names(name)
    dynamic = {n: {0: "batch"} for n in names + ["output"]}
    tmp = path + ".tmp"
    errors = []
    with torch.no_grad():
        for dynamo in (False, True):
            try:
                kwargs = dict(input_names=names, output_names=["output"], opset_version=17)
                if dynamo:
                    torch.onnx.export(module, args, tmp, dynamo=True,
                                      dynamic_shapes=[{0: torch.export.Dim("batch")}] * len(args),
                                      **kwargs)
                else:
                    torch.onnx.export(module, args, tmp, dynamic_axes=dynamic,
                                      do_constant_folding=True, dynamo=False, **kwargs)
                os.replace(tmp, path)
                return
            except Exception as e:  # noqa: BLE001: report each exporter's failure
                errors.append(f"{'dynamo' if dynamo else 'torchscript'} exporter: {e}")
    raise RuntimeError("; ".join(errors))
