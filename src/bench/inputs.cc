// SPDX-License-Identifier: Apache-2.0
#include "bench/inputs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <simdjson.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "server/base64.h"

namespace kiln::bench {
namespace {

namespace fs = std::filesystem;

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

template <typename T>
void Append(std::string& raw, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  raw.append(b, sizeof(T));
}

// Appends one element given as a double (numbers) to `raw` in `datatype`'s encoding.
void AppendNumber(std::string& raw, const std::string& dt, double v) {
  if (dt == "FP32")
    Append<float>(raw, static_cast<float>(v));
  else if (dt == "FP64")
    Append<double>(raw, v);
  else if (dt == "INT8")
    Append<int8_t>(raw, static_cast<int8_t>(v));
  else if (dt == "INT16")
    Append<int16_t>(raw, static_cast<int16_t>(v));
  else if (dt == "INT32")
    Append<int32_t>(raw, static_cast<int32_t>(v));
  else if (dt == "INT64")
    Append<int64_t>(raw, static_cast<int64_t>(v));
  else if (dt == "UINT8")
    Append<uint8_t>(raw, static_cast<uint8_t>(v));
  else if (dt == "UINT16")
    Append<uint16_t>(raw, static_cast<uint16_t>(v));
  else if (dt == "UINT32")
    Append<uint32_t>(raw, static_cast<uint32_t>(v));
  else if (dt == "UINT64")
    Append<uint64_t>(raw, static_cast<uint64_t>(v));
  else if (dt == "BOOL")
    Append<uint8_t>(raw, v != 0 ? 1 : 0);
  else if (dt == "FP16" || dt == "BF16") {
    // Upper half of the float for BF16; FP16 via the same cheap truncation is wrong, so build
    // FP16 properly for the normal range.
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    uint16_t h;
    if (dt == "BF16") {
      h = static_cast<uint16_t>(bits >> 16);
    } else {
      uint32_t sign = (bits >> 16) & 0x8000u;
      int32_t exp = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
      uint32_t mant = (bits >> 13) & 0x3ffu;
      if (exp <= 0)
        h = static_cast<uint16_t>(sign);
      else if (exp >= 31)
        h = static_cast<uint16_t>(sign | 0x7c00u);
      else
        h = static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | mant);
    }
    Append<uint16_t>(raw, h);
  }
}

void AppendString(std::string& raw, std::string_view s) {
  Append<uint32_t>(raw, static_cast<uint32_t>(s.size()));
  raw.append(s);
}

// Elements in `raw`, the raw content of a tensor of datatype `dt`: BYTES walks the length
// prefixes; other types divide by the element size. INVALID_ARGUMENT when it does not add up.
Result<int64_t> CountRawElements(const std::string& raw, const std::string& dt,
                                 const std::string& where) {
  if (dt == "BYTES") {
    int64_t count = 0;
    size_t at = 0;
    while (at < raw.size()) {
      if (raw.size() - at < 4) {
        return Status::InvalidArgument(
            fmt::format("{}: \"b64\" BYTES data ends inside a length", where));
      }
      uint32_t n = 0;
      std::memcpy(&n, raw.data() + at, 4);
      at += 4;
      if (n > raw.size() - at) {
        return Status::InvalidArgument(
            fmt::format("{}: \"b64\" BYTES element {} claims {} bytes, {} remain", where, count, n,
                        raw.size() - at));
      }
      at += n;
      ++count;
    }
    return count;
  }
  const int size = ElementSize(dt);
  if (size <= 0 || raw.size() % static_cast<size_t>(size) != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: \"b64\" data of {} bytes is not a whole number of {} elements", where,
                    raw.size(), dt));
  }
  return static_cast<int64_t>(raw.size() / static_cast<size_t>(size));
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("cannot open '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Flattens a (nested) JSON array of elements into `raw`; counts the elements.
Status FlattenJson(simdjson::dom::element e, const std::string& dt, std::string& raw,
                   int64_t& count, const std::string& where) {
  simdjson::dom::array arr;
  if (e.get(arr) == simdjson::SUCCESS) {
    for (simdjson::dom::element c : arr)
      KILN_RETURN_IF_ERROR(FlattenJson(c, dt, raw, count, where));
    return Status::OK();
  }
  if (dt == "BYTES") {
    std::string_view s;
    if (e.get(s) != simdjson::SUCCESS) {
      return Status::InvalidArgument(fmt::format("{}: BYTES elements must be strings", where));
    }
    AppendString(raw, s);
  } else if (dt == "BOOL") {
    bool b;
    if (e.get(b) != simdjson::SUCCESS) {
      return Status::InvalidArgument(fmt::format("{}: BOOL elements must be true/false", where));
    }
    AppendNumber(raw, dt, b ? 1 : 0);
  } else {
    double v;
    if (e.get(v) != simdjson::SUCCESS) {
      return Status::InvalidArgument(fmt::format("{}: {} elements must be numbers", where, dt));
    }
    AppendNumber(raw, dt, v);
  }
  ++count;
  return Status::OK();
}

// Makes a batch of `batch` items out of per-item `items` (each the raw bytes of one item).
TensorData Batch(const ModelInfo& model, const TensorSpec& spec,
                 const std::vector<int64_t>& item_shape, const std::vector<std::string>& items,
                 int batch) {
  TensorData t{spec.name, spec.datatype, {}, {}};
  if (model.max_batch_size > 0) t.shape.push_back(batch);
  t.shape.insert(t.shape.end(), item_shape.begin(), item_shape.end());
  for (const std::string& it : items) t.raw += it;
  return t;
}

Result<std::vector<InputSet>> FromJsonFile(const ModelInfo& model, const InputOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(options.input_data));
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  if (auto err = parser.parse(padded).get(root); err) {
    return Status::InvalidArgument(fmt::format("--input-data '{}': not valid JSON ({})",
                                               options.input_data, simdjson::error_message(err)));
  }
  simdjson::dom::array data;
  if (root["data"].get(data) != simdjson::SUCCESS) {
    return Status::InvalidArgument(fmt::format(
        "--input-data '{}': expected an object with a \"data\" array (perf_analyzer format)",
        options.input_data));
  }
  // items[input][k] = raw bytes of step k for that input.
  std::vector<std::vector<std::string>> items(model.inputs.size());
  std::vector<std::vector<int64_t>> shapes(model.inputs.size());
  size_t steps = 0;
  for (simdjson::dom::element step : data) {
    for (size_t i = 0; i < model.inputs.size(); ++i) {
      const TensorSpec& spec = model.inputs[i];
      std::string where = fmt::format("--input-data '{}', data[{}], input '{}'", options.input_data,
                                      steps, spec.name);
      simdjson::dom::element v;
      if (step[spec.name].get(v) != simdjson::SUCCESS) {
        return Status::InvalidArgument(fmt::format("{}: missing", where));
      }
      simdjson::dom::element content = v;
      std::vector<int64_t> shape;
      simdjson::dom::object obj;
      if (v.get(obj) == simdjson::SUCCESS) {
        std::string_view b64;
        if (obj["b64"].get(b64) == simdjson::SUCCESS) {
          // perf_analyzer's binary form: the tensor's raw content, base64-encoded (for BYTES the
          // serialized elements, each a 4-byte little-endian length and its bytes).
          KILN_ASSIGN_OR_RETURN(std::string raw, DecodeBase64(b64, where + " \"b64\""));
          KILN_ASSIGN_OR_RETURN(int64_t count, CountRawElements(raw, spec.datatype, where));
          simdjson::dom::array sh;
          if (obj["shape"].get(sh) == simdjson::SUCCESS) {
            for (simdjson::dom::element d : sh) {
              int64_t dim;
              if (d.get(dim) != simdjson::SUCCESS || dim < 0) {
                return Status::InvalidArgument(fmt::format("{}: bad \"shape\"", where));
              }
              shape.push_back(dim);
            }
          }
          if (shape.empty()) {
            auto item = ItemShape(model, spec, options);
            if (!item.ok()) {
              return Status::InvalidArgument(fmt::format("{}: {} (or give \"shape\" in the file)",
                                                         where, item.status().message()));
            }
            shape = *item;
          }
          if (count != Product(shape)) {
            return Status::InvalidArgument(fmt::format("{}: {} elements, shape [{}] needs {}",
                                                       where, count, fmt::join(shape, ","),
                                                       Product(shape)));
          }
          if (!shapes[i].empty() && shapes[i] != shape) {
            return Status::InvalidArgument(fmt::format("{}: shape differs from data[0]'s", where));
          }
          shapes[i] = shape;
          items[i].push_back(std::move(raw));
          continue;
        }
        if (obj["content"].get(content) != simdjson::SUCCESS) {
          return Status::InvalidArgument(fmt::format("{}: object without \"content\"", where));
        }
        simdjson::dom::array sh;
        if (obj["shape"].get(sh) == simdjson::SUCCESS) {
          for (simdjson::dom::element d : sh) {
            int64_t dim;
            if (d.get(dim) != simdjson::SUCCESS || dim < 0) {
              return Status::InvalidArgument(fmt::format("{}: bad \"shape\"", where));
            }
            shape.push_back(dim);
          }
        }
      }
      if (shape.empty()) {
        auto item = ItemShape(model, spec, options);
        if (!item.ok()) {
          return Status::InvalidArgument(fmt::format("{}: {} (or give \"shape\" in the file)",
                                                     where, item.status().message()));
        }
        shape = *item;
      }
      std::string raw;
      int64_t count = 0;
      KILN_RETURN_IF_ERROR(FlattenJson(content, spec.datatype, raw, count, where));
      if (count != Product(shape)) {
        return Status::InvalidArgument(fmt::format("{}: {} elements, shape [{}] needs {}", where,
                                                   count, fmt::join(shape, ","), Product(shape)));
      }
      if (!shapes[i].empty() && shapes[i] != shape) {
        return Status::InvalidArgument(fmt::format("{}: shape differs from data[0]'s", where));
      }
      shapes[i] = shape;
      items[i].push_back(std::move(raw));
    }
    ++steps;
  }
  if (steps == 0) {
    return Status::InvalidArgument(
        fmt::format("--input-data '{}': the \"data\" array is empty", options.input_data));
  }
  std::vector<InputSet> sets;
  for (size_t k = 0; k < steps; ++k) {
    InputSet set;
    for (size_t i = 0; i < model.inputs.size(); ++i) {
      std::vector<std::string> batch_items;
      batch_items.reserve(static_cast<size_t>(options.batch_size));
      for (int b = 0; b < options.batch_size; ++b) {
        batch_items.push_back(items[i][(k * options.batch_size + b) % steps]);
      }
      set.push_back(Batch(model, model.inputs[i], shapes[i], batch_items, options.batch_size));
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

// Minimal .npy reader (format versions 1-3, little-endian C order).
Result<std::pair<std::string, std::vector<int64_t>>> ReadNpy(const std::string& path,
                                                             std::string& dtype_out) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    return Status::InvalidArgument(fmt::format("'{}' is not a .npy file", path));
  }
  size_t header_len, offset;
  if (static_cast<uint8_t>(bytes[6]) == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12) return Status::InvalidArgument(fmt::format("'{}' is truncated", path));
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  }
  if (offset + header_len > bytes.size()) {
    return Status::InvalidArgument(fmt::format("'{}' is truncated", path));
  }
  std::string header = bytes.substr(offset, header_len);
  auto field = [&](const std::string& key) -> std::string {
    size_t p = header.find("'" + key + "'");
    if (p == std::string::npos) return "";
    p = header.find(':', p);
    return p == std::string::npos ? "" : header.substr(p + 1);
  };
  std::string descr = field("descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos) {
    return Status::InvalidArgument(fmt::format("'{}': no descr in the header", path));
  }
  descr = descr.substr(q1 + 1, q2 - q1 - 1);
  if (field("fortran_order").find("True") < 6) {
    return Status::Unimplemented(fmt::format("'{}': Fortran order is not supported", path));
  }
  static const std::map<std::string, std::string> kTypes = {
      {"<f4", "FP32"},   {"<f8", "FP64"},   {"<f2", "FP16"},   {"|i1", "INT8"},
      {"<i2", "INT16"},  {"<i4", "INT32"},  {"<i8", "INT64"},  {"|u1", "UINT8"},
      {"<u2", "UINT16"}, {"<u4", "UINT32"}, {"<u8", "UINT64"}, {"|b1", "BOOL"}};
  auto it = kTypes.find(descr);
  if (it == kTypes.end()) {
    return Status::Unimplemented(
        fmt::format("'{}': numpy dtype '{}' is not supported", path, descr));
  }
  dtype_out = it->second;
  std::string shape_text = field("shape");
  size_t open = shape_text.find('('), close = shape_text.find(')');
  std::vector<int64_t> shape;
  if (open == std::string::npos || close == std::string::npos) {
    return Status::InvalidArgument(fmt::format("'{}': no shape in the header", path));
  }
  std::string dims = shape_text.substr(open + 1, close - open - 1);
  for (size_t p = 0; p < dims.size();) {
    while (p < dims.size() && (dims[p] == ' ' || dims[p] == ',')) ++p;
    if (p >= dims.size()) break;
    int64_t d = 0;
    auto [ptr, ec] = std::from_chars(dims.data() + p, dims.data() + dims.size(), d);
    if (ec != std::errc()) return Status::InvalidArgument(fmt::format("'{}': bad shape", path));
    shape.push_back(d);
    p = ptr - dims.data();
  }
  std::string data = bytes.substr(offset + header_len);
  if (static_cast<int64_t>(data.size()) != Product(shape) * ElementSize(dtype_out)) {
    return Status::InvalidArgument(fmt::format("'{}': {} data bytes, shape needs {}", path,
                                               data.size(),
                                               Product(shape) * ElementSize(dtype_out)));
  }
  return std::make_pair(std::move(data), std::move(shape));
}

