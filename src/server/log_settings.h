// SPDX-License-Identifier: Apache-2.0
#pragma once
// The logging extension (KSERVE-V2.md 1.12), shared by HTTP (/v2/logging) and gRPC
// (LogSettings): a client's update of the log settings, validated as a whole and then applied at
// once, and the settings as the protocol names them.
//
//   std::vector<LogSettingUpdate> updates = ...;   // decoded by the front end
//   KILN_RETURN_IF_ERROR(UpdateLogSettings(updates));
//   for (const LogSettingField& f : LogSettingFields(GetLogSettings())) ...
//
// Settings: log_file (string), log_info / log_warning / log_error (bool), log_verbose_level
// (unsigned integer), log_format ("default" or "ISO8601"). Rules: a null value leaves the
// setting as it is; a value of the wrong type, a negative verbose level, an unknown format or an
// unknown setting name is INVALID_ARGUMENT naming the setting; log_file other than its current
// value is UNIMPLEMENTED (the destination is chosen at start, `kiln serve --log-file`). When any
// update is refused nothing changes.
//
// Thread safety: safe from any thread (updates are applied under the logging lock).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/logging.h"
#include "base/status.h"

namespace kiln {

// One setting as the client sent it.
struct LogSettingUpdate {
  enum class Kind : uint8_t { kNull, kBool, kInteger, kString, kOther };
  std::string name;
  Kind kind = Kind::kNull;
  bool bool_value = false;
  int64_t int_value = 0;      // kInteger; may be negative (refused for the verbose level)
  bool int_overflow = false;  // kInteger that did not fit int64 / uint32
  std::string string_value;
  std::string type_name;  // kOther: what was sent ("array", "number"), for the message
};

Status UpdateLogSettings(std::span<const LogSettingUpdate> updates);

// One setting for a response.
struct LogSettingField {
  enum class Kind : uint8_t { kBool, kUint, kString };
  const char* name;
  Kind kind;
  bool bool_value = false;
  uint32_t uint_value = 0;
  std::string string_value;
};

// Every setting, in the protocol's order.
std::vector<LogSettingField> LogSettingFields(const LogSettings& settings);

}  // namespace kiln
