// SPDX-License-Identifier: Apache-2.0
// The processing steps of pipelines on text and scores (op/kiln_ops.h): ai.kiln
// WordPieceTokenize (text/wordpiece.h) and ai.kiln TopKClassify (tensor/classification.h, the
// classification extension's ranking and rendering).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "op/kiln_ops.h"
#include "tensor/classification.h"
#include "text/wordpiece.h"

namespace kiln::ref {
namespace {

constexpr std::string_view kTokenizeOp = "WordPieceTokenize";
constexpr std::string_view kClassifyOp = "TopKClassify";

// BYTES [N] or [N, 1].
Status CheckTextInput(const Tensor& x, std::string_view what) {
  if (x.dtype() != DataType::kBytes) {
    return OpError(kTokenizeOp, "{} must be BYTES (UTF-8 text), got {}", what,
                   DataTypeName(x.dtype()));
  }
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(1) == 1))) {
    return OpError(kTokenizeOp, "{} must be [N] or [N, 1] texts, got {}", what,
                   x.shape().ToString());
  }
  return Status::OK();
}

class WordPieceTokenizeKernel final : public Kernel {
 public:
  WordPieceTokenizeKernel(text::WordPieceTokenizer tokenizer, int64_t max_length,
                          std::vector<int64_t> buckets)
      : tokenizer_(std::move(tokenizer)), max_length_(max_length), buckets_(std::move(buckets)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    KILN_RETURN_IF_ERROR(CheckTextInput(x, "input 0"));
    const bool pair = ctx.num_inputs() > 1 && ctx.input(1).valid();
    if (pair) {
      KILN_RETURN_IF_ERROR(CheckTextInput(ctx.input(1), "input 1 (the second texts)"));
      if (ctx.input(1).dim(0) != x.dim(0)) {
        return OpError(kTokenizeOp, "input 1 has {} texts, input 0 {}", ctx.input(1).dim(0),
                       x.dim(0));
      }
    }
    const int64_t n = x.dim(0);
    std::vector<text::WordPieceEncoding> rows;
    rows.reserve(static_cast<size_t>(n));
    int64_t longest = 0;
    for (int64_t i = 0; i < n; ++i) {
      std::optional<std::string_view> second;
      if (pair) second = ctx.input(1).data<const std::string>()[i];
      Result<text::WordPieceEncoding> e =
          tokenizer_.Encode(x.data<const std::string>()[i], second, max_length_);
      if (!e.ok()) return e.status().WithContext(fmt::format("{}: text {}", kTokenizeOp, i));
      longest = std::max(longest, static_cast<int64_t>(e->ids.size()));
      rows.push_back(std::move(e).value());
    }
    // The batch's length: the smallest bucket that holds its longest row.
    int64_t length = longest;
    for (int64_t b : buckets_) {
      if (b >= longest) {
        length = b;
        break;
      }
    }
    const Shape shape{n, length};
    KILN_ASSIGN_OR_RETURN(Tensor ids, ctx.AllocateOutputForOverwrite(0, DataType::kInt64, shape));
    KILN_ASSIGN_OR_RETURN(Tensor mask, ctx.AllocateOutput(1, DataType::kInt64, shape));
    KILN_ASSIGN_OR_RETURN(Tensor types, ctx.AllocateOutput(2, DataType::kInt64, shape));
    for (int64_t i = 0; i < n; ++i) {
      const text::WordPieceEncoding& e = rows[static_cast<size_t>(i)];
      int64_t* id_row = ids.data<int64_t>() + i * length;
      std::fill(id_row, id_row + length, tokenizer_.pad_id());
      std::copy(e.ids.begin(), e.ids.end(), id_row);
      std::fill_n(mask.data<int64_t>() + i * length, e.ids.size(), int64_t{1});
      std::copy(e.type_ids.begin(), e.type_ids.end(), types.data<int64_t>() + i * length);
    }
    return Status::OK();
  }

 private:
  const text::WordPieceTokenizer tokenizer_;
  const int64_t max_length_;
  const std::vector<int64_t> buckets_;  // ascending
};

