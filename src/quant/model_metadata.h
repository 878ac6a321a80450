// SPDX-License-Identifier: Apache-2.0
#pragma once
// Model metadata: the `metadata_props` key/value pairs of an ONNX model file, which `kiln
// quantize` uses to record the FP32 source of a quantized model (so `kiln validate` finds its
// reference), and a content hash to tell whether that source changed since.
//
//   KILN_ASSIGN_OR_RETURN(std::string bytes, ExportOnnxModel(graph));
//   AppendMetadata(bytes, {{"kiln.quantize.source", "/models/resnet.onnx"}});
//   KILN_ASSIGN_OR_RETURN(auto props, ReadMetadata(bytes));
//
// NOTE: kiln's IR does not carry metadata_props, so these functions work on the serialized
// ModelProto directly, at the protobuf wire level: ModelProto.metadata_props is field 14, a
// repeated StringStringEntryProto {key = 1, value = 2}. Appending encoded entries to a message is
// the protobuf way to add to a repeated field; reading walks the top-level fields and decodes
// field 14 only. No ONNX protobuf code is needed (graph/onnx/ stays the only user of it).
//
// Thread safety: pure functions.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace kiln::quant {

// Appends metadata_props entries to the serialized ModelProto in `model`.
void AppendMetadata(std::string& model,
                    const std::vector<std::pair<std::string, std::string>>& entries);

// The metadata_props of a serialized ModelProto (the last value wins for repeated keys).
// INVALID_ARGUMENT for bytes that are not a well-formed protobuf message.
Result<std::map<std::string, std::string>> ReadMetadata(std::string_view model);

// A hash of a file's content: "fnv1a64:" and 16 hex digits (FNV-1a, 64 bit). For detecting a
// changed file, not for security.
std::string ContentHash(std::string_view bytes);

}  // namespace kiln::quant
