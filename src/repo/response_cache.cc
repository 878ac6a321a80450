// SPDX-License-Identifier: Apache-2.0
// The response cache; see response_cache.h.
#include "repo/response_cache.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cstring>

#include "base/logging.h"

namespace kiln {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the response cache hashes integers as their in-memory (little-endian) bytes");

// 128 random bits from the kernel (getrandom never fails for 16 bytes once the pool is
// initialized; should it fail, a weaker key from the clock and an address is logged and used).
std::array<uint64_t, 2> RandomHashKey() {
  std::array<uint64_t, 2> key{};
  if (getrandom(key.data(), sizeof key, 0) == static_cast<ssize_t>(sizeof key)) return key;
  KILN_LOG_WARN("response cache: getrandom failed; the hash key is derived from the clock");
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  key[0] = static_cast<uint64_t>(now) * 0x9e3779b97f4a7c15ULL;
  key[1] = reinterpret_cast<uintptr_t>(&key) ^ std::rotl(key[0], 29);
  return key;
}

// Whether a tensor can be hashed or cached: it has data, in host memory, contiguous.
bool Cacheable(const Tensor& t) { return t.valid() && t.device().is_cpu() && t.is_contiguous(); }

uint64_t ElapsedNs(std::chrono::steady_clock::time_point since) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since)
          .count());
}

constexpr std::string_view kCacheConfigForm =
    "expected <cache>,<setting>=<value>, e.g. --cache-config local,size=1048576";

}  // namespace

Result<std::optional<ResponseCacheOptions>> ParseCacheConfig(std::span<const std::string> values) {
  if (values.empty()) return std::optional<ResponseCacheOptions>();
  std::optional<uint64_t> size;
  for (const std::string& value : values) {
    const auto error = [&](std::string_view what) {
      return Status::InvalidArgument(fmt::format("--cache-config '{}': {}", value, what));
    };
    const size_t comma = value.find(',');
    if (comma == std::string::npos) return error(kCacheConfigForm);
    const std::string_view cache = std::string_view(value).substr(0, comma);
    const std::string_view setting = std::string_view(value).substr(comma + 1);
    const size_t eq = setting.find('=');
    if (cache.empty() || eq == std::string_view::npos || eq == 0) return error(kCacheConfigForm);
    if (cache != "local") {
      return error(
          fmt::format("cache '{}' is not available: kiln has the 'local' cache only", cache));
    }
    const std::string_view key = setting.substr(0, eq);
    const std::string_view text = setting.substr(eq + 1);
    if (key != "size") {
      return error(fmt::format("unknown setting '{}' of the local cache (its setting: size)", key));
    }
    if (size.has_value()) return error("'size' is given more than once");
    uint64_t bytes = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), bytes);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || bytes == 0) {
      return error(fmt::format("size '{}' is not a whole number of bytes >= 1", text));
    }
    size = bytes;
  }
  ResponseCacheOptions options;
  options.size_bytes = *size;
  return std::optional<ResponseCacheOptions>(options);
}

SipHasher128::SipHasher128(std::array<uint64_t, 2> key)
    : v0_(0x736f6d6570736575ULL ^ key[0]),
      v1_(0x646f72616e646f6dULL ^ key[1] ^ 0xee),  // 0xee: the 128-bit output variant
      v2_(0x6c7967656e657261ULL ^ key[0]),
      v3_(0x7465646279746573ULL ^ key[1]) {}

void SipHasher128::Bytes(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (buffered_ > 0) {
    const size_t take = std::min(n, 8 - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < 8) return;
    uint64_t m;
    std::memcpy(&m, buffer_, 8);
    Compress(m);
    buffered_ = 0;
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t m;
    std::memcpy(&m, p, 8);
    Compress(m);
  }
  std::memcpy(buffer_, p, n);
  buffered_ = n;
}

ResponseCacheKey SipHasher128::Finish() {
  uint64_t last = total_ << 56;
  for (size_t i = 0; i < buffered_; ++i) last |= static_cast<uint64_t>(buffer_[i]) << (8 * i);
  Compress(last);
  v2_ ^= 0xee;
  for (int i = 0; i < 4; ++i) Round();
  const uint64_t first = v0_ ^ v1_ ^ v2_ ^ v3_;
  v1_ ^= 0xdd;
  for (int i = 0; i < 4; ++i) Round();
  const uint64_t second = v0_ ^ v1_ ^ v2_ ^ v3_;
  return {second, first};  // the output's bytes: `first` little-endian, then `second`
}

ResponseCache::ResponseCache(const ResponseCacheOptions& options)
    : capacity_bytes_(options.size_bytes),
      hash_key_(options.hash_key.has_value() ? *options.hash_key : RandomHashKey()) {}

