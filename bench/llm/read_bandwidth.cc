// SPDX-License-Identifier: Apache-2.0
// The machine's memory read bandwidth, STREAM-style: OpenMP threads sum disjoint parts of a
// buffer far larger than the caches (2 MiB pages requested) with 256-bit loads (AVX2, when the CPU
// has it; 64-bit integer adds in four independent accumulators, so the loop is bound by the loads);
// the best of several passes is printed as GB/s (1e9 bytes/s). bench/llm/run.py divides each
// token-generation row's bytes per second by it (the share of the limit a decoder reaches).
//
//   kiln_read_bandwidth [MIB] [PASSES]      # defaults: 1024 MiB, 10 passes; OMP_NUM_THREADS
#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace {

// Sum of data[0, n) as 64-bit integers, four 256-bit accumulators. REQUIRES: n % 16 == 0.
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint64_t* data, int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 16) {
    // Software prefetch 2 KiB ahead: the hardware prefetchers alone leave bandwidth unused on
    // some CPUs (kiln's decode kernels prefetch the same way).
    _mm_prefetch(reinterpret_cast<const char*>(data + i) + 2048, _MM_HINT_T0);
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i)));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + 12)));
  }
  const __m256i a = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

uint64_t SumPlain(const uint64_t* data, int64_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t i = 0; i < n; i += 4) {
    _mm_prefetch(reinterpret_cast<const char*>(data + i) + 2048, _MM_HINT_T0);
    s0 += data[i];
    s1 += data[i + 1];
    s2 += data[i + 2];
    s3 += data[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t mib = argc > 1 ? std::atoll(argv[1]) : 1024;
  const int passes = argc > 2 ? std::atoi(argv[2]) : 10;
  if (mib <= 0 || passes <= 0) {
    std::fprintf(stderr, "usage: kiln_read_bandwidth [MIB] [PASSES]\n");
    return 2;
  }
  const int64_t n = mib * (1 << 20) / static_cast<int64_t>(sizeof(uint64_t));
  // Anonymous memory with 2 MiB pages requested, as kiln's packed weights are (4 KiB pages
  // read 10-15% slower here: TLB misses and prefetcher restarts at every page).
  const size_t bytes = static_cast<size_t>(n) * sizeof(uint64_t);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  madvise(mem, bytes, MADV_HUGEPAGE);  // advice only
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { munmap(p, n); }
  } unmap{mem, bytes};
  struct View {
    uint64_t* p;
    uint64_t* get() const { return p; }
    uint64_t& operator[](int64_t i) const { return p[i]; }
  } data{static_cast<uint64_t*>(mem)};
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<uint64_t>(i & 7);
  double best = 0;
  uint64_t sink = 0;
  const bool avx2 = __builtin_cpu_supports("avx2");
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t total = 0;
#pragma omp parallel reduction(+ : total)
    {
      // Each thread's share, in whole 16-word chunks (n is a multiple of 16).
      const int64_t chunks = n / 16;
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = chunks * t / nt * 16, end = chunks * (t + 1) / nt * 16;
      total += avx2 ? SumAvx2(data.get() + begin, end - begin)
                    : SumPlain(data.get() + begin, end - begin);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink += total;
    const double gbs = static_cast<double>(n) * sizeof(uint64_t) / s / 1e9;
    if (gbs > best) best = gbs;
  }
  std::printf("%.3f\n", best);
  std::fprintf(stderr,
               "read bandwidth: %.2f GB/s (%d threads, %lld MiB, best of %d; checksum %llu)\n",
               best, omp_get_max_threads(), static_cast<long long>(mib), passes,
               static_cast<unsigned long long>(sink));
  return 0;
}
