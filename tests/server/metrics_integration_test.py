#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of the Prometheus endpoint of `kiln serve` (GET /metrics on --metrics-port).

Starts `kiln serve` on the demo repository with a metrics port of its own, sends N good and M
bad add_sub requests over HTTP, scrapes /metrics, parses it with the strict independent parser
(prometheus_text.py) and checks the numbers against what was sent:

  * success == N, inference_count == the batch elements sent, exec_count == N (requests sent
    one at a time), failures: OTHER == M (refused by validation), the other reasons 0, and
    kiln_requests_rejected_total{reason="invalid"} == M;
  * the kiln_* duration histograms count N requests and their _sum agrees with the matching
    nv_*_duration_us counter; kiln_batch_size counts exec_count executions whose sizes add up
    to inference_count, and its buckets hold exactly the batch sizes sent;
  * queue depth and pending count 0 when idle; load duration > 0; the weight bytes of `digits`
    equal the size of its ONNX initializers (read here with onnx);
  * nv_cpu_utilization in [0, 1], RAM used <= total, process RSS > 0;
  * on a copy of add_sub that queues requests for 1.5 s (dynamic batching, max_queue_size 2):
    a request timing out in the queue and one refused by a full queue are REJECTED
    (kiln_requests_rejected_total timeout 1, queue_full 1), the pending count is 2 while two
    requests wait, they run as one batch of 2, and their queue time lands in the right buckets;
  * the endpoint: Content-Type text/plain; version=0.0.4, 404 elsewhere, 405 for POST;
    --allow-metrics=false opens no metrics port; a metrics port in use stops kiln serve with
    exit status 1 and a message naming it.

    /usr/bin/python3 metrics_integration_test.py --kiln build/kiln --repo build/demo_models
