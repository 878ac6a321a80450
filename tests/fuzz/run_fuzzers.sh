#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every kiln fuzz target for FUZZ_SECONDS (default 60) each, from seed corpora built out of
# real inputs: ONNX backend test models, the demo requests, gRPC inference requests (protoc
# --encode from text), repository requests, .npy files, SequenceProto / OptionalProto test data
# files, config.pbtxt files, small GGUF files, OpenAI / generate request bodies.
# Usage: run_fuzzers.sh BUILD_DIR [SECONDS]. Crashes are written to BUILD_DIR/fuzz/crashes/.
set -euo pipefail
build=${1:?usage: run_fuzzers.sh BUILD_DIR [SECONDS]}
seconds=${2:-${FUZZ_SECONDS:-60}}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work="$build/fuzz"
testdata=/usr/share/libonnx-testdata/data
mkdir -p "$work/crashes"

seed() {  # seed NAME FILES...
  local dir="$work/corpus/$1"; shift
  mkdir -p "$dir"
  for f in "$@"; do [[ -f $f ]] && cp -f "$f" "$dir/$(echo "$f" | tr '/' '_')"; done
  echo "$dir"
}

models=$(seed onnx_model $(ls -d "$testdata"/node/*/model.onnx | awk 'NR % 8 == 0') \
  "$testdata"/node/test_{sequence_map_add_2_sequences,optional_get_element_sequence,if_opt,loop16_seq_none}/model.onnx \
  "$testdata"/simple/test_sequence_model{1,5}/model.onnx \
  "$root"/tests/data/fuzz/onnx_model/*)
json=$(seed infer_json "$build"/demo_models/*/sample_request.json)
printf '{"inputs":[{"name":"x","shape":[2,2],"datatype":"INT64","data":[[1,2],[3,4]]}]}' \
  > "$json/int64.json"
printf '{"id":"a","inputs":[{"name":"s","shape":[1],"datatype":"BYTES","data":["hi"]}],"outputs":[{"name":"y"}]}' \
  > "$json/bytes.json"
repository=$(seed repository_json)
printf '{"ready":true}' > "$repository/index.json"
printf '{"parameters":{"config":"{\\"max_batch_size\\":4}","unload_dependents":false}}' \
  > "$repository/load.json"
printf '{"parameters":{"file:1/model.onnx":"QUJD"}}' > "$repository/files.json"
binary=$(seed binary_section)
http_request=$(seed http_request)
/usr/bin/python3 - "$binary" "$http_request" <<'PY'
import gzip, json, struct, sys
binary_dir, http_dir = sys.argv[1], sys.argv[2]
def section(inputs, outputs=None):
    head = {"inputs": [{"name": n, "datatype": d, "shape": s,
                        "parameters": {"binary_data_size": len(raw)}} for n, d, s, raw in inputs]}
    if outputs:
        head["outputs"] = outputs
    js = json.dumps(head).encode()
    return js, js + b"".join(raw for *_, raw in inputs)
seeds = [
    section([("a", "FP32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))]),
    section([("s", "BYTES", [2], b"\x02\x00\x00\x00hi\x00\x00\x00\x00"),
             ("b", "BOOL", [3], b"\x00\x01\x01"), ("h", "FP16", [1], b"\x00\x3c")],
            [{"name": "s", "parameters": {"binary_data": True, "classification": 2}}]),
    section([("i", "INT64", [1, 3], struct.pack("<3q", -1, 0, 7)),
             ("u", "UINT16", [2], struct.pack("<2H", 1, 65535)),
             ("e", "BF16", [0], b"")]),
]
for i, (js, body) in enumerate(seeds):
    open(f"{binary_dir}/seed{i}", "wb").write(struct.pack("<H", len(js)) + body)
    for j, (enc, payload) in enumerate([("", body), ("gzip", gzip.compress(body))]):
        head = ("POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                f"Inference-Header-Content-Length: {len(js)}\r\n"
                + (f"Content-Encoding: {enc}\r\n" if enc else "")
                + f"Content-Length: {len(payload)}\r\n\r\n").encode()
        open(f"{http_dir}/seed{i}_{j}", "wb").write(head + payload)
open(f"{http_dir}/chunked", "wb").write(
    b"POST /v2/models/m/versions/2/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"d\r\n{\"inputs\":[]}\r\n0\r\n\r\n")
open(f"{http_dir}/get", "wb").write(b"GET /v2/models/m/ready HTTP/1.1\r\nHost: x\r\n\r\n")
PY
npy=$(seed npy)
/usr/bin/python3 - "$npy" <<'PY'
import sys, numpy as np
d = sys.argv[1]
for i, dt in enumerate(["<f4", "<f8", "<i8", "|u1", "|b1", "<f2"]):
    np.save(f"{d}/seed{i}.npy", (np.arange(6).reshape(2, 3) % 2).astype(dt))
PY
# Value files: the first byte picks the declared type (fuzz_value_proto.cc: 0 seq(FP32), 1 seq(?),
# 2 optional(INT64), 3 optional(seq(INT32)), 4 optional(?)), the rest is a test data file.
values=$(seed value_proto)
prefixed() {  # prefixed BYTE FILE NAME
  if [[ -f $2 ]]; then { printf "\\x$1"; cat "$2"; } > "$values/$3"; fi
}
prefixed 01 "$testdata/node/test_sequence_insert_at_back/test_data_set_0/input_0.pb" seq_int64
prefixed 00 "$testdata/node/test_loop13_seq/test_data_set_0/input_2.pb" seq_empty
prefixed 04 "$testdata/node/test_identity_opt/test_data_set_0/input_0.pb" opt_seq
prefixed 02 "$testdata/node/test_optional_get_element/test_data_set_0/input_0.pb" opt_tensor
prefixed 02 "$testdata/node/test_optional_has_element_empty/test_data_set_0/input_0.pb" opt_none
prefixed 03 "$testdata/node/test_optional_get_element_sequence/test_data_set_0/input_0.pb" opt_seq_int32
config=$(seed config $(find "$build/demo_models" "$root/src/repo" -name '*.pbtxt' 2>/dev/null))
printf 'name: "m"\nmax_batch_size: 8\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 16 ] } ]\ndynamic_batching { preferred_batch_size: [ 4, 8 ] }\n' \
  > "$config/seed.pbtxt"
cat > "$config/ensemble.pbtxt" <<'CFG'
name: "e"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [
  { model_name: "a" model_version: -1 input_map { key: "x" value: "IN" } output_map { key: "y" value: "t" } },
  { model_name: "b" model_version: 1 input_map { key: "x" value: "t" } output_map { key: "y" value: "OUT" } }
] }
CFG
# GGUF: small files with every metadata type, arrays and tensors of several ggml types.
gguf=$(seed gguf)
/usr/bin/python3 - "$gguf" <<'PY'
import struct, sys
d = sys.argv[1]
def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b
def kv(key, vtype, payload):
    return s(key) + struct.pack("<I", vtype) + payload
def gguf(version, kvs, tensors, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs)
    offset, data = 0, b""
    for name, ne, gtype, nbytes in tensors:
        out += s(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", gtype, offset)
        data += bytes((i * 7) % 256 for i in range(nbytes))
        offset = (offset + nbytes + alignment - 1) // alignment * alignment
        data += b"\0" * (offset - len(data))
    out += b"\0" * (-len(out) % alignment)
    return out + data
meta = [kv("general.architecture", 8, s("llama")), kv("general.alignment", 4, struct.pack("<I", 32)),
        kv("u8", 0, b"\x07"), kv("i16", 3, struct.pack("<h", -3)), kv("f32", 6, struct.pack("<f", 0.5)),
        kv("bool", 7, b"\x01"), kv("u64", 10, struct.pack("<Q", 1 << 40)), kv("f64", 12, struct.pack("<d", 2.5)),
        kv("tokens", 9, struct.pack("<IQ", 8, 3) + s("<s>") + s("a") + s("\u2581b")),
        kv("scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0, -1, -2)),
        kv("types", 9, struct.pack("<IQ", 5, 3) + struct.pack("<3i", 3, 1, 1))]
tensors = [("token_embd.weight", [32, 3], 2, 3 * 18), ("blk.0.attn_q.weight", [256, 1], 12, 144),
           ("blk.0.ffn_down.weight", [256, 1], 14, 210), ("output_norm.weight", [32], 0, 128),
           ("x", [32, 1, 1, 2], 8, 2 * 34), ("h", [4], 1, 8), ("b", [4], 30, 8)]
open(f"{d}/v3.gguf", "wb").write(gguf(3, meta, tensors))
open(f"{d}/v2.gguf", "wb").write(gguf(2, meta[:3], tensors[:2]))
open(f"{d}/meta_only.gguf", "wb").write(gguf(3, meta, []))
PY
gen_json=$(seed gen_json)
printf '{"model":"m","prompt":"Hello","max_tokens":8,"temperature":0.7,"stop":["a","b"],"logit_bias":{"5":-100},"n":2,"stream":true,"stream_options":{"include_usage":true},"logprobs":2}' \
  > "$gen_json/completion.json"
printf '{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}],"top_logprobs":3,"logprobs":true,"seed":-1}' \
  > "$gen_json/chat.json"
printf '{"text_input":"Hello","parameters":{"stream":"true","max_tokens":"4","temperature":0}}' \
  > "$gen_json/generate.json"
printf '{"prompt":[[1,2,3]],"max_completion_tokens":3,"min_tokens":1,"stop_token_ids":[2]}' \
  > "$gen_json/token_ids.json"
grpc_infer=$(seed grpc_infer)
encode() {  # encode NAME TEXT: a ModelInferRequest from protobuf text format
  printf '%s' "$2" | protoc --encode=inference.ModelInferRequest -I"$root/src/server/grpc" \
    -I"$root/src/repo" grpc_service.proto > "$grpc_infer/$1.bin"
}
encode typed 'model_name: "add_sub" id: "a" inputs { name: "INPUT0" datatype: "FP32" shape: [1, 2] contents { fp32_contents: [1, 2] } } inputs { name: "b" datatype: "INT8" shape: [2] contents { int_contents: [-1, 7] } } outputs { name: "OUTPUT0" } parameters { key: "priority" value { uint64_param: 1 } }'
encode raw 'model_name: "m" model_version: "1" inputs { name: "x" datatype: "INT32" shape: [2] } inputs { name: "s" datatype: "BYTES" shape: [2] } raw_input_contents: "\001\000\000\000\002\000\000\000" raw_input_contents: "\002\000\000\000hi\000\000\000\000"'
encode bool_fp16 'inputs { name: "b" datatype: "BOOL" shape: [3] } inputs { name: "h" datatype: "FP16" shape: [1] } raw_input_contents: "\001\000\001" raw_input_contents: "\000<"'

image=$(seed image)
python3 - "$image" <<'PY'
import sys
import numpy as np
from PIL import Image
d = sys.argv[1]
a = (np.arange(12 * 9 * 3) % 251).astype(np.uint8).reshape(12, 9, 3)
Image.fromarray(a).save(f"{d}/rgb.png")
Image.fromarray(a).convert("P").save(f"{d}/palette.png")
Image.fromarray(a).save(f"{d}/interlaced.png", interlace=1)
Image.fromarray(a).save(f"{d}/rgb.jpg", quality=80)
Image.fromarray(a[..., 0]).save(f"{d}/gray.jpg", progressive=True)
PY

# Texts: a split byte, then a text and its pair in several scripts.
wordpiece=$(seed wordpiece)
printf '\x05Hello, World! [SEP] a' > "$wordpiece/ascii"
printf '\x08Caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xce\x9f\xce\xa3 \xc4\xb0 \xcc\x81' > "$wordpiece/unicode"
printf '\x00\xff\xfe\xed\xa0\x80\xc0\x80' > "$wordpiece/invalid"

status=0
for target in fuzz_onnx_model:"$models" fuzz_infer_json:"$json" \
    fuzz_repository_json:"$repository" fuzz_npy:"$npy" fuzz_value_proto:"$values" \
    fuzz_config:"$config" fuzz_binary_section:"$binary" fuzz_http_request:"$http_request" \
    fuzz_grpc_infer:"$grpc_infer" fuzz_gguf:"$gguf" fuzz_gen_json:"$gen_json" \
    fuzz_image:"$image" fuzz_wordpiece:"$wordpiece"; do
  name=${target%%:*}; corpus=${target#*:}
  echo "== $name: ${seconds}s from $(ls "$corpus" | wc -l) seeds"
  if ! "$build/tests/fuzz/$name" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
       -artifact_prefix="$work/crashes/$name-" -print_final_stats=1 "$corpus" 2>&1 | tail -n 15; then
    echo "== $name FOUND A CRASH: see $work/crashes/"
    status=1
  fi
done
exit $status
