// SPDX-License-Identifier: Apache-2.0
#pragma once
// Batching a model's requests: what the config says (dynamic_batching, padding, ragged inputs,
// crops, in kiln terms), the shape a request batches under, and the copies that build one batch
// tensor per input and slice each request's part out of the batch outputs. Pure functions over
// plain data; ModelRunner (repo/model_runner.h) calls them around Session::Run.
//
//   KILN_ASSIGN_OR_RETURN(BatchingPlan plan, MakeBatchingPlan(config));
//   KILN_ASSIGN_OR_RETURN(BatchPolicyConfig policy, MakeBatchPolicyConfig(config));
//   BatchShape shape = RequestBatchShape(plan, request);      // equal shapes may share a batch
//   KILN_ASSIGN_OR_RETURN(OwnedTensor x, GatherInput(plan, i, requests, shape, allocator));
//   ...                                                       // run the model
//   KILN_ASSIGN_OR_RETURN(OwnedTensor y, SliceOutput(plan, o, batch_output, row, *request,
//   allocator));
//
// Semantics (docs/batching.md):
//   - Batching models (max_batch_size > 0): a request's batch size is dim 0 of its inputs; the
//     batch tensor of an input is the requests' tensors concatenated along dim 0, in batch order.
//   - Padding (kiln extension, KilnPadding on an input): each listed per-item dim of size n is
//     padded with zeros (empty strings) to the smallest bucket >= n; sizes above the largest
//     bucket stay as they are. Requests batch together when their padded shapes are equal.
//   - Ragged inputs (allow_ragged_batch): shapes may differ within a batch; the batch tensor is
//     every request's elements concatenated, flat: shape [total element count] (the reference
//     server's ONNX backend does the same). The model sees that input as rank 1.
//   - Outputs: rows [row, row + batch size) of dim 0 belong to a request; KilnCrop dims are cut
//     back to the request's own size of the padded input dim they follow.
//
// Thread safety: all functions are reentrant.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "repo/model_config.pb.h"
#include "sched/batch_policy.h"
#include "sched/request.h"
#include "tensor/tensor.h"

namespace kiln {

// How a model's requests are batched, derived once from its config.
struct BatchingPlan {
  struct Input {
    std::string name;
    bool ragged = false;           // allow_ragged_batch on a batching model
    std::vector<int> pad_dims;     // per-item dims padded to buckets
    std::vector<int64_t> buckets;  // ascending
  };
  struct Crop {
    int dim = 0;        // per-item output dim
    int input = 0;      // index into `inputs`
    int input_dim = 0;  // per-item dim of that input
  };
  struct Output {
    std::string name;
    std::vector<Crop> crops;
  };
  bool batching = false;        // max_batch_size > 0
  std::vector<Input> inputs;    // config input order
  std::vector<Output> outputs;  // config output order
  // True when some input is padded or ragged (a request alone may still need a copy).
  bool reshapes_inputs = false;
};

// Checks and collects the kiln padding / crop extension and allow_ragged_batch. INVALID_ARGUMENT
// naming the model and the tensor for: padding or crop on a model with max_batch_size 0; a
// padded dim out of range, listed twice, or not -1 in dims; buckets empty, not increasing or < 1;
// padding together with allow_ragged_batch or reshape; allow_ragged_batch with reshape; a crop
// naming an unknown input, an input dim that is not padded, or an output dim that is out of
// range or not -1.
Result<BatchingPlan> MakeBatchingPlan(const inference::ModelConfig& config);

// The scheduling part of the config: dynamic_batching (absent: every request runs alone, in
// order, with the default queue policy) and max_batch_size. INVALID_ARGUMENT naming the model
// and the field when inconsistent (see ValidateBatchPolicyConfig).
Result<BatchPolicyConfig> MakeBatchPolicyConfig(const inference::ModelConfig& config);

// The per-item input shapes `request` runs with, in config input order (padding applied,
// ragged inputs empty). REQUIRES: the request passed ValidateInferRequest.
BatchShape RequestBatchShape(const BatchingPlan& plan, const InferRequest& request);
// dim 0 of the request's inputs when batching, else 1. REQUIRES: validated request.
int64_t RequestBatchSize(const BatchingPlan& plan, const InferRequest& request);

// The batch tensor of config input `input` for `requests` (in batch order), every one with
// batch shape `shape`: [sum of batch sizes] + shape.inputs[input] (padding zero-filled), or
// [total elements] for a ragged input. Allocated from `allocator`: RESOURCE_EXHAUSTED when it
// refuses. REQUIRES: validated requests; non-batching models pass exactly one request.
Result<OwnedTensor> GatherInput(const BatchingPlan& plan, size_t input,
                                std::span<const InferRequest* const> requests,
                                const BatchShape& shape, Allocator& allocator);

// The part of `batch_output` (config output `output`, config-side shape [batch rows, ...])
// that belongs to `request`: rows [row, row + RequestBatchSize) with the crops applied. A
// non-batching model's output is returned as it is (shared, no copy); so is a batching one's
// when the request owns every row and nothing is cropped. INTERNAL when the output has fewer
// rows than that or a cropped dim is smaller than the request's size. A copy is allocated from
// `allocator` (the instance's, as GatherInput's; it must outlive the tensor): RESOURCE_EXHAUSTED
// when it refuses.
Result<OwnedTensor> SliceOutput(const BatchingPlan& plan, size_t output,
                                const OwnedTensor& batch_output, int64_t row,
                                const InferRequest& request, Allocator& allocator);

}  // namespace kiln
