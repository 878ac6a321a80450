#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of `kiln bench` against `kiln serve` on the demo repository.

Starts `kiln serve` on free HTTP and gRPC ports, then runs short (about 2 s) `kiln bench` runs
on add_sub over HTTP binary, HTTP JSON and gRPC in the closed loop, one open-loop (Poisson) run,
and one run with a perf_analyzer-style --input-data JSON file. For each it checks the --json
output has sane numbers (throughput > 0, p50 <= p90 <= p95 <= p99, errors == 0, the server-side
breakdown present), that the server's own inference counter moved by at least the number of
requests the bench reports, that -f CSV and --report HTML are written, and that an unknown model
name or an unreachable server gives a non-zero exit with a message naming the problem.

    bench_integration_test.py --kiln build/kiln --repo build/demo_models
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import http_integration_test as h  # noqa: E402  (Checks, Server, free_port)

SHORT = ["-p", "500", "--warmup-interval", "250", "-r", "3", "-q"]


def run_bench(kiln, args, timeout=60):
    p = subprocess.run([kiln, "bench"] + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def server_inference_count(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/add_sub/stats") as r:
        stats = json.load(r)
    return sum(m["inference_count"] for m in stats["model_stats"])


def check_point(t, name, p, key, value):
    t.check(f"{name}: {key} = {value}", p.get(key) == value, f"got {p.get(key)}")
    t.check(f"{name}: throughput > 0", p["throughput"] > 0, str(p["throughput"]))
    t.check(f"{name}: no errors", p["errors"] == 0,
            f"{p['errors']} errors: {p.get('errors_by_status')} {p.get('first_error', '')}")
    t.check(f"{name}: 0 < p50 <= p90 <= p95 <= p99 <= p99.9",
            0 < p["p50_us"] <= p["p90_us"] <= p["p95_us"] <= p["p99_us"] <= p["p999_us"],
            json.dumps({k: p[k] for k in ("p50_us", "p90_us", "p95_us", "p99_us", "p999_us")}))
    t.check(f"{name}: avg within [p50/10, max]", p["p50_us"] / 10 <= p["avg_us"] <= p["max_us"],
            f"avg {p['avg_us']} p50 {p['p50_us']} max {p['max_us']}")
    t.check(f"{name}: request count > 0", p["request_count"] > 0)
    t.check(f"{name}: client CPU measured", 0 < p["client_cpu_pct"] < 100 * os.cpu_count() + 1,
            str(p["client_cpu_pct"]))
    wins = p.get("window_details", [])
    t.check(f"{name}: one window_details entry per window", len(wins) == p["windows"] >= 1,
            f"{len(wins)} entries, {p['windows']} windows")
    t.check(f"{name}: every window has a server breakdown",
            all("server_queue_us" in w for w in wins), json.dumps(wins))
    s = p.get("server")
    t.check(f"{name}: server breakdown present", s is not None)
    if s:
        t.check(f"{name}: server counted the requests", s["success_count"] > 0, json.dumps(s))
        # Every execution runs >= 1 request; but the stats are read while requests are in
        # flight, so an execution counted before a window's end can have its requests' successes
        # counted after it (the two are recorded apart): allow a few at the edge.
        t.check(f"{name}: mean batch >= 1 (but for batches in flight at the window's end)",
                s["inference_count"] + 16 >= s["execution_count"], json.dumps(s))


def closed_loop(t, kiln, tmp, name, url, extra):
    out = os.path.join(tmp, name + ".json")
    rc, stdout, stderr = run_bench(kiln, ["-m", "add_sub", "-u", url, "--concurrency-range", "2",
                                          "--json", out] + SHORT + extra)
    if not t.check(f"{name}: exit 0", rc == 0, stderr + stdout):
        return None
    t.check(f"{name}: table printed", "infer/s" in stdout and "p99 us" in stdout, stdout)
    with open(out) as f:
        doc = json.load(f)
    t.check(f"{name}: one point", len(doc["points"]) == 1, str(len(doc["points"])))
    t.check(f"{name}: stamped with the command", "kiln" in doc["run"]["command"]
            and "--concurrency-range 2" in doc["run"]["command"], doc["run"]["command"])
    t.check(f"{name}: CPU model stamped", doc["run"]["cpu_model"] not in ("", "unknown"))
    p = doc["points"][0]
    check_point(t, name, p, "concurrency", 2)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--repo", required=True)
    args = ap.parse_args()
    t = h.Checks()
    http_port, grpc_port = h.free_port(), h.free_port()
    server = h.Server(args.kiln, args.repo, http_port,
                      ["--grpc-port", str(grpc_port), "--metrics-port", "0"])
    try:
        ok, why = server.wait_ready()
        if not t.check("kiln serve ready", ok, why + "\n" + server.output()):
            return 1
        url = f"127.0.0.1:{http_port}"
        with tempfile.TemporaryDirectory() as tmp:
            before = server_inference_count(http_port)
            csv = os.path.join(tmp, "binary.csv")
            html = os.path.join(tmp, "binary.html")
            p = closed_loop(t, args.kiln, tmp, "http-binary", url, ["-f", csv, "--report", html])
            after = server_inference_count(http_port)
            if p:
                t.check("http-binary: server inference_count moved by >= the bench's count",
                        after - before >= p["request_count"],
                        f"server {after - before}, bench {p['request_count']}")
            with open(csv) as f:
                rows = [line.rstrip("\n").split(",") for line in f]
            t.check("CSV: header and one row", len(rows) == 2 and rows[0][0] == "Concurrency"
                    and rows[0][1] == "Inferences/Second" and len(rows[1]) == len(rows[0]),
                    str(rows))
            if len(rows) == 2 and p:
                t.check("CSV: p99 matches JSON", abs(float(rows[1][rows[0].index("p99 latency")])
                                                     - p["p99_us"]) <= 1, str(rows))
            with open(html) as f:
                page = f.read()
            t.check("HTML report: inline SVG, no external assets",
                    "<svg" in page and "<script src" not in page and "<link" not in page)

            closed_loop(t, args.kiln, tmp, "http-json", url, ["--http-json"])
            closed_loop(t, args.kiln, tmp, "grpc", f"127.0.0.1:{grpc_port}", ["-i", "grpc"])

            # Real data from a perf_analyzer-style JSON file.
            data = os.path.join(tmp, "data.json")
            with open(data, "w") as f:
                json.dump({"data": [{"INPUT0": list(range(16)), "INPUT1": [1.5] * 16},
                                    {"INPUT0": {"content": [0.25] * 16, "shape": [16]},
                                     "INPUT1": [2] * 16}]}, f)
            closed_loop(t, args.kiln, tmp, "input-data", url, ["--input-data", data, "-b", "2"])

            # Open loop: intended rate and Poisson arrivals; the achieved rate is near it.
            out = os.path.join(tmp, "open.json")
            rc, stdout, stderr = run_bench(args.kiln, [
                "-m", "add_sub", "-u", url, "--request-rate-range", "400",
                "--request-distribution", "poisson", "--json", out, "-p", "1000",
                "--warmup-interval", "250", "-r", "2", "-q"])
            if t.check("open loop: exit 0", rc == 0, stderr + stdout):
                with open(out) as f:
                    p = json.load(f)["points"][0]
                check_point(t, "open loop", p, "request_rate", 400)
                t.check("open loop: achieved rate within 25% of 400/s",
                        300 <= p["achieved_rate"] <= 500, str(p["achieved_rate"]))
                t.check("open loop: send lag reported", "send_lag_p99_us" in p
                        and p["send_lag_p99_us"] >= 0, json.dumps(p))

            # Open loop over gRPC (constant arrivals).
            out = os.path.join(tmp, "open-grpc.json")
            rc, stdout, stderr = run_bench(args.kiln, [
                "-m", "add_sub", "-i", "grpc", "-u", f"127.0.0.1:{grpc_port}",
                "--request-rate-range", "300", "--json", out, "-p", "1000",
                "--warmup-interval", "250", "-r", "2", "-q"])
            if t.check("open loop gRPC: exit 0", rc == 0, stderr + stdout):
                with open(out) as f:
                    p = json.load(f)["points"][0]
                check_point(t, "open loop gRPC", p, "request_rate", 300)
                t.check("open loop gRPC: achieved rate within 15% of 300/s",
                        255 <= p["achieved_rate"] <= 345, str(p["achieved_rate"]))

            # Errors that must be clear.
            rc, stdout, stderr = run_bench(args.kiln, ["-m", "no_such_model", "-u", url] + SHORT)
            t.check("unknown model (HTTP): non-zero exit naming the model",
                    rc != 0 and "no_such_model" in stderr, f"rc {rc}: {stderr}")
            rc, stdout, stderr = run_bench(args.kiln, ["-m", "no_such_model", "-i", "grpc", "-u",
                                                       f"127.0.0.1:{grpc_port}"] + SHORT)
            t.check("unknown model (gRPC): non-zero exit naming the model",
                    rc != 0 and "no_such_model" in stderr, f"rc {rc}: {stderr}")
            rc, stdout, stderr = run_bench(args.kiln, ["-m", "add_sub", "-u",
                                                       f"127.0.0.1:{h.free_port()}"] + SHORT)
            t.check("unreachable server: non-zero exit naming the address",
                    rc != 0 and "cannot connect" in stderr, f"rc {rc}: {stderr}")
            rc, stdout, stderr = run_bench(args.kiln, ["-m", "add_sub", "-u", url,
                                                       "--concurrency-range", "4:1"] + SHORT)
            t.check("bad range: non-zero exit naming the range",
                    rc != 0 and "4:1" in stderr, f"rc {rc}: {stderr}")
    finally:
        server.terminate()
    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
