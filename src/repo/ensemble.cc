// SPDX-License-Identifier: Apache-2.0
// Ensembles: config validation, the dataflow plan, and EnsembleModel.
//
// NOTE (design): one request of an ensemble is a `Run`: a slot per ensemble tensor, a count of
// missing inputs per step and the number of steps in flight, under the Run's own mutex (requests
// never share a lock except the per-step gates of max_inflight_requests). A step is started by
// handing its request to the composing model's LoadedModel::Infer with a sink that calls
// OnStepDone, usually on the composing model's instance thread, possibly on the calling thread
// (validation errors, inline execution). OnStepDone stores the outputs (the OwnedTensors of the
// composing response, shared, never copied), builds the requests of the steps they complete
// and starts them. Starting steps goes through a per-thread queue (Pump): a step that answers
// inline would otherwise start the next one from inside its own callback, nesting as deep as the
// pipeline is long (and, behind a gate, as long as the gate's queue). No thread ever waits: a
// step that finds its gate full is parked in the gate and started by the step that frees a slot.
//
// NOTE (versions): a request resolves every step's composing model once, when it arrives, and
// holds those versions until it finishes; the model manager can then unload a composing model
// (the request keeps the version it started with alive, as any holder of a LoadedModel does).
#include "repo/ensemble.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "base/check.h"
#include "base/logging.h"
#include "base/mutex.h"
#include "repo/loaded_model.h"
#include "repo/model_config.h"
#include "sched/clock.h"
#include "sched/stats.h"

namespace kiln {

namespace {

using inference::ModelConfig;
using inference::ModelEnsembling;

std::string StepLabel(const ModelConfig& config, int step) {
  return fmt::format("ensemble '{}' step {} (model '{}')", config.name(), step,
                     config.ensemble_scheduling().step(step).model_name());
}

// "step 0 (model 'a')", without the ensemble.
std::string ShortStepLabel(const ModelConfig& config, int step) {
  return fmt::format("step {} (model '{}')", step,
                     config.ensemble_scheduling().step(step).model_name());
}

// The entries of a protobuf map sorted by key (map iteration order is unspecified).
std::vector<std::pair<std::string, std::string>> SortedMap(
    const google::protobuf::Map<std::string, std::string>& map) {
  std::vector<std::pair<std::string, std::string>> out(map.begin(), map.end());
  std::sort(out.begin(), out.end());
  return out;
}

constexpr int kNoProducer = -2;  // EnsemblePlan::producer while building: nobody produces it
constexpr int kEnsembleInput = -1;

// Builds the plan and runs the structural checks.
Status BuildPlan(const ModelConfig& config, EnsemblePlan* plan) {
  const std::string ensemble = fmt::format("ensemble '{}'", config.name());
  std::map<std::string, int, std::less<>> index;
  const auto tensor = [&](const std::string& name) {
    auto [it, added] = index.try_emplace(name, static_cast<int>(plan->tensors.size()));
    if (added) {
      plan->tensors.push_back(name);
      plan->producer.push_back(kNoProducer);
      plan->consumers.emplace_back();
    }
    return it->second;
  };
  for (const inference::ModelInput& in : config.input()) {
    const int t = tensor(in.name());
    plan->producer[static_cast<size_t>(t)] = kEnsembleInput;
    plan->inputs.push_back(t);
  }
  const ModelEnsembling& sched = config.ensemble_scheduling();
  for (int i = 0; i < sched.step_size(); ++i) {
    const ModelEnsembling::Step& s = sched.step(i);
    EnsemblePlan::Step step;
    step.model = {s.model_name(), s.model_version()};
    for (const auto& [key, value] : SortedMap(s.output_map())) {
      const int t = tensor(value);
      const int p = plan->producer[static_cast<size_t>(t)];
      if (p == kEnsembleInput) {
        return Status::InvalidArgument(fmt::format(
            "{}: output '{}' goes to ensemble tensor '{}', which is an ensemble input (an ensemble "
            "tensor is produced once)",
            StepLabel(config, i), key, value));
      }
      if (p >= 0) {
        return Status::InvalidArgument(fmt::format(
            "{}: output '{}' goes to ensemble tensor '{}', which {} also produces (an ensemble "
            "tensor is produced once)",
            StepLabel(config, i), key, value,
            p == i ? std::string("another output of this step") : ShortStepLabel(config, p)));
      }
      plan->producer[static_cast<size_t>(t)] = i;
      step.outputs.push_back({key, t});
    }
    for (const auto& [key, value] : SortedMap(s.input_map())) {
      const int t = tensor(value);
      step.inputs.push_back({key, t});
      if (std::find(step.input_tensors.begin(), step.input_tensors.end(), t) ==
          step.input_tensors.end()) {
        step.input_tensors.push_back(t);
        plan->consumers[static_cast<size_t>(t)].push_back(i);
      }
    }
    plan->steps.push_back(std::move(step));
  }
  for (const inference::ModelOutput& out : config.output())
    plan->outputs.push_back(tensor(out.name()));

  // Every tensor a step reads is produced.
  for (int i = 0; i < static_cast<int>(plan->steps.size()); ++i) {
    for (const EnsemblePlan::Binding& b : plan->steps[static_cast<size_t>(i)].inputs) {
      if (plan->producer[static_cast<size_t>(b.tensor)] == kNoProducer) {
        return Status::InvalidArgument(fmt::format(
            "{}: input '{}' reads ensemble tensor '{}', which is neither an ensemble input nor an "
            "output of any step",
            StepLabel(config, i), b.model_tensor, plan->tensors[static_cast<size_t>(b.tensor)]));
      }
    }
  }
  for (int t : plan->outputs) {
    const int p = plan->producer[static_cast<size_t>(t)];
    if (p < 0) {
      return Status::InvalidArgument(
          fmt::format("{}: output '{}' is not produced by any step (no step's output_map names it)",
                      ensemble, plan->tensors[static_cast<size_t>(t)]));
    }
  }
  for (int t : plan->inputs) {
    if (plan->consumers[static_cast<size_t>(t)].empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: input '{}' is not read by any step (no step's input_map names it)",
                      ensemble, plan->tensors[static_cast<size_t>(t)]));
    }
  }
  for (int i = 0; i < static_cast<int>(plan->steps.size()); ++i) {
    for (const EnsemblePlan::Binding& b : plan->steps[static_cast<size_t>(i)].outputs) {
      const bool is_output =
          std::find(plan->outputs.begin(), plan->outputs.end(), b.tensor) != plan->outputs.end();
      if (!is_output && plan->consumers[static_cast<size_t>(b.tensor)].empty()) {
        return Status::InvalidArgument(fmt::format(
            "{}: output '{}' goes to ensemble tensor '{}', which no step reads and which is not "
            "an ensemble output",
            StepLabel(config, i), b.model_tensor, plan->tensors[static_cast<size_t>(b.tensor)]));
      }
    }
  }