std::optional<ResponseCacheKey> ResponseCache::Key(std::string_view model, int64_t version,
                                                   uint64_t load,
                                                   const InferRequest& request) const {
  std::vector<const InferInput*> inputs;
  inputs.reserve(request.inputs.size());
  for (const InferInput& in : request.inputs) {
    if (!Cacheable(in.tensor.view())) return std::nullopt;
    inputs.push_back(&in);
  }
  std::sort(inputs.begin(), inputs.end(),
            [](const InferInput* a, const InferInput* b) { return a->name < b->name; });
  SipHasher128 h(hash_key_);
  h.Str(model);
  h.U64(static_cast<uint64_t>(version));
  h.U64(load);
  h.U64(inputs.size());
  for (const InferInput* in : inputs) {
    const Tensor& t = in->tensor.view();
    h.Str(in->name);
    h.U64(static_cast<uint64_t>(t.dtype()));
    h.U64(static_cast<uint64_t>(t.rank()));
    for (int d = 0; d < t.rank(); ++d) h.U64(static_cast<uint64_t>(t.dim(d)));
    if (t.dtype() == DataType::kBytes) {
      const auto* elements = static_cast<const std::string*>(t.raw_data());
      const int64_t n = t.num_elements();
      for (int64_t i = 0; i < n; ++i) h.Str(elements[i]);
    } else {
      h.U64(t.size_bytes());
      h.Bytes(t.raw_data(), t.size_bytes());
    }
  }
  h.U64(request.outputs.size());
  for (const RequestedOutput& out : request.outputs) h.Str(out.name);
  return h.Finish();
}

std::optional<uint64_t> ResponseCache::EntryBytes(const std::vector<InferOutput>& outputs) {
  uint64_t bytes = kEntryOverheadBytes;
  for (const InferOutput& out : outputs) {
    const Tensor& t = out.tensor.view();
    if (!Cacheable(t)) return std::nullopt;
    bytes += kOutputOverheadBytes + out.name.size() + t.size_bytes();
    if (t.dtype() == DataType::kBytes) {
      const auto* elements = static_cast<const std::string*>(t.raw_data());
      for (int64_t i = 0; i < t.num_elements(); ++i) bytes += elements[i].size();
    }
  }
  return bytes;
}

ResponseCache::Outputs ResponseCache::Lookup(const ResponseCacheKey& key) {
  const auto start = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  ++stats_.lookups;
  Outputs found;
  if (auto it = index_.find(key); it != index_.end()) {
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, it->second);
    found = it->second->outputs;
  } else {
    ++stats_.misses;
  }
  stats_.lookup_ns += ElapsedNs(start);
  return found;
}

ResponseCache::InsertResult ResponseCache::Insert(const ResponseCacheKey& key,
                                                  const std::vector<InferOutput>& outputs) {
  const auto start = std::chrono::steady_clock::now();
  const std::optional<uint64_t> bytes = EntryBytes(outputs);
  // The entry (a copy of the vector: names and tensor handles, not tensor bytes) is made before
  // the lock, and dropped after it when not kept; evicted entries are freed after it too.
  Outputs entry;
  if (bytes.has_value() && *bytes <= capacity_bytes_) {
    entry = std::make_shared<const std::vector<InferOutput>>(outputs);
  }
  std::vector<Outputs> evicted;
  MutexLock lock(mu_);
  const auto done = [&](InsertResult r) KILN_REQUIRES(mu_) {
    stats_.insertion_ns += ElapsedNs(start);
    return r;
  };
  if (!bytes.has_value()) return done(InsertResult::kNotCacheable);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return done(InsertResult::kPresent);
  }
  if (*bytes > capacity_bytes_) {
    ++stats_.oversize;
    return done(InsertResult::kOversize);
  }
  while (stats_.used_bytes + *bytes > capacity_bytes_) {
    Entry& victim = lru_.back();
    index_.erase(victim.key);
    stats_.used_bytes -= victim.bytes;
    evicted.push_back(std::move(victim.outputs));
    lru_.pop_back();
    ++stats_.evictions;
  }
  lru_.push_front(Entry{key, std::move(entry), *bytes});
  index_.emplace(key, lru_.begin());
  stats_.used_bytes += *bytes;
  ++stats_.insertions;
  return done(InsertResult::kInserted);
}

ResponseCacheStats ResponseCache::Stats() const {
  MutexLock lock(mu_);
  ResponseCacheStats s = stats_;
  s.capacity_bytes = capacity_bytes_;
  s.entries = index_.size();
  return s;
}

}  // namespace kiln
