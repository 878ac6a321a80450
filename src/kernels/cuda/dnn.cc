// SPDX-License-Identifier: Apache-2.0
// Conv and ai.kiln FusedConv on cuDNN 9 (its legacy convolution API: cudnnConvolutionForward),
// for FLOAT, FLOAT16 and BFLOAT16 tensors in kiln's NCHW layout: 1-D (as 2-D with H = 1), 2-D and
// 3-D convolutions, groups (depthwise included), strides, dilations, explicit pads and auto_pad.
// FusedConv adds its bias, residual Z and activation in an epilogue kernel of our own (dnn.cu),
// in the reference's order Y = act(conv + B + Z), in FP32. Without cuDNN (KILN_HAVE_CUDNN unset)
// the table is empty and both ops stay on the CPU.
//
// NOTE on the approach.
// - Padding: the output size and the pads come from the reference's own code (ref/spatial.h), so
//   auto_pad and the output shape agree with it. cuDNN takes one pad per axis, applied at both
//   ends. Per spatial axis with pads (b, e): when cuDNN's symmetric pad b gives the same number
//   of windows, cuDNN runs on X as it is (the windows are then identical: SAME_LOWER's usual
//   case); otherwise X is first copied zero-extended by |e - b| at the end (e > b) or the start
//   (b > e) and cuDNN pads min(b, e) (SAME_UPPER with a stride, TF-style models' usual case).
// - Algorithms: per input shape (X's and W's dims, dtype, device) the first Compute asks cuDNN's
//   heuristics (cudnnGetConvolutionForwardAlgorithm_v7: no benchmark, so no synchronization and
//   no device memory of its own) and keeps the best algorithm whose workspace is at most 512 MiB,
//   with the math type cuDNN paired it with. The choices live in a small mutex-guarded cache;
//   descriptors are made per call (host-only, microseconds), so concurrent calls share nothing
//   but the cache. Workspaces and temporaries come from the context's allocator (not zero-filled:
//   every byte read is written first).
// - Math: FP16 and BF16 convolutions use CUDNN_TENSOR_OP_MATH (tensor cores) with an FP32
//   compute type, so products are accumulated in FP32. FP32 convolutions use CUDNN_DEFAULT_MATH,
//   which lets cuDNN use TF32 tensor cores on Ampere and later (inputs rounded to 10 mantissa
//   bits, FP32 accumulation: about 1e-3 relative error on sums of a few hundred products);
//   The setting KILN_CUDA_TF32=0 (base/settings.h) restricts them to CUDNN_FMA_MATH, full FP32.
//   NVIDIA_TF32_OVERRIDE=0 disables TF32 process-wide as well.
// - Half-precision weights (FusedConv with a FLOAT16 / BFLOAT16 W and FLOAT X, B, Z, Y; opt pass
//   half_weights): X is converted to W's type on the device (in the same pass as the padding
//   copy, when there is one), the convolution runs in W's type with FP32 accumulation into a
//   temporary of W's type, and the epilogue widens it, adds the FP32 B and Z, applies the
//   activation and writes the FP32 Y. So X and the convolution's result are rounded to W's type
//   once each (relative error about 1e-3 for FLOAT16, 8e-3 for BFLOAT16).
// - Empty reductions (C = 0, or X empty while Y is not, with padding): Y = act(B + Z), epilogue
//   only. An empty Y launches nothing.
// Declined (placement leaves the node on the CPU): FusedConv with a blocked X or Y (x_block /
// y_block other than 0), and declared ranks outside 3..5 (4-D and higher spatial convolutions).
// cuDNN's fused cudnnConvolutionBiasActivationForward is not used: the epilogue handles every
// activation and dtype alike.

#include "kernels/cuda/tables.h"

#ifdef KILN_HAVE_CUDNN

#include <cudnn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/dnn_handles.h"
#include "kernels/cuda/dnn_launch.h"
#include "kernels/ref/common.h"
#include "kernels/ref/spatial.h"
#include "op/kiln_ops.h"

#endif  // KILN_HAVE_CUDNN

