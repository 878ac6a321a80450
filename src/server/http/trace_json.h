// SPDX-License-Identifier: Apache-2.0
#pragma once
// JSON of the trace extension (the reference server's /v2/trace/setting, server/trace.h): the
// settings object GET and POST answer with, and the update a POST sends. Pure functions, tested
// without a server.
//
//   TraceSettings s = Tracer::Global().settings();
//   KILN_RETURN_IF_ERROR(ApplyTraceSettingsRequest(body, &s));
//   KILN_RETURN_IF_ERROR(Tracer::Global().Configure(s));
//   std::string json = TraceSettingsJson(Tracer::Global().settings());
//
// Settings (server/trace.h TraceSettingsAsFields; values as the reference server writes them:
// strings, trace_level an array). In an update, null leaves a setting as it is; a value is a
// string, an array of strings, or an integer; UpdateTraceSettings judges it (an unknown
// setting, a wrong value or a change of trace_mode is INVALID_ARGUMENT naming the setting, and
// nothing changes).
//
// Thread safety: stateless functions.

#include <string>
#include <string_view>

#include "base/status.h"
#include "server/trace.h"

namespace kiln {

std::string TraceSettingsJson(const TraceSettings& s);

// Applies the JSON object `body` (empty: {}) to *s.
Status ApplyTraceSettingsRequest(const std::string& body, TraceSettings* s);

}  // namespace kiln
