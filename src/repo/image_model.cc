// SPDX-License-Identifier: Apache-2.0
#include "repo/image_model.h"

#include <fmt/format.h>

#include <vector>

#include "op/kiln_ops.h"
#include "repo/builtin_models.h"

namespace kiln {

using builtin::BadParam;
using builtin::Param;

bool IsImageConfig(const inference::ModelConfig& config) {
  return config.backend() == kImageBackend || config.platform() == kImageBackend;
}

Result<std::shared_ptr<Graph>> BuildImageModel(std::string_view name,
                                               inference::ModelConfig* config) {
  KILN_RETURN_IF_ERROR(
      builtin::CompleteBase(name, kImageBackend, kDefaultImageMaxBatchSize, config));
  const std::string model = config->name();

  const std::string color = Param(*config, "color").empty() ? "RGB" : Param(*config, "color");
  if (color != "RGB" && color != "GRAY") return BadParam(model, "color", color, "RGB or GRAY");
  const int64_t channels = color == "GRAY" ? 1 : 3;
  const std::string filter =
      Param(*config, "filter").empty() ? "bilinear" : Param(*config, "filter");
  if (filter != "bilinear" && filter != "nearest" && filter != "area" && filter != "bicubic") {
    return BadParam(model, "filter", filter, "bilinear, nearest, area or bicubic");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> resize,
                        builtin::IntList(model, "resize", Param(*config, "resize"),
                                         "a shorter side \"S\" or a size \"H,W\""));
  KILN_ASSIGN_OR_RETURN(
      std::vector<int64_t> crop,
      builtin::IntList(model, "crop", Param(*config, "crop"), "a crop size \"H,W\""));
  KILN_ASSIGN_OR_RETURN(std::vector<float> mean,
                        builtin::FloatList(model, "mean", Param(*config, "mean"),
                                           "one number per channel, comma-separated"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> std,
                        builtin::FloatList(model, "std", Param(*config, "std"),
                                           "one number per channel, comma-separated"));
  KILN_ASSIGN_OR_RETURN(
      std::vector<int64_t> max_pixels,
      builtin::IntList(model, "max_pixels", Param(*config, "max_pixels"), "a number of pixels"));
  if (resize.size() > 2 || (!resize.empty() && (resize[0] < 1 || resize.back() < 1))) {
    return BadParam(model, "resize", Param(*config, "resize"),
                    "a shorter side \"S\" or a size \"H,W\" (at least 1)");
  }
  if (!crop.empty() && (crop.size() != 2 || crop[0] < 1 || crop[1] < 1)) {
    return BadParam(model, "crop", Param(*config, "crop"), "a crop size \"H,W\" (at least 1)");
  }
  for (const auto* v : {&mean, &std}) {
    if (!v->empty() && v->size() != 1 && static_cast<int64_t>(v->size()) != channels) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': parameters 'mean' and 'std' take 1 or {} values (color {}), got {}", model,
          channels, color, v->size()));
    }
  }
  if (mean.empty() != std.empty()) {
    return Status::InvalidArgument(
        fmt::format("model '{}': parameters 'mean' and 'std' are given together", model));
  }
  if (max_pixels.size() > 1 || (!max_pixels.empty() && max_pixels[0] < 1)) {
    return BadParam(model, "max_pixels", Param(*config, "max_pixels"), "a number of pixels >= 1");
  }
  // The output size where it is fixed.
  int64_t out_h = -1, out_w = -1;
  if (crop.size() == 2) {
    out_h = crop[0], out_w = crop[1];
  } else if (resize.size() == 2) {
    out_h = resize[0], out_w = resize[1];
  }

  // The input and output sections: filled in, or checked.
  if (config->input_size() == 0) {
    auto* in = config->add_input();
    in->set_name("IMAGE");
    in->set_data_type(inference::TYPE_STRING);
    in->add_dims(1);
  }
  if (config->output_size() == 0) {
    auto* out = config->add_output();
    out->set_name("OUTPUT");
    out->set_data_type(inference::TYPE_FP32);
    out->add_dims(channels);
    out->add_dims(out_h);
    out->add_dims(out_w);
  }
  if (config->input_size() != 1 || config->input(0).data_type() != inference::TYPE_STRING ||
      config->input(0).dims_size() != 1 || config->input(0).dims(0) != 1) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': a kiln_image model has one input of TYPE_STRING with dims [1] (the encoded "
        "image)",
        model));
  }
  // The graph's output is [C, H, W]: the config's dims, or its reshape when it has one (dims
  // [64] with reshape [1, 8, 8] hands a flat vector to the next step).
  const inference::ModelOutput& out = config->output(0);
  const auto& graph_dims = out.has_reshape() ? out.reshape().shape() : out.dims();
  if (config->output_size() != 1 || out.data_type() != inference::TYPE_FP32 ||
      graph_dims.size() != 3 || graph_dims[0] != channels || graph_dims[1] != out_h ||
      graph_dims[2] != out_w) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': a kiln_image model has one output of TYPE_FP32 with dims (or reshape) "
        "[{}, {}, {}] for these parameters",
        model, channels, out_h, out_w));
  }

  auto g = std::make_shared<Graph>();
  g->name = model;
  g->opset_imports[""] = 17;
  g->opset_imports[std::string(kKilnDomain)] = kKilnOpsetVersion;
  const int x = g->AddValue({config->input(0).name(),
                             builtin::TensorType(DataType::kBytes, {Dim{-1, "batch"}, Dim{1, ""}}),
                             -1, nullptr});
  const int y =
      g->AddValue({out.name(),
                   builtin::TensorType(DataType::kFloat32, {Dim{-1, "batch"}, Dim{channels, ""},
                                                            Dim{out_h, out_h < 0 ? "height" : ""},
                                                            Dim{out_w, out_w < 0 ? "width" : ""}}),
                   -1, nullptr});
  g->inputs = {x};
  Node node;
  node.name = "preprocess";
  node.op_type = std::string(kImagePreprocessOp);
  node.domain = std::string(kKilnDomain);
  node.inputs = {x};
  node.outputs = {y};
  node.attributes.push_back(Attribute::String("color", color));
  node.attributes.push_back(Attribute::String("filter", filter));
  if (!resize.empty()) node.attributes.push_back(Attribute::Ints("resize", resize));
  if (!crop.empty()) node.attributes.push_back(Attribute::Ints("crop", crop));
  if (!mean.empty()) {
    node.attributes.push_back(Attribute::Floats("mean", mean));
    node.attributes.push_back(Attribute::Floats("std", std));
  }
  if (!max_pixels.empty()) node.attributes.push_back(Attribute::Int("max_pixels", max_pixels[0]));
  g->AddNode(std::move(node));
  g->outputs = {y};
  return std::shared_ptr<Graph>(std::move(g));
}

}  // namespace kiln
