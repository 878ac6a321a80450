#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of `kiln batch` (docs/batch.md) on the demo model repository.

- a directory of .npy rows for add_sub (one subdirectory per row, one file per input): outputs
  checked against numpy's sums and differences; --batch-size 4 gives the same files;
- file rows (<row>.npy, <row>.pb) for digits: outputs equal the answers of `kiln serve`;
- a KServe v2 JSONL file (add_sub, digits with classification, a request the model refuses, a
  malformed line): every response equals what `kiln serve` answers to the same request over
  HTTP, errors carry the server's status and message, the malformed line is its row's error and
  the others go on (exit 1);
- an OpenAI batch JSONL file on tiny_lm (greedy, temperature 0; chat and completions rows): the
  bodies equal the server's /v1/chat/completions and /v1/completions answers (but for id and
  created), and the lines follow OpenAI's batch output format;
- resuming: a run killed with SIGKILL part-way (--concurrency 1, polled until the output holds
  some lines) and resumed with --resume has every row exactly once, none lost; SIGTERM writes
  the row in flight and exits 143; a torn last line is dropped and its row redone;
  --retry-failed redoes the failed rows;
- refusals (exit 2, output untouched): an existing output without --resume, duplicate
  custom_ids, OpenAI requests for a tensor model, --format that does not fit the input,
  --batch-size with a JSONL file, a model that does not exist, an input that does not exist.

Prints one line per check and a summary; exits 1 on any failure.

    kiln_batch_test.py --kiln build/kiln --repo build/demo_models
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "server"))
from http_integration_test import Checks, free_port  # noqa: E402

READY_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 240.0


