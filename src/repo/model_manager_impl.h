// SPDX-License-Identifier: Apache-2.0
#pragma once
// Construction of the ModelManager with an injected graph loader, for tests and tools that
// build graphs without the ONNX importer. ModelManager::Create uses ImportOnnxModel.
//
//   GraphLoader fake = [](const std::string& path) -> Result<std::shared_ptr<Graph>> { ... };
//   KILN_ASSIGN_OR_RETURN(auto manager, CreateModelManager(options, fake));
//
// Thread safety: the loader is called by whichever thread runs a lifecycle operation
// (LoadInitialModels, LoadModel, Poll, the poll thread), one model at a time.

#include <functional>
#include <memory>
#include <string>

#include "base/result.h"
#include "graph/ir.h"
#include "repo/model_manager.h"

namespace kiln {

// Reads the model file at `path` into a graph (ImportOnnxModel's signature).
using GraphLoader = std::function<Result<std::shared_ptr<Graph>>(const std::string& path)>;

// As ModelManager::Create, loading graphs with `loader`.
// INVALID_ARGUMENT: workers_per_model < 1, repository_poll_secs < 0, or repository_path empty;
// NOT_FOUND: the repository is not a directory.
Result<std::unique_ptr<ModelManager>> CreateModelManager(const ModelManagerOptions& options,
                                                         GraphLoader loader);

// The loader ModelManager::Create uses: ImportOnnxModel, or (in a build without the ONNX
// importer) one that fails every load with UNAVAILABLE.
GraphLoader DefaultGraphLoader();

}  // namespace kiln
