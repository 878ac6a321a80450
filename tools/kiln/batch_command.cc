// SPDX-License-Identifier: Apache-2.0
// `kiln batch`: offline batch inference (docs/batch.md). Loads one model of a repository in
// process (explicit model control, the same config handling as `kiln serve`, no sockets), runs
// every row of an input on it with a bounded number of requests in flight, and writes each
// row's result as soon as it is done:
//
//   kiln batch --model-repository models --model add_sub --input rows/            # rows.out/
//   kiln batch --model-repository models --model add_sub --input requests.jsonl   # KServe v2
//   kiln batch --model-repository models --model tiny_lm --input batch.jsonl
//       --output results.jsonl --resume                                           # OpenAI batch
//
// Inputs (--format auto tells them apart): a directory of tensor files (tools/kiln/batch_dir.h),
// a JSONL file of KServe v2 inference requests, or a JSONL file in OpenAI's Batch API format for
// a generative model (server/batch/batch_jsonl.h); the rows are answered as the HTTP server
// answers the same requests (server/batch/batch_rows.h).
//
// Resuming: an existing output is refused unless --resume, which keeps the rows it holds and
// does only the others (a torn last line is dropped and its row redone). An empty output counts
// as none, so a job can always pass --resume.
//
// Exit status: 0 every row succeeded; 1 some rows failed (their errors are in the output);
// 2 bad flags or input, a model that does not load, an output that cannot be written;
// 128 + N when signal N (SIGINT, SIGTERM) stopped it (finished rows are written; --resume goes on).

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "repo/llm_model.h"
#include "repo/model_config.pb.h"
#include "repo/model_manager.h"
#include "runtime/thread_budget.h"
#include "server/batch/batch_jsonl.h"
#include "server/batch/batch_progress.h"
#include "server/batch/batch_rows.h"
#include "tools/kiln/batch_dir.h"
#include "tools/kiln/batch_driver.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/devices.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;
using batch::JsonlFormat;

constexpr int kExitUsage = 2;
constexpr auto kSyncInterval = std::chrono::seconds(1);

struct BatchOptions {
  std::string model_repository;
  std::string model;
  int64_t model_version = -1;
  std::string input;
  std::string output;
  std::string format = "auto";
  std::string output_format = "npy";
  int concurrency = 0;  // 0: the model's default (DefaultConcurrency)
  int batch_size = 1;
  bool resume = false;
  bool retry_failed = false;
  bool quiet = false;
  double progress_interval_s = 5;
  DeviceFlags devices;
};

int Fail(const Status& status, int code = kExitUsage) {
  std::fprintf(stderr, "kiln batch: %s\n", status.message().c_str());
  return code;
}

std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// <input>.out/ for a directory; <input without .jsonl>.out.jsonl for a file.
std::string DefaultOutput(const std::string& input, bool is_dir) {
  std::string base = WithoutTrailingSlashes(input);
  if (is_dir) return base + ".out";
  const fs::path p(base);
  if (p.extension() == ".jsonl") base = (p.parent_path() / p.stem()).string();
  return base + ".out.jsonl";
}

// Appends whole lines to the output file, each with one write(2) (batch_jsonl.h's torn-line
// rule relies on it), and syncs them to disk every second and at the end.
class LineWriter {
 public:
  static Result<std::unique_ptr<LineWriter>> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      return Status::InvalidArgument(
          fmt::format("cannot open --output '{}' for writing: {}", path, std::strerror(errno)));
    }
    return std::unique_ptr<LineWriter>(new LineWriter(path, fd));
  }
  ~LineWriter() { ::close(fd_); }
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  Status Write(std::string_view line) {
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return Status::Internal(
            fmt::format("cannot write --output '{}': {}", path_, std::strerror(errno)));
      }
      done += static_cast<size_t>(n);
    }
    if (std::chrono::steady_clock::now() - last_sync_ >= kSyncInterval) return Sync();
    return Status::OK();
  }

  Status Sync() {
    last_sync_ = std::chrono::steady_clock::now();
    if (::fdatasync(fd_) != 0 && errno != EINVAL) {
      return Status::Internal(
          fmt::format("cannot sync --output '{}': {}", path_, std::strerror(errno)));
    }
    return Status::OK();
  }

 private:
  LineWriter(std::string path, int fd)
      : path_(std::move(path)), fd_(fd), last_sync_(std::chrono::steady_clock::now()) {}
  const std::string path_;
  const int fd_;
  std::chrono::steady_clock::time_point last_sync_;
};

