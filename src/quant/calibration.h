// SPDX-License-Identifier: Apache-2.0
#pragma once
// Calibration: the ranges of activation tensors, observed while the FP32 model runs over
// representative samples, and the methods that turn those observations into a quantization
// range.
//
//   Histogram h;
//   h.Add(values, n);                      // as batches arrive
//   TensorRange r = ComputeRange(h, CalibrationMethod::kEntropy, 99.99);
//
//   KILN_ASSIGN_OR_RETURN(auto hists, CollectHistograms(graph, {value ids}, data, run_options));
//
// NOTE on the histogram: it counts values over the symmetric interval [-R, R] in kBins equal
// bins, R starting at the first batch's max |x|. When a value beyond R arrives, R doubles (as
// often as needed) and adjacent pairs of bins merge into the middle half, so the counts stay
// exact at the coarser width; the exact min and max are tracked beside it. Non-finite values are
// ignored (counted in `non_finite`).
//
// Methods:
//   minmax      [min, max] as observed.
//   percentile  clip each tail at (100 - p)% of the values: the range runs from the lower edge of
//               the bin where the lower tail's count is passed to the upper edge of the bin where
//               the upper tail's is; p = 99.99 by default. Never wider than [min, max].
//   entropy     TensorRT's KL-divergence calibration on the histogram of |x| (kBins / 2 bins):
//               for every candidate threshold i >= 128 bins, the reference distribution P is the
//               first i bins with everything beyond folded into the last one, Q is P's first i
//               bins merged into 128 levels and spread back over their non-empty bins; the i of
//               least KL(P || Q) gives the threshold T, and the range is [-T, T] cut to
//               [min, max].
// The quantization parameters then widen the range to contain 0 (qparams.h).
//
// Thread safety: a Histogram is a plain value (no synchronization); the functions are pure.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "quant/dataset.h"

namespace kiln::quant {

enum class CalibrationMethod : uint8_t { kMinMax, kPercentile, kEntropy };

// "minmax" / "percentile" / "entropy".
std::string_view CalibrationMethodName(CalibrationMethod m);
// INVALID_ARGUMENT naming the accepted names for anything else.
Result<CalibrationMethod> ParseCalibrationMethod(std::string_view name);

class Histogram {
 public:
  static constexpr int kBins = 4096;  // over [-R, R]; kBins / 2 per side

  void Add(const float* values, int64_t n);

  int64_t count() const { return count_; }  // finite values seen
  int64_t non_finite() const { return non_finite_; }
  float min() const { return min_; }            // REQUIRES: count() > 0
  float max() const { return max_; }            // REQUIRES: count() > 0
  double half_range() const { return range_; }  // R; 0 until a nonzero value arrives
  const std::vector<int64_t>& bins() const { return bins_; }

 private:
  void Grow(double needed);
  std::vector<int64_t> bins_ = std::vector<int64_t>(kBins, 0);
  double range_ = 0;
  int64_t count_ = 0;
  int64_t non_finite_ = 0;
  int64_t zeros_before_range_ = 0;  // values seen while R was still 0 (all exactly 0)
  float min_ = 0;
  float max_ = 0;
};

struct TensorRange {
  float min = 0;
  float max = 0;
};

// The range `method` picks from `h` (percentile: `percentile` in (0, 100]). An empty histogram
// gives [0, 0].
TensorRange ComputeRange(const Histogram& h, CalibrationMethod method, double percentile = 99.99);

// Runs `graph` (FP32, as it will be quantized) over the samples of `data` in batches and returns
// a histogram per observed value id. The values are added as graph outputs to a copy of the graph
// so the runtime keeps them. `progress(done, total)` is called after every batch when set.
// Errors: those of Session creation and runs; INVALID_ARGUMENT when an observed value turns out
// not to be FP32.
Result<std::map<int, Histogram>> CollectHistograms(
    const Graph& graph, const std::vector<int>& values, const Dataset& data,
    const RunOptions& options, const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace kiln::quant
