// SPDX-License-Identifier: Apache-2.0
// Warmup samples from config.model_warmup and running them; see warmup.h.
#include "repo/warmup.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <limits>
#include <random>
#include <system_error>

#include "repo/model_config.h"
#include "tensor/shape.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kWarmupDirName = "warmup";

// Reads <model_dir>/warmup/<file>, refusing names that leave the warmup directory.
Result<std::string> ReadWarmupFile(const fs::path& model_dir, const std::string& file,
                                   uintmax_t max_bytes) {
  const fs::path rel(file);
  bool escapes = file.empty() || rel.is_absolute() || rel.has_root_name();
  for (const fs::path& part : rel) escapes |= part == "..";
  if (escapes) {
    return Status::InvalidArgument(
        fmt::format("input_data_file '{}' must be a relative path inside the model's {}/ directory",
                    file, kWarmupDirName));
  }
  const fs::path path = model_dir / kWarmupDirName / rel;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return Status::NotFound(fmt::format("warmup data file {} not found", path.string()));
  }
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) {
    return Status::Unavailable(fmt::format("cannot read {}: {}", path.string(), ec.message()));
  }
  if (size > max_bytes) {
    return Status::InvalidArgument(
        fmt::format("warmup data file {} has {} bytes, more than the {} "
                    "one batch item of the input takes",
                    path.string(), size, max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    return Status::Unavailable(fmt::format("cannot read {}", path.string()));
  }
  return bytes;
}

// Fills the first `n` elements of `t` (one batch item) with random values of its type.
void FillRandom(OwnedTensor& t, int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> real(0.f, 1.f);
  std::uniform_int_distribution<int> small(0, 99);
  const auto fill = [&](auto* data, auto make) {
    for (int64_t i = 0; i < n; ++i) data[i] = make();
  };
  switch (t.dtype()) {
    case DataType::kBool:
      fill(t.data<bool>(), [&] { return small(rng) % 2 == 1; });
      return;
    case DataType::kFloat16:
      fill(t.data<Float16>(), [&] { return FloatToFloat16(real(rng)); });
      return;
    case DataType::kBFloat16:
      fill(t.data<BFloat16>(), [&] { return FloatToBFloat16(real(rng)); });
      return;
    case DataType::kFloat32:
      fill(t.data<float>(), [&] { return real(rng); });
      return;
    case DataType::kFloat64:
      fill(t.data<double>(), [&] { return static_cast<double>(real(rng)); });
      return;
#define KILN_WARMUP_INT(e, ctype)                                          \
  case DataType::e:                                                        \
    fill(t.data<ctype>(), [&] { return static_cast<ctype>(small(rng)); }); \
    return;
      KILN_WARMUP_INT(kUint8, uint8_t)
      KILN_WARMUP_INT(kUint16, uint16_t)
      KILN_WARMUP_INT(kUint32, uint32_t)
      KILN_WARMUP_INT(kUint64, uint64_t)
      KILN_WARMUP_INT(kInt8, int8_t)
      KILN_WARMUP_INT(kInt16, int16_t)
      KILN_WARMUP_INT(kInt32, int32_t)
      KILN_WARMUP_INT(kInt64, int64_t)
#undef KILN_WARMUP_INT
    case DataType::kBytes:  // random strings are empty strings, as in the reference server
    case DataType::kInvalid:
      return;
  }
}

// Copies one item's raw bytes from `bytes` into the first `n` elements of `t`. `bytes` holds
// exactly one item (checked by the caller for fixed-size types).
Status FillFromBytes(OwnedTensor& t, int64_t n, const std::string& bytes, const std::string& file) {
  if (t.dtype() == DataType::kBytes) {
    std::string* out = t.data<std::string>();
    size_t pos = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (bytes.size() - pos < 4) {
        return Status::InvalidArgument(fmt::format(
            "input_data_file '{}' ends inside the length of string element {} of {}", file, i, n));
      }
      uint32_t len = 0;
      for (int b = 3; b >= 0; --b) {
        len = (len << 8) | static_cast<unsigned char>(bytes[pos + static_cast<size_t>(b)]);
      }
      pos += 4;
      if (bytes.size() - pos < len) {
        return Status::InvalidArgument(
            fmt::format("input_data_file '{}': string element {} needs {} bytes, {} are left", file,
                        i, len, bytes.size() - pos));
      }
      out[i].assign(bytes, pos, len);
      pos += len;
    }
    if (pos != bytes.size()) {
      return Status::InvalidArgument(
          fmt::format("input_data_file '{}' has {} bytes after its {} string elements", file,
                      bytes.size() - pos, n));
    }
    return Status::OK();
  }
  if (t.dtype() == DataType::kBool) {
    bool* out = t.data<bool>();
    for (int64_t i = 0; i < n; ++i) out[i] = bytes[static_cast<size_t>(i)] != 0;
    return Status::OK();
  }
  std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return Status::OK();
}

