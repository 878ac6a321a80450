// SPDX-License-Identifier: Apache-2.0
#include "bench/gen_runner.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "bench/gen_client.h"
#include "bench/gen_dataset.h"
#include "bench/gen_report.h"
#include "bench/net.h"
#include "bench/stamp.h"
#include "bench/writers.h"

namespace kiln::bench {
namespace {

// Every request in flight holds a socket: lift the soft limit on open files to the hard one.
void RaiseFileLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

Status CheckOptions(const GenOptions& o) {
  if (o.model.empty()) return Status::InvalidArgument("--model is required");
  if (o.endpoint != kCompletionsPath && o.endpoint != kChatCompletionsPath) {
    return Status::InvalidArgument(fmt::format("--endpoint '{}': expected {} or {}", o.endpoint,
                                               kCompletionsPath, kChatCompletionsPath));
  }
  if (!(o.request_rate > 0)) {
    return Status::InvalidArgument(fmt::format(
        "--request-rate {}: must be > 0 (inf sends everything at once)", o.request_rate));
  }
  if (!(o.burstiness > 0) || std::isinf(o.burstiness)) {
    return Status::InvalidArgument(
        fmt::format("--burstiness {}: must be a number > 0 (1 = Poisson)", o.burstiness));
  }
  if (o.max_concurrency < 0) {
    return Status::InvalidArgument(
        fmt::format("--max-concurrency {}: must be >= 0 (0 = unlimited)", o.max_concurrency));
  }
  if (!(o.temperature >= 0)) {
    return Status::InvalidArgument(fmt::format("--temperature {}: must be >= 0", o.temperature));
  }
  if (!(o.request_timeout_s > 0)) {
    return Status::InvalidArgument(
        fmt::format("--request-timeout {}: must be > 0 seconds", o.request_timeout_s));
  }
  return Status::OK();
}

// "http://HOST:PORT" (or "HOST:PORT") to the HOST:PORT that ResolveEndpoint takes.
Result<std::string> HostPort(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("https://", 0) == 0) {
    return Status::InvalidArgument(
        fmt::format("--url '{}': https is not supported; give http://HOST:PORT", url));
  }
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    return Status::InvalidArgument(
        fmt::format("--url '{}': give http://HOST:PORT only; the path comes from --endpoint", url));
  }
  return rest;
}

}  // namespace

Status RunGenBench(const GenOptions& o, std::FILE* out) {
  KILN_RETURN_IF_ERROR(CheckOptions(o));
  KILN_ASSIGN_OR_RETURN(GoodputSlo slo, ParseGoodput(o.goodput));
  const bool chat = o.endpoint == kChatCompletionsPath;
  DatasetOptions d;
  d.kind = o.dataset;
  d.prompts_file = o.prompts_file;
  d.chat = chat;
  d.input_len = o.input_len;
  d.output_len = o.output_len;
  d.range_ratio = o.range_ratio;
  d.vocab_size = o.vocab_size;
  d.num_prompts = o.num_prompts;
  d.seed = o.seed;
  KILN_ASSIGN_OR_RETURN(std::vector<GenPrompt> prompts, MakeDataset(d));
  KILN_ASSIGN_OR_RETURN(std::string host_port, HostPort(o.url));
  KILN_ASSIGN_OR_RETURN(Endpoint ep, ResolveEndpoint(host_port));
  {
    KILN_ASSIGN_OR_RETURN(int probe, Connect(ep, false));  // fail early when nothing listens
    ::close(probe);
  }

  std::vector<int64_t> at_ns =
      ArrivalOffsetsNs(prompts.size(), o.request_rate, o.burstiness, o.seed);
  std::vector<GenWork> work(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    work[i].http_request = BuildGenHttpRequest(
        ep, o.endpoint, BuildGenRequestBody(prompts[i], o.model, chat, o.temperature), o.api_key);
    work[i].offset_ns = at_ns[i];
    work[i].dataset_input_tokens = prompts[i].input_tokens;
  }
  prompts.clear();
  RaiseFileLimit();

  GenRunInfo info;
  info.command_line = o.command_line;
  info.git_commit = GitCommit();
  info.cpu_model = CpuModel();
  info.cpu_count = static_cast<int>(std::thread::hardware_concurrency());
  info.start_time_utc = UtcNow();
  info.url = "http://" + ep.ToString();
  info.endpoint = o.endpoint;
  info.model = o.model;
  info.dataset = o.dataset == "file" ? "file:" + o.prompts_file : o.dataset;
  info.num_prompts = static_cast<int64_t>(work.size());
  info.request_rate = o.request_rate;
  info.burstiness = o.burstiness;
  info.max_concurrency = o.max_concurrency;
  info.slo = slo;

  GenStreamOptions so;
  so.max_concurrency = o.max_concurrency;
  so.request_timeout_ns = static_cast<int64_t>(std::min(o.request_timeout_s, 1e9) * 1e9);
  const bool tty = ::isatty(2) == 1;
  std::function<void(const GenProgress&)> progress;
  if (!o.quiet) {
    progress = [tty](const GenProgress& p) {
      std::fprintf(stderr, "%s%zu/%zu done, %zu failed, %zu in flight%s", tty ? "\r" : "",
                   p.finished, p.total, p.failed, p.in_flight, tty ? "   " : "\n");
      std::fflush(stderr);
    };
  }
  if (!o.quiet) {
    std::fprintf(stderr, "kiln bench generate: %zu requests to %s%s\n", work.size(),
                 info.url.c_str(), o.endpoint.c_str());
  }
  const int64_t start_ns = NowNs();
  std::vector<GenRecord> records = RunGenStreams(ep, work, so, start_ns, progress);
  if (!o.quiet && tty) std::fprintf(stderr, "\n");
  int64_t end_ns = start_ns;
  for (const GenRecord& r : records) end_ns = std::max(end_ns, r.done_ns);
  double duration_s = std::max(1e-9, static_cast<double>(end_ns - start_ns) / 1e9);

  GenMetrics m = ComputeGenMetrics(records, duration_s, slo);
  std::string table = FormatGenTable(info, m);
  std::fwrite(table.data(), 1, table.size(), out);
  std::fflush(out);
  if (!o.json_file.empty()) {
    KILN_RETURN_IF_ERROR(WriteFile(o.json_file, FormatGenJson(info, m, records)));
  }
  if (!o.html_file.empty()) {
    KILN_RETURN_IF_ERROR(WriteFile(o.html_file, FormatGenHtml(info, m, records)));
  }
  if (m.completed == 0 && !records.empty()) {
    return Status::Unavailable(
        fmt::format("all {} requests failed; the first: {}", records.size(), m.first_error));
  }
  return Status::OK();
}

}  // namespace kiln::bench
