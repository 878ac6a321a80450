// SPDX-License-Identifier: Apache-2.0
// The response cache on its own: the hash against published-implementation vectors, the
// --cache-config parser, the key's sensitivity to everything that decides a response (and its
// indifference to what does not), hits and misses, LRU order, the byte budget and eviction,
// oversize entries, and many threads at once.
#include "repo/response_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::ZeroInput;
using ::testing::HasSubstr;

constexpr std::array<uint64_t, 2> kTestKey = {0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};

ResponseCacheOptions Options(uint64_t size_bytes) {
  ResponseCacheOptions o;
  o.size_bytes = size_bytes;
  o.hash_key = kTestKey;
  return o;
}

// SipHash-2-4-128 of the bytes 0, 1, ..., n-1 under the key 00 01 .. 0f, as libsodium's
// crypto_shorthash_siphashx24 computes it (n = 0 is the first vector of the SipHash reference's
// vectors.h). Each as {n, hi, lo}: lo is the first 8 output bytes read little-endian.
TEST(SipHasher128, MatchesTheReferenceVectors) {
  struct Vector {
    size_t n;
    uint64_t hi, lo;
  };
  const Vector vectors[] = {
      {0, 0x930255c71472f66dULL, 0xe6a825ba047f81a3ULL},
      {1, 0x45fc229b11597634ULL, 0x44af996bd8c187daULL},
      {7, 0x3982f01fa64ab8c0ULL, 0x53c1dbd8beebf1a1ULL},
      {8, 0xb49714f364e2830fULL, 0x61f55862baa9623bULL},
      {9, 0xed716dbb028b7fc4ULL, 0xabbad90a06994426ULL},
      {15, 0xd9c3cf970fec087eULL, 0x11a8b03399e99354ULL},
      {16, 0x77052385bf1533fdULL, 0xbb54b067caa4e26eULL},
      {17, 0x4077e47ac466c054ULL, 0x98b88d73e8063d47ULL},
      {63, 0x7cbd3f979a063e50ULL, 0x4a83502f77d15051ULL},
      {64, 0x4ba75836384dad8cULL, 0x3fcdd4c07d07af1eULL},
  };
  std::vector<uint8_t> message(64);
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<uint8_t>(i);
  for (const Vector& v : vectors) {
    SipHasher128 whole(kTestKey);
    whole.Bytes(message.data(), v.n);
    EXPECT_EQ(whole.Finish(), (ResponseCacheKey{v.hi, v.lo})) << v.n;
    // Fed in pieces of every size from 1 to 9 bytes: the same hash.
    for (size_t piece = 1; piece <= 9; ++piece) {
      SipHasher128 pieces(kTestKey);
      for (size_t at = 0; at < v.n; at += piece) {
        pieces.Bytes(message.data() + at, std::min(piece, v.n - at));
      }
      EXPECT_EQ(pieces.Finish(), (ResponseCacheKey{v.hi, v.lo})) << v.n << " by " << piece;
    }
  }
}

