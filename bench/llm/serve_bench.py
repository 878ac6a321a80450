#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""kiln's generation serving: continuous against static batching, kiln against llama.cpp,
prefix caching, KV waste and the serving overhead, measured through `kiln serve` and
`kiln bench generate` (docs/bench.md, "Generation mode") on one GGUF file.

One `kiln serve` runs a temporary repository of four models over the same GGUF (prefix caching
off except in pfx_on, so repeated rounds do not hit a cache the first round filled):

  cont      batching continuous, max_num_seqs 16
  padded    batching static_padded, max_num_seqs 16: request-level batching as a framework
            runs its fixed-shape batch (a batch of up to 16 runs until its longest member
            finishes; a member that has finished is answered and runs on as a padding row)
  static    batching static, max_num_seqs 16: the same batches, but a finished member leaves
            the batch (the steps shrink): the most favourable static baseline
  pfx_on    enable_prefix_caching true            pfx_off   enable_prefix_caching false

and every model's KV cache is 16 x 1024 tokens (kv_cache_bytes), threads = --threads
(--model-thread-budget). Measurements, each in --rounds interleaved rounds, medians reported:

  1. continuous vs static: the same mixed-length workload (log-normal lengths with ShareGPT's
     mean lengths halved: input mean 81, output mean 169, sigma 1, capped at 512 / 768; seeded;
     48 requests), all requests at once, to cont, padded and static in turn. The target
     (>= 2.5x) is against padded, the issue's "the way request-level batching behaves"; static
     is reported beside it with the engine-time bound of what any scheduler can gain over it.
  2. kiln vs llama.cpp: the same workload (32 requests, prompts 64-256, outputs 32-128) to cont
     and to llama.cpp (bench/llm/llamacpp_serve.mjs: node-llama-cpp's prebuilt CPU binary, same
     GGUF, same threads), closed loop at concurrency 16; kiln serve is stopped (SIGSTOP) while
     llama.cpp runs. Then one open-loop run each at a Poisson rate of 70 % of the lower measured
     request throughput (the first requests of the workload, about 80 s of arrivals), for TTFT
     at equal throughput. Both runners draw the same arrival times from the seed (checked), and
     the nominal rate is set so that this sample's gaps average the target rate.
  3. prefix caching: prompts = one shared 512-token prefix + a unique 32-token suffix,
     max_tokens 16, at concurrency 1 and 4, to pfx_on and pfx_off. Before each model's runs of
     a round one warm-up request (the prefix and another suffix) fills the cache; it is not
     counted. Every round draws new suffixes.
  4. KV waste, from /metrics polled every 0.5 s during the continuous runs of (1): (used blocks
     x block size - KV tokens) / (all blocks x block size), over samples with >= 15 running
     sequences.
  5. serving overhead, from /metrics before and after the continuous runs of (1):
     (step time - forward time + scheduler time) / (step time + scheduler time).

  bench/llm/serve_bench.py                  # tinyllama q4_0, 2 rounds (about 10 min on 2 cores)
  bench/llm/serve_bench.py --quick --no-write   # small test model, few requests: a smoke test
  bench/llm/serve_bench.py --rounds 3 --threads 4 --no-peer

Before each run the script waits (up to --max-wait) while a build runs or the machine is busy
with other work, and it reports the CPU share other processes took during the runs.

