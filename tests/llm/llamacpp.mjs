// SPDX-License-Identifier: Apache-2.0
// llama.cpp as the peer of kiln's LLM tests: tokenization and greedy continuation of a GGUF model
// through the npm package node-llama-cpp (pinned 3.21.1; its prebuilt CPU binary, never a GPU,
// a download or a build).
//
//   node tests/llm/llamacpp.mjs MODEL.gguf (--prompt TEXT | --tokens 1,2,3 | --requests FILE) [--n 32]
//        [--threads 2] [--kv-type f16|f32] [--flash-attention] [--logits K] [--tokenize-only]
//
// prints one JSON object on stdout:
//   {"prompt_tokens": [...], "tokens": [...], "text": "...", "add_bos": bool, "bos": id,
//    "eog": [ids of end-of-generation tokens among "tokens"], "model": ..., "settings": {...}}
// prompt_tokens is llama.cpp's tokenization of TEXT with special-token parsing off, preceded by
// BOS when the model's metadata asks for it (tokenizer.ggml.add_bos_token; llama_tokenize with
// add_special = true, parse_special = false). With --tokens the ids are used as given. tokens are
// the greedy (temperature 0, no penalties) continuation of n tokens; generation stops before an
// end-of-generation token, so the list may be shorter than n (never with --logits, which goes on
// past one). text is their detokenization.
// --logits K adds "top": for each generated token, the K most probable next tokens as
// [[id, logprob], ...] from llama.cpp's full softmax at temperature 1 (logprob = logit -
// logsumexp(logits), float32). --kv-type chooses the KV cache type (llama.cpp's default f16;
// f32 removes that rounding), --flash-attention turns llama.cpp's flash attention on (default
// off). --force IDS (with --logits) feeds these ids after the prompt instead of llama.cpp's own
// choices (teacher forcing: "top" is then llama.cpp's distribution along that path, and
// "tokens" still its argmax at each step), so that logits can be compared position by position
// with another implementation's path. --tokenize-only prints prompt_tokens only.
//
// --requests FILE runs several requests on one load of the model (node and llama.cpp start once):
// FILE holds one JSON object per line, {"prompt": TEXT | "tokens": [ids], "n": N, "logits": K,
// "force": [ids]} (n, logits and force optional, as the flags), and one result object is printed
// per line, in order. --prompt, --tokens, --n, --logits and --force are then not given.
//
// The package is found in $KILN_LLM_NODE_DIR/node_modules (default <repo>/build/llm-node, where
// scripts/install-deps puts it); when it is missing the script says so and exits 77 (CTest's skip
// code). NODE_LLAMA_CPP_LOG_LEVEL=info shows llama.cpp's log (default: warnings).
import {existsSync, readFileSync} from "node:fs";
import {createRequire} from "node:module";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";
import {parseArgs} from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");

function fail(msg, code = 2) {
    console.error(`llamacpp.mjs: ${msg}`);
    process.exit(code);
}

let parsed;
try {
    parsed = parseArgs({
        allowPositionals: true,
        options: {
            "prompt": {type: "string"},
            "tokens": {type: "string"},
            "n": {type: "string", default: "32"},
            "threads": {type: "string", default: "2"},
            "kv-type": {type: "string", default: "f16"},
            "flash-attention": {type: "boolean", default: false},
            "logits": {type: "string", default: "0"},
            "force": {type: "string"},
            "tokenize-only": {type: "boolean", default: false},
            "requests": {type: "string"},
        },
    });
} catch (e) {
    fail(e.message);
}
const {values: opts, positionals} = parsed;
if (positionals.length !== 1)
    fail("usage: llamacpp.mjs MODEL.gguf (--prompt TEXT | --tokens IDS) [--n N] [--threads T] " +
         "[--kv-type f16|f32] [--flash-attention] [--logits K] [--tokenize-only]");
const modelPath = path.resolve(positionals[0]);
if (!existsSync(modelPath))
    fail(`model ${modelPath} does not exist`);
const threads = Number(opts.threads);
const kvType = {f16: "F16", f32: "F32"}[opts["kv-type"]];
if (!Number.isInteger(threads) || threads < 1 || kvType == null)
    fail("--threads takes an integer >= 1; --kv-type takes f16 or f32");
const parseIds = (text) => text.split(",").filter((x) => x.trim() !== "").map(Number);

// One request {prompt | tokens, n, logits, force}, checked.
function checkRequest(req) {
    if ((req.prompt == null) === (req.tokens == null))
        fail("give exactly one of --prompt and --tokens");
    const n = Number(req.n ?? 32);
    const topK = Number(req.logits ?? 0);
    if (!Number.isInteger(n) || n < 0 || !Number.isInteger(topK) || topK < 0)
        fail("--n and --logits take non-negative integers");
    const badIds = (list) => list != null && list.some((t) => !Number.isInteger(t) || t < 0);
    if (badIds(req.tokens))
        fail("--tokens takes comma-separated non-negative integers");
    if (req.force != null && (topK === 0 || badIds(req.force)))
        fail("--force takes comma-separated ids and needs --logits K");
    return {prompt: req.prompt, tokens: req.tokens, n, topK, force: req.force ?? null};
}

