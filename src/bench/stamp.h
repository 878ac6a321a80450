// SPDX-License-Identifier: Apache-2.0
#pragma once
// What every `kiln bench` report is stamped with (the machine, the code, the time) and the HTML
// escaping its reports share; used by the KServe mode (runner.cc) and the generation mode
// (gen_runner.cc, gen_report.cc).
//
// Thread safety: reentrant.

#include <string>
#include <string_view>

namespace kiln::bench {

// /proc/cpuinfo's first "model name"; "unknown" when there is none.
std::string CpuModel();
// The commit of the source tree the kiln binary sits in (build/kiln -> the checkout), if git
// knows it, with "-dirty" when that tree has uncommitted changes; "" when unknown.
std::string GitCommit();
// The current time as ISO 8601 UTC ("2026-12-05T10:59:29Z").
std::string UtcNow();
// `s` with < > & " ' replaced by their HTML character references.
std::string HtmlEscape(std::string_view s);

}  // namespace kiln::bench
