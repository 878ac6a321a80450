#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes seeded random-weight decoder models (llama / qwen2 / qwen3) for kiln's tests.

  make_models.py --out DIR [--shape small|small256|tinyllama] [--arch llama|qwen2|qwen3]
                 [--types f32,f16,bf16,q8_0,q4_0,q4_k,q6_k,q4_k_m] [--hf]
                 [--hf-types f32,f16,bf16] [--vocab llama2|llama3|qwen2.5] [--tied|--untied]
                 [--rope-scaling llama3] [--shards N] [--seed N] [--name NAME]
                 [--check [--llamacpp]]
  make_models.py --out DIR --preset test [--check [--llamacpp]]
                 every file the tests use (see PRESETS)
It prints one line per file written ("wrote" / "unchanged") and exits 77 when the npm
vocabulary packages are missing.

Same arguments, same bytes: every tensor is drawn from numpy's PCG64 seeded with
(seed, crc32 of "<arch>/<shape>/<vocab>/<tensor name>"), so a tensor does not depend on which
other files are written, and the GGUF of every type and the Hugging Face directory of one model
hold the same weights (rounded to their type). A file already present with the bytes this run
would write is left alone ("unchanged"); files are written atomically.

Files (in DIR): <arch>-<shape>[-<vocab>][-tied|-untied][-rope3]-<type>.gguf and, with --hf,
<same stem>-<dtype>-hf/ (config.json, model.safetensors or model-0000i-of-0000N.safetensors
with model.safetensors.index.json, tokenizer.json and tokenizer_config.json copied from the npm
package, generation_config.json). The vocabulary and tied/untied parts appear only when they
differ from the architecture's default (vocabulary llama2 for llama, qwen2.5 for qwen2 / qwen3;
qwen3 tied as Qwen3-0.6B..4B are, llama and qwen2 untied).

Shapes:
  small      4 layers, hidden 128, 4 heads (2 KV), head_dim 32 (qwen3: 64), FFN 352, context 2048
  small256   4 layers, hidden 256, 4 heads (2 KV), head_dim 64 (qwen3: 128), FFN 768: K-quants
             need rows that are whole 256-element blocks, so q4_k / q6_k / q4_k_m of `small`
             are written with this shape (the file name says small256)
  tinyllama  22 layers, hidden 2048, 32 heads (4 KV), FFN 5632, vocabulary 32000 (llama2),
             context 2048: TinyLlama-1.1B's shape, for benchmarks (F16 is 2.2 GB; only on request)
qwen3 gets head_dim = 2 * hidden / heads (qwen3.attention.key_length / value_length), as real
Qwen3 models have head_dim * heads != hidden.

Architectures (tensor names as llama.cpp's llama / qwen2 / qwen3 loaders):
  token_embd.weight, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
  ffn_up, ffn_down}.weight, output_norm.weight, output.weight (absent when tied);
  qwen2 adds blk.N.attn_{q,k,v}.bias; qwen3 adds blk.N.attn_{q,k}_norm.weight ([head_dim]).
  --rope-scaling llama3 (llama only) adds rope_freqs.weight ([n_rot/2] F32 factors computed as
  convert_hf_to_gguf.py does from rope_scaling {factor 8, low_freq_factor 1, high_freq_factor 4,
  original_max_position_embeddings 256 (see LLAMA3_ROPE)}) and the same rope_scaling in
  config.json; the llama3 vocabulary brings rope.freq_base 500000.
  GGUF llama stores attn_q / attn_k with convert_hf_to_gguf's row permutation (each head's
  rows reordered so that llama.cpp's "normal" adjacent-pair RoPE equals transformers'
  rotate_half RoPE on the Hugging Face rows); the HF directory holds the un-permuted rows.
  qwen2 / qwen3 are not permuted (llama.cpp uses NeoX RoPE for them).

Types: every matrix (token_embd and output included) in the chosen type; norms, biases and
rope_freqs F32. q4_k_m is llama.cpp's Q4_K_M mix, roughly: Q4_K, with Q6_K for output.weight and
for attn_v / ffn_down in the layers llama.cpp's use_more_bits picks (first and last eighth, and
every third layer between). general.file_type: f32 0, f16 1, q4_0 2, q8_0 7, q4_k 14 (Q4_K_S),
q4_k_m 15, q6_k 18, bf16 32.

