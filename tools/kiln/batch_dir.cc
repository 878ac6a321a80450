// SPDX-License-Identifier: Apache-2.0
// kiln batch over a directory of tensor files (batch_dir.h).

#include "tools/kiln/batch_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>
#include <utility>

#include "graph/onnx/tensor_file.h"
#include "repo/model_config.pb.h"
#include "server/inference.h"
#include "server/json_writer.h"
#include "server/status_map.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPartialSuffix = ".partial";
constexpr std::string_view kErrorFile = "error.json";

// The file name (without extension) of a tensor called `name` (batch_dir.h).
std::string FileNameFor(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '/', '_');
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out;
}

std::string LowerExtension(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

// Whether `path` is a tensor file of `kind`.
bool IsTensorFile(const fs::path& path, TensorFileKind kind) {
  const std::string ext = LowerExtension(path);
  switch (kind) {
    case TensorFileKind::kAny:
      return ext == ".npy" || ext == ".pb";
    case TensorFileKind::kNpy:
      return ext == ".npy";
    case TensorFileKind::kPb:
      return ext == ".pb";
  }
  return false;
}

// One row's tensors, ready for a request.
struct RowInputs {
  size_t row = 0;                  // index into the rows
  std::vector<InferInput> inputs;  // in the model's input order
  bool added_batch_dim = false;    // the files had no batch dim; outputs drop it again
  int64_t batch = 1;               // leading dim of the row's tensors (model batches)
};

// What a finished request needs to write its rows.
struct RowMeta {
  size_t row = 0;
  bool added_batch_dim = false;
  int64_t batch = 1;
};

// Gives a tensor of a batching model its batch dim when it has the configured rank.
Status ApplyBatchDim(const TensorSpec& spec, int max_batch_size, InferInput* input, RowInputs* row,
                     bool first) {
  if (max_batch_size <= 0) return Status::OK();
  OwnedTensor& t = input->tensor;
  const int rank = t.shape().rank();
  const int configured = static_cast<int>(spec.dims.size());
  bool added = false;
  if (rank == configured && rank < Shape::kMaxRank) {
    std::vector<int64_t> dims{1};
    dims.insert(dims.end(), t.shape().dims().begin(), t.shape().dims().end());
    KILN_RETURN_IF_ERROR(t.Reshape(Shape(std::span<const int64_t>(dims))));
    added = true;
  }
  if (first) {
    row->added_batch_dim = added;
    row->batch = t.shape().rank() > 0 ? t.shape().dim(0) : 1;
  }
  return Status::OK();
}

const inference::ModelInput* ConfigInput(const LoadedModel& model, std::string_view name) {
  const inference::ModelConfig* config = model.model_config();
  if (config == nullptr) return nullptr;
  for (const inference::ModelInput& in : config->input()) {
    if (in.name() == name) return &in;
  }
  return nullptr;
}

std::string InputNames(const ModelSignature& sig) {
  std::vector<std::string> names;
  for (const TensorSpec& s : sig.inputs) names.push_back(s.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// Reads the tensors of one row.
Result<RowInputs> ReadRowInputs(const DirRow& row, size_t index, const LoadedModel& model,
                                TensorFileKind kind) {
  const ModelSignature& sig = model.signature();
  RowInputs out;
  out.row = index;
  // Input index -> file.
  std::vector<std::string> files(sig.inputs.size());
  if (!row.is_dir) {
    if (sig.inputs.size() != 1) {
      return Status::InvalidArgument(fmt::format(
          "model '{}' has {} inputs ({}): a row is a directory {}/ holding one file per input "
          "(<input name>.npy or .pb), not the file '{}'",
          model.name(), sig.inputs.size(), InputNames(sig), row.name, row.path));
    }
    files[0] = row.path;
  } else {
    std::unordered_map<std::string, size_t> by_file_name;
    for (size_t i = 0; i < sig.inputs.size(); ++i)
      by_file_name[FileNameFor(sig.inputs[i].name)] = i;
    std::error_code ec;
    fs::directory_iterator it(row.path, ec);
    if (ec) {
      return Status::InvalidArgument(
          fmt::format("cannot list row directory '{}': {}", row.path, ec.message()));
    }
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) break;
      const fs::path p = it->path();
      const std::string name = p.filename().string();
      if (IsHiddenName(name) || !IsTensorFile(p, kind)) continue;
      auto found = by_file_name.find(p.stem().string());
      if (found == by_file_name.end()) {
        return Status::InvalidArgument(
            fmt::format("file '{}' names no input of model '{}' (inputs: {})", p.string(),
                        model.name(), InputNames(sig)));
      }
      if (!files[found->second].empty()) {
        return Status::InvalidArgument(fmt::format("input '{}' has two files: '{}' and '{}'",
                                                   sig.inputs[found->second].name,
                                                   files[found->second], p.string()));
      }
      files[found->second] = p.string();
    }
    if (ec) {
      return Status::InvalidArgument(
          fmt::format("cannot list row directory '{}': {}", row.path, ec.message()));
    }
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      if (!files[i].empty()) continue;
      const inference::ModelInput* config = ConfigInput(model, sig.inputs[i].name);
      if (config != nullptr && config->optional()) continue;
      return Status::InvalidArgument(
          fmt::format("row '{}' has no file for input '{}' ({}/{}.npy or .pb)", row.name,
                      sig.inputs[i].name, row.path, FileNameFor(sig.inputs[i].name)));
    }
  }
  bool first = true;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    if (files[i].empty()) continue;
    KILN_ASSIGN_OR_RETURN(OwnedTensor tensor, ReadTensorFile(files[i]));
    InferInput input{sig.inputs[i].name, std::move(tensor)};
    KILN_RETURN_IF_ERROR(ApplyBatchDim(sig.inputs[i], sig.max_batch_size, &input, &out, first));
    first = false;
    out.inputs.push_back(std::move(input));
  }
  return out;
}

