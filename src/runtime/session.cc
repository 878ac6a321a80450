// SPDX-License-Identifier: Apache-2.0
#include "runtime/session.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "backend/backend.h"
#include "base/mutex.h"
#include "kernels/registry.h"
#include "runtime/arena.h"
#include "runtime/control_flow.h"

namespace kiln {

struct Session::NodeKernel {
  std::unique_ptr<Kernel> kernel;
  const KernelDef* def = nullptr;
  bool on_device = false;  // runs on SessionOptions::device (not the CPU)
};

// Placement on a device other than the CPU (SessionOptions::device).
struct Session::DeviceState {
  Backend* backend = nullptr;
  std::vector<char> on_device;         // per node: 1 = runs on backend's device
  std::vector<OwnedTensor> constants;  // per value: its device copy when a device node reads it
  // The device side plans every node: its graph outputs go back to host memory within the run.
  std::vector<char> no_heap_nodes;
  Mutex mu;
  std::vector<std::unique_ptr<Stream>> idle KILN_GUARDED_BY(mu);  // streams between runs
};

// One run's stream of the session's device: taken from the idle ones (or created), and given
// back synchronized when the run ends (a stream that failed is dropped). Declared in Execute
// before anything the stream's work reads, so that the work is done before that is freed.
class Session::StreamLease {
 public:
  explicit StreamLease(DeviceState* d) : d_(d) {}
  StreamLease(const StreamLease&) = delete;
  StreamLease& operator=(const StreamLease&) = delete;
  ~StreamLease() {
    if (stream_ == nullptr) return;
    if (!stream_->Synchronize().ok()) return;
    MutexLock lock(d_->mu);
    d_->idle.push_back(std::move(stream_));
  }
  Status Acquire() {
    {
      MutexLock lock(d_->mu);
      if (!d_->idle.empty()) {
        stream_ = std::move(d_->idle.back());
        d_->idle.pop_back();
        return Status::OK();
      }
    }
    KILN_ASSIGN_OR_RETURN(stream_, d_->backend->CreateStream());
    return Status::OK();
  }
  Stream& operator*() const { return *stream_; }

