// SPDX-License-Identifier: Apache-2.0
// Reference StringNormalizer kernel (tensor op family): removes stop words from a [C] or [1, C]
// BYTES tensor, then optionally lower- or upper-cases what is left.
//
// NOTE on the approach: case folding is ASCII only (bytes A-Z / a-z); other bytes, UTF-8
// sequences included, pass through unchanged, and the `locale` attribute is accepted but not
// used. Case-insensitive stop-word matching compares the ASCII-lowercased forms. When every
// element is removed the output holds one empty string ([1] or [1, 1]), as the ONNX spec says.

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

enum class CaseChange { kNone, kLower, kUpper };

std::string AsciiLower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}
std::string AsciiUpper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

class StringNormalizerKernel final : public Kernel {
 public:
  StringNormalizerKernel(CaseChange change, bool case_sensitive,
                         std::unordered_set<std::string> stopwords)
      : change_(change), case_sensitive_(case_sensitive), stopwords_(std::move(stopwords)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "StringNormalizer"));
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DataType::kBytes) {
      return OpError("StringNormalizer", "the input must be BYTES, got {}",
                     DataTypeName(x.dtype()));
    }
    const bool two_d = x.rank() == 2;
    if (!(x.rank() == 1 || (two_d && x.dim(0) == 1))) {
      return OpError("StringNormalizer", "the input must have shape [C] or [1, C], got {}",
                     x.shape().ToString());
    }
    const std::string* in = x.data<const std::string>();
    std::vector<std::string> kept;
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const std::string key = case_sensitive_ ? in[i] : AsciiLower(in[i]);
      if (stopwords_.count(key) != 0) continue;
      switch (change_) {
        case CaseChange::kNone:
          kept.push_back(in[i]);
          break;
        case CaseChange::kLower:
          kept.push_back(AsciiLower(in[i]));
          break;
        case CaseChange::kUpper:
          kept.push_back(AsciiUpper(in[i]));
          break;
      }
    }
    if (kept.empty()) kept.emplace_back();
    const int64_t n = static_cast<int64_t>(kept.size());
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutput(0, DataType::kBytes, two_d ? Shape{1, n} : Shape{n}));
    std::string* out = y.data<std::string>();
    for (int64_t i = 0; i < n; ++i) out[i] = std::move(kept[static_cast<size_t>(i)]);
    return Status::OK();
  }

 private:
  CaseChange change_;
  bool case_sensitive_;
  std::unordered_set<std::string> stopwords_;  // lowercased unless case_sensitive_
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateStringNormalizer(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::string action, attrs.String("case_change_action", "NONE"));
  CaseChange change;
  if (action == "NONE") {
    change = CaseChange::kNone;
  } else if (action == "LOWER") {
    change = CaseChange::kLower;
  } else if (action == "UPPER") {
    change = CaseChange::kUpper;
  } else {
    return OpError("StringNormalizer", "case_change_action '{}' is not supported", action);
  }
  KILN_ASSIGN_OR_RETURN(bool case_sensitive, attrs.Bool("is_case_sensitive", false));
  KILN_ASSIGN_OR_RETURN(std::string locale, attrs.String("locale", ""));
  (void)locale;  // ASCII case folding only (see the NOTE)
  std::unordered_set<std::string> stopwords;
  if (const Attribute* a = info.node().FindAttribute("stopwords"); a != nullptr) {
    if (a->type != AttributeType::kStrings) {
      return OpError("StringNormalizer", "attribute 'stopwords' must be a STRINGS");
    }
    for (const std::string& w : a->strings) stopwords.insert(case_sensitive ? w : AsciiLower(w));
  }
  return std::make_unique<StringNormalizerKernel>(change, case_sensitive, std::move(stopwords));
}

}  // namespace kiln::ref
