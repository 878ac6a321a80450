// SPDX-License-Identifier: Apache-2.0
// Reference Einsum: any equation with numpy's semantics: explicit ("ij,jk->ik") or implicit
// ("ij,jk", output = the labels used once, sorted, after the broadcast ellipsis dims) outputs,
// repeated labels within one operand (diagonals), "..." ellipsis with numpy broadcasting, size-1
// broadcasting of labelled dims, sums over labels absent from the output, any number of inputs.
//
// NOTE on the approach. The equation is parsed once at load into per-operand label lists; the
// ellipsis is expanded at run time, when the operand ranks are known, into extra labels (one per
// broadcast ellipsis dim, right-aligned across operands). Every label gets one size (operands
// agree or have size 1) and, per operand, one element stride: the sum of the strides of the
// operand's dims carrying that label (so a repeated label walks a diagonal), 0 where the operand
// broadcasts it. The kernel then runs two nested odometers, over the output labels and over the
// summed labels, and accumulates the product of the operands' elements: in double for floating
// point, in uint64 wrapping modulo 2^64 for integers (the exact result modulo 2^n). The cost is
// the product of all label sizes, fine for a reference.

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/nn_common.h"

namespace kiln::ref {
namespace {

constexpr const char* kOp = "Einsum";
constexpr int kNumLetters = 52;  // a-z then A-Z
constexpr int kEllipsis = -1;    // marks "..." in a term
constexpr int kMaxLabels = kNumLetters + Shape::kMaxRank;

// One operand or the output: label ids in order, kEllipsis for "...".
using Term = std::vector<int>;

int LetterId(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -2;
}

Result<Term> ParseTerm(std::string_view s) {
  Term t;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '.') {
      if (s.substr(i, 3) != "..." || seen_ellipsis) {
        return OpError(kOp, "malformed ellipsis in term '{}'", s);
      }
      seen_ellipsis = true;
      t.push_back(kEllipsis);
      i += 2;
      continue;
    }
    const int id = LetterId(s[i]);
    if (id < 0) return OpError(kOp, "invalid character '{}' in term '{}'", s[i], s);
    t.push_back(id);
  }
  return t;
}

struct Equation {
  std::vector<Term> inputs;
  Term output;
  bool explicit_output = false;
};

Result<Equation> ParseEquation(const std::string& equation) {
  std::string s;
  for (char c : equation) {
    if (c != ' ' && c != '\t') s.push_back(c);
  }
  Equation eq;
  std::string_view lhs = s;
  const size_t arrow = s.find("->");
  if (arrow != std::string::npos) {
    lhs = std::string_view(s).substr(0, arrow);
    const std::string_view rhs = std::string_view(s).substr(arrow + 2);
    if (rhs.find("->") != std::string_view::npos) {
      return OpError(kOp, "equation '{}' has more than one '->'", equation);
    }
    KILN_ASSIGN_OR_RETURN(eq.output, ParseTerm(rhs));
    eq.explicit_output = true;
    std::vector<bool> seen(kNumLetters, false);
    for (int id : eq.output) {
      if (id == kEllipsis) continue;
      if (seen[static_cast<size_t>(id)]) {
        return OpError(kOp, "output of '{}' repeats a label", equation);
      }
      seen[static_cast<size_t>(id)] = true;
    }
  }
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    KILN_ASSIGN_OR_RETURN(
        Term t, ParseTerm(lhs.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                            : comma - start)));
    eq.inputs.push_back(std::move(t));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  // Every explicit output label must appear in an input.
  for (int id : eq.output) {
    if (id == kEllipsis) continue;
    bool found = false;
    for (const Term& t : eq.inputs) found = found || std::count(t.begin(), t.end(), id) > 0;
    if (!found) return OpError(kOp, "output label of '{}' is in no input", equation);
  }
  return eq;
}

class EinsumKernel final : public Kernel {
 public:
  explicit EinsumKernel(Equation eq) : eq_(std::move(eq)) {}

