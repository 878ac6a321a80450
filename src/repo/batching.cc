// SPDX-License-Identifier: Apache-2.0
#include "repo/batching.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "repo/model_config.h"

namespace kiln {
namespace {

using inference::ModelConfig;

const InferInput* FindInput(const InferRequest& request, const std::string& name) {
  for (const InferInput& in : request.inputs) {
    if (in.name == name) return &in;
  }
  return nullptr;
}

const InferInput& InputOf(const InferRequest& request, const std::string& name) {
  const InferInput* in = FindInput(request, name);
  KILN_CHECK(in != nullptr, "request has no input '", name, "' (not validated?)");
  return *in;
}

int64_t Bucket(int64_t n, const std::vector<int64_t>& buckets) {
  auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  return it == buckets.end() ? n : *it;
}

// Calls run(src_offset, dst_offset, count) (in elements) for every contiguous run of the box
// `box` at the origin corner of row-major arrays with dims `src_dims` and `dst_dims`.
// REQUIRES: equal ranks; box[i] <= src_dims[i] and <= dst_dims[i].
template <typename Run>
void ForEachRun(std::span<const int64_t> box, std::span<const int64_t> src_dims,
                std::span<const int64_t> dst_dims, Run run) {
  const size_t rank = box.size();
  for (int64_t b : box) {
    if (b == 0) return;
  }
  if (rank == 0) {
    run(0, 0, 1);
    return;
  }
  // Merge trailing dims that the box covers fully in both arrays into one run.
  size_t k = rank - 1;
  int64_t inner = 1;
  while (k > 0 && box[k] == src_dims[k] && box[k] == dst_dims[k]) {
    inner *= box[k];
    --k;
  }
  const int64_t run_length = box[k] * inner;
  std::vector<int64_t> src_stride(rank), dst_stride(rank);
  int64_t s = 1, d = 1;
  for (size_t i = rank; i-- > 0;) {
    src_stride[i] = s;
    dst_stride[i] = d;
    s *= src_dims[i];
    d *= dst_dims[i];
  }
  std::vector<int64_t> index(k, 0);  // over dims [0, k)
  for (;;) {
    int64_t so = 0, dof = 0;
    for (size_t i = 0; i < k; ++i) {
      so += index[i] * src_stride[i];
      dof += index[i] * dst_stride[i];
    }
    run(so, dof, run_length);
    size_t i = k;
    while (i > 0) {
      --i;
      if (++index[i] < box[i]) break;
      index[i] = 0;
      if (i == 0) return;
    }
    if (k == 0) return;
  }
}

// Copies the box from `src` (+ src_offset elements) to `dst` (+ dst_offset elements).
void CopyBox(const Tensor& src, int64_t src_offset, std::span<const int64_t> src_dims,
             const Tensor& dst, int64_t dst_offset, std::span<const int64_t> dst_dims,
             std::span<const int64_t> box) {
  if (src.dtype() == DataType::kBytes) {
    const std::string* s = src.data<const std::string>() + src_offset;
    std::string* d = dst.data<std::string>() + dst_offset;
    ForEachRun(box, src_dims, dst_dims,
               [&](int64_t so, int64_t dof, int64_t n) { std::copy(s + so, s + so + n, d + dof); });
    return;
  }
  const size_t esize = DataTypeSize(src.dtype());
  const char* s =
      static_cast<const char*>(src.raw_data()) + src_offset * static_cast<int64_t>(esize);
  char* d = static_cast<char*>(dst.raw_data()) + dst_offset * static_cast<int64_t>(esize);
  ForEachRun(box, src_dims, dst_dims, [&](int64_t so, int64_t dof, int64_t n) {
    std::memcpy(d + dof * static_cast<int64_t>(esize), s + so * static_cast<int64_t>(esize),
                static_cast<size_t>(n) * esize);
  });
}

int64_t Product(std::span<const int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

std::string RepeatedDims(const google::protobuf::RepeatedField<int64_t>& dims) {
  return DimsToString(AsSpan(dims));
}

}  // namespace

Result<BatchingPlan> MakeBatchingPlan(const ModelConfig& config) {
  const std::string& model = config.name();
  BatchingPlan plan;
  plan.batching = config.max_batch_size() > 0;
  for (const inference::ModelInput& in : config.input()) {
    BatchingPlan::Input p;
    p.name = in.name();
    const auto fail = [&](std::string what) {
      return Status::InvalidArgument(
          fmt::format("model '{}': input '{}': {}", model, in.name(), what));
    };
    if (in.allow_ragged_batch() && plan.batching) {
      if (in.has_reshape()) return fail("allow_ragged_batch cannot be combined with reshape");
      p.ragged = true;
    }
    if (in.has_padding()) {
      const inference::KilnPadding& pad = in.padding();
      if (!plan.batching) {
        return fail("padding needs a batching model (max_batch_size > 0)");
      }
      if (p.ragged) return fail("padding cannot be combined with allow_ragged_batch");
      if (pad.dims_size() == 0) return fail("padding lists no dims");
      for (int d : pad.dims()) {
        if (d < 0 || d >= in.dims_size()) {
          return fail(fmt::format("padding dim {} is out of range for dims {}", d,
                                  RepeatedDims(in.dims())));
        }
        if (in.dims(d) != -1) {
          return fail(fmt::format("padding dim {} is not variable (-1) in dims {}", d,
                                  RepeatedDims(in.dims())));
        }
        if (std::find(p.pad_dims.begin(), p.pad_dims.end(), d) != p.pad_dims.end()) {
          return fail(fmt::format("padding dim {} is listed twice", d));
        }
        p.pad_dims.push_back(d);
      }
      if (pad.buckets_size() == 0) return fail("padding lists no buckets");
      for (int i = 0; i < pad.buckets_size(); ++i) {
        const int64_t b = pad.buckets(i);
        if (b < 1 || (i > 0 && b <= pad.buckets(i - 1))) {
          return fail(fmt::format("padding buckets must be increasing sizes >= 1, got {}",
                                  DimsToString(AsSpan(pad.buckets()))));
        }
        p.buckets.push_back(b);
      }
    }
    if (p.ragged || !p.pad_dims.empty()) plan.reshapes_inputs = true;
    plan.inputs.push_back(std::move(p));
  }
  for (const inference::ModelOutput& out : config.output()) {
    BatchingPlan::Output o;
    o.name = out.name();
    const auto fail = [&](std::string what) {
      return Status::InvalidArgument(
          fmt::format("model '{}': output '{}': {}", model, out.name(), what));
    };
    for (const inference::KilnCrop::Dim& c : out.crop().dims()) {
      if (!plan.batching) return fail("crop needs a batching model (max_batch_size > 0)");
      if (c.dim() < 0 || c.dim() >= out.dims_size() || out.dims(c.dim()) != -1) {
        return fail(fmt::format("crop dim {} is not a variable (-1) dim of dims {}", c.dim(),
                                RepeatedDims(out.dims())));
      }
      for (const BatchingPlan::Crop& seen : o.crops) {
        if (seen.dim == c.dim()) return fail(fmt::format("crop dim {} is listed twice", c.dim()));
      }
      int input = -1;
      for (size_t i = 0; i < plan.inputs.size(); ++i) {
        if (plan.inputs[i].name == c.input()) input = static_cast<int>(i);
      }
      if (input < 0) {
        return fail(fmt::format("crop dim {} follows input '{}', which is not an input", c.dim(),
                                c.input()));
      }
      const std::vector<int>& padded = plan.inputs[static_cast<size_t>(input)].pad_dims;
      if (std::find(padded.begin(), padded.end(), c.input_dim()) == padded.end()) {
        return fail(fmt::format("crop dim {} follows dim {} of input '{}', which is not padded",
                                c.dim(), c.input_dim(), c.input()));
      }
      o.crops.push_back({c.dim(), input, c.input_dim()});
    }
    plan.outputs.push_back(std::move(o));
  }
  return plan;
}

Result<BatchPolicyConfig> MakeBatchPolicyConfig(const ModelConfig& config) {
  BatchPolicyConfig c;
  c.max_batch_size = config.max_batch_size();
  if (config.has_dynamic_batching()) {
    const inference::ModelDynamicBatching& db = config.dynamic_batching();
    c.dynamic_batching = true;
    c.preferred_batch_sizes.assign(db.preferred_batch_size().begin(),
                                   db.preferred_batch_size().end());
    c.max_queue_delay_us = db.max_queue_delay_microseconds();
    c.preserve_ordering = db.preserve_ordering();
    c.priority_levels = db.priority_levels();
    c.default_priority_level = db.default_priority_level();
    const auto convert = [](const inference::ModelQueuePolicy& p) {
      QueuePolicy q;
      q.timeout_action = p.timeout_action() == inference::ModelQueuePolicy::DELAY
                             ? TimeoutAction::kDelay
                             : TimeoutAction::kReject;
      q.default_timeout_us = p.default_timeout_microseconds();
      q.allow_timeout_override = p.allow_timeout_override();
      q.max_queue_size = p.max_queue_size();
      return q;
    };
    c.default_queue_policy = convert(db.default_queue_policy());
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      c.level_queue_policies[level] = convert(policy);
    }
  }
  if (Status s = ValidateBatchPolicyConfig(c); !s.ok()) {
    return s.WithContext(fmt::format("model '{}'", config.name()));
  }
  return c;
}

BatchShape RequestBatchShape(const BatchingPlan& plan, const InferRequest& request) {
  BatchShape shape;
  shape.inputs.reserve(plan.inputs.size());
  for (const BatchingPlan::Input& spec : plan.inputs) {
    if (spec.ragged) {
      shape.inputs.emplace_back();
      continue;
    }
    std::span<const int64_t> dims = InputOf(request, spec.name).tensor.shape().dims();
    if (plan.batching) dims = dims.subspan(1);
    std::vector<int64_t> item(dims.begin(), dims.end());
    for (int d : spec.pad_dims) {
      item[static_cast<size_t>(d)] = Bucket(item[static_cast<size_t>(d)], spec.buckets);
    }
    shape.inputs.push_back(std::move(item));
  }
  return shape;
}

int64_t RequestBatchSize(const BatchingPlan& plan, const InferRequest& request) {
  if (!plan.batching || plan.inputs.empty()) return 1;
  return InputOf(request, plan.inputs.front().name).tensor.shape().dim(0);
}

Result<OwnedTensor> GatherInput(const BatchingPlan& plan, size_t input,
                                std::span<const InferRequest* const> requests,
                                const BatchShape& shape, Allocator& allocator) {
  KILN_CHECK(input < plan.inputs.size() && !requests.empty(), "GatherInput: bad arguments");
  const BatchingPlan::Input& spec = plan.inputs[input];
  const Tensor& first = InputOf(*requests.front(), spec.name).tensor.view();
  if (!plan.batching) {
    KILN_CHECK(requests.size() == 1, "a non-batching model runs one request at a time");
    return OwnedTensor::CopyOf(first, allocator);
  }
  if (spec.ragged) {
    int64_t total = 0;
    for (const InferRequest* r : requests) total += InputOf(*r, spec.name).tensor.num_elements();
    KILN_ASSIGN_OR_RETURN(OwnedTensor batch,
                          OwnedTensor::Allocate(first.dtype(), Shape{total}, allocator));
    int64_t offset = 0;
    for (const InferRequest* r : requests) {
      const Tensor& t = InputOf(*r, spec.name).tensor.view();
      const int64_t n = t.num_elements();
      CopyBox(t, 0, std::span<const int64_t>(&n, 1), batch.view(), offset,
              std::span<const int64_t>(&total, 1), std::span<const int64_t>(&n, 1));
      offset += n;
    }
    return batch;
  }
  const std::vector<int64_t>& item = shape.inputs[input];
  int64_t rows = 0;
  for (const InferRequest* r : requests) rows += InputOf(*r, spec.name).tensor.shape().dim(0);
  std::vector<int64_t> dims{rows};
  dims.insert(dims.end(), item.begin(), item.end());
  KILN_ASSIGN_OR_RETURN(Shape batch_shape, Shape::Create(dims));
  KILN_ASSIGN_OR_RETURN(OwnedTensor batch,
                        OwnedTensor::Allocate(first.dtype(), batch_shape, allocator));
  const int64_t row_elements = Product(item);
  int64_t row = 0;
  for (const InferRequest* r : requests) {
    const Tensor& t = InputOf(*r, spec.name).tensor.view();
    const int64_t b = t.dim(0);
    std::vector<int64_t> dst_dims{b};
    dst_dims.insert(dst_dims.end(), item.begin(), item.end());
    CopyBox(t, 0, t.shape().dims(), batch.view(), row * row_elements, dst_dims, t.shape().dims());
    row += b;
  }
  return batch;
}

Result<OwnedTensor> SliceOutput(const BatchingPlan& plan, size_t output,
                                const OwnedTensor& batch_output, int64_t row,
                                const InferRequest& request, Allocator& allocator) {
  KILN_CHECK(output < plan.outputs.size(), "SliceOutput: output ", output, " out of range");
  if (!plan.batching) return batch_output;
  const BatchingPlan::Output& spec = plan.outputs[output];
  const Tensor& t = batch_output.view();
  const int64_t b = RequestBatchSize(plan, request);
  if (t.rank() < 1 || t.dim(0) < row + b) {
    return Status::Internal(
        fmt::format("output '{}' has shape {}: fewer than the {} rows of the batch", spec.name,
                    t.shape().ToString(), row + b));
  }
  std::span<const int64_t> all = t.shape().dims();
  std::vector<int64_t> src_dims(all.begin(), all.end());
  src_dims[0] = b;
  std::vector<int64_t> box = src_dims;
  for (const BatchingPlan::Crop& c : spec.crops) {
    const std::string& input = plan.inputs[static_cast<size_t>(c.input)].name;
    const int64_t want = InputOf(request, input).tensor.shape().dim(c.input_dim + 1);
    if (c.dim + 1 >= t.rank() || want > box[static_cast<size_t>(c.dim) + 1]) {
      return Status::Internal(
          fmt::format("output '{}' has shape {}: cannot crop dim {} to {} (dim {} of input '{}')",
                      spec.name, t.shape().ToString(), c.dim, want, c.input_dim, input));
    }
    box[static_cast<size_t>(c.dim) + 1] = want;
  }
  if (row == 0 && b == t.dim(0) && box == src_dims) return batch_output;
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(box));
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(t.dtype(), shape, allocator));
  const int64_t row_elements = Product(std::span<const int64_t>(src_dims).subspan(1));
  CopyBox(t, row * row_elements, src_dims, out.view(), 0, box, box);
  return out;
}

}  // namespace kiln
