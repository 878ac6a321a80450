// SPDX-License-Identifier: Apache-2.0
// The two ceilings of a GPU that bench/gpu's ratios are read against, measured in the same run:
//   - device memory bandwidth: a large device-to-device copy (cudaMemcpyAsync, 1 GiB by default);
//     reported as bytes moved (read + write) per second, the figure a bandwidth-bound kernel can
//     reach at best; and the pinned host -> device copy rate (what staging a batch costs);
//   - tensor-core throughput: a large BF16 matrix product through cuBLASLt (M = N = K = 8192,
//     FP32 accumulation), in TFLOP/s.
// Each is timed with CUDA events over several repetitions after a warm-up; the best is kept.
//
//   kiln_gpu_ceilings [--copy-mib 1024] [--gemm 8192] [--repeat 20]
// Prints one JSON object on stdout; errors go to stderr with exit code 1.

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

#define CHECK_CUDA(call)                                                          \
  do {                                                                            \
    cudaError_t e = (call);                                                       \
    if (e != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorString(e));                                        \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)
#define CHECK_LT(call)                                                            \
  do {                                                                            \
    cublasStatus_t s = (call);                                                    \
    if (s != CUBLAS_STATUS_SUCCESS) {                                             \
      std::fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cublasLtGetStatusString(s));                                   \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

// The best time of `repeat` runs of `work` on `stream`, in seconds.
template <typename F>
double BestSeconds(cudaStream_t stream, int repeat, F work) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  work();  // warm-up
  CHECK_CUDA(cudaStreamSynchronize(stream));
  double best = 1e30;
  for (int i = 0; i < repeat; ++i) {
    CHECK_CUDA(cudaEventRecord(a, stream));
    work();
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms / 1e3);
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  return best;
}

}  // namespace

int main(int argc, char **argv) {
  size_t copy_mib = 1024;
  int gemm = 8192;
  int repeat = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--copy-mib") {
      copy_mib = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--gemm") {
      gemm = std::atoi(argv[i + 1]);
    } else if (flag == "--repeat") {
      repeat = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 1;
    }
  }
  int device = 0;
  CHECK_CUDA(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  // Device copy.
  const size_t bytes = copy_mib << 20;
  void *src = nullptr, *dst = nullptr, *pinned = nullptr;
  CHECK_CUDA(cudaMalloc(&src, bytes));
  CHECK_CUDA(cudaMalloc(&dst, bytes));
  CHECK_CUDA(cudaMemsetAsync(src, 1, bytes, stream));
  const double copy_s = BestSeconds(stream, repeat, [&] {
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  // Pinned host -> device (a quarter of the size: staging batches is smaller).
  const size_t h2d_bytes = bytes / 4;
  CHECK_CUDA(cudaMallocHost(&pinned, h2d_bytes));
  std::memset(pinned, 1, h2d_bytes);
  const double h2d_s = BestSeconds(stream, repeat, [&] {
    CHECK_CUDA(cudaMemcpyAsync(dst, pinned, h2d_bytes, cudaMemcpyHostToDevice, stream));
  });
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dst));
  CHECK_CUDA(cudaFreeHost(pinned));

  // BF16 GEMM: D[M,N] = A[M,K] B[K,N], column-major, FP32 accumulation, BF16 output.
  const int64_t n = gemm;
  const size_t elems = static_cast<size_t>(n) * n;
  void *a = nullptr, *b = nullptr, *d = nullptr, *workspace = nullptr;
  const size_t workspace_bytes = size_t{64} << 20;
  CHECK_CUDA(cudaMalloc(&a, elems * 2));
  CHECK_CUDA(cudaMalloc(&b, elems * 2));
  CHECK_CUDA(cudaMalloc(&d, elems * 2));
  CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  CHECK_CUDA(cudaMemsetAsync(a, 0x3c, elems * 2, stream));  // small finite BF16 values
  CHECK_CUDA(cudaMemsetAsync(b, 0x3c, elems * 2, stream));
  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op;
  CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasLtMatrixLayout_t la, lb, ld;
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n));
  CHECK_LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n));
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heuristic, &found));
  if (found == 0) {
    std::fprintf(stderr, "cuBLASLt has no algorithm for a %d^3 BF16 GEMM\n", gemm);
    return 1;
  }
  const float alpha = 1.0f, beta = 0.0f;
  const double gemm_s = BestSeconds(stream, repeat, [&] {
    CHECK_LT(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heuristic.algo,
                            workspace, workspace_bytes, stream));
  });
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  CHECK_CUDA(cudaFree(d));
  CHECK_CUDA(cudaFree(workspace));

  std::printf(
      "{\"gpu\": \"%s\", \"device_copy_gb_per_s\": %.1f, \"h2d_pinned_gb_per_s\": %.1f, "
      "\"bf16_gemm_tflops\": %.1f, \"copy_mib\": %zu, \"gemm\": %d}\n",
      prop.name, 2.0 * static_cast<double>(bytes) / copy_s / 1e9,
      static_cast<double>(h2d_bytes) / h2d_s / 1e9,
      2.0 * static_cast<double>(n) * n * n / gemm_s / 1e12, copy_mib, gemm);
  return 0;
}