class Server:
    """A `kiln serve` child process on the demo repository (every model loaded)."""

    def __init__(self, kiln, repo):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        args = [kiln, "serve", "--model-repository", repo, "--http-port", str(self.port),
                "--grpc-port", "0", "--metrics-port", "0"]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                status, _ = self.request("GET", "/v2/health/ready")
                if status == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.2)
        return False

    def request(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def post_json(self, path, body_text):
        status, data = self.request("POST", path, body_text.encode())
        return status, json.loads(data)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Batch:
    def __init__(self, kiln, repo):
        self.kiln = kiln
        self.repo = repo

    def args(self, model, input_path, *extra):
        return [self.kiln, "batch", "--model-repository", self.repo, "--model", model,
                "--input", input_path, *extra]

    def run(self, model, input_path, *extra):
        """(exit status, stderr text)."""
        p = subprocess.run(self.args(model, input_path, *extra), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=RUN_TIMEOUT_S)
        return p.returncode, p.stderr.decode("utf-8", "replace")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write((d if isinstance(d, str) else json.dumps(d)) + "\n")


def save_pb(path, array):
    import onnx
    from onnx import numpy_helper
    onnx.save_tensor(numpy_helper.from_array(array), path)


# ---------------------------------------------------------------------------------------------
# Directories of tensor files.

def check_add_sub_dir(t, b, work):
    rng = np.random.default_rng(7)
    rows = os.path.join(work, "add_sub_rows")
    want = {}
    for i in range(11):
        d = os.path.join(rows, f"row{i:02d}")
        os.makedirs(d)
        a = rng.standard_normal(16).astype(np.float32)
        c = rng.standard_normal(16).astype(np.float32)
        np.save(os.path.join(d, "INPUT0.npy"), a)
        np.save(os.path.join(d, "INPUT1.npy"), c)
        want[f"row{i:02d}"] = (a + c, a - c)
    rc, err = b.run("add_sub", rows)
    t.check("add_sub directory: exit 0", rc == 0, err)
    out = rows + ".out"
    t.check("add_sub directory: default output <input>.out has every row",
            sorted(os.listdir(out)) == sorted(want), str(os.listdir(out)))
    ok = True
    for name, (s, d) in want.items():
        o0 = np.load(os.path.join(out, name, "OUTPUT0.npy"))
        o1 = np.load(os.path.join(out, name, "OUTPUT1.npy"))
        ok &= o0.shape == (16,) and o1.shape == (16,)
        ok &= np.allclose(o0, s, rtol=0, atol=1e-6) and np.allclose(o1, d, rtol=0, atol=1e-6)
    t.check("add_sub directory: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (numpy)", ok)
    t.check("add_sub directory: summary names the counts", "11 rows: 11 succeeded, 0 failed" in err,
            err)

    out4 = os.path.join(work, "add_sub_b4")
    rc, err = b.run("add_sub", rows, "--batch-size", "4", "--output", out4, "--quiet")
    t.check("add_sub --batch-size 4: exit 0, nothing printed", rc == 0 and err == "", err)
    same = all(np.array_equal(np.load(os.path.join(out, n, f)), np.load(os.path.join(out4, n, f)))
               for n in want for f in ("OUTPUT0.npy", "OUTPUT1.npy"))
    t.check("add_sub --batch-size 4: the same outputs as one row per request", same)

    # A row missing an input, and a stray file: those rows fail, the others do not.
    bad = os.path.join(work, "add_sub_bad")
    shutil.copytree(rows, bad)
    os.remove(os.path.join(bad, "row03", "INPUT1.npy"))
    np.save(os.path.join(bad, "row05", "EXTRA.npy"), np.zeros(16, np.float32))
    rc, err = b.run("add_sub", bad, "--quiet")
    t.check("add_sub bad rows: exit 1 (some rows failed)", rc == 1, err)
    e3 = json.load(open(os.path.join(bad + ".out", "row03", "error.json")))
    e5 = json.load(open(os.path.join(bad + ".out", "row05", "error.json")))
    t.check("add_sub bad rows: error.json names the missing input",
            e3["code"] == 400 and "INPUT1" in e3["message"], str(e3))
    t.check("add_sub bad rows: error.json names the stray file",
            e5["code"] == 400 and "EXTRA" in e5["message"], str(e5))
    t.check("add_sub bad rows: the other rows have outputs",
            os.path.exists(os.path.join(bad + ".out", "row04", "OUTPUT0.npy")))
    # Resume: nothing is redone; the earlier failures still count (exit 1).
    rc, err = b.run("add_sub", bad, "--resume")
    t.check("add_sub bad rows --resume: every row skipped, exit 1",
            rc == 1 and "11 skipped (resumed; 2 of them had failed)" in err, err)
    # --retry-failed after fixing the input: the failed rows are redone.
    np.save(os.path.join(bad, "row03", "INPUT1.npy"), np.ones(16, np.float32))
    os.remove(os.path.join(bad, "row05", "EXTRA.npy"))
    rc, err = b.run("add_sub", bad, "--retry-failed")
    fixed = np.load(os.path.join(bad + ".out", "row03", "OUTPUT0.npy"))
    t.check("add_sub --retry-failed: the two failed rows are redone, exit 0",
            rc == 0 and "2 succeeded, 0 failed, 9 skipped" in err and
            not os.path.exists(os.path.join(bad + ".out", "row03", "error.json")), err)
    t.check("add_sub --retry-failed: the redone row's values",
            np.allclose(fixed, np.load(os.path.join(bad, "row03", "INPUT0.npy")) + 1))


def check_digits_files(t, b, server, work):
    rng = np.random.default_rng(11)
    rows = os.path.join(work, "digits_rows")
    os.makedirs(rows)
    pixels = {}
    for i in range(6):
        x = rng.uniform(0, 1, 64).astype(np.float32)
        pixels[f"d{i}"] = x
        if i % 2:
            save_pb(os.path.join(rows, f"d{i}.pb"), x)
        else:
            np.save(os.path.join(rows, f"d{i}.npy"), x)
    with open(os.path.join(rows, "README.txt"), "w") as f:
        f.write("not a row\n")
    out = os.path.join(work, "digits_out")
    rc, err = b.run("digits", rows, "--output", out)
    t.check("digits file rows (.npy and .pb): exit 0", rc == 0, err)
    t.check("digits file rows: one output directory per tensor file (README.txt is no row)",
            sorted(os.listdir(out)) == sorted(pixels), str(os.listdir(out)))
    ok, detail = True, ""
    for name, x in pixels.items():
        req = {"inputs": [{"name": "pixels", "datatype": "FP32", "shape": [1, 64],
                           "data": x.tolist()}]}
        status, doc = server.post_json("/v2/models/digits/infer", json.dumps(req))
        want = np.array(doc["outputs"][0]["data"], np.float32)
        got = np.load(os.path.join(out, name, "probabilities.npy"))
        if status != 200 or got.shape != (10,) or not np.allclose(got, want, rtol=1e-6, atol=1e-7):
            ok, detail = False, f"{name}: {got} vs {want}"
    t.check("digits file rows: probabilities equal the server's (batch dim dropped again)", ok,
            detail)
    out4 = os.path.join(work, "digits_out4")
    rc, err = b.run("digits", rows, "--output", out4, "--batch-size", "4", "--quiet")
    same = rc == 0 and all(
        np.allclose(np.load(os.path.join(out, n, "probabilities.npy")),
                    np.load(os.path.join(out4, n, "probabilities.npy")), rtol=1e-5, atol=1e-7)
        for n in pixels)
    t.check("digits --batch-size 4: the same probabilities", same, err)


# ---------------------------------------------------------------------------------------------
# KServe v2 JSONL.

def check_kserve_jsonl(t, b, server, work):
    rng = np.random.default_rng(3)
    lines = []
    for i in range(12):
        a = rng.standard_normal((2, 16)).astype(np.float32)
        c = rng.standard_normal((2, 16)).astype(np.float32)
        req = {"inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2, 16], "data": a.tolist()},
            {"name": "INPUT1", "datatype": "FP32", "shape": [2, 16], "data": c.flatten().tolist()}]}
        if i % 3 == 0:
            req["id"] = f"req-{i}"
        if i % 4 == 1:
            req["outputs"] = [{"name": "OUTPUT1"}]
        if i == 5:
            req["parameters"] = {"binary_data_output": True}
        lines.append(json.dumps(req))
    # The model refuses this one (wrong element count): the server's 400 and message.
    lines.append(json.dumps({"id": "short", "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [1.0] * 16},
        {"name": "INPUT1", "datatype": "FP32", "shape": [1, 15], "data": [1.0] * 15}]}))
    lines.append('{"inputs": [ this is not json')
    path = os.path.join(work, "add_sub.jsonl")
    with open(path, "w") as f:
        for i, line in enumerate(lines):
            f.write(line + "\n")
            if i == 3:
                f.write("\n")  # blank lines are no rows
    rc, err = b.run("add_sub", path, "--concurrency", "3")
    t.check("KServe JSONL: exit 1 (one malformed line, one refused request)", rc == 1, err)
    out = os.path.join(work, "add_sub.out.jsonl")
    docs = read_jsonl(out)
    by_row = {d["row"]: d for d in docs}
    t.check("KServe JSONL: default output <input>.out.jsonl, one line per row",
            len(docs) == len(lines) and sorted(by_row) == list(range(len(lines))),
            f"{len(docs)} lines for {len(lines)} rows")
    mismatches = []
    for row, line in enumerate(lines[:-1]):
        req = json.loads(line)
        got = by_row.get(row, {})
        if req.get("parameters", {}).get("binary_data_output"):
            # The server answers binary; a JSONL line carries the values as data.
            a = np.array(req["inputs"][0]["data"], np.float32).reshape(2, 16)
            c = np.array(req["inputs"][1]["data"], np.float32).reshape(2, 16)
            outs = {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"])
                    for o in got.get("response", {}).get("outputs", [])}
            asked = [o["name"] for o in req.get("outputs", [])] or ["OUTPUT0", "OUTPUT1"]
            want_outs = {"OUTPUT0": a + c, "OUTPUT1": a - c}
            if sorted(outs) != sorted(asked) or not all(
                    np.array_equal(outs[k], want_outs[k]) for k in asked):
                mismatches.append(f"row {row}: {got}")
            continue
        status, want = server.post_json("/v2/models/add_sub/infer", line)
        if status == 200:
            if got.get("response") != want or got.get("id") != req.get("id"):
                mismatches.append(f"row {row}: {got} vs {want}")
        else:
            e = got.get("error", {})
            if e.get("code") != status or e.get("message") != want.get("error"):
                mismatches.append(f"row {row}: {got} vs HTTP {status} {want}")
    t.check("KServe JSONL: responses and errors equal the server's HTTP answers",
            not mismatches, "; ".join(mismatches[:3]))
    bad = by_row.get(len(lines) - 1, {})
    t.check("KServe JSONL: the malformed line is its row's error (400, id null)",
            bad.get("id") is None and bad.get("error", {}).get("code") == 400 and
            "malformed JSON" in bad.get("error", {}).get("message", ""), str(bad))
    t.check("KServe JSONL: the summary lists the failures by line",
            "line 14:" in err and "line 15:" in err, err)

    # digits with classification: the server's top-3 strings.
    x = np.random.default_rng(5).uniform(0, 1, (3, 64)).astype(np.float32)
    req = json.dumps({"id": "cls", "inputs": [
        {"name": "pixels", "datatype": "FP32", "shape": [3, 64], "data": x.flatten().tolist()}],
        "outputs": [{"name": "probabilities", "parameters": {"classification": 3}}]})
    cpath = os.path.join(work, "digits.jsonl")
    write_jsonl(cpath, [req])
    rc, err = b.run("digits", cpath, "--format", "kserve-jsonl", "--quiet")
    status, want = server.post_json("/v2/models/digits/infer", req)
    got = read_jsonl(os.path.join(work, "digits.out.jsonl"))
    t.check("KServe JSONL: classification outputs equal the server's",
            rc == 0 and status == 200 and len(got) == 1 and got[0]["response"] == want,
            f"{got} vs {want}")


