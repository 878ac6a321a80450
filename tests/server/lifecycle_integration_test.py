#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of model lifecycle, repository and statistics endpoints and graceful shutdown
of `kiln serve` (Debian's python3 with numpy and onnx; the HTTP client is the standard library).

Each scenario starts its own `kiln serve` on a temporary repository built from the demo models
(plus a broken model, warmup configs, or a deliberately slow model written here with onnx):

  explicit  --model-control-mode=explicit: POST /v2/repository/index (empty body, {"ready":true}),
            .../models/{m}/load and .../unload with their answers and errors (a failing model and
            a failing warmup are reported with a reason while the others keep serving), a config
            override, statistics JSON, 501 for a {repo} segment.
  none      the default mode: load/unload refused with 503, a broken model reported in the index
            as UNAVAILABLE with its reason, the others serving, readiness false.
  poll      --repository-poll-secs=1: an added model, an added version (clients keep getting 200
            across the switch), a changed config and a removed model are picked up.
  shutdown  SIGTERM while slow requests are running and queued: /v2/health/ready turns false at
            once, new inference gets 503, every accepted request gets 200, exit status 0.
  timeout   SIGTERM with more queued work than --exit-timeout-secs allows: exit status 0 soon
            after the timeout, and the log says how many requests were abandoned.
  schedule  dynamic batching over HTTP: a request whose `timeout` parameter expires while it is
            queued gets 504 at once; a full queue (max_queue_size) answers 429 with Retry-After;
            the queued requests run as one batch, which the statistics show.

    /usr/bin/python3 lifecycle_integration_test.py --kiln build/kiln --repo build/demo_models
"""

import argparse
import base64
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_integration_test as h  # noqa: E402  (Checks, Client, Server, request helpers)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

POLL_WAIT_S = 15.0


# ---------------------------------------------------------------------------------------------
# Repository building.

def copy_model(src_repo, dst_repo, name, new_name=None):
    new_name = new_name or name
    shutil.copytree(os.path.join(src_repo, name), os.path.join(dst_repo, new_name))
    config = os.path.join(dst_repo, new_name, "config.pbtxt")
    if os.path.exists(config) and new_name != name:
        with open(config) as f:
            text = f.read()
        with open(config, "w") as f:
            f.write(text.replace(f'name: "{name}"', f'name: "{new_name}"'))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def add_sub_warmup_config(sample):
    return (f'max_batch_size: 8\nmodel_warmup [ {{ name: "{sample}" batch_size: 2 count: 2\n'
            '  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } }\n'
            '  inputs { key: "INPUT1" value: { data_type: TYPE_FP32 dims: [ %s ] random_data: true } }\n'
            '} ]\n')


def write_slow_model(repo, name="slow", layers=4):
    """X[1,64] -> Tile to [2048,64] -> MatMul chain of 512x512 -> mean -> Y[1,8]: about 4 GFLOP
    per request (tens of milliseconds with the fast kernels), and a tiny JSON request. The
    scenarios measure one request and size their load from it."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([2048, 1], dtype=np.int64), "reps"),
             numpy_helper.from_array((rng.standard_normal((64, 512)) * 0.05).astype(np.float32),
                                     "W0"),
             numpy_helper.from_array((rng.standard_normal((512, 8)) * 0.05).astype(np.float32),
                                     "Wout")]
    nodes = [helper.make_node("Tile", ["X", "reps"], ["T"]),
             helper.make_node("MatMul", ["T", "W0"], ["H0"])]
    for i in range(layers):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((512, 512)) * 0.05).astype(np.float32), f"W{i + 1}"))
        nodes.append(helper.make_node("MatMul", [f"H{i}", f"W{i + 1}"], [f"H{i + 1}"]))
    nodes.append(helper.make_node("ReduceMean", [f"H{layers}"], ["M"], axes=[0], keepdims=1))
    nodes.append(helper.make_node("MatMul", ["M", "Wout"], ["Y"]))
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    write(os.path.join(repo, name, "1", "model.onnx"), model.SerializeToString())


SLOW_REQUEST = {"inputs": [h.tensor("X", "FP32", [1, 64], [1.0] * 64)]}


# ---------------------------------------------------------------------------------------------
# Helpers.

def index(c, body=""):
    r = c.post("/v2/repository/index", body)
    if r.status != 200:
        raise AssertionError(f"index answered {r!r}")
    return r.json()


