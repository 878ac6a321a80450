// SPDX-License-Identifier: Apache-2.0
// Reference layout and selection kernels of the tensor op family: Trilu, EyeLike, DepthToSpace,
// SpaceToDepth, Compress, NonZero, ReverseSequence, OneHot and CumSum.
//
// NOTE on the approach: each kernel computes its output shape, then maps every output element
// to the input element it comes from with the op's closed-form index formula (DepthToSpace:
// DCR channel (bh * b + bw) * C' + c, CRD channel c * b * b + bh * b + bw; SpaceToDepth the
// inverse of DCR), copying through the movers of common.h so every dtype works. Outputs are
// zero-filled on allocation, which Trilu and EyeLike rely on. CumSum accumulates in the element
// type (16-bit floats in float, integers modulo 2^n on the unsigned type).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/tensor_family_util.h"

namespace kiln::ref {
namespace {

// Whether element i of `t` is non-zero (non-empty for BYTES; -0.0 counts as zero).
Result<std::vector<bool>> Truthiness(const Tensor& t, std::string_view op) {
  std::vector<bool> v(static_cast<size_t>(t.num_elements()));
  KILN_RETURN_IF_ERROR(DispatchAll(t.dtype(), op, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* p = t.data<const T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, std::string>) {
        v[i] = !p[i].empty();
      } else if constexpr (std::is_same_v<T, bool>) {
        v[i] = p[i];
      } else {
        v[i] = ToMath(p[i]) != 0;
      }
    }
    return Status::OK();
  }));
  return v;
}

// --- Trilu, EyeLike --------------------------------------------------------------------------

class TriluKernel final : public Kernel {
 public:
  explicit TriluKernel(bool upper) : upper_(upper) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Trilu"));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) return OpError("Trilu", "the input must have rank >= 2");
    int64_t k = 0;
    if (ctx.has_input(1)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, "Trilu"));
      KILN_ASSIGN_OR_RETURN(k, ReadIntScalar(ctx.input(1), "Trilu", "k"));
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
    const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
    const int64_t mats = rows * cols == 0 ? 0 : x.num_elements() / (rows * cols);
    WithMover(x, y, [&](auto mover) {
      for (int64_t m = 0; m < mats; ++m) {
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < cols; ++j) {
            // j - i compared with k; k may be anywhere in int64, so compare without overflow.
            const int64_t diag = j - i;
            const bool keep = upper_ ? diag >= k : diag <= k;
            if (keep) {
              const int64_t e = (m * rows + i) * cols + j;
              mover(e, e);
            }
          }
        }
      }
    });
    return Status::OK();
  }

 private:
  bool upper_;
};

class EyeLikeKernel final : public Kernel {
 public:
  EyeLikeKernel(std::optional<DataType> dtype, int64_t k) : dtype_(dtype), k_(k) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "EyeLike"));
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2) {
      return OpError("EyeLike", "the input must be 2-D, got shape {}", x.shape().ToString());
    }
    const DataType dtype = dtype_.value_or(x.dtype());
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, dtype, x.shape()));
    const int64_t rows = x.dim(0), cols = x.dim(1);
    return DispatchType<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t,
                        uint8_t, uint16_t, uint32_t, uint64_t, bool>(
        dtype, "EyeLike", [&](auto tag) -> Status {
          using T = typename decltype(tag)::type;
          T one;
          if constexpr (std::is_same_v<T, bool>) {
            one = true;
          } else {
            one = FromDouble<T>(1.0);
          }
          T* p = y.data<T>();
          for (int64_t i = 0; i < rows; ++i) {
            // Column i + k, when inside [0, cols); k is bounded by the factory.
            const int64_t j = i + k_;
            if (j >= 0 && j < cols) p[i * cols + j] = one;
          }
          return Status::OK();
        });
  }

 private:
  std::optional<DataType> dtype_;
  int64_t k_;
};

// --- DepthToSpace, SpaceToDepth --------------------------------------------------------------

