// SPDX-License-Identifier: Apache-2.0
#pragma once
// kiln's own operators: domain "ai.kiln", version 1. The optimizer's fusion passes (src/opt)
// produce them; `kiln optimize` writes them into ONNX files under this domain; the reference
// kernels (src/kernels/ref/kiln_ops.cc) define their numerics and the CPU kernels
// (src/kernels/cpu) implement them fast. Nothing outside this list may use the domain.
//
// Fused activations. Every fused op below takes two attributes:
//   activation         STRING  one of kActivation* (default "": none)
//   activation_params  FLOATS  Clip: [min, max]; LeakyRelu: [alpha]; HardSigmoid: [alpha, beta];
//                              others: empty
// applied last, elementwise, in FP32.
//
// FusedConv(X, W, B?, Z?) -> Y
//   Conv's attributes (auto_pad, dilations, group, kernel_shape, pads, strides), same meaning.
//   Y = act(Conv(X, W, B) + Z); Z (the residual) has Y's shape exactly.
// FusedGemm(A, B, C?, Z?) -> Y
//   Gemm's attributes (alpha, beta, transA, transB). Y = act(alpha*A'*B' + beta*C + Z); C
//   broadcast as in Gemm, Z has Y's shape exactly.
// FusedMatMul(A, B, Bias?, Z?) -> Y
//   Y = act(MatMul(A, B) + Bias + Z): MatMul's broadcasting; Bias 1-D of length N (Y's last
//   dim); Z has Y's shape exactly.
// LayerNormalization(X, Scale, B?) -> Y
//   ONNX opset-17 LayerNormalization (axis default -1, epsilon default 1e-5), first output only,
//   usable in a graph of any opset.
// Gelu(X) -> Y
//   approximate STRING "none" (default, 0.5x(1+erf(x/sqrt2))) or "tanh"
//   (0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))).
// Attention(Q, K, V, Mask?) -> Y
//   Q [..., S, D], K [..., T, D], V [..., T, Dv] (equal leading dims), Mask additive and
//   broadcastable to [..., S, T]; scale FLOAT (default 1/sqrt(D)).
//   Y = Softmax(scale * Q K^T + Mask, axis -1) V, shape [..., S, Dv].

#include <string_view>

namespace kiln {

inline constexpr std::string_view kKilnDomain = "ai.kiln";
inline constexpr int kKilnOpsetVersion = 1;

inline constexpr std::string_view kFusedConvOp = "FusedConv";
inline constexpr std::string_view kFusedGemmOp = "FusedGemm";
inline constexpr std::string_view kFusedMatMulOp = "FusedMatMul";
inline constexpr std::string_view kLayerNormalizationOp = "LayerNormalization";
inline constexpr std::string_view kGeluOp = "Gelu";
inline constexpr std::string_view kAttentionOp = "Attention";

inline constexpr std::string_view kActivationNone = "";
inline constexpr std::string_view kActivationRelu = "Relu";
inline constexpr std::string_view kActivationClip = "Clip";  // Relu6 is Clip [0, 6]
inline constexpr std::string_view kActivationSigmoid = "Sigmoid";
inline constexpr std::string_view kActivationSilu = "SiLU";  // x * sigmoid(x)
inline constexpr std::string_view kActivationHardSigmoid = "HardSigmoid";
inline constexpr std::string_view kActivationHardSwish = "HardSwish";  // x*max(0,min(1,x/6+.5))
inline constexpr std::string_view kActivationGelu = "Gelu";            // erf form
inline constexpr std::string_view kActivationGeluTanh = "GeluTanh";    // tanh form
inline constexpr std::string_view kActivationTanh = "Tanh";
inline constexpr std::string_view kActivationLeakyRelu = "LeakyRelu";

}  // namespace kiln
