// SPDX-License-Identifier: Apache-2.0
#pragma once
// Small readers shared by kiln's JSON request parsers (infer_json.cc, openai_json.cc): typed
// reads of a simdjson element whose type the caller checked, and how an element is named in an
// error message.
//
//   if (e.type() != dom::element_type::STRING)
//     return Status::InvalidArgument("'id' must be a string, got " + JsonValueForMessage(e));
//   std::string_view id = AsString(e);
//
// Thread safety: pure functions.

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::json_read {

// "an array", "an object", "an integer", "a number", "a string", "a boolean", "null".
std::string_view JsonTypeName(simdjson::dom::element_type type);

// The value of an element of that type; 0 / "" / false when it is not one (the caller checks).
int64_t AsInt64(simdjson::dom::element e);
uint64_t AsUint64(simdjson::dom::element e);
double AsDouble(simdjson::dom::element e);
std::string_view AsString(simdjson::dom::element e);
bool AsBool(simdjson::dom::element e);

// The element as it appeared (numbers, booleans, strings cut at 32 bytes, quoted) or its JSON
// type (JsonTypeName), for error messages.
std::string JsonValueForMessage(simdjson::dom::element e);

}  // namespace kiln::json_read
