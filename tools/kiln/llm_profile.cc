// SPDX-License-Identifier: Apache-2.0
// `kiln profile MODEL.gguf` (or a Hugging Face checkpoint directory): the speed of kiln's decoder
// engine the way llama.cpp's llama-bench and llama-batched-bench measure llama.cpp's.
//
//   kiln profile model.gguf --threads 2                      # pp512, tg128, batched decode x16
//   kiln profile model.gguf --prompt-tokens 128 --gen-tokens 32 --parallel 4 --json
//
// Three measurements, each on fresh sequences of seeded random token ids (what llama-bench
// feeds; the ids never matter for the cost):
//   - prompt processing: one sequence's --prompt-tokens tokens in steps of --batch-size tokens,
//     tokens/s = prompt tokens / time;
//   - token generation: one sequence, --gen-tokens decode steps of one token from an empty
//     context (llama-bench's tg), tokens/s = steps / time;
//   - batched decode: --parallel sequences, each with a --parallel-prompt-token prompt, then
//     --gen-tokens steps each decoding one token of every sequence in one forward call,
//     tokens/s = parallel x steps / time.
// After --warmup untimed decode steps, each measurement is repeated --repetitions times and the
// median is reported, with the per-kernel time table of one prompt step and of the decode steps
// (EngineProfile), the weights' bytes, the KV cache's, and the process's resident memory.

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "llm/engine.h"
#include "llm/model.h"
#include "tools/kiln/commands.h"

namespace kiln::tools {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t StatusBytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10) * 1024;
    }
  }
  return 0;
}

struct Row {
  std::string name;
  double tokens_per_s = 0;
  llm::EngineProfile profile;  // per step (prompt) or summed over steps (decode)
  int64_t steps = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void Accumulate(llm::EngineProfile* acc, const llm::EngineProfile& p) {
  acc->embed_us += p.embed_us;
  acc->norm_us += p.norm_us;
  acc->qkv_us += p.qkv_us;
  acc->rope_us += p.rope_us;
  acc->kv_write_us += p.kv_write_us;
  acc->attention_us += p.attention_us;
  acc->attn_out_us += p.attn_out_us;
  acc->ffn_up_us += p.ffn_up_us;
  acc->ffn_act_us += p.ffn_act_us;
  acc->ffn_down_us += p.ffn_down_us;
  acc->logits_us += p.logits_us;
  acc->total_us += p.total_us;
}

class Runner {
 public:
  Runner(llm::Engine& engine, uint64_t seed) : engine_(engine), rng_(seed) {
    logits_.resize(static_cast<size_t>(engine.model().config().vocab) * 64);
  }

  std::vector<int32_t> RandomTokens(int64_t n) {
    const int64_t vocab = engine_.model().config().vocab;
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& id : t) id = static_cast<int32_t>(rng_() % static_cast<uint64_t>(vocab));
    return t;
  }

  // Runs tokens[s] for each sequence in one step (positions from their computed length).
  Status Step(std::vector<llm::SequenceBlocks>& seqs, const std::vector<std::vector<int32_t>>& all,
              const std::vector<int64_t>& n_new, llm::EngineProfile* prof) {
    llm::BlockManager& blocks = engine_.kv_cache().blocks();
    copies_.clear();
    std::vector<llm::StepSequence> step;
    int64_t logit_rows = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (n_new[s] == 0) continue;
      const int64_t pos0 = seqs[s].num_computed;
      KILN_RETURN_IF_ERROR(blocks.Reserve(&seqs[s], pos0 + n_new[s], &copies_));
      step.push_back({&seqs[s], pos0,
                      std::span<const int32_t>(all[s]).subspan(static_cast<size_t>(pos0),
                                                               static_cast<size_t>(n_new[s])),
                      1});
      ++logit_rows;
    }
    const size_t need = static_cast<size_t>(logit_rows * engine_.model().config().vocab);
    if (logits_.size() < need) logits_.resize(need);
    engine_.set_profiling(prof != nullptr);
    KILN_RETURN_IF_ERROR(engine_.Forward(step, copies_, logits_.data()));
    if (prof != nullptr) Accumulate(prof, engine_.profile());
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (n_new[s] > 0) blocks.Commit(&seqs[s], all[s], seqs[s].num_computed + n_new[s]);
    }
    return Status::OK();
  }

  void FreeAll(std::vector<llm::SequenceBlocks>& seqs) {
    for (llm::SequenceBlocks& s : seqs) engine_.kv_cache().blocks().Free(&s);
  }

 private:
  llm::Engine& engine_;
  std::mt19937_64 rng_;
  std::vector<float> logits_;
  std::vector<llm::BlockCopy> copies_;
};

}  // namespace

