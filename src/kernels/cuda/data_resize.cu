// SPDX-License-Identifier: Apache-2.0
// Device code of Resize (data_launch.h): modes nearest (any element type, moved as words) and
// n-linear (FP32, FP16, BF16, FP64), every nearest_mode, the coordinate transformations
// half_pixel, pytorch_half_pixel, align_corners, asymmetric and tf_half_pixel_for_nn.
//
// NOTE on the approach. One thread per output element. For each axis the original coordinate
// and its taps are those of the reference (ref/resize.cc OriginalCoord and MakeTaps), computed
// in double with the same operations in the same order (the one product that feeds a
// subtraction, scale * in, is rounded on its own, not fused), so nearest picks the reference's
// index exactly: f = floor(x), r = x - f, an integral x taking f - 1 and r = 1; f clamped to
// [-(in + 4), in + 4]; the neighbours f and f + 1 clamped to the axis. Nearest takes f + 1 for
// r == 1 and else by nearest_mode; linear weighs f by 1 - r and f + 1 by r, skipping the zero
// weight of r == 1 as the reference skips zero taps (an inf stays an inf). Axes the host marked
// identity (scale 1 under a transformation that maps o to o exactly) skip the arithmetic. Linear
// sums the weighted corners of the axes with two taps (a subset enumeration over a bit mask, the
// per-axis taps in registers), in FP32 for FP32/FP16/BF16 and in double for FP64, where the
// reference sums in double: results differ from it by a few FP32 ulps.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/data_launch.h"
#include "kernels/cuda/device.cuh"

namespace kiln::cuda {
namespace {

#ifdef __CUDA_ARCH__
#define KILN_RESIZE_UNROLL _Pragma("unroll")
#else
#define KILN_RESIZE_UNROLL
#endif

constexpr int64_t kIndex32Limit = int64_t{1} << 31;

struct ResizeArgs {
  ResizeParams p;
  int64_t n;
  int64_t in_strides[kMaxRank];  // elements
};

// Loads as the accumulation type and stores rounded to nearest even (host and device).
__host__ __device__ __forceinline__ float Load(float v) { return v; }
__host__ __device__ __forceinline__ double Load(double v) { return v; }
__host__ __device__ __forceinline__ float Load(__half v) { return __half2float(v); }
__host__ __device__ __forceinline__ float Load(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T, typename A>
__host__ __device__ __forceinline__ T Store(A v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return static_cast<T>(v);
  }
}

// a * b rounded on its own: on the device never fused into a following addition (an FMA would
// skip the rounding of the reference's product).
__host__ __device__ __forceinline__ double MulRounded(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// The reference's OriginalCoord for output coordinate x (ref/resize.cc).
__host__ __device__ __forceinline__ double OriginalCoord(ResizeCoord mode, double x, double scale,
                                                         int64_t in_len) {
  const double in_w = static_cast<double>(in_len);
  const double out_w = MulRounded(scale, in_w);
  switch (mode) {
    case ResizeCoord::kAlignCorners:
      return out_w == 1 ? 0.0 : x * (in_w - 1) / (out_w - 1);
    case ResizeCoord::kAsymmetric:
      return x / scale;
    case ResizeCoord::kTfHalfPixelForNn:
      return (x + 0.5) / scale;
    case ResizeCoord::kPytorchHalfPixel:
      return out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case ResizeCoord::kHalfPixel:
      break;
  }
  return (x + 0.5) / scale - 0.5;
}

// The reference's neighbours of output coordinate o on axis `a`: i0 = clamp(f), i1 =
// clamp(f + 1), and r in (0, 1] (see the NOTE).
__host__ __device__ __forceinline__ void Neighbours(ResizeCoord mode, const ResizeAxis& a,
                                                    int64_t o, int64_t& i0, int64_t& i1,
                                                    double& r) {
  const double x = OriginalCoord(mode, static_cast<double>(o), a.scale, a.in);
  double f = floor(x);
  r = x - f;
  if (r == 0) {
    f -= 1;
    r = 1;
  }
  const double lim = static_cast<double>(a.in) + 4;
  f = f < -lim ? -lim : (f > lim ? lim : f);
  const int64_t fi = static_cast<int64_t>(f);
  const int64_t last = a.in - 1;
  i0 = fi < 0 ? 0 : (fi > last ? last : fi);
  i1 = fi + 1 < 0 ? 0 : (fi + 1 > last ? last : fi + 1);
}

__host__ __device__ __forceinline__ int64_t NearestIndex(const ResizeParams& p, const ResizeAxis& a,
                                                         int64_t o) {
  if (a.identity) return o;
  int64_t i0, i1;
  double r;
  Neighbours(p.coord, a, o, i0, i1, r);
  bool right = true;  // r == 1: the integral coordinate itself
  if (r != 1) {
    switch (p.nearest) {
      case ResizeNearest::kRoundPreferFloor:
        right = r > 0.5;
        break;
      case ResizeNearest::kRoundPreferCeil:
        right = r >= 0.5;
        break;
      case ResizeNearest::kFloor:
        right = false;
        break;
      case ResizeNearest::kCeil:
        right = true;
        break;
    }
  }
  return right ? i1 : i0;
}

template <typename W, typename U>
__host__ __device__ __forceinline__ void NearestElement(const ResizeArgs& a, U out) {
  int64_t offset = 0;
  U i = out;
  KILN_RESIZE_UNROLL
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d < a.p.rank) {
      U c = i;
      if (d > 0) {
        const U dim = static_cast<U>(a.p.axes[d].out);
        const U q = i / dim;
        c = i - q * dim;
        i = q;
      }
      offset += NearestIndex(a.p, a.p.axes[d], static_cast<int64_t>(c)) * a.in_strides[d];
    }
  }
  static_cast<W*>(a.p.dst)[out] = static_cast<const W*>(a.p.src)[offset];
}

template <typename T, typename A, typename U>
__host__ __device__ __forceinline__ void LinearElement(const ResizeArgs& a, U out) {
  int64_t base = 0;
  unsigned mask = 0;  // bit d: axis d has two taps
  int64_t delta[kMaxRank];
  A w0[kMaxRank], w1[kMaxRank];
  U i = out;
  KILN_RESIZE_UNROLL
  for (int d = kMaxRank - 1; d >= 0; --d) {
    delta[d] = 0;
    w0[d] = w1[d] = A(0);
    if (d < a.p.rank) {
      U c = i;
      if (d > 0) {
        const U dim = static_cast<U>(a.p.axes[d].out);
        const U q = i / dim;
        c = i - q * dim;
        i = q;
      }
      const ResizeAxis& axis = a.p.axes[d];
      const int64_t stride = a.in_strides[d];
      if (axis.identity) {
        base += static_cast<int64_t>(c) * stride;
      } else {
        int64_t i0, i1;
        double r;
        Neighbours(a.p.coord, axis, static_cast<int64_t>(c), i0, i1, r);
        if (r == 1) {
          base += i1 * stride;
        } else {
          base += i0 * stride;
          delta[d] = (i1 - i0) * stride;
          w0[d] = static_cast<A>(1 - r);
          w1[d] = static_cast<A>(r);
          mask |= 1u << d;
        }
      }
    }
  }
  const T* src = static_cast<const T*>(a.p.src);
  A acc = A(0);
  unsigned s = 0;  // the subsets of mask, in increasing order
  do {
    A w = A(1);
    int64_t offset = base;
    KILN_RESIZE_UNROLL
    for (int d = 0; d < kMaxRank; ++d) {
      if ((mask >> d) & 1u) {
        if ((s >> d) & 1u) {
          w *= w1[d];
          offset += delta[d];
        } else {
          w *= w0[d];
        }
      }
    }
    acc += w * Load(src[offset]);
    s = (s - mask) & mask;
  } while (s != 0);
  static_cast<T*>(a.p.dst)[out] = Store<T>(acc);
}

#define KILN_RESIZE_LOOP(U, i, n)                                                   \
  for (U i = static_cast<U>(blockIdx.x) * static_cast<U>(blockDim.x) + threadIdx.x; \
       i < static_cast<U>(n); i += static_cast<U>(blockDim.x) * static_cast<U>(gridDim.x))

template <typename W, typename U>
__global__ void __launch_bounds__(kThreads)
    ResizeNearestKernel(const __grid_constant__ ResizeArgs a) {
  KILN_RESIZE_LOOP(U, i, a.n) { NearestElement<W>(a, i); }
}

template <typename T, typename A, typename U>
__global__ void __launch_bounds__(kThreads)
    ResizeLinearKernel(const __grid_constant__ ResizeArgs a) {
  KILN_RESIZE_LOOP(U, i, a.n) { LinearElement<T, A>(a, i); }
}

int64_t ElemBytes(ElemType t) {
  switch (t) {
    case ElemType::kF32:
    case ElemType::kI32:
      return 4;
    case ElemType::kF16:
    case ElemType::kBF16:
      return 2;
    case ElemType::kI64:
    case ElemType::kF64:
      return 8;
    case ElemType::kI8:
    case ElemType::kU8:
    case ElemType::kBool:
      return 1;
  }
  return 0;
}

// Fills the strides and the element count; false when there is nothing to do.
bool PrepareArgs(const ResizeParams& p, ResizeArgs& a, int64_t& in_elements) {
  a.p = p;
  a.n = 1;
  in_elements = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    a.in_strides[d] = in_elements;
    in_elements *= p.axes[d].in;
    a.n *= p.axes[d].out;
  }
  return a.n > 0;
}

