# SPDX-License-Identifier: Apache-2.0
"""Writes kiln's demo model repository.

    /usr/bin/python3 tools/demo/make_demo_models.py OUT_DIR

OUT_DIR/
  add_sub/config.pbtxt             FP32 INPUT0, INPUT1 [-1,16]; max_batch_size 8
  add_sub/1/model.onnx             OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1
  add_sub/sample_request.json      a KServe v2 JSON request (batch of 1)
  digits/1/model.onnx              MLP 64 -> 32 (Relu) -> 10 (Softmax) on the sklearn 8x8 digits;
                                   no config.pbtxt: kiln derives it from the graph
  digits/sample_request.json       one held-out test image, pixels scaled to [0,1]
  digits/sample_expected.json      its true label and the probabilities numpy computes
  digits_image/config.pbtxt        a kiln_image step: a PNG / JPEG upload -> the 64 pixels
  digits_top3/config.pbtxt         a kiln_classify step: the 3 best digits with their names
  digits_pipeline/config.pbtxt     the ensemble IMAGE -> digits_image -> digits -> digits_top3
                                   (outputs top3 and probabilities)

Needs Debian's python3 with numpy, onnx and scikit-learn (python3-numpy, python3-onnx,
python3-sklearn). Deterministic: fixed seeds, fixed split, no timestamps in the files. Exits 1
when the classifier's held-out accuracy is not above 0.9.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8
SEED = 0


def make_model(graph):
    model = helper.make_model(
        graph,
        producer_name="kiln-demo",
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def save_model(model, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def write_json(obj, path):
    with open(path, "w") as f:
        f.write(json.dumps(obj) + "\n")


def float_list(a):
    # float32 values printed with the shortest repr that round-trips through float32.
    return [float(np.format_float_positional(v, unique=True, trim="-"))
            for v in a.astype(np.float32)]


# --- add_sub ------------------------------------------------------------------------------------

ADD_SUB_CONFIG = """\
# SPDX-License-Identifier: Apache-2.0
# Element-wise sum and difference of two FP32 vectors of 16, batched up to 8.
name: "add_sub"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 16 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 16 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
]
version_policy: { latest: { num_versions: 1 } }
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""


def make_add_sub(out_dir):
    shape = ["batch", 16]
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"], name="add"),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"], name="sub"),
        ],
        "add_sub",
        [
            helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, shape),
            helper.make_tensor_value_info("INPUT1", TensorProto.FLOAT, shape),
        ],
        [
            helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, shape),
            helper.make_tensor_value_info("OUTPUT1", TensorProto.FLOAT, shape),
        ],
    )
    model_dir = os.path.join(out_dir, "add_sub")
    save_model(make_model(graph), os.path.join(model_dir, "1", "model.onnx"))
    with open(os.path.join(model_dir, "config.pbtxt"), "w") as f:
        f.write(ADD_SUB_CONFIG)
    a = np.arange(16, dtype=np.float32)
    b = np.full(16, 0.5, dtype=np.float32)
    write_json(
        {
            "id": "add_sub-sample",
            "inputs": [
                {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": float_list(a)},
                {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "data": float_list(b)},
            ],
            "outputs": [{"name": "OUTPUT0"}, {"name": "OUTPUT1"}],
        },
        os.path.join(model_dir, "sample_request.json"),
    )


# --- digits -------------------------------------------------------------------------------------

HIDDEN = 32
CLASSES = 10


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def forward(params, x):
    w1, b1, w2, b2 = params
    h = np.maximum(x @ w1 + b1, 0.0)
    return h, softmax(h @ w2 + b2)


def train_mlp(x, y, rng, epochs=150, batch=32, lr=3e-3, l2=1e-4):
    """Two-layer MLP, cross-entropy, Adam. float64 for the training, float32 for export."""
    n, d = x.shape
    params = [
        rng.normal(0.0, np.sqrt(2.0 / d), (d, HIDDEN)),
        np.zeros(HIDDEN),
        rng.normal(0.0, np.sqrt(2.0 / HIDDEN), (HIDDEN, CLASSES)),
        np.zeros(CLASSES),
    ]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    onehot = np.eye(CLASSES)[y]
    step = 0
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch):
            idx = order[start:start + batch]
            xb, tb = x[idx], onehot[idx]
            h, p = forward(params, xb)
            dz2 = (p - tb) / len(idx)
            gw2 = h.T @ dz2 + l2 * params[2]
            gb2 = dz2.sum(axis=0)
            dh = (dz2 @ params[2].T) * (h > 0)
            gw1 = xb.T @ dh + l2 * params[0]
            gb1 = dh.sum(axis=0)
            step += 1
            for i, g in enumerate((gw1, gb1, gw2, gb2)):
                m[i] = beta1 * m[i] + (1 - beta1) * g
                v[i] = beta2 * v[i] + (1 - beta2) * g * g
                mhat = m[i] / (1 - beta1 ** step)
                vhat = v[i] / (1 - beta2 ** step)
                params[i] = params[i] - lr * mhat / (np.sqrt(vhat) + eps)
    return [p.astype(np.float32) for p in params]


