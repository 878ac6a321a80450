// SPDX-License-Identifier: Apache-2.0
#pragma once
// Private to graph/onnx: ONNX shape inference run in a child process, so that a model which
// crashes, exhausts memory in, or hangs libonnx's inference cannot take the server down.
//
// libonnx 1.12's per-operator inference functions trust attribute values: fuzzing the importer
// with models that pass onnx::checker found segfaults (LayerNormalization, GatherND, ConvInteger,
// ConvTranspose), a division by zero (MaxPool) and unbounded allocations (ConstantOfShape,
// Expand, Scan) from out-of-range attributes alone. Guarding each operator would be endless, so
// the importer forks: the child runs InferShapes on its copy-on-write view of the model, with an
// address-space limit, and sends back only the inferred types; the parent merges them and never
// runs inference code itself.
//
//   Status s = onnx_internal::InferShapesIsolated(&model, std::chrono::seconds(120));
//   if (!s.ok()) KILN_LOG_WARN("...: {}", s.ToString());  // model keeps its declared types
//
// Thread safety: may be called from any thread; each call forks its own child. The child only
// runs libonnx and protobuf code on memory it inherited, then _exits.

#include <chrono>

#include "base/status.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_internal {

// Runs onnx::shape_inference::InferShapes (lenient mode: per-node failures are skipped) on
// `model` in a child process. On success replaces the value_info and output types of `model`'s
// graph and all its subgraphs with the inferred ones and returns OK. Otherwise `model` is left
// unchanged and the Status says why: INVALID_ARGUMENT for an inference error libonnx reported
// (for example an inferred type contradicting a declared one), INTERNAL when the child crashed or
// ran out of memory, DEADLINE_EXCEEDED after `timeout`, UNAVAILABLE when no child could be
// started.
Status InferShapesIsolated(onnx::ModelProto* model, std::chrono::milliseconds timeout);

}  // namespace kiln::onnx_internal
