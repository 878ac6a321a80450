// SPDX-License-Identifier: Apache-2.0
// Datasets from directories and runs over them (dataset.h).

#include "quant/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "graph/onnx/tensor_file.h"

namespace kiln::quant {
namespace {

namespace fs = std::filesystem;

bool HasExtension(const fs::path& p, std::string_view ext) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e == ext;
}

Result<OwnedTensor> ToFloat32(OwnedTensor t) {
  if (t.dtype() != DataType::kFloat64) return t;
  KILN_ASSIGN_OR_RETURN(OwnedTensor f, OwnedTensor::Allocate(DataType::kFloat32, t.shape()));
  const double* s = t.data<const double>();
  float* d = f.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) d[i] = static_cast<float>(s[i]);
  return f;
}

// Checks a stacked tensor [N, ...] against the declared type of input `name`.
Status CheckStacked(const OwnedTensor& t, const Value& input, const std::string& file) {
  const ValueType& type = input.type;
  if (type.dtype != DataType::kInvalid && t.dtype() != type.dtype) {
    return Status::InvalidArgument(fmt::format("'{}' holds {} data but input '{}' is {}", file,
                                               DataTypeName(t.dtype()), input.name,
                                               DataTypeName(type.dtype)));
  }
  if (t.shape().rank() == 0) {
    return Status::InvalidArgument(
        fmt::format("'{}' is a scalar; expected samples stacked on axis 0", file));
  }
  if (type.has_shape) {
    if (static_cast<int>(type.dims.size()) != t.shape().rank()) {
      return Status::InvalidArgument(
          fmt::format("'{}' has shape {} (samples on axis 0) but input '{}' is {}", file,
                      t.shape().ToString(), input.name, type.ToString()));
    }
    for (size_t d = 1; d < type.dims.size(); ++d) {
      if (type.dims[d].known() && type.dims[d].value != t.shape().dim(static_cast<int>(d))) {
        return Status::InvalidArgument(
            fmt::format("'{}' has shape {} (samples on axis 0) but input '{}' is {}", file,
                        t.shape().ToString(), input.name, type.ToString()));
      }
    }
  }
  return Status::OK();
}

// Stacks per-sample tensors (each [1, ...] or [...]) into [N, ...].
Result<OwnedTensor> Stack(const std::vector<OwnedTensor>& samples, const Value& input,
                          const std::vector<std::string>& files) {
  const int rank = input.type.has_shape ? static_cast<int>(input.type.dims.size()) : -1;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Shape& s = samples[i].shape();
    std::vector<int64_t> d(s.dims().begin(), s.dims().end());
    if (rank >= 0 && static_cast<int>(d.size()) == rank) {
      if (d.empty() || d[0] != 1) {
        return Status::InvalidArgument(fmt::format(
            "'{}' holds {} samples stacked on axis 0; name such a file inputs.npy or {}.npy",
            files[i], d.empty() ? 0 : d[0], input.name));
      }
      d.erase(d.begin());
    } else if (rank >= 0 && static_cast<int>(d.size()) != rank - 1) {
      return Status::InvalidArgument(fmt::format("'{}' has shape {} but input '{}' is {}", files[i],
                                                 s.ToString(), input.name, input.type.ToString()));
    }
    if (i == 0) {
      dims = d;
    } else if (d != dims || samples[i].dtype() != samples[0].dtype()) {
      return Status::InvalidArgument(
          fmt::format("'{}' differs in shape or dtype from '{}'", files[i], files[0]));
    }
  }
  dims.insert(dims.begin(), static_cast<int64_t>(samples.size()));
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(samples[0].dtype(), shape));
  char* dst = static_cast<char*>(out.raw_data());
  for (const OwnedTensor& s : samples) {
    std::memcpy(dst, s.raw_data(), s.size_bytes());
    dst += s.size_bytes();
  }
  return out;
}

// The first `n` rows of `t` as a new tensor.
Result<OwnedTensor> FirstRows(const OwnedTensor& t, int64_t n) {
  std::vector<int64_t> dims(t.shape().dims().begin(), t.shape().dims().end());
  dims[0] = n;
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(t.dtype(), shape));
  std::memcpy(out.raw_data(), t.raw_data(), out.size_bytes());
  return out;
}

