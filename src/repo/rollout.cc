// SPDX-License-Identifier: Apache-2.0
// Weighted version splits, shadow traffic and precision variants (see rollout.h).
#include "repo/rollout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <random>

#include "base/logging.h"
#include "tensor/classification.h"

namespace kiln {
namespace {

// This thread's generator for the split's and the shadow's draws (no lock, no shared state).
std::minstd_rand& ThreadRandom() {
  thread_local std::minstd_rand rng(std::random_device{}());
  return rng;
}

uint32_t RandomSlot() {
  return static_cast<uint32_t>(std::uniform_int_distribution<int>(0, 99)(ThreadRandom()));
}

double RandomUnit() { return std::uniform_real_distribution<double>(0, 1)(ThreadRandom()); }

// The own variant's precision answers a request that asks for the precision the version runs
// in: its config's, or fp32 for a version whose weights are held as stored ("").
bool SamePrecision(std::string_view own, std::string_view asked) {
  return own == asked || (own.empty() && asked == "fp32");
}

std::string VariantName(const std::string& precision) {
  return precision.empty() ? "as stored" : precision;
}

// A copy of `request` for the shadow version: its inputs copied (the original may borrow the
// client's message, which goes away with the served answer), no cancellation, no trace.
Result<std::unique_ptr<InferRequest>> CopyForShadow(const InferRequest& request) {
  auto copy = std::make_unique<InferRequest>();
  copy->id = request.id;
  copy->outputs = request.outputs;
  copy->priority = request.priority;
  copy->timeout_us = request.timeout_us;
  copy->inputs.reserve(request.inputs.size());
  for (const InferInput& in : request.inputs) {
    KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::CopyOf(in.tensor.view()));
    copy->inputs.push_back({in.name, std::move(t)});
  }
  return copy;
}

// The two answers of one mirrored request; compares them when both are in, then records the
// outcome on the serving version.
class ShadowComparison {
 public:
  ShadowComparison(std::shared_ptr<RolloutModel> owner, bool batched)
      : owner_(std::move(owner)), batched_(batched) {}

  // The served answer (copied: the original goes on to the client). Partial answers are not
  // compared.
  void Served(const Result<InferResponse>& result) KILN_EXCLUDES(mu_) {
    std::optional<InferResponse> copy;
    if (result.ok()) {
      copy.emplace();
      for (const InferOutput& out : result->outputs) {
        Result<OwnedTensor> t = OwnedTensor::CopyOf(out.tensor.view());
        if (!t.ok()) {
          copy.reset();
          break;
        }
        copy->outputs.push_back({out.name, std::move(t).value()});
      }
    }
    MutexLock lock(mu_);
    served_done_ = true;
    served_ = std::move(copy);
    FinishIfDone();
  }

  void Shadow(Result<InferResponse> result) KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    shadow_done_ = true;
    shadow_failed_ = !result.ok();
    if (result.ok()) shadow_ = std::move(result).value();
    FinishIfDone();
  }

 private:
  void FinishIfDone() KILN_REQUIRES(mu_) {
    if (!served_done_ || !shadow_done_) return;
    if (shadow_failed_) {
      owner_->RecordShadow(true, nullptr);
    } else if (served_.has_value() && shadow_.has_value()) {
      const Agreement a = CompareAnswers(*served_, *shadow_, batched_);
      owner_->RecordShadow(false, a.comparable ? &a : nullptr);
    } else {
      owner_->RecordShadow(false, nullptr);  // the served request failed: nothing to compare
    }
    served_.reset();
    shadow_.reset();
  }

  const std::shared_ptr<RolloutModel> owner_;
  const bool batched_;
  Mutex mu_;
  bool served_done_ KILN_GUARDED_BY(mu_) = false;
  bool shadow_done_ KILN_GUARDED_BY(mu_) = false;
  bool shadow_failed_ KILN_GUARDED_BY(mu_) = false;
  std::optional<InferResponse> served_ KILN_GUARDED_BY(mu_);
  std::optional<InferResponse> shadow_ KILN_GUARDED_BY(mu_);
};

