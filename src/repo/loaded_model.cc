// SPDX-License-Identifier: Apache-2.0
#include "repo/loaded_model.h"

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <system_error>

#include "base/logging.h"
#include "repo/model_config.h"

namespace kiln {
namespace {

std::string QuotedNames(const std::vector<TensorSpec>& specs) {
  std::string out = "[";
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i) out += ", ";
    out += "'" + specs[i].name + "'";
  }
  return out + "]";
}

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

}  // namespace

Status ValidateInferRequest(const ModelSignature& sig, const InferRequest& request) {
  const bool batching = sig.max_batch_size > 0;
  std::vector<int> seen(sig.inputs.size(), 0);
  int64_t batch = -1;
  const std::string* batch_from = nullptr;
  for (const InferInput& in : request.inputs) {
    size_t idx = 0;
    while (idx < sig.inputs.size() && sig.inputs[idx].name != in.name) ++idx;
    if (idx == sig.inputs.size()) {
      return Status::InvalidArgument(
          fmt::format("unexpected inference input '{}' for model '{}' (model inputs: {})", in.name,
                      sig.name, QuotedNames(sig.inputs)));
    }
    if (seen[idx]++ > 0) {
      return Status::InvalidArgument(fmt::format("input '{}' is given more than once", in.name));
    }
    const TensorSpec& spec = sig.inputs[idx];
    const Tensor& t = in.tensor.view();
    if (!t.valid()) {
      return Status::InvalidArgument(fmt::format("input '{}' has no data", in.name));
    }
    if (t.dtype() != spec.dtype) {
      return Status::InvalidArgument(fmt::format("input '{}': expected datatype {}, got {}",
                                                 in.name, DataTypeName(spec.dtype),
                                                 DataTypeName(t.dtype())));
    }
    std::vector<int64_t> expected;
    if (batching) expected.push_back(-1);
    expected.insert(expected.end(), spec.dims.begin(), spec.dims.end());
    const std::string shapes =
        fmt::format("expected shape {}, got {}", DimsToString(expected), t.shape().ToString());
    if (static_cast<size_t>(t.rank()) != expected.size()) {
      return Status::InvalidArgument(fmt::format("input '{}': {}", in.name, shapes));
    }
    if (batching) {
      const int64_t b = t.dim(0);
      if (b < 1 || b > sig.max_batch_size) {
        return Status::InvalidArgument(
            fmt::format("input '{}': batch size {} is out of range 1..{} (max_batch_size): {}",
                        in.name, b, sig.max_batch_size, shapes));
      }
      if (batch_from != nullptr && b != batch) {
        return Status::InvalidArgument(
            fmt::format("input '{}': batch size {} differs from batch size {} of input '{}'",
                        in.name, b, batch, *batch_from));
      }
      batch = b;
      batch_from = &in.name;
    }
    for (size_t i = batching ? 1 : 0; i < expected.size(); ++i) {
      if (expected[i] != -1 && expected[i] != t.dim(static_cast<int>(i))) {
        return Status::InvalidArgument(fmt::format("input '{}': {}", in.name, shapes));
      }
    }
  }
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    if (seen[i] == 0) {
      return Status::InvalidArgument(
          fmt::format("input '{}' is missing: model '{}' expects inputs {}", sig.inputs[i].name,
                      sig.name, QuotedNames(sig.inputs)));
    }
  }
  for (size_t r = 0; r < request.outputs.size(); ++r) {
    const std::string& name = request.outputs[r].name;
    const bool known = std::any_of(sig.outputs.begin(), sig.outputs.end(),
                                   [&](const TensorSpec& s) { return s.name == name; });
    if (!known) {
      return Status::InvalidArgument(
          fmt::format("unexpected inference output '{}' for model '{}' (model outputs: {})", name,
                      sig.name, QuotedNames(sig.outputs)));
    }
    for (size_t q = 0; q < r; ++q) {
      if (request.outputs[q].name == name) {
        return Status::InvalidArgument(
            fmt::format("output '{}' is requested more than once", name));
      }
    }
  }
  return Status::OK();
}

// --- ModelRunner ---

