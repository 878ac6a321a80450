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
// Half-precision weights: FusedConv's W, FusedGemm's B and FusedMatMul's B may be a FLOAT16 or
// BFLOAT16 constant initializer (opt pass half_weights) while every other operand is FLOAT; the
// op computes in FP32 on the expanded values (exactly the FP32 op on W's values widened), and Y
// is FLOAT. A non-constant half weight is not accepted by the CPU kernels.
// LayerNormalization(X, Scale, B?) -> Y
//   ONNX opset-17 LayerNormalization (axis default -1, epsilon default 1e-5), first output only,
//   usable in a graph of any opset.
// Gelu(X) -> Y
//   approximate STRING "none" (default, 0.5x(1+erf(x/sqrt2))) or "tanh"
//   (0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))).
// ChannelAffine(X, Scale, Bias) -> Y
//   Y = act(X * Scale[c] + Bias[c]) per channel c, in FP32 (a multiply, then an add, then the
//   activation), X [N, C, spatial...] (rank >= 2). Scale and Bias FLOAT [C]. Attribute block
//   INT (default 0): 0, X and Y are plain; 8 or 16, X and Y are blocked [N, ceil(C/b),
//   spatial..., b] (see below) and the padding lanes of Y are written as zeros. An inference
//   BatchNormalization, folded (Scale = gamma / sqrt(var + eps), Bias = beta - mean * Scale),
//   with the activation that follows it (opt pass channel_affine_fusion; DenseNet's BN -> ReLU
//   before its convolutions).
// Attention(Q, K, V, Mask?) -> Y
//   Q [..., S, D], K [..., T, D], V [..., T, Dv] (equal leading dims), Mask additive and
//   broadcastable to [..., S, T]; scale FLOAT (default 1/sqrt(D)).
//   Y = Softmax(scale * Q K^T + Mask, axis -1) V, shape [..., S, Dv].
//
// ImagePreprocess(X) -> Y
//   The image step of a pipeline (the kiln_image backend, docs/image.md), on src/image: X BYTES
//   [N] or [N, 1], each element an encoded JPEG or PNG; Y FLOAT [N, C, H, W], each image decoded,
//   resized, center-cropped and normalized as torchvision's Resize / CenterCrop / ToTensor /
//   Normalize compute it. Attributes:
//     color       STRING "RGB" (default, C = 3) or "GRAY" (C = 1)
//     resize      INTS   [] none, [S] the shorter side becomes S, [H, W] exactly H x W
//     filter      STRING "bilinear" (default), "nearest", "area", "bicubic" (Pillow's filters)
//     crop        INTS   [] none or [H, W]: a center crop
//     mean, std   FLOATS [] or one value per channel (or one for all): (x / 255 - mean) / std
//     max_pixels  INT    the largest image accepted, from its header (default 64 Mi pixels)
//   Every image of a batch must come out the same size (a crop or an exact resize makes sure);
//   an image that cannot be decoded, or is over max_pixels, is INVALID_ARGUMENT naming its index.
//
// WordPieceTokenize(Text, TextPair?) -> (InputIds, AttentionMask, TokenTypeIds)
//   The text step of a pipeline (the kiln_text backend, docs/text.md), on text/wordpiece.h:
//   Text BYTES [N] or [N, 1], UTF-8; TextPair (optional) the second texts of pair tasks, the
//   same shape. Outputs INT64 [N, L]: [CLS] A [SEP] (B [SEP]) per row, truncated to max_length,
//   then padded with the PAD id (mask 0, type 0) to L, the smallest of length_buckets that holds
//   the batch's longest row (that row's length when length_buckets is empty). Attributes:
//     vocab                     STRINGS the vocabulary, id = position (required)
//     lowercase                 INT 1; strip_accents INT -1 (as lowercase), 0 or 1
//     handle_chinese_chars      INT 1; max_input_chars_per_word INT 100
//     max_length                INT 512, special tokens included
//     length_buckets            INTS ascending lengths in [1, max_length] (default none)
//     unk_token, cls_token, sep_token, pad_token, mask_token  STRING ([UNK], [CLS], ...)
//   A text that is not valid UTF-8 is INVALID_ARGUMENT naming its index and byte offset.
// TopKClassify(X) -> (Classes, Scores, Indices)
//   The classification post-processing step (the kiln_classify backend): X FLOAT [N, ...]
//   scores, each item flattened; with softmax INT 1 each item is softmaxed first. For each item
//   its k' = min(k, elements) best classes, best first, ties in index order (the classification
//   extension's ranking, tensor/classification.h): Classes BYTES [N, k'] "<score>:<index>" or
//   "<score>:<index>:<label>" (labels STRINGS, by index), Scores FLOAT [N, k'], Indices INT64
//   [N, k']. Attributes: k INT (required, >= 1), softmax INT 0, labels STRINGS [].
//
// --- Blocked channel layout (opt/passes/layout.cc, layout_selection) ---------------------------
// A blocked tensor stores an [N, C, spatial...] FP32 tensor as [N, ceil(C/b), spatial..., b]:
// element (n, c, s...) lives at (n, c / b, s..., c % b), the b channels of one block adjacent in
// memory (oneDNN's nChw8c / nChw16c). Channels C..ceil(C/b)*b-1 are padding. Every op below
// writes them as zeros; ONNX elementwise ops between blocked tensors may leave other finite
// values there (Sigmoid(0) = 0.5), and no op lets the padding reach a real channel: convolutions
// multiply it by zero-padded weights, pools and elementwise ops keep channels apart, Concat
// takes padding only from its last input and ReorderFromBlocked drops it. So the padding is
// finite, not necessarily zero, and nothing may rely on reading zeros there.
// ReorderToBlocked(X) -> Y
//   block INT (8 or 16, required). X [N, C, spatial...] (rank >= 3); Y [N, ceil(C/b), ..., b].
// ReorderFromBlocked(Y) -> X
//   block INT (required), channels INT (C >= 1, required; Y's dim 1 must be ceil(C/b)).
//   Y [N, ceil(C/b), spatial..., b] -> X [N, C, spatial...]; the padding is dropped.
// FusedConv's layout attributes (both default 0, so plain FusedConv is unchanged):
//   x_block  INT  0: X is plain [N, C, H, W]; 8 or 16: X is blocked with that block.
//   y_block  INT  0: Y (and Z) plain; 8 or 16: Y and Z are blocked with that block.
//   C and the output channels come from W ([M, C/group, kernel...]). Only 2-D and 3-D convolutions
//   take a blocked operand (X [N, C, H, W] / [N, C, D, H, W] plain, one rank more blocked).
//   Elementwise ops between blocked tensors stay ONNX ops (Add, Sub, Mul, Relu, Clip, Sigmoid,
//   ...): on equal shapes, and on a [N, C, H, W] tensor with an [N or 1, C, 1, 1] one, numpy
//   broadcasting of the blocked shapes ([N, C/b, H, W, b] with [N or 1, C/b, 1, 1, b]) pairs the
//   same channels as the plain shapes do. So does Concat on axis 1 when every input but the last
//   has a multiple of b channels.
// BlockedPool(X) -> Y
//   pool STRING (required): the ONNX op it computes, "MaxPool", "AveragePool",
//   "GlobalAveragePool" or "GlobalMaxPool", with that op's attributes (opset-17 meaning; MaxPool
//   without its Indices output); block INT (8 or 16, required); channels INT (C, required).
//   X blocked [N, ceil(C/b), H, W, b] -> Y blocked [N, ceil(C/b), OH, OW, b], exactly the pool of
//   the plain tensor, blocked.

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
inline constexpr std::string_view kChannelAffineOp = "ChannelAffine";
inline constexpr std::string_view kImagePreprocessOp = "ImagePreprocess";
inline constexpr std::string_view kWordPieceTokenizeOp = "WordPieceTokenize";
inline constexpr std::string_view kTopKClassifyOp = "TopKClassify";

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