  Status Compute(KernelContext& ctx) const override {
    const int n_in = static_cast<int>(eq_.inputs.size());
    if (ctx.num_inputs() != n_in) {
      return OpError(kOp, "the equation has {} operands but the node has {} inputs", n_in,
                     ctx.num_inputs());
    }
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, n_in, kOp));
    const DataType dtype = ctx.input(0).dtype();
    // Ellipsis rank of each operand, and the broadcast ellipsis rank.
    std::vector<int> ell_rank(static_cast<size_t>(n_in), 0);
    int ell_max = 0;
    for (int i = 0; i < n_in; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != dtype) {
        return OpError(kOp, "input {} has dtype {}, input 0 has {}", i, DataTypeName(t.dtype()),
                       DataTypeName(dtype));
      }
      const Term& term = eq_.inputs[static_cast<size_t>(i)];
      const bool has_ell = std::count(term.begin(), term.end(), kEllipsis) > 0;
      const int letters = static_cast<int>(term.size()) - (has_ell ? 1 : 0);
      if (has_ell ? t.rank() < letters : t.rank() != letters) {
        return OpError(kOp, "input {} {} does not match its term of {} labels{}", i,
                       t.shape().ToString(), letters, has_ell ? " plus an ellipsis" : "");
      }
      ell_rank[static_cast<size_t>(i)] = t.rank() - letters;
      ell_max = std::max(ell_max, t.rank() - letters);
    }
    // Label sizes (-1: unseen) and per-operand strides.
    std::vector<int64_t> size(kMaxLabels, -1);
    std::vector<std::vector<int64_t>> strides(static_cast<size_t>(n_in),
                                              std::vector<int64_t>(kMaxLabels, 0));
    std::vector<int> count(kMaxLabels, 0);
    for (int i = 0; i < n_in; ++i) {
      const size_t iu = static_cast<size_t>(i);
      const Tensor& t = ctx.input(i);
      // Expand the term into one label per dim.
      std::vector<int> labels;
      for (int id : eq_.inputs[iu]) {
        if (id != kEllipsis) {
          labels.push_back(id);
          continue;
        }
        for (int e = 0; e < ell_rank[iu]; ++e) {
          labels.push_back(kNumLetters + ell_max - ell_rank[iu] + e);
        }
      }
      int64_t stride = 1;
      for (int d = t.rank() - 1; d >= 0; --d) {
        const size_t l = static_cast<size_t>(labels[static_cast<size_t>(d)]);
        const int64_t n = t.dim(d);
        ++count[l];
        // A size-1 occurrence broadcasts (stride 0, below); any other size must agree.
        if (size[l] == -1 || size[l] == 1) {
          size[l] = n;
        } else if (n != size[l] && n != 1) {
          return OpError(kOp, "label sizes disagree: {} vs {} (input {} {})", size[l], n, i,
                         t.shape().ToString());
        }
        if (n != 1) strides[iu][l] += stride;
        stride *= n;
      }
    }
    // Output labels.
    std::vector<int> out_labels;
    const bool out_has_ell = std::count(eq_.output.begin(), eq_.output.end(), kEllipsis) > 0;
    if (eq_.explicit_output) {
      if (ell_max > 0 && !out_has_ell) {
        return OpError(kOp, "the inputs have ellipsis dims but the output has no '...'");
      }
      for (int id : eq_.output) {
        if (id != kEllipsis) {
          out_labels.push_back(id);
          continue;
        }
        for (int e = 0; e < ell_max; ++e) out_labels.push_back(kNumLetters + e);
      }
    } else {
      for (int e = 0; e < ell_max; ++e) out_labels.push_back(kNumLetters + e);
      // Letters used exactly once, in ASCII order (upper case first, as numpy sorts).
      for (int id = 26; id < kNumLetters; ++id) {
        if (count[static_cast<size_t>(id)] == 1) out_labels.push_back(id);
      }
      for (int id = 0; id < 26; ++id) {
        if (count[static_cast<size_t>(id)] == 1) out_labels.push_back(id);
      }
    }
    std::vector<bool> in_out(kMaxLabels, false);
    for (int l : out_labels) in_out[static_cast<size_t>(l)] = true;
    std::vector<int> sum_labels;
    for (int l = 0; l < kMaxLabels; ++l) {
      if (size[static_cast<size_t>(l)] >= 0 && !in_out[static_cast<size_t>(l)]) {
        sum_labels.push_back(l);
      }
    }
    std::vector<int64_t> out_dims;
    out_dims.reserve(out_labels.size());
    for (int l : out_labels) out_dims.push_back(size[static_cast<size_t>(l)]);
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    int64_t sum_size = 1;
    for (int l : sum_labels) {
      if (__builtin_mul_overflow(sum_size, size[static_cast<size_t>(l)], &sum_size)) {
        return OpError(kOp, "the summed label space overflows");
      }
    }

    return DispatchType<KILN_NN_FLOAT_TYPES, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                        uint32_t, uint64_t>(dtype, kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using Acc = std::conditional_t<kIsFloatLike<T>, double, uint64_t>;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, dtype, out_shape));
      T* py = y.data<T>();
      std::vector<const T*> ptr(static_cast<size_t>(n_in));
      for (int i = 0; i < n_in; ++i) ptr[static_cast<size_t>(i)] = ctx.input(i).data<const T>();
      // Offsets of each operand at the current output / summed coordinates.
      std::vector<int64_t> base(static_cast<size_t>(n_in), 0), off(static_cast<size_t>(n_in));
      std::vector<int64_t> out_coord(out_labels.size(), 0), sum_coord(sum_labels.size(), 0);
      auto advance = [&](const std::vector<int>& labels, std::vector<int64_t>& coord,
                         std::vector<int64_t>& offsets) {
        for (size_t d = labels.size(); d-- > 0;) {
          const size_t l = static_cast<size_t>(labels[d]);
          ++coord[d];
          for (size_t i = 0; i < offsets.size(); ++i) offsets[i] += strides[i][l];
          if (coord[d] < size[l]) return;
          for (size_t i = 0; i < offsets.size(); ++i) offsets[i] -= strides[i][l] * coord[d];
          coord[d] = 0;
        }
      };
      for (int64_t o = 0; o < out_shape.NumElements(); ++o) {
        Acc acc = 0;
        off = base;
        std::fill(sum_coord.begin(), sum_coord.end(), 0);
        for (int64_t s = 0; s < sum_size; ++s) {
          Acc prod = 1;
          for (size_t i = 0; i < ptr.size(); ++i) {
            if constexpr (kIsFloatLike<T>) {
              prod *= ToDouble(ptr[i][off[i]]);
            } else {
              prod *= static_cast<uint64_t>(ptr[i][off[i]]);
            }
          }
          acc += prod;
          advance(sum_labels, sum_coord, off);
        }
        if constexpr (kIsFloatLike<T>) {
          py[o] = FromDouble<T>(acc);
        } else {
          py[o] = static_cast<T>(acc);
        }
        advance(out_labels, out_coord, base);
      }
      return Status::OK();
    });
  }

 private:
  Equation eq_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateEinsum(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "Einsum has one output"));
  if (info.num_outputs() < 1) return OpError(kOp, "output 0 is missing");
  AttrReader attrs(info);
  if (!attrs.Has("equation")) return OpError(kOp, "attribute 'equation' is required");
  KILN_ASSIGN_OR_RETURN(std::string equation, attrs.String("equation", ""));
  KILN_ASSIGN_OR_RETURN(Equation eq, ParseEquation(equation));
  if (static_cast<int>(eq.inputs.size()) != info.num_inputs()) {
    return OpError(kOp, "equation '{}' has {} operands but the node has {} inputs", equation,
                   eq.inputs.size(), info.num_inputs());
  }
  KILN_RETURN_IF_ERROR(RequireInputs(info, info.num_inputs()));
  return std::make_unique<EinsumKernel>(std::move(eq));
}

}  // namespace kiln::ref
