// SPDX-License-Identifier: Apache-2.0
// Own ReduceSum / ReduceMean / ReduceMax against the reference: trailing axes (fast path) and
// other axes (handed to the reference), keepdims, axes as attribute and as input, both ISA paths.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/cpu_test_util.h"
#include "kernels/cpu/isa.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

TEST(CpuReduceTest, MatchesReference) {
  std::mt19937 rng(1);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1}, {}},           {{7}, {0}},
      {{17}, {-1}},        {{3, 17}, {1}},
      {{2, 3, 768}, {-1}}, {{2, 3, 4, 5}, {2, 3}},
      {{2, 3, 4, 5}, {1}}, {{2, 3, 4}, {0, 2}},
      {{2, 3, 4}, {}},     {{4, 7, 7}, {-2, -1}},
  };
  for (Isa isa : IsaLevels()) {
    ScopedMaxIsa cap(isa);
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax"}) {
      for (const auto& [shape, axes] : cases) {
        for (int keepdims : {0, 1}) {
          const bool axes_input = std::string(op) == "ReduceSum";
          KernelCase c(op, 13);
          c.Input(RandomTensor(S(shape), rng));
          if (axes_input) {
            if (!axes.empty()) {
              c.ConstInput(MakeTensor<int64_t>(Shape({static_cast<int64_t>(axes.size())}), axes));
            }
          } else if (!axes.empty()) {
            c.Attr(IntsAttr("axes", axes));
          }
          c.Attr(IntAttr("keepdims", keepdims));
          ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-5,
                      fmt::format("{} [{}] axes [{}] keepdims {} {}", op, fmt::join(shape, ","),
                                  fmt::join(axes, ","), keepdims, IsaName(isa)));
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
