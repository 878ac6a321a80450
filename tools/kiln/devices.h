// SPDX-License-Identifier: Apache-2.0
#pragma once
// The devices of a kiln process besides the CPU: the CUDA backend and kernels, where this kiln was
// built with the CUDA toolkit and the machine has a GPU. The commands that place work on a GPU
// (serve, run, profile) add these flags and call SetUpDevices once before loading models.
//
//   --cuda-memory-pool-byte-size GPU:BYTES   (repeatable) bytes GPU's memory pool keeps cached
//                                            between runs (default 256 MiB); the pool grows past
//                                            it on demand and trims back to it
//   --pinned-memory-pool-byte-size BYTES     pinned host memory kept cached for staging batches
//                                            (default 256 MiB)
//
// Flag names are the reference server's. Without a GPU (or in a build without CUDA) the flags are
// accepted and SetUpDevices logs why there is none; a KIND_GPU model then fails its load saying so.

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace CLI {
class App;
}

namespace kiln::tools {

struct DeviceFlags {
  std::vector<std::string> cuda_memory_pool_byte_size;  // "GPU:BYTES" each
  uint64_t pinned_memory_pool_byte_size = uint64_t{256} << 20;
};

void AddDeviceFlags(CLI::App& cmd, DeviceFlags* flags);

// Parses "GPU:BYTES" (e.g. "0:1073741824"); INVALID_ARGUMENT naming the text otherwise.
Status ParseCudaPoolFlag(const std::string& text, int* gpu, uint64_t* bytes);

// Registers the CUDA backends (one per visible GPU) and the CUDA kernels; with `log`, logs the GPUs
// found or why there is none. Errors: a malformed flag. Idempotent.
Status SetUpDevices(const DeviceFlags& flags, bool log = true);

}  // namespace kiln::tools
