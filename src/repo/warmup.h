// SPDX-License-Identifier: Apache-2.0
#pragma once
// Model warmup (config `model_warmup`, KSERVE-V2.md section 3.10): the requests a model version
// runs before the manager reports it READY, so the first client request does not pay for cold
// caches and first-touch allocations. A sample that cannot be built or that fails makes the
// version fail to load, with the sample named in the reason.
//
//   KILN_ASSIGN_OR_RETURN(std::vector<WarmupSample> samples,
//                         BuildWarmupSamples(config, repo / "my_model"));
//   KILN_RETURN_IF_ERROR(RunWarmup(*model, samples));   // each sample `runs` times, in order
//
// Sample rules (the reference server's):
//   * batch_size: 1..max_batch_size for a batching model (the inputs get a leading batch dim of
//     that size); 0 or 1 for a model with max_batch_size 0 (no batch dim).
//   * inputs: every model input exactly once (a key that is not a model input is an error);
//     data_type equal to the model input's; dims without the batch dim, every dim >= 0.
//   * data, per batch item (the item is repeated batch_size times): zero_data (zeros, empty
//     strings), random_data (floats in [0,1), integers in [0,100), random booleans; empty
//     strings for TYPE_STRING), or input_data_file: raw little-endian row-major bytes read from
//     <model_dir>/warmup/<file> (TYPE_STRING: each element a 4-byte little-endian length and
//     then its bytes). The file must hold exactly one item; its name must be a relative path
//     inside warmup/ (no "..").
//   * count: runs of the sample; 0 means 1.
// A sample's inputs are limited to kMaxWarmupSampleBytes in memory.
//
// Thread safety: BuildWarmupSamples is reentrant. RunWarmup blocks the calling thread until
// every run answered; REQUIRES that it is not called from a callback of `model`.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"
#include "repo/model_config.pb.h"
#include "repo/model_manager.h"
#include "sched/request.h"

namespace kiln {

inline constexpr size_t kMaxWarmupSampleBytes = size_t{1} << 30;

struct WarmupSample {
  std::string name;
  int runs = 1;
  InferRequest request;  // inputs with the whole-batch shape; outputs empty (all of them)
};

// The samples of config.model_warmup(), in order. INVALID_ARGUMENT naming the model, the sample
// and the input for a sample that breaks the rules above; NOT_FOUND / UNAVAILABLE naming the
// path when a data file is missing or unreadable. REQUIRES: `config` is complete (inputs
// known) and normalized.
Result<std::vector<WarmupSample>> BuildWarmupSamples(const inference::ModelConfig& config,
                                                     const std::filesystem::path& model_dir);

// Sends each sample `runs` times through model.Infer, one request at a time, and waits for each
// answer. The first failure is returned as "warmup sample '<name>' failed: <error>" with the
// error's code.
Status RunWarmup(LoadedModel& model, const std::vector<WarmupSample>& samples);

}  // namespace kiln
