// SPDX-License-Identifier: Apache-2.0
// llama.cpp's side of kiln's generation-serving benchmark: serves a workload of generation
// requests through node-llama-cpp 3.21.1 (llama.cpp's prebuilt CPU binary), with llama.cpp's own
// multi-sequence batching in ONE context, and prints the metrics `kiln bench generate` reports
// (TTFT, TPOT, ITL, E2E, throughput; docs/bench.md, "Generation mode") as one JSON object.
//
//   node bench/llm/llamacpp_serve.mjs --model M.gguf --threads 2 --workload W.jsonl
//       [--max-concurrency 16] [--request-rate inf] [--seed 0] [--context-size N]
//       [--batch-size 512] [--node-dir build/llm-node] [--out R.json]
//   node bench/llm/llamacpp_serve.mjs --arrivals-only --workload W.jsonl --request-rate R
//       [--seed 0]    (prints {"due_ms": [...]}, the arrival times below, and exits; no model)
//
//   - W.jsonl: one request a line, {"prompt": [token ids], "max_tokens": n}; blank lines skipped.
//     The ids go to the model as they stand (no BOS added), as a server given token ids does.
//   - Arrivals: request i is due at the sum of i exponential gaps of mean 1/R (a Poisson process;
//     R = inf: all due at 0), drawn exactly as `kiln bench generate --request-rate R --seed S`
//     draws them (src/bench/schedule.cc), so the two runs of one seed get the same arrivals:
//     std::mt19937_64 seeded with --seed, u = (next() >> 11) * 2^-53 in [0, 1),
//     t_ns += -log1p(-u) * 1e9 / R, due = trunc(t_ns).
//   - One context of --max-concurrency C sequences, each --context-size tokens (default: the
//     workload's largest prompt + max_tokens, rounded up to a multiple of 256), llama_decode
//     batches of --batch-size tokens. A due request waits, FIFO, for a free sequence (the lowest
//     free id); it then starts at once, while the others keep generating: node-llama-cpp puts
//     the pending tokens of the sequences evaluated at the same time (prompt chunks and single
//     decode tokens alike) into one llama_decode batch, llama.cpp's continuous batching, with
//     its default split of the batch (maximumParallelism). Two things are added so that every
//     busy sequence is in every decode step, as in llama-server (see "Batch order" and "Steps"
//     below): the batch's items are sorted by sequence id, and sequences queue their next token
//     together. decode_calls, mean_sequences_per_decode and mean_ubatch_runs_per_decode in the
//     output show what llama_decode got.
//   - Each request: greedy (temperature 0), exactly max_tokens tokens. An end-of-generation token
//     does not stop it (yieldEogToken: evaluation goes on past it, as vLLM's ignore_eos and
//     kiln's do); "eog_requests" counts the requests that produced one before their last token.
//     "ended_early" counts requests whose evaluation still stopped short (none expected). Then
//     the sequence's history is cleared for the next request.
//   - Times: a request's latencies start when it starts on a sequence (vllm bench serve starts
//     them at send); the wait before that (start - due time) is the send delay. Every generated
//     token is stamped when node-llama-cpp yields it. TTFT = first token - start, ITL = the gaps
//     between a request's consecutive tokens (all requests pooled), E2E = last token - start,
//     TPOT = (E2E - TTFT) / (tokens - 1) for requests with more than one token. Duration = from
//     time zero of the arrivals to the end of the last request; throughputs = completed
//     requests, output tokens, input + output tokens over completed requests / duration.
//     Latency and send-delay statistics are over completed requests: mean, median, p99 in ms,
//     percentiles interpolated linearly between ranks (numpy's default); all 0 without samples.
//   - Before time zero, every sequence evaluates 8 tokens and generates 2 at once (warm-up;
//     not measured), then is cleared.
//   - Output: one JSON object on stdout (and in --out): engine, completed, failed, ended_early,
//     eog_requests, duration_s, input_tokens, output_tokens, request_throughput,
//     output_throughput, total_token_throughput, ttft_ms, tpot_ms, itl_ms, e2e_ms, send_delay_ms
//     ({mean, median, p99}), due_ms (each request's due time, ms after time zero), threads,
//     max_concurrency, request_rate ("inf" or a number),
//     decode_calls (llama_decode calls during the run), mean_sequences_per_decode,
//     mean_ubatch_runs_per_decode (runs of consecutive sequence ids in a call: the ubatches
//     llama.cpp cuts its single-token part into); first_error when a request failed. Progress on
//     stderr every 3 s. Exit 2 for bad flags or workload, 1 when every request failed (after
//     printing the report), else 0.
//
// Single-threaded (Node.js's event loop); llama.cpp's decoding runs on its own threads.
import {readFileSync, writeFileSync} from "node:fs";
import {createRequire} from "node:module";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";
import {parseArgs} from "node:util";

