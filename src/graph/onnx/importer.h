// SPDX-License-Identifier: Apache-2.0
#pragma once
// ONNX importer: reads an ONNX model (protobuf ModelProto) and builds kiln's graph IR
// (graph/ir.h). This directory is the only code in kiln that sees ONNX protobuf; everything
// downstream works on the returned Graph.
//
//   KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, ImportOnnxModel("model.onnx"));
//   for (int id : g->inputs) KILN_LOG_INFO("input {}: {}", g->value(id).name,
//                                          g->value(id).type.ToString());
//
// Steps, in order:
//   1. read the file and parse the ModelProto;
//   2. kiln's own structural checks, so the common mistakes get precise messages: every node
//      input names a graph input, an initializer, an earlier node's output or (in subgraphs) an
//      outer-scope value; nodes are topologically ordered; no value is defined twice; no tensor
//      uses external data;
//   3. onnx::checker::check_model (the full model check of this libonnx);
//   4. onnx::shape_inference::InferShapes, lenient mode (a node whose inference fails is skipped),
//      run in a forked child process: libonnx 1.12's inference crashes, or allocates without
//      bound, on some checker-approved models with out-of-range attributes (found by fuzzing).
//      If inference fails in any way (an error such as an inferred type contradicting a declared
//      one, a crash, running out of memory, a 2-minute timeout), the importer logs a warning and
//      continues with the declared types only: kiln computes concrete shapes itself when a
//      session is reshaped, so inferred types are advisory and a libonnx inference gap must not
//      make a valid model unloadable;
//   5. conversion into the Graph (below);
//   6. for a default-domain opset below 7, the version adapter (version_adapter.h), which
//      rewrites the old operator versions into their opset 7 form and records opset 7;
//   7. gradient expansion (gradient.h), which replaces each Gradient node (domain
//      ai.onnx.preview.training) by the ordinary nodes of its backward pass.
//
// The Graph: `name`, `ir_version`, and `opset_imports` (domain "ai.onnx" normalized to "") come
// from the model. Every initializer becomes a constant Value (its tensor copied into an
// OwnedTensor, all kiln dtypes). Graph inputs that are not initializers become `inputs`, in
// order; an input that is also an initializer keeps the initializer and is not listed (the
// caller does not feed it). `outputs` follow the model's outputs. Every Value carries its type
// from the model's inputs/outputs/value_info plus shape inference: dims from dim_value are known,
// dim_param gives Dim{-1, "name"}, an unset dim gives Dim{}; a type without a shape has
// has_shape == false; a value with no recorded type has dtype kInvalid. Sequence types (of
// tensors) and optional types (of tensors or of sequences of tensors) import as ValueTypes of
// kind kSequence / kOptional with their element type; TYPE_PROTO(S) attributes (the Optional
// op's `type`) import the same way. Negative dim_values
// (written by some old exporters) are read as unknown dims. Nodes keep the model's order; an empty
// input or output name becomes kNoValue; node domains are normalized like opsets. Attributes of
// every ONNX kind are converted; GRAPH and GRAPHS attributes (If/Loop/Scan bodies) become
// separate Graphs with the model's opsets and ir_version.
//
// Subgraphs may read values of enclosing graphs. Each such name becomes a Value of the subgraph
// with producer == -1, no constant, and not listed in the subgraph's `inputs`; that combination
// marks an outer-scope reference, resolved by name against the enclosing graphs at run time.
// Its type is whatever the subgraph's value_info records (often nothing).
//
// Not supported (UNIMPLEMENTED, naming the tensor or value): external data, sparse initializers
// and SPARSE_TENSOR(S) attributes, element types kiln lacks (COMPLEX64, COMPLEX128, float8 and
// other types newer than this libonnx), map, sparse-tensor and opaque values, sequences of
// anything but tensors, optionals of anything but tensors or sequences of tensors, tensors of
// rank above Shape::kMaxRank. Model-local functions are not expanded:
// their call sites import as ordinary nodes of the function's domain.
//
// Errors: NOT_FOUND for a missing file; INVALID_ARGUMENT for unreadable files ("cannot read model
// file 'p': ...") and for anything malformed ("'p' is not a valid ONNX model: ...", including
// checker failures and ordering or naming errors); UNIMPLEMENTED as above ("'p': initializer 'w'
// has element type COMPLEX64, which kiln does not support"); RESOURCE_EXHAUSTED when memory runs
// out. Messages about the model's content start with its origin ('p'). No exception escapes.
//
// Thread safety: both functions may be called concurrently (each import forks its own
// short-lived child for step 4). The returned Graph is immutable and
// shared (models may be unloaded while requests still hold them).

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "graph/ir.h"

namespace kiln {

// Reads and imports the model file at `path`.
Result<std::shared_ptr<Graph>> ImportOnnxModel(const std::string& path);

// Imports a model from its serialized bytes. `origin` names the model in messages (a path, or a
// description such as "model 'resnet' version 3").
Result<std::shared_ptr<Graph>> ImportOnnxModelFromString(std::string_view bytes,
                                                         std::string_view origin);

}  // namespace kiln
