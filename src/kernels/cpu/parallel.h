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
//
// On a thread with a SpinTeam installed (base/spin_team.h; the decoder engine installs its own
// for a step), the chunks run on that team instead of OpenMP, cut the same way (chunk t of nt
// is [n * t / nt, n * (t + 1) / nt)), so results do not depend on which ran them.
//
// Under ThreadSanitizer (build type Tsan) the chunks run on a team of std::threads instead, cut
// the same way: libgomp is not instrumented, so TSan cannot see an OpenMP region's fork and join
// and would report the caller's writes before the region and reads after it as races with the
// team, while suppressing every report with a libgomp frame (tests/tsan.supp) would hide real
// races between chunks too. With std::threads TSan sees the fork and the join, and two chunks
// touching the same memory are reported.

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "base/sanitizers.h"
#include "base/spin_team.h"

#if defined(KILN_THREAD_SANITIZER)
#include <thread>
#include <vector>
#endif

namespace kiln::cpu {

namespace parallel_internal {
#if defined(KILN_THREAD_SANITIZER)
// True on a thread while it runs a chunk of a ParallelFor team (std::threads under TSan).
inline thread_local bool in_team = false;
#endif
}  // namespace parallel_internal

// The threads a ParallelFor started now may use: 1 inside a parallel region (no nesting), else
// the calling thread's OpenMP thread count.
inline int ParallelThreads() {
  if (InSpinTeamChunk()) return 1;
  if (const SpinTeam* team = CurrentSpinTeam()) return team->threads();
  if (omp_in_parallel()) return 1;
#if defined(KILN_THREAD_SANITIZER)
  if (parallel_internal::in_team) return 1;
#endif
  return omp_get_max_threads();
}

template <typename F>
void ParallelFor(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks_wanted = std::min<int64_t>(ParallelThreads(), (n + grain - 1) / grain);
  if (chunks_wanted <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  if (SpinTeam* team = CurrentSpinTeam()) {
    struct Job {
      std::remove_reference_t<F>* fn;
      int64_t n, nt;
    } job{&fn, n, chunks_wanted};
    team->Run(
        static_cast<int>(chunks_wanted),
        [](void* ctx, int chunk) {
          const Job& j = *static_cast<const Job*>(ctx);
          const int64_t begin = j.n * chunk / j.nt;
          const int64_t end = j.n * (chunk + 1) / j.nt;
          if (begin < end) (*j.fn)(begin, end);
        },
        &job);
    return;
  }
#if defined(KILN_THREAD_SANITIZER)
  const int64_t nt = chunks_wanted;
  // A chunk runs as inside a region: nested ParallelFor inline, and oneDNN (which asks OpenMP)
  // on one thread.
  auto chunk = [&](int64_t t) {
    const bool was_in_team = parallel_internal::in_team;
    const int omp_threads = omp_get_max_threads();
    parallel_internal::in_team = true;
    omp_set_num_threads(1);
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end);
    omp_set_num_threads(omp_threads);
    parallel_internal::in_team = was_in_team;
  };
  std::vector<std::thread> team;
  team.reserve(static_cast<size_t>(nt - 1));
  for (int64_t t = 1; t < nt; ++t) {
    try {
      team.emplace_back(chunk, t);
    } catch (...) {  // no thread to be had: this chunk runs on the caller
      chunk(t);
    }
  }
  chunk(0);
  for (std::thread& th : team) th.join();
#else
  const int threads = static_cast<int>(chunks_wanted);
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end);
  }
#endif
}

}  // namespace kiln::cpu
