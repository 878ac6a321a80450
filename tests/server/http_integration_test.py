#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of the KServe v2 HTTP API of `kiln serve` (standard library only).

Starts `kiln serve --model-repository REPO --http-port PORT --max-request-bytes 65536` on a
free port, waits for /v2/health/ready, then checks health, server and model metadata, inference
numbers for the demo models `add_sub` and `digits` (computed independently here), output
selection, request id echo, the statistics endpoint, the error answers for bad requests (status and {"error": ...}
naming the problem), the body size limit, keep-alive, and that SIGTERM makes the server exit
with status 0 within 10 s. Prints one line per check and a summary; exits 1 on any failure.

    python3 http_integration_test.py --kiln build/tools/kiln --repo build/demo_models
"""

import argparse
import http.client
import json
import math
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

MAX_REQUEST_BYTES = 65536
READY_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 10.0


class Checks:
    """Collects named pass/fail results and prints them as they happen."""

    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS  {name}", flush=True)
        else:
            self.failed.append(name)
            print(f"FAIL  {name}" + (f": {detail}" if detail else ""), flush=True)
        return ok

    def run(self, name, fn):
        """Runs fn(); an exception counts as a failure of `name` (later checks still run)."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - report anything and go on
            self.check(name, False, f"{type(e).__name__}: {e}")

    def summary(self):
        total = self.passed + len(self.failed)
        print(f"\n{self.passed}/{total} checks passed", flush=True)
        if self.failed:
            print("failed: " + ", ".join(self.failed), flush=True)
        return not self.failed


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def error(self):
        """The message of an {"error": "..."} body, or a description of what is wrong with it."""
        try:
            doc = self.json()
        except ValueError as e:
            return f"<body is not JSON ({e}): {self.body[:200]!r}>"
        if not isinstance(doc, dict) or set(doc) != {"error"} or not isinstance(doc["error"], str):
            return f"<not an error body: {doc!r}>"
        return doc["error"]

    def __repr__(self):
        return f"HTTP {self.status} {self.body[:300]!r}"


class Client:
    """One keep-alive connection."""

    def __init__(self, port, timeout=30):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        hdrs = dict(headers or {})
        if body is not None:
            if not isinstance(body, (bytes, bytearray)):
                body = body.encode("utf-8") if isinstance(body, str) else json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        self.conn.request(method, path, body=body, headers=hdrs)
        resp = self.conn.getresponse()
        data = resp.read()
        return Reply(resp.status, resp.headers, data)

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body):
        return self.request("POST", path, body=body)

    def close(self):
        self.conn.close()


class Server:
    """A `kiln serve` child process."""

    def __init__(self, kiln, repo, port, extra_args):
        self.port = port
        self.log = tempfile.TemporaryFile()
        self.args = [kiln, "serve", "--model-repository", repo, "--http-port", str(port)]
        # gRPC and metrics listen on fixed default ports (8001, 8002): pick free ones unless the
        # test sets them, so tests running in parallel do not collide.
        for flag in ("--grpc-port", "--metrics-port"):
            if not any(a == flag or a.startswith(flag + "=") for a in extra_args):
                self.args += [flag, "0"]
        self.args += extra_args
        print("starting: " + " ".join(self.args), flush=True)
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, f"server exited with status {self.proc.returncode} before ready"
            try:
                c = Client(self.port, timeout=2)
                r = c.get("/v2/health/ready")
                c.close()
                if r.status == 200:
                    return True, ""
                last = f"/v2/health/ready answered {r.status}"
            except OSError as e:
                last = str(e)
            time.sleep(0.2)
        return False, f"not ready after {timeout:.0f} s ({last})"

    def terminate(self, timeout=EXIT_TIMEOUT_S):
        """SIGTERM, then the exit status (None when it did not exit in time: it is killed)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def start_kiln(args, work, extra, probe=None):
    """Starts `kiln serve --model-repository args.repo` on free HTTP, gRPC and metrics ports with
    the flags `extra`, its output in WORK/serve-PORT.log; returns (proc, (http, grpc, metrics
    ports), log) once probe(http_port) holds (default: /v2/health/ready answers 200). Ends the
    test with the log's tail when the server exits or is not up within 60 s."""
    ports = (free_port(), free_port(), free_port())
    log = open(os.path.join(work, f"serve-{ports[0]}.log"), "w+")
    proc = subprocess.Popen(
        [args.kiln, "serve", "--model-repository", args.repo, "--http-port", str(ports[0]),
         "--grpc-port", str(ports[1]), "--metrics-port", str(ports[2])] + extra,
        stdout=log, stderr=subprocess.STDOUT)

    def ready(port):
        c = Client(port, timeout=2)
        try:
            return c.get("/v2/health/ready").status == 200
        finally:
            c.close()

    probe = probe or ready
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if probe(ports[0]):
                return proc, ports, log
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    log.seek(0)
    raise SystemExit(f"kiln serve did not become ready: {log.read()[-3000:]}")


def grpc_modules(proto_dir, what):
    """(grpc, grpc_service_pb2) from the generated classes in `proto_dir`, or None after printing
    why `what` is skipped (no --proto-dir, or grpcio missing)."""
    if not proto_dir:
        print(f"SKIP  {what} (no --proto-dir)")
        return None
    sys.path.insert(0, proto_dir)
    try:
        import grpc
        import grpc_service_pb2
    except ImportError as e:
        print(f"SKIP  {what} ({e})")
        return None
    return grpc, grpc_service_pb2


