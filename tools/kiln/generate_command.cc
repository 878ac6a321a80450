// SPDX-License-Identifier: Apache-2.0
// `kiln generate`: load a generative model (GGUF file or Hugging Face checkpoint directory) and
// continue a prompt, on kiln's decoder engine (src/llm, docs/llm.md).
//
//   kiln generate model.gguf --prompt "Once upon a time" --max-tokens 64
//   kiln generate model.gguf --messages chat.json --stream --temperature 0.7 --seed 1
//   kiln generate model.gguf --prompt "Hello" --timings       # prompt and generation tokens/s
//   kiln generate model.gguf --tokens 1,450,4996 --logits-out logits.npy   # all rows' logits
//
// --messages reads a JSON list of messages ({"role", "content"} objects, as Hugging Face's
// apply_chat_template takes them) and renders it with the model's chat template (with the
// generation prompt). The prompt is run in chunks of --batch-size tokens
// (the matrix-matrix path), then one token per step (the matrix-vector path) until --max-tokens
// tokens, an end-of-generation token or the context length. With --stream the text is printed as
// it is made, never half a UTF-8 character; otherwise at the end. --timings prints, on stderr,
// prompt tokens/s and generated tokens/s the way llama.cpp's tools do; --print-ids prints the
// prompt's and the generated token ids as one JSON line on stdout instead of the text.
//
// Exit status: 0 on success; 1 with a one-line reason on stderr on any error.

#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llm/chat_template.h"
#include "llm/engine.h"
#include "llm/model.h"
#include "llm/prompt.h"
#include "llm/sampling.h"
#include "llm/tokenizer.h"
#include "tensor/npy.h"
#include "tools/kiln/commands.h"

namespace kiln::tools {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string messages;
  std::string tokens;  // comma-separated ids instead of a prompt
  int max_tokens = 128;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int threads = 0;
  int batch_size = 512;
  int64_t ctx_size = 0;
  std::string kv_dtype = "f16";
  int64_t kv_budget_mib = 0;
  bool stream = false;
  bool timings = false;
  bool print_ids = false;
  bool ignore_eos = false;
  std::string logits_out;
};

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int Fail(const Status& s) {
  std::fprintf(stderr, "kiln generate: %s\n", s.message().c_str());
  return 1;
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::vector<int32_t>> ParseIds(const std::string& text, int64_t vocab) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v >= vocab) {
      return Status::InvalidArgument("--tokens: '" + item + "' is not a token id below " +
                                     std::to_string(vocab));
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return Status::InvalidArgument("--tokens is empty");
  return ids;
}

Result<llm::KvDtype> ParseKvDtype(const std::string& s) {
  if (s == "f32") return llm::KvDtype::kF32;
  if (s == "f16") return llm::KvDtype::kF16;
  if (s == "bf16") return llm::KvDtype::kBF16;
  return Status::InvalidArgument("--kv-dtype '" + s + "': expected f32, f16 or bf16");
}

// The prompt's token ids: --tokens, or the rendered --messages / --prompt text, tokenized.
Result<std::vector<int32_t>> PromptIds(const GenerateOptions& o, const llm::Model& model) {
  const llm::Tokenizer& tok = model.tokenizer();
  if (!o.tokens.empty()) return ParseIds(o.tokens, model.config().vocab);
  if (!o.messages.empty()) {
    if (model.chat_template().empty()) {
      return Status::InvalidArgument("the model has no chat template; use --prompt");
    }
    // The file is the messages list as Hugging Face's apply_chat_template takes it.
    KILN_ASSIGN_OR_RETURN(std::string messages, ReadText(o.messages));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<llm::ChatTemplate> tmpl,
                          llm::ChatTemplate::Parse(model.chat_template()));
    Result<std::vector<int32_t>> ids =
        llm::ChatPromptIds(model, *tmpl, messages, /*add_generation_prompt=*/true);
    if (!ids.ok()) return ids.status().WithContext("'" + o.messages + "'");
    return ids;
  }
  return tok.Encode(o.prompt, /*add_special=*/true, /*parse_special=*/false);
}

