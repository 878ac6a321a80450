// SPDX-License-Identifier: Apache-2.0
#pragma once
// Session: a graph made ready to run. Create() picks a kernel for every node (failing at load,
// with the op's name and opset, when one is missing) and builds the kernels; Run() executes the
// nodes in order on caller-provided inputs.
//
//   KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> g, ImportOnnxModel(path));
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::Create(g));
//   KILN_ASSIGN_OR_RETURN(std::vector<OwnedTensor> outs, s->Run(inputs));
//
// Two ways to run: Run over tensors (inputs are views, outputs OwnedTensors), for models whose
// inputs and outputs are all tensors, which is what the server feeds; and RunValues over
// RuntimeValues (tensor/runtime_value.h), for models with sequence or optional inputs or
// outputs. Inside, both execute the same way: tensors flow as views, sequences and nones as
// RuntimeValues, and every intermediate is released after its last reader.
//
// Memory: the first run of each input signature (the dtypes and shapes of the inputs, and of the
// captured values for a subgraph) records its allocations; a liveness-based plan then places
// every intermediate in one arena (runtime/memory_plan.h, runtime/arena.h), cached per
// signature. Later runs of that signature take an arena from the plan's pool (one per
// concurrent run) and allocate nothing for intermediates. Graph outputs never live in an arena.
// If / Loop / Scan bodies plan the same way in their own sessions. memory_plan_stats() reports
// the savings.
//
// Threads: kernels parallelize with OpenMP. Every Run / RunValues sets the calling thread's
// OpenMP thread count (omp_set_num_threads, a per-thread setting) to the run's width, so
// sessions run from different threads each keep their own budget; the setting stays in force
// on the calling thread after the run. The width is intra_op_threads(), or with
// SessionOptions::adapt_threads (the default) intra_op_threads() or 1, whichever the session's
// ThreadGovernor (runtime/thread_governor.h) measures faster: on a machine that other work
// shares, a model of many short nodes runs faster on one thread than on N threads that wait for
// one another at the end of every node. Results do not depend on the width (the kernels split
// outputs between threads, never a reduction; session_kernels_test checks it).
//
// Profiling: RunWithProfile times every node (runtime/profiler.h); other runs pay one branch per
// node for it.
//
// Thread safety: Run() and RunValues() are const and may be called from several threads at once;
// each call keeps its intermediate values to itself. The graph is shared read-only.

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "kernels/kernel.h"
#include "runtime/profiler.h"
#include "runtime/thread_budget.h"
#include "runtime/thread_governor.h"
#include "tensor/runtime_value.h"
#include "tensor/tensor.h"

