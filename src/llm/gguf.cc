// SPDX-License-Identifier: Apache-2.0
// GGUF parsing (gguf.h) and the read-only file mapping both readers share.
//
// NOTE: the file is untrusted. Every count and length is compared with the bytes that remain
// before anything is sized by it: a count whose smallest possible encoding cannot fit is an
// error before any vector grows, and vectors grow only as entries are actually read. Scalars are
// read with memcpy (the file gives no alignment for metadata).

#include "llm/gguf.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>
#include <utility>

namespace kiln::llm {

static_assert(std::endian::native == std::endian::little,
              "the GGUF and safetensors readers assume a little-endian host");

namespace {

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// Bytes of one scalar of a metadata type; 0 for string, array and unknown numbers.
size_t ScalarBytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

bool IsIntegerType(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kU16:
    case GgufValueType::kI16:
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kU64:
    case GgufValueType::kI64:
      return true;
    default:
      return false;
  }
}

bool IsFloatType(GgufValueType t) { return t == GgufValueType::kF32 || t == GgufValueType::kF64; }

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The integer at p, of integer type t. Sets *too_big for a u64 above the int64 range.
int64_t LoadInt(GgufValueType t, const uint8_t* p, bool* too_big) {
  *too_big = false;
  switch (t) {
    case GgufValueType::kU8:
      return Load<uint8_t>(p);
    case GgufValueType::kI8:
      return Load<int8_t>(p);
    case GgufValueType::kU16:
      return Load<uint16_t>(p);
    case GgufValueType::kI16:
      return Load<int16_t>(p);
    case GgufValueType::kU32:
      return Load<uint32_t>(p);
    case GgufValueType::kI32:
      return Load<int32_t>(p);
    case GgufValueType::kI64:
      return Load<int64_t>(p);
    case GgufValueType::kU64: {
      uint64_t v = Load<uint64_t>(p);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        *too_big = true;
        return 0;
      }
      return static_cast<int64_t>(v);
    }
    default:
      return 0;
  }
}

// The number at p of integer or float type t, as a double (u64 exactly as a double can).
double LoadDouble(GgufValueType t, const uint8_t* p) {
  switch (t) {
    case GgufValueType::kF32:
      return Load<float>(p);
    case GgufValueType::kF64:
      return Load<double>(p);
    case GgufValueType::kU64:
      return static_cast<double>(Load<uint64_t>(p));
    default: {
      bool unused = false;
      return static_cast<double>(LoadInt(t, p, &unused));
    }
  }
}

std::string TypeLabel(GgufValueType t) {
  std::string_view name = GgufValueTypeName(t);
  if (name.empty()) return fmt::format("type {}", static_cast<uint32_t>(t));
  return std::string(name);
}

// `"text"` with quotes, backslashes and control bytes escaped, cut at max_bytes.
std::string QuoteString(std::string_view s, size_t max_bytes) {
  std::string out = "\"";
  size_t n = std::min(s.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (n < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

std::string ShapeString(const std::vector<int64_t>& ne) {
  std::string out = "[";
  for (size_t i = 0; i < ne.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ne[i]);
  }
  return out + "]";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// MappedFile

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string msg = fmt::format("cannot open '{}': {}", path, ErrnoText(err));
    if (err == ENOENT || err == ENOTDIR) return Status::NotFound(std::move(msg));
    if (err == EACCES || err == EPERM) return Status::PermissionDenied(std::move(msg));
    return Status::InvalidArgument(std::move(msg));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::InvalidArgument(fmt::format("cannot stat '{}': {}", path, ErrnoText(err)));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(fmt::format("'{}' is a directory, not a file", path));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(fmt::format("'{}' is not a regular file", path));
  }
  size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return Status::InvalidArgument(
          fmt::format("cannot map '{}' ({} bytes): {}", path, size, ErrnoText(err)));
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

void GgufFile::ReleasePages(std::span<const uint8_t> bytes) const {
  if (mapping_ == nullptr || bytes.empty()) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size()) / page * page;
  const std::span<const uint8_t> all = mapping_->bytes();
  if (begin >= end || begin < reinterpret_cast<uintptr_t>(all.data()) ||
      end > reinterpret_cast<uintptr_t>(all.data()) + all.size()) {
    return;
  }
  // A shared read-only file mapping: the pages come back from the file when touched.
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

// ---------------------------------------------------------------------------------------------
// GgufValue

std::string_view GgufValueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
      return "u8";
    case GgufValueType::kI8:
      return "i8";
    case GgufValueType::kU16:
      return "u16";
    case GgufValueType::kI16:
      return "i16";
    case GgufValueType::kU32:
      return "u32";
    case GgufValueType::kI32:
      return "i32";
    case GgufValueType::kF32:
      return "f32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kU64:
      return "u64";
    case GgufValueType::kI64:
      return "i64";
    case GgufValueType::kF64:
      return "f64";
  }
  return "";
}