# ---------------------------------------------------------------------------------------------
# OpenAI batch JSONL.

def chat_body(i, max_tokens=24):
    return {"model": "tiny_lm", "temperature": 0, "max_tokens": max_tokens,
            "messages": [{"role": "system", "content": "You write licences."},
                         {"role": "user", "content": f"Write about software number {i}"}]}


def completion_body(i):
    return {"model": "tiny_lm", "temperature": 0, "max_tokens": 20,
            "prompt": f"The licence {i} says that"}


def check_openai_jsonl(t, b, server, work):
    reqs = []
    for i in range(6):
        reqs.append({"custom_id": f"chat-{i}", "method": "POST", "url": "/v1/chat/completions",
                     "body": chat_body(i)})
    for i in range(3):
        reqs.append({"custom_id": f"cmpl-{i}", "method": "POST", "url": "/v1/completions",
                     "body": completion_body(i)})
    reqs.append({"custom_id": "bad-temperature", "method": "POST", "url": "/v1/chat/completions",
                 "body": dict(chat_body(0), temperature=5)})
    reqs.append({"custom_id": "bad-url", "method": "POST", "url": "/v1/embeddings",
                 "body": {"input": "x"}})
    lines = [json.dumps(r) for r in reqs] + ['{"custom_id": "torn", "method": ']
    path = os.path.join(work, "chat.jsonl")
    write_jsonl(path, lines)
    out = os.path.join(work, "chat_results.jsonl")
    rc, err = b.run("tiny_lm", path, "--output", out)
    t.check("OpenAI JSONL: exit 1 (three bad rows)", rc == 1, err)
    docs = read_jsonl(out)
    t.check("OpenAI JSONL: one output line per input line", len(docs) == len(lines),
            f"{len(docs)} lines")
    by_id = {d["custom_id"]: d for d in docs}
    shape_ok = all(set(d) == {"id", "custom_id", "response", "error"} and
                   d["id"].startswith("batch_req_") for d in docs)
    t.check("OpenAI JSONL: lines in OpenAI's batch output format", shape_ok, str(docs[:1]))
    mismatches = []
    for r in reqs[:9]:
        got = by_id.get(r["custom_id"])
        status, want = server.post_json(r["url"], json.dumps(r["body"]))
        if got is None or got["error"] is not None or got["response"]["status_code"] != 200:
            mismatches.append(f"{r['custom_id']}: {got}")
            continue
        body = got["response"]["body"]
        if got["response"]["request_id"] != body["id"]:
            mismatches.append(f"{r['custom_id']}: request_id {got['response']['request_id']}")
        for doc in (body, want):
            doc.pop("id", None)
            doc.pop("created", None)
            # How much of the prompt the prefix cache held depends on what ran before.
            doc.get("usage", {}).pop("prompt_tokens_details", None)
        if status != 200 or body != want:
            mismatches.append(f"{r['custom_id']}: {body} vs HTTP {status} {want}")
    t.check("OpenAI JSONL: bodies equal the server's /v1 answers (greedy; but id, created, "
            "cached_tokens)",
            not mismatches, "; ".join(mismatches[:2]))
    text = by_id.get("chat-0", {}).get("response", {}) or {}
    t.check("OpenAI JSONL: the chat answers have text",
            bool(text.get("body", {}).get("choices", [{}])[0].get("message", {}).get("content")),
            str(text)[:300])
    status, want = server.post_json("/v1/chat/completions", json.dumps(reqs[9]["body"]))
    e = by_id.get("bad-temperature", {})
    t.check("OpenAI JSONL: an invalid body is its row's error, as the server's",
            e.get("response") is None and e.get("error", {}).get("code") == status == 400 and
            e["error"].get("message") == want["error"]["message"] and
            e["error"].get("param") == "temperature", f"{e} vs {want}")
    e = by_id.get("bad-url", {})
    t.check("OpenAI JSONL: an unknown url is its row's error",
            e.get("error", {}).get("param") == "url", str(e))
    e = by_id.get(None, {})
    t.check("OpenAI JSONL: a malformed line is its row's error (custom_id null)",
            e.get("response") is None and e.get("error", {}).get("code") == 400 and
            e.get("id") == f"batch_req_{len(lines) - 1}", str(e))

    # --resume with everything done: nothing runs; the output is unchanged.
    before = open(out, "rb").read()
    rc, err = b.run("tiny_lm", path, "--output", out, "--resume")
    t.check("OpenAI JSONL --resume when complete: nothing redone",
            rc == 1 and open(out, "rb").read() == before and
            f"0 succeeded, 0 failed, {len(lines)} skipped" in err, err)


