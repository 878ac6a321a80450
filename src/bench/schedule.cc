// SPDX-License-Identifier: Apache-2.0
#include "bench/schedule.h"

#include <cmath>

#include "base/check.h"

namespace kiln::bench {

ArrivalSchedule::ArrivalSchedule(double rate_per_s, Distribution distribution, uint64_t seed,
                                 int shard, int shards)
    : rate_per_s_(rate_per_s / shards),
      distribution_(distribution),
      phase_ns_(1e9 * shard / rate_per_s),
      rng_(seed + static_cast<uint64_t>(shard)) {
  KILN_CHECK(rate_per_s > 0 && shards > 0 && shard >= 0 && shard < shards,
             "bad arrival schedule parameters");
}

int64_t ArrivalSchedule::Next() {
  if (distribution_ == Distribution::kConstant) {
    // k / rate from the start, not a running sum: no drift over millions of arrivals.
    double t = phase_ns_ + 1e9 * static_cast<double>(index_++) / rate_per_s_;
    return static_cast<int64_t>(t);
  }
  // Exponential gaps by inversion: -ln(1 - u) / rate, u uniform in [0, 1).
  double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  poisson_t_ns_ += -std::log1p(-u) * 1e9 / rate_per_s_;
  ++index_;
  return static_cast<int64_t>(poisson_t_ns_);
}

}  // namespace kiln::bench
