// SPDX-License-Identifier: Apache-2.0
#pragma once
// The body of a small JSON control request (repository, logging) as a simdjson DOM object.
//
//   simdjson::dom::parser parser;
//   KILN_ASSIGN_OR_RETURN(std::optional<simdjson::dom::object> root,
//                         ParseJsonObjectBody(parser, body, "model load request"));
//
// An empty or all-whitespace body is no object (nullopt: the Python client posts ""); anything
// else must be one JSON object nested at most kMaxJsonDepth deep. Errors are INVALID_ARGUMENT
// starting with `what` ("model load request body is not valid JSON: ...").
//
// Thread safety: one parser per call; the returned object lives in `parser`.

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace kiln {

Result<std::optional<simdjson::dom::object>> ParseJsonObjectBody(simdjson::dom::parser& parser,
                                                                 const std::string& body,
                                                                 std::string_view what);

}  // namespace kiln