template <typename U>
cudaError_t LaunchWithIndex(const ResizeArgs& a, cudaStream_t stream) {
  const ResizeParams& p = a.p;
  if (p.linear) {
    switch (p.type) {
      case ElemType::kF32:
        ResizeLinearKernel<float, float, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
        return cudaGetLastError();
      case ElemType::kF16:
        ResizeLinearKernel<__half, float, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
        return cudaGetLastError();
      case ElemType::kBF16:
        ResizeLinearKernel<__nv_bfloat16, float, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
        return cudaGetLastError();
      case ElemType::kF64:
        ResizeLinearKernel<double, double, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
        return cudaGetLastError();
      default:
        return cudaErrorInvalidValue;
    }
  }
  switch (ElemBytes(p.type)) {
    case 1:
      ResizeNearestKernel<uint8_t, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
      return cudaGetLastError();
    case 2:
      ResizeNearestKernel<uint16_t, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
      return cudaGetLastError();
    case 4:
      ResizeNearestKernel<uint32_t, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
      return cudaGetLastError();
    case 8:
      ResizeNearestKernel<uint64_t, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
      return cudaGetLastError();
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchResize(const ResizeParams& p, cudaStream_t stream) {
  ResizeArgs a{};
  int64_t in_elements = 0;
  if (!PrepareArgs(p, a, in_elements)) return cudaSuccess;
  if (a.n < kIndex32Limit && in_elements < kIndex32Limit) {
    return LaunchWithIndex<uint32_t>(a, stream);
  }
  return LaunchWithIndex<uint64_t>(a, stream);
}

}  // namespace kiln::cuda
