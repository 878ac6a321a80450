// SPDX-License-Identifier: Apache-2.0
#pragma once
// Outputs of `kiln bench`: the terminal table, the perf_analyzer-like CSV (-f), the JSON file
// (--json, one object per measured point) and the self-contained HTML report (--report).
//
// Pure functions from plain data to text; the caller writes the files (WriteFile).

#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "bench/point.h"

namespace kiln::bench {

// perf_analyzer's -f columns (rows sorted by increasing throughput, times in microseconds):
// Concurrency | Request Rate, Inferences/Second, Client Send, Network+Server Send/Recv,
// Server Queue, Server Compute Input, Server Compute Infer, Server Compute Output, Client Recv,
// p50/p90/p95/p99 latency; then kiln's: Avg latency, p99.9 latency, Errors, Client CPU %.
// Client Send/Recv are not measured apart from the wait and are written as 0.
std::string FormatCsv(std::span<const PointResult> points);

// {"run": {...stamp...}, "points": [{"concurrency" | "request_rate", "throughput", "p50_us",
// "p90_us", "p95_us", "p99_us", "p999_us", "avg_us", "stddev_us", "errors", ...}, ...]}.
std::string FormatJson(const RunInfo& info, std::span<const PointResult> points);

// The readable table printed at the end of a run.
std::string FormatTable(const RunInfo& info, std::span<const PointResult> points);

// A self-contained HTML page (inline CSS and SVG, no external assets): p50/p99 latency against
// throughput, the server-side stage breakdown per point, the table and the stamp.
std::string FormatHtml(const RunInfo& info, std::span<const PointResult> points);

// JSON string literal with quotes and escapes.
std::string JsonQuote(std::string_view s);

// Writes `text` to `path` (replacing it); an error names the path.
Status WriteFile(const std::string& path, std::string_view text);

}  // namespace kiln::bench
