// SPDX-License-Identifier: Apache-2.0
// Own Transpose and Gather against the reference kernels: 2-D to 5-D permutations (BERT's head
// split among them), edge sizes, default perm; Gather on axis 0 with int32/int64 and negative
// indices, other axes and out-of-range indices handed to the reference.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/cpu_test_util.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

TEST(CpuTransposeTest, MatchesReference) {
  std::mt19937 rng(1);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1}, {0}},
      {{7, 17}, {1, 0}},
      {{33, 65}, {}},
      {{1, 128, 12, 64}, {0, 2, 1, 3}},
      {{2, 12, 128, 64}, {0, 2, 1, 3}},
      {{2, 3, 17, 7}, {0, 2, 3, 1}},
      {{2, 7, 5, 3}, {0, 3, 1, 2}},
      {{2, 3, 4, 5}, {3, 2, 1, 0}},
      {{1, 1, 7, 1}, {3, 2, 0, 1}},
      {{2, 3, 4, 5, 6}, {4, 0, 2, 1, 3}},
      {{2, 0, 3}, {2, 1, 0}},
  };
  for (const auto& [shape, perm] : cases) {
    KernelCase c("Transpose", 13);
    c.Input(RandomTensor(S(shape), rng));
    if (!perm.empty()) c.Attr(IntsAttr("perm", perm));
    ExpectClose(
        c.Run("cpu"), c.Run("ref"), 0,
        fmt::format("Transpose [{}] perm [{}]", fmt::join(shape, ","), fmt::join(perm, ",")));
  }
}

TEST(CpuGatherTest, MatchesReference) {
  std::mt19937 rng(2);
  const std::vector<std::vector<int64_t>> data_shapes = {{1}, {7}, {30, 17}, {100, 8, 3}};
  for (const auto& ds : data_shapes) {
    const int64_t rank = static_cast<int64_t>(ds.size());
    for (int64_t axis : {int64_t{0}, -rank, rank - 1}) {
      for (bool i64 : {true, false}) {
        const int64_t rows =
            ds[static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(ds.size()) : axis)];
        std::uniform_int_distribution<int64_t> dist(-rows, rows - 1);
        std::vector<int64_t> idx;
        idx.reserve(6);
        for (int i = 0; i < 6; ++i) idx.push_back(dist(rng));
        KernelCase c("Gather", 13);
        c.Input(RandomTensor(S(ds), rng));
        if (i64) {
          c.Input(MakeTensor<int64_t>(Shape({2, 3}), idx));
        } else {
          std::vector<int32_t> i32(idx.begin(), idx.end());
          c.Input(MakeTensor<int32_t>(Shape({2, 3}), i32));
        }
        c.Attr(IntAttr("axis", axis));
        ExpectClose(c.Run("cpu"), c.Run("ref"), 0,
                    fmt::format("Gather [{}] axis {} i64 {}", fmt::join(ds, ","), axis, i64));
      }
    }
  }
}

TEST(CpuGatherTest, OutOfRangeIsInvalidArgument) {
  std::mt19937 rng(3);
  KernelCase c("Gather", 13);
  c.Input(RandomTensor(Shape({4, 2}), rng)).Input(MakeTensor<int64_t>(Shape({1}), {4}));
  Result<OwnedTensor> r = c.TryRun("cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu
