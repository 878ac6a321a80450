// SPDX-License-Identifier: Apache-2.0
#pragma once
// Safe rollouts of model versions (docs/rollouts.md), from the config's kiln extension
// `rollout` (repo/model_config.proto KilnRollout):
//
//   * a weighted split of the requests that name no version over the model's versions, sticky
//     by a request header so that one user stays on one arm (RouteModel);
//   * shadow traffic: a share of the served requests is mirrored to a candidate version whose
//     answers are compared with the served ones (top-1 agreement, largest absolute difference)
//     and then discarded; a failure there never reaches the user;
//   * precision variants derived at load (FP32, FP16/BF16, INT8) served beside the version's
//     own precision: the "precision" request parameter picks one, and while the version is
//     overloaded (its recent queue time over overload_queue_us) best-effort requests move to the
//     fastest variant until the queue recovers.
//
// The model manager wraps every version of a model whose config has a rollout in a
// RolloutModel (the variants load with it); the protocols call RouteModel (through
// server/inference.h FindModel) instead of ModelManager::GetModel.
//
//   Result<std::shared_ptr<LoadedModel>> m = RouteModel(manager, "resnet", -1, headers);
//   (*m)->Infer(std::move(request), sink);   // split, shadow and variant applied
//
// Thread safety: RouteModel as ModelManager::GetModel; RolloutModel as LoadedModel.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/result.h"
#include "repo/model_config.pb.h"
#include "repo/served_model.h"

namespace kiln {

// The version of `name` that serves a request: `version` when it is not -1 (no split, no
// shadow); otherwise the split's arm for the request (the value of the sticky header when the
// request has it, a random draw when not), or the highest ready version when the model has no
// split. When the chosen arm is not ready, the highest ready version serves. With shadow traffic
// configured, a share of the requests gets a model that also mirrors them to the shadow
// version. Errors: ModelManager::GetModel's.
Result<std::shared_ptr<LoadedModel>> RouteModel(const ModelManager& manager, std::string_view name,
                                                int64_t version, const HeaderLookup& headers);

// The split's arm for a request: the arm whose cumulative weight range holds `slot` (0..99).
// A sticky key's slot is StickySlot(model, key); a request without one draws its slot at random.
// REQUIRES: a split whose weights sum to 100 (ValidateRolloutConfig).
int64_t ArmForSlot(const inference::KilnRollout& rollout, uint32_t slot);
// 0..99, the same for the same model and key on every server and run (FNV-1a of both).
uint32_t StickySlot(std::string_view model, std::string_view key);

// How far a shadow version's answer is from the served one, over the outputs both have with
// the same name, datatype and shape (numeric ones): the largest absolute difference, and per
// batch item of each output with more than one element per item whether the index of its
// largest element agrees. `comparable` is false when no output could be compared.
struct Agreement {
  bool comparable = false;
  double max_abs_diff = 0;
  uint64_t top1_rows = 0;
  uint64_t top1_agree = 0;
};
Agreement CompareAnswers(const InferResponse& served, const InferResponse& shadow, bool batched);

// One served version with a rollout: its precision variants and its rollout statistics.
class RolloutModel final : public ServedModel {
 public:
  struct Variant {
    std::string precision;  // optimization.precision's value ("": the version's own)
    std::shared_ptr<ServedModel> model;
  };
  // `primary`: the version loaded with its config. `variants`: the precision variants, each
  // loaded with the config's precision replaced. `best_effort`: the variant best-effort
  // requests move to under overload ("" or the own precision: they never move).
  RolloutModel(std::shared_ptr<ServedModel> primary, std::vector<Variant> variants,
               const inference::KilnRollout& rollout, std::string best_effort);
  ~RolloutModel() override;

  const std::string& name() const override { return primary_->name(); }
  int64_t version() const override { return primary_->version(); }
  const ModelSignature& signature() const override { return primary_->signature(); }
  bool generative() const override { return primary_->generative(); }
  const inference::ModelConfig* model_config() const override { return primary_->model_config(); }
  size_t PendingRequestCount() const override;
  double LoadDurationSeconds() const override { return primary_->LoadDurationSeconds(); }
  uint64_t WeightBytes() const override;

  // The variant the request asks for (INVALID_ARGUMENT naming the ones served when it has
  // none), or, for a best-effort request while the version is overloaded, the best-effort
  // variant; otherwise the version's own.
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override;
  void Generate(std::unique_ptr<GenerateRequest> request,
                std::shared_ptr<GenerationSink> sink) override {
    primary_->Generate(std::move(request), std::move(sink));
  }
  // The statistics of every variant together, with the rollout's (RolloutStatistics).
  ModelStatistics Statistics() const override;

  void Shutdown() override;
  void ResetStatistics() override;
  void SetLoadDuration(uint64_t ns) override { primary_->SetLoadDuration(ns); }

  // Infer, and mirror a copy of the request to `shadow` (another version of the model), whose
  // answer is compared with this one's when both are in and then dropped. `self`: this model
  // (the comparison keeps it alive until the shadow answers).
  void InferShadowed(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink,
                     std::shared_ptr<LoadedModel> shadow, std::shared_ptr<RolloutModel> self);
  // One mirrored request's outcome: the shadow version failed (or could not be reached), or
  // both answered and `agreement` compares them (null: nothing comparable, or the served
  // request failed).
  void RecordShadow(bool failed, const Agreement* agreement) KILN_EXCLUDES(shadow_mu_);
  // A request the split sent here.
  void CountRouted() { routed_.fetch_add(1, std::memory_order_relaxed); }
  // Whether best-effort requests are being moved now.
  bool Overloaded() const;
  const std::string& best_effort_precision() const { return best_effort_; }

 private:
  struct Counters {
    std::atomic<uint64_t> requests{0};
    std::atomic<uint64_t> overload_moves{0};
  };
  void ObserveQueue(uint64_t queue_ns);

  const std::shared_ptr<ServedModel> primary_;
  const std::vector<Variant> variants_;  // [0] is the primary ("own"), then the extra ones
  const inference::KilnRollout rollout_;
  const std::string best_effort_;
  size_t best_effort_index_ = 0;                     // in variants_; 0: never moved
  const uint64_t overload_ns_;                       // 0: overload routing off
  std::vector<std::unique_ptr<Counters>> counters_;  // one per variants_ entry
  std::atomic<uint64_t> routed_{0};
  // Exponentially weighted queue time of the own variant's recent answers.
  std::atomic<uint64_t> queue_ewma_ns_{0};

  mutable Mutex shadow_mu_;
  uint64_t shadow_requests_ KILN_GUARDED_BY(shadow_mu_) = 0;
  uint64_t shadow_failures_ KILN_GUARDED_BY(shadow_mu_) = 0;
  uint64_t shadow_compared_ KILN_GUARDED_BY(shadow_mu_) = 0;
  uint64_t shadow_top1_rows_ KILN_GUARDED_BY(shadow_mu_) = 0;
  uint64_t shadow_top1_agree_ KILN_GUARDED_BY(shadow_mu_) = 0;
  Histogram shadow_diff_ KILN_GUARDED_BY(shadow_mu_){AbsDiffBuckets()};
};

}  // namespace kiln
