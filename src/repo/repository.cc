// SPDX-License-Identifier: Apache-2.0
#include "repo/repository.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <system_error>

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

}  // namespace kiln
