// SPDX-License-Identifier: Apache-2.0
// ONNX Runtime side of the engine comparison (bench/compare/compare.py): runs one model with
// onnxruntime-node's CPU library and prints one JSON line with the time of every timed run.
//
//   NODE_PATH=build/bench-node/node_modules node ort_runner.cjs SPEC.json
//
// SPEC: {"model": path, "threads": N, "warmup": W, "iterations": K,
//        "inputs": [{"name", "shape": [...], "file": raw little-endian path,
//                    "dtype": "float32" (default) | "int64" | "int32"}],
//        "output_dir": path or null}  (each output's raw bytes to <output_dir>/<name>.bin and its
// dims to <name>.json and its type ("float32", "int64", ...) to <name>.type, after the timed runs).
// Session: intra-op threads N, inter-op 1,
// sequential execution, graph optimization level "all": ONNX Runtime at its best on CPU.
const fs = require('node:fs');
const path = require('node:path');
const ort = require('onnxruntime-node');  // found through NODE_PATH

async function main() {
const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const session = await ort.InferenceSession.create(spec.model, {
  executionProviders: ['cpu'],
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
  intraOpNumThreads: spec.threads,
  interOpNumThreads: 1,
});
const feeds = {};
for (const input of spec.inputs) {
  const buf = fs.readFileSync(input.file);
  const dtype = input.dtype || 'float32';
  const TypedArray = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array}[dtype];
  if (!TypedArray) throw new Error(`input ${input.name}: dtype ${dtype} is not supported`);
  // A copy, so that the typed array is aligned whatever the Buffer's offset.
  const bytes = new Uint8Array(buf.byteLength);
  bytes.set(buf);
  const data = new TypedArray(bytes.buffer, 0, buf.byteLength / TypedArray.BYTES_PER_ELEMENT);
  feeds[input.name] = new ort.Tensor(dtype, data, input.shape);
}
for (let i = 0; i < spec.warmup; ++i) await session.run(feeds);
const times = [];
let results = null;
for (let i = 0; i < spec.iterations; ++i) {
  const t0 = process.hrtime.bigint();
  results = await session.run(feeds);
  times.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
if (spec.output_dir) {
  if (results === null) results = await session.run(feeds);
  for (const [name, tensor] of Object.entries(results)) {
    const bytes = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
    fs.writeFileSync(path.join(spec.output_dir, `${name}.bin`), bytes);
    fs.writeFileSync(path.join(spec.output_dir, `${name}.json`), JSON.stringify(tensor.dims));
    fs.writeFileSync(path.join(spec.output_dir, `${name}.type`), tensor.type);
  }
}
console.log(JSON.stringify({times_ms: times}));
}

main().catch((e) => {
  console.error(`ort_runner: ${e.stack || e}`);
  process.exit(1);
});
