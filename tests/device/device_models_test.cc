// SPDX-License-Identifier: Apache-2.0
// Whole models on a second device: every case of the ONNX backend test data (libonnx-testdata)
// and the demo models, each run in a CPU-only session and in a session that prefers the test
// device (kernels/testdev/test_device.h: its own memory, a stream on its own thread, late and
// poisoning), as imported and as optimized. The outputs must be identical byte for byte: the
// device runs the CPU's kernels, so any difference is the runtime's placement, copies or stream
// ordering going wrong.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "graph/onnx/importer.h"
#include "graph/onnx/tensor_file.h"
#include "kernels/target.h"
#include "kernels/testdev/test_device.h"
#include "opt/optimizer.h"
#include "runtime/session.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Whether two values hold the same bytes (tensors, or sequences of tensors, or nones).
bool SameValue(const RuntimeValue& a, const RuntimeValue& b, std::string* why) {
  if (a.is_tensor() != b.is_tensor() || a.is_sequence() != b.is_sequence()) {
    *why = "kinds differ";
    return false;
  }
  if (a.is_sequence()) {
    const TensorSequence& sa = a.sequence();
    const TensorSequence& sb = b.sequence();
    if (sa.size() != sb.size()) {
      *why = "sequence lengths differ";
      return false;
    }
    for (int64_t i = 0; i < sa.size(); ++i) {
      if (!SameValue(RuntimeValue(sa.at(i)), RuntimeValue(sb.at(i)), why)) return false;
    }
    return true;
  }
  if (!a.is_tensor()) return true;  // both none
  const Tensor& ta = a.tensor().view();
  const Tensor& tb = b.tensor().view();
  if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) {
    *why = "dtype or shape differs: " + ta.shape().ToString() + " vs " + tb.shape().ToString();
    return false;
  }
  if (tb.device() != Device::Cpu()) {
    *why = "an output is on " + tb.device().ToString();
    return false;
  }
  if (ta.dtype() == DataType::kBytes) {
    for (int64_t i = 0; i < ta.num_elements(); ++i) {
      if (ta.data<std::string>()[i] != tb.data<std::string>()[i]) {
        *why = "string element differs";
        return false;
      }
    }
    return true;
  }
  if (std::memcmp(ta.raw_data(), tb.raw_data(), ta.size_bytes()) != 0) {
    *why = "bytes differ";
    return false;
  }
  return true;
}

struct Tally {
  int compared = 0;  // cases the CPU runs and both sessions agreed on
  int with_device_nodes = 0;
  int mixed = 0;             // with nodes on the device and nodes that fell back to the CPU
  int nondeterministic = 0;  // two CPU-only sessions disagree (random ops): not compared
  std::vector<std::string> failures;
};

bool SameValues(const std::vector<RuntimeValue>& a, const std::vector<RuntimeValue>& b,
                std::string* why) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameValue(a[i], b[i], why)) {
      *why = "output " + std::to_string(i) + ": " + *why;
      return false;
    }
  }
  return true;
}

// Runs `graph` on `inputs` in both sessions (when the CPU-only session can run it at all).
void Compare(const std::string& label, const std::shared_ptr<const Graph>& graph,
             const std::vector<RuntimeValue>& inputs, Tally* tally) {
  Result<std::unique_ptr<Session>> cpu = Session::Create(graph);
  if (!cpu.ok()) return;
  // Random ops draw differently in every session: nothing to compare.
  for (const Node& node : graph->nodes()) {
    for (const char* op : {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                           "Bernoulli", "Multinomial"}) {
      if (node.op_type == op) {
        ++tally->nondeterministic;
        return;
      }
    }
  }
  Result<std::vector<RuntimeValue>> want = (*cpu)->RunValues(inputs);
  if (!want.ok()) return;
  {
    // A second CPU-only session must agree with the first, or the graph is nondeterministic in
    // some other way and no comparison can hold.
    Result<std::vector<RuntimeValue>> again = Session::Create(graph).value()->RunValues(inputs);
    std::string why;
    if (!again.ok() || !SameValues(*want, *again, &why)) {
      ++tally->nondeterministic;
      return;
    }
  }
  SessionOptions o;
  o.device = Device::Test(0);
  Result<std::unique_ptr<Session>> dev = Session::Create(graph, o);
  if (!dev.ok()) {
    tally->failures.push_back(label + ": create: " + dev.status().ToString());
    return;
  }
  bool any_device = false, any_cpu = false;
  for (int n = 0; n < graph->num_nodes(); ++n) {
    const bool on = (*dev)->placement(n) == Device::Test(0);
    any_device = any_device || on;
    any_cpu = any_cpu || !on;
  }
  for (int round = 0; round < 2; ++round) {  // the second run is a planned one
    Result<std::vector<RuntimeValue>> got = (*dev)->RunValues(inputs);
    if (!got.ok()) {
      tally->failures.push_back(label + ": run: " + got.status().ToString());
      return;
    }
    std::string why;
    if (!SameValues(*want, *got, &why)) {
      tally->failures.push_back(label + ": " + why);
      return;
    }
  }
  ++tally->compared;
  tally->with_device_nodes += any_device;
  tally->mixed += any_device && any_cpu;
}

