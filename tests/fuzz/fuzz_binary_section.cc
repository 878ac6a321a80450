// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the binary tensor data extension. The first two bytes choose the JSON
// header length (modulo the body size + 1); the rest is the body: a JSON header followed by the
// binary section. Parsing must return a request or an error Status, never crash or read out of
// bounds; an accepted request is echoed as a response with every output binary (and
// classified), and the decoded tensors are re-encoded raw, which must reproduce their bytes.
// Run with `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "server/http/infer_json.h"
#include "server/raw_tensor.h"
#include "tensor/classification.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  auto body = std::make_shared<std::string>(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t json_bytes = (size_t{data[0]} | size_t{data[1]} << 8) % (body->size() + 1);
  kiln::Result<kiln::ParsedInferRequest> parsed = kiln::ParseInferRequest(body, json_bytes);
  body.reset();  // borrowed tensors must keep the bytes alive on their own
  if (!parsed.ok()) return 0;
  kiln::InferResponse response;
  response.model_name = "fuzz";
  for (kiln::InferInput& in : parsed->request->inputs) {
    std::string raw;
    if (kiln::AppendRawTensor(in.tensor.view(), &raw).ok()) {
      kiln::Result<kiln::OwnedTensor> again =
          kiln::DecodeRawTensor(in.name, in.tensor.dtype(), in.tensor.shape(), raw, nullptr);
      if (!again.ok()) std::abort();  // what was encoded must decode
    }
    if (in.tensor.dtype() != kiln::DataType::kBytes) {
      (void)kiln::Classify(in.tensor.view(), 3, in.tensor.shape().rank() > 0, {});
    }
    response.outputs.push_back({in.name, std::move(in.tensor)});
  }
  kiln::ResponseEncoding encoding;
  encoding.binary_data_output = true;
  kiln::EncodedInferResponse out;
  (void)kiln::EncodeInferResponse(response, encoding, &out);
  return 0;
}
