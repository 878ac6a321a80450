// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as a KServe v2 JSON inference request body. Parsing must
// return a request or an error Status, never crash; an accepted request is re-encoded as a
// response to exercise the writer on whatever the parser let through. Run with `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <string>

#include "server/http/infer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  kiln::Result<std::unique_ptr<kiln::InferRequest>> request = kiln::ParseInferRequestJson(body);
  if (!request.ok()) return 0;
  kiln::InferResponse response;
  response.model_name = "fuzz";
  for (kiln::InferInput& in : (*request)->inputs) {
    response.outputs.push_back({in.name, std::move(in.tensor)});
  }
  std::string out;
  (void)kiln::AppendInferResponseJson(response, &out);
  return 0;
}