  // Cycles: Kahn's order over the steps; what is left is on or behind a cycle.
  const size_t n = plan->steps.size();
  std::vector<int> waiting(n, 0);  // input tensors whose producing step has not been ordered
  for (size_t i = 0; i < n; ++i) {
    for (int t : plan->steps[i].input_tensors) {
      if (plan->producer[static_cast<size_t>(t)] >= 0) ++waiting[i];
    }
  }
  std::vector<int> ready;
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push_back(static_cast<int>(i));
  }
  std::vector<bool> ordered(n, false);
  while (!ready.empty()) {
    const int s = ready.back();
    ready.pop_back();
    ordered[static_cast<size_t>(s)] = true;
    for (const EnsemblePlan::Binding& b : plan->steps[static_cast<size_t>(s)].outputs) {
      for (int c : plan->consumers[static_cast<size_t>(b.tensor)]) {
        if (--waiting[static_cast<size_t>(c)] == 0) ready.push_back(c);
      }
    }
  }
  const auto left = std::find(ordered.begin(), ordered.end(), false);
  if (left != ordered.end()) {
    // Walk back from a step left over through producers that are left over too, until a step
    // repeats: that stretch is a cycle (each left-over step reads a left-over step's output).
    std::vector<std::pair<int, int>> walk;  // (step, tensor it reads from the next entry's step)
    std::map<int, size_t> seen;
    int s = static_cast<int>(left - ordered.begin());
    while (!seen.contains(s)) {
      seen[s] = walk.size();
      int from = -1;
      for (int t : plan->steps[static_cast<size_t>(s)].input_tensors) {
        const int p = plan->producer[static_cast<size_t>(t)];
        if (p >= 0 && !ordered[static_cast<size_t>(p)]) {
          from = t;
          break;
        }
      }
      KILN_CHECK(from >= 0, "ensemble cycle walk: a left-over step has no left-over producer");
      walk.emplace_back(s, from);
      s = plan->producer[static_cast<size_t>(from)];
    }
    std::vector<std::pair<int, int>> cycle(walk.begin() + static_cast<std::ptrdiff_t>(seen[s]),
                                           walk.end());
    std::reverse(cycle.begin(), cycle.end());  // producer first
    std::string path;
    for (const auto& [step, t] : cycle) {
      path += fmt::format("{} -> '{}' -> ",
                          ShortStepLabel(config, plan->producer[static_cast<size_t>(t)]),
                          plan->tensors[static_cast<size_t>(t)]);
    }
    path += ShortStepLabel(config, cycle.back().first);
    return Status::InvalidArgument(fmt::format("{}: its steps form a cycle: {}", ensemble, path));
  }
  return Status::OK();
}

// A tensor as one end of an ensemble edge declares it.
struct TensorDecl {
  std::string who;  // "input 'x' of step 1 (model 'b')", "the ensemble input 'IMAGE'"
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> dims;  // per item (no batch dim when `batching`)
  bool batching = false;

  std::vector<int64_t> Full() const {
    std::vector<int64_t> full;
    if (batching) full.push_back(-1);
    full.insert(full.end(), dims.begin(), dims.end());
    return full;
  }
  std::string ToString() const {
    return fmt::format("{} {}", DataTypeName(dtype), DimsToString(Full()));
  }
};

bool DimsMatch(std::span<const int64_t> a, std::span<const int64_t> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && a[i] != -1 && b[i] != -1) return false;
  }
  return true;
}

// The per-item dims an ensemble input or output has inside the ensemble: its reshape when it
// has one, else its dims.
template <typename TensorConfig>
std::vector<int64_t> EnsembleSideDims(const TensorConfig& t) {
  const auto& d = t.has_reshape() ? t.reshape().shape() : t.dims();
  return std::vector<int64_t>(d.begin(), d.end());
}

const TensorSpec* FindSpec(const std::vector<TensorSpec>& specs, std::string_view name) {
  for (const TensorSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string QuotedSpecNames(const std::vector<TensorSpec>& specs) {
  std::vector<std::string> names;
  for (const TensorSpec& s : specs) names.push_back("'" + s.name + "'");
  return fmt::format("[{}]", fmt::join(names, ", "));
}

}  // namespace

bool IsEnsembleConfig(const inference::ModelConfig& config) {
  return config.platform() == kEnsemblePlatform || config.has_ensemble_scheduling();
}

std::vector<ComposingModelRef> EnsembleComposingModels(const inference::ModelConfig& config) {
  std::vector<ComposingModelRef> out;
  for (const ModelEnsembling::Step& s : config.ensemble_scheduling().step()) {
    ComposingModelRef ref{s.model_name(), s.model_version()};
    if (std::find(out.begin(), out.end(), ref) == out.end()) out.push_back(std::move(ref));
  }
  return out;
}

void NormalizeEnsembleConfig(inference::ModelConfig* config) {
  if (!config->has_version_policy()) {
    config->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  }
}

Status ValidateEnsembleConfig(const inference::ModelConfig& config) {
  const std::string& name = config.name();
  if (config.platform() != kEnsemblePlatform) {
    return Status::InvalidArgument(
        fmt::format("model '{}': ensemble_scheduling is set, but the platform is '{}', not '{}'",
                    name, config.platform(), kEnsemblePlatform));
  }
  if (!config.has_ensemble_scheduling()) {
    return Status::InvalidArgument(
        fmt::format("ensemble '{}': platform '{}' needs ensemble_scheduling (the steps)", name,
                    kEnsemblePlatform));
  }
  const auto not_allowed = [&](std::string_view field, std::string_view why) {
    return Status::InvalidArgument(
        fmt::format("ensemble '{}': {} is not allowed on an ensemble ({})", name, field, why));
  };
  if (config.instance_group_size() > 0) {
    return not_allowed("instance_group", "scale its composing models instead");
  }
  if (config.has_optimization()) return not_allowed("optimization", "set it on composing models");
  if (config.model_warmup_size() > 0) {
    return not_allowed("model_warmup", "warm up its composing models instead");
  }
  for (const inference::ModelInput& in : config.input()) {
    if (in.has_padding()) return not_allowed("input padding", "set it on composing models");
  }
  for (const inference::ModelOutput& out : config.output()) {
    if (out.has_crop()) return not_allowed("output crop", "set it on composing models");
  }
  const ModelEnsembling& sched = config.ensemble_scheduling();
  if (sched.step_size() == 0) {
    return Status::InvalidArgument(
        fmt::format("ensemble '{}': ensemble_scheduling lists no step", name));
  }
  for (int i = 0; i < sched.step_size(); ++i) {
    const ModelEnsembling::Step& s = sched.step(i);
    if (s.model_name().empty()) {
      return Status::InvalidArgument(
          fmt::format("ensemble '{}' step {}: model_name is not set", name, i));
    }
    if (s.model_name() == name) {
      return Status::InvalidArgument(
          fmt::format("{}: a step cannot run the ensemble itself", StepLabel(config, i)));
    }
    if (s.model_version() < -1) {
      return Status::InvalidArgument(
          fmt::format("{}: model_version must be -1 (the latest) or a version, got {}",
                      StepLabel(config, i), s.model_version()));
    }
    if (s.input_map().empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}: input_map is empty (map every input of the model)", StepLabel(config, i)));
    }
    if (s.output_map().empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: output_map is empty (a step must produce an ensemble tensor)",
                      StepLabel(config, i)));
    }
    for (const auto& [key, value] : s.input_map()) {
      if (key.empty() || value.empty()) {
        return Status::InvalidArgument(
            fmt::format("{}: input_map has an empty name", StepLabel(config, i)));
      }
    }
    for (const auto& [key, value] : s.output_map()) {
      if (key.empty() || value.empty()) {
        return Status::InvalidArgument(
            fmt::format("{}: output_map has an empty name", StepLabel(config, i)));
      }
    }
  }
  EnsemblePlan plan;
  return BuildPlan(config, &plan);
}

