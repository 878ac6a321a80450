// SPDX-License-Identifier: Apache-2.0
// llm_tokenize: the driver of the tokenizer reference test (tests/llm/tokenizer/compare.py).
//
//   llm_tokenize (--hf DIR | --gguf-json FILE) --texts FILE [--add-special] [--no-parse-special]
//   llm_tokenize --pretokenize NAME --texts FILE
//
// Builds a kiln::llm::Tokenizer from a Hugging Face tokenizer directory (LoadHfTokenizer) or
// from a JSON object holding GGUF tokenizer.ggml.* keys (what tests/llm/vocab.py's load()
// returns), encodes each string of the JSON array in --texts and prints one JSON object:
//   {"vocab_size": N, "encode_seconds": S, "bytes": B,
//    "results": [{"ids": [...], "decoded": "...", "stream": "..."}, ...]}
// "decoded" is Decode(ids, skip_special=false); "stream" is the text an IncrementalDetokenizer
// (special tokens rendered, leading space stripped as Decode does) yields token by token.
// With --pretokenize it prints {"words": [[...], ...]}: PreTokenize(NAME, text) of each text.
// Exit 1 with a message on stderr on any error.
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "llm/tokenizer.h"

namespace {

namespace dom = simdjson::dom;
using kiln::Result;
using kiln::Status;
using kiln::llm::TokenizerSpec;

Result<TokenizerSpec> SpecFromGgufJson(const std::string& path) {
  simdjson::padded_string json;
  if (simdjson::padded_string::load(path).get(json) != simdjson::SUCCESS) {
    return Status::NotFound("cannot read " + path);
  }
  dom::parser parser;
  dom::element root;
  if (parser.parse(json).get(root) != simdjson::SUCCESS) {
    return Status::InvalidArgument(path + " is not valid JSON");
  }
  TokenizerSpec spec;
  std::string_view model;
  if (root["tokenizer.ggml.model"].get_string().get(model) != simdjson::SUCCESS) {
    return Status::InvalidArgument(path + " has no tokenizer.ggml.model");
  }
  spec.model = model == "llama" ? TokenizerSpec::Model::kSpm : TokenizerSpec::Model::kBpe;
  std::string_view pre = "default";
  if (root["tokenizer.ggml.pre"].get_string().get(pre) != simdjson::SUCCESS) pre = "default";
  spec.pre = std::string(pre);
  dom::array arr;
  if (root["tokenizer.ggml.tokens"].get_array().get(arr) == simdjson::SUCCESS) {
    for (dom::element e : arr) {
      std::string_view s;
      if (e.get_string().get(s) != simdjson::SUCCESS) return Status::InvalidArgument("bad token");
      spec.tokens.emplace_back(s);
    }
  }
  if (root["tokenizer.ggml.scores"].get_array().get(arr) == simdjson::SUCCESS) {
    for (dom::element e : arr) {
      double d = 0;
      if (e.get_double().get(d) != simdjson::SUCCESS) return Status::InvalidArgument("bad score");
      spec.scores.push_back(static_cast<float>(d));
    }
  }
  if (root["tokenizer.ggml.token_type"].get_array().get(arr) == simdjson::SUCCESS) {
    for (dom::element e : arr) {
      int64_t v = 0;
      if (e.get_int64().get(v) != simdjson::SUCCESS) return Status::InvalidArgument("bad type");
      spec.token_types.push_back(static_cast<int32_t>(v));
    }
  }
  if (root["tokenizer.ggml.merges"].get_array().get(arr) == simdjson::SUCCESS) {
    for (dom::element e : arr) {
      std::string_view s;
      if (e.get_string().get(s) != simdjson::SUCCESS) return Status::InvalidArgument("bad merge");
      spec.merges.emplace_back(s);
    }
  }
  const std::pair<const char*, int32_t*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &spec.bos_id},
      {"tokenizer.ggml.eos_token_id", &spec.eos_id},
      {"tokenizer.ggml.unknown_token_id", &spec.unk_id},
      {"tokenizer.ggml.padding_token_id", &spec.pad_id}};
  for (const auto& [key, id] : ids) {
    int64_t v = 0;
    if (root[key].get_int64().get(v) == simdjson::SUCCESS) *id = static_cast<int32_t>(v);
  }
  const std::pair<const char*, bool*> flags[] = {
      {"tokenizer.ggml.add_bos_token", &spec.add_bos},
      {"tokenizer.ggml.add_eos_token", &spec.add_eos},
      {"tokenizer.ggml.add_space_prefix", &spec.add_space_prefix}};
  for (const auto& [key, flag] : flags) {
    bool b = false;
    if (root[key].get_bool().get(b) == simdjson::SUCCESS) *flag = b;
  }
  kiln::llm::AddDefaultEogTokens(&spec);
  return spec;
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out->append(buf);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "llm_tokenize: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string hf_dir;
  std::string gguf_json;
  std::string texts_path;
  std::string pre;
  bool add_special = false;
  bool parse_special = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--hf" || a == "--gguf-json" || a == "--texts" || a == "--pretokenize") &&
        i + 1 < argc) {
      (a == "--hf"          ? hf_dir
       : a == "--gguf-json" ? gguf_json
       : a == "--texts"     ? texts_path
                            : pre) = argv[++i];
    } else if (a == "--add-special") {
      add_special = true;
    } else if (a == "--no-parse-special") {
      parse_special = false;
    } else {
      return Fail(
          "usage: llm_tokenize (--hf DIR | --gguf-json FILE | --pretokenize NAME) --texts FILE "
          "[--add-special] [--no-parse-special]");
    }
  }
  if (texts_path.empty()) return Fail("give --texts");
  simdjson::padded_string json;
  if (simdjson::padded_string::load(texts_path).get(json) != simdjson::SUCCESS) {
    return Fail("cannot read " + texts_path);
  }
  dom::parser parser;
  dom::array texts;
  if (parser.parse(json).get_array().get(texts) != simdjson::SUCCESS) {
    return Fail(texts_path + " is not a JSON array");
  }
  std::vector<std::string> inputs;
  for (dom::element e : texts) {
    std::string_view s;
    if (e.get_string().get(s) != simdjson::SUCCESS) return Fail("a text is not a string");
    inputs.emplace_back(s);
  }

  if (!pre.empty()) {
    std::string out = "{\"words\": [";
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto words = kiln::llm::PreTokenize(pre, inputs[i]);
      if (!words.ok()) return Fail(words.status().ToString());
      out += i > 0 ? ", [" : "[";
      for (size_t k = 0; k < words->size(); ++k) {
        if (k > 0) out += ", ";
        AppendJsonString((*words)[k], &out);
      }
      out += "]";
    }
    out += "]}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  }
  if (hf_dir.empty() == gguf_json.empty() || texts_path.empty()) {
    return Fail("give one of --hf / --gguf-json / --pretokenize, and --texts");
  }
  Result<TokenizerSpec> spec =
      hf_dir.empty() ? SpecFromGgufJson(gguf_json) : kiln::llm::LoadHfTokenizer(hf_dir);
  if (!spec.ok()) return Fail(spec.status().ToString());
  auto tok = kiln::llm::Tokenizer::Create(std::move(spec).value());
  if (!tok.ok()) return Fail(tok.status().ToString());

  std::vector<std::vector<int32_t>> all_ids;
  size_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& text : inputs) {
    auto ids = (*tok)->Encode(text, add_special, parse_special);
    if (!ids.ok()) return Fail(ids.status().ToString());
    all_ids.push_back(std::move(ids).value());
    bytes += text.size();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::string out = "{\"vocab_size\": " + std::to_string((*tok)->vocab_size()) +
                    ", \"encode_seconds\": " + std::to_string(seconds) +
                    ", \"bytes\": " + std::to_string(bytes) + ", \"results\": [";
  for (size_t i = 0; i < all_ids.size(); ++i) {
    const std::vector<int32_t>& ids = all_ids[i];
    auto decoded = (*tok)->Decode(ids, /*skip_special=*/false);
    if (!decoded.ok()) return Fail(decoded.status().ToString());
    kiln::llm::IncrementalDetokenizer detok(**tok, /*skip_special=*/false,
                                            (*tok)->strips_leading_space());
    std::string stream;
    for (const int32_t id : ids) stream += detok.Push(id);
    stream += detok.Flush();
    if (i > 0) out += ", ";
    out += "{\"ids\": [";
    for (size_t k = 0; k < ids.size(); ++k) {
      if (k > 0) out += ",";
      out += std::to_string(ids[k]);
    }
    out += "], \"decoded\": ";
    AppendJsonString(*decoded, &out);
    out += ", \"stream\": ";
    AppendJsonString(stream, &out);
    out += "}";
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