namespace kiln {

class Backend;  // backend/backend.h
class Stream;

struct SessionOptions {
  // The preferred device (backend/backend.h; its backend must be registered): each node runs
  // there when the device has a kernel for its op, dtypes and shapes, else on the CPU. Copies are
  // made at device edges; the caller's inputs and the returned outputs are host memory.
  Device device = Device::Cpu();
  // Check input dims against the declared shapes (dtype and rank are always checked). Off for
  // subgraphs, whose loop-carried values may change shape between iterations.
  bool check_input_shapes = true;
  // Where node outputs are allocated; nullptr: HostAllocator(). Must outlive the session.
  // A run whose allocation fails returns the allocator's RESOURCE_EXHAUSTED.
  Allocator* allocator = nullptr;
  // Threads one run uses (OpenMP, set on the calling thread by every run); 0: the machine's
  // hardware threads.
  int intra_op_threads = 0;
  // Static memory plans per input signature (see above); off: every allocation goes to
  // `allocator` as it comes. Subgraph sessions (If / Loop bodies) plan when their parent does.
  bool memory_planning = true;
  // Plans kept (least recently used evicted first); at least 1.
  int memory_plan_cache_size = 8;
  // Restricts kernel selection to one provider ("ref": the reference kernels only, for tests
  // and numerics checks); empty: the best kernel of every node (KernelRegistry::Find).
  std::string kernel_provider;
  // Adapt each run's width between intra_op_threads and 1 to what the machine gives
  // (runtime/thread_governor.h; see "Threads" above). Off: every run is intra_op_threads wide.
  bool adapt_threads = true;
  // Runs keep the calling thread's OpenMP width instead of setting their own (subgraph
  // sessions: an If / Loop body runs as wide as the run of its node). Overrides the two above.
  bool inherit_threads = false;
  // The threads every session run of the process may use at once (runtime/thread_budget.h):
  // a run takes its width from it (its full width when that many threads are free, else one
  // thread, waiting while none is). Null: no limit. Not owned; must outlive the session.
  ThreadBudget* thread_budget = nullptr;
};

// What the memory planner did (Session::memory_plan_stats).
struct MemoryPlanStats {
  struct Plan {
    std::vector<int64_t> signature;  // input count, then per input: dtype, rank, dims
    size_t arena_bytes = 0;          // the planned peak of intermediates
    size_t device_arena_bytes = 0;   // the same on the session's device (0: none)
    size_t unplanned_bytes = 0;      // the sum of the planned intermediates' sizes
    size_t live_peak_bytes = 0;      // the most bytes live at once: the best any plan can do
    int64_t planned_allocations = 0;
    int64_t heap_nodes = 0;   // nodes left on the heap (graph outputs, ...)
    int64_t idle_arenas = 0;  // arenas in the pool now
  };
  std::vector<Plan> plans;     // most recently used first
  int64_t recorded_runs = 0;   // runs that recorded a new signature
  int64_t planned_runs = 0;    // runs that used a plan
  int64_t unplanned_runs = 0;  // runs not planned (non-tensor inputs, no memory for an arena)
  int64_t heap_fallbacks = 0;  // requests of planned runs that did not match the plan
  int64_t evictions = 0;
  // The runs of the If / Loop / Scan bodies (nested ones included), counted as above: a body
  // plans per signature of its inputs and captured values.
  int64_t subgraph_recorded_runs = 0;
  int64_t subgraph_planned_runs = 0;
  int64_t subgraph_unplanned_runs = 0;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<const Graph> graph,
                                                 const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Graph& graph() const { return *graph_; }

  // Runs the graph. `inputs` holds one tensor per graph input (graph().inputs order). Each is
  // checked against the declared type: dtype must match, rank and every known dim must match.
  // Returns one tensor per graph output (graph().outputs order); a graph output that turns out
  // to be a sequence or none is UNIMPLEMENTED naming the output (use RunValues).
  Result<std::vector<OwnedTensor>> Run(std::span<const Tensor> inputs) const {
    return Run(inputs, std::span<const Tensor>());
  }
  // For a subgraph (an If branch, a Loop or Scan body): `captures` holds one tensor per
  // captures() entry, the data of the values the subgraph reads from its enclosing scope.
  Result<std::vector<OwnedTensor>> Run(std::span<const Tensor> inputs,
                                       std::span<const Tensor> captures) const;

  // Runs the graph on values of any kind: one valid RuntimeValue per graph input, checked
  // against the declared type (a sequence's element type and, with check_input_shapes, every
  // element's shape against the declared element type; an optional type accepts none or what it
  // may hold; an unknown type accepts anything). Returns one value per graph output.
  Result<std::vector<RuntimeValue>> RunValues(std::span<const RuntimeValue> inputs) const {
    return RunValues(inputs, std::span<const Tensor>(), std::span<const RuntimeValue* const>());
  }
  // For a subgraph: capture i is `capture_tensors[i]` when that tensor is valid, else
  // `*capture_values[i]` (a sequence or none). `capture_values` may be shorter (null entries).
  Result<std::vector<RuntimeValue>> RunValues(
      std::span<const RuntimeValue> inputs, std::span<const Tensor> capture_tensors,
      std::span<const RuntimeValue* const> capture_values) const;
  // Run() that also times every node into `*profile` (cleared first). REQUIRES: profile != null.
  Result<std::vector<OwnedTensor>> RunWithProfile(std::span<const Tensor> inputs,
                                                  RunProfile* profile) const;

  // Threads every run uses (SessionOptions::intra_op_threads resolved; >= 1); with
  // adapt_threads, the widest a run may be.
  int intra_op_threads() const { return intra_op_threads_; }
  // With adapt_threads: the width runs use now (intra_op_threads() or 1) and the switches so
  // far; without: intra_op_threads() and 0.
  int adapted_threads() const;
  int64_t thread_switches() const;
  // A snapshot of the memory planner's plans and counters.
  MemoryPlanStats memory_plan_stats() const;

  // Value ids of the graph's captured values (Graph::Captures), in the order Run expects them.
  std::span<const int> captures() const { return captures_; }

