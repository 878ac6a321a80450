#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Safe rollouts against `kiln serve` (docs/rollouts.md).

A repository built here: `clf`, three versions of a linear classifier Y = X @ W_v, split 80/20
between versions 1 and 2, sticky by the `x-user-id` header, with every served request mirrored
to version 3; `orphan`, whose shadow version does not exist; `digits_p`, the digits CNN with
bf16 and int8 precision variants; and `badsplit`, whose weights do not sum to 100. Checks:

  * each user's arm is the one the documented hash (FNV-1a of model, NUL, user id; mod 100)
    gives, over HTTP and gRPC alike, and a user stays on it; the share of users on each arm;
  * a request naming a version is served by it, not split and not mirrored;
  * shadow metrics equal what numpy computes from the weights (requests, top-1 agreements,
    the largest absolute differences), and the answers are the serving version's;
  * a shadow version that cannot serve: counted as failures, the users' answers unaffected;
  * the "precision" request parameter picks a variant (the int8 answer differs from fp32, the
    counters move), an unknown one is refused naming what is served;
  * a split that does not sum to 100 fails to load with a message naming the sum.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from http_integration_test import Checks, free_port  # noqa: E402
import prometheus_text  # noqa: E402

RNG = np.random.default_rng(7)
W = {1: RNG.standard_normal((4, 3)).astype(np.float32)}
W[2] = (W[1] + 0.01 * RNG.standard_normal((4, 3))).astype(np.float32)
W[3] = (W[1] + 0.8 * RNG.standard_normal((4, 3))).astype(np.float32)


def linear_model(w):
    graph = oh.make_graph(
        [oh.make_node("MatMul", ["X", "W"], ["Y"])], "linear",
        [oh.make_tensor_value_info("X", onnx.TensorProto.FLOAT, ["batch", 4])],
        [oh.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, ["batch", 3])],
        [onnx.numpy_helper.from_array(w, "W")])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


CLF_CONFIG = """name: "clf"
max_batch_size: 8
version_policy { all {} }
rollout {
  split { version: 1 weight: 80 }
  split { version: 2 weight: 20 }
  sticky_header: "x-user-id"
  shadow { version: 3 fraction: 1.0 }
}
"""
ORPHAN_CONFIG = """name: "orphan"
max_batch_size: 8
rollout { shadow { version: 9 fraction: 1.0 } }
"""
DIGITS_CONFIG = """name: "digits_p"
max_batch_size: 8
optimization { calibration_dir: "calib" }
rollout { precision_variants: "bf16" precision_variants: "int8" }
"""
BAD_CONFIG = """name: "badsplit"
max_batch_size: 8
version_policy { all {} }
rollout { split { version: 1 weight: 70 } split { version: 2 weight: 20 } }
"""


def build_repo(repo):
    def put(name, config, versions):
        os.makedirs(os.path.join(repo, name), exist_ok=True)
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config)
        for v, model in versions.items():
            os.makedirs(os.path.join(repo, name, str(v)))
            onnx.save(model, os.path.join(repo, name, str(v), "model.onnx"))

    put("clf", CLF_CONFIG, {v: linear_model(W[v]) for v in (1, 2, 3)})
    put("orphan", ORPHAN_CONFIG, {1: linear_model(W[1])})
    put("badsplit", BAD_CONFIG, {1: linear_model(W[1]), 2: linear_model(W[2])})
    put("digits_p", DIGITS_CONFIG, {1: onnx.load(os.path.join(ROOT, "tests/data/digits/digits.onnx"))})
    os.makedirs(os.path.join(repo, "digits_p", "calib"))
    shutil.copy(os.path.join(ROOT, "tests/data/digits/calib/inputs.npy"),
                os.path.join(repo, "digits_p", "calib", "inputs.npy"))


def sticky_arm(model, user):
    """The arm the documented hash gives: FNV-1a 64 of model, NUL, user; mod 100."""
    h = 1469598103934665603
    for b in model.encode() + b"\0" + user.encode():
        h ^= b
        h = (h * 1099511628211) % (1 << 64)
    return 1 if h % 100 < 80 else 2