// Sets data.num_samples from the inputs: INVALID_ARGUMENT when they differ (`inputs_where`
// introduces them, "inputs in 'DIR'") or, with `no_samples` as the message, when there are none.
Status CountSamples(Dataset& data, const Graph& graph, const std::string& inputs_where,
                    const std::string& no_samples) {
  data.num_samples = data.inputs.empty() ? 0 : data.inputs[0].shape().dim(0);
  for (size_t i = 1; i < data.inputs.size(); ++i) {
    if (data.inputs[i].shape().dim(0) != data.num_samples) {
      return Status::InvalidArgument(
          fmt::format("{} hold different sample counts: '{}' {} and '{}' {}", inputs_where,
                      graph.value(graph.inputs[0]).name, data.num_samples,
                      graph.value(graph.inputs[i]).name, data.inputs[i].shape().dim(0)));
    }
  }
  if (data.num_samples == 0) return Status::InvalidArgument(no_samples);
  return Status::OK();
}

// Keeps the first `max_samples` samples (and labels) when max_samples > 0.
Status KeepFirstSamples(Dataset& data, int64_t max_samples) {
  if (max_samples <= 0 || data.num_samples <= max_samples) return Status::OK();
  for (OwnedTensor& t : data.inputs) {
    KILN_ASSIGN_OR_RETURN(t, FirstRows(t, max_samples));
  }
  if (data.labels) {
    KILN_ASSIGN_OR_RETURN(data.labels, FirstRows(*data.labels, max_samples));
  }
  data.num_samples = max_samples;
  return Status::OK();
}

}  // namespace

Result<OwnedTensor> LoadLabels(const std::string& file) {
  const fs::path path(file);
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, ReadTensorFile(path.string()));
  if (t.shape().rank() == 2 && t.shape().dim(1) == 1) {
    KILN_RETURN_IF_ERROR(t.Reshape(Shape{t.shape().dim(0)}));
  }
  if (t.shape().rank() != 1) {
    return Status::InvalidArgument(
        fmt::format("'{}' has shape {}; expected one integer label per "
                    "sample ([N])",
                    path.string(), t.shape().ToString()));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(DataType::kInt64, t.shape()));
  int64_t* d = out.data<int64_t>();
  const int64_t n = t.num_elements();
  switch (t.dtype()) {
    case DataType::kInt64:
      std::memcpy(d, t.raw_data(), out.size_bytes());
      break;
    case DataType::kInt32:
      for (int64_t i = 0; i < n; ++i) d[i] = t.data<int32_t>()[i];
      break;
    case DataType::kInt16:
      for (int64_t i = 0; i < n; ++i) d[i] = t.data<int16_t>()[i];
      break;
    case DataType::kInt8:
      for (int64_t i = 0; i < n; ++i) d[i] = t.data<int8_t>()[i];
      break;
    case DataType::kUint8:
      for (int64_t i = 0; i < n; ++i) d[i] = t.data<uint8_t>()[i];
      break;
    default:
      return Status::InvalidArgument(fmt::format("'{}' holds {} labels; expected integers",
                                                 path.string(), DataTypeName(t.dtype())));
  }
  return out;
}