  // Name of the kernel provider chosen for node i ("ref", ...), for profiles and tests.
  std::string_view provider(int node) const;
  // The preferred device (SessionOptions::device).
  Device device() const { return device_preferred_; }
  // The device node i runs on: SessionOptions::device or, where that has no kernel, the CPU.
  Device placement(int node) const;
  // Tensors one run copies between devices (at most): values read on another device than the
  // one they were made on (graph inputs and constants count as the CPU's; constants read on the
  // device are copied there once, at Create), and graph outputs made on the device.
  int64_t device_copies_per_run() const { return device_copies_; }
  // The implementations node i's kernel has run on so far (Kernel::Implementation: "oneDNN
  // jit:avx2", "kiln ref", ...; a control-flow node lists its subgraphs'); "" when the provider
  // says it all.
  std::string implementation(int node) const;

  // The distinct non-empty Kernel::Note()s of the graph's kernels, each with the number of nodes
  // whose kernel gave it, in node order of first appearance.
  std::vector<std::pair<std::string, int>> KernelNotes() const;

 private:
  struct NodeKernel;
  struct Frame;
  struct RunState;
  class RunScope;
  struct PlanState;
  struct DeviceState;
  class StreamLease;
  Session(std::shared_ptr<const Graph> graph, std::vector<NodeKernel> kernels);

  // Sets up device_ for the nodes Create placed on `backend`'s device (nothing when none is):
  // copies the constants they read to the device and counts the copies a run makes.
  Status PlaceOnDevice(Backend& backend);
  // Makes value `id`'s copy on the other side (the device when `to_device`, else host memory)
  // in frame.alt_*, from `allocator`: enqueued on `stream`; a copy to the host is waited for.
  Status CopyAcross(int id, bool to_device, Allocator& allocator, Frame& frame,
                    Stream& stream) const;
  // The allocator of one side of the memory plans: 0 the host's (allocator_), 1 the device's.
  Allocator& SideAllocator(int side) const;
  // The nodes a side's plan leaves to the side's allocator: on the host, the producers of graph
  // outputs (they outlive the run); on the device, none.
  const std::vector<char>& HeapNodes(int side) const;

  // Binds the captures into `frame`, runs every node, and leaves the graph outputs in it.
  Status Execute(std::span<const Tensor> capture_tensors,
                 std::span<const RuntimeValue* const> capture_values, Frame& frame,
                 const RunState& state) const;
  Result<std::vector<OwnedTensor>> RunTensors(std::span<const Tensor> inputs,
                                              std::span<const Tensor> captures,
                                              RunProfile* profile) const;
  // The width the next run asks for (`governor`'s choice, or intra_op_threads() without one,
  // or the calling thread's for an inheriting session), and setting the calling thread's width.
  int WantedThreads(ThreadGovernor* governor) const;
  void SetThreads(int threads) const;

  std::shared_ptr<const Graph> graph_;
  std::vector<NodeKernel> kernels_;
  // For every value, the index of the last node that reads it (-1 when none / graph output),
  // so intermediates are released as soon as they are dead.
  std::vector<int> last_use_;
  std::vector<int> captures_;
  bool check_input_shapes_ = true;
  Allocator* allocator_ = nullptr;  // never null after Create
  int intra_op_threads_ = 1;
  bool inherit_threads_ = false;
  ThreadBudget* thread_budget_ = nullptr;
  std::unique_ptr<ThreadGovernors> governors_;  // null: fixed width
  // 1 for nodes that produce a graph output: they allocate from allocator_ even in planned runs.
  std::vector<char> output_nodes_;
  std::unique_ptr<PlanState> plans_;  // null: memory planning off
  // Placement on a device other than the CPU: null when every node runs on the CPU.
  std::unique_ptr<DeviceState> device_;
  Device device_preferred_ = Device::Cpu();
  int64_t device_copies_ = 0;
};

// Checks `tensor` against a declared value type; the message names `what` ("input 'x'").
Status CheckTensorMatchesType(const Tensor& tensor, const ValueType& type, std::string_view what);

// Checks a runtime value against a declared type of any kind (see RunValues). Without
// `check_dims`, tensor dims are not compared (ranks still are) and sequence elements are checked
// for their dtype only. The message names `what`.
Status CheckValueMatchesType(const RuntimeValue& value, const ValueType& type,
                             std::string_view what, bool check_dims = true);

}  // namespace kiln