const PROGRESS_MS = 3000;

function fail(message) {
    console.error(`llamacpp_serve: ${message}`);
    process.exit(2);
}

let opts;
try {
    ({values: opts} = parseArgs({
        options: {
            "model": {type: "string"},
            "threads": {type: "string", default: "2"},
            "workload": {type: "string"},
            "max-concurrency": {type: "string", default: "16"},
            "request-rate": {type: "string", default: "inf"},
            "seed": {type: "string", default: "0"},
            "context-size": {type: "string"},
            "batch-size": {type: "string", default: "512"},
            "node-dir": {type: "string", default: process.env.KILN_LLM_NODE_DIR ?? "build/llm-node"},
            "out": {type: "string"},
            "arrivals-only": {type: "boolean", default: false}
        }
    }));
} catch (e) {
    fail(e.message);
}
if (opts.model == null && !opts["arrivals-only"]) fail("--model is required");
if (opts.workload == null) fail("--workload is required");

function positiveInt(flag) {
    const v = Number(opts[flag]);
    if (!Number.isInteger(v) || v < 1) fail(`--${flag} must be a positive integer, got '${opts[flag]}'`);
    return v;
}
const threads = positiveInt("threads");
const maxConcurrency = positiveInt("max-concurrency");
const batchSize = positiveInt("batch-size");
const rateText = opts["request-rate"].trim().toLowerCase();
const requestRate = rateText === "inf" || rateText === "infinity" ? Infinity : Number(rateText);
if (!(requestRate > 0)) fail(`--request-rate must be > 0 or 'inf', got '${opts["request-rate"]}'`);
if (!/^\d+$/.test(opts.seed)) fail(`--seed must be a non-negative integer, got '${opts.seed}'`);
const seed = BigInt(opts.seed);

// The workload.
let workloadText;
try {
    workloadText = readFileSync(opts.workload, "utf8");
} catch (e) {
    fail(`cannot read --workload ${opts.workload}: ${e.message}`);
}
const requests = [];
workloadText.split("\n").forEach((line, index) => {
    if (line.trim() === "") return;
    const where = `${opts.workload}:${index + 1}`;
    let r;
    try {
        r = JSON.parse(line);
    } catch (e) {
        fail(`${where}: not JSON: ${e.message}`);
    }
    if (r === null || typeof r !== "object" || !Array.isArray(r.prompt) || r.prompt.length === 0 ||
        !r.prompt.every((t) => Number.isInteger(t) && t >= 0)) {
        fail(`${where}: "prompt" must be a non-empty array of non-negative token ids`);
    }
    if (!Number.isInteger(r.max_tokens) || r.max_tokens < 1) {
        fail(`${where}: "max_tokens" must be a positive integer, got ${JSON.stringify(r.max_tokens)}`);
    }
    requests.push({prompt: r.prompt, maxTokens: r.max_tokens, line: index + 1});
});
if (requests.length === 0) fail(`${opts.workload} holds no requests`);

