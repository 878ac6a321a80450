#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A plain NumPy forward pass of llama / qwen2 / qwen3 decoders: the reference for kiln's engine.

  reference.py MODEL --tokens 1,2,3 [--out logits.npy]       logits [n_tokens, vocab] (float32 file)
  reference.py MODEL --tokens ... --compare KILN.npy --atol A --rtol R
                         compares kiln's logits (same shape, or only the last rows) with the
                         reference: prints max abs / rel error and argmax agreement; exit 1 when
                         any |kiln - ref| > atol + rtol * |ref|
  reference.py MODEL --tokens ... --greedy N [--json]      greedy continuation ids (N tokens);
                         --json adds each step's top-1 minus top-2 logit gap ("gaps") and that
                         gap in standard deviations of the step's logits ("gaps_sd"), the
                         measure of how safely another implementation must pick the same token

MODEL is a .gguf file (tensors dequantized with quants.py, so every supported type works) or a
Hugging Face directory (config.json, model.safetensors or sharded with
model.safetensors.index.json; F32 / F16 / BF16).

Computation: float64 throughout (weights dequantized to float32 exactly as ggml does, then
widened), so the reference's own rounding error (~1e-13 relative) is far below any
implementation's float32 error; logits are returned as float64 and saved as float32. Every weight
is held as float64 (8 bytes a parameter): meant for the small test models, not TinyLlama-sized
ones. No KV cache: --greedy recomputes the whole sequence at every step (fine at test lengths).