def make_digits(out_dir):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float64)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=SEED, stratify=y)
    params = train_mlp(x_train, y_train, np.random.default_rng(SEED))

    x_test32 = x_test.astype(np.float32)
    _, probs = forward(params, x_test32)
    accuracy = float((probs.argmax(axis=1) == y_test).mean())
    print(f"digits: MLP 64-{HIDDEN}-{CLASSES}, {len(y_train)} train / {len(y_test)} test images, "
          f"held-out accuracy {accuracy:.4f}")

    w1, b1, w2, b2 = params
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["pixels", "fc1.weight", "fc1.bias"], ["fc1"], name="fc1"),
            helper.make_node("Relu", ["fc1"], ["fc1_relu"], name="relu1"),
            helper.make_node("Gemm", ["fc1_relu", "fc2.weight", "fc2.bias"], ["logits"],
                             name="fc2"),
            helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=-1),
        ],
        "digits_mlp",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", CLASSES])],
        initializer=[
            numpy_helper.from_array(w1, "fc1.weight"),
            numpy_helper.from_array(b1, "fc1.bias"),
            numpy_helper.from_array(w2, "fc2.weight"),
            numpy_helper.from_array(b2, "fc2.bias"),
        ],
        doc_string="sklearn 8x8 digits classifier; pixels are the 0..16 values divided by 16",
    )
    model_dir = os.path.join(out_dir, "digits")
    save_model(make_model(graph), os.path.join(model_dir, "1", "model.onnx"))

    sample = x_test32[0]
    write_json(
        {
            "id": "digits-sample",
            "inputs": [
                {"name": "pixels", "shape": [1, 64], "datatype": "FP32",
                 "data": float_list(sample)},
            ],
        },
        os.path.join(model_dir, "sample_request.json"),
    )
    write_json(
        {"label": int(y_test[0]), "probabilities": float_list(probs[0])},
        os.path.join(model_dir, "sample_expected.json"),
    )
    return accuracy


# --- the image pipeline ------------------------------------------------------------------------
# digits_image: a kiln_image step (docs/image.md) turning a PNG / JPEG upload into the 64 pixels
# the digits model takes (gray, 8x8 by area, x / 255); digits_top3: a kiln_classify step
# (docs/text.md) naming the 3 most probable digits; digits_pipeline: the ensemble
# IMAGE -> digits_image -> digits -> digits_top3. tools/demo/digit_images/ holds digit PNGs.


def make_digits_pipeline(out_dir):
    image_dir = os.path.join(out_dir, "digits_image")
    os.makedirs(os.path.join(image_dir, "1"), exist_ok=True)
    with open(os.path.join(image_dir, "config.pbtxt"), "w") as f:
        f.write('''name: "digits_image"
backend: "kiln_image"
max_batch_size: 8
input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "pixels" data_type: TYPE_FP32 dims: [ 64 ] reshape { shape: [ 1, 8, 8 ] } } ]
parameters { key: "color" value { string_value: "GRAY" } }
parameters { key: "resize" value { string_value: "8,8" } }
parameters { key: "filter" value { string_value: "area" } }
''')
    top_dir = os.path.join(out_dir, "digits_top3")
    os.makedirs(os.path.join(top_dir, "1"), exist_ok=True)
    with open(os.path.join(top_dir, "labels.txt"), "w") as f:
        f.write("zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n")
    with open(os.path.join(top_dir, "config.pbtxt"), "w") as f:
        f.write('''name: "digits_top3"
backend: "kiln_classify"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 10 ] } ]
output [ { name: "CLASSES" data_type: TYPE_STRING dims: [ 3 ] } ]
parameters { key: "k" value { string_value: "3" } }
parameters { key: "labels_file" value { string_value: "labels.txt" } }
''')
    pipeline_dir = os.path.join(out_dir, "digits_pipeline")
    os.makedirs(os.path.join(pipeline_dir, "1"), exist_ok=True)
    with open(os.path.join(pipeline_dir, "config.pbtxt"), "w") as f:
        f.write('''name: "digits_pipeline"
platform: "ensemble"
max_batch_size: 4
input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "top3" data_type: TYPE_STRING dims: [ 3 ] },
         { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] } ]
ensemble_scheduling {
  step [
    { model_name: "digits_image" model_version: -1
      input_map { key: "IMAGE" value: "IMAGE" } output_map { key: "pixels" value: "pixels" } },
    { model_name: "digits" model_version: -1
      input_map { key: "pixels" value: "pixels" }
      output_map { key: "probabilities" value: "probabilities" } },
    { model_name: "digits_top3" model_version: -1
      input_map { key: "INPUT" value: "probabilities" } output_map { key: "CLASSES" value: "top3" } }
  ]
}
''')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="repository folder to write (created if missing)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name in ("add_sub", "digits", "digits_image", "digits_top3", "digits_pipeline"):
        shutil.rmtree(os.path.join(args.out_dir, name), ignore_errors=True)
    make_add_sub(args.out_dir)
    make_digits_pipeline(args.out_dir)
    accuracy = make_digits(args.out_dir)
    if accuracy <= 0.9:
        print(f"digits: accuracy {accuracy:.4f} is not above 0.9", file=sys.stderr)
        return 1
    print(f"demo model repository written to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
