// SPDX-License-Identifier: Apache-2.0
#pragma once
// The test device (Device::Test(0), DeviceType::kTest): a second device that needs no hardware,
// so that everything the runtime does for an accelerator (placement with CPU fallback, copies at
// device edges, stream ordering, events, memory per device) is proven by the tests of a machine
// without one.
//
// - Memory: host memory behind a buffer type of its own that is not host-accessible. Kernels of
//   the CPU refuse nothing by themselves, so the runtime must never hand them such memory: the
//   device's memory is poisoned when it is freed, and a copy's destination is poisoned when the
//   copy is enqueued, so that a read before the copy ran, or after a free, gives wrong numbers.
// - Streams: each runs its work (copies and kernels) in order on a thread of its own, after a
//   random delay of up to `max_jitter_us`, so that a missing wait is a wrong result, not luck.
// - Kernels: one for every op whose best CPU kernel is not the reference kernel, except the
//   declined ops, so that graphs have device edges. A kernel runs the CPU kernel on the stream's
//   thread (after the copies enqueued before it) and waits for it: the host learns the output
//   shapes as a real device's shape logic would.
//
//   ASSERT_TRUE(RegisterTestDevice().ok());
//   SessionOptions o;
//   o.device = Device::Test(0);           // preferred; unsupported nodes fall back to the CPU
//   auto session = Session::Create(graph, o);

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace kiln {

struct TestDeviceOptions {
  // Ops (ONNX domain) the device declines, so that placement sends them to the CPU.
  std::vector<std::string> declined_ops = {"Reshape", "Flatten",   "Squeeze", "Unsqueeze",
                                           "Shape",   "Transpose", "Concat"};
  // Each piece of stream work waits a random 0..max_jitter_us microseconds first.
  int max_jitter_us = 30;
};

// Registers the test device (its backend and its kernel table) once per process; later calls
// return OK and change nothing. Thread-safe.
Status RegisterTestDevice(const TestDeviceOptions& options = {});

// What the test device's streams have run since the process started.
struct TestDeviceCounters {
  int64_t launches = 0;
  int64_t copies_to_device = 0;   // host -> device
  int64_t copies_to_host = 0;     // device -> host
  int64_t copies_on_device = 0;   // device -> device
  int64_t bytes_allocated = 0;    // device memory handed out, in all
  int64_t bytes_live = 0;         // device memory not yet freed
  int64_t pinned_bytes_live = 0;  // the device's host buffer type, not yet freed
};
TestDeviceCounters GetTestDeviceCounters();

}  // namespace kiln
