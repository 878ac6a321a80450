// SPDX-License-Identifier: Apache-2.0
// Deterministic mutation "fuzz" test of ParseInferRequestJson: thousands of byte flips,
// truncations, insertions, deletions and splices of valid request bodies. The parser must never
// crash (run it under ASan/UBSan too) and always return either a request or an error Status;
// every accepted request must be self-consistent.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "server/http/infer_json.h"

namespace kiln {
namespace {

const std::vector<std::string>& Seeds() {
  static const std::vector<std::string> seeds = {
      R"({"id":"r1","inputs":[)"
      R"({"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1.0,2.5,-3,4e2]},)"
      R"({"name":"INPUT1","datatype":"FP32","shape":[1,4],"data":[[1,2],[3,4]]}],)"
      R"("outputs":[{"name":"OUTPUT0"},{"name":"OUTPUT1","parameters":{"binary_data":false}}]})",
      R"({"inputs":[{"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]},)"
      R"({"name":"u","datatype":"UINT8","shape":[3],"data":[0,1,255]},)"
      R"({"name":"i","datatype":"INT64","shape":[2],)"
      R"("data":[-9223372036854775808,9223372036854775807]}]})",
      R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[2,1],)"
      R"("data":[["hello"],["w\u00f6rld \"x\""]]}],)"
      R"("parameters":{"priority":2,"sequence_id":"abc"}})",
      R"({"inputs":[{"name":"d","datatype":"FP64","shape":[],"data":[1e-300]},)"
      R"({"name":"h","datatype":"INT8","shape":[0],"data":[]}],"id":""})",
      R"({"inputs":[{"name":"x","datatype":"UINT64","shape":[1],"data":[18446744073709551615],)"
      R"("parameters":{}}],"outputs":[]})",
  };
  return seeds;
}

// Bytes that steer mutations toward interesting JSON.
constexpr char kInteresting[] = "[]{}\",:-.0123456789eE+tfn\\u\x00\xff\x80 ";

std::string Mutate(const std::string& seed, std::mt19937& rng) {
  std::string s = seed;
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    const size_t pos = s.empty() ? 0 : rng() % s.size();
    const char interesting = kInteresting[rng() % (sizeof(kInteresting) - 1)];
    switch (rng() % 7) {
      case 0:  // flip one bit
        if (!s.empty()) s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
        break;
      case 1:  // replace with an interesting byte
        if (!s.empty()) s[pos] = interesting;
        break;
      case 2:  // insert
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), interesting);
        break;
      case 3:  // delete a short range
        s.erase(pos, 1 + rng() % 8);
        break;
      case 4:  // truncate
        s.resize(pos);
        break;
      case 5: {  // duplicate a range somewhere else
        if (s.empty()) break;
        const size_t len = 1 + rng() % std::min<size_t>(s.size() - pos, 32);
        const std::string piece = s.substr(pos, len);
        s.insert(rng() % (s.size() + 1), piece);
        break;
      }
      case 6: {  // replace a digit run with a big or odd number
        static const char* kNumbers[] = {
            "99999999999999999999999", "-1", "1e400", "0.5", "-0", "4294967296", "1e-400",
            "18446744073709551616"};
        s.insert(pos, kNumbers[rng() % 8]);
        break;
      }
    }
  }
  return s;
}

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
    const std::string body = Mutate(seed, rng);
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
