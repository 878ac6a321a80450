// SPDX-License-Identifier: Apache-2.0
// Reference TfIdfVectorizer (opset 9): n-gram counting over INT32 / INT64 / BYTES sequences
// with skips, in TF, IDF or TFIDF mode.
//
// NOTE on the approach: the pool is unpacked once at load into one map per n-gram length from
// the n-gram (as int64 values or strings) to its output index (ngram_indexes, in pool order;
// ngram_counts[n - 1] is where the n-grams of length n start in the pool). At run time, for each
// row, each n in [min_gram_length, max_gram_length], each skip in [0, max_skip_count] (one pass
// only for n = 1, where skips do not change anything) and each start position, the n-gram
// x[i], x[i + skip + 1], ... is looked up and its output slot counted, as onnxruntime does.
// Output: TF the counts, IDF weight where the count is nonzero, TFIDF count * weight (weights
// default to 1).

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

enum class TfIdfMode { kTf, kIdf, kTfIdf };

constexpr std::string_view kOp = "TfIdfVectorizer";

template <typename K>
using GramMaps = std::vector<std::map<std::vector<K>, int64_t>>;  // index n - 1

class TfIdfKernel final : public Kernel {
 public:
  TfIdfKernel(TfIdfMode mode, int64_t min_gram, int64_t max_gram, int64_t max_skip,
              int64_t out_size, std::vector<float> weights, GramMaps<int64_t> int_grams,
              GramMaps<std::string> str_grams, bool strings)
      : mode_(mode),
        min_gram_(min_gram),
        max_gram_(max_gram),
        max_skip_(max_skip),
        out_size_(out_size),
        weights_(std::move(weights)),
        int_grams_(std::move(int_grams)),
        str_grams_(std::move(str_grams)),
        strings_(strings) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, kOp));
    const Tensor& x = ctx.input(0);
    if (x.rank() != 1 && x.rank() != 2) {
      return OpError(kOp, "X {} must be [N] or [B, N]", x.shape().ToString());
    }
    const bool is_string = x.dtype() == DataType::kBytes;
    if (is_string != strings_) {
      return OpError(kOp, "X has dtype {} but the pool holds {}", DataTypeName(x.dtype()),
                     strings_ ? "strings" : "integers");
    }
    const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
    const int64_t len = x.dim(x.rank() - 1);
    const Shape out = x.rank() == 2 ? Shape{rows, out_size_} : Shape{out_size_};
    std::vector<double> counts(static_cast<size_t>(rows * out_size_), 0.0);
    Status st = Status::OK();
    if (strings_) {
      const auto* p = x.data<const std::string>();
      Count(
          str_grams_, [&](int64_t i) -> const std::string& { return p[i]; }, rows, len, counts);
    } else if (x.dtype() == DataType::kInt32) {
      const auto* p = x.data<const int32_t>();
      Count(
          int_grams_, [&](int64_t i) { return int64_t{p[i]}; }, rows, len, counts);
    } else if (x.dtype() == DataType::kInt64) {
      const auto* p = x.data<const int64_t>();
      Count(
          int_grams_, [&](int64_t i) { return p[i]; }, rows, len, counts);
    } else {
      return OpError(kOp, "unsupported dtype {}", DataTypeName(x.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat32, out));
    float* py = y.data<float>();
    for (int64_t i = 0; i < rows * out_size_; ++i) {
      const double c = counts[static_cast<size_t>(i)];
      const size_t slot = static_cast<size_t>(i % out_size_);
      const double w = weights_.empty() ? 1.0 : static_cast<double>(weights_[slot]);
      switch (mode_) {
        case TfIdfMode::kTf:
          py[i] = static_cast<float>(c);
          break;
        case TfIdfMode::kIdf:
          py[i] = c > 0 ? static_cast<float>(w) : 0.0f;
          break;
        case TfIdfMode::kTfIdf:
          py[i] = static_cast<float>(c * w);
          break;
      }
    }
    return st;
  }

 private:
  template <typename K, typename At>
  void Count(const GramMaps<K>& grams, const At& at, int64_t rows, int64_t len,
             std::vector<double>& counts) const {
    std::vector<K> key;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t n = min_gram_; n <= max_gram_; ++n) {
        if (n > static_cast<int64_t>(grams.size())) break;
        const auto& map = grams[static_cast<size_t>(n - 1)];
        if (map.empty()) continue;
        const int64_t skips = n == 1 ? 0 : max_skip_;
        for (int64_t s = 0; s <= skips; ++s) {
          const int64_t stride = s + 1;
          for (int64_t i = 0; i + (n - 1) * stride < len; ++i) {
            key.clear();
            for (int64_t k = 0; k < n; ++k) key.push_back(at(r * len + i + k * stride));
            auto it = map.find(key);
            if (it != map.end()) counts[static_cast<size_t>(r * out_size_ + it->second)] += 1;
          }
        }
      }
    }
  }

  TfIdfMode mode_;
  int64_t min_gram_, max_gram_, max_skip_, out_size_;
  std::vector<float> weights_;
  GramMaps<int64_t> int_grams_;
  GramMaps<std::string> str_grams_;
  bool strings_;
};

