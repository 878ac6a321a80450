#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of `kiln tune` (docs/tune.md) against `kiln serve --model-control-mode=explicit`
serving a copy of the demo repository's add_sub.

- a small sweep (max_batch_size 1,8; instances 1,2; short points) exits 0; results.csv has one
  row per point the progress lines report; the row marked winner meets the budget and has the
  highest throughput of the rows that do (computed here from the CSV); frontier.html holds an
  <svg> with the budget line and the winner; the model's config is the original one afterwards;
  config.pbtxt dropped into the model's directory and loaded (POST .../load) gives a config
  (GET .../config) with the winner's settings;
- --keep leaves the winning config loaded;
- an impossible budget (0.001 ms) exits 1 naming the closest point, and restores the config;
- an unknown model, and a server not in explicit model control mode, exit 1 with a message that
  says so.

Prints one line per check and a summary; exits 1 on any failure.

    kiln_tune_test.py --kiln build/kiln --repo build/demo_models
"""

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "server"))
from http_integration_test import Checks, Client, Server, free_port  # noqa: E402

RUN_TIMEOUT_S = 120
BUDGET_MS = 50.0
# Short points: the test runs on 2 busy cores, where the numbers only need to be consistent.
FAST = ["--duration-s", "0.3", "--warmup-ms", "100", "--max-concurrency", "4"]


def get_json(port, path):
    c = Client(port)
    try:
        r = c.get(path)
        return r.status, (r.json() if r.status == 200 else r.body.decode("utf-8", "replace"))
    finally:
        c.close()


def tune(kiln, port, out_dir, *extra):
    args = [kiln, "tune", "-u", f"127.0.0.1:{port}", "-m", "add_sub", "--output-dir", out_dir,
            *FAST, *extra]
    print("running: " + " ".join(args), flush=True)
    return subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def settings_of(config):
    """(max_batch_size, instances, dynamic batching delay or None) of a /config answer."""
    db = config.get("dynamic_batching")
    return (config["max_batch_size"], sum(g["count"] for g in config["instance_group"]),
            None if db is None else int(db["max_queue_delay_microseconds"]))


def check_sweep(t, kiln, port, repo, work):
    status, original = get_json(port, "/v2/models/add_sub/config")
    if not t.check("original config readable", status == 200, str(original)):
        return
    out = os.path.join(work, "sweep")
    p = tune(kiln, port, out, "--latency-budget-ms", str(BUDGET_MS), "--max-batch-size", "1,8",
             "--instances", "1,2", "--max-configs", "4")
    if not t.check("sweep exits 0", p.returncode == 0, p.stderr[-2000:]):
        return
    points_run = len(re.findall(r"^kiln tune:   concurrency \d+:", p.stderr, re.M))
    configs_run = len(re.findall(r"^kiln tune: config #\d+", p.stderr, re.M))
    t.check("progress names configs and points", configs_run >= 2 and points_run >= configs_run,
            p.stderr[-1500:])
    with open(os.path.join(out, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    t.check("results.csv has one row per point run", len(rows) == points_run,
            f"{len(rows)} rows, {points_run} points in the progress lines")
    t.check("at most 4 configs measured", len({r["config"] for r in rows}) <= 4 and configs_run <= 4,
            f"{configs_run} configs")
    meeting = [r for r in rows
               if float(r["p99_us"]) <= BUDGET_MS * 1000 and int(r["errors"]) == 0]
    t.check("meets_budget column agrees with p99 and errors",
            all((r in meeting) == (r["meets_budget"] == "1") for r in rows))
    winners = [r for r in rows if r["winner"] == "1"]
    if not t.check("exactly one winner row", len(winners) == 1, str(winners)):
        return
    w = winners[0]
    t.check("the winner meets the budget", w in meeting, str(w))
    best = max(float(r["throughput_infer_s"]) for r in meeting)
    t.check("the winner has the highest throughput meeting the budget",
            float(w["throughput_infer_s"]) == best, f"{w['throughput_infer_s']} vs {best}")
    t.check("the stdout table marks the winner", "<- winner" in p.stdout and "winner: #" in p.stdout,
            p.stdout[-1000:])

    with open(os.path.join(out, "frontier.html")) as f:
        html = f.read()
    t.check("frontier.html holds an inline svg with the budget and the winner",
            "<svg" in html and "class='budget'" in html and "class='winner'" in html
            and "<script" not in html)

    status, after = get_json(port, "/v2/models/add_sub/config")
    t.check("original config restored", status == 200 and after == original,
            f"{settings_of(after) if status == 200 else after} vs {settings_of(original)}")

    # config.pbtxt dropped into the model's directory and loaded.
    with open(os.path.join(out, "config.pbtxt")) as f:
        pbtxt = f.read()
    t.check("config.pbtxt names the model", 'name: "add_sub"' in pbtxt, pbtxt[:400])
    model_dir = os.path.join(repo, "add_sub")
    saved = os.path.join(work, "config.pbtxt.orig")
    shutil.copy(os.path.join(model_dir, "config.pbtxt"), saved)
    shutil.copy(os.path.join(out, "config.pbtxt"), os.path.join(model_dir, "config.pbtxt"))
    c = Client(port)
    r = c.post("/v2/repository/models/add_sub/load", {})
    c.close()
    if t.check("config.pbtxt loads", r.status == 200, r.body.decode("utf-8", "replace")):
        status, loaded = get_json(port, "/v2/models/add_sub/config")
        want = (int(w["max_batch_size"]), int(w["instances"]),
                int(w["max_queue_delay_us"]) if w["dynamic_batching"] == "1" else None)
        t.check("the loaded config has the winner's settings",
                status == 200 and settings_of(loaded) == want,
                f"{settings_of(loaded) if status == 200 else loaded} vs {want}")
    shutil.copy(saved, os.path.join(model_dir, "config.pbtxt"))
    c = Client(port)
    r = c.post("/v2/repository/models/add_sub/load", {})
    c.close()
    t.check("repository config reloaded", r.status == 200)


def check_keep(t, kiln, port, work):
    out = os.path.join(work, "keep")
    # Threads per instance: the start (the server's setting), then kiln.intra_op_threads 1.
    p = tune(kiln, port, out, "--latency-budget-ms", str(BUDGET_MS), "--threads", "1",
             "--max-configs", "2", "--keep")
    if not t.check("--keep run exits 0", p.returncode == 0, p.stderr[-1500:]):
        return
    with open(os.path.join(out, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    t.check("--threads measured threads 0 (the server's) and 1",
            {r["threads"] for r in rows} == {"0", "1"}, str({r["threads"] for r in rows}))
    w = [r for r in rows if r["winner"] == "1"][0]
    status, loaded = get_json(port, "/v2/models/add_sub/config")
    want = (int(w["max_batch_size"]), int(w["instances"]),
            int(w["max_queue_delay_us"]) if w["dynamic_batching"] == "1" else None)
    t.check("--keep leaves the winning config loaded",
            status == 200 and settings_of(loaded) == want,
            f"{settings_of(loaded) if status == 200 else loaded} vs {want}")
    threads = (loaded.get("parameters", {}).get("kiln.intra_op_threads", {})
               .get("string_value", "0")) if status == 200 else None
    t.check("--keep: the winner's threads are the config's kiln.intra_op_threads",
            threads == w["threads"], f"{threads} vs {w['threads']}")
    c = Client(port)
    c.post("/v2/repository/models/add_sub/load", {})
    c.close()


def check_impossible_budget(t, kiln, port, work):
    _, original = get_json(port, "/v2/models/add_sub/config")
    out = os.path.join(work, "impossible")
    p = tune(kiln, port, out, "--latency-budget-ms", "0.001", "--instances", "1,2",
             "--max-configs", "2")
    t.check("impossible budget exits 1", p.returncode == 1, f"exit {p.returncode}")
    t.check("impossible budget names the closest point",
            "no point met the p99 budget of 0.001 ms; the closest: config #" in p.stderr,
            p.stderr[-800:])
    t.check("impossible budget writes no config.pbtxt",
            not os.path.exists(os.path.join(out, "config.pbtxt"))
            and os.path.exists(os.path.join(out, "results.csv")))
    _, after = get_json(port, "/v2/models/add_sub/config")
    t.check("impossible budget restores the config", after == original)


def check_unknown_model(t, kiln, port, work):
    p = subprocess.run([kiln, "tune", "-u", f"127.0.0.1:{port}", "-m", "no_such_model",
                        "--latency-budget-ms", "5", "--output-dir", os.path.join(work, "unknown")],
                       capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    t.check("unknown model exits 1 naming it",
            p.returncode == 1 and "model 'no_such_model'" in p.stderr, p.stderr)


def check_not_explicit(t, kiln, repo, work):
    port = free_port()
    server = Server(kiln, repo, port, [])
    try:
        ok, why = server.wait_ready()
        if not t.check("second server (control mode none) ready", ok, why):
            return
        p = tune(kiln, port, os.path.join(work, "none"), "--latency-budget-ms", "5",
                 "--instances", "1,2")
        t.check("a server not in explicit mode gives a clear error",
                p.returncode == 1 and "--model-control-mode=explicit" in p.stderr, p.stderr)
        t.check("nothing measured without explicit mode", "concurrency 1:" not in p.stderr)
    finally:
        server.terminate()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--repo", required=True, help="the demo model repository (build/demo_models)")
    args = ap.parse_args()
    t = Checks()
    work = tempfile.mkdtemp(prefix="kiln_tune_test_")
    repo = os.path.join(work, "repo")
    shutil.copytree(os.path.join(args.repo, "add_sub"), os.path.join(repo, "add_sub"))
    port = free_port()
    server = Server(args.kiln, repo, port, ["--model-control-mode=explicit",
                                            "--load-model", "add_sub"])
    try:
        ok, why = server.wait_ready()
        if t.check("server ready", ok, why):
            t.run("sweep", lambda: check_sweep(t, args.kiln, port, repo, work))
            t.run("keep", lambda: check_keep(t, args.kiln, port, work))
            t.run("impossible budget", lambda: check_impossible_budget(t, args.kiln, port, work))
            t.run("unknown model", lambda: check_unknown_model(t, args.kiln, port, work))
        t.run("not explicit", lambda: check_not_explicit(t, args.kiln, repo, work))
    finally:
        server.terminate()
        if t.failed:
            print(server.output()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    t.summary()
    sys.exit(1 if t.failed else 0)


if __name__ == "__main__":
    main()