// Requests in flight by default: a generative model's max_num_seqs (what fills its continuous
// batches); for a tensor model two per instance, times the rows one batch can gather when the
// model batches dynamically.
int DefaultConcurrency(const LoadedModel& model, int batch_size) {
  const inference::ModelConfig* config = model.model_config();
  if (model.generative()) {
    if (config != nullptr) {
      Result<LlmServingOptions> options = LlmOptionsFromConfig(*config);
      if (options.ok()) return static_cast<int>(std::max<int64_t>(1, options->policy.max_num_seqs));
    }
    return 64;
  }
  int instances = 0;
  if (config != nullptr) {
    for (const inference::ModelInstanceGroup& g : config->instance_group()) {
      instances += std::max(0, g.count());
    }
  }
  int concurrency = 2 * std::max(1, instances);
  if (config != nullptr && config->has_dynamic_batching() &&
      config->max_batch_size() > batch_size) {
    concurrency *= config->max_batch_size() / batch_size;
  }
  return std::min(concurrency, 1024);
}

// The model manager with `opt.model` loaded, as `kiln serve --model-control-mode explicit
// --load-model M` loads it.
Result<std::unique_ptr<ModelManager>> StartModel(const BatchOptions& opt) {
  ModelManagerOptions mopt;
  mopt.repository_path = opt.model_repository;
  mopt.control_mode = ModelControlMode::kExplicit;
  mopt.startup_models = {opt.model};
  // One budget for the runs of the model's instances, for the life of the process.
  static std::unique_ptr<ThreadBudget> budget;
  budget = std::make_unique<ThreadBudget>(
      std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  mopt.instance_options.thread_budget = budget.get();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ModelManager> manager, ModelManager::Create(mopt));
  if (Status load = manager->LoadInitialModels(); !load.ok()) {
    manager->Shutdown();
    return Status::InvalidArgument(
        fmt::format("model '{}' did not load: {}", opt.model, load.message()));
  }
  return manager;
}

// The input's format from --format and what the input is.
struct InputPlan {
  bool is_dir = false;
  TensorFileKind file_kind = TensorFileKind::kAny;
  std::optional<JsonlFormat> jsonl;  // nullopt with a file: detect
};

Result<InputPlan> PlanInput(const BatchOptions& opt) {
  std::error_code ec;
  const fs::file_status st = fs::status(opt.input, ec);
  if (ec || !fs::exists(st)) {
    return Status::NotFound(fmt::format("--input '{}' does not exist", opt.input));
  }
  InputPlan plan;
  plan.is_dir = fs::is_directory(st);
  const std::string& f = opt.format;
  if (plan.is_dir) {
    if (f == "kserve-jsonl" || f == "openai-jsonl") {
      return Status::InvalidArgument(fmt::format(
          "--format {} needs a JSONL file, but --input '{}' is a directory", f, opt.input));
    }
    plan.file_kind = f == "npy" ? TensorFileKind::kNpy
                                : (f == "pb" ? TensorFileKind::kPb : TensorFileKind::kAny);
    return plan;
  }
  if (f == "npy" || f == "pb") {
    return Status::InvalidArgument(
        fmt::format("--format {} needs a directory of row files (<row>.{} or <row>/<input>.{}), "
                    "but --input '{}' is a file",
                    f, f, f, opt.input));
  }
  if (f == "kserve-jsonl") plan.jsonl = JsonlFormat::kKserve;
  if (f == "openai-jsonl") plan.jsonl = JsonlFormat::kOpenAi;
  return plan;
}

// Whether `path` exists and holds something (a non-empty file, a directory with entries).
bool HasContent(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  if (fs::is_directory(path, ec)) return !fs::is_empty(path, ec);
  return fs::file_size(path, ec) > 0;
}

Status RefuseExistingOutput(const std::string& output) {
  return Status::AlreadyExists(fmt::format(
      "--output '{}' already exists; pass --resume to continue it (the rows it holds are kept "
      "and not redone), or remove it",
      output));
}

