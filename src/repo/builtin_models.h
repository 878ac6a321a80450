// SPDX-License-Identifier: Apache-2.0
#pragma once
// Models of kiln's built-in processing backends, whose graph comes from the config (and files in
// the model directory) rather than from a model file: kiln_image (repo/image_model.h). They are
// served like any tensor model (dynamic batching, instances, statistics, response cache) and
// used alone or as ensemble steps. The model manager asks IsBuiltinModelConfig, then builds the
// graph once per load with BuildBuiltinModel.
//
// Thread safety: pure functions (BuildBuiltinModel reads files of the model directory).

#include <filesystem>
#include <memory>
#include <string_view>

#include "base/result.h"
#include "graph/ir.h"
#include "repo/model_config.pb.h"

namespace kiln {

// True when the config's backend (or platform) is one of the built-in ones.
bool IsBuiltinModelConfig(const inference::ModelConfig& config);

// Completes `config` for its built-in backend (name, backend, platform, default inputs and
// outputs, max_batch_size) and returns the model's graph. `model_dir` is the model's directory
// (files a backend reads, e.g. a vocabulary, are named relative to it). INVALID_ARGUMENT naming
// the model and the parameter, tensor or file at fault.
// REQUIRES: IsBuiltinModelConfig(*config).
Result<std::shared_ptr<Graph>> BuildBuiltinModel(std::string_view name,
                                                 const std::filesystem::path& model_dir,
                                                 inference::ModelConfig* config);

}  // namespace kiln
