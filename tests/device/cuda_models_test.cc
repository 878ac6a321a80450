// SPDX-License-Identifier: Apache-2.0
// Whole models on a GPU: every case of the ONNX backend test data and the demo models, imported
// and optimized for the CUDA target, run in a session that prefers cuda:0 (nodes without a CUDA
// kernel fall back to the CPU) and in a CPU-only session; outputs agree within a tolerance
// (floats: |gpu - cpu| <= 1e-3 (1 + |cpu|), TF32 off; everything else exactly). Without a GPU the
// tests skip, saying so.
//
// The data folders default to where this build found them; KILN_ONNX_TESTDATA and
// KILN_DEMO_MODELS_DIR in the environment override them (scripts/device-check carries both to the
// GPU machine).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "base/settings.h"
#include "graph/onnx/importer.h"
#include "graph/onnx/tensor_file.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/target.h"
#include "opt/optimizer.h"
#include "runtime/session.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

double AsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat16:
      return Float16ToFloat(t.data<const Float16>()[i]);
    case DataType::kBFloat16:
      return BFloat16ToFloat(t.data<const BFloat16>()[i]);
    case DataType::kFloat64:
      return t.data<const double>()[i];
    default:
      return t.data<const float>()[i];
  }
}

bool Close(const RuntimeValue& a, const RuntimeValue& b, std::string* why) {
  if (a.is_tensor() != b.is_tensor() || a.is_sequence() != b.is_sequence()) {
    *why = "kinds differ";
    return false;
  }
  if (a.is_sequence()) {
    if (a.sequence().size() != b.sequence().size()) {
      *why = "sequence lengths differ";
      return false;
    }
    for (int64_t i = 0; i < a.sequence().size(); ++i) {
      if (!Close(RuntimeValue(a.sequence().at(i)), RuntimeValue(b.sequence().at(i)), why)) {
        return false;
      }
    }
    return true;
  }
  if (!a.is_tensor()) return true;
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
  if (!IsFloatingPoint(ta.dtype())) {
    if (std::memcmp(ta.raw_data(), tb.raw_data(), ta.size_bytes()) != 0) {
      *why = "bytes differ";
      return false;
    }
    return true;
  }
  for (int64_t i = 0; i < ta.num_elements(); ++i) {
    const double x = AsDouble(ta, i), y = AsDouble(tb, i);
    if ((std::isnan(x) && std::isnan(y)) || x == y) continue;
    if (!(std::fabs(x - y) <= 1e-3 * (1.0 + std::fabs(x)))) {
      *why = "element " + std::to_string(i) + ": cpu " + std::to_string(x) + ", gpu " +
             std::to_string(y);
      return false;
    }
  }
  return true;
}

struct Tally {
  int compared = 0;
  int with_gpu_nodes = 0;
  int gpu_nodes = 0, nodes = 0;
  std::vector<std::string> failures;
};

void Compare(const std::string& label, const std::shared_ptr<const Graph>& cpu_graph,
             const std::shared_ptr<const Graph>& gpu_graph, const std::vector<RuntimeValue>& inputs,
             Tally* tally) {
  if (cpu_graph == nullptr || gpu_graph == nullptr) return;
  for (const Node& node : cpu_graph->nodes()) {
    for (const char* op : {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                           "Bernoulli", "Multinomial"}) {
      if (node.op_type == op) return;
    }
  }
  Result<std::unique_ptr<Session>> cpu = Session::Create(cpu_graph);
  if (!cpu.ok()) return;
  Result<std::vector<RuntimeValue>> want = (*cpu)->RunValues(inputs);
  if (!want.ok()) return;
  SessionOptions o;
  o.device = Device::Cuda(0);
  Result<std::unique_ptr<Session>> gpu = Session::Create(gpu_graph, o);
  if (!gpu.ok()) {
    tally->failures.push_back(label + ": create: " + gpu.status().ToString());
    return;
  }
  int on = 0;
  for (int n = 0; n < gpu_graph->num_nodes(); ++n) on += (*gpu)->placement(n) == o.device;
  for (int round = 0; round < 2; ++round) {  // the second run is a planned one
    Result<std::vector<RuntimeValue>> got = (*gpu)->RunValues(inputs);
    if (!got.ok()) {
      tally->failures.push_back(label + ": run: " + got.status().ToString());
      return;
    }
    if (got->size() != want->size()) {
      tally->failures.push_back(label + ": output count differs");
      return;
    }
    for (size_t i = 0; i < want->size(); ++i) {
      std::string why;
      if (!Close((*want)[i], (*got)[i], &why)) {
        tally->failures.push_back(label + ": output " + std::to_string(i) + ": " + why);
        return;
      }
    }
  }
  ++tally->compared;
  tally->with_gpu_nodes += on > 0;
  tally->gpu_nodes += on;
  tally->nodes += gpu_graph->num_nodes();
}

