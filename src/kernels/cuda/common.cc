// SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/common.h"

#include <fmt/format.h>

#include <string>

#include "backend/cuda/cuda_backend.h"
#include "base/settings.h"
#include "op/kiln_ops.h"

namespace kiln::cuda {

Status CudaError(cudaError_t e, const char* call, const char* file, int line) {
  return Status::Internal(fmt::format("{} failed at {}:{}: {} ({})", call, file, line,
                                      cudaGetErrorString(e), cudaGetErrorName(e)));
}

bool CudaTf32Allowed() { return SettingValue(Setting::kCudaTf32) != "0"; }

Result<cudaStream_t> StreamOf(const KernelContext& ctx) {
  cudaStream_t s = CudaStreamHandle(ctx.stream());
  if (s == nullptr) {
    return Status::Internal("a CUDA kernel ran without a CUDA stream (outside a CUDA session)");
  }
  return s;
}

Result<ElemType> ElemTypeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return ElemType::kF32;
    case DataType::kFloat16:
      return ElemType::kF16;
    case DataType::kBFloat16:
      return ElemType::kBF16;
    case DataType::kInt32:
      return ElemType::kI32;
    case DataType::kInt64:
      return ElemType::kI64;
    case DataType::kInt8:
      return ElemType::kI8;
    case DataType::kUint8:
      return ElemType::kU8;
    case DataType::kBool:
      return ElemType::kBool;
    case DataType::kFloat64:
      return ElemType::kF64;
    default:
      break;
  }
  return Status::InvalidArgument(
      fmt::format("the CUDA kernels do not take {} tensors", DataTypeName(dtype)));
}

Result<Activation> ParseActivation(const KernelInfo& info) {
  const NodeDesc& node = info.node();
  const std::string& op = node.op_type;
  std::string name;
  if (const Attribute* a = node.FindAttribute("activation")) {
    if (a->type != AttributeType::kString) {
      return Status::InvalidArgument(op + ": attribute 'activation' must be a STRING");
    }
    name = a->s;
  }
  std::vector<float> params;
  if (const Attribute* p = node.FindAttribute("activation_params")) {
    if (p->type != AttributeType::kFloats) {
      return Status::InvalidArgument(op + ": attribute 'activation_params' must be a FLOATS");
    }
    params = p->floats;
  }
  struct Entry {
    std::string_view name;
    ActKind kind;
    size_t num_params;
  };
  static constexpr Entry kTable[] = {
      {kActivationNone, ActKind::kNone, 0},
      {kActivationRelu, ActKind::kRelu, 0},
      {kActivationClip, ActKind::kClip, 2},
      {kActivationSigmoid, ActKind::kSigmoid, 0},
      {kActivationSilu, ActKind::kSilu, 0},
      {kActivationHardSigmoid, ActKind::kHardSigmoid, 2},
      {kActivationHardSwish, ActKind::kHardSwish, 0},
      {kActivationGelu, ActKind::kGelu, 0},
      {kActivationGeluTanh, ActKind::kGeluTanh, 0},
      {kActivationTanh, ActKind::kTanh, 0},
      {kActivationLeakyRelu, ActKind::kLeakyRelu, 1},
  };
  for (const Entry& e : kTable) {
    if (e.name != name) continue;
    if (params.size() != e.num_params) {
      return Status::InvalidArgument(
          fmt::format("{}: activation '{}' takes {} activation_params, got {}", op, name,
                      e.num_params, params.size()));
    }
    Activation act;
    act.kind = e.kind;
    if (!params.empty()) act.a = params[0];
    if (params.size() > 1) act.b = params[1];
    return act;
  }
  return Status::InvalidArgument(fmt::format("{}: unknown activation '{}'", op, name));
}

Result<StridedView> ContiguousView(const Shape& shape) {
  if (shape.rank() > kMaxRank) {
    return Status::InvalidArgument(
        fmt::format("rank {} is more than the CUDA kernels take ({})", shape.rank(), kMaxRank));
  }
  StridedView v;
  v.rank = shape.rank();
  int64_t stride = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    v.dims[d] = shape.dim(d);
    v.strides[d] = stride;
    stride *= shape.dim(d);
  }
  return v;
}

Result<Broadcast> BroadcastShapes(const std::vector<Shape>& inputs) {
  if (inputs.empty() || inputs.size() > 3) {
    return Status::InvalidArgument("BroadcastShapes takes 1 to 3 shapes");
  }
  int rank = 0;
  for (const Shape& s : inputs) rank = std::max(rank, s.rank());
  std::vector<int64_t> out(static_cast<size_t>(rank), 1);
  for (const Shape& s : inputs) {
    for (int d = 0; d < s.rank(); ++d) {
      const int64_t dim = s.dim(d);
      int64_t& o = out[static_cast<size_t>(rank - s.rank() + d)];
      if (dim == o || dim == 1) continue;
      if (o == 1) {
        o = dim;
        continue;
      }
      std::string shapes;
      for (const Shape& t : inputs) shapes += (shapes.empty() ? "" : ", ") + t.ToString();
      return Status::InvalidArgument(fmt::format("shapes {} do not broadcast", shapes));
    }
  }
  Broadcast b;
  KILN_ASSIGN_OR_RETURN(b.output, Shape::Create(out));
  // Per input and output dimension: the input's element stride (0 where it broadcasts).
  const size_t n = inputs.size();
  std::vector<std::vector<int64_t>> strides(n, std::vector<int64_t>(static_cast<size_t>(rank), 0));
  for (size_t k = 0; k < n; ++k) {
    const Shape& s = inputs[k];
    int64_t stride = 1;
    for (int d = s.rank() - 1; d >= 0; --d) {
      const size_t od = static_cast<size_t>(rank - s.rank() + d);
      strides[k][od] = s.dim(d) == 1 ? 0 : stride;
      stride *= s.dim(d);
    }
  }
  // Merge dimension d into the one before it where every operand is contiguous across the pair
  // (stride[d-1] == stride[d] * dim[d]) or broadcast across both (both strides 0). Size-1 output
  // dimensions are dropped first.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> st(n);
  for (int d = 0; d < rank; ++d) {
    if (out[static_cast<size_t>(d)] == 1) continue;
    const int64_t dim = out[static_cast<size_t>(d)];
    bool merge = !dims.empty();
    for (size_t k = 0; k < n && merge; ++k) {
      const int64_t prev = st[k].back();
      const int64_t cur = strides[k][static_cast<size_t>(d)];
      merge = (prev == 0 && cur == 0) || (cur != 0 && prev == cur * dim);
    }
    if (merge) {
      dims.back() *= dim;
      for (size_t k = 0; k < n; ++k) st[k].back() = strides[k][static_cast<size_t>(d)];
    } else {
      dims.push_back(dim);
      for (size_t k = 0; k < n; ++k) st[k].push_back(strides[k][static_cast<size_t>(d)]);
    }
  }
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return Status::InvalidArgument("broadcast of more than 8 distinct dimensions");
  }
  for (size_t k = 0; k < n; ++k) {
    StridedView v;
    v.rank = static_cast<int32_t>(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      v.dims[d] = dims[d];
      v.strides[d] = st[k][d];
    }
    b.inputs.push_back(v);
  }
  return b;
}

}  // namespace kiln::cuda