Status GgufValue::WrongType(std::string_view wanted) const {
  std::string found = is_array() ? fmt::format("an array of {}", TypeLabel(element_type_))
                                 : std::string(GgufValueTypeName(type_));
  return Status::InvalidArgument(
      fmt::format("GGUF key '{}' holds {}; wanted {}", key_, found, wanted));
}

Result<int64_t> GgufValue::AsInt() const {
  if (!IsIntegerType(type_)) return WrongType("an integer");
  bool too_big = false;
  int64_t v = LoadInt(type_, data_, &too_big);
  if (too_big) {
    return Status::InvalidArgument(fmt::format(
        "GGUF key '{}' holds the u64 {}, beyond the int64 range", key_, Load<uint64_t>(data_)));
  }
  return v;
}

Result<double> GgufValue::AsFloat() const {
  if (!IsIntegerType(type_) && !IsFloatType(type_)) return WrongType("a number");
  return LoadDouble(type_, data_);
}

Result<bool> GgufValue::AsBool() const {
  if (type_ != GgufValueType::kBool) return WrongType("a bool");
  return *data_ != 0;
}

Result<std::string_view> GgufValue::AsString() const {
  if (type_ != GgufValueType::kString) return WrongType("a string");
  return string_;
}

Result<std::vector<std::string_view>> GgufValue::AsStringArray() const {
  if (!is_array() || element_type_ != GgufValueType::kString) {
    return WrongType("an array of strings");
  }
  return strings_;
}

Result<std::vector<float>> GgufValue::AsFloatArray() const {
  if (!is_array() || (!IsFloatType(element_type_) && !IsIntegerType(element_type_))) {
    return WrongType("an array of numbers");
  }
  std::vector<float> out(count_);
  const size_t step = ScalarBytes(element_type_);
  if (element_type_ == GgufValueType::kF32) {
    if (count_ > 0) std::memcpy(out.data(), data_, count_ * sizeof(float));
  } else {
    for (uint64_t i = 0; i < count_; ++i) {
      out[i] = static_cast<float>(LoadDouble(element_type_, data_ + i * step));
    }
  }
  return out;
}

Result<std::vector<int64_t>> GgufValue::AsIntArray() const {
  if (!is_array() || !IsIntegerType(element_type_)) return WrongType("an array of integers");
  std::vector<int64_t> out(count_);
  const size_t step = ScalarBytes(element_type_);
  for (uint64_t i = 0; i < count_; ++i) {
    bool too_big = false;
    out[i] = LoadInt(element_type_, data_ + i * step, &too_big);
    if (too_big) {
      return Status::InvalidArgument(
          fmt::format("GGUF key '{}': element {} is the u64 {}, beyond the int64 range", key_, i,
                      Load<uint64_t>(data_ + i * step)));
    }
  }
  return out;
}

Result<int64_t> GgufValue::IntAt(uint64_t i) const {
  KILN_CHECK(is_array() && i < count_, "GgufValue::IntAt(", i, ") on '", key_, "'");
  if (!IsIntegerType(element_type_)) return WrongType("an array of integers");
  const uint8_t* p = data_ + i * ScalarBytes(element_type_);
  bool too_big = false;
  int64_t v = LoadInt(element_type_, p, &too_big);
  if (too_big) {
    return Status::InvalidArgument(
        fmt::format("GGUF key '{}': element {} is the u64 {}, beyond the int64 range", key_, i,
                    Load<uint64_t>(p)));
  }
  return v;
}

Result<double> GgufValue::FloatAt(uint64_t i) const {
  KILN_CHECK(is_array() && i < count_, "GgufValue::FloatAt(", i, ") on '", key_, "'");
  if (!IsFloatType(element_type_) && !IsIntegerType(element_type_)) {
    return WrongType("an array of numbers");
  }
  return LoadDouble(element_type_, data_ + i * ScalarBytes(element_type_));
}