// Repeats element range [0, item) over the whole tensor (batch items 1..).
void ReplicateFirstItem(OwnedTensor& t, int64_t item) {
  const int64_t total = t.num_elements();
  if (item == 0 || total <= item) return;
  if (t.dtype() == DataType::kBytes) {
    std::string* d = t.data<std::string>();
    for (int64_t i = item; i < total; ++i) d[i] = d[i % item];
    return;
  }
  const size_t item_bytes = static_cast<size_t>(item) * DataTypeSize(t.dtype());
  auto* base = static_cast<char*>(t.raw_data());
  for (int64_t start = item; start < total; start += item) {
    std::memcpy(base + static_cast<size_t>(start) * DataTypeSize(t.dtype()), base, item_bytes);
  }
}

Result<InferInput> BuildInput(const inference::ModelConfig& config, const fs::path& model_dir,
                              const std::string& name, const inference::ModelWarmup::Input& spec,
                              int64_t batch, std::mt19937& rng) {
  const inference::ModelInput* model_input = nullptr;
  for (const inference::ModelInput& in : config.input()) {
    if (in.name() == name) model_input = &in;
  }
  if (model_input == nullptr) {
    return Status::InvalidArgument(fmt::format("'{}' is not an input of the model", name));
  }
  if (spec.data_type() != model_input->data_type()) {
    return Status::InvalidArgument(fmt::format("data_type {} does not match the model input's {}",
                                               inference::DataType_Name(spec.data_type()),
                                               inference::DataType_Name(model_input->data_type())));
  }
  const DataType dtype = FromConfigDataType(spec.data_type());
  std::vector<int64_t> dims;
  if (batch > 0) dims.push_back(batch);
  for (int64_t d : spec.dims()) {
    if (d < 0) {
      return Status::InvalidArgument(
          fmt::format("dims {} must all be >= 0 (warmup data has a concrete shape)",
                      DimsToString(AsSpan(spec.dims()))));
    }
    dims.push_back(d);
  }
  Result<Shape> shape = Shape::Create(dims);
  if (!shape.ok()) return shape.status().WithContext("dims");
  const int64_t total = shape->NumElements();
  const int64_t item = batch > 0 ? total / batch : total;  // elements of one batch item
  const size_t elem = dtype == DataType::kBytes ? 4 : DataTypeSize(dtype);
  if (static_cast<uint64_t>(total) > kMaxWarmupSampleBytes / elem) {
    return Status::InvalidArgument(
        fmt::format("shape {} needs more than {} bytes", shape->ToString(), kMaxWarmupSampleBytes));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor tensor, OwnedTensor::Allocate(dtype, *shape));
  switch (spec.input_data_type_case()) {
    case inference::ModelWarmup::Input::kZeroData:
      break;  // Allocate zero-fills (strings empty)
    case inference::ModelWarmup::Input::kRandomData:
      FillRandom(tensor, item, rng);
      break;
    case inference::ModelWarmup::Input::kInputDataFile: {
      const std::string& file = spec.input_data_file();
      const uintmax_t item_bytes = static_cast<uintmax_t>(item) * DataTypeSize(dtype);
      const uintmax_t limit = dtype == DataType::kBytes ? kMaxWarmupSampleBytes : item_bytes;
      KILN_ASSIGN_OR_RETURN(std::string bytes, ReadWarmupFile(model_dir, file, limit));
      if (dtype != DataType::kBytes && bytes.size() != item_bytes) {
        return Status::InvalidArgument(
            fmt::format("input_data_file '{}' has {} bytes; one item of {} {} elements takes {}",
                        file, bytes.size(), item, DataTypeName(dtype), item_bytes));
      }
      KILN_RETURN_IF_ERROR(FillFromBytes(tensor, item, bytes, file));
      break;
    }
    case inference::ModelWarmup::Input::INPUT_DATA_TYPE_NOT_SET:
      return Status::InvalidArgument("sets none of zero_data, random_data, input_data_file");
  }
  ReplicateFirstItem(tensor, item);
  return InferInput{name, std::move(tensor)};
}

}  // namespace

