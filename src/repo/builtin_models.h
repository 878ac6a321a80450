// SPDX-License-Identifier: Apache-2.0
#pragma once
// Models of kiln's built-in processing backends, whose graph comes from the config (and files in
// the model directory) rather than from a model file. They are served like any tensor model
// (dynamic batching, instances, statistics, response cache) and used alone or as ensemble steps.
// The model manager asks IsBuiltinModelConfig, then builds the graph once per load with
// BuildBuiltinModel.
//
//   kiln_image     encoded images -> model-ready tensors (repo/image_model.h, docs/image.md)
//   kiln_text      text -> WordPiece input_ids / attention_mask / token_type_ids (docs/text.md)
//   kiln_classify  scores -> the top k classes with labels (docs/text.md)
//
// kiln_text:
//   backend: "kiln_text"
//   max_batch_size: 32                                   # 0: the default of 8
//   parameters { key: "vocab_file" value { string_value: "vocab.txt" } }   # the default
//   parameters { key: "max_length" value { string_value: "128" } }         # default 512
//   # also: "lowercase" (true), "strip_accents" (as lowercase), "handle_chinese_chars" (true),
//   # "length_buckets" ("8,16,...", default the powers of two from 8 below max_length, then
//   # max_length; "none": each batch as long as its longest row), "pair" (false: a second
//   # input TEXT_PAIR), "unk_token" / "cls_token" / "sep_token" / "pad_token" / "mask_token",
//   # "max_input_chars_per_word" (100)
// Input "TEXT" (TYPE_STRING, dims [1]; and "TEXT_PAIR" with pair); outputs "input_ids",
// "attention_mask", "token_type_ids" (TYPE_INT64, dims [-1]); a config may list a subset of the
// outputs. The vocabulary file is named relative to the model directory.
//
// kiln_classify:
//   backend: "kiln_classify"
//   max_batch_size: 16
//   input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 10 ] } ]   # default dims [-1]
//   parameters { key: "k" value { string_value: "3" } }                     # required
//   parameters { key: "softmax" value { string_value: "true" } }            # default false
//   parameters { key: "labels_file" value { string_value: "labels.txt" } }  # optional
// Outputs "CLASSES" (TYPE_STRING, "<score>:<index>:<label>" as the classification extension
// writes them), "SCORES" (TYPE_FP32) and "INDICES" (TYPE_INT64), each dims [min(k, classes)]
// ([-1] when the class count is not fixed); a config may list a subset.
//
// Thread safety: pure functions (BuildBuiltinModel reads files of the model directory).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "repo/model_config.pb.h"

namespace kiln {

inline constexpr std::string_view kTextBackend = "kiln_text";
inline constexpr std::string_view kClassifyBackend = "kiln_classify";

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

// Helpers of the built-in backends for their config parameters (string values).
namespace builtin {
// The parameter's string value, or "" when absent.
std::string Param(const inference::ModelConfig& config, const std::string& key);
// INVALID_ARGUMENT "model 'm': parameter 'key' is 'value'; expected <want>".
Status BadParam(std::string_view model, std::string_view key, std::string_view value,
                std::string_view want);
// "a,b,c" as numbers (spaces around items allowed; "" is an empty list).
Result<std::vector<int64_t>> IntList(std::string_view model, const std::string& key,
                                     const std::string& text, std::string_view want);
Result<std::vector<float>> FloatList(std::string_view model, const std::string& key,
                                     const std::string& text, std::string_view want);
// Sets the config's name (checking it against the model directory's `name`), backend and
// platform, and max_batch_size when 0.
Status CompleteBase(std::string_view name, std::string_view backend, int default_max_batch_size,
                    inference::ModelConfig* config);
// A declared tensor type with a shape.
ValueType TensorType(DataType dtype, std::vector<Dim> dims);
}  // namespace builtin

}  // namespace kiln