Result<std::string_view> GgufValue::StringAt(uint64_t i) const {
  KILN_CHECK(is_array() && i < count_, "GgufValue::StringAt(", i, ") on '", key_, "'");
  if (element_type_ != GgufValueType::kString) return WrongType("an array of strings");
  return strings_[i];
}

namespace {

std::string ScalarToString(GgufValueType t, const uint8_t* p) {
  switch (t) {
    case GgufValueType::kBool:
      return *p ? "true" : "false";
    case GgufValueType::kF32:
      return fmt::format("{}", Load<float>(p));
    case GgufValueType::kF64:
      return fmt::format("{}", Load<double>(p));
    case GgufValueType::kU64:
      return fmt::format("{}", Load<uint64_t>(p));
    default: {
      bool unused = false;
      return fmt::format("{}", LoadInt(t, p, &unused));
    }
  }
}

constexpr size_t kMaxPrintedStringBytes = 120;

}  // namespace

std::string GgufValue::ToString(size_t max_elements) const {
  if (type_ == GgufValueType::kString) return QuoteString(string_, kMaxPrintedStringBytes);
  if (!is_array()) return ScalarToString(type_, data_);
  std::string out = "[";
  const uint64_t shown = std::min<uint64_t>(count_, max_elements);
  for (uint64_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    if (element_type_ == GgufValueType::kString) {
      out += QuoteString(strings_[i], kMaxPrintedStringBytes);
    } else {
      out += ScalarToString(element_type_, data_ + i * ScalarBytes(element_type_));
    }
  }
  if (shown < count_) out += fmt::format("{}... ({} total)", shown ? ", " : "", count_);
  return out + "]";
}

int64_t GgufTensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // validated at parse time not to overflow
  return n;
}

// ---------------------------------------------------------------------------------------------
// Parsing

// Reads the bytes of one file into a GgufFile, validating as it goes.
class GgufParser {
 public:
  GgufParser(GgufFile* file, std::span<const uint8_t> bytes) : file_(file), bytes_(bytes) {}

  Status Run();

 private:
  size_t remaining() const { return bytes_.size() - pos_; }

  // Error for a read of `need` bytes at pos_ that does not fit.
  Status Truncated(std::string_view what, uint64_t need) const {
    return Status::InvalidArgument(
        fmt::format("GGUF file truncated: {} needs {} bytes at offset {}, but the file has {} "
                    "bytes left",
                    what, need, pos_, remaining()));
  }
  template <typename T>
  Status Read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) return Truncated(what, sizeof(T));
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::OK();
  }
  // A gguf string: u64 length, then the bytes. `what` is built only on error.
  template <typename What>
  Status ReadString(std::string_view* out, const What& what) {
    uint64_t len = 0;
    if (remaining() < sizeof(len)) return Truncated(what() + " (its length)", sizeof(len));
    std::memcpy(&len, bytes_.data() + pos_, sizeof(len));
    pos_ += sizeof(len);
    if (len > remaining()) return Truncated(what(), len);
    *out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return Status::OK();
  }

  Status ReadHeader(uint64_t* n_tensors, uint64_t* n_kv);
  Status ReadValue(GgufValue* v, uint64_t index);
  Status ReadAlignment();
  Status ReadTensorInfo(uint64_t index, std::string_view* name_view);
  Status PlaceTensors();

  GgufFile* file_;
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

