#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""kiln's decoder engine against llama.cpp on the same GGUF files, threads and machine.

For each model file, kiln (`kiln profile MODEL.gguf --json`) and llama.cpp (node-llama-cpp
3.21.1's prebuilt CPU binary, bench/llm/llamacpp_bench.mjs) measure, in interleaved rounds:

  pp512          prompt processing of 512 tokens, one sequence (tokens/s)
  tg128          token generation of 128 tokens, one sequence, from an empty context (tokens/s)
  tg128 x16      batched decode: 16 sequences (32-token prompts) each generating 128 tokens, one
                 forward call per step in kiln, one llama_decode batch per step in llama.cpp

and the table gives each engine's median over the rounds and kiln / llama.cpp. Token generation
is bound by memory bandwidth, so the script measures the machine's read bandwidth
(kiln_read_bandwidth, a STREAM-like read loop on the same threads, 2 MiB pages) and reports, for
the tg rows, tokens/s x bytes read per token / bandwidth (bytes per token: the weight matrices,
the token embedding's one row excepted). A virtual machine's bandwidth drifts (here between
about 50 and 85 GB/s within seconds), so the probe runs right before and right after each
engine's run in every round, that run's share is taken against the mean of those two, and the
table gives the median share over the rounds (the JSON keeps every round's). Memory: kiln's
resident set (and its peak) against the file size plus the KV cache.

The models are written by tests/llm/make_models.py (seeded random weights, TinyLlama-1.1B's
shape: 22 layers, hidden 2048, 32 heads, 4 KV heads, FFN 5632, vocabulary 32000) into
build/llm-bench-models/ when absent.

  bench/llm/run.py                               # tinyllama q4_0, q8_0, f16; 3 rounds
  bench/llm/run.py --types q4_0 --rounds 1 --threads 2
  bench/llm/run.py --shape small --types f16     # the small test model, for a quick look

Results: bench/results/<date>-<commit>-llm.{md,json}, stamped with the commit and the CPU.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))
import vocab  # noqa: E402  (node_binary: the Node.js scripts/install-deps llm chose)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stamp import commit, cpu_name  # noqa: E402



def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--bandwidth-probe", default=os.path.join(ROOT, "build", "src", "llm",
                                                              "kiln_read_bandwidth"))
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "llm-bench-models"))
    ap.add_argument("--shape", default="tinyllama", choices=["tinyllama", "small"])
    ap.add_argument("--types", default="q4_0,q8_0,f16")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--node-dir", default=os.environ.get(
        "KILN_LLM_NODE_DIR", os.path.join(ROOT, "build", "llm-node")))
    ap.add_argument("--label", default="")
    ap.add_argument("--no-write", action="store_true", help="print only; write no results file")
    args = ap.parse_args()

    types = [t.strip() for t in args.types.split(",") if t.strip()]
    os.makedirs(args.models, exist_ok=True)
    files = {}
    for t in types:
        path = os.path.join(args.models, f"llama-{args.shape}-{t}.gguf")
        if not os.path.exists(path):
            print(f"writing {path} ...", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, os.path.join(ROOT, "tests", "llm", "make_models.py"),
                            "--shape", args.shape, "--arch", "llama", "--types", t,
                            "--out", args.models], check=True)
        if not os.path.exists(path):
            sys.exit(f"run.py: make_models.py did not write {path}")
        files[t] = path

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))

    def bandwidth():
        return float(subprocess.run([args.bandwidth_probe, "1024", "10"], check=True,
                                    capture_output=True, text=True, env=env).stdout.strip())
    # Probes bracket every engine run (a virtual machine's bandwidth drifts): bws[i] and
    # bws[i + 1] around run i.
    bws = [bandwidth()]

    results = {}
    for t, path in files.items():
        kiln_rows, peer_rows, kiln_meta = {}, {}, None
        kiln_bw, peer_bw = [], []  # per round: the mean of the probes around the engine's run
        for r in range(args.rounds):
            k = run_json([args.kiln, "profile", path, "--json", "--threads", str(args.threads),
                          "--prompt-tokens", str(args.pp), "--gen-tokens", str(args.tg),
                          "--parallel", str(args.parallel), "--repetitions", "1"], env)
            bws.append(bandwidth())
            kiln_bw.append((bws[-2] + bws[-1]) / 2)
            kiln_meta = k
            for row in k["rows"]:
                kiln_rows.setdefault(row["test"], []).append(row["tokens_per_s"])
            p = run_json([vocab.node_binary() or "node",
                          os.path.join(ROOT, "bench", "llm", "llamacpp_bench.mjs"),
                          "--model", path, "--threads", str(args.threads), "--pp", str(args.pp),
                          "--tg", str(args.tg), "--parallel", str(args.parallel),
                          "--repetitions", "1", "--node-dir", args.node_dir], env)
            bws.append(bandwidth())
            peer_bw.append((bws[-2] + bws[-1]) / 2)
            for row in p["rows"]:
                peer_rows.setdefault(row["test"], []).append(row["tokens_per_s"])
            print(f"{t} round {r + 1}: kiln {k['rows']} llama.cpp {p['rows']}", file=sys.stderr,
                  flush=True)
        bytes_per_token = kiln_meta["weight_bytes"] - kiln_meta.get("embedding_bytes", 0)
        rows = []
        for test in kiln_rows:
            kv = statistics.median(kiln_rows[test])
            pv = statistics.median(peer_rows.get(test, [float("nan")]))
            row = {"test": test, "kiln": kv, "llama.cpp": pv, "ratio": kv / pv}
            if test.startswith("tg") and "x" not in test:
                ks = [v * bytes_per_token / (b * 1e9) for v, b in zip(kiln_rows[test], kiln_bw)]
                ps = [v * bytes_per_token / (b * 1e9)
                      for v, b in zip(peer_rows.get(test, []), peer_bw)]
                row["bandwidth_share"] = statistics.median(ks)
                row["llama.cpp_bandwidth_share"] = statistics.median(ps) if ps else float("nan")
                row["bandwidth_shares"] = ks
                row["llama.cpp_bandwidth_shares"] = ps
                row["bandwidth_gbs"] = kiln_bw
            rows.append(row)
        results[t] = {"file": os.path.basename(path), "file_bytes": kiln_meta["file_bytes"],
                      "bytes_per_token": bytes_per_token, "kv_bytes": kiln_meta["kv_bytes"],
                      "rss_bytes": kiln_meta["rss_bytes"],
                      "peak_rss_bytes": kiln_meta["peak_rss_bytes"], "rows": rows}
    bw = statistics.median(bws)
    print(f"read bandwidth: median {bw:.2f} GB/s of {len(bws)} probes "
          f"({min(bws):.2f}..{max(bws):.2f})", file=sys.stderr)

    lines = [f"# kiln vs llama.cpp: decoder engine ({args.shape} shape)", "",
             f"- commit {commit()}, CPU {cpu_name()}, {args.threads} threads, "
             f"{args.rounds} interleaved rounds (medians)",
             f"- read bandwidth: {len(bws)} runs of kiln_read_bandwidth, one before and after "
             f"each engine run, {min(bws):.2f}..{max(bws):.2f} GB/s (median {bw:.2f}); each "
             "round's share is against the mean of the two around it, the table's is the median "
             "over the rounds",
             f"- command: `bench/llm/run.py --shape {args.shape} --types {args.types} "
             f"--threads {args.threads} --rounds {args.rounds}`", "",
             "| type | test | kiln tokens/s | llama.cpp tokens/s | kiln / llama.cpp | "
             "share of bandwidth (kiln / llama.cpp) |",
             "|---|---|---:|---:|---:|---:|"]
    for t, res in results.items():
        for row in res["rows"]:
            share = ""
            if "bandwidth_share" in row:
                share = f"{row['bandwidth_share']:.0%} / {row['llama.cpp_bandwidth_share']:.0%}"
            lines.append(f"| {t} | {row['test']} | {row['kiln']:.2f} | {row['llama.cpp']:.2f} | "
                         f"{row['ratio']:.3f} | {share} |")
    lines += ["", "| type | file MiB | KV MiB | kiln resident MiB (peak) | "
              "resident / (file + KV) |", "|---|---:|---:|---:|---:|"]
    for t, res in results.items():
        limit = res["file_bytes"] + res["kv_bytes"]
        lines.append(f"| {t} | {res['file_bytes'] / 2**20:.0f} | {res['kv_bytes'] / 2**20:.0f} | "
                     f"{res['rss_bytes'] / 2**20:.0f} ({res['peak_rss_bytes'] / 2**20:.0f}) | "
                     f"{res['peak_rss_bytes'] / limit:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        out_dir = os.path.join(ROOT, "bench", "results")
        os.makedirs(out_dir, exist_ok=True)
        stem = f"{datetime.date.today().isoformat()}-{commit()}-llm{args.label and '-' + args.label}"
        with open(os.path.join(out_dir, stem + ".md"), "w") as f:
            f.write(text)
        with open(os.path.join(out_dir, stem + ".json"), "w") as f:
            json.dump({"commit": commit(), "cpu": cpu_name(), "threads": args.threads,
                       "bandwidth_gbs": bw, "bandwidth_probes_gbs": bws, "results": results},
                      f, indent=1)
        print(f"wrote bench/results/{stem}.md", file=sys.stderr)


if __name__ == "__main__":
    main()