std::shared_ptr<const Graph> Optimized(const std::shared_ptr<const Graph>& g, DeviceType d) {
  OptimizerOptions options;
  options.target = KernelTargetFor(d);
  Result<OptimizedGraph> opt = OptimizeGraph(g, options);
  return opt.ok() ? opt->graph : nullptr;
}

class CudaModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "needs a GPU: " << why;
    ASSERT_TRUE(RegisterCudaKernels().ok());
    ASSERT_TRUE(RegisterCudaBackends().ok());
  }
  ScopedSetting tf32_{Setting::kCudaTf32, "0"};  // FP32 products in FP32, for the tolerance above
};

TEST_F(CudaModelsTest, OnnxBackendTestDataAgreesWithTheCpu) {
  const fs::path root = fs::path(Env("KILN_ONNX_TESTDATA", KILN_ONNX_TESTDATA)) / "node";
  ASSERT_TRUE(fs::is_directory(root)) << root << ": set KILN_ONNX_TESTDATA";
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
    Compare(name, *g, *g, inputs, &imported);
    Compare(name + " (optimized)", Optimized(*g, DeviceType::kCpu),
            Optimized(*g, DeviceType::kCuda), inputs, &optimized);
  }
  for (const std::string& f : imported.failures) ADD_FAILURE() << f;
  for (const std::string& f : optimized.failures) ADD_FAILURE() << f;
  std::printf(
      "ONNX node cases on cuda:0: %d compared, %d with nodes on the GPU (%d of %d nodes); "
      "optimized: %d, %d (%d of %d)\n",
      imported.compared, imported.with_gpu_nodes, imported.gpu_nodes, imported.nodes,
      optimized.compared, optimized.with_gpu_nodes, optimized.gpu_nodes, optimized.nodes);
  EXPECT_GT(imported.compared, 850);
  EXPECT_GT(imported.with_gpu_nodes, 300);
}

TEST_F(CudaModelsTest, DemoModelsAgreeWithTheCpu) {
  Tally tally;
  const fs::path dir = Env("KILN_DEMO_MODELS_DIR", KILN_DEMO_MODELS_DIR);
  for (const char* name : {"add_sub", "digits"}) {
    const fs::path path = dir / name / "1" / "model.onnx";
    ASSERT_TRUE(fs::exists(path)) << path << " missing";
    Result<std::shared_ptr<Graph>> g = ImportOnnxModel(path.string());
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (int batch : {1, 7}) {
      std::vector<RuntimeValue> inputs;
      std::mt19937 rng(batch);
      std::normal_distribution<float> dist;
      for (int id : (*g)->inputs) {
        const ValueType& t = (*g)->value(id).type;
        std::vector<int64_t> dims;
        for (const Dim& d : t.dims) dims.push_back(d.value > 0 ? d.value : batch);
        OwnedTensor x = OwnedTensor::Allocate(t.dtype, Shape(dims)).value();
        for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = dist(rng);
        inputs.emplace_back(std::move(x));
      }
      const std::string label = std::string(name) + " batch " + std::to_string(batch);
      Compare(label, *g, *g, inputs, &tally);
      Compare(label + " (optimized)", Optimized(*g, DeviceType::kCpu),
              Optimized(*g, DeviceType::kCuda), inputs, &tally);
    }
  }
  for (const std::string& f : tally.failures) ADD_FAILURE() << f;
  EXPECT_EQ(tally.compared, 8);
  EXPECT_EQ(tally.with_gpu_nodes, 8);
}

}  // namespace
}  // namespace kiln