 private:
  DeviceState* d_;  // null: no device (Acquire is never called)
  std::unique_ptr<Stream> stream_;
};

// The plan caches and the planner's counters. A session with nodes on a device plans two sides:
// the host's allocations (the session's allocator) and the device's (its buffer type), each with
// a plan and arenas of its own, cached under the same input signature.
struct Session::PlanState {
  explicit PlanState(size_t capacity) : cache{PlanCache(capacity), PlanCache(capacity)} {}
  PlanCache cache[2];  // [0] host, [1] device
  std::atomic<int64_t> recorded_runs{0};
  std::atomic<int64_t> planned_runs{0};
  std::atomic<int64_t> unplanned_runs{0};
  std::atomic<int64_t> heap_fallbacks{0};
};

// How one run executes: which allocators nodes use and whether it is profiled. Per side ([0]
// the host, [1] the device): the run allocator (null: nodes use the side's allocator), the
// nodes that bypass it, the recorder when it records.
struct Session::RunState {
  RunAllocator* run_allocator[2] = {nullptr, nullptr};
  const std::vector<char>* heap_nodes[2] = {nullptr, nullptr};
  RecordingAllocator* recorder[2] = {nullptr, nullptr};
  RunProfile* profile = nullptr;
};

// Picks the run allocators for one run from the plan caches and settles them afterwards: builds
// and caches the plans after a recording run that succeeded, returns arenas to their pools.
// Declared before the Frame of the run so that every intermediate is gone when it settles.
class Session::RunScope {
 public:
  // `signature`: the run's input signature; empty when the run cannot be planned.
  RunScope(const Session& session, std::vector<int64_t> signature, RunProfile* profile)
      : session_(session), sides_(session.device_ != nullptr ? 2 : 1) {
    state_.profile = profile;
    PlanState* plans = session.plans_.get();
    if (plans == nullptr || signature.empty()) {
      if (plans != nullptr) plans->unplanned_runs.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    bool cached = true;
    for (int side = 0; side < sides_; ++side) {
      entry_[side] = plans->cache[side].Find(signature);
      cached = cached && entry_[side] != nullptr;
    }
    if (cached) {
      for (int side = 0; side < sides_; ++side) {
        Result<std::unique_ptr<PlannedAllocator>> arena =
            AcquireArena(*entry_[side], session.SideAllocator(side));
        if (!arena.ok()) {  // no memory for an arena: run unplanned; the allocators will tell
          for (int k = 0; k < side; ++k) {
            ReleaseArena(*entry_[k], std::move(arena_[k]));
            state_.run_allocator[k] = nullptr;
            state_.heap_nodes[k] = nullptr;
          }
          for (std::shared_ptr<PlanEntry>& e : entry_) e = nullptr;
          plans->unplanned_runs.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        arena_[side] = std::move(arena).value();
        state_.run_allocator[side] = arena_[side].get();
        state_.heap_nodes[side] = &entry_[side]->plan.heap_nodes;
      }
      plans->planned_runs.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    for (std::shared_ptr<PlanEntry>& e : entry_) e = nullptr;
    signature_ = std::move(signature);
    for (int side = 0; side < sides_; ++side) {
      recorder_[side] = std::make_unique<RecordingAllocator>(session.SideAllocator(side));
      state_.run_allocator[side] = recorder_[side].get();
      state_.recorder[side] = recorder_[side].get();
      state_.heap_nodes[side] = &session.HeapNodes(side);
    }
  }
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

  ~RunScope() {
    PlanState* plans = session_.plans_.get();
    for (int side = 0; side < sides_; ++side) {
      if (arena_[side] == nullptr) continue;
      plans->heap_fallbacks.fetch_add(arena_[side]->fallbacks(), std::memory_order_relaxed);
      ReleaseArena(*entry_[side], std::move(arena_[side]));
    }
    if (recorder_[0] == nullptr) return;
    if (succeeded_) {
      const int num_nodes = session_.graph_->num_nodes();
      for (int side = 0; side < sides_; ++side) {
        std::vector<RecordedAllocation> records = recorder_[side]->records();
        MemoryPlan plan = BuildMemoryPlan(records, num_nodes, session_.HeapNodes(side));
        std::shared_ptr<PlanEntry> entry = plans->cache[side].Insert(signature_, std::move(plan));
        // One arena up front, so the next run of this signature allocates nothing.
        Result<std::unique_ptr<PlannedAllocator>> arena =
            AcquireArena(*entry, session_.SideAllocator(side));
        if (arena.ok()) ReleaseArena(*entry, std::move(arena).value());
      }
      plans->recorded_runs.fetch_add(1, std::memory_order_relaxed);
    }
    for (int side = 0; side < sides_; ++side) {
      // A recorder with live blocks deletes itself with its last block.
      if (!recorder_[side]->EndRun()) (void)recorder_[side].release();
    }
  }

  const RunState& state() const { return state_; }
  void set_succeeded() { succeeded_ = true; }

 private:
  const Session& session_;
  const int sides_;
  RunState state_;
  std::vector<int64_t> signature_;
  std::shared_ptr<PlanEntry> entry_[2];
  std::unique_ptr<PlannedAllocator> arena_[2];
  std::unique_ptr<RecordingAllocator> recorder_[2];
  bool succeeded_ = false;
};

namespace {

void AppendSignature(const Tensor& t, std::vector<int64_t>& key) {
  key.push_back(static_cast<int64_t>(t.dtype()));
  key.push_back(t.rank());
  for (int i = 0; i < t.rank(); ++i) key.push_back(t.dim(i));
}

// Per tensor input, then per captured tensor: dtype, rank, dims. Empty when a capture is not a
// tensor.
std::vector<int64_t> TensorSignature(std::span<const Tensor> inputs,
                                     std::span<const Tensor> captures) {
  std::vector<int64_t> key;
  key.reserve((inputs.size() + captures.size()) * 6 + 2);
  key.push_back(static_cast<int64_t>(inputs.size()));
  for (const Tensor& t : inputs) AppendSignature(t, key);
  key.push_back(static_cast<int64_t>(captures.size()));
  for (const Tensor& t : captures) {
    if (!t.valid()) return {};
    AppendSignature(t, key);
  }
  return key;
}

// The same over values: empty when an input or a capture is not a tensor (a sequence or none).
std::vector<int64_t> ValueSignature(std::span<const RuntimeValue> inputs,
                                    std::span<const Tensor> capture_tensors,
                                    std::span<const RuntimeValue* const> capture_values) {
  std::vector<int64_t> key;
  key.reserve((inputs.size() + capture_tensors.size()) * 6 + 2);
  key.push_back(static_cast<int64_t>(inputs.size()));
  for (const RuntimeValue& v : inputs) {
    if (!v.is_tensor()) return {};
    AppendSignature(v.tensor().view(), key);
  }
  key.push_back(static_cast<int64_t>(capture_tensors.size()));
  for (size_t i = 0; i < capture_tensors.size(); ++i) {
    if (capture_tensors[i].valid()) {
      AppendSignature(capture_tensors[i], key);
      continue;
    }
    const RuntimeValue* v = i < capture_values.size() ? capture_values[i] : nullptr;
    if (v == nullptr || !v->is_tensor()) return {};
    AppendSignature(v->tensor().view(), key);
  }
  return key;
}

}  // namespace

Session::Session(std::shared_ptr<const Graph> graph, std::vector<NodeKernel> kernels)
    : graph_(std::move(graph)), kernels_(std::move(kernels)) {
  last_use_.assign(static_cast<size_t>(graph_->num_values()), -1);
  for (int n = 0; n < graph_->num_nodes(); ++n) {
    const Node& node = graph_->node(n);
    for (int in : node.inputs) {
      if (in != kNoValue) last_use_[static_cast<size_t>(in)] = n;
    }
    for (int in : node.implicit_inputs) last_use_[static_cast<size_t>(in)] = n;
  }
  captures_ = graph_->Captures();
  // Graph outputs must survive to the end.
  for (int out : graph_->outputs) last_use_[static_cast<size_t>(out)] = graph_->num_nodes();
  output_nodes_.assign(static_cast<size_t>(graph_->num_nodes()), 0);
  for (int out : graph_->outputs) {
    const int producer = graph_->value(out).producer;
    if (producer >= 0) output_nodes_[static_cast<size_t>(producer)] = 1;
  }
}

Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Graph> graph,
                                                 const SessionOptions& options) {
  if (graph == nullptr) return Status::InvalidArgument("Session::Create: null graph");
  const KernelRegistry& registry = KernelRegistry::Global();
  Backend* backend = nullptr;  // the preferred device's, when it is not the CPU
  if (!options.device.is_cpu()) {
    backend = BackendRegistry::Find(options.device);
    if (backend == nullptr) {
      std::string known;
      for (Backend* b : BackendRegistry::All()) {
        known += (known.empty() ? "" : ", ") + b->device().ToString();
      }
      return Status::InvalidArgument(fmt::format("no backend for device {} (this process has: {})",
                                                 options.device.ToString(), known));
    }
  }
  std::vector<NodeKernel> kernels;
  kernels.reserve(static_cast<size_t>(graph->num_nodes()));
  for (const Node& node : graph->nodes()) {
    const NodeDesc desc = DescribeNode(*graph, node);
    const KernelInfo info(desc);
    if (IsControlFlowOp(node)) {
      Result<std::unique_ptr<Kernel>> kernel = CreateControlFlowKernel(*graph, node, info, options);
      if (!kernel.ok()) {
        return kernel.status().WithContext(fmt::format(
            "node '{}' (op {})", node.name.empty() ? node.op_type : node.name, node.op_type));
      }
      kernels.push_back({std::move(kernel).value(), &ControlFlowKernelDef()});
      continue;
    }
    // The preferred device when it has a kernel that takes the node (tensors only), else the
    // CPU, as ONNX Runtime's execution providers fall back.
    if (backend != nullptr) {
      Result<const KernelDef*> def =
          registry.Find(info, options.device.type, options.kernel_provider);
      if (def.ok()) {
        Result<std::unique_ptr<Kernel>> kernel = (*def)->create(info);
        if (kernel.ok() && !(*kernel)->TakesNonTensorValues()) {
          kernels.push_back({std::move(kernel).value(), *def, /*on_device=*/true});
          continue;
        }
      }
    }
    KILN_ASSIGN_OR_RETURN(const KernelDef* def,
                          registry.Find(info, DeviceType::kCpu, options.kernel_provider));
    Result<std::unique_ptr<Kernel>> kernel = def->create(info);
    if (!kernel.ok()) {
      return kernel.status().WithContext(fmt::format(
          "node '{}' (op {})", node.name.empty() ? node.op_type : node.name, node.op_type));
    }
    kernels.push_back({std::move(kernel).value(), def});
  }
  auto session = std::unique_ptr<Session>(new Session(std::move(graph), std::move(kernels)));
  if (backend != nullptr) KILN_RETURN_IF_ERROR(session->PlaceOnDevice(*backend));
  session->device_preferred_ = options.device;
  session->check_input_shapes_ = options.check_input_shapes;
  session->allocator_ = options.allocator != nullptr ? options.allocator : &HostAllocator();
  session->intra_op_threads_ =
      options.intra_op_threads > 0 ? options.intra_op_threads : std::max(1, omp_get_num_procs());
  session->inherit_threads_ = options.inherit_threads;
  session->thread_budget_ = options.thread_budget;
  if (options.adapt_threads && !options.inherit_threads && session->intra_op_threads_ > 1) {
    ThreadGovernorOptions governor;
    governor.max_threads = session->intra_op_threads_;
    session->governors_ = std::make_unique<ThreadGovernors>(governor);
  }
  if (options.memory_planning) {
    session->plans_ = std::make_unique<PlanState>(
        static_cast<size_t>(std::max(1, options.memory_plan_cache_size)));
  }
  return session;
}

Status Session::PlaceOnDevice(Backend& backend) {
  const Graph& g = *graph_;
  auto d = std::make_unique<DeviceState>();
  d->backend = &backend;
  d->on_device.assign(static_cast<size_t>(g.num_nodes()), 0);
  d->no_heap_nodes.assign(static_cast<size_t>(g.num_nodes()), 0);
  bool any = false;
  for (int n = 0; n < g.num_nodes(); ++n) {
    if (kernels_[static_cast<size_t>(n)].on_device) {
      d->on_device[static_cast<size_t>(n)] = 1;
      any = true;
    }
  }
  if (!any) return Status::OK();
  // Where each value is made: 1 on the device (graph inputs, constants and captures: the host).
  std::vector<char> made_on_device(static_cast<size_t>(g.num_values()), 0);
  for (int n = 0; n < g.num_nodes(); ++n) {
    for (int out : g.node(n).outputs) {
      if (out != kNoValue) made_on_device[static_cast<size_t>(out)] = d->on_device[n];
    }
  }
  // Copies per run: distinct (value, side) pairs read across the edge, and device outputs.
  d->constants.resize(static_cast<size_t>(g.num_values()));
  std::vector<char> copied(static_cast<size_t>(g.num_values()), 0);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, backend.CreateStream());
  int64_t copies = 0;
  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    const bool dev = d->on_device[static_cast<size_t>(n)] != 0;
    auto read = [&](int id) -> Status {
      if (id == kNoValue || copied[static_cast<size_t>(id)] ||
          made_on_device[static_cast<size_t>(id)] == dev) {
        return Status::OK();
      }
      copied[static_cast<size_t>(id)] = 1;
      const Value& v = g.value(id);
      if (!v.is_constant()) {
        ++copies;
        return Status::OK();
      }
      const Tensor& src = v.constant->view();
      KILN_ASSIGN_OR_RETURN(OwnedTensor dst,
                            OwnedTensor::AllocateForOverwrite(src.dtype(), src.shape(),
                                                              backend.buffer_type().allocator()));
      stream->CopyAsync(dst.raw_data(), src.raw_data(), src.size_bytes());
      d->constants[static_cast<size_t>(id)] = std::move(dst);
      return Status::OK();
    };
    for (int id : node.inputs) KILN_RETURN_IF_ERROR(read(id));
    for (int id : node.implicit_inputs) KILN_RETURN_IF_ERROR(read(id));
  }
  for (int out : g.outputs) copies += made_on_device[static_cast<size_t>(out)];
  KILN_RETURN_IF_ERROR(stream->Synchronize());
  {
    MutexLock lock(d->mu);
    d->idle.push_back(std::move(stream));
  }
  device_copies_ = copies;
  device_ = std::move(d);
  return Status::OK();
}

const std::vector<char>& Session::HeapNodes(int side) const {
  return side == 0 ? output_nodes_ : device_->no_heap_nodes;
}

Allocator& Session::SideAllocator(int side) const {
  return side == 0 ? *allocator_ : device_->backend->buffer_type().allocator();
}

Device Session::placement(int node) const {
  if (device_ != nullptr && device_->on_device[static_cast<size_t>(node)]) {
    return device_->backend->device();
  }
  return Device::Cpu();
}

int Session::WantedThreads(ThreadGovernor* governor) const {
  if (inherit_threads_) return omp_get_max_threads();
  return governor != nullptr ? governor->Choose() : intra_op_threads_;
}

void Session::SetThreads(int threads) const {
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

int Session::adapted_threads() const {
  return governors_ != nullptr ? governors_->chosen() : intra_op_threads_;
}

int64_t Session::thread_switches() const {
  return governors_ != nullptr ? governors_->switches() : 0;
}

MemoryPlanStats Session::memory_plan_stats() const {
  MemoryPlanStats stats;
  if (plans_ == nullptr) return stats;
  for (const std::shared_ptr<PlanEntry>& e : plans_->cache[0].Entries()) {
    MemoryPlanStats::Plan p;
    p.signature = e->key;
    p.arena_bytes = e->plan.arena_bytes;
    for (const std::shared_ptr<PlanEntry>& d : plans_->cache[1].Entries()) {
      if (d->key == e->key) p.device_arena_bytes = d->plan.arena_bytes;
    }
    p.unplanned_bytes = e->plan.unplanned_bytes;
    p.live_peak_bytes = e->plan.live_peak_bytes;
    p.planned_allocations = static_cast<int64_t>(e->plan.allocations.size());
    p.heap_nodes = std::count(e->plan.heap_nodes.begin(), e->plan.heap_nodes.end(), 1);
    {
      MutexLock lock(e->mu);
      p.idle_arenas = static_cast<int64_t>(e->idle.size());
    }
    stats.plans.push_back(std::move(p));
  }
  stats.recorded_runs = plans_->recorded_runs.load(std::memory_order_relaxed);
  stats.planned_runs = plans_->planned_runs.load(std::memory_order_relaxed);
  stats.unplanned_runs = plans_->unplanned_runs.load(std::memory_order_relaxed);
  stats.heap_fallbacks = plans_->heap_fallbacks.load(std::memory_order_relaxed);
  stats.evictions = plans_->cache[0].evictions();
  for (const NodeKernel& k : kernels_) {
    if (k.kernel != nullptr) AddSubgraphPlanStats(*k.kernel, stats);
  }
  return stats;
}

std::string_view Session::provider(int node) const {
  return kernels_[static_cast<size_t>(node)].def->provider;
}

std::string Session::implementation(int node) const {
  const Kernel* k = kernels_[static_cast<size_t>(node)].kernel.get();
  return k == nullptr ? std::string() : k->Implementation();
}

std::vector<std::pair<std::string, int>> Session::KernelNotes() const {
  std::vector<std::pair<std::string, int>> notes;
  for (const NodeKernel& k : kernels_) {
    if (k.kernel == nullptr) continue;
    const std::string_view note = k.kernel->Note();
    if (note.empty()) continue;
    auto it =
        std::find_if(notes.begin(), notes.end(), [&](const auto& n) { return n.first == note; });
    if (it == notes.end()) {
      notes.emplace_back(std::string(note), 1);
    } else {
      ++it->second;
    }
  }
  return notes;
}

namespace {

std::string NodeLabel(const Node& node) {
  return fmt::format("node '{}' ({})", node.name.empty() ? node.op_type : node.name, node.op_type);
}

// CheckTensorMatchesType; without `check_dims` only dtype and rank are compared.
Status CheckTensor(const Tensor& tensor, const ValueType& type, std::string_view what,
                   bool check_dims) {
  if (type.is_optional()) {  // an optional holding a tensor is that tensor at run time
    return type.elem ? CheckTensor(tensor, *type.elem, what, check_dims) : Status::OK();
  }
  if (type.is_sequence()) {
    return Status::InvalidArgument(fmt::format("{}: expected {}, got a tensor {}{}", what,
                                               type.ToString(), DataTypeName(tensor.dtype()),
                                               tensor.shape().ToString()));
  }
  if (type.dtype != DataType::kInvalid && tensor.dtype() != type.dtype) {
    return Status::InvalidArgument(fmt::format("{}: expected datatype {}, got {}", what,
                                               DataTypeName(type.dtype),
                                               DataTypeName(tensor.dtype())));
  }
  if (!type.has_shape) return Status::OK();
  if (static_cast<size_t>(tensor.rank()) != type.dims.size()) {
    return Status::InvalidArgument(fmt::format("{}: expected shape {} (rank {}), got {}", what,
                                               type.ToString(), type.dims.size(),
                                               tensor.shape().ToString()));
  }
  if (!check_dims) return Status::OK();
  for (int i = 0; i < tensor.rank(); ++i) {
    const Dim& d = type.dims[static_cast<size_t>(i)];
    if (d.known() && d.value != tensor.dim(i)) {
      return Status::InvalidArgument(fmt::format("{}: expected shape {}, got {} (dim {} differs)",
                                                 what, type.ToString(), tensor.shape().ToString(),
                                                 i));
    }
  }
  return Status::OK();
}

}  // namespace

Status CheckTensorMatchesType(const Tensor& tensor, const ValueType& type, std::string_view what) {
  return CheckTensor(tensor, type, what, /*check_dims=*/true);
}

Status CheckValueMatchesType(const RuntimeValue& value, const ValueType& type,
                             std::string_view what, bool check_dims) {
  if (!value.valid()) return Status::InvalidArgument(fmt::format("{}: no value given", what));
  if (type.IsUnknown()) return Status::OK();
  const auto mismatch = [&] {
    return Status::InvalidArgument(
        fmt::format("{}: expected {}, got {}", what, type.ToString(), value.Describe()));
  };
  switch (type.kind) {
    case TypeKind::kTensor:
      if (!value.is_tensor()) return mismatch();
      return CheckTensor(value.tensor().view(), type, what, check_dims);
    case TypeKind::kSequence: {
      if (!value.is_sequence()) return mismatch();
      if (type.elem == nullptr) return Status::OK();
      const TensorSequence& seq = value.sequence();
      if (type.elem->dtype != DataType::kInvalid && seq.elem_dtype() != type.elem->dtype) {
        return mismatch();
      }
      if (!check_dims) return Status::OK();
      for (int64_t i = 0; i < seq.size(); ++i) {
        KILN_RETURN_IF_ERROR(
            CheckTensor(seq.at(i).view(), *type.elem, fmt::format("{} element {}", what, i), true));
      }
      return Status::OK();
    }
    case TypeKind::kOptional:
      if (value.is_none() || type.elem == nullptr) return Status::OK();
      return CheckValueMatchesType(value, *type.elem, what, check_dims);
  }
  return mismatch();
}

// Every value of one run: tensors as views (with the storage of the ones nodes produced),
// sequences and nones as RuntimeValue pointers (with the storage of the ones nodes produced,
// allocated only for those, so a run over tensors pays two null pointers per value). A value is
// readable when its view is valid or its value pointer is set.
struct Session::Frame {
  explicit Frame(int num_values)
      : views(static_cast<size_t>(num_values)),
        owned(static_cast<size_t>(num_values)),
        values(static_cast<size_t>(num_values), nullptr),
        owned_values(static_cast<size_t>(num_values)) {}

  std::vector<Tensor> views;
  std::vector<OwnedTensor> owned;
  std::vector<const RuntimeValue*> values;
  std::vector<std::unique_ptr<RuntimeValue>> owned_values;
  // With a device (sized by Execute): a value's copy on the other side of the device edge (on
  // the device for a value made on the host, in host memory for one made on the device).
  std::vector<Tensor> alt_views;
  std::vector<OwnedTensor> alt_owned;
  // Host tensors released while a copy from them may still be pending on the stream.
  std::vector<OwnedTensor> keep_alive;
};

Status Session::CopyAcross(int id, bool to_device, Allocator& allocator, Frame& frame,
                           Stream& stream) const {
  const size_t slot = static_cast<size_t>(id);
  Tensor src = frame.views[slot];
  OwnedTensor contiguous;  // a strided caller's view, made contiguous first
  if (!src.is_contiguous()) {
    KILN_ASSIGN_OR_RETURN(contiguous, OwnedTensor::CopyOf(src));
    src = contiguous.view();
    frame.keep_alive.push_back(contiguous);
  }
  if (src.dtype() == DataType::kBytes) {
    return Status::Internal(fmt::format("value '{}' holds strings and cannot move to {}",
                                        graph_->value(id).name,
                                        to_device ? device_->backend->device().ToString() : "cpu"));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor dst,
                        OwnedTensor::AllocateForOverwrite(src.dtype(), src.shape(), allocator));
  stream.CopyAsync(dst.raw_data(), src.raw_data(), src.size_bytes());
  if (!to_device) KILN_RETURN_IF_ERROR(stream.Synchronize());  // the host reads it next
  frame.alt_owned[slot] = std::move(dst);
  frame.alt_views[slot] = frame.alt_owned[slot].view();
  return Status::OK();
}

Status Session::Execute(std::span<const Tensor> capture_tensors,
                        std::span<const RuntimeValue* const> capture_values, Frame& frame,
                        const RunState& state) const {
  const Graph& g = *graph_;
  if (capture_tensors.size() != captures_.size() || capture_values.size() > captures_.size()) {
    return Status::Internal(fmt::format("subgraph '{}' reads {} outer values, {} were given",
                                        g.name, captures_.size(), capture_tensors.size()));
  }
  for (int id = 0; id < g.num_values(); ++id) {
    const Value& v = g.value(id);
    if (v.is_constant()) frame.views[static_cast<size_t>(id)] = v.constant->view();
  }
  // With a device: the run's stream, and the device copies of the constants. The lease is
  // declared before the node buffers, so the stream's work is done before they go.
  DeviceState* dev_state = device_.get();
  StreamLease stream(dev_state);
  if (dev_state != nullptr) {
    KILN_RETURN_IF_ERROR(stream.Acquire());
    frame.alt_views.assign(static_cast<size_t>(g.num_values()), Tensor());
    frame.alt_owned.assign(static_cast<size_t>(g.num_values()), OwnedTensor());
    for (int id = 0; id < g.num_values(); ++id) {
      const OwnedTensor& c = dev_state->constants[static_cast<size_t>(id)];
      if (c.valid()) frame.alt_views[static_cast<size_t>(id)] = c.view();
    }
  }
  for (size_t i = 0; i < captures_.size(); ++i) {
    const size_t id = static_cast<size_t>(captures_[i]);
    frame.views[id] = capture_tensors[i];
    if (!capture_tensors[i].valid() && i < capture_values.size()) {
      frame.values[id] = capture_values[i];
    }
  }

  std::vector<Tensor> node_inputs;
  std::vector<const OwnedTensor*> node_owners;  // lent for ForwardInput (view ops)
  std::vector<const RuntimeValue*> node_values;
  std::vector<OwnedTensor> node_outputs;
  std::vector<RuntimeValue> node_value_outputs;
  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    const Kernel& kernel = *kernels_[static_cast<size_t>(n)].kernel;
    const bool takes_values = kernel.TakesNonTensorValues();
    const bool on_device = dev_state != nullptr && dev_state->on_device[static_cast<size_t>(n)];
    // The node's allocator, for its outputs and the copies of its inputs across the device edge:
    // its side's run allocator (planned or recording) unless the node bypasses it.
    const int side = on_device ? 1 : 0;
    Allocator* node_allocator = on_device ? &SideAllocator(1) : allocator_;
    RunAllocator* run_allocator = state.run_allocator[side];
    if (run_allocator != nullptr &&
        (state.heap_nodes[side] == nullptr || !(*state.heap_nodes[side])[static_cast<size_t>(n)])) {
      run_allocator->BeginNode(n);
      node_allocator = run_allocator;
    }
    const size_t num_inputs = node.inputs.size() + node.implicit_inputs.size();
    node_inputs.assign(num_inputs, Tensor());
    node_owners.assign(num_inputs, nullptr);
    if (takes_values) node_values.assign(num_inputs, nullptr);
    for (size_t i = 0; i < num_inputs; ++i) {
      const int id =
          i < node.inputs.size() ? node.inputs[i] : node.implicit_inputs[i - node.inputs.size()];
      if (id == kNoValue) continue;
      const Tensor& t = frame.views[static_cast<size_t>(id)];
      if (t.valid() && dev_state != nullptr &&
          (t.device() == dev_state->backend->device()) != on_device) {
        // Across the device edge: the value's copy on this node's side, made once.
        const size_t slot = static_cast<size_t>(id);
        if (!frame.alt_views[slot].valid()) {
          KILN_RETURN_IF_ERROR(CopyAcross(id, on_device, *node_allocator, frame, *stream)
                                   .WithContext(fmt::format("{}: input {}", NodeLabel(node), i)));
        }
        node_inputs[i] = frame.alt_views[slot];
        if (frame.alt_owned[slot].valid() && last_use_[slot] != g.num_nodes()) {
          node_owners[i] = &frame.alt_owned[slot];
        }
        continue;
      }
      if (t.valid()) {
        node_inputs[i] = t;
        // An intermediate of this run may be shared by a view op's output; a graph output is
        // not (the caller gets tensors that share no memory).
        const OwnedTensor& owner = frame.owned[static_cast<size_t>(id)];
        if (owner.valid() && last_use_[static_cast<size_t>(id)] != g.num_nodes()) {
          node_owners[i] = &owner;
        }
        continue;
      }
      const RuntimeValue* v = frame.values[static_cast<size_t>(id)];
      if (v == nullptr) {
        return Status::Internal(fmt::format("node '{}' reads value '{}' before it is computed",
                                            node.name, g.value(id).name));
      }
      if (!takes_values) {
        return Status::InvalidArgument(
            fmt::format("{}: input {} ('{}') is a {}, but the op takes tensors only",
                        NodeLabel(node), i, g.value(id).name, v->Describe()));
      }
      node_values[i] = v;
    }
    node_outputs.clear();
    node_outputs.resize(node.outputs.size());
    if (takes_values) {
      node_value_outputs.clear();
      node_value_outputs.resize(node.outputs.size());
    }
    KernelContext ctx(
        node_inputs,
        takes_values ? std::span<const RuntimeValue* const>(node_values)
                     : std::span<const RuntimeValue* const>(),
        node_outputs,
        takes_values ? std::span<RuntimeValue>(node_value_outputs) : std::span<RuntimeValue>(),
        *node_allocator);
    ctx.set_input_owners(node_owners);
    std::shared_ptr<Event> device_start;
    if (on_device) {
      ctx.set_stream(&*stream);
      dev_state->backend->PushRange(node.name.empty() ? node.op_type : node.name);
      if (state.profile != nullptr) device_start = (*stream).RecordTimed();
    }
    const int64_t start_ns = state.profile != nullptr ? ProfileNowNs() : 0;
    Status s = kernel.Compute(ctx);
    if (on_device) dev_state->backend->PopRange();
    if (state.profile != nullptr) {
      const int64_t end_ns = ProfileNowNs();
      NodeTiming timing;
      timing.node = n;
      timing.start_ns = start_ns;
      timing.duration_ns = end_ns - start_ns;
      timing.flops = s.ok() ? NodeFlops(node, node_inputs, node_outputs) : 0;
      timing.device = on_device ? dev_state->backend->device() : Device::Cpu();
      if (device_start != nullptr) {
        state.profile->device_spans.push_back(
            {state.profile->nodes.size(), device_start, (*stream).RecordTimed()});
      }
      state.profile->nodes.push_back(timing);
    }
    if (!s.ok()) return s.WithContext(NodeLabel(node));
    RecordingAllocator* recorder = state.recorder[side];
    if (recorder != nullptr && node_allocator == recorder) {
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        if (node_outputs[o].valid() && node.outputs[o] != kNoValue && !ctx.forwarded(o)) {
          recorder->MarkValue(node_outputs[o].raw_data(), node.outputs[o]);
        }
      }
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int id = node.outputs[o];
      if (id == kNoValue) continue;
      const size_t slot = static_cast<size_t>(id);
      if (node_outputs[o].valid()) {
        frame.owned[slot] = std::move(node_outputs[o]);
        frame.views[slot] = frame.owned[slot].view();
      } else if (takes_values && node_value_outputs[o].valid()) {
        frame.owned_values[slot] = std::make_unique<RuntimeValue>(std::move(node_value_outputs[o]));
        frame.values[slot] = frame.owned_values[slot].get();
      } else {
        return Status::Internal(
            fmt::format("node '{}' ({}) did not produce output {}", node.name, node.op_type, o));
      }
    }
    // Release intermediates whose last reader was this node.
    auto release = [&](int id, int last_use) {
      if (id == kNoValue || last_use_[static_cast<size_t>(id)] != last_use) return;
      const size_t slot = static_cast<size_t>(id);
      if (dev_state != nullptr) {
        // A copy from the host tensor may still be pending on the stream: keep it until the run
        // ends (the stream's work is done by then).
        if (frame.alt_owned[slot].valid() && frame.owned[slot].valid() &&
            frame.alt_views[slot].device() == dev_state->backend->device()) {
          frame.keep_alive.push_back(std::move(frame.owned[slot]));
        }
        frame.alt_owned[slot] = OwnedTensor();
        frame.alt_views[slot] = Tensor();
      }
      if (frame.owned[slot].valid()) {
        frame.owned[slot] = OwnedTensor();
        frame.views[slot] = Tensor();
      }
      if (frame.owned_values[slot] != nullptr) {
        frame.owned_values[slot].reset();
        frame.values[slot] = nullptr;
      }
    };
    for (int id : node.inputs) release(id, n);
    for (int id : node.implicit_inputs) release(id, n);
    // Outputs nobody reads (last_use_ -1; graph outputs have num_nodes) die here too.
    for (int id : node.outputs) release(id, -1);
  }
  if (dev_state != nullptr) {
    // Graph outputs made on the device go back to host memory.
    for (int id : g.outputs) {
      const size_t slot = static_cast<size_t>(id);
      if (!frame.views[slot].valid() ||
          frame.views[slot].device() != dev_state->backend->device()) {
        continue;
      }
      if (!frame.alt_views[slot].valid()) {
        // Outlives the run: the device's host buffer type (pinned where it has one).
        KILN_RETURN_IF_ERROR(CopyAcross(id, /*to_device=*/false,
                                        dev_state->backend->host_buffer_type().allocator(), frame,
                                        *stream));
      }
      frame.owned[slot] = std::move(frame.alt_owned[slot]);
      frame.views[slot] = frame.owned[slot].view();
      frame.alt_views[slot] = Tensor();
    }
    KILN_RETURN_IF_ERROR((*stream).Synchronize());
  }
  return Status::OK();
}

