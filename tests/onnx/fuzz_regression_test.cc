// SPDX-License-Identifier: Apache-2.0
// Model files the fuzzer (tests/fuzz/fuzz_onnx_model.cc) once crashed kiln with, kept in
// tests/data/fuzz/onnx_model/: each must import (and, when it imports, get a Session) or fail
// with a Status that says why, in a normal build too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/onnx/importer.h"
#include "runtime/session.h"

namespace kiln {
namespace {

TEST(FuzzRegression, OnnxModelInputsReturnAStatus) {
  const std::filesystem::path dir = KILN_FUZZ_REGRESSION_DIR "/onnx_model";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(entry.path().filename().string());
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    ++files;
    Result<std::shared_ptr<Graph>> graph =
        ImportOnnxModelFromString(bytes.str(), entry.path().filename().string());
    if (!graph.ok()) {
      EXPECT_FALSE(graph.status().message().empty());
      continue;
    }
    Result<std::unique_ptr<Session>> session = Session::Create(*graph);
    if (!session.ok()) {
      EXPECT_FALSE(session.status().message().empty());
    }
  }
  EXPECT_GT(files, 0) << "no regression inputs in " << dir;
}

}  // namespace
}  // namespace kiln
