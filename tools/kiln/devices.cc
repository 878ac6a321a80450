// SPDX-License-Identifier: Apache-2.0
#include "tools/kiln/devices.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>

#include "backend/backend.h"
#include "base/logging.h"
#if KILN_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace kiln::tools {

void AddDeviceFlags(CLI::App& cmd, DeviceFlags* flags) {
  cmd.add_option("--cuda-memory-pool-byte-size", flags->cuda_memory_pool_byte_size,
                 "GPU:BYTES (repeatable): device memory GPU's pool keeps cached between runs "
                 "(cudaMemPoolAttrReleaseThreshold; default 268435456); the pool grows past it "
                 "on demand");
  cmd.add_option("--pinned-memory-pool-byte-size", flags->pinned_memory_pool_byte_size,
                 "Pinned host memory kept cached for staging GPU batches, in bytes")
      ->capture_default_str();
}

Status ParseCudaPoolFlag(const std::string& text, int* gpu, uint64_t* bytes) {
  const size_t colon = text.find(':');
  auto bad = [&] {
    return Status::InvalidArgument(fmt::format(
        "--cuda-memory-pool-byte-size '{}': expected GPU:BYTES, e.g. 0:1073741824", text));
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return bad();
  const char* begin = text.data();
  auto [gpu_end, gpu_ec] = std::from_chars(begin, begin + colon, *gpu);
  if (gpu_ec != std::errc() || gpu_end != begin + colon || *gpu < 0) return bad();
  auto [bytes_end, bytes_ec] = std::from_chars(begin + colon + 1, begin + text.size(), *bytes);
  if (bytes_ec != std::errc() || bytes_end != begin + text.size()) return bad();
  return Status::OK();
}

Status SetUpDevices(const DeviceFlags& flags, bool log) {
  std::vector<std::pair<int, uint64_t>> pools;
  for (const std::string& f : flags.cuda_memory_pool_byte_size) {
    int gpu = 0;
    uint64_t bytes = 0;
    KILN_RETURN_IF_ERROR(ParseCudaPoolFlag(f, &gpu, &bytes));
    pools.emplace_back(gpu, bytes);
  }
#if KILN_HAVE_CUDA
  CudaBackendOptions options;
  for (const auto& [gpu, bytes] : pools) options.pool_release_threshold_per_gpu[gpu] = bytes;
  options.pinned_pool_bytes = flags.pinned_memory_pool_byte_size;
  KILN_RETURN_IF_ERROR(RegisterCudaKernels());
  KILN_ASSIGN_OR_RETURN(int gpus, RegisterCudaBackends(options));
  if (gpus == 0 && log) {
    KILN_LOG_INFO("{}", BackendRegistry::MissingReason(DeviceType::kCuda));
  }
  for (Backend* b : BackendRegistry::OfType(DeviceType::kCuda)) {
    if (log) KILN_LOG_INFO("GPU {}", b->name());
  }
#else
  (void)pools;
  (void)log;
  BackendRegistry::SetMissingReason(DeviceType::kCuda,
                                    "this kiln was built without the CUDA toolkit");
#endif
  return Status::OK();
}

}  // namespace kiln::tools
