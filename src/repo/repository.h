// SPDX-License-Identifier: Apache-2.0
#pragma once
// Model repository layout (protocol/KSERVE-V2.md section 3.12): which directories are models,
// which are versions, which versions a policy selects, and where a version's model file is.
//
//   <repo>/<model>/config.pbtxt            optional
//   <repo>/<model>/<version>/model.onnx    version: decimal, no leading zero; file or directory
//
//   KILN_ASSIGN_OR_RETURN(std::vector<std::string> models, ListModelDirs(repo));
//   KILN_ASSIGN_OR_RETURN(std::vector<int64_t> found, ScanVersionDirs(repo / models[0]));
//   std::vector<int64_t> load = SelectVersions(config.version_policy(), found);
//   KILN_ASSIGN_OR_RETURN(ModelDirFingerprint now, FingerprintModelDir(repo / models[0]));
//   if (now != before) ...   // something in the model directory changed: reload it
//
// Only ScanVersionDirs, ListModelDirs, ResolveModelFile and FingerprintModelDir touch the file
// system; none throws (std::filesystem errors come back as Status).
//
// Thread safety: all functions are reentrant.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "repo/model_config.pb.h"

namespace kiln {

// Model directory names in `repo`, sorted. Hidden entries (leading '.') and plain files are
// skipped. UNAVAILABLE when the directory cannot be listed.
Result<std::vector<std::string>> ListModelDirs(const std::filesystem::path& repo);

// Parses a version directory name: decimal digits, no leading zero (so "0" is not a version),
// no sign, fits int64. nullopt otherwise.
std::optional<int64_t> ParseVersionDirName(std::string_view name);

// Versions found as subdirectories of `model_dir`, ascending. Files, non-numeric names and
// names with a leading zero are ignored. UNAVAILABLE when the directory cannot be listed.
Result<std::vector<int64_t>> ScanVersionDirs(const std::filesystem::path& model_dir);

// Versions the policy selects among `available` (ascending, unique), ascending. latest N: the N
// highest; all: every one; specific: the listed ones that are available; no policy set: latest
// 1. `missing` (optional) receives the specific versions that are not available, ascending.
std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    std::span<const int64_t> available,
                                    std::vector<int64_t>* missing = nullptr);

// The model file of one version: <version_dir>/<default_model_filename, else model.onnx>, or
// <that>/model.onnx when it is a directory. NOT_FOUND naming the path when absent.
Result<std::filesystem::path> ResolveModelFile(const std::filesystem::path& version_dir,
                                               const inference::ModelConfig& config);

// What the repository poll compares to notice that a model changed, without reading model
// files: for every file under the model directory, its path relative to that directory, its
// size and its modification time (ns); config.pbtxt also by a hash of its contents (so an edit
// that keeps the size within one timestamp tick is still seen). Files under a version directory
// (a name ParseVersionDirName accepts) belong to that version, every other file (config.pbtxt,
// warmup/, label files, non-version directories) to the model.
struct ModelDirFingerprint {
  std::string model;                        // files outside the version directories
  std::map<int64_t, std::string> versions;  // each version directory's files
  bool operator==(const ModelDirFingerprint&) const = default;
};

// Walks `model_dir` (directory symlinks are not followed). UNAVAILABLE when it cannot be listed
// or holds more than kMaxFingerprintFiles entries.
inline constexpr size_t kMaxFingerprintFiles = 100000;
Result<ModelDirFingerprint> FingerprintModelDir(const std::filesystem::path& model_dir);

}  // namespace kiln
