// SPDX-License-Identifier: Apache-2.0
#pragma once
// Device: where a tensor's bytes live. Every tensor and allocator names one.

#include <cstdint>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { kCpu = 0, kCuda = 1 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  static Device Cpu() { return {}; }
  static Device Cuda(int index) { return {DeviceType::kCuda, index}; }
  bool is_cpu() const { return type == DeviceType::kCpu; }
  // "cpu" or "cuda:0".
  std::string ToString() const {
    return type == DeviceType::kCpu ? std::string("cpu") : "cuda:" + std::to_string(index);
  }
  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace kiln
