// SPDX-License-Identifier: Apache-2.0
#pragma once
// The response cache (the reference server's `response_cache { enable: true }` with
// `--cache-config local,size=BYTES`): responses of earlier requests, kept in memory up to a byte
// budget and shared by every model that enables it, so that a repeated request is answered
// without running the model.
//
//   KILN_ASSIGN_OR_RETURN(std::optional<ResponseCacheOptions> options,
//                         ParseCacheConfig({"local,size=1048576"}));   // kiln serve's flag
//   auto cache = std::make_shared<ResponseCache>(*options);
//   std::optional<ResponseCacheKey> key = cache->Key("digits", 1, load, request);  // validated
//   if (key) {
//     if (ResponseCache::Outputs hit = cache->Lookup(*key)) ...      // answer with *hit
//     ... run the model; on success: cache->Insert(*key, response.outputs);
//   }
//   ResponseCacheStats stats = cache->Stats();                    // /metrics
//
// The model side lives in LoadedModelImpl::Infer (repo/loaded_model.h): a hit is answered on the
// caller's thread, a miss runs as usual and its successful response is inserted.
//
// NOTE (design).
//   Key. A 128-bit keyed hash (SipHash-2-4 with 128-bit output, written here from its published
//   description) of one unambiguous encoding of everything that decides the response: the model
//   name and version, and which load of them (a version reloaded with new files must not answer
//   from its predecessor's entries, which are left to age out); every input, in name order (so the
//   order a client lists them in does not matter), as its name, datatype, shape and bytes (a BYTES
//   element as its length and bytes); then the requested outputs in the order asked (the response
//   lists them in that order), as their names. Every variable-length field is length-prefixed and
//   every list counted, so two different requests never encode to the same bytes; they share a key
//   only if the hash collides. The hash key is drawn from the operating system's random source when
//   the cache is made, so a client cannot compute keys, nor craft two requests that collide. For a
//   random 128-bit function the chance that any two of n distinct requests collide is below n^2 /
//   2^129: about 1.5e-15 after 10^12 distinct requests. (The reference server uses a 64-bit unkeyed
//   hash: 2.7e-2 at 10^9 requests.) Only a key is stored, not the request, so a hit costs one hash
//   of the inputs and one map lookup. What is not in the key: the request id (written onto each
//   response), priority, timeout and cancellation (they decide when a response comes, not what it
//   is), and the classification extension's class count, which the server applies to the model's
//   response after the model (tensor/classification.h): one cached response serves both. A
//   RequestedOutput carries only a name; a field added to it that changes the model's response must
//   be added to the key. Entries. An entry holds the response's outputs (names and OwnedTensors).
//   The tensors are shared, not copied: the response that was sent and every later hit point at the
//   same buffers, which nobody may write to (InferOutput tensors are read-only once a model has
//   answered). Only tensors in host memory, contiguous, are cached (as the reference does);
//   a response with anything else is not inserted.
//   Budget. An entry costs its tensors' bytes (a BYTES element: the std::string plus its
//   characters) plus its output names plus fixed bookkeeping (kEntryOverheadBytes, and
//   kOutputOverheadBytes per output). Inserting evicts least recently used entries (a hit makes
//   an entry the most recently used) until the new one fits; an entry larger than the whole
//   budget is not inserted and evicts nothing. Inserting a key that is present keeps the
//   present entry (two concurrent misses of one request compute the same response).
//
// Thread safety: ResponseCache is thread-safe (one mutex; the hash runs outside it). The
// returned outputs are immutable and may be read on any thread for as long as they are held.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/result.h"
#include "sched/request.h"

namespace kiln {

struct ResponseCacheOptions {
  uint64_t size_bytes = 0;  // the byte budget of all entries together
  // The hash key (two 64-bit words); unset: drawn from the OS random source by the constructor.
  // Tests fix it to get reproducible keys.
  std::optional<std::array<uint64_t, 2>> hash_key;
};

// The values of kiln serve's repeatable `--cache-config` flag, as the reference server takes
// them: each `<cache>,<setting>=<value>`; kiln has the `local` cache, whose one setting is `size`
// (bytes, a decimal number >= 1). No values: no cache (nullopt). INVALID_ARGUMENT naming
// --cache-config and the value for anything else: a value without ',' or '=', another cache
// name, an unknown or repeated setting, a size that is not a whole number of bytes >= 1.
Result<std::optional<ResponseCacheOptions>> ParseCacheConfig(std::span<const std::string> values);

// A 128-bit response key.
struct ResponseCacheKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
  friend bool operator==(const ResponseCacheKey&, const ResponseCacheKey&) = default;
};

// The cache's counters and gauges (server-wide; per-model hits and misses are in the models'
// statistics, sched/stats.h).
struct ResponseCacheStats {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;    // bytes charged for the entries held now
  uint64_t entries = 0;       // entries held now
  uint64_t lookups = 0;       // Lookup calls
  uint64_t hits = 0;          // lookups that found an entry
  uint64_t misses = 0;        // lookups that found none
  uint64_t insertions = 0;    // entries added
  uint64_t evictions = 0;     // entries dropped to make room
  uint64_t oversize = 0;      // responses not inserted: larger than the whole budget
  uint64_t lookup_ns = 0;     // time in Lookup (the lock and the map), all lookups
  uint64_t insertion_ns = 0;  // time in Insert, all insertions tried
};

// SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012) with its
// 128-bit output, over a stream of bytes fed in any pieces: 64-bit little-endian words, two
// compression rounds per word, the last word carrying the length's low byte in its top byte,
// four finalization rounds per output half. The result's lo word holds the first 8 output
// bytes (little-endian), hi the last 8. Not thread-safe; one hasher per hash.
//
//   SipHasher128 h(key);
//   h.Bytes(data, n);
//   h.U64(42);
//   ResponseCacheKey k = h.Finish();   // once
class SipHasher128 {
 public:
  explicit SipHasher128(std::array<uint64_t, 2> key);
  void Bytes(const void* data, size_t n);
  // The 8 bytes of `v` (little-endian).
  void U64(uint64_t v) { Bytes(&v, sizeof v); }
  // A length-prefixed string: U64(size) then its bytes.
  void Str(std::string_view s) {
    U64(s.size());
    Bytes(s.data(), s.size());
  }
  // REQUIRES: called once.
  ResponseCacheKey Finish();

 private:
  void Compress(uint64_t m) {
    v3_ ^= m;
    Round();
    Round();
    v0_ ^= m;
  }
  void Round() {
    v0_ += v1_;
    v1_ = std::rotl(v1_, 13);
    v1_ ^= v0_;
    v0_ = std::rotl(v0_, 32);
    v2_ += v3_;
    v3_ = std::rotl(v3_, 16);
    v3_ ^= v2_;
    v0_ += v3_;
    v3_ = std::rotl(v3_, 21);
    v3_ ^= v0_;
    v2_ += v1_;
    v1_ = std::rotl(v1_, 17);
    v1_ ^= v2_;
    v2_ = std::rotl(v2_, 32);
  }

  uint64_t v0_, v1_, v2_, v3_;
  uint8_t buffer_[8] = {};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

class ResponseCache {
 public:
  // The outputs of one cached response (shared, immutable).
  using Outputs = std::shared_ptr<const std::vector<InferOutput>>;

  // Bookkeeping charged per entry and per output on top of the bytes of names and tensors
  // (the entry's list and map nodes, the outputs vector, each output's tensor and buffer
  // objects).
  static constexpr uint64_t kEntryOverheadBytes = 160;
  static constexpr uint64_t kOutputOverheadBytes = 192;

  explicit ResponseCache(const ResponseCacheOptions& options);
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;

  // The key of `request` to model `model` version `version` as loaded the `load`-th time (any
  // number that differs between two loads of one version: LoadedModelImpl numbers every load of
  // the process); nullopt when the request cannot be cached (an input without data, not in host
  // memory, or not contiguous). REQUIRES: the request passed the model's validation
  // (ValidateInferRequest): input names are unique.
  std::optional<ResponseCacheKey> Key(std::string_view model, int64_t version, uint64_t load,
                                      const InferRequest& request) const;

  // The cached outputs under `key` (and the entry becomes the most recently used), or null.
  Outputs Lookup(const ResponseCacheKey& key) KILN_EXCLUDES(mu_);

  enum class InsertResult { kInserted, kPresent, kOversize, kNotCacheable };
  // Caches `outputs` under `key` (sharing the tensors), evicting least recently used entries
  // until it fits. kPresent: the key was cached already (kept, made most recently used);
  // kOversize: larger than the budget (nothing evicted); kNotCacheable: an output tensor is
  // invalid, not in host memory or not contiguous.
  InsertResult Insert(const ResponseCacheKey& key, const std::vector<InferOutput>& outputs)
      KILN_EXCLUDES(mu_);

  // What an entry of `outputs` costs against the budget; nullopt when it cannot be cached.
  static std::optional<uint64_t> EntryBytes(const std::vector<InferOutput>& outputs);

  ResponseCacheStats Stats() const KILN_EXCLUDES(mu_);
  uint64_t capacity_bytes() const { return capacity_bytes_; }

 private:
  struct KeyHash {
    size_t operator()(const ResponseCacheKey& k) const { return static_cast<size_t>(k.lo); }
  };
  struct Entry {
    ResponseCacheKey key;
    Outputs outputs;
    uint64_t bytes = 0;
  };
  using Lru = std::list<Entry>;

  const uint64_t capacity_bytes_;
  const std::array<uint64_t, 2> hash_key_;
  mutable Mutex mu_;
  Lru lru_ KILN_GUARDED_BY(mu_);  // front: most recently used
  std::unordered_map<ResponseCacheKey, Lru::iterator, KeyHash> index_ KILN_GUARDED_BY(mu_);
  ResponseCacheStats stats_ KILN_GUARDED_BY(mu_);  // capacity_bytes, entries filled by Stats()
};

}  // namespace kiln
