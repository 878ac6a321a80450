// SPDX-License-Identifier: Apache-2.0
#include "server/log_settings.h"

#include <fmt/format.h>

#include <limits>

#include "base/mutex.h"

namespace kiln {
namespace {

const char* KindName(const LogSettingUpdate& u) {
  switch (u.kind) {
    case LogSettingUpdate::Kind::kNull:
      return "null";
    case LogSettingUpdate::Kind::kBool:
      return "a boolean";
    case LogSettingUpdate::Kind::kInteger:
      return "an integer";
    case LogSettingUpdate::Kind::kString:
      return "a string";
    case LogSettingUpdate::Kind::kOther:
      break;
  }
  return u.type_name.empty() ? "another type" : u.type_name.c_str();
}

Status WrongType(const LogSettingUpdate& u, std::string_view expected) {
  return Status::InvalidArgument(
      fmt::format("log setting '{}' must be {}, got {}", u.name, expected, KindName(u)));
}

Status ApplyOne(const LogSettingUpdate& u, LogSettings* s) {
  if (u.kind == LogSettingUpdate::Kind::kNull) return Status::OK();
  bool* flag = nullptr;
  if (u.name == "log_info") flag = &s->info;
  if (u.name == "log_warning") flag = &s->warning;
  if (u.name == "log_error") flag = &s->error;
  if (flag != nullptr) {
    if (u.kind != LogSettingUpdate::Kind::kBool) return WrongType(u, "a boolean");
    *flag = u.bool_value;
    return Status::OK();
  }
  if (u.name == "log_verbose_level") {
    if (u.kind != LogSettingUpdate::Kind::kInteger) {
      return WrongType(u, "a non-negative integer");
    }
    if (u.int_overflow || u.int_value < 0 || u.int_value > std::numeric_limits<uint32_t>::max()) {
      return Status::InvalidArgument(
          fmt::format("log setting 'log_verbose_level' must be between 0 and {}",
                      std::numeric_limits<uint32_t>::max()));
    }
    s->verbose_level = static_cast<uint32_t>(u.int_value);
    return Status::OK();
  }
  if (u.name == "log_format") {
    if (u.kind != LogSettingUpdate::Kind::kString) return WrongType(u, "a string");
    if (!ParseLogFormat(u.string_value, &s->format)) {
      return Status::InvalidArgument(
          fmt::format("log setting 'log_format' must be \"default\" or \"ISO8601\", got \"{}\"",
                      u.string_value));
    }
    return Status::OK();
  }
  if (u.name == "log_file") {
    if (u.kind != LogSettingUpdate::Kind::kString) return WrongType(u, "a string");
    if (u.string_value != s->file) {
      return Status::Unimplemented(
          "log setting 'log_file' cannot be changed while the server runs; choose the log file "
          "at start with `kiln serve --log-file`");
    }
    return Status::OK();
  }
  return Status::InvalidArgument(
      fmt::format("unknown log setting '{}' (known: log_file, log_info, log_warning, log_error, "
                  "log_verbose_level, log_format)",
                  u.name));
}

}  // namespace

Status UpdateLogSettings(std::span<const LogSettingUpdate> updates) {
  // One update at a time, so two clients' updates never interleave read and write.
  static Mutex mu;
  MutexLock lock(mu);
  LogSettings next = GetLogSettings();
  for (const LogSettingUpdate& u : updates) {
    if (Status st = ApplyOne(u, &next); !st.ok()) return st;
  }
  return ApplyLogSettings(next);
}

std::vector<LogSettingField> LogSettingFields(const LogSettings& s) {
  using K = LogSettingField::Kind;
  std::vector<LogSettingField> fields;
  fields.push_back({"log_file", K::kString, false, 0, s.file});
  fields.push_back({"log_info", K::kBool, s.info, 0, {}});
  fields.push_back({"log_warning", K::kBool, s.warning, 0, {}});
  fields.push_back({"log_error", K::kBool, s.error, 0, {}});
  fields.push_back({"log_verbose_level", K::kUint, false, s.verbose_level, {}});
  fields.push_back({"log_format", K::kString, false, 0, LogFormatName(s.format)});
  return fields;
}

}  // namespace kiln
