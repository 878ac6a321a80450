#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of `kiln run`: runs ONNX backend test cases (model + test_data_set_0 from
Debian's libonnx-testdata) through every input form of the command and compares the written
outputs with the expected outputs shipped with the test data (rtol 1e-3, atol 1e-5; exact for
integers). Also checks that every error exits non-zero with a one-line reason.

Usage: kiln_run_test.py --kiln build/kiln --testdata /usr/share/libonnx-testdata/data
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

# One case per operator family of the first op set, several forms each where they differ.
CASES = [
    "test_add", "test_add_bcast", "test_sub_bcast", "test_mul", "test_div", "test_div_bcast",
    "test_relu", "test_sigmoid", "test_tanh",
    "test_softmax_axis_0", "test_softmax_default_axis", "test_softmax_large_number",
    "test_matmul_2d", "test_matmul_4d", "test_gemm_all_attributes", "test_gemm_transposeA",
    "test_reshape_negative_dim", "test_reshape_allowzero_reordered",
    "test_flatten_negative_axis1", "test_transpose_all_permutations_3",
    "test_concat_3d_axis_negative_2", "test_identity", "test_constant",
    "test_conv_with_strides_and_asymmetric_padding", "test_conv_with_autopad_same",
    "test_maxpool_2d_ceil", "test_maxpool_2d_dilations", "test_maxpool_3d_default",
    "test_averagepool_2d_pads_count_include_pad", "test_averagepool_2d_same_lower",
    "test_globalaveragepool", "test_batchnorm_epsilon", "test_batchnorm_example",
]

# Cases with sequence or optional inputs and outputs (SequenceProto / OptionalProto files).
VALUE_CASES = [
    "test_sequence_insert_at_back", "test_optional_get_element_sequence",
    "test_optional_has_element_empty", "test_if_opt", "test_identity_opt",
]

failures = []


