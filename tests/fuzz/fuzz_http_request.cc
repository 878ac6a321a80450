// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: whole HTTP request bytes, as a client would write them on the socket,
// through what the server does with them short of the socket and the model: Beast's request
// parser (with the server's header limit and a body limit), the router, and for an inference
// route the body decoding (Content-Encoding, Inference-Header-Content-Length, JSON header and
// binary section). Every step must answer or fail with a Status, never crash. Run with
// `make fuzz`.

#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/http/infer_json.h"
#include "server/http/router.h"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kMaxBodyBytes = 1 << 20;
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(kMaxBodyBytes);
  parser.eager(true);
  boost::system::error_code ec;
  size_t used = 0;
  while (used < size && !parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (ec == http::error::need_more) break;
    if (ec) return 0;
    if (n == 0) break;
    used += n;
  }
  if (!parser.is_header_done()) return 0;
  if (!parser.is_done()) {
    parser.put_eof(ec);
    if (ec) return 0;
  }
  http::request<http::string_body> req = parser.release();
  const auto method = req.method_string();
  const auto target = req.target();
  const kiln::Route route = kiln::RouteRequest(std::string_view(method.data(), method.size()),
                                               std::string_view(target.data(), target.size()));
  if (route.kind != kiln::RouteKind::kModelInfer) return 0;
  const auto encoding = req[http::field::content_encoding];
  const auto header_length = req["Inference-Header-Content-Length"];
  // The model a raw binary body (header 0) is decoded for, chosen by the route's model name:
  // "s" one BYTES input [1]; "t" two inputs; anything else one batching FP32 input [-1, 3].
  kiln::ModelSignature signature;
  signature.name = route.model;
  if (route.model == "s") {
    signature.inputs.push_back({"in", kiln::DataType::kBytes, {1}});
  } else {
    signature.max_batch_size = 8;
    signature.inputs.push_back({"in", kiln::DataType::kFloat32, {-1, 3}});
    if (route.model == "t") signature.inputs.push_back({"in2", kiln::DataType::kInt64, {2}});
  }
  kiln::Result<kiln::ParsedInferRequest> parsed = kiln::ParseInferHttpBody(
      std::move(req.body()), std::string_view(encoding.data(), encoding.size()),
      std::string_view(header_length.data(), header_length.size()), kMaxBodyBytes, signature);
  if (!parsed.ok()) return 0;
  kiln::InferResponse response;
  response.model_name = route.model;
  for (kiln::InferInput& in : parsed->request->inputs) {
    response.outputs.push_back({in.name, std::move(in.tensor)});
  }
  kiln::EncodedInferResponse out;
  (void)kiln::EncodeInferResponse(response, parsed->encoding, &out);
  return 0;
}
