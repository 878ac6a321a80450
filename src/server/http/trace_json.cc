// SPDX-License-Identifier: Apache-2.0
#include "server/http/trace_json.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <optional>

#include "server/http/json_body.h"
#include "server/json_writer.h"

namespace kiln {

namespace dom = simdjson::dom;

std::string TraceSettingsJson(const TraceSettings& s) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  for (const auto& [name, values] : TraceSettingsAsFields(s)) {
    w.Key(name);
    if (name == "trace_level") {  // the reference server writes the levels as an array
      w.BeginArray();
      for (const std::string& v : values) w.String(v);
      w.EndArray();
    } else {
      w.String(values.empty() ? std::string() : values[0]);
    }
  }
  w.EndObject();
  return out;
}

Status ApplyTraceSettingsRequest(const std::string& body, TraceSettings* s) {
  dom::parser parser;
  KILN_ASSIGN_OR_RETURN(std::optional<dom::object> root,
                        ParseJsonObjectBody(parser, body, "trace settings request"));
  if (!root) return Status::OK();
  TraceSettingFields update;
  for (dom::key_value_pair kv : *root) {
    std::vector<std::string> values;
    auto add = [&](dom::element e) -> Status {
      std::string_view text;
      int64_t n = 0;
      if (e.get_string().get(text) == simdjson::SUCCESS) {
        values.emplace_back(text);
      } else if (e.get_int64().get(n) == simdjson::SUCCESS) {
        values.push_back(std::to_string(n));
      } else {
        return Status::InvalidArgument(
            fmt::format("trace setting '{}' must be a string (or an array of strings)", kv.key));
      }
      return Status::OK();
    };
    dom::array arr;
    if (kv.value.is_null()) {
      // null: leave the setting as it is
    } else if (kv.value.get_array().get(arr) == simdjson::SUCCESS) {
      for (dom::element e : arr) KILN_RETURN_IF_ERROR(add(e));
    } else {
      KILN_RETURN_IF_ERROR(add(kv.value));
    }
    update.emplace_back(std::string(kv.key), std::move(values));
  }
  return UpdateTraceSettings(update, s);
}

}  // namespace kiln
