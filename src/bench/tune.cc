// SPDX-License-Identifier: Apache-2.0
#include "bench/tune.h"

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

#include "base/check.h"
#include "bench/stamp.h"

namespace kiln::bench {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string JoinInts(const std::vector<int>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + std::to_string(v[i]);
  return out;
}

bool Successful(const TunePoint& p) { return p.requests > p.errors; }

// The order among points meeting the budget: higher throughput, then lower p99, then lower
// concurrency.
bool RanksAbove(const TunePoint& a, const TunePoint& b) {
  if (a.throughput != b.throughput) return a.throughput > b.throughput;
  if (a.p99_us != b.p99_us) return a.p99_us < b.p99_us;
  return a.concurrency < b.concurrency;
}

// Closer to the budget: lower p99, then higher throughput.
bool Closer(const TunePoint& a, const TunePoint& b) {
  if (a.p99_us != b.p99_us) return a.p99_us < b.p99_us;
  return a.throughput > b.throughput;
}

// A field of `m` by name, of the expected C++ type; null when absent or of another type.
const FieldDescriptor* FindField(const Message& m, const char* name, FieldDescriptor::CppType t) {
  const FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(name);
  return f != nullptr && f->cpp_type() == t ? f : nullptr;
}

Status MissingField(const Message& m, const char* name) {
  return Status::FailedPrecondition(
      fmt::format("the model config ({}) has no field '{}'", m.GetDescriptor()->full_name(), name));
}

constexpr auto kInt32 = FieldDescriptor::CPPTYPE_INT32;
constexpr auto kUInt64 = FieldDescriptor::CPPTYPE_UINT64;
constexpr auto kString = FieldDescriptor::CPPTYPE_STRING;
constexpr auto kMessage = FieldDescriptor::CPPTYPE_MESSAGE;

}  // namespace

std::string TuneSettings::Label() const {
  std::string out =
      fmt::format("instances={} threads={} max_batch={}", instances,
                  threads > 0 ? std::to_string(threads) : std::string("server"), max_batch_size);
  if (dynamic_batching) {
    out +=
        fmt::format(" delay_us={} preferred={}", max_queue_delay_us,
                    preferred_batch_sizes.empty() ? "none" : JoinInts(preferred_batch_sizes, ","));
  } else {
    out += " batching=off";
  }
  out += " precision=" + (precision.empty() ? std::string("default") : precision);
  return out;
}

TuneSettings Normalized(TuneSettings s) {
  if (!s.dynamic_batching) {
    s.max_queue_delay_us = 0;
    s.preferred_batch_sizes.clear();
  }
  std::erase_if(s.preferred_batch_sizes, [&](int b) { return b > s.max_batch_size || b < 1; });
  std::sort(s.preferred_batch_sizes.begin(), s.preferred_batch_sizes.end());
  s.preferred_batch_sizes.erase(
      std::unique(s.preferred_batch_sizes.begin(), s.preferred_batch_sizes.end()),
      s.preferred_batch_sizes.end());
  return s;
}

const char* DimensionName(TuneDimension d) {
  switch (d) {
    case TuneDimension::kMaxBatchSize:
      return "max_batch_size";
    case TuneDimension::kMaxQueueDelay:
      return "max_queue_delay_us";
    case TuneDimension::kPreferred:
      return "preferred_batch_size";
    case TuneDimension::kInstances:
      return "instances";
    case TuneDimension::kThreads:
      return "threads";
    case TuneDimension::kPrecision:
      return "precision";
  }
  return "?";
}

namespace {

size_t ValueCount(const TuneSpace& space, TuneDimension d) {
  switch (d) {
    case TuneDimension::kMaxBatchSize:
      return space.max_batch_size.size();
    case TuneDimension::kMaxQueueDelay:
      return space.max_queue_delay_us.size();
    case TuneDimension::kPreferred:
      return space.preferred_batch_sizes.size();
    case TuneDimension::kInstances:
      return space.instances.size();
    case TuneDimension::kThreads:
      return space.threads.size();
    case TuneDimension::kPrecision:
      return space.precision.size();
  }
  return 0;
}

}  // namespace

