// SPDX-License-Identifier: Apache-2.0
#include "repo/builtin_models.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

#include "base/check.h"
#include "op/kiln_ops.h"
#include "repo/image_model.h"
#include "tensor/classification.h"

namespace kiln {
namespace builtin {

std::string Param(const inference::ModelConfig& config, const std::string& key) {
  auto it = config.parameters().find(key);
  return it == config.parameters().end() ? std::string() : it->second.string_value();
}

Status BadParam(std::string_view model, std::string_view key, std::string_view value,
                std::string_view want) {
  return Status::InvalidArgument(
      fmt::format("model '{}': parameter '{}' is '{}'; expected {}", model, key, value, want));
}

namespace {

template <typename T>
Result<std::vector<T>> List(std::string_view model, const std::string& key, const std::string& text,
                            std::string_view want) {
  std::vector<T> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    T v{};
    if constexpr (std::is_same_v<T, float>) {
      char* end = nullptr;
      v = std::strtof(item.c_str(), &end);
      if (item.empty() || end != item.c_str() + item.size()) {
        return BadParam(model, key, text, want);
      }
    } else {
      auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
      if (item.empty() || ec != std::errc() || p != item.data() + item.size()) {
        return BadParam(model, key, text, want);
      }
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

Result<std::vector<int64_t>> IntList(std::string_view model, const std::string& key,
                                     const std::string& text, std::string_view want) {
  return List<int64_t>(model, key, text, want);
}

Result<std::vector<float>> FloatList(std::string_view model, const std::string& key,
                                     const std::string& text, std::string_view want) {
  return List<float>(model, key, text, want);
}

Status CompleteBase(std::string_view name, std::string_view backend, int default_max_batch_size,
                    inference::ModelConfig* config) {
  if (config->name().empty()) config->set_name(std::string(name));
  if (config->name() != name) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': config.pbtxt names the model '{}', but the model directory is '{}'", name,
        config->name(), name));
  }
  config->set_backend(std::string(backend));
  config->set_platform(std::string(backend));
  if (config->max_batch_size() == 0) config->set_max_batch_size(default_max_batch_size);
  return Status::OK();
}

ValueType TensorType(DataType dtype, std::vector<Dim> dims) {
  ValueType t;
  t.dtype = dtype;
  t.has_shape = true;
  t.dims = std::move(dims);
  return t;
}

}  // namespace builtin

namespace {

using builtin::BadParam;
using builtin::Param;
using builtin::TensorType;

constexpr int kDefaultMaxBatchSize = 8;
constexpr uintmax_t kMaxModelFileBytes = uintmax_t{256} << 20;

Result<bool> BoolParam(std::string_view model, const inference::ModelConfig& config,
                       const std::string& key, bool default_value) {
  const std::string v = Param(config, key);
  if (v.empty()) return default_value;
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return BadParam(model, key, v, "true or false");
}

Result<int64_t> IntParam(std::string_view model, const inference::ModelConfig& config,
                         const std::string& key, int64_t default_value, int64_t lo, int64_t hi) {
  const std::string v = Param(config, key);
  if (v.empty()) return default_value;
  const std::string want = fmt::format("an integer in [{}, {}]", lo, hi);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> list, builtin::IntList(model, key, v, want));
  if (list.size() != 1 || list[0] < lo || list[0] > hi) return BadParam(model, key, v, want);
  return list[0];
}

// A file of the model directory named by parameter `key` (a relative path inside it).
Result<std::string> ReadModelFile(std::string_view model, const std::filesystem::path& model_dir,
                                  const std::string& key, const std::string& relative) {
  const std::filesystem::path rel = std::filesystem::path(relative).lexically_normal();
  if (rel.empty() || rel.is_absolute() || *rel.begin() == "..") {
    return BadParam(model, key, relative, "a path inside the model directory");
  }
  const std::filesystem::path path = model_dir / rel;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) {
    return Status::InvalidArgument(fmt::format("model '{}': parameter '{}': cannot read '{}': {}",
                                               model, key, path.string(), ec.message()));
  }
  if (size > kMaxModelFileBytes) {
    return Status::InvalidArgument(
        fmt::format("model '{}': parameter '{}': '{}' is {} bytes, over the {} byte limit", model,
                    key, path.string(), size, kMaxModelFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return Status::InvalidArgument(
        fmt::format("model '{}': parameter '{}': cannot read '{}'", model, key, path.string()));
  }
  return text.str();
}

// The outputs a config lists must be among `names` with the given type and dims [d] (d = -1
// accepts any listed dim); none listed: all of them.
Status CompleteOutputs(std::string_view model, std::string_view backend,
                       const std::vector<std::pair<std::string, inference::DataType>>& names,
                       int64_t dim, inference::ModelConfig* config) {
  if (config->output_size() == 0) {
    for (const auto& [n, t] : names) {
      auto* out = config->add_output();
      out->set_name(n);
      out->set_data_type(t);
      out->add_dims(dim);
    }
    return Status::OK();
  }
  for (const inference::ModelOutput& out : config->output()) {
    auto it = std::find_if(names.begin(), names.end(),
                           [&](const auto& n) { return n.first == out.name(); });
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "'" : ", '") + n.first + "'";
    if (it == names.end()) {
      return Status::InvalidArgument(
          fmt::format("model '{}': a {} model's outputs are {}; '{}' is not one", model, backend,
                      all, out.name()));
    }
    if (out.data_type() != it->second || out.dims_size() != 1 ||
        (dim >= 0 && out.dims(0) != dim && out.dims(0) != -1)) {
      return Status::InvalidArgument(
          fmt::format("model '{}': output '{}' of a {} model is {} with dims [{}]", model,
                      out.name(), backend, inference::DataType_Name(it->second), dim));
    }
  }
  return Status::OK();
}

Result<std::shared_ptr<Graph>> BuildTextModel(std::string_view name,
                                              const std::filesystem::path& model_dir,
                                              inference::ModelConfig* config) {
  KILN_RETURN_IF_ERROR(builtin::CompleteBase(name, kTextBackend, kDefaultMaxBatchSize, config));
  const std::string model = config->name();
  KILN_ASSIGN_OR_RETURN(bool lowercase, BoolParam(model, *config, "lowercase", true));
  KILN_ASSIGN_OR_RETURN(bool strip, BoolParam(model, *config, "strip_accents", lowercase));
  KILN_ASSIGN_OR_RETURN(bool cjk, BoolParam(model, *config, "handle_chinese_chars", true));
  KILN_ASSIGN_OR_RETURN(bool pair, BoolParam(model, *config, "pair", false));
  KILN_ASSIGN_OR_RETURN(int64_t max_length,
                        IntParam(model, *config, "max_length", 512, pair ? 3 : 2, 1 << 20));
  KILN_ASSIGN_OR_RETURN(int64_t word_chars,
                        IntParam(model, *config, "max_input_chars_per_word", 100, 1, 1 << 20));
  std::vector<int64_t> buckets;
  const std::string bucket_text = Param(*config, "length_buckets");
  if (bucket_text.empty()) {
    for (int64_t b = 8; b < max_length; b *= 2) buckets.push_back(b);
    buckets.push_back(max_length);
  } else if (bucket_text != "none") {
    KILN_ASSIGN_OR_RETURN(
        buckets, builtin::IntList(model, "length_buckets", bucket_text,
                                  "ascending lengths \"16,32,...\" up to max_length, or \"none\""));
    for (size_t i = 0; i < buckets.size(); ++i) {
      if (buckets[i] < 1 || buckets[i] > max_length || (i > 0 && buckets[i] <= buckets[i - 1])) {
        return BadParam(model, "length_buckets", bucket_text,
                        fmt::format("ascending lengths in [1, max_length {}]", max_length));
      }
    }
  }
  const std::string vocab_param = Param(*config, "vocab_file");
  const std::string vocab_file = vocab_param.empty() ? "vocab.txt" : vocab_param;
  KILN_ASSIGN_OR_RETURN(std::string vocab_text,
                        ReadModelFile(model, model_dir, "vocab_file", vocab_file));
  std::vector<std::string> vocab = ParseLabelFile(vocab_text);

  if (config->input_size() == 0) {
    for (const char* n : {"TEXT", "TEXT_PAIR"}) {
      if (!pair && std::string_view(n) == "TEXT_PAIR") break;
      auto* in = config->add_input();
      in->set_name(n);
      in->set_data_type(inference::TYPE_STRING);
      in->add_dims(1);
    }
  }
  if (config->input_size() != (pair ? 2 : 1)) {
    return Status::InvalidArgument(
        fmt::format("model '{}': a kiln_text model has {} (TYPE_STRING, dims [1]){}", model,
                    pair ? "two inputs, the texts and their pairs," : "one input",
                    pair ? "" : "; set parameter 'pair' for a second"));
  }
  for (const inference::ModelInput& in : config->input()) {
    if (in.data_type() != inference::TYPE_STRING || in.dims_size() != 1 || in.dims(0) != 1) {
      return Status::InvalidArgument(
          fmt::format("model '{}': input '{}' of a kiln_text model is TYPE_STRING with dims [1]",
                      model, in.name()));
    }
  }
  const std::vector<std::pair<std::string, inference::DataType>> outputs = {
      {"input_ids", inference::TYPE_INT64},
      {"attention_mask", inference::TYPE_INT64},
      {"token_type_ids", inference::TYPE_INT64}};
  KILN_RETURN_IF_ERROR(CompleteOutputs(model, kTextBackend, outputs, -1, config));

  auto g = std::make_shared<Graph>();
  g->name = model;
  g->opset_imports[""] = 17;
  g->opset_imports[std::string(kKilnDomain)] = kKilnOpsetVersion;
  Node node;
  node.name = "tokenize";
  node.op_type = std::string(kWordPieceTokenizeOp);
  node.domain = std::string(kKilnDomain);
  for (const inference::ModelInput& in : config->input()) {
    const int x = g->AddValue(
        {in.name(), TensorType(DataType::kBytes, {Dim{-1, "batch"}, Dim{1, ""}}), -1, nullptr});
    g->inputs.push_back(x);
    node.inputs.push_back(x);
  }
  for (const auto& [n, t] : outputs) {
    const int y = g->AddValue(
        {n, TensorType(DataType::kInt64, {Dim{-1, "batch"}, Dim{-1, "length"}}), -1, nullptr});
    node.outputs.push_back(y);
    for (const inference::ModelOutput& out : config->output()) {
      if (out.name() == n) g->outputs.push_back(y);
    }
  }
  node.attributes.push_back(Attribute::Strings("vocab", std::move(vocab)));
  node.attributes.push_back(Attribute::Int("lowercase", lowercase ? 1 : 0));
  node.attributes.push_back(Attribute::Int("strip_accents", strip ? 1 : 0));
  node.attributes.push_back(Attribute::Int("handle_chinese_chars", cjk ? 1 : 0));
  node.attributes.push_back(Attribute::Int("max_length", max_length));
  node.attributes.push_back(Attribute::Int("max_input_chars_per_word", word_chars));
  if (!buckets.empty()) node.attributes.push_back(Attribute::Ints("length_buckets", buckets));
  for (const char* key : {"unk_token", "cls_token", "sep_token", "pad_token", "mask_token"}) {
    if (!Param(*config, key).empty()) {
      node.attributes.push_back(Attribute::String(key, Param(*config, key)));
    }
  }
  g->AddNode(std::move(node));
  return std::shared_ptr<Graph>(std::move(g));
}

Result<std::shared_ptr<Graph>> BuildClassifyModel(std::string_view name,
                                                  const std::filesystem::path& model_dir,
                                                  inference::ModelConfig* config) {
  KILN_RETURN_IF_ERROR(builtin::CompleteBase(name, kClassifyBackend, kDefaultMaxBatchSize, config));
  const std::string model = config->name();
  if (Param(*config, "k").empty()) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': a kiln_classify model needs parameter 'k' (how many classes)", model));
  }
  KILN_ASSIGN_OR_RETURN(int64_t k, IntParam(model, *config, "k", 1, 1, 1 << 20));
  KILN_ASSIGN_OR_RETURN(bool softmax, BoolParam(model, *config, "softmax", false));
  std::vector<std::string> labels;
  if (const std::string file = Param(*config, "labels_file"); !file.empty()) {
    KILN_ASSIGN_OR_RETURN(std::string text, ReadModelFile(model, model_dir, "labels_file", file));
    labels = ParseLabelFile(text);
  }
  if (config->input_size() == 0) {
    auto* in = config->add_input();
    in->set_name("INPUT");
    in->set_data_type(inference::TYPE_FP32);
    in->add_dims(-1);
  }
  const inference::ModelInput& in = config->input(0);
  if (config->input_size() != 1 || in.data_type() != inference::TYPE_FP32 || in.dims_size() < 1) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': a kiln_classify model has one input of TYPE_FP32 (the scores)", model));
  }
  // The class count, when the input's dims fix it.
  int64_t classes = 1;
  for (int64_t d : in.dims()) classes = d < 0 || classes < 0 ? -1 : classes * d;
  const int64_t out_dim = classes < 0 ? -1 : std::min(k, classes);
  const std::vector<std::pair<std::string, inference::DataType>> outputs = {
      {"CLASSES", inference::TYPE_STRING},
      {"SCORES", inference::TYPE_FP32},
      {"INDICES", inference::TYPE_INT64}};
  KILN_RETURN_IF_ERROR(CompleteOutputs(model, kClassifyBackend, outputs, out_dim, config));

  auto g = std::make_shared<Graph>();
  g->name = model;
  g->opset_imports[""] = 17;
  g->opset_imports[std::string(kKilnDomain)] = kKilnOpsetVersion;
  std::vector<Dim> in_dims = {Dim{-1, "batch"}};
  for (int64_t d : in.dims()) in_dims.push_back(Dim{d, d < 0 ? "classes" : ""});
  const int x = g->AddValue({in.name(), TensorType(DataType::kFloat32, in_dims), -1, nullptr});
  g->inputs = {x};
  Node node;
  node.name = "classify";
  node.op_type = std::string(kTopKClassifyOp);
  node.domain = std::string(kKilnDomain);
  node.inputs = {x};
  const DataType types[] = {DataType::kBytes, DataType::kFloat32, DataType::kInt64};
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int y =
        g->AddValue({outputs[i].first, TensorType(types[i], {Dim{-1, "batch"}, Dim{out_dim, "k"}}),
                     -1, nullptr});
    node.outputs.push_back(y);
    for (const inference::ModelOutput& out : config->output()) {
      if (out.name() == outputs[i].first) g->outputs.push_back(y);
    }
  }
  node.attributes.push_back(Attribute::Int("k", k));
  node.attributes.push_back(Attribute::Int("softmax", softmax ? 1 : 0));
  if (!labels.empty()) node.attributes.push_back(Attribute::Strings("labels", std::move(labels)));
  g->AddNode(std::move(node));
  return std::shared_ptr<Graph>(std::move(g));
}

bool Is(const inference::ModelConfig& config, std::string_view backend) {
  return config.backend() == backend || config.platform() == backend;
}

}  // namespace

bool IsBuiltinModelConfig(const inference::ModelConfig& config) {
  return IsImageConfig(config) || Is(config, kTextBackend) || Is(config, kClassifyBackend);
}

Result<std::shared_ptr<Graph>> BuildBuiltinModel(std::string_view name,
                                                 const std::filesystem::path& model_dir,
                                                 inference::ModelConfig* config) {
  if (IsImageConfig(*config)) return BuildImageModel(name, config);
  if (Is(*config, kTextBackend)) return BuildTextModel(name, model_dir, config);
  KILN_CHECK(Is(*config, kClassifyBackend), "not a built-in backend");
  return BuildClassifyModel(name, model_dir, config);
}

}  // namespace kiln