namespace kiln::cuda {

#ifdef KILN_HAVE_CUDNN

namespace {

using ref::OpError;

// The largest workspace an algorithm may ask for; cheaper ones (implicit GEMM needs almost
// none) are always among cuDNN's candidates.
constexpr size_t kMaxWorkspaceBytes = size_t{512} << 20;
// Algorithm choices kept per kernel (distinct input shapes); the cache starts over beyond it.
constexpr size_t kMaxCachedShapes = 256;

bool Tf32Allowed() { return CudaTf32Allowed(); }

bool IsCudaFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

cudnnDataType_t CudnnType(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return CUDNN_DATA_HALF;
    case DataType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

const char* AlgoName(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "cuDNN implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "cuDNN implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "cuDNN gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "cuDNN direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "cuDNN fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "cuDNN fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "cuDNN winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "cuDNN winograd_nonfused";
    default:
      return "cuDNN";
  }
}

// A cuDNN descriptor, destroyed with its owner.
template <typename D, cudnnStatus_t (*Destroy)(D)>
class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (d_ != nullptr) Destroy(d_);
  }
  D* out() { return &d_; }
  D get() const { return d_; }

 private:
  D d_ = nullptr;
};
using TensorDescriptor = Descriptor<cudnnTensorDescriptor_t, &cudnnDestroyTensorDescriptor>;
using FilterDescriptor = Descriptor<cudnnFilterDescriptor_t, &cudnnDestroyFilterDescriptor>;
using ConvDescriptor = Descriptor<cudnnConvolutionDescriptor_t, &cudnnDestroyConvolutionDescriptor>;

// The convolution as cuDNN runs it, for one input shape: 4-D tensors for 1-D convolutions (H = 1)
// and 2-D ones, 5-D for 3-D ones; X possibly replaced by a zero-extended copy.
struct CudnnGeometry {
  int nd = 4;  // tensor rank cuDNN sees
  int x[kDnnMaxRank] = {};
  int w[kDnnMaxRank] = {};
  int y[kDnnMaxRank] = {};
  int pad[kDnnMaxRank - 2] = {};
  int stride[kDnnMaxRank - 2] = {};
  int dilation[kDnnMaxRank - 2] = {};
  bool pad_x = false;               // X is copied, zero-extended as x_pad says
  DnnPadParams x_pad;               // over X's own rank (no H = 1 axis)
  std::vector<int64_t> x_prepared;  // the copy's dims, X's rank
};

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

