// SPDX-License-Identifier: Apache-2.0
#include "repo/loaded_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <thread>

#include "backend/backend.h"
#include "base/logging.h"
#include "opt/optimizer.h"
#include "repo/batching.h"
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

}  // namespace

FailureReason EnqueueFailureReason(const Status& refused) {
  switch (refused.code()) {
    case StatusCode::kResourceExhausted:
      return FailureReason::kQueueFull;
    case StatusCode::kUnavailable:
      return FailureReason::kShuttingDown;
    case StatusCode::kInvalidArgument:
      return FailureReason::kInvalid;
    case StatusCode::kDeadlineExceeded:
      return FailureReason::kTimeout;
    case StatusCode::kCancelled:
      return FailureReason::kCanceled;
    default:
      return FailureReason::kOther;
  }
}

uint64_t GraphWeightBytes(const Graph& graph) {
  uint64_t bytes = 0;
  for (const Value& v : graph.values()) {
    if (v.constant != nullptr) bytes += v.constant->size_bytes();
  }
  return bytes;
}

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

// --- LoadedModelImpl ---

// Between a request that missed the response cache and its sink: a successful response is
// inserted under the request's key before it is passed on (failures and streamed responses are
// not cached). Holds what it needs itself: the model may be gone when the response comes.
class LoadedModelImpl::CacheInsertSink final : public ResponseSink {
 public:
  CacheInsertSink(std::shared_ptr<ResponseCache> cache, ResponseCacheKey key,
                  std::shared_ptr<StatsCollector> stats, const Clock* clock, uint64_t lookup_ns,
                  std::shared_ptr<ResponseSink> out)
      : cache_(std::move(cache)),
        key_(key),
        stats_(std::move(stats)),
        clock_(clock),
        lookup_ns_(lookup_ns),
        out_(std::move(out)) {}

  void Send(InferResponse partial) override {
    streamed_ = true;
    out_->Send(std::move(partial));
  }
  void Finish(Result<InferResponse> result) override {
    if (result.ok() && !streamed_) {
      const int64_t start = clock_->NowNs();
      cache_->Insert(key_, result->outputs);
      stats_->RecordCacheMiss(lookup_ns_ + static_cast<uint64_t>(clock_->NowNs() - start));
    }
    out_->Finish(std::move(result));
  }
  size_t backlog() const override { return out_->backlog(); }
  bool streaming() const override { return out_->streaming(); }

 private:
  const std::shared_ptr<ResponseCache> cache_;
  const ResponseCacheKey key_;
  const std::shared_ptr<StatsCollector> stats_;
  const Clock* const clock_;
  const uint64_t lookup_ns_;  // hashing and looking up the request
  const std::shared_ptr<ResponseSink> out_;
  bool streamed_ = false;  // Send and Finish are never concurrent (sched/request.h)
};

class LoadedModelImpl::Executor final : public BatchExecutor {
 public:
  Executor(int64_t version, std::vector<std::shared_ptr<const ModelRunner>> runners)
      : version_(version), runners_(std::move(runners)) {}

  std::vector<RequestOutcome> Execute(int instance, std::span<const InferRequest* const> requests,
                                      const BatchShape& shape) override {
    return runners_[static_cast<size_t>(instance)]->RunBatch(requests, shape, version_);
  }

 private:
  const int64_t version_;
  const std::vector<std::shared_ptr<const ModelRunner>> runners_;
};

namespace {

// The devices of the KIND_GPU instances, one entry per instance. Errors name the group and what
// this process has.
Result<std::vector<Device>> GpuInstanceDevices(const inference::ModelConfig& config) {
  std::vector<Device> devices;
  const std::vector<Backend*> gpus = BackendRegistry::OfType(DeviceType::kCuda);
  for (const inference::ModelInstanceGroup& g : config.instance_group()) {
    if (g.kind() != inference::ModelInstanceGroup::KIND_GPU) continue;
    if (gpus.empty()) {
      return Status::InvalidArgument(
          fmt::format("model '{}': instance_group '{}' asks for KIND_GPU, but this kiln has no GPU "
                      "({}); use KIND_CPU",
                      config.name(), g.name(), BackendRegistry::MissingReason(DeviceType::kCuda)));
    }
    std::vector<int> listed(g.gpus().begin(), g.gpus().end());
    if (listed.empty()) {
      for (Backend* b : gpus) listed.push_back(b->device().index);
    }
    for (int gpu : listed) {
      if (BackendRegistry::Find(Device::Cuda(gpu)) == nullptr) {
        std::vector<std::string> have;
        for (Backend* b : gpus) have.push_back(b->name());
        return Status::InvalidArgument(fmt::format(
            "model '{}': instance_group '{}' asks for KIND_GPU on GPU {}, but this kiln has {} "
            "GPU{}: {}",
            config.name(), g.name(), gpu, gpus.size(), gpus.size() == 1 ? "" : "s",
            fmt::join(have, ", ")));
      }
      for (int c = 0; c < std::max(1, g.count()); ++c) devices.push_back(Device::Cuda(gpu));
    }
  }
  return devices;
}

}  // namespace