// Checks the batch flags against the model.
Status CheckModelFlags(const BatchOptions& opt, const LoadedModel& model, const InputPlan& plan,
                       JsonlFormat format) {
  if (!plan.is_dir && format == JsonlFormat::kOpenAi && !model.generative()) {
    return Status::InvalidArgument(fmt::format(
        "OpenAI batch requests need a generative model, and '{}' is a tensor model: give it a "
        "KServe v2 JSONL file or a directory of tensor files",
        model.name()));
  }
  if (opt.batch_size > 1) {
    if (!plan.is_dir) {
      return Status::InvalidArgument(
          "--batch-size applies to directory inputs; each line of a JSONL file is one request "
          "(the model's dynamic batching groups concurrent ones)");
    }
    const int max = model.signature().max_batch_size;
    if (max <= 0) {
      return Status::InvalidArgument(
          fmt::format("--batch-size {} needs a model that batches; '{}' has max_batch_size 0",
                      opt.batch_size, model.name()));
    }
    if (opt.batch_size > max) {
      return Status::InvalidArgument(
          fmt::format("--batch-size {} is larger than max_batch_size {} of model '{}'",
                      opt.batch_size, max, model.name()));
    }
  }
  return Status::OK();
}

// Runs the rows of a JSONL input that `done` does not hold.
void RunJsonlRows(JsonlFormat format, const batch::JsonlIndex& index,
                  const batch::JsonlReader& reader, const batch::BatchOutputState& done,
                  const std::shared_ptr<LoadedModel>& model, LineWriter& writer,
                  BatchDriver& driver) {
  const bool openai = format == JsonlFormat::kOpenAi;
  for (size_t i = 0; i < index.lines.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i);
    const std::optional<std::string> custom_id =
        openai ? index.custom_ids[i] : std::optional<std::string>();
    if (done.Done(row, custom_id)) continue;
    if (!driver.WaitForSlot()) break;
    Result<std::string> text = reader.Read(index.lines[i]);
    if (!text.ok()) {
      driver.Fail(text.status());
      break;
    }
    std::string label = fmt::format("line {}", index.lines[i].line_number);
    if (custom_id.has_value()) label += fmt::format(" (custom_id '{}')", *custom_id);
    driver.Begin();
    batch::RowDone on_done = [&driver, &writer, label](batch::RowFinisher finish) {
      driver.Post([&driver, &writer, label, finish] {
        batch::RowOutcome outcome = finish();
        if (Status s = writer.Write(outcome.line); !s.ok()) {
          driver.Fail(std::move(s));
          return;
        }
        driver.RowDone(outcome.ok, label, outcome.error);
      });
    };
    if (openai) {
      batch::StartOpenAiRow(model, row, std::move(text).value(), std::move(on_done));
    } else {
      batch::StartKserveRow(model, row, std::move(text).value(), std::move(on_done));
    }
  }
  driver.Drain();
  if (Status s = writer.Sync(); !s.ok()) driver.Fail(std::move(s));
}

