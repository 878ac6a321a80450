#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The tokenizer reference test (CTest llm_tokenizer_reference).

For each real vocabulary (tests/llm/vocab.py: the Llama 2-format SentencePiece one, Llama 3 and
Qwen2.5), tokenizes the texts of tests/llm/tokenizer/texts.json plus a long text made of them
with
  - the reference: tests/llm/tokenizer_reference.mjs (@lenml/tokenizers, Hugging Face's
    algorithms in JavaScript) on the package's tokenizer.json;
  - kiln through LoadHfTokenizer on the same tokenizer.json (llm_tokenize --hf);
  - kiln through GGUF-style metadata from vocab.py (llm_tokenize --gguf-json): for Llama 2 this
    is the SentencePiece path with reconstructed scores, for the others the GGUF merges path;
and checks, text by text: the ids equal the reference's token for token; Decode gives the
reference's decoded text; the IncrementalDetokenizer stream equals Decode; Decode(Encode(x))
== x for texts without special tokens; with add_special the ids are BOS + ids (+ EOS) as the
metadata says.

Before that, the hand-written pre-tokenizers (llm_tokenize --pretokenize) are compared with the
original regexes run by Python's `regex` module on random strings drawn from a pool of letters,
digits, numbers, marks, spaces, punctuation and emoji (skipped when the module is missing).

Exits 77 (skip) when node or the npm packages are missing. Usage:
  compare.py --driver build/src/llm/llm_tokenize [--names llama3,qwen2.5]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LLM = os.path.dirname(HERE)
sys.path.insert(0, LLM)

import vocab  # noqa: E402

SPECIAL_MARKERS = ("<s>", "</s>", "<unk>", "<|", "<tool_call>", "</tool_call>")


def skip(msg):
    print(f"skipped: {msg}")
    sys.exit(77)


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr.decode("utf-8", "replace"))
        raise SystemExit(f"command failed ({p.returncode}): {' '.join(cmd)}")
    return json.loads(p.stdout.decode("utf-8"))


REGEXES = {
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
              r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}
POOL = (list("abcXYZsStTdDmMlLrReEvV") + list("0123456789") + [" "] * 6 + ["\t", "\n", "\r"] * 2
        + ["'"] * 5 + list("!?.,;:-_()[]{}<>\"/\\@#$%^&*+=~`|")
        + ["\u00e9", "\u00dc", "\u00df", "\u4e2d", "\u65e5", "\ud55c", "\u0416", "\u03b1",
           "\u02b0", "\u0663", "\u00bd", "\u216b", "\u0301", "\U0001f999", "\U0001f44d", "\u200d",
           "\u00a0", "\u3000", "\u2003", "\u2581"])


