// SPDX-License-Identifier: Apache-2.0
// safetensors files and checkpoint directories (safetensors.h). The JSON header and the shard
// index are parsed with simdjson's DOM through its error-code API only (`.get(x)`), which never
// throws.

#include "llm/safetensors.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <system_error>

#include "llm/gguf.h"  // MappedFile

namespace kiln::llm {

namespace dom = simdjson::dom;

namespace {

// Larger headers are refused before any copy (Hugging Face's reader uses the same bound).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
// The largest model.safetensors.index.json read.
constexpr uint64_t kMaxIndexBytes = 64u << 20;
constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::string_view kSingleName = "model.safetensors";

struct DtypeInfo {
  SafetensorsDtype dtype;
  std::string_view name;
  size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {SafetensorsDtype::kBool, "BOOL", 1},       {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},           {SafetensorsDtype::kF8_E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::kF8_E5M2, "F8_E5M2", 1}, {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kU16, "U16", 2},         {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},       {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kU32, "U32", 4},         {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kI64, "I64", 8},         {SafetensorsDtype::kU64, "U64", 8},
    {SafetensorsDtype::kF64, "F64", 8},
};

const DtypeInfo* FindDtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::string_view JsonTypeName(dom::element_type t) {
  switch (t) {
    case dom::element_type::ARRAY:
      return "an array";
    case dom::element_type::OBJECT:
      return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      return "a number";
    case dom::element_type::STRING:
      return "a string";
    case dom::element_type::BOOL:
      return "a bool";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "a JSON value";
}

// Parses `text` (copied into simdjson's padded buffer) into *root, held by *parser.
Status ParseJson(std::string_view text, std::string_view what, dom::parser* parser,
                 dom::element* root) {
  simdjson::error_code error = parser->parse(text.data(), text.size(), true).get(*root);
  if (error == simdjson::MEMALLOC || error == simdjson::CAPACITY) {
    return Status::ResourceExhausted(fmt::format("cannot allocate memory to parse {}", what));
  }
  if (error != simdjson::SUCCESS) {
    return Status::InvalidArgument(
        fmt::format("{} is not valid JSON: {}", what, simdjson::error_message(error)));
  }
  return Status::OK();
}

// A JSON integer in [0, 2^63).
bool GetNonNegative(dom::element e, int64_t* out) {
  if (e.type() != dom::element_type::INT64 && e.type() != dom::element_type::UINT64) return false;
  uint64_t v = 0;
  if (e.get_uint64().get(v) != simdjson::SUCCESS) return false;
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace

std::string_view SafetensorsDtypeName(SafetensorsDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "";
}

size_t SafetensorsDtypeSize(SafetensorsDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d.size;
  }
  return 0;
}

int64_t SafetensorsTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated at parse time not to overflow
  return n;
}

// ---------------------------------------------------------------------------------------------
// SafetensorsFile

SafetensorsFile::~SafetensorsFile() = default;

Status SafetensorsFile::ParseHeader() {
  const uint64_t size = bytes_.size();
  if (size < 8) {
    return Status::InvalidArgument(fmt::format(
        "not a safetensors file: {} bytes, too short for the 8-byte header length", size));
  }
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes_.data(), 8);
  if (header_bytes > size - 8) {
    return Status::InvalidArgument(fmt::format(
        "not a safetensors file (or a truncated one): the header length is {} bytes but only {} "
        "bytes follow",
        header_bytes, size - 8));
  }
  if (header_bytes > kMaxHeaderBytes) {
    return Status::InvalidArgument(
        fmt::format("safetensors header of {} bytes is larger than the {}-byte limit", header_bytes,
                    kMaxHeaderBytes));
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes_.data() + 8), header_bytes);
  const uint8_t* data = bytes_.data() + 8 + header_bytes;
  const uint64_t data_size = size - 8 - header_bytes;

