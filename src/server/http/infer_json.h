// SPDX-License-Identifier: Apache-2.0
#pragma once
// Translation between the KServe v2 JSON inference body (KSERVE-V2.md 1.8-1.11) and the
// internal InferRequest / InferResponse (sched/request.h). No sockets: the HTTP server calls
// these, and they are unit- and mutation-tested on their own.
//
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<InferRequest> req, ParseInferRequestJson(body));
//   req->model_name = model->name(); req->model_version = model->version();
//   KILN_RETURN_IF_ERROR(CheckRequestedOutputs(*req, model->signature()));
//   ...
//   std::string json;
//   Status s = AppendInferResponseJson(response, &json);
//
// Request rules: a JSON object with an `inputs` array (required) and optional `id` (string),
// `parameters` (object; keys starting with "triton_" are reserved -> 400; `priority` and
// `timeout` (microseconds) must be unsigned integers and set InferRequest::priority /
// timeout_us, anything else -> 400 naming the parameter; other keys are accepted and not used
// yet) and `outputs` (array of {"name", "parameters"}). Unknown keys are ignored.
// Each input has `name`, `datatype` (protocol string), `shape` (non-negative integers, at most
// Shape::kMaxRank dims) and exactly one data source. `data` is a flat or nested array, flattened
// in row-major order; its element count must equal product(shape). Element types: BOOL
// true/false; UINT*/INT* JSON integers within the type's range (no fractions, no 1.0); FP32/FP64
// any JSON number (or "NaN", "Infinity", "-Infinity", the strings JsonWriter emits; FP32 values
// beyond its range become +-Infinity); BYTES JSON strings. FP16/BF16 cannot be sent as JSON.
// The binary tensor data extension (binary_data_size), shared memory and classification are not
// implemented: they answer UNIMPLEMENTED. binary_data / binary_data_output are accepted and
// ignored (the response is JSON, which clients read the same way). Documents nested deeper
// than kMaxJsonDepth are rejected before any recursion, so no input can exhaust the stack.
//
// Errors are INVALID_ARGUMENT (UNIMPLEMENTED as above) with a message naming the input and the
// problem. Thread safety: stateless functions; call from any thread.

#include <cstddef>
#include <memory>
#include <string>

#include "base/result.h"
#include "repo/model_manager.h"
#include "sched/request.h"

namespace kiln {

// Maximum nesting of the whole request document (Triton's limit).
inline constexpr size_t kMaxJsonDepth = 100;
// Spare capacity a body needs past its size() to be parsed without a copy (SIMDJSON_PADDING).
inline constexpr size_t kJsonPaddingBytes = 64;

// Parses an inference request body. model_name / model_version are left for the caller.
// When body.capacity() - body.size() >= kJsonPaddingBytes the parser reads it in place,
// otherwise it copies it once.
Result<std::unique_ptr<InferRequest>> ParseInferRequestJson(const std::string& body);

// INVALID_ARGUMENT when a requested output is not an output of the model, or is requested twice.
Status CheckRequestedOutputs(const InferRequest& request, const ModelSignature& signature);

// Appends the response JSON (1.9): id (only when non-empty), model_name, model_version (as a
// string), outputs with name/datatype/shape/data. INVALID_ARGUMENT for an FP16/BF16 output (no
// JSON form); INTERNAL for an output that is not a valid host tensor. On error *out may hold a
// partial document.
Status AppendInferResponseJson(const InferResponse& response, std::string* out);

}  // namespace kiln