LoadedModelImpl::LoadedModelImpl(int64_t version, std::shared_ptr<const ModelRunner> first_runner,
                                 std::shared_ptr<StatsCollector> stats, int instance_count)
    : version_(version),
      runner_(std::move(first_runner)),
      stats_(std::move(stats)),
      instance_count_(instance_count) {}

Result<std::shared_ptr<LoadedModelImpl>> LoadedModelImpl::Create(
    int64_t version, const inference::ModelConfig& config, std::shared_ptr<const Graph> graph,
    const InstanceOptions& options, const OutputLabels& output_labels) {
  KILN_CHECK(graph != nullptr, "LoadedModelImpl::Create: null graph");
  const std::string& model = config.name();
  // Weight bytes are those of the model as imported (its initializers), whatever the optimizer
  // folds or drops below.
  const uint64_t weight_bytes = GraphWeightBytes(*graph);
  // Where the instances run: KIND_GPU groups on their GPUs (`count` instances on each listed
  // GPU, every GPU when none is listed), the other groups on the CPU.
  KILN_RETURN_IF_ERROR(ValidateInstanceGroups(config));
  KILN_ASSIGN_OR_RETURN(std::vector<Device> gpu_instances, GpuInstanceDevices(config));
  KILN_ASSIGN_OR_RETURN(const int gpu_streams, GpuStreamsFromConfig(config));
  // A model's own intra-op width replaces the server-wide one for its instances.
  KILN_ASSIGN_OR_RETURN(const int model_threads, IntraOpThreadsFromConfig(config));
  InstanceOptions planned = options;
  if (model_threads > 0) planned.intra_op_threads = model_threads;
  int requested = 0;
  bool any_cpu_group = config.instance_group().empty();
  for (const inference::ModelInstanceGroup& g : config.instance_group()) {
    if (g.kind() == inference::ModelInstanceGroup::KIND_GPU) continue;
    requested += std::max(1, g.count());
    any_cpu_group = true;
  }
  // The graph optimizer runs once per load and target device; every instance on that kind of
  // device shares its result. A failure would be an optimizer bug: it is logged and the model
  // is served as imported. An unknown pass name in the config fails the load.
  KILN_ASSIGN_OR_RETURN(GraphOptimizationConfig optimization, GraphOptimizationFromConfig(config));
  auto optimize = [&](DeviceType device) -> Result<std::shared_ptr<const Graph>> {
    if (!optimization.enabled) return graph;
    OptimizerOptions optimizer_options;
    optimizer_options.disabled_passes = optimization.disabled_passes;
    optimizer_options.target = KernelTargetFor(device);
    // optimization { precision } fp32 / fp16 / bf16 is how the weights are held; "" keeps the
    // model's own (auto); int8 quantized the graph before this point and keeps auto too.
    const std::string& precision = config.optimization().precision();
    if (precision == "fp32" || precision == "fp16" || precision == "bf16") {
      optimizer_options.weight_precision = precision;
    }
    Result<OptimizedGraph> optimized = OptimizeGraph(graph, optimizer_options);
    if (optimized.ok()) return std::shared_ptr<const Graph>(optimized->graph);
    if (optimized.status().code() == StatusCode::kInvalidArgument) {
      return optimized.status().WithContext(fmt::format("model '{}' version {}: parameter '{}'",
                                                        model, version, kDisabledPassesParameter));
    }
    KILN_LOG_WARN(
        "model '{}' version {}: graph optimization failed, serving the graph as "
        "imported: {}",
        model, version, optimized.status().ToString());
    return graph;
  };
  std::shared_ptr<const Graph> cpu_graph, gpu_graph;
  if (any_cpu_group) {
    KILN_ASSIGN_OR_RETURN(cpu_graph, optimize(DeviceType::kCpu));
  }
  if (!gpu_instances.empty()) {
    KILN_ASSIGN_OR_RETURN(gpu_graph, optimize(DeviceType::kCuda));
  }
  KILN_ASSIGN_OR_RETURN(BatchPolicyConfig policy, MakeBatchPolicyConfig(config));

  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  int cpu_count = 0;
  InstancePlan instances;
  if (any_cpu_group) {
    requested = std::max(1, requested);
    instances = PlanInstances(requested, planned, hardware);
    cpu_count = instances.instances;
    if (cpu_count < requested) {
      KILN_LOG_WARN(
          "model '{}' version {}: starting {} of the {} configured instances ({} intra-op "
          "thread(s) each within a budget of {} threads; the thread budget can be raised or "
          "oversubscription allowed)",
          model, version, cpu_count, requested, instances.intra_op_threads,
          options.cpu_threads > 0 ? options.cpu_threads : hardware);
    }
  } else {
    // GPU instances only: the nodes without a GPU kernel run on the CPU within the budget.
    instances = PlanInstances(static_cast<int>(gpu_instances.size()), planned, hardware);
  }
  std::vector<Device> devices = gpu_instances;
  devices.insert(devices.end(), static_cast<size_t>(cpu_count), Device::Cpu());
  const int count = static_cast<int>(devices.size());

  auto stats = std::make_shared<StatsCollector>();
  std::vector<std::shared_ptr<const ModelRunner>> runners;
  for (int i = 0; i < count; ++i) {
    const Device device = devices[static_cast<size_t>(i)];
    SessionOptions session_options;
    session_options.device = device;
    session_options.allocator = options.allocator;
    session_options.intra_op_threads = instances.intra_op_threads;
    session_options.adapt_threads = options.adapt_threads;
    session_options.thread_budget = options.thread_budget;
    Result<std::unique_ptr<Session>> created =
        Session::Create(device.is_cpu() ? cpu_graph : gpu_graph, session_options);
    if (!created.ok()) {
      return created.status().WithContext(
          fmt::format("model '{}' version {} on {}", model, version, device.ToString()));
    }
    std::unique_ptr<Session> session = std::move(created).value();
    // The notes of the first instance of each kind of device.
    if (i == 0 || (device.is_cpu() && i == static_cast<int>(gpu_instances.size()))) {
      for (const auto& [note, nodes] : session->KernelNotes()) {
        KILN_LOG_WARN("model '{}' version {}: {} node{}: {}", model, version, nodes,
                      nodes == 1 ? "" : "s", note);
      }
    }
    if (!device.is_cpu() && i == 0) {
      int on_device = 0;
      const int num_nodes = session->graph().num_nodes();
      for (int n = 0; n < num_nodes; ++n) on_device += session->placement(n) == device ? 1 : 0;
      KILN_LOG_INFO("model '{}' version {}: {} of {} nodes on {}, {} tensor copies per run", model,
                    version, on_device, num_nodes, device.ToString(),
                    session->device_copies_per_run());
    }
    ModelRunnerOptions runner_options;
    runner_options.allocator = options.allocator;
    runner_options.stats = stats;
    runner_options.output_labels = output_labels;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                          ModelRunner::Create(config, std::move(session), runner_options));
    // A GPU instance takes `gpu_streams` batches at once: the batcher sees as many execution
    // slots, each run on a stream of the session's pool, so one batch's copies overlap
    // another's compute.
    std::shared_ptr<const ModelRunner> shared = std::move(runner);
    for (int k = 0; k < (device.is_cpu() ? 1 : gpu_streams); ++k) runners.push_back(shared);
  }

  const int slots = static_cast<int>(runners.size());
  std::shared_ptr<LoadedModelImpl> loaded(new LoadedModelImpl(version, runners[0], stats, count));
  loaded->weight_bytes_ = weight_bytes;
  for (Device d : gpu_instances) {
    if (std::find(loaded->gpus_.begin(), loaded->gpus_.end(), d) == loaded->gpus_.end()) {
      loaded->gpus_.push_back(d);
    }
  }
  loaded->clock_ = options.clock != nullptr ? options.clock : &SteadyClock();
  static std::atomic<uint64_t> loads{0};
  loaded->load_id_ = loads.fetch_add(1, std::memory_order_relaxed);
  if (config.response_cache().enable()) {
    if (options.response_cache != nullptr) {
      loaded->cache_ = options.response_cache;
    } else {
      // As the reference server: the model loads and runs every request.
      KILN_LOG_WARN(
          "model '{}' version {}: its config enables response_cache, but the server has no "
          "response cache (kiln serve --cache-config local,size=BYTES); its responses are not "
          "cached",
          model, version);
    }
  }
  BatcherOptions batcher_options;
  batcher_options.name = fmt::format("model '{}' version {}", model, version);
  batcher_options.policy = std::move(policy);
  batcher_options.num_instances = slots;
  batcher_options.clock = options.clock;
  batcher_options.stats = stats;
  batcher_options.inline_max_ns = options.inline_max_ns;
  KILN_ASSIGN_OR_RETURN(loaded->batcher_,
                        Batcher::Create(std::move(batcher_options),
                                        std::make_shared<Executor>(version, std::move(runners))));
  return loaded;
}