TuneSettings WithValue(const TuneSettings& base, const TuneSpace& space, TuneDimension d,
                       size_t index) {
  KILN_CHECK(index < ValueCount(space, d), "WithValue: no value ", index, " of ", DimensionName(d));
  TuneSettings s = base;
  switch (d) {
    case TuneDimension::kMaxBatchSize:
      s.max_batch_size = space.max_batch_size[index];
      s.dynamic_batching = true;
      break;
    case TuneDimension::kMaxQueueDelay:
      s.max_queue_delay_us = space.max_queue_delay_us[index];
      s.dynamic_batching = true;
      break;
    case TuneDimension::kPreferred:
      s.preferred_batch_sizes = space.preferred_batch_sizes[index];
      s.dynamic_batching = true;
      break;
    case TuneDimension::kInstances:
      s.instances = space.instances[index];
      break;
    case TuneDimension::kThreads:
      s.threads = space.threads[index];
      break;
    case TuneDimension::kPrecision:
      s.precision = space.precision[index];
      break;
  }
  return Normalized(std::move(s));
}

bool MeetsBudget(const TunePoint& p, double budget_us) {
  return Successful(p) && p.errors == 0 && p.p99_us <= budget_us;
}

int NextConcurrency(std::span<const TunePoint> points, double budget_us, int max_concurrency,
                    double min_gain) {
  if (points.empty()) return max_concurrency >= 1 ? 1 : 0;
  const TunePoint& last = points.back();
  if (!MeetsBudget(last, budget_us)) return 0;
  if (points.size() >= 2) {
    double best_before = 0;
    for (size_t i = 0; i + 1 < points.size(); ++i) {
      best_before = std::max(best_before, points[i].throughput);
    }
    if (last.throughput < best_before * (1 + min_gain)) return 0;
  }
  const int next = last.concurrency * 2;
  return next <= max_concurrency ? next : 0;
}

std::optional<size_t> BestPointOf(const TuneConfigResult& config, double budget_us) {
  std::optional<size_t> meeting, closest;
  for (size_t i = 0; i < config.points.size(); ++i) {
    const TunePoint& p = config.points[i];
    if (!Successful(p)) continue;
    if (MeetsBudget(p, budget_us)) {
      if (!meeting || RanksAbove(p, config.points[*meeting])) meeting = i;
    } else if (!closest || Closer(p, config.points[*closest])) {
      closest = i;
    }
  }
  return meeting ? meeting : closest;
}

bool BetterConfig(const TuneConfigResult& a, const TuneConfigResult& b, double budget_us) {
  std::optional<size_t> ia = BestPointOf(a, budget_us);
  std::optional<size_t> ib = BestPointOf(b, budget_us);
  if (!ia) return false;
  if (!ib) return true;
  const TunePoint& pa = a.points[*ia];
  const TunePoint& pb = b.points[*ib];
  const bool ma = MeetsBudget(pa, budget_us);
  const bool mb = MeetsBudget(pb, budget_us);
  if (ma != mb) return ma;
  if (ma) {
    if (pa.throughput != pb.throughput) return pa.throughput > pb.throughput;
    return pa.p99_us < pb.p99_us;
  }
  return Closer(pa, pb);
}

std::optional<PointRef> PickWinner(std::span<const TuneConfigResult> results, double budget_us) {
  std::optional<PointRef> best;
  for (size_t c = 0; c < results.size(); ++c) {
    for (size_t i = 0; i < results[c].points.size(); ++i) {
      const TunePoint& p = results[c].points[i];
      if (!MeetsBudget(p, budget_us)) continue;
      if (!best || RanksAbove(p, results[best->config].points[best->point])) best = PointRef{c, i};
    }
  }
  return best;
}

std::optional<PointRef> ClosestPoint(std::span<const TuneConfigResult> results) {
  std::optional<PointRef> best;
  for (size_t c = 0; c < results.size(); ++c) {
    for (size_t i = 0; i < results[c].points.size(); ++i) {
      const TunePoint& p = results[c].points[i];
      if (!Successful(p)) continue;
      if (!best || Closer(p, results[best->config].points[best->point])) best = PointRef{c, i};
    }
  }
  return best;
}

CoordinateSearch::CoordinateSearch(TuneSpace space, TuneSettings start, double budget_us,
                                   int max_configs, int max_passes)
    : space_(std::move(space)),
      budget_us_(budget_us),
      max_configs_(max_configs),
      max_passes_(max_passes),
      start_(Normalized(std::move(start))) {
  KILN_CHECK(max_configs >= 1 && max_passes >= 1, "CoordinateSearch: max_configs ", max_configs,
             ", max_passes ", max_passes);
}

