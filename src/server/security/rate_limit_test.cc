// SPDX-License-Identifier: Apache-2.0
// Token buckets on a fake time line: burst, refill, the wait to the next unit, Retry-After
// rounding, and a balance driven below zero by generated tokens.
#include "server/security/rate_limit.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(TokenBucketTest, BurstThenRefusedWithWait) {
  TokenBucket b(/*rate_per_s=*/2, /*capacity=*/3, /*now_ns=*/0);
  int64_t wait = 0;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.TryTake(1, 0, &wait)) << i;
  EXPECT_FALSE(b.TryTake(1, 0, &wait));
  EXPECT_EQ(wait, kSecond / 2);  // one unit at 2/s
  EXPECT_EQ(RetryAfterSeconds(wait), 1);
}

TEST(TokenBucketTest, RefillsAtRateUpToCapacity) {
  TokenBucket b(10, 5, 0);
  int64_t wait = 0;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(b.TryTake(1, 0, &wait));
  EXPECT_FALSE(b.TryTake(1, 0, &wait));
  EXPECT_TRUE(b.TryTake(1, kSecond / 10, &wait));  // 100 ms: one unit back
  EXPECT_FALSE(b.TryTake(1, kSecond / 10, &wait));
  EXPECT_DOUBLE_EQ(b.Level(100 * kSecond), 5);  // never above capacity
}

TEST(TokenBucketTest, RefusalTakesNothing) {
  TokenBucket b(1, 1, 0);
  int64_t wait = 0;
  ASSERT_TRUE(b.TryTake(1, 0, &wait));
  EXPECT_FALSE(b.TryTake(1, kSecond / 2, &wait));
  EXPECT_EQ(wait, kSecond / 2);
  EXPECT_TRUE(b.TryTake(1, kSecond, &wait));
}

TEST(TokenBucketTest, ChargeGoesNegativeAndRecovers) {
  TokenBucket tokens(/*rate_per_s=*/100, /*capacity=*/100, 0);
  tokens.Charge(350, 0);  // one long generation
  EXPECT_DOUBLE_EQ(tokens.Level(0), -250);
  int64_t wait = 0;
  EXPECT_FALSE(tokens.NonNegative(0, &wait));
  EXPECT_EQ(wait, 2500 * kSecond / 1000);
  EXPECT_EQ(RetryAfterSeconds(wait), 3);  // 2.5 s rounds up
  EXPECT_FALSE(tokens.NonNegative(2 * kSecond, &wait));
  EXPECT_EQ(wait, kSecond / 2);
  EXPECT_TRUE(tokens.NonNegative(2500 * kSecond / 1000, &wait));
}

TEST(TokenBucketTest, RetryAfterSecondsRoundsUpAtLeastOne) {
  EXPECT_EQ(RetryAfterSeconds(1), 1);
  EXPECT_EQ(RetryAfterSeconds(kSecond), 1);
  EXPECT_EQ(RetryAfterSeconds(kSecond + 1), 2);
  EXPECT_EQ(RetryAfterSeconds(0), 1);
  EXPECT_EQ(RetryAfterSeconds(10 * kSecond), 10);
}

}  // namespace
}  // namespace kiln
