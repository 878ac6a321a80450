// SPDX-License-Identifier: Apache-2.0
// Unload frees the model's memory: a ~100 MiB model (one FP32 initializer, written by Debian's
// python3 + onnx into a temporary repository) is loaded, run and unloaded 20 times in explicit
// mode, and the process RSS must come back to within 10% of what it was before the first load.
// Its own binary, so no other test's allocations move the baseline.
//
// The baseline is taken after one load/run/unload of a tiny model with the same graph: the
// first import in a process pages in the importer's and kernels' code and builds process-wide
// tables once (the ONNX operator schemas); that is not memory a model owns, and it is about
// 5 MiB, more than 10% of a 10 MiB process. Both baselines are printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>

#include "base/sanitizers.h"
#include "kernels/registry.h"
#include "repo/model_manager.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::TempDir;

constexpr int kCycles = 20;
constexpr int64_t kRows = 6553600;  // x 4 floats = 100 MiB
constexpr double kTolerance = 0.10;

// Writes <dir>/<name>/1/model.onnx: Y[b,4] = X[b,4] + the column sums of W[rows,4], with
// W[r, c] = c + 1 (so Y = X + rows * [1, 2, 3, 4]); W is stored as `parts` initializers of
// rows / parts rows, each reduced by its own ReduceSum (over axes computed at run time, so the
// graph optimizer cannot fold W away), then added up by one Sum.
bool WriteModel(const fs::path& dir, const std::string& name, int64_t rows, int parts) {
  const fs::path file = dir / name / "1" / "model.onnx";
  fs::create_directories(file.parent_path());
  const std::string script = R"(
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
path, rows, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
inits = [numpy_helper.from_array(np.tile(np.arange(1, 5, dtype=np.float32), (rows // parts, 1)),
                                 f"W{i}") for i in range(parts)]
inits.append(numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"))
# axes = [0], computed from X's (symbolic) batch dim so that the reductions stay in the graph:
# over constant axes the optimizer would fold them at load and W would never be resident.
nodes = [helper.make_node("Shape", ["X"], ["Xshape"]),
         helper.make_node("Gather", ["Xshape", "zero"], ["B"]),
         helper.make_node("Sub", ["B", "B"], ["axes"])]
nodes += [helper.make_node("ReduceSum", [f"W{i}", "axes"], [f"S{i}"], keepdims=0)
          for i in range(parts)]
nodes.append(helper.make_node("Sum", [f"S{i}" for i in range(parts)], ["S"]))
nodes.append(helper.make_node("Add", ["X", "S"], ["Y"]))
graph = helper.make_graph(
    nodes, "rss",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 4])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
with open(path, "wb") as f:
    f.write(model.SerializeToString())
)";
  const fs::path script_path = dir / "make_big_model.py";
  std::ofstream(script_path) << script;
  const std::string command = std::string(KILN_PYTHON) + " " + script_path.string() + " " +
                              file.string() + " " + std::to_string(rows) + " " +
                              std::to_string(parts);
  std::error_code ec;
  return std::system(command.c_str()) == 0 &&
         fs::file_size(file, ec) > static_cast<uintmax_t>(rows) * 16;
}

// Resident set size of this process in bytes (/proc/self/statm, second field).
size_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages_total = 0;
  size_t pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

double MiB(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

bool HaveKernels() {
  const auto defs = KernelRegistry::Global().defs();
  for (std::string_view op : {"ReduceSum", "Sum", "Add"}) {
    if (std::none_of(defs.begin(), defs.end(),
                     [&](const KernelDef& d) { return d.op_type == op; })) {
      return false;
    }
  }
  return true;
}

// One inference through the manager; checks the numbers.
bool RunOnce(ModelManager& manager, const std::string& name, int64_t rows) {
  Result<std::shared_ptr<LoadedModel>> model = manager.GetModel(name, -1);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return false;
  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("X", {1, 4}, {0.5f, 0.5f, 0.5f, 0.5f}));
  std::promise<Result<InferResponse>> answered;
  (*model)->Infer(std::move(request),
                  [&](Result<InferResponse> r) { answered.set_value(std::move(r)); });
  Result<InferResponse> r = answered.get_future().get();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || r->outputs.size() != 1) return false;
  const float n = static_cast<float>(rows);
  const std::vector<float> want = {0.5f + n, 0.5f + 2 * n, 0.5f + 3 * n, 0.5f + 4 * n};
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), want);
  return FloatValues(r->outputs[0].tensor) == want;
}