// ------------------------------------------------------------------------------------------------
// Quantized (INT8) operators. The qdq_fusion pass (src/opt/passes/qdq.cc) produces them from
// QuantizeLinear / DequantizeLinear around Conv, MatMul and Gemm; they keep activations INT8
// between consecutive quantized ops.
//
// Common numerics. `acc` is the exact integer sum of (x - x_zero_point) * (w - w_zero_point[c])
// over the op's reduction (int32, wrapping modulo 2^32 like ConvInteger / MatMulInteger), plus B
// when B is INT32 (B in units of x_scale * w_scale[c]). Then, in FP32, per output channel c:
//   with y_scale (quantized output):
//     v = float(acc) * (x_scale * w_scale[c] / y_scale) [+ B[c] / y_scale when B is FP32]
//     v = act(v) with the activation's bounds divided by y_scale (Relu: max(v, 0); Clip:
//         clamp(v, min / y_scale, max / y_scale))
//     Y = saturate(round_half_to_even(v) + y_zero_point), in y_zero_point's dtype
//   without y_scale (FP32 output):
//     Y = act(float(acc) * (x_scale * w_scale[c]) [+ B[c] when B is FP32])
// With no B and no activation this is exactly QLinearConv / QLinearMatMul. The fast kernels
// (src/kernels/cpu/quantized.cc) may differ from these reference numerics by at most 1 in the
// last place of a quantized output (FP32 rounding order of the requantization).
// Activations: "" (none), "Relu" or "Clip" ([min, max], real units) only.
//
// QConv(X, x_scale, x_zero_point, W, w_scale, w_zero_point, y_scale?, y_zero_point?, B?) -> Y
//   Inputs in QLinearConv's order, same meaning: X UINT8/INT8 [N, C, spatial...], x_scale FP32
//   scalar, x_zero_point X's dtype scalar; W INT8 [M, C/group, k...], w_scale FP32 scalar or
//   [M], w_zero_point INT8 scalar or [M] (may be omitted: 0); y_scale FP32 scalar and
//   y_zero_point UINT8/INT8 scalar, both present (Y quantized) or both omitted (Y FP32); B INT32
//   or FP32 [M]. Conv's attributes (auto_pad, dilations, group, kernel_shape, pads, strides)
//   plus activation / activation_params, and two layout flags (INT, default 0):
//   x_channels_last: X is stored [N, spatial..., C]; y_channels_last: Y is stored
//   [N, spatial..., M] (quantized Y only). The pass sets them on INT8 tensors that only QConv /
//   QAdd nodes read, so chains of quantized convs skip the layout change oneDNN needs.
// QMatMul(A, a_scale, a_zero_point, B, b_scale, b_zero_point, y_scale?, y_zero_point?, Bias?)
//     -> Y
//   Inputs in QLinearMatMul's order: A UINT8/INT8 [..., M, K] (rank >= 2), B INT8 [K, N],
//   b_scale FP32 scalar or [N], b_zero_point INT8 scalar or [N] (may be omitted); y_scale /
//   y_zero_point as for QConv; Bias INT32 or FP32 [N]. Y [..., M, N]. Attributes: activation /
//   activation_params. (A Gemm becomes a QMatMul with B [K, N].)
// QAdd(A, a_scale, a_zero_point, B, b_scale, b_zero_point, y_scale, y_zero_point) -> Y
//   A and B UINT8/INT8 of the same shape (no broadcasting; elementwise, so any layout), every
//   scale an FP32 scalar, every
//   zero point a scalar of its tensor's dtype; attributes activation / activation_params.
//   Y = saturate(round_half_to_even(act(float(A - a_zero_point) * a_scale +
//                                       float(B - b_zero_point) * b_scale) / y_scale)
//                + y_zero_point)
//   all in FP32 in that order, i.e. bit for bit DequantizeLinear x2 -> Add [-> Relu/Clip] ->
//   QuantizeLinear, which is what it replaces (a residual connection between quantized ops).

inline constexpr std::string_view kQConvOp = "QConv";
inline constexpr std::string_view kQMatMulOp = "QMatMul";
inline constexpr std::string_view kQAddOp = "QAdd";
// --- Blocked channel layout --------------------------------------------------------------------
inline constexpr std::string_view kReorderToBlockedOp = "ReorderToBlocked";
inline constexpr std::string_view kReorderFromBlockedOp = "ReorderFromBlocked";
inline constexpr std::string_view kBlockedPoolOp = "BlockedPool";
inline constexpr std::string_view kAttrPool = "pool";  // on BlockedPool
inline constexpr std::string_view kAttrBlock = "block";
inline constexpr std::string_view kAttrChannels = "channels";
inline constexpr std::string_view kAttrXBlock = "x_block";  // on FusedConv
inline constexpr std::string_view kAttrYBlock = "y_block";  // on FusedConv

}  // namespace kiln
