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

Format (GGUF v3, little-endian): "GGUF", uint32 version, uint64 tensor count, uint64 key-value
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
import struct
import sys

import numpy as np

ALIGNMENT = 32

# gguf metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
           BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}

# ggml tensor types
GGML_F32, GGML_F16 = 0, 1

# llama.cpp token types
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_BYTE = 1, 2, 3, 6


def _string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(vtype, v):
    if vtype == STRING:
        return _string(v)
    if vtype == ARRAY:
        etype, items = v
        out = [struct.pack("<IQ", etype, len(items))]
        if etype == STRING:
            out.extend(_string(s) for s in items)
        else:
            out.append(np.asarray(items, dtype=np.dtype(_SCALAR[etype])).tobytes())
        return b"".join(out)
    return struct.pack(_SCALAR[vtype], v)


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
    kv = [
        ("general.architecture", STRING, arch),
        ("general.name", STRING, "kiln contention random llama"),
        ("general.alignment", U32, ALIGNMENT),
        ("general.file_type", U32, 1),  # mostly F16
        (f"{arch}.context_length", U32, args.context),
        (f"{arch}.embedding_length", U32, n_embd),
        (f"{arch}.block_count", U32, n_layer),
        (f"{arch}.feed_forward_length", U32, n_ff),
        (f"{arch}.attention.head_count", U32, n_head),
        (f"{arch}.attention.head_count_kv", U32, n_head_kv),
        (f"{arch}.rope.dimension_count", U32, head_dim),
        (f"{arch}.rope.freq_base", F32, 10000.0),
        (f"{arch}.attention.layer_norm_rms_epsilon", F32, 1e-5),
        (f"{arch}.vocab_size", U32, args.vocab),
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.scores", ARRAY, (F32, scores)),
        ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
        ("tokenizer.ggml.unknown_token_id", U32, 0),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
        ("tokenizer.ggml.add_eos_token", BOOL, False),
    ]

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

    def nbytes(dims, gtype):
        return int(np.prod(dims)) * (4 if gtype == GGML_F32 else 2)

    def pad(n):
        return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT

    header = [b"GGUF", struct.pack("<IQQ", 3, len(specs), len(kv))]
    for key, vtype, v in kv:
        header += [_string(key), struct.pack("<I", vtype), _value(vtype, v)]
    offset = 0
    for name, dims, gtype in specs:
        header += [_string(name), struct.pack("<I", len(dims)),
                   struct.pack(f"<{len(dims)}Q", *dims), struct.pack("<IQ", gtype, offset)]
        offset += nbytes(dims, gtype)
        offset += pad(offset)
    head = b"".join(header)

    rng = np.random.default_rng(args.seed)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head + b"\0" * pad(len(head)))
        for name, dims, gtype in specs:
            shape = tuple(reversed(dims))  # numpy's C order: the last axis is ne[0]
            if len(dims) == 1:
                data = np.ones(shape, dtype=np.float32)
            else:
                scale = 1.0 / np.sqrt(dims[0])  # keeps activations near unit size
                if name == "token_embd.weight":
                    scale = 1.0
                data = (rng.standard_normal(shape, dtype=np.float32) * scale).astype(
                    np.float32 if gtype == GGML_F32 else np.float16)
            raw = data.tobytes()
            assert len(raw) == nbytes(dims, gtype)
            f.write(raw + b"\0" * pad(len(raw)))
    os.replace(tmp, path)
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
