#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Request tracing end to end (CTest tracing_integration): `kiln serve` on the demo repository
with --trace-config mode=opentelemetry exports to an OTLP/HTTP receiver run by this test, which
parses every ExportTraceServiceRequest (OTLP JSON) it gets. Checked:
  - tracing starts OFF (level not given) and is switched on at run time with POST
    /v2/trace/setting; GET answers the reference server's settings object;
  - an HTTP inference with a W3C traceparent gives a SERVER span in the client's trace, child of
    the client's span, with queue and compute children inside it; a malformed traceparent starts
    a new trace;
  - a gRPC inference with traceparent metadata (when python3-grpcio and the generated messages
    are there) does the same;
  - the digits_pipeline ensemble gives one span per step, each with its own queue and compute;
  - a failing request's span has status ERROR with the message;
  - an OpenAI chat request on the generative demo model gives queue, prefill and decode spans;
  - the file mode writes one JSON line of timestamps per traced request;
  - with the receiver gone, spans are dropped and counted in kiln_trace_spans_dropped_total,
    and requests are still answered.
Usage: tracing_integration_test.py --kiln build/kiln --repo build/demo_models
       [--proto-dir build/python_proto]
"""

import argparse
import http.server
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from http_integration_test import Checks, grpc_modules, start_kiln, stop_kiln  # noqa: E402

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


class Receiver:
    """An OTLP/HTTP receiver: keeps the spans of every POST /v1/traces."""

    def __init__(self):
        self.spans = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                doc = json.loads(body)
                with outer.lock:
                    for rs in doc["resourceSpans"]:
                        resource = {a["key"]: a["value"]["stringValue"]
                                    for a in rs["resource"]["attributes"]}
                        for ss in rs["scopeSpans"]:
                            for sp in ss["spans"]:
                                sp["resource"] = resource
                                sp["attrs"] = {a["key"]: a["value"]["stringValue"]
                                               for a in sp.get("attributes", [])}
                                outer.spans.append(sp)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def wait(self, pred, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                found = [s for s in self.spans if pred(s)]
            if found:
                return found
            time.sleep(0.05)
        return []

    def trace(self, trace_id):
        with self.lock:
            return [s for s in self.spans if s["traceId"] == trace_id]


def http_call(port, method, path, body=None, headers=None):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers=headers or {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def add_sub_request():
    return {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16],
                        "data": [float(i) for i in range(16)]},
                       {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16],
                        "data": [1.0] * 16}]}


def children(spans, parent_id):
    return {s["name"]: s for s in spans if s.get("parentSpanId") == parent_id}


def check_request_tree(t, label, spans, root):
    kids = children(spans, root["spanId"])
    ok = "queue" in kids and "compute" in kids
    t.check(f"{label}: queue and compute spans inside the request span", ok,
            [s["name"] for s in spans])
    if not ok:
        return
    comp = children(spans, kids["compute"]["spanId"])
    t.check(f"{label}: compute_input / compute_infer / compute_output inside compute",
            set(comp) == {"compute_input", "compute_infer", "compute_output"}, list(comp))
    inside = all(int(root["startTimeUnixNano"]) <= int(s["startTimeUnixNano"])
                 <= int(s["endTimeUnixNano"]) <= int(root["endTimeUnixNano"])
                 for s in list(kids.values()) + list(comp.values()))
    t.check(f"{label}: child spans lie within the request span", inside)


def check_otel(t, args, work):
    rx = Receiver()
    proc, (port, grpc_port, metrics_port), log = start_kiln(args, work, [
        "--trace-config", "mode=opentelemetry",
        "--trace-config", f"opentelemetry,url=127.0.0.1:{rx.port}/v1/traces",
        "--trace-config", "opentelemetry,resource=service.name=kiln-test",
        "--trace-config", "opentelemetry,bsp_schedule_delay=50"])
    try:
        status, body = http_call(port, "GET", "/v2/trace/setting")
        doc = json.loads(body)
        t.check("GET /v2/trace/setting: OFF, rate 1000, mode opentelemetry",
                status == 200 and doc.get("trace_level") == ["OFF"]
                and doc.get("trace_rate") == "1000" and doc.get("trace_mode") == "opentelemetry",
                body)
        http_call(port, "POST", "/v2/models/add_sub/infer", add_sub_request(),
                  {"Content-Type": "application/json",
                   "traceparent": f"00-{TRACE}-{PARENT}-00"})
        time.sleep(0.3)
        t.check("no spans while tracing is OFF", not rx.spans, len(rx.spans))
        status, body = http_call(port, "POST", "/v2/trace/setting",
                                 {"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
        t.check("POST /v2/trace/setting turns tracing on",
                status == 200 and json.loads(body).get("trace_level") == ["TIMESTAMPS"], body)
        status, body = http_call(port, "POST", "/v2/trace/setting", {"trace_rate": "0"})
        t.check("POST /v2/trace/setting with rate 0 -> 400 naming trace_rate",
                status == 400 and b"trace_rate" in body, body)

        # HTTP with the client's context.
        status, _ = http_call(port, "POST", "/v2/models/add_sub/infer", add_sub_request(),
                              {"Content-Type": "application/json",
                               "traceparent": f"00-{TRACE}-{PARENT}-01"})
        roots = rx.wait(lambda s: s["traceId"] == TRACE and s["name"] == "add_sub request")
        if t.check("HTTP: a SERVER span 'add_sub request' in the client's trace",
                   status == 200 and len(roots) == 1 and roots[0]["kind"] == 2, len(roots)):
            root = roots[0]
            t.check("HTTP: its parent is the client's span",
                    root.get("parentSpanId") == PARENT, root.get("parentSpanId"))
            t.check("HTTP: model attributes and the resource",
                    root["attrs"].get("kiln.model") == "add_sub"
                    and root["resource"].get("service.name") == "kiln-test", root)
            rx.wait(lambda s: s["traceId"] == TRACE and s["name"] == "compute_output")
            check_request_tree(t, "HTTP", rx.trace(TRACE), root)

        # A malformed traceparent: a new trace, no parent.
        http_call(port, "POST", "/v2/models/add_sub/infer", add_sub_request(),
                  {"Content-Type": "application/json", "traceparent": "00-XYZ-1-01"})
        fresh = rx.wait(lambda s: s["name"] == "add_sub request" and s["traceId"] != TRACE)
        t.check("a malformed traceparent starts a new trace without a parent",
                len(fresh) == 1 and "parentSpanId" not in fresh[0], fresh)

        # The ensemble: one span per step.
        img = open(os.path.join(ROOT, "tools", "demo", "digit_images", "digit_0.png"), "rb").read()
        header = json.dumps({"inputs": [{"name": "IMAGE", "datatype": "BYTES", "shape": [1, 1],
                                         "parameters": {"binary_data_size": len(img) + 4}}],
                             "outputs": [{"name": "top3",
                                          "parameters": {"binary_data": False}}]}).encode()
        trace2 = "1" * 32
        status, _ = http_call(port, "POST", "/v2/models/digits_pipeline/infer",
                              header + struct.pack("<I", len(img)) + img,
                              {"Inference-Header-Content-Length": str(len(header)),
                               "Content-Type": "application/octet-stream",
                               "traceparent": f"00-{trace2}-{'2' * 16}-01"})
        rx.wait(lambda s: s["traceId"] == trace2 and s["name"].startswith("step 2"))
        spans = rx.trace(trace2)
        roots = [s for s in spans if s["name"] == "digits_pipeline request"]
        steps = {s["name"]: s for s in spans if s["name"].startswith("step ")}
        if t.check("ensemble: a span per step under the request",
                   status == 200 and len(roots) == 1
                   and set(steps) == {"step 0 digits_image", "step 1 digits",
                                      "step 2 digits_top3"}
                   and all(s.get("parentSpanId") == roots[0]["spanId"] for s in steps.values()),
                   sorted(s["name"] for s in spans)):
            for name, step in steps.items():
                kids = children(spans, step["spanId"])
                t.check(f"ensemble {name}: its queue and compute", {"queue", "compute"} <= set(kids),
                        list(kids))

        # A failing request: status ERROR with the message.
        bad = add_sub_request()
        bad["inputs"][0]["shape"] = [1, 15]
        bad["inputs"][0]["data"] = bad["inputs"][0]["data"][:15]
        trace3 = "3" * 32
        status, _ = http_call(port, "POST", "/v2/models/add_sub/infer", bad,
                              {"Content-Type": "application/json",
                               "traceparent": f"00-{trace3}-{'4' * 16}-01"})
        failed = rx.wait(lambda s: s["traceId"] == trace3)
        t.check("a request refused by the model: 400, and its span has status ERROR",
                status == 400 and len(failed) >= 1
                and failed[0]["status"].get("code") == 2 and failed[0]["status"].get("message"),
                failed)

        check_grpc(t, args, rx, grpc_port)

        # A generation request (OpenAI chat on the demo's tiny_lm): queue, prefill, decode.
        trace4 = "7" * 32
        status, _ = http_call(port, "POST", "/v1/chat/completions",
                              {"model": "tiny_lm", "max_tokens": 4, "temperature": 0,
                               "messages": [{"role": "user", "content": "the"}]},
                              {"Content-Type": "application/json",
                               "traceparent": f"00-{trace4}-{'8' * 16}-01"})
        rx.wait(lambda s: s["traceId"] == trace4 and s["name"] == "decode")
        spans = rx.trace(trace4)
        roots = [s for s in spans if s["name"] == "tiny_lm request"]
        kids = children(spans, roots[0]["spanId"]) if roots else {}
        t.check("generation: queue, prefill and decode spans under the request",
                status == 200 and len(roots) == 1
                and {"queue", "prefill", "decode"} <= set(kids)
                and int(kids["prefill"]["startTimeUnixNano"])
                == int(kids["queue"]["endTimeUnixNano"]),
                sorted(s["name"] for s in spans))

        # Metrics.
        status, body = http_call(metrics_port, "GET", "/metrics")
        text = body.decode()
        t.check("/metrics has kiln_trace_spans_exported_total > 0",
                any(line.startswith("kiln_trace_spans_exported_total ")
                    and float(line.split()[1]) > 0 for line in text.splitlines()), text[-500:])

        # The receiver goes away: drops are counted, requests still answered.
        rx.stop()
        answered = all(http_call(port, "POST", "/v2/models/add_sub/infer", add_sub_request())[0]
                       == 200 for _ in range(5))
        dropped = 0.0
        deadline = time.time() + 20
        while time.time() < deadline and dropped == 0:
            text = http_call(metrics_port, "GET", "/metrics")[1].decode()
            for line in text.splitlines():
                if line.startswith("kiln_trace_spans_dropped_total "):
                    dropped = float(line.split()[1])
            time.sleep(0.2)
        t.check("without a collector requests are answered and spans are counted as dropped",
                answered and dropped >= 6, dropped)
    finally:
        stop_kiln(proc)
        rx.stop()


def check_grpc(t, args, rx, grpc_port):
    modules = grpc_modules(args.proto_dir, "gRPC traceparent")
    if modules is None:
        return
    grpc, pb = modules
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
    stub = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                               request_serializer=pb.ModelInferRequest.SerializeToString,
                               response_deserializer=pb.ModelInferResponse.FromString)
    req = pb.ModelInferRequest(model_name="add_sub")
    for name in ("INPUT0", "INPUT1"):
        i = req.inputs.add(name=name, datatype="FP32", shape=[1, 16])
        i.contents.fp32_contents.extend([1.0] * 16)
    trace = "5" * 32
    stub(req, metadata=(("traceparent", f"00-{trace}-{'6' * 16}-01"),), timeout=30)
    roots = rx.wait(lambda s: s["traceId"] == trace and s["name"] == "add_sub request")
    t.check("gRPC: the traceparent metadata is the request span's parent",
            len(roots) == 1 and roots[0].get("parentSpanId") == "6" * 16, roots)
    channel.close()


def check_file_mode(t, args, work):
    path = os.path.join(work, "trace.json")
    proc, (port, _, _), _ = start_kiln(args, work, [
        "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1",
        "--trace-config", f"triton,file={path}"])
    try:
        for _ in range(3):
            http_call(port, "POST", "/v2/models/add_sub/infer", add_sub_request())
    finally:
        stop_kiln(proc)
    lines = open(path).read().splitlines() if os.path.exists(path) else []
    docs = [json.loads(line) for line in lines]
    names = [d["name"] for d in docs[0]["timestamps"]] if docs else []
    t.check("file mode: one JSON line per request with the reference timestamp names",
            len(docs) == 3 and names[0] == "REQUEST_START" and names[-1] == "REQUEST_END"
            and "COMPUTE_START" in names and docs[0]["model_name"] == "add_sub", lines[:1])
    if docs:
        ns = [d["ns"] for d in docs[0]["timestamps"]]
        t.check("file mode: timestamps in order", ns == sorted(ns), ns)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--proto-dir", default="")
    args = ap.parse_args()
    t = Checks()
    work = tempfile.mkdtemp(prefix="kiln-trace-test-")
    try:
        check_otel(t, args, work)
        check_file_mode(t, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