class TopKClassifyKernel final : public Kernel {
 public:
  TopKClassifyKernel(int64_t k, bool softmax, std::vector<std::string> labels)
      : k_(k), softmax_(softmax), labels_(std::move(labels)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DataType::kFloat32 || x.rank() < 1) {
      return OpError(kClassifyOp, "input must be FLOAT [N, ...] scores, got {} {}",
                     DataTypeName(x.dtype()), x.shape().ToString());
    }
    const int64_t n = x.dim(0);
    const int64_t per_item = n == 0 ? 0 : x.num_elements() / n;
    std::vector<float> scores(x.data<const float>(), x.data<const float>() + x.num_elements());
    if (softmax_) {
      for (int64_t i = 0; i < n; ++i) {
        float* p = scores.data() + i * per_item;
        const float m = *std::max_element(p, p + per_item);
        float sum = 0;
        for (int64_t j = 0; j < per_item; ++j) sum += (p[j] = std::exp(p[j] - m));
        for (int64_t j = 0; j < per_item; ++j) p[j] /= sum;
      }
    }
    const Tensor view(DataType::kFloat32, Shape{n, per_item}, scores.data());
    KILN_ASSIGN_OR_RETURN(TopK top, TopKIndices(view, k_, /*batched=*/true));
    KILN_ASSIGN_OR_RETURN(OwnedTensor classes, ClassStrings(view, top, /*batched=*/true, labels_));
    const Shape shape{n, top.k};
    KILN_ASSIGN_OR_RETURN(Tensor out_classes, ctx.AllocateOutput(0, DataType::kBytes, shape));
    for (int64_t i = 0; i < classes.num_elements(); ++i) {
      out_classes.data<std::string>()[i] = std::move(classes.data<std::string>()[i]);
    }
    KILN_ASSIGN_OR_RETURN(Tensor out_scores,
                          ctx.AllocateOutputForOverwrite(1, DataType::kFloat32, shape));
    KILN_ASSIGN_OR_RETURN(Tensor out_indices,
                          ctx.AllocateOutputForOverwrite(2, DataType::kInt64, shape));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < top.k; ++j) {
        const int64_t index = top.indices[static_cast<size_t>(i * top.k + j)];
        out_scores.data<float>()[i * top.k + j] = scores[static_cast<size_t>(i * per_item + index)];
        out_indices.data<int64_t>()[i * top.k + j] = index;
      }
    }
    return Status::OK();
  }

 private:
  const int64_t k_;
  const bool softmax_;
  const std::vector<std::string> labels_;
};

std::vector<std::string> Strings(const KernelInfo& info, std::string_view name) {
  const Attribute* a = info.node().FindAttribute(name);
  return a == nullptr ? std::vector<std::string>{} : a->strings;
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateKilnWordPieceTokenize(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  text::WordPieceOptions o;
  KILN_ASSIGN_OR_RETURN(o.lowercase, attrs.Bool("lowercase", true));
  KILN_ASSIGN_OR_RETURN(int64_t strip, attrs.Int("strip_accents", -1));
  if (strip < -1 || strip > 1) {
    return OpError(kTokenizeOp, "strip_accents must be -1 (as lowercase), 0 or 1, got {}", strip);
  }
  if (strip >= 0) o.strip_accents = strip == 1;
  KILN_ASSIGN_OR_RETURN(o.handle_chinese_chars, attrs.Bool("handle_chinese_chars", true));
  KILN_ASSIGN_OR_RETURN(int64_t chars, attrs.Int("max_input_chars_per_word", 100));
  if (chars < 1 || chars > (1 << 20)) {
    return OpError(kTokenizeOp, "max_input_chars_per_word must be in [1, 2^20], got {}", chars);
  }
  o.max_input_chars_per_word = static_cast<int>(chars);
  KILN_ASSIGN_OR_RETURN(o.unk_token, attrs.String("unk_token", o.unk_token));
  KILN_ASSIGN_OR_RETURN(o.cls_token, attrs.String("cls_token", o.cls_token));
  KILN_ASSIGN_OR_RETURN(o.sep_token, attrs.String("sep_token", o.sep_token));
  KILN_ASSIGN_OR_RETURN(o.pad_token, attrs.String("pad_token", o.pad_token));
  KILN_ASSIGN_OR_RETURN(o.mask_token, attrs.String("mask_token", o.mask_token));
  KILN_ASSIGN_OR_RETURN(int64_t max_length, attrs.Int("max_length", 512));
  const int64_t specials = info.num_inputs() > 1 && info.has_input(1) ? 3 : 2;
  if (max_length < specials) {
    return OpError(kTokenizeOp, "max_length {} leaves no room for the {} special tokens",
                   max_length, specials);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> buckets, attrs.Ints("length_buckets"));
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i] < 1 || buckets[i] > max_length || (i > 0 && buckets[i] <= buckets[i - 1])) {
      return OpError(kTokenizeOp,
                     "length_buckets must be ascending lengths in [1, max_length {}], got {}",
                     max_length, fmt::join(buckets, ","));
    }
  }
  Result<text::WordPieceTokenizer> tok =
      text::WordPieceTokenizer::Create(Strings(info, "vocab"), std::move(o));
  if (!tok.ok()) return OpError(kTokenizeOp, "{}", tok.status().message());
  return std::unique_ptr<Kernel>(std::make_unique<WordPieceTokenizeKernel>(
      std::move(tok).value(), max_length, std::move(buckets)));
}

Result<std::unique_ptr<Kernel>> CreateKilnTopKClassify(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t k, attrs.Int("k", 0));
  if (k < 1) return OpError(kClassifyOp, "k must be at least 1, got {}", k);
  KILN_ASSIGN_OR_RETURN(bool softmax, attrs.Bool("softmax", false));
  return std::unique_ptr<Kernel>(
      std::make_unique<TopKClassifyKernel>(k, softmax, Strings(info, "labels")));
}

}  // namespace kiln::ref