def check_pretokenizers(driver, tmp):
    """Compares llm_tokenize --pretokenize with the regexes; returns failure messages, or None
    when Python's regex module is missing."""
    try:
        import regex
    except ImportError:
        return None
    import random
    rng = random.Random(11)
    texts = ["".join(rng.choice(POOL) for _ in range(rng.randrange(0, 32))) for _ in range(3000)]
    path = os.path.join(tmp, "pre_texts.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
    gpt2 = regex.compile(REGEXES["gpt2"])
    failures = []
    for name in ("llama3", "qwen2", "gpt2", "smollm"):
        got = run_json([driver, "--pretokenize", name, "--texts", path])["words"]
        for text, words in zip(texts, got):
            if name == "smollm":  # \p{N} first, then the GPT-2 regex on the rest
                want = []
                for piece in regex.findall(r"\p{N}|[^\p{N}]+", text):
                    want += [piece] if regex.fullmatch(r"\p{N}", piece) else gpt2.findall(piece)
            else:
                want = regex.findall(REGEXES[name], text)
            if words != want:
                failures.append(f"pre-tokenizer {name} on {text!r}: {words} != regex {want}")
    if failures:
        print(f"pre-tokenizers: {len(failures)} disagreements with the regex module")
    else:
        print(f"pre-tokenizers: {len(texts)} random strings x 4 agree with the regex module")
    return failures[:20]


def describe(tokens, ids, k):
    lo = max(0, k - 3)
    return ", ".join(f"{i}:{tokens[i]!r}" if 0 <= i < len(tokens) else str(i) for i in ids[lo:k + 4])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--names", default=",".join(vocab.NAMES))
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        pre_failures = check_pretokenizers(args.driver, tmp)
    if pre_failures is None:
        print("pre-tokenizer check skipped: Python's regex module is missing")
    elif pre_failures:
        for f in pre_failures:
            print("FAIL", f)
        return 1

    node = vocab.node_binary()
    if node is None:
        skip("node not found")
    if not vocab.available():
        skip(f"npm tokenizer packages not found under {vocab.node_dir()} (KILN_LLM_NODE_DIR)")

    with open(os.path.join(HERE, "texts.json"), encoding="utf-8") as f:
        texts = json.load(f)
    plain = [t for t in texts if not any(m in t for m in SPECIAL_MARKERS)]
    long_text = "\n".join(plain) * 12  # ~25 KB
    texts.append(long_text)

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        texts_path = os.path.join(tmp, "texts.json")
        with open(texts_path, "w", encoding="utf-8") as f:
            json.dump(texts, f, ensure_ascii=False)
        for name in args.names.split(","):
            t0 = time.time()
            ref = run_json([node, os.path.join(LLM, "tokenizer_reference.mjs"), name, texts_path])
            t_ref = time.time() - t0
            meta = vocab.load(name)
            tokens = meta["tokenizer.ggml.tokens"]
            gguf_path = os.path.join(tmp, f"{name}.json")
            with open(gguf_path, "w", encoding="utf-8") as f:
                json.dump(meta, f, ensure_ascii=False)
            runs = {
                "hf": run_json([args.driver, "--hf", vocab.model_dir(name), "--texts", texts_path]),
                "gguf": run_json([args.driver, "--gguf-json", gguf_path, "--texts", texts_path]),
            }
            with_special = run_json(
                [args.driver, "--gguf-json", gguf_path, "--texts", texts_path, "--add-special"])
            spm = meta["tokenizer.ggml.model"] == "llama"
            n_tokens = 0
            for i, text in enumerate(texts):
                want = ref["results"][i]["ids"]
                n_tokens += len(want)
                label = f"{name} text {i} {text[:40]!r}"
                for kind, run in runs.items():
                    got = run["results"][i]
                    if got["ids"] != want:
                        k = next((k for k in range(min(len(got["ids"]), len(want)))
                                  if got["ids"][k] != want[k]), min(len(got["ids"]), len(want)))
                        failures.append(
                            f"{label} [{kind}]: ids differ at {k} ({len(got['ids'])} vs "
                            f"{len(want)} tokens)\n    kiln: {describe(tokens, got['ids'], k)}\n"
                            f"    ref:  {describe(tokens, want, k)}")
                        continue
                    if got["decoded"] != ref["results"][i]["decoded"]:
                        failures.append(f"{label} [{kind}]: decoded {got['decoded'][:80]!r} != "
                                        f"reference {ref['results'][i]['decoded'][:80]!r}")
                    if got["stream"] != got["decoded"]:
                        failures.append(f"{label} [{kind}]: stream {got['stream'][:80]!r} != "
                                        f"decoded {got['decoded'][:80]!r}")
                    has_special = any(m in text for m in SPECIAL_MARKERS)
                    if not (spm and has_special) and got["decoded"] != text:
                        failures.append(f"{label} [{kind}]: Decode(Encode(x)) = "
                                        f"{got['decoded'][:80]!r} != x")
                expect = list(want)
                if meta.get("tokenizer.ggml.add_bos_token"):
                    expect.insert(0, meta["tokenizer.ggml.bos_token_id"])
                if meta.get("tokenizer.ggml.add_eos_token"):
                    expect.append(meta["tokenizer.ggml.eos_token_id"])
                if with_special["results"][i]["ids"] != expect:
                    failures.append(f"{label} [gguf, add_special]: ids "
                                    f"{with_special['results'][i]['ids'][:8]} != {expect[:8]}")
            mb = runs["hf"]["bytes"] / 1e6
            print(f"{name}: {len(texts)} texts, {n_tokens} reference tokens; encode "
                  f"{mb / max(runs['hf']['encode_seconds'], 1e-9):.1f} MB/s (hf spec), "
                  f"{mb / max(runs['gguf']['encode_seconds'], 1e-9):.1f} MB/s (gguf spec); "
                  f"reference {t_ref:.1f} s; total {time.time() - t0:.1f} s")
    for f in failures:
        print("FAIL", f)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("all tokenizations agree with the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