def stop_kiln(proc, timeout=60):
    """SIGTERM, and a kill when it has not exited after `timeout` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


# ---------------------------------------------------------------------------------------------
# Request helpers.

def tensor(name, datatype, shape, data):
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def add_sub_request(rows, **extra):
    """rows: list of (input0[16], input1[16]) pairs."""
    batch = len(rows)
    req = {"inputs": [tensor("INPUT0", "FP32", [batch, 16], [a for a, _ in rows]),
                      tensor("INPUT1", "FP32", [batch, 16], [b for _, b in rows])]}
    req.update(extra)
    return req


def random_rows(rng, batch):
    # Multiples of 1/8 in [-64, 64]: exact in float32, and so are their sums and differences.
    def vec():
        return [rng.randint(-512, 512) / 8.0 for _ in range(16)]
    return [(vec(), vec()) for _ in range(batch)]


def outputs_by_name(doc):
    return {o["name"]: o for o in doc.get("outputs", [])}


def flat(data):
    out = []
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(reversed(x))
        else:
            out.append(x)
    return out


def close_enough(got, want):
    return len(got) == len(want) and all(
        isinstance(g, (int, float)) and math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-6)
        for g, w in zip(got, want))


# ---------------------------------------------------------------------------------------------
# The checks.

def check_health_and_server(t, c):
    r = c.get("/v2/health/live")
    t.check("GET /v2/health/live is 200", r.status == 200, repr(r))
    r = c.get("/v2/health/ready")
    t.check("GET /v2/health/ready is 200", r.status == 200, repr(r))
    r = c.get("/v2")
    ok = r.status == 200 and r.headers.get("Content-Type", "").startswith("application/json")
    t.check("GET /v2 is 200 JSON", ok, repr(r))
    doc = r.json()
    t.check("server metadata name is 'kiln'", doc.get("name") == "kiln", repr(doc))
    t.check("server metadata version is a string", isinstance(doc.get("version"), str), repr(doc))
    t.check("server metadata extensions is a list of strings",
            isinstance(doc.get("extensions"), list)
            and all(isinstance(e, str) for e in doc["extensions"]), repr(doc))


def check_add_sub_metadata(t, c):
    r = c.get("/v2/models/add_sub")
    if not t.check("GET /v2/models/add_sub is 200", r.status == 200, repr(r)):
        return None
    doc = r.json()
    t.check("add_sub metadata name", doc.get("name") == "add_sub", repr(doc))
    versions = doc.get("versions")
    t.check("add_sub versions are non-empty decimal strings",
            isinstance(versions, list) and versions
            and all(isinstance(v, str) and v.isdigit() for v in versions), repr(doc))
    t.check("add_sub platform is a non-empty string",
            isinstance(doc.get("platform"), str) and doc["platform"] != "", repr(doc))
    want_inputs = [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]},
                   {"name": "INPUT1", "datatype": "FP32", "shape": [-1, 16]}]
    want_outputs = [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 16]},
                    {"name": "OUTPUT1", "datatype": "FP32", "shape": [-1, 16]}]
    key = lambda x: x.get("name", "")  # noqa: E731
    t.check("add_sub inputs INPUT0/INPUT1 FP32 [-1,16]",
            sorted(doc.get("inputs", []), key=key) == want_inputs, repr(doc.get("inputs")))
    t.check("add_sub outputs OUTPUT0/OUTPUT1 FP32 [-1,16]",
            sorted(doc.get("outputs", []), key=key) == want_outputs, repr(doc.get("outputs")))
    version = versions[-1] if isinstance(versions, list) and versions else None
    if version:
        r = c.get(f"/v2/models/add_sub/versions/{version}")
        t.check("GET /v2/models/add_sub/versions/V lists just V",
                r.status == 200 and r.json().get("versions") == [version], repr(r))
        r = c.get(f"/v2/models/add_sub/versions/{version}/ready")
        t.check("GET /v2/models/add_sub/versions/V/ready is 200", r.status == 200, repr(r))
    r = c.get("/v2/models/add_sub/ready")
    t.check("GET /v2/models/add_sub/ready is 200", r.status == 200, repr(r))
    return version


def check_add_sub_infer(t, c, rng, version):
    for batch in (1, 3):
        rows = random_rows(rng, batch)
        r = c.post("/v2/models/add_sub/infer", add_sub_request(rows))
        if not t.check(f"add_sub infer batch {batch} is 200 JSON",
                       r.status == 200
                       and r.headers.get("Content-Type", "").startswith("application/json"),
                       repr(r)):
            continue
        doc = r.json()
        t.check(f"add_sub batch {batch}: model_name and model_version (string)",
                doc.get("model_name") == "add_sub" and isinstance(doc.get("model_version"), str)
                and (version is None or doc["model_version"] == version), repr(doc)[:300])
        t.check(f"add_sub batch {batch}: no 'id' when none was sent", "id" not in doc,
                repr(doc)[:300])
        outs = outputs_by_name(doc)
        want0 = [a + b for x, y in rows for a, b in zip(x, y)]
        want1 = [a - b for x, y in rows for a, b in zip(x, y)]
        for name, want in (("OUTPUT0", want0), ("OUTPUT1", want1)):
            o = outs.get(name)
            ok = (o is not None and o.get("datatype") == "FP32"
                  and o.get("shape") == [batch, 16] and close_enough(flat(o.get("data")), want))
            t.check(f"add_sub batch {batch}: {name} = INPUT0 {'+' if name == 'OUTPUT0' else '-'}"
                    f" INPUT1, shape [{batch},16]", ok, repr(o)[:300])

    # Nested data is accepted and flattened in row-major order.
    rows = random_rows(rng, 2)
    nested = add_sub_request(rows)
    for inp in nested["inputs"]:
        inp["data"] = [inp["data"][0:16], inp["data"][16:32]]
    r = c.post("/v2/models/add_sub/infer", nested)
    ok = r.status == 200 and close_enough(
        flat(outputs_by_name(r.json())["OUTPUT0"]["data"]),
        [a + b for x, y in rows for a, b in zip(x, y)])
    t.check("add_sub infer with nested data arrays", ok, repr(r))

    # Output selection.
    rows = random_rows(rng, 1)
    r = c.post("/v2/models/add_sub/infer", add_sub_request(rows, outputs=[{"name": "OUTPUT1"}]))
    ok = r.status == 200 and list(outputs_by_name(r.json())) == ["OUTPUT1"] and close_enough(
        flat(r.json()["outputs"][0]["data"]), [a - b for a, b in zip(*rows[0])])
    t.check("output selection returns only OUTPUT1", ok, repr(r))

    # Request id echo (and unknown keys ignored).
    r = c.post("/v2/models/add_sub/infer",
               add_sub_request(random_rows(rng, 1), id="req-42 \u00e9", unknown_key=[1, 2]))
    t.check("request id is echoed", r.status == 200 and r.json().get("id") == "req-42 \u00e9",
            repr(r))

    # Explicit version in the path.
    if version:
        r = c.post(f"/v2/models/add_sub/versions/{version}/infer",
                   add_sub_request(random_rows(rng, 1)))
        t.check("infer with /versions/V", r.status == 200
                and r.json().get("model_version") == version, repr(r))


def check_digits(t, c, rng):
    r = c.get("/v2/models/digits")
    if not t.check("GET /v2/models/digits is 200", r.status == 200, repr(r)):
        return
    doc = r.json()
    inputs, outputs = doc.get("inputs", []), doc.get("outputs", [])
    ok = (len(inputs) == 1 and inputs[0].get("datatype") == "FP32"
          and inputs[0].get("shape") == [-1, 64])
    t.check("digits has one FP32 input of shape [-1,64]", ok, repr(inputs))
    scores = [o for o in outputs if o.get("datatype") == "FP32" and o.get("shape") == [-1, 10]]
    t.check("digits has an FP32 output of shape [-1,10]", len(scores) >= 1, repr(outputs))
    if not ok or not scores:
        return
    in_name, out_name = inputs[0]["name"], scores[0]["name"]
    # Two 8x8 "images" with pixel values 0..16 (the scale of the sklearn digits set).
    pixels = [float(rng.randint(0, 16)) for _ in range(2 * 64)]
    req = {"inputs": [tensor(in_name, "FP32", [2, 64], pixels)],
           "outputs": [{"name": out_name}]}
    r = c.post("/v2/models/digits/infer", req)
    if not t.check("digits infer batch 2 is 200", r.status == 200, repr(r)):
        return
    out = outputs_by_name(r.json()).get(out_name, {})
    data = flat(out.get("data", []))
    t.check("digits output shape is [2,10]", out.get("shape") == [2, 10], repr(out)[:300])
    t.check("digits returns 10 finite scores per row",
            len(data) == 20 and all(isinstance(x, (int, float)) and math.isfinite(x)
                                    for x in data), repr(data))


def check_model_config(t, c):
    """GET .../config: the JSON form of the config (protocol notes section 1.5)."""
    r = c.get("/v2/models/add_sub/config")
    cfg = r.json() if r.status == 200 else {}
    t.check("add_sub config: 200 with name, platform and max_batch_size 8",
            cfg.get("name") == "add_sub" and cfg.get("platform") == "onnxruntime_onnx"
            and cfg.get("max_batch_size") == 8, repr(r))
    inputs = {i.get("name"): i for i in cfg.get("input", [])}
    t.check("add_sub config: inputs with TYPE_FP32, dims as numbers, defaults printed",
            set(inputs) == {"INPUT0", "INPUT1"}
            and all(i.get("data_type") == "TYPE_FP32" and i.get("dims") == [16]
                    and i.get("is_shape_tensor") is False and i.get("optional") is False
                    for i in inputs.values()), json.dumps(cfg.get("input")))
    t.check("add_sub config: outputs listed as in the metadata",
            {o.get("name") for o in cfg.get("output", [])} == {"OUTPUT0", "OUTPUT1"},
            json.dumps(cfg.get("output")))
    t.check("add_sub config: empty repeated fields printed, no dynamic_batching key",
            cfg.get("batch_input") == [] and "dynamic_batching" not in cfg, json.dumps(cfg))
    r = c.get("/v2/models/add_sub/versions/1/config")
    t.check("add_sub version 1 config: 200", r.status == 200 and r.json().get("name") == "add_sub",
            repr(r))
    r = c.get("/v2/models/digits/config")
    cfg = r.json() if r.status == 200 else {}
    t.check("digits config (auto-completed): dynamic batching with preferred size",
            cfg.get("max_batch_size", 0) > 0 and "dynamic_batching" in cfg, repr(r))
    r = c.get("/v2/models/nope/config")
    t.check("unknown model config: 404", r.status == 404, repr(r))
    r = c.post("/v2/models/add_sub/config", {})
    t.check("POST config: 405", r.status == 405, repr(r))


def check_statistics(t, c):
    r = c.get("/v2")
    t.check("server metadata advertises 'statistics'",
            "statistics" in r.json().get("extensions", []), repr(r))
    r = c.get("/v2/models/stats")
    if not t.check("GET /v2/models/stats is 200 JSON", r.status == 200, repr(r)):
        return
    stats = r.json().get("model_stats")
    t.check("statistics list one entry per ready model version, version as a string",
            isinstance(stats, list)
            and sorted((s.get("name"), s.get("version")) for s in stats)
            == [("add_sub", "1"), ("digits", "1"), ("digits_image", "1"),
                ("digits_pipeline", "1"), ("digits_top3", "1"), ("tiny_lm", "1")],
            repr(stats)[:300])
    r = c.get("/v2/models/no_such_model/stats")
    t.check("statistics of an unknown model -> 400", r.status == 400
            and "no_such_model" in r.error(), repr(r))


def check_errors(t, c, rng):
    good = add_sub_request(random_rows(rng, 1))

    def expect(name, method, path, body, status, *parts):
        r = c.request(method, path, body=body)
        msg = r.error()
        ok = (r.status == status
              and r.headers.get("Content-Type", "").startswith("application/json")
              and not msg.startswith("<") and all(p in msg for p in parts))
        t.check(f"{name} -> {status} naming {', '.join(map(repr, parts)) or 'nothing'}", ok,
                repr(r))
        r = c.post("/v2/models/add_sub/infer", good)
        t.check("  ... and a good request after it succeeds", r.status == 200, repr(r))

    def with_input0(**changes):
        req = json.loads(json.dumps(good))
        req["inputs"][0].update(changes)
        return req

    expect("malformed JSON", "POST", "/v2/models/add_sub/infer", '{"inputs": [', 400, "JSON")
    expect("empty body", "POST", "/v2/models/add_sub/infer", "", 400)
    expect("invalid datatype string", "POST", "/v2/models/add_sub/infer",
           with_input0(datatype="FLOAT"), 400, "INPUT0", "FLOAT")
    expect("datatype the model does not take", "POST", "/v2/models/add_sub/infer",
           with_input0(datatype="INT32", data=[1] * 16), 400, "INPUT0")
    expect("wrong shape", "POST", "/v2/models/add_sub/infer",
           with_input0(shape=[1, 15], data=[1.0] * 15), 400, "INPUT0")
    expect("wrong element count", "POST", "/v2/models/add_sub/infer",
           with_input0(data=[1.0] * 15), 400, "INPUT0")
    expect("negative shape dim", "POST", "/v2/models/add_sub/infer",
           with_input0(shape=[-1, 16]), 400, "INPUT0")
    expect("non-numeric element", "POST", "/v2/models/add_sub/infer",
           with_input0(data=["x"] * 16), 400, "INPUT0")
    expect("missing data", "POST", "/v2/models/add_sub/infer",
           {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16]},
                       good["inputs"][1]]}, 400, "INPUT0")
    expect("FP16 as JSON", "POST", "/v2/models/add_sub/infer",
           with_input0(datatype="FP16"), 400, "INPUT0", "FP16")
    expect("nesting bomb", "POST", "/v2/models/add_sub/infer", "[" * 20000, 400, "JSON")
    good_text = json.dumps(good).encode()
    expect("invalid UTF-8 in a JSON string", "POST", "/v2/models/add_sub/infer",
           good_text.replace(b'"INPUT0"', b'"INPUT\xff0"'), 400, "UTF-8")
    expect("invalid UTF-8 (overlong form) in a JSON string", "POST",
           "/v2/models/add_sub/infer", good_text.replace(b'"INPUT0"', b'"INPUT\xc0\xaf"'),
           400, "UTF-8")
    expect("invalid UTF-8 in the model name of the path", "POST", "/v2/models/%FF%FE/infer",
           good, 404, "\ufffd")
    expect("huge dims", "POST", "/v2/models/add_sub/infer",
           with_input0(shape=[2**62, 2**62]), 400, "INPUT0")
    expect("dim past int64", "POST", "/v2/models/add_sub/infer",
           with_input0(shape=[2**63, 1]), 400, "INPUT0")
    expect("dim past uint64", "POST", "/v2/models/add_sub/infer",
           with_input0(shape=[2**64, 1]), 400, "number")
    expect("fractional dim", "POST", "/v2/models/add_sub/infer",
           with_input0(shape=[1.5, 16]), 400, "INPUT0")
    expect("unknown output", "POST", "/v2/models/add_sub/infer",
           dict(good, outputs=[{"name": "NO_SUCH_OUTPUT"}]), 400, "NO_SUCH_OUTPUT")
    expect("unknown model", "POST", "/v2/models/no_such_model/infer", good, 404, "no_such_model")
    expect("unknown model metadata", "GET", "/v2/models/no_such_model", None, 404,
           "no_such_model")
    expect("unknown version", "POST", "/v2/models/add_sub/versions/999/infer", good, 404)
    expect("unknown version ready", "GET", "/v2/models/add_sub/versions/999/ready", None, 404)
    expect("non-numeric version", "POST", "/v2/models/add_sub/versions/one/infer", good, 404,
           "Not Found")
    expect("version overflowing int64", "POST",
           "/v2/models/add_sub/versions/99999999999999999999/infer", good, 400)
    expect("unknown path", "GET", "/v2/no/such/path", None, 404, "Not Found")
    expect("wrong method", "GET", "/v2/models/add_sub/infer", None, 405, "Method Not Allowed")
    expect("wrong method on health", "POST", "/v2/health/live", "", 405, "Method Not Allowed")

    r = c.post("/v2/models/add_sub/infer", good)
    t.check("the server still serves after the bad requests", r.status == 200, repr(r))


def check_body_limit(t, port, rng):
    # A valid request just over the limit (padded with whitespace and an ignored key).
    body = json.dumps(dict(add_sub_request(random_rows(rng, 1)), padding="x" * MAX_REQUEST_BYTES))
    c = Client(port)
    try:
        r = c.post("/v2/models/add_sub/infer", body)
        msg = r.error()
        t.check(f"body over --max-request-bytes -> 413 naming {MAX_REQUEST_BYTES}",
                r.status in (413, 400) and str(MAX_REQUEST_BYTES) in msg, repr(r))
    except OSError as e:
        t.check(f"body over --max-request-bytes -> 413 naming {MAX_REQUEST_BYTES}", False,
                f"connection error instead of an answer: {e}")
    finally:
        c.close()
    c = Client(port)
    r = c.post("/v2/models/add_sub/infer", add_sub_request(random_rows(rng, 1)))
    c.close()
    t.check("the server still serves after an oversized body", r.status == 200, repr(r))


def check_keep_alive(t, port, rng):
    c = Client(port)
    socks = set()
    statuses = []
    for i in range(6):
        if i % 3 == 0:
            r = c.get("/v2/health/live")
        elif i % 3 == 1:
            r = c.post("/v2/models/add_sub/infer", add_sub_request(random_rows(rng, 2)))
        else:
            r = c.post("/v2/models/no_such_model/infer", "{}")  # an error keeps the connection
        statuses.append(r.status)
        socks.add(id(c.conn.sock))
        if c.conn.sock is None:
            break
    c.close()
    t.check("keep-alive: six requests on one connection", statuses == [200, 200, 404] * 2
            and len(socks) == 1, f"statuses {statuses}, {len(socks)} sockets")


def check_concurrency(t, port, rng):
    import threading
    results = []
    lock = threading.Lock()

    def worker(seed):
        local = random.Random(seed)
        c = Client(port)
        ok = True
        for _ in range(10):
            rows = random_rows(local, 2)
            r = c.post("/v2/models/add_sub/infer", add_sub_request(rows))
            ok &= r.status == 200 and close_enough(
                flat(outputs_by_name(r.json())["OUTPUT0"]["data"]),
                [a + b for x, y in rows for a, b in zip(x, y)])
        c.close()
        with lock:
            results.append(ok)

    threads = [threading.Thread(target=worker, args=(rng.random(),)) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    t.check("8 concurrent clients x 10 inferences are all correct",
            len(results) == 8 and all(results), f"{results}")


# ---------------------------------------------------------------------------------------------
# Binary tensor data, compression and classification, against a repository generated here
# (numpy + onnx from Debian): an identity model over every datatype and a classifier with labels.

DTYPES = [  # (protocol name, ONNX TensorProto enum name, numpy dtype or None for BYTES)
    ("BOOL", "BOOL", "bool"), ("UINT8", "UINT8", "uint8"), ("UINT16", "UINT16", "uint16"),
    ("UINT32", "UINT32", "uint32"), ("UINT64", "UINT64", "uint64"), ("INT8", "INT8", "int8"),
    ("INT16", "INT16", "int16"), ("INT32", "INT32", "int32"), ("INT64", "INT64", "int64"),
    ("FP16", "FLOAT16", "float16"), ("FP32", "FLOAT", "float32"), ("FP64", "DOUBLE", "float64"),
    ("BF16", "BFLOAT16", None), ("BYTES", "STRING", None),
]
CONFIG_TYPE = {"BYTES": "TYPE_STRING"}
LABELS = ["zero", "one", "two", "three", "four"]


def make_extension_repo(root):
    """identity_all: OUT_<DT> = Identity(IN_<DT>) for every datatype, dims [-1], no batching.
    classify: OUT = Identity(IN), FP32, max_batch_size 4, dims [5], label_filename labels.txt."""
    import onnx
    from onnx import TensorProto, helper

    def save(name, graph, config):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        os.makedirs(os.path.join(root, name, "1"))
        with open(os.path.join(root, name, "1", "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(config)

    nodes, ins, outs, cfg_in, cfg_out = [], [], [], [], []
    for proto, onnx_name, _ in DTYPES:
        et = getattr(TensorProto, onnx_name)
        nodes.append(helper.make_node("Identity", [f"IN_{proto}"], [f"OUT_{proto}"]))
        ins.append(helper.make_tensor_value_info(f"IN_{proto}", et, ["n"]))
        outs.append(helper.make_tensor_value_info(f"OUT_{proto}", et, ["n"]))
        ct = CONFIG_TYPE.get(proto, "TYPE_" + proto)
        cfg_in.append(f'  {{ name: "IN_{proto}" data_type: {ct} dims: [ -1 ] }}')
        cfg_out.append(f'  {{ name: "OUT_{proto}" data_type: {ct} dims: [ -1 ] }}')
    save("identity_all", helper.make_graph(nodes, "identity_all", ins, outs),
         'name: "identity_all"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\n'
         "input [\n" + ",\n".join(cfg_in) + "\n]\noutput [\n" + ",\n".join(cfg_out) + "\n]\n")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["IN"], ["OUT"])], "classify",
        [helper.make_tensor_value_info("IN", TensorProto.FLOAT, ["b", 5])],
        [helper.make_tensor_value_info("OUT", TensorProto.FLOAT, ["b", 5])])
    save("classify", graph,
         'name: "classify"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 4\n'
         'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 5 ] } ]\n'
         'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 5 ] label_filename: "labels.txt" } ]\n')
    with open(os.path.join(root, "classify", "labels.txt"), "w") as f:
        f.write("\n".join(LABELS) + "\n")


def sample_values(np, proto, npdt, rng):
    """n = 5 values of the datatype as raw little-endian bytes, plus what JSON would carry."""
    n = 5
    if proto == "BYTES":
        items = [b"", b"a", "\u00e9t\u00e9".encode(), bytes([0, 255, 10]), b"x" * 300]
        raw = b"".join(len(v).to_bytes(4, "little") + v for v in items)
        return raw, items
    if proto == "BF16":
        f = np.array([1.5, -2.0, 0.0, 3.140625, -1e30], dtype=np.float32)
        raw = (f.view(np.uint32) >> 16).astype("<u2").tobytes()  # upper halves, as clients do
        return raw, None
    if proto == "BOOL":
        a = np.array([True, False, True, True, False])
    elif proto.startswith("FP"):
        a = np.array([1.5, -2.25, 0.0, 1e-3, 65504.0 if proto == "FP16" else 1e30], dtype=npdt)
    else:
        info = np.iinfo(npdt)
        a = np.array([info.min, info.max, 0, 1, int(info.max) // 3], dtype=npdt)
    return a.astype(np.dtype(npdt).newbyteorder("<")).tobytes(), a


def binary_request(inputs, outputs=None, params=None):
    """inputs: list of (name, datatype, shape, raw bytes). Returns (body, json header length)."""
    head = {"inputs": [{"name": n, "datatype": d, "shape": s,
                        "parameters": {"binary_data_size": len(raw)}} for n, d, s, raw in inputs]}
    if outputs is not None:
        head["outputs"] = outputs
    if params is not None:
        head["parameters"] = params
    js = json.dumps(head).encode()
    return js + b"".join(raw for _, _, _, raw in inputs), len(js)


def split_binary_response(r):
    """(JSON header doc, {output name: raw bytes}) of a response with binary outputs."""
    n = int(r.headers.get("Inference-Header-Content-Length"))
    doc = json.loads(r.body[:n].decode())
    raw, pos = {}, n
    for o in doc["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            raw[o["name"]] = r.body[pos:pos + size]
            pos += size
    return doc, raw, pos == len(r.body)


DIGIT_NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def check_digits_pipeline(t, c):
    """The README's image pipeline: each demo PNG through digits_pipeline (decode, classify,
    kiln_classify top 3 with names) ranks the classes as the digits model does on the image's
    reference pixels (tools/demo/digit_images/images.json) with the classification extension."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    folder = os.path.join(root, "tools", "demo", "digit_images")
    with open(os.path.join(folder, "images.json")) as f:
        images = json.load(f)
    right = 0
    for img in images:
        data = open(os.path.join(folder, img["file"]), "rb").read()
        raw = struct.pack("<I", len(data)) + data
        body, n = binary_request([("IMAGE", "BYTES", [1, 1], raw)],
                                 outputs=[{"name": "top3", "parameters": {"binary_data": False}}])
        r = c.request("POST", "/v2/models/digits_pipeline/infer", body=body,
                      headers={"Inference-Header-Content-Length": str(n),
                               "Content-Type": "application/octet-stream"})
        if not t.check(f"digits_pipeline on {img['file']} is 200", r.status == 200, repr(r)):
            return
        got = r.json()["outputs"][0]
        direct = c.post("/v2/models/digits/infer", {
            "inputs": [{"name": "pixels", "datatype": "FP32", "shape": [1, 64],
                        "data": img["pixels"]}],
            "outputs": [{"name": "probabilities", "parameters": {"classification": 3}}]})
        want = direct.json()["outputs"][0]["data"]
        parts = [x.split(":") for x in got["data"]]
        ok = (got["shape"] == [1, 3] and all(len(p) == 3 for p in parts)
              and [p[1] for p in parts] == [w.split(":")[1] for w in want]
              and all(p[2] == DIGIT_NAMES[int(p[1])] for p in parts)
              and all(abs(float(p[0]) - float(w.split(":")[0])) < 2e-2
                      for p, w in zip(parts, want)))
        t.check(f"digits_pipeline top3 of {img['file']} ranks as digits does, with names",
                ok, f"{got} vs {want}")
        right += parts[0][1] == str(img["label"])
    t.check("digits_pipeline names at least 9 of the 10 held-out digits right", right >= 9,
            f"{right} right")