Status ValidateEnsemble(const inference::ModelConfig& config,
                        std::span<const ModelSignature> step_signatures) {
  KILN_RETURN_IF_ERROR(ValidateEnsembleConfig(config));
  const ModelEnsembling& sched = config.ensemble_scheduling();
  KILN_CHECK(step_signatures.size() == static_cast<size_t>(sched.step_size()),
             "ValidateEnsemble: ", step_signatures.size(), " signatures for ", sched.step_size(),
             " steps");
  const EnsemblePlan plan = MakeEnsemblePlan(config);
  const bool ensemble_batches = config.max_batch_size() > 0;

  // Each step against its model's names and batch size.
  for (int i = 0; i < sched.step_size(); ++i) {
    const ModelSignature& sig = step_signatures[static_cast<size_t>(i)];
    const EnsemblePlan::Step& step = plan.steps[static_cast<size_t>(i)];
    if (sig.max_batch_size > 0 && sig.max_batch_size < config.max_batch_size()) {
      return Status::InvalidArgument(
          fmt::format("{}: the ensemble's max_batch_size {} exceeds the model's max_batch_size {}",
                      StepLabel(config, i), config.max_batch_size(), sig.max_batch_size));
    }
    for (const EnsemblePlan::Binding& b : step.inputs) {
      if (FindSpec(sig.inputs, b.model_tensor) == nullptr) {
        return Status::InvalidArgument(fmt::format(
            "{}: input_map names '{}', which is not an input of model '{}' (its "
            "inputs: {})",
            StepLabel(config, i), b.model_tensor, sig.name, QuotedSpecNames(sig.inputs)));
      }
    }
    for (const TensorSpec& in : sig.inputs) {
      const bool mapped = std::any_of(step.inputs.begin(), step.inputs.end(),
                                      [&](const auto& b) { return b.model_tensor == in.name; });
      if (!mapped) {
        return Status::InvalidArgument(
            fmt::format("{}: input '{}' of model '{}' is not mapped to any ensemble tensor "
                        "(input_map needs every input of the model)",
                        StepLabel(config, i), in.name, sig.name));
      }
    }
    for (const EnsemblePlan::Binding& b : step.outputs) {
      if (FindSpec(sig.outputs, b.model_tensor) == nullptr) {
        return Status::InvalidArgument(fmt::format(
            "{}: output_map names '{}', which is not an output of model '{}' (its "
            "outputs: {})",
            StepLabel(config, i), b.model_tensor, sig.name, QuotedSpecNames(sig.outputs)));
      }
    }
  }

  // Every edge: the producer's declaration against each consumer's.
  const auto producer_decl = [&](int t) {
    const int p = plan.producer[static_cast<size_t>(t)];
    TensorDecl d;
    if (p == kEnsembleInput) {
      const size_t pos = static_cast<size_t>(std::find(plan.inputs.begin(), plan.inputs.end(), t) -
                                             plan.inputs.begin());
      const inference::ModelInput& in = config.input(static_cast<int>(pos));
      d.who = fmt::format("the ensemble input '{}' declares", in.name());
      d.dtype = FromConfigDataType(in.data_type());
      d.dims = EnsembleSideDims(in);
      d.batching = ensemble_batches;
      return d;
    }
    const ModelSignature& sig = step_signatures[static_cast<size_t>(p)];
    for (const EnsemblePlan::Binding& b : plan.steps[static_cast<size_t>(p)].outputs) {
      if (b.tensor != t) continue;
      const TensorSpec* spec = FindSpec(sig.outputs, b.model_tensor);
      d.who = fmt::format("{} output '{}' produces", ShortStepLabel(config, p), b.model_tensor);
      d.dtype = spec->dtype;
      d.dims = spec->dims;
      d.batching = sig.max_batch_size > 0;
    }
    return d;
  };
  const auto check = [&](const std::string& where, int t, const TensorDecl& consumer,
                         const std::string& consumer_who) -> Status {
    const TensorDecl producer = producer_decl(t);
    const bool same_type = producer.dtype == consumer.dtype;
    const bool same_shape =
        DimsMatch(producer.dims, consumer.dims) || DimsMatch(producer.Full(), consumer.Full());
    if (same_type && same_shape) return Status::OK();
    return Status::InvalidArgument(
        fmt::format("{}: ensemble tensor '{}': {} {}, but {} {} ({} differ)", where,
                    plan.tensors[static_cast<size_t>(t)], consumer_who, consumer.ToString(),
                    producer.who, producer.ToString(), same_type ? "shapes" : "datatypes"));
  };
  for (int i = 0; i < sched.step_size(); ++i) {
    const ModelSignature& sig = step_signatures[static_cast<size_t>(i)];
    for (const EnsemblePlan::Binding& b : plan.steps[static_cast<size_t>(i)].inputs) {
      const TensorSpec* spec = FindSpec(sig.inputs, b.model_tensor);
      TensorDecl d{"", spec->dtype, spec->dims, sig.max_batch_size > 0};
      KILN_RETURN_IF_ERROR(check(StepLabel(config, i), b.tensor, d,
                                 fmt::format("input '{}' takes", b.model_tensor)));
    }
  }
  for (int o = 0; o < config.output_size(); ++o) {
    const inference::ModelOutput& out = config.output(o);
    TensorDecl d{"", FromConfigDataType(out.data_type()), EnsembleSideDims(out), ensemble_batches};
    KILN_RETURN_IF_ERROR(check(fmt::format("ensemble '{}'", config.name()),
                               plan.outputs[static_cast<size_t>(o)], d,
                               fmt::format("the ensemble output '{}' declares", out.name())));
  }
  return Status::OK();
}

