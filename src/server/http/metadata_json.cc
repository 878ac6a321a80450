// SPDX-License-Identifier: Apache-2.0
// Server and model metadata JSON; see metadata_json.h.
#include "server/http/metadata_json.h"

#include "server/json_writer.h"

namespace kiln {
namespace {

void WriteTensors(JsonWriter* w, std::span<const TensorSpec> tensors, bool batched) {
  w->BeginArray();
  for (const TensorSpec& spec : tensors) {
    w->BeginObject();
    w->KeyString("name", spec.name);
    w->KeyString("datatype", DataTypeName(spec.dtype));
    w->Key("shape");
    w->BeginArray();
    if (batched) w->Int(-1);
    for (int64_t d : spec.dims) w->Int(d);
    w->EndArray();
    w->EndObject();
  }
  w->EndArray();
}

}  // namespace

std::string ServerMetadataJson(std::string_view name, std::string_view version,
                               std::span<const std::string_view> extensions) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.KeyString("name", name);
  w.KeyString("version", version);
  w.Key("extensions");
  w.BeginArray();
  for (std::string_view e : extensions) w.String(e);
  w.EndArray();
  w.EndObject();
  return out;
}

std::string ModelMetadataJson(std::string_view name, std::span<const int64_t> versions,
                              const ModelSignature& signature) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.KeyString("name", name);
  w.Key("versions");
  w.BeginArray();
  for (int64_t v : versions) w.String(std::to_string(v));
  w.EndArray();
  w.KeyString("platform", signature.platform.empty() ? signature.backend : signature.platform);
  const bool batched = signature.max_batch_size > 0;
  w.Key("inputs");
  WriteTensors(&w, signature.inputs, batched);
  w.Key("outputs");
  WriteTensors(&w, signature.outputs, batched);
  w.EndObject();
  return out;
}

}  // namespace kiln