LoadedModelImpl::~LoadedModelImpl() {
  Shutdown();
  if (gpus_.empty()) return;
  // The sessions go first, then the GPUs' pools give what they cached back to the device, so
  // that an unloaded model's device memory is free for others (cudaMemGetInfo shows it).
  batcher_.reset();
  runner_.reset();
  for (Device d : gpus_) {
    if (Backend* b = BackendRegistry::Find(d)) b->TrimCachedMemory();
  }
}

const std::string& LoadedModelImpl::name() const { return runner_->config().name(); }
int64_t LoadedModelImpl::version() const { return version_; }
const ModelSignature& LoadedModelImpl::signature() const { return runner_->signature(); }
const Graph& LoadedModelImpl::graph() const { return runner_->graph(); }

const inference::ModelConfig& LoadedModelImpl::config() const { return runner_->config(); }

void LoadedModelImpl::Infer(std::unique_ptr<InferRequest> request,
                            std::shared_ptr<ResponseSink> sink) {
  const int64_t arrival_ns = cache_ != nullptr ? clock_->NowNs() : 0;
  const auto refuse = [&](FailureReason reason, Status s) {
    stats_->RecordFailure(reason, 0, WallClockMs());
    sink->Finish(std::move(s));
  };
  if (request == nullptr) {
    return refuse(FailureReason::kInvalid, Status::InvalidArgument("null inference request"));
  }
  if (Status valid = ValidateInferRequest(signature(), *request); !valid.ok()) {
    return refuse(FailureReason::kInvalid, std::move(valid));
  }
  // A hit may drop the last reference to this model in its callback: return at once.
  if (cache_ != nullptr && AnswerFromCache(*request, arrival_ns, sink)) return;
  const BatchingPlan& plan = runner_->plan();
  BatchShape shape = RequestBatchShape(plan, *request);
  const int64_t batch_size = RequestBatchSize(plan, *request);
  // Once the request is queued, its callback may drop the last reference to this model before
  // Enqueue returns: touch nothing of this object after an OK Enqueue.
  Status queued = batcher_->Enqueue(request, sink, std::move(shape), batch_size);
  if (!queued.ok()) {
    const FailureReason reason = EnqueueFailureReason(queued);
    refuse(reason, std::move(queued));
  }
}

