// SPDX-License-Identifier: Apache-2.0
#include "llm/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "base/spin_team.h"
#include "base/status.h"
#include "kernels/cpu/parallel.h"
#include "llm/attention.h"
#include "llm/ggml_quants.h"
#include "llm/llm_ops.h"

namespace kiln::llm {

namespace {

using Clock = std::chrono::steady_clock;

// Adds the time since `start` to `*acc` (microseconds) and restarts `start`, when on.
void Lap(bool on, Clock::time_point* start, double* acc) {
  if (!on) return;
  const Clock::time_point now = Clock::now();
  *acc += std::chrono::duration<double, std::micro>(now - *start).count();
  *start = now;
}

// y[t, :] += x[t, :] over [T, n] rows.
void AddRows(float* y, const float* x, int64_t count) {
  cpu::ParallelFor(count, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] += x[i];
  });
}

// x[t, :] += bias over T rows of n.
void AddBias(float* x, const float* bias, int64_t rows, int64_t n) {
  for (int64_t t = 0; t < rows; ++t) {
    float* r = x + t * n;
    for (int64_t i = 0; i < n; ++i) r[i] += bias[i];
  }
}

}  // namespace

Engine::Engine(const Model& model, std::unique_ptr<KvCache> cache, int64_t context_length)
    : model_(model), cache_(std::move(cache)), context_length_(context_length) {}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Create(const Model& model, const EngineOptions& options) {
  const ModelConfig& c = model.config();
  int64_t context = options.context_length > 0 ? options.context_length : c.context_length;
  if (context > c.context_length) {
    return Status::InvalidArgument("context length " + std::to_string(context) +
                                   " is longer than the model allows (" +
                                   std::to_string(c.context_length) + ")");
  }
  KvCacheConfig kv;
  kv.n_layers = static_cast<int>(c.n_layers);
  kv.n_kv_heads = static_cast<int>(c.n_kv_heads);
  kv.head_dim = static_cast<int>(c.head_dim);
  kv.block_size = options.block_size;
  kv.dtype = options.kv_dtype;
  kv.budget_bytes = options.kv_budget_bytes;
  kv.prefix_caching = options.prefix_caching;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, KvCache::Create(kv));
  return std::unique_ptr<Engine>(new Engine(model, std::move(cache), context));
}

void Engine::Reserve(int64_t tokens) {
  if (tokens <= capacity_) return;
  const ModelConfig& c = model_.config();
  const auto n = static_cast<size_t>(tokens);
  x_.resize(n * static_cast<size_t>(c.hidden));
  xn_.resize(n * static_cast<size_t>(c.hidden));
  tmp_.resize(n * static_cast<size_t>(c.hidden));
  q_.resize(n * static_cast<size_t>(c.n_heads * c.head_dim));
  attn_.resize(n * static_cast<size_t>(c.n_heads * c.head_dim));
  k_.resize(n * static_cast<size_t>(c.n_kv_heads * c.head_dim));
  v_.resize(n * static_cast<size_t>(c.n_kv_heads * c.head_dim));
  gate_.resize(n * static_cast<size_t>(c.ffn));
  up_.resize(n * static_cast<size_t>(c.ffn));
  positions_.resize(n);
  capacity_ = tokens;
}

