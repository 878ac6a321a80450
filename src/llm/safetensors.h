// SPDX-License-Identifier: Apache-2.0
#pragma once
// safetensors files (Hugging Face's weight format) and checkpoint directories of them, read over
// read-only memory mappings: the tensor data is never copied.
//
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsSet> set,
//                         SafetensorsSet::OpenDirectory("Qwen2.5-0.5B-Instruct"));
//   const SafetensorsTensor* w = set->FindTensor("model.layers.0.self_attn.q_proj.weight");
//   // w->dtype (F32, F16, BF16, ...), w->shape (outermost first: [out, in] for a Linear
//   // weight), w->data (w->nbytes bytes), valid while `set` lives.
//
// File layout: a u64 little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F16", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"format": "pt", ...}}
// then the data; offsets are relative to the first byte after the header.
//
// Validation when a file is opened: N within the file, the JSON well formed (an object of
// objects, each with those three fields; others are ignored), a known dtype, dims >= 0 whose
// product does not overflow, END - BEGIN equal to the elements times the dtype's size, every range
// inside the data, no two ranges overlapping, no name twice. Gaps between tensors are allowed.
//
// Dtypes: every dtype of the format is recognized and sized (so a file holding I64 position ids
// or F8 weights still opens), but kiln computes only F32, F16 and BF16: the model loader refuses
// the others, naming them (SafetensorsDtypeName).
//
// Data alignment: the data starts at byte 8 + N of the file; Hugging Face's writer pads the
// header so that this is a multiple of 8, but the format does not require it: a reader that
// needs aligned data must check `data`'s address.
//
// Thread safety: files and sets are immutable once made; any number of threads may read them.

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

namespace kiln::llm {

class MappedFile;

enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kF8_E4M3,
  kF8_E5M2,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kI64,
  kU64,
  kF64,
};

// The format's spelling: "F32", "BF16", "F8_E4M3", ...
std::string_view SafetensorsDtypeName(SafetensorsDtype dtype);
// Bytes per element.
size_t SafetensorsDtypeSize(SafetensorsDtype dtype);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;     // outermost first (row-major); empty for a scalar
  const uint8_t* data = nullptr;  // `nbytes` bytes inside the file (nullptr when 0)
  size_t nbytes = 0;

  int64_t elements() const;
};

// One .safetensors file.
class SafetensorsFile {
 public:
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Maps `path` read-only and parses its header. Errors name the path: the system's reason
  // when it cannot be opened (NotFound for a missing path), InvalidArgument for a malformed
  // file.
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Parses bytes held by the caller (tests); they must outlive the file.
  static Result<std::unique_ptr<SafetensorsFile>> Parse(std::span<const uint8_t> bytes);

  const std::string& path() const { return path_; }  // "" for Parse
  size_t size() const { return bytes_.size(); }      // the whole file, in bytes
  // The tensors in header order.
  std::span<const SafetensorsTensor> tensors() const { return tensors_; }
  // nullptr when there is no tensor of that name.
  const SafetensorsTensor* FindTensor(std::string_view name) const;
  // "__metadata__" (string to string), in header order; empty when absent.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status ParseHeader();

  std::unique_ptr<MappedFile> mapping_;  // null for Parse
  std::string path_;
  std::span<const uint8_t> bytes_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string_view, size_t> index_;  // names view tensors_
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// The safetensors files of a checkpoint directory, their tensors found by name across files.
class SafetensorsSet {
 public:
  ~SafetensorsSet();
  SafetensorsSet(const SafetensorsSet&) = delete;
  SafetensorsSet& operator=(const SafetensorsSet&) = delete;

  // Opens the checkpoint in `dir`: the shards that `model.safetensors.index.json` names when it
  // exists (its "weight_map", tensor name -> file name; each named tensor must be in its file),
  // else `model.safetensors`, else every `*.safetensors` in the directory (in name order).
  // Errors: `dir` missing or not a directory, no safetensors file, a malformed index, a missing
  // or malformed shard (named), a tensor name in two files.
  static Result<std::unique_ptr<SafetensorsSet>> OpenDirectory(const std::string& dir);
  // The given files, as one set (same rules for duplicate names).
  static Result<std::unique_ptr<SafetensorsSet>> OpenFiles(const std::vector<std::string>& paths);

  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // Every tensor of every file, sorted by name.
  const std::vector<const SafetensorsTensor*>& tensors() const { return tensors_; }
  // nullptr when no file has a tensor of that name.
  const SafetensorsTensor* FindTensor(std::string_view name) const;
  // The sum of the files' sizes, in bytes.
  uint64_t total_bytes() const;

 private:
  SafetensorsSet() = default;
  Status Add(std::unique_ptr<SafetensorsFile> file);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<const SafetensorsTensor*> tensors_;
  std::unordered_map<std::string_view, const SafetensorsTensor*> index_;  // names view files_
};

}  // namespace kiln::llm