  dom::parser parser;
  dom::element root;
  KILN_RETURN_IF_ERROR(ParseJson(header, "the safetensors header", &parser, &root));
  dom::object top;
  if (root.get_object().get(top) != simdjson::SUCCESS) {
    return Status::InvalidArgument(
        fmt::format("the safetensors header is {}, not an object", JsonTypeName(root.type())));
  }
  for (dom::key_value_pair field : top) {
    const std::string_view name = field.key;
    if (name == "__metadata__") {
      dom::object meta;
      if (field.value.get_object().get(meta) != simdjson::SUCCESS) {
        return Status::InvalidArgument(fmt::format(
            "safetensors '__metadata__' is {}, not an object", JsonTypeName(field.value.type())));
      }
      for (dom::key_value_pair m : meta) {
        std::string_view value;
        if (m.value.get_string().get(value) != simdjson::SUCCESS) {
          return Status::InvalidArgument(
              fmt::format("safetensors '__metadata__' entry '{}' is {}, not a string", m.key,
                          JsonTypeName(m.value.type())));
        }
        metadata_.emplace_back(std::string(m.key), std::string(value));
      }
      continue;
    }
    SafetensorsTensor t;
    t.name = std::string(name);
    dom::object info;
    if (field.value.get_object().get(info) != simdjson::SUCCESS) {
      return Status::InvalidArgument(fmt::format("safetensors tensor '{}' is {}, not an object",
                                                 name, JsonTypeName(field.value.type())));
    }
    dom::element dtype_el;
    dom::element shape_el;
    dom::element offsets_el;
    if (info.at_key("dtype").get(dtype_el) != simdjson::SUCCESS ||
        info.at_key("shape").get(shape_el) != simdjson::SUCCESS ||
        info.at_key("data_offsets").get(offsets_el) != simdjson::SUCCESS) {
      return Status::InvalidArgument(fmt::format(
          "safetensors tensor '{}' lacks one of 'dtype', 'shape' and 'data_offsets'", name));
    }
    std::string_view dtype_name;
    if (dtype_el.get_string().get(dtype_name) != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("safetensors tensor '{}': 'dtype' is {}, not a "
                      "string",
                      name, JsonTypeName(dtype_el.type())));
    }
    const DtypeInfo* dtype = FindDtype(dtype_name);
    if (dtype == nullptr) {
      return Status::InvalidArgument(
          fmt::format("safetensors tensor '{}' has unknown dtype '{}'", name, dtype_name));
    }
    t.dtype = dtype->dtype;
    dom::array shape;
    if (shape_el.get_array().get(shape) != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("safetensors tensor '{}': 'shape' is {}, not an array", name,
                      JsonTypeName(shape_el.type())));
    }
    int64_t elements = 1;
    for (dom::element d : shape) {
      int64_t dim = 0;
      if (!GetNonNegative(d, &dim)) {
        return Status::InvalidArgument(
            fmt::format("safetensors tensor '{}': shape dim {} is not a non-negative integer", name,
                        t.shape.size()));
      }
      t.shape.push_back(dim);
      if (__builtin_mul_overflow(elements, dim, &elements)) {
        return Status::InvalidArgument(fmt::format(
            "safetensors tensor '{}' has too many elements: its shape overflows 64 bits", name));
      }
    }
    dom::array offsets;
    dom::element begin_el;
    dom::element end_el;
    int64_t begin = 0;
    int64_t end = 0;
    if (offsets_el.get_array().get(offsets) != simdjson::SUCCESS || offsets.size() != 2 ||
        offsets.at(0).get(begin_el) != simdjson::SUCCESS ||
        offsets.at(1).get(end_el) != simdjson::SUCCESS || !GetNonNegative(begin_el, &begin) ||
        !GetNonNegative(end_el, &end)) {
      return Status::InvalidArgument(fmt::format(
          "safetensors tensor '{}': 'data_offsets' must be two non-negative integers [begin, end]",
          name));
    }
    if (end < begin) {
      return Status::InvalidArgument(fmt::format(
          "safetensors tensor '{}' has data_offsets [{}, {}]: end before begin", name, begin, end));
    }
    if (static_cast<uint64_t>(end) > data_size) {
      return Status::InvalidArgument(fmt::format(
          "safetensors tensor '{}' has data_offsets [{}, {}], past the end of the {} data bytes "
          "(the file may be truncated)",
          name, begin, end, data_size));
    }
    uint64_t want = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(elements), dtype->size, &want) ||
        want != static_cast<uint64_t>(end - begin)) {
      return Status::InvalidArgument(fmt::format(
          "safetensors tensor '{}' ({} {}) spans {} bytes; its shape and dtype need {} x {}", name,
          dtype->name, ShapeString(t.shape), end - begin, elements, dtype->size));
    }
    t.nbytes = static_cast<size_t>(want);
    t.data = t.nbytes > 0 ? data + begin : nullptr;
    tensors_.push_back(std::move(t));
  }
  // Names (the JSON may repeat a key), then overlaps.
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!index_.emplace(tensors_[i].name, i).second) {
      return Status::InvalidArgument(
          fmt::format("safetensors tensor '{}' is named twice in the header", tensors_[i].name));
    }
  }
  std::vector<const SafetensorsTensor*> by_offset;
  for (const SafetensorsTensor& t : tensors_) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(
      by_offset.begin(), by_offset.end(),
      [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsTensor* a = by_offset[i - 1];
    const SafetensorsTensor* b = by_offset[i];
    if (a->data + a->nbytes > b->data) {
      return Status::InvalidArgument(
          fmt::format("safetensors tensors '{}' (data bytes [{}, {})) and '{}' (data bytes [{}, "
                      "{})) overlap",
                      a->name, a->data - data, a->data - data + a->nbytes, b->name, b->data - data,
                      b->data - data + b->nbytes));
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(std::span<const uint8_t> bytes) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->bytes_ = bytes;
  KILN_RETURN_IF_ERROR(file->ParseHeader());
  return file;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapping, MappedFile::Open(path));
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->bytes_ = mapping->bytes();
  file->mapping_ = std::move(mapping);
  file->path_ = path;
  Status s = file->ParseHeader();
  if (!s.ok()) return s.WithContext(fmt::format("'{}'", path));
  return file;
}

const SafetensorsTensor* SafetensorsFile::FindTensor(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

// ---------------------------------------------------------------------------------------------
// SafetensorsSet

SafetensorsSet::~SafetensorsSet() = default;

Status SafetensorsSet::Add(std::unique_ptr<SafetensorsFile> file) {
  for (const SafetensorsTensor& t : file->tensors()) {
    auto [it, inserted] = index_.emplace(t.name, &t);
    if (!inserted) {
      const SafetensorsFile* other = nullptr;
      for (const auto& f : files_) {
        if (f->FindTensor(t.name) == it->second) other = f.get();
      }
      return Status::InvalidArgument(fmt::format("tensor '{}' is in both '{}' and '{}'", t.name,
                                                 other ? other->path() : "?", file->path()));
    }
    tensors_.push_back(&t);
  }
  files_.push_back(std::move(file));
  return Status::OK();
}

Result<std::unique_ptr<SafetensorsSet>> SafetensorsSet::OpenFiles(
    const std::vector<std::string>& paths) {
  std::unique_ptr<SafetensorsSet> set(new SafetensorsSet());
  for (const std::string& path : paths) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    KILN_RETURN_IF_ERROR(set->Add(std::move(file)));
  }
  std::sort(
      set->tensors_.begin(), set->tensors_.end(),
      [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->name < b->name; });
  return set;
}

namespace {

namespace fs = std::filesystem;

// Whether `name` (from an index) is a relative path that stays inside the directory.
bool IsSafeShardName(std::string_view name) {
  if (name.empty() || name.front() == '/') return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    std::string_view part = name.substr(start, slash - start);
    if (part == "..") return false;
    start = slash + 1;
  }
  return true;
}

// The shard files an index names, and its tensor -> file map.
struct ShardIndex {
  std::vector<std::string> files;  // sorted, unique
  std::vector<std::pair<std::string, std::string>> weight_map;
};

Result<ShardIndex> ReadIndex(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapping, MappedFile::Open(path));
  std::span<const uint8_t> bytes = mapping->bytes();
  if (bytes.size() > kMaxIndexBytes) {
    return Status::InvalidArgument(fmt::format("'{}' is {} bytes, more than the {}-byte limit",
                                               path, bytes.size(), kMaxIndexBytes));
  }
  dom::parser parser;
  dom::element root;
  const std::string what = fmt::format("'{}'", path);
  KILN_RETURN_IF_ERROR(
      ParseJson(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), what,
                &parser, &root));
  dom::object weight_map;
  if (root.at_key("weight_map").get_object().get(weight_map) != simdjson::SUCCESS) {
    return Status::InvalidArgument(
        fmt::format("{} has no \"weight_map\" object (tensor name -> file name)", what));
  }
  ShardIndex index;
  std::set<std::string> files;
  for (dom::key_value_pair entry : weight_map) {
    std::string_view file;
    if (entry.value.get_string().get(file) != simdjson::SUCCESS) {
      return Status::InvalidArgument(fmt::format("{}: weight_map entry '{}' is {}, not a file name",
                                                 what, entry.key,
                                                 JsonTypeName(entry.value.type())));
    }
    if (!IsSafeShardName(file)) {
      return Status::InvalidArgument(fmt::format(
          "{}: weight_map entry '{}' names the file '{}', which is not a relative path inside the "
          "directory",
          what, entry.key, file));
    }
    files.emplace(file);
    index.weight_map.emplace_back(std::string(entry.key), std::string(file));
  }
  if (files.empty()) {
    return Status::InvalidArgument(fmt::format("{}: the weight_map names no tensors", what));
  }
  index.files.assign(files.begin(), files.end());
  return index;
}

}  // namespace