// Between the serving version and the client: hands a copy of the final answer to the
// comparison, then the answer itself to the client, at once.
class ServedTap final : public ResponseSink {
 public:
  ServedTap(std::shared_ptr<ResponseSink> out, std::shared_ptr<ShadowComparison> comparison)
      : out_(std::move(out)), comparison_(std::move(comparison)) {}
  void Send(InferResponse partial) override { out_->Send(std::move(partial)); }
  void Finish(Result<InferResponse> result) override {
    comparison_->Served(result);
    out_->Finish(std::move(result));
  }
  size_t backlog() const override { return out_->backlog(); }
  bool streaming() const override { return out_->streaming(); }

 private:
  std::shared_ptr<ResponseSink> out_;
  std::shared_ptr<ShadowComparison> comparison_;
};

// Watches the queue time of the own variant's answers (the overload signal).
class QueueTap final : public ResponseSink {
 public:
  QueueTap(std::shared_ptr<ResponseSink> out, std::function<void(uint64_t)> observe)
      : out_(std::move(out)), observe_(std::move(observe)) {}
  void Send(InferResponse partial) override { out_->Send(std::move(partial)); }
  void Finish(Result<InferResponse> result) override {
    if (result.ok()) observe_(result->timing.queue_ns);
    out_->Finish(std::move(result));
  }
  size_t backlog() const override { return out_->backlog(); }
  bool streaming() const override { return out_->streaming(); }

 private:
  std::shared_ptr<ResponseSink> out_;
  std::function<void(uint64_t)> observe_;
};

// One request's view of a serving version that mirrors it to the shadow version.
class ShadowedModel final : public LoadedModel {
 public:
  ShadowedModel(std::shared_ptr<RolloutModel> served, std::shared_ptr<LoadedModel> shadow)
      : served_(std::move(served)), shadow_(std::move(shadow)) {}
  const std::string& name() const override { return served_->name(); }
  int64_t version() const override { return served_->version(); }
  const ModelSignature& signature() const override { return served_->signature(); }
  bool generative() const override { return served_->generative(); }
  const inference::ModelConfig* model_config() const override { return served_->model_config(); }
  size_t PendingRequestCount() const override { return served_->PendingRequestCount(); }
  ModelStatistics Statistics() const override { return served_->Statistics(); }
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override {
    served_->InferShadowed(std::move(request), std::move(sink), shadow_, served_);
  }

 private:
  std::shared_ptr<RolloutModel> served_;
  std::shared_ptr<LoadedModel> shadow_;
};

}  // namespace

uint32_t StickySlot(std::string_view model, std::string_view key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bits
  const auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix(model);
  mix(std::string_view("\0", 1));
  mix(key);
  return static_cast<uint32_t>(h % 100);
}

int64_t ArmForSlot(const inference::KilnRollout& rollout, uint32_t slot) {
  uint32_t upper = 0;
  for (const inference::KilnRollout::Arm& arm : rollout.split()) {
    upper += arm.weight();
    if (slot < upper) return arm.version();
  }
  return rollout.split().empty() ? -1 : rollout.split().rbegin()->version();
}

Result<std::shared_ptr<LoadedModel>> RouteModel(const ModelManager& manager, std::string_view name,
                                                int64_t version, const HeaderLookup& headers) {
  if (version != -1) return manager.GetModel(name, version);
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> served, manager.GetModel(name, -1));
  const inference::ModelConfig* config = served->model_config();
  if (config == nullptr || !config->has_rollout()) return served;
  const inference::KilnRollout& rollout = config->rollout();
  if (rollout.split_size() > 0) {
    std::string_view key;
    if (!rollout.sticky_header().empty() && headers) key = headers(rollout.sticky_header());
    const uint32_t slot = key.empty() ? RandomSlot() : StickySlot(name, key);
    const int64_t arm = ArmForSlot(rollout, slot);
    if (arm != served->version()) {
      // An arm that is not ready (loading, failed, outside the version policy): the highest
      // ready version serves its share.
      Result<std::shared_ptr<LoadedModel>> m = manager.GetModel(name, arm);
      if (m.ok()) served = std::move(m).value();
    }
    if (auto* r = dynamic_cast<RolloutModel*>(served.get())) r->CountRouted();
  }
  if (!rollout.has_shadow() || served->version() == rollout.shadow().version()) return served;
  if (RandomUnit() >= rollout.shadow().fraction()) return served;
  std::shared_ptr<RolloutModel> owner = std::dynamic_pointer_cast<RolloutModel>(served);
  if (owner == nullptr || owner->generative()) return served;
  Result<std::shared_ptr<LoadedModel>> shadow = manager.GetModel(name, rollout.shadow().version());
  if (!shadow.ok()) {
    owner->RecordShadow(true, nullptr);  // mirrored nowhere: the shadow version is not ready
    return served;
  }
  return std::shared_ptr<LoadedModel>(
      std::make_shared<ShadowedModel>(std::move(owner), std::move(shadow).value()));
}