EnsemblePlan MakeEnsemblePlan(const inference::ModelConfig& config) {
  EnsemblePlan plan;
  Status s = BuildPlan(config, &plan);
  KILN_CHECK(s.ok(), "MakeEnsemblePlan on an invalid ensemble config: ", s.ToString());
  return plan;
}

std::vector<bool> NeededSteps(const EnsemblePlan& plan, std::span<const int> outputs) {
  std::vector<bool> needed(plan.steps.size(), false);
  std::vector<int> todo(outputs.begin(), outputs.end());
  std::vector<bool> seen(plan.tensors.size(), false);
  while (!todo.empty()) {
    const int t = todo.back();
    todo.pop_back();
    if (seen[static_cast<size_t>(t)]) continue;
    seen[static_cast<size_t>(t)] = true;
    const int p = plan.producer[static_cast<size_t>(t)];
    if (p < 0 || needed[static_cast<size_t>(p)]) continue;
    needed[static_cast<size_t>(p)] = true;
    for (int in : plan.steps[static_cast<size_t>(p)].input_tensors) todo.push_back(in);
  }
  return needed;
}

std::vector<int64_t> AdaptShapeForConsumer(std::span<const int64_t> dims, bool consumer_batches,
                                           int64_t batch, std::span<const int64_t> actual) {
  std::vector<int64_t> out(actual.begin(), actual.end());
  if (consumer_batches == (batch != 0)) return out;
  if (consumer_batches) {
    // Produced without a batch dim: a tensor that is exactly one item becomes a batch of 1.
    if (DimsMatch(dims, actual)) out.insert(out.begin(), 1);
  } else if (batch == 1 && !DimsMatch(dims, actual) && !out.empty()) {
    // A batch of one for a model without a batch dim: drop it unless the model states it.
    out.erase(out.begin());
  }
  return out;
}

// --- EnsembleModel ---

namespace {

struct Run;

// A step request ready to go to its composing model.
struct StepCall {
  std::shared_ptr<Run> run;
  int step = 0;
  std::unique_ptr<InferRequest> request;
  bool holds_slot = false;    // has a place at its step's gate (max_inflight_requests)
  int64_t parked_at_ns = -1;  // when it started waiting at the gate; -1: it did not wait
};

// max_inflight_requests of one step: at most `limit` step requests in flight; the others wait
// here, first come first served.
class StepGate {
 public:
  explicit StepGate(uint32_t limit) : limit_(limit) {}

  // Takes a place (true), or parks `call` (moved from) and returns false.
  bool TryEnter(StepCall& call, int64_t now_ns) KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (inflight_ < limit_) {
      ++inflight_;
      return true;
    }
    call.parked_at_ns = now_ns;
    parked_.push_back(std::move(call));
    return false;
  }
  // A step request in flight finished: its place goes to the first parked call (returned, to be
  // started), or is freed.
  std::optional<StepCall> Release() KILN_EXCLUDES(mu_);
  // Removes and returns the parked calls whose request was cancelled.
  std::vector<StepCall> TakeCancelled() KILN_EXCLUDES(mu_);
  size_t parked() const KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return parked_.size();
  }

 private:
  mutable Mutex mu_;
  const uint32_t limit_;
  uint32_t inflight_ KILN_GUARDED_BY(mu_) = 0;
  std::deque<StepCall> parked_ KILN_GUARDED_BY(mu_);
};

}  // namespace

// One ensemble version: shared by the EnsembleModel and its requests in flight.
struct EnsembleModel::State {
  int64_t version = 0;
  inference::ModelConfig config;
  ModelSignature signature;
  EnsemblePlan plan;
  ComposingModelResolver resolver;
  const Clock* clock = nullptr;
  int64_t drain_timeout_ns = 0;
  StatsCollector stats;
  std::vector<std::unique_ptr<StepGate>> gates;  // one per step when max_inflight_requests > 0

  mutable Mutex mu;
  CondVar drained;  // with mu: inflight reached 0
  int64_t inflight KILN_GUARDED_BY(mu) = 0;
  bool shutting_down KILN_GUARDED_BY(mu) = false;

  // The composing versions ValidateEnsemble last accepted, per step.
  Mutex validated_mu;
  std::vector<std::weak_ptr<LoadedModel>> validated KILN_GUARDED_BY(validated_mu);

  const std::string& name() const { return config.name(); }
};

namespace {

using State = EnsembleModel::State;

// One ensemble request.
struct Run {
  std::shared_ptr<State> state;
  std::shared_ptr<ResponseSink> sink;
  std::string id;
  uint64_t priority = 0;
  uint64_t timeout_us = 0;
  std::shared_ptr<const Cancellation> cancellation;
  std::vector<std::shared_ptr<LoadedModel>> models;  // per step, resolved on arrival
  std::vector<bool> needed;                          // per step
  std::vector<int> requested;                        // ensemble output positions, response order
  int64_t start_ns = 0;
  uint64_t batch_size = 1;           // for the statistics
  std::atomic<int64_t> queue_ns{0};  // waits at max_inflight_requests gates
  // Sums over the successful step requests of what their responses report
  // (InferResponse::timing): the ensemble's own queue and compute times (see FinishRun).
  std::atomic<uint64_t> step_queue_ns{0};
  std::atomic<uint64_t> step_input_ns{0};
  std::atomic<uint64_t> step_infer_ns{0};
  std::atomic<uint64_t> step_output_ns{0};
  std::atomic<bool> watching_cancel{false};