TEST(ParseCacheConfig, LocalSizeAndEveryError) {
  Result<std::optional<ResponseCacheOptions>> none = ParseCacheConfig({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  const std::vector<std::string> local = {"local,size=1048576"};
  Result<std::optional<ResponseCacheOptions>> parsed = ParseCacheConfig(local);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_TRUE(parsed->has_value());
  EXPECT_EQ((*parsed)->size_bytes, 1048576u);
  EXPECT_FALSE((*parsed)->hash_key.has_value());

  struct Case {
    std::vector<std::string> values;
    std::string message;
  };
  const Case cases[] = {
      {{"local"}, "--cache-config 'local': expected <cache>,<setting>=<value>"},
      {{"local,size"}, "--cache-config 'local,size': expected <cache>,<setting>=<value>"},
      {{",size=10"}, "--cache-config ',size=10': expected <cache>,<setting>=<value>"},
      {{"local,=10"}, "--cache-config 'local,=10': expected <cache>,<setting>=<value>"},
      {{"redis,host=localhost"},
       "--cache-config 'redis,host=localhost': cache 'redis' is not available: kiln has the "
       "'local' cache only"},
      {{"local,capacity=10"},
       "--cache-config 'local,capacity=10': unknown setting 'capacity' of the local cache"},
      {{"local,size=10", "local,size=20"},
       "--cache-config 'local,size=20': 'size' is given more than once"},
      {{"local,size=0"}, "--cache-config 'local,size=0': size '0' is not a whole number of bytes"},
      {{"local,size=-5"}, "size '-5' is not a whole number of bytes >= 1"},
      {{"local,size=1MB"}, "size '1MB' is not a whole number of bytes >= 1"},
      {{"local,size="}, "size '' is not a whole number of bytes >= 1"},
      {{"local,size=99999999999999999999999"}, "is not a whole number of bytes"},
      {{"local,size=1,2"}, "size '1,2' is not a whole number of bytes"},
  };
  for (const Case& c : cases) {
    Result<std::optional<ResponseCacheOptions>> r = ParseCacheConfig(c.values);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

InferInput BytesInput(std::string name, std::vector<std::string> elements) {
  const int64_t n = static_cast<int64_t>(elements.size());
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kBytes, Shape{n});
  EXPECT_TRUE(t.ok());
  for (int64_t i = 0; i < n; ++i) t->data<std::string>()[i] = elements[static_cast<size_t>(i)];
  return {std::move(name), std::move(t).value()};
}

// A request of two FP32 inputs, a BYTES input and one requested output.
InferRequest BaseRequest() {
  InferRequest r;
  r.id = "a";
  r.inputs.push_back(FloatInput("x", {2, 2}, {1, 2, 3, 4}));
  r.inputs.push_back(FloatInput("y", {1, 3}, {5, 6, 7}));
  r.inputs.push_back(BytesInput("s", {"ab", "c"}));
  r.outputs.push_back({"out"});
  return r;
}

// A deep copy: the variants below change one thing without touching the base's buffers.
InferRequest Copy(const InferRequest& r) {
  InferRequest c;
  c.id = r.id;
  c.priority = r.priority;
  c.timeout_us = r.timeout_us;
  c.outputs = r.outputs;
  for (const InferInput& in : r.inputs) {
    Result<OwnedTensor> t = OwnedTensor::CopyOf(in.tensor.view());
    EXPECT_TRUE(t.ok());
    c.inputs.push_back({in.name, std::move(t).value()});
  }
  return c;
}

TEST(ResponseCacheKey, ChangesWithEverythingThatDecidesTheResponse) {
  ResponseCache cache(Options(1 << 20));
  const InferRequest base = BaseRequest();
  const std::optional<ResponseCacheKey> key = cache.Key("m", 1, 0, base);
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(cache.Key("m", 1, 0, Copy(base)), key) << "a copy has the same key";

  struct Variant {
    std::string what;
    std::string model = "m";
    int64_t version = 1;
    uint64_t load = 0;
    InferRequest request;
  };
  std::vector<Variant> variants;
  const auto add = [&](std::string what, auto change) {
    Variant v{std::move(what), "m", 1, 0, Copy(base)};
    change(v);
    variants.push_back(std::move(v));
  };
  add("model name", [](Variant& v) { v.model = "n"; });
  add("model name prefix", [](Variant& v) { v.model = "m2"; });
  add("version", [](Variant& v) { v.version = 2; });
  add("load of the version", [](Variant& v) { v.load = 1; });
  add("input name", [](Variant& v) { v.request.inputs[0].name = "z"; });
  add("dtype (same bytes)", [](Variant& v) {
    // INT32 with the FP32 bit patterns of 1, 2, 3, 4: only the datatype differs.
    const OwnedTensor& f = v.request.inputs[0].tensor;
    Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt32, f.shape());
    ASSERT_TRUE(t.ok());
    std::memcpy(t->raw_data(), f.raw_data(), f.size_bytes());
    v.request.inputs[0].tensor = std::move(t).value();
  });
  add("shape (same bytes)", [](Variant& v) {
    ASSERT_TRUE(v.request.inputs[0].tensor.Reshape(Shape{4, 1}).ok());
  });
  add("rank (same bytes)",
      [](Variant& v) { ASSERT_TRUE(v.request.inputs[0].tensor.Reshape(Shape{4}).ok()); });
  add("one bit of the bytes", [](Variant& v) {
    static_cast<uint8_t*>(v.request.inputs[1].tensor.raw_data())[0] ^= 1;  // the copy's own
  });
  add("BYTES element boundaries", [](Variant& v) {
    v.request.inputs[2] = BytesInput("s", {"a", "bc"});
  });
  add("BYTES element count", [](Variant& v) { v.request.inputs[2] = BytesInput("s", {"abc"}); });
  add("BYTES contents", [](Variant& v) { v.request.inputs[2] = BytesInput("s", {"ab", "d"}); });
  add("an input more", [](Variant& v) { v.request.inputs.push_back(FloatInput("w", {1}, {0})); });
  add("an input less", [](Variant& v) { v.request.inputs.pop_back(); });
  add("all outputs", [](Variant& v) { v.request.outputs.clear(); });
  add("another output", [](Variant& v) { v.request.outputs[0].name = "out2"; });
  add("an output more", [](Variant& v) { v.request.outputs.push_back({"out2"}); });
  add("output order", [](Variant& v) { v.request.outputs = {{"out2"}, {"out"}}; });

  std::vector<ResponseCacheKey> seen = {*key};
  for (const Variant& v : variants) {
    const std::optional<ResponseCacheKey> k = cache.Key(v.model, v.version, v.load, v.request);
    ASSERT_TRUE(k.has_value()) << v.what;
    for (const ResponseCacheKey& other : seen) EXPECT_NE(*k, other) << v.what;
    seen.push_back(*k);
  }
  // The output order variant is distinct from the base with outputs {out, out2} too.
  InferRequest two = Copy(base);
  two.outputs = {{"out"}, {"out2"}};
  InferRequest swapped = Copy(base);
  swapped.outputs = {{"out2"}, {"out"}};
  EXPECT_NE(cache.Key("m", 1, 0, two), cache.Key("m", 1, 0, swapped));
}

TEST(ResponseCacheKey, ComparesBitsNotValues) {
  ResponseCache cache(Options(1 << 20));
  InferRequest zero;
  zero.inputs.push_back(FloatInput("x", {2}, {0.0f, 1.0f}));
  InferRequest negative_zero;
  negative_zero.inputs.push_back(FloatInput("x", {2}, {-0.0f, 1.0f}));
  EXPECT_NE(cache.Key("m", 1, 0, zero), cache.Key("m", 1, 0, negative_zero));
}

TEST(ResponseCacheKey, IgnoresInputOrderIdAndSchedulingParameters) {
  ResponseCache cache(Options(1 << 20));
  const InferRequest base = BaseRequest();
  const std::optional<ResponseCacheKey> key = cache.Key("m", 1, 0, base);
  InferRequest other = Copy(base);
  std::swap(other.inputs[0], other.inputs[2]);
  other.id = "another id";
  other.priority = 2;
  other.timeout_us = 1000;
  other.cancellation = std::make_shared<Cancellation>();
  EXPECT_EQ(cache.Key("m", 1, 0, other), key);
}

TEST(ResponseCacheKey, DependsOnTheHashKey) {
  ResponseCache a(Options(1 << 20));
  ResponseCacheOptions other = Options(1 << 20);
  other.hash_key = std::array<uint64_t, 2>{1, 2};
  ResponseCache b(other);
  ResponseCache random1(ResponseCacheOptions{1 << 20, std::nullopt});
  ResponseCache random2(ResponseCacheOptions{1 << 20, std::nullopt});
  const InferRequest r = BaseRequest();
  EXPECT_NE(a.Key("m", 1, 0, r), b.Key("m", 1, 0, r));
  EXPECT_NE(random1.Key("m", 1, 0, r), random2.Key("m", 1, 0, r))
      << "keys drawn from the OS differ";
}

TEST(ResponseCacheKey, RefusesInputsItCannotHash) {
  ResponseCache cache(Options(1 << 20));
  InferRequest no_data = BaseRequest();
  no_data.inputs[0].tensor = OwnedTensor();
  EXPECT_FALSE(cache.Key("m", 1, 0, no_data).has_value());
  // A view of device memory (never dereferenced here).
  InferRequest on_device = BaseRequest();
  static float device_stand_in[4];
  on_device.inputs[0].tensor = OwnedTensor::Borrow(
      Tensor(DataType::kFloat32, Shape{2, 2}, device_stand_in, Device::Cuda(0)), nullptr);
  EXPECT_FALSE(cache.Key("m", 1, 0, on_device).has_value());
}

// Outputs of `elements` FP32 values, all equal to `value`.
std::vector<InferOutput> Outputs(float value, int64_t elements = 4, std::string name = "out") {
  InferInput in = FloatInput(std::move(name), {elements}, std::vector<float>(elements, value));
  return {InferOutput{std::move(in.name), std::move(in.tensor)}};
}

ResponseCacheKey K(uint64_t i) { return {i * 7919, i}; }

TEST(ResponseCache, MissThenHitSharesTheTensors) {
  ResponseCache cache(Options(1 << 20));
  EXPECT_EQ(cache.Lookup(K(1)), nullptr);
  const std::vector<InferOutput> outs = Outputs(3.5f);
  EXPECT_EQ(cache.Insert(K(1), outs), ResponseCache::InsertResult::kInserted);
  const ResponseCache::Outputs hit = cache.Lookup(K(1));
  ASSERT_NE(hit, nullptr);
  ASSERT_EQ(hit->size(), 1u);
  EXPECT_EQ((*hit)[0].name, "out");
  EXPECT_EQ((*hit)[0].tensor.raw_data(), outs[0].tensor.raw_data()) << "shared, not copied";
  EXPECT_EQ(FloatValues((*hit)[0].tensor), std::vector<float>(4, 3.5f));
  EXPECT_EQ(cache.Lookup(K(2)), nullptr);

  const ResponseCacheStats s = cache.Stats();
  EXPECT_EQ(s.capacity_bytes, 1u << 20);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.lookups, 3u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.insertions, 1u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.used_bytes, *ResponseCache::EntryBytes(outs));
}

TEST(ResponseCache, EntryBytesCountTensorsNamesStringsAndBookkeeping) {
  const std::vector<InferOutput> floats = Outputs(1, 10, "abc");
  EXPECT_EQ(ResponseCache::EntryBytes(floats),
            ResponseCache::kEntryOverheadBytes + ResponseCache::kOutputOverheadBytes + 3 + 40);
  const std::string longer = "a string longer than the inline buffer";
  InferInput s = BytesInput("s", {"hello", "", longer});
  const std::vector<InferOutput> strings = {{s.name, s.tensor}};
  EXPECT_EQ(ResponseCache::EntryBytes(strings),
            ResponseCache::kEntryOverheadBytes + ResponseCache::kOutputOverheadBytes + 1 +
                3 * sizeof(std::string) + 5 + 0 + longer.size());
  EXPECT_EQ(ResponseCache::EntryBytes({}), ResponseCache::kEntryOverheadBytes);
  // Tensors without data or outside host memory cannot be cached.
  EXPECT_FALSE(ResponseCache::EntryBytes({{"x", OwnedTensor()}}).has_value());
  static float device_stand_in[4];
  const std::vector<InferOutput> on_device = {
      {"x", OwnedTensor::Borrow(
                Tensor(DataType::kFloat32, Shape{4}, device_stand_in, Device::Cuda(0)), nullptr)}};
  EXPECT_FALSE(ResponseCache::EntryBytes(on_device).has_value());
  ResponseCache cache(Options(1 << 20));
  EXPECT_EQ(cache.Insert(K(1), on_device), ResponseCache::InsertResult::kNotCacheable);
  EXPECT_EQ(cache.Stats().entries, 0u);
}

TEST(ResponseCache, EvictsLeastRecentlyUsedFirst) {
  const uint64_t entry = *ResponseCache::EntryBytes(Outputs(0));
  ResponseCache cache(Options(3 * entry));  // room for exactly three
  for (uint64_t i = 1; i <= 3; ++i) {
    ASSERT_EQ(cache.Insert(K(i), Outputs(static_cast<float>(i))),
              ResponseCache::InsertResult::kInserted);
  }
  EXPECT_EQ(cache.Stats().used_bytes, 3 * entry);
  ASSERT_NE(cache.Lookup(K(1)), nullptr);  // 1 becomes the most recently used: order 1, 3, 2
  EXPECT_EQ(cache.Insert(K(4), Outputs(4)), ResponseCache::InsertResult::kInserted);
  EXPECT_EQ(cache.Lookup(K(2)), nullptr) << "2 was the least recently used";
  for (uint64_t i : {1, 3, 4}) {
    const ResponseCache::Outputs hit = cache.Lookup(K(i));
    ASSERT_NE(hit, nullptr) << i;
    EXPECT_EQ(FloatValues((*hit)[0].tensor)[0], static_cast<float>(i));
  }
  // Order now 4, 3, 1: a re-insert of a present key refreshes it and keeps the first value.
  EXPECT_EQ(cache.Insert(K(1), Outputs(100)), ResponseCache::InsertResult::kPresent);
  EXPECT_EQ(FloatValues((*cache.Lookup(K(1)))[0].tensor)[0], 1.f);
  EXPECT_EQ(cache.Insert(K(5), Outputs(5)), ResponseCache::InsertResult::kInserted);
  EXPECT_EQ(cache.Lookup(K(3)), nullptr) << "3 was the least recently used";
  const ResponseCacheStats s = cache.Stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.insertions, 5u);
  EXPECT_EQ(s.used_bytes, 3 * entry);
}