// Whether two rows can share a request: the same inputs, datatypes and dims past the first.
bool Compatible(const RowInputs& a, const RowInputs& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const OwnedTensor& x = a.inputs[i].tensor;
    const OwnedTensor& y = b.inputs[i].tensor;
    if (a.inputs[i].name != b.inputs[i].name || x.dtype() != y.dtype() ||
        x.shape().rank() != y.shape().rank() || x.shape().rank() == 0) {
      return false;
    }
    for (int d = 1; d < x.shape().rank(); ++d) {
      if (x.shape().dim(d) != y.shape().dim(d)) return false;
    }
  }
  return true;
}

// Copies `count` elements of `src` from element `begin` to `dst` from element `at`.
void CopyElements(const Tensor& src, int64_t begin, int64_t count, const Tensor& dst, int64_t at) {
  if (src.dtype() == DataType::kBytes) {
    for (int64_t i = 0; i < count; ++i) {
      dst.data<std::string>()[at + i] = src.data<std::string>()[begin + i];
    }
    return;
  }
  const size_t size = DataTypeSize(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw_data()) + static_cast<size_t>(at) * size,
              static_cast<const char*>(src.raw_data()) + static_cast<size_t>(begin) * size,
              static_cast<size_t>(count) * size);
}

// The rows' tensors of one input, joined on dim 0. REQUIRES: Compatible rows.
Result<OwnedTensor> ConcatDim0(const std::vector<RowInputs>& rows, size_t input) {
  const Tensor& first = rows.front().inputs[input].tensor.view();
  std::vector<int64_t> dims(first.shape().dims().begin(), first.shape().dims().end());
  dims[0] = 0;
  for (const RowInputs& r : rows) dims[0] += r.inputs[input].tensor.shape().dim(0);
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(first.dtype(), shape));
  int64_t at = 0;
  for (const RowInputs& r : rows) {
    const Tensor& t = r.inputs[input].tensor.view();
    CopyElements(t, 0, t.num_elements(), out.view(), at);
    at += t.num_elements();
  }
  return out;
}