def check_binary_datatypes(t, c):
    import numpy as np
    rng = random.Random(7)
    inputs, expect = [], {}
    for proto, _, npdt in DTYPES:
        raw, _ = sample_values(np, proto, npdt, rng)
        inputs.append((f"IN_{proto}", proto, [5], raw))
        expect[f"OUT_{proto}"] = raw
    body, n = binary_request(inputs, params={"binary_data_output": True})
    r = c.request("POST", "/v2/models/identity_all/infer", body=body,
                  headers={"Inference-Header-Content-Length": str(n),
                           "Content-Type": "application/octet-stream"})
    if not t.check("binary request with every datatype is 200 octet-stream",
                   r.status == 200 and r.headers.get("Content-Type") == "application/octet-stream"
                   and r.headers.get("Inference-Header-Content-Length") is not None, repr(r)):
        return
    doc, raw, exact = split_binary_response(r)
    t.check("binary response: sections add up to the body", exact, repr(doc)[:300])
    for proto, _, _ in DTYPES:
        name = f"OUT_{proto}"
        out = next((o for o in doc["outputs"] if o["name"] == name), {})
        t.check(f"binary round trip {proto}: datatype, shape and bytes",
                out.get("datatype") == proto and out.get("shape") == [5]
                and raw.get(name) == expect[name], f"{out} {raw.get(name)!r}")
    # The same tensors sent as JSON where JSON allows, answered as JSON, compared with numpy.
    json_inputs, sent = [], {}
    for proto, _, npdt in DTYPES:
        if proto in ("FP16", "BF16"):
            continue
        _, values = sample_values(np, proto, npdt, rng)
        if proto == "BYTES":
            data = [v.decode() for v in values if _is_utf8(v)]  # JSON carries UTF-8 only
        else:
            data = [v.item() for v in values]
        sent[proto] = data
        json_inputs.append(tensor(f"IN_{proto}", proto, [len(data)], data))
    # identity_all needs every input: send FP16/BF16 in binary alongside.
    bin_inputs = [(f"IN_{p}", p, [5], sample_values(np, p, d, rng)[0])
                  for p, _, d in DTYPES if p in ("FP16", "BF16")]
    head = {"inputs": json_inputs + [{"name": nm, "datatype": d, "shape": s,
                                      "parameters": {"binary_data_size": len(b)}}
                                     for nm, d, s, b in bin_inputs],
            "outputs": [{"name": f"OUT_{p}", "parameters": {"binary_data": p in ("FP16", "BF16")}}
                        for p, _, _ in DTYPES]}
    js = json.dumps(head).encode()
    r = c.request("POST", "/v2/models/identity_all/infer",
                  body=js + b"".join(b for *_, b in bin_inputs),
                  headers={"Inference-Header-Content-Length": str(len(js))})
    if not t.check("mixed JSON/binary request is 200", r.status == 200, repr(r)):
        return
    doc, raw, exact = split_binary_response(r)
    outs = outputs_by_name(doc)
    for proto, _, npdt in DTYPES:
        if proto not in sent:
            continue
        got = outs.get(f"OUT_{proto}", {}).get("data")
        if proto == "BYTES" or got is None:
            same = got == sent[proto]
        else:  # compared in the datatype (FP32 values print with float32's shortest form)
            same = len(got) == len(sent[proto]) and bool(
                np.all(np.array(got, dtype=npdt) == np.array(sent[proto], dtype=npdt)))
        t.check(f"JSON round trip {proto} equals the numpy values", same,
                f"{got} vs {sent[proto]}")
    t.check("FP16/BF16 listed with binary_data come back binary, others JSON",
            set(raw) == {"OUT_FP16", "OUT_BF16"} and exact, repr(doc)[:300])
    # FP16 asked for as JSON is a 400 naming the output.
    head["outputs"] = [{"name": "OUT_FP16", "parameters": {"binary_data": False}}]
    js = json.dumps(head).encode()
    r = c.request("POST", "/v2/models/identity_all/infer",
                  body=js + b"".join(b for *_, b in bin_inputs),
                  headers={"Inference-Header-Content-Length": str(len(js))})
    t.check("FP16 output requested as JSON -> 400 naming it",
            r.status == 400 and "OUT_FP16" in r.error(), repr(r))


