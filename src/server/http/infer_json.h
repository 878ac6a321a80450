// SPDX-License-Identifier: Apache-2.0
#pragma once
// Translation between the KServe v2 inference body (KSERVE-V2.md 1.8-1.13: JSON, with the
// binary tensor data extension) and the internal InferRequest / InferResponse (sched/request.h).
// No sockets: the HTTP server calls these, and they are unit- and mutation-tested on their own.
//
//   auto body = std::make_shared<const std::string>(std::move(http_body));
//   KILN_ASSIGN_OR_RETURN(ParsedInferRequest parsed, ParseInferRequest(body, json_bytes));
//   ...                                     // later, with the model's response:
//   EncodedInferResponse encoded;
//   Status s = EncodeInferResponse(response, parsed.encoding, &encoded);
//
// Request rules: a JSON object with an `inputs` array (required) and optional `id` (string),
// `parameters` (object; keys starting with "triton_" are reserved -> 400; `priority` and
// `timeout` (microseconds) must be unsigned integers and set InferRequest::priority /
// timeout_us; `binary_data_output` must be a boolean; `sequence_id` (non-zero / non-empty),
// `sequence_start` and `sequence_end` (true) are refused because sequence batching is not
// supported; other keys are custom parameters, accepted and not used) and `outputs` (array of
// {"name", "parameters"}). Unknown keys are ignored.
// Each input has `name`, `datatype` (protocol string), `shape` (non-negative integers, at most
// Shape::kMaxRank dims, at most kMaxTensorElements elements) and exactly one data source:
// - `data`: a flat or nested array, flattened in row-major order; its element count must equal
//   product(shape). Element types: BOOL true/false; UINT*/INT* JSON integers within the type's
//   range (no fractions, no 1.0); FP32/FP64 any JSON number (or "NaN", "Infinity", "-Infinity",
//   the strings JsonWriter emits; FP32 values beyond its range become +-Infinity); BYTES JSON
//   strings. FP16/BF16 cannot be sent as JSON.
// - `parameters.binary_data_size`: that many bytes of the binary section (the body past the
//   JSON header), consumed in input order, in the raw form of server/raw_tensor.h. The size
//   must match shape x datatype (BYTES: the length prefixes must add up); the binary section
//   must hold exactly the sum of the sizes. Fixed-size inputs borrow the body (no copy) when
//   aligned for their element type; the tensors then keep the body alive.
// Shared memory is not implemented (UNIMPLEMENTED). Output parameters: `binary_data` (boolean)
// and `classification` (unsigned integer; the top-k classes, see tensor/classification.h).
// Documents nested deeper than kMaxJsonDepth are rejected before any recursion, so no input
// can exhaust the stack.
//
// Errors are INVALID_ARGUMENT (UNIMPLEMENTED as above) with a message naming the input and the
// problem. Thread safety: stateless functions; call from any thread.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "repo/model_manager.h"
#include "sched/request.h"

namespace kiln {

// Maximum nesting of the whole request document (Triton's limit).
inline constexpr size_t kMaxJsonDepth = 100;
// Spare capacity a body needs past its size() to be parsed without a copy (SIMDJSON_PADDING).
inline constexpr size_t kJsonPaddingBytes = 64;
// Largest element count of one input tensor (2^31: 8 GiB of FP32, beyond any request limit).
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 31;

// How one requested output is returned.
struct OutputEncoding {
  std::string name;
  std::optional<bool> binary_data;  // the output's `parameters.binary_data`, when given
  int64_t class_count = 0;          // `parameters.classification`; 0: the tensor itself
};

// The response choices a request makes (not part of InferRequest: they are the protocol's).
struct ResponseEncoding {
  bool binary_data_output = false;      // request parameter: default for unlisted outputs
  std::vector<OutputEncoding> outputs;  // one per `outputs` entry, in request order
  // Listed output: its binary_data when given, else binary_data_output; unlisted outputs:
  // binary_data_output.
  bool IsBinary(std::string_view output) const;
  // The class count requested for `output` (0 when none).
  int64_t ClassCount(std::string_view output) const;
};

struct ParsedInferRequest {
  std::unique_ptr<InferRequest> request;
  ResponseEncoding encoding;
};

// Parses an inference request: the JSON header is body[0, json_bytes), the binary section the
// rest. REQUIRES: body != nullptr, json_bytes <= body->size(). model_name / model_version are
// left for the caller. When the body has kJsonPaddingBytes of spare capacity past the JSON the
// parser reads it in place, otherwise it copies the JSON once.
Result<ParsedInferRequest> ParseInferRequest(std::shared_ptr<const std::string> body,
                                             size_t json_bytes);

// The HTTP layer of an inference body: decompresses `body` per `content_encoding` (see
// compression.h; at most max_request_bytes after decompression), splits it at
// `inference_header_length` (the Inference-Header-Content-Length header; empty: all JSON) and
// parses it with ParseInferRequest. INVALID_ARGUMENT for a header that is not a decimal in
// [0, decompressed size] or for corrupt / oversized compressed data; UNIMPLEMENTED for an unknown
// Content-Encoding. A header of 0 is a raw binary request: ParseRawBinaryInferRequest with
// `signature`, the model's.
Result<ParsedInferRequest> ParseInferHttpBody(std::string body, std::string_view content_encoding,
                                              std::string_view inference_header_length,
                                              size_t max_request_bytes,
                                              const ModelSignature& signature);

// A raw binary request (KSERVE-V2.md 1.13, Inference-Header-Content-Length 0): the whole body is
// the data of the model's only input, sent as batch 1 (the batch dim is 1 for a batching model);
// every output is returned binary. Fixed-size datatypes: the shape is the configured one with at
// most one variable dim, deduced from the body size, and the tensor borrows the body. BYTES: the
// input's shape must be [1] and the body is that one element. INVALID_ARGUMENT naming the model
// and input for a model without exactly one input, an undeducible shape or a size mismatch.
Result<ParsedInferRequest> ParseRawBinaryInferRequest(std::shared_ptr<const std::string> body,
                                                      const ModelSignature& signature);

// A body that is all JSON (no binary section). Nothing in the result refers to `body`.
Result<std::unique_ptr<InferRequest>> ParseInferRequestJson(const std::string& body);

// Appends the response JSON (1.9): id (only when non-empty), model_name, model_version (as a
// string), outputs with name/datatype/shape/data. INVALID_ARGUMENT for an FP16/BF16 output (no
// JSON form); INTERNAL for an output that is not a valid host tensor. On error *out may hold a
// partial document.
Status AppendInferResponseJson(const InferResponse& response, std::string* out);

struct EncodedInferResponse {
  std::string body;       // JSON header, then the binary outputs in `outputs` order
  size_t json_bytes = 0;  // length of the JSON header (Inference-Header-Content-Length)
  bool binary = false;    // at least one output is in the binary section
};

// Encodes a response with the request's binary choices (classification, when requested, has
// replaced the tensors before): binary outputs carry `parameters.binary_data_size` and no
// `data`. INVALID_ARGUMENT for an FP16/BF16 output requested as JSON; INTERNAL for an output
// that is not a valid host tensor. On error out->body may hold a partial document.
Status EncodeInferResponse(const InferResponse& response, const ResponseEncoding& encoding,
                           EncodedInferResponse* out);

}  // namespace kiln