Weight scaling (SCALES below; `--check` measures the result):
  The output rows (output.weight, or token_embd when tied) are iid Gaussian, so at every step
  the logits are iid N(0, sd^2) over the vocabulary and the top-1 minus top-2 gap is the
  spacing at the top of V Gaussian samples: median ~0.16 sd, 2-6% of steps below 0.01 sd and
  0-2.5% below 0.003 sd, whatever the scales (they cancel in gap / sd). The scales decide the
  rest:
  - no collapse: a tied model repeats the input token when that token's own embedding dominates
    the final hidden state (its logit is e . h): embd_tied 0.1 (with 1.0 every greedy
    continuation was one or two tokens repeated; with 0.1 they have 37-48 distinct of 48);
  - context matters: every layer adds about the residual's size (o 0.8, down 1.6) and attention
    scores have sd ~1.5 (qk 1.25), so positions and RoPE pick the tokens (flipping the RoPE
    pairing of the reference changes the first or second greedy token);
  - little error amplification: rounding every matrix product's input to F16 moves the logits
    by ~7e-4 sd (llama.cpp's F16 path measures 6-8e-4 sd).
  Tried and rejected: a 3x embedding (half the amplification, but the layers then matter less);
  output rows with log-normal norms (sd 0.5: near-ties 4x rarer, but continuations loop, ~21
  distinct tokens of 32); a "successor" (bigram) output structure (large margins only when the
  input embedding dominates the residual, and then the greedy path ignores the context).
  So the models are as they are and comparisons must allow for near-ties: see `--check`, which
  reports, per file and prompt, the gap distribution, llama.cpp's greedy agreement and its
  teacher-forced logit error.
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402
import quants  # noqa: E402

SHAPES = {
    "small": dict(n_layer=4, n_embd=128, n_head=4, n_head_kv=2, n_ff=352, context=2048),
    "small256": dict(n_layer=4, n_embd=256, n_head=4, n_head_kv=2, n_ff=768, context=2048),
    "tinyllama": dict(n_layer=22, n_embd=2048, n_head=32, n_head_kv=4, n_ff=5632, context=2048),
}
ARCHS = ("llama", "qwen2", "qwen3")
DEFAULT_VOCAB = {"llama": "llama2", "qwen2": "qwen2.5", "qwen3": "qwen2.5"}
DEFAULT_TIED = {"llama": False, "qwen2": False, "qwen3": True}
HF_ARCH = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
TYPES = {  # name -> (ggml type of the matrices, general.file_type)
    "f32": ("F32", 0), "f16": ("F16", 1), "bf16": ("BF16", 32), "q8_0": ("Q8_0", 7),
    "q4_0": ("Q4_0", 2), "q4_k": ("Q4_K", 14), "q6_k": ("Q6_K", 18), "q4_k_m": ("Q4_K", 15),
}
K_TYPES = ("q4_k", "q6_k", "q4_k_m")
HF_DTYPES = {"f32": ("F32", "float32"), "f16": ("F16", "float16"), "bf16": ("BF16", "bfloat16")}
# Llama 3.1's rope_scaling, except original_max_position_embeddings: 256 instead of 8192, so that
# the scaled (and the smoothly interpolated) frequencies change the angles within the few dozen
# positions a test runs (with 8192 the greedy continuation of a 40-token test is the same with and
# without the factors, and a loader that ignored rope_freqs would pass).
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 256}

# Standard deviations of the random weights (scaled by 1 / sqrt(fan_in) where noted), and why:
SCALES = {
    "embd": 1.0,       # token_embd rows ~ N(0, 1): the residual stream starts at rms 1.
    "embd_tied": 0.1,  # tied models: the input token's own embedding must not dominate the final
                       # hidden state, or its logit (e . h) wins every step: greedy repeats it.
    "norm": 0.1,       # RMSNorm weights 1 + N(0, 0.1^2): a kernel that ignores them is caught.
    "qk": 1.25,        # Wq, Wk ~ N(0, qk^2 / fan_in): attention scores of std ~qk^2, peaked
                       # enough that positions matter, not one-hot.
    "v": 1.0,          # Wv ~ N(0, 1 / fan_in).
    "o": 0.8,          # Wo ~ N(0, o^2 / fan_in): each layer's attention adds ~0.8 of the residual.
    "gate_up": 1.0,    # Wgate, Wup ~ N(0, 1 / fan_in).
    "down": 1.6,       # Wdown ~ N(0, down^2 / fan_in) (SwiGLU output rms is ~0.6 of its input's).
    "bias": 0.5,       # qwen2 Q/K/V biases ~ N(0, 0.5^2): large enough to matter.
    "qk_norm": 0.1,    # qwen3 q_norm / k_norm weights 1 + N(0, 0.1^2).
    "out": 1.0,        # output.weight ~ N(0, out^2 / hidden): logits of std ~1 * norm weights.
}