def _is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def check_compression(t, c, rng):
    import gzip
    import zlib
    rows = random_rows(rng, 2)
    body = json.dumps(add_sub_request(rows)).encode()
    want = [a + b for x, y in rows for a, b in zip(x, y)]
    for name, pack, unpack in (("gzip", gzip.compress, gzip.decompress),
                               ("deflate", zlib.compress, zlib.decompress)):
        r = c.request("POST", "/v2/models/add_sub/infer", body=pack(body),
                      headers={"Content-Encoding": name, "Accept-Encoding": name})
        ok = r.status == 200 and r.headers.get("Content-Encoding") == name
        doc = json.loads(unpack(r.body)) if ok else {}
        t.check(f"{name} request and {name} response decode to the right sums",
                ok and close_enough(flat(outputs_by_name(doc)["OUTPUT0"]["data"]), want), repr(r))
    r = c.request("POST", "/v2/models/add_sub/infer", body=body,
                  headers={"Accept-Encoding": "br, deflate;q=0.2, gzip;q=0.8"})
    t.check("Accept-Encoding with weights picks gzip",
            r.status == 200 and r.headers.get("Content-Encoding") == "gzip"
            and "outputs" in json.loads(gzip.decompress(r.body)), repr(r))
    r = c.request("POST", "/v2/models/add_sub/infer", body=body)
    t.check("no Accept-Encoding: plain JSON", r.status == 200 and
            r.headers.get("Content-Encoding") is None and "outputs" in r.json(), repr(r))