Status GgufParser::ReadHeader(uint64_t* n_tensors, uint64_t* n_kv) {
  if (bytes_.size() < 4) {
    return Status::InvalidArgument(
        fmt::format("not a GGUF file: {} bytes, too short for the 4-byte magic", bytes_.size()));
  }
  const uint8_t* m = bytes_.data();
  if (std::memcmp(m, "GGUF", 4) != 0) {
    if (std::memcmp(m, "FUGG", 4) == 0) {
      return Status::InvalidArgument(
          "not a GGUF file kiln can read: the magic is byte-swapped ('FUGG'), as in a big-endian "
          "file; kiln reads little-endian GGUF only");
    }
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      shown += (m[i] >= 0x20 && m[i] < 0x7f) ? std::string(1, static_cast<char>(m[i]))
                                             : fmt::format("\\x{:02x}", m[i]);
    }
    return Status::InvalidArgument(
        fmt::format("not a GGUF file: the magic is '{}', not 'GGUF'", shown));
  }
  pos_ = 4;
  uint32_t version = 0;
  KILN_RETURN_IF_ERROR(Read(&version, "the version"));
  if (version == 1) {
    return Status::InvalidArgument(
        "GGUF version 1 is not supported (kiln reads versions 2 and 3); convert the file again "
        "with a current llama.cpp");
  }
  if (version != 2 && version != 3) {
    uint32_t swapped = __builtin_bswap32(version);
    if ((version & 0xffff) == 0 && swapped >= 1 && swapped <= 3) {
      return Status::InvalidArgument(fmt::format(
          "this GGUF file is big-endian (its version field reads {} when swapped); kiln reads "
          "little-endian GGUF only",
          swapped));
    }
    return Status::InvalidArgument(
        fmt::format("unsupported GGUF version {} (kiln reads versions 2 and 3)", version));
  }
  file_->version_ = version;
  KILN_RETURN_IF_ERROR(Read(n_tensors, "the tensor count"));
  KILN_RETURN_IF_ERROR(Read(n_kv, "the metadata count"));
  // The smallest metadata entry is 13 bytes (empty key, type, one byte); the smallest tensor
  // info 32 (empty name, rank, one dim, type, offset).
  constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
  constexpr uint64_t kMinTensorBytes = 8 + 4 + 8 + 4 + 8;
  const uint64_t left = remaining();
  if (*n_kv > left / kMinKvBytes || *n_tensors > (left - *n_kv * kMinKvBytes) / kMinTensorBytes) {
    return Status::InvalidArgument(
        fmt::format("GGUF header claims {} metadata entries and {} tensors, more than the {} bytes "
                    "after the header can hold",
                    *n_kv, *n_tensors, left));
  }
  return Status::OK();
}

Status GgufParser::ReadValue(GgufValue* v, uint64_t index) {
  auto key_what = [&] { return fmt::format("the key of metadata entry #{}", index); };
  KILN_RETURN_IF_ERROR(ReadString(&v->key_, key_what));
  uint32_t type = 0;
  auto what = [&](std::string_view part) {
    return fmt::format("{} of GGUF key '{}'", part, v->key_);
  };
  if (remaining() < 4) return Truncated(what("the value type"), 4);
  KILN_RETURN_IF_ERROR(Read(&type, "the value type"));
  v->type_ = static_cast<GgufValueType>(type);
  if (GgufValueTypeName(v->type_).empty()) {
    return Status::InvalidArgument(
        fmt::format("GGUF key '{}' has unknown value type {}", v->key_, type));
  }
  if (v->type_ == GgufValueType::kString) {
    return ReadString(&v->string_, [&] { return what("the string value"); });
  }
  if (v->type_ != GgufValueType::kArray) {
    const size_t n = ScalarBytes(v->type_);
    if (remaining() < n) return Truncated(what("the value"), n);
    v->data_ = bytes_.data() + pos_;
    pos_ += n;
    return Status::OK();
  }
  uint32_t element_type = 0;
  if (remaining() < 4) return Truncated(what("the array element type"), 4);
  KILN_RETURN_IF_ERROR(Read(&element_type, ""));
  v->element_type_ = static_cast<GgufValueType>(element_type);
  if (GgufValueTypeName(v->element_type_).empty()) {
    return Status::InvalidArgument(
        fmt::format("GGUF key '{}' is an array of unknown value type {}", v->key_, element_type));
  }
  if (v->element_type_ == GgufValueType::kArray) {
    return Status::InvalidArgument(
        fmt::format("GGUF key '{}' is an array of arrays, which kiln does not read", v->key_));
  }
  if (remaining() < 8) return Truncated(what("the array length"), 8);
  KILN_RETURN_IF_ERROR(Read(&v->count_, ""));
  if (v->element_type_ == GgufValueType::kString) {
    if (v->count_ > remaining() / 8) {
      return Status::InvalidArgument(
          fmt::format("GGUF key '{}' claims an array of {} strings, more than the {} bytes left "
                      "can hold",
                      v->key_, v->count_, remaining()));
    }
    for (uint64_t i = 0; i < v->count_; ++i) {
      std::string_view s;
      KILN_RETURN_IF_ERROR(ReadString(&s, [&] { return what(fmt::format("string {}", i)); }));
      v->strings_.push_back(s);
    }
    return Status::OK();
  }
  const size_t step = ScalarBytes(v->element_type_);
  if (v->count_ > remaining() / step) {
    return Status::InvalidArgument(fmt::format(
        "GGUF key '{}' claims an array of {} {} values ({} bytes each), more than the {} bytes "
        "left",
        v->key_, v->count_, GgufValueTypeName(v->element_type_), step, remaining()));
  }
  v->data_ = bytes_.data() + pos_;
  pos_ += v->count_ * step;
  return Status::OK();
}

