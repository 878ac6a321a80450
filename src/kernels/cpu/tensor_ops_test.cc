// SPDX-License-Identifier: Apache-2.0
// Own Transpose against the reference kernel: 2-D to 5-D permutations (BERT's head split among
// them), edge sizes, default perm. (Gather's tests are in index_ops_test.cc.)

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

}  // namespace
}  // namespace kiln::cpu
