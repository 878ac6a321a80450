// SPDX-License-Identifier: Apache-2.0
#pragma once
// GGUF files (llama.cpp's model format, versions 2 and 3, little-endian): typed metadata and
// tensor infos over a read-only memory mapping of the file. The tensor data is never copied:
// each GgufTensorInfo points into the mapping, which lives as long as the GgufFile.
//
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open("model.gguf"));
//   KILN_ASSIGN_OR_RETURN(std::string_view arch, gguf->GetString("general.architecture"));
//   KILN_ASSIGN_OR_RETURN(int64_t n_layers, gguf->GetInt(std::string(arch) + ".block_count"));
//   KILN_ASSIGN_OR_RETURN(float eps, gguf->GetFloatOr("llama.attention.layer_norm_rms_epsilon",
//                                                     1e-5));
//   const GgufTensorInfo* wq = gguf->FindTensor("blk.0.attn_q.weight");
//   // wq->type, wq->ne (ne[0] innermost: a [rows, cols] matrix has ne = {cols, rows}),
//   // wq->data (wq->nbytes bytes), valid while `gguf` lives.
//
// Layout (all little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count; the
// metadata (key string, u32 value type, value; a string is a u64 length and its bytes; an array
// is a u32 element type, a u64 count and the elements); per tensor its name, u32 rank, u64 dims
// (ne[0] first), u32 ggml type and u64 offset into the data section; zero padding to
// `general.alignment` (u32, default 32); the data section.
//
// Everything is validated when the file is opened, so that no later use can read outside the
// mapping: counts and lengths against the bytes that remain, duplicate keys and tensor names,
// rank 1..4 and dims >= 1 without overflow, the ggml type known with its block geometry, ne[0] a
// multiple of the block, offsets aligned, every tensor inside the file, no two tensors
// overlapping. A tensor type kiln does not compute (GgmlTypeSupported) is not an error here: the
// model loader names it. Version 1 files, big-endian files and arrays of arrays are refused with
// a message that says so.
//
// Thread safety: a GgufFile is immutable once made; any number of threads may read it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"
#include "llm/ggml_type.h"

namespace kiln::llm {

// A whole regular file mapped read-only (PROT_READ, MAP_SHARED): the pages are the page cache's,
// shared with every other process mapping the file, and read from disk on first touch, so opening
// a file of many GB costs a few system calls. Unmapped by the destructor. Also used by the
// safetensors reader. Thread safety: immutable; the bytes may be read from any thread.
class MappedFile {
 public:
  // Errors (naming the path and the system's reason): a missing path (NotFound), a directory
  // or another non-regular file, a file that cannot be opened or mapped. An empty file maps to
  // no bytes (its span is empty).
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;  // page-aligned; nullptr when size_ == 0
  size_t size_;
};

// GGUF metadata value types, numbered as the format numbers them.
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "u8", "i32", "f32", "bool", "string", "array", ...; "" for a number outside the enum.
std::string_view GgufValueTypeName(GgufValueType t);

// One metadata entry: its key and its value, viewed in the file's bytes (valid while the
// GgufFile lives). The typed accessors convert where it loses nothing and otherwise return an
// InvalidArgument error naming the key, the type wanted and the type found.
class GgufValue {
 public:
  std::string_view key() const { return key_; }
  GgufValueType type() const { return type_; }
  bool is_array() const { return type_ == GgufValueType::kArray; }
  // REQUIRES: is_array(). Never kArray: arrays of arrays are refused at parse time.
  GgufValueType element_type() const { return element_type_; }
  // The number of elements of an array; 1 for a scalar.
  uint64_t size() const { return count_; }

  // Any integer type (u8..u64, i8..i64); a u64 above the int64 range is an error.
  Result<int64_t> AsInt() const;
  // f32, f64 or any integer type.
  Result<double> AsFloat() const;
  Result<bool> AsBool() const;
  Result<std::string_view> AsString() const;

  // Arrays. Element types accepted as for the scalar accessors (AsFloatArray narrows f64 and
  // integers to float). The string views point into the file.
  Result<std::vector<std::string_view>> AsStringArray() const;
  Result<std::vector<float>> AsFloatArray() const;
  Result<std::vector<int64_t>> AsIntArray() const;
  // One element of an array, typed as above. REQUIRES: is_array() and i < size().
  Result<int64_t> IntAt(uint64_t i) const;
  Result<double> FloatAt(uint64_t i) const;
  Result<std::string_view> StringAt(uint64_t i) const;

  // For printing: `true`, `42`, `0.5`, `"text"` (strings cut at 120 bytes, escaped), and arrays
  // as `[1, 2, 3, ... (32000 total)]` showing at most `max_elements` elements.
  std::string ToString(size_t max_elements = 8) const;

 private:
  friend class GgufParser;
  Status WrongType(std::string_view wanted) const;

  std::string_view key_;
  GgufValueType type_ = GgufValueType::kU8;
  GgufValueType element_type_ = GgufValueType::kU8;  // arrays only
  uint64_t count_ = 1;
  const uint8_t* data_ = nullptr;          // scalar bytes, or the elements of a numeric array
  std::string_view string_;                // kString
  std::vector<std::string_view> strings_;  // array of strings
};

// One tensor's info. `data` points at `nbytes` bytes inside the file, valid while the GgufFile
// lives; it is aligned to the file's alignment relative to the start of the bytes (so at least
// 32-byte aligned for Open, whose mapping is page-aligned).
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the innermost (contiguous) dimension; 1..4 dims
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t elements() const;
};

class GgufFile {
 public:
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // Maps `path` read-only and parses it. Errors name the path: the system's reason when it
  // cannot be opened (NotFound for a missing path) and every format violation listed above
  // (InvalidArgument).
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses GGUF bytes held by the caller (tests, the fuzzer). The file views `bytes`, which must
  // outlive it; nothing is copied.
  static Result<std::unique_ptr<GgufFile>> Parse(std::span<const uint8_t> bytes);

  const std::string& path() const { return path_; }  // "" for Parse
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t size() const { return bytes_.size(); }          // the whole file, in bytes
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts

  // The metadata in file order.
  std::span<const GgufValue> metadata() const { return metadata_; }
  // nullptr when the key is absent.
  const GgufValue* Find(std::string_view key) const;

  // Typed getters: NotFound when the key is absent, InvalidArgument naming the key, the wanted
  // and the found type when the type does not convert (GgufValue's rules).
  Result<std::string_view> GetString(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  // The value, or `fallback` when the key is absent (errors only on a type that does not
  // convert).
  Result<std::string_view> GetStringOr(std::string_view key, std::string_view fallback) const;
  Result<int64_t> GetIntOr(std::string_view key, int64_t fallback) const;
  Result<double> GetFloatOr(std::string_view key, double fallback) const;
  Result<bool> GetBoolOr(std::string_view key, bool fallback) const;

  // The tensors in file order.
  std::span<const GgufTensorInfo> tensors() const { return tensors_; }
  // nullptr when there is no tensor of that name.
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // Drops the whole pages inside `bytes` (a part of the file's data) from the process's resident
  // set, for data that has been copied elsewhere (packed weights); they are read again from the
  // file if touched. Nothing for a file from Parse.
  void ReleasePages(std::span<const uint8_t> bytes) const;

 private:
  friend class GgufParser;
  GgufFile() = default;

  std::unique_ptr<MappedFile> mapping_;  // null for Parse
  std::string path_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufValue> metadata_;
  std::unordered_map<std::string_view, size_t> metadata_index_;  // keys view the file
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // names view the file
};

}  // namespace kiln::llm