// Everything `kiln batch` does before the rows run, and then the run.
int Batch(const BatchOptions& opt) {
  SetLogVerbosity(0, opt.quiet);
  Result<InputPlan> plan = PlanInput(opt);
  if (!plan.ok()) return Fail(plan.status());
  const std::string output = opt.output.empty() ? DefaultOutput(opt.input, plan->is_dir)
                                                : WithoutTrailingSlashes(opt.output);
  {
    std::error_code out_ec;
    std::error_code in_ec;
    const fs::path out_path = fs::weakly_canonical(output, out_ec);
    const fs::path in_path = fs::weakly_canonical(opt.input, in_ec);
    if (!out_ec && !in_ec && out_path == in_path) {
      return Fail(Status::InvalidArgument(
          fmt::format("--output '{}' is the input itself; name another path", output)));
    }
  }
  const bool existing = HasContent(output);
  if (existing && !opt.resume && !opt.retry_failed) return Fail(RefuseExistingOutput(output));

  // The rows, and those an earlier run finished.
  JsonlFormat format = JsonlFormat::kKserve;
  batch::JsonlIndex index;
  batch::BatchOutputState jsonl_done;
  std::vector<DirRow> dir_rows;
  DirOutputState dir_done;
  std::error_code ec;
  if (plan->is_dir) {
    if (fs::exists(output, ec) && !fs::is_directory(output, ec)) {
      return Fail(Status::InvalidArgument(fmt::format(
          "--output '{}' is a file; the results of a directory input are a directory", output)));
    }
    Result<std::vector<DirRow>> rows = ListDirRows(opt.input, plan->file_kind, output);
    if (!rows.ok()) return Fail(rows.status());
    dir_rows = std::move(rows).value();
    dir_done.done.assign(dir_rows.size(), false);
    if (existing) {
      Result<DirOutputState> state = ScanDirOutput(output, dir_rows, opt.retry_failed);
      if (!state.ok()) return Fail(state.status());
      dir_done = std::move(state).value();
    }
  } else {
    Result<batch::JsonlIndex> indexed = batch::IndexJsonlFile(opt.input, plan->jsonl);
    if (!indexed.ok()) return Fail(indexed.status());
    index = std::move(indexed).value();
    if (plan->jsonl.has_value()) {
      format = *plan->jsonl;
    } else if (index.detected.has_value()) {
      format = *index.detected;
    } else if (!index.lines.empty()) {
      return Fail(Status::InvalidArgument(
          fmt::format("cannot tell the format of --input '{}': no line is a KServe v2 inference "
                      "request or an OpenAI batch request; pass --format kserve-jsonl or "
                      "--format openai-jsonl",
                      opt.input)));
    }
    if (format == JsonlFormat::kOpenAi) {
      if (Status s = batch::CheckCustomIds(index); !s.ok()) return Fail(s);
    }
    if (fs::is_directory(output, ec)) {
      return Fail(Status::InvalidArgument(fmt::format(
          "--output '{}' is a directory; the results of a JSONL input are a JSONL file", output)));
    }
    if (existing) {
      Result<batch::BatchOutputState> state = batch::ScanBatchOutputFile(output, format);
      if (state.ok()) {
        if (Status s = batch::CheckOutputMatchesInput(*state, index, output); !s.ok()) {
          state = std::move(s);
        }
      }
      if (state.ok() && opt.retry_failed) {
        state = batch::DropFailedLines(output, format);  // a torn last line goes too
      }
      if (!state.ok()) return Fail(state.status());
      jsonl_done = std::move(state).value();
      if (jsonl_done.torn_bytes > 0) {
        if (::truncate(output.c_str(), static_cast<off_t>(jsonl_done.valid_bytes)) != 0) {
          return Fail(Status::Internal(
              fmt::format("cannot truncate --output '{}': {}", output, std::strerror(errno))));
        }
        if (!opt.quiet) {
          std::fprintf(stderr,
                       "kiln batch: dropped the torn last line of '%s' (%llu bytes, cut by a "
                       "crash); its row is redone\n",
                       output.c_str(), static_cast<unsigned long long>(jsonl_done.torn_bytes));
        }
      }
    }
  }

  // The model.
  if (Status devices = SetUpDevices(opt.devices, !opt.quiet); !devices.ok()) return Fail(devices);
  Result<std::unique_ptr<ModelManager>> manager = StartModel(opt);
  if (!manager.ok()) return Fail(manager.status());
  Result<std::shared_ptr<LoadedModel>> found = (*manager)->GetModel(opt.model, opt.model_version);
  Status checked = found.ok() ? CheckModelFlags(opt, **found, *plan, format) : found.status();
  if (!checked.ok()) {
    (*manager)->Shutdown();
    return Fail(checked);
  }
  std::shared_ptr<LoadedModel> model = std::move(found).value();

  // The run.
  batch::BatchCounts counts;
  BatchDriverOptions driver_options;
  driver_options.concurrency =
      opt.concurrency > 0 ? opt.concurrency : DefaultConcurrency(*model, opt.batch_size);
  driver_options.quiet = opt.quiet;
  driver_options.progress_interval_s = opt.progress_interval_s;
  if (plan->is_dir) {
    counts.total = static_cast<int64_t>(dir_rows.size());
    counts.skipped = dir_done.done_count;
    counts.skipped_failed = dir_done.failed_count;
  } else {
    counts.total = static_cast<int64_t>(index.lines.size());
    counts.skipped_failed = jsonl_done.failed;
    for (size_t i = 0; i < index.lines.size(); ++i) {
      const std::optional<std::string> id =
          format == JsonlFormat::kOpenAi ? index.custom_ids[i] : std::optional<std::string>();
      if (jsonl_done.Done(static_cast<int64_t>(i), id)) ++counts.skipped;
    }
  }
  if (!opt.quiet) {
    std::fprintf(
        stderr, "kiln batch: %lld rows (%s) on model '%s' version %lld, %d in flight%s\n",
        static_cast<long long>(counts.total),
        plan->is_dir ? "tensor files" : std::string(JsonlFormatName(format)).c_str(),
        opt.model.c_str(), static_cast<long long>(model->version()), driver_options.concurrency,
        counts.skipped > 0 ? fmt::format("; {} done already (--resume)", counts.skipped).c_str()
                           : "");
  }
  InstallStopHandlers();
  BatchDriver driver(driver_options, counts);
  if (plan->is_dir) {
    fs::create_directories(output, ec);
    if (ec) {
      (*manager)->Shutdown();
      return Fail(Status::InvalidArgument(
          fmt::format("cannot create --output '{}': {}", output, ec.message())));
    }
    DirRunOptions dir_options;
    dir_options.output = output;
    dir_options.kind = plan->file_kind;
    dir_options.output_pb = opt.output_format == "pb";
    dir_options.batch_size = opt.batch_size;
    RunDirRows(dir_options, model, dir_rows, dir_done.done, driver);
  } else {
    const fs::path parent = fs::path(output).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);  // an error shows when opening
    Result<std::unique_ptr<batch::JsonlReader>> reader = batch::JsonlReader::Create(opt.input);
    Result<std::unique_ptr<LineWriter>> writer =
        reader.ok() ? LineWriter::Open(output)
                    : Result<std::unique_ptr<LineWriter>>(reader.status());
    if (!writer.ok()) {
      (*manager)->Shutdown();
      return Fail(writer.status());
    }
    RunJsonlRows(format, index, **reader, jsonl_done, model, **writer, driver);
  }
  driver.EndProgress();
  model.reset();
  (*manager)->Shutdown();
  return driver.Finish(output);
}

}  // namespace

