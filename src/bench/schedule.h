// SPDX-License-Identifier: Apache-2.0
#pragma once
// Intended send times of the open loop (--request-rate-range).
//
// NOTE (coordinated omission): the load generator asks this schedule *when* each request should
// leave, independently of when earlier responses came back, and measures latency from that
// intended time. A server that stalls therefore shows the full queueing delay its clients would
// see instead of a pause in sending.
//
// A schedule with rate R split over `shards` senders gives shard i the arrivals of rate R/shards:
// constant arrivals are phase-shifted by i/R so the union is again evenly spaced at 1/R; Poisson
// arrivals use seed + i (the union of independent Poisson processes is Poisson with the summed
// rate). Deterministic for a given (rate, distribution, seed, shard, shards).
//
// Thread safety: none; one schedule per sender thread.

#include <cstdint>
#include <random>

namespace kiln::bench {

enum class Distribution { kConstant, kPoisson };

class ArrivalSchedule {
 public:
  // REQUIRES: rate_per_s > 0, 0 <= shard < shards.
  ArrivalSchedule(double rate_per_s, Distribution distribution, uint64_t seed, int shard = 0,
                  int shards = 1);

  // Offset of the next intended send from the start of the run, in nanoseconds; non-decreasing.
  int64_t Next();

 private:
  double rate_per_s_;  // of this shard
  Distribution distribution_;
  double phase_ns_;
  uint64_t index_ = 0;
  double poisson_t_ns_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace kiln::bench