int RunGenerate(const GenerateOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const Clock::time_point load_start = Clock::now();
  Result<std::unique_ptr<llm::Model>> loaded = llm::Model::Load(o.model);
  if (!loaded.ok()) return Fail(loaded.status());
  const llm::Model& model = **loaded;
  const llm::ModelConfig& c = model.config();
  Result<llm::KvDtype> kv_dtype = ParseKvDtype(o.kv_dtype);
  if (!kv_dtype.ok()) return Fail(kv_dtype.status());
  Result<std::vector<int32_t>> prompt = PromptIds(o, model);
  if (!prompt.ok()) return Fail(prompt.status());
  const int64_t n_prompt = static_cast<int64_t>(prompt->size());

  llm::EngineOptions eo;
  eo.kv_dtype = *kv_dtype;
  eo.kv_budget_bytes = o.kv_budget_mib * (int64_t{1} << 20);
  // The context: --ctx-size, else what this run needs (prompt + max tokens) within the model's.
  eo.context_length =
      o.ctx_size > 0 ? o.ctx_size : std::min<int64_t>(c.context_length, n_prompt + o.max_tokens);
  if (eo.kv_budget_bytes == 0) {
    // Enough for this one sequence (plus a block of slack); the default share of memory is for
    // servers holding many sequences.
    const int64_t bytes_per_token =
        2 * c.n_layers * c.n_kv_heads * c.head_dim * (eo.kv_dtype == llm::KvDtype::kF32 ? 4 : 2);
    eo.kv_budget_bytes = (eo.context_length + 2 * eo.block_size) * bytes_per_token;
  }
  if (n_prompt > eo.context_length) {
    return Fail(Status::OutOfRange(
        fmt::format("the prompt has {} tokens; the context is {}", n_prompt, eo.context_length)));
  }
  Result<std::unique_ptr<llm::Engine>> created = llm::Engine::Create(model, eo);
  if (!created.ok()) return Fail(created.status());
  llm::Engine& engine = **created;
  const double load_s = Seconds(load_start, Clock::now());
  if (o.timings) {
    std::fprintf(stderr,
                 "kiln generate: %s (%s, %lld layers, %s weights, %.0f MiB) loaded in %.2f s\n",
                 c.name.c_str(), c.architecture.c_str(), static_cast<long long>(c.n_layers),
                 c.file_type.c_str(), static_cast<double>(model.file_bytes()) / (1 << 20), load_s);
  }

  llm::BlockManager& blocks = engine.kv_cache().blocks();
  llm::SequenceBlocks seq;
  std::vector<llm::BlockCopy> copies;
  std::vector<int32_t> all = *prompt;
  std::vector<float> logits;

  // --logits-out: the logits of every prompt row, then stop.
  if (!o.logits_out.empty()) {
    if (Status s = blocks.Reserve(&seq, n_prompt, &copies); !s.ok()) return Fail(s);
    logits.resize(static_cast<size_t>(n_prompt * c.vocab));
    llm::StepSequence step{&seq, 0, std::span<const int32_t>(all), n_prompt};
    if (Status s = engine.Forward({&step, 1}, copies, logits.data()); !s.ok()) return Fail(s);
    Tensor view(DataType::kFloat32, Shape({n_prompt, c.vocab}), logits.data());
    Result<std::string> npy = WriteNpy(view);
    if (!npy.ok()) return Fail(npy.status());
    std::ofstream out(o.logits_out, std::ios::binary);
    out.write(npy->data(), static_cast<std::streamsize>(npy->size()));
    if (!out) return Fail(Status::Unavailable("cannot write '" + o.logits_out + "'"));
    return 0;
  }

  // Prefill in chunks; the last chunk's last row gives the first token's logits.
  logits.resize(static_cast<size_t>(c.vocab));
  const Clock::time_point prompt_start = Clock::now();
  for (int64_t p = 0; p < n_prompt; p += o.batch_size) {
    const int64_t n = std::min<int64_t>(o.batch_size, n_prompt - p);
    copies.clear();
    if (Status s = blocks.Reserve(&seq, p + n, &copies); !s.ok()) return Fail(s);
    llm::StepSequence step{
        &seq, p,
        std::span<const int32_t>(all).subspan(static_cast<size_t>(p), static_cast<size_t>(n)),
        p + n == n_prompt ? 1 : 0};
    if (Status s = engine.Forward({&step, 1}, copies, logits.data()); !s.ok()) return Fail(s);
    blocks.Commit(&seq, all, p + n);
  }
  const double prompt_s = Seconds(prompt_start, Clock::now());

  llm::SamplingParams sampling;
  sampling.temperature = o.temperature;
  sampling.top_k = o.top_k;
  sampling.top_p = o.top_p;
  sampling.seed = o.seed;
  llm::Sampler sampler(sampling, static_cast<int32_t>(c.vocab));
  sampler.SetPrompt(*prompt);
  llm::IncrementalDetokenizer detok(model.tokenizer());
  std::string text;
  std::vector<int32_t> generated;
  const Clock::time_point gen_start = Clock::now();
  int64_t decode_steps = 0;
  while (static_cast<int64_t>(generated.size()) < o.max_tokens) {
    const int32_t next = sampler.Sample(logits);
    const bool eog = model.tokenizer().IsEog(next);
    if (eog && !o.ignore_eos) break;
    sampler.Accept(next);
    generated.push_back(next);
    all.push_back(next);
    const std::string piece = detok.Push(next);
    if (o.stream && !o.print_ids) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    } else {
      text += piece;
    }
    const int64_t pos = static_cast<int64_t>(all.size()) - 1;
    if (static_cast<int64_t>(generated.size()) == o.max_tokens ||
        pos + 1 > engine.context_length()) {
      break;
    }
    copies.clear();
    if (Status s = blocks.Reserve(&seq, pos + 1, &copies); !s.ok()) return Fail(s);
    llm::StepSequence step{&seq, pos,
                           std::span<const int32_t>(all).subspan(static_cast<size_t>(pos), 1), 1};
    if (Status s = engine.Forward({&step, 1}, copies, logits.data()); !s.ok()) return Fail(s);
    blocks.Commit(&seq, all, pos + 1);
    ++decode_steps;
  }
  const double gen_s = Seconds(gen_start, Clock::now());
  const std::string rest = detok.Flush();
  if (o.print_ids) {
    std::string line = "{\"prompt_tokens\":[";
    for (size_t i = 0; i < prompt->size(); ++i)
      line += (i ? "," : "") + std::to_string((*prompt)[i]);
    line += "],\"tokens\":[";
    for (size_t i = 0; i < generated.size(); ++i)
      line += (i ? "," : "") + std::to_string(generated[i]);
    line += "]}\n";
    std::fputs(line.c_str(), stdout);
  } else if (o.stream) {
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    text += rest;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  }
  if (o.timings) {
    std::fprintf(stderr,
                 "kiln generate: prompt %lld tokens in %.3f s (%.2f tokens/s); generated %lld "
                 "tokens in %.3f s (%.2f tokens/s over %lld decode steps)\n",
                 static_cast<long long>(n_prompt), prompt_s,
                 prompt_s > 0 ? static_cast<double>(n_prompt) / prompt_s : 0.0,
                 static_cast<long long>(generated.size()), gen_s,
                 gen_s > 0 ? static_cast<double>(decode_steps) / gen_s : 0.0,
                 static_cast<long long>(decode_steps));
  }
  blocks.Free(&seq);
  return 0;
}

}  // namespace