// The cuDNN geometry of X `x`, W `w` and the resolved window `g`; INVALID_ARGUMENT when a size
// exceeds what cuDNN's descriptors take (32-bit dims and strides).
Result<CudnnGeometry> MakeGeometry(std::string_view op, const Shape& x, const Shape& w,
                                   const Shape& y, const ref::WindowGeometry& g) {
  CudnnGeometry c;
  const int rank = x.rank();
  const int spatial = rank - 2;
  c.x_prepared.assign(x.dims().begin(), x.dims().end());
  c.x_pad.rank = rank;
  std::vector<int64_t> pads(static_cast<size_t>(spatial)), strides(pads.size()),
      dilations(pads.size());
  for (int d = 0; d < spatial; ++d) {
    const size_t du = static_cast<size_t>(d);
    const int64_t n = g.in[du], pb = g.pad_begin[du], pe = g.pad_end[du], s = g.stride[du];
    const int64_t ext = (g.kernel[du] - 1) * g.dilation[du] + 1;
    int64_t pad = pb, extend_begin = 0, extend_end = 0;
    const int64_t span_sym = n + 2 * pb - ext;
    if (pb == pe || (span_sym >= 0 && span_sym / s + 1 == g.out[du])) {
      // cuDNN's symmetric pad b gives the reference's windows.
    } else if (pb < pe) {
      extend_end = pe - pb;
    } else {
      pad = pe;
      extend_begin = pb - pe;
    }
    if (extend_begin > 0 || extend_end > 0) c.pad_x = true;
    c.x_prepared[static_cast<size_t>(d + 2)] = n + extend_begin + extend_end;
    c.x_pad.begin[d + 2] = extend_begin;
    pads[du] = pad;
    strides[du] = s;
    dilations[du] = g.dilation[du];
    // cuDNN's count of windows must be the reference's (it is, by construction).
    if ((c.x_prepared[static_cast<size_t>(d + 2)] + 2 * pad - ext) / s + 1 != g.out[du]) {
      return Status::Internal(
          fmt::format("{}: padding along spatial dim {} does not map onto cuDNN", op, d));
    }
  }
  for (int d = 0; d < rank; ++d) {
    c.x_pad.src_dims[d] = x.dim(d);
    c.x_pad.dst_dims[d] = c.x_prepared[static_cast<size_t>(d)];
  }
  // cuDNN's dims: a 1-D convolution gets an H axis of 1 before its W axis.
  std::vector<int64_t> xd(c.x_prepared), wd(w.dims().begin(), w.dims().end()),
      yd(y.dims().begin(), y.dims().end());
  if (spatial == 1) {
    xd.insert(xd.begin() + 2, 1);
    wd.insert(wd.begin() + 2, 1);
    yd.insert(yd.begin() + 2, 1);
    pads.insert(pads.begin(), 0);
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
  }
  c.nd = static_cast<int>(xd.size());
  int64_t xn = 1, wn = 1, yn = 1;
  for (int d = 0; d < c.nd; ++d) {
    const size_t du = static_cast<size_t>(d);
    xn *= xd[du];
    wn *= wd[du];
    yn *= yd[du];
    c.x[d] = static_cast<int>(std::min<int64_t>(xd[du], INT_MAX));
    c.w[d] = static_cast<int>(std::min<int64_t>(wd[du], INT_MAX));
    c.y[d] = static_cast<int>(std::min<int64_t>(yd[du], INT_MAX));
  }
  for (int d = 0; d < c.nd - 2; ++d) {
    const size_t du = static_cast<size_t>(d);
    if (!FitsInt(pads[du]) || !FitsInt(strides[du]) || !FitsInt(dilations[du])) {
      return OpError(op, "pads, strides and dilations must be below 2^31 for cuDNN");
    }
    c.pad[d] = static_cast<int>(pads[du]);
    c.stride[d] = static_cast<int>(strides[du]);
    c.dilation[d] = static_cast<int>(dilations[du]);
  }
  // Element counts bound every dim and stride of the packed layouts.
  if (!FitsInt(xn) || !FitsInt(wn) || !FitsInt(yn)) {
    return OpError(op,
                   "X {}, W {} or Y {} has 2^31 elements or more, beyond cuDNN's 32-bit "
                   "descriptors",
                   x.ToString(), w.ToString(), y.ToString());
  }
  return c;
}

// The descriptors of one call.
struct Descriptors {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvDescriptor conv;
};

void PackedStrides(int nd, const int* dims, int* strides) {
  int s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    strides[d] = s;
    s *= dims[d];
  }
}