class DepthToSpaceKernel final : public Kernel {
 public:
  DepthToSpaceKernel(int64_t block, bool crd) : block_(block), crd_(crd) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "DepthToSpace"));
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) {
      return OpError("DepthToSpace", "the input must be 4-D [N,C,H,W], got {}",
                     x.shape().ToString());
    }
    const int64_t b = block_, n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
    if (c % (b * b) != 0) {
      return OpError("DepthToSpace", "channels {} are not divisible by blocksize^2 = {}", c, b * b);
    }
    const int64_t oc = c / (b * b);
    int64_t oh = 0, ow = 0;
    if (__builtin_mul_overflow(h, b, &oh) || __builtin_mul_overflow(w, b, &ow)) {
      return OpError("DepthToSpace", "output size overflows");
    }
    KILN_ASSIGN_OR_RETURN(Shape out,
                          MakeShape("DepthToSpace", std::vector<int64_t>{n, oc, oh, ow}));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
    WithMover(x, y, [&](auto mover) {
      int64_t o = 0;
      for (int64_t in = 0; in < n; ++in) {
        for (int64_t ic = 0; ic < oc; ++ic) {
          for (int64_t yh = 0; yh < oh; ++yh) {
            for (int64_t yw = 0; yw < ow; ++yw, ++o) {
              const int64_t bh = yh % b, bw = yw % b;
              const int64_t src_c = crd_ ? ic * b * b + bh * b + bw : (bh * b + bw) * oc + ic;
              mover(o, ((in * c + src_c) * h + yh / b) * w + yw / b);
            }
          }
        }
      }
    });
    return Status::OK();
  }

 private:
  int64_t block_;
  bool crd_;
};

class SpaceToDepthKernel final : public Kernel {
 public:
  explicit SpaceToDepthKernel(int64_t block) : block_(block) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "SpaceToDepth"));
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) {
      return OpError("SpaceToDepth", "the input must be 4-D [N,C,H,W], got {}",
                     x.shape().ToString());
    }
    const int64_t b = block_, n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
    if (h % b != 0 || w % b != 0) {
      return OpError("SpaceToDepth", "spatial dims {}x{} are not divisible by blocksize {}", h, w,
                     b);
    }
    int64_t oc = 0;
    if (__builtin_mul_overflow(c, b * b, &oc)) {
      return OpError("SpaceToDepth", "output size overflows");
    }
    const int64_t oh = h / b, ow = w / b;
    KILN_ASSIGN_OR_RETURN(Shape out,
                          MakeShape("SpaceToDepth", std::vector<int64_t>{n, oc, oh, ow}));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
    WithMover(x, y, [&](auto mover) {
      int64_t o = 0;
      for (int64_t in = 0; in < n; ++in) {
        for (int64_t yc = 0; yc < oc; ++yc) {
          const int64_t blk = yc / c, src_c = yc % c, bh = blk / b, bw = blk % b;
          for (int64_t yh = 0; yh < oh; ++yh) {
            for (int64_t yw = 0; yw < ow; ++yw, ++o) {
              mover(o, ((in * c + src_c) * h + yh * b + bh) * w + yw * b + bw);
            }
          }
        }
      }
    });
    return Status::OK();
  }

 private:
  int64_t block_;
};

// --- Compress, NonZero -----------------------------------------------------------------------