Result<std::vector<InputSet>> FromNpyDir(const ModelInfo& model, const InputOptions& options) {
  InputSet set;
  for (const TensorSpec& spec : model.inputs) {
    std::string path = (fs::path(options.input_data) / (spec.name + ".npy")).string();
    std::string dtype;
    KILN_ASSIGN_OR_RETURN(auto npy, ReadNpy(path, dtype));
    if (dtype != spec.datatype) {
      return Status::InvalidArgument(
          fmt::format("'{}' holds {}, input '{}' is {}", path, dtype, spec.name, spec.datatype));
    }
    auto& [data, shape] = npy;
    std::vector<int64_t> item = shape;
    std::vector<std::string> items;
    if (model.max_batch_size > 0 && !shape.empty() && shape[0] == options.batch_size) {
      // Already a whole batch.
      item.erase(item.begin());
      items.push_back(data);
    } else {
      for (int b = 0; b < options.batch_size; ++b) items.push_back(data);
    }
    set.push_back(Batch(model, spec, item, items, options.batch_size));
  }
  return std::vector<InputSet>{std::move(set)};
}

}  // namespace

int ElementSize(const std::string& dt) {
  if (dt == "BOOL" || dt == "INT8" || dt == "UINT8") return 1;
  if (dt == "INT16" || dt == "UINT16" || dt == "FP16" || dt == "BF16") return 2;
  if (dt == "INT32" || dt == "UINT32" || dt == "FP32") return 4;
  if (dt == "INT64" || dt == "UINT64" || dt == "FP64") return 8;
  if (dt == "BYTES") return 0;
  return -1;
}

