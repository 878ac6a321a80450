// SPDX-License-Identifier: Apache-2.0
#include "repo/model_runner.h"

#include <fmt/format.h>

#include "backend/backend.h"
#include "base/logging.h"
#include "repo/model_config.h"
#include "sched/clock.h"

namespace kiln {
namespace {

// Per-item dims of `shape` (the batch dim dropped when `batching`).
std::vector<int64_t> ItemDims(const Shape& shape, bool batching) {
  std::span<const int64_t> d = shape.dims();
  if (batching && !d.empty()) d = d.subspan(1);
  return {d.begin(), d.end()};
}

// [batch] + item when batching, else item.
Result<Shape> WithBatch(const Shape& original, bool batching, const std::vector<int64_t>& item) {
  std::vector<int64_t> dims;
  if (batching) dims.push_back(original.dim(0));
  dims.insert(dims.end(), item.begin(), item.end());
  return Shape::Create(dims);
}

const InferInput* FindInput(const InferRequest& request, const std::string& name) {
  for (const InferInput& in : request.inputs) {
    if (in.name == name) return &in;
  }
  return nullptr;
}

uint64_t Elapsed(int64_t from_ns, int64_t to_ns) {
  return to_ns > from_ns ? static_cast<uint64_t>(to_ns - from_ns) : 0;
}

// Host memory the session's device copies from and to fastest (pinned where it has it).
Allocator& StagingAllocator(Device device) {
  Backend* backend = BackendRegistry::Find(device);
  return backend != nullptr ? backend->host_buffer_type().allocator() : HostAllocator();
}

}  // namespace

ModelRunner::ModelRunner(inference::ModelConfig config, std::unique_ptr<Session> session,
                         BatchingPlan plan, ModelRunnerOptions options)
    : config_(std::move(config)),
      signature_(MakeModelSignature(config_)),
      session_(std::move(session)),
      plan_(std::move(plan)),
      options_(std::move(options)),
      allocator_(options_.allocator != nullptr ? options_.allocator
                                               : &StagingAllocator(session_->device())) {
  signature_.output_labels = options_.output_labels;
}

Result<std::unique_ptr<ModelRunner>> ModelRunner::Create(const inference::ModelConfig& config,
                                                         std::unique_ptr<Session> session,
                                                         ModelRunnerOptions options) {
  if (session == nullptr) return Status::Internal("ModelRunner::Create: null session");
  KILN_ASSIGN_OR_RETURN(BatchingPlan plan, MakeBatchingPlan(config));
  std::unique_ptr<ModelRunner> runner(
      new ModelRunner(config, std::move(session), std::move(plan), std::move(options)));
  const Graph& g = runner->session_->graph();
  for (int id : g.inputs) {
    const std::string& name = g.value(id).name;
    const inference::ModelInput* found = nullptr;
    size_t index = 0;
    for (int i = 0; i < runner->config_.input_size(); ++i) {
      if (runner->config_.input(i).name() == name) {
        found = &runner->config_.input(i);
        index = static_cast<size_t>(i);
      }
    }
    if (found == nullptr) {
      return Status::Internal(
          fmt::format("model '{}': graph input '{}' is not in the config", config.name(), name));
    }
    runner->inputs_.push_back({name, index, found});
  }
  for (const inference::ModelOutput& out : runner->config_.output()) {
    int index = -1;
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      if (g.value(g.outputs[i]).name == out.name()) {
        index = static_cast<int>(i);
        break;
      }
    }
    if (index < 0) {
      return Status::Internal(fmt::format("model '{}': config output '{}' is not a graph output",
                                          config.name(), out.name()));
    }
    runner->outputs_.push_back({out.name(), index, &out});
  }
  return runner;
}