std::optional<TuneSettings> CoordinateSearch::Next() {
  KILN_CHECK(!pending_, "CoordinateSearch::Next before the previous config was reported");
  if (done_) return std::nullopt;
  if (start_) {
    TuneSettings s = *std::move(start_);
    start_.reset();
    seen_.insert(s.Label());
    dimension_.reset();
    pending_ = true;
    return s;
  }
  if (static_cast<int>(results_.size()) >= max_configs_ || (queue_.empty() && !Advance())) {
    done_ = true;
    return std::nullopt;
  }
  TuneSettings s = std::move(queue_.front());
  queue_.erase(queue_.begin());
  pending_ = true;
  return s;
}

void CoordinateSearch::Report(TuneConfigResult result) {
  KILN_CHECK(pending_, "CoordinateSearch::Report without a config from Next");
  pending_ = false;
  results_.push_back(std::move(result));
  if (results_.size() > 1 && BetterConfig(results_.back(), results_[best_], budget_us_)) {
    best_ = results_.size() - 1;
  }
}

bool CoordinateSearch::Advance() {
  constexpr size_t kDimensions = std::size(kDimensionOrder);
  while (queue_.empty()) {
    if (dim_index_ == kDimensions) {
      ++pass_;
      if (pass_ >= max_passes_ || best_ == best_at_pass_start_) return false;
      best_at_pass_start_ = best_;
      dim_index_ = 0;
    }
    const TuneDimension d = kDimensionOrder[dim_index_++];
    const TuneSettings base = results_[best_].settings;
    for (size_t i = 0; i < ValueCount(space_, d); ++i) {
      TuneSettings s = WithValue(base, space_, d, i);
      if (seen_.insert(s.Label()).second) queue_.push_back(std::move(s));
    }
    dimension_ = d;
  }
  return true;
}

namespace {

// The config parameter of a model's intra-op threads, and ONNX Runtime's spelling of it
// (repo/model_config.h kIntraOpThreadsParameter; bench may not include the repository).
constexpr std::string_view kThreadsParameter = "kiln.intra_op_threads";
constexpr std::string_view kOrtThreadsParameter = "intra_op_thread_count";

// The key and string value of one `parameters` map entry (a ModelParameter value).
std::pair<std::string, std::string> ParameterEntry(const Message& entry) {
  const Reflection* er = entry.GetReflection();
  const FieldDescriptor* key = FindField(entry, "key", kString);
  const FieldDescriptor* value = FindField(entry, "value", kMessage);
  if (key == nullptr || value == nullptr) return {};
  const Message& v = er->GetMessage(entry, value);
  const FieldDescriptor* text = FindField(v, "string_value", kString);
  return {er->GetString(entry, key), text != nullptr ? v.GetReflection()->GetString(v, text) : ""};
}

}  // namespace