# What `--preset test` writes:
# (arch, shape, vocab or None, tied or None, rope scaling, GGUF types, HF dtypes).
PRESETS = {
    "test": [
        ("llama", "small", None, None, None, ["f32", "f16", "bf16", "q8_0", "q4_0"],
         ["f32", "f16", "bf16"]),
        ("llama", "small256", None, None, None, ["f32", "q4_k", "q6_k", "q4_k_m"], []),
        ("llama", "small", "llama3", True, "llama3", ["f32", "f16"], ["f32"]),
        ("qwen2", "small", None, None, None, ["f32", "f16", "q8_0"], ["f32"]),
        ("qwen3", "small", None, None, None, ["f32", "f16", "q4_0"], ["f32", "f16"]),
    ],
}


class Spec:
    """Everything that determines a model's weights and metadata (not its storage type)."""

    def __init__(self, arch, shape, vocab=None, tied=None, rope_scaling=None, seed=0,
                 vocab_meta=None):
        if arch not in ARCHS:
            raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(ARCHS)}")
        if shape not in SHAPES:
            raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
        if rope_scaling not in (None, "llama3"):
            raise ValueError("--rope-scaling takes llama3")
        if rope_scaling and arch != "llama":
            raise ValueError("llama3 rope scaling is a llama-architecture feature")
        self.arch, self.shape, self.seed = arch, shape, seed
        self.vocab = vocab or DEFAULT_VOCAB[arch]
        self.tied = DEFAULT_TIED[arch] if tied is None else tied
        self.rope_scaling = rope_scaling
        s = SHAPES[shape]
        self.n_layer, self.n_embd, self.n_ff = s["n_layer"], s["n_embd"], s["n_ff"]
        self.n_head, self.n_head_kv, self.context = s["n_head"], s["n_head_kv"], s["context"]
        self.head_dim = self.n_embd // self.n_head * (2 if arch == "qwen3" else 1)
        self.n_rot = self.head_dim
        self.eps = 1e-6 if arch != "llama" else 1e-5
        if arch != "llama":
            self.rope_base = 1000000.0
        else:
            self.rope_base = 500000.0 if self.vocab == "llama3" else 10000.0
        if vocab_meta is None:
            import vocab as vocab_mod
            vocab_meta = vocab_mod.load(self.vocab)
        self.vocab_meta = vocab_meta
        self.n_vocab = len(vocab_meta["tokenizer.ggml.tokens"])

    def stem(self):
        parts = [self.arch, self.shape]
        if self.vocab != DEFAULT_VOCAB[self.arch]:
            parts.append(self.vocab.replace(".", ""))
        if self.tied != DEFAULT_TIED[self.arch]:
            parts.append("tied" if self.tied else "untied")
        if self.rope_scaling:
            parts.append("rope3")
        return "-".join(parts)

    def tensors(self):
        """[(gguf name, hf name, numpy shape [out, in] or [n], kind)] in file order."""
        H, F, hd = self.n_embd, self.n_ff, self.head_dim
        q_out, kv_out = self.n_head * hd, self.n_head_kv * hd
        out = [("token_embd.weight", "model.embed_tokens.weight", (self.n_vocab, H), "embd")]
        if self.rope_scaling:
            out.append(("rope_freqs.weight", None, (self.n_rot // 2,), "rope_freqs"))
        for i in range(self.n_layer):
            g, h = f"blk.{i}.", f"model.layers.{i}."
            out += [
                (g + "attn_norm.weight", h + "input_layernorm.weight", (H,), "norm"),
                (g + "attn_q.weight", h + "self_attn.q_proj.weight", (q_out, H), "q"),
                (g + "attn_k.weight", h + "self_attn.k_proj.weight", (kv_out, H), "k"),
                (g + "attn_v.weight", h + "self_attn.v_proj.weight", (kv_out, H), "v"),
            ]
            if self.arch == "qwen2":
                out += [
                    (g + "attn_q.bias", h + "self_attn.q_proj.bias", (q_out,), "bias"),
                    (g + "attn_k.bias", h + "self_attn.k_proj.bias", (kv_out,), "bias"),
                    (g + "attn_v.bias", h + "self_attn.v_proj.bias", (kv_out,), "bias"),
                ]
            if self.arch == "qwen3":
                out += [
                    (g + "attn_q_norm.weight", h + "self_attn.q_norm.weight", (hd,), "qk_norm"),
                    (g + "attn_k_norm.weight", h + "self_attn.k_norm.weight", (hd,), "qk_norm"),
                ]
            out += [
                (g + "attn_output.weight", h + "self_attn.o_proj.weight", (H, q_out), "o"),
                (g + "ffn_norm.weight", h + "post_attention_layernorm.weight", (H,), "norm"),
                (g + "ffn_gate.weight", h + "mlp.gate_proj.weight", (F, H), "gate_up"),
                (g + "ffn_up.weight", h + "mlp.up_proj.weight", (F, H), "gate_up"),
                (g + "ffn_down.weight", h + "mlp.down_proj.weight", (H, F), "down"),
            ]
        out.append(("output_norm.weight", "model.norm.weight", (H,), "norm"))
        if not self.tied:
            out.append(("output.weight", "lm_head.weight", (self.n_vocab, H), "out"))
        return out

    def master(self, name, shape, kind):
        """The float32 weights of tensor `name` (HF orientation / un-permuted)."""
        if kind == "rope_freqs":
            import reference
            return reference.llama3_freq_factors(LLAMA3_ROPE, self.rope_base, self.n_rot)
        key = f"{self.arch}/{self.shape}/{self.vocab}/{name}".encode()
        rng = np.random.default_rng([self.seed, zlib.crc32(key)])
        z = rng.standard_normal(shape, dtype=np.float32)
        if kind in ("norm", "qk_norm"):
            return (1.0 + SCALES[kind] * z).astype(np.float32)
        if kind == "bias":
            return (SCALES["bias"] * z).astype(np.float32)
        if kind == "embd":
            return (SCALES["embd_tied" if self.tied else "embd"] * z).astype(np.float32)
        fan_in = shape[1]
        scale = SCALES["qk" if kind in ("q", "k") else kind]
        return (z * np.float32(scale / np.sqrt(fan_in))).astype(np.float32)


def permute_rows(w, n_head):
    """convert_hf_to_gguf's LlamaModel.permute: each head's rows (first half, second half)
    interleaved, so that row 2i / 2i+1 of a head holds HF rows i / i + head_dim/2."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def gguf_tensor_type(spec, tname, name, kind):
    """ggml type name of tensor `name` in a file of type `tname`."""
    if kind in ("norm", "qk_norm", "bias", "rope_freqs"):
        return "F32"
    base = TYPES[tname][0]
    if tname == "q4_k_m":
        if name == "output.weight":
            return "Q6_K"
        if name.endswith("attn_v.weight") or name.endswith("ffn_down.weight"):
            layer = int(name.split(".")[1])
            if use_more_bits(layer, spec.n_layer):
                return "Q6_K"
    return base


def _file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_if_changed(path, writer):
    """writer(tmp_path) writes the content; keeps an existing identical file."""
    tmp = path + ".new"
    writer(tmp)
    if (os.path.exists(path) and os.path.getsize(path) == os.path.getsize(tmp)
            and _file_sha(path) == _file_sha(tmp)):
        os.remove(tmp)
        return "unchanged"
    os.replace(tmp, path)
    return "wrote"


def chat_template_for(spec):
    ct = spec.vocab_meta.get("tokenizer.chat_template")
    if ct:
        return ct
    # The npm llama2 package ships no template; its vocabulary is Mistral 7B v0.1's, whose
    # tokenizer_config.json carries this one ([INST] ... [/INST]).
    return ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
            "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
            "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
            "{{ '[INST] ' + message['content'] + ' [/INST]' }}"
            "{% elif message['role'] == 'assistant' %}"
            "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and "
            "assistant roles are supported!') }}{% endif %}{% endfor %}")


def build_gguf(spec, tname, type_overrides=None):
    """A GGUFWriter for spec in type tname. type_overrides: {tensor name: ggml type name}."""
    if tname not in TYPES:
        raise ValueError(f"unknown type {tname!r}; known: {', '.join(TYPES)}")
    a = spec.arch
    w = gw.GGUFWriter()
    w.add_string("general.architecture", a)
    w.add_string("general.name", f"kiln random {spec.stem()}")
    w.add_uint32("general.file_type", TYPES[tname][1])
    w.add_uint32("general.quantization_version", 2)
    w.add_uint32(f"{a}.context_length", spec.context)
    w.add_uint32(f"{a}.embedding_length", spec.n_embd)
    w.add_uint32(f"{a}.block_count", spec.n_layer)
    w.add_uint32(f"{a}.feed_forward_length", spec.n_ff)
    w.add_uint32(f"{a}.attention.head_count", spec.n_head)
    w.add_uint32(f"{a}.attention.head_count_kv", spec.n_head_kv)
    if spec.head_dim != spec.n_embd // spec.n_head:
        w.add_uint32(f"{a}.attention.key_length", spec.head_dim)
        w.add_uint32(f"{a}.attention.value_length", spec.head_dim)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", spec.eps)
    w.add_float32(f"{a}.rope.freq_base", spec.rope_base)
    w.add_uint32(f"{a}.rope.dimension_count", spec.n_rot)
    w.add_uint32(f"{a}.vocab_size", spec.n_vocab)
    vm = spec.vocab_meta
    str_arrays = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges")
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                "tokenizer.ggml.add_space_prefix"):
        if key not in vm:
            continue
        v = vm[key]
        if key in str_arrays:
            w.add_array(key, gw.STRING, v)
        elif key == "tokenizer.ggml.scores":
            w.add_array(key, gw.FLOAT32, np.asarray(v, dtype=np.float32))
        elif key == "tokenizer.ggml.token_type":
            w.add_array(key, gw.INT32, np.asarray(v, dtype=np.int32))
        elif key.endswith("_id"):
            w.add_uint32(key, int(v))
        elif key.startswith("tokenizer.ggml.add_"):
            w.add_bool(key, bool(v))
        else:
            w.add_string(key, v)
    w.add_string("tokenizer.chat_template", chat_template_for(spec))
    overrides = type_overrides or {}
    for name, _, shape, kind in spec.tensors():
        gt = overrides.get(name) or gguf_tensor_type(spec, tname, name, kind)

        def data(name=name, shape=shape, kind=kind, gt=gt):
            x = spec.master(name, shape, kind)
            if spec.arch == "llama" and name.endswith("attn_q.weight"):
                x = permute_rows(x, spec.n_head)
            elif spec.arch == "llama" and name.endswith("attn_k.weight"):
                x = permute_rows(x, spec.n_head_kv)
            return quants.quantize(x, gt)
        w.add_tensor(name, tuple(reversed(shape)), gt, data)
    return w


def write_gguf(spec, tname, path, type_overrides=None):
    w = build_gguf(spec, tname, type_overrides)
    return _write_if_changed(path, w.write)


# ----------------------------------------------------------------------------------------------
# Hugging Face directories


def safetensors_bytes(tensors):
    """tensors: [(name, dtype "F32"/"F16"/"BF16", numpy shape, raw bytes)] -> file bytes.
    Header: uint64 length, JSON {name: {dtype, shape, data_offsets}} padded with spaces to a
    multiple of 8, then the data in the listed order."""
    header, off, blobs = {}, 0, []
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def hf_config(spec, dtype_name):
    vm = spec.vocab_meta
    cfg = {
        "architectures": [HF_ARCH[spec.arch]],
        "model_type": spec.arch,
        "hidden_size": spec.n_embd,
        "intermediate_size": spec.n_ff,
        "num_hidden_layers": spec.n_layer,
        "num_attention_heads": spec.n_head,
        "num_key_value_heads": spec.n_head_kv,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": spec.context,
        "rms_norm_eps": spec.eps,
        "rope_theta": spec.rope_base,
        "rope_scaling": dict(LLAMA3_ROPE) if spec.rope_scaling else None,
        "tie_word_embeddings": spec.tied,
        "vocab_size": spec.n_vocab,
        "bos_token_id": int(vm["tokenizer.ggml.bos_token_id"]),
        "eos_token_id": int(vm["tokenizer.ggml.eos_token_id"]),
        "torch_dtype": dtype_name,
        "attention_bias": spec.arch == "qwen2",
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "transformers_version": "4.51.0",
    }
    if spec.arch == "qwen2":
        cfg.update({"use_sliding_window": False, "sliding_window": None,
                    "max_window_layers": spec.n_layer})
    if spec.arch == "llama":
        cfg.update({"mlp_bias": False, "pretraining_tp": 1})
    return cfg


def write_hf(spec, dtype, out_dir, shards=1):
    """Writes the HF directory; returns "wrote" or "unchanged"."""
    import vocab as vocab_mod
    st_dtype, torch_name = HF_DTYPES[dtype]
    tensors = []
    for name, hf_name, shape, kind in spec.tensors():
        if hf_name is None:
            continue
        x = spec.master(name, shape, kind)
        raw = quants.quantize(x, st_dtype).tobytes()
        tensors.append((hf_name, st_dtype, shape, raw))
    files = {}
    if shards <= 1:
        files["model.safetensors"] = safetensors_bytes(tensors)
    else:
        total = sum(len(t[3]) for t in tensors)
        per = -(-total // shards)
        groups, cur, size = [], [], 0
        for t in tensors:
            if cur and size + len(t[3]) > per and len(groups) < shards - 1:
                groups.append(cur)
                cur, size = [], 0
            cur.append(t)
            size += len(t[3])
        groups.append(cur)
        n = len(groups)
        weight_map = {}
        for i, g in enumerate(groups):
            fn = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
            files[fn] = safetensors_bytes(g)
            for t in g:
                weight_map[t[0]] = fn
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        files["model.safetensors.index.json"] = (json.dumps(index, indent=2) + "\n").encode()
    files["config.json"] = (json.dumps(hf_config(spec, torch_name), indent=2) + "\n").encode()
    gen = {"bos_token_id": int(spec.vocab_meta["tokenizer.ggml.bos_token_id"]),
           "eos_token_id": int(spec.vocab_meta["tokenizer.ggml.eos_token_id"]), "do_sample": False}
    files["generation_config.json"] = (json.dumps(gen, indent=2) + "\n").encode()
    src = vocab_mod.model_dir(spec.vocab)
    with open(os.path.join(src, "tokenizer.json"), "rb") as f:
        files["tokenizer.json"] = f.read()
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        tcfg = json.load(f)
    if not tcfg.get("chat_template"):
        tcfg["chat_template"] = chat_template_for(spec)
        text = json.dumps(tcfg, indent=2, ensure_ascii=False) + "\n"
        files["tokenizer_config.json"] = text.encode()
    else:
        with open(os.path.join(src, "tokenizer_config.json"), "rb") as f:
            files["tokenizer_config.json"] = f.read()
    # Compare with what is there; rewrite the directory only when something differs.
    same = os.path.isdir(out_dir) and sorted(os.listdir(out_dir)) == sorted(files)
    if same:
        for fn, content in files.items():
            p = os.path.join(out_dir, fn)
            if os.path.getsize(p) != len(content):
                same = False
                break
            with open(p, "rb") as f:
                if f.read() != content:
                    same = False
                    break
    if same:
        return "unchanged"
    tmp = out_dir + ".new"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    for fn, content in files.items():
        with open(os.path.join(tmp, fn), "wb") as f:
            f.write(content)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    return "wrote"


# ----------------------------------------------------------------------------------------------
# Checks: varied greedy continuations, top-1 margins, agreement with llama.cpp

CHECK_PROMPTS = [
    "Once upon a time, in a kingdom by the sea, there lived",
    "The quick brown fox jumps over the lazy dog.",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "In 1969, 3 astronauts flew 384,400 km to the Moon.",
    "Z\u00fcrich, K\u00f8benhavn, \u6771\u4eac and S\u00e3o Paulo",
]
# A divergence from llama.cpp is explained by rounding only where the reference's top-2 gap is
# below this many logit standard deviations (llama.cpp rounds activations to the weight type
# for F16 / BF16 matrix products; its F32 path with an F32 KV cache agrees to ~1e-6).
NEAR_TIE = {"f32": 0.02, "f16": 0.02, "bf16": 0.1}


def _llamacpp(path, prompt, n, kv_type, extra=()):
    """llamacpp.mjs's JSON, or None when node-llama-cpp is not installed."""
    import subprocess
    here = os.path.dirname(os.path.abspath(__file__))
    import vocab as vocab_mod
    cmd = [vocab_mod.node_binary() or "node", os.path.join(here, "llamacpp.mjs"), path, "--prompt", prompt, "--n", str(n),
           "--kv-type", kv_type, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 77:
        return None
    if r.returncode != 0:
        raise RuntimeError(f"llamacpp.mjs failed on {path}: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout)


def _first_difference(a, b, n):
    return next((i for i in range(n) if a[i] != b[i]), n)


def _teacher_forced_error(m, prompt_tokens, ids, top):
    """llama.cpp's top-K log-probabilities along the reference's path vs the reference's logits:
    per step, the rms over the K tokens of (difference minus its mean: log-probabilities and
    logits differ by a per-step constant), in logit sd. Returns the list over steps."""
    import reference
    errs, toks = [], list(prompt_tokens)
    for k, row in enumerate(top):
        z = reference.forward(m, toks, last_only=True)[0]
        d = np.array([lp - z[t] for t, lp in row])
        d -= d.mean()
        errs.append(float(np.sqrt(np.mean(d * d)) / np.std(z)))
        toks.append(ids[k])
    return errs


def check(paths, use_llamacpp, n_greedy=48, n_agree=32, n_forced=16, log=print):
    """Greedy statistics of each model under reference.py; for HF directories, equality with the
    F32 GGUF of the same model; with use_llamacpp, for GGUF files, llama.cpp's greedy agreement
    (KV cache F32 and F16) and its teacher-forced logit error. Returns the number of failures:
    a model whose continuations repeat (fewer than n_greedy / 2 distinct tokens), an HF directory
    whose logits differ from its GGUF twin, an F32 / F16 / BF16 file that llama.cpp (KV F32)
    leaves before n_agree tokens at a step that is not a near-tie (NEAR_TIE), or an F32 file
    whose teacher-forced logits differ from llama.cpp's by more than 1e-3 sd."""
    import reference
    failures = 0
    have_llamacpp = use_llamacpp
    for path in paths:
        m = reference.load(path)
        is_gguf = path.endswith(".gguf")
        base = os.path.basename(path.rstrip("/"))
        tname = base[:-len(".gguf")].rsplit("-", 1)[-1] if is_gguf else base.rsplit("-", 2)[-2]
        if not is_gguf:
            # The HF directory holds the same weights as the GGUF files (un-permuted Q/K rows,
            # rotate_half RoPE): its logits must equal the F32 GGUF's (to rounding of its dtype).
            twin = os.path.join(os.path.dirname(path.rstrip("/")),
                                base.rsplit("-", 2)[0] + "-f32.gguf")
            if os.path.exists(twin):
                rng = np.random.default_rng(3)
                toks = [int(t) for t in rng.integers(300, min(m.n_vocab, 30000), 12)]
                a = reference.forward(m, toks)
                b = reference.forward(reference.load(twin), toks)
                rel = float(np.abs(a - b).max() / np.abs(b).max())
                bound = {"f32": 1e-9, "f16": 2e-2, "bf16": 1e-1}[tname]
                ok = rel <= bound
                failures += 0 if ok else 1
                log(f"make_models: check {path}: logits vs {os.path.basename(twin)}: max "
                    f"difference {rel:.2e} of the largest logit (bound {bound:g})"
                    f"{'' if ok else ' FAIL'}")
        prompts = []
        if have_llamacpp and is_gguf:
            for text in CHECK_PROMPTS:
                j = _llamacpp(path, text, n_agree, "f32")
                if j is None:
                    log("make_models: node-llama-cpp is not installed; checking without llama.cpp")
                    have_llamacpp = False
                    prompts = []
                    break
                prompts.append((text, j))
        if not prompts:  # no tokenizer at hand: fixed id prompts
            rng = np.random.default_rng(7)
            prompts = [(None, {"prompt_tokens": [int(t) for t in rng.integers(
                300, min(m.n_vocab, 30000), 10)]}) for _ in CHECK_PROMPTS]
        rel_gaps, distinct, lines, forced_errs = [], [], [], []
        for i, (text, j) in enumerate(prompts):
            stds = []
            ids, gaps = reference.greedy(m, j["prompt_tokens"], n_greedy, stds=stds)
            rg = np.array(gaps) / np.array(stds)
            rel_gaps += list(rg)
            distinct.append(len(set(ids)))
            if text is None:
                continue
            agree = _first_difference(j["tokens"], ids, n_agree)
            j16 = _llamacpp(path, text, n_agree, "f16")
            agree16 = _first_difference(j16["tokens"], ids, n_agree)
            note = ""
            if agree < n_agree:
                tie = NEAR_TIE.get(tname)
                explained = tie is not None and rg[agree] < tie
                note = f" (gap at the divergence {rg[agree]:.4f} sd"
                note += "; near-tie)" if explained else ")"
                if tie is not None and not explained:
                    failures += 1
                    note += " FAIL"
            if i < 2:
                jt = _llamacpp(path, text, n_forced, "f32",
                               ["--logits", "20", "--force", ",".join(map(str, ids[:n_forced]))])
                forced_errs += _teacher_forced_error(m, j["prompt_tokens"], ids, jt["top"])
            lines.append(f"    prompt {i} ({len(j['prompt_tokens'])} tokens): llama.cpp agrees for "
                         f"{agree}/{n_agree} tokens (KV f32), {agree16}/{n_agree} (KV f16); min "
                         f"gap over {n_agree}: {rg[:n_agree].min():.4f} sd{note}")
        rel_gaps = np.array(rel_gaps)
        q = np.quantile(rel_gaps, [0.01, 0.05, 0.5])
        ok = min(distinct) >= n_greedy // 2
        failures += 0 if ok else 1
        log(f"make_models: check {path}: distinct tokens in {n_greedy}-token greedy "
            f"continuations {distinct}{'' if ok else ' FAIL'}; top-1 minus top-2 logit gap in "
            f"logit sd: min {rel_gaps.min():.4f}, p1 {q[0]:.4f}, p5 {q[1]:.4f}, median "
            f"{q[2]:.3f}; steps with gap < 0.01 sd: {np.mean(rel_gaps < 0.01) * 100:.1f}%, "
            f"< 0.003 sd: {np.mean(rel_gaps < 0.003) * 100:.1f}%")
        for line in lines:
            log(line)
        if forced_errs:
            bad = tname == "f32" and max(forced_errs) > 1e-3
            failures += 1 if bad else 0
            log(f"    llama.cpp (KV f32) teacher-forced on the reference's path, top-20 logits: "
                f"error rms median {np.median(forced_errs):.2e} sd, max {max(forced_errs):.2e} sd"
                f"{' FAIL' if bad else ''}")
    return failures


# ----------------------------------------------------------------------------------------------
# CLI


def _shape_for(shape, tname):
    if shape == "small" and tname in K_TYPES:
        return "small256"
    return shape


def generate(out, arch, shape, vocab, tied, rope, types, hf_types, seed, shards=1, name=None,
             log=print):
    """Writes the files of one model; returns their paths."""
    written = []
    specs = {}
    for tname in types:
        sh = _shape_for(shape, tname)
        if sh not in specs:
            specs[sh] = Spec(arch, sh, vocab, tied, rope, seed)
        spec = specs[sh]
        if sh != shape:
            log(f"make_models: {tname} needs 256-wide rows: using shape {sh}")
        path = os.path.join(out, f"{name or spec.stem()}-{tname}.gguf")
        status = write_gguf(spec, tname, path)
        log(f"make_models: {status} {path} ({os.path.getsize(path) / 1e6:.1f} MB)")
        written.append(path)
    for dt in hf_types:
        if shape not in specs:
            specs[shape] = Spec(arch, shape, vocab, tied, rope, seed)
        spec = specs[shape]
        d = os.path.join(out, f"{name or spec.stem()}-{dt}-hf")
        status = write_hf(spec, dt, d, shards)
        log(f"make_models: {status} {d}/")
        written.append(d)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--shape", default="small", choices=sorted(SHAPES))
    ap.add_argument("--arch", default="llama", choices=ARCHS)
    ap.add_argument("--types", default="f32", help="comma-separated GGUF types: " + ",".join(TYPES))
    ap.add_argument("--hf", action="store_true", help="also write a Hugging Face directory")
    ap.add_argument("--hf-types", default=None,
                    help="HF dtypes (default f32 with --hf): f32,f16,bf16")
    ap.add_argument("--vocab", choices=("llama2", "llama3", "qwen2.5"), default=None)
    tie = ap.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_const", const=True, default=None)
    tie.add_argument("--untied", dest="tied", action="store_const", const=False)
    ap.add_argument("--rope-scaling", choices=("llama3",), default=None)
    ap.add_argument("--shards", type=int, default=1, help="safetensors shards in the HF directory")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default=None, help="file stem instead of the generated one")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="write a predefined set of models")
    ap.add_argument("--check", action="store_true",
                    help="run reference.py's greedy decoding on what was written and report "
                         "distinct tokens and top-1 margins; exit 1 on a collapsed model")
    ap.add_argument("--llamacpp", action="store_true",
                    help="with --check: compare with llama.cpp (llamacpp.mjs)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    try:
        written = []
        if args.preset:
            for arch, shape, vocab, tied, rope, types, hf_types in PRESETS[args.preset]:
                written += generate(args.out, arch, shape, vocab, tied, rope, types, hf_types,
                                    args.seed)
            return 1 if args.check and check(written, args.llamacpp) else 0
        types = [t for t in args.types.split(",") if t]
        for t in types:
            if t not in TYPES:
                ap.error(f"unknown type {t!r}; known: {', '.join(TYPES)}")
        hf_types = [t for t in (args.hf_types or ("f32" if args.hf else "")).split(",") if t]
        for t in hf_types:
            if t not in HF_DTYPES:
                ap.error(f"unknown HF dtype {t!r}; known: {', '.join(HF_DTYPES)}")
        written = generate(args.out, args.arch, args.shape, args.vocab, args.tied,
                           args.rope_scaling, types, hf_types, args.seed, args.shards, args.name)
        if args.check and check(written, args.llamacpp):
            return 1
    except FileNotFoundError as e:
        print(f"make_models: {e}", file=sys.stderr)
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