"""

import argparse
import shutil
import tempfile
import threading
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_integration_test as h  # noqa: E402  (Checks, Client, Server, request helpers)
import prometheus_text as prom  # noqa: E402

import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

BATCHES = [1, 2, 3, 1, 1, 4, 8, 1]  # the good requests' batch sizes (N = len)


def scrape(port):
    c = h.Client(port)
    try:
        r = c.get("/metrics")
    finally:
        c.close()
    if r.status != 200:
        raise AssertionError(f"GET /metrics answered {r}")
    return r, prom.parse(r.body.decode("utf-8"))


def bad_requests(rng):
    """Requests that reach the model and are refused by its validation. (Requests the HTTP front
    end refuses itself, such as malformed JSON, never reach a model and are not counted.)"""
    good = h.add_sub_request(h.random_rows(rng, 1))
    short = h.add_sub_request(h.random_rows(rng, 1))
    short["inputs"][0] = h.tensor("INPUT0", "FP32", [1, 15], list(range(15)))
    wrong_batch = h.add_sub_request(h.random_rows(rng, 2))
    wrong_batch["inputs"][1] = h.tensor("INPUT1", "FP32", [1, 16], [0.0] * 16)
    missing = {"inputs": [good["inputs"][0]]}
    too_big = h.add_sub_request(h.random_rows(rng, 9))  # max_batch_size 8
    return [short, wrong_batch, missing, too_big]


def weight_bytes(onnx_path):
    model = onnx.load(onnx_path)
    return sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)


def check_endpoint(t, port):
    r, _ = scrape(port)
    t.check("Content-Type", r.headers.get("Content-Type") ==
            "text/plain; version=0.0.4; charset=utf-8", r.headers.get("Content-Type"))
    c = h.Client(port)
    for path, status in [("/", 404), ("/v2/health/ready", 404), ("/metricsx", 404)]:
        got = c.get(path).status
        t.check(f"GET {path} -> {status}", got == status, f"got {got}")
    got = c.post("/metrics", "{}").status
    t.check("POST /metrics -> 405", got == 405, f"got {got}")
    c.close()


def check_idle(t, fams, repo):
    for model in ("add_sub", "digits"):
        lab = {"model": model, "version": "1"}
        for name in ("nv_inference_request_success", "nv_inference_count",
                     "nv_inference_exec_count", "nv_inference_request_duration_us"):
            v = prom.value(fams, name, **lab)
            t.check(f"{model}: {name} starts at 0", v == 0, f"{v}")
        for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
            v = prom.value(fams, "nv_inference_request_failure", reason=reason, **lab)
            t.check(f"{model}: failure {reason} pre-created at 0", v == 0, f"{v}")
        load = prom.value(fams, "nv_model_load_duration_secs", **lab)
        t.check(f"{model}: load duration > 0", 0 < load < 60, f"{load}")
    want = weight_bytes(os.path.join(repo, "digits", "1", "model.onnx"))
    got = prom.value(fams, "kiln_model_weight_bytes", model="digits", version="1")
    t.check("digits: weight bytes == its ONNX initializers", got == want, f"{got} != {want}")
    got = prom.value(fams, "kiln_model_weight_bytes", model="add_sub", version="1")
    t.check("add_sub: no weights", got == 0, f"{got}")


def check_after_traffic(t, fams, n_good, n_bad):
    lab = {"model": "add_sub", "version": "1"}
    v = lambda name, **extra: prom.value(fams, name, **lab, **extra)  # noqa: E731
    t.check("success == N", v("nv_inference_request_success") == n_good,
            f"{v('nv_inference_request_success')} != {n_good}")
    t.check("inference_count == batch elements sent", v("nv_inference_count") == sum(BATCHES),
            f"{v('nv_inference_count')} != {sum(BATCHES)}")
    t.check("exec_count == N (sequential requests)", v("nv_inference_exec_count") == n_good,
            f"{v('nv_inference_exec_count')}")
    t.check("failure OTHER == M", v("nv_inference_request_failure", reason="OTHER") == n_bad,
            f"{v('nv_inference_request_failure', reason='OTHER')} != {n_bad}")
    for reason in ("REJECTED", "CANCELED", "BACKEND"):
        got = v("nv_inference_request_failure", reason=reason)
        t.check(f"failure {reason} == 0", got == 0, f"{got}")
    t.check("rejected{invalid} == M", v("kiln_requests_rejected_total", reason="invalid") == n_bad,
            f"{v('kiln_requests_rejected_total', reason='invalid')}")
    for reason in ("queue_full", "timeout", "shutting_down"):
        got = v("kiln_requests_rejected_total", reason=reason)
        t.check(f"rejected{{{reason}}} == 0", got == 0, f"{got}")
    t.check("pending == 0 when idle", v("nv_inference_pending_request_count") == 0)
    t.check("queue depth == 0 when idle", v("kiln_queue_depth") == 0)

    for hist, counter in [("kiln_request_duration_seconds", "nv_inference_request_duration_us"),
                          ("kiln_queue_duration_seconds", "nv_inference_queue_duration_us")]:
        count = v(hist + "_count")
        t.check(f"{hist}_count == N", count == n_good, f"{count}")
        # The counter sums whole microseconds per request (truncated): within N us of the sum.
        diff = abs(v(hist + "_sum") * 1e6 - v(counter))
        t.check(f"{hist}_sum agrees with {counter}", diff <= n_good + 1,
                f"{v(hist + '_sum') * 1e6} us vs {v(counter)} us")
    compute_us = sum(v(f"nv_inference_compute_{p}_duration_us") for p in ("input", "infer", "output"))
    count = v("kiln_compute_duration_seconds_count")
    t.check("kiln_compute_duration_seconds_count == N", count == n_good, f"{count}")
    diff = abs(v("kiln_compute_duration_seconds_sum") * 1e6 - compute_us)
    t.check("compute histogram sum agrees with the compute counters", diff <= 3 * n_good + 1,
            f"{v('kiln_compute_duration_seconds_sum') * 1e6} vs {compute_us}")
    t.check("request time >= queue time", v("kiln_request_duration_seconds_sum") >=
            v("kiln_queue_duration_seconds_sum"))

    t.check("batch histogram count == exec_count",
            v("kiln_batch_size_count") == v("nv_inference_exec_count"))
    t.check("batch histogram sum == inference_count",
            v("kiln_batch_size_sum") == v("nv_inference_count"))
    for le, cumulative in prom.buckets(fams, "kiln_batch_size", **lab):
        want = sum(1 for b in BATCHES if b <= le)
        t.check(f"kiln_batch_size le={le}", cumulative == want, f"{cumulative} != {want}")
    # The other model saw nothing.
    got = prom.value(fams, "nv_inference_request_success", model="digits", version="1")
    t.check("digits untouched", got == 0, f"{got}")


def check_system(t, fams):
    cpu = fams["nv_cpu_utilization"].samples[0].value
    t.check("0 <= nv_cpu_utilization <= 1", 0 <= cpu <= 1, f"{cpu}")
    total = fams["nv_cpu_memory_total_bytes"].samples[0].value
    used = fams["nv_cpu_memory_used_bytes"].samples[0].value
    t.check("0 < RAM used <= total", 0 < used <= total, f"{used} / {total}")
    with open("/proc/meminfo") as f:
        mem_total = int(next(l for l in f if l.startswith("MemTotal:")).split()[1]) * 1024
    t.check("RAM total == /proc/meminfo MemTotal", total == mem_total, f"{total} != {mem_total}")
    rss = fams["kiln_process_resident_memory_bytes"].samples[0].value
    t.check("process RSS > 1 MiB", rss > (1 << 20), f"{rss}")


QUEUEING_CONFIG = """name: "add_sub"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
dynamic_batching {
  max_queue_delay_microseconds: 1500000
  default_queue_policy { max_queue_size: 2 allow_timeout_override: true }
}
"""


def check_rejections(t, kiln, demo):
    tmp = tempfile.mkdtemp(prefix="kiln-metrics-")
    try:
        repo = os.path.join(tmp, "repo")
        shutil.copytree(os.path.join(demo, "add_sub"), os.path.join(repo, "add_sub"))
        with open(os.path.join(repo, "add_sub", "config.pbtxt"), "w") as f:
            f.write(QUEUEING_CONFIG)
        http_port, metrics_port = h.free_port(), h.free_port()
        server = h.Server(kiln, repo, http_port, ["--metrics-port", str(metrics_port)])
        try:
            ready, why = server.wait_ready()
            if not t.check("queueing: server ready", ready, why):
                return
            one = h.add_sub_request([([1.0] * 16, [0.5] * 16)])
            c = h.Client(http_port)
            r = c.post("/v2/models/add_sub/infer", dict(one, parameters={"timeout": 20000}))
            t.check("queueing: a 20 ms timeout passes in the queue -> 504", r.status == 504,
                    repr(r))
            results = [None, None]

            def send(i):
                cc = h.Client(http_port)
                results[i] = cc.post("/v2/models/add_sub/infer", one).status
                cc.close()
            threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
            for th in threads:
                th.start()
            time.sleep(0.5)  # both wait for the batch to fill or the delay to pass
            _, fams = scrape(metrics_port)
            lab = {"model": "add_sub", "version": "1"}
            got = prom.value(fams, "nv_inference_pending_request_count", **lab)
            t.check("queueing: pending == 2 while two requests wait", got == 2, f"{got}")
            got = prom.value(fams, "kiln_queue_depth", **lab)
            t.check("queueing: queue depth == 2", got == 2, f"{got}")
            r = c.post("/v2/models/add_sub/infer", one)
            t.check("queueing: a full queue -> 429", r.status == 429, repr(r))
            for th in threads:
                th.join(30)
            t.check("queueing: the queued requests -> 200", results == [200, 200], repr(results))
            c.close()
            _, fams = scrape(metrics_port)
            v = lambda name, **extra: prom.value(fams, name, **lab, **extra)  # noqa: E731
            checks = [("nv_inference_request_failure", {"reason": "REJECTED"}, 2),
                      ("nv_inference_request_failure", {"reason": "OTHER"}, 0),
                      ("kiln_requests_rejected_total", {"reason": "timeout"}, 1),
                      ("kiln_requests_rejected_total", {"reason": "queue_full"}, 1),
                      ("nv_inference_request_success", {}, 2),
                      ("nv_inference_exec_count", {}, 1),
                      ("nv_inference_pending_request_count", {}, 0),
                      ("kiln_batch_size_count", {}, 1),
                      ("kiln_queue_duration_seconds_count", {}, 2)]
            for name, extra, want in checks:
                got = v(name, **extra)
                t.check(f"queueing: {name}{extra or ''} == {want}", got == want, f"{got}")
            batch = dict(prom.buckets(fams, "kiln_batch_size", **lab))
            t.check("queueing: one batch of 2", batch[1.0] == 0 and batch[2.0] == 1, f"{batch}")
            queue = dict(prom.buckets(fams, "kiln_queue_duration_seconds", **lab))
            t.check("queueing: both waited 1..2.5 s in the queue",
                    queue[1.0] == 0 and queue[2.5] == 2, f"{queue}")
        finally:
            status = server.terminate()
            t.check("queueing: SIGTERM: exit status 0", status == 0, f"{status}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_disabled(t, kiln, repo):
    http_port, metrics_port = h.free_port(), h.free_port()
    server = h.Server(kiln, repo, http_port,
                      ["--allow-metrics=false", "--metrics-port", str(metrics_port)])
    try:
        ready, why = server.wait_ready()
        t.check("--allow-metrics=false: server ready", ready, why)
        try:
            socket.create_connection(("127.0.0.1", metrics_port), timeout=2).close()
            t.check("--allow-metrics=false: no metrics port", False, "the port accepts")
        except OSError:
            t.check("--allow-metrics=false: no metrics port", True)
    finally:
        server.terminate()


def check_busy_port(t, kiln, repo):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = h.Server(kiln, repo, h.free_port(), ["--metrics-port", str(port)])
        try:
            status = server.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001  (still running: the check fails, then it is stopped)
            status = None
        server.terminate()
        t.check("busy metrics port: exit status 1", status == 1, f"{status}")
        t.check("busy metrics port: the log names it", f"cannot bind to 0.0.0.0:{port}" in
                server.output(), server.output()[-500:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--repo", required=True)
    args = parser.parse_args()
    t = h.Checks()
    http_port, metrics_port = h.free_port(), h.free_port()
    server = h.Server(args.kiln, args.repo, http_port, ["--metrics-port", str(metrics_port)])
    ready, why = server.wait_ready()
    if not t.check("server ready", ready, why):
        server.terminate()
        print(server.output())
        t.summary()
        return 1
    try:
        rng = random.Random(7)
        t.run("endpoint", lambda: check_endpoint(t, metrics_port))
        t.run("idle scrape", lambda: check_idle(t, scrape(metrics_port)[1], args.repo))
        c = h.Client(http_port)
        for b in BATCHES:
            r = c.post("/v2/models/add_sub/infer", h.add_sub_request(h.random_rows(rng, b)))
            t.check(f"good request (batch {b}) -> 200", r.status == 200, repr(r))
        bad = bad_requests(rng)
        for i, req in enumerate(bad):
            r = c.post("/v2/models/add_sub/infer", req)
            t.check(f"bad request {i} -> 400", r.status == 400, repr(r))
        c.close()
        # Statistics are recorded before the response is sent, so they are complete now.
        fams = scrape(metrics_port)[1]
        t.run("after traffic", lambda: check_after_traffic(t, fams, len(BATCHES), len(bad)))
        t.run("system gauges", lambda: check_system(t, fams))
        time.sleep(0.05)
        t.run("second scrape parses", lambda: scrape(metrics_port))
    finally:
        status = server.terminate()
        t.check("SIGTERM: exit status 0", status == 0, f"{status}")
        if t.failed:
            print("---- server output ----\n" + server.output()[-20000:], flush=True)
    t.run("rejections", lambda: check_rejections(t, args.kiln, args.repo))
    t.run("metrics disabled", lambda: check_disabled(t, args.kiln, args.repo))
    t.run("busy metrics port", lambda: check_busy_port(t, args.kiln, args.repo))
    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