Status GgufParser::ReadAlignment() {
  const GgufValue* a = file_->Find("general.alignment");
  if (a == nullptr) return Status::OK();
  if (a->type() != GgufValueType::kU32) {
    return Status::InvalidArgument(fmt::format(
        "GGUF key 'general.alignment' has type {}; the format requires u32", TypeLabel(a->type())));
  }
  const uint32_t alignment = Load<uint32_t>(a->data_);
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return Status::InvalidArgument(fmt::format(
        "GGUF key 'general.alignment' is {}; the alignment must be a power of two", alignment));
  }
  file_->alignment_ = alignment;
  return Status::OK();
}

Status GgufParser::ReadTensorInfo(uint64_t index, std::string_view* name_view) {
  GgufTensorInfo t;
  KILN_RETURN_IF_ERROR(
      ReadString(name_view, [&] { return fmt::format("the name of tensor #{}", index); }));
  t.name = std::string(*name_view);
  auto what = [&](std::string_view part) { return fmt::format("{} of tensor '{}'", part, t.name); };
  uint32_t n_dims = 0;
  if (remaining() < 4) return Truncated(what("the rank"), 4);
  KILN_RETURN_IF_ERROR(Read(&n_dims, ""));
  if (n_dims < 1 || n_dims > 4) {
    return Status::InvalidArgument(
        fmt::format("tensor '{}' has {} dimensions; GGUF tensors have 1 to 4", t.name, n_dims));
  }
  int64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t ne = 0;
    if (remaining() < 8) return Truncated(what(fmt::format("ne[{}]", d)), 8);
    KILN_RETURN_IF_ERROR(Read(&ne, ""));
    if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::InvalidArgument(
          fmt::format("tensor '{}' has ne[{}] = {}; dimensions must be at least 1 (and fit int64)",
                      t.name, d, ne));
    }
    t.ne.push_back(static_cast<int64_t>(ne));
    if (__builtin_mul_overflow(elements, static_cast<int64_t>(ne), &elements)) {
      return Status::InvalidArgument(fmt::format(
          "tensor '{}' has too many elements: ne[0..{}] multiply past 64 bits", t.name, d));
    }
  }
  uint32_t type = 0;
  if (remaining() < 4) return Truncated(what("the type"), 4);
  KILN_RETURN_IF_ERROR(Read(&type, ""));
  t.type = static_cast<GgmlType>(type);
  std::string_view type_name = GgmlTypeName(t.type);
  if (type_name.empty()) {
    return Status::InvalidArgument(
        fmt::format("tensor '{}' has unknown ggml type {}", t.name, type));
  }
  const int64_t block = BlockElements(t.type);
  const size_t block_bytes = BlockBytes(t.type);
  if (block <= 0 || block_bytes == 0) {
    return Status::InvalidArgument(fmt::format(
        "tensor '{}' has ggml type {}, whose block size kiln does not know", t.name, type_name));
  }
  if (t.ne[0] % block != 0) {
    return Status::InvalidArgument(
        fmt::format("tensor '{}' ({}) has ne[0] = {}, not a multiple of the {}-element blocks of "
                    "{}",
                    t.name, type_name, t.ne[0], block, type_name));
  }
  // elements / block blocks (exact: ne[0] is a multiple of block), each block_bytes bytes.
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(elements / block),
                             static_cast<uint64_t>(block_bytes), &nbytes) ||
      nbytes > bytes_.size()) {
    return Status::InvalidArgument(
        fmt::format("tensor '{}' ({} {}) needs more bytes than the whole file ({} bytes) holds",
                    t.name, type_name, ShapeString(t.ne), bytes_.size()));
  }
  t.nbytes = static_cast<size_t>(nbytes);
  if (remaining() < 8) return Truncated(what("the offset"), 8);
  KILN_RETURN_IF_ERROR(Read(&t.offset, ""));
  file_->tensors_.push_back(std::move(t));
  return Status::OK();
}