Result<std::pair<std::string, std::vector<int64_t>>> ParseShapeFlag(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument(
        fmt::format("--shape '{}': expected NAME:d1,d2,... (e.g. INPUT0:3,224,224)", text));
  }
  std::vector<int64_t> dims;
  std::string_view rest(text.data() + colon + 1, text.size() - colon - 1);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view part = rest.substr(0, comma);
    int64_t d = -1;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || d < 0) {
      return Status::InvalidArgument(
          fmt::format("--shape '{}': dim '{}' is not a non-negative integer", text, part));
    }
    dims.push_back(d);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (dims.empty()) {
    return Status::InvalidArgument(fmt::format("--shape '{}': no dims given", text));
  }
  return std::make_pair(text.substr(0, colon), dims);
}

Result<std::vector<int64_t>> ItemShape(const ModelInfo& model, const TensorSpec& spec,
                                       const InputOptions& options) {
  auto it = options.shapes.find(spec.name);
  if (it != options.shapes.end()) return it->second;
  std::vector<int64_t> dims = spec.shape;
  if (model.max_batch_size > 0) {
    if (dims.empty()) {
      return Status::InvalidArgument(fmt::format(
          "input '{}' of a batching model has no batch dim in its metadata", spec.name));
    }
    dims.erase(dims.begin());
  }
  for (int64_t d : dims) {
    if (d < 0) {
      return Status::InvalidArgument(fmt::format(
          "input '{}' has a variable dim (shape [{}]); give its shape with --shape {}:d1,d2,...",
          spec.name, fmt::join(spec.shape, ","), spec.name));
    }
  }
  return dims;
}