  struct Slot {
    bool ready = false;
    OwnedTensor tensor;
    int64_t batch = 0;     // batch size of the request that produced it; 0: no batch dim
    int readers_left = 0;  // needed steps that have not taken it yet
    bool keep = false;     // a requested output
    bool wanted = false;   // read by a needed step or requested
  };
  Mutex mu;
  std::vector<Slot> slots KILN_GUARDED_BY(mu);
  std::vector<StepTiming> step_timings KILN_GUARDED_BY(mu);  // answered steps, for tracing
  std::vector<int> missing KILN_GUARDED_BY(mu);  // per step: input tensors not ready yet
  int running KILN_GUARDED_BY(mu) = 0;           // steps started (or parked), not finished
  Status error KILN_GUARDED_BY(mu);
  bool finished KILN_GUARDED_BY(mu) = false;
};

uint64_t ElapsedNs(int64_t from, int64_t to) {
  return to > from ? static_cast<uint64_t>(to - from) : 0;
}

FailureReason StepFailureReason(const Status& s) {
  switch (s.code()) {
    case StatusCode::kCancelled:
      return FailureReason::kCanceled;
    case StatusCode::kDeadlineExceeded:
      return FailureReason::kTimeout;
    case StatusCode::kResourceExhausted:
      return FailureReason::kQueueFull;
    case StatusCode::kInvalidArgument:
      return FailureReason::kInvalid;
    default:
      return FailureReason::kBackend;
  }
}

Status StepError(const State& st, int step, const Status& s) {
  return Status(s.code(), fmt::format("{}: {}", StepLabel(st.config, step), s.message()));
}

// The request of `step`, whose inputs are all ready. Takes each input tensor (sharing its
// buffer) and drops the run's reference to a tensor no other needed step or output will read.
Result<std::unique_ptr<InferRequest>> BuildStepRequestLocked(Run& run, int step)
    KILN_REQUIRES(run.mu) {
  const State& st = *run.state;
  const EnsemblePlan::Step& plan_step = st.plan.steps[static_cast<size_t>(step)];
  const ModelSignature& sig = run.models[static_cast<size_t>(step)]->signature();
  const bool batches = sig.max_batch_size > 0;
  auto request = std::make_unique<InferRequest>();
  request->id = run.id;
  request->priority = run.priority;
  request->timeout_us = run.timeout_us;
  request->cancellation = run.cancellation;
  for (const EnsemblePlan::Binding& b : plan_step.inputs) {
    const Run::Slot& slot = run.slots[static_cast<size_t>(b.tensor)];
    KILN_CHECK(slot.ready, "ensemble step started before its input was ready");
    OwnedTensor t = slot.tensor;  // shares the buffer
    const TensorSpec* spec = FindSpec(sig.inputs, b.model_tensor);
    if (spec != nullptr && t.valid()) {
      const std::vector<int64_t> shape =
          AdaptShapeForConsumer(spec->dims, batches, slot.batch, t.shape().dims());
      if (!std::equal(shape.begin(), shape.end(), t.shape().dims().begin(),
                      t.shape().dims().end())) {
        KILN_ASSIGN_OR_RETURN(Shape s, Shape::Create(shape));
        KILN_RETURN_IF_ERROR(t.Reshape(s));
      }
    }
    request->inputs.push_back({b.model_tensor, std::move(t)});
  }
  for (const EnsemblePlan::Binding& b : plan_step.outputs) {
    if (run.slots[static_cast<size_t>(b.tensor)].wanted)
      request->outputs.push_back({b.model_tensor});
  }
  for (int t : plan_step.input_tensors) {
    Run::Slot& slot = run.slots[static_cast<size_t>(t)];
    if (--slot.readers_left == 0 && !slot.keep) slot.tensor = OwnedTensor();
  }
  return request;
}

// Marks `tensor` ready and collects the needed steps it completes.
// `r` is *run.
void TensorReadyLocked(const std::shared_ptr<Run>& run, Run& r, int tensor,
                       std::vector<StepCall>* ready) KILN_REQUIRES(r.mu) {
  const State& st = *r.state;
  for (int c : st.plan.consumers[static_cast<size_t>(tensor)]) {
    if (!r.needed[static_cast<size_t>(c)]) continue;
    if (--r.missing[static_cast<size_t>(c)] > 0) continue;
    Result<std::unique_ptr<InferRequest>> request = BuildStepRequestLocked(r, c);
    if (!request.ok()) {
      if (r.error.ok()) r.error = StepError(st, c, request.status());
      return;
    }
    ready->push_back({run, c, std::move(request).value()});
  }
}

void Launch(StepCall call);

// Starts `call` now, or after the calls this thread is starting already (see the NOTE above).
void Pump(StepCall call) {
  static thread_local std::deque<StepCall> queue;
  static thread_local bool active = false;
  queue.push_back(std::move(call));
  if (active) return;
  active = true;
  while (!queue.empty()) {
    StepCall next = std::move(queue.front());
    queue.pop_front();
    Launch(std::move(next));
  }
  active = false;
}

void FinishRun(const std::shared_ptr<Run>& run);

void OnStepDone(const std::shared_ptr<Run>& run, int step, Result<InferResponse> result,
                bool holds_slot) {
  Run& r = *run;
  State& st = *r.state;
  if (holds_slot) {
    if (std::optional<StepCall> next = st.gates[static_cast<size_t>(step)]->Release()) {
      Pump(std::move(*next));
    }
  }
  std::vector<StepCall> ready;
  bool finish = false;
  {
    MutexLock lock(r.mu);
    --r.running;
    if (!result.ok()) {
      if (r.error.ok()) r.error = StepError(st, step, result.status());
    } else if (r.error.ok()) {
      InferResponse& response = *result;
      const bool batches = r.models[static_cast<size_t>(step)]->signature().max_batch_size > 0;
      for (const EnsemblePlan::Binding& b : st.plan.steps[static_cast<size_t>(step)].outputs) {
        Run::Slot& slot = r.slots[static_cast<size_t>(b.tensor)];
        if (!slot.wanted) continue;
        auto out = std::find_if(response.outputs.begin(), response.outputs.end(),
                                [&](const InferOutput& o) { return o.name == b.model_tensor; });
        if (out == response.outputs.end() || !out->tensor.valid()) {
          r.error = StepError(st, step,
                              Status::Internal(fmt::format(
                                  "the model's response has no output '{}'", b.model_tensor)));
          break;
        }
        slot.tensor = std::move(out->tensor);  // the composing model's buffer, handed on
        slot.batch = batches && slot.tensor.shape().rank() > 0 ? slot.tensor.shape().dim(0) : 0;
        slot.ready = true;
        TensorReadyLocked(run, r, b.tensor, &ready);
        if (!r.error.ok()) break;
      }
    }
    if (!r.error.ok()) ready.clear();
    r.running += static_cast<int>(ready.size());
    if (r.running == 0 && !r.finished) {
      r.finished = true;
      finish = true;
    }
  }
  for (StepCall& c : ready) Pump(std::move(c));
  if (finish) FinishRun(run);
}

// The sink of a step request handed to its composing model at `handoff_ns`: records the step's
// statistics and adds the response's timing to the run's sums, then goes on (OnStepDone).
class StepSink final : public ResponseSink {
 public:
  StepSink(std::shared_ptr<Run> run, int step, bool holds_slot, int64_t handoff_ns)
      : run_(std::move(run)), step_(step), holds_slot_(holds_slot), handoff_ns_(handoff_ns) {}
  void Send(InferResponse) override {}  // a composing model streams nothing to an ensemble
  void Finish(Result<InferResponse> result) override {
    Run& r = *run_;
    State& st = *r.state;
    const uint64_t total = ElapsedNs(handoff_ns_, st.clock->NowNs());
    const auto step = static_cast<size_t>(step_);
    {
      StepTiming timing;
      timing.step = step_;
      timing.model = st.plan.steps[step].model.name;
      timing.start_offset_ns = ElapsedNs(r.start_ns, handoff_ns_);
      timing.duration_ns = total;
      timing.ok = result.ok();
      if (result.ok()) timing.timing = result->timing;
      MutexLock lock(r.mu);
      r.step_timings.push_back(std::move(timing));
    }
    if (result.ok()) {
      const RequestTiming& t = result->timing;
      st.stats.RecordStepSuccess(step, total, t.queue_ns, t.compute_input_ns, t.compute_infer_ns,
                                 t.compute_output_ns);
      r.step_queue_ns.fetch_add(t.queue_ns, std::memory_order_relaxed);
      r.step_input_ns.fetch_add(t.compute_input_ns, std::memory_order_relaxed);
      r.step_infer_ns.fetch_add(t.compute_infer_ns, std::memory_order_relaxed);
      r.step_output_ns.fetch_add(t.compute_output_ns, std::memory_order_relaxed);
    } else {
      st.stats.RecordStepFailure(step, total);
    }
    OnStepDone(run_, step_, std::move(result), holds_slot_);
  }