// A sequence decodes the prompt and max_tokens - 1 generated tokens, and node-llama-cpp keeps one
// cell free: prompt + max_tokens <= context size fits without a context shift.
const needed = Math.max(...requests.map((r) => r.prompt.length + r.maxTokens));
let contextSize;
if (opts["context-size"] != null) {
    contextSize = positiveInt("context-size");
    const r = requests.find((q) => q.prompt.length + q.maxTokens > contextSize);
    if (r != null) {
        fail(`${opts.workload}:${r.line}: prompt (${r.prompt.length}) + max_tokens (${r.maxTokens}) ` +
            `exceeds --context-size ${contextSize}`);
    }
} else {
    contextSize = Math.ceil(needed / 256) * 256;
}

// Arrival times (ms after time zero): std::mt19937_64 (the C++ standard's 64-bit Mersenne
// Twister, [rand.predef]) over --seed, the generator of kiln's arrival schedule.
const MASK64 = 0xffffffffffffffffn;
class Mt19937_64 {
    constructor(s) {
        this.mt = new Array(312);
        this.mt[0] = BigInt.asUintN(64, s);
        for (let i = 1; i < 312; i++) {
            const p = this.mt[i - 1];
            this.mt[i] = (6364136223846793005n * (p ^ (p >> 62n)) + BigInt(i)) & MASK64;
        }
        this.index = 312;
    }
    next() {
        if (this.index >= 312) {
            const mt = this.mt;
            for (let i = 0; i < 312; i++) {
                const x = (mt[i] & 0xffffffff80000000n) | (mt[(i + 1) % 312] & 0x7fffffffn);
                let xa = x >> 1n;
                if (x & 1n) xa ^= 0xb5026f5aa96619e9n;
                mt[i] = mt[(i + 156) % 312] ^ xa;
            }
            this.index = 0;
        }
        let y = this.mt[this.index++];
        y ^= (y >> 29n) & 0x5555555555555555n;
        y ^= (y << 17n) & 0x71d67fffeda60000n;
        y ^= (y << 37n) & 0xfff7eee000000000n;
        y ^= y >> 43n;
        return y & MASK64;
    }
}
{
    // The standard fixes the 10000th output of a default-seeded (5489) engine.
    const check = new Mt19937_64(5489n);
    let v = 0n;
    for (let i = 0; i < 10000; i++) v = check.next();
    if (v !== 9981545732273789042n) fail("the Mersenne Twister does not match std::mt19937_64");
}
const dueMs = [];
{
    const rng = new Mt19937_64(seed);
    let tNs = 0;
    for (let i = 0; i < requests.length; i++) {
        if (i > 0 && Number.isFinite(requestRate)) {
            const u = Number(rng.next() >> 11n) * 2 ** -53;
            tNs += -Math.log1p(-u) * 1e9 / requestRate;
        }
        dueMs.push(Number.isFinite(requestRate) ? Math.trunc(tNs) / 1e6 : 0);
    }
}
if (opts["arrivals-only"]) {
    console.log(JSON.stringify({due_ms: dueMs}));
    process.exit(0);
}

// The model and the context.
const require = createRequire(path.join(path.resolve(opts["node-dir"]), "package.json"));
const entry = pathToFileURL(require.resolve("node-llama-cpp")).href;
const {getLlama} = await import(entry);
const packageDir = path.dirname(path.dirname(fileURLToPath(entry)));  // entry: <package>/dist/index.js
const packageVersion = JSON.parse(readFileSync(path.join(packageDir, "package.json"), "utf8")).version;
const ENGINE = `llama.cpp (node-llama-cpp ${packageVersion})`;
if (packageVersion !== "3.21.1") {
    console.error(`llamacpp_serve: node-llama-cpp ${packageVersion}; written for 3.21.1, whose internals ` +
        "the batch order and steps use");
}
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
    maxThreads: threads});
