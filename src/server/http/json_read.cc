// SPDX-License-Identifier: Apache-2.0
#include "server/http/json_read.h"

#include <fmt/format.h>

namespace kiln::json_read {

namespace dom = simdjson::dom;
using ElementType = dom::element_type;

std::string_view JsonTypeName(ElementType type) {
  switch (type) {
    case ElementType::ARRAY:
      return "an array";
    case ElementType::OBJECT:
      return "an object";
    case ElementType::INT64:
    case ElementType::UINT64:
      return "an integer";
    case ElementType::DOUBLE:
      return "a number";
    case ElementType::STRING:
      return "a string";
    case ElementType::BOOL:
      return "a boolean";
    case ElementType::NULL_VALUE:
      return "null";
  }
  return "a JSON value";
}

int64_t AsInt64(dom::element e) {
  int64_t v = 0;
  if (e.get_int64().get(v) != simdjson::SUCCESS) v = 0;
  return v;
}
uint64_t AsUint64(dom::element e) {
  uint64_t v = 0;
  if (e.get_uint64().get(v) != simdjson::SUCCESS) v = 0;
  return v;
}
double AsDouble(dom::element e) {
  double v = 0;
  if (e.get_double().get(v) != simdjson::SUCCESS) v = 0;
  return v;
}
std::string_view AsString(dom::element e) {
  std::string_view v;
  if (e.get_string().get(v) != simdjson::SUCCESS) v = {};
  return v;
}
bool AsBool(dom::element e) {
  bool v = false;
  if (e.get_bool().get(v) != simdjson::SUCCESS) v = false;
  return v;
}

std::string JsonValueForMessage(dom::element e) {
  switch (e.type()) {
    case ElementType::INT64:
      return std::to_string(AsInt64(e));
    case ElementType::UINT64:
      return std::to_string(AsUint64(e));
    case ElementType::DOUBLE:
      return fmt::format("{}", AsDouble(e));
    case ElementType::STRING: {
      const std::string_view v = AsString(e);
      return "\"" + std::string(v.substr(0, 32)) + (v.size() > 32 ? "...\"" : "\"");
    }
    case ElementType::BOOL:
      return AsBool(e) ? "true" : "false";
    default:
      return std::string(JsonTypeName(e.type()));
  }
}

}  // namespace kiln::json_read
