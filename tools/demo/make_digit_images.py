#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the demo's digit images: tools/demo/digit_images/digit_<k>.png and images.json.

The first ten held-out images of the sklearn 8x8 digits (the split the demo's digits model was
not trained on, make_demo_models.py), each value v in 0..16 stored as the gray level
round(v * 255 / 16), scaled up 4x (nearest) to 32x32 PNGs: real handwritten digits as a client
would upload them. images.json gives each file's label and the 64 pixels the digits model takes
(v / 16), so the image pipeline (digits_image -> digits, or the digits_pipeline ensemble) can be
checked against the model fed directly. The files are committed; rerun this to regenerate them.

  tools/demo/make_digit_images.py [--out tools/demo/digit_images]
"""
import argparse
import json
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_demo_models import SEED  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "digit_images"))
    args = ap.parse_args()
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    _, x_test, _, y_test = train_test_split(digits.data, digits.target, test_size=0.25,
                                            random_state=SEED, stratify=digits.target)
    os.makedirs(args.out, exist_ok=True)
    index = []
    for k in range(10):
        values = x_test[k].reshape(8, 8)
        gray = np.round(values * 255.0 / 16.0).astype(np.uint8)
        big = np.kron(gray, np.ones((4, 4), np.uint8))
        name = f"digit_{k}.png"
        Image.fromarray(big, "L").save(os.path.join(args.out, name), optimize=True)
        index.append({"file": name, "label": int(y_test[k]),
                      "pixels": [round(float(v) / 16.0, 6) for v in x_test[k]]})
    with open(os.path.join(args.out, "images.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print(f"wrote {len(index)} digit images to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
