// SPDX-License-Identifier: Apache-2.0
#pragma once
// SpinTeam: a fixed team of threads for one owner's stream of short parallel loops, such as the
// hundreds of ParallelFor regions of one decoder step (kernels/cpu/parallel.h runs them on the
// team installed on the calling thread by a SpinTeamScope, instead of OpenMP).
//
// Why not OpenMP's team: libgomp keeps a team per thread that ever opened a parallel region, and
// once the process holds more of its threads than there are CPUs (a loader thread and a model's
// thread already do that on 2 CPUs; every tensor-model instance adds one) it stops spinning
// between regions and puts the workers to sleep after 100 spins. Every region then pays a
// futex wake-up: about 30 us, 6 ms of a 22 ms one-token decode step. A SpinTeam's workers spin
// for up to kSpinNs after their last chunk whatever else the process holds, yielding the CPU to
// any thread that has work, then sleep (an idle model's team costs nothing).
//
//   SpinTeam team(4);                 // the caller and 3 workers
//   team.Run(4, fn, ctx);             // fn(ctx, 0) here, fn(ctx, 1..3) on the workers; waits
//
// Run is called by one thread at a time (the owner); chunks <= threads(). fn must not throw.

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace kiln {

class SpinTeam {
 public:
  // How long a worker spins for the next chunk before it sleeps.
  static constexpr int64_t kSpinNs = 1'000'000;

  // The caller and threads - 1 workers (fewer when the system has no thread to give: threads()
  // says how many there are).
  explicit SpinTeam(int threads);
  ~SpinTeam();
  SpinTeam(const SpinTeam&) = delete;
  SpinTeam& operator=(const SpinTeam&) = delete;

  int threads() const { return 1 + static_cast<int>(workers_.size()); }

  // Calls fn(ctx, c) for c in [0, chunks): c = 0 on the calling thread, c on worker c; returns
  // when every call has returned. Inside the calls, InSpinTeamChunk() is true.
  void Run(int chunks, void (*fn)(void* ctx, int chunk), void* ctx);

 private:
  void Work(int index);

  std::vector<std::thread> workers_;
  // The job: its number (high 32 bits) and chunk count (low 32 bits) in one word, so that a
  // worker reads both at once. fn_ and ctx_ are read only by the job's own workers, which Run
  // waits for before it writes the next job.
  alignas(64) std::atomic<uint64_t> ticket_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<uint32_t> wake_{0};  // futex word of sleeping workers
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  void (*fn_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
};

namespace spin_team_internal {
inline thread_local SpinTeam* current = nullptr;
inline thread_local bool in_chunk = false;
}  // namespace spin_team_internal

// The team installed on this thread (nullptr: none, or inside one of a team's chunks).
inline SpinTeam* CurrentSpinTeam() {
  return spin_team_internal::in_chunk ? nullptr : spin_team_internal::current;
}
// True while this thread runs a chunk of a SpinTeam's Run (nested loops then run inline).
inline bool InSpinTeamChunk() { return spin_team_internal::in_chunk; }

// Installs a team on the calling thread for the scope's life (nullptr: none); restores the
// previous one after.
class SpinTeamScope {
 public:
  explicit SpinTeamScope(SpinTeam* team) : saved_(spin_team_internal::current) {
    spin_team_internal::current = team;
  }
  ~SpinTeamScope() { spin_team_internal::current = saved_; }
  SpinTeamScope(const SpinTeamScope&) = delete;
  SpinTeamScope& operator=(const SpinTeamScope&) = delete;

 private:
  SpinTeam* saved_;
};

}  // namespace kiln