def call(port, method, path, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def infer_body(x, params=None):
    body = {"inputs": [{"name": "X", "datatype": "FP32", "shape": list(x.shape),
                        "data": x.flatten().tolist()}]}
    if params:
        body["parameters"] = params
    return body


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return prometheus_text.parse(r.read().decode())


def sample(fams, name, **labels):
    fam = fams.get(name)
    if fam is None:
        return None
    for s in fam.samples:
        if all(s.labels.get(k) == v for k, v in labels.items()) and s.name == name:
            return s.value
    return None


def hist(fams, name, **labels):
    fam = fams.get(name)
    out = {}
    if fam is None:
        return out
    for s in fam.samples:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            if s.name.endswith("_count"):
                out["count"] = s.value
            elif s.name.endswith("_sum"):
                out["sum"] = s.value
            elif s.name.endswith("_bucket"):
                out.setdefault("buckets", {})[s.labels["le"]] = s.value
    return out


def wait_for(pred, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return pred()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--proto-dir", default="")
    args = ap.parse_args()
    t = Checks()
    work = tempfile.mkdtemp(prefix="kiln-rollout-")
    repo = os.path.join(work, "repo")
    build_repo(repo)
    http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    log_path = os.path.join(work, "serve.log")
    log = open(log_path, "w+")
    proc = subprocess.Popen(
        [args.kiln, "serve", "--model-repository", repo, "--http-port", str(http_port),
         "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port)],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        # badsplit fails, so the server as a whole never turns ready: wait for each model.
        def all_loaded():
            if proc.poll() is not None:
                return True  # exited: reported below
            try:
                return all(call(http_port, "GET", f"/v2/models/{m}/ready")[0] == 200
                           for m in ("clf", "orphan", "digits_p"))
            except OSError:
                return False
        if not wait_for(all_loaded, 90) or proc.poll() is not None:
            log.seek(0)
            raise SystemExit(f"models did not load: {log.read()[-3000:]}")

        t.run("split: each user on the hashed arm, sticky", lambda: check_split(t, http_port))
        t.run("split: gRPC metadata routes as the HTTP header",
              lambda: check_grpc(t, args, grpc_port))
        t.run("explicit versions are not split or mirrored",
              lambda: check_explicit(t, http_port, metrics_port))
        t.run("shadow agreement metrics", lambda: check_shadow(t, http_port, metrics_port))
        t.run("shadow failures leave the answers alone",
              lambda: check_orphan(t, http_port, metrics_port))
        t.run("precision variants", lambda: check_precision(t, http_port, metrics_port))
        t.run("a split that does not sum", lambda: check_badsplit(t, http_port))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if not t.failed:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"server log: {log_path}")
    sys.exit(0 if t.summary() else 1)


SENT = {"served": {1: 0, 2: 0}, "inputs": []}  # what check_split sent (shadow expectations)


def check_split(t, port):
    users = [f"user-{i}" for i in range(200)]
    wrong, arms = [], {1: 0, 2: 0}
    for u in users:
        x = RNG.standard_normal((1, 4)).astype(np.float32)
        status, body = call(port, "POST", "/v2/models/clf/infer", infer_body(x), {"x-user-id": u})
        if status != 200:
            t.check("split: request answered", False, (status, body))
            return
        v = int(body["model_version"])
        arms[v] = arms.get(v, 0) + 1
        SENT["served"][v] += 1
        SENT["inputs"].append((v, x))
        if v != sticky_arm("clf", u):
            wrong.append((u, v))
        y = np.array(body["outputs"][0]["data"], dtype=np.float32).reshape(1, 3)
        if not np.allclose(y, x @ W[v], rtol=1e-5, atol=1e-5):
            t.check("split: answer is the serving version's", False, (u, v, y, x @ W[v]))
            return
    t.check("split: every user on the arm the hash gives", not wrong, wrong[:5])
    expected2 = sum(1 for u in users if sticky_arm("clf", u) == 2)
    t.check("split: arm shares as hashed (about 20% on version 2)",
            arms.get(2, 0) == expected2 and 20 <= expected2 <= 65, (arms, expected2))
    # One user, ten requests: one arm.
    seen = set()
    for _ in range(10):
        x = RNG.standard_normal((1, 4)).astype(np.float32)
        status, body = call(port, "POST", "/v2/models/clf/infer", infer_body(x),
                            {"X-User-Id": "alice"})
        v = int(body["model_version"])
        seen.add(v)
        SENT["served"][v] += 1
        SENT["inputs"].append((v, x))
    t.check("split: a user stays on one arm (header name case-insensitive)",
            seen == {sticky_arm("clf", "alice")}, seen)
    # Without the header: random draws, both arms seen.
    random_arms = set()
    for _ in range(60):
        x = RNG.standard_normal((1, 4)).astype(np.float32)
        status, body = call(port, "POST", "/v2/models/clf/infer", infer_body(x))
        v = int(body["model_version"])
        random_arms.add(v)
        SENT["served"][v] += 1
        SENT["inputs"].append((v, x))
    t.check("split: requests without the header are spread over both arms",
            random_arms == {1, 2}, random_arms)


def check_grpc(t, args, grpc_port):
    if not args.proto_dir:
        t.check("gRPC split (needs --proto-dir)", False, "no --proto-dir")
        return
    sys.path.insert(0, args.proto_dir)
    import grpc
    import grpc_service_pb2 as pb
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
    stub = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                               request_serializer=pb.ModelInferRequest.SerializeToString,
                               response_deserializer=pb.ModelInferResponse.FromString)
    wrong = []
    for i in range(40):
        user = f"grpc-user-{i}"
        x = RNG.standard_normal((1, 4)).astype(np.float32)
        req = pb.ModelInferRequest(model_name="clf")
        inp = req.inputs.add(name="X", datatype="FP32", shape=[1, 4])
        inp.contents.fp32_contents.extend(x.flatten().tolist())
        resp = stub(req, metadata=(("x-user-id", user),), timeout=30)
        v = int(resp.model_version)
        SENT["served"][v] += 1
        SENT["inputs"].append((v, x))
        if v != sticky_arm("clf", user):
            wrong.append((user, v))
    channel.close()
    t.check("gRPC: every user on the arm the hash gives", not wrong, wrong[:5])


def check_explicit(t, port, metrics_port):
    before = metrics(metrics_port)
    base = sample(before, "kiln_shadow_requests_total", model="clf", version="2",
                  shadow_version="3") or 0
    routed = sample(before, "kiln_rollout_routed_total", model="clf", version="2")
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    for v in (2, 3):
        status, body = call(port, "POST", f"/v2/models/clf/versions/{v}/infer", infer_body(x),
                            {"x-user-id": "alice"})
        t.check(f"explicit version {v} serves", status == 200 and body["model_version"] == str(v),
                (status, body))
    after = metrics(metrics_port)
    t.check("explicit: not mirrored, not counted as routed",
            (sample(after, "kiln_shadow_requests_total", model="clf", version="2",
                    shadow_version="3") or 0) == base and
            sample(after, "kiln_rollout_routed_total", model="clf", version="2") == routed,
            (base, routed))


def check_shadow(t, port, metrics_port):
    # Expected from the weights: every routed request (on version 1 or 2) mirrored to 3.
    exp = {1: [0, 0, 0.0, []], 2: [0, 0, 0.0, []]}  # requests, top-1 agreements, diff sum, diffs
    for v, x in SENT["inputs"]:
        served, shadow = x @ W[v], x @ W[3]
        e = exp[v]
        e[0] += 1
        e[1] += int(np.argmax(served[0]) == np.argmax(shadow[0]))
        d = float(np.max(np.abs(served - shadow)))
        e[2] += d
        e[3].append(d)

    def settled():
        fams = metrics(metrics_port)
        return fams if all(
            sample(fams, "kiln_shadow_compared_total", model="clf", version=str(v),
                   shadow_version="3") == exp[v][0] for v in (1, 2)) else None

    fams = wait_for(settled, 20) or metrics(metrics_port)
    for v in (1, 2):
        labels = dict(model="clf", version=str(v), shadow_version="3")
        got = {k: sample(fams, f"kiln_shadow_{k}_total", **labels)
               for k in ("requests", "failures", "compared", "top1_rows", "top1_agreements")}
        want = {"requests": exp[v][0], "failures": 0, "compared": exp[v][0],
                "top1_rows": exp[v][0], "top1_agreements": exp[v][1]}
        t.check(f"shadow v{v}: counters as computed from the weights", got == want, (got, want))
        h = hist(fams, "kiln_shadow_max_abs_diff", **labels)
        t.check(f"shadow v{v}: max-abs-diff histogram count and sum",
                h.get("count") == exp[v][0] and abs(h.get("sum", -1) - exp[v][2]) <=
                1e-4 * max(1.0, exp[v][2]), (h.get("count"), h.get("sum"), exp[v][2]))
        below_01 = sum(1 for d in exp[v][3] if d <= 0.1)
        t.check(f"shadow v{v}: histogram bucket le=0.1", h.get("buckets", {}).get("0.1") == below_01,
                (h.get("buckets"), below_01))
    t.check("shadow: the versions disagree on some top-1 classes (the check can fail)",
            exp[1][1] < exp[1][0], exp[1][:2])


def check_orphan(t, port, metrics_port):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    ok = True
    for _ in range(5):
        status, body = call(port, "POST", "/v2/models/orphan/infer", infer_body(x))
        y = np.array(body["outputs"][0]["data"], dtype=np.float32).reshape(3, 3) \
            if status == 200 else None
        ok = ok and status == 200 and np.allclose(y, x @ W[1], rtol=1e-5, atol=1e-5)
    t.check("orphan: answers correct while the shadow cannot serve", ok)
    fams = metrics(metrics_port)
    labels = dict(model="orphan", version="1", shadow_version="9")
    t.check("orphan: each mirror counted as a failure",
            sample(fams, "kiln_shadow_failures_total", **labels) == 5 and
            sample(fams, "kiln_shadow_compared_total", **labels) == 0,
            (sample(fams, "kiln_shadow_failures_total", **labels),
             sample(fams, "kiln_shadow_compared_total", **labels)))


def check_precision(t, port, metrics_port):
    val = np.load(os.path.join(ROOT, "tests/data/digits/val/inputs.npy"))[:8].astype(np.float32)
    body = {"inputs": [{"name": "image", "datatype": "FP32", "shape": list(val.shape),
                        "data": val.flatten().tolist()}]}
    answers = {}
    for p in (None, "fp32", "bf16", "int8"):
        b = dict(body)
        if p:
            b["parameters"] = {"precision": p}
        status, r = call(port, "POST", "/v2/models/digits_p/infer", b)
        if status != 200:
            t.check(f"precision {p}: answered", False, (status, r))
            return
        answers[p] = np.array(r["outputs"][0]["data"], dtype=np.float32).reshape(8, 10)
    t.check("precision: fp32 asked of an as-stored FP32 model is the own variant",
            np.array_equal(answers[None], answers["fp32"]))
    d8 = float(np.max(np.abs(answers["int8"] - answers[None])))
    t.check("precision: the int8 answer differs from fp32, and is close",
            0 < d8 < 0.5 * float(np.max(np.abs(answers[None]))), d8)
    t.check("precision: int8 keeps the top-1 classes",
            np.mean(np.argmax(answers["int8"], 1) == np.argmax(answers[None], 1)) >= 0.75)
    fams = metrics(metrics_port)
    got = {p: sample(fams, "kiln_precision_requests_total", model="digits_p", version="1",
                     precision=p) for p in ("own", "bf16", "int8")}
    t.check("precision: per-variant request counters", got == {"own": 2, "bf16": 1, "int8": 1},
            got)
    b = dict(body)
    b["parameters"] = {"precision": "fp16"}
    status, r = call(port, "POST", "/v2/models/digits_p/infer", b)
    t.check("precision: an unloaded variant is refused naming what is served",
            status == 400 and "fp16" in r.get("error", "") and "int8" in r.get("error", ""),
            (status, r))
    b["parameters"] = {"precision": "fp8"}
    status, r = call(port, "POST", "/v2/models/digits_p/infer", b)
    t.check("precision: an unknown precision is refused", status == 400 and
            "fp32, fp16, bf16, int8" in r.get("error", ""), (status, r))
    b["parameters"] = {"service_class": "gold"}
    status, r = call(port, "POST", "/v2/models/digits_p/infer", b)
    t.check("service_class: an unknown class is refused", status == 400 and
            "best_effort" in r.get("error", ""), (status, r))


def check_badsplit(t, port):
    status, index = call(port, "POST", "/v2/repository/index", {})
    entry = [e for e in index if e.get("name") == "badsplit"] if status == 200 else []
    reason = " ".join(e.get("reason", "") for e in entry)
    t.check("badsplit: refused with the sum named",
            entry and "weights sum to 90, not 100" in reason, (status, entry))


if __name__ == "__main__":
    main()