Status MakeDescriptors(const CudnnGeometry& c, DataType type, int64_t group, cudnnMathType_t math,
                       Descriptors& d) {
  const cudnnDataType_t dt = CudnnType(type);
  int strides[kDnnMaxRank];
  KILN_CUDNN_OK(cudnnCreateTensorDescriptor(d.x.out()));
  PackedStrides(c.nd, c.x, strides);
  KILN_CUDNN_OK(cudnnSetTensorNdDescriptor(d.x.get(), dt, c.nd, c.x, strides));
  KILN_CUDNN_OK(cudnnCreateTensorDescriptor(d.y.out()));
  PackedStrides(c.nd, c.y, strides);
  KILN_CUDNN_OK(cudnnSetTensorNdDescriptor(d.y.get(), dt, c.nd, c.y, strides));
  KILN_CUDNN_OK(cudnnCreateFilterDescriptor(d.w.out()));
  KILN_CUDNN_OK(cudnnSetFilterNdDescriptor(d.w.get(), dt, CUDNN_TENSOR_NCHW, c.nd, c.w));
  KILN_CUDNN_OK(cudnnCreateConvolutionDescriptor(d.conv.out()));
  // FP32 compute type for every data type: FP32 accumulation (PSEUDO_HALF / PSEUDO_BFLOAT16).
  KILN_CUDNN_OK(cudnnSetConvolutionNdDescriptor(d.conv.get(), c.nd - 2, c.pad, c.stride, c.dilation,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  KILN_CUDNN_OK(cudnnSetConvolutionGroupCount(d.conv.get(), static_cast<int>(group)));
  KILN_CUDNN_OK(cudnnSetConvolutionMathType(d.conv.get(), math));
  return Status::OK();
}

// The math type a convolution in `type` asks cuDNN for (see the NOTE).
cudnnMathType_t BaseMath(DataType type) {
  if (type != DataType::kFloat32) return CUDNN_TENSOR_OP_MATH;
  return Tf32Allowed() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

// The algorithm chosen for one input shape.
struct Algo {
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace_bytes = 0;
};

// Asks cuDNN's heuristics for the convolution of `d` (whose math type it may change).
Result<Algo> ChooseAlgo(std::string_view op, cudnnHandle_t handle, DataType type,
                        const CudnnGeometry& c, Descriptors& d) {
  // The output dims cuDNN derives must be ours.
  int y[kDnnMaxRank] = {};
  KILN_CUDNN_OK(cudnnGetConvolutionNdForwardOutputDim(d.conv.get(), d.x.get(), d.w.get(), c.nd, y));
  if (!std::equal(y, y + c.nd, c.y)) {
    return Status::Internal(fmt::format("{}: cuDNN's output dims [{}] differ from [{}]", op,
                                        fmt::join(y, y + c.nd, ","),
                                        fmt::join(c.y, c.y + c.nd, ",")));
  }
  int max_count = 0;
  KILN_CUDNN_OK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(max_count, 1)));
  int returned = 0;
  KILN_CUDNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x.get(), d.w.get(), d.conv.get(),
                                                       d.y.get(), static_cast<int>(perf.size()),
                                                       &returned, perf.data()));
  const cudnnMathType_t base = BaseMath(type);
  std::vector<Algo> candidates;
  for (int i = 0; i < returned && i < static_cast<int>(perf.size()); ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    // Without TF32 an FP32 convolution takes FMA algorithms only.
    if (base == CUDNN_FMA_MATH && p.mathType != CUDNN_FMA_MATH) continue;
    candidates.push_back({p.algo, p.mathType, 0});
  }
  // The last resort: implicit GEMM, which takes every configuration and no workspace.
  candidates.push_back({CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, base, 0});
  for (Algo& a : candidates) {
    if (cudnnSetConvolutionMathType(d.conv.get(), a.math) != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(handle, d.x.get(), d.w.get(), d.conv.get(),
                                                d.y.get(), a.algo,
                                                &bytes) != CUDNN_STATUS_SUCCESS ||
        bytes > kMaxWorkspaceBytes) {
      continue;
    }
    a.workspace_bytes = bytes;
    return a;
  }
  return Status::Internal(fmt::format(
      "{}: cuDNN has no forward algorithm for X [{}], W [{}] in {} within a {} MiB workspace", op,
      fmt::join(c.x, c.x + c.nd, ","), fmt::join(c.w, c.w + c.nd, ","), DataTypeName(type),
      kMaxWorkspaceBytes >> 20));
}

// A device temporary from the context's allocator, not zero-filled (its user writes it all).
Result<OwnedTensor> Scratch(const KernelContext& ctx, DataType dtype, const Shape& shape) {
  return OwnedTensor::AllocateForOverwrite(dtype, shape, ctx.allocator());
}

class ConvKernel final : public Kernel {
 public:
  ConvKernel(bool fused, ref::WindowAttrs window, int64_t group, Activation act)
      : fused_(fused), window_(std::move(window)), group_(group), act_(act) {}