Agreement CompareAnswers(const InferResponse& served, const InferResponse& shadow, bool batched) {
  Agreement a;
  for (const InferOutput& out : served.outputs) {
    const InferOutput* other = nullptr;
    for (const InferOutput& o : shadow.outputs) {
      if (o.name == out.name) other = &o;
    }
    if (other == nullptr) continue;
    const Tensor& x = out.tensor.view();
    const Tensor& y = other->tensor.view();
    Result<double> diff = MaxAbsDifference(x, y);
    if (!diff.ok()) continue;  // BYTES, or answers of another datatype or shape
    a.comparable = true;
    a.max_abs_diff = std::max(a.max_abs_diff, *diff);
    const bool item_batched = batched && x.rank() > 0;
    const int64_t items = item_batched ? x.dim(0) : 1;
    if (items == 0 || x.num_elements() / items < 2) continue;
    Result<TopK> tx = TopKIndices(x, 1, item_batched);
    Result<TopK> ty = TopKIndices(y, 1, item_batched);
    if (!tx.ok() || !ty.ok()) continue;
    for (size_t i = 0; i < tx->indices.size(); ++i) {
      ++a.top1_rows;
      if (tx->indices[i] == ty->indices[i]) ++a.top1_agree;
    }
  }
  return a;
}

RolloutModel::RolloutModel(std::shared_ptr<ServedModel> primary, std::vector<Variant> variants,
                           const inference::KilnRollout& rollout, std::string best_effort)
    : primary_(primary),
      variants_([&] {
        std::vector<Variant> all;
        all.push_back({primary->model_config() != nullptr
                           ? primary->model_config()->optimization().precision()
                           : std::string(),
                       primary});
        for (Variant& v : variants) all.push_back(std::move(v));
        return all;
      }()),
      rollout_(rollout),
      best_effort_(std::move(best_effort)),
      overload_ns_(rollout.overload_queue_us() * 1000) {
  for (size_t i = 1; i < variants_.size(); ++i) {
    if (variants_[i].precision == best_effort_) best_effort_index_ = i;
  }
  for (size_t i = 0; i < variants_.size(); ++i) counters_.push_back(std::make_unique<Counters>());
}

RolloutModel::~RolloutModel() = default;

size_t RolloutModel::PendingRequestCount() const {
  size_t n = 0;
  for (const Variant& v : variants_) n += v.model->PendingRequestCount();
  return n;
}

uint64_t RolloutModel::WeightBytes() const {
  uint64_t n = 0;
  for (const Variant& v : variants_) n += v.model->WeightBytes();
  return n;
}

bool RolloutModel::Overloaded() const {
  return overload_ns_ > 0 && best_effort_index_ != 0 &&
         queue_ewma_ns_.load(std::memory_order_relaxed) > overload_ns_ &&
         primary_->PendingRequestCount() > 0;
}

void RolloutModel::ObserveQueue(uint64_t queue_ns) {
  // An exponentially weighted mean over about the last 8 answers; concurrent updates may lose
  // one observation, which the next one makes good.
  const uint64_t old = queue_ewma_ns_.load(std::memory_order_relaxed);
  const int64_t step = (static_cast<int64_t>(queue_ns) - static_cast<int64_t>(old)) / 8;
  queue_ewma_ns_.store(static_cast<uint64_t>(static_cast<int64_t>(old) + step),
                       std::memory_order_relaxed);
}

