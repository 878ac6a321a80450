// SPDX-License-Identifier: Apache-2.0
#include "base/spin_team.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace kiln {
namespace {

struct Counts {
  std::vector<std::atomic<int>> calls;
  std::vector<std::thread::id> ids;
  std::atomic<int> nested_team{0};
  explicit Counts(int n) : calls(static_cast<size_t>(n)), ids(static_cast<size_t>(n)) {}
};

void Count(void* ctx, int chunk) {
  auto* c = static_cast<Counts*>(ctx);
  c->calls[static_cast<size_t>(chunk)].fetch_add(1);
  c->ids[static_cast<size_t>(chunk)] = std::this_thread::get_id();
  // Inside a chunk the team is not offered again (nested loops run inline).
  if (CurrentSpinTeam() != nullptr || !InSpinTeamChunk()) c->nested_team.fetch_add(1);
}

// Every chunk runs exactly once per Run, chunk 0 on the caller and chunk c on worker c, for any
// chunk count up to the team's size, over many back-to-back jobs (the workers spinning) and
// after pauses long enough for them to sleep.
TEST(SpinTeamTest, EveryChunkRunsOnceOnItsThread) {
  SpinTeam team(4);
  ASSERT_EQ(team.threads(), 4);
  SpinTeamScope scope(&team);
  EXPECT_EQ(CurrentSpinTeam(), &team);
  EXPECT_FALSE(InSpinTeamChunk());
  for (int round = 0; round < 2000; ++round) {
    const int chunks = 1 + round % 4;
    Counts c(4);
    team.Run(chunks, Count, &c);
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(c.calls[static_cast<size_t>(k)].load(), k < chunks ? 1 : 0)
          << "round " << round << " chunk " << k;
    }
    EXPECT_EQ(c.ids[0], std::this_thread::get_id());
    for (int k = 1; k < chunks; ++k) EXPECT_NE(c.ids[static_cast<size_t>(k)], c.ids[0]);
    EXPECT_EQ(c.nested_team.load(), 0);
    if (round % 500 == 499) {
      // Past the spin time: the workers sleep and must be woken.
      std::this_thread::sleep_for(std::chrono::nanoseconds(3 * SpinTeam::kSpinNs));
    }
  }
  EXPECT_FALSE(InSpinTeamChunk());
}

// A chunk's writes are seen by the caller when Run returns (the caller reads every slot).
TEST(SpinTeamTest, ChunkWritesAreVisibleAfterRun) {
  SpinTeam team(3);
  struct Job {
    std::vector<int64_t> out;
    int64_t round = 0;
  } job;
  job.out.assign(3 * 1024, 0);
  for (job.round = 1; job.round <= 300; ++job.round) {
    team.Run(
        3,
        [](void* ctx, int chunk) {
          auto* j = static_cast<Job*>(ctx);
          for (int64_t i = chunk * 1024; i < (chunk + 1) * 1024; ++i) j->out[i] = j->round + i;
        },
        &job);
    for (int64_t i = 0; i < 3 * 1024; ++i) ASSERT_EQ(job.out[i], job.round + i) << i;
  }
}

// The scope restores what was installed before; one-thread teams have no workers.
TEST(SpinTeamTest, ScopesNestAndSmallTeamsRunInline) {
  SpinTeam one(1), two(2);
  EXPECT_EQ(one.threads(), 1);
  EXPECT_EQ(CurrentSpinTeam(), nullptr);
  {
    SpinTeamScope a(&two);
    {
      SpinTeamScope b(&one);
      EXPECT_EQ(CurrentSpinTeam(), &one);
      Counts c(1);
      one.Run(1, Count, &c);
      EXPECT_EQ(c.calls[0].load(), 1);
      EXPECT_EQ(c.ids[0], std::this_thread::get_id());
      EXPECT_EQ(c.nested_team.load(), 0);
    }
    EXPECT_EQ(CurrentSpinTeam(), &two);
  }
  EXPECT_EQ(CurrentSpinTeam(), nullptr);
}

// A team destroyed while its workers sleep, or right after a job while they spin, ends.
TEST(SpinTeamTest, DestructionEndsSpinningAndSleepingWorkers) {
  for (int i = 0; i < 20; ++i) {
    SpinTeam team(3);
    Counts c(3);
    team.Run(3, Count, &c);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(c.calls[static_cast<size_t>(k)].load(), 1);
    if (i % 2 == 0) std::this_thread::sleep_for(std::chrono::nanoseconds(2 * SpinTeam::kSpinNs));
  }  // a hang here is the failure (the test's timeout)
}

}  // namespace
}  // namespace kiln