TuneSettings SettingsFromConfig(const Message& config) {
  TuneSettings s;
  const Reflection* r = config.GetReflection();
  if (const FieldDescriptor* f = FindField(config, "max_batch_size", kInt32)) {
    s.max_batch_size = r->GetInt32(config, f);
  }
  if (const FieldDescriptor* f = FindField(config, "instance_group", kMessage);
      f != nullptr && f->is_repeated() && r->FieldSize(config, f) > 0) {
    s.instances = 0;
    for (int i = 0; i < r->FieldSize(config, f); ++i) {
      const Message& g = r->GetRepeatedMessage(config, f, i);
      const FieldDescriptor* count = FindField(g, "count", kInt32);
      s.instances += count != nullptr ? g.GetReflection()->GetInt32(g, count) : 1;
    }
  }
  if (const FieldDescriptor* f = FindField(config, "dynamic_batching", kMessage);
      f != nullptr && !f->is_repeated() && r->HasField(config, f)) {
    s.dynamic_batching = true;
    const Message& db = r->GetMessage(config, f);
    const Reflection* dr = db.GetReflection();
    if (const FieldDescriptor* d = FindField(db, "max_queue_delay_microseconds", kUInt64)) {
      s.max_queue_delay_us = static_cast<int64_t>(dr->GetUInt64(db, d));
    }
    if (const FieldDescriptor* p = FindField(db, "preferred_batch_size", kInt32);
        p != nullptr && p->is_repeated()) {
      for (int i = 0; i < dr->FieldSize(db, p); ++i) {
        s.preferred_batch_sizes.push_back(dr->GetRepeatedInt32(db, p, i));
      }
    }
  }
  if (const FieldDescriptor* f = FindField(config, "optimization", kMessage);
      f != nullptr && !f->is_repeated() && r->HasField(config, f)) {
    const Message& opt = r->GetMessage(config, f);
    if (const FieldDescriptor* p = FindField(opt, "precision", kString)) {
      s.precision = opt.GetReflection()->GetString(opt, p);
    }
  }
  if (const FieldDescriptor* f = FindField(config, "parameters", kMessage);
      f != nullptr && f->is_repeated()) {
    int kiln = 0, ort = 0;
    for (int i = 0; i < r->FieldSize(config, f); ++i) {
      const auto [key, value] = ParameterEntry(r->GetRepeatedMessage(config, f, i));
      int n = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 0) continue;
      if (key == kThreadsParameter) kiln = n;
      if (key == kOrtThreadsParameter) ort = n;
    }
    s.threads = kiln > 0 ? kiln : ort;
  }
  return s;
}

Status ApplySettings(const TuneSettings& settings, Message* config) {
  const TuneSettings s = Normalized(settings);
  const Reflection* r = config->GetReflection();
  const FieldDescriptor* mbs = FindField(*config, "max_batch_size", kInt32);
  if (mbs == nullptr) return MissingField(*config, "max_batch_size");
  r->SetInt32(config, mbs, s.max_batch_size);

  const FieldDescriptor* groups = FindField(*config, "instance_group", kMessage);
  if (groups == nullptr || !groups->is_repeated()) return MissingField(*config, "instance_group");
  const int group_count = r->FieldSize(*config, groups);
  if (group_count > 1) {
    if (SettingsFromConfig(*config).instances != s.instances) {
      return Status::FailedPrecondition(fmt::format(
          "the model config has {} instance groups; kiln tune sets the instance count of a "
          "config with one group only",
          group_count));
    }
  } else {
    Message* g = group_count == 0 ? r->AddMessage(config, groups)
                                  : r->MutableRepeatedMessage(config, groups, 0);
    const FieldDescriptor* count = FindField(*g, "count", kInt32);
    if (count == nullptr) return MissingField(*g, "count");
    g->GetReflection()->SetInt32(g, count, s.instances);
  }

  const FieldDescriptor* db_field = FindField(*config, "dynamic_batching", kMessage);
  if (db_field == nullptr) return MissingField(*config, "dynamic_batching");
  if (s.dynamic_batching) {
    Message* db = r->MutableMessage(config, db_field);
    const Reflection* dr = db->GetReflection();
    const FieldDescriptor* delay = FindField(*db, "max_queue_delay_microseconds", kUInt64);
    const FieldDescriptor* preferred = FindField(*db, "preferred_batch_size", kInt32);
    if (delay == nullptr) return MissingField(*db, "max_queue_delay_microseconds");
    if (preferred == nullptr) return MissingField(*db, "preferred_batch_size");
    dr->SetUInt64(db, delay, static_cast<uint64_t>(s.max_queue_delay_us));
    dr->ClearField(db, preferred);
    for (int b : s.preferred_batch_sizes) dr->AddInt32(db, preferred, b);
  } else {
    r->ClearField(config, db_field);
  }

  const FieldDescriptor* opt_field = FindField(*config, "optimization", kMessage);
  if (opt_field == nullptr) return MissingField(*config, "optimization");
  if (!s.precision.empty() || r->HasField(*config, opt_field)) {
    Message* opt = r->MutableMessage(config, opt_field);
    const FieldDescriptor* precision = FindField(*opt, "precision", kString);
    if (precision == nullptr) return MissingField(*opt, "precision");
    opt->GetReflection()->SetString(opt, precision, s.precision);
  }

  // Threads: the parameter replaced (ONNX Runtime's spelling dropped, so the two never
  // disagree), or removed for the server's setting.
  const FieldDescriptor* params = FindField(*config, "parameters", kMessage);
  if (params == nullptr || !params->is_repeated()) return MissingField(*config, "parameters");
  for (int i = r->FieldSize(*config, params) - 1; i >= 0; --i) {
    const std::string key = ParameterEntry(r->GetRepeatedMessage(*config, params, i)).first;
    if (key == kThreadsParameter || key == kOrtThreadsParameter) {
      r->SwapElements(config, params, i, r->FieldSize(*config, params) - 1);
      r->RemoveLast(config, params);
    }
  }
  if (s.threads > 0) {
    Message* entry = r->AddMessage(config, params);
    const Reflection* er = entry->GetReflection();
    const FieldDescriptor* key = FindField(*entry, "key", kString);
    const FieldDescriptor* value = FindField(*entry, "value", kMessage);
    if (key == nullptr || value == nullptr) return MissingField(*entry, "key / value");
    er->SetString(entry, key, std::string(kThreadsParameter));
    Message* v = er->MutableMessage(entry, value);
    const FieldDescriptor* text = FindField(*v, "string_value", kString);
    if (text == nullptr) return MissingField(*v, "string_value");
    v->GetReflection()->SetString(v, text, std::to_string(s.threads));
  }
  return Status::OK();
}

