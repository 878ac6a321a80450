// SPDX-License-Identifier: Apache-2.0
#include "base/spin_team.h"

#include <chrono>
#include <system_error>

#include "base/check.h"

namespace kiln {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Runs one chunk with the in-chunk mark set (nested ParallelFor loops run inline).
void RunChunk(void (*fn)(void*, int), void* ctx, int chunk) {
  const bool saved = spin_team_internal::in_chunk;
  spin_team_internal::in_chunk = true;
  fn(ctx, chunk);
  spin_team_internal::in_chunk = saved;
}

}  // namespace

SpinTeam::SpinTeam(int threads) {
  const int wanted = threads > 1 ? threads - 1 : 0;
  workers_.reserve(static_cast<size_t>(wanted));
  for (int i = 1; i <= wanted; ++i) {
    try {
      workers_.emplace_back([this, i] { Work(i); });
    } catch (const std::system_error&) {
      break;  // no thread to be had: a smaller team
    }
  }
}

SpinTeam::~SpinTeam() {
  stop_.store(true, std::memory_order_seq_cst);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void SpinTeam::Run(int chunks, void (*fn)(void* ctx, int chunk), void* ctx) {
  KILN_CHECK(chunks >= 1 && chunks <= threads(), "SpinTeam::Run: ", chunks, " chunks for ",
             threads(), " threads");
  if (chunks == 1) {
    RunChunk(fn, ctx, 0);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  pending_.store(chunks - 1, std::memory_order_relaxed);
  const uint64_t job = (ticket_.load(std::memory_order_relaxed) >> 32) + 1;
  ticket_.store((job << 32) | static_cast<uint32_t>(chunks), std::memory_order_seq_cst);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) wake_.notify_all();
  RunChunk(fn, ctx, 0);
  // The workers' chunks are about as long as this one: spin, and give the CPU up now and then
  // for a worker that is waiting for one (more threads than CPUs).
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if ((spins & 1023) == 1023) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }
}

void SpinTeam::Work(int index) {
  uint64_t seen = 0;
  while (true) {
    // Spin for the next job (yielding to any thread that has work), then sleep on wake_.
    uint64_t ticket = ticket_.load(std::memory_order_acquire);
    if (ticket == seen) {
      const int64_t deadline = NowNs() + kSpinNs;
      for (int spins = 1;; ++spins) {
        CpuRelax();
        ticket = ticket_.load(std::memory_order_acquire);
        if (ticket != seen || stop_.load(std::memory_order_relaxed)) break;
        if ((spins & 63) != 0) continue;
        if (NowNs() <= deadline) {
          std::this_thread::yield();  // a thread that has work (more threads than CPUs) runs
          continue;
        }
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        const uint32_t w = wake_.load(std::memory_order_seq_cst);
        ticket = ticket_.load(std::memory_order_seq_cst);
        if (ticket == seen && !stop_.load(std::memory_order_seq_cst)) wake_.wait(w);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        ticket = ticket_.load(std::memory_order_acquire);
        if (ticket != seen || stop_.load(std::memory_order_relaxed)) break;
      }
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = ticket;
    const int chunks = static_cast<int>(ticket & 0xffffffffu);
    if (index >= chunks) continue;  // not in this job
    RunChunk(fn_, ctx_, index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace kiln
