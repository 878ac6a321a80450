// SPDX-License-Identifier: Apache-2.0
// Own Softmax against the reference Softmax (every opset's axis rule, edge sizes, both ISA
// paths) and ai.kiln LayerNormalization against the formula in double.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/cpu_test_util.h"
#include "kernels/cpu/isa.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

std::vector<Isa> Isas() { return IsaLevels(); }

TEST(CpuSoftmaxTest, MatchesReference) {
  std::mt19937 rng(1);
  const std::vector<std::vector<int64_t>> shapes = {
      {1}, {7}, {17}, {3, 1}, {2, 3, 17}, {1, 12, 9, 128}, {4, 5, 6, 7}};
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const auto& shape : shapes) {
      for (int opset : {11, 13}) {
        const int rank = static_cast<int>(shape.size());
        for (int axis = -rank; axis < rank; ++axis) {
          KernelCase c("Softmax", opset);
          c.Input(RandomTensor(S(shape), rng, -20, 20)).Attr(IntAttr("axis", axis));
          ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-5,
                      fmt::format("Softmax [{}] opset {} axis {} {}", fmt::join(shape, ","), opset,
                                  axis, IsaName(isa)));
        }
      }
    }
  }
}

TEST(CpuLayerNormTest, MatchesFormula) {
  std::mt19937 rng(2);
  const std::vector<std::pair<std::vector<int64_t>, int>> cases = {
      {{1}, -1}, {{7}, -1}, {{3, 17}, -1}, {{2, 5, 768}, -1}, {{2, 3, 4, 5}, 2}, {{4, 33}, 0}};
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const auto& [shape, axis] : cases) {
      for (bool bias : {false, true}) {
        const int rank = static_cast<int>(shape.size());
        const int ax = axis < 0 ? axis + rank : axis;
        std::vector<int64_t> norm(shape.begin() + ax, shape.end());
        OwnedTensor x = RandomTensor(S(shape), rng, -3, 5);
        OwnedTensor scale = RandomTensor(S(norm), rng);
        OwnedTensor b = RandomTensor(S(norm), rng);
        KernelCase c("LayerNormalization", 17);
        c.Domain(std::string(kKilnDomain), 1);
        c.Input(x).ConstInput(scale);
        if (bias) c.ConstInput(b);
        c.Attr(IntAttr("axis", axis)).Attr(FloatAttr("epsilon", 1e-5f));
        const int64_t len = scale.num_elements(), rows = x.num_elements() / len;
        std::vector<float> expected(static_cast<size_t>(x.num_elements()));
        for (int64_t r = 0; r < rows; ++r) {
          const float* xr = x.data<const float>() + r * len;
          double mean = 0, var = 0;
          for (int64_t i = 0; i < len; ++i) mean += xr[i];
          mean /= static_cast<double>(len);
          for (int64_t i = 0; i < len; ++i) var += (xr[i] - mean) * (xr[i] - mean);
          var /= static_cast<double>(len);
          for (int64_t i = 0; i < len; ++i) {
            double v = (xr[i] - mean) / std::sqrt(var + 1e-5) * scale.data<const float>()[i];
            if (bias) v += b.data<const float>()[i];
            expected[static_cast<size_t>(r * len + i)] = static_cast<float>(v);
          }
        }
        ExpectClose(c.Run("cpu"), MakeTensor<float>(S(shape), expected), 1e-4,
                    fmt::format("LayerNorm [{}] axis {} bias {} {}", fmt::join(shape, ","), axis,
                                bias, IsaName(isa)));
      }
    }
  }
}

TEST(CpuInstanceNormTest, MatchesReference) {
  // Rows shorter and longer than the vector width, one row, rank 3 to 5, a channel offset far
  // from zero (the two-pass variance), and GroupNorm's [N, groups, -1] form.
  std::mt19937 rng(4);
  const std::vector<std::vector<int64_t>> shapes = {{1, 1, 1},     {2, 3, 5},       {1, 4, 7, 9},
                                                    {2, 32, 2048}, {1, 3, 2, 3, 4}, {3, 2, 17}};
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const std::vector<int64_t>& shape : shapes) {
      OwnedTensor x = RandomTensor(S(shape), rng, 95, 105);
      KernelCase c("InstanceNormalization", 17);
      c.Input(x)
          .ConstInput(RandomTensor(S({shape[1]}), rng))
          .ConstInput(RandomTensor(S({shape[1]}), rng))
          .Attr(FloatAttr("epsilon", 1e-3f));
      const std::string what = fmt::format("[{}] {}", fmt::join(shape, ","), IsaName(isa));
      EXPECT_EQ(c.PickedProvider(), "cpu") << what;
      ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-4, what);
    }
  }
}

TEST(CpuInstanceNormTest, WrongScaleShapeIsInvalid) {
  std::mt19937 rng(5);
  KernelCase c("InstanceNormalization", 17);
  c.Input(RandomTensor(Shape({1, 4, 6}), rng))
      .ConstInput(RandomTensor(Shape({3}), rng))
      .ConstInput(RandomTensor(Shape({4}), rng));
  Result<OwnedTensor> r = c.TryRun("cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(CpuLayerNormTest, WrongScaleShapeIsInvalid) {
  std::mt19937 rng(3);
  KernelCase c("LayerNormalization", 17);
  c.Domain(std::string(kKilnDomain), 1);
  c.Input(RandomTensor(Shape({2, 8}), rng)).ConstInput(RandomTensor(Shape({7}), rng));
  Result<OwnedTensor> r = c.TryRun("cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu
