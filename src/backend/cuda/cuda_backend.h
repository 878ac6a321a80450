// SPDX-License-Identifier: Apache-2.0
#pragma once
// The CUDA backend (backend/backend.h) over the CUDA runtime: one Backend per visible GPU.
// Built only when CMake finds the CUDA toolkit (KILN_HAVE_CUDA); without a GPU (or a driver) it
// registers nothing and says why.
//
// - Device memory: a stream-ordered pool (cudaMemPoolCreate, allocations with
//   cudaMallocFromPoolAsync and frees with cudaFreeAsync on the legacy default stream, which
//   every kiln stream, created blocking, is ordered with: a block freed after the last kernel
//   that reads it was enqueued is reused only after that kernel ran). The pool keeps up to
//   `pool_release_threshold_bytes` cached between synchronizations.
// - Pinned host memory (cudaMallocHost) as the host buffer type: what batches are staged in;
//   freed blocks are cached by size (up to pinned_pool_bytes) and handed out again.
// - Streams: cudaStreamCreate (blocking). Launch runs its function at once on the calling thread:
//   a CUDA kernel's function enqueues device work on the stream, which the device runs in order.
//   CopyAsync is cudaMemcpyAsync with cudaMemcpyDefault (unified addressing tells host from
//   device). Events are cudaEvents without timing.
// - Errors: every CUDA call is checked and turned into a Status naming the call, the file and
//   line and CUDA's message; a stream keeps its first error.
//
//   KILN_ASSIGN_OR_RETURN(int gpus, RegisterCudaBackends({}));   // 0 without a GPU
//   SessionOptions o;
//   o.device = Device::Cuda(0);

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "base/result.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace kiln {

class Stream;  // backend/backend.h

struct CudaBackendOptions {
  // Bytes the device memory pool keeps cached between synchronizations
  // (cudaMemPoolAttrReleaseThreshold), per GPU where the map names it (what
  // --cuda-memory-pool-byte-size GPU:BYTES sets), else the default.
  uint64_t pool_release_threshold_bytes = uint64_t{256} << 20;
  std::map<int, uint64_t> pool_release_threshold_per_gpu;
  // Pinned host memory kept for reuse after it is freed (--pinned-memory-pool-byte-size): blocks
  // are cached by size up to this total, so staging a batch does not call cudaMallocHost.
  uint64_t pinned_pool_bytes = uint64_t{256} << 20;
};

// The GPUs the CUDA runtime sees; 0 (with `why` set, when not null) when there is none, no
// driver, or the runtime cannot start.
int CudaDeviceCount(std::string* why = nullptr);

// Registers a backend for each visible GPU (once per process; later calls return the same
// count). Returns how many; 0 is not an error.
Result<int> RegisterCudaBackends(const CudaBackendOptions& options = {});

// The CUDA stream behind `stream` (a stream a CUDA backend created), or null for any other
// stream (or null). What a CUDA kernel enqueues its work on.
CUstream_st* CudaStreamHandle(Stream* stream);

// Free and total memory of GPU `index` (cudaMemGetInfo).
struct CudaMemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};
Result<CudaMemoryInfo> GetCudaMemoryInfo(int index);

}  // namespace kiln
