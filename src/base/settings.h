// SPDX-License-Identifier: Apache-2.0
#pragma once
// kiln's process settings: the one place environment variables are read. Each setting is
// declared here with its accepted values and meaning (docs/settings.md lists the same table),
// read from the environment once, on first use, and can be checked up front so that a bad value
// is an error naming the variable instead of being ignored.
//
//   std::string_view isa = SettingValue(Setting::kCpuIsa);   // "" when unset
//   if (Status s = CheckSettings(); !s.ok()) ...              // kiln does this at start-up
//
// Settings are for what must hold before any flag is parsed or below the layers that see flags
// (the CPU and CUDA kernels); everything else is a command-line flag.
//
// Thread safety: SettingValue and CheckSettings may be called from any thread; ScopedSetting
// (tests) must not overlap with readers on other threads.

#include <span>
#include <string_view>

#include "base/status.h"

namespace kiln {

enum class Setting {
  kCpuIsa,      // KILN_CPU_ISA
  kCpuGemm,     // KILN_CPU_GEMM
  kThreadWait,  // KILN_THREAD_WAIT
  kCudaTf32,    // KILN_CUDA_TF32
};

struct SettingInfo {
  Setting setting;
  std::string_view name;                     // the environment variable
  std::span<const std::string_view> values;  // accepted values
  std::string_view meaning;
};

// Every setting, in declaration order.
std::span<const SettingInfo> AllSettings();
const SettingInfo& InfoOf(Setting setting);

// The value of `setting` ("" when unset), read from the environment on the first call for it.
std::string_view SettingValue(Setting setting);

// INVALID_ARGUMENT naming the variable, its value and the accepted values for the first setting
// whose value is set and not accepted.
Status CheckSettings();

// Sets a setting's value for the lifetime of the object (tests), then restores it.
class ScopedSetting {
 public:
  ScopedSetting(Setting setting, std::string_view value);
  ~ScopedSetting();
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  Setting setting_;
  std::string_view previous_;
};

}  // namespace kiln
