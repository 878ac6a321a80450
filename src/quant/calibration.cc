// SPDX-License-Identifier: Apache-2.0
// Activation histograms and calibration methods (calibration.h).

#include "quant/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/session.h"

namespace kiln::quant {

std::string_view CalibrationMethodName(CalibrationMethod m) {
  switch (m) {
    case CalibrationMethod::kMinMax:
      return "minmax";
    case CalibrationMethod::kPercentile:
      return "percentile";
    case CalibrationMethod::kEntropy:
      return "entropy";
  }
  return "?";
}

Result<CalibrationMethod> ParseCalibrationMethod(std::string_view name) {
  if (name == "minmax") return CalibrationMethod::kMinMax;
  if (name == "percentile") return CalibrationMethod::kPercentile;
  if (name == "entropy") return CalibrationMethod::kEntropy;
  return Status::InvalidArgument(fmt::format(
      "unknown calibration method '{}' (expected minmax, percentile or entropy)", name));
}

void Histogram::Grow(double needed) {
  // Double R until it covers `needed`; each doubling merges adjacent pairs into the middle half.
  while (range_ < needed) {
    std::vector<int64_t> merged(kBins, 0);
    constexpr size_t kHalf = kBins / 2;
    for (size_t j = 0; j < kHalf; ++j) {
      merged[kHalf / 2 + j] = bins_[2 * j] + bins_[2 * j + 1];
    }
    bins_ = std::move(merged);
    range_ *= 2;
  }
}

void Histogram::Add(const float* values, int64_t n) {
  double max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) continue;
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
  }
  if (max_abs > 0) {
    if (range_ == 0) {
      range_ = max_abs;
      // Exact zeros seen before any nonzero value go to the bin that holds 0.
      bins_[kBins / 2] += zeros_before_range_;
      zeros_before_range_ = 0;
    } else if (max_abs > range_) {
      Grow(max_abs);
    }
  }
  const double inv_width = range_ > 0 ? kBins / (2 * range_) : 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) {
      ++non_finite_;
      continue;
    }
    if (count_ == 0) {
      min_ = max_ = v;
    } else {
      min_ = std::min(min_, v);
      max_ = std::max(max_, v);
    }
    ++count_;
    if (range_ == 0) {
      ++zeros_before_range_;
      continue;
    }
    const int64_t b =
        static_cast<int64_t>(std::floor((static_cast<double>(v) + range_) * inv_width));
    ++bins_[static_cast<size_t>(std::clamp<int64_t>(b, 0, kBins - 1))];
  }
}