  std::string Implementation() const override {
    MutexLock lock(mu_);
    std::set<std::string> names;
    for (const auto& [key, a] : algos_) names.insert(AlgoName(a.algo));
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  Status Compute(KernelContext& ctx) const override {
    const char* op = fused_ ? "FusedConv" : "Conv";
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    for (int i = 0; i < 2; ++i) {
      if (!ctx.has_input(i)) return OpError(op, "required input {} is missing", i);
    }
    if (ctx.num_outputs() < 1) return OpError(op, "no output slot");
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    const Tensor& w = ctx.input(1);  // [M, C / group, k1..kn]
    const bool has_bias = ctx.has_input(2);
    const bool has_z = fused_ && ctx.has_input(3);
    for (int i = 0; i < (has_z ? 4 : 3); ++i) {
      if (ctx.has_input(i) && !ctx.input(i).is_contiguous()) {
        return OpError(op, "input {} is not contiguous", i);
      }
    }
    const DataType type = x.dtype();
    if (!IsCudaFloat(type)) {
      return OpError(op, "X has dtype {}; the CUDA kernel takes FLOAT, FLOAT16 or BFLOAT16",
                     DataTypeName(type));
    }
    // FusedConv's half-precision weights: FLOAT X, B, Z and Y with a FLOAT16 / BFLOAT16 W.
    const bool half_weight = fused_ && type == DataType::kFloat32 &&
                             (w.dtype() == DataType::kFloat16 || w.dtype() == DataType::kBFloat16);
    for (int i = 1; i < (has_bias ? 3 : 2); ++i) {
      if (i == 1 && half_weight) continue;
      if (ctx.input(i).dtype() != type) {
        return OpError(op, "input {} has dtype {}, X has {}", i, DataTypeName(ctx.input(i).dtype()),
                       DataTypeName(type));
      }
    }
    if (x.rank() < 3) {
      return OpError(op, "X must have rank >= 3 ([N, C, spatial...]), got {}",
                     x.shape().ToString());
    }
    if (w.rank() != x.rank()) {
      return OpError(op, "W {} must have the same rank as X {}", w.shape().ToString(),
                     x.shape().ToString());
    }
    if (x.rank() > kDnnMaxRank) {
      return OpError(op, "X {}: the CUDA kernel takes 1-D to 3-D convolutions (rank 3 to 5)",
                     x.shape().ToString());
    }
    const int64_t batch = x.dim(0), channels = x.dim(1);
    const int64_t out_channels = w.dim(0), group_channels = w.dim(1);
    if (channels % group_ != 0 || channels / group_ != group_channels) {
      return OpError(op, "X {} has {} channels but W {} with group={} expects {} x {} channels",
                     x.shape().ToString(), channels, w.shape().ToString(), group_, group_,
                     group_channels);
    }
    if (out_channels % group_ != 0) {
      return OpError(op, "W {} has {} output channels, not divisible by group={}",
                     w.shape().ToString(), out_channels, group_);
    }
    if (has_bias) {
      const Tensor& b = ctx.input(2);
      if (b.rank() != 1 || b.dim(0) != out_channels) {
        return OpError(op, "B {} must be 1-D with {} elements (W's output channels)",
                       b.shape().ToString(), out_channels);
      }
    }
    const std::span<const int64_t> kernel = w.shape().dims().subspan(2);
    if (!window_.kernel_shape.empty() &&
        !std::equal(kernel.begin(), kernel.end(), window_.kernel_shape.begin(),
                    window_.kernel_shape.end())) {
      return OpError(op, "attribute 'kernel_shape' [{}] differs from W's spatial dims {}",
                     fmt::join(window_.kernel_shape, ","), w.shape().ToString());
    }
    KILN_ASSIGN_OR_RETURN(ref::WindowGeometry g,
                          ref::ResolveWindow(op, window_, x.shape().dims().subspan(2), kernel));
    std::vector<int64_t> out_dims = {batch, out_channels};
    out_dims.insert(out_dims.end(), g.out.begin(), g.out.begin() + g.rank);
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    if (has_z) {
      const Tensor& z = ctx.input(3);
      if (!(z.shape() == out_shape) || z.dtype() != type) {
        return OpError(op, "Z {} {} must have Y's dtype and shape exactly, {} {}",
                       DataTypeName(z.dtype()), z.shape().ToString(), DataTypeName(type),
                       out_shape.ToString());
      }
    }

    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, type, out_shape));
    if (y.num_elements() == 0) return Status::OK();
    KILN_ASSIGN_OR_RETURN(ElemType y_elem, ElemTypeOf(type));
    DnnEpilogueParams ep;
    ep.n = y.num_elements();
    ep.inner = g.out_size;
    ep.channels = out_channels;
    ep.act = act_;
    const void* bias = has_bias ? ctx.input(2).raw_data() : nullptr;
    const void* z = has_z ? ctx.input(3).raw_data() : nullptr;
    if (x.num_elements() == 0 || w.num_elements() == 0) {
      // An empty reduction (no input channels, or every window in the padding of an empty X):
      // the convolution is all zeros.
      KILN_CUDA_OK(LaunchDnnEpilogue(y_elem, nullptr, y_elem, bias, z, y.raw_data(), ep, stream));
      return Status::OK();
    }