def check_classification(t, c):
    import numpy as np
    x = np.array([[0.1, 0.9, 0.3, 0.05, 0.2], [5.0, -1.0, 7.5, 7.5, 0.0]], dtype=np.float32)
    k = 3
    want = []
    for row in x:
        order = sorted(range(5), key=lambda i: (-row[i], i))[:k]
        want.append([f"{row[i]:.6f}:{i}:{LABELS[i]}" for i in order])
    req = {"inputs": [tensor("IN", "FP32", [2, 5], x.tolist())],
           "outputs": [{"name": "OUT", "parameters": {"classification": k}}]}
    r = c.post("/v2/models/classify/infer", req)
    out = outputs_by_name(r.json()).get("OUT", {}) if r.status == 200 else {}
    t.check("classification top-3 with labels (JSON)",
            out.get("datatype") == "BYTES" and out.get("shape") == [2, k]
            and out.get("data") == [s for row in want for s in row], repr(r))
    req["outputs"][0]["parameters"]["binary_data"] = True
    r = c.post("/v2/models/classify/infer", req)
    ok = r.status == 200
    raw = split_binary_response(r)[1].get("OUT", b"") if ok else b""
    strings, pos = [], 0
    while pos + 4 <= len(raw):
        size = int.from_bytes(raw[pos:pos + 4], "little")
        strings.append(raw[pos + 4:pos + 4 + size].decode())
        pos += 4 + size
    t.check("classification top-3 with labels (binary, length-prefixed)",
            strings == [s for row in want for s in row], f"{r!r} {strings}")


