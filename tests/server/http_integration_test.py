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
import signal
import socket
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
        self.args = [kiln, "serve", "--model-repository", repo, "--http-port", str(port),
                     "--grpc-port", "0"]
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
            == [("add_sub", "1"), ("digits", "1")], repr(stats)[:300])
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
        t.run("statistics", lambda: check_statistics(t, c))
        t.run("error answers", lambda: check_errors(t, c, rng))
        c.close()
        t.run("body limit", lambda: check_body_limit(t, port, rng))
        t.run("keep-alive", lambda: check_keep_alive(t, port, rng))
        t.run("concurrency", lambda: check_concurrency(t, port, rng))
    finally:
        start = time.monotonic()
        status = server.terminate()
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
