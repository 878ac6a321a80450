// SPDX-License-Identifier: Apache-2.0
#pragma once
// Translation between the gRPC inference messages (grpc_service.proto, KSERVE-V2.md 2.3-2.4)
// and the internal InferRequest / InferResponse (sched/request.h). No network: the gRPC server
// calls these, and they are unit-tested and fuzzed on their own.
//
//   KILN_ASSIGN_OR_RETURN(int64_t version, ParseModelVersion(msg.model_version()));
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<InferRequest> req, DecodeModelInferRequest(msg));
//   ...
//   KILN_ASSIGN_OR_RETURN(WireMessage reply, EncodeModelInferResponse(response));
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
// run (tensor/classification.h).
//
// Responses: every output in `raw_output_contents`, index-aligned with `outputs` (as the
// reference server answers and its clients read), never in typed contents.
//
// Copies: raw input contents are borrowed from the parsed message (the tensor keeps the message
// alive), not copied; a response is encoded straight into protobuf wire form, its numeric outputs'
// bytes borrowed from the output tensors, so the only copy of an output is the one the transport
// makes into the socket.
//
// Thread safety: stateless functions; call from any thread.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "grpc_service.pb.h"
#include "sched/request.h"
#include "sched/stats.h"

namespace kiln {

// Largest message kiln sends or accepts (the reference server's limit, INT32_MAX).
inline constexpr int kMaxGrpcMessageBytes = 2147483647;

// "" -> -1 (the server picks the highest ready version); a decimal number without sign that
// fits int64 -> that version; anything else INVALID_ARGUMENT naming the text.
Result<int64_t> ParseModelVersion(std::string_view version);

// Decodes everything but model_name / model_version (left for the caller, who resolves the
// model first). Never trusts a count or size in the message before checking it against the
// data actually present, so no message can make it allocate more than the message holds.
// With `owner` set (it must keep `request` alive), numeric raw contents are borrowed: the
// inputs' tensors point into the message's bytes and hold `owner`; without it they are copied.
Result<std::unique_ptr<InferRequest>> DecodeModelInferRequest(
    const inference::ModelInferRequest& request,
    const std::shared_ptr<const void>& owner = nullptr);

// The `classification` parameter of a requested output: its class count (0 when absent).
// INVALID_ARGUMENT unless it is a non-negative int64_param or uint64_param.
Result<int64_t> ClassCount(const inference::ModelInferRequest::InferRequestedOutputTensor& output);

// The `unload_dependents` parameter of a RepositoryModelUnload request (false when absent; the
// manager's ModelUnloadOptions::unload_dependents). INVALID_ARGUMENT unless it is a bool_param;
// other parameters are ignored.
Result<bool> UnloadDependents(const inference::RepositoryModelUnloadRequest& request);

// One protobuf message in wire form, as pieces sent in order without being joined: bytes
// written here, and tensor contents borrowed from output tensors (each piece holding its tensor,
// so the memory lives as long as the piece).
class WireMessage {
 public:
  struct Piece {
    std::string bytes;   // used when `tensor` is invalid
    OwnedTensor tensor;  // a numeric tensor whose contiguous bytes are the piece
    size_t size() const { return tensor.valid() ? tensor.size_bytes() : bytes.size(); }
    const char* data() const {
      return tensor.valid() ? static_cast<const char*>(tensor.raw_data()) : bytes.data();
    }
  };

  void Append(std::string bytes);
  void AppendBorrowed(OwnedTensor tensor);  // REQUIRES: numeric, contiguous, on the host
  // Appends a length-delimited field header (tag and varint length) for field `field`.
  void AppendFieldHeader(int field, uint64_t length);
  // This message as field `field` of an enclosing message: a field header, then these pieces.
  WireMessage NestedAs(int field) &&;

  uint64_t size() const { return size_; }
  std::vector<Piece>& pieces() { return pieces_; }
  const std::vector<Piece>& pieces() const { return pieces_; }
  std::string Join() const;  // the whole message in one string (tests, small messages)

 private:
  std::vector<Piece> pieces_;
  uint64_t size_ = 0;
};

// `response` as a ModelInferResponse in wire form: `head`'s fields (e.g. parameters; its outputs
// and raw_output_contents must be empty) with model_name, model_version (decimal string) and id
// set from `response`, then one output entry (name, datatype, shape) and one raw_output_contents
// entry per output. INVALID_ARGUMENT when the message would exceed kMaxGrpcMessageBytes; INTERNAL
// for an output that is not a valid contiguous host tensor.
Result<WireMessage> EncodeModelInferResponse(const InferResponse& response,
                                             inference::ModelInferResponse head = {});

// One entry of the ModelStatistics RPC's answer (KSERVE-V2.md 1.6, 2.x): name, version (decimal
// string), last inference, inference and execution counts, the eight inference_stats durations
// (cache_hit and cache_miss included) and batch_stats by executed batch size.
void FillModelStatistics(std::string_view name, int64_t version, const ModelStatistics& stats,
                         inference::ModelStatistics* out);

}  // namespace kiln
