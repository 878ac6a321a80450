// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as a serialized inference.ModelInferRequest (what a gRPC
// client sends to ModelInfer / ModelStreamInfer). Parsing and decoding must return a request or
// an error Status, never crash or allocate beyond what the message holds; an accepted request
// is re-encoded as a response to exercise the encoder. Run with `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "server/grpc/infer_grpc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Owned by a shared pointer, as the server holds it: the inputs borrow its raw contents.
  auto message = std::make_shared<inference::ModelInferRequest>();
  if (!message->ParseFromArray(data, static_cast<int>(size))) return 0;
  (void)kiln::ParseModelVersion(message->model_version());
  kiln::Result<std::unique_ptr<kiln::InferRequest>> request =
      kiln::DecodeModelInferRequest(*message, message);
  if (!request.ok()) return 0;
  kiln::InferResponse response;
  response.model_name = message->model_name();
  response.id = (*request)->id;
  for (kiln::InferInput& in : (*request)->inputs) {
    response.outputs.push_back({in.name, std::move(in.tensor)});
  }
  kiln::Result<kiln::WireMessage> wire = kiln::EncodeModelInferResponse(response);
  if (wire.ok()) {
    // The wire form must parse back as the message it claims to be.
    inference::ModelInferResponse back;
    if (!back.ParseFromString(wire->Join())) __builtin_trap();
  }
  return 0;
}
