#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""kiln's logits against the NumPy reference forward pass (tests/llm/reference.py).

For every test model (GGUF files and Hugging Face directories written by make_models.py
--preset test) kiln computes the logits of every position of a fixed token sequence in one
step (`kiln generate --tokens ... --logits-out`, F32 KV cache) and reference.py computes them in
float64 from the dequantized weights. The tolerance is relative to the largest |logit| and
depends on what kiln rounds that the reference does not:
  f32                  nothing but summation order:                       1e-4
  f16, bf16 (GGUF/HF)  the activations rounded to 16 bits before each dot
                       product (llama.cpp's choice for half weights):     1e-2 (f16), 4e-2 (bf16)
  q8_0, q4_0, q4_k,    the activations quantized to 8 bits per block
  q6_k, q4_k_m         (Q8_0 / Q8_K, as llama.cpp does):                  8e-2
and the argmax must agree on every row where the reference's top-2 gap exceeds twice the error
bound. (kiln's quantized products are checked exactly against llama.cpp by llm_llamacpp and
against the scalar reference kernels by llm_quants_test.)

  tests/llm/check_reference.py --kiln build/kiln --models DIR
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENS = [1, 450, 4996, 17354, 1701, 29916, 432, 5456, 25, 1, 1000, 2000, 31999, 7, 8, 9,
          3000, 3001, 3002, 3003, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]
TOLERANCE = [("f32", 1e-4), ("f16", 1e-2), ("bf16", 4e-2), ("q8_0", 8e-2), ("q4_0", 8e-2),
             ("q4_k_m", 8e-2), ("q4_k", 8e-2), ("q6_k", 8e-2)]


def tolerance(name):
    stem = name[:-len(".gguf")] if name.endswith(".gguf") else name[:-len("-hf")]
    for t, tol in TOLERANCE:
        if stem.endswith("-" + t):
            return t, tol
    return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", required=True)
    args = ap.parse_args()
    models = sorted(glob.glob(os.path.join(args.models, "*.gguf")) +
                    glob.glob(os.path.join(args.models, "*-hf")))
    if not models:
        print(f"check_reference: no models in {args.models}")
        return 1
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            name = os.path.basename(m)
            t, tol = tolerance(name)
            if tol is None:
                failures.append(f"{name}: unknown type")
                continue
            ids = ",".join(map(str, TOKENS))
            k_out = os.path.join(tmp, "kiln.npy")
            r_out = os.path.join(tmp, "ref.npy")
            p = subprocess.run([args.kiln, "generate", m, "--tokens", ids, "--logits-out", k_out,
                                "--kv-dtype", "f32"], capture_output=True, text=True)
            if p.returncode != 0:
                failures.append(f"{name}: kiln failed: {p.stderr.strip()}")
                continue
            p = subprocess.run([sys.executable, os.path.join(HERE, "reference.py"), m, "--tokens",
                                ids, "--out", r_out], capture_output=True, text=True)
            if p.returncode != 0:
                failures.append(f"{name}: reference.py failed: {p.stderr.strip()}")
                continue
            k = np.load(k_out).astype(np.float64)
            r = np.load(r_out).astype(np.float64)
            if k.shape != r.shape:
                failures.append(f"{name}: shapes differ: kiln {k.shape} reference {r.shape}")
                continue
            scale = np.abs(r).max()
            err = np.abs(k - r).max() / scale
            top2 = np.sort(r, axis=1)[:, -2:]
            decided = (top2[:, 1] - top2[:, 0]) > 2 * tol * scale
            argmax_bad = int(((np.argmax(k, 1) != np.argmax(r, 1)) & decided).sum())
            line = (f"{name}: max |kiln - reference| / max |logit| = {err:.2e} (tolerance "
                    f"{tol:.0e}), argmax differs on {argmax_bad} of {int(decided.sum())} "
                    f"decided rows")
            print(line)
            if err > tol or argmax_bad:
                failures.append(line)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
