// SPDX-License-Identifier: Apache-2.0
// NPY reader and writer (see npy.h).
//
// NOTE: the header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Rather than evaluate Python, a small recursive-descent parser accepts exactly the subset numpy
// writes (quoted strings, True/False, tuples of non-negative integers with an optional Python 2
// 'L' suffix) and rejects everything else with the byte offset of the problem.

#include "tensor/npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

namespace kiln {
namespace {

static_assert(std::endian::native == std::endian::little,
              "NPY and kiln tensors are little-endian; a big-endian host needs byte swapping here");

constexpr std::string_view kMagic("\x93NUMPY", 6);
constexpr size_t kHeaderAlignment = 64;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  Result<NpyHeader> Parse() {
    NpyHeader header;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      KILN_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after key");
      SkipSpace();
      if (key == "descr") {
        if (seen_descr) return Error("duplicate key 'descr'");
        seen_descr = true;
        if (Peek() == '[') {
          return Status::Unimplemented("NPY structured dtypes (a list 'descr') are not supported");
        }
        KILN_ASSIGN_OR_RETURN(header.descr, ParseString());
      } else if (key == "fortran_order") {
        if (seen_fortran) return Error("duplicate key 'fortran_order'");
        seen_fortran = true;
        KILN_ASSIGN_OR_RETURN(header.fortran_order, ParseBool());
      } else if (key == "shape") {
        if (seen_shape) return Error("duplicate key 'shape'");
        seen_shape = true;
        KILN_ASSIGN_OR_RETURN(header.shape, ParseShape());
      } else {
        return Error(fmt::format("unexpected key '{}'", key));
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the dict");
    if (!seen_descr || !seen_fortran || !seen_shape) {
      return Status::InvalidArgument(
          "malformed NPY header: it must have the keys 'descr', 'fortran_order' and 'shape'");
    }
    return header;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c || pos_ >= text_.size()) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  Status Error(std::string_view what) const {
    return Status::InvalidArgument(
        fmt::format("malformed NPY header at offset {}: {}", pos_, what));
  }

  Result<std::string> ParseString() {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') return Error("escape sequences are not supported");
      ++pos_;
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    std::string out(text_.substr(start, pos_ - start));
    ++pos_;
    return out;
  }

  Result<bool> ParseBool() {
    if (text_.substr(pos_).starts_with("True")) {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_).starts_with("False")) {
      pos_ += 5;
      return false;
    }
    return Error("expected True or False");
  }

  Result<int64_t> ParseDim() {
    if (Peek() < '0' || Peek() > '9') return Error("expected a non-negative integer dimension");
    int64_t value = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      const int digit = Peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        return Error("dimension does not fit in 64 bits");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    Consume('L');  // Python 2 long suffix, as in files written by old numpy
    return value;
  }