ModelRunner::ModelRunner(inference::ModelConfig config, std::unique_ptr<Session> session)
    : config_(std::move(config)),
      signature_(MakeModelSignature(config_)),
      session_(std::move(session)) {}

Result<std::unique_ptr<ModelRunner>> ModelRunner::Create(const inference::ModelConfig& config,
                                                         std::unique_ptr<Session> session) {
  if (session == nullptr) return Status::Internal("ModelRunner::Create: null session");
  std::unique_ptr<ModelRunner> runner(new ModelRunner(config, std::move(session)));
  const Graph& g = runner->session_->graph();
  for (int id : g.inputs) {
    const std::string& name = g.value(id).name;
    const inference::ModelInput* found = nullptr;
    for (const inference::ModelInput& in : runner->config_.input()) {
      if (in.name() == name) found = &in;
    }
    if (found == nullptr) {
      return Status::Internal(
          fmt::format("model '{}': graph input '{}' is not in the config", config.name(), name));
    }
    runner->inputs_.push_back({name, found});
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

Result<InferResponse> ModelRunner::Run(const InferRequest& request, int64_t version) const {
  const bool batching = config_.max_batch_size() > 0;
  std::vector<Tensor> feeds;
  feeds.reserve(inputs_.size());
  for (const InputBinding& b : inputs_) {
    const InferInput* in = nullptr;
    for (const InferInput& candidate : request.inputs) {
      if (candidate.name == b.name) in = &candidate;
    }
    if (in == nullptr) {
      return Status::InvalidArgument(fmt::format("input '{}' is missing", b.name));
    }
    const Tensor& t = in->tensor.view();
    if (!b.config->has_reshape()) {
      feeds.push_back(t);
      continue;
    }
    const std::vector<int64_t> item = ItemDims(t.shape(), batching);
    KILN_ASSIGN_OR_RETURN(
        std::vector<int64_t> model_item,
        MapReshape(AsSpan(b.config->dims()), item, AsSpan(b.config->reshape().shape())));
    KILN_ASSIGN_OR_RETURN(Shape shape, WithBatch(t.shape(), batching, model_item));
    Result<Tensor> reshaped = t.Reshaped(shape);
    if (!reshaped.ok()) {
      return reshaped.status().WithContext(fmt::format("input '{}': reshape", b.name));
    }
    feeds.push_back(*reshaped);
  }

  KILN_ASSIGN_OR_RETURN(std::vector<OwnedTensor> results, session_->Run(feeds));

  InferResponse response;
  response.model_name = config_.name();
  response.model_version = version;
  response.id = request.id;
  const auto emit = [&](const OutputBinding& b) -> Status {
    OwnedTensor t = results[static_cast<size_t>(b.graph_output)];
    const DataType want = FromConfigDataType(b.config->data_type());
    if (t.dtype() != want) {
      return Status::Internal(fmt::format("output '{}': the model produced {}, the config says {}",
                                          b.name, DataTypeName(t.dtype()), DataTypeName(want)));
    }
    if (b.config->has_reshape()) {
      const std::vector<int64_t> item = ItemDims(t.shape(), batching);
      KILN_ASSIGN_OR_RETURN(
          std::vector<int64_t> config_item,
          MapReshape(AsSpan(b.config->reshape().shape()), item, AsSpan(b.config->dims())));
      KILN_ASSIGN_OR_RETURN(Shape shape, WithBatch(t.shape(), batching, config_item));
      KILN_RETURN_IF_ERROR(t.Reshape(shape));
    }
    response.outputs.push_back({b.name, std::move(t)});
    return Status::OK();
  };
  if (request.outputs.empty()) {
    for (const OutputBinding& b : outputs_) KILN_RETURN_IF_ERROR(emit(b));
  } else {
    for (const RequestedOutput& r : request.outputs) {
      const OutputBinding* found = nullptr;
      for (const OutputBinding& b : outputs_) {
        if (b.name == r.name) found = &b;
      }
      if (found == nullptr) {
        return Status::InvalidArgument(fmt::format("unexpected inference output '{}'", r.name));
      }
      KILN_RETURN_IF_ERROR(emit(*found));
    }
  }
  return response;
}

// --- LoadedModelImpl ---

struct LoadedModelImpl::Core {
  struct Work {
    std::unique_ptr<InferRequest> request;
    InferCallback done;
  };

  int64_t version = 0;
  std::unique_ptr<ModelRunner> runner;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Work> queue;  // guarded by mu
  bool stopping = false;   // guarded by mu

  // Worker loop: runs queued requests in FIFO order until stopping and drained.
  static void WorkerLoop(const std::shared_ptr<Core>& core) {
    for (;;) {
      Work work;
      {
        std::unique_lock<std::mutex> lock(core->mu);
        core->cv.wait(lock, [&] { return core->stopping || !core->queue.empty(); });
        if (core->queue.empty()) return;  // stopping, nothing left
        work = std::move(core->queue.front());
        core->queue.pop_front();
      }
      Result<InferResponse> result = core->runner->Run(*work.request, core->version);
      work.request.reset();
      work.done(std::move(result));
    }
  }
};

LoadedModelImpl::LoadedModelImpl(std::shared_ptr<Core> core) : core_(std::move(core)) {}

Result<std::shared_ptr<LoadedModelImpl>> LoadedModelImpl::Create(
    int64_t version, std::unique_ptr<ModelRunner> runner, int num_workers) {
  KILN_CHECK(runner != nullptr, "LoadedModelImpl::Create: null runner");
  KILN_CHECK(num_workers >= 1, "workers per model must be >= 1, got ", num_workers);
  auto core = std::make_shared<Core>();
  core->version = version;
  core->runner = std::move(runner);
  std::shared_ptr<LoadedModelImpl> model(new LoadedModelImpl(core));
  std::lock_guard<std::mutex> lock(model->threads_mu_);
  for (int i = 0; i < num_workers; ++i) {
    try {
      model->threads_.emplace_back([core] { Core::WorkerLoop(core); });
    } catch (const std::system_error& e) {
      // `model` is destroyed on return (after `lock`) and joins the workers already started.
      return Status::Internal(fmt::format("model '{}' version {}: cannot start worker thread: {}",
                                          core->runner->config().name(), version, e.what()));
    }
  }
  return model;
}

LoadedModelImpl::~LoadedModelImpl() { Shutdown(); }

const std::string& LoadedModelImpl::name() const { return core_->runner->config().name(); }
int64_t LoadedModelImpl::version() const { return core_->version; }
const ModelSignature& LoadedModelImpl::signature() const { return core_->runner->signature(); }
const inference::ModelConfig& LoadedModelImpl::config() const { return core_->runner->config(); }

void LoadedModelImpl::Infer(std::unique_ptr<InferRequest> request, InferCallback done) {
  if (request == nullptr) {
    done(Status::InvalidArgument("null inference request"));
    return;
  }
  Status valid = ValidateInferRequest(signature(), *request);
  if (!valid.ok()) {
    done(std::move(valid));
    return;
  }
  // Once the request is queued, a worker may run it and its callback may drop the last
  // reference to this model before we return: touch only this local reference from then on.
  const std::shared_ptr<Core> core = core_;
  {
    std::unique_lock<std::mutex> lock(core->mu);
    if (core->stopping) {
      lock.unlock();
      done(Status::Unavailable(
          fmt::format("model '{}' version {} is shutting down", name(), version())));
      return;
    }
    core->queue.push_back({std::move(request), std::move(done)});
  }
  core->cv.notify_one();
}

void LoadedModelImpl::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->stopping = true;
  }
  core_->cv.notify_all();
  std::lock_guard<std::mutex> lock(threads_mu_);
  for (std::thread& t : threads_) {
    if (t.get_id() == std::this_thread::get_id()) {
      // Destroyed from our own callback: this worker exits on its own once the callback
      // returns (it holds the shared Core), so it must not join itself.
      t.detach();
    } else if (t.joinable()) {
      t.join();
    }
  }
  threads_.clear();
}

size_t LoadedModelImpl::queued() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->queue.size();
}

}  // namespace kiln
