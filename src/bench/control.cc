// SPDX-License-Identifier: Apache-2.0
#include "bench/control.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "bench/net.h"

namespace kiln::bench {
namespace {

using simdjson::dom::element;

std::string ErrorText(const std::string& body) {
  simdjson::dom::parser parser;
  std::string_view msg;
  if (parser.parse(body).get_object()["error"].get(msg) == simdjson::SUCCESS) {
    return std::string(msg);
  }
  return body.substr(0, 300);
}

Status HttpError(const Endpoint& ep, const std::string& what, const HttpReply& r) {
  std::string msg = fmt::format("{} on {} answered HTTP {}: {}", what, ep.ToString(), r.status,
                                ErrorText(r.body));
  if (r.status == 404 || r.status == 400) return Status::NotFound(msg);
  return Status::Unavailable(msg);
}

std::string ModelPath(const std::string& model, const std::string& version) {
  return version.empty() ? "/v2/models/" + model : "/v2/models/" + model + "/versions/" + version;
}

Result<std::vector<TensorSpec>> ParseTensors(element root, const char* key) {
  std::vector<TensorSpec> out;
  simdjson::dom::array arr;
  if (root[key].get(arr) != simdjson::SUCCESS) return out;
  for (element t : arr) {
    TensorSpec s;
    std::string_view name, dt;
    simdjson::dom::array shape;
    if (t["name"].get(name) != simdjson::SUCCESS || t["datatype"].get(dt) != simdjson::SUCCESS ||
        t["shape"].get(shape) != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("model metadata: an entry of '{}' lacks name, datatype or shape", key));
    }
    s.name = name;
    s.datatype = dt;
    for (element d : shape) {
      int64_t v;
      if (d.get(v) != simdjson::SUCCESS) {
        return Status::InvalidArgument(
            fmt::format("model metadata: '{}' has a non-integer dim", s.name));
      }
      s.shape.push_back(v);
    }
    out.push_back(std::move(s));
  }
  return out;
}

class HttpControl : public ControlClient {
 public:
  explicit HttpControl(std::string url) : url_(std::move(url)) {}

  Result<ModelInfo> GetModel(const std::string& model, const std::string& version) override {
    KILN_RETURN_IF_ERROR(Resolve());
    const std::string path = ModelPath(model, version);
    KILN_ASSIGN_OR_RETURN(HttpReply meta, HttpExchange(ep_, "GET", path));
    if (meta.status != 200) {
      return HttpError(ep_,
                       fmt::format("model metadata of '{}'{}", model,
                                   version.empty() ? "" : " version " + version),
                       meta);
    }
    KILN_ASSIGN_OR_RETURN(ModelInfo info, ParseModelMetadataJson(meta.body));
    KILN_ASSIGN_OR_RETURN(HttpReply config, HttpExchange(ep_, "GET", path + "/config"));
    if (config.status != 200) {
      return HttpError(ep_, fmt::format("model config of '{}'", model), config);
    }
    KILN_ASSIGN_OR_RETURN(info.max_batch_size, ParseMaxBatchSizeJson(config.body));
    return info;
  }

  Result<ServerCounters> GetStats(const std::string& model, const std::string& version) override {
    KILN_RETURN_IF_ERROR(Resolve());
    KILN_ASSIGN_OR_RETURN(HttpReply r,
                          HttpExchange(ep_, "GET", ModelPath(model, version) + "/stats"));
    if (r.status != 200) return HttpError(ep_, "statistics", r);
    return ParseStatsJson(r.body, version);
  }

 private:
  Status Resolve() {
    if (resolved_) return Status::OK();
    KILN_ASSIGN_OR_RETURN(ep_, ResolveEndpoint(url_));
    resolved_ = true;
    return Status::OK();
  }
  std::string url_;
  Endpoint ep_;
  bool resolved_ = false;
};

ServerCounters::Duration ParseDuration(element stats, const char* key) {
  ServerCounters::Duration d;
  element e;
  if (stats[key].get(e) == simdjson::SUCCESS) {
    uint64_t v;
    if (e["count"].get(v) == simdjson::SUCCESS) d.count = v;
    if (e["ns"].get(v) == simdjson::SUCCESS) d.ns = v;
  }
  return d;
}

}  // namespace

