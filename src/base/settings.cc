// SPDX-License-Identifier: Apache-2.0
#include "base/settings.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <string>

namespace kiln {
namespace {

constexpr std::string_view kIsaValues[] = {"scalar", "avx2", "avx512", "amx"};
constexpr std::string_view kGemmValues[] = {"kiln", "kiln-all", "onednn"};
constexpr std::string_view kThreadWaitValues[] = {"bounded", "openmp"};
constexpr std::string_view kCudaTf32Values[] = {"1", "0"};

constexpr SettingInfo kSettings[] = {
    {Setting::kCpuIsa, "KILN_CPU_ISA", kIsaValues,
     "highest instruction set kiln's own CPU kernels use (they never go above what the CPU "
     "has); the tests run each fast kernel at every level this way"},
    {Setting::kCpuGemm, "KILN_CPU_GEMM", kGemmValues,
     "FP32 MatMul/Gemm with constant weights: 'kiln' (default) runs kiln's batch-invariant GEMM "
     "where oneDNN has no AVX-512 brgemm; 'kiln-all' runs it at every level (AVX2 and AVX-512 "
     "machines then give the same bits); 'onednn' keeps oneDNN everywhere"},
    {Setting::kThreadWait, "KILN_THREAD_WAIT", kThreadWaitValues,
     "how idle intra-op threads wait: 'bounded' (default) spins briefly (GOMP_SPINCOUNT "
     "10000) and then sleeps, so other work on the machine gets the cores; 'openmp' keeps the "
     "OpenMP runtime's own default"},
    {Setting::kCudaTf32, "KILN_CUDA_TF32", kCudaTf32Values,
     "whether the CUDA kernels' FP32 matrix products and convolutions may use TF32 tensor cores "
     "('1', default: 10-bit mantissa products, FP32 sums) or must compute in full FP32 ('0')"},
};
constexpr size_t kCount = std::size(kSettings);

// One slot per setting: the value, read from the environment once. A value points into the
// environment (or, under ScopedSetting, at the caller's string), both outliving the reads.
struct Slot {
  std::atomic<bool> read{false};
  std::atomic<const char*> data{nullptr};
  std::atomic<size_t> size{0};
};

std::array<Slot, kCount>& Slots() {
  static std::array<Slot, kCount> slots;
  return slots;
}

size_t IndexOf(Setting setting) { return static_cast<size_t>(setting); }

void Store(Slot& slot, std::string_view value) {
  slot.data.store(value.data(), std::memory_order_relaxed);
  slot.size.store(value.size(), std::memory_order_relaxed);
  slot.read.store(true, std::memory_order_release);
}

}  // namespace

std::span<const SettingInfo> AllSettings() { return kSettings; }

const SettingInfo& InfoOf(Setting setting) { return kSettings[IndexOf(setting)]; }

std::string_view SettingValue(Setting setting) {
  Slot& slot = Slots()[IndexOf(setting)];
  if (!slot.read.load(std::memory_order_acquire)) {
    // Two threads reading at once both store the same environment value.
    const char* env = std::getenv(std::string(InfoOf(setting).name).c_str());
    Store(slot, env != nullptr ? std::string_view(env) : std::string_view());
  }
  const char* data = slot.data.load(std::memory_order_relaxed);
  return data != nullptr ? std::string_view(data, slot.size.load(std::memory_order_relaxed))
                         : std::string_view();
}

Status CheckSettings() {
  for (const SettingInfo& info : kSettings) {
    const std::string_view value = SettingValue(info.setting);
    if (value.empty()) continue;
    bool known = false;
    for (std::string_view v : info.values) known |= v == value;
    if (!known) {
      return Status::InvalidArgument(fmt::format("environment variable {}='{}' is not one of {}",
                                                 info.name, value, fmt::join(info.values, ", ")));
    }
  }
  return Status::OK();
}

ScopedSetting::ScopedSetting(Setting setting, std::string_view value)
    : setting_(setting), previous_(SettingValue(setting)) {
  Store(Slots()[IndexOf(setting)], value);
}

ScopedSetting::~ScopedSetting() { Store(Slots()[IndexOf(setting_)], previous_); }

}  // namespace kiln