Result<Dataset> LoadDataset(const std::string& dir, const Graph& graph, int64_t max_samples) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound(fmt::format("data directory '{}' does not exist", dir));
  }
  Dataset data;
  data.dir = dir;
  const fs::path root(dir);
  std::vector<std::string> expected;
  bool stacked = true;
  for (int id : graph.inputs) {
    const Value& in = graph.value(id);
    fs::path p = root / (in.name + ".npy");
    if (graph.inputs.size() == 1 && !fs::exists(p, ec)) p = root / "inputs.npy";
    expected.push_back(graph.inputs.size() == 1 ? "inputs.npy or " + in.name + ".npy"
                                                : in.name + ".npy");
    if (!fs::exists(p, ec)) {
      stacked = false;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(OwnedTensor t, ReadTensorFile(p.string()));
    KILN_ASSIGN_OR_RETURN(t, ToFloat32(std::move(t)));
    KILN_RETURN_IF_ERROR(CheckStacked(t, in, p.string()));
    data.inputs.push_back(std::move(t));
  }
  if (stacked) {
    data.layout = "stacked";
  } else {
    // Per-sample files, for single-input models only.
    std::vector<fs::path> files;
    // The error_code forms throughout: no filesystem exception leaves this function.
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::directory_entry& e = *it;
      std::error_code type_ec;
      if (!e.is_regular_file(type_ec)) continue;
      const fs::path& p = e.path();
      if (p.filename() == "labels.npy") continue;
      if (HasExtension(p, ".npy") || HasExtension(p, ".pb")) files.push_back(p);
    }
    std::sort(files.begin(), files.end());
    if (graph.inputs.size() != 1 || files.empty()) {
      std::string found;
      for (const fs::path& f : files) found += (found.empty() ? "" : ", ") + f.filename().string();
      return Status::InvalidArgument(fmt::format(
          "no data for the model's inputs in '{}': expected {}{}", dir, fmt::join(expected, ", "),
          found.empty() ? std::string(" (the directory holds no .npy or .pb files)")
                        : fmt::format(" (found {})", found)));
    }
    const Value& in = graph.value(graph.inputs[0]);
    std::vector<OwnedTensor> samples;
    std::vector<std::string> names;
    for (const fs::path& f : files) {
      if (max_samples > 0 && static_cast<int64_t>(samples.size()) >= max_samples) break;
      KILN_ASSIGN_OR_RETURN(OwnedTensor t, ReadTensorFile(f.string()));
      KILN_ASSIGN_OR_RETURN(t, ToFloat32(std::move(t)));
      samples.push_back(std::move(t));
      names.push_back(f.string());
    }
    KILN_ASSIGN_OR_RETURN(OwnedTensor t, Stack(samples, in, names));
    KILN_RETURN_IF_ERROR(CheckStacked(t, in, dir));
    data.inputs.clear();
    data.inputs.push_back(std::move(t));
    data.layout = "per-sample";
  }
  KILN_RETURN_IF_ERROR(CountSamples(data, graph, fmt::format("inputs in '{}'", dir),
                                    fmt::format("'{}' holds no samples", dir)));
  const fs::path labels = root / "labels.npy";
  if (fs::exists(labels, ec)) {
    KILN_ASSIGN_OR_RETURN(OwnedTensor l, LoadLabels(labels.string()));
    if (l.shape().dim(0) != data.num_samples) {
      return Status::InvalidArgument(
          fmt::format("'{}' holds {} labels but the inputs hold {} samples", labels.string(),
                      l.shape().dim(0), data.num_samples));
    }
    data.labels = std::move(l);
  }
  KILN_RETURN_IF_ERROR(KeepFirstSamples(data, max_samples));
  return data;
}

Result<Dataset> MakeDataset(std::vector<InputSamples> inputs, const Graph& graph,
                            const std::string& source, int64_t max_samples) {
  if (inputs.size() != graph.inputs.size()) {
    return Status::InvalidArgument(fmt::format("{} hold {} inputs but the model has {}", source,
                                               inputs.size(), graph.inputs.size()));
  }
  Dataset data;
  data.dir = source;
  data.layout = "stacked";
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(OwnedTensor t, ToFloat32(std::move(inputs[i].samples)));
    KILN_RETURN_IF_ERROR(CheckStacked(t, graph.value(graph.inputs[i]), inputs[i].file));
    data.inputs.push_back(std::move(t));
  }
  KILN_RETURN_IF_ERROR(
      CountSamples(data, graph, source, fmt::format("{}: no samples (dim 0 is 0)", source)));
  KILN_RETURN_IF_ERROR(KeepFirstSamples(data, max_samples));
  return data;
}

namespace {

// The first input's dim 0 when the model fixes it, else 0.
int64_t FixedBatchSize(const Graph& graph) {
  if (graph.inputs.empty()) return 0;
  const ValueType& t = graph.value(graph.inputs[0]).type;
  if (t.has_shape && !t.dims.empty() && t.dims[0].known() && t.dims[0].value > 0) {
    return t.dims[0].value;
  }
  return 0;
}

}  // namespace