 private:
  const std::shared_ptr<Run> run_;
  const int step_;
  const bool holds_slot_;
  const int64_t handoff_ns_;
};

// Lets the parked calls of a cancelled request leave their gates at once.
void WatchCancellation(const std::shared_ptr<Run>& run) {
  if (run->cancellation == nullptr || run->watching_cancel.exchange(true)) return;
  std::weak_ptr<State> weak = run->state;
  run->cancellation->OnCancel([weak] {
    std::shared_ptr<State> st = weak.lock();
    if (st == nullptr) return;
    for (const std::unique_ptr<StepGate>& gate : st->gates) {
      for (StepCall& c : gate->TakeCancelled()) {
        OnStepDone(c.run, c.step,
                   Status::Cancelled("the request was cancelled while the step waited for "
                                     "max_inflight_requests"),
                   /*holds_slot=*/false);
      }
    }
  });
}

void Launch(StepCall call) {
  std::shared_ptr<Run> run = call.run;
  Run& r = *run;
  State& st = *r.state;
  const int step = call.step;
  bool failed;
  {
    MutexLock lock(r.mu);
    failed = !r.error.ok();
  }
  if (failed) {  // another step of the request failed since this one was ready: not run
    OnStepDone(run, step, Status::Aborted("not run: another step failed"), call.holds_slot);
    return;
  }
  StepGate* gate = st.gates.empty() ? nullptr : st.gates[static_cast<size_t>(step)].get();
  if (gate != nullptr && !call.holds_slot) {
    if (!gate->TryEnter(call, st.clock->NowNs())) {
      WatchCancellation(run);
      return;  // parked; started by the step that frees a place
    }
    call.holds_slot = true;
  }
  const int64_t handoff = st.clock->NowNs();
  if (call.parked_at_ns >= 0) {
    run->queue_ns.fetch_add(static_cast<int64_t>(ElapsedNs(call.parked_at_ns, handoff)),
                            std::memory_order_relaxed);
  }
  const std::shared_ptr<LoadedModel>& model = run->models[static_cast<size_t>(step)];
  model->Infer(std::move(call.request),
               std::make_shared<StepSink>(run, step, call.holds_slot, handoff));
}

// Maps the per-item part of `tensor`'s shape from pattern `from` to `to` (an ensemble tensor's
// dims <-> reshape), keeping the batch dim when `batching`.
Status ReshapeItems(OwnedTensor* tensor, bool batching, std::span<const int64_t> from,
                    std::span<const int64_t> to) {
  std::span<const int64_t> all = tensor->shape().dims();
  const size_t skip = batching && !all.empty() ? 1 : 0;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> item, MapReshape(from, all.subspan(skip), to));
  std::vector<int64_t> dims(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(skip));
  dims.insert(dims.end(), item.begin(), item.end());
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
  return tensor->Reshape(shape);
}

void FinishRun(const std::shared_ptr<Run>& run) {
  Run& r = *run;
  State& st = *r.state;
  Status failure;
  InferResponse response;
  {
    MutexLock lock(r.mu);
    failure = r.error;
    response.step_timings = std::move(r.step_timings);
    response.model_name = st.name();
    response.model_version = st.version;
    response.id = r.id;
    const bool batching = st.config.max_batch_size() > 0;
    for (size_t i = 0; i < r.requested.size() && failure.ok(); ++i) {
      const int pos = r.requested[i];
      const inference::ModelOutput& out = st.config.output(pos);
      const Run::Slot& slot =
          r.slots[static_cast<size_t>(st.plan.outputs[static_cast<size_t>(pos)])];
      if (!slot.ready || !slot.tensor.valid()) {
        failure = Status::Internal(
            fmt::format("ensemble '{}': no step produced output '{}'", st.name(), out.name()));
        break;
      }
      OwnedTensor t = slot.tensor;
      const std::vector<int64_t> shape =
          AdaptShapeForConsumer(EnsembleSideDims(out), batching, slot.batch, t.shape().dims());
      Status s;
      if (!std::equal(shape.begin(), shape.end(), t.shape().dims().begin(),
                      t.shape().dims().end())) {
        Result<Shape> reshaped = Shape::Create(shape);
        s = reshaped.ok() ? t.Reshape(*reshaped) : reshaped.status();
      }
      if (s.ok() && out.has_reshape()) {
        s = ReshapeItems(&t, batching, AsSpan(out.reshape().shape()), AsSpan(out.dims()));
      }
      if (!s.ok()) {
        failure =
            Status::Internal(fmt::format("ensemble '{}': output '{}' has shape {}: {}", st.name(),
                                         out.name(), t.shape().ToString(), s.message()));
        break;
      }
      response.outputs.push_back({out.name(), std::move(t)});
    }
    r.slots.clear();
  }
  const uint64_t total = ElapsedNs(r.start_ns, st.clock->NowNs());
  if (failure.ok()) {
    // The reference server's accounting: the compute times are the sums of the steps'; the
    // queue time adds the waits at max_inflight_requests to the steps' queue times.
    RequestTiming& t = response.timing;
    t.queue_ns = static_cast<uint64_t>(r.queue_ns.load(std::memory_order_relaxed)) +
                 r.step_queue_ns.load(std::memory_order_relaxed);
    t.compute_input_ns = r.step_input_ns.load(std::memory_order_relaxed);
    t.compute_infer_ns = r.step_infer_ns.load(std::memory_order_relaxed);
    t.compute_output_ns = r.step_output_ns.load(std::memory_order_relaxed);
    st.stats.RecordExecution(r.batch_size, t.compute_input_ns, t.compute_infer_ns,
                             t.compute_output_ns);
    st.stats.RecordSuccess(r.batch_size, t.queue_ns, t.compute_input_ns, t.compute_infer_ns,
                           t.compute_output_ns, total, WallClockMs());
  } else {
    st.stats.RecordFailure(StepFailureReason(failure), total, WallClockMs());
  }
  r.models.clear();  // the composing versions may go now
  if (failure.ok()) {
    r.sink->Finish(std::move(response));
  } else {
    r.sink->Finish(std::move(failure));
  }
  MutexLock lock(st.mu);
  if (--st.inflight == 0) st.drained.NotifyAll();
}