def check_raw_binary(t, c):
    """Inference-Header-Content-Length 0: the body is the data of the only input."""
    import struct
    values = [0.5, 3.0, -1.0, 2.0, 0.25]
    r = c.request("POST", "/v2/models/classify/infer", body=struct.pack("<5f", *values),
                  headers={"Inference-Header-Content-Length": "0"})
    if t.check("raw binary request -> 200 octet-stream", r.status == 200
               and r.headers.get("Content-Type") == "application/octet-stream", repr(r)):
        doc, raw, exact = split_binary_response(r)
        out = outputs_by_name(doc).get("OUT", {})
        t.check("raw binary: batch-1 shape, binary output equal to the input (identity model)",
                out.get("shape") == [1, 5] and exact
                and raw.get("OUT") == struct.pack("<5f", *values), repr(doc))
    for name, model, body, part in [
            ("raw binary body of the wrong size", "classify", b"\0" * 12, "expected 20 bytes"),
            ("raw binary for a model with several inputs", "identity_all", b"\0" * 4,
             "exactly one input")]:
        r = c.request("POST", f"/v2/models/{model}/infer", body=body,
                      headers={"Inference-Header-Content-Length": "0"})
        t.check(f"{name} -> 400 naming {part!r}", r.status == 400 and part in r.error(),
                repr(r))