  Result<std::vector<int64_t>> ParseShape() {
    if (!Consume('(')) return Error("expected '(' to start the shape tuple");
    std::vector<int64_t> dims;
    SkipSpace();
    if (Consume(')')) return dims;
    while (true) {
      if (dims.size() > 64) return Error("shape has too many dimensions");
      KILN_ASSIGN_OR_RETURN(int64_t dim, ParseDim());
      dims.push_back(dim);
      SkipSpace();
      if (Consume(')')) return dims;
      if (!Consume(',')) return Error("expected ',' or ')' in the shape tuple");
      SkipSpace();
      if (Consume(')')) return dims;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

struct NpyType {
  DataType dtype;
  bool swap;  // big-endian data: swap bytes of each element
};

Result<NpyType> ParseDescr(std::string_view descr) {
  std::string_view body = descr;
  char order = '=';
  if (!body.empty() && (body[0] == '<' || body[0] == '>' || body[0] == '|' || body[0] == '=')) {
    order = body[0];
    body.remove_prefix(1);
  }
  struct Entry {
    std::string_view name;
    DataType dtype;
  };
  static constexpr Entry kTable[] = {
      {"f2", DataType::kFloat16}, {"f4", DataType::kFloat32}, {"f8", DataType::kFloat64},
      {"b1", DataType::kBool},    {"u1", DataType::kUint8},   {"u2", DataType::kUint16},
      {"u4", DataType::kUint32},  {"u8", DataType::kUint64},  {"i1", DataType::kInt8},
      {"i2", DataType::kInt16},   {"i4", DataType::kInt32},   {"i8", DataType::kInt64},
  };
  for (const Entry& e : kTable) {
    if (body == e.name) return NpyType{e.dtype, order == '>' && DataTypeSize(e.dtype) > 1};
  }
  return Status::Unimplemented(fmt::format(
      "NPY dtype '{}' is not supported (supported: f2 f4 f8 b1 u1 u2 u4 u8 i1 i2 i4 i8)", descr));
}

// numpy's descr for a kiln dtype, or nullopt when numpy has no plain equivalent.
std::optional<std::string_view> DescrFor(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return "<f2";
    case DataType::kFloat32:
      return "<f4";
    case DataType::kFloat64:
      return "<f8";
    case DataType::kBool:
      return "|b1";
    case DataType::kUint8:
      return "|u1";
    case DataType::kUint16:
      return "<u2";
    case DataType::kUint32:
      return "<u4";
    case DataType::kUint64:
      return "<u8";
    case DataType::kInt8:
      return "|i1";
    case DataType::kInt16:
      return "<i2";
    case DataType::kInt32:
      return "<i4";
    case DataType::kInt64:
      return "<i8";
    default:
      return std::nullopt;
  }
}

uint32_t ReadLittleEndian(std::string_view bytes, size_t offset, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return v;
}

}  // namespace

Result<OwnedTensor> ReadNpy(std::string_view bytes) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    return Status::InvalidArgument("not an NPY file: it does not start with \"\\x93NUMPY\"");
  }
  if (bytes.size() < 8) {
    return Status::InvalidArgument(
        fmt::format("NPY file is truncated: {} bytes, too short for the version", bytes.size()));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  size_t length_width;
  if (major == 1 && minor == 0) {
    length_width = 2;
  } else if ((major == 2 || major == 3) && minor == 0) {
    length_width = 4;
  } else {
    return Status::Unimplemented(fmt::format(
        "NPY format version {}.{} is not supported (supported: 1.0, 2.0, 3.0)", major, minor));
  }
  const size_t header_start = 8 + length_width;
  if (bytes.size() < header_start) {
    return Status::InvalidArgument(fmt::format(
        "NPY file is truncated: {} bytes, too short for the header length", bytes.size()));
  }
  const size_t header_len = ReadLittleEndian(bytes, 8, length_width);
  if (header_len > bytes.size() - header_start) {
    return Status::InvalidArgument(
        fmt::format("NPY header is truncated: it declares {} bytes but only {} follow", header_len,
                    bytes.size() - header_start));
  }
  // Versions 1.0 and 2.0 use latin-1 and 3.0 UTF-8 text; the accepted subset is plain ASCII, and
  // any other byte is rejected by the parser (outside strings) or by the dtype lookup (inside).
  KILN_ASSIGN_OR_RETURN(NpyHeader header,
                        HeaderParser(bytes.substr(header_start, header_len)).Parse());
  KILN_ASSIGN_OR_RETURN(NpyType type, ParseDescr(header.descr));
  if (header.fortran_order) {
    return Status::Unimplemented(
        "NPY file is in Fortran (column-major) order; only C order is supported");
  }
  Result<Shape> shape = Shape::Create(header.shape);
  if (!shape.ok()) return shape.status().WithContext("NPY shape");
  const size_t elem_bytes = DataTypeSize(type.dtype);
  const std::string_view data = bytes.substr(header_start + header_len);
  const uint64_t count = static_cast<uint64_t>(shape->NumElements());
  if (count > data.size() / elem_bytes || count * elem_bytes != data.size()) {
    return Status::InvalidArgument(
        fmt::format("NPY data is {} bytes but shape {} of '{}' needs {} elements of {} bytes",
                    data.size(), shape->ToString(), header.descr, count, elem_bytes));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor tensor, OwnedTensor::Allocate(type.dtype, *shape));
  if (!data.empty()) std::memcpy(tensor.raw_data(), data.data(), data.size());
  auto* out = static_cast<unsigned char*>(tensor.raw_data());
  if (type.swap) {
    for (uint64_t i = 0; i < count; ++i) {
      std::reverse(out + i * elem_bytes, out + (i + 1) * elem_bytes);
    }
  }
  if (type.dtype == DataType::kBool) {
    for (uint64_t i = 0; i < count; ++i) out[i] = out[i] != 0 ? 1 : 0;
  }
  return tensor;
}

Result<std::string> WriteNpy(const Tensor& tensor) {
  std::optional<std::string_view> descr = DescrFor(tensor.dtype());
  if (!descr) {
    return Status::Unimplemented(
        fmt::format("cannot write a {} tensor as NPY: numpy has no such "
                    "dtype",
                    DataTypeName(tensor.dtype())));
  }
  if (!tensor.device().is_cpu()) {
    return Status::InvalidArgument(
        fmt::format("cannot write a tensor on {} as NPY; copy it to the host first",
                    tensor.device().ToString()));
  }
  if (!tensor.is_contiguous()) {
    return Status::InvalidArgument("cannot write a non-contiguous tensor view as NPY");
  }
  std::string shape_text = "(";
  for (int i = 0; i < tensor.rank(); ++i) {
    if (i > 0) shape_text += ", ";
    shape_text += std::to_string(tensor.dim(i));
  }
  shape_text += tensor.rank() == 1 ? ",)" : ")";
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", *descr, shape_text);
  // magic (6) + version (2) + length (2) + dict + padding + '\n', a multiple of 64 bytes.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((kHeaderAlignment - unpadded % kHeaderAlignment) % kHeaderAlignment, ' ');
  dict.push_back('\n');
  // The longest possible dict (rank 8, 19-digit dims) is far below the 1.0 limit of 65535 bytes.
  KILN_CHECK(dict.size() <= 0xffff, "NPY header of ", dict.size(), " bytes");

  std::string out;
  out.reserve(10 + dict.size() + tensor.size_bytes());
  out.append(kMagic);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  out.append(dict);
  if (tensor.size_bytes() > 0) {
    out.append(static_cast<const char*>(tensor.raw_data()), tensor.size_bytes());
  }
  return out;
}

}  // namespace kiln