int64_t EffectiveBatchSize(const Graph& graph, int64_t requested) {
  const int64_t fixed = FixedBatchSize(graph);
  return fixed > 0 ? fixed : std::max<int64_t>(requested, 1);
}

Status ForEachBatch(const Session& session, const Dataset& data, const RunOptions& options,
                    const std::function<Status(std::vector<OwnedTensor>&, int64_t, int64_t)>& fn) {
  const Graph& graph = session.graph();
  if (data.inputs.size() != graph.inputs.size()) {
    return Status::InvalidArgument(fmt::format("the data has {} inputs, the model {}",
                                               data.inputs.size(), graph.inputs.size()));
  }
  const int64_t batch = EffectiveBatchSize(graph, options.batch_size);
  // A model that fixes its batch size gets full batches (the last one padded).
  const bool fixed = FixedBatchSize(graph) > 0;
  const int64_t total =
      options.max_samples > 0 ? std::min(options.max_samples, data.num_samples) : data.num_samples;
  std::vector<OwnedTensor> storage(data.inputs.size());
  std::vector<Tensor> views(data.inputs.size());
  for (int64_t begin = 0; begin < total; begin += batch) {
    const int64_t count = std::min(batch, total - begin);
    const int64_t rows = fixed ? batch : count;
    for (size_t i = 0; i < data.inputs.size(); ++i) {
      const OwnedTensor& src = data.inputs[i];
      std::vector<int64_t> dims(src.shape().dims().begin(), src.shape().dims().end());
      const size_t row_bytes = src.size_bytes() / static_cast<size_t>(dims[0]);
      dims[0] = rows;
      KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
      const char* base = static_cast<const char*>(src.raw_data());
      if (rows == count) {
        // A view into the stacked data: no copy.
        views[i] = Tensor(src.dtype(), shape,
                          const_cast<char*>(base + static_cast<size_t>(begin) * row_bytes));
      } else {
        KILN_ASSIGN_OR_RETURN(storage[i], OwnedTensor::Allocate(src.dtype(), shape));
        char* dst = static_cast<char*>(storage[i].raw_data());
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t from = begin + std::min(r, count - 1);
          std::memcpy(dst + static_cast<size_t>(r) * row_bytes,
                      base + static_cast<size_t>(from) * row_bytes, row_bytes);
        }
        views[i] = storage[i].view();
      }
    }
    KILN_ASSIGN_OR_RETURN(std::vector<OwnedTensor> outs, session.Run(views));
    KILN_RETURN_IF_ERROR(fn(outs, begin, count));
  }
  return Status::OK();
}

Result<RunResult> RunDataset(const Session& session, const Dataset& data, const RunOptions& options,
                             const std::function<void(int64_t, int64_t)>& progress) {
  RunResult result;
  const int64_t total =
      options.max_samples > 0 ? std::min(options.max_samples, data.num_samples) : data.num_samples;
  // Warm-up: one batch, untimed (first-run plans and caches).
  {
    RunOptions warm = options;
    warm.max_samples =
        std::min<int64_t>(total, EffectiveBatchSize(session.graph(), options.batch_size));
    KILN_RETURN_IF_ERROR(
        ForEachBatch(session, data, warm,
                     [](std::vector<OwnedTensor>&, int64_t, int64_t) { return Status::OK(); }));
  }
  char* dst = nullptr;
  size_t row_bytes = 0;
  auto last = std::chrono::steady_clock::now();
  double seconds = 0;
  Status st = ForEachBatch(
      session, data, options,
      [&](std::vector<OwnedTensor>& outs, int64_t begin, int64_t count) -> Status {
        const auto now = std::chrono::steady_clock::now();
        seconds += std::chrono::duration<double>(now - last).count();
        if (outs.empty()) return Status::InvalidArgument("the model has no outputs");
        const OwnedTensor& y = outs[0];
        if (y.shape().rank() == 0 || y.shape().dim(0) < count) {
          return Status::InvalidArgument(fmt::format(
              "output 0 has shape {} for a batch of {}: it must carry the batch on axis 0",
              y.shape().ToString(), count));
        }
        if (begin == 0) {
          std::vector<int64_t> dims(y.shape().dims().begin(), y.shape().dims().end());
          row_bytes = y.size_bytes() / static_cast<size_t>(dims[0]);
          dims[0] = total;
          KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
          KILN_ASSIGN_OR_RETURN(result.output, OwnedTensor::Allocate(y.dtype(), shape));
          dst = static_cast<char*>(result.output.raw_data());
        } else if (y.size_bytes() / static_cast<size_t>(y.shape().dim(0)) != row_bytes) {
          return Status::InvalidArgument("output 0 changes its per-sample shape between batches");
        }
        std::memcpy(dst + static_cast<size_t>(begin) * row_bytes, y.raw_data(),
                    static_cast<size_t>(count) * row_bytes);
        if (progress) progress(begin + count, total);
        last = std::chrono::steady_clock::now();
        return Status::OK();
      });
  KILN_RETURN_IF_ERROR(st);
  result.samples = total;
  result.seconds = seconds;
  return result;
}

