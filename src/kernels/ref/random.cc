// SPDX-License-Identifier: Apache-2.0
// Reference random generators: RandomUniform, RandomNormal, RandomUniformLike,
// RandomNormalLike (opset 1) and Bernoulli (opset 15).
//
// NOTE on the approach: each Compute call draws from its own std::mt19937_64 (so Compute stays
// const and thread-safe). With the `seed` attribute the engine is seeded from the seed's float
// bits, so the same node gives the same values on every run; without it, from
// std::random_device. Values are generated in double (uniform in [low, high), normal with mean
// and scale, Bernoulli 1 with probability p, clamped to [0, 1]) and converted to the output
// dtype. No cross-runtime reproducibility is promised: ONNX leaves the generator unspecified,
// so conformance cases of these ops can only check shapes and dtypes.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

bool IsRandomFloatType(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64;
}

enum class Dist { kUniform, kNormal, kBernoulli };

struct RandomOptions {
  Dist dist = Dist::kUniform;
  std::string_view op;
  std::optional<DataType> dtype;  // absent: the input's dtype (Like ops, Bernoulli)
  std::vector<int64_t> shape;     // RandomUniform / RandomNormal
  bool like = false;              // shape from input 0
  double a = 0, b = 1;            // low/high or mean/scale
  std::optional<float> seed;
};

// Writes double `v` as element i of `y` (integers and BOOL only ever get Bernoulli's 0 / 1).
void Store(const Tensor& y, int64_t i, double v) {
  switch (y.dtype()) {
    case DataType::kFloat32:
      y.data<float>()[i] = static_cast<float>(v);
      return;
    case DataType::kFloat64:
      y.data<double>()[i] = v;
      return;
    case DataType::kFloat16:
      y.data<Float16>()[i] = FloatToFloat16(static_cast<float>(v));
      return;
    case DataType::kBFloat16:
      y.data<BFloat16>()[i] = FloatToBFloat16(static_cast<float>(v));
      return;
    case DataType::kBool:
      y.data<bool>()[i] = v != 0;
      return;
    case DataType::kUint8:
      y.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      return;
    case DataType::kInt8:
      y.data<int8_t>()[i] = static_cast<int8_t>(v);
      return;
    case DataType::kUint16:
      y.data<uint16_t>()[i] = static_cast<uint16_t>(v);
      return;
    case DataType::kInt16:
      y.data<int16_t>()[i] = static_cast<int16_t>(v);
      return;
    case DataType::kUint32:
      y.data<uint32_t>()[i] = static_cast<uint32_t>(v);
      return;
    case DataType::kInt32:
      y.data<int32_t>()[i] = static_cast<int32_t>(v);
      return;
    case DataType::kUint64:
      y.data<uint64_t>()[i] = static_cast<uint64_t>(v);
      return;
    case DataType::kInt64:
      y.data<int64_t>()[i] = static_cast<int64_t>(v);
      return;
    default:
      KILN_CHECK(false, "Store: unexpected dtype ", DataTypeName(y.dtype()));
  }
}

class RandomKernel final : public Kernel {
 public:
  explicit RandomKernel(RandomOptions o) : o_(std::move(o)) {}

  Status Compute(KernelContext& ctx) const override {
    const bool needs_input = o_.like || o_.dist == Dist::kBernoulli;
    Shape shape;
    DataType dtype = o_.dtype.value_or(DataType::kFloat32);
    if (needs_input) {
      KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, o_.op));
      const Tensor& x = ctx.input(0);
      shape = x.shape();
      if (!o_.dtype) dtype = x.dtype();
      if (o_.dist == Dist::kBernoulli && !IsRandomFloatType(x.dtype())) {
        return OpError(o_.op, "input must be FP16, FP32 or FP64, got {}", DataTypeName(x.dtype()));
      }
    } else {
      if (ctx.num_outputs() < 1) return OpError(o_.op, "no output slot");
      KILN_ASSIGN_OR_RETURN(shape, Shape::Create(o_.shape));
    }
    if (o_.dist != Dist::kBernoulli && !IsRandomFloatType(dtype)) {
      return OpError(o_.op, "output dtype {} is not FP16, FP32 or FP64", DataTypeName(dtype));
    }
    if (dtype == DataType::kBytes) return OpError(o_.op, "output dtype BYTES is not supported");
    std::mt19937_64 engine;
    if (o_.seed) {
      engine.seed(std::bit_cast<uint32_t>(*o_.seed));
    } else {
      std::random_device rd;
      engine.seed((uint64_t{rd()} << 32) | rd());
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, dtype, shape));
    const int64_t n = shape.NumElements();
    switch (o_.dist) {
      case Dist::kUniform: {
        std::uniform_real_distribution<double> d(0.0, 1.0);
        for (int64_t i = 0; i < n; ++i) Store(y, i, o_.a + (o_.b - o_.a) * d(engine));
        break;
      }
      case Dist::kNormal: {
        std::normal_distribution<double> d(0.0, 1.0);
        for (int64_t i = 0; i < n; ++i) Store(y, i, o_.a + o_.b * d(engine));
        break;
      }
      case Dist::kBernoulli: {
        std::uniform_real_distribution<double> d(0.0, 1.0);
        const Tensor& x = ctx.input(0);
        for (int64_t i = 0; i < n; ++i) {
          const double p = ElementAsDouble(x, i);
          Store(y, i, d(engine) < p ? 1.0 : 0.0);
        }
        break;
      }
    }
    return Status::OK();
  }

 private:
  RandomOptions o_;
};