Status GgufParser::PlaceTensors() {
  const uint64_t alignment = file_->alignment_;
  // The data section starts at the first multiple of the alignment after the tensor infos.
  const uint64_t data_offset =
      (static_cast<uint64_t>(pos_) + alignment - 1) / alignment * alignment;
  file_->data_offset_ = data_offset;
  const uint64_t size = bytes_.size();
  const uint64_t data_size = data_offset <= size ? size - data_offset : 0;
  for (GgufTensorInfo& t : file_->tensors_) {
    if (t.offset % alignment != 0) {
      return Status::InvalidArgument(
          fmt::format("tensor '{}' has offset {}, not a multiple of the alignment {}", t.name,
                      t.offset, alignment));
    }
    if (data_offset > size || t.offset > data_size || t.nbytes > data_size - t.offset) {
      return Status::InvalidArgument(fmt::format(
          "tensor '{}' ({} {}, {} bytes at data offset {}) ends past the end of the file: the "
          "data section holds {} bytes (the file may be truncated)",
          t.name, GgmlTypeName(t.type), ShapeString(t.ne), t.nbytes, t.offset, data_size));
    }
    t.data = bytes_.data() + data_offset + t.offset;
  }
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(file_->tensors_.size());
  for (const GgufTensorInfo& t : file_->tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo* a = by_offset[i - 1];
    const GgufTensorInfo* b = by_offset[i];
    if (a->offset + a->nbytes > b->offset) {
      return Status::InvalidArgument(fmt::format(
          "tensors '{}' (data bytes [{}, {})) and '{}' (data bytes [{}, {})) overlap", a->name,
          a->offset, a->offset + a->nbytes, b->name, b->offset, b->offset + b->nbytes));
    }
  }
  return Status::OK();
}

Status GgufParser::Run() {
  file_->bytes_ = bytes_;
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
  KILN_RETURN_IF_ERROR(ReadHeader(&n_tensors, &n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufValue v;
    KILN_RETURN_IF_ERROR(ReadValue(&v, i));
    auto [it, inserted] = file_->metadata_index_.emplace(v.key_, file_->metadata_.size());
    if (!inserted) {
      return Status::InvalidArgument(fmt::format(
          "GGUF key '{}' appears twice (metadata entries #{} and #{})", v.key_, it->second, i));
    }
    file_->metadata_.push_back(std::move(v));
  }
  KILN_RETURN_IF_ERROR(ReadAlignment());
  for (uint64_t i = 0; i < n_tensors; ++i) {
    std::string_view name;
    KILN_RETURN_IF_ERROR(ReadTensorInfo(i, &name));
    auto [it, inserted] = file_->tensor_index_.emplace(name, file_->tensors_.size() - 1);
    if (!inserted) {
      return Status::InvalidArgument(
          fmt::format("tensor '{}' appears twice (tensors #{} and #{})", name, it->second, i));
    }
  }
  return PlaceTensors();
}

// ---------------------------------------------------------------------------------------------
// GgufFile

GgufFile::~GgufFile() = default;

Result<std::unique_ptr<GgufFile>> GgufFile::Parse(std::span<const uint8_t> bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  GgufParser parser(file.get(), bytes);
  KILN_RETURN_IF_ERROR(parser.Run());
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapping, MappedFile::Open(path));
  std::unique_ptr<GgufFile> file(new GgufFile());
  GgufParser parser(file.get(), mapping->bytes());
  Status s = parser.Run();
  if (!s.ok()) return s.WithContext(fmt::format("'{}'", path));
  file->mapping_ = std::move(mapping);
  file->path_ = path;
  return file;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second];
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status MissingKey(std::string_view key) {
  return Status::NotFound(fmt::format("GGUF key '{}' not found", key));
}

}  // namespace

Result<std::string_view> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(key);
  return v->AsString();
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(key);
  return v->AsInt();
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(key);
  return v->AsFloat();
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(key);
  return v->AsBool();
}

Result<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(key);
  return v->AsStringArray();
}

Result<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(key);
  return v->AsFloatArray();
}

Result<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(key);
  return v->AsIntArray();
}

Result<std::string_view> GgufFile::GetStringOr(std::string_view key,
                                               std::string_view fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return fallback;
  return v->AsString();
}

Result<int64_t> GgufFile::GetIntOr(std::string_view key, int64_t fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return fallback;
  return v->AsInt();
}

Result<double> GgufFile::GetFloatOr(std::string_view key, double fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return fallback;
  return v->AsFloat();
}

Result<bool> GgufFile::GetBoolOr(std::string_view key, bool fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return fallback;
  return v->AsBool();
}

}  // namespace kiln::llm
