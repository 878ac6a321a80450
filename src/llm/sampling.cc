// SPDX-License-Identifier: Apache-2.0
#include "llm/sampling.h"

#include <algorithm>
#include <cmath>

namespace kiln::llm {

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_value = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_value) {
      best_value = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (!(params_.temperature > 0.0f)) return Argmax(logits);
  candidates_.clear();
  candidates_.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isnan(logits[i])) candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
  }
  if (candidates_.empty()) return 0;
  // Highest logit first; ties by id so the order is the same everywhere.
  auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(keep),
                      candidates_.end(), better);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), better);
  }
  // Softmax at the temperature, in double.
  std::vector<double> p(candidates_.size());
  const double top = candidates_[0].first;
  double sum = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    p[i] = std::exp((static_cast<double>(candidates_[i].first) - top) / params_.temperature);
    sum += p[i];
  }
  // Nucleus: the shortest prefix whose mass reaches top_p.
  size_t n = candidates_.size();
  if (params_.top_p < 1.0f) {
    double acc = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      acc += p[i] / sum;
      if (acc >= params_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  double mass = 0;
  for (size_t i = 0; i < n; ++i) mass += p[i];
  // 53 random bits as a double in [0, 1) (std::uniform_real_distribution differs between
  // standard libraries; this does not).
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * mass;
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += p[i];
    if (u < acc) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

}  // namespace kiln::llm