Result<std::vector<WarmupSample>> BuildWarmupSamples(const inference::ModelConfig& config,
                                                     const fs::path& model_dir) {
  std::vector<WarmupSample> samples;
  std::mt19937 rng(20240611);
  const bool batching = config.max_batch_size() > 0;
  for (int s = 0; s < config.model_warmup_size(); ++s) {
    const inference::ModelWarmup& w = config.model_warmup(s);
    const std::string label = w.name().empty() ? fmt::format("#{}", s) : w.name();
    const auto fail = [&](const Status& st) {
      return Status(st.code(), fmt::format("model '{}': warmup sample '{}': {}", config.name(),
                                           label, st.message()));
    };
    const int64_t batch_size = w.batch_size();
    if (batching && (batch_size < 1 || batch_size > config.max_batch_size())) {
      return fail(Status::InvalidArgument(
          fmt::format("batch_size {} is out of range 1..{} (max_batch_size)", batch_size,
                      config.max_batch_size())));
    }
    if (!batching && batch_size > 1) {
      return fail(Status::InvalidArgument(fmt::format(
          "batch_size {} needs a batching model, but max_batch_size is 0", batch_size)));
    }
    WarmupSample sample;
    sample.name = label;
    sample.runs =
        w.count() == 0
            ? 1
            : static_cast<int>(std::min<uint32_t>(w.count(), std::numeric_limits<int>::max()));
    sample.request.id = "warmup:" + label;
    for (const inference::ModelInput& in : config.input()) {
      auto it = w.inputs().find(in.name());
      if (it == w.inputs().end()) {
        return fail(
            Status::InvalidArgument(fmt::format("model input '{}' has no warmup data", in.name())));
      }
    }
    // Model input order (the map's order is unspecified), then any unknown key to report it.
    std::vector<std::string> names;
    for (const inference::ModelInput& in : config.input()) names.push_back(in.name());
    for (const auto& [name, spec] : w.inputs()) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (const std::string& name : names) {
      Result<InferInput> input =
          BuildInput(config, model_dir, name, w.inputs().at(name), batching ? batch_size : 0, rng);
      if (!input.ok()) return fail(input.status().WithContext(fmt::format("input '{}'", name)));
      sample.request.inputs.push_back(std::move(input).value());
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

Status RunWarmup(LoadedModel& model, const std::vector<WarmupSample>& samples) {
  for (const WarmupSample& sample : samples) {
    for (int run = 0; run < sample.runs; ++run) {
      auto request = std::make_unique<InferRequest>(sample.request);
      std::promise<Status> answered;
      std::future<Status> result = answered.get_future();
      model.Infer(std::move(request), [&answered](const Result<InferResponse>& r) {
        answered.set_value(r.ok() ? Status::OK() : r.status());
      });
      const Status s = result.get();
      if (!s.ok()) {
        return Status(s.code(),
                      fmt::format("warmup sample '{}' failed: {}", sample.name, s.message()));
      }
    }
  }
  return Status::OK();
}

}  // namespace kiln