Result<std::unique_ptr<Kernel>> CreateRandom(const KernelInfo& info, Dist dist, bool like,
                                             std::string_view op) {
  AttrReader attrs(info);
  RandomOptions o;
  o.dist = dist;
  o.like = like;
  o.op = op;
  if (like || dist == Dist::kBernoulli) {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  } else if (!info.has_output(0)) {
    return OpError(op, "output 0 is missing");
  }
  if (attrs.Has("dtype")) {
    KILN_ASSIGN_OR_RETURN(int64_t t, attrs.Int("dtype", 1));
    o.dtype = DataTypeFromOnnxNumber(t);
    if (!o.dtype || *o.dtype == DataType::kBytes ||
        (dist != Dist::kBernoulli && !IsRandomFloatType(*o.dtype))) {
      return OpError(op, "attribute 'dtype' {} is not a supported output type", t);
    }
  } else if (!like && dist != Dist::kBernoulli) {
    o.dtype = DataType::kFloat32;
  }
  if (attrs.Has("seed")) {
    KILN_ASSIGN_OR_RETURN(float seed, attrs.Float("seed", 0));
    o.seed = seed;
  }
  if (dist == Dist::kUniform) {
    KILN_ASSIGN_OR_RETURN(float low, attrs.Float("low", 0.0f));
    KILN_ASSIGN_OR_RETURN(float high, attrs.Float("high", 1.0f));
    if (!(low <= high) || !std::isfinite(low) || !std::isfinite(high)) {
      return OpError(op, "need finite low {} <= high {}", low, high);
    }
    o.a = low;
    o.b = high;
  } else if (dist == Dist::kNormal) {
    KILN_ASSIGN_OR_RETURN(float mean, attrs.Float("mean", 0.0f));
    KILN_ASSIGN_OR_RETURN(float scale, attrs.Float("scale", 1.0f));
    if (!std::isfinite(mean) || !(scale >= 0) || !std::isfinite(scale)) {
      return OpError(op, "need a finite mean {} and a finite scale {} >= 0", mean, scale);
    }
    o.a = mean;
    o.b = scale;
  }
  if (!like && dist != Dist::kBernoulli) {
    const Attribute* s = info.node().FindAttribute("shape");
    if (s == nullptr || s->type != AttributeType::kInts) {
      return OpError(op, "attribute 'shape' (INTS) is required");
    }
    Result<Shape> shape = Shape::Create(s->ints);
    if (!shape.ok()) return OpError(op, "attribute 'shape': {}", shape.status().message());
    o.shape = s->ints;
  }
  return std::make_unique<RandomKernel>(std::move(o));
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateRandomUniform(const KernelInfo& info) {
  return CreateRandom(info, Dist::kUniform, false, "RandomUniform");
}
Result<std::unique_ptr<Kernel>> CreateRandomNormal(const KernelInfo& info) {
  return CreateRandom(info, Dist::kNormal, false, "RandomNormal");
}
Result<std::unique_ptr<Kernel>> CreateRandomUniformLike(const KernelInfo& info) {
  return CreateRandom(info, Dist::kUniform, true, "RandomUniformLike");
}
Result<std::unique_ptr<Kernel>> CreateRandomNormalLike(const KernelInfo& info) {
  return CreateRandom(info, Dist::kNormal, true, "RandomNormalLike");
}
Result<std::unique_ptr<Kernel>> CreateBernoulli(const KernelInfo& info) {
  return CreateRandom(info, Dist::kBernoulli, false, "Bernoulli");
}

}  // namespace kiln::ref