Result<Metrics> ComputeMetrics(const Tensor& output, const Tensor* reference,
                               const Tensor* labels) {
  if (output.dtype() != DataType::kFloat32 || output.rank() == 0) {
    return Status::InvalidArgument(fmt::format("output 0 is {} {}; metrics need FP32 [N, ...]",
                                               DataTypeName(output.dtype()),
                                               output.shape().ToString()));
  }
  Metrics m;
  const int64_t n = output.dim(0);
  m.samples = n;
  if (n == 0) return m;
  const int64_t width = output.num_elements() / n;
  const float* y = output.data<const float>();
  if (reference != nullptr &&
      (reference->shape() != output.shape() || reference->dtype() != DataType::kFloat32)) {
    return Status::InvalidArgument(fmt::format("output 0 has shape {} but the reference's is {}",
                                               output.shape().ToString(),
                                               reference->shape().ToString()));
  }
  if (labels != nullptr && labels->num_elements() != n) {
    return Status::InvalidArgument(
        fmt::format("{} labels for {} samples", labels->num_elements(), n));
  }
  auto argmax = [width](const float* row) {
    return static_cast<int64_t>(std::max_element(row, row + width) - row);
  };
  int64_t top1 = 0, top5 = 0, agree = 0;
  double cos_sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = y + i * width;
    const int64_t am = argmax(row);
    if (labels != nullptr) {
      const int64_t label = labels->data<const int64_t>()[i];
      if (am == label) ++top1;
      if (label >= 0 && label < width) {
        // The label is in the top 5 when fewer than 5 scores beat it.
        int64_t better = 0;
        for (int64_t k = 0; k < width; ++k) better += row[k] > row[label] ? 1 : 0;
        if (better < 5) ++top5;
      }
    }
    if (reference != nullptr) {
      const float* ref = reference->data<const float>() + i * width;
      if (argmax(ref) == am) ++agree;
      double dot = 0, na = 0, nb = 0;
      for (int64_t k = 0; k < width; ++k) {
        dot += static_cast<double>(row[k]) * ref[k];
        na += static_cast<double>(row[k]) * row[k];
        nb += static_cast<double>(ref[k]) * ref[k];
      }
      if (na == 0 && nb == 0) {
        cos_sum += 1;
      } else if (na > 0 && nb > 0) {
        cos_sum += dot / std::sqrt(na * nb);
      }
    }
  }
  if (labels != nullptr) {
    m.top1 = 100.0 * static_cast<double>(top1) / static_cast<double>(n);
    if (width >= 5) m.top5 = 100.0 * static_cast<double>(top5) / static_cast<double>(n);
  }
  if (reference != nullptr) {
    m.agreement_top1 = 100.0 * static_cast<double>(agree) / static_cast<double>(n);
    m.mean_cosine = cos_sum / static_cast<double>(n);
  }
  return m;
}

}  // namespace kiln::quant