Result<std::vector<OwnedTensor>> Session::Run(std::span<const Tensor> inputs,
                                              std::span<const Tensor> captures) const {
  return RunTensors(inputs, captures, nullptr);
}

Result<std::vector<OwnedTensor>> Session::RunWithProfile(std::span<const Tensor> inputs,
                                                         RunProfile* profile) const {
  KILN_CHECK(profile != nullptr, "RunWithProfile: null profile");
  profile->nodes.clear();
  profile->nodes.reserve(static_cast<size_t>(graph_->num_nodes()));
  profile->device_spans.clear();
  profile->start_ns = ProfileNowNs();
  Result<std::vector<OwnedTensor>> result = RunTensors(inputs, {}, profile);
  profile->end_ns = ProfileNowNs();
  // The run's device work is done (its outputs are on the host): device times replace the
  // enqueue times where the device keeps timestamps.
  for (const RunProfile::DeviceSpan& span : profile->device_spans) {
    Result<int64_t> ns = span.end->NanosecondsSince(*span.start);
    if (!ns.ok() || span.timing >= profile->nodes.size()) continue;
    profile->nodes[span.timing].duration_ns = *ns;
    profile->nodes[span.timing].device_timed = true;
  }
  profile->device_spans.clear();
  return result;
}

Result<std::vector<OwnedTensor>> Session::RunTensors(std::span<const Tensor> inputs,
                                                     std::span<const Tensor> captures,
                                                     RunProfile* profile) const {
  // The input signature keys the memory plans and the thread governors.
  std::vector<int64_t> signature;
  if (plans_ != nullptr || governors_ != nullptr) signature = TensorSignature(inputs, captures);
  ThreadGovernor* governor = governors_ != nullptr ? &governors_->For(signature) : nullptr;
  // The run holds its threads from the process budget until it returns.
  const ThreadBudgetLease lease(inherit_threads_ ? nullptr : thread_budget_,
                                WantedThreads(governor));
  const int threads = lease.threads();
  SetThreads(threads);
  if (profile != nullptr) profile->threads = threads;
  const int64_t start_ns = governor != nullptr ? ProfileNowNs() : 0;
  const Graph& g = *graph_;
  if (inputs.size() != g.inputs.size()) {
    return Status::InvalidArgument(
        fmt::format("expected {} inputs, got {}", g.inputs.size(), inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.value(g.inputs[i]);
    KILN_RETURN_IF_ERROR(
        CheckTensor(inputs[i], v.type, fmt::format("input '{}'", v.name), check_input_shapes_));
  }
  // The scope outlives the frame: every intermediate is released before it settles.
  RunScope scope(*this, plans_ != nullptr ? std::move(signature) : std::vector<int64_t>(), profile);
  Frame frame(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) {
    frame.views[static_cast<size_t>(g.inputs[i])] = inputs[i];
  }
  KILN_RETURN_IF_ERROR(Execute(captures, {}, frame, scope.state()));

  std::vector<OwnedTensor> results;
  results.reserve(g.outputs.size());
  for (int id : g.outputs) {
    const size_t slot = static_cast<size_t>(id);
    OwnedTensor& t = frame.owned[slot];
    if (t.valid()) {
      results.push_back(t);  // shares the buffer; a value listed twice stays valid
      continue;
    }
    // An output that is a graph input or an initializer: copy it out.
    const Tensor& view = frame.views[slot];
    if (view.valid()) {
      KILN_ASSIGN_OR_RETURN(OwnedTensor copy, OwnedTensor::CopyOf(view));
      results.push_back(std::move(copy));
      continue;
    }
    if (frame.values[slot] != nullptr) {
      return Status::Unimplemented(fmt::format(
          "graph output '{}' is a {}, not a tensor; this Run returns tensors only (RunValues "
          "returns any value)",
          g.value(id).name, frame.values[slot]->Describe()));
    }
    return Status::Internal(fmt::format("graph output '{}' was not computed", g.value(id).name));
  }
  scope.set_succeeded();
  if (governor != nullptr) governor->Record(threads, ProfileNowNs() - start_ns);
  return results;
}

Result<std::vector<RuntimeValue>> Session::RunValues(
    std::span<const RuntimeValue> inputs, std::span<const Tensor> capture_tensors,
    std::span<const RuntimeValue* const> capture_values) const {
  std::vector<int64_t> signature;
  if (plans_ != nullptr || governors_ != nullptr) {
    signature = ValueSignature(inputs, capture_tensors, capture_values);
  }
  ThreadGovernor* governor = governors_ != nullptr ? &governors_->For(signature) : nullptr;
  const ThreadBudgetLease lease(inherit_threads_ ? nullptr : thread_budget_,
                                WantedThreads(governor));
  const int threads = lease.threads();
  SetThreads(threads);
  const int64_t start_ns = governor != nullptr ? ProfileNowNs() : 0;
  const Graph& g = *graph_;
  if (inputs.size() != g.inputs.size()) {
    return Status::InvalidArgument(
        fmt::format("expected {} inputs, got {}", g.inputs.size(), inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.value(g.inputs[i]);
    KILN_RETURN_IF_ERROR(CheckValueMatchesType(inputs[i], v.type, fmt::format("input '{}'", v.name),
                                               check_input_shapes_));
  }
  // The scope outlives the frame: every intermediate is released before it settles.
  RunScope scope(*this, plans_ != nullptr ? std::move(signature) : std::vector<int64_t>(), nullptr);
  Frame frame(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = g.inputs[i];
    if (inputs[i].is_tensor()) {
      frame.views[static_cast<size_t>(id)] = inputs[i].tensor().view();
    } else {
      frame.values[static_cast<size_t>(id)] = &inputs[i];
    }
  }
  KILN_RETURN_IF_ERROR(Execute(capture_tensors, capture_values, frame, scope.state()));

  std::vector<RuntimeValue> results;
  results.reserve(g.outputs.size());
  for (int id : g.outputs) {
    const size_t slot = static_cast<size_t>(id);
    if (frame.owned[slot].valid()) {
      results.emplace_back(frame.owned[slot]);
    } else if (frame.views[slot].valid()) {
      KILN_ASSIGN_OR_RETURN(OwnedTensor copy, OwnedTensor::CopyOf(frame.views[slot]));
      results.emplace_back(std::move(copy));
    } else if (frame.values[slot] != nullptr) {
      // Sequences hold OwnedTensors, so even an input passed through can be shared.
      results.push_back(*frame.values[slot]);
    } else {
      return Status::Internal(fmt::format("graph output '{}' was not computed", g.value(id).name));
    }
  }
  scope.set_succeeded();
  if (governor != nullptr) governor->Record(threads, ProfileNowNs() - start_ns);
  return results;
}

}  // namespace kiln