CommandMain AddBatchCommand(CLI::App& app) {
  auto opt = std::make_shared<BatchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "batch",
      "Offline batch inference: run a model over every row of a dataset (tensor files, KServe v2 "
      "or OpenAI batch JSONL) without a server; resumable (docs/batch.md)");
  cmd->add_option("--model-repository", opt->model_repository,
                  "Model repository directory (as for kiln serve); only --model is loaded")
      ->required();
  cmd->add_option("--model", opt->model, "The model that answers every row")->required();
  cmd->add_option("--model-version", opt->model_version,
                  "Version of --model (-1: the highest ready one)")
      ->capture_default_str();
  cmd->add_option("--input", opt->input,
                  "The rows: a directory of tensor files (<row>.npy|.pb, or <row>/<input>.npy|.pb "
                  "per input), a JSONL file of KServe v2 inference requests, or a JSONL file of "
                  "OpenAI batch requests (generative models)")
      ->required();
  cmd->add_option("--output", opt->output,
                  "Where the results go: a directory (<row>/<output>.npy) for a directory input, "
                  "a JSONL file for a JSONL input; default <input>.out/ or "
                  "<input without .jsonl>.out.jsonl. An existing output needs --resume");
  cmd->add_option("--format", opt->format,
                  "Input format: auto (a directory: tensor files; a file: from its first request), "
                  "npy or pb (a directory; only that file type), kserve-jsonl, openai-jsonl")
      ->check(CLI::IsMember({"auto", "npy", "pb", "kserve-jsonl", "openai-jsonl"}))
      ->capture_default_str();
  cmd->add_option("--output-format", opt->output_format,
                  "Output tensor files of a directory input: npy or pb (npy falls back to pb for "
                  "datatypes it cannot hold: BYTES, BF16)")
      ->check(CLI::IsMember({"npy", "pb"}))
      ->capture_default_str();
  cmd->add_option("--concurrency", opt->concurrency,
                  "Requests in flight at once (0: the model's default: a generative model's "
                  "max_num_seqs; for a tensor model 2 per instance, times max_batch_size / "
                  "--batch-size when it batches dynamically)")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  cmd->add_option("--batch-size", opt->batch_size,
                  "Rows of a directory input sent as one request (concatenated on the batch dim; "
                  "the model must batch, up to its max_batch_size)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_flag("--resume", opt->resume,
                "Continue an existing output: the rows it holds (succeeded or failed) are kept "
                "and not redone; a torn last line left by a crash is dropped and its row redone. "
                "Without it an existing, non-empty output is an error");
  cmd->add_flag("--retry-failed", opt->retry_failed,
                "--resume, and also redo the rows the output holds as failed (their lines or "
                "row directories are removed first)");
  cmd->add_flag("--quiet", opt->quiet, "No progress, no summary, no model load log (errors only)");
  cmd->add_option("--progress-interval-secs", opt->progress_interval_s,
                  "When standard error is not a terminal: seconds between two progress lines "
                  "(0: none); on a terminal a bar is redrawn instead")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  AddDeviceFlags(*cmd, &opt->devices);
  return [opt] { return Batch(*opt); };
}

}  // namespace kiln::tools