const model = await llama.loadModel({modelPath: path.resolve(opts.model), gpuLayers: 0});
const vocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
for (const r of requests) {
    const bad = r.prompt.find((t) => t >= vocab);
    if (bad != null) {
        fail(`${opts.workload}:${r.line}: token id ${bad} is outside the model's vocabulary (${vocab})`);
    }
}
// Batch order. node-llama-cpp 3.21.1 creates llama.cpp's non-unified KV cache (one stream per
// sequence), and llama.cpp then cuts a batch into ubatches of consecutive ascending sequence ids
// only (llama_batch_allocr::split_equal, sequential): a batch whose tokens come as sequences
// 3, 0, 1, 2 is decoded as two ubatches, each a full pass over the weights. node-llama-cpp adds
// the pending evaluations in the order they were queued, so keep its default choice of how many
// tokens each gets (maximumParallelism) and sort them by sequence id. The id comes from the
// context's queue (internal in 3.21.1, matched by its token array); without it, unsorted.
const strategiesDir = path.join(packageDir, "dist", "evaluator", "LlamaContext", "utils",
    "batchItemsPrioritizationStrategies");
const {maximumParallelismStrategy} =
    await import(pathToFileURL(path.join(strategiesDir, "maximumParallelismStrategy.js")).href);
let context = null, sortWarned = false;
const batchStats = {calls: 0, sequences: 0, runs: 0};
function sortedMaximumParallelism({items, size}) {
    const chosen = maximumParallelismStrategy({items, size});
    const queued = context?._queuedDecodes;
    const ids = new Map(Array.isArray(queued) ? queued.map((q) => [q.tokens, q.sequenceId]) : []);
    if (!chosen.every((c) => Number.isInteger(ids.get(c.item.tokens)))) {
        if (!sortWarned) console.error("llamacpp_serve: cannot see the batch's sequence ids; unsorted");
        sortWarned = true;
        return chosen;
    }
    chosen.sort((a, b) => ids.get(a.item.tokens) - ids.get(b.item.tokens));
    // Fit the batch here as node-llama-cpp would after (its default may ask for more than `size`;
    // it then cuts the last items), to know which evaluations complete in it.
    let left = size;
    for (const c of chosen) {
        const wanted = c.processAmount <= 0 ? 1 : c.processAmount;
        c.processAmount = Math.max(0, Math.min(wanted, c.item.tokens.length, left));
        left -= c.processAmount;
    }
    const fitted = chosen.filter((c) => c.processAmount > 0);
    chosen.length = 0;
    chosen.push(...fitted);
    const completing = chosen.filter((c) => c.processAmount === c.item.tokens.length);
    openStep(completing.map((c) => ids.get(c.item.tokens)));
    batchStats.calls++;
    batchStats.sequences += chosen.length;
    // Runs of consecutive ids: the ubatches llama.cpp makes of the batch's first token of each.
    chosen.forEach((c, k) => {
        const id = ids.get(c.item.tokens);
        if (k === 0 || id !== ids.get(chosen[k - 1].item.tokens) + 1) batchStats.runs++;
    });
    return chosen;
}
// Steps. node-llama-cpp hands out a batch's results one sequence at a time, as each sequence's
// sampling (a native async call) completes, and starts the next llama_decode with whatever is
// queued by then: a sequence whose result comes last is still on its way and misses the batch,
// and so at every step after; sequences whose prompts finished in different batches likewise
// settle into groups that take turns (one group's tokens queue while the other's batch decodes).
// llama-server instead decodes every busy slot in one batch per step. So here a sequence that got
// its token waits until every evaluation that will yield a token and is already in a batch has
// yielded it; then all of them queue their next token together, a macrotask later (after the
// batch loop has seen an empty queue and handed the next dispatch to its scheduler). Prompt
// chunks that yield no token do not hold anyone (but node-llama-cpp goes on with a prompt's next
// chunk at once, so while a prompt spans several batches the others join every other batch). A
// wait ends after STEP_WAIT_MS at most, so a lost result cannot hang the run.
const STEP_WAIT_MS = 30000;
let stepsOn = false;
const awaited = new Set();  // ids of sequences whose token is in a batch already dispatched
let waiters = [], stepTimer = null;
function openStep(sequenceIds) {
    if (stepsOn) for (const id of sequenceIds) awaited.add(id);
}
function releaseWaiters() {
    clearTimeout(stepTimer);
    stepTimer = null;
    const released = waiters;
    waiters = [];
    setImmediate(() => released.forEach((resolve) => resolve()));
}
// Sequence k has its token and will ask for the next: resolves when no dispatched token is
// outstanding.
function arrive(k) {
    awaited.delete(k);
    const whenAll = new Promise((resolve) => waiters.push(resolve));
    if (awaited.size === 0) releaseWaiters();
    else stepTimer ??= setTimeout(releaseWaiters, STEP_WAIT_MS);
    return whenAll;
}
// Sequence k asks for no more tokens (its request is over).
function leave(k) {
    awaited.delete(k);
    if (awaited.size === 0 && waiters.length > 0) releaseWaiters();
}
// contextSize is per sequence in node-llama-cpp 3.x (it allocates sequences x contextSize cells).
context = await model.createContext({sequences: maxConcurrency, contextSize, batchSize,
    threads: {ideal: threads, min: threads},
    batching: {itemPrioritizationStrategy: sortedMaximumParallelism}});
