#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The digits model: a small CNN trained on scikit-learn's 8x8 handwritten digits.

kiln's quantization tests and docs use it as a real, labeled classifier that trains in seconds.
The outputs are committed under tests/data/digits/ (well under 1 MB), so the tests need neither
torch nor sklearn. To regenerate them (Debian packages python3-torch, python3-sklearn, python3-onnx):

    /usr/bin/python3 scripts/models/make_digits.py --out tests/data/digits

Writes:
    digits.onnx         input "image" FP32 [batch, 1, 8, 8] (pixels / 16), output "logits" FP32
                        [batch, 10]; dynamic batch dim; opset 13
    val/inputs.npy      the held-out validation split, FP32 [N, 1, 8, 8]
    val/labels.npy      its labels, INT64 [N]
    calib/inputs.npy    calibration samples drawn from the TRAIN split, FP32 [M, 1, 8, 8]

Everything is seeded (split, initialization, batch order), so reruns give the same split and
nearly the same weights (torch's CPU kernels are deterministic for this model on one thread).
"""

import argparse
import os

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 1234
VAL_FRACTION = 0.3
CALIB_SAMPLES = 256


class DigitsNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(32)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc1 = torch.nn.Linear(64 * 4 * 4, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        return self.fc2(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/data/digits", help="output directory")
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = digits.target.astype(np.int64)
    x_train, x_val, y_train, y_val = train_test_split(
        x, y, test_size=VAL_FRACTION, random_state=SEED, stratify=y)

    model = DigitsNet()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    gen = torch.Generator().manual_seed(SEED)
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xt), generator=gen)
        for i in range(0, len(xt), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        val_pred = model(torch.from_numpy(x_val)).argmax(1).numpy()
    print(f"validation top-1: {100.0 * (val_pred == y_val).mean():.2f}% on {len(y_val)} samples")

    os.makedirs(os.path.join(args.out, "val"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "calib"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    calib = x_train[rng.choice(len(x_train), CALIB_SAMPLES, replace=False)]
    np.save(os.path.join(args.out, "val", "inputs.npy"), np.ascontiguousarray(x_val))
    np.save(os.path.join(args.out, "val", "labels.npy"), y_val)
    np.save(os.path.join(args.out, "calib", "inputs.npy"), np.ascontiguousarray(calib))

    path = os.path.join(args.out, "digits.onnx")
    torch.onnx.export(model, torch.zeros(1, 1, 8, 8), path, input_names=["image"],
                      output_names=["logits"], dynamic_axes={"image": {0: "batch"},
                                                             "logits": {0: "batch"}},
                      opset_version=13, do_constant_folding=False)
    import onnx
    onnx.checker.check_model(onnx.load(path))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
