// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/gpu_metrics.h"

#include <dlfcn.h>

namespace kiln {
namespace {

// The NVML structures kiln reads, laid out as nvml.h declares them (a stable C ABI).
struct NvmlUtilization {
  unsigned int gpu;     // percent of the sample period a kernel ran
  unsigned int memory;  // percent of the period device memory was read or written
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kNvmlSuccess = 0;

template <typename F>
bool Resolve(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

}  // namespace

GpuMetricsReader::GpuMetricsReader(const std::string& library) {
  lib_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    const char* e = dlerror();
    why_not_ = e != nullptr ? e : "cannot load " + library;
    return;
  }
  int (*init)() = nullptr;
  const bool ok =
      Resolve(lib_, "nvmlInit_v2", &init) && Resolve(lib_, "nvmlShutdown", &shutdown_) &&
      Resolve(lib_, "nvmlDeviceGetCount_v2", &count_) &&
      Resolve(lib_, "nvmlDeviceGetHandleByIndex_v2", &handle_) &&
      Resolve(lib_, "nvmlDeviceGetUUID", &uuid_) && Resolve(lib_, "nvmlDeviceGetName", &name_) &&
      Resolve(lib_, "nvmlDeviceGetUtilizationRates", &utilization_) &&
      Resolve(lib_, "nvmlDeviceGetMemoryInfo", &memory_) &&
      Resolve(lib_, "nvmlDeviceGetPowerUsage", &power_);
  if (!ok) {
    why_not_ = library + " lacks an NVML function kiln reads";
    return;
  }
  if (init() != kNvmlSuccess) {
    why_not_ = "nvmlInit failed (no GPU or no driver)";
    return;
  }
  init_ = init;
}

GpuMetricsReader::~GpuMetricsReader() {
  if (init_ != nullptr && shutdown_ != nullptr) shutdown_();
  if (lib_ != nullptr) dlclose(lib_);
}

std::vector<GpuReading> GpuMetricsReader::Read() const {
  std::vector<GpuReading> readings;
  if (init_ == nullptr) return readings;
  unsigned int n = 0;
  if (count_(&n) != kNvmlSuccess) return readings;
  for (unsigned int i = 0; i < n; ++i) {
    void* dev = nullptr;
    if (handle_(i, &dev) != kNvmlSuccess) continue;
    GpuReading r;
    char text[96] = {};
    r.uuid = uuid_(dev, text, sizeof(text)) == kNvmlSuccess ? text : "GPU-" + std::to_string(i);
    char name[96] = {};
    if (name_(dev, name, sizeof(name)) == kNvmlSuccess) r.name = name;
    NvmlUtilization u{};
    if (utilization_(dev, &u) == kNvmlSuccess) r.utilization = u.gpu / 100.0;
    NvmlMemory m{};
    if (memory_(dev, &m) == kNvmlSuccess) {
      r.memory_total_bytes = m.total;
      r.memory_used_bytes = m.used;
    }
    unsigned int milliwatts = 0;
    if (power_(dev, &milliwatts) == kNvmlSuccess) r.power_watts = milliwatts / 1000.0;
    readings.push_back(std::move(r));
  }
  return readings;
}

}  // namespace kiln