// Sequence k of this array has llama.cpp sequence id k (node-llama-cpp hands ids out in order).
const sequences = [];
for (let s = 0; s < maxConcurrency; s++) sequences.push(context.getSequence());
if (sequences.some((sequence, k) => sequence._sequenceId != null && sequence._sequenceId !== k)) {
    console.error("llamacpp_serve: sequence ids are not 0..C-1 in order; lowest-id allocation is off");
}

const evaluateOptions = {temperature: 0, yieldEogToken: true};

// Warm-up: every sequence at once, 8 prompt tokens and 2 generated ones.
await Promise.all(sequences.map(async (sequence) => {
    let n = 0;
    for await (const token of sequence.evaluate(requests[0].prompt.slice(0, 8), evaluateOptions)) {
        void token;
        if (++n >= 2) break;
    }
    await sequence.clearHistory();
}));

// Free sequences, by index; the dispatcher below is the only one that waits for one, so FIFO
// holds. A request gets the lowest free id, which keeps the busy ids together (fewer ubatches).
const free = sequences.map((_, k) => k);
let waiting = null;
function releaseSequence(k) {
    if (waiting != null) {
        const resolve = waiting;
        waiting = null;
        resolve(k);
    } else {
        free.push(k);
        free.sort((a, b) => a - b);
    }
}
function acquireSequence() {
    if (free.length > 0) return Promise.resolve(free.shift());
    return new Promise((resolve) => { waiting = resolve; });
}
// Node.js's timers run on the event loop's cached clock and may fire up to a millisecond before
// performance.now() reaches the target: sleep again for what is left.
async function sleepUntil(t) {
    while (performance.now() < t) {
        const ms = Math.max(1, Math.ceil(t - performance.now()));
        await new Promise((resolve) => setTimeout(resolve, ms));
    }
}

// One record per request, times in ms (performance.now()).
const records = requests.map(() => ({due: 0, start: 0, end: 0, tokens: [], ok: false, eog: false,
    error: null}));
let done = 0, failed = 0, inFlight = 0;

async function serve(index, k) {
    const request = requests[index], record = records[index], sequence = sequences[k];
    try {
        for await (const token of sequence.evaluate(request.prompt, evaluateOptions)) {
            record.tokens.push(performance.now());
            if (record.tokens.length >= request.maxTokens) break;
            if (model.isEogToken(token)) record.eog = true;
            await arrive(k);  // see "Steps"
        }
        record.ok = true;
    } catch (e) {
        record.error = `request ${index} (${opts.workload}:${request.line}): ${e?.message ?? e}`;
        failed++;
    }
    record.end = performance.now();
    leave(k);
    inFlight--;
    done++;
    try {
        await sequence.clearHistory();
    } catch (e) {
        // A sequence left with stale tokens would skew every later request on it: stop.
        console.error(`llamacpp_serve: clearing the sequence of request ${index} failed: ${e?.message ?? e}`);
        process.exit(1);
    }
    releaseSequence(k);
}