Result<std::unique_ptr<SafetensorsSet>> SafetensorsSet::OpenDirectory(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) {
    return Status::NotFound(fmt::format("checkpoint directory '{}' does not exist", dir));
  }
  if (!fs::is_directory(st)) {
    return Status::InvalidArgument(fmt::format("'{}' is not a directory", dir));
  }
  const fs::path root(dir);
  const std::string index_path = (root / kIndexName).string();
  if (fs::exists(index_path, ec)) {
    KILN_ASSIGN_OR_RETURN(ShardIndex index, ReadIndex(index_path));
    std::vector<std::string> paths;
    for (const std::string& f : index.files) paths.push_back((root / f).string());
    Result<std::unique_ptr<SafetensorsSet>> set = OpenFiles(paths);
    if (!set.ok()) {
      return set.status().WithContext(fmt::format("a shard that '{}' names", index_path));
    }
    for (const auto& [tensor, file] : index.weight_map) {
      const SafetensorsTensor* t = (*set)->FindTensor(tensor);
      const std::string want = (root / file).string();
      const SafetensorsFile* holder = nullptr;
      for (const auto& f : (*set)->files()) {
        if (t != nullptr && f->FindTensor(tensor) == t) holder = f.get();
      }
      if (holder == nullptr || holder->path() != want) {
        return Status::InvalidArgument(fmt::format(
            "'{}' maps tensor '{}' to '{}', which has no such tensor", index_path, tensor, file));
      }
    }
    return std::move(set).value();
  }
  const std::string single = (root / kSingleName).string();
  if (fs::exists(single, ec)) return OpenFiles({single});
  std::vector<std::string> paths;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code ec2;
    if (p.extension() == ".safetensors" && it->is_regular_file(ec2)) paths.push_back(p.string());
  }
  if (ec) {
    return Status::InvalidArgument(
        fmt::format("cannot list the directory '{}': {}", dir, ec.message()));
  }
  if (paths.empty()) {
    return Status::NotFound(
        fmt::format("no safetensors weights in '{}': expected {}, {} or "
                    "*.safetensors",
                    dir, kIndexName, kSingleName));
  }
  std::sort(paths.begin(), paths.end());
  return OpenFiles(paths);
}

const SafetensorsTensor* SafetensorsSet::FindTensor(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

uint64_t SafetensorsSet::total_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_) n += f->size();
  return n;
}

}  // namespace kiln::llm