// Rows [begin, begin + count) of dim 0 of `t`.
Result<OwnedTensor> SliceDim0(const Tensor& t, int64_t begin, int64_t count) {
  std::vector<int64_t> dims(t.shape().dims().begin(), t.shape().dims().end());
  const int64_t per_row = dims[0] == 0 ? 0 : t.num_elements() / dims[0];
  dims[0] = count;
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(t.dtype(), shape));
  CopyElements(t, begin * per_row, count * per_row, out.view(), 0);
  return out;
}

// Drops a leading dim of 1.
Status DropBatchDim(OwnedTensor* t) {
  if (t->shape().rank() == 0 || t->shape().dim(0) != 1) return Status::OK();
  std::vector<int64_t> dims(t->shape().dims().begin() + 1, t->shape().dims().end());
  return t->Reshape(Shape(std::span<const int64_t>(dims)));
}

// Writes the rows of finished requests.
class DirWriter {
 public:
  DirWriter(const DirRunOptions& options, const std::vector<DirRow>& rows, int max_batch_size,
            BatchDriver& driver)
      : options_(options), rows_(rows), max_batch_size_(max_batch_size), driver_(driver) {}

  void WriteResult(const std::vector<RowMeta>& group, const Result<InferResponse>& result) {
    if (!result.ok()) {
      for (const RowMeta& m : group) WriteError(m.row, result.status());
      return;
    }
    int64_t total = 0;
    for (const RowMeta& m : group) total += m.batch;
    int64_t offset = 0;
    for (const RowMeta& m : group) {
      Result<std::vector<InferOutput>> outputs =
          RowOutputs(*result, group.size(), m, offset, total);
      if (outputs.ok()) {
        WriteOutputs(m.row, *outputs);
      } else {
        WriteError(m.row, outputs.status());
      }
      offset += m.batch;
    }
  }

  void WriteError(size_t row, const Status& status) {
    std::string json;
    {
      JsonWriter w(&json);
      w.BeginObject();
      w.KeyInt("code", HttpStatusFor(status.code()));
      w.KeyString("message", status.message());
      w.EndObject();
    }
    json += '\n';
    Result<fs::path> partial = StartRow(row);
    if (partial.ok()) {
      std::ofstream f(*partial / std::string(kErrorFile), std::ios::binary);
      f << json;
      f.close();
      if (!f)
        partial = Status::Internal(
            fmt::format("cannot write '{}'", (*partial / std::string(kErrorFile)).string()));
    }
    if (partial.ok()) partial = CommitRow(row, *partial);
    if (!partial.ok()) {
      driver_.Fail(partial.status());
      return;
    }
    driver_.RowDone(false, fmt::format("row '{}'", rows_[row].name), status.message());
  }

 private:
  // The outputs of row `m` of a response to `group_size` rows with `total` batch entries.
  Result<std::vector<InferOutput>> RowOutputs(const InferResponse& response, size_t group_size,
                                              const RowMeta& m, int64_t offset, int64_t total) {
    std::vector<InferOutput> outputs;
    for (const InferOutput& o : response.outputs) {
      OwnedTensor t = o.tensor;
      if (group_size > 1) {
        const Tensor& v = o.tensor.view();
        if (v.rank() == 0 || v.dim(0) != total) {
          return Status::InvalidArgument(fmt::format(
              "output '{}' has shape {}: it cannot be split between the {} rows of the request "
              "(its first dim is not the batch of {}); use --batch-size 1",
              o.name, v.shape().ToString(), group_size, total));
        }
        KILN_ASSIGN_OR_RETURN(t, SliceDim0(v, offset, m.batch));
      }
      if (m.added_batch_dim && max_batch_size_ > 0) KILN_RETURN_IF_ERROR(DropBatchDim(&t));
      outputs.push_back({o.name, std::move(t)});
    }
    return outputs;
  }

