// SPDX-License-Identifier: Apache-2.0
#pragma once
// ParallelFor: the intra-op parallel loop of kiln's own CPU kernels, over OpenMP (the runtime
// oneDNN uses, so kernels and oneDNN share one pool). Kernels never create threads: the session
// sets the thread count (omp_set_num_threads) on the calling thread before a run.
//
//   ParallelFor(rows, /*grain=*/16, [&](int64_t begin, int64_t end) {
//     for (int64_t r = begin; r < end; ++r) ...;
//   });
//
// fn(begin, end) is called on disjoint chunks covering [0, n). It runs inline (one call, on the
// calling thread) when n <= grain, when only one thread is available, or when already inside a
// parallel region (no nested parallelism). fn must not throw.

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace kiln::cpu {

template <typename F>
void ParallelFor(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int max_threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t chunks_wanted = std::min<int64_t>(max_threads, (n + grain - 1) / grain);
  if (chunks_wanted <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  const int threads = static_cast<int>(chunks_wanted);
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end);
  }
}

}  // namespace kiln::cpu