def check(ok, what):
    print(("PASS  " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def load_tensor(path):
    if path.endswith(".npy"):
        return np.load(path)
    return numpy_helper.to_array(onnx.load_tensor(path))


def close(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        return False, f"shape/dtype {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
    if np.issubdtype(want.dtype, np.floating):
        ok = np.allclose(got, want, rtol=1e-3, atol=1e-5, equal_nan=True)
        err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
        return ok, f"max abs error {err:g}"
    return bool(np.array_equal(got, want)), "exact"


def load_value(path, type_proto):
    """A .pb value as its declared type says: an array, a list of arrays, or None (none)."""
    kind = type_proto.WhichOneof("value")
    with open(path, "rb") as f:
        data = f.read()
    if kind == "sequence_type":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return [numpy_helper.to_array(t) for t in seq.tensor_values]
    if kind == "optional_type":
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        if opt.elem_type == onnx.OptionalProto.UNDEFINED:
            return None
        if opt.elem_type == onnx.OptionalProto.SEQUENCE:
            return [numpy_helper.to_array(t) for t in opt.sequence_value.tensor_values]
        return numpy_helper.to_array(opt.tensor_value)
    return numpy_helper.to_array(onnx.load_tensor(path))


def same_value(got, want):
    if want is None or got is None:
        return got is want
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and \
            all(close(g, w)[0] for g, w in zip(got, want))
    return not isinstance(got, list) and close(got, want)[0]


def compare_values(case_dir, out_dir):
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    data = os.path.join(case_dir, "test_data_set_0")
    for i, output in enumerate(model.graph.output):
        path = os.path.join(out_dir, f"output_{i}.pb")
        if not os.path.exists(path):
            return False, f"missing {path}"
        want = load_value(os.path.join(data, f"output_{i}.pb"), output.type)
        got = load_value(path, output.type)
        if not same_value(got, want):
            return False, f"output {i}: got {got!r}, expected {want!r}"
    return True, "equal"


def run(kiln, args):
    return subprocess.run([kiln, "run"] + args, capture_output=True, text=True, timeout=120)


def compare_outputs(case_dir, out_dir, ext):
    data = os.path.join(case_dir, "test_data_set_0")
    n = len([f for f in os.listdir(data) if f.startswith("output_")])
    details = []
    for i in range(n):
        want = load_tensor(os.path.join(data, f"output_{i}.pb"))
        path = os.path.join(out_dir, f"output_{i}.{ext}")
        if not os.path.exists(path):
            return False, f"missing {path}"
        ok, detail = close(load_tensor(path), want)
        details.append(detail)
        if not ok:
            return False, f"output {i}: {detail}"
    extra = os.path.join(out_dir, f"output_{n}.{ext}")
    if os.path.exists(extra):
        return False, f"unexpected {extra}"
    return True, ", ".join(details)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--testdata", required=True)
    a = ap.parse_args()
    node = os.path.join(a.testdata, "node")
    if not os.path.isdir(node):
        print(f"FAIL  ONNX test data not found at {node} (install libonnx-testdata)")
        return 1

    with tempfile.TemporaryDirectory() as tmp:
        # A bad environment setting (src/base/settings.h) stops the command, naming it.
        d = os.path.join(node, CASES[0])
        env = dict(os.environ, KILN_CPU_ISA="avx3")
        r = subprocess.run([a.kiln, "run", os.path.join(d, "model.onnx"), "--inputs-dir",
                            os.path.join(d, "test_data_set_0"), "--output-dir",
                            os.path.join(tmp, "bad_env")],
                           capture_output=True, text=True, timeout=120, env=env)
        check(r.returncode == 2 and "KILN_CPU_ISA='avx3' is not one of scalar, avx2, avx512"
              in r.stderr, f"KILN_CPU_ISA=avx3 refused: exit {r.returncode}: {r.stderr.strip()}")

        # --inputs-dir with .pb files: every case.
        for case in CASES:
            d = os.path.join(node, case)
            out = os.path.join(tmp, case)
            r = run(a.kiln, [os.path.join(d, "model.onnx"), "--inputs-dir",
                             os.path.join(d, "test_data_set_0"), "--output-dir", out])
            if r.returncode != 0:
                check(False, f"{case}: exit {r.returncode}: {r.stderr.strip()}")
                continue
            ok, detail = compare_outputs(d, out, "pb")
            check(ok, f"{case} (--inputs-dir): {detail}")

        # Sequence and optional inputs and outputs.
        for case in VALUE_CASES:
            d = os.path.join(node, case)
            out = os.path.join(tmp, case)
            r = run(a.kiln, [os.path.join(d, "model.onnx"), "--inputs-dir",
                             os.path.join(d, "test_data_set_0"), "--output-dir", out])
            if r.returncode != 0:
                check(False, f"{case}: exit {r.returncode}: {r.stderr.strip()}")
                continue
            ok, detail = compare_values(d, out)
            check(ok, f"{case} (sequence / optional values): {detail}")

        # --input NAME=PATH with .npy inputs, --output-format npy.
        d = os.path.join(node, "test_gemm_all_attributes")
        model = onnx.load(os.path.join(d, "model.onnx"))
        specs = []
        for i, inp in enumerate(model.graph.input):
            arr = load_tensor(os.path.join(d, "test_data_set_0", f"input_{i}.pb"))
            p = os.path.join(tmp, f"named_{i}.npy")
            np.save(p, arr)
            specs.append(["--input", f"{inp.name}={p}"])
        out = os.path.join(tmp, "named")
        named = [tok for pair in reversed(specs) for tok in pair]
        r = run(a.kiln, [os.path.join(d, "model.onnx")] + named +
                ["--output-dir", out, "--output-format", "npy"])
        ok, detail = (compare_outputs(d, out, "npy") if r.returncode == 0
                      else (False, r.stderr.strip()))
        check(ok, f"--input NAME=PATH (.npy, any order) and --output-format npy: {detail}")

        # --inputs A,B in graph-input order.
        d = os.path.join(node, "test_add_bcast")
        files = ",".join(os.path.join(d, "test_data_set_0", f"input_{i}.pb") for i in range(2))
        out = os.path.join(tmp, "list")
        r = run(a.kiln, [os.path.join(d, "model.onnx"), "--inputs", files, "--output-dir", out])
        ok, detail = (compare_outputs(d, out, "pb") if r.returncode == 0
                      else (False, r.stderr.strip()))
        check(ok, f"--inputs A,B: {detail}")

        # Errors: non-zero exit and a one-line reason that names the problem.
        garbage = os.path.join(tmp, "garbage.onnx")
        with open(garbage, "wb") as f:
            f.write(b"this is not a model")
        add = os.path.join(node, "test_add")
        add_in = os.path.join(add, "test_data_set_0")
        # A model using an op no runtime has (custom domain), to check the load-time error.
        foo = os.path.join(tmp, "foo.onnx")
        from onnx import helper, TensorProto
        graph = helper.make_graph(
            [helper.make_node("Foo", ["x"], ["y"], domain="kiln.test", name="the_foo")], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                          helper.make_opsetid("kiln.test", 1)]),
                  foo)
        foo_in = os.path.join(tmp, "foo_in.npy")
        np.save(foo_in, np.zeros(2, dtype=np.float32))
        wrong = os.path.join(tmp, "wrong.npy")
        np.save(wrong, np.zeros((2, 2), dtype=np.float32))
        errors = [
            ("missing model file", ["/nonexistent/model.onnx", "--inputs-dir", add_in],
             "cannot read model file"),
            ("garbage model file", [garbage, "--inputs-dir", add_in], "not a valid ONNX model"),
            ("unsupported op", [foo, "--input", "x=" + foo_in],
             "op kiln.test.Foo (opset 1) is not supported (node 'the_foo')"),
            ("unknown input name", [os.path.join(add, "model.onnx"), "--input", "nope=" + wrong],
             "no input 'nope'"),
            ("missing input", [os.path.join(add, "model.onnx"), "--input", "x=" + wrong],
             "no data for input 'y'"),
            ("wrong input shape", [os.path.join(add, "model.onnx"), "--input", "x=" + wrong,
                                   "--input", "y=" + wrong], "input 'x': expected shape"),
            ("unreadable input file", [os.path.join(add, "model.onnx"), "--inputs",
                                       "/nonexistent.pb,/nonexistent.pb"], "/nonexistent.pb"),
            ("unknown input extension", [os.path.join(add, "model.onnx"), "--inputs",
                                         garbage + "," + garbage], ".npy"),
        ]
        seq_case = os.path.join(node, "test_sequence_insert_at_back")
        seq_in = os.path.join(seq_case, "test_data_set_0")
        errors += [
            ("sequence output as .npy", [os.path.join(seq_case, "model.onnx"), "--inputs-dir",
                                         seq_in, "--output-format", "npy"],
             "which a .npy file cannot hold; use .pb"),
            ("sequence input from .npy", [os.path.join(seq_case, "model.onnx"), "--input",
                                          "sequence=" + foo_in, "--input",
                                          "tensor=" + foo_in],
             "a .npy file holds one tensor, but the value is a seq(INT64[?])"),
        ]
        for what, args, needle in errors:
            r = run(a.kiln, args + ["--output-dir", os.path.join(tmp, "err")])
            lines = r.stderr.strip().splitlines()
            ok = r.returncode != 0 and len(lines) == 1 and needle in lines[0]
            check(ok, f"{what}: exit {r.returncode}, stderr {r.stderr.strip()!r}")

    total = len(CASES) + len(VALUE_CASES) + 2 + 10
    print(f"\n{total - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
