// SPDX-License-Identifier: Apache-2.0
#pragma once
// Device: where a tensor's bytes live. Every tensor and allocator names one.

#include <cstdint>
#include <string>

namespace kiln {

// kTest is the device of kiln's own tests (kernels/testdev: host memory that the CPU kernels may
// not read, with a stream that runs its work on a thread of its own); it exists only where a
// test registers it.
enum class DeviceType : uint8_t { kCpu = 0, kCuda = 1, kTest = 2 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  static Device Cpu() { return {}; }
  static Device Cuda(int index) { return {DeviceType::kCuda, index}; }
  static Device Test(int index) { return {DeviceType::kTest, index}; }
  bool is_cpu() const { return type == DeviceType::kCpu; }
  // "cpu", "cuda:0" or "test:0".
  std::string ToString() const {
    switch (type) {
      case DeviceType::kCpu:
        return "cpu";
      case DeviceType::kCuda:
        return "cuda:" + std::to_string(index);
      case DeviceType::kTest:
        break;
    }
    return "test:" + std::to_string(index);
  }
  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace kiln