    // The type cuDNN computes in: X's, or the half-precision W's.
    const DataType conv_type = half_weight ? w.dtype() : type;
    KILN_ASSIGN_OR_RETURN(ElemType conv_elem, ElemTypeOf(conv_type));
    KILN_ASSIGN_OR_RETURN(CudnnGeometry geo, MakeGeometry(op, x.shape(), w.shape(), out_shape, g));

    // X as cuDNN takes it: zero-extended for asymmetric pads, converted for half weights.
    OwnedTensor x_copy;
    const void* x_data = x.raw_data();
    if (geo.pad_x || half_weight) {
      const Shape copy_shape(geo.x_prepared);
      KILN_ASSIGN_OR_RETURN(x_copy, Scratch(ctx, conv_type, copy_shape));
      KILN_CUDA_OK(LaunchDnnPrepareInput(y_elem, x.raw_data(), conv_elem, x_copy.raw_data(),
                                         copy_shape.NumElements(), geo.pad_x ? &geo.x_pad : nullptr,
                                         stream));
      x_data = x_copy.raw_data();
    }
    // The convolution's result: Y itself, or a temporary of W's type for half weights.
    OwnedTensor conv_copy;
    void* conv_data = y.raw_data();
    if (half_weight) {
      KILN_ASSIGN_OR_RETURN(conv_copy, Scratch(ctx, conv_type, out_shape));
      conv_data = conv_copy.raw_data();
    }

    KILN_ASSIGN_OR_RETURN(cudnnHandle_t handle, CudnnHandleFor(stream));
    Descriptors d;
    KILN_RETURN_IF_ERROR(MakeDescriptors(geo, conv_type, group_, BaseMath(conv_type), d));
    int device = 0;
    KILN_CUDA_OK(cudaGetDevice(&device));
    std::vector<int64_t> key = {device, static_cast<int64_t>(conv_type)};
    key.insert(key.end(), x.shape().dims().begin(), x.shape().dims().end());
    key.insert(key.end(), w.shape().dims().begin(), w.shape().dims().end());
    KILN_ASSIGN_OR_RETURN(Algo algo, FindAlgo(op, key, handle, conv_type, geo, d));
    KILN_CUDNN_OK(cudnnSetConvolutionMathType(d.conv.get(), algo.math));
    OwnedTensor workspace;
    if (algo.workspace_bytes > 0) {
      KILN_ASSIGN_OR_RETURN(
          workspace,
          Scratch(ctx, DataType::kUint8, Shape({static_cast<int64_t>(algo.workspace_bytes)})));
    }
    // Scaling factors are float for FLOAT, FLOAT16 and BFLOAT16 data; beta 0: Y is not read.
    const float one = 1.0f, zero = 0.0f;
    KILN_CUDNN_OK(cudnnConvolutionForward(handle, &one, d.x.get(), x_data, d.w.get(), w.raw_data(),
                                          d.conv.get(), algo.algo,
                                          workspace.valid() ? workspace.raw_data() : nullptr,
                                          algo.workspace_bytes, &zero, d.y.get(), conv_data));
    if (half_weight || has_bias || has_z || act_.kind != ActKind::kNone) {
      KILN_CUDA_OK(
          LaunchDnnEpilogue(conv_elem, conv_data, y_elem, bias, z, y.raw_data(), ep, stream));
    }
    // The temporaries are freed stream-ordered (the device allocator's frees wait for the work
    // enqueued so far).
    return Status::OK();
  }

 private:
  // The cached algorithm for `key`, chosen now when there is none.
  Result<Algo> FindAlgo(std::string_view op, const std::vector<int64_t>& key, cudnnHandle_t handle,
                        DataType type, const CudnnGeometry& c, Descriptors& d) const
      KILN_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      auto it = algos_.find(key);
      if (it != algos_.end()) return it->second;
    }
    KILN_ASSIGN_OR_RETURN(Algo algo, ChooseAlgo(op, handle, type, c, d));
    MutexLock lock(mu_);
    if (algos_.size() >= kMaxCachedShapes) algos_.clear();
    return algos_.emplace(key, algo).first->second;
  }

  bool fused_;
  ref::WindowAttrs window_;
  int64_t group_;
  Activation act_;
  mutable Mutex mu_;
  // Per (device, compute type, X dims, W dims).
  mutable std::map<std::vector<int64_t>, Algo> algos_ KILN_GUARDED_BY(mu_);
};