Status ProfileLlm(const LlmProfileOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llm::Model> model, llm::Model::Load(o.model));
  const llm::ModelConfig& c = model->config();
  llm::EngineOptions eo;
  eo.prefix_caching = false;  // random prompts; measure the compute, not the cache
  const int64_t per_seq = std::max<int64_t>(o.prompt_tokens, o.gen_tokens + 1) + 16;
  const int64_t par_seq = o.parallel_prompt_tokens + o.gen_tokens + 16;
  eo.context_length = std::min<int64_t>(c.context_length, std::max(per_seq, par_seq));
  const int64_t blocks = (per_seq + 15) / 16 + o.parallel * ((par_seq + 15) / 16) + 4;
  const int64_t token_bytes = 2 * c.n_layers * c.n_kv_heads * c.head_dim * 2;
  eo.kv_budget_bytes = blocks * 16 * token_bytes;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llm::Engine> engine, llm::Engine::Create(*model, eo));
  Runner run(*engine, 1234);

  // Warm-up: a short prompt and a few decode steps (page in the weights, grow the scratch).
  {
    std::vector<llm::SequenceBlocks> seqs(1);
    std::vector<std::vector<int32_t>> all{
        run.RandomTokens(std::min<int64_t>(o.prompt_tokens, 64) + o.warmup)};
    KILN_RETURN_IF_ERROR(
        run.Step(seqs, all, {static_cast<int64_t>(all[0].size()) - o.warmup}, nullptr));
    for (int i = 0; i < o.warmup; ++i) KILN_RETURN_IF_ERROR(run.Step(seqs, all, {1}, nullptr));
    run.FreeAll(seqs);
  }

  std::vector<Row> rows;
  // Prompt processing.
  {
    Row row;
    row.name = fmt::format("pp{}", o.prompt_tokens);
    std::vector<double> rates;
    for (int r = 0; r < o.repetitions; ++r) {
      std::vector<llm::SequenceBlocks> seqs(1);
      std::vector<std::vector<int32_t>> all{run.RandomTokens(o.prompt_tokens)};
      llm::EngineProfile prof;
      const Clock::time_point t0 = Clock::now();
      for (int64_t p = 0; p < o.prompt_tokens; p += o.batch_size) {
        const int64_t n = std::min<int64_t>(o.batch_size, o.prompt_tokens - p);
        KILN_RETURN_IF_ERROR(run.Step(seqs, all, {n}, r == 0 ? &prof : nullptr));
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      rates.push_back(static_cast<double>(o.prompt_tokens) / s);
      if (r == 0) row.profile = prof;
      run.FreeAll(seqs);
    }
    row.tokens_per_s = Median(rates);
    row.steps = (o.prompt_tokens + o.batch_size - 1) / o.batch_size;
    rows.push_back(row);
  }
  // Token generation, one sequence, and batched decode.
  std::vector<int64_t> widths = {1};
  if (o.parallel > 1) widths.push_back(o.parallel);
  for (int64_t width : widths) {
    Row row;
    row.name = width == 1 ? fmt::format("tg{}", o.gen_tokens)
                          : fmt::format("tg{} x{} sequences", o.gen_tokens, width);
    std::vector<double> rates;
    for (int r = 0; r < o.repetitions; ++r) {
      std::vector<llm::SequenceBlocks> seqs(static_cast<size_t>(width));
      std::vector<std::vector<int32_t>> all;
      const int64_t prompt = width == 1 ? 1 : o.parallel_prompt_tokens;
      for (int64_t s = 0; s < width; ++s) all.push_back(run.RandomTokens(prompt + o.gen_tokens));
      // Prompts (not timed): the batched rows start from --parallel-prompt-tokens of context.
      for (int64_t s = 0; s < width; ++s) {
        std::vector<int64_t> n(static_cast<size_t>(width), 0);
        n[static_cast<size_t>(s)] = prompt;
        KILN_RETURN_IF_ERROR(run.Step(seqs, all, n, nullptr));
      }
      llm::EngineProfile prof;
      const std::vector<int64_t> ones(static_cast<size_t>(width), 1);
      const Clock::time_point t0 = Clock::now();
      for (int64_t i = 0; i < o.gen_tokens; ++i) {
        KILN_RETURN_IF_ERROR(run.Step(seqs, all, ones, r == 0 ? &prof : nullptr));
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      rates.push_back(static_cast<double>(width * o.gen_tokens) / s);
      if (r == 0) row.profile = prof;
      run.FreeAll(seqs);
    }
    row.tokens_per_s = Median(rates);
    row.steps = o.gen_tokens;
    rows.push_back(row);
  }

  const uint64_t rss = StatusBytes("VmRSS");
  const uint64_t hwm = StatusBytes("VmHWM");
  const double kv_mib = static_cast<double>(engine->kv_cache().bytes()) / (1 << 20);
  // The token embedding is read a row per token, unless it is also the output matrix.
  const uint64_t unread_embedding_bytes =
      c.tied_embeddings ? 0
                        : static_cast<uint64_t>(model->token_embedding().rows) *
                              model->token_embedding().row_bytes;
  if (o.json) {
    std::string out = fmt::format(
        "{{\"model\":\"{}\",\"architecture\":\"{}\",\"type\":\"{}\",\"file_bytes\":{},"
        "\"weight_bytes\":{},\"embedding_bytes\":{},\"kv_bytes\":{},\"rss_bytes\":{},"
        "\"peak_rss_bytes\":{},\"threads\":{},\"rows\":[",
        c.name, c.architecture, c.file_type, model->file_bytes(), model->weight_bytes(),
        unread_embedding_bytes, engine->kv_cache().bytes(), rss, hwm, omp_get_max_threads());
    for (size_t i = 0; i < rows.size(); ++i) {
      const llm::EngineProfile& p = rows[i].profile;
      out += fmt::format(
          "{}{{\"test\":\"{}\",\"tokens_per_s\":{:.3f},\"steps\":{},\"kernels_us\":{{"
          "\"embed\":{:.1f},\"norm\":{:.1f},\"qkv\":{:.1f},\"rope\":{:.1f},\"kv_write\":{:.1f},"
          "\"attention\":{:.1f},\"attn_out\":{:.1f},\"ffn_up\":{:.1f},\"ffn_act\":{:.1f},"
          "\"ffn_down\":{:.1f},\"logits\":{:.1f},\"total\":{:.1f}}}}}",
          i ? "," : "", rows[i].name, rows[i].tokens_per_s, rows[i].steps, p.embed_us, p.norm_us,
          p.qkv_us, p.rope_us, p.kv_write_us, p.attention_us, p.attn_out_us, p.ffn_up_us,
          p.ffn_act_us, p.ffn_down_us, p.logits_us, p.total_us);
    }
    out += "]}\n";
    std::fputs(out.c_str(), stdout);
    return Status::OK();
  }
  std::printf(
      "%s: %s, %lld layers, hidden %lld, %s weights (%.0f MiB), KV cache %.0f MiB, %d "
      "threads\n\n",
      c.name.c_str(), c.architecture.c_str(), static_cast<long long>(c.n_layers),
      static_cast<long long>(c.hidden), c.file_type.c_str(),
      static_cast<double>(model->weight_bytes()) / (1 << 20), kv_mib, omp_get_max_threads());
  std::printf("%-24s %12s\n", "test", "tokens/s");
  for (const Row& r : rows) std::printf("%-24s %12.2f\n", r.name.c_str(), r.tokens_per_s);
  std::printf("\nper-kernel time (ms, per step: the first repetition)\n");
  std::printf("%-12s", "kernel");
  for (const Row& r : rows) std::printf(" %22s", r.name.c_str());
  std::printf("\n");
  auto line = [&](const char* name, double llm::EngineProfile::*field) {
    std::printf("%-12s", name);
    for (const Row& r : rows) {
      const double total = r.profile.total_us;
      const double v = r.profile.*field;
      std::printf(" %14.3f (%4.1f%%)",
                  v / 1000.0 / static_cast<double>(std::max<int64_t>(r.steps, 1)),
                  total > 0 ? 100.0 * v / total : 0.0);
    }
    std::printf("\n");
  };
  line("embed", &llm::EngineProfile::embed_us);
  line("norm", &llm::EngineProfile::norm_us);
  line("qkv", &llm::EngineProfile::qkv_us);
  line("rope", &llm::EngineProfile::rope_us);
  line("kv write", &llm::EngineProfile::kv_write_us);
  line("attention", &llm::EngineProfile::attention_us);
  line("attn out", &llm::EngineProfile::attn_out_us);
  line("ffn up", &llm::EngineProfile::ffn_up_us);
  line("ffn act", &llm::EngineProfile::ffn_act_us);
  line("ffn down", &llm::EngineProfile::ffn_down_us);
  line("logits", &llm::EngineProfile::logits_us);
  line("total", &llm::EngineProfile::total_us);
  std::printf("\nmemory: file %.0f MiB, KV cache %.0f MiB, resident %.0f MiB (peak %.0f MiB)\n",
              static_cast<double>(model->file_bytes()) / (1 << 20), kv_mib,
              static_cast<double>(rss) / (1 << 20), static_cast<double>(hwm) / (1 << 20));
  return Status::OK();
}

}  // namespace kiln::tools
