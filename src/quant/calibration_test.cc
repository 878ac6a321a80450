// SPDX-License-Identifier: Apache-2.0
// Tests for the calibration histogram and methods (calibration.h) on known distributions:
// growth keeps the counts exact, minmax gives the observed range, percentile and entropy clip
// the outliers of a gaussian that minmax keeps.

#include "quant/calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

namespace kiln::quant {
namespace {

TEST(HistogramTest, GrowthKeepsCountsAndMatchesDirectBinning) {
  std::mt19937 rng(1);
  Histogram h;
  std::vector<float> all;
  // Batches of growing range: R doubles several times.
  for (float r : {0.5f, 1.0f, 3.0f, 40.0f}) {
    std::uniform_real_distribution<float> d(-r, r * 0.5f);
    std::vector<float> batch(5000);
    for (float& v : batch) v = d(rng);
    h.Add(batch.data(), static_cast<int64_t>(batch.size()));
    all.insert(all.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(h.count(), static_cast<int64_t>(all.size()));
  EXPECT_EQ(std::accumulate(h.bins().begin(), h.bins().end(), int64_t{0}), h.count());
  EXPECT_EQ(h.min(), *std::min_element(all.begin(), all.end()));
  EXPECT_EQ(h.max(), *std::max_element(all.begin(), all.end()));
  EXPECT_GE(h.half_range(), 20.0);
  // Binning everything directly over the final range gives the same counts (up to values that
  // sit on a bin edge, which rounding may put on either side).
  std::vector<int64_t> direct(Histogram::kBins, 0);
  const double R = h.half_range();
  for (float v : all) {
    int64_t b = static_cast<int64_t>(std::floor((v + R) * Histogram::kBins / (2 * R)));
    ++direct[static_cast<size_t>(std::clamp<int64_t>(b, 0, Histogram::kBins - 1))];
  }
  int64_t diff = 0;
  for (int b = 0; b < Histogram::kBins; ++b) diff += std::abs(direct[b] - h.bins()[b]);
  EXPECT_LE(diff, 4);
}

TEST(HistogramTest, ZerosAndNonFinite) {
  Histogram h;
  std::vector<float> zeros(10, 0.0f);
  h.Add(zeros.data(), 10);
  EXPECT_EQ(h.count(), 10);
  TensorRange r = ComputeRange(h, CalibrationMethod::kEntropy);
  EXPECT_EQ(r.min, 0.0f);
  EXPECT_EQ(r.max, 0.0f);
  std::vector<float> more = {NAN, INFINITY, 2.0f, -1.0f};
  h.Add(more.data(), 4);
  EXPECT_EQ(h.count(), 12);
  EXPECT_EQ(h.non_finite(), 2);
  EXPECT_EQ(std::accumulate(h.bins().begin(), h.bins().end(), int64_t{0}), 12);
  r = ComputeRange(h, CalibrationMethod::kMinMax);
  EXPECT_EQ(r.min, -1.0f);
  EXPECT_EQ(r.max, 2.0f);
  EXPECT_EQ(ComputeRange(Histogram(), CalibrationMethod::kPercentile).max, 0.0f);
}

TEST(CalibrationTest, UniformKeepsItsRange) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1.0f, 3.0f);
  std::vector<float> v(200000);
  for (float& x : v) x = d(rng);
  Histogram h;
  h.Add(v.data(), static_cast<int64_t>(v.size()));
  const TensorRange mm = ComputeRange(h, CalibrationMethod::kMinMax);
  EXPECT_EQ(mm.min, h.min());
  EXPECT_EQ(mm.max, h.max());
  const TensorRange p = ComputeRange(h, CalibrationMethod::kPercentile, 99.99);
  const double bin = 2 * h.half_range() / Histogram::kBins;
  EXPECT_NEAR(p.min, -1.0, 4 * bin);
  EXPECT_NEAR(p.max, 3.0, 4 * bin);
  EXPECT_GE(p.min, h.min());
  EXPECT_LE(p.max, h.max());
  // Nothing to clip in a uniform distribution: entropy keeps nearly all of it.
  const TensorRange e = ComputeRange(h, CalibrationMethod::kEntropy);
  EXPECT_GT(e.max, 2.7f);
  EXPECT_LE(e.max, h.max());
  EXPECT_EQ(e.min, h.min());
}

TEST(CalibrationTest, GaussianOutliersClippedByPercentileAndEntropyNotMinMax) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(400000);
  for (float& x : v) x = d(rng);
  // 8 outliers (0.002%) far out on both sides, arriving in a later batch.
  std::vector<float> outliers = {900.0f, -850.0f, 1000.0f, -1000.0f,
                                 700.0f, 950.0f,  -990.0f, 800.0f};
  Histogram h;
  h.Add(v.data(), static_cast<int64_t>(v.size()));
  h.Add(outliers.data(), static_cast<int64_t>(outliers.size()));
  const TensorRange mm = ComputeRange(h, CalibrationMethod::kMinMax);
  EXPECT_EQ(mm.max, 1000.0f);
  EXPECT_EQ(mm.min, -1000.0f);
  const TensorRange p = ComputeRange(h, CalibrationMethod::kPercentile, 99.99);
  // The 99.99th percentile of N(0, 1) is ~3.7; the histogram's bins are ~0.5 wide here.
  EXPECT_GT(p.max, 3.0f);
  EXPECT_LT(p.max, 6.0f);
  EXPECT_LT(p.min, -3.0f);
  EXPECT_GT(p.min, -6.0f);
  const TensorRange e = ComputeRange(h, CalibrationMethod::kEntropy);
  // Entropy's threshold is at least 128 of the 2048 |x| bins (~64 here): far below the outliers.
  EXPECT_GT(e.max, 3.0f);
  EXPECT_LT(e.max, 100.0f);
  EXPECT_LT(e.min, -3.0f);
  EXPECT_GT(e.min, -100.0f);
}

TEST(CalibrationTest, ParseMethod) {
  EXPECT_EQ(ParseCalibrationMethod("entropy").value(), CalibrationMethod::kEntropy);
  EXPECT_EQ(CalibrationMethodName(CalibrationMethod::kPercentile), "percentile");
  EXPECT_FALSE(ParseCalibrationMethod("kl").ok());
}

}  // namespace
}  // namespace kiln::quant