def check_kill_and_resume(t, b, work):
    n = 240
    reqs = [{"custom_id": f"k{i:03d}", "method": "POST", "url": "/v1/completions",
             "body": {"model": "tiny_lm", "prompt": f"The work {i} is", "temperature": 0,
                      "max_tokens": 200, "ignore_eos": True}} for i in range(n)]
    path = os.path.join(work, "kill.jsonl")
    write_jsonl(path, reqs)
    out = os.path.join(work, "kill.out.jsonl")
    proc = subprocess.Popen(b.args("tiny_lm", path, "--concurrency", "1", "--quiet"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    lines_at_kill = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(out):
            with open(out, "rb") as f:
                lines_at_kill = f.read().count(b"\n")
            if lines_at_kill >= 12:
                break
        time.sleep(0.02)
    if proc.poll() is not None:
        t.check("kill: the run was still going when killed", False,
                f"it exited {proc.returncode} with {lines_at_kill} lines: too fast for the test")
        return
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with open(out, "rb") as f:
        data = f.read()
    done_before = data.count(b"\n")
    t.check("kill: killed part-way", 0 < done_before < n, f"{done_before} of {n} lines")
    # Without --resume the partial output is refused and left alone.
    rc, err = b.run("tiny_lm", path)
    t.check("kill: rerun without --resume refused (exit 2, names --resume), output untouched",
            rc == 2 and "--resume" in err and open(out, "rb").read() == data, err)
    rc, err = b.run("tiny_lm", path, "--resume")
    docs = read_jsonl(out)
    ids = [d["custom_id"] for d in docs]
    t.check("kill: --resume finishes (exit 0)", rc == 0, err)
    t.check("kill: every row exactly once after --resume",
            len(ids) == n and sorted(ids) == [r["custom_id"] for r in reqs],
            f"{len(ids)} lines, {len(set(ids))} distinct")
    t.check("kill: the resumed run skipped the finished rows",
            f"{done_before} skipped" in err, err)
    t.check("kill: every row succeeded",
            all(d["error"] is None and d["response"]["status_code"] == 200 for d in docs))

    # SIGTERM: the row in flight finishes and is written, exit 143; --resume does the rest.
    out2 = os.path.join(work, "term.out.jsonl")
    proc = subprocess.Popen(b.args("tiny_lm", path, "--concurrency", "1", "--output", out2),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(out2) and open(out2, "rb").read().count(b"\n") >= 5:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    err = err.decode("utf-8", "replace")
    data = open(out2, "rb").read()
    t.check("SIGTERM: exit 143 after writing the rows in flight, whole lines only",
            proc.returncode == 143 and data.endswith(b"\n") and "stopped by SIGTERM" in err and
            "--resume" in err, f"exit {proc.returncode}: {err[-500:]}")
    rc, err = b.run("tiny_lm", path, "--concurrency", "4", "--output", out2, "--resume")
    ids = [d["custom_id"] for d in read_jsonl(out2)]
    t.check("SIGTERM: --resume completes every row exactly once",
            rc == 0 and sorted(ids) == [r["custom_id"] for r in reqs], err)

    # A torn last line (as a crash mid-write leaves it) is dropped and its row redone.
    last = docs[-1]["custom_id"]
    with open(out, "rb") as f:
        data = f.read()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1
    with open(out, "wb") as f:
        f.write(data[:cut] + data[cut:cut + 40])
    rc, err = b.run("tiny_lm", path, "--resume")
    ids = [d["custom_id"] for d in read_jsonl(out)]
    t.check("torn line: dropped, its row redone, every row once",
            rc == 0 and len(ids) == n and len(set(ids)) == n and ids[-1] == last and
            "torn" in err, err)


# ---------------------------------------------------------------------------------------------
# Refusals.

def check_refusals(t, b, work):
    path = os.path.join(work, "one.jsonl")
    write_jsonl(path, [{"inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16},
        {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16}]}])
    out = os.path.join(work, "one.out.jsonl")
    rc, err = b.run("add_sub", path)
    t.check("refusals: a first run", rc == 0, err)
    before = open(out, "rb").read()
    rc, err = b.run("add_sub", path)
    t.check("refusals: an existing output without --resume: exit 2 naming --resume",
            rc == 2 and "--resume" in err and out in err and open(out, "rb").read() == before, err)
    # An empty output is no output: --resume (or not) starts it.
    empty = os.path.join(work, "empty.jsonl")
    open(empty, "w").close()
    rc, err = b.run("add_sub", path, "--output", empty)
    t.check("refusals: an empty output file is not refused", rc == 0 and
            len(read_jsonl(empty)) == 1, err)

    dup = os.path.join(work, "dup.jsonl")
    write_jsonl(dup, [{"custom_id": "a", "method": "POST", "url": "/v1/completions",
                       "body": {"prompt": "x"}}] * 2)
    rc, err = b.run("tiny_lm", dup)
    t.check("refusals: duplicate custom_ids: exit 2 naming it, before any work",
            rc == 2 and "custom_id 'a'" in err and
            not os.path.exists(os.path.join(work, "dup.out.jsonl")), err)
    chat = os.path.join(work, "tensor_chat.jsonl")
    write_jsonl(chat, [{"custom_id": "a", "method": "POST", "url": "/v1/completions",
                        "body": {"prompt": "x"}}])
    rc, err = b.run("add_sub", chat)
    t.check("refusals: OpenAI requests for a tensor model: exit 2",
            rc == 2 and "generative" in err, err)
    rc, err = b.run("add_sub", path, "--format", "npy")
    t.check("refusals: --format npy with a file: exit 2", rc == 2 and "--format npy" in err, err)
    rc, err = b.run("add_sub", path, "--batch-size", "2", "--output", os.path.join(work, "x"))
    t.check("refusals: --batch-size with a JSONL file: exit 2",
            rc == 2 and "--batch-size" in err, err)
    rc, err = b.run("no_such_model", path, "--output", os.path.join(work, "y.jsonl"))
    t.check("refusals: a model that does not exist: exit 2 naming it",
            rc == 2 and "no_such_model" in err, err)
    missing = os.path.join(work, "missing.jsonl")
    rc, err = b.run("add_sub", missing)
    t.check("refusals: an input that does not exist: exit 2 naming it",
            rc == 2 and missing in err, err)
    unknown = os.path.join(work, "unknown.jsonl")
    write_jsonl(unknown, [{"prompt": "what format is this"}])
    rc, err = b.run("add_sub", unknown)
    t.check("refusals: an input of no known format: exit 2 naming --format",
            rc == 2 and "--format" in err, err)
    # The output of another input is not resumed.
    other = os.path.join(work, "other.jsonl")
    write_jsonl(other, [{"row": 5, "id": None, "response": {}}])
    rc, err = b.run("add_sub", path, "--output", other, "--resume")
    t.check("refusals: --resume on the output of another input: exit 2",
            rc == 2 and "another input" in err, err)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--repo", required=True)
    args = parser.parse_args()
    t = Checks()
    b = Batch(args.kiln, args.repo)
    work = tempfile.mkdtemp(prefix="kiln-batch-test-")
    server = Server(args.kiln, args.repo)
    try:
        t.run("directory rows (add_sub)", lambda: check_add_sub_dir(t, b, work))
        t.run("refusals", lambda: check_refusals(t, b, work))
        t.run("kill and resume", lambda: check_kill_and_resume(t, b, work))
        if t.check("kiln serve ready (the reference answers)", server.wait_ready(),
                   server.output()[-3000:]):
            t.run("file rows (digits)", lambda: check_digits_files(t, b, server, work))
            t.run("KServe JSONL", lambda: check_kserve_jsonl(t, b, server, work))
            t.run("OpenAI JSONL", lambda: check_openai_jsonl(t, b, server, work))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
