// SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/activation.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {

Result<Activation> ReadActivation(const KernelInfo& info) {
  const NodeDesc& node = info.node();
  const std::string op = fmt::format("{}.{}", node.domain, node.op_type);
  std::string name;
  std::vector<float> params;
  if (const Attribute* a = node.FindAttribute("activation")) {
    if (a->type != AttributeType::kString) {
      return Status::InvalidArgument(
          fmt::format("{}: attribute 'activation' must be a STRING", op));
    }
    name = a->s;
  }
  if (const Attribute* a = node.FindAttribute("activation_params")) {
    if (a->type != AttributeType::kFloats) {
      return Status::InvalidArgument(
          fmt::format("{}: attribute 'activation_params' must be FLOATS", op));
    }
    params = a->floats;
  }
  struct Entry {
    std::string_view name;
    ActivationKind kind;
    size_t num_params;  // 0: takes none
    float d0, d1;       // defaults when params are empty
  };
  constexpr float kInf = std::numeric_limits<float>::infinity();
  static constexpr Entry kTable[] = {
      {kActivationNone, ActivationKind::kNone, 0, 0, 0},
      {kActivationRelu, ActivationKind::kRelu, 0, 0, 0},
      {kActivationClip, ActivationKind::kClip, 2, -kInf, kInf},
      {kActivationSigmoid, ActivationKind::kSigmoid, 0, 0, 0},
      {kActivationSilu, ActivationKind::kSilu, 0, 0, 0},
      {kActivationHardSigmoid, ActivationKind::kHardSigmoid, 2, 0.2f, 0.5f},
      {kActivationHardSwish, ActivationKind::kHardSwish, 0, 0, 0},
      {kActivationGelu, ActivationKind::kGelu, 0, 0, 0},
      {kActivationGeluTanh, ActivationKind::kGeluTanh, 0, 0, 0},
      {kActivationTanh, ActivationKind::kTanh, 0, 0, 0},
      {kActivationLeakyRelu, ActivationKind::kLeakyRelu, 1, 0.01f, 0},
  };
  for (const Entry& e : kTable) {
    if (e.name != name) continue;
    Activation act{e.kind, e.d0, e.d1};
    if (params.empty()) return act;
    if (params.size() != e.num_params) {
      return Status::InvalidArgument(
          fmt::format("{}: activation '{}' takes {} activation_params, got {}", op, name,
                      e.num_params, params.size()));
    }
    act.p0 = params[0];
    if (params.size() > 1) act.p1 = params[1];
    return act;
  }
  return Status::InvalidArgument(fmt::format("{}: unknown activation '{}'", op, name));
}

float ApplyActivation(const Activation& act, float x) {
  const double d = x;
  switch (act.kind) {
    case ActivationKind::kNone:
      return x;
    case ActivationKind::kRelu:
      return x > 0 ? x : (std::isnan(x) ? x : 0.0f);
    case ActivationKind::kClip:
      return std::isnan(x) ? x : std::min(std::max(x, act.p0), act.p1);
    case ActivationKind::kSigmoid:
      return static_cast<float>(1.0 / (1.0 + std::exp(-d)));
    case ActivationKind::kSilu:
      return static_cast<float>(d / (1.0 + std::exp(-d)));
    case ActivationKind::kHardSigmoid:
      return std::max(0.0f, std::min(1.0f, act.p0 * x + act.p1));
    case ActivationKind::kHardSwish:
      return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f));
    case ActivationKind::kGelu:
      return static_cast<float>(0.5 * d * (1.0 + std::erf(d / std::sqrt(2.0))));
    case ActivationKind::kGeluTanh:
      return static_cast<float>(
          0.5 * d * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (d + 0.044715 * d * d * d))));
    case ActivationKind::kTanh:
      return std::tanh(x);
    case ActivationKind::kLeakyRelu:
      return x < 0 ? act.p0 * x : x;
    case ActivationKind::kErf:
      return std::erf(x);
    case ActivationKind::kExp:
      return std::exp(x);
  }
  return x;
}

void ApplyActivationInPlace(const Activation& act, float* data, int64_t n) {
  if (act.kind == ActivationKind::kNone) return;
  ParallelFor(n, 1 << 14, [&](int64_t begin, int64_t end) {
    ActivationF32(act, data + begin, data + begin, end - begin);
  });
}

}  // namespace kiln::cpu