  void WriteOutputs(size_t row, const std::vector<InferOutput>& outputs) {
    Result<fs::path> partial = StartRow(row);
    if (!partial.ok()) {
      driver_.Fail(partial.status());
      return;
    }
    for (const InferOutput& o : outputs) {
      const std::string base = (*partial / FileNameFor(o.name)).string();
      Status s = Status::Unimplemented("");
      if (!options_.output_pb) s = WriteTensorFile(base + ".npy", o.tensor.view(), o.name);
      // .npy cannot hold every datatype (BYTES, BF16): those go to .pb.
      if (s.code() == StatusCode::kUnimplemented) {
        s = WriteTensorFile(base + ".pb", o.tensor.view(), o.name);
      }
      if (!s.ok()) {
        // The row's error replaces its partial outputs.
        WriteError(row, Status::Internal(
                            fmt::format("cannot write output '{}': {}", o.name, s.message())));
        return;
      }
    }
    if (Result<fs::path> done = CommitRow(row, *partial); !done.ok()) {
      driver_.Fail(done.status());
      return;
    }
    driver_.RowDone(true, rows_[row].name, {});
  }

  fs::path PartialDir(size_t row) const {
    return fs::path(options_.output) /
           fmt::format(".{}{}", rows_[row].name, std::string_view(kPartialSuffix));
  }

  // An empty .partial directory for the row.
  Result<fs::path> StartRow(size_t row) {
    const fs::path partial = PartialDir(row);
    std::error_code ec;
    fs::remove_all(partial, ec);
    fs::create_directories(partial, ec);
    if (ec) {
      return Status::Internal(
          fmt::format("cannot create '{}': {}", partial.string(), ec.message()));
    }
    return partial;
  }

  // Renames the row's .partial directory to its final name.
  Result<fs::path> CommitRow(size_t row, const fs::path& partial) {
    const fs::path final_dir = fs::path(options_.output) / rows_[row].name;
    std::error_code ec;
    fs::remove_all(final_dir, ec);
    fs::rename(partial, final_dir, ec);
    if (ec) {
      return Status::Internal(fmt::format("cannot rename '{}' to '{}': {}", partial.string(),
                                          final_dir.string(), ec.message()));
    }
    return final_dir;
  }

  const DirRunOptions& options_;
  const std::vector<DirRow>& rows_;
  const int max_batch_size_;
  BatchDriver& driver_;
};

}  // namespace

Result<std::vector<DirRow>> ListDirRows(const std::string& input, TensorFileKind kind,
                                        const std::string& output) {
  std::error_code ec;
  const fs::path output_path = fs::weakly_canonical(output, ec);
  std::map<std::string, DirRow> rows;
  fs::directory_iterator it(input, ec);
  if (ec) {
    return Status::InvalidArgument(
        fmt::format("cannot list --input '{}': {}", input, ec.message()));
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path p = it->path();
    const std::string file_name = p.filename().string();
    if (IsHiddenName(file_name)) continue;
    DirRow row;
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      std::error_code canon_ec;
      if (fs::weakly_canonical(p, canon_ec) == output_path) continue;  // the output itself
      row = {file_name, p.string(), true};
    } else if (IsTensorFile(p, kind)) {
      row = {p.stem().string(), p.string(), false};
    } else {
      continue;
    }
    auto [pos, added] = rows.emplace(row.name, row);
    if (!added) {
      return Status::InvalidArgument(
          fmt::format("'{}' and '{}' are both row '{}': rename one, or pick one file type with "
                      "--format npy or --format pb",
                      pos->second.path, row.path, row.name));
    }
  }
  if (ec) {
    return Status::InvalidArgument(
        fmt::format("cannot list --input '{}': {}", input, ec.message()));
  }
  std::vector<DirRow> out;
  out.reserve(rows.size());
  for (auto& [name, row] : rows) out.push_back(std::move(row));
  return out;
}