def check_logging(t, c):
    """GET/POST /v2/logging: settings round trip, refusals change nothing."""
    r = c.get("/v2/logging")
    keys = {"log_file", "log_info", "log_warning", "log_error", "log_verbose_level", "log_format"}
    if not t.check("GET /v2/logging -> 200 with the six settings",
                   r.status == 200 and set(r.json()) == keys, repr(r)):
        return
    before = r.json()
    t.check("log settings start as the flags set them",
            before["log_info"] is True and before["log_verbose_level"] == 0
            and before["log_format"] == "default" and before["log_file"] == "", repr(before))
    r = c.post("/v2/logging", {"log_verbose_level": 2, "log_format": "ISO8601",
                               "log_warning": False})
    doc = r.json() if r.status == 200 else {}
    t.check("POST /v2/logging updates and answers every setting",
            r.status == 200 and set(doc) == keys and doc["log_verbose_level"] == 2
            and doc["log_format"] == "ISO8601" and doc["log_warning"] is False
            and doc["log_info"] is True, repr(r))
    for name, body, status, part in [
            ("log_info not a boolean", {"log_info": "yes"}, 400, "log_info"),
            ("negative verbose level", {"log_verbose_level": -1}, 400, "log_verbose_level"),
            ("unknown log format", {"log_format": "json"}, 400, "log_format"),
            ("unknown setting", {"log_errors": True}, 400, "log_errors"),
            ("log_file change", {"log_file": "/tmp/kiln.log"}, 501, "log_file"),
            ("body not an object", [1, 2], 400, "JSON object")]:
        r = c.post("/v2/logging", body)
        t.check(f"logging: {name} -> {status} naming {part!r}",
                r.status == status and part in r.error(), repr(r))
    r = c.get("/v2/logging")
    t.check("refused updates changed nothing",
            r.status == 200 and r.json().get("log_verbose_level") == 2
            and r.json().get("log_warning") is False, repr(r))
    r = c.request("PUT", "/v2/logging", body=b"{}")
    t.check("PUT /v2/logging -> 405", r.status == 405, repr(r))
    r = c.post("/v2/logging", {"log_verbose_level": 0, "log_format": "default",
                               "log_warning": True})
    t.check("log settings restored", r.status == 200 and r.json() == before, repr(r))


