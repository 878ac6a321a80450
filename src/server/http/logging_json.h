// SPDX-License-Identifier: Apache-2.0
#pragma once
// JSON of the logging extension (KSERVE-V2.md 1.12): the body of POST /v2/logging and the
// settings object both GET and POST answer with. Pure functions, tested without a server.
//
//   KILN_ASSIGN_OR_RETURN(std::vector<LogSettingUpdate> updates, ParseLogSettingsRequest(body));
//   KILN_RETURN_IF_ERROR(UpdateLogSettings(updates));
//   std::string json = LogSettingsJson(GetLogSettings());
//
// Request: a JSON object of settings (an empty body is {}); each value is decoded as it was
// sent (null, boolean, integer, string, other) and judged by UpdateLogSettings
// (server/log_settings.h), which names the setting in every error.
//
// Thread safety: stateless functions.

#include <string>
#include <vector>

#include "base/logging.h"
#include "base/result.h"
#include "server/log_settings.h"

namespace kiln {

Result<std::vector<LogSettingUpdate>> ParseLogSettingsRequest(const std::string& body);

// {"log_file":"","log_info":true,"log_warning":true,"log_error":true,"log_verbose_level":0,
//  "log_format":"default"}
std::string LogSettingsJson(const LogSettings& settings);

}  // namespace kiln