Result<std::vector<InputSet>> MakeInputs(const ModelInfo& model, const InputOptions& options) {
  if (options.batch_size < 1) {
    return Status::InvalidArgument(
        fmt::format("-b {}: batch size must be >= 1", options.batch_size));
  }
  if (model.max_batch_size == 0 && options.batch_size > 1) {
    return Status::InvalidArgument(fmt::format(
        "-b {}: model '{}' does not batch (max_batch_size 0)", options.batch_size, model.name));
  }
  if (model.max_batch_size > 0 && options.batch_size > model.max_batch_size) {
    return Status::InvalidArgument(fmt::format("-b {}: above model '{}''s max_batch_size {}",
                                               options.batch_size, model.name,
                                               model.max_batch_size));
  }
  for (const auto& [name, dims] : options.shapes) {
    bool known = false;
    for (const TensorSpec& s : model.inputs) known |= s.name == name;
    if (!known) {
      return Status::InvalidArgument(
          fmt::format("--shape {}: model '{}' has no input of that name", name, model.name));
    }
  }
  for (const TensorSpec& s : model.inputs) {
    if (ElementSize(s.datatype) < 0) {
      return Status::Unimplemented(
          fmt::format("input '{}': datatype '{}' is not supported", s.name, s.datatype));
    }
  }
  const std::string& src = options.input_data;
  if (!src.empty() && src != "random" && src != "zero") {
    std::error_code ec;
    if (fs::is_directory(src, ec)) return FromNpyDir(model, options);
    if (!fs::exists(src, ec)) {
      return Status::NotFound(fmt::format("--input-data '{}': no such file or directory", src));
    }
    return FromJsonFile(model, options);
  }
  const bool zero = src == "zero";
  std::mt19937_64 rng(options.seed);
  std::vector<InputSet> sets;
  const int count = zero ? 1 : std::max(1, options.random_sets);
  for (int k = 0; k < count; ++k) {
    InputSet set;
    for (const TensorSpec& spec : model.inputs) {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> item, ItemShape(model, spec, options));
      int64_t n = Product(item);
      std::string raw;
      const bool is_float = spec.datatype.rfind("FP", 0) == 0 || spec.datatype == "BF16";
      for (int b = 0; b < options.batch_size; ++b) {
        for (int64_t e = 0; e < n; ++e) {
          if (spec.datatype == "BYTES") {
            std::string s(static_cast<size_t>(options.string_length), 'a');
            if (!zero) {
              for (char& c : s) c = static_cast<char>('a' + rng() % 26);
            }
            AppendString(raw, s);
          } else if (zero) {
            AppendNumber(raw, spec.datatype, 0);
          } else if (is_float) {
            AppendNumber(raw, spec.datatype, static_cast<double>(rng() >> 11) * 0x1.0p-53);
          } else if (spec.datatype == "BOOL") {
            AppendNumber(raw, spec.datatype, static_cast<double>(rng() & 1));
          } else {
            AppendNumber(raw, spec.datatype, static_cast<double>(rng() % 100));
          }
        }
      }
      TensorData t{spec.name, spec.datatype, {}, std::move(raw)};
      if (model.max_batch_size > 0) t.shape.push_back(options.batch_size);
      t.shape.insert(t.shape.end(), item.begin(), item.end());
      set.push_back(std::move(t));
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

}  // namespace kiln::bench
