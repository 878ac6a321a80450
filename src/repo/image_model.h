// SPDX-License-Identifier: Apache-2.0
#pragma once
// The kiln_image backend: a model that turns uploaded JPEG / PNG bytes into a model-ready tensor
// (decode, resize, center crop, normalize: src/image), usable alone or as an ensemble step, and
// served like any tensor model (dynamic batching, instances, statistics, response cache). Its
// graph is one ai.kiln ImagePreprocess node (op/kiln_ops.h) built from the config:
//
//   name: "preprocess"
//   backend: "kiln_image"
//   max_batch_size: 16
//   parameters { key: "resize" value { string_value: "256" } }        # shorter side, or "H,W"
//   parameters { key: "crop" value { string_value: "224,224" } }       # center crop
//   parameters { key: "mean" value { string_value: "0.485,0.456,0.406" } }
//   parameters { key: "std" value { string_value: "0.229,0.224,0.225" } }
//   # also: "color" RGB | GRAY, "filter" bilinear | nearest | area | bicubic, "max_pixels" N
//
// The version directory holds no file (`preprocess/1/` exists, empty). Without input / output
// sections the config gets input "IMAGE" (TYPE_STRING, dims [1]) and output "OUTPUT"
// (TYPE_FP32, dims [C, H, W], -1 where the size is not fixed); given ones must have those types
// (an output may declare other dims with `reshape { shape: [C, H, W] }`, e.g. a flat [64]).
// max_batch_size 0 means the default of 8 (the step always batches).

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "graph/ir.h"
#include "repo/model_config.pb.h"

namespace kiln {

inline constexpr std::string_view kImageBackend = "kiln_image";
inline constexpr int kDefaultImageMaxBatchSize = 8;

bool IsImageConfig(const inference::ModelConfig& config);

// Completes `config` (name `name`, backend and platform "kiln_image", the input and output when
// missing, max_batch_size) and returns the model's graph. INVALID_ARGUMENT naming the parameter or
// tensor for a malformed parameter, or an input / output of the wrong type or shape.
Result<std::shared_ptr<Graph>> BuildImageModel(std::string_view name,
                                               inference::ModelConfig* config);

}  // namespace kiln
