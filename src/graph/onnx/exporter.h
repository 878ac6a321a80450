// SPDX-License-Identifier: Apache-2.0
#pragma once
// ONNX exporter: kiln's graph IR (graph/ir.h) back to an ONNX ModelProto, so an optimized graph
// can be written to a file (`kiln optimize`) that kiln's importer (importer.h) reads again and
// runs with the same results.
//
//   KILN_RETURN_IF_ERROR(WriteOnnxModel(*optimized.graph, "model.opt.onnx"));
//
// What is written: the graph's name, ir_version (8 when the graph has none) and every opset
// import (so ai.kiln nodes carry their domain's import); constants as initializers (raw_data;
// BYTES as string_data); graph inputs and outputs with their declared types; every other value
// with a known type as value_info; nodes in order with their domains and attributes of every
// kind, subgraphs (If/Loop/Scan bodies) included. kNoValue inputs and outputs become "".
// ONNX's checker wants a shape on every graph input and output; a graph whose declared
// input or output types lack one (rank unknown) exports, but will not import again.
// Nothing is checked here beyond what conversion needs: the importer checks on the way back in.
//
// Errors: INVALID_ARGUMENT for values the format cannot hold (a dtype without an ONNX number);
// the file errors of WriteWholeFile ("cannot write model file 'p': ...").
//
// Thread safety: both functions may be called from any thread.

#include <string>

#include "base/result.h"
#include "graph/ir.h"

namespace kiln {

// The serialized ModelProto of `graph`.
Result<std::string> ExportOnnxModel(const Graph& graph);

// ExportOnnxModel, written to `path` (created or truncated).
Status WriteOnnxModel(const Graph& graph, const std::string& path);

}  // namespace kiln