std::optional<StepCall> StepGate::Release() {
  MutexLock lock(mu_);
  if (!parked_.empty()) {
    StepCall next = std::move(parked_.front());
    parked_.pop_front();
    next.holds_slot = true;  // this finished call's place
    return next;
  }
  if (inflight_ > 0) --inflight_;
  return std::nullopt;
}

std::vector<StepCall> StepGate::TakeCancelled() {
  std::vector<StepCall> out;
  MutexLock lock(mu_);
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->request != nullptr && it->request->cancelled()) {
      out.push_back(std::move(*it));
      it = parked_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

bool SameModel(const std::weak_ptr<LoadedModel>& a, const std::shared_ptr<LoadedModel>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

}  // namespace

Result<std::shared_ptr<EnsembleModel>> EnsembleModel::Create(int64_t version,
                                                             const inference::ModelConfig& config,
                                                             ComposingModelResolver resolver,
                                                             const InstanceOptions& options) {
  KILN_CHECK(resolver != nullptr, "EnsembleModel::Create: no resolver");
  KILN_RETURN_IF_ERROR(ValidateEnsembleConfig(config));
  auto st = std::make_shared<State>();
  st->version = version;
  st->config = config;
  st->signature = MakeModelSignature(config);
  st->plan = MakeEnsemblePlan(config);
  st->resolver = std::move(resolver);
  st->clock = options.clock != nullptr ? options.clock : &SteadyClock();
  st->drain_timeout_ns = options.drain_timeout_ns;

  std::vector<ModelSignature> signatures;
  std::vector<std::weak_ptr<LoadedModel>> validated;
  for (int i = 0; i < config.ensemble_scheduling().step_size(); ++i) {
    const ComposingModelRef& ref = st->plan.steps[static_cast<size_t>(i)].model;
    Result<std::shared_ptr<LoadedModel>> model = st->resolver(ref.name, ref.version);
    if (!model.ok()) {
      return Status::Unavailable(fmt::format("{}: composing model not available: {}",
                                             StepLabel(config, i), model.status().message()));
    }
    signatures.push_back((*model)->signature());
    validated.push_back(*model);
  }
  KILN_RETURN_IF_ERROR(ValidateEnsemble(config, signatures));
  {
    MutexLock lock(st->validated_mu);
    st->validated = std::move(validated);
  }
  std::vector<EnsembleStepStatistics> steps(st->plan.steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].step = static_cast<int>(i);
    steps[i].model = st->plan.steps[i].model.name;
    steps[i].model_version = st->plan.steps[i].model.version;
  }
  st->stats.SetEnsembleSteps(std::move(steps));
  const uint32_t limit = config.ensemble_scheduling().max_inflight_requests();
  if (limit > 0) {
    for (size_t i = 0; i < st->plan.steps.size(); ++i) {
      st->gates.push_back(std::make_unique<StepGate>(limit));
    }
  }
  return std::shared_ptr<EnsembleModel>(new EnsembleModel(std::move(st)));
}

EnsembleModel::EnsembleModel(std::shared_ptr<State> state) : state_(std::move(state)) {}

EnsembleModel::~EnsembleModel() {
  // No wait here: the last reference may go on a thread that answers one of its requests.
  MutexLock lock(state_->mu);
  state_->shutting_down = true;
}

const std::string& EnsembleModel::name() const { return state_->name(); }
int64_t EnsembleModel::version() const { return state_->version; }
const ModelSignature& EnsembleModel::signature() const { return state_->signature; }
const inference::ModelConfig* EnsembleModel::model_config() const { return &state_->config; }