std::string CalibrationDir(const Message& config) {
  const FieldDescriptor* f = FindField(config, "optimization", kMessage);
  if (f == nullptr || f->is_repeated() || !config.GetReflection()->HasField(config, f)) return "";
  const Message& opt = config.GetReflection()->GetMessage(config, f);
  const FieldDescriptor* dir = FindField(opt, "calibration_dir", kString);
  return dir != nullptr ? opt.GetReflection()->GetString(opt, dir) : "";
}

Status ParseConfigJson(std::string_view json, Message* config) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  options.case_insensitive_enum_parsing = true;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), config, options);
  if (!status.ok()) {
    return Status::InvalidArgument(fmt::format("the model config is not valid JSON for {}: {}",
                                               config->GetDescriptor()->full_name(),
                                               std::string(status.message())));
  }
  return Status::OK();
}

Result<std::string> ConfigJson(const Message& config) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(config, &out, options);
  if (!status.ok()) {
    return Status::Internal(
        fmt::format("cannot write the model config as JSON: {}", std::string(status.message())));
  }
  return out;
}

std::string ConfigPbtxt(const Message& config, std::span<const std::string> header) {
  std::string out;
  for (const std::string& line : header) out += "# " + line + "\n";
  std::string body;
  google::protobuf::TextFormat::PrintToString(config, &body);
  return out + body;
}

namespace {

bool IsWinner(std::optional<PointRef> winner, size_t c, size_t i) {
  return winner && winner->config == c && winner->point == i;
}

}  // namespace

std::string FormatTuneCsv(std::span<const TuneConfigResult> results, double budget_us,
                          std::optional<PointRef> winner) {
  std::string out =
      "config,instances,threads,max_batch_size,dynamic_batching,max_queue_delay_us,"
      "preferred_batch_size,precision,concurrency,throughput_infer_s,p50_us,p99_us,requests,"
      "errors,meets_budget,winner\n";
  for (size_t c = 0; c < results.size(); ++c) {
    const TuneSettings& s = results[c].settings;
    for (size_t i = 0; i < results[c].points.size(); ++i) {
      const TunePoint& p = results[c].points[i];
      out += fmt::format("{},{},{},{},{},{},{},{},{},{:.2f},{:.1f},{:.1f},{},{},{},{}\n", c,
                         s.instances, s.threads, s.max_batch_size, s.dynamic_batching ? 1 : 0,
                         s.max_queue_delay_us, JoinInts(s.preferred_batch_sizes, " "), s.precision,
                         p.concurrency, p.throughput, p.p50_us, p.p99_us, p.requests, p.errors,
                         MeetsBudget(p, budget_us) ? 1 : 0, IsWinner(winner, c, i) ? 1 : 0);
    }
  }
  return out;
}

