// SPDX-License-Identifier: Apache-2.0
// The WordPiece reference: encodes texts (and text pairs) with @lenml/tokenizers (a fork of
// transformers.js: Hugging Face's BertNormalizer, BertPreTokenizer, WordPiece and
// TemplateProcessing in JavaScript) from a tokenizer.json that tests/text/wordpiece_reference.py
// writes, and prints JSON.
//
//   node tests/text/wordpiece_reference.mjs TOKENIZER.json CASES.json
//     CASES.json: a JSON array of {"text": "...", "pair": "..." or null}
//   prints {"results": [{"ids": [...], "type_ids": [...]}, ...]}
//
// Special tokens are added ([CLS] A [SEP] (B [SEP])) and nothing is truncated.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const nodeDir = process.env.KILN_LLM_NODE_DIR || path.join(repo, "build", "llm-node");
const library = path.join(nodeDir, "node_modules", "@lenml", "tokenizers", "dist", "main.mjs");
const [tokenizerPath, casesPath] = process.argv.slice(2);
if (!fs.existsSync(library)) {
  console.error(`skipped: ${library} not found (scripts/install-deps llm)`);
  process.exit(77);
}
const { TokenizerLoader } = await import(pathToFileURL(library).href);
const tokenizerJSON = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON,
  tokenizerConfig: {
    tokenizer_class: "BertTokenizer",
    do_lower_case: tokenizerJSON.normalizer.lowercase,
    model_max_length: 1000000,
    cls_token: "[CLS]", sep_token: "[SEP]", pad_token: "[PAD]", unk_token: "[UNK]",
    mask_token: "[MASK]",
  },
});
const cases = JSON.parse(fs.readFileSync(casesPath, "utf8"));
const results = cases.map(({ text, pair }) => {
  const e = tokenizer._encode_plus(text, {
    text_pair: pair ?? null,
    add_special_tokens: true,
    return_token_type_ids: true,
  });
  return { ids: e.input_ids, type_ids: e.token_type_ids };
});
process.stdout.write(JSON.stringify({ results }) + "\n");