class CompressKernel final : public Kernel {
 public:
  explicit CompressKernel(std::optional<int64_t> axis) : axis_(axis) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Compress"));
    const Tensor& x = ctx.input(0);
    const Tensor& cond = ctx.input(1);
    if (cond.dtype() != DataType::kBool || cond.rank() != 1) {
      return OpError("Compress", "condition must be a 1-D BOOL tensor, got {}{}",
                     DataTypeName(cond.dtype()), cond.shape().ToString());
    }
    int axis = 0;
    int64_t outer = 1, dim = x.num_elements(), inner = 1;
    if (axis_.has_value()) {
      if (x.rank() < 1) return OpError("Compress", "the input must have rank >= 1 with an axis");
      KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis("Compress", *axis_, x.rank(), true));
      const std::span<const int64_t> d = x.shape().dims();
      outer = DimProduct(d, 0, static_cast<size_t>(axis));
      dim = x.dim(axis);
      inner = DimProduct(d, static_cast<size_t>(axis) + 1, d.size());
    }
    const bool* c = cond.data<const bool>();
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < cond.num_elements(); ++i) {
      if (!c[i]) continue;
      if (i >= dim) {
        return OpError("Compress", "condition selects index {} but the axis has size {}", i, dim);
      }
      keep.push_back(i);
    }
    const int64_t m = static_cast<int64_t>(keep.size());
    std::vector<int64_t> dims{m};
    if (axis_.has_value()) {
      dims.assign(x.shape().dims().begin(), x.shape().dims().end());
      dims[static_cast<size_t>(axis)] = m;
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), Shape(dims)));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < m; ++j) {
        CopyElements(x, (o * dim + keep[static_cast<size_t>(j)]) * inner, y, (o * m + j) * inner,
                     inner);
      }
    }
    return Status::OK();
  }

 private:
  std::optional<int64_t> axis_;
};

class NonZeroKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "NonZero"));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::vector<bool> truth, Truthiness(x, "NonZero"));
    int64_t nnz = 0;
    for (bool b : truth) nnz += b ? 1 : 0;
    // A scalar is treated as a 1-D tensor of one element (numpy does the same).
    const int rank = std::max(x.rank(), 1);
    const Shape in = x.rank() == 0 ? Shape{1} : x.shape();
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt64, Shape{rank, nnz}));
    int64_t* p = y.data<int64_t>();
    int64_t col = 0;
    DimArray coord{};
    for (size_t i = 0; i < truth.size(); ++i) {
      if (truth[i]) {
        for (int d = 0; d < rank; ++d) p[d * nnz + col] = coord[static_cast<size_t>(d)];
        ++col;
      }
      for (int d = rank - 1; d >= 0; --d) {
        const size_t du = static_cast<size_t>(d);
        if (++coord[du] < in.dim(d)) break;
        coord[du] = 0;
      }
    }
    return Status::OK();
  }
};

// --- ReverseSequence -------------------------------------------------------------------------

class ReverseSequenceKernel final : public Kernel {
 public:
  ReverseSequenceKernel(int batch_axis, int time_axis)
      : batch_axis_(batch_axis), time_axis_(time_axis) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "ReverseSequence"));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) return OpError("ReverseSequence", "the input must have rank >= 2");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> lens,
                          ReadIntList(ctx.input(1), "ReverseSequence", "sequence_lens"));
    const int64_t batch = x.dim(batch_axis_), time = x.dim(time_axis_);
    if (static_cast<int64_t>(lens.size()) != batch) {
      return OpError("ReverseSequence", "sequence_lens has {} entries, the batch dim is {}",
                     lens.size(), batch);
    }
    for (int64_t l : lens) {
      if (l < 0 || l > time) {
        return OpError("ReverseSequence", "sequence length {} is out of range [0, {}]", l, time);
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
    const DimArray strides = RowStrides(x.shape());
    const int64_t total = x.num_elements();
    const size_t ba = static_cast<size_t>(batch_axis_), ta = static_cast<size_t>(time_axis_);
    WithMover(x, y, [&](auto mover) {
      DimArray coord{};
      for (int64_t o = 0; o < total; ++o) {
        const int64_t t = coord[ta], len = lens[static_cast<size_t>(coord[ba])];
        const int64_t src_t = t < len ? len - 1 - t : t;
        mover(o, o + (src_t - t) * strides[ta]);
        for (int d = x.rank() - 1; d >= 0; --d) {
          const size_t du = static_cast<size_t>(d);
          if (++coord[du] < x.dim(d)) break;
          coord[du] = 0;
        }
      }
    });
    return Status::OK();
  }

 private:
  int batch_axis_, time_axis_;
};

// --- OneHot ----------------------------------------------------------------------------------