TEST(ResponseCache, ByteBudgetEvictsAsManyAsNeededAndRefusesOversize) {
  const uint64_t small = *ResponseCache::EntryBytes(Outputs(0, 4));
  const uint64_t big = *ResponseCache::EntryBytes(Outputs(0, 64));  // 240 bytes more
  ResponseCache cache(Options(small * 4 + 100));
  for (uint64_t i = 1; i <= 4; ++i)
    ASSERT_EQ(cache.Insert(K(i), Outputs(0, 4)), ResponseCache::InsertResult::kInserted);
  // The big entry needs the room of two small ones (plus the 100 spare bytes): the two least
  // recently used go.
  ASSERT_LT(big, 3 * small + 100);
  ASSERT_GT(big, small + 100);
  EXPECT_EQ(cache.Insert(K(10), Outputs(0, 64)), ResponseCache::InsertResult::kInserted);
  EXPECT_EQ(cache.Lookup(K(1)), nullptr);
  EXPECT_EQ(cache.Lookup(K(2)), nullptr);
  EXPECT_NE(cache.Lookup(K(3)), nullptr);
  EXPECT_NE(cache.Lookup(K(4)), nullptr);
  ResponseCacheStats s = cache.Stats();
  EXPECT_EQ(s.used_bytes, 2 * small + big);
  EXPECT_LE(s.used_bytes, s.capacity_bytes);

  // Larger than the whole budget: not inserted, nothing evicted.
  const std::vector<InferOutput> huge = Outputs(0, 1000);
  ASSERT_GT(*ResponseCache::EntryBytes(huge), s.capacity_bytes);
  EXPECT_EQ(cache.Insert(K(20), huge), ResponseCache::InsertResult::kOversize);
  EXPECT_EQ(cache.Lookup(K(20)), nullptr);
  s = cache.Stats();
  EXPECT_EQ(s.oversize, 1u);
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.evictions, 2u);

  // Exactly the budget: fits, after evicting everything else.
  ResponseCache exact(Options(small));
  EXPECT_EQ(exact.Insert(K(1), Outputs(0, 4)), ResponseCache::InsertResult::kInserted);
  EXPECT_EQ(exact.Insert(K(2), Outputs(0, 4)), ResponseCache::InsertResult::kInserted);
  EXPECT_EQ(exact.Stats().entries, 1u);
  EXPECT_EQ(exact.Lookup(K(1)), nullptr);
  ResponseCache none(Options(small - 1));
  EXPECT_EQ(none.Insert(K(1), Outputs(0, 4)), ResponseCache::InsertResult::kOversize);
}

