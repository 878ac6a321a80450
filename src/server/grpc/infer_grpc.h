// SPDX-License-Identifier: Apache-2.0
#pragma once
// Translation between the gRPC inference messages (grpc_service.proto, KSERVE-V2.md 2.3-2.4)
// and the internal InferRequest / InferResponse (sched/request.h). No network: the gRPC server
// calls these, and they are unit-tested and fuzzed on their own.
//
//   KILN_ASSIGN_OR_RETURN(int64_t version, ParseModelVersion(msg.model_version()));
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<InferRequest> req, DecodeModelInferRequest(msg));
//   ...
//   Status s = EncodeModelInferResponse(response, &reply);
//
// Request rules. Each input has a non-empty unique `name`, a protocol `datatype`, a `shape` of
// at most Shape::kMaxRank non-negative dims, and its data either in `raw_input_contents` (one
// entry per input, in `inputs` order; little-endian, packed; BOOL one byte 0 or 1; BYTES as
// 4-byte little-endian length + bytes per element) or in the typed `contents` field of its
// datatype (INT8/INT16/INT32 in int_contents and UINT8/UINT16/UINT32 in uint_contents, range
// checked; BYTES elements in bytes_contents; FP16/BF16 have no typed form). Mixing the two
// forms, a count or byte size that does not match the shape, or a typed field of another
// datatype is INVALID_ARGUMENT naming the input. Request parameters: `priority` and `timeout`
// (microseconds) as int64_param (>= 0) or uint64_param set InferRequest::priority / timeout_us;
// other `triton_*` keys are INVALID_ARGUMENT; `sequence_id` (non-zero int64 / uint64, non-empty
// string), `sequence_start` / `sequence_end` (true) are UNIMPLEMENTED: kiln has no sequence
// batching; other keys are accepted and not used. Shared memory (input or output
// `shared_memory_region`) is UNIMPLEMENTED. An output's `classification` parameter (the
// classification extension's class count) is checked here and applied by the server after the
// run (server/classification.h).
//
// Responses: every output in `raw_output_contents`, index-aligned with `outputs` (as the
// reference server answers and its clients read), never in typed contents.
//
// Thread safety: stateless functions; call from any thread.

#include <cstdint>
#include <memory>
#include <string_view>

#include "base/result.h"
#include "grpc_service.pb.h"
#include "sched/request.h"

namespace kiln {

// Largest message kiln sends or accepts (the reference server's limit, INT32_MAX).
inline constexpr int kMaxGrpcMessageBytes = 2147483647;

// "" -> -1 (the server picks the highest ready version); a decimal number without sign that
// fits int64 -> that version; anything else INVALID_ARGUMENT naming the text.
Result<int64_t> ParseModelVersion(std::string_view version);

// Decodes everything but model_name / model_version (left for the caller, who resolves the
// model first). Never trusts a count or size in the message before checking it against the
// data actually present, so no message can make it allocate more than the message holds.
Result<std::unique_ptr<InferRequest>> DecodeModelInferRequest(
    const inference::ModelInferRequest& request);

// The `classification` parameter of a requested output: its class count (0 when absent).
// INVALID_ARGUMENT unless it is a non-negative int64_param or uint64_param.
Result<int64_t> ClassCount(const inference::ModelInferRequest::InferRequestedOutputTensor& output);

// Fills `out` (cleared first) from `response`: model_name, model_version (decimal string), id,
// one output entry (name, datatype, shape) and one raw_output_contents entry per output.
// INVALID_ARGUMENT when the raw contents together exceed kMaxGrpcMessageBytes; INTERNAL for an
// output that is not a valid contiguous host tensor.
Status EncodeModelInferResponse(const InferResponse& response, inference::ModelInferResponse* out);

}  // namespace kiln
