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
//
// --- Blocked channel layout (opt/passes/layout.cc, layout_selection) ---------------------------
// A blocked tensor stores an [N, C, spatial...] FP32 tensor as [N, ceil(C/b), spatial..., b]:
// element (n, c, s...) lives at (n, c / b, s..., c % b), the b channels of one block adjacent in
// memory (oneDNN's nChw8c / nChw16c). Channels C..ceil(C/b)*b-1 are padding and hold zeros; every
// op below writes them as zeros and may rely on reading zeros there.
// ReorderToBlocked(X) -> Y
//   block INT (8 or 16, required). X [N, C, spatial...] (rank >= 3); Y [N, ceil(C/b), ..., b].
// ReorderFromBlocked(Y) -> X
//   block INT (required), channels INT (C >= 1, required; Y's dim 1 must be ceil(C/b)).
//   Y [N, ceil(C/b), spatial..., b] -> X [N, C, spatial...]; the padding is dropped.
// FusedConv's layout attributes (both default 0, so plain FusedConv is unchanged):
//   x_block  INT  0: X is plain [N, C, H, W]; 8 or 16: X is blocked with that block.
//   y_block  INT  0: Y (and Z) plain; 8 or 16: Y and Z are blocked with that block.
//   C and the output channels come from W ([M, C/group, kH, kW]). Only 2-D convolutions take a
//   blocked operand (X rank 4 plain or 5 blocked).
//   Elementwise ops between blocked tensors of the same shape (Add, Relu, Clip with 0 in range)
//   stay ONNX ops: on equal shapes they are layout-blind and keep the padding at zero.

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

// --- Blocked channel layout --------------------------------------------------------------------
inline constexpr std::string_view kReorderToBlockedOp = "ReorderToBlocked";
inline constexpr std::string_view kReorderFromBlockedOp = "ReorderFromBlocked";
inline constexpr std::string_view kAttrBlock = "block";
inline constexpr std::string_view kAttrChannels = "channels";
inline constexpr std::string_view kAttrXBlock = "x_block";  // on FusedConv
inline constexpr std::string_view kAttrYBlock = "y_block";  // on FusedConv

}  // namespace kiln