// Splits `pool` into per-length maps. REQUIRES nothing; every inconsistency is an error.
template <typename K>
Result<GramMaps<K>> BuildGrams(const std::vector<K>& pool, const std::vector<int64_t>& counts,
                               const std::vector<int64_t>& indexes, int64_t out_size) {
  GramMaps<K> maps(counts.size());
  const int64_t pool_size = static_cast<int64_t>(pool.size());
  size_t next_index = 0;
  for (size_t l = 0; l < counts.size(); ++l) {
    const int64_t n = static_cast<int64_t>(l) + 1;
    const int64_t begin = counts[l];
    const int64_t end = l + 1 < counts.size() ? counts[l + 1] : pool_size;
    if (begin < 0 || end < begin || end > pool_size || (end - begin) % n != 0) {
      return OpError(kOp, "ngram_counts {} does not split the pool of {} into {}-grams", begin,
                     pool_size, n);
    }
    for (int64_t p = begin; p < end; p += n) {
      if (next_index >= indexes.size()) {
        return OpError(kOp, "ngram_indexes has {} entries, fewer than the pool's n-grams",
                       indexes.size());
      }
      const int64_t slot = indexes[next_index++];
      if (slot < 0 || slot >= out_size) {
        return OpError(kOp, "ngram_indexes entry {} is out of range", slot);
      }
      maps[l][std::vector<K>(pool.begin() + p, pool.begin() + p + n)] = slot;
    }
  }
  return maps;
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateTfIdfVectorizer(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::string mode_s, attrs.String("mode", ""));
  TfIdfMode mode;
  if (mode_s == "TF") {
    mode = TfIdfMode::kTf;
  } else if (mode_s == "IDF") {
    mode = TfIdfMode::kIdf;
  } else if (mode_s == "TFIDF") {
    mode = TfIdfMode::kTfIdf;
  } else {
    return OpError(kOp, "attribute 'mode' is '{}', expected TF, IDF or TFIDF", mode_s);
  }
  KILN_ASSIGN_OR_RETURN(int64_t min_gram, attrs.Int("min_gram_length", 0));
  KILN_ASSIGN_OR_RETURN(int64_t max_gram, attrs.Int("max_gram_length", 0));
  KILN_ASSIGN_OR_RETURN(int64_t max_skip, attrs.Int("max_skip_count", 0));
  if (min_gram < 1 || max_gram < min_gram || max_gram > 1024) {
    return OpError(kOp, "need 1 <= min_gram_length {} <= max_gram_length {} <= 1024", min_gram,
                   max_gram);
  }
  if (max_skip < 0 || max_skip > (int64_t{1} << 20)) {
    return OpError(kOp, "attribute 'max_skip_count' is {}, expected [0, 2^20]", max_skip);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> counts, attrs.Ints("ngram_counts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> indexes, attrs.Ints("ngram_indexes"));
  if (indexes.empty()) return OpError(kOp, "attribute 'ngram_indexes' is required");
  int64_t out_size = 0;
  for (int64_t i : indexes) {
    if (i < 0 || i >= (int64_t{1} << 24)) {
      return OpError(kOp, "ngram_indexes entry {} is out of range [0, 2^24)", i);
    }
    out_size = std::max(out_size, i + 1);
  }
  std::vector<float> weights;
  if (const Attribute* a = info.node().FindAttribute("weights")) {
    if (a->type != AttributeType::kFloats)
      return OpError(kOp, "attribute 'weights' must be FLOATS");
    weights = a->floats;
    if (static_cast<int64_t>(weights.size()) != static_cast<int64_t>(indexes.size())) {
      return OpError(kOp, "attribute 'weights' has {} entries, ngram_indexes {}", weights.size(),
                     indexes.size());
    }
    // Weights are given per pool n-gram; re-key them by output slot.
    std::vector<float> by_slot(static_cast<size_t>(out_size), 0.0f);
    for (size_t i = 0; i < indexes.size(); ++i)
      by_slot[static_cast<size_t>(indexes[i])] = weights[i];
    weights = std::move(by_slot);
  }
  const Attribute* ints = info.node().FindAttribute("pool_int64s");
  const Attribute* strs = info.node().FindAttribute("pool_strings");
  if ((ints == nullptr) == (strs == nullptr)) {
    return OpError(kOp, "exactly one of 'pool_int64s' and 'pool_strings' is required");
  }
  GramMaps<int64_t> int_grams;
  GramMaps<std::string> str_grams;
  if (ints != nullptr) {
    if (ints->type != AttributeType::kInts)
      return OpError(kOp, "attribute 'pool_int64s' must be INTS");
    KILN_ASSIGN_OR_RETURN(int_grams, BuildGrams(ints->ints, counts, indexes, out_size));
  } else {
    if (strs->type != AttributeType::kStrings) {
      return OpError(kOp, "attribute 'pool_strings' must be STRINGS");
    }
    KILN_ASSIGN_OR_RETURN(str_grams, BuildGrams(strs->strings, counts, indexes, out_size));
  }
  return std::make_unique<TfIdfKernel>(mode, min_gram, max_gram, max_skip, out_size,
                                       std::move(weights), std::move(int_grams),
                                       std::move(str_grams), strs != nullptr);
}

}  // namespace kiln::ref
