// SPDX-License-Identifier: Apache-2.0
// llama.cpp's side of bench/llm/run.py: the same three measurements `kiln profile MODEL.gguf`
// makes, through node-llama-cpp 3.21.1 (llama.cpp's prebuilt CPU binary), printed as one JSON
// object.
//
//   node bench/llm/llamacpp_bench.mjs --model M.gguf --threads 2 [--pp 512] [--tg 128]
//       [--parallel 16] [--parallel-prompt 32] [--repetitions 3] [--node-dir build/llm-node]
//
//   - pp: one sequence evaluates --pp seeded random tokens (batch 512), tokens/s;
//   - tg: one sequence generates --tg tokens greedily from a one-token context, tokens/s;
//   - batched: --parallel sequences of one context, each given a --parallel-prompt-token prompt,
//     then all generate --tg tokens at once; node-llama-cpp puts the sequences' pending tokens
//     in one llama_decode batch per step, tokens/s = parallel x tg / time.
// Each is run --repetitions times after a warm-up, the median reported.
import {createRequire} from "node:module";
import path from "node:path";
import {pathToFileURL} from "node:url";
import {parseArgs} from "node:util";

const {values: opts} = parseArgs({
    options: {
        "model": {type: "string"},
        "threads": {type: "string", default: "2"},
        "pp": {type: "string", default: "512"},
        "tg": {type: "string", default: "128"},
        "parallel": {type: "string", default: "16"},
        "parallel-prompt": {type: "string", default: "32"},
        "repetitions": {type: "string", default: "3"},
        "node-dir": {type: "string", default: process.env.KILN_LLM_NODE_DIR ?? "build/llm-node"}
    }
});
if (opts.model == null) {
    console.error("llamacpp_bench: --model is required");
    process.exit(2);
}
const threads = Number(opts.threads);
const pp = Number(opts.pp), tg = Number(opts.tg), parallel = Number(opts.parallel);
const parallelPrompt = Number(opts["parallel-prompt"]), reps = Number(opts.repetitions);

const require = createRequire(path.join(path.resolve(opts["node-dir"]), "package.json"));
const entry = pathToFileURL(require.resolve("node-llama-cpp")).href;
const {getLlama} = await import(entry);
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
    maxThreads: threads});
const model = await llama.loadModel({modelPath: path.resolve(opts.model), gpuLayers: 0});
const vocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;

// Seeded token ids (xorshift), away from the control tokens at the start of the vocabulary.
let state = 1234n;
function randomTokens(n) {
    const out = [];
    for (let i = 0; i < n; i++) {
        state ^= (state << 13n) & 0xffffffffffffffffn;
        state ^= state >> 7n;
        state ^= (state << 17n) & 0xffffffffffffffffn;
        out.push(300 + Number(state % BigInt(vocab - 300)));
    }
    return out;
}
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

async function generate(sequence, prompt, n) {
    let count = 0;
    for await (const token of sequence.evaluate(prompt, {temperature: 0})) {
        void token;
        if (++count >= n) break;
    }
    return count;
}

const result = {model: path.basename(opts.model), threads, rows: []};
// Single sequence: pp and tg.
{
    const context = await model.createContext({contextSize: Math.max(pp, tg + 8) + 64, batchSize: 512,
        threads: {ideal: threads, min: threads}});
    const sequence = context.getSequence();
    await sequence.evaluateWithoutGeneratingNewTokens(randomTokens(32));  // warm-up
    await generate(sequence, randomTokens(1), 8);
    await sequence.clearHistory();
    const ppRates = [], tgRates = [];
    for (let r = 0; r < reps; r++) {
        const tokens = randomTokens(pp);
        let t0 = performance.now();
        await sequence.evaluateWithoutGeneratingNewTokens(tokens);
        ppRates.push(pp * 1000 / (performance.now() - t0));
        await sequence.clearHistory();
        // tg: the first yielded token comes from the one-token prompt, then tg - 1 more decodes:
        // time tg decode steps after the first token.
        const first = randomTokens(1);
        let count = 0;
        t0 = 0;
        for await (const token of sequence.evaluate(first, {temperature: 0})) {
            void token;
            if (count === 0) t0 = performance.now();
            if (++count > tg) break;
        }
        tgRates.push(tg * 1000 / (performance.now() - t0));
        await sequence.clearHistory();
    }
    result.rows.push({test: `pp${pp}`, tokens_per_s: median(ppRates)});
    result.rows.push({test: `tg${tg}`, tokens_per_s: median(tgRates)});
    await context.dispose();
}
// Batched decode.
if (parallel > 1) {
    const context = await model.createContext({sequences: parallel,
        contextSize: parallel * (parallelPrompt + tg + 16) + 256, batchSize: 512,
        threads: {ideal: threads, min: threads}});
    const sequences = [];
    for (let s = 0; s < parallel; s++) sequences.push(context.getSequence());
    const rates = [];
    for (let r = 0; r < reps; r++) {
        await Promise.all(sequences.map((s) => s.evaluateWithoutGeneratingNewTokens(randomTokens(parallelPrompt))));
        // Each generator's first token comes from its prompt's logits already computed by the
        // last prompt token's evaluation; time the whole generation of tg tokens per sequence.
        const t0 = performance.now();
        await Promise.all(sequences.map((s) => generate(s, randomTokens(1), tg)));
        rates.push(parallel * tg * 1000 / (performance.now() - t0));
        for (const s of sequences) await s.clearHistory();
    }
    result.rows.push({test: `tg${tg} x${parallel} sequences`, tokens_per_s: median(rates)});
    await context.dispose();
}
console.log(JSON.stringify(result));
process.exit(0);
