#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a random-weight Llama-architecture model as a GGUF v3 file, for llama.cpp to run.

The competing load `llamacpp` of bench/contention/run.py needs a model llama.cpp accepts, and the
benchmarks download nothing, so this script writes one: the Llama graph (RMSNorm, rotary
attention with grouped KV heads, SwiGLU feed-forward) with seeded random F16 weights (F32 norms)
and a 512-token SentencePiece-style ("llama") vocabulary: <unk> <s> </s>, the 256 byte tokens
<0x00>..<0xFF> llama.cpp falls back to, then single characters and pairs. The text it generates
is noise; what matters is that each token costs what a small real model's does (the default,
768 wide, 8 layers, 51 M parameters: 102 MB of F16 weights read per token).

Format (GGUF v3, little-endian; tests/llm/gguf_writer.py encodes it): "GGUF", uint32 version, uint64 tensor count, uint64 key-value
count; the key-value pairs (string key, uint32 value type, value; strings are a uint64 length and
UTF-8 bytes; arrays a uint32 element type, a uint64 count and the elements); one record per tensor
(name, uint32 rank, uint64 dims with ne[0] the innermost, uint32 ggml type, uint64 offset into
the data section); zero padding to `general.alignment` (32); the tensor data, each tensor
starting at an aligned offset. A numpy array of shape (ne[1], ne[0]) in C order is exactly ggml's
layout of a [ne[0], ne[1]] tensor.

  /usr/bin/python3 bench/contention/make_gguf.py --out build/bench-models/llama_random.gguf

Same arguments, same bytes: the weights come from numpy's seeded generator.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "llm"))
import gguf_writer as gw  # noqa: E402  (tests/llm/gguf_writer.py: the GGUF encoding)

ALIGNMENT = 32

# ggml tensor types
GGML_F32, GGML_F16 = 0, 1

# llama.cpp token types
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_BYTE = 1, 2, 3, 6


def vocabulary(size):
    """(tokens, scores, types) of a SentencePiece-style vocabulary of `size` entries."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(TOKEN_BYTE)
    pieces = ["\u2581"] + [chr(c) for c in range(0x21, 0x7F)]
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    pieces += ["\u2581" + c for c in letters + letters.upper()]
    pieces += [a + b for a in letters for b in letters]
    for p in pieces:
        if len(tokens) == size:
            break
        tokens.append(p)
        types.append(TOKEN_NORMAL)
    if len(tokens) != size or len(set(tokens)) != size:
        raise ValueError(f"cannot make a vocabulary of {size} tokens")
    # SentencePiece merges prefer higher scores: shorter pieces first, each below the last.
    scores = [0.0] * (3 + 256) + [-float(i) for i in range(size - 3 - 256)]
    return tokens, scores, types


def write_gguf(path, args):
    n_embd, n_layer, n_ff = args.hidden, args.layers, args.ff
    n_head, n_head_kv = args.heads, args.kv_heads
    head_dim = n_embd // n_head
    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("hidden must divide by heads, and heads by kv-heads")
    n_kv_embd = head_dim * n_head_kv
    tokens, scores, types = vocabulary(args.vocab)

    arch = "llama"
    w = gw.GGUFWriter(alignment=ALIGNMENT)
    w.add_string("general.architecture", arch)
    w.add_string("general.name", "kiln contention random llama")
    w.add_uint32("general.alignment", ALIGNMENT)
    w.add_uint32("general.file_type", 1)  # mostly F16
    w.add_uint32(f"{arch}.context_length", args.context)
    w.add_uint32(f"{arch}.embedding_length", n_embd)
    w.add_uint32(f"{arch}.block_count", n_layer)
    w.add_uint32(f"{arch}.feed_forward_length", n_ff)
    w.add_uint32(f"{arch}.attention.head_count", n_head)
    w.add_uint32(f"{arch}.attention.head_count_kv", n_head_kv)
    w.add_uint32(f"{arch}.rope.dimension_count", head_dim)
    w.add_float32(f"{arch}.rope.freq_base", 10000.0)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_uint32(f"{arch}.vocab_size", args.vocab)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", gw.STRING, tokens)
    w.add_array("tokenizer.ggml.scores", gw.FLOAT32, scores)
    w.add_array("tokenizer.ggml.token_type", gw.INT32, types)
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)

    # (name, ggml dims ne[0..], ggml type); weights are [in, out] in ggml's order.
    specs = [("token_embd.weight", (n_embd, args.vocab), GGML_F16)]
    for i in range(n_layer):
        b = f"blk.{i}."
        specs += [
            (b + "attn_norm.weight", (n_embd,), GGML_F32),
            (b + "attn_q.weight", (n_embd, n_embd), GGML_F16),
            (b + "attn_k.weight", (n_embd, n_kv_embd), GGML_F16),
            (b + "attn_v.weight", (n_embd, n_kv_embd), GGML_F16),
            (b + "attn_output.weight", (n_embd, n_embd), GGML_F16),
            (b + "ffn_norm.weight", (n_embd,), GGML_F32),
            (b + "ffn_gate.weight", (n_embd, n_ff), GGML_F16),
            (b + "ffn_up.weight", (n_embd, n_ff), GGML_F16),
            (b + "ffn_down.weight", (n_ff, n_embd), GGML_F16),
        ]
    specs += [("output_norm.weight", (n_embd,), GGML_F32),
              ("output.weight", (n_embd, args.vocab), GGML_F16)]

    # The data is drawn while writing, tensor by tensor in file order (same seed, same bytes).
    rng = np.random.default_rng(args.seed)

    def tensor_data(name, dims, gtype):
        shape = tuple(reversed(dims))  # numpy's C order: the last axis is ne[0]
        if len(dims) == 1:
            return np.ones(shape, dtype=np.float32)
        scale = 1.0 / np.sqrt(dims[0])  # keeps activations near unit size
        if name == "token_embd.weight":
            scale = 1.0
        return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(
            np.float32 if gtype == GGML_F32 else np.float16)

    for name, dims, gtype in specs:
        w.add_tensor(name, dims, gtype, lambda n=name, d=dims, g=gtype: tensor_data(n, d, g))
    w.write(path)
    params = sum(int(np.prod(d)) for _, d, _ in specs)
    return params


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the .gguf file to write")
    ap.add_argument("--hidden", type=int, default=768, help="embedding_length")
    ap.add_argument("--layers", type=int, default=8, help="block_count")
    ap.add_argument("--ff", type=int, default=2048, help="feed_forward_length")
    ap.add_argument("--heads", type=int, default=12, help="attention.head_count")
    ap.add_argument("--kv-heads", type=int, default=4, help="attention.head_count_kv")
    ap.add_argument("--vocab", type=int, default=512, help="vocab_size (at least 300)")
    ap.add_argument("--context", type=int, default=2048, help="context_length")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    params = write_gguf(args.out, args)
    print(f"make_gguf: wrote {args.out} ({params / 1e6:.1f} M parameters, "
          f"{os.path.getsize(args.out) / 1e6:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
