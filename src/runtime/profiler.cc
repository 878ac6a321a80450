// SPDX-License-Identifier: Apache-2.0
#include "runtime/profiler.h"

#include <chrono>

#include "graph/kiln_ops.h"

namespace kiln {

int64_t ProfileNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

const Tensor* InputAt(std::span<const Tensor> inputs, size_t i) {
  return i < inputs.size() && inputs[i].valid() ? &inputs[i] : nullptr;
}

// 2 * out * (W elements per output channel): Conv and FusedConv (W [M, C/group, k...]); `out`
// counts Y's real elements (a blocked Y's padding channels excluded).
double ConvFlops(std::span<const Tensor> inputs, std::span<const OwnedTensor> outputs) {
  const Tensor* w = InputAt(inputs, 1);
  if (w == nullptr || outputs.empty() || !outputs[0].valid() || w->rank() < 1 || w->dim(0) == 0) {
    return 0;
  }
  double out = static_cast<double>(outputs[0].num_elements());
  const Tensor& y = outputs[0].view();
  if (y.rank() == w->rank() + 1 && y.dim(1) > 0 && y.dim(y.rank() - 1) > 0) {
    // A channel-blocked Y (kiln_ops.h, [N, ceil(M/b), spatial..., b]): its padding is not work.
    out =
        out * static_cast<double>(w->dim(0)) / static_cast<double>(y.dim(1) * y.dim(y.rank() - 1));
  }
  return 2.0 * out * static_cast<double>(w->num_elements() / w->dim(0));
}

// 2 * X elements * (W elements per input channel): ConvTranspose (W [C, M/group, k...]).
double ConvTransposeFlops(std::span<const Tensor> inputs) {
  const Tensor* x = InputAt(inputs, 0);
  const Tensor* w = InputAt(inputs, 1);
  if (x == nullptr || w == nullptr || w->rank() < 1 || w->dim(0) == 0) return 0;
  return 2.0 * static_cast<double>(x->num_elements()) *
         static_cast<double>(w->num_elements() / w->dim(0));
}

// 2 * Y elements * K, K the reduced dim of A.
double MatMulFlops(std::span<const Tensor> inputs, std::span<const OwnedTensor> outputs,
                   bool trans_a) {
  const Tensor* a = InputAt(inputs, 0);
  if (a == nullptr || a->rank() < 1 || outputs.empty() || !outputs[0].valid()) return 0;
  const int64_t k = trans_a && a->rank() >= 2 ? a->dim(a->rank() - 2) : a->dim(a->rank() - 1);
  return 2.0 * static_cast<double>(outputs[0].num_elements()) * static_cast<double>(k);
}

// Q K^T and P V: 2*S*T*D + 2*S*T*Dv per leading index.
double AttentionFlops(std::span<const Tensor> inputs) {
  const Tensor* q = InputAt(inputs, 0);
  const Tensor* k = InputAt(inputs, 1);
  const Tensor* v = InputAt(inputs, 2);
  if (q == nullptr || k == nullptr || v == nullptr || q->rank() < 2 || k->rank() < 2 ||
      v->rank() < 2) {
    return 0;
  }
  const double s = static_cast<double>(q->dim(q->rank() - 2));
  const double d = static_cast<double>(q->dim(q->rank() - 1));
  const double t = static_cast<double>(k->dim(k->rank() - 2));
  const double dv = static_cast<double>(v->dim(v->rank() - 1));
  const double lead = s * d == 0 ? 0 : static_cast<double>(q->num_elements()) / (s * d);
  return lead * (2.0 * s * t * d + 2.0 * s * t * dv);
}

}  // namespace

double NodeFlops(const Node& node, std::span<const Tensor> inputs,
                 std::span<const OwnedTensor> outputs) {
  const std::string& op = node.op_type;
  if (node.domain.empty()) {
    if (op == "Conv") return ConvFlops(inputs, outputs);
    if (op == "ConvTranspose") return ConvTransposeFlops(inputs);
    if (op == "MatMul") return MatMulFlops(inputs, outputs, false);
    if (op == "Gemm") return MatMulFlops(inputs, outputs, node.GetInt("transA", 0) != 0);
    return 0;
  }
  if (node.domain == kKilnDomain) {
    if (op == kFusedConvOp) return ConvFlops(inputs, outputs);
    if (op == kFusedMatMulOp) return MatMulFlops(inputs, outputs, false);
    if (op == kFusedGemmOp) return MatMulFlops(inputs, outputs, node.GetInt("transA", 0) != 0);
    if (op == kAttentionOp) return AttentionFlops(inputs);
  }
  return 0;
}

}  // namespace kiln
