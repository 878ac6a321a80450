// SPDX-License-Identifier: Apache-2.0
#pragma once
// GPU figures for /metrics through NVML, loaded at run time (dlopen of libnvidia-ml.so.1): no
// link-time dependency on the driver, and a machine without NVML (or without a GPU) simply has
// no GPU series, which is not an error.
//
//   static GpuMetricsReader* gpus = new GpuMetricsReader();   // loads NVML once
//   std::vector<GpuReading> now = gpus->Read();               // empty without NVML
//
// Thread safety: Read is thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct GpuReading {
  std::string uuid;                   // "GPU-..." (the reference server's gpu_uuid label)
  std::string name;                   // "NVIDIA H200"
  std::optional<double> utilization;  // 0..1 over NVML's last sample period
  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint64_t> memory_used_bytes;
  std::optional<double> power_watts;
};

class GpuMetricsReader {
 public:
  // Loads NVML and initializes it; without it (or with no GPU) Read returns nothing. `library`
  // is the file to dlopen.
  explicit GpuMetricsReader(const std::string& library = "libnvidia-ml.so.1");
  ~GpuMetricsReader();
  GpuMetricsReader(const GpuMetricsReader&) = delete;
  GpuMetricsReader& operator=(const GpuMetricsReader&) = delete;

  // Whether NVML loaded and initialized; `why_not` says what failed when it did not.
  bool available() const { return init_ != nullptr; }
  const std::string& why_not() const { return why_not_; }

  // One reading per GPU NVML sees; a figure NVML refuses is nullopt.
  std::vector<GpuReading> Read() const;

 private:
  void* lib_ = nullptr;
  std::string why_not_;
  // NVML entry points (C functions, resolved with dlsym).
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*count_)(unsigned int*) = nullptr;
  int (*handle_)(unsigned int, void**) = nullptr;
  int (*uuid_)(void*, char*, unsigned int) = nullptr;
  int (*name_)(void*, char*, unsigned int) = nullptr;
  int (*utilization_)(void*, void*) = nullptr;
  int (*memory_)(void*, void*) = nullptr;
  int (*power_)(void*, unsigned int*) = nullptr;
};

}  // namespace kiln