Results: stdout, and bench/results/<date>-<commit>-llm-serve.md (unless --no-write), stamped
with the commit and the CPU. Benchmarks never gate CI: targets missed are reported, not failed.
"""
import argparse
import datetime
import json
import math
import os
import resource
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))
import vocab  # noqa: E402  (node_binary: the Node.js scripts/install-deps llm chose)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stamp import commit, cpu_name  # noqa: E402

# KV bytes per token of the models make_models.py writes (f16 K and V): layers x 2 x KV heads x
# head_dim x 2 bytes.
KV_BYTES_PER_TOKEN = {"tinyllama": 22 * 2 * 4 * 64 * 2, "small": 4 * 2 * 2 * 32 * 2}
VOCAB = 32000  # llama2's vocabulary (both shapes)
FIRST_ID = 100  # prompt ids come from [FIRST_ID, VOCAB), as kiln bench generate's random dataset
MAX_NUM_SEQS = 16
KV_TOKENS_PER_SEQ = 1024
READY_TIMEOUT_S = 300.0
POLL_S = 0.5



def tree_dirty():
    try:
        out = subprocess.check_output(
            ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], text=True)
        return bool(out.strip())
    except (OSError, subprocess.CalledProcessError):
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- a shared machine: wait for it to be quiet, measure what others took during a run ----

def cpu_times():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v[:8]) - idle, sum(v[:8])


def proc_jiffies(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0


def children_jiffies():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * os.sysconf("SC_CLK_TCK")


class CpuWatch:
    """Share of the machine's CPU that processes other than this script's used during a run."""

    def __init__(self, server_pid):
        self.pid = server_pid
        self.busy0, self.total0 = cpu_times()
        self.own0 = proc_jiffies(server_pid) + children_jiffies()

    def foreign(self):
        busy, total = cpu_times()
        own = proc_jiffies(self.pid) + children_jiffies() - self.own0
        return max(0.0, (busy - self.busy0 - own) / max(1, total - self.total0))


def wait_quiet(max_wait_s, quiet=0.15):
    """Waits while a build (ninja) runs or the machine is busier than `quiet` (others' work:
    this script's processes are idle between runs). Returns the busy share last seen."""
    deadline = time.monotonic() + max_wait_s
    said = False
    while True:
        building = subprocess.run(["pgrep", "-f", "ninja"], capture_output=True).returncode == 0
        b0, t0 = cpu_times()
        time.sleep(1.0)
        b1, t1 = cpu_times()
        busy = (b1 - b0) / max(1, t1 - t0)
        if (not building and busy < quiet) or time.monotonic() > deadline:
            if said:
                why = ", a build runs" if building else ""
                log(f"  ... going on (machine {busy:.0%} busy{why})")
            return busy
        if not said:
            log(f"  waiting: {'a build runs' if building else f'the machine is {busy:.0%} busy'} "
                f"(up to {max_wait_s:.0f} s)")
            said = True
        time.sleep(4)


# ---- workloads (JSON lines {"prompt": [ids], "max_tokens": n}) ----

def lognormal_len(rng, mean, sigma, lo, hi):
    mu = math.log(mean) - sigma * sigma / 2  # E[exp(N(mu, sigma^2))] = mean
    return max(lo, min(hi, int(round(rng.lognormvariate(mu, sigma)))))


def ids(rng, n):
    return [rng.randrange(FIRST_ID, VOCAB) for _ in range(n)]


# ShareGPT's mean lengths (input 161.31, output 337.99 tokens: the vLLM paper's Fig. 11, as
# `kiln bench generate --dataset sharegpt-like` uses them) halved, so that a run takes about a
# minute on 2 cores; output about twice the input, as in the chats continuous batching serves.
MIXED_INPUT_MEAN, MIXED_OUTPUT_MEAN = 81, 169


def mixed_workload(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ni = lognormal_len(rng, MIXED_INPUT_MEAN, 1.0, 4, 512)
        no = lognormal_len(rng, MIXED_OUTPUT_MEAN, 1.0, 4, 768)
        out.append({"prompt": ids(rng, ni), "max_tokens": no})
    return out


def uniform_workload(n, seed, prompt_range, output_range):
    rng = random.Random(seed)
    return [{"prompt": ids(rng, rng.randint(*prompt_range)),
             "max_tokens": rng.randint(*output_range)} for _ in range(n)]


def prefix_workload(prefix, n, seed, suffix_len=32, max_tokens=16):
    rng = random.Random(seed)
    return [{"prompt": prefix + ids(rng, suffix_len), "max_tokens": max_tokens} for _ in range(n)]


def write_jsonl(path, reqs):
    with open(path, "w") as f:
        for r in reqs:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    return path


def describe(reqs):
    pi = [len(r["prompt"]) for r in reqs]
    po = [r["max_tokens"] for r in reqs]
    return (f"{len(reqs)} requests, input mean {statistics.mean(pi):.0f} (median "
            f"{statistics.median(pi):.0f}, max {max(pi)}), output mean {statistics.mean(po):.0f} "
            f"(median {statistics.median(po):.0f}, max {max(po)}), {sum(po)} output tokens")


# ---- /metrics ----

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(port, model):
    """{(name, frozenset(labels other than model/version)): value} of one model's series."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = dict(LABEL.findall(m.group(2) or ""))
        if labels.pop("model", None) != model:
            continue
        labels.pop("version", None)
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def mv(snap, name, **labels):
    return snap.get((name, frozenset(labels.items())), 0.0)


class Poller:
    """Scrapes one model's KV and batch gauges every POLL_S seconds on a thread."""

    def __init__(self, port, model):
        self.port, self.model, self.samples = port, model, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            try:
                s = scrape(self.port, self.model)
                self.samples.append({
                    "running": mv(s, "kiln_gen_running_sequences"),
                    "used": mv(s, "kiln_gen_kv_cache_blocks", state="used"),
                    "cached": mv(s, "kiln_gen_kv_cache_blocks", state="cached"),
                    "free": mv(s, "kiln_gen_kv_cache_blocks", state="free"),
                    "block_size": mv(s, "kiln_gen_kv_cache_block_size"),
                    "tokens": mv(s, "kiln_gen_kv_cache_tokens")})
            except OSError:
                pass
            self.stop.wait(POLL_S)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


COUNTERS = ["kiln_gen_step_duration_seconds_sum", "kiln_gen_step_duration_seconds_count",
            "kiln_gen_forward_seconds_total", "kiln_gen_scheduler_seconds_total",
            "kiln_gen_prompt_tokens_total", "kiln_gen_generation_tokens_total",
            "kiln_gen_preemptions_total", "kiln_gen_prefix_cache_queries_total",
            "kiln_gen_prefix_cache_hits_total", "kiln_batch_size_sum"]


def counter_delta(before, after):
    return {n: mv(after, n) - mv(before, n) for n in COUNTERS}


def add_deltas(acc, d):
    for k, v in d.items():
        acc[k] = acc.get(k, 0.0) + v


# ---- kiln serve ----

class Server:
    def __init__(self, kiln, repo, threads, log_path):
        self.port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.cmd = [kiln, "serve", "--model-repository", repo, "--http-port", str(self.port),
                    "--grpc-port", str(self.grpc_port), "--metrics-port", str(self.metrics_port),
                    "--model-thread-budget", str(threads)]
        self.log_path = log_path
        self.env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        self.proc = None

    def start(self, models):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env)
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = list(models)
        while pending:
            if self.proc.poll() is not None:
                self.fail(f"kiln serve exited with status {self.proc.returncode}")
            if time.monotonic() > deadline:
                self.fail(f"models {pending} not ready after {READY_TIMEOUT_S:.0f} s")
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{self.port}/v2/models/{pending[0]}/ready", timeout=2):
                    pending.pop(0)
                    continue
            except OSError:
                pass
            time.sleep(0.2)

    def tail(self, n=30):
        with open(self.log_path, "rb") as f:
            return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-n:])

    def fail(self, msg):
        self.stop()
        sys.exit(f"serve_bench: {msg}\n--- kiln serve log (last lines) ---\n{self.tail()}")

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def model_config(**params):
    lines = ['backend: "kiln_llm"']
    for k, v in params.items():
        lines.append(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}')
    return "\n".join(lines) + "\n"


