// SPDX-License-Identifier: Apache-2.0
#include "server/http/json_body.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/http/infer_json.h"

namespace kiln {

namespace dom = simdjson::dom;

Result<std::optional<dom::object>> ParseJsonObjectBody(dom::parser& parser, const std::string& body,
                                                       std::string_view what) {
  const bool blank = std::all_of(body.begin(), body.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  });
  if (blank) return std::optional<dom::object>();
  if (parser.allocate(std::max<size_t>(body.size(), 1), kMaxJsonDepth) != simdjson::SUCCESS) {
    return Status::ResourceExhausted("cannot allocate memory to parse the request body");
  }
  dom::element root;
  if (const auto error = parser.parse(body).get(root); error != simdjson::SUCCESS) {
    return Status::InvalidArgument(
        fmt::format("{} body is not valid JSON: {}", what, simdjson::error_message(error)));
  }
  dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return Status::InvalidArgument(fmt::format("{} body must be a JSON object", what));
  }
  return std::optional<dom::object>(obj);
}

}  // namespace kiln
