#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of `kiln validate` with its samples read from input files (--input NAME=FILE,
--inputs, --inputs-dir) instead of a --data directory, on the digits model and its validation
split (tests/data/digits). Quantizes the model first (kiln quantize), then checks:

  * the files give the same metrics as the --data directory holding the same samples (FP32 and
    INT8 against its FP32 reference), as .npy, .pb and FP64 .npy;
  * the metrics follow the files: shuffled samples with the labels shuffled alike keep top-1,
    with the labels in the original order they lose it; a subset gives that subset's numbers
    (equal to --data with --max-samples); --max-samples applies to files too;
  * without --labels there is no accuracy, only agreement;
  * errors: a wrong-shaped or wrong-typed file (naming the file and the input), an unknown input
    name, too many files, a missing file, --data together with input files, no data at all, a
    label count that differs from the samples.

Usage: kiln_validate_test.py --kiln build/kiln --data tests/data/digits
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from onnx import numpy_helper

failures = []


def check(ok, what):
    print(("PASS  " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=240)


def validate(kiln, args, what):
    """Runs validate --json --quiet; the report, or {} after a recorded failure."""
    p = run([kiln, "validate"] + args + ["--json", "--quiet"])
    check(p.returncode == 0, f"{what}: exits 0 ({p.stderr.strip()})")
    if p.returncode != 0:
        return {}
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        check(False, f"{what}: stdout is JSON ({e})")
        return {}


def same_metrics(a, b, keys=("samples", "top1", "top5", "agreement_top1")):
    return all(a.get(k) == b.get(k) for k in keys) and \
        abs(a.get("mean_cosine", 0) - b.get("mean_cosine", 1)) < 1e-9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--data", required=True, help="tests/data/digits")
    a = ap.parse_args()
    kiln = a.kiln
    tmp = tempfile.mkdtemp(prefix="kiln_validate_test_")
    try:
        fp32 = os.path.join(tmp, "digits.onnx")
        shutil.copy(os.path.join(a.data, "digits.onnx"), fp32)
        val = os.path.join(a.data, "val")
        inputs = np.load(os.path.join(val, "inputs.npy"))
        labels = np.load(os.path.join(val, "labels.npy"))
        n = len(labels)
        x_npy = os.path.join(val, "inputs.npy")
        y_npy = os.path.join(val, "labels.npy")
        int8 = os.path.join(tmp, "digits.int8.onnx")
        p = run([kiln, "quantize", fp32, "--calib-dir", os.path.join(a.data, "calib"), "--out",
                 int8, "--quiet", "--json"])
        check(p.returncode == 0, f"kiln quantize writes the INT8 model ({p.stderr.strip()})")

        # The files give what the directory gives.
        d32 = validate(kiln, [fp32, "--data", val], "fp32 --data")
        f32 = validate(kiln, [fp32, "--input", f"image={x_npy}", "--labels", y_npy],
                       "fp32 --input image=inputs.npy --labels")
        check(d32 and f32 and f32["samples"] == n and same_metrics(f32, d32),
              f"fp32: --input gives the --data metrics ({f32.get('top1')} vs {d32.get('top1')})")
        d8 = validate(kiln, [int8, "--data", val], "int8 --data")
        f8 = validate(kiln, [int8, "--input", f"image={x_npy}", "--labels", y_npy],
                      "int8 --input")
        check(d8 and f8 and same_metrics(f8, d8) and "reference" in f8
              and same_metrics(f8["reference"], d8["reference"]),
              "int8: --input gives the --data metrics, FP32 reference included")

        # .pb through --inputs-dir, .pb through --inputs, FP64 .npy: the same numbers.
        tdir = os.path.join(tmp, "test_data_set_0")
        os.makedirs(tdir)
        x_pb = os.path.join(tdir, "input_0.pb")
        with open(x_pb, "wb") as f:
            f.write(numpy_helper.from_array(inputs, "image").SerializeToString())
        r = validate(kiln, [fp32, "--inputs-dir", tdir, "--labels", y_npy], "--inputs-dir (.pb)")
        check(r and same_metrics(r, d32), "--inputs-dir gives the --data metrics")
        r = validate(kiln, [fp32, "--inputs", x_pb, "--labels", y_npy], "--inputs (.pb)")
        check(r and same_metrics(r, d32), "--inputs gives the --data metrics")
        x64 = os.path.join(tmp, "inputs64.npy")
        np.save(x64, inputs.astype(np.float64))
        r = validate(kiln, [fp32, "--input", f"image={x64}", "--labels", y_npy], "FP64 file")
        check(r and same_metrics(r, d32), "FP64 samples are converted for the FP32 input")

        # The metrics follow the data in the files.
        perm = np.random.default_rng(7).permutation(n)
        shuffled = os.path.join(tmp, "shuffled.npy")
        np.save(shuffled, inputs[perm])
        shuffled_labels = os.path.join(tmp, "shuffled_labels.npy")
        np.save(shuffled_labels, labels[perm])
        r = validate(kiln, [fp32, "--input", f"image={shuffled}", "--labels", shuffled_labels],
                     "shuffled samples and labels")
        check(r and r.get("top1") == d32.get("top1"),
              f"shuffled alike: top-1 kept ({r.get('top1')} == {d32.get('top1')})")
        r = validate(kiln, [fp32, "--input", f"image={shuffled}", "--labels", y_npy],
                     "shuffled samples, labels in order")
        # Samples and labels no longer belong together: about 1 in 10 matches by chance.
        check(r and r.get("top1", 100) < 50,
              f"shuffled samples against unshuffled labels lose top-1 ({r.get('top1')})")
        first = os.path.join(tmp, "first100.npy")
        np.save(first, inputs[:100])
        first_labels = os.path.join(tmp, "first100_labels.npy")
        np.save(first_labels, labels[:100])
        r = validate(kiln, [int8, "--input", f"image={first}", "--labels", first_labels],
                     "the first 100 samples")
        d = validate(kiln, [int8, "--data", val, "--max-samples", "100"], "--data --max-samples")
        check(r and d and r["samples"] == 100 and same_metrics(r, d)
              and same_metrics(r["reference"], d["reference"]),
              "100 samples from a file == --data --max-samples 100")
        r = validate(kiln, [fp32, "--input", f"image={x_npy}", "--labels", y_npy,
                            "--max-samples", "30"], "--max-samples with a file")
        d = validate(kiln, [fp32, "--data", val, "--max-samples", "30"], "--data --max-samples 30")
        check(r and d and r["samples"] == 30 and same_metrics(r, d),
              "--max-samples keeps the file's first samples")
        r = validate(kiln, [fp32, "--data", val, "--labels", y_npy, "--max-samples", "30"],
                     "--data --labels --max-samples 30")
        check(r and same_metrics(r, d), "--max-samples keeps the first of the --labels too")
        r = validate(kiln, [int8, "--input", f"image={first}"], "no labels")
        check(r and "top1" not in r and r["samples"] == 100 and 0 <= r["agreement_top1"] <= 100,
              "without --labels: agreement only")
        p = run([kiln, "validate", fp32, "--input", f"image={first}"])
        check(p.returncode == 0 and f"the input files ({first})" in p.stderr,
              "progress names the input files")

        # Errors.
        wrong_shape = os.path.join(tmp, "wrong_shape.npy")
        np.save(wrong_shape, inputs[:, :, :7, :])
        wrong_type = os.path.join(tmp, "wrong_type.npy")
        np.save(wrong_type, inputs.astype(np.int64))
        short_labels = os.path.join(tmp, "short_labels.npy")
        np.save(short_labels, labels[:10])
        errors = [
            ("wrong shape", [fp32, "--input", f"image={wrong_shape}"],
             f"'{wrong_shape}' has shape [{n},1,7,8] (samples on axis 0) but input 'image' is "
             "FP32[batch,1,8,8]"),
            ("wrong dtype", [fp32, "--input", f"image={wrong_type}"],
             f"'{wrong_type}' holds INT64 data but input 'image' is FP32"),
            ("unknown input", [fp32, "--input", f"pixels={x_npy}"],
             "model has no input 'pixels' (inputs: image)"),
            ("too many files", [fp32, "--inputs", f"{x_npy},{x_npy}"],
             "has 1 inputs but 2 files were given"),
            ("missing file", [fp32, "--input", "image=" + os.path.join(tmp, "none.npy")],
             "none.npy"),
            ("--data and --input", [fp32, "--data", val, "--input", f"image={x_npy}"],
             "exclude each other"),
            ("no data", [fp32], "no data given"),
            ("label count", [fp32, "--input", f"image={first}", "--labels", short_labels],
             "holds 10 labels but the inputs hold 100 samples"),
        ]
        for what, args, needle in errors:
            p = run([kiln, "validate"] + args + ["--quiet"])
            lines = p.stderr.strip().splitlines()
            check(p.returncode == 1 and len(lines) == 1 and lines[0].startswith("kiln validate: ")
                  and needle in lines[0], f"error, {what}: {p.stderr.strip()!r}")

        p = run([kiln, "validate", "--help"])
        check(all(flag in p.stdout for flag in ("--input", "--inputs", "--inputs-dir", "--data")),
              "--help lists the input flags")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