// The declared rank of input i, or -1 when unknown.
int DeclaredRank(const KernelInfo& info, int i) {
  if (const OwnedTensor* c = info.constant_input(i)) return c->shape().rank();
  const ValueType& t = info.input_type(i);
  return t.has_shape ? static_cast<int>(t.dims.size()) : -1;
}

bool SupportsConvRank(const KernelInfo& info) {
  for (int i = 0; i < 2; ++i) {
    const int r = DeclaredRank(info, i);
    if (r >= 0 && (r < 3 || r > kDnnMaxRank)) return false;
  }
  return true;
}

// A blocked layout attribute (x_block / y_block) other than 0.
bool HasBlockedLayout(const KernelInfo& info) {
  for (std::string_view name : {kAttrXBlock, kAttrYBlock}) {
    const Attribute* a = info.node().FindAttribute(name);
    if (a != nullptr && (a->type != AttributeType::kInt || a->i != 0)) return true;
  }
  return false;
}

bool SupportsConv(const KernelInfo& info) { return SupportsConvRank(info); }

bool SupportsFusedConv(const KernelInfo& info) {
  return !HasBlockedLayout(info) && SupportsConvRank(info);
}

Result<std::unique_ptr<Kernel>> CreateKernel(const KernelInfo& info, bool fused) {
  const std::string& op = info.node().op_type;
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  Activation act;
  if (fused) {
    if (info.num_inputs() > 4) {
      return OpError(op, "takes at most 4 inputs, got {}", info.num_inputs());
    }
    KILN_RETURN_IF_ERROR(ref::LimitOutputs(info, 1, "fused ops have one output"));
    if (HasBlockedLayout(info)) {
      return OpError(op, "the CUDA kernel does not take blocked layouts (x_block / y_block)");
    }
    KILN_ASSIGN_OR_RETURN(act, ParseActivation(info));
  }
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t group, attrs.Int("group", 1));
  if (group < 1) return OpError(op, "attribute 'group' is {}, expected >= 1", group);
  if (group > INT_MAX) return OpError(op, "attribute 'group' is {}, above 2^31 - 1", group);
  KILN_ASSIGN_OR_RETURN(ref::WindowAttrs window,
                        ref::ReadWindowAttrs(attrs, /*kernel_shape_required=*/false));
  return std::unique_ptr<Kernel>(
      std::make_unique<ConvKernel>(fused, std::move(window), group, act));
}

Result<std::unique_ptr<Kernel>> CreateConv(const KernelInfo& info) {
  return CreateKernel(info, /*fused=*/false);
}

Result<std::unique_ptr<Kernel>> CreateFusedConv(const KernelInfo& info) {
  return CreateKernel(info, /*fused=*/true);
}

}  // namespace

std::vector<KernelDef> DnnKernelDefs() {
  return {
      // Conv-11 only rewords auto_pad and the attribute defaults: one row, as the reference's.
      {"Conv", "", 7, 17, DeviceType::kCuda, kCudaFloatTypes, 0, &CreateConv, "cuda",
       &SupportsConv},
      {kFusedConvOp, kKilnDomain, 1, 1, DeviceType::kCuda, kCudaFloatTypes, 0, &CreateFusedConv,
       "cuda", &SupportsFusedConv},
  };
}

#else  // !KILN_HAVE_CUDNN

std::vector<KernelDef> DnnKernelDefs() { return {}; }

#endif  // KILN_HAVE_CUDNN

}  // namespace kiln::cuda