std::string FormatTuneTable(std::span<const TuneConfigResult> results, double budget_us,
                            std::optional<PointRef> winner) {
  size_t width = 8;
  for (const TuneConfigResult& r : results) width = std::max(width, r.settings.Label().size());
  std::string out = fmt::format("{:>3}  {:<{}}  {:>5}  {:>10}  {:>9}  {:>9}  {}\n", "#", "config",
                                width, "conc", "infer/s", "p50 ms", "p99 ms", "meets budget");
  for (size_t c = 0; c < results.size(); ++c) {
    const TuneConfigResult& r = results[c];
    const std::string label = r.settings.Label();
    if (r.points.empty()) {
      out += fmt::format("{:>3}  {:<{}}  failed: {}\n", c, label, width,
                         r.error.empty() ? "no point measured" : r.error);
      continue;
    }
    for (size_t i = 0; i < r.points.size(); ++i) {
      const TunePoint& p = r.points[i];
      std::string meets = MeetsBudget(p, budget_us) ? "yes" : "no";
      if (p.errors > 0) meets += fmt::format(" ({} errors)", p.errors);
      if (IsWinner(winner, c, i)) meets += "  <- winner";
      out += fmt::format("{:>3}  {:<{}}  {:>5}  {:>10.1f}  {:>9.3f}  {:>9.3f}  {}\n", c,
                         i == 0 ? label : "", width, p.concurrency, p.throughput, p.p50_us / 1000,
                         p.p99_us / 1000, meets);
    }
    if (!r.error.empty()) out += fmt::format("{:>3}  {:<{}}  stopped: {}\n", c, "", width, r.error);
  }
  return out;
}