void EnsembleModel::Infer(std::unique_ptr<InferRequest> request,
                          std::shared_ptr<ResponseSink> sink) {
  // The requests hold the state; nothing of `this` is touched once a step may have started.
  const std::shared_ptr<State> st = state_;
  const int64_t start = st->clock->NowNs();
  const auto refuse = [&](FailureReason reason, Status s) {
    st->stats.RecordFailure(reason, ElapsedNs(start, st->clock->NowNs()), WallClockMs());
    sink->Finish(std::move(s));
  };
  const auto leave = [&] {
    MutexLock lock(st->mu);
    if (--st->inflight == 0) st->drained.NotifyAll();
  };
  {
    MutexLock lock(st->mu);
    if (!st->shutting_down) ++st->inflight;
    if (st->shutting_down) {
      lock.Unlock();
      return refuse(FailureReason::kShuttingDown,
                    Status::Unavailable(fmt::format("ensemble '{}' version {} is unloading",
                                                    st->name(), st->version)));
    }
  }
  if (request == nullptr) {
    refuse(FailureReason::kInvalid, Status::InvalidArgument("null inference request"));
    return leave();
  }
  if (Status valid = ValidateInferRequest(st->signature, *request); !valid.ok()) {
    refuse(FailureReason::kInvalid, std::move(valid));
    return leave();
  }
  if (request->cancelled()) {
    refuse(FailureReason::kCanceled, Status::Cancelled("the request was cancelled"));
    return leave();
  }

  auto run = std::make_shared<Run>();
  run->state = st;
  run->start_ns = start;
  const EnsemblePlan& plan = st->plan;
  const size_t num_steps = plan.steps.size();
  // Every step's composing model, once per request (the same version for all its steps).
  run->models.resize(num_steps);
  for (size_t i = 0; i < num_steps; ++i) {
    const ComposingModelRef& ref = plan.steps[i].model;
    for (size_t j = 0; j < i && run->models[i] == nullptr; ++j) {
      if (plan.steps[j].model == ref) run->models[i] = run->models[j];
    }
    if (run->models[i] != nullptr) continue;
    Result<std::shared_ptr<LoadedModel>> model = st->resolver(ref.name, ref.version);
    if (!model.ok()) {
      refuse(FailureReason::kOther,
             Status::Unavailable(fmt::format("{}: composing model not available: {}",
                                             StepLabel(st->config, static_cast<int>(i)),
                                             model.status().message())));
      return leave();
    }
    run->models[i] = std::move(model).value();
  }
  bool changed = false;
  {
    MutexLock lock(st->validated_mu);
    for (size_t i = 0; i < num_steps; ++i) changed |= !SameModel(st->validated[i], run->models[i]);
  }
  if (changed) {
    std::vector<ModelSignature> signatures;
    for (const auto& m : run->models) signatures.push_back(m->signature());
    if (Status v = ValidateEnsemble(st->config, signatures); !v.ok()) {
      refuse(FailureReason::kOther,
             Status::Unavailable(fmt::format(
                 "composing models changed since the ensemble was loaded and no longer fit it: {}",
                 v.message())));
      return leave();
    }
    MutexLock lock(st->validated_mu);
    for (size_t i = 0; i < num_steps; ++i) st->validated[i] = run->models[i];
  }

  run->sink = std::move(sink);
  run->id = request->id;
  run->priority = request->priority;
  run->timeout_us = request->timeout_us;
  run->cancellation = request->cancellation;
  const inference::ModelConfig& config = st->config;
  const bool batching = config.max_batch_size() > 0;
  if (request->outputs.empty()) {
    for (int o = 0; o < config.output_size(); ++o) run->requested.push_back(o);
  } else {
    for (const RequestedOutput& wanted : request->outputs) {
      for (int o = 0; o < config.output_size(); ++o) {
        if (config.output(o).name() == wanted.name) run->requested.push_back(o);
      }
    }
  }
  std::vector<int> requested_tensors;
  for (int pos : run->requested)
    requested_tensors.push_back(plan.outputs[static_cast<size_t>(pos)]);
  run->needed = NeededSteps(plan, requested_tensors);

  std::vector<StepCall> ready;
  Run& r = *run;
  {
    MutexLock lock(r.mu);
    r.slots.resize(plan.tensors.size());
    for (size_t t = 0; t < plan.tensors.size(); ++t) {
      Run::Slot& slot = r.slots[t];
      for (int c : plan.consumers[t]) slot.readers_left += r.needed[static_cast<size_t>(c)] ? 1 : 0;
      slot.keep = std::find(requested_tensors.begin(), requested_tensors.end(),
                            static_cast<int>(t)) != requested_tensors.end();
      slot.wanted = slot.keep || slot.readers_left > 0;
    }
    for (InferInput& in : request->inputs) {
      const auto pos = std::find_if(config.input().begin(), config.input().end(),
                                    [&](const auto& c) { return c.name() == in.name; }) -
                       config.input().begin();
      const inference::ModelInput& spec = config.input(static_cast<int>(pos));
      Run::Slot& slot = r.slots[static_cast<size_t>(plan.inputs[static_cast<size_t>(pos)])];
      if (batching) {
        slot.batch = in.tensor.shape().dim(0);
        r.batch_size = static_cast<uint64_t>(slot.batch);
      }
      slot.tensor = std::move(in.tensor);
      if (spec.has_reshape()) {
        Status s = ReshapeItems(&slot.tensor, batching, AsSpan(spec.dims()),
                                AsSpan(spec.reshape().shape()));
        if (!s.ok()) {
          r.error = Status::InvalidArgument(fmt::format("input '{}': {}", in.name, s.message()));
          break;
        }
      }
      slot.ready = true;
      if (!slot.wanted) slot.tensor = OwnedTensor();
    }
    r.missing.assign(num_steps, 0);
    for (size_t s = 0; s < num_steps; ++s) {
      if (!r.needed[s]) continue;
      for (int t : plan.steps[s].input_tensors) {
        r.missing[s] += r.slots[static_cast<size_t>(t)].ready ? 0 : 1;
      }
    }
    for (size_t s = 0; s < num_steps && r.error.ok(); ++s) {
      if (!r.needed[s] || r.missing[s] != 0) continue;
      Result<std::unique_ptr<InferRequest>> built = BuildStepRequestLocked(r, static_cast<int>(s));
      if (!built.ok()) {
        r.error = StepError(*st, static_cast<int>(s), built.status());
        break;
      }
      ready.push_back({run, static_cast<int>(s), std::move(built).value()});
    }
    if (!r.error.ok()) ready.clear();
    r.running = static_cast<int>(ready.size());
    if (ready.empty()) r.finished = true;
  }
  request.reset();
  if (ready.empty()) return FinishRun(run);  // a bad input, or an error building the first steps
  for (StepCall& c : ready) Pump(std::move(c));
}

ModelStatistics EnsembleModel::Statistics() const { return state_->stats.Snapshot(); }

void EnsembleModel::ResetStatistics() { state_->stats.Reset(); }

size_t EnsembleModel::PendingRequestCount() const {
  size_t n = 0;
  for (const auto& gate : state_->gates) n += gate->parked();
  return n;
}

double EnsembleModel::LoadDurationSeconds() const {
  return static_cast<double>(load_duration_ns_.load(std::memory_order_relaxed)) / 1e9;
}

void EnsembleModel::SetLoadDuration(uint64_t ns) {
  load_duration_ns_.store(ns, std::memory_order_relaxed);
}

int64_t EnsembleModel::InflightRequests() const {
  MutexLock lock(state_->mu);
  return state_->inflight;
}

void EnsembleModel::Shutdown() {
  State& st = *state_;
  MutexLock lock(st.mu);
  st.shutting_down = true;
  if (st.drain_timeout_ns <= 0) return;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::nanoseconds(st.drain_timeout_ns);
  while (st.inflight > 0) {
    if (!st.drained.WaitUntil(st.mu, deadline) && st.inflight > 0 &&
        std::chrono::steady_clock::now() >= deadline) {
      KILN_LOG_WARN("ensemble '{}' version {}: {} request(s) still running after the drain limit",
                    st.name(), st.version, st.inflight);
      return;
    }
  }
}

}  // namespace kiln