Status ModelRunner::Execute(std::span<const InferRequest* const> requests, const BatchShape& shape,
                            int64_t version, std::span<RequestOutcome> out) const {
  const Clock& clock = SteadyClock();
  const bool batching = plan_.batching;
  const int64_t start = clock.NowNs();
  int64_t input_done = start;
  int64_t infer_done = start;
  const auto charge = [&](int64_t end) {
    for (RequestOutcome& o : out) {
      o.compute_input_ns += Elapsed(start, input_done);
      o.compute_infer_ns += Elapsed(input_done, infer_done);
      o.compute_output_ns += Elapsed(infer_done, end);
    }
  };

  // A request alone whose tensors need no padding or flattening is fed as it is.
  bool direct = requests.size() == 1;
  if (direct && plan_.reshapes_inputs) {
    for (size_t i = 0; i < plan_.inputs.size() && direct; ++i) {
      const InferInput* in = FindInput(*requests[0], plan_.inputs[i].name);
      direct = !plan_.inputs[i].ragged && in != nullptr &&
               ItemDims(in->tensor.shape(), batching) == shape.inputs[i];
    }
  }
  int64_t rows = 0;
  for (const InferRequest* r : requests) rows += RequestBatchSize(plan_, *r);

  std::vector<OwnedTensor> gathered;
  gathered.reserve(inputs_.size());
  std::vector<Tensor> feeds;
  feeds.reserve(inputs_.size());
  for (const InputBinding& b : inputs_) {
    Tensor t;
    if (direct) {
      const InferInput* in = FindInput(*requests[0], b.name);
      if (in == nullptr)
        return Status::InvalidArgument(fmt::format("input '{}' is missing", b.name));
      t = in->tensor.view();
    } else {
      Result<OwnedTensor> batch = GatherInput(plan_, b.plan_input, requests, shape, *allocator_);
      if (!batch.ok()) {
        input_done = infer_done = clock.NowNs();
        charge(input_done);
        return batch.status().WithContext(fmt::format("input '{}': batch of {}", b.name, rows));
      }
      gathered.push_back(std::move(batch).value());
      t = gathered.back().view();
    }
    if (b.config->has_reshape()) {
      const std::vector<int64_t> item = ItemDims(t.shape(), batching);
      KILN_ASSIGN_OR_RETURN(
          std::vector<int64_t> model_item,
          MapReshape(AsSpan(b.config->dims()), item, AsSpan(b.config->reshape().shape())));
      KILN_ASSIGN_OR_RETURN(Shape reshaped_shape, WithBatch(t.shape(), batching, model_item));
      Result<Tensor> reshaped = t.Reshaped(reshaped_shape);
      if (!reshaped.ok()) {
        return reshaped.status().WithContext(fmt::format("input '{}': reshape", b.name));
      }
      t = *reshaped;
    }
    feeds.push_back(t);
  }
  input_done = clock.NowNs();

  Result<std::vector<OwnedTensor>> results = session_->Run(feeds);
  infer_done = clock.NowNs();
  if (!results.ok()) {
    charge(infer_done);
    return results.status();
  }

  // The batch outputs in config order and config-side shapes.
  std::vector<OwnedTensor> batch_outputs;
  batch_outputs.reserve(outputs_.size());
  for (const OutputBinding& b : outputs_) {
    OwnedTensor t = (*results)[static_cast<size_t>(b.graph_output)];
    const DataType want = FromConfigDataType(b.config->data_type());
    Status s;
    if (t.dtype() != want) {
      s = Status::Internal(fmt::format("output '{}': the model produced {}, the config says {}",
                                       b.name, DataTypeName(t.dtype()), DataTypeName(want)));
    } else if (b.config->has_reshape()) {
      const std::vector<int64_t> item = ItemDims(t.shape(), batching);
      Result<std::vector<int64_t>> config_item =
          MapReshape(AsSpan(b.config->reshape().shape()), item, AsSpan(b.config->dims()));
      Result<Shape> shape_back = config_item.ok() ? WithBatch(t.shape(), batching, *config_item)
                                                  : Result<Shape>(config_item.status());
      s = shape_back.ok() ? t.Reshape(*shape_back) : shape_back.status();
    }
    if (!s.ok()) {
      charge(clock.NowNs());
      return s;
    }
    batch_outputs.push_back(std::move(t));
  }
  results->clear();  // drop the session's references early

  int64_t row = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    const InferRequest& request = *requests[r];
    InferResponse response;
    response.model_name = config_.name();
    response.model_version = version;
    response.id = request.id;
    Status s;
    const auto emit = [&](size_t o) -> Status {
      KILN_ASSIGN_OR_RETURN(OwnedTensor t,
                            SliceOutput(plan_, o, batch_outputs[o], row, request, *allocator_));
      response.outputs.push_back({outputs_[o].name, std::move(t)});
      return Status::OK();
    };
    if (request.outputs.empty()) {
      for (size_t o = 0; o < outputs_.size() && s.ok(); ++o) s = emit(o);
    } else {
      for (const RequestedOutput& want : request.outputs) {
        size_t o = 0;
        while (o < outputs_.size() && outputs_[o].name != want.name) ++o;
        // ValidateInferRequest admitted only model outputs.
        s = o < outputs_.size() ? emit(o)
                                : Status::Internal(fmt::format(
                                      "requested output '{}' is not a model output", want.name));
        if (!s.ok()) break;
      }
    }
    if (s.ok()) {
      out[r].response = std::move(response);
    } else {
      out[r].response = std::move(s);
    }
    row += RequestBatchSize(plan_, request);
  }
  const int64_t end = clock.NowNs();
  charge(end);
  if (options_.stats) {
    options_.stats->RecordExecution(static_cast<uint64_t>(rows), Elapsed(start, input_done),
                                    Elapsed(input_done, infer_done), Elapsed(infer_done, end));
  }
  return Status::OK();
}

void ModelRunner::RunGroup(std::span<const InferRequest* const> requests, const BatchShape& shape,
                           int64_t version, std::span<RequestOutcome> out) const {
  Status s = Execute(requests, shape, version, out);
  if (s.ok()) return;
  if (requests.size() == 1) {
    out[0].response = std::move(s);
    return;
  }
  if (s.code() == StatusCode::kResourceExhausted) {
    const size_t half = requests.size() / 2;
    KILN_LOG_DEBUG("model '{}': a batch of {} requests ran out of memory ({}); splitting it",
                   config_.name(), requests.size(), s.message());
    RunGroup(requests.first(half), shape, version, out.first(half));
    RunGroup(requests.subspan(half), shape, version, out.subspan(half));
    return;
  }
  KILN_LOG_DEBUG("model '{}': a batch of {} requests failed ({}); running each alone",
                 config_.name(), requests.size(), s.message());
  for (size_t i = 0; i < requests.size(); ++i) {
    RunGroup(requests.subspan(i, 1), shape, version, out.subspan(i, 1));
  }
}

std::vector<RequestOutcome> ModelRunner::RunBatch(std::span<const InferRequest* const> requests,
                                                  const BatchShape& shape, int64_t version) const {
  KILN_CHECK(!requests.empty(), "RunBatch with no requests");
  KILN_CHECK(plan_.batching || requests.size() == 1, "model '", config_.name(),
             "' does not batch: one request at a time");
  std::vector<RequestOutcome> out(requests.size());
  RunGroup(requests, shape, version, out);
  return out;
}

Result<InferResponse> ModelRunner::Run(const InferRequest& request, int64_t version) const {
  const InferRequest* one[] = {&request};
  std::vector<RequestOutcome> out = RunBatch(one, RequestBatchShape(plan_, request), version);
  return std::move(out[0].response);
}

}  // namespace kiln