def entries(doc, name):
    return [e for e in doc if e.get("name") == name]


def wait_for(predicate, timeout=POLL_WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def add_sub_ok(c, path="/v2/models/add_sub/infer", batch=1):
    rows = [([1.0] * 16, [0.5] * 16)] * batch
    r = c.post(path, h.add_sub_request(rows))
    return r.status == 200 and h.close_enough(h.flat(h.outputs_by_name(r.json())["OUTPUT0"]
                                                     ["data"]), [1.5] * 16 * batch), r


def start(t, kiln, repo, args, name):
    port = h.free_port()
    server = h.Server(kiln, repo, port, args)
    ready, why = server.wait_ready()
    if not ready:
        # Some scenarios start unready on purpose (a broken model); wait for liveness instead.
        deadline = time.monotonic() + h.READY_TIMEOUT_S
        while time.monotonic() < deadline and server.proc.poll() is None:
            try:
                c = h.Client(port, timeout=2)
                live = c.get("/v2/health/live").status == 200
                c.close()
                if live:
                    return server, port
            except OSError:
                pass
            time.sleep(0.2)
        t.check(f"{name}: server up", False, why)
        return None, port
    return server, port


SANITIZER_MARKS = ("ThreadSanitizer", "AddressSanitizer", "LeakSanitizer", "runtime error:")


def check_log_clean(t, server, name):
    """Sanitizer builds report into the server's output; any report fails the scenario."""
    log = server.output()
    marks = [m for m in SANITIZER_MARKS if m in log]
    t.check(f"{name}: no sanitizer report in the server log", not marks, ", ".join(marks))


def finish(t, server, name):
    status = server.terminate()
    t.check(f"{name}: exits with status 0 on SIGTERM", status == 0, f"status {status}")
    check_log_clean(t, server, name)
    if t.failed:
        print("---- server output ----\n" + server.output()[-15000:] + "-----------------------",
              flush=True)


# ---------------------------------------------------------------------------------------------
# Scenarios.

def scenario_explicit(t, kiln, demo, tmp):
    repo = os.path.join(tmp, "explicit")
    os.makedirs(repo)
    copy_model(demo, repo, "add_sub")
    copy_model(demo, repo, "digits")
    write(os.path.join(repo, "broken", "1", "model.onnx"), b"this is not an ONNX model")
    copy_model(demo, repo, "add_sub", "warm_ok")
    write(os.path.join(repo, "warm_ok", "config.pbtxt"), add_sub_warmup_config("ok") % "16")
    copy_model(demo, repo, "add_sub", "warm_bad")
    write(os.path.join(repo, "warm_bad", "config.pbtxt"), add_sub_warmup_config("bad") % "15")
    server, port = start(t, kiln, repo, ["--model-control-mode", "explicit",
                                         "--load-model", "add_sub"], "explicit")
    if server is None:
        return
    c = h.Client(port)
    try:
        t.check("explicit: ready with only --load-model models loaded",
                c.get("/v2/health/ready").status == 200)
        doc = index(c)
        t.check("explicit: index (empty body) is a JSON array of every model",
                isinstance(doc, list) and sorted({e["name"] for e in doc}) ==
                ["add_sub", "broken", "digits", "warm_bad", "warm_ok"], repr(doc))
        t.check("explicit: add_sub READY version \"1\"",
                entries(doc, "add_sub") == [{"name": "add_sub", "version": "1", "state": "READY"}],
                repr(doc))
        t.check("explicit: a model never loaded is listed by name only",
                entries(doc, "digits") == [{"name": "digits"}], repr(doc))
        t.check("explicit: {\"ready\":true} lists only READY models",
                [e["name"] for e in index(c, {"ready": True})] == ["add_sub"])
        r = c.post("/v2/repository/index", {"ready": "yes"})
        t.check("explicit: non-boolean ready -> 400", r.status == 400 and "ready" in r.error(),
                repr(r))

        r = c.post("/v2/repository/models/digits/load", "")
        t.check("explicit: load digits (empty body) -> 200, empty body",
                r.status == 200 and r.body == b"", repr(r))
        t.check("explicit: digits READY after load",
                entries(index(c), "digits") == [{"name": "digits", "version": "1",
                                                  "state": "READY"}])
        r = c.post("/v2/models/digits/infer",
                   {"inputs": [h.tensor("pixels", "FP32", [1, 64], [0.5] * 64)]})
        t.check("explicit: digits infers after load", r.status == 200, repr(r))

        r = c.post("/v2/repository/models/broken/load", {})
        t.check("explicit: load of a broken model -> 400 naming it",
                r.status == 400 and "load failed for model 'broken'" in r.error(), repr(r))
        broken = entries(index(c), "broken")
        t.check("explicit: index shows the broken model UNAVAILABLE with a reason",
                len(broken) == 1 and broken[0].get("state") == "UNAVAILABLE"
                and "model.onnx" in broken[0].get("reason", ""), repr(broken))
        ok, r = add_sub_ok(c)
        t.check("explicit: add_sub keeps serving next to the broken model", ok, repr(r))
        t.check("explicit: not ready while a requested model failed",
                c.get("/v2/health/ready").status == 400)
        r = c.post("/v2/repository/models/broken/unload", "")
        t.check("explicit: unload of the failed model -> 200, ready again",
                r.status == 200 and c.get("/v2/health/ready").status == 200, repr(r))

        r = c.post("/v2/repository/models/warm_ok/load", "")
        t.check("explicit: a model with a passing model_warmup loads", r.status == 200, repr(r))
        r = c.post("/v2/repository/models/warm_bad/load", "")
        t.check("explicit: a failing warmup fails the load, naming the sample",
                r.status == 400 and "warmup sample 'bad' failed" in r.error(), repr(r))
        bad = entries(index(c), "warm_bad")
        t.check("explicit: index shows the failed warmup as the reason",
                len(bad) == 1 and bad[0].get("state") == "UNAVAILABLE"
                and "warmup sample 'bad'" in bad[0].get("reason", ""), repr(bad))
        c.post("/v2/repository/models/warm_bad/unload", "")

        # Config override: max_batch_size 2 (the rest completed from the graph), then back.
        r = c.post("/v2/repository/models/add_sub/load",
                   {"parameters": {"config": json.dumps({"max_batch_size": 2})}})
        t.check("explicit: load with a config override -> 200", r.status == 200, repr(r))
        ok, r = add_sub_ok(c, batch=3)
        t.check("explicit: the override applies (batch 3 > max_batch_size 2 -> 400)",
                not ok and r.status == 400, repr(r))
        r = c.post("/v2/repository/models/add_sub/load", "")
        ok, r = add_sub_ok(c, batch=3)
        t.check("explicit: a plain load restores the repository's config", ok, repr(r))
        r = c.post("/v2/repository/models/add_sub/load",
                   {"parameters": {"config": "{\"max_batch_size\": \"x\"}"}})
        t.check("explicit: an invalid config override -> 400, the model keeps serving",
                r.status == 400 and add_sub_ok(c)[0], repr(r))

        # Statistics after some inferences.
        for _ in range(3):
            add_sub_ok(c)
        r = c.get("/v2/models/add_sub/stats")
        ok = r.status == 200
        stats = r.json().get("model_stats", []) if ok else []
        members = ("success", "fail", "queue", "compute_input", "compute_infer",
                   "compute_output", "cache_hit", "cache_miss")
        ok = ok and len(stats) == 1 and stats[0].get("name") == "add_sub" \
            and stats[0].get("version") == "1" \
            and all(isinstance(stats[0].get(k), int) and stats[0][k] >= 0
                    for k in ("last_inference", "inference_count", "execution_count")) \
            and all(isinstance(stats[0]["inference_stats"][m][f], int)
                    for m in members for f in ("count", "ns")) \
            and isinstance(stats[0].get("batch_stats"), list)
        t.check("explicit: /v2/models/add_sub/stats has every member perf_analyzer reads", ok,
                repr(r))
        r = c.get("/v2/models/stats")
        names = sorted((s["name"], s["version"]) for s in r.json().get("model_stats", []))
        t.check("explicit: /v2/models/stats lists every ready version",
                r.status == 200 and names == [("add_sub", "1"), ("digits", "1"),
                                              ("warm_ok", "1")], repr(names))
        r = c.get("/v2/models/add_sub/versions/1/stats")
        t.check("explicit: /versions/1/stats -> 200", r.status == 200, repr(r))
        r = c.get("/v2/models/broken/stats")
        t.check("explicit: stats of a model that is not ready -> 400",
                r.status == 400 and r.error() == "requested model 'broken' is not available",
                repr(r))
        r = c.get("/v2/models/add_sub/versions/5/stats")
        t.check("explicit: stats of a version that is not ready -> 400",
                r.status == 400 and "version is not available" in r.error(), repr(r))
        extensions = c.get("/v2").json().get("extensions", [])
        t.check("explicit: server metadata advertises statistics and model_repository",
                "statistics" in extensions and "model_repository" in extensions,
                repr(extensions))

        # Unload.
        r = c.post("/v2/repository/models/digits/unload",
                   {"parameters": {"unload_dependents": False}})
        t.check("explicit: unload digits -> 200, empty body", r.status == 200 and r.body == b"",
                repr(r))
        r = c.post("/v2/models/digits/infer",
                   {"inputs": [h.tensor("pixels", "FP32", [1, 64], [0.5] * 64)]})
        t.check("explicit: inference on the unloaded model -> 503", r.status == 503, repr(r))
        t.check("explicit: index shows digits UNAVAILABLE \"unloaded\"",
                entries(index(c), "digits") == [{"name": "digits", "version": "1",
                                                  "state": "UNAVAILABLE",
                                                  "reason": "unloaded"}])
        t.check("explicit: still ready after an unload", c.get("/v2/health/ready").status == 200)
        r = c.post("/v2/repository/models/no_such_model/unload", "")
        t.check("explicit: unload of an unknown model -> 200", r.status == 200, repr(r))
        r = c.post("/v2/repository/models/no_such_model/load", "")
        t.check("explicit: load of an unknown model -> 400",
                r.status == 400 and "failed to poll from model repository" in r.error(), repr(r))
        r = c.post("/v2/repository/my_repo/models/add_sub/load", "")
        t.check("explicit: a {repo} segment -> 501",
                r.status == 501 and "repository_name" in r.error(), repr(r))
        # Model files sent in the load request (base64): a model that is not in the repository.
        with open(os.path.join(demo, "add_sub", "1", "model.onnx"), "rb") as f:
            onnx_b64 = base64.b64encode(f.read()).decode()
        r = c.post("/v2/repository/models/uploaded/load",
                   {"parameters": {"config": json.dumps({"max_batch_size": 4}),
                                   "file:1/model.onnx": onnx_b64}})
        t.check("explicit: load from files sent in the request -> 200", r.status == 200, repr(r))
        ok, r = add_sub_ok(c, path="/v2/models/uploaded/infer")
        t.check("explicit: the uploaded model infers correctly", ok, repr(r))
        for name, params, part in [
                ("invalid base64", {"config": "{}", "file:1/model.onnx": onnx_b64[:-4] + "!!!!"},
                 "invalid base64"),
                ("a path escaping the model directory",
                 {"config": "{}", "file:../evil/1/model.onnx": onnx_b64}, "'..'"),
                ("files without a config", {"file:1/model.onnx": onnx_b64}, "'config'"),
                ("a file that is not a model", {"config": "{}", "file:1/model.onnx": "AAAA"},
                 "uploaded2")]:
            r = c.post("/v2/repository/models/uploaded2/load", {"parameters": params})
            t.check(f"explicit: load with {name} -> 400 naming {part!r}",
                    r.status == 400 and part in r.error(), repr(r))
            t.check(f"explicit:   ... and the uploaded model still serves",
                    add_sub_ok(c, path="/v2/models/uploaded/infer")[0])
        t.check("explicit: nothing escaped the upload directory",
                not os.path.exists(os.path.join(tmp, "evil")), "")
        c.post("/v2/repository/models/uploaded2/unload", "")
        c.post("/v2/repository/models/uploaded/unload", "")
    finally:
        c.close()
        finish(t, server, "explicit")


def scenario_none(t, kiln, demo, tmp):
    repo = os.path.join(tmp, "none")
    os.makedirs(repo)
    copy_model(demo, repo, "add_sub")
    copy_model(demo, repo, "digits")
    write(os.path.join(repo, "broken", "1", "model.onnx"), b"\x08\x01garbage")
    server, port = start(t, kiln, repo, [], "none")
    if server is None:
        return
    c = h.Client(port)
    try:
        doc = index(c)
        broken = entries(doc, "broken")
        t.check("none: the broken model is UNAVAILABLE with a reason",
                len(broken) == 1 and broken[0].get("state") == "UNAVAILABLE"
                and broken[0].get("reason"), repr(doc))
        t.check("none: the other models are READY",
                all(e.get("state") == "READY" for e in doc if e["name"] != "broken"), repr(doc))
        ok, r = add_sub_ok(c)
        t.check("none: add_sub serves next to the broken model", ok, repr(r))
        r = c.post("/v2/models/broken/infer", SLOW_REQUEST)
        t.check("none: inference on the broken model -> 503 with the reason",
                r.status == 503 and "broken" in r.error(), repr(r))
        t.check("none: not ready (a model failed)", c.get("/v2/health/ready").status == 400)
        for action in ("load", "unload"):
            r = c.post(f"/v2/repository/models/add_sub/{action}", "")
            t.check(f"none: {action} refused with 503",
                    r.status == 503 and r.error() == "explicit model load / unload is not "
                    "allowed if polling is enabled", repr(r))
    finally:
        c.close()
        finish(t, server, "none")


def scenario_poll(t, kiln, demo, tmp):
    repo = os.path.join(tmp, "poll")
    os.makedirs(repo)
    copy_model(demo, repo, "add_sub")
    server, port = start(t, kiln, repo, ["--model-control-mode", "poll",
                                         "--repository-poll-secs", "1"], "poll")
    if server is None:
        return
    c = h.Client(port)
    try:
        copy_model(demo, repo, "add_sub", "added")
        t.check("poll: an added model becomes READY",
                wait_for(lambda: entries(index(c), "added") ==
                         [{"name": "added", "version": "1", "state": "READY"}]))
        ok, r = add_sub_ok(c, "/v2/models/added/infer")
        t.check("poll: the added model serves", ok, repr(r))

        # Version 2 while clients keep sending: every request succeeds across the switch.
        stop = threading.Event()
        failures = []
        count = [0]

        def client():
            cc = h.Client(port)
            try:
                while not stop.is_set():
                    ok, r = add_sub_ok(cc)
                    count[0] += 1
                    if not ok:
                        failures.append(repr(r))
            finally:
                cc.close()
        workers = [threading.Thread(target=client) for _ in range(3)]
        for w in workers:
            w.start()
        shutil.copytree(os.path.join(repo, "add_sub", "1"), os.path.join(repo, "add_sub", "2"))
        switched = wait_for(lambda: c.post("/v2/models/add_sub/infer", h.add_sub_request(
            [([0.0] * 16, [0.0] * 16)])).json().get("model_version") == "2")
        time.sleep(1.0)
        stop.set()
        for w in workers:
            w.join(30)
        t.check("poll: an added version takes over (latest 1)", switched)
        t.check(f"poll: no request failed across the version switch ({count[0]} sent)",
                not failures and count[0] > 0, "; ".join(failures[:3]))
        doc = entries(index(c), "add_sub")
        t.check("poll: version 1 is unloaded after version 2 is ready",
                {"name": "add_sub", "version": "1", "state": "UNAVAILABLE",
                 "reason": "unloaded"} in doc
                and {"name": "add_sub", "version": "2", "state": "READY"} in doc, repr(doc))

        # A changed config is picked up.
        config = os.path.join(repo, "added", "config.pbtxt")
        with open(config) as f:
            text = f.read()
        write(config, text.replace("max_batch_size: 8", "max_batch_size: 3"))
        t.check("poll: a changed config.pbtxt is reloaded",
                wait_for(lambda: add_sub_ok(c, "/v2/models/added/infer", batch=4)[1].status
                         == 400))

        shutil.rmtree(os.path.join(repo, "added"))
        t.check("poll: a removed model disappears",
                wait_for(lambda: not entries(index(c), "added")))
        r = c.post("/v2/models/added/infer", h.add_sub_request([([0.0] * 16, [0.0] * 16)]))
        t.check("poll: inference on the removed model -> 404", r.status == 404, repr(r))
        t.check("poll: ready", c.get("/v2/health/ready").status == 200)
    finally:
        c.close()
        finish(t, server, "poll")


def send_async(port, body, results, index_):
    c = h.Client(port, timeout=120)
    try:
        r = c.post("/v2/models/slow/infer", body)
        results[index_] = r.status
    except OSError as e:
        results[index_] = f"{type(e).__name__}: {e}"
    finally:
        c.close()


def scenario_shutdown(t, kiln, tmp):
    repo = os.path.join(tmp, "shutdown")
    write_slow_model(repo)
    # A generous exit timeout: this scenario checks a drain that completes (sanitizer builds run
    # the model ~50x slower); "timeout" checks one that is cut short.
    server, port = start(t, kiln, repo, ["--model-workers", "1", "--exit-timeout-secs", "600"],
                         "shutdown")
    if server is None:
        return
    c = h.Client(port)
    t0 = time.monotonic()
    r = c.post("/v2/models/slow/infer", SLOW_REQUEST)
    one = time.monotonic() - t0
    t.check(f"shutdown: the slow model answers ({one:.2f} s per request)", r.status == 200,
            repr(r))
    # Enough queued work for a drain of about 2 s whatever the kernels' speed.
    n = max(2, min(200, math.ceil(2.0 / max(one, 1e-3))))
    results = [None] * n
    threads = [threading.Thread(target=send_async, args=(port, SLOW_REQUEST, results, i))
               for i in range(n)]
    for th in threads:
        th.start()
    time.sleep(min(0.5, one / 2) + 0.2)  # all sent; one running, the others queued
    server.proc.send_signal(signal.SIGTERM)
    t_signal = time.monotonic()
    not_ready = False
    while time.monotonic() - t_signal < 2.0:
        try:
            if c.get("/v2/health/ready").status != 200:
                not_ready = True
                break
        except OSError:
            c.close()
            c = h.Client(port)
        time.sleep(0.02)
    elapsed = time.monotonic() - t_signal
    t.check(f"shutdown: /v2/health/ready turns false at once ({elapsed:.2f} s)",
            not_ready and elapsed < 1.0)
    try:
        r = c.post("/v2/models/slow/infer", SLOW_REQUEST)
        refused = r.status == 503
        detail = repr(r)
    except OSError as e:
        refused, detail = False, f"{type(e).__name__}: {e}"
    t.check("shutdown: new inference during the drain -> 503", refused, detail)
    c.close()
    for th in threads:
        th.join(120)
    t.check(f"shutdown: all {n} accepted requests answered 200", results == [200] * n,
            repr(results))
    try:
        status = server.proc.wait(timeout=60)
    except Exception:  # noqa: BLE001
        status = None
        server.proc.kill()
    t.check("shutdown: exit status 0 after the drain", status == 0, f"status {status}")
    t.check("shutdown: nothing abandoned", "abandoned" not in server.output())
    check_log_clean(t, server, "shutdown")
    if status != 0 or results != [200] * n:
        print("---- server output ----\n" + server.output()[-8000:] + "-----------------------")


def scenario_timeout(t, kiln, tmp):
    repo = os.path.join(tmp, "timeout")
    write_slow_model(repo)
    server, port = start(t, kiln, repo, ["--model-workers", "1", "--exit-timeout-secs", "1"],
                         "timeout")
    if server is None:
        return
    # One request's time: the fastest of three (the first pays one-time costs, which under a
    # sanitizer can be larger than a request and would make the queued work too small).
    c = h.Client(port)
    one = math.inf
    for _ in range(3):
        t0 = time.monotonic()
        c.post("/v2/models/slow/infer", SLOW_REQUEST)
        one = min(one, time.monotonic() - t0)
    c.close()
    # Queued work of about 5 s, five times the exit timeout, whatever the kernels' speed.
    n = max(4, min(400, math.ceil(5.0 / max(one, 1e-3))))
    results = [None] * n
    threads = [threading.Thread(target=send_async, args=(port, SLOW_REQUEST, results, i),
                                daemon=True) for i in range(n)]
    for th in threads:
        th.start()
    time.sleep(0.7)
    server.proc.send_signal(signal.SIGTERM)
    t_signal = time.monotonic()
    try:
        status = server.proc.wait(timeout=30)
    except Exception:  # noqa: BLE001
        status = None
        server.proc.kill()
    elapsed = time.monotonic() - t_signal
    t.check(f"timeout: exit status 0 when the timeout cuts the drain ({elapsed:.1f} s)",
            status == 0 and elapsed < 10, f"status {status}")
    log = server.output()
    t.check("timeout: the log says how many requests were abandoned",
            "abandoned" in log, log[-2000:])
    check_log_clean(t, server, "timeout")
    for th in threads:
        th.join(10)

ADD_SUB_IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
"""


def send_add_sub_async(port, results, index_):
    c = h.Client(port, timeout=60)
    try:
        ok, r = add_sub_ok(c)
        results[index_] = 200 if ok else r.status
    except OSError as e:
        results[index_] = f"{type(e).__name__}: {e}"
    finally:
        c.close()


def scenario_schedule(t, kiln, demo, tmp):
    repo = os.path.join(tmp, "schedule")
    copy_model(demo, repo, "add_sub")
    # Requests wait up to 1.5 s for a batch of 8; at most 2 may wait.
    write(os.path.join(repo, "add_sub", "config.pbtxt"), ('name: "add_sub"\nmax_batch_size: 8\n' +
          ADD_SUB_IO + """dynamic_batching {
  max_queue_delay_microseconds: 1500000
  default_queue_policy { max_queue_size: 2 allow_timeout_override: true }
}
""").encode())
    server, port = start(t, kiln, repo, [], "schedule")
    if server is None:
        return
    c = h.Client(port)
    t0 = time.monotonic()
    r = c.post("/v2/models/add_sub/infer",
               h.add_sub_request([([1.0] * 16, [0.5] * 16)], parameters={"timeout": 20000}))
    waited = time.monotonic() - t0
    t.check(f"schedule: a request whose 20 ms timeout passes in the queue -> 504 "
            f"({waited:.2f} s)", r.status == 504 and waited < 1.0, repr(r))
    t.check("schedule: the 504 names the timeout", "timeout" in r.error().lower() or
            "deadline" in r.error().lower(), r.error())

    results = [None, None]
    threads = [threading.Thread(target=send_add_sub_async, args=(port, results, i))
               for i in range(2)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    time.sleep(0.5)  # both are queued, waiting for the batch to fill or the delay to pass
    r = c.post("/v2/models/add_sub/infer", h.add_sub_request([([1.0] * 16, [0.5] * 16)]))
    t.check("schedule: a full queue -> 429", r.status == 429, repr(r))
    t.check("schedule: the 429 carries Retry-After", r.headers.get("Retry-After") is not None,
            str(dict(r.headers)))
    for th in threads:
        th.join(30)
    waited = time.monotonic() - t0
    t.check(f"schedule: the queued requests answer 200 after the queue delay ({waited:.2f} s)",
            results == [200, 200] and waited >= 1.4, repr(results))
    stats = c.get("/v2/models/add_sub/stats").json()["model_stats"][0]
    batches = {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}
    t.check("schedule: the two queued requests ran as one batch of 2",
            batches.get(2) == 1 and stats["execution_count"] == 1, json.dumps(stats))
    inf = stats["inference_stats"]
    t.check("schedule: statistics count 2 successes and 2 failures (504, 429)",
            inf["success"]["count"] == 2 and inf["fail"]["count"] == 2 and
            stats["inference_count"] == 2, json.dumps(inf))
    c.close()
    finish(t, server, "schedule")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True, help="path to the kiln executable")
    parser.add_argument("--repo", required=True, help="demo model repository")
    parser.add_argument("--only", help="run one scenario: explicit, none, poll, shutdown, timeout, schedule")
    args = parser.parse_args()

    t = h.Checks()
    if not os.access(args.kiln, os.X_OK) or not os.path.isdir(args.repo):
        t.check("kiln executable and demo repository exist", False, f"{args.kiln} {args.repo}")
        t.summary()
        return 1
    scenarios = {
        "explicit": lambda tmp: scenario_explicit(t, args.kiln, args.repo, tmp),
        "none": lambda tmp: scenario_none(t, args.kiln, args.repo, tmp),
        "poll": lambda tmp: scenario_poll(t, args.kiln, args.repo, tmp),
        "shutdown": lambda tmp: scenario_shutdown(t, args.kiln, tmp),
        "timeout": lambda tmp: scenario_timeout(t, args.kiln, tmp),
        "schedule": lambda tmp: scenario_schedule(t, args.kiln, args.repo, tmp),
    }
    with tempfile.TemporaryDirectory(prefix="kiln_lifecycle_") as tmp:
        for name, run in scenarios.items():
            if args.only and name != args.only:
                continue
            print(f"== {name}", flush=True)
            t.run(name, lambda: run(tmp))
    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