Status Engine::Forward(std::span<const StepSequence> step, std::span<const BlockCopy> copies,
                       float* logits) {
  const ModelConfig& c = model_.config();
  const int block_size = cache_->blocks().block_size();
  // Validate everything before touching the cache.
  int64_t total = 0;
  int64_t total_logits = 0;
  for (size_t s = 0; s < step.size(); ++s) {
    const StepSequence& q = step[s];
    const int64_t n = static_cast<int64_t>(q.tokens.size());
    const std::string which = "step sequence " + std::to_string(s);
    if (q.kv == nullptr || n == 0) {
      return Status::InvalidArgument(which + " has no tokens or no block table");
    }
    if (q.pos0 < 0 || q.pos0 + n > context_length_) {
      return Status::OutOfRange(which + " reaches position " + std::to_string(q.pos0 + n) +
                                ", past the context length " + std::to_string(context_length_));
    }
    const int64_t blocks_needed = (q.pos0 + n + block_size - 1) / block_size;
    if (static_cast<int64_t>(q.kv->blocks.size()) < blocks_needed) {
      return Status::FailedPrecondition(
          which + " has " + std::to_string(q.kv->blocks.size()) + " KV blocks; positions up to " +
          std::to_string(q.pos0 + n) + " need " + std::to_string(blocks_needed));
    }
    for (int32_t id : q.tokens) {
      if (id < 0 || id >= c.vocab) {
        return Status::InvalidArgument(which + " has token " + std::to_string(id) +
                                       " outside the vocabulary of " + std::to_string(c.vocab));
      }
    }
    if (q.num_logits < 0 || q.num_logits > n) {
      return Status::InvalidArgument(which + " asks for " + std::to_string(q.num_logits) +
                                     " logits of " + std::to_string(n) + " tokens");
    }
    total += n;
    total_logits += q.num_logits;
  }
  if (total == 0) return Status::InvalidArgument("empty step");
  Reserve(total);
  // The step's parallel loops run on the engine's team, as many threads as the caller's OpenMP
  // setting gives (none inside another parallel region).
  const int threads = cpu::ParallelThreads();
  if (threads <= 1) {
    team_.reset();
  } else if (team_ == nullptr || team_threads_ != threads) {
    team_.reset();  // the old team's threads end before the new one's start
    team_ = std::make_unique<SpinTeam>(threads);
    team_threads_ = threads;
  }
  const SpinTeamScope team_scope(team_.get());
  profile_ = EngineProfile{};
  const Clock::time_point step_start = Clock::now();
  Clock::time_point t0 = step_start;
  const bool prof = profiling_;

  const int64_t hidden = c.hidden;
  const int64_t q_width = c.n_heads * c.head_dim;
  const int64_t kv_width = c.n_kv_heads * c.head_dim;
  float* x = x_.data();
  float* xn = xn_.data();

  // Embedding rows and positions, in step order.
  std::vector<AttentionSeq> attn_seqs(step.size());
  {
    int64_t row = 0;
    for (size_t s = 0; s < step.size(); ++s) {
      const StepSequence& q = step[s];
      const int64_t n = static_cast<int64_t>(q.tokens.size());
      for (int64_t i = 0; i < n; ++i) {
        positions_[static_cast<size_t>(row + i)] = static_cast<int32_t>(q.pos0 + i);
      }
      attn_seqs[s] = AttentionSeq{std::span<const BlockId>(q.kv->blocks), q.pos0, n, row};
      row += n;
    }
    // Embedding rows (a row per token; Model::Load accepted the type, so this cannot fail).
    const WeightMatrix& e = model_.token_embedding();
    int64_t r = 0;
    for (const StepSequence& q : step) {
      for (int32_t id : q.tokens) {
        KILN_RETURN_IF_ERROR(DequantizeRow(e.type, e.data + static_cast<size_t>(id) * e.row_bytes,
                                           x + r * hidden, hidden));
        ++r;
      }
    }
  }
  Lap(prof, &t0, &profile_.embed_us);
  for (const BlockCopy& cp : copies) cache_->CopyBlock(cp.src, cp.dst);

  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const bool neox = c.rope_order == RopeOrder::kNeox;
  const float* freq_factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
  for (size_t l = 0; l < model_.layers().size(); ++l) {
    const LayerWeights& w = model_.layers()[l];
    const int layer = static_cast<int>(l);
    // Attention block.
    RmsNorm(x, w.attn_norm, c.rms_eps, hidden, total, xn);
    Lap(prof, &t0, &profile_.norm_us);
    {
      const MatMulOutput qkv[] = {
          {&w.wq, q_.data(), q_width}, {&w.wk, k_.data(), kv_width}, {&w.wv, v_.data(), kv_width}};
      MatMulShared(qkv, xn, hidden, total);
    }
    if (c.qkv_bias) {
      AddBias(q_.data(), w.bq, total, q_width);
      AddBias(k_.data(), w.bk, total, kv_width);
      AddBias(v_.data(), w.bv, total, kv_width);
    }
    Lap(prof, &t0, &profile_.qkv_us);
    if (c.qk_norm) {
      RmsNorm(q_.data(), w.q_norm, c.rms_eps, c.head_dim, total * c.n_heads, q_.data());
      RmsNorm(k_.data(), w.k_norm, c.rms_eps, c.head_dim, total * c.n_kv_heads, k_.data());
      Lap(prof, &t0, &profile_.norm_us);
    }
    RopeGgml(q_.data(), positions_.data(), total, static_cast<int>(c.n_heads),
             static_cast<int>(c.head_dim), static_cast<int>(c.n_rot), c.rope_theta, 1.0f,
             freq_factors, neox);
    RopeGgml(k_.data(), positions_.data(), total, static_cast<int>(c.n_kv_heads),
             static_cast<int>(c.head_dim), static_cast<int>(c.n_rot), c.rope_theta, 1.0f,
             freq_factors, neox);
    Lap(prof, &t0, &profile_.rope_us);
    for (const AttentionSeq& a : attn_seqs) {
      cache_->WriteRows(layer, a.blocks, a.pos0, a.n_q, k_.data() + a.row0 * kv_width, kv_width,
                        v_.data() + a.row0 * kv_width, kv_width);
    }
    Lap(prof, &t0, &profile_.kv_write_us);
    PagedAttention(*cache_, layer, attn_seqs, static_cast<int>(c.n_heads), scale, q_.data(),
                   q_width, attn_.data(), q_width);
    Lap(prof, &t0, &profile_.attention_us);
    MatMul(w.wo, attn_.data(), q_width, total, tmp_.data(), hidden);
    AddRows(x, tmp_.data(), total * hidden);
    Lap(prof, &t0, &profile_.attn_out_us);
    // Feed-forward block.
    RmsNorm(x, w.ffn_norm, c.rms_eps, hidden, total, xn);
    Lap(prof, &t0, &profile_.norm_us);
    {
      const MatMulOutput gate_up[] = {{&w.w_gate, gate_.data(), c.ffn},
                                      {&w.w_up, up_.data(), c.ffn}};
      MatMulShared(gate_up, xn, hidden, total);
    }
    Lap(prof, &t0, &profile_.ffn_up_us);
    SwiGlu(gate_.data(), up_.data(), gate_.data(), c.ffn, total);
    Lap(prof, &t0, &profile_.ffn_act_us);
    MatMul(w.w_down, gate_.data(), c.ffn, total, tmp_.data(), hidden);
    AddRows(x, tmp_.data(), total * hidden);
    Lap(prof, &t0, &profile_.ffn_down_us);
  }

  // The rows that want logits, gathered, normed and projected.
  if (total_logits > 0) {
    int64_t out_row = 0;
    for (const AttentionSeq& a : attn_seqs) {
      const int64_t want = step[static_cast<size_t>(&a - attn_seqs.data())].num_logits;
      for (int64_t i = a.n_q - want; i < a.n_q; ++i) {
        std::copy_n(x + (a.row0 + i) * hidden, hidden, xn + out_row * hidden);
        ++out_row;
      }
    }
    RmsNorm(xn, model_.output_norm(), c.rms_eps, hidden, total_logits, xn);
    MatMul(model_.output(), xn, hidden, total_logits, logits, c.vocab);
  }
  Lap(prof, &t0, &profile_.logits_us);
  if (prof) {
    profile_.total_us =
        std::chrono::duration<double, std::micro>(Clock::now() - step_start).count();
  }
  return Status::OK();
}

}  // namespace kiln::llm
