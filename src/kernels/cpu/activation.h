// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fused activations of the ai.kiln operators (op/kiln_ops.h): parsed once from the
// `activation` / `activation_params` attributes, then applied either as oneDNN post-ops
// (dnnl_util.h, AppendActivation) or elementwise by kiln's own code (ApplyActivation).

#include <cstdint>
#include <string_view>

#include "base/result.h"
#include "kernels/kernel.h"

namespace kiln::cpu {

enum class ActivationKind {
  kNone,
  kRelu,
  kClip,  // p0 = min, p1 = max
  kSigmoid,
  kSilu,         // x * sigmoid(x)
  kHardSigmoid,  // max(0, min(1, p0 * x + p1))
  kHardSwish,    // x * max(0, min(1, x / 6 + 0.5))
  kGelu,         // erf form
  kGeluTanh,
  kTanh,
  kLeakyRelu,  // p0 = alpha
  // Not fusable activations (no name in kiln_ops.h), used by the unary kernels only.
  kErf,
  kExp,
};

struct Activation {
  ActivationKind kind = ActivationKind::kNone;
  float p0 = 0.0f;
  float p1 = 0.0f;
};

// Reads `activation` and `activation_params` of a fused node. INVALID_ARGUMENT naming the op for
// an unknown name or a wrong number of params (empty params take the ONNX defaults: Clip
// [-inf, inf], LeakyRelu [0.01], HardSigmoid [0.2, 0.5]).
Result<Activation> ReadActivation(const KernelInfo& info);

// act(x) in float (double internally for the transcendental ones).
float ApplyActivation(const Activation& act, float x);

// data[i] = act(data[i]) for i in [0, n); vectorized when the AVX2 path is active.
void ApplyActivationInPlace(const Activation& act, float* data, int64_t n);

}  // namespace kiln::cpu
