// SPDX-License-Identifier: Apache-2.0
#pragma once
// The outputs of `kiln profile` (docs/profiling.md): the text report, the one-line JSON object and
// the Chrome trace, each from a ProfileReport (what profile_command.cc measured) and the session
// that ran (node names, op types and kernel providers).
//
//   ProfileReport report = ...;             // summary from SummarizeRuns (runtime/profiler.h)
//   std::fputs(FormatProfileReport(report, *session).c_str(), stdout);
//   KILN_RETURN_IF_ERROR(WriteChromeTrace("trace.json", *session, runs));
//
// Thread safety: pure functions (WriteChromeTrace writes its file).

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace kiln::tools {

// One graph input or output of the profiled runs.
struct ProfiledValue {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  std::string file;  // inputs: the file it was read from; empty for random data
};

struct ProfileReport {
  std::string model;      // the path given
  int64_t batch = 1;      // items per run
  int threads = 0;        // the session's intra-op threads
  bool adaptive = false;  // run widths adapt (SessionOptions::adapt_threads)
  int narrow_runs = 0;    // timed runs that ran on one thread
  int64_t width_switches = 0;
  int iterations = 0;
  int warmup = 0;
  bool optimized = true;
  int imported_nodes = 0;
  int nodes_run = 0;
  std::string weight_precision;  // as the optimizer resolved it, or "as imported"
  uint64_t weight_bytes = 0;     // the initializers run with
  uint64_t rss_bytes = 0;        // process RSS after the runs, and its peak
  uint64_t peak_rss_bytes = 0;
  CpuKernelInfo cpu;
  std::vector<std::pair<std::string, int>> kernel_notes;  // Session::KernelNotes
  std::string thread_wait;                                // DescribeThreadWait (base/thread_wait.h)
  std::vector<ProfiledValue> inputs;                      // graph-input order
  std::vector<ProfiledValue> outputs;                     // of the last timed run
  MemoryPlanStats memory;
  RunsSummary summary;
};

// The table: header lines, then one row per node and one per op type.
std::string FormatProfileReport(const ProfileReport& report, const Session& session);

// One JSON object (no newline); the fields are listed in docs/profiling.md.
std::string ProfileReportJson(const ProfileReport& report, const Session& session);

// Writes a Chrome trace (Trace Event Format) of `runs` to `path`: one "X" event per run and per
// node call, microseconds from the first run's start. INVALID_ARGUMENT naming the path when it
// cannot be written.
Status WriteChromeTrace(const std::string& path, const Session& session,
                        std::span<const RunProfile> runs);

}  // namespace kiln::tools
