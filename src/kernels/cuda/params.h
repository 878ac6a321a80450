// SPDX-License-Identifier: Apache-2.0
#pragma once
// Plain data shared by the CUDA kernels' host code (*.cc, compiled by the C++ compiler) and their
// device code (*.cu, compiled by nvcc): element types, strided views, fused activations. No kiln
// or CUDA headers here, so that nvcc sees none of kiln's C++20 headers.
//
// The split every CUDA kernel follows: the Kernel class (a .cc) checks shapes and attributes,
// allocates outputs and fills one of these parameter structs; a launcher in a .cu (declared in
// the group's *_launch.h, plain C++ signatures returning cudaError_t from cudaGetLastError)
// enqueues the device work on the context's stream.

#include <cstdint>

namespace kiln::cuda {

// Element types the device code is instantiated for.
enum class ElemType : int32_t {
  kF32 = 0,
  kF16 = 1,   // __half
  kBF16 = 2,  // __nv_bfloat16
  kI32 = 3,
  kI64 = 4,
  kI8 = 5,
  kU8 = 6,
  kBool = 7,  // one byte, 0 or 1
  kF64 = 8,
};

// The most dimensions a strided view carries (after merging dimensions that are contiguous in
// every operand, which keeps real models far below it).
inline constexpr int kMaxRank = 8;

// A view of `rank` dimensions: element (i0, i1, ...) at offset sum(i_k * strides[k]) elements.
// A broadcast dimension has stride 0.
struct StridedView {
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
};

// The activation fused into an op (op/kiln_ops.h's activation / activation_params), applied
// last, in FP32.
enum class ActKind : int32_t {
  kNone = 0,
  kRelu,
  kClip,  // clamp(x, a, b)
  kSigmoid,
  kSilu,         // x * sigmoid(x)
  kHardSigmoid,  // max(0, min(1, a*x + b))
  kHardSwish,    // x * max(0, min(1, x/6 + 1/2))
  kGelu,         // 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,     // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kTanh,
  kLeakyRelu,  // x >= 0 ? x : a*x
};

struct Activation {
  ActKind kind = ActKind::kNone;
  float a = 0.0f;
  float b = 0.0f;
};

}  // namespace kiln::cuda
