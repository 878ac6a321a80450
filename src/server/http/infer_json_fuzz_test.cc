// SPDX-License-Identifier: Apache-2.0
// Deterministic mutation "fuzz" test of ParseInferRequestJson: thousands of byte flips,
// truncations, insertions, deletions and splices of valid request bodies. The parser must never
// crash (run it under ASan/UBSan too) and always return either a request or an error Status;
// every accepted request must be self-consistent.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "base/testing/mutate.h"
#include "server/http/infer_json.h"

namespace kiln {
namespace {

const std::vector<std::string>& Seeds() {
  static const std::vector<std::string> seeds = {
      // One body per seed, split over several literals: the parentheses mark the concatenation.
      (R"({"id":"r1","inputs":[)"
       R"({"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1.0,2.5,-3,4e2]},)"
       R"({"name":"INPUT1","datatype":"FP32","shape":[1,4],"data":[[1,2],[3,4]]}],)"
       R"("outputs":[{"name":"OUTPUT0"},{"name":"OUTPUT1","parameters":{"binary_data":false}}]})"),
      (R"({"inputs":[{"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]},)"
       R"({"name":"u","datatype":"UINT8","shape":[3],"data":[0,1,255]},)"
       R"({"name":"i","datatype":"INT64","shape":[2],)"
       R"("data":[-9223372036854775808,9223372036854775807]}]})"),
      (R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[2,1],)"
       R"("data":[["hello"],["w\u00f6rld \"x\""]]}],)"
       R"("parameters":{"priority":2,"custom":"abc"}})"),
      (R"({"inputs":[{"name":"d","datatype":"FP64","shape":[],"data":[1e-300]},)"
       R"({"name":"h","datatype":"INT8","shape":[0],"data":[]}],"id":""})"),
      (R"({"inputs":[{"name":"x","datatype":"UINT64","shape":[1],"data":[18446744073709551615],)"
       R"("parameters":{}}],"outputs":[]})"),
  };
  return seeds;
}

// Bytes that steer mutations toward interesting JSON.
constexpr char kInterestingBytes[] = "[]{}\",:-.0123456789eE+tfn\\u\x00\xff\x80 ";
constexpr std::string_view kInteresting(kInterestingBytes, sizeof(kInterestingBytes) - 1);

void CheckConsistent(const InferRequest& req) {
  for (const InferInput& in : req.inputs) {
    ASSERT_TRUE(in.tensor.valid());
    ASSERT_GE(in.tensor.num_elements(), 0);
    if (in.tensor.num_elements() > 0) {
      ASSERT_NE(in.tensor.raw_data(), nullptr);
    }
  }
}

TEST(InferJsonFuzzTest, SeedsParse) {
  for (const std::string& seed : Seeds()) {
    auto r = ParseInferRequestJson(seed);
    ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << seed;
  }
}

TEST(InferJsonFuzzTest, MutationsNeverCrash) {
  std::mt19937 rng(20240611);
  int ok = 0;
  int errors = 0;
  constexpr int kIterations = 30000;
  for (int i = 0; i < kIterations; ++i) {
    const std::string& seed = Seeds()[static_cast<size_t>(i) % Seeds().size()];
    const std::string body = testing::MutateBytes(seed, rng, kInteresting);
    auto r = ParseInferRequestJson(body);
    if (r.ok()) {
      ++ok;
      CheckConsistent(**r);
    } else {
      ++errors;
      const StatusCode code = r.status().code();
      ASSERT_TRUE(code == StatusCode::kInvalidArgument || code == StatusCode::kUnimplemented)
          << r.status().ToString() << "\n"
          << body;
      ASSERT_FALSE(r.status().message().empty());
    }
  }
  RecordProperty("accepted", ok);
  RecordProperty("rejected", errors);
  // Both outcomes must be exercised, or the mutations are not testing anything.
  EXPECT_GT(ok, kIterations / 50);
  EXPECT_GT(errors, kIterations / 2);
}

TEST(InferJsonFuzzTest, EveryTruncationOfEverySeed) {
  for (const std::string& seed : Seeds()) {
    for (size_t n = 0; n < seed.size(); ++n) {
      auto r = ParseInferRequestJson(seed.substr(0, n));
      ASSERT_FALSE(r.ok()) << seed.substr(0, n);
    }
  }
}

}  // namespace
}  // namespace kiln