def check_binary_errors(t, c, rng):
    """Framing and compression errors over HTTP, each followed by a good request."""
    import struct
    import zlib
    good_rows = random_rows(rng, 1)
    good = add_sub_request(good_rows)
    f32 = struct.pack("<16f", *good_rows[0][0])

    def send(body, headers):
        return c.request("POST", "/v2/models/add_sub/infer", body=body, headers=headers)

    def one_binary(size, raw, datatype="FP32", shape=(1, 16)):
        head = {"inputs": [{"name": "INPUT0", "datatype": datatype, "shape": list(shape),
                            "parameters": {"binary_data_size": size}},
                           tensor("INPUT1", "FP32", [1, 16], good_rows[0][1])]}
        js = json.dumps(head).encode()
        return js + raw, {"Inference-Header-Content-Length": str(len(js))}

    cases = [
        ("binary section shorter than binary_data_size", *one_binary(64, f32[:32]), 400,
         "unexpected size for input 'INPUT0'"),
        ("bytes left after the binary inputs", *one_binary(64, f32 + b"xx"), 400,
         "unexpected additional input data"),
        ("binary_data_size not matching shape x dtype", *one_binary(60, f32[:60]), 400,
         "needs 64 bytes"),
        ("negative binary_data_size", *one_binary(-4, f32), 400, "binary_data_size"),
        ("BYTES prefix running past its data",
         *one_binary(8, struct.pack("<I", 100) + b"abcd", "BYTES", (1,)), 400,
         "declares 100 bytes"),
        ("Inference-Header-Content-Length past the body", json.dumps(good).encode(),
         {"Inference-Header-Content-Length": "999999"}, 400, "Inference-Header-Content-Length"),
        ("Inference-Header-Content-Length not a number", json.dumps(good).encode(),
         {"Inference-Header-Content-Length": "12abc"}, 400, "Inference-Header-Content-Length"),
        ("header length cutting the JSON", json.dumps(good).encode(),
         {"Inference-Header-Content-Length": "10"}, 400, "JSON"),
        ("corrupt gzip body", b"\x1f\x8b\x08garbage", {"Content-Encoding": "gzip"}, 400,
         "gzip"),
        ("truncated deflate body", zlib.compress(json.dumps(good).encode())[:-6],
         {"Content-Encoding": "deflate"}, 400, "deflate"),
        ("zip bomb past --max-request-bytes", zlib.compress(b" " * (50 * MAX_REQUEST_BYTES)),
         {"Content-Encoding": "deflate"}, 400, str(MAX_REQUEST_BYTES)),
        ("unsupported Content-Encoding", json.dumps(good).encode(),
         {"Content-Encoding": "br"}, 501, "br"),
        ("sequence_id", json.dumps(dict(good, parameters={"sequence_id": 3})).encode(), {},
         400, "sequence batching is not supported"),
        ("classification of an unknown count type",
         json.dumps(dict(good, outputs=[{"name": "OUTPUT0",
                                         "parameters": {"classification": "x"}}])).encode(),
         {}, 400, "classification"),
        ("shape over the element limit",
         json.dumps({"inputs": [tensor("INPUT0", "FP32", [1 << 20, 1 << 20], [1.0])]}).encode(),
         {}, 400, "limit"),
    ]
    for name, body, headers, status, part in cases:
        r = send(body, headers)
        msg = r.error()
        t.check(f"{name} -> {status} naming {part!r}",
                r.status == status and part in msg, repr(r))
        r = c.post("/v2/models/add_sub/infer", good)
        t.check(f"  ... and a good request after it succeeds", r.status == 200, repr(r))


def run_extension_checks(t, kiln):
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
    except ImportError as e:
        t.check("numpy and onnx available for the extension checks", False, str(e))
        return
    root = tempfile.mkdtemp(prefix="kiln-http-ext-")
    try:
        make_extension_repo(root)
        port = free_port()
        server = Server(kiln, root, port, ["--max-request-bytes", str(MAX_REQUEST_BYTES)])
        ready, why = server.wait_ready()
        if not t.check("extension repository server ready", ready, why + "\n" + server.output()):
            server.terminate()
            return
        c = Client(port)
        rng = random.Random(99)
        t.run("binary datatypes", lambda: check_binary_datatypes(t, c))
        t.run("classification", lambda: check_classification(t, c))
        t.run("raw binary requests", lambda: check_raw_binary(t, c))
        c.close()
        if t.failed:
            print("---- extension server output ----\n" + server.output()[-8000:], flush=True)
        server.terminate()
    finally:
        shutil.rmtree(root, ignore_errors=True)



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True, help="path to the kiln executable")
    parser.add_argument("--repo", required=True, help="demo model repository")
    args = parser.parse_args()

    t = Checks()
    if not os.access(args.kiln, os.X_OK):
        t.check("kiln executable exists", False, f"{args.kiln} is not an executable file")
        return 1 if not t.summary() else 0
    if not os.path.isdir(args.repo):
        t.check("model repository exists", False, f"{args.repo} is not a directory")
        return 1 if not t.summary() else 0

    port = free_port()
    server = Server(args.kiln, args.repo, port,
                    ["--max-request-bytes", str(MAX_REQUEST_BYTES)])
    ready, why = server.wait_ready()
    if not t.check(f"server ready within {READY_TIMEOUT_S:.0f} s", ready, why):
        server.terminate()
        print("---- server output ----\n" + server.output() + "-----------------------",
              flush=True)
        t.summary()
        return 1
    try:
        rng = random.Random(1234)
        c = Client(port)
        t.run("health and server metadata", lambda: check_health_and_server(t, c))
        version = None

        def metadata():
            nonlocal version
            version = check_add_sub_metadata(t, c)
        t.run("add_sub metadata", metadata)
        t.run("add_sub inference", lambda: check_add_sub_infer(t, c, rng, version))
        t.run("digits", lambda: check_digits(t, c, rng))
        t.run("digits pipeline", lambda: check_digits_pipeline(t, c))
        t.run("statistics", lambda: check_statistics(t, c))
        t.run("model config", lambda: check_model_config(t, c))
        t.run("logging settings", lambda: check_logging(t, c))
        t.run("error answers", lambda: check_errors(t, c, rng))
        t.run("binary and compression errors", lambda: check_binary_errors(t, c, rng))
        t.run("compression", lambda: check_compression(t, c, rng))
        c.close()
        t.run("body limit", lambda: check_body_limit(t, port, rng))
        t.run("keep-alive", lambda: check_keep_alive(t, port, rng))
        t.run("concurrency", lambda: check_concurrency(t, port, rng))
    finally:
        start = time.monotonic()
        status = server.terminate()
        t.run("extensions on a generated repository", lambda: run_extension_checks(t, args.kiln))
        elapsed = time.monotonic() - start
        t.check(f"SIGTERM: exit status 0 within {EXIT_TIMEOUT_S:.0f} s", status == 0,
                "did not exit in time (killed)" if status is None
                else f"exit status {status} after {elapsed:.1f} s")
        if t.failed:
            print("---- server output ----\n" + server.output()[-20000:] +
                  "-----------------------", flush=True)
    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
