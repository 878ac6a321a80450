// SPDX-License-Identifier: Apache-2.0
#include "base/settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(SettingsTest, EverySettingIsDeclaredOnceWithValues) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < AllSettings().size(); ++i) {
    const SettingInfo& info = AllSettings()[i];
    EXPECT_EQ(static_cast<size_t>(info.setting), i) << info.name;
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_TRUE(info.name.starts_with("KILN_")) << info.name;
    EXPECT_FALSE(info.values.empty()) << info.name;
    EXPECT_FALSE(info.meaning.empty()) << info.name;
  }
  EXPECT_EQ(InfoOf(Setting::kCpuIsa).name, "KILN_CPU_ISA");
  EXPECT_EQ(InfoOf(Setting::kCpuGemm).name, "KILN_CPU_GEMM");
}

TEST(SettingsTest, ScopedValueIsReadAndCheckedThenRestored) {
  const std::string before(SettingValue(Setting::kCpuIsa));
  {
    ScopedSetting avx2(Setting::kCpuIsa, "avx2");
    EXPECT_EQ(SettingValue(Setting::kCpuIsa), "avx2");
    EXPECT_TRUE(CheckSettings().ok());
    {
      ScopedSetting bad(Setting::kCpuIsa, "avx3");
      const Status s = CheckSettings();
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(s.message()),
                  HasSubstr("KILN_CPU_ISA='avx3' is not one of scalar, avx2, avx512, amx"));
    }
    EXPECT_EQ(SettingValue(Setting::kCpuIsa), "avx2");
  }
  EXPECT_EQ(SettingValue(Setting::kCpuIsa), before);
}

TEST(SettingsTest, UnsetIsEmptyAndAccepted) {
  ScopedSetting unset(Setting::kCpuGemm, "");
  EXPECT_EQ(SettingValue(Setting::kCpuGemm), "");
  ScopedSetting isa(Setting::kCpuIsa, "");
  EXPECT_TRUE(CheckSettings().ok());
}

}  // namespace
}  // namespace kiln