def make_repo(root, gguf, kv_bytes):
    common = {"max_num_seqs": MAX_NUM_SEQS, "kv_cache_bytes": kv_bytes}
    models = {
        "cont": model_config(batching="continuous", enable_prefix_caching="false", **common),
        "padded": model_config(batching="static_padded", enable_prefix_caching="false", **common),
        "static": model_config(batching="static", enable_prefix_caching="false", **common),
        "pfx_on": model_config(enable_prefix_caching="true", **common),
        "pfx_off": model_config(enable_prefix_caching="false", **common),
    }
    repo = os.path.join(root, "repo")
    for name, cfg in models.items():
        os.makedirs(os.path.join(repo, name, "1"))
        os.symlink(os.path.abspath(gguf), os.path.join(repo, name, "1", "model.gguf"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(cfg)
    return repo, models


# ---- the two clients, one result shape ----

STATS = ("mean", "median", "p99")


def norm_kiln(j):
    out = {"completed": j["completed"], "failed": j.get("failed", 0),
           "output_tokens": j["total_output_tokens"], "duration_s": j["duration"],
           "output_throughput": j["output_throughput"],
           "request_throughput": j["request_throughput"],
           "due_ms": [r.get("due_ms") for r in j.get("requests", [])]}
    for ours, theirs in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e", "e2el")):
        out[ours] = {s: j.get(f"{s}_{theirs}_ms") for s in STATS}
    return out


def norm_peer(j):
    out = {k: j[k] for k in ("completed", "output_tokens", "duration_s", "output_throughput",
                             "request_throughput")}
    out["failed"] = j.get("failed", 0)
    out["due_ms"] = j.get("due_ms", [])
    for k in ("ttft", "tpot", "itl", "e2e"):
        out[k] = {s: (j.get(f"{k}_ms") or {}).get(s) for s in STATS}
    return out


class Runner:
    def __init__(self, args, tmp):
        self.args, self.tmp, self.n = args, tmp, 0
        self.foreign = []  # (what, share of the CPU others used during it)
        self.commands = []  # one example of each kind of command, for the results file

    def note(self, kind, cmd):
        if kind not in [k for k, _ in self.commands]:
            self.commands.append((kind, " ".join(shlex.quote(c) for c in cmd)))

    def kiln(self, server, model, workload, concurrency=0, rate="inf", seed=0, wait=True):
        self.n += 1
        out = os.path.join(self.tmp, f"gen-{self.n}.json")
        cmd = [self.args.kiln, "bench", "generate", "-u", f"http://127.0.0.1:{server.port}",
               "-m", model, "--dataset", "file", "--prompts", workload, "--request-rate",
               str(rate), "--max-concurrency", str(concurrency), "--seed", str(seed),
               "--json", out, "-q"]
        self.note("kiln bench generate", cmd)
        if wait:
            wait_quiet(self.args.max_wait)
        watch = CpuWatch(server.proc.pid)
        p = subprocess.run(cmd, capture_output=True, text=True)
        self.foreign.append((f"kiln {model} {os.path.basename(workload)}", watch.foreign()))
        if p.returncode != 0 or not os.path.exists(out):
            server.fail(f"kiln bench generate failed ({p.returncode}): {p.stderr.strip()}\n"
                        f"{p.stdout.strip()[-2000:]}")
        with open(out) as f:
            j = json.load(f)
        if j.get("failed"):
            log(f"  warning: {j['failed']} requests failed: {j.get('first_error')}")
        return norm_kiln(j)

    def arrivals(self, workload, rate, seed):
        """The arrival times (ms after time zero) both runners draw for the workload's requests."""
        cmd = [vocab.node_binary() or "node", self.args.peer, "--arrivals-only", "--workload",
               workload, "--request-rate", str(rate), "--seed", str(seed)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"llamacpp_serve.mjs --arrivals-only failed ({p.returncode}): "
                               f"{(p.stderr or p.stdout).strip()[-2000:]}")
        return json.loads(p.stdout)["due_ms"]

    def peer(self, server, workload, concurrency=0, rate="inf", seed=0):
        self.n += 1
        out = os.path.join(self.tmp, f"peer-{self.n}.json")
        cmd = [vocab.node_binary() or "node", self.args.peer, "--model", self.args.gguf,
               "--threads", str(self.args.threads), "--workload", workload,
               "--max-concurrency", str(concurrency), "--request-rate", str(rate),
               "--seed", str(seed), "--out", out]
        self.note("llama.cpp", cmd)
        env = dict(os.environ, KILN_LLM_NODE_DIR=self.args.node_dir)
        wait_quiet(self.args.max_wait)
        watch = CpuWatch(server.proc.pid)
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        self.foreign.append((f"llama.cpp {os.path.basename(workload)}", watch.foreign()))
        if p.returncode != 0:
            raise RuntimeError(f"llamacpp_serve.mjs failed ({p.returncode}): "
                               f"{(p.stderr or p.stdout).strip()[-2000:]}")
        if os.path.exists(out):
            with open(out) as f:
                j = json.load(f)
        else:
            j = json.loads(p.stdout[p.stdout.index("{"):])
        return norm_peer(j)


def med(runs, *path):
    vals = []
    for r in runs:
        v = r
        for p in path:
            v = v[p]
        if v is not None:
            vals.append(v)
    return statistics.median(vals) if vals else float("nan")


def fmt(v, digits=1):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.{digits}f}"


def short(r):
    return (f"{r['output_throughput']:.1f} tok/s, {r['request_throughput']:.2f} req/s, "
            f"TTFT p99 {fmt(r['ttft']['p99'], 0)} ms, {r['duration_s']:.1f} s")


# ---- the measurements ----

BATCHING_MODELS = ("cont", "padded", "static")


def bench_batching(args, run, server, mixed_path):
    runs = {m: [] for m in BATCHING_MODELS}
    samples, overhead, per_model = [], {}, {m: {} for m in BATCHING_MODELS}
    for r in range(args.rounds):
        for model in BATCHING_MODELS:
            wait_quiet(args.max_wait)
            before = scrape(server.metrics_port, model)
            if model == "cont":
                with Poller(server.metrics_port, model) as p:
                    res = run.kiln(server, model, mixed_path, wait=False)
                samples += p.samples
            else:
                res = run.kiln(server, model, mixed_path, wait=False)
            d = counter_delta(before, scrape(server.metrics_port, model))
            add_deltas(per_model[model], d)
            if model == "cont":
                add_deltas(overhead, d)
            runs[model].append(res)
            log(f"  (1) round {r + 1} {model}: {short(res)}")
    return runs, samples, overhead, per_model


def bench_step_cost(args, run, server, tmp):
    """Decode step time at batch 1 and at batch 16 (ITL median of 1 and of 16 sequences with
    16-token prompts generating 64 tokens each, all at once): what batching saves per token."""
    rng = random.Random(7)
    out = {}
    for n in (1, MAX_NUM_SEQS):
        path = write_jsonl(os.path.join(tmp, f"decode-{n}.jsonl"),
                           [{"prompt": ids(rng, 16), "max_tokens": 64} for _ in range(n)])
        out[n] = [run.kiln(server, "cont", path)["itl"]["median"] for _ in range(args.rounds)]
    log(f"  (1) decode step: batch 1 {statistics.median(out[1]):.1f} ms, batch {MAX_NUM_SEQS} "
        f"{statistics.median(out[MAX_NUM_SEQS]):.1f} ms")
    return {n: statistics.median(v) for n, v in out.items()}


def kv_waste(samples, threshold):
    w = []
    for s in samples:
        total = (s["used"] + s["cached"] + s["free"]) * s["block_size"]
        if s["running"] >= threshold and total > 0:
            w.append((s["used"] * s["block_size"] - s["tokens"]) / total)
    of_used = [(s["used"] * s["block_size"] - s["tokens"]) / (s["used"] * s["block_size"])
               for s in samples if s["running"] >= threshold and s["used"] > 0]
    usage = [s["used"] / (s["used"] + s["cached"] + s["free"]) for s in samples
             if s["running"] >= threshold and s["used"] + s["cached"] + s["free"] > 0]
    return w, of_used, usage


def bench_peer(args, run, server, peer_wl, tmp):
    """Closed loop in interleaved rounds, then one open-loop run each (the first requests of the
    workload, as many as arrive in about --open-loop-s seconds at the rate, at least 8)."""
    peer_path = write_jsonl(os.path.join(tmp, "peer.jsonl"), peer_wl)
    runs = {"kiln": [], "llama.cpp": []}
    error = None
    for r in range(args.rounds):
        res = run.kiln(server, "cont", peer_path, concurrency=MAX_NUM_SEQS)
        runs["kiln"].append(res)
        log(f"  (2) round {r + 1} kiln: {short(res)}")
        if error is None:
            server.pause()
            try:
                res = run.peer(server, peer_path, concurrency=MAX_NUM_SEQS)
                runs["llama.cpp"].append(res)
                log(f"  (2) round {r + 1} llama.cpp: {short(res)}")
            except (RuntimeError, OSError, ValueError, KeyError) as e:
                error = str(e)
                log(f"  (2) llama.cpp: {error}")
            finally:
                server.resume()
    open_loop, rate, n_open = {}, None, 0
    if runs["llama.cpp"]:
        target = 0.7 * min(med(runs["kiln"], "request_throughput"),
                           med(runs["llama.cpp"], "request_throughput"))
        n_open = max(8, min(len(peer_wl), round(target * args.open_loop_s)))
        open_path = write_jsonl(os.path.join(tmp, "peer-open.jsonl"), peer_wl[:n_open])
        # A Poisson sample of a few dozen arrivals can run well above or below its rate. The
        # arrival times scale as 1 / rate, so the rate is set for this sample: its n - 1 gaps
        # average 1 / target (the last request is due at (n - 1) / target seconds).
        unit_span_s = run.arrivals(open_path, rate=1, seed=1)[-1] / 1000
        rate = float(f"{target * unit_span_s / (n_open - 1):.6g}")
        open_loop["kiln"] = run.kiln(server, "cont", open_path, concurrency=MAX_NUM_SEQS,
                                     rate=rate, seed=1)
        log(f"  (2) open loop {rate} req/s kiln: {short(open_loop['kiln'])}")
        server.pause()
        try:
            open_loop["llama.cpp"] = run.peer(server, open_path, concurrency=MAX_NUM_SEQS,
                                              rate=rate, seed=1)
            log(f"  (2) open loop {rate} req/s llama.cpp: {short(open_loop['llama.cpp'])}")
            error = same_arrivals(open_loop["kiln"]["due_ms"],
                                  open_loop["llama.cpp"]["due_ms"])
        except (RuntimeError, OSError, ValueError, KeyError) as e:
            error = str(e)
        finally:
            server.resume()
    return runs, open_loop, rate, n_open, error


def realized_rate(open_loop):
    """Requests per second of the open loop's arrivals: their gaps' mean, inverted."""
    due = [d for d in open_loop["kiln"]["due_ms"] if d is not None]
    return (len(due) - 1) / (max(due) / 1000) if len(due) > 1 and max(due) > 0 else 0.0


def same_arrivals(kiln_due, peer_due):
    """None when both runners were given the same arrival times (to 0.01 ms), else why not: the
    open-loop comparison holds only at the same offered load."""
    if len(kiln_due) != len(peer_due) or any(d is None for d in kiln_due):
        return (f"open loop: arrival times missing (kiln {len(kiln_due)}, "
                f"llama.cpp {len(peer_due)})")
    worst = max((abs(a - b) for a, b in zip(kiln_due, peer_due)), default=0.0)
    if worst > 0.01:
        return f"open loop: the two runs' arrival times differ by up to {worst:.3f} ms"
    return None


def bench_prefix(args, run, server, tmp, prefix, n1, n4):
    runs = {(m, c): [] for m in ("pfx_on", "pfx_off") for c in (1, 4)}
    hits = {}
    for r in range(args.rounds):
        for model in ("pfx_on", "pfx_off"):
            seed = 1000 + 10 * r  # the same suffixes for both models within a round
            warm = write_jsonl(os.path.join(tmp, f"warm-{r}.jsonl"),
                               prefix_workload(prefix, 1, seed))
            c1 = write_jsonl(os.path.join(tmp, f"pfx1-{r}.jsonl"),
                             prefix_workload(prefix, n1, seed + 1))
            c4 = write_jsonl(os.path.join(tmp, f"pfx4-{r}.jsonl"),
                             prefix_workload(prefix, n4, seed + 2))
            run.kiln(server, model, warm, concurrency=1)
            before = scrape(server.metrics_port, model)
            for c, path in ((1, c1), (4, c4)):
                res = run.kiln(server, model, path, concurrency=c)
                runs[(model, c)].append(res)
                log(f"  (3) round {r + 1} {model} concurrency {c}: TTFT mean "
                    f"{fmt(res['ttft']['mean'], 0)} median {fmt(res['ttft']['median'], 0)} "
                    f"p99 {fmt(res['ttft']['p99'], 0)} ms")
            add_deltas(hits.setdefault(model, {}),
                       counter_delta(before, scrape(server.metrics_port, model)))
    return runs, hits


# ---- report ----

def verdict(ok):
    return "met" if ok else "**missed**"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "llm-bench-models"))
    ap.add_argument("--peer", default=os.path.join(ROOT, "bench", "llm", "llamacpp_serve.mjs"))
    ap.add_argument("--node-dir", default=os.environ.get(
        "KILN_LLM_NODE_DIR", os.path.join(ROOT, "build", "llm-node")))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mixed-requests", type=int, default=0,
                    help="requests of the mixed workload (default 48; --quick 24)")
    ap.add_argument("--peer-requests", type=int, default=0,
                    help="requests of the kiln vs llama.cpp workload (default 32; --quick 8)")
    ap.add_argument("--open-loop-s", type=float, default=80,
                    help="open loop: send the requests that arrive in about this long (>= 8)")
    ap.add_argument("--max-wait", type=float, default=600,
                    help="before each run, wait up to this long for builds to end and the "
                    "machine to be quiet (a shared machine)")
    ap.add_argument("--quick", action="store_true",
                    help="the small test model and few requests: a smoke test")
    ap.add_argument("--no-peer", action="store_true", help="skip llama.cpp")
    ap.add_argument("--label", default="")
    ap.add_argument("--no-write", action="store_true", help="print only; write no results file")
    args = ap.parse_args()

    shape = "small" if args.quick else "tinyllama"
    n_mixed = args.mixed_requests or (24 if args.quick else 48)
    n_peer = args.peer_requests or (8 if args.quick else 32)
    n1, n4 = (4, 8) if args.quick else (6, 12)
    args.gguf = os.path.join(args.models, f"llama-{shape}-q4_0.gguf")
    if not os.path.exists(args.gguf):
        os.makedirs(args.models, exist_ok=True)
        log(f"writing {args.gguf} ...")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "llm", "make_models.py"),
                        "--shape", shape, "--arch", "llama", "--types", "q4_0",
                        "--out", args.models], check=True)
    if not os.path.exists(args.gguf):
        sys.exit(f"serve_bench: make_models.py did not write {args.gguf}")
    peer_missing = None
    if args.no_peer:
        peer_missing = "skipped (--no-peer)"
    elif not os.path.exists(args.peer):
        peer_missing = f"{os.path.relpath(args.peer, ROOT)} not found"
    elif vocab.node_binary() is None:
        peer_missing = "no Node.js (scripts/install-deps llm)"

    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="kiln-serve-bench-")
    kv_bytes = MAX_NUM_SEQS * KV_TOKENS_PER_SEQ * KV_BYTES_PER_TOKEN[shape]
    repo, configs = make_repo(tmp, args.gguf, kv_bytes)
    mixed = mixed_workload(n_mixed, seed=1)
    peer_wl = (uniform_workload(n_peer, 2, (16, 64), (4, 16)) if args.quick else
               uniform_workload(n_peer, 2, (64, 256), (32, 128)))
    prefix = ids(random.Random(3), 512)
    mixed_path = write_jsonl(os.path.join(tmp, "mixed.jsonl"), mixed)
    peer_path = write_jsonl(os.path.join(tmp, "peer.jsonl"), peer_wl)  # kiln alone (no peer)
    run = Runner(args, tmp)
    server = Server(args.kiln, repo, args.threads, os.path.join(tmp, "serve.log"))
    log(f"serve_bench: {args.gguf}, {args.threads} threads, {args.rounds} rounds; "
        f"temporary files in {tmp}")
    try:
        server.start(list(configs))
        log(f"models ready after {time.monotonic() - started:.0f} s; (1) continuous vs static: "
            f"{describe(mixed)}")
        b_runs, samples, overhead, per_model = bench_batching(args, run, server, mixed_path)
        step_cost = bench_step_cost(args, run, server, tmp)
        log(f"(2) kiln vs llama.cpp: {describe(peer_wl)}")
        if peer_missing:
            p_runs = {"kiln": [], "llama.cpp": []}
            for r in range(args.rounds):
                p_runs["kiln"].append(run.kiln(server, "cont", peer_path,
                                               concurrency=MAX_NUM_SEQS))
                log(f"  (2) round {r + 1} kiln: {short(p_runs['kiln'][-1])}")
            open_loop, rate, n_open, peer_error = {}, None, 0, peer_missing
        else:
            p_runs, open_loop, rate, n_open, peer_error = bench_peer(args, run, server, peer_wl,
                                                                     tmp)
        log(f"(3) prefix caching: 512-token shared prefix + 32 unique tokens, max_tokens 16; "
            f"{n1} requests at concurrency 1, {n4} at 4")
        x_runs, hits = bench_prefix(args, run, server, tmp, prefix, n1, n4)
    finally:
        server.stop()
    serve_log_head = ""
    with open(server.log_path, "rb") as f:
        for line in f.read().decode("utf-8", "replace").splitlines():
            if "KV cache" in line and "'cont'" in line:
                serve_log_head = line.strip()
    shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started

    # ---- figures ----
    rows = []  # (measurement, figure, target, verdict)
    c_tp, p_tp, s_tp = (med(b_runs[m], "output_throughput") for m in BATCHING_MODELS)
    c_p99, p_p99, s_p99 = (med(b_runs[m], "ttft", "p99") for m in BATCHING_MODELS)
    rows.append(("1. continuous / static (request-level, padded) output tokens/s",
                 f"{c_tp / p_tp:.2f}x ({c_tp:.1f} / {p_tp:.1f})", ">= 2.5x",
                 verdict(c_tp / p_tp >= 2.5)))
    rows.append(("1. TTFT p99 continuous vs static (padded)", f"{c_p99:.0f} ms vs {p_p99:.0f} ms",
                 "lower", verdict(c_p99 < p_p99)))
    rows.append(("1. continuous / static with finished members leaving the batch, output "
                 "tokens/s", f"{c_tp / s_tp:.2f}x ({c_tp:.1f} / {s_tp:.1f})", "(context)", ""))
    rows.append(("1. TTFT p99 continuous vs static (finished members leaving)",
                 f"{c_p99:.0f} ms vs {s_p99:.0f} ms", "(context)", ""))
    # The engine-time bound of the mixed workload: prompt tokens at the prefill cost (pfx_off's
    # TTFT at concurrency 1 over its prompt), output tokens at the 16-sequence decode cost.
    s1, s16 = step_cost[1], step_cost[MAX_NUM_SEQS]
    n_in = sum(len(r["prompt"]) for r in mixed)
    n_out = sum(r["max_tokens"] for r in mixed)
    pre = med(x_runs[("pfx_off", 1)], "ttft", "median") / (len(prefix) + 32)
    bound = (n_in * pre + n_out * s16 / MAX_NUM_SEQS) / 1000  # s
    c_dur, s_dur = med(b_runs["cont"], "duration_s"), med(b_runs["static"], "duration_s")
    if not math.isnan(bound):
        rows.append(("1. static time / estimated engine-time bound (about the most a "
                     "scheduler can gain)",
                     f"{s_dur / bound:.2f}x ({s_dur:.1f} s / {bound:.1f} s; continuous "
                     f"{c_dur / bound:.2f}x the bound)", "(context)", ""))
    k_tp = med(p_runs["kiln"], "output_throughput")
    if p_runs["llama.cpp"]:
        l_tp = med(p_runs["llama.cpp"], "output_throughput")
        rows.append(("2. kiln / llama.cpp output tokens/s, concurrency 16",
                     f"{k_tp / l_tp:.2f}x ({k_tp:.1f} / {l_tp:.1f})", ">= 1.2x",
                     verdict(k_tp / l_tp >= 1.2)))
    else:
        rows.append(("2. kiln / llama.cpp output tokens/s, concurrency 16",
                     f"kiln {k_tp:.1f}; llama.cpp not run: {peer_error}", ">= 1.2x",
                     "not measured"))
    if "llama.cpp" in open_loop:
        kp, lp = open_loop["kiln"]["ttft"]["p99"], open_loop["llama.cpp"]["ttft"]["p99"]
        same = not (peer_error or "").startswith("open loop:")
        rows.append((f"2. TTFT p99, open loop at {realized_rate(open_loop):.3f} req/s "
                     "(Poisson), kiln vs llama.cpp",
                     f"{kp:.0f} ms vs {lp:.0f} ms", "lower",
                     verdict(kp < lp) if same else "not comparable (arrivals differ)"))
    else:
        rows.append(("2. TTFT p99 at equal throughput, kiln vs llama.cpp", "not measured",
                     "lower", "not measured"))
    for c in (1, 4):
        on, off = med(x_runs[("pfx_on", c)], "ttft", "median"), med(x_runs[("pfx_off", c)],
                                                                     "ttft", "median")
        rows.append((f"3. TTFT median, prefix caching off / on, concurrency {c}",
                     f"{off / on:.2f}x ({off:.0f} / {on:.0f} ms)", ">= 3x", verdict(off / on >= 3)))
    threshold = MAX_NUM_SEQS - 1
    waste, waste_used, usage = kv_waste(samples, threshold)
    if waste:
        rows.append(("4. KV waste / budget, >= 15 running (mean, max)",
                     f"{statistics.mean(waste):.2%}, {max(waste):.2%} ({len(waste)} samples)",
                     "< 5%", verdict(max(waste) < 0.05)))
    else:
        rows.append(("4. KV waste / budget, >= 15 running", f"no samples ({len(samples)} polled)",
                     "< 5%", "not measured"))
    step, fwd, sch = (overhead["kiln_gen_step_duration_seconds_sum"],
                      overhead["kiln_gen_forward_seconds_total"],
                      overhead["kiln_gen_scheduler_seconds_total"])
    ovh = (step - fwd + sch) / (step + sch) if step + sch > 0 else float("nan")
    rows.append(("5. overhead (step - forward + scheduler) / (step + scheduler)",
                 f"{ovh:.2%}", "< 5%", verdict(ovh < 0.05)))

    # ---- markdown ----
    dirty = " (with uncommitted changes)" if tree_dirty() else ""
    cmdline = "bench/llm/serve_bench.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    L = [f"# kiln generation serving ({shape} q4_0)", "",
         f"- commit {commit()}{dirty}, CPU {cpu_name()} ({os.cpu_count()} cores), "
         f"{args.threads} threads, {args.rounds} interleaved rounds (medians), "
         f"{datetime.date.today().isoformat()}, {elapsed / 60:.1f} min",
         f"- command: `{cmdline.strip()}`",
         f"- model: `{os.path.relpath(args.gguf, ROOT)}` (tests/llm/make_models.py, random "
         f"weights); KV cache {MAX_NUM_SEQS} x {KV_TOKENS_PER_SEQ} tokens "
         f"({kv_bytes / 2**20:.0f} MiB) per model" + (f"; `{serve_log_head}`" if serve_log_head
                                                     else ""),
         f"- kiln serve: `{' '.join(server.cmd[:2])} --model-repository REPO "
         f"--model-thread-budget {args.threads}` (OMP_NUM_THREADS={args.threads})", "",
         "Model configs (config.pbtxt of each model in the temporary repository):", ""]
    for name, cfg in configs.items():
        L.append(f"- `{name}`: " + "; ".join(
            f"{k}={v}" for k, v in re.findall(r'key: "(\w+)" value \{ string_value: "([^"]*)"',
                                              cfg)))
    L += ["", "Client commands (one of each kind; workloads are JSON lines written by the "
          "script):", ""]
    L += [f"- {kind}: `{c}`" for kind, c in run.commands]
    L += ["", "## Summary", "", "| measurement | figure | target | |", "|---|---|---|---|"]
    L += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]

    def table(title, named_runs):
        out = ["", title, "", "| run | output tok/s | req/s | TTFT mean / median / p99 ms | "
               "TPOT median ms | ITL median ms | E2E median ms | duration s | completed |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, rs in named_runs:
            if not rs:
                continue
            out.append(
                f"| {name} | {med(rs, 'output_throughput'):.1f} | "
                f"{med(rs, 'request_throughput'):.2f} | "
                f"{fmt(med(rs, 'ttft', 'mean'), 0)} / {fmt(med(rs, 'ttft', 'median'), 0)} / "
                f"{fmt(med(rs, 'ttft', 'p99'), 0)} | {fmt(med(rs, 'tpot', 'median'))} | "
                f"{fmt(med(rs, 'itl', 'median'))} | {fmt(med(rs, 'e2e', 'median'), 0)} | "
                f"{med(rs, 'duration_s'):.1f} | {min(r['completed'] for r in rs)} |")
        return out

    L += table(f"## 1. Continuous vs static batching\n\nWorkload: {describe(mixed)}; "
               "log-normal lengths (sigma 1), seeded; every request sent at once "
               "(`--request-rate inf`, no client cap); the server runs 16 at a time.",
               [("continuous", b_runs["cont"]), ("static, padded (request-level)", b_runs["padded"]),
                ("static, finished members leave", b_runs["static"])])
    L += ["", "Engine counters over all rounds (from /metrics):", "",
          "| model | steps | mean step ms | forward share of step | prompt + generated tokens "
          "per step | tokens run per step (with padding rows) | preemptions |",
          "|---|---:|---:|---:|---:|---:|---:|"]
    for m in BATCHING_MODELS:
        d = per_model[m]
        n, t = d["kiln_gen_step_duration_seconds_count"], d["kiln_gen_step_duration_seconds_sum"]
        tokens = d["kiln_gen_prompt_tokens_total"] + d["kiln_gen_generation_tokens_total"]
        if n:
            L.append(f"| {m} | {n:.0f} | {1000 * t / n:.1f} | "
                     f"{d['kiln_gen_forward_seconds_total'] / t:.1%} | {tokens / n:.1f} | "
                     f"{d['kiln_batch_size_sum'] / n:.1f} | "
                     f"{d['kiln_gen_preemptions_total']:.0f} |")
    L += ["", f"Decode step time (ITL median, 16-token prompts, 64 tokens each, cont): "
          f"{s1:.1f} ms with 1 sequence, {s16:.1f} ms with {MAX_NUM_SEQS}: a token costs "
          f"{s1:.1f} ms alone and {s16 / MAX_NUM_SEQS:.1f} ms in a full batch "
          f"({s1 * MAX_NUM_SEQS / s16:.1f}x cheaper). Request-level (padded) batching computes "
          f"every row of its batch on every step until the longest member finishes: with "
          f"log-normal output lengths the longest of 16 is several times the mean, and the "
          f"rows of members already answered are compute spent on nothing (the 'tokens run per "
          f"step' column against 'prompt + generated tokens'). Static batching whose finished "
          f"members leave loses only the difference between the batch-1 and batch-16 token "
          f"cost, on the steps its shrinking batches run, and prompt tokens ({n_in} of the "
          f"{n_in + n_out} tokens here) cost about the same in every mode. (Where decode is "
          f"bound by memory bandwidth, as on a GPU, a 16-sequence step costs little more than a "
          f"1-sequence one, and that static batching loses much more too.)"]
    if not math.isnan(bound):
        L += ["", f"A bound: with prompt tokens at {pre:.2f} ms each (TTFT of pfx_off at "
              f"concurrency 1 / {len(prefix) + 32} tokens) and output tokens at the full batch's "
              f"{s16 / MAX_NUM_SEQS:.2f} ms, this workload needs at least {n_in} x {pre:.2f} + "
              f"{n_out} x {s16 / MAX_NUM_SEQS:.2f} ms = {bound:.1f} s of engine time; the "
              f"continuous runs took {c_dur:.1f} s ({c_dur / bound:.2f}x the bound), static "
              f"{s_dur:.1f} s: a scheduler at the bound would be {s_dur / bound:.2f}x static."]
    L += table(f"## 2. kiln vs llama.cpp\n\nWorkload: {describe(peer_wl)}; closed loop, "
               "`--max-concurrency 16`, all due at once. llama.cpp: "
               f"{'node ' + os.path.relpath(args.peer, ROOT) if not peer_missing else peer_error}"
               "; kiln serve is stopped (SIGSTOP) while it runs.",
               [("kiln", p_runs["kiln"]), ("llama.cpp", p_runs["llama.cpp"])])
    if open_loop:
        last_due_s = max((d for d in open_loop["kiln"]["due_ms"] if d is not None),
                         default=0) / 1000
        L += table(f"Open loop: the first {n_open} requests of the same workload, Poisson "
                   f"arrivals (seed 1) at `--request-rate {rate}`, the rate at which this sample's "
                   f"{n_open - 1} gaps average 70 % of the lower closed-loop request throughput "
                   f"({realized_rate(open_loop):.3f} req/s), "
                   "`--max-concurrency 16`, one run each. Latencies start when a "
                   "request is sent (kiln bench generate) or starts on a sequence (llama.cpp); "
                   "with the cap never reached at this rate the two are the same. Both runs "
                   "draw the same arrival times (checked to 0.01 ms; the last request is due "
                   f"at {last_due_s:.1f} s).",
                   [(k, [v]) for k, v in open_loop.items()])
    if peer_error and not peer_missing:
        L += ["", f"llama.cpp error: `{peer_error[:500]}`"]
    L += ["", "## 3. Prefix caching", "",
          "Every prompt: one shared 512-token prefix + a unique 32-token suffix, max_tokens 16. "
          "Before each model's runs of a round, one warm-up request (the prefix and another "
          "suffix) is sent and **not counted**: the measured requests of `pfx_on` all find the "
          "prefix cached. New suffixes every round.", "",
          "| model | concurrency | requests | TTFT mean ms | TTFT median ms | TTFT p99 ms | "
          "output tok/s |", "|---|---:|---:|---:|---:|---:|---:|"]
    for c, n in ((1, n1), (4, n4)):
        for m in ("pfx_on", "pfx_off"):
            rs = x_runs[(m, c)]
            L.append(f"| {m} | {c} | {n} | {fmt(med(rs, 'ttft', 'mean'), 0)} | "
                     f"{fmt(med(rs, 'ttft', 'median'), 0)} | {fmt(med(rs, 'ttft', 'p99'), 0)} | "
                     f"{med(rs, 'output_throughput'):.1f} |")
        on, off = x_runs[("pfx_on", c)], x_runs[("pfx_off", c)]
        L.append(f"| off / on | {c} | | {med(off, 'ttft', 'mean') / med(on, 'ttft', 'mean'):.2f}x"
                 f" | {med(off, 'ttft', 'median') / med(on, 'ttft', 'median'):.2f}x | "
                 f"{med(off, 'ttft', 'p99') / med(on, 'ttft', 'p99'):.2f}x | |")
    h = hits.get("pfx_on", {})
    hit, asked = (h.get("kiln_gen_prefix_cache_hits_total", 0),
                  h.get("kiln_gen_prefix_cache_queries_total", 0))
    if asked:
        L += ["", f"pfx_on prefix cache over the measured runs: {hit:.0f} of {asked:.0f} prompt "
              f"tokens hit ({hit / asked:.1%})."]
    L += ["", "## 4. KV waste", "",
          f"/metrics polled every {POLL_S} s during the continuous runs of (1): {len(samples)} "
          f"samples, {len(waste)} with >= {threshold} running sequences (steady state). "
          "waste = (used blocks x block size - KV tokens) / (all blocks x block size)."]
    if waste:
        L += ["", f"- of the budget: mean {statistics.mean(waste):.2%}, max {max(waste):.2%} "
              "(target < 5%)",
              f"- of the allocated (used) blocks: mean {statistics.mean(waste_used):.2%}, "
              f"max {max(waste_used):.2%}",
              f"- KV usage (used / all blocks) in those samples: mean "
              f"{statistics.mean(usage):.1%}, max {max(usage):.1%} (the budget: "
              f"{MAX_NUM_SEQS} x {KV_TOKENS_PER_SEQ} tokens)"]
    L += ["", "## 5. Serving overhead", "",
          f"/metrics deltas over the continuous runs of (1): step time {step:.2f} s "
          f"(kiln_gen_step_duration_seconds_sum), forward {fwd:.2f} s, scheduler {sch:.3f} s; "
          f"overhead = (step - forward + scheduler) / (step + scheduler) = **{ovh:.2%}** "
          "(target < 5%). The runs hold 16 sequences except while the last requests drain."]
    busy = [f for f in run.foreign if f[1] > 0.10]
    shares = [f for _, f in run.foreign]
    L += ["", "## The machine", "",
          f"Before each run the script waited for no build to run and the machine to be under "
          f"15 % busy (up to {args.max_wait:.0f} s). CPU used by other processes during the "
          f"{len(shares)} measured runs (machine busy time minus kiln serve's and the clients'): "
          f"median {statistics.median(shares):.1%}, max {max(shares):.1%}"
          + (f"; runs over 10 %: " + ", ".join(f"{w} {f:.0%}" for w, f in busy) if busy else "")
          + "."]
    text = "\n".join(L) + "\n"

    print("\n| measurement | figure | target | |")
    for a, b, c, d in rows:
        print(f"| {a} | {b} | {c} | {d} |")
    if not args.no_write:
        out_dir = os.path.join(ROOT, "bench", "results")
        os.makedirs(out_dir, exist_ok=True)
        stem = (f"{datetime.date.today().isoformat()}-{commit()}-llm-serve"
                f"{args.label and '-' + args.label}")
        with open(os.path.join(out_dir, stem + ".md"), "w") as f:
            f.write(text)
        log(f"wrote bench/results/{stem}.md")
    else:
        print("\n" + text)


if __name__ == "__main__":
    main()
