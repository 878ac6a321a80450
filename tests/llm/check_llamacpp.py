#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""kiln against llama.cpp on the same GGUF files: tokenization, greedy text and logits.

Both engines run with an F32 KV cache (llama.cpp's default F16 cache also rounds Q and the
attention weights to F16, kiln's does not; with quantized activations such a difference grows to
the quantization's own error). For each model and prompt:
  1. the prompt's token ids must be identical (llama.cpp's tokenization, BOS as the metadata says);
  2. greedy continuations of --n tokens: llama.cpp's (tests/llm/llamacpp.mjs: node-llama-cpp
     3.21.1; it stops before an end-of-generation token) and `kiln generate --print-ids`;
     for F32 and F16 files (--exact) they must be equal for all of llama.cpp's tokens;
  3. teacher forcing: llama.cpp reports its top --top log-probabilities along its own greedy path
     for --logit-steps steps, kiln computes that whole path in one step (`--logits-out`), and at
     every step kiln's log-probabilities of llama.cpp's top tokens must agree within --tol and
     kiln's argmax must be llama.cpp's unless llama.cpp's top-2 gap is below --tol.

What two correct implementations can promise: both quantize the activations the same way
(Q8_0 / Q8_K blocks, F16 / BF16 rounding for half weights) and compute the same integer block
dot products, summing in different orders, so the logits differ by float rounding: about 1e-5
in log-probability for F32 files, 2e-3 for F16 and 1e-2 for BF16 (the 16-bit rounding of the
activations magnifies a last-bit difference). With quantized weights the paths mostly agree to
1e-5 too, but now and then a last-bit difference moves one activation across an 8-bit
quantization step, and from there the logits differ by the quantization's own noise: measured
up to 5e-2 over 12 steps. The tolerances (--tol overrides them all): f32 1e-3, f16 1e-2,
bf16 3e-2, quantized 1e-1 in log-probability; a bug in a layout or a scale is off by whole units.
A greedy path flips only at a near tie, and these random-weight models have them (1-6% of steps
have a top-2 gap under 1% of the logits' spread), so exact greedy agreement is required where
rounding is smallest (F32, F16); for quantized and BF16 files it is reported.

Exit 0 when every check passes, 1 with the failures listed, 77 when the peer is not installed.

  tests/llm/check_llamacpp.py --kiln build/kiln --models DIR [--exact f32,f16] [--n 32]
      [--prompts N] [--logit-steps N] [--tol T]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vocab  # noqa: E402  (node_binary: the Node.js install-deps chose)

HERE = os.path.dirname(os.path.abspath(__file__))

PROMPTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time, in a land far away, 12345 dragons",
    "  def main():\n\treturn [x**2 for x in range(10)]  # code",
    "Café naïve — 東京 🙂 ünïcödé",
]


def run_llamacpp(model, requests):
    """llamacpp.mjs's results for `requests` ({"prompt", "n", "logits"} each), in order, from one
    process: node and llama.cpp start once per model."""
    node = vocab.node_binary()
    if node is None:
        print("check_llamacpp: Node.js not found (scripts/install-deps llm); skipping")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "requests.jsonl")
        with open(path, "w") as f:
            for r in requests:
                f.write(json.dumps(r) + "\n")
        cmd = [node, os.path.join(HERE, "llamacpp.mjs"), model, "--requests", path,
               "--threads", "2", "--kv-type", "f32"]
        p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 77:
        print(p.stderr.strip())
        sys.exit(77)
    if p.returncode != 0:
        raise RuntimeError(f"llamacpp.mjs failed on {model}: {p.stderr.strip()}")
    results = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    if len(results) != len(requests):
        raise RuntimeError(f"llamacpp.mjs answered {len(results)} of {len(requests)} requests "
                           f"on {model}")
    return results