The graph (llama.cpp's build_llama / build_qwen2 / build_qwen3, and transformers'
LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM):
  x = token_embd[tokens]
  per layer:  h = rms_norm(x) * attn_norm
              q = h Wq^T (+ bq), k = h Wk^T (+ bk), v = h Wv^T (+ bv)        (bias: qwen2)
              q, k per head: rms_norm(.) * q_norm / k_norm                     (qwen3)
              q, k = rope(q, pos), rope(k, pos)
              a = softmax(q k^T / sqrt(head_dim) + causal mask) v   (GQA: head h reads KV head
                                                                     h // (n_head / n_head_kv))
              x = x + a Wo^T
              h = rms_norm(x) * ffn_norm;  x = x + (silu(h Wg^T) * (h Wu^T)) Wd^T
  logits = (rms_norm(x) * output_norm) Wout^T      (Wout = token_embd when output.weight is absent)
rms_norm(v) = v / sqrt(mean(v^2) + eps).
RoPE on the first n_rot dims of each head, angle(pos, i) = pos * base^(-2i / n_rot) / f_i, where
f_i are the Llama-3 frequency factors (GGUF tensor rope_freqs.weight, or computed from
config.json's rope_scaling {"rope_type": "llama3"}) or 1. Pairs: "normal" (x[2i], x[2i+1]) for
GGUF llama (llama.cpp LLAMA_ROPE_TYPE_NORM; its converter permutes Wq / Wk rows to suit), "neox"
(x[i], x[i + n_rot/2]) for GGUF qwen2 / qwen3 and for every Hugging Face checkpoint
(transformers' rotate_half).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quants  # noqa: E402
from gguf_writer import GGUFReader  # noqa: E402

ARCHS = ("llama", "qwen2", "qwen3")
_HF_ARCH = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama",
            "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}


class Model:
    """Hyper-parameters and float64 weights in [out, in] orientation (GGUF tensor names)."""

    def __init__(self):
        self.arch = None
        self.n_layer = self.n_embd = self.n_head = self.n_head_kv = self.head_dim = 0
        self.n_ff = self.n_vocab = self.n_rot = 0
        self.eps = 1e-5
        self.rope_base = 10000.0
        self.rope_style = "normal"
        self.freq_factors = None
        self.w = {}  # name -> float64 array (matrices [out, in])
        self.source = ""

    def weight(self, name):
        return self.w[name]

    def has(self, name):
        return name in self.w


def llama3_freq_factors(rope_scaling, base, n_rot):
    """Llama 3 frequency factors f_i (the angle divides by f_i), as convert_hf_to_gguf writes
    rope_freqs.weight (float32)."""
    factor = float(rope_scaling.get("factor", 8.0))
    lo = float(rope_scaling.get("low_freq_factor", 1.0))
    hi = float(rope_scaling.get("high_freq_factor", 4.0))
    old = float(rope_scaling.get("original_max_position_embeddings", 8192))
    freqs = 1.0 / (base ** (np.arange(0, n_rot, 2, dtype=np.float64) / n_rot))
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < old / hi:
            out.append(1.0)
        elif wavelen > old / lo:
            out.append(factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


# ----------------------------------------------------------------------------------------------
# Loading


def _tensor64(info):
    t = info.type.name
    rows = int(np.prod(info.dims[1:])) if len(info.dims) > 1 else 1
    y = quants.dequantize(info.raw(), t, info.dims[0]).reshape(rows, info.dims[0])
    y = y.astype(np.float64)
    return y.reshape(info.shape) if len(info.dims) > 1 else y.reshape(-1)


def load_gguf(path):
    r = GGUFReader(path)
    m = Model()
    m.source = path
    arch = r.get("general.architecture")
    if arch not in ARCHS:
        raise ValueError(f"architecture {arch!r} is not supported (supported: {', '.join(ARCHS)})")
    m.arch = arch
    g = lambda k, d=None: r.get(f"{arch}.{k}", d)  # noqa: E731
    m.n_layer = int(g("block_count"))
    m.n_embd = int(g("embedding_length"))
    m.n_ff = int(g("feed_forward_length"))
    m.n_head = int(g("attention.head_count"))
    m.n_head_kv = int(g("attention.head_count_kv", m.n_head))
    m.head_dim = int(g("attention.key_length", m.n_embd // m.n_head))
    if int(g("attention.value_length", m.head_dim)) != m.head_dim:
        raise ValueError("key_length != value_length is not supported")
    m.n_rot = int(g("rope.dimension_count", m.head_dim))
    m.eps = float(g("attention.layer_norm_rms_epsilon", 1e-5))
    m.rope_base = float(g("rope.freq_base", 10000.0))
    st = g("rope.scaling.type", "none")
    if st not in ("none",) and float(g("rope.scaling.factor", 1.0)) != 1.0:
        raise ValueError(f"rope scaling {st!r} is not supported by the reference")
    m.rope_style = "normal" if arch == "llama" else "neox"
    for name, info in r.tensors.items():
        m.w[name] = _tensor64(info)
    m.n_vocab = m.w["token_embd.weight"].shape[0]
    if "rope_freqs.weight" in m.w:
        m.freq_factors = m.w["rope_freqs.weight"].astype(np.float64)
    return m


_ST_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}


def read_safetensors(path):
    """name -> float32/float64 numpy array for one .safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} runs past the file")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dt = meta["dtype"]
        if dt not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has dtype {dt}")
        b, e = meta["data_offsets"]
        if not 0 <= b <= e <= len(blob) - base:
            raise ValueError(f"{path}: tensor {name!r} offsets {b}..{e} out of range")
        dtype = np.dtype(_ST_DTYPES[dt])
        arr = np.frombuffer(blob, dtype=dtype, count=(e - b) // dtype.itemsize, offset=base + b)
        if dt == "BF16":
            arr = quants.bf16_bits_to_fp32(arr)
        out[name] = arr.astype(np.float64).reshape(meta["shape"])
    return out


def load_hf(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    archs = cfg.get("architectures") or []
    if not archs or archs[0] not in _HF_ARCH:
        raise ValueError(f"{d}: architectures {archs} not supported")
    m = Model()
    m.source = d
    m.arch = _HF_ARCH[archs[0]]
    m.n_layer = cfg["num_hidden_layers"]
    m.n_embd = cfg["hidden_size"]
    m.n_ff = cfg["intermediate_size"]
    m.n_head = cfg["num_attention_heads"]
    m.n_head_kv = cfg.get("num_key_value_heads", m.n_head)
    m.head_dim = cfg.get("head_dim") or m.n_embd // m.n_head
    m.n_rot = m.head_dim
    m.eps = cfg.get("rms_norm_eps", 1e-6)
    m.rope_base = float(cfg.get("rope_theta", 10000.0))
    m.rope_style = "neox"
    rs = cfg.get("rope_scaling")
    if rs:
        kind = rs.get("rope_type", rs.get("type"))
        if kind != "llama3":
            raise ValueError(f"rope_scaling {kind!r} is not supported by the reference")
        m.freq_factors = llama3_freq_factors(rs, m.rope_base, m.n_rot).astype(np.float64)
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    hf = {}
    for fn in files:
        hf.update(read_safetensors(os.path.join(d, fn)))
    names = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight",
                 "self_attn.k_proj.weight": "attn_k.weight",
                 "self_attn.v_proj.weight": "attn_v.weight",
                 "self_attn.o_proj.weight": "attn_output.weight",
                 "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
                 "self_attn.v_proj.bias": "attn_v.bias",
                 "self_attn.q_norm.weight": "attn_q_norm.weight",
                 "self_attn.k_norm.weight": "attn_k_norm.weight",
                 "post_attention_layernorm.weight": "ffn_norm.weight",
                 "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
                 "mlp.down_proj.weight": "ffn_down.weight"}
    for name, arr in hf.items():
        if name in names:
            m.w[names[name]] = arr
            continue
        parts = name.split(".")
        if parts[:2] == ["model", "layers"]:
            rest = ".".join(parts[3:])
            if rest in per_layer:
                m.w[f"blk.{parts[2]}.{per_layer[rest]}"] = arr
                continue
        if name.endswith("rotary_emb.inv_freq"):
            continue
        raise ValueError(f"{d}: unexpected tensor {name!r}")
    if cfg.get("tie_word_embeddings") and "output.weight" in m.w:
        del m.w["output.weight"]
    m.n_vocab = m.w["token_embd.weight"].shape[0]
    return m


def load(path):
    return load_hf(path) if os.path.isdir(path) else load_gguf(path)


# ----------------------------------------------------------------------------------------------
# Forward


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, m):
    """x [T, n_heads, head_dim] rotated in place of its first n_rot dims."""
    n_rot = m.n_rot
    half = n_rot // 2
    inv = m.rope_base ** (-np.arange(half, dtype=np.float64) * 2.0 / n_rot)
    if m.freq_factors is not None:
        inv = inv / m.freq_factors
    ang = pos[:, None].astype(np.float64) * inv[None, :]          # [T, half]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = x.copy()
    if m.rope_style == "normal":
        a, b = x[:, :, 0:n_rot:2], x[:, :, 1:n_rot:2]
        out[:, :, 0:n_rot:2] = a * c - b * s
        out[:, :, 1:n_rot:2] = a * s + b * c
    else:
        a, b = x[:, :, :half], x[:, :, half:n_rot]
        out[:, :, :half] = a * c - b * s
        out[:, :, half:n_rot] = a * s + b * c
    return out


def forward(m, tokens, last_only=False, act_round=None):
    """Logits [T, vocab] (float64) for `tokens` at positions 0..T-1 (or [1, vocab] for the last
    token with last_only). act_round(x) optionally rounds every matrix product's input (a probe
    of how sensitive the model is to an implementation's activation rounding)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.ndim != 1 or len(tokens) == 0:
        raise ValueError("tokens must be a non-empty list")
    if tokens.min() < 0 or tokens.max() >= m.n_vocab:
        raise ValueError(f"token ids must be in [0, {m.n_vocab})")
    T = len(tokens)
    hd, nh, nkv = m.head_dim, m.n_head, m.n_head_kv
    group = nh // nkv
    pos = np.arange(T)
    rnd = act_round or (lambda v: v)

    def mm(x, name):
        return rnd(x) @ m.w[name].T

    x = m.w["token_embd.weight"][tokens]
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    for i in range(m.n_layer):
        p = f"blk.{i}."
        h = rms_norm(x, m.w[p + "attn_norm.weight"], m.eps)
        q, k, v = mm(h, p + "attn_q.weight"), mm(h, p + "attn_k.weight"), mm(h, p + "attn_v.weight")
        if m.has(p + "attn_q.bias"):
            q = q + m.w[p + "attn_q.bias"]
            k = k + m.w[p + "attn_k.bias"]
            v = v + m.w[p + "attn_v.bias"]
        q, k, v = q.reshape(T, nh, hd), k.reshape(T, nkv, hd), v.reshape(T, nkv, hd)
        if m.has(p + "attn_q_norm.weight"):
            q = rms_norm(q, m.w[p + "attn_q_norm.weight"], m.eps)
            k = rms_norm(k, m.w[p + "attn_k_norm.weight"], m.eps)
        q, k = rope(q, pos, m), rope(k, pos, m)
        kr = np.repeat(k, group, axis=1)                      # [T, nh, hd]
        vr = np.repeat(v, group, axis=1)
        s = np.einsum("thd,shd->hts", q, kr) / math.sqrt(hd) + mask[None]
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        a = np.einsum("hts,shd->thd", s, vr).reshape(T, nh * hd)
        x = x + mm(a, p + "attn_output.weight")
        h = rms_norm(x, m.w[p + "ffn_norm.weight"], m.eps)
        g, u = mm(h, p + "ffn_gate.weight"), mm(h, p + "ffn_up.weight")
        x = x + mm(g / (1.0 + np.exp(-g)) * u, p + "ffn_down.weight")
    if last_only:
        x = x[-1:]
    h = rms_norm(x, m.w["output_norm.weight"], m.eps)
    out = m.w["output.weight"] if m.has("output.weight") else m.w["token_embd.weight"]
    return rnd(h) @ out.T


def greedy(m, tokens, n, act_round=None, stds=None):
    """(continuation ids, top-1 minus top-2 logit gap of each step). With a list `stds`, appends
    the standard deviation of each step's logits to it."""
    toks = list(tokens)
    out, gaps = [], []
    for _ in range(n):
        z = forward(m, toks, last_only=True, act_round=act_round)[0]
        top2 = np.argpartition(-z, 2)[:2]
        top2 = top2[np.argsort(-z[top2])]
        out.append(int(top2[0]))
        gaps.append(float(z[top2[0]] - z[top2[1]]))
        if stds is not None:
            stds.append(float(np.std(z)))
        toks.append(int(top2[0]))
    return out, gaps


def round_f16(v):
    return v.astype(np.float16).astype(np.float64)


# ----------------------------------------------------------------------------------------------
# CLI


def compare(ref, kiln, atol, rtol):
    """(ok, report lines). kiln may hold only the last rows of ref."""
    kiln = np.asarray(kiln, dtype=np.float64)
    if kiln.ndim == 1:
        kiln = kiln[None, :]
    if kiln.shape[1] != ref.shape[1] or kiln.shape[0] > ref.shape[0]:
        return False, [f"shape mismatch: kiln {kiln.shape} vs reference {ref.shape}"]
    ref = ref[ref.shape[0] - kiln.shape[0]:]
    err = np.abs(kiln - ref)
    bad = err > atol + rtol * np.abs(ref)
    rel = err / np.maximum(np.abs(ref), 1e-30)
    scale = np.abs(ref).max()
    lines = [f"rows {kiln.shape[0]} x vocab {kiln.shape[1]}: max abs error {err.max():.3e} "
             f"(max |ref| {scale:.3e}), max rel error {rel.max():.3e}, "
             f"violations {int(bad.sum())} (atol {atol:g}, rtol {rtol:g})"]
    am_k, am_r = kiln.argmax(axis=1), ref.argmax(axis=1)
    lines.append(f"argmax agrees on {int((am_k == am_r).sum())}/{len(am_k)} rows")
    if bad.any():
        r, c = np.unravel_index(np.argmax(err - (atol + rtol * np.abs(ref))), err.shape)
        lines.append(f"worst: row {r} token {c}: kiln {kiln[r, c]:.6g} reference {ref[r, c]:.6g}")
    return not bad.any(), lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help=".gguf file or Hugging Face directory")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", help="write the logits [n_tokens, vocab] as float32 .npy")
    ap.add_argument("--compare", help="kiln's logits .npy to check against the reference")
    ap.add_argument("--atol", type=float, default=1e-3)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy continuation ids")
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    args = ap.parse_args()
    tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    m = load(args.model)
    rc = 0
    result = {"model": args.model, "tokens": tokens}
    if args.out or args.compare:
        logits = forward(m, tokens)
        if args.out:
            np.save(args.out, logits.astype(np.float32))
            result["out"] = args.out
        if args.compare:
            ok, lines = compare(logits, np.load(args.compare), args.atol, args.rtol)
            result["compare_ok"] = ok
            for line in lines:
                print(("" if ok else "FAIL: ") + line, file=sys.stderr)
            rc = 0 if ok else 1
    if args.greedy:
        stds = []
        ids, gaps = greedy(m, tokens, args.greedy, stds=stds)
        result["greedy"] = ids
        result["gaps"] = [round(g, 6) for g in gaps]
        result["gaps_sd"] = [round(g / s, 6) for g, s in zip(gaps, stds)]
        if not args.json:
            print(",".join(str(i) for i in ids))
    if args.json:
        print(json.dumps(result))
    return rc


if __name__ == "__main__":
    sys.exit(main())