Result<DirOutputState> ScanDirOutput(const std::string& output, const std::vector<DirRow>& rows,
                                     bool retry_failed) {
  DirOutputState state;
  state.done.assign(rows.size(), false);
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < rows.size(); ++i) index[rows[i].name] = i;
  std::error_code ec;
  fs::directory_iterator it(output, ec);
  if (ec) {
    return Status::InvalidArgument(
        fmt::format("cannot list --output '{}': {}", output, ec.message()));
  }
  std::vector<fs::path> stale;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    if (IsHiddenName(name)) {
      if (name.size() > kPartialSuffix.size() &&
          name.compare(name.size() - kPartialSuffix.size(), kPartialSuffix.size(),
                       kPartialSuffix) == 0) {
        stale.push_back(it->path());
      }
      continue;
    }
    auto found = index.find(name);
    if (found == index.end()) {
      return Status::InvalidArgument(
          fmt::format("--output '{}' has a result for row '{}', which the input does not have: it "
                      "is the output of another input",
                      output, name));
    }
    std::error_code exists_ec;
    const bool failed = fs::exists(it->path() / std::string(kErrorFile), exists_ec);
    if (failed && retry_failed) {
      stale.push_back(it->path());
      continue;
    }
    state.done[found->second] = true;
    ++state.done_count;
    if (failed) ++state.failed_count;
  }
  if (ec) {
    return Status::InvalidArgument(
        fmt::format("cannot list --output '{}': {}", output, ec.message()));
  }
  // Unfinished rows (and failed ones with retry_failed): redone.
  for (const fs::path& p : stale) {
    fs::remove_all(p, ec);
    if (ec) {
      return Status::Internal(fmt::format("cannot remove '{}': {}", p.string(), ec.message()));
    }
  }
  return state;
}

void RunDirRows(const DirRunOptions& options, const std::shared_ptr<LoadedModel>& model,
                const std::vector<DirRow>& rows, const std::vector<bool>& done,
                BatchDriver& driver) {
  const int max_batch_size = model->signature().max_batch_size;
  DirWriter writer(options, rows, max_batch_size, driver);
  std::vector<RowInputs> group;
  // Sends the group as one request; false when the run stops (the group is dropped: its rows
  // are not done and a resumed run does them).
  const auto send = [&]() -> bool {
    if (group.empty()) return true;
    if (!driver.WaitForSlot()) {
      group.clear();
      return false;
    }
    auto request = std::make_unique<InferRequest>();
    request->id = rows[group.front().row].name;
    std::vector<RowMeta> meta;
    for (const RowInputs& r : group) meta.push_back({r.row, r.added_batch_dim, r.batch});
    if (group.size() == 1) {
      request->inputs = std::move(group.front().inputs);
    } else {
      for (size_t i = 0; i < group.front().inputs.size(); ++i) {
        Result<OwnedTensor> joined = ConcatDim0(group, i);
        if (!joined.ok()) {
          for (const RowMeta& m : meta) writer.WriteError(m.row, joined.status());
          group.clear();
          return true;
        }
        request->inputs.push_back({group.front().inputs[i].name, std::move(joined).value()});
      }
    }
    group.clear();
    driver.Begin();
    StartInference(model, std::move(request), {},
                   CallbackSink([&driver, &writer, meta](Result<InferResponse> result) {
                     auto shared = std::make_shared<const Result<InferResponse>>(std::move(result));
                     driver.Post([&writer, meta, shared] { writer.WriteResult(meta, *shared); });
                   }));
    return true;
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    if (done[i]) continue;
    if (driver.stop_signal() != 0 || !driver.failure().ok()) break;
    Result<RowInputs> inputs = ReadRowInputs(rows[i], i, *model, options.kind);
    if (!inputs.ok()) {
      writer.WriteError(i, inputs.status());
      continue;
    }
    if (!group.empty() && !Compatible(group.front(), *inputs) && !send()) break;
    group.push_back(std::move(inputs).value());
    if (static_cast<int>(group.size()) >= options.batch_size && !send()) break;
  }
  send();
  driver.Drain();
}

}  // namespace kiln::tools
