// SPDX-License-Identifier: Apache-2.0
// kiln's OpenAI-compatible API through the official client: the npm package `openai` (pinned by
// scripts/install-deps, group llm) against a running `kiln serve` with a generative model.
//
//   node tests/llm/openai_client_test.mjs --base-url http://127.0.0.1:8000/v1 --model tiny
//
// Checks models.list and models.retrieve, completions.create and chat.completions.create, each
// non-streamed and streamed (stream: true, iterating the chunks; the streamed text equals the
// non-streamed one for the same greedy request; stream_options.include_usage gives the usage),
// and the SDK's errors: an unknown model throws NotFoundError (status 404), a bad parameter
// BadRequestError (400). Prints one PASS/FAIL line per check; exits 1 on any failure, 77 (CTest's
// skip code) when the package is not installed in $KILN_LLM_NODE_DIR/node_modules (default
// <repo>/build/llm-node). serve_llm_test.py runs it against the server it starts.
import {createRequire} from "node:module";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";
import {parseArgs} from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");

const {values: opts} = parseArgs({
    options: {
        "base-url": {type: "string"},
        "model": {type: "string", default: "tiny"},
    },
});
if (!opts["base-url"]) {
    console.error("usage: openai_client_test.mjs --base-url http://HOST:PORT/v1 [--model NAME]");
    process.exit(2);
}

const nodeDir = path.resolve(process.env.KILN_LLM_NODE_DIR || path.join(repo, "build", "llm-node"));
const require = createRequire(path.join(nodeDir, "package.json"));
let entry;
try {
    // The package's ES module entry, beside its CommonJS main.
    entry = pathToFileURL(path.join(path.dirname(require.resolve("openai")), "index.mjs")).href;
} catch {
    console.error(`openai_client_test.mjs: the npm package openai is not installed in ` +
                  `${nodeDir}/node_modules (scripts/install-deps llm); skipping`);
    process.exit(77);
}
const {default: OpenAI} = await import(entry);

const model = opts.model;
const client = new OpenAI({baseURL: opts["base-url"], apiKey: "unused", maxRetries: 0,
                           timeout: 60_000});
let passed = 0;
const failed = [];

function check(name, ok, detail = "") {
    if (ok) {
        passed += 1;
        console.log(`PASS  ${name}`);
    } else {
        failed.push(name);
        console.log(`FAIL  ${name}${detail ? `: ${detail}` : ""}`);
    }
    return ok;
}

async function run(name, fn) {
    try {
        await fn();
    } catch (e) {
        check(name, false, `${e?.constructor?.name}: ${e?.message}`);
    }
}

const show = (x) => JSON.stringify(x)?.slice(0, 300);

await run("models", async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    check(`models.list() includes ${model}`, ids.includes(model), show(ids));
    const m = await client.models.retrieve(model);
    check("models.retrieve() gives the model", m.id === model && m.object === "model", show(m));
});

const prompt = "Once upon a time";
const params = {model, max_tokens: 16, temperature: 0, ignore_eos: true};

await run("completions", async () => {
    const r = await client.completions.create({...params, prompt});
    const text = r.choices[0].text;
    check("completions.create: one choice of text, finish_reason length, 16 tokens",
          typeof text === "string" && text.length > 0 && r.choices[0].finish_reason === "length" &&
              r.usage.completion_tokens === 16 && r.object === "text_completion",
          show(r));
    const stream = await client.completions.create(
        {...params, prompt, stream: true, stream_options: {include_usage: true}});
    let joined = "";
    let chunks = 0;
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage;
        for (const ch of chunk.choices) {
            joined += ch.text;
            chunks += 1;
            if (ch.finish_reason) finish = ch.finish_reason;
        }
    }
    check("completions.create stream: the chunks concatenate to the non-streamed text",
          joined === text && chunks > 1, `${show(joined)} vs ${show(text)} (${chunks} chunks)`);
    check("completions.create stream: finish_reason length, usage 16 tokens",
          finish === "length" && usage?.completion_tokens === 16, show({finish, usage}));
});

await run("chat", async () => {
    const messages = [{role: "user", content: "Say something."}];
    const r = await client.chat.completions.create({...params, messages});
    const msg = r.choices[0].message;
    check("chat.completions.create: an assistant message, finish_reason length",
          msg.role === "assistant" && typeof msg.content === "string" &&
              r.choices[0].finish_reason === "length" && r.object === "chat.completion",
          show(r));
    const stream = await client.chat.completions.create({...params, messages, stream: true});
    let joined = "";
    let role = null;
    let finish = null;
    for await (const chunk of stream) {
        for (const ch of chunk.choices) {
            if (role === null && ch.delta.role) role = ch.delta.role;
            joined += ch.delta.content ?? "";
            if (ch.finish_reason) finish = ch.finish_reason;
        }
    }
    check("chat.completions.create stream: the deltas concatenate to the message content",
          joined === msg.content, `${show(joined)} vs ${show(msg.content)}`);
    check("chat.completions.create stream: role assistant first, finish_reason length",
          role === "assistant" && finish === "length", show({role, finish}));
});

await run("errors", async () => {
    try {
        await client.completions.create({...params, model: "nope", prompt});
        check("unknown model: the SDK throws NotFoundError (404)", false, "no error thrown");
    } catch (e) {
        check("unknown model: the SDK throws NotFoundError (404)",
              e instanceof OpenAI.NotFoundError && e.status === 404 && /nope/.test(e.message),
              `${e?.constructor?.name} ${e?.status} ${e?.message}`);
    }
    try {
        await client.chat.completions.create(
            {...params, temperature: 7, messages: [{role: "user", content: "x"}]});
        check("temperature 7: the SDK throws BadRequestError (400)", false, "no error thrown");
    } catch (e) {
        check("temperature 7: the SDK throws BadRequestError (400) naming it",
              e instanceof OpenAI.BadRequestError && e.status === 400 &&
                  /temperature/.test(e.message),
              `${e?.constructor?.name} ${e?.status} ${e?.message}`);
    }
    try {
        await client.models.retrieve("nope");
        check("models.retrieve unknown: NotFoundError", false, "no error thrown");
    } catch (e) {
        check("models.retrieve unknown: NotFoundError",
              e instanceof OpenAI.NotFoundError && e.status === 404,
              `${e?.constructor?.name} ${e?.status}`);
    }
});

console.log(`\n${passed}/${passed + failed.length} openai client checks passed`);
if (failed.length > 0) console.log(`failed: ${failed.join(", ")}`);
process.exit(failed.length > 0 ? 1 : 0);