// The elements of a numeric tensor as int64 (floats truncated toward zero, NaN/inf rejected).
Result<std::vector<int64_t>> ReadAsInt64(const Tensor& t, std::string_view op,
                                         std::string_view what) {
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  KILN_RETURN_IF_ERROR(DispatchNumeric(t.dtype(), op, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* p = t.data<const T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (kIsFloatLike<T>) {
        const double d = static_cast<double>(ToMath(p[i]));
        if (!(d > -9.2e18 && d < 9.2e18))
          return OpError(op, "{} value {} is out of range", what, d);
        v[i] = static_cast<int64_t>(d);
      } else if constexpr (std::is_same_v<T, uint64_t>) {
        if (p[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return OpError(op, "{} value {} is out of range", what, p[i]);
        }
        v[i] = static_cast<int64_t>(p[i]);
      } else {
        v[i] = static_cast<int64_t>(p[i]);
      }
    }
    return Status::OK();
  }));
  return v;
}

class OneHotKernel final : public Kernel {
 public:
  explicit OneHotKernel(int64_t axis) : axis_(axis) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, "OneHot"));
    const Tensor& indices = ctx.input(0);
    const Tensor& values = ctx.input(2);
    if (ctx.input(1).num_elements() != 1) {
      return OpError("OneHot", "depth must have one element, got shape {}",
                     ctx.input(1).shape().ToString());
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> depth_v,
                          ReadAsInt64(ctx.input(1), "OneHot", "depth"));
    const int64_t depth = depth_v[0];
    if (depth < 1) return OpError("OneHot", "depth must be >= 1, got {}", depth);
    if (values.num_elements() != 2) {
      return OpError("OneHot", "values must have two elements [off, on], got shape {}",
                     values.shape().ToString());
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadAsInt64(indices, "OneHot", "indices"));
    const int r = indices.rank();
    if (r + 1 > Shape::kMaxRank) return OpError("OneHot", "output rank exceeds the supported 8");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("OneHot", axis_, r + 1, true));
    std::vector<int64_t> dims(indices.shape().dims().begin(), indices.shape().dims().end());
    dims.insert(dims.begin() + axis, depth);
    KILN_ASSIGN_OR_RETURN(Shape out, MakeShape("OneHot", dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, values.dtype(), out));
    const std::span<const int64_t> id = indices.shape().dims();
    const int64_t outer = DimProduct(id, 0, static_cast<size_t>(axis));
    const int64_t inner = DimProduct(id, static_cast<size_t>(axis), id.size());
    WithMover(values, y, [&](auto mover) {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t d = 0; d < depth; ++d) {
          for (int64_t i = 0; i < inner; ++i) {
            int64_t v = idx[static_cast<size_t>(o * inner + i)];
            if (v < 0) v += depth;  // v >= INT64_MIN + 1 and depth >= 1: no overflow
            mover((o * depth + d) * inner + i, v == d ? 1 : 0);
          }
        }
      }
    });
    return Status::OK();
  }

 private:
  int64_t axis_;
};

// --- CumSum ----------------------------------------------------------------------------------

class CumSumKernel final : public Kernel {
 public:
  CumSumKernel(bool exclusive, bool reverse) : exclusive_(exclusive), reverse_(reverse) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "CumSum"));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(int64_t axis_in, ReadIntScalar(ctx.input(1), "CumSum", "axis"));
    if (x.rank() < 1) return OpError("CumSum", "the input must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("CumSum", axis_in, x.rank(), true));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
    const std::span<const int64_t> d = x.shape().dims();
    const int64_t outer = DimProduct(d, 0, static_cast<size_t>(axis));
    const int64_t dim = x.dim(axis);
    const int64_t inner = DimProduct(d, static_cast<size_t>(axis) + 1, d.size());
    return DispatchNumeric(x.dtype(), "CumSum", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                            std::type_identity<MathType<T>>>::type;
      const T* p = x.data<const T>();
      T* q = y.data<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          A sum = 0;
          for (int64_t s = 0; s < dim; ++s) {
            const int64_t k = reverse_ ? dim - 1 - s : s;
            const int64_t e = (o * dim + k) * inner + i;
            A v;
            if constexpr (std::is_integral_v<T>) {
              v = static_cast<A>(p[e]);
            } else {
              v = ToMath(p[e]);
            }
            if (!exclusive_) sum = static_cast<A>(sum + v);
            if constexpr (std::is_integral_v<T>) {
              q[e] = static_cast<T>(sum);
            } else {
              q[e] = FromMath<T>(sum);
            }
            if (exclusive_) sum = static_cast<A>(sum + v);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  bool exclusive_, reverse_;
};

}  // namespace

// --- factories -------------------------------------------------------------------------------

Result<std::unique_ptr<Kernel>> CreateTrilu(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_ASSIGN_OR_RETURN(bool upper, AttrReader(info).Bool("upper", true));
  return std::make_unique<TriluKernel>(upper);
}

Result<std::unique_ptr<Kernel>> CreateEyeLike(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t k, attrs.Int("k", 0));
  if (k < -(int64_t{1} << 62) || k > (int64_t{1} << 62)) {
    return OpError("EyeLike", "k {} is out of range", k);
  }
  std::optional<DataType> dtype;
  if (attrs.Has("dtype")) {
    KILN_ASSIGN_OR_RETURN(int64_t t, attrs.Int("dtype", 0));
    dtype = DataTypeFromOnnxNumber(t);
    if (!dtype.has_value() || *dtype == DataType::kBytes) {
      return OpError("EyeLike", "dtype {} is not supported", t);
    }
  }
  return std::make_unique<EyeLikeKernel>(dtype, k);
}

