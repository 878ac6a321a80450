// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the repo tests: temporary directories, files, and small hand-built graphs
// (so config, manager and scheduler logic is tested without the ONNX importer or kernels).
//
// Thread safety: none needed; each test uses its own objects.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/ir.h"
#include "repo/model_config.pb.h"
#include "sched/request.h"

namespace kiln::testing {

// A fresh directory under the system temp dir, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Writes `content` to `path`, creating parent directories.
void WriteFile(const std::filesystem::path& path, std::string_view content);
void MakeDirs(const std::filesystem::path& path);

inline Dim D(int64_t v) { return Dim{v, ""}; }
inline Dim Sym(std::string s) { return Dim{-1, std::move(s)}; }
inline Dim Unknown() { return Dim{}; }

struct IoSpec {
  std::string name;
  DataType dtype = DataType::kFloat32;
  std::vector<Dim> dims;
  bool has_shape = true;
};

// A graph with no nodes whose outputs are its inputs (Session::Run copies them out), so the
// output names equal the input names. Runs without any kernel.
std::shared_ptr<Graph> PassthroughGraph(const std::vector<IoSpec>& inputs);
// A graph with declared inputs/outputs that are separate values (outputs produced by one node
// of op `op_type`, which need not exist): for config completion and validation tests.
std::shared_ptr<Graph> SignatureGraph(const std::vector<IoSpec>& inputs,
                                      const std::vector<IoSpec>& outputs,
                                      std::string op_type = "Identity");

// Parses a text-format config or fails the test.
inference::ModelConfig ParseConfigOrDie(std::string_view text);

// An FP32 request input filled with `values` (shape must match their count).
InferInput FloatInput(std::string name, std::vector<int64_t> dims, std::vector<float> values);
// An input of `dtype` and shape, zero-filled.
InferInput ZeroInput(std::string name, DataType dtype, std::vector<int64_t> dims);

// The float values of a tensor.
std::vector<float> FloatValues(const OwnedTensor& t);

}  // namespace kiln::testing