let requests;
if (opts.requests != null) {
    if (opts.prompt != null || opts.tokens != null || opts.force != null)
        fail("--requests replaces --prompt, --tokens and --force");
    let lines = [];
    try {
        lines = readFileSync(opts.requests, "utf8").split("\n").filter((l) => l.trim() !== "");
    } catch (e) {
        fail(`--requests ${opts.requests}: ${e.message}`);
    }
    requests = lines.map((line, i) => {
        let req;
        try {
            req = JSON.parse(line);
        } catch (e) {
            fail(`--requests ${opts.requests} line ${i + 1}: ${e.message}`);
        }
        return checkRequest(req);
    });
} else {
    requests = [checkRequest({
        prompt: opts.prompt,
        tokens: opts.tokens == null ? null : parseIds(opts.tokens),
        n: opts.n,
        logits: opts.logits,
        force: opts.force == null ? null : parseIds(opts.force),
    })];
}

const nodeDir = path.resolve(process.env.KILN_LLM_NODE_DIR || path.join(repo, "build", "llm-node"));
const require = createRequire(path.join(nodeDir, "package.json"));
let entry;
try {
    entry = pathToFileURL(require.resolve("node-llama-cpp")).href;
} catch {
    console.error(`llamacpp.mjs: node-llama-cpp is not installed in ${nodeDir}/node_modules ` +
                  "(set KILN_LLM_NODE_DIR or install the llm npm references); skipping");
    process.exit(77);
}
const {getLlama, LlamaLogLevel} = await import(entry);

const llama = await getLlama({
    gpu: false,
    build: "never",
    skipDownload: true,
    usePrebuiltBinaries: true,
    maxThreads: threads,
    logLevel: process.env.NODE_LLAMA_CPP_LOG_LEVEL || LlamaLogLevel.warn,
});
const model = await llama.loadModel({modelPath, gpuLayers: 0});

// One request on the loaded model: its result object.
async function run(req) {
    const {n: nGen, topK, force: forced} = req;
    const addBos = model.tokens.shouldPrependBosToken;
    const promptTokens = req.tokens != null
        ? req.tokens
        : [...(addBos ? [model.tokens.bos] : []), ...model.tokenize(req.prompt, false)];
    const result = {
        model: modelPath,
        prompt_tokens: promptTokens,
        add_bos: addBos,
        bos: model.tokens.bos ?? null,
    };
    if (opts["tokenize-only"])
        return result;
    if (promptTokens.length === 0)
        fail("the prompt has no tokens");

    const context = await model.createContext({
        contextSize: Math.max(64, promptTokens.length + nGen + 8),
        batchSize: Math.max(64, promptTokens.length + nGen + 8),
        threads: {ideal: threads, min: threads},
        flashAttention: opts["flash-attention"],
        experimentalKvCacheKeyType: kvType,
        experimentalKvCacheValueType: kvType,
    });
    const sequence = context.getSequence();
    const tokens = [];
    const top = [];
    if (topK === 0) {
        if (nGen > 0) {
            // (yieldEogToken would keep going past an end-of-generation token, but makes
            // node-llama-cpp ~15x slower per token; random-weight models rarely draw one.)
            const greedy = {temperature: 0};
            for await (const token of sequence.evaluate(promptTokens, greedy)) {
                tokens.push(token);
                if (tokens.length >= nGen)
                    break;
            }
        }
    } else {
        // Token by token: llama.cpp's probabilities at temperature 1, then the argmax.
        const gen = {token: true, probabilities: true,
                     options: {temperature: 1, topK: 0, topP: 1, minP: 0}};
        let input = [...promptTokens.slice(0, -1),
                     [promptTokens[promptTokens.length - 1], {generateNext: gen}]];
        for (let i = 0; i < nGen; i++) {
            const out = await sequence.controlledEvaluate(input);
            const probs = out[input.length - 1].next.probabilities;
            let best = null;
            const row = [];
            for (const [tok, p] of probs) {
                if (best == null)
                    best = tok;
                if (row.length < topK)
                    row.push([tok, Math.log(p)]);
                else
                    break;
            }
            tokens.push(best);
            top.push(row);
            const next = forced != null && i < forced.length ? forced[i] : best;
            input = [[next, {generateNext: gen}]];
        }
    }
    result.tokens = tokens;
    result.text = model.detokenize(tokens, false);
    result.eog = tokens.filter((t) => model.isEogToken(t));
    if (topK > 0)
        result.top = top;
    result.settings = {threads, kv_type: opts["kv-type"], flash_attention: opts["flash-attention"],
                       n: nGen, node_llama_cpp: "3.21.1"};
    await context.dispose();
    return result;
}

for (const req of requests)
    console.log(JSON.stringify(await run(req)));
await model.dispose();