def run_kiln_greedy(kiln, model, prompt, n):
    p = subprocess.run([kiln, "generate", model, "--prompt", prompt, "-n", str(n), "--print-ids",
                        "--ignore-eos", "--threads", "2", "--kv-dtype", "f32"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"kiln generate failed on {model}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def kiln_logprobs(kiln, model, ids):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.npy")
        p = subprocess.run([kiln, "generate", model, "--tokens", ",".join(map(str, ids)),
                            "--logits-out", out, "--threads", "2", "--kv-dtype", "f32"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"kiln --logits-out failed on {model}: {p.stderr.strip()}")
        logits = np.load(out).astype(np.float64)
    m = logits.max(axis=1, keepdims=True)
    return logits - (m + np.log(np.exp(logits - m).sum(axis=1, keepdims=True)))


TOLERANCE = {"f32": 1e-3, "f16": 1e-2, "bf16": 3e-2}


def check_model(args, model, exact, tol):
    failures, report = [], []
    prompts = PROMPTS[:args.prompts]
    # Per prompt: the greedy continuation, then the top log-probabilities along the greedy path.
    peers = run_llamacpp(model, [r for p in prompts for r in (
        {"prompt": p, "n": args.n}, {"prompt": p, "n": args.logit_steps, "logits": args.top})])
    for i, prompt in enumerate(prompts):
        peer, forced = peers[2 * i], peers[2 * i + 1]
        mine = run_kiln_greedy(args.kiln, model, prompt, args.n)
        name = f"{os.path.basename(model)} prompt {prompt[:24]!r}"
        if mine["prompt_tokens"] != peer["prompt_tokens"]:
            failures.append(f"{name}: tokenizations differ: kiln {mine['prompt_tokens']} "
                            f"llama.cpp {peer['prompt_tokens']}")
            continue
        agree = 0
        for a, b in zip(mine["tokens"], peer["tokens"]):
            if a != b:
                break
            agree += 1
        # Teacher-forced comparison along llama.cpp's path.
        prompt_ids = forced["prompt_tokens"]
        path = forced["tokens"]
        lp = kiln_logprobs(args.kiln, model, prompt_ids + path)
        worst, ties = 0.0, 0
        for step, top in enumerate(forced["top"]):
            row = lp[len(prompt_ids) - 1 + step]
            for tid, peer_lp in top:
                worst = max(worst, abs(row[tid] - peer_lp))
            gap = top[0][1] - top[1][1] if len(top) > 1 else float("inf")
            kiln_arg = int(np.argmax(row))
            if kiln_arg != top[0][0]:
                if gap < tol:
                    ties += 1
                else:
                    failures.append(f"{name}: step {step}: kiln's argmax {kiln_arg} is not "
                                    f"llama.cpp's {top[0][0]} (llama.cpp's top-2 gap {gap:.2e})")
        if worst > tol:
            failures.append(f"{name}: log-probabilities differ by up to {worst:.2e} "
                            f"(tolerance {tol:.0e})")
        want = len(peer["tokens"])  # llama.cpp stops before an end-of-generation token
        if exact and (agree < want or want < args.n // 2):
            failures.append(f"{name}: greedy continuations agree for {agree} of {want} tokens "
                            f"(kiln {mine['tokens']}, llama.cpp {peer['tokens']})")
        report.append(f"{name}: prompt ids equal ({len(prompt_ids)}), greedy agree {agree}/{want}"
                      f", max |dlogprob| {worst:.2e}, near ties {ties}")
    return failures, report


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", required=True, help="folder of .gguf files (make_models.py)")
    ap.add_argument("--glob", default="*.gguf")
    ap.add_argument("--exact", default="f32,f16",
                    help="types whose greedy continuation must match for all --n tokens")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--logit-steps", type=int, default=12)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS))
    ap.add_argument("--tol", type=float, default=None)
    args = ap.parse_args()
    exact_types = [t for t in args.exact.split(",") if t]
    models = sorted(glob.glob(os.path.join(args.models, args.glob)))
    if not models:
        print(f"check_llamacpp: no models match {args.glob} in {args.models}", file=sys.stderr)
        return 1
    failures = []
    for m in models:
        stem = os.path.basename(m)[:-len(".gguf")]
        exact = any(stem.endswith("-" + t) for t in exact_types)
        tol = args.tol
        if tol is None:
            tol = next((v for t, v in TOLERANCE.items() if stem.endswith("-" + t)), 1e-1)
        f, r = check_model(args, m, exact, tol)
        failures += f
        for line in r:
            print(line)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
