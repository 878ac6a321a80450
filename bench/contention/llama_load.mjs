// SPDX-License-Identifier: Apache-2.0
// The `llamacpp` competing load of bench/contention/run.py: llama.cpp generating text, forever.
//
//   node bench/contention/llama_load.mjs --model M.gguf --threads N --node-dir build/bench-node
//
// Loads the GGUF model (bench/contention/make_gguf.py writes a random-weight one) through the npm
// package node-llama-cpp, found in <node-dir>/node_modules, on its prebuilt CPU binary (never a
// GPU, never a download or a build of llama.cpp), and generates tokens one at a time with N
// threads: for each token's graph llama.cpp's CPU backend runs N threads (node-llama-cpp's
// worker and N-1 it starts) that meet at a barrier after every operation. Each pass evaluates a
// short prompt and samples up to --tokens tokens, then clears the context and starts again, so
// the cost per token stays that of a short conversation. Every --report seconds a line with the
// token rate goes to stderr. Runs until killed (or for --seconds, when given).
// NODE_LLAMA_CPP_LOG_LEVEL=info shows llama.cpp's own log (default warn).
import {createRequire} from "node:module";
import path from "node:path";
import {pathToFileURL} from "node:url";
import {parseArgs} from "node:util";

const {values: opts} = parseArgs({
    options: {
        "model": {type: "string"},
        "threads": {type: "string", default: "2"},
        "node-dir": {type: "string", default: "build/bench-node"},
        "tokens": {type: "string", default: "256"},
        "report": {type: "string", default: "2"},
        "seconds": {type: "string", default: "0"}
    }
});
if (opts.model == null) {
    console.error("llama_load: --model is required");
    process.exit(2);
}
const threads = Number(opts.threads);
const tokensPerPass = Number(opts.tokens);

// node-llama-cpp is an ES module: resolve it inside node-dir, then import it by its file URL.
const require = createRequire(path.join(path.resolve(opts["node-dir"]), "package.json"));
const entry = pathToFileURL(require.resolve("node-llama-cpp")).href;
const {getLlama} = await import(entry);

const llama = await getLlama({
    gpu: false,
    build: "never",
    skipDownload: true,
    usePrebuiltBinaries: true,
    maxThreads: threads
});
const model = await llama.loadModel({modelPath: path.resolve(opts.model), gpuLayers: 0});
const context = await model.createContext({
    contextSize: tokensPerPass + 64,
    batchSize: 64,
    threads: {ideal: threads, min: threads}
});
const sequence = context.getSequence();
const prompt = model.tokenize("Once upon a time, in a kingdom by the sea, there lived");
const device = llama.gpu === false ? "CPU" : llama.gpu;
console.error(`llama_load: ${path.basename(opts.model)} on the ${device} (${llama.buildType}` +
    ` binary), ${threads} threads, prompt ${prompt.length} tokens, ${tokensPerPass} generated` +
    " per pass");

let generated = 0;
let since = performance.now();
const reportMs = Number(opts.report) * 1000;
const stopAt = Number(opts.seconds) > 0 ? performance.now() + Number(opts.seconds) * 1000 : 0;
for (let pass = 0; ; pass++) {
    await sequence.clearHistory();
    let n = 0;
    for await (const token of sequence.evaluate(prompt, {temperature: 0.8, topK: 40, seed: pass})) {
        void token;
        generated++;
        const now = performance.now();
        if (stopAt > 0 && now >= stopAt)
            process.exit(0);
        if (now - since >= reportMs) {
            console.error(`llama_load: ${(generated * 1000 / (now - since)).toFixed(1)} tokens/s`);
            generated = 0;
            since = now;
        }
        if (++n >= tokensPerPass)
            break;
    }
}