void RolloutModel::Infer(std::unique_ptr<InferRequest> request,
                         std::shared_ptr<ResponseSink> sink) {
  size_t index = 0;
  if (!request->precision.empty()) {
    index = variants_.size();
    for (size_t i = 0; i < variants_.size(); ++i) {
      if (variants_[i].precision == request->precision) index = i;
    }
    if (index == variants_.size() && SamePrecision(variants_[0].precision, request->precision)) {
      index = 0;
    }
    if (index == variants_.size()) {
      std::vector<std::string> served;
      for (const Variant& v : variants_) served.push_back(VariantName(v.precision));
      sink->Finish(Status::InvalidArgument(
          fmt::format("model '{}' version {} serves no '{}' precision variant (it serves: {})",
                      name(), version(), request->precision, fmt::join(served, ", "))));
      return;
    }
  } else if (request->service_class == "best_effort" && Overloaded()) {
    index = best_effort_index_;
    counters_[index]->overload_moves.fetch_add(1, std::memory_order_relaxed);
  }
  counters_[index]->requests.fetch_add(1, std::memory_order_relaxed);
  if (index == 0 && overload_ns_ > 0) {
    // The model outlives its requests (the manager drains them before freeing it).
    sink = std::make_shared<QueueTap>(std::move(sink),
                                      [this](uint64_t queue_ns) { ObserveQueue(queue_ns); });
  }
  variants_[index].model->Infer(std::move(request), std::move(sink));
}

void RolloutModel::InferShadowed(std::unique_ptr<InferRequest> request,
                                 std::shared_ptr<ResponseSink> sink,
                                 std::shared_ptr<LoadedModel> shadow,
                                 std::shared_ptr<RolloutModel> self) {
  Result<std::unique_ptr<InferRequest>> copy = CopyForShadow(*request);
  if (!copy.ok()) {
    RecordShadow(true, nullptr);
    Infer(std::move(request), std::move(sink));
    return;
  }
  {
    MutexLock lock(shadow_mu_);
    ++shadow_requests_;
  }
  auto comparison =
      std::make_shared<ShadowComparison>(std::move(self), signature().max_batch_size > 0);
  Infer(std::move(request), std::make_shared<ServedTap>(std::move(sink), comparison));
  // The shadow runs after the served request is queued, so it never delays it.
  shadow->Infer(std::move(copy).value(), [comparison](Result<InferResponse> result) {
    comparison->Shadow(std::move(result));
  });
}

void RolloutModel::RecordShadow(bool failed, const Agreement* agreement) {
  MutexLock lock(shadow_mu_);
  if (failed) {
    ++shadow_failures_;
    return;
  }
  if (agreement == nullptr) return;
  ++shadow_compared_;
  shadow_top1_rows_ += agreement->top1_rows;
  shadow_top1_agree_ += agreement->top1_agree;
  shadow_diff_.Observe(agreement->max_abs_diff);
}

ModelStatistics RolloutModel::Statistics() const {
  ModelStatistics stats = primary_->Statistics();
  for (size_t i = 1; i < variants_.size(); ++i) {
    MergeTensorStatistics(variants_[i].model->Statistics(), &stats);
  }
  RolloutStatistics& r = stats.rollout;
  r.present = true;
  r.routed = routed_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < variants_.size(); ++i) {
    r.variants.push_back({variants_[i].precision,
                          counters_[i]->requests.load(std::memory_order_relaxed),
                          counters_[i]->overload_moves.load(std::memory_order_relaxed)});
  }
  r.overloaded = Overloaded();
  if (rollout_.has_shadow()) r.shadow_version = rollout_.shadow().version();
  MutexLock lock(shadow_mu_);
  r.shadow_requests = shadow_requests_;
  r.shadow_failures = shadow_failures_;
  r.shadow_compared = shadow_compared_;
  r.shadow_top1_rows = shadow_top1_rows_;
  r.shadow_top1_agree = shadow_top1_agree_;
  r.shadow_max_abs_diff = shadow_diff_;
  return stats;
}

void RolloutModel::Shutdown() {
  for (const Variant& v : variants_) v.model->Shutdown();
}

void RolloutModel::ResetStatistics() {
  for (const Variant& v : variants_) v.model->ResetStatistics();
  for (const std::unique_ptr<Counters>& c : counters_) {
    c->requests.store(0, std::memory_order_relaxed);
    c->overload_moves.store(0, std::memory_order_relaxed);
  }
  routed_.store(0, std::memory_order_relaxed);
  MutexLock lock(shadow_mu_);
  shadow_requests_ = shadow_failures_ = shadow_compared_ = 0;
  shadow_top1_rows_ = shadow_top1_agree_ = 0;
  shadow_diff_ = Histogram(AbsDiffBuckets());
}

}  // namespace kiln
