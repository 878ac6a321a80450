#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Broken and unsupported model files give `kiln generate` a clear error, never a crash.

From a good GGUF file (make_models.py's llama-small-f32.gguf) the test writes variants, each
with one thing wrong, and checks that `kiln generate VARIANT --prompt ...` exits with status 1
and a message naming the problem (the substring below), within a few seconds:

  not a GGUF file, a truncated file, an unsupported architecture, a missing tensor, a tensor whose
  shape disagrees with the metadata, a tensor type kiln does not compute, a vocabulary that
  disagrees with the embedding, a context longer than the model allows, a prompt longer than
  the context, a Hugging Face directory without config.json's required fields.

  tests/llm/check_load_errors.py --kiln build/kiln --models DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402


def copy_gguf(src, dst, kv_edit=None, drop=(), tensor_edit=None):
    """Rewrites `src` into `dst` with metadata edits, tensors dropped or replaced."""
    r = gw.GGUFReader(src)
    w = gw.GGUFWriter(alignment=r.alignment)
    kv = dict(r.kv)
    types = dict(r.kv_types)
    if kv_edit:
        for key, value in kv_edit.items():
            if value is None:
                kv.pop(key, None)
            else:
                kv[key] = value[1]
                types[key] = (value[0], value[2] if len(value) > 2 else None)
    for key, value in kv.items():
        if key == "general.alignment":
            continue
        vtype, etype = types[key]
        if vtype == gw.ARRAY:
            w.add_array(key, etype, list(value))
        else:
            w.add(key, vtype, value)
    for name, t in r.tensors.items():
        if name in drop:
            continue
        dims, gtype, data = t.dims, t.type, bytes(t.raw())
        if tensor_edit and name in tensor_edit:
            dims, gtype, data = tensor_edit[name](dims, gtype, data)
        w.add_tensor(name, dims, gtype, data)
    w.write(dst)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", required=True)
    args = ap.parse_args()
    good = os.path.join(args.models, "llama-small-f32.gguf")
    if not os.path.exists(good):
        print(f"check_load_errors: {good} is missing (make_models.py --preset test)")
        return 1
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        def path(name):
            return os.path.join(tmp, name)

        cases = []  # (model path, extra args, expected substring)
        with open(path("text.gguf"), "w") as f:
            f.write("this is not a model\n" * 10)
        cases.append((path("text.gguf"), [], "GGUF"))
        with open(good, "rb") as f:
            head = f.read(os.path.getsize(good) // 2)
        with open(path("truncated.gguf"), "wb") as f:
            f.write(head)
        cases.append((path("truncated.gguf"), [], "truncated"))
        copy_gguf(good, path("phi3.gguf"),
                  kv_edit={"general.architecture": (gw.STRING, "phi3")})
        cases.append((path("phi3.gguf"), [],
                      "architecture 'phi3' is not supported (supported: llama, qwen2, qwen3)"))
        copy_gguf(good, path("missing.gguf"), drop=("blk.1.ffn_up.weight",))
        cases.append((path("missing.gguf"), [], "tensor 'blk.1.ffn_up.weight' is missing"))
        copy_gguf(good, path("shape.gguf"), tensor_edit={
            "blk.0.ffn_gate.weight": lambda d, t, b: ((d[1], d[0]), t, b)})
        cases.append((path("shape.gguf"), [], "tensor 'blk.0.ffn_gate.weight' has shape"))

        def as_q5_1(dims, gtype, data):
            q = gw.ggml_type("q5_1")
            return dims, q, bytes(q.nbytes(dims))
        copy_gguf(good, path("q5_1.gguf"), tensor_edit={"blk.0.attn_k.weight": as_q5_1})
        cases.append((path("q5_1.gguf"), [], "tensor 'blk.0.attn_k.weight' has type q5_1"))
        r = gw.GGUFReader(good)
        tokens = list(r.kv["tokenizer.ggml.tokens"])
        copy_gguf(good, path("vocab.gguf"), kv_edit={
            "tokenizer.ggml.tokens": (gw.ARRAY, tokens[:-10], gw.STRING),
            "tokenizer.ggml.scores": (gw.ARRAY, list(r.kv["tokenizer.ggml.scores"][:-10]),
                                      gw.FLOAT32),
            "tokenizer.ggml.token_type": (gw.ARRAY, list(r.kv["tokenizer.ggml.token_type"][:-10]),
                                          gw.INT32)})
        cases.append((path("vocab.gguf"), [], "tokens but token_embd.weight has"))
        context = int(r.kv["llama.context_length"])
        cases.append((good, ["--ctx-size", str(context * 2)], "longer than the model allows"))
        cases.append((good, ["--ctx-size", "4"], "the context is 4"))
        os.makedirs(path("hf"))
        with open(os.path.join(path("hf"), "config.json"), "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": 64}, f)
        cases.append((path("hf"), [], "config.json lacks"))
        os.makedirs(path("hf_arch"))
        with open(os.path.join(path("hf_arch"), "config.json"), "w") as f:
            json.dump({"architectures": ["Phi3ForCausalLM"]}, f)
        cases.append((path("hf_arch"), [], "architecture 'Phi3ForCausalLM' is not supported"))
        cases.append((path("nothing-here.gguf"), [], "does not exist"))

        for model, extra, expected in cases:
            cmd = [args.kiln, "generate", model, "--prompt", "Hello there, how are you?", "-n", "2"]
            cmd += extra
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                failures.append(f"{os.path.basename(model)} {extra}: timed out")
                continue
            name = f"{os.path.basename(model)} {' '.join(extra)}".strip()
            if p.returncode != 1:
                failures.append(f"{name}: exit status {p.returncode} (wanted 1); stderr: "
                                f"{p.stderr.strip()[:300]}")
            elif expected not in p.stderr:
                failures.append(f"{name}: stderr lacks {expected!r}: {p.stderr.strip()[:300]}")
            else:
                print(f"ok: {name}: {p.stderr.strip()}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