Result<std::unique_ptr<Kernel>> CreateDepthToSpace(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("mode", 11));
  if (!attrs.Has("blocksize")) return OpError("DepthToSpace", "attribute 'blocksize' is required");
  KILN_ASSIGN_OR_RETURN(int64_t block, attrs.Int("blocksize", 0));
  if (block < 1 || block > (int64_t{1} << 20)) {
    return OpError("DepthToSpace", "blocksize must be in [1, 2^20], got {}", block);
  }
  KILN_ASSIGN_OR_RETURN(std::string mode, attrs.String("mode", "DCR"));
  if (mode != "DCR" && mode != "CRD") {
    return OpError("DepthToSpace", "mode '{}' is not supported (DCR, CRD)", mode);
  }
  return std::make_unique<DepthToSpaceKernel>(block, mode == "CRD");
}

Result<std::unique_ptr<Kernel>> CreateSpaceToDepth(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  if (!attrs.Has("blocksize")) return OpError("SpaceToDepth", "attribute 'blocksize' is required");
  KILN_ASSIGN_OR_RETURN(int64_t block, attrs.Int("blocksize", 0));
  if (block < 1 || block > (int64_t{1} << 20)) {
    return OpError("SpaceToDepth", "blocksize must be in [1, 2^20], got {}", block);
  }
  return std::make_unique<SpaceToDepthKernel>(block);
}

Result<std::unique_ptr<Kernel>> CreateCompress(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  std::optional<int64_t> axis;
  if (attrs.Has("axis")) {
    KILN_ASSIGN_OR_RETURN(axis, attrs.Int("axis", 0));
  }
  return std::make_unique<CompressKernel>(axis);
}

Result<std::unique_ptr<Kernel>> CreateNonZero(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return std::make_unique<NonZeroKernel>();
}

Result<std::unique_ptr<Kernel>> CreateReverseSequence(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t batch_axis, attrs.Int("batch_axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t time_axis, attrs.Int("time_axis", 0));
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) ||
      batch_axis == time_axis) {
    return OpError("ReverseSequence", "batch_axis {} and time_axis {} must be 0 and 1 or 1 and 0",
                   batch_axis, time_axis);
  }
  return std::make_unique<ReverseSequenceKernel>(static_cast<int>(batch_axis),
                                                 static_cast<int>(time_axis));
}

Result<std::unique_ptr<Kernel>> CreateOneHot(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
  KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", -1));
  return std::make_unique<OneHotKernel>(axis);
}

Result<std::unique_ptr<Kernel>> CreateCumSum(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(bool exclusive, attrs.Bool("exclusive", false));
  KILN_ASSIGN_OR_RETURN(bool reverse, attrs.Bool("reverse", false));
  return std::make_unique<CumSumKernel>(exclusive, reverse);
}

}  // namespace kiln::ref