CommandMain AddGenerateCommand(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Continue a prompt with a generative model (GGUF file or Hugging Face directory)");
  cmd->add_option("model", o->model, "GGUF file or Hugging Face checkpoint directory")->required();
  auto* prompt = cmd->add_option("--prompt,-p", o->prompt, "Prompt text");
  auto* messages = cmd->add_option("--messages", o->messages,
                                   "JSON file with a list of {role, content} messages, rendered "
                                   "with the model's chat template");
  auto* tokens = cmd->add_option("--tokens", o->tokens, "Prompt as comma-separated token ids");
  prompt->excludes(messages)->excludes(tokens);
  messages->excludes(tokens);
  cmd->add_option("--max-tokens,-n", o->max_tokens, "Tokens to generate at most (default 128)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--temperature", o->temperature, "Sampling temperature; 0 is greedy (default)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", o->top_k, "Sample from the k most likely tokens (0: all)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--top-p", o->top_p, "Nucleus sampling mass (default 1: off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", o->seed, "Sampling seed (default 0)");
  cmd->add_option("--threads,-t", o->threads, "Threads (default: OpenMP's, one per core)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--batch-size,-b", o->batch_size, "Prompt tokens per step (default 512)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ctx-size,-c", o->ctx_size,
                  "Context length (default: prompt + max tokens, at most the model's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV cache type: f16 (default), f32 or bf16");
  cmd->add_option("--kv-budget-mib", o->kv_budget_mib,
                  "KV cache bytes in MiB (default: what the context needs)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_flag("--stream", o->stream, "Print the text as it is generated");
  cmd->add_flag("--timings", o->timings, "Print prompt and generation tokens/s on stderr");
  cmd->add_flag("--print-ids", o->print_ids,
                "Print the prompt and generated token ids as one JSON line instead of text");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-generation tokens");
  cmd->add_option("--logits-out", o->logits_out,
                  "Write the logits of every prompt row to this .npy file and stop");
  return [o]() {
    if (o->prompt.empty() && o->messages.empty() && o->tokens.empty()) {
      std::fprintf(stderr, "kiln generate: give --prompt, --messages or --tokens\n");
      return 2;
    }
    return RunGenerate(*o);
  };
}

}  // namespace kiln::tools