// Many threads look up and insert overlapping keys in a cache that holds a quarter of them:
// every hit returns the value its key was inserted with, and the counters add up.
TEST(ResponseCache, ConcurrentLookupsAndInsertions) {
  const uint64_t entry = *ResponseCache::EntryBytes(Outputs(0));
  ResponseCache cache(Options(16 * entry));
  constexpr int kThreads = 8;
  constexpr int kOps = 4000;
  std::atomic<int> wrong{0};
  std::atomic<uint64_t> hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint64_t x = 88172645463325252ULL + static_cast<uint64_t>(t);
      for (int i = 0; i < kOps; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const uint64_t k = x % 64;
        if (const ResponseCache::Outputs hit = cache.Lookup(K(k))) {
          ++hits;
          if (FloatValues((*hit)[0].tensor) != std::vector<float>(4, static_cast<float>(k))) {
            ++wrong;
          }
        } else {
          (void)cache.Insert(K(k), Outputs(static_cast<float>(k)));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  const ResponseCacheStats s = cache.Stats();
  EXPECT_EQ(s.lookups, static_cast<uint64_t>(kThreads * kOps));
  EXPECT_EQ(s.hits, hits.load());
  EXPECT_EQ(s.hits + s.misses, s.lookups);
  EXPECT_EQ(s.entries, 16u);
  EXPECT_EQ(s.used_bytes, 16 * entry);
  EXPECT_EQ(s.insertions - s.evictions, s.entries);
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.evictions, 0u);
}

}  // namespace
}  // namespace kiln
