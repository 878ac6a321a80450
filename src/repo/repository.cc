// SPDX-License-Identifier: Apache-2.0
#include "repo/repository.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <system_error>
#include <utility>

#include "repo/model_config.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// Names of the subdirectories of `dir` (following symlinks), unsorted.
Result<std::vector<std::string>> ListSubdirs(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    return Status::Unavailable(fmt::format("cannot list {}: {}", dir.string(), ec.message()));
  }
  std::vector<std::string> names;
  for (const fs::directory_iterator end; it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) names.push_back(it->path().filename().string());
  }
  if (ec) {
    return Status::Unavailable(fmt::format("cannot list {}: {}", dir.string(), ec.message()));
  }
  return names;
}

// Hash of a small file's contents; 0 when it cannot be read or is larger than `max_bytes`.
size_t HashFileContents(const fs::path& path, uintmax_t size, uintmax_t max_bytes) {
  if (size > max_bytes) return 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return 0;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return std::hash<std::string>()(text);
}

constexpr int kMaxFingerprintDepth = 16;
constexpr uintmax_t kMaxHashedConfigBytes = 1u << 20;

}  // namespace

Result<std::vector<std::string>> ListModelDirs(const fs::path& repo) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, ListSubdirs(repo));
  std::erase_if(names, [](const std::string& n) { return n.empty() || n[0] == '.'; });
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<int64_t> ParseVersionDirName(std::string_view name) {
  if (name.empty() || name[0] == '0') return std::nullopt;
  int64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    const int digit = c - '0';
    if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

Result<std::vector<int64_t>> ScanVersionDirs(const fs::path& model_dir) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, ListSubdirs(model_dir));
  std::vector<int64_t> versions;
  for (const std::string& n : names) {
    if (std::optional<int64_t> v = ParseVersionDirName(n)) versions.push_back(*v);
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    std::span<const int64_t> available,
                                    std::vector<int64_t>* missing) {
  std::vector<int64_t> out;
  if (missing) missing->clear();
  if (policy.has_all()) {
    out.assign(available.begin(), available.end());
  } else if (policy.has_specific()) {
    std::vector<int64_t> wanted(policy.specific().versions().begin(),
                                policy.specific().versions().end());
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    for (int64_t v : wanted) {
      if (std::binary_search(available.begin(), available.end(), v)) {
        out.push_back(v);
      } else if (missing) {
        missing->push_back(v);
      }
    }
  } else {
    const size_t n = policy.has_latest() ? policy.latest().num_versions() : 1;
    const size_t take = std::min(n, available.size());
    out.assign(available.end() - static_cast<std::ptrdiff_t>(take), available.end());
  }
  return out;
}

Result<fs::path> ResolveModelFile(const fs::path& version_dir,
                                  const inference::ModelConfig& config) {
  const std::string file = config.default_model_filename().empty()
                               ? std::string(kOnnxModelFileName)
                               : config.default_model_filename();
  fs::path path = version_dir / file;
  std::error_code ec;
  if (fs::is_directory(path, ec)) path /= kOnnxModelFileName;
  if (!fs::is_regular_file(path, ec)) {
    return Status::NotFound(fmt::format("model file {} not found", path.string()));
  }
  return path;
}

Result<ModelDirFingerprint> FingerprintModelDir(const fs::path& model_dir) {
  const auto cannot_list = [&](const std::error_code& ec) {
    return Status::Unavailable(fmt::format("cannot list {}: {}", model_dir.string(), ec.message()));
  };
  std::error_code ec;
  fs::recursive_directory_iterator it(model_dir,
                                      fs::directory_options::follow_directory_symlink |
                                          fs::directory_options::skip_permission_denied,
                                      ec);
  if (ec) return cannot_list(ec);

  // (owner, line) pairs: owner 0 is the model, v > 0 a version. Sorted before joining because
  // the directory order is unspecified.
  std::vector<std::pair<int64_t, std::string>> lines;
  ModelDirFingerprint fp;
  size_t count = 0;
  for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (++count > kMaxFingerprintFiles) {
      return Status::Unavailable(fmt::format("model directory {} holds more than {} entries",
                                             model_dir.string(), kMaxFingerprintFiles));
    }
    if (it.depth() >= kMaxFingerprintDepth) it.disable_recursion_pending();
    const fs::path rel = it->path().lexically_relative(model_dir);
    std::error_code entry_ec;
    const bool is_dir = it->is_directory(entry_ec);
    const std::optional<int64_t> version = ParseVersionDirName(rel.begin()->string());
    const bool in_version = version.has_value() && (it.depth() > 0 || is_dir);
    if (is_dir) {
      if (in_version && it.depth() == 0) fp.versions[*version];  // an empty version counts too
      continue;
    }
    const uintmax_t size = it->file_size(entry_ec);
    const auto mtime = it->last_write_time(entry_ec).time_since_epoch().count();
    std::string line = fmt::format("{}\t{}\t{}", rel.string(), size, mtime);
    if (rel == fs::path(kConfigFileName)) {
      line += fmt::format("\t{:x}", HashFileContents(it->path(), size, kMaxHashedConfigBytes));
    }
    lines.emplace_back(in_version ? *version : 0, std::move(line));
  }
  if (ec) return cannot_list(ec);
  std::sort(lines.begin(), lines.end());
  for (auto& [owner, line] : lines) {
    std::string& out = owner == 0 ? fp.model : fp.versions[owner];
    out += line;
    out += '\n';
  }
  return fp;
}

}  // namespace kiln
