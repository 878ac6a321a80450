// SPDX-License-Identifier: Apache-2.0
#pragma once
// The JSON form of a model configuration served by GET /v2/models/{m}[/versions/{v}]/config
// (../shared/protocol/KSERVE-V2.md section 1.5), written from the protobuf message by reflection:
//   - field names as in the .proto (snake_case);
//   - every scalar, repeated and map field printed, even at its default (`"runtime":""`,
//     `"batch_input":[]`, `"parameters":{}`); an unset sub-message or oneof member is omitted;
//   - enums by name ("TYPE_FP32");
//   - 64-bit integers as JSON numbers (map keys stay strings), except inside the CUDA graph
//     spec (`optimization.cuda.graph_spec`), whose integers stay strings as in the reference.
//
//   std::string body = ModelConfigJson(*model->model_config());
//
// Thread safety: a pure function.

#include <string>

namespace google::protobuf {
class Message;
}

namespace kiln {

std::string ModelConfigJson(const google::protobuf::Message& config);

}  // namespace kiln
