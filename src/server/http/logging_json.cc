// SPDX-License-Identifier: Apache-2.0
#include "server/http/logging_json.h"

#include <simdjson.h>

#include <optional>

#include "server/http/json_body.h"
#include "server/json_writer.h"

namespace kiln {

namespace dom = simdjson::dom;

Result<std::vector<LogSettingUpdate>> ParseLogSettingsRequest(const std::string& body) {
  dom::parser parser;
  KILN_ASSIGN_OR_RETURN(std::optional<dom::object> root,
                        ParseJsonObjectBody(parser, body, "log settings request"));
  std::vector<LogSettingUpdate> updates;
  if (!root) return updates;
  for (dom::key_value_pair kv : *root) {
    LogSettingUpdate u;
    u.name = std::string(kv.key);
    using K = LogSettingUpdate::Kind;
    switch (kv.value.type()) {
      case dom::element_type::NULL_VALUE:
        u.kind = K::kNull;
        break;
      case dom::element_type::BOOL:
        u.kind = K::kBool;
        u.bool_value = bool(kv.value.get_bool());
        break;
      case dom::element_type::INT64:
        u.kind = K::kInteger;
        u.int_value = int64_t(kv.value.get_int64());
        break;
      case dom::element_type::UINT64:  // above INT64_MAX
        u.kind = K::kInteger;
        u.int_overflow = true;
        break;
      case dom::element_type::STRING:
        u.kind = K::kString;
        u.string_value = std::string(std::string_view(kv.value.get_string()));
        break;
      case dom::element_type::DOUBLE:
        u.kind = K::kOther;
        u.type_name = "a non-integer number";
        break;
      case dom::element_type::ARRAY:
        u.kind = K::kOther;
        u.type_name = "an array";
        break;
      case dom::element_type::OBJECT:
        u.kind = K::kOther;
        u.type_name = "an object";
        break;
    }
    updates.push_back(std::move(u));
  }
  return updates;
}

std::string LogSettingsJson(const LogSettings& settings) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  for (const LogSettingField& f : LogSettingFields(settings)) {
    w.Key(f.name);
    switch (f.kind) {
      case LogSettingField::Kind::kBool:
        w.Bool(f.bool_value);
        break;
      case LogSettingField::Kind::kUint:
        w.Uint(f.uint_value);
        break;
      case LogSettingField::Kind::kString:
        w.String(f.string_value);
        break;
    }
  }
  w.EndObject();
  return out;
}

}  // namespace kiln