ServerBreakdown Diff(const ServerCounters& a, const ServerCounters& b) {
  ServerBreakdown s;
  s.present = true;
  auto d = [](uint64_t x, uint64_t y) { return y >= x ? y - x : 0; };
  s.inference_count = d(a.inference_count, b.inference_count);
  s.execution_count = d(a.execution_count, b.execution_count);
  s.success_count = d(a.success.count, b.success.count);
  auto avg = [&](const ServerCounters::Duration& x, const ServerCounters::Duration& y) {
    uint64_t n = d(x.count, y.count);
    return n == 0 ? 0.0 : static_cast<double>(d(x.ns, y.ns)) / static_cast<double>(n) / 1000.0;
  };
  s.request_us = avg(a.success, b.success);
  s.queue_us = avg(a.queue, b.queue);
  s.compute_input_us = avg(a.compute_input, b.compute_input);
  s.compute_infer_us = avg(a.compute_infer, b.compute_infer);
  s.compute_output_us = avg(a.compute_output, b.compute_output);
  s.overhead_us = std::max(0.0, s.request_us - (s.queue_us + s.compute_input_us +
                                                s.compute_infer_us + s.compute_output_us));
  s.mean_batch = s.execution_count == 0 ? 0.0
                                        : static_cast<double>(s.inference_count) /
                                              static_cast<double>(s.execution_count);
  return s;
}

Result<ModelInfo> ParseModelMetadataJson(const std::string& body) {
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(body).get(root) != simdjson::SUCCESS) {
    return Status::InvalidArgument("model metadata is not valid JSON");
  }
  ModelInfo info;
  std::string_view name;
  if (root["name"].get(name) == simdjson::SUCCESS) info.name = name;
  simdjson::dom::array versions;
  if (root["versions"].get(versions) == simdjson::SUCCESS) {
    for (element v : versions) {
      std::string_view s;
      if (v.get(s) == simdjson::SUCCESS) info.versions.emplace_back(s);
    }
  }
  KILN_ASSIGN_OR_RETURN(info.inputs, ParseTensors(root, "inputs"));
  KILN_ASSIGN_OR_RETURN(info.outputs, ParseTensors(root, "outputs"));
  if (info.inputs.empty()) return Status::InvalidArgument("model metadata lists no inputs");
  return info;
}

Result<int> ParseMaxBatchSizeJson(const std::string& body) {
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(body).get(root) != simdjson::SUCCESS) {
    return Status::InvalidArgument("model config is not valid JSON");
  }
  int64_t v = 0;
  if (root["max_batch_size"].get(v) != simdjson::SUCCESS) return 0;
  return static_cast<int>(v);
}

Result<ServerCounters> ParseStatsJson(const std::string& body, const std::string& version) {
  simdjson::dom::parser parser;
  simdjson::dom::array stats;
  if (parser.parse(body)["model_stats"].get(stats) != simdjson::SUCCESS) {
    return Status::InvalidArgument("statistics: no \"model_stats\" array");
  }
  // The requested version, else the numerically highest one (as perf_analyzer picks).
  element best;
  int64_t best_version = -1;
  for (element e : stats) {
    std::string_view v;
    if (e["version"].get(v) != simdjson::SUCCESS) continue;
    int64_t n = std::atoll(std::string(v).c_str());
    if ((!version.empty() && v == version) || (version.empty() && n > best_version)) {
      best = e;
      best_version = n;
      if (!version.empty()) break;
    }
  }
  if (best_version < 0) return Status::NotFound("statistics: no entry for the model version");
  ServerCounters c;
  uint64_t v;
  if (best["inference_count"].get(v) == simdjson::SUCCESS) c.inference_count = v;
  if (best["execution_count"].get(v) == simdjson::SUCCESS) c.execution_count = v;
  element is;
  if (best["inference_stats"].get(is) == simdjson::SUCCESS) {
    c.success = ParseDuration(is, "success");
    c.fail = ParseDuration(is, "fail");
    c.queue = ParseDuration(is, "queue");
    c.compute_input = ParseDuration(is, "compute_input");
    c.compute_infer = ParseDuration(is, "compute_infer");
    c.compute_output = ParseDuration(is, "compute_output");
  }
  return c;
}

std::unique_ptr<ControlClient> MakeHttpControl(const std::string& url) {
  return std::make_unique<HttpControl>(url);
}

}  // namespace kiln::bench