bool LoadedModelImpl::AnswerFromCache(const InferRequest& request, int64_t arrival_ns,
                                      std::shared_ptr<ResponseSink>& sink) {
  if (request.cancelled() || shutting_down_.load(std::memory_order_acquire)) return false;
  const int64_t start_ns = clock_->NowNs();
  const std::optional<ResponseCacheKey> key = cache_->Key(name(), version_, load_id_, request);
  if (!key.has_value()) return false;
  const ResponseCache::Outputs hit = cache_->Lookup(*key);
  if (hit == nullptr) {
    const auto lookup_ns = static_cast<uint64_t>(clock_->NowNs() - start_ns);
    sink =
        std::make_shared<CacheInsertSink>(cache_, *key, stats_, clock_, lookup_ns, std::move(sink));
    return false;
  }
  InferResponse response;
  response.model_name = name();
  response.model_version = version_;
  response.id = request.id;
  response.outputs = *hit;  // the cached tensors, shared
  // response.timing stays zero: a hit waits in no queue and runs nothing (its statistics say
  // the same); the cache keeps outputs only, never the timing of the request that filled it.
  const int64_t end_ns = clock_->NowNs();
  stats_->RecordCacheHit(static_cast<uint64_t>(end_ns - start_ns),
                         static_cast<uint64_t>(end_ns - arrival_ns), WallClockMs());
  sink->Finish(std::move(response));
  return true;
}

ModelStatistics LoadedModelImpl::Statistics() const {
  ModelStatistics s = stats_->Snapshot();
  s.response_cache = cache_ != nullptr;
  return s;
}

void LoadedModelImpl::ResetStatistics() { stats_->Reset(); }

void LoadedModelImpl::Shutdown() {
  shutting_down_.store(true, std::memory_order_release);
  if (batcher_ != nullptr) batcher_->Shutdown();
}

size_t LoadedModelImpl::queued() const { return batcher_->queued(); }

size_t LoadedModelImpl::PendingRequestCount() const { return queued(); }

double LoadedModelImpl::LoadDurationSeconds() const {
  return static_cast<double>(load_duration_ns_.load(std::memory_order_relaxed)) / 1e9;
}

void LoadedModelImpl::SetLoadDuration(uint64_t ns) {
  load_duration_ns_.store(ns, std::memory_order_relaxed);
}

}  // namespace kiln