std::string FormatTuneHtml(std::span<const TuneConfigResult> results, double budget_us,
                           std::optional<PointRef> winner, const std::string& title) {
  static constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                            "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79"};
  constexpr double kW = 760, kH = 420, kLeft = 70, kRight = 20, kTop = 20, kBottom = 50;
  const double budget_ms = budget_us / 1000;
  double x_max = 1, y_max = budget_ms;
  for (const TuneConfigResult& r : results) {
    for (const TunePoint& p : r.points) {
      x_max = std::max(x_max, p.throughput);
      y_max = std::max(y_max, p.p99_us / 1000);
    }
  }
  // Points far over the budget would flatten the region that matters: the axis stops at four
  // budgets and such points sit on its top edge (their tooltips keep the true value).
  y_max = std::min(y_max, 4 * budget_ms) * 1.1;
  x_max *= 1.05;
  auto px = [&](double v) { return kLeft + (kW - kLeft - kRight) * v / x_max; };
  auto py = [&](double v) {
    return kH - kBottom - (kH - kTop - kBottom) * std::min(v, y_max) / y_max;
  };

  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' viewBox='0 0 {0} {1}'>"
      "<rect width='100%' height='100%' fill='white'/>"
      "<line x1='{2}' y1='{3}' x2='{4}' y2='{3}' stroke='black'/>"
      "<line x1='{2}' y1='{3}' x2='{2}' y2='{5}' stroke='black'/>",
      kW, kH, kLeft, kH - kBottom, kW - kRight, kTop);
  for (int k = 0; k <= 4; ++k) {
    const double xv = x_max * k / 4, yv = y_max * k / 4;
    svg += fmt::format(
        "<text x='{:.1f}' y='{:.1f}' font-size='11' text-anchor='middle'>{:.0f}</text>"
        "<text x='{:.1f}' y='{:.1f}' font-size='11' text-anchor='end'>{:.3g}</text>",
        px(xv), kH - kBottom + 16, xv, kLeft - 6, py(yv) + 4, yv);
  }
  svg += fmt::format(
      "<text x='{:.1f}' y='{:.1f}' font-size='12' text-anchor='middle'>throughput (infer/s)"
      "</text><text x='14' y='{:.1f}' font-size='12' text-anchor='middle' "
      "transform='rotate(-90 14 {:.1f})'>p99 latency (ms)</text>",
      (kLeft + kW - kRight) / 2, kH - 12, (kTop + kH - kBottom) / 2, (kTop + kH - kBottom) / 2);
  svg += fmt::format(
      "<line class='budget' x1='{0}' y1='{1:.1f}' x2='{2}' y2='{1:.1f}' stroke='#d62728' "
      "stroke-dasharray='6 4'/><text x='{3}' y='{4:.1f}' font-size='11' fill='#d62728' "
      "text-anchor='end'>budget {5:g} ms</text>",
      kLeft, py(budget_ms), kW - kRight, kW - kRight - 4, py(budget_ms) - 4, budget_ms);
  std::string legend;
  for (size_t c = 0; c < results.size(); ++c) {
    const TuneConfigResult& r = results[c];
    const char* color = kColors[c % std::size(kColors)];
    const std::string label = HtmlEscape(r.settings.Label());
    legend += fmt::format("<li><span style='background:{}'></span>#{} {}{}</li>", color, c, label,
                          r.points.empty() ? " (failed: " + HtmlEscape(r.error) + ")" : "");
    if (r.points.empty()) continue;
    std::string line;
    for (const TunePoint& p : r.points) {
      line += fmt::format("{:.1f},{:.1f} ", px(p.throughput), py(p.p99_us / 1000));
    }
    svg += fmt::format("<polyline fill='none' stroke='{}' stroke-width='1.5' points='{}'/>", color,
                       line);
    for (const TunePoint& p : r.points) {
      svg += fmt::format(
          "<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'><title>#{} {}, concurrency {}: "
          "{:.1f} infer/s, p99 {:.3f} ms</title></circle>",
          px(p.throughput), py(p.p99_us / 1000), color, c, label, p.concurrency, p.throughput,
          p.p99_us / 1000);
    }
  }
  if (winner) {
    const TunePoint& p = results[winner->config].points[winner->point];
    svg += fmt::format(
        "<circle class='winner' cx='{0:.1f}' cy='{1:.1f}' r='9' fill='none' stroke='black' "
        "stroke-width='2'/><text x='{0:.1f}' y='{2:.1f}' font-size='12' "
        "text-anchor='middle'>winner</text>",
        px(p.throughput), py(p.p99_us / 1000), py(p.p99_us / 1000) - 14);
  }
  svg += "</svg>";

  std::string rows;
  for (size_t c = 0; c < results.size(); ++c) {
    for (size_t i = 0; i < results[c].points.size(); ++i) {
      const TunePoint& p = results[c].points[i];
      rows += fmt::format(
          "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.3f}</td><td>{:.3f}</td>"
          "<td>{}</td></tr>",
          IsWinner(winner, c, i) ? " class='win'" : "", c, HtmlEscape(results[c].settings.Label()),
          p.concurrency, p.throughput, p.p50_us / 1000, p.p99_us / 1000,
          MeetsBudget(p, budget_us) ? "yes" : "no");
    }
  }
  std::string verdict = winner
                            ? fmt::format("Winner: #{} {} at concurrency {}", winner->config,
                                          HtmlEscape(results[winner->config].settings.Label()),
                                          results[winner->config].points[winner->point].concurrency)
                            : std::string("No point met the budget.");
  return fmt::format(
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>{0}</title><style>"
      "body{{font-family:sans-serif;margin:20px}}table{{border-collapse:collapse}}"
      "td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}"
      "tr.win{{font-weight:bold;background:#ffe}}ul{{list-style:none;padding:0}}"
      "li span{{display:inline-block;width:12px;height:12px;margin-right:6px}}"
      "</style></head><body><h1>{0}</h1><p>Latency budget: p99 &lt;= {1:g} ms. {2}</p>{3}"
      "<ul>{4}</ul><table><tr><th>#</th><th>config</th><th>concurrency</th><th>infer/s</th>"
      "<th>p50 ms</th><th>p99 ms</th><th>meets budget</th></tr>{5}</table></body></html>\n",
      HtmlEscape(title), budget_ms, verdict, svg, legend, rows);
}

Result<std::vector<int64_t>> ParseIntList(std::string_view text, std::string_view flag,
                                          bool allow_zero) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(pos, end - pos);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || v < 0 ||
        (v == 0 && !allow_zero)) {
      return Status::InvalidArgument(
          fmt::format("{} '{}': expected a comma-separated list of {} integers", flag, text,
                      allow_zero ? "non-negative" : "positive"));
    }
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

Result<std::vector<int>> ParsePreferredChoice(std::string_view text) {
  if (text == "none") return std::vector<int>{};
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                        ParseIntList(text, "--preferred-batch-size", false));
  std::vector<int> out;
  for (int64_t s : sizes) {
    if (s > (1 << 30)) {
      return Status::InvalidArgument(fmt::format("--preferred-batch-size '{}': too large", text));
    }
    out.push_back(static_cast<int>(s));
  }
  return out;
}

}  // namespace kiln::bench