std::shared_ptr<const Graph> Optimized(const std::shared_ptr<const Graph>& g) {
  OptimizerOptions options;
  options.target = KernelTargetFor(DeviceType::kCpu);
  Result<OptimizedGraph> opt = OptimizeGraph(g, options);
  return opt.ok() ? opt->graph : nullptr;
}

class DeviceModelsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(RegisterTestDevice().ok()); }
};

TEST_F(DeviceModelsTest, OnnxBackendTestDataIsIdenticalOnTheDevice) {
  const fs::path root = fs::path(KILN_ONNX_TESTDATA) / "node";
  ASSERT_TRUE(fs::is_directory(root)) << root << ": set KILN_ONNX_TESTDATA_DIR";
  std::vector<fs::path> cases;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  Tally imported, optimized;
  for (const fs::path& dir : cases) {
    const fs::path set = dir / "test_data_set_0";
    Result<std::shared_ptr<Graph>> g = ImportOnnxModel((dir / "model.onnx").string());
    if (!g.ok() || !fs::is_directory(set)) continue;
    std::vector<RuntimeValue> inputs;
    bool read = true;
    for (size_t i = 0; i < (*g)->inputs.size() && read; ++i) {
      const fs::path file = set / ("input_" + std::to_string(i) + ".pb");
      Result<RuntimeValue> v = ReadValueFile(file.string(), (*g)->value((*g)->inputs[i]).type);
      read = v.ok();
      if (read) inputs.push_back(std::move(v).value());
    }
    if (!read) continue;
    const std::string name = dir.filename().string();
    Compare(name, *g, inputs, &imported);
    if (std::shared_ptr<const Graph> opt = Optimized(*g)) {
      Compare(name + " (optimized)", opt, inputs, &optimized);
    }
  }
  for (const std::string& f : imported.failures) ADD_FAILURE() << f;
  for (const std::string& f : optimized.failures) ADD_FAILURE() << f;
  std::printf(
      "ONNX node cases: %d compared (%d random, not compared), %d with nodes on the device, %d "
      "with nodes on both; optimized: %d (%d), %d, %d\n",
      imported.compared, imported.nondeterministic, imported.with_device_nodes, imported.mixed,
      optimized.compared, optimized.nondeterministic, optimized.with_device_nodes, optimized.mixed);
  // Most cases run (921 with libonnx-testdata 1.12 on this runtime); a third places nodes on
  // the device (its fast CPU kernels); some mix both sides.
  EXPECT_GT(imported.compared, 850);
  EXPECT_GT(imported.with_device_nodes, 300);
  EXPECT_GT(imported.mixed, 20);
  EXPECT_GT(optimized.with_device_nodes, 300);
}

TEST_F(DeviceModelsTest, DemoModelsAreIdenticalOnTheDevice) {
  Tally tally;
  int models = 0;
  for (const char* name : {"add_sub", "digits"}) {
    const fs::path path = fs::path(KILN_DEMO_MODELS_DIR) / name / "1" / "model.onnx";
    ASSERT_TRUE(fs::exists(path)) << path << " missing (built with the demo models)";
    Result<std::shared_ptr<Graph>> g = ImportOnnxModel(path.string());
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ++models;
    for (int batch : {1, 7}) {
      std::vector<RuntimeValue> inputs;
      std::mt19937 rng(batch);
      std::normal_distribution<float> dist;
      for (int id : (*g)->inputs) {
        const ValueType& t = (*g)->value(id).type;
        std::vector<int64_t> dims;
        for (const Dim& d : t.dims) dims.push_back(d.value > 0 ? d.value : batch);
        OwnedTensor x = OwnedTensor::Allocate(t.dtype, Shape(dims)).value();
        ASSERT_EQ(t.dtype, DataType::kFloat32);
        for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = dist(rng);
        inputs.emplace_back(std::move(x));
      }
      const std::string label = std::string(name) + " batch " + std::to_string(batch);
      Compare(label, *g, inputs, &tally);
      Compare(label + " (optimized)", Optimized(*g), inputs, &tally);
    }
  }
  for (const std::string& f : tally.failures) ADD_FAILURE() << f;
  EXPECT_EQ(tally.compared, models * 4);
  EXPECT_EQ(tally.with_device_nodes, models * 4);
}

}  // namespace
}  // namespace kiln