// Load/run/unload `name` kCycles times after warming up with `tiny`; checks RSS as above.
// The sanitizers' allocators keep what kiln frees: AddressSanitizer holds freed blocks in its
// quarantine (256 MiB by default), ThreadSanitizer keeps its own pages and shadow memory. RSS
// says nothing about what kiln gave back there. The Release run measures it; under ASan,
// LeakSanitizer checks at exit that nothing was lost.
void CheckUnloadReturnsMemory(const std::string& name, int parts) {
  if (kAddressSanitizer || kThreadSanitizer)
    GTEST_SKIP() << "RSS is not measurable under a sanitizer's allocator";
  if (!HaveKernels()) GTEST_SKIP() << "reference kernels ReduceSum/Sum/Add missing";
  TempDir repo;
  ASSERT_TRUE(WriteModel(repo.path(), name, kRows, parts) && WriteModel(repo.path(), "tiny", 1, 1))
      << "could not write the models with " << KILN_PYTHON;

  ModelManagerOptions options;
  options.repository_path = repo.path().string();
  options.control_mode = ModelControlMode::kExplicit;
  Result<std::unique_ptr<ModelManager>> created = ModelManager::Create(options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ModelManager& manager = **created;
  ASSERT_TRUE(manager.LoadInitialModels().ok());

  const size_t cold = RssBytes();
  // First use of the importer and kernels (see the file comment).
  ASSERT_TRUE(manager.LoadModel("tiny", {}).ok());
  ASSERT_TRUE(RunOnce(manager, "tiny", 1));
  ASSERT_TRUE(manager.UnloadModel("tiny").ok());
  const size_t baseline = RssBytes();

  size_t loaded_max = 0;
  size_t unloaded_max = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    Status s = manager.LoadModel(name, {});
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(RunOnce(manager, name, kRows));
    loaded_max = std::max(loaded_max, RssBytes());
    ASSERT_TRUE(manager.UnloadModel(name).ok());
    unloaded_max = std::max(unloaded_max, RssBytes());
  }
  const size_t final_rss = RssBytes();
  std::printf(
      "%s (%d initializer(s)): RSS before any load %.1f MiB, baseline %.1f MiB, loaded "
      "(max) %.1f MiB, after unload (max of %d) %.1f MiB, final %.1f MiB\n",
      name.c_str(), parts, MiB(cold), MiB(baseline), MiB(loaded_max), kCycles, MiB(unloaded_max),
      MiB(final_rss));
  ::testing::Test::RecordProperty("rss_cold_kib", static_cast<int>(cold >> 10));
  ::testing::Test::RecordProperty("rss_baseline_kib", static_cast<int>(baseline >> 10));
  ::testing::Test::RecordProperty("rss_loaded_max_kib", static_cast<int>(loaded_max >> 10));
  ::testing::Test::RecordProperty("rss_unloaded_max_kib", static_cast<int>(unloaded_max >> 10));
  // The model was really resident while loaded...
  EXPECT_GT(loaded_max, baseline + (size_t{100} << 20));
  // ... and every unload gave it back.
  EXPECT_LE(static_cast<double>(unloaded_max), static_cast<double>(baseline) * (1 + kTolerance))
      << "baseline " << MiB(baseline) << " MiB, worst after unload " << MiB(unloaded_max) << " MiB";
}

// One 100 MiB initializer: its buffers are above glibc's mmap threshold, unmapped on free.
TEST(ModelManagerRss, UnloadReturnsTheMemoryOfA100MiBInitializer) {
  CheckUnloadReturnsMemory("one_initializer", 1);
}

// 100 initializers of 1 MiB: after the first unload glibc raises its mmap threshold to 1 MiB
// and serves the next load's buffers from its heap, which free() does not give back by itself.
TEST(ModelManagerRss, UnloadReturnsTheMemoryOf100InitializersOf1MiB) {
  CheckUnloadReturnsMemory("many_initializers", 100);
}

}  // namespace
}  // namespace kiln
