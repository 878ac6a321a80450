// SPDX-License-Identifier: Apache-2.0
#include "bench/range.h"

#include <gtest/gtest.h>

namespace kiln::bench {
namespace {

std::vector<double> Levels(const char* text, bool integral) {
  auto r = ExpandRange(text, integral);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<double>{};
}

TEST(RangeTest, LinearStepIncludesEndWhenLandedOn) {
  EXPECT_EQ(Levels("1:4:1", true), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(Levels("2:10:4", true), (std::vector<double>{2, 6, 10}));
  EXPECT_EQ(Levels("2:9:4", true), (std::vector<double>{2, 6}));
}

TEST(RangeTest, DefaultsStepOneAndEndStart) {
  EXPECT_EQ(Levels("3", true), (std::vector<double>{3}));
  EXPECT_EQ(Levels("3:5", true), (std::vector<double>{3, 4, 5}));
}

TEST(RangeTest, FactorStep) {
  EXPECT_EQ(Levels("1:64:x2", true), (std::vector<double>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(Levels("100:2000:x2", false), (std::vector<double>{100, 200, 400, 800, 1600}));
  EXPECT_EQ(Levels("3:30:X3", true), (std::vector<double>{3, 9, 27}));
  // Integral levels that round to the same value are listed once.
  EXPECT_EQ(Levels("1:4:x1.5", true), (std::vector<double>{1, 2, 3}));
}

TEST(RangeTest, FractionalRates) {
  std::vector<double> v = Levels("0.5:1.5:0.1", false);
  ASSERT_EQ(v.size(), 11u);
  EXPECT_DOUBLE_EQ(v.front(), 0.5);
  EXPECT_NEAR(v.back(), 1.5, 1e-9);
}

TEST(RangeTest, RejectsMalformedRanges) {
  for (const char* bad : {"", "a", "1:b", "1:4:0", "1:4:x1", "1:4:x0.5", "4:1", "0:4", "1:0",
                          "1:2:3:4", "1.5:4", "1:4:1.5", "1:4:x"}) {
    auto r = ExpandRange(bad, true);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("range"), std::string::npos) << bad;
    }
  }
  EXPECT_FALSE(ExpandRange("1:100000:1", true).ok());  // too many levels
}

}  // namespace
}  // namespace kiln::bench