Object.assign(batchStats, {calls: 0, sequences: 0, runs: 0});
stepsOn = true;
const t0 = performance.now();
const progress = setInterval(() => {
    console.error(`llamacpp_serve: ${done}/${requests.length} done (${failed} failed, ` +
        `${inFlight} in flight), ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}, PROGRESS_MS);
const running = [];
for (let i = 0; i < requests.length; i++) {
    records[i].due = t0 + dueMs[i];
    await sleepUntil(records[i].due);
    const k = await acquireSequence();
    records[i].start = performance.now();
    inFlight++;
    running.push(serve(i, k));
}
await Promise.all(running);
clearInterval(progress);
console.error(`llamacpp_serve: ${done}/${requests.length} done (${failed} failed)`);

// Metrics.
function summary(values) {
    if (values.length === 0) return {mean: 0, median: 0, p99: 0};
    const v = [...values].sort((a, b) => a - b);
    const percentile = (p) => {
        const rank = p / 100 * (v.length - 1), lo = Math.floor(rank), hi = Math.ceil(rank);
        return v[lo] + (v[hi] - v[lo]) * (rank - lo);
    };
    return {mean: v.reduce((a, b) => a + b, 0) / v.length, median: percentile(50), p99: percentile(99)};
}
const durationS = (Math.max(...records.map((r) => r.end)) - t0) / 1000;
const ttft = [], tpot = [], itl = [], e2e = [], sendDelay = [];
let completed = 0, endedEarly = 0, eogRequests = 0, inputTokens = 0, outputTokens = 0;
for (let i = 0; i < records.length; i++) {
    const r = records[i];
    if (!r.ok) continue;
    completed++;
    inputTokens += requests[i].prompt.length;
    outputTokens += r.tokens.length;
    if (r.tokens.length < requests[i].maxTokens) endedEarly++;
    if (r.eog) eogRequests++;
    sendDelay.push(r.start - r.due);
    if (r.tokens.length === 0) continue;
    const first = r.tokens[0] - r.start, last = r.tokens[r.tokens.length - 1] - r.start;
    ttft.push(first);
    e2e.push(last);
    if (r.tokens.length > 1) tpot.push((last - first) / (r.tokens.length - 1));
    for (let k = 1; k < r.tokens.length; k++) itl.push(r.tokens[k] - r.tokens[k - 1]);
}
const result = {
    engine: ENGINE,
    completed,
    failed,
    ended_early: endedEarly,
    eog_requests: eogRequests,
    duration_s: durationS,
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    request_throughput: completed / durationS,
    output_throughput: outputTokens / durationS,
    total_token_throughput: (inputTokens + outputTokens) / durationS,
    ttft_ms: summary(ttft),
    tpot_ms: summary(tpot),
    itl_ms: summary(itl),
    e2e_ms: summary(e2e),
    send_delay_ms: summary(sendDelay),
    due_ms: dueMs,
    threads,
    max_concurrency: maxConcurrency,
    request_rate: Number.isFinite(requestRate) ? requestRate : "inf",
    decode_calls: batchStats.calls,
    mean_sequences_per_decode: batchStats.calls > 0 ? batchStats.sequences / batchStats.calls : 0,
    mean_ubatch_runs_per_decode: batchStats.calls > 0 ? batchStats.runs / batchStats.calls : 0
};
const firstError = records.find((r) => r.error != null);
if (firstError != null) result.first_error = firstError.error;
const json = JSON.stringify(result);
console.log(json);
if (opts.out != null) writeFileSync(opts.out, json + "\n");
process.exit(completed === 0 ? 1 : 0);
