# SPDX-License-Identifier: Apache-2.0
"""Checks the demo generative model (make_llm_demo.py) with kiln itself.

    /usr/bin/python3 tools/demo/make_llm_demo_test.py --kiln build/kiln \\
        --tokenize build/src/llm/llm_tokenize

Writes the model twice into a temporary folder, then checks:
  - determinism: the two files are byte-identical;
  - the tokenizer, as kiln runs it (llm_tokenize on the GGUF's tokenizer.ggml.* keys, and
    `kiln generate --print-ids` through the GGUF loader): every corpus paragraph encodes without
    byte or unknown tokens into pieces of 4+ characters on average and decodes back exactly;
    the script's Python encoder (which made the counts) gives the same ids; every merged piece
    encodes to itself (is reachable);
  - the weights: kiln's logits for every context token (`--logits-out`), as log-softmax, equal
    log P(next | token) of the smoothed counts that this test makes from kiln's own tokenization
    (within the Q8_0 rounding), their argmax is the most frequent successor wherever that one is
    clearly ahead, and a token never seen before another (</s>, a byte, <|im_start|>) has the
    row of <s>;
  - generation: greedy `kiln generate` follows the most frequent successors and stops with
    </s>; its words are corpus words; a chat (`--messages`, the ChatML template) renders and its
    reply starts as a paragraph does.
Exit 0 when all pass, 1 otherwise (each check prints ok / FAIL).
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(_HERE, "..", "..", "tests", "llm"))
import gguf_writer as gw  # noqa: E402
import make_llm_demo as demo  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    return r.stdout


def tokenize(driver, meta, texts, tmp, name):
    """kiln's tokenizer on `texts` (no BOS): [(ids, decoded)]."""
    spec, tpath = os.path.join(tmp, name + "-spec.json"), os.path.join(tmp, name + "-texts.json")
    with open(spec, "w") as f:
        json.dump(meta, f)
    with open(tpath, "w") as f:
        json.dump(texts, f)
    out = json.loads(run([driver, "--gguf-json", spec, "--texts", tpath]))
    return [(r["ids"], r["decoded"]) for r in out["results"]]


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True, help="the kiln binary")
    parser.add_argument("--tokenize", required=True, help="the llm_tokenize test driver")
    args = parser.parse_args()
    script = os.path.join(_HERE, "make_llm_demo.py")

    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "a", "model.gguf")
        again = os.path.join(tmp, "b", "model.gguf")
        for path in (model, again):
            run([sys.executable, script, path])
        with open(model, "rb") as f1, open(again, "rb") as f2:
            check(f1.read() == f2.read(), "two builds write the same bytes")
        size = os.path.getsize(model)
        check(size < 12 << 20, f"the file is small ({size / 1e6:.1f} MB)")

        r = gw.GGUFReader(model)
        tokens = r.kv["tokenizer.ggml.tokens"]
        types = r.kv["tokenizer.ggml.token_type"]
        V = len(tokens)
        check(r.kv["general.architecture"] == "llama" and r.kv["llama.context_length"] == 2048
              and r.kv["tokenizer.ggml.model"] == "llama" and 1000 <= V <= 4096,
              f"llama, context 2048, SentencePiece-style vocabulary of {V}")
        meta = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.kv.items()
                if k.startswith("tokenizer.ggml.")}
        bos, eos = meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"]
        im_start, im_end = tokens.index("<|im_start|>"), tokens.index("<|im_end|>")
        newline = tokens.index("<0x0A>")

        # --- tokenizer ------------------------------------------------------------------------
        paragraphs = demo.read_corpus()
        encoded = tokenize(args.tokenize, meta, paragraphs, tmp, "corpus")
        check(all(d == p for (_, d), p in zip(encoded, paragraphs)),
              f"all {len(paragraphs)} corpus paragraphs decode back exactly")
        all_ids = [t for ids, _ in encoded for t in ids]
        special = [t for t in all_ids if types[t] != 1]
        check(not special, f"no byte, unknown or control tokens in the corpus ({len(special)})")
        chars = sum(len(p) for p in paragraphs)
        long_pieces = sum(len(tokens[t].replace("\u2581", "")) >= 2 for t in all_ids)
        check(chars / len(all_ids) >= 4.0 and long_pieces >= 0.75 * len(all_ids),
              f"{len(all_ids)} tokens: {chars / len(all_ids):.2f} characters per token, "
              f"{long_pieces / len(all_ids):.0%} of them words or pieces of 2+ letters")
        _, vocab, _ = demo.build()
        same = sum(vocab.encode(p) == ids for p, (ids, _) in zip(paragraphs, encoded))
        check(same == len(paragraphs),
              f"the script's encoder agrees with kiln's on {same}/{len(paragraphs)} paragraphs")
        pieces = [i for i in range(V) if types[i] == 1 and len(tokens[i]) > 1]
        no_prefix = dict(meta, **{"tokenizer.ggml.add_space_prefix": False})
        alone = tokenize(args.tokenize, no_prefix, [tokens[i].replace("\u2581", " ")
                                                    for i in pieces], tmp, "pieces")
        unreachable = [tokens[i] for i, (ids, _) in zip(pieces, alone) if ids != [i]]
        check(not unreachable, f"every one of the {len(pieces)} merged pieces encodes to itself "
              f"{unreachable[:5]}")
        words = set(re.findall(r"[A-Za-z]+", " ".join(paragraphs)))

        # --- weights: the bigram table ---------------------------------------------------------
        sequences = [[bos] + ids + [eos] for ids, _ in encoded]
        pair = collections.Counter(p for s in sequences for p in zip(s, s[1:]))
        succ = collections.defaultdict(collections.Counter)
        for (i, j), n in pair.items():
            succ[i][j] = n
        contexts = sorted(succ)
        unigram = np.zeros(V)
        for (_, j), n in pair.items():
            unigram[j] += n
        unigram /= unigram.sum()
        unseen = [eos, im_start, im_end, newline]
        prompt = contexts + unseen
        logits_path = os.path.join(tmp, "logits.npy")
        run([args.kiln, "generate", model, "--tokens", ",".join(map(str, prompt)),
             "--logits-out", logits_path])
        logits = np.load(logits_path)
        check(logits.shape == (len(prompt), V), f"logits of {len(prompt)} tokens")
        got = log_softmax(logits)
        # Q8_0 moves a weight by up to half a step (|LOG_FLOOR| / 254; the blocks' largest values
        # are the floor) plus the f16 rounding of the block scale (2^-11 relative): a
        # log-softmax value by twice that, and a difference of two logits by as much.
        tolerance = 2 * abs(demo.LOG_FLOOR) * (1 / 254 + 2 ** -11)

        def expected(i):
            """log P(. | i) from the counts: (c(i, j) + ALPHA u(j)) / (c(i) + ALPHA)."""
            i = i if i in succ else bos
            want = demo.ALPHA * unigram
            for j, c in succ[i].items():
                want[j] += c
            with np.errstate(divide="ignore"):
                return np.log(want / (sum(succ[i].values()) + demo.ALPHA))

        def favourite(i):
            """The most likely successor of i when it leads by more than Q8_0 can move."""
            want = expected(i)
            second, first = np.argsort(want, kind="stable")[-2:]
            return int(first) if want[first] - want[second] > tolerance + 0.05 else None

        worst, clear, agree = 0.0, 0, 0
        for row, i in enumerate(contexts):
            want = expected(i)
            seen = want > -10
            worst = max(worst, float(np.abs(got[row][seen] - want[seen]).max()))
            fav = favourite(i)
            if fav is not None:
                clear += 1
                agree += int(np.argmax(logits[row])) == fav == succ[i].most_common(1)[0][0]
        check(worst <= tolerance, f"log P(next | token) of every context within {worst:.3f} "
              f"(<= {tolerance:.3f}) of the counts'")
        check(clear >= len(contexts) // 2 and agree == clear,
              f"argmax = the most frequent successor in {agree}/{clear} contexts with a clear one "
              f"(of {len(contexts)})")
        rare = got[:len(contexts)][:, [t for t in range(V) if unigram[t] == 0]]
        check(rare.max() < -10, f"tokens never seen next stay unlikely (log P <= {rare.max():.1f})")
        bos_row = logits[contexts.index(bos)]
        check(all(np.array_equal(logits[len(contexts) + k], bos_row) for k in range(len(unseen))),
              "</s>, <|im_start|>, <|im_end|> and <0x0A> are followed as <s> is")

        # --- generation -----------------------------------------------------------------------
        text = "This program is"
        out = json.loads(run([args.kiln, "generate", model, "--prompt", text, "--max-tokens",
                              "40", "--temperature", "0", "--print-ids"]))
        want_prompt = [bos] + tokenize(args.tokenize, meta, [text], tmp, "prompt")[0][0]
        check(out["prompt_tokens"] == want_prompt,
              f"kiln generate tokenizes the prompt as llm_tokenize does {out['prompt_tokens']}")
        gen = out["tokens"]
        steps = [(favourite(prev), tok) for prev, tok in zip(want_prompt[-1:] + gen, gen)]
        steps = [(fav, tok) for fav, tok in steps if fav is not None]
        reply = "".join(tokens[t] for t in gen).replace("\u2581", " ")
        check(len(gen) == 40 and len(steps) >= 10 and all(f == t for f, t in steps),
              f"greedy continuation takes the favourite successor at all {len(steps)} clear "
              f"steps: {reply!r}")
        # A context whose favourite is </s>: generation stops at once.
        ends = [i for i in contexts if i != bos and favourite(i) == eos]
        if check(ends, f"{len(ends)} contexts favour </s>"):
            out = json.loads(run([args.kiln, "generate", model, "--tokens", f"{bos},{ends[0]}",
                                  "--max-tokens", "5", "--temperature", "0", "--print-ids"]))
            check(out["tokens"] == [],
                  f"after {tokens[ends[0]]!r} (</s> favoured) generation stops at once")
        made_up = [w for w in re.findall(r"[A-Za-z]+", reply) if w not in words]
        check(not made_up, f"its words are corpus words {made_up}")

        messages = os.path.join(tmp, "messages.json")
        with open(messages, "w") as f:
            json.dump([{"role": "user", "content": "What is free software?"}], f)
        out = json.loads(run([args.kiln, "generate", model, "--messages", messages,
                              "--max-tokens", "40", "--temperature", "0", "--print-ids"]))
        p = out["prompt_tokens"]
        check(p[:2] == [bos, im_start] and p.count(im_start) == 2 and p.count(im_end) == 1
              and p[-1] == newline, f"the ChatML template renders ({len(p)} prompt tokens)")
        first = succ[bos].most_common(1)[0][0]
        check(out["tokens"][:1] == [first],
              f"the chat reply starts as a paragraph does ({tokens[first]!r})")

    print("make_llm_demo_test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