namespace {

TensorRange Percentile(const Histogram& h, double percentile) {
  const std::vector<int64_t>& bins = h.bins();
  const double tail = std::max(0.0, (100.0 - percentile) / 100.0) * static_cast<double>(h.count());
  const double width = 2 * h.half_range() / Histogram::kBins;
  int lo_bin = 0;
  double acc = 0;
  for (int b = 0; b < Histogram::kBins; ++b) {
    acc += static_cast<double>(bins[static_cast<size_t>(b)]);
    if (acc > tail) {
      lo_bin = b;
      break;
    }
  }
  int hi_bin = Histogram::kBins - 1;
  acc = 0;
  for (int b = Histogram::kBins - 1; b >= 0; --b) {
    acc += static_cast<double>(bins[static_cast<size_t>(b)]);
    if (acc > tail) {
      hi_bin = b;
      break;
    }
  }
  TensorRange r;
  r.min = std::max(h.min(), static_cast<float>(-h.half_range() + lo_bin * width));
  r.max = std::min(h.max(), static_cast<float>(-h.half_range() + (hi_bin + 1) * width));
  if (r.min > r.max) r.min = r.max;
  return r;
}

// TensorRT's entropy calibration over the histogram of |x|; returns the threshold.
double EntropyThreshold(const Histogram& h) {
  constexpr int kAbsBins = Histogram::kBins / 2;
  constexpr int kLevels = 128;
  std::vector<double> hist(kAbsBins, 0.0);
  const std::vector<int64_t>& bins = h.bins();
  constexpr size_t kAbs = kAbsBins;
  for (size_t j = 0; j < kAbs; ++j) {
    hist[j] = static_cast<double>(bins[kAbs + j] + bins[kAbs - 1 - j]);
  }
  const double width = h.half_range() / kAbsBins;
  std::vector<double> suffix(kAbsBins + 1, 0.0);
  for (int j = kAbsBins - 1; j >= 0; --j) {
    const size_t k = static_cast<size_t>(j);
    suffix[k] = suffix[k + 1] + hist[k];
  }
  double best_kl = std::numeric_limits<double>::infinity();
  int best_i = kAbsBins;
  std::vector<double> p, q;
  for (int i = kLevels; i <= kAbsBins; ++i) {
    p.assign(hist.begin(), hist.begin() + i);
    p[static_cast<size_t>(i - 1)] += suffix[static_cast<size_t>(i)];
    q.assign(static_cast<size_t>(i), 0.0);
    const int merged = i / kLevels;
    for (int l = 0; l < kLevels; ++l) {
      const int start = l * merged;
      const int stop = l == kLevels - 1 ? i : start + merged;
      double total = 0;
      int nonzero = 0;
      for (int k = start; k < stop; ++k) {
        total += hist[static_cast<size_t>(k)];
        nonzero += hist[static_cast<size_t>(k)] != 0 ? 1 : 0;
      }
      if (nonzero == 0) continue;
      for (int k = start; k < stop; ++k) {
        if (hist[static_cast<size_t>(k)] != 0) q[static_cast<size_t>(k)] = total / nonzero;
      }
    }
    double p_sum = 0, q_sum = 0;
    for (int k = 0; k < i; ++k) {
      p_sum += p[static_cast<size_t>(k)];
      q_sum += q[static_cast<size_t>(k)];
    }
    if (p_sum == 0) continue;
    double kl = 0;
    for (int k = 0; k < i; ++k) {
      const double pk = p[static_cast<size_t>(k)] / p_sum;
      if (pk == 0) continue;
      // A bin Q leaves empty (only the last one, which took the outliers) costs as if Q held a
      // tiny mass there.
      const double qk = q_sum > 0 ? std::max(q[static_cast<size_t>(k)] / q_sum, 1e-12) : 1e-12;
      kl += pk * std::log(pk / qk);
    }
    if (kl < best_kl) {
      best_kl = kl;
      best_i = i;
    }
  }
  return best_i * width;
}

}  // namespace

TensorRange ComputeRange(const Histogram& h, CalibrationMethod method, double percentile) {
  if (h.count() == 0) return {};
  if (h.half_range() == 0) return {h.min(), h.max()};  // all zeros
  switch (method) {
    case CalibrationMethod::kMinMax:
      return {h.min(), h.max()};
    case CalibrationMethod::kPercentile:
      return Percentile(h, percentile);
    case CalibrationMethod::kEntropy: {
      const float t = static_cast<float>(EntropyThreshold(h));
      TensorRange r{std::max(h.min(), -t), std::min(h.max(), t)};
      if (r.min > r.max) r.min = r.max;
      return r;
    }
  }
  return {h.min(), h.max()};
}

Result<std::map<int, Histogram>> CollectHistograms(
    const Graph& graph, const std::vector<int>& values, const Dataset& data,
    const RunOptions& options, const std::function<void(int64_t, int64_t)>& progress) {
  auto observed = std::make_shared<Graph>(graph);
  // Position of each observed value among the outputs of the copy.
  std::vector<size_t> slot(values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    auto it = std::find(observed->outputs.begin(), observed->outputs.end(), values[k]);
    if (it == observed->outputs.end()) {
      observed->outputs.push_back(values[k]);
      slot[k] = observed->outputs.size() - 1;
    } else {
      slot[k] = static_cast<size_t>(it - observed->outputs.begin());
    }
  }
  SessionOptions session_options;
  session_options.intra_op_threads = options.threads;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                        Session::Create(observed, session_options));
  std::map<int, Histogram> hists;
  for (int v : values) hists[v];
  const int64_t total =
      options.max_samples > 0 ? std::min(options.max_samples, data.num_samples) : data.num_samples;
  Status st =
      ForEachBatch(*session, data, options,
                   [&](std::vector<OwnedTensor>& outs, int64_t begin, int64_t count) -> Status {
                     for (size_t k = 0; k < values.size(); ++k) {
                       const OwnedTensor& t = outs[slot[k]];
                       if (t.dtype() != DataType::kFloat32) {
                         return Status::InvalidArgument(
                             fmt::format("activation '{}' is {}, not FP32",
                                         graph.value(values[k]).name, DataTypeName(t.dtype())));
                       }
                       hists[values[k]].Add(t.data<const float>(), t.num_elements());
                     }
                     if (progress) progress(begin + count, total);
                     return Status::OK();
                   });
  KILN_RETURN_IF_ERROR(st);
  return hists;
}

}  // namespace kiln::quant
