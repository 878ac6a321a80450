// SPDX-License-Identifier: Apache-2.0
// Tests for the reference kernel table as registered (ref_kernels.inc / ref_kernels.cc): the
// "not supported" errors at session load, the shape of the opset ranges, and building and
// running a kernel directly (registry Find + factory + Compute), from several threads at once.

#include "kernels/registry.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "kernels/ref/ref_test_util.h"
#include "onnx/defs/schema.h"

namespace kiln::ref::testing {
namespace {

TEST(RefRegistryTest, UnknownOpFailsAtLoad) {
  ExpectInvalid(OpTest("Foo", 13).Input(MakeTensor<float>({1}, {1})).Create(),
                {"op Foo (opset 13) is not supported"});
}

TEST(RefRegistryTest, KnownOpOutsideItsOpsetsFailsAtLoad) {
  auto add = [](int64_t opset) {
    return OpTest("Add", opset)
        .Input(MakeTensor<float>({1}, {1}))
        .Input(MakeTensor<float>({1}, {1}))
        .Create();
  };
  ExpectInvalid(add(18), {"op Add (opset 18) is not supported"});
  ExpectInvalid(add(0), {"op Add (opset 0) is not supported"});
  // Opsets below 7 reach the kernels only through the importer's version adapter, as opset 7.
  ExpectInvalid(add(6), {"op Add (opset 6) is not supported"});
  EXPECT_TRUE(add(17).ok());
  EXPECT_TRUE(add(7).ok());
}

struct OnnxOpVersions {
  std::vector<int> since;  // every since_version of the op's schemas, ascending
  int deprecated_at = 0;   // the version that deprecated it, or 0
};

// The op's versions as libonnx 1.12 defines them in `domain` ("" for the default domain, which
// kiln covers up to opset 17).
OnnxOpVersions OnnxVersionsOf(const std::string& domain, const std::string& op) {
  OnnxOpVersions v;
  for (const onnx::OpSchema& schema : onnx::OpSchemaRegistry::get_all_schemas_with_history()) {
    if (schema.Name() != op || schema.domain() != domain) continue;
    if (domain.empty() && schema.SinceVersion() > 17) continue;
    if (schema.Deprecated()) v.deprecated_at = schema.SinceVersion();
    v.since.push_back(schema.SinceVersion());
  }
  std::sort(v.since.begin(), v.since.end());
  return v;
}

// The last opset kiln's rows of `domain` should reach: 17 for the default domain, else the
// domain's latest version in libonnx.
int LastOpsetOf(const std::string& domain) {
  if (domain.empty()) return 17;
  const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = map.find(domain);
  return it == map.end() ? 0 : it->second.second;
}

TEST(RefRegistryTest, EveryOpCoversItsOnnxOpsetsWithoutOverlap) {
  // Keyed by (domain, op).
  std::map<std::pair<std::string, std::string>, std::vector<const KernelDef*>> by_op;
  for (const KernelDef& def : KernelRegistry::Global().defs()) {
    if (def.provider != "ref") continue;
    EXPECT_EQ(def.device, DeviceType::kCpu);
    EXPECT_NE(def.create, nullptr);
    EXPECT_NE(def.types, 0u);
    by_op[{std::string(def.domain), std::string(def.op_type)}].push_back(&def);
  }
  for (auto& [key, defs] : by_op) {
    const auto& [domain, op] = key;
    SCOPED_TRACE(domain.empty() ? op : fmt::format("{}.{}", domain, op));
    if (domain == "ai.kiln") continue;  // kiln's own ops (op/kiln_ops.h): kiln_ops_test.cc
    std::sort(defs.begin(), defs.end(), [](const KernelDef* a, const KernelDef* b) {
      return a->since_version < b->since_version;
    });
    // Every row starts at a version of the op in ONNX's own schema registry, except that no
    // default-domain row starts below opset 7 (the importer's version adapter converts older
    // models to opset 7), so an op older than that starts at 7; the rows follow each other
    // without gaps or overlaps and reach opset 17 (another domain: its latest version), or stop
    // just before the version at which ONNX deprecated the op (a deprecated op may also be kept,
    // as other runtimes do).
    const OnnxOpVersions onnx_versions = OnnxVersionsOf(domain, op);
    ASSERT_FALSE(onnx_versions.since.empty()) << "not an ONNX op";
    int next = defs.front()->since_version;
    for (const KernelDef* def : defs) {
      EXPECT_EQ(def->since_version, next);
      const bool adapted_start = domain.empty() && def == defs.front() && def->since_version == 7 &&
                                 onnx_versions.since.front() < 7;
      EXPECT_TRUE(adapted_start || std::count(onnx_versions.since.begin(),
                                              onnx_versions.since.end(), def->since_version))
          << def->since_version << " is not a version of the op";
      if (domain.empty()) {
        EXPECT_GE(def->since_version, 7);
      }
      next = def->end_version + 1;
    }
    EXPECT_TRUE(next == LastOpsetOf(domain) + 1 || next == onnx_versions.deprecated_at)
        << "rows end at " << next - 1;
  }
  // Spot-check boundaries taken from the ONNX changelog.
  auto bounds = [&](const std::string& op) {
    std::vector<int> b;
    for (const KernelDef* def : by_op[{"", op}]) b.push_back(def->since_version);
    return b;
  };
  EXPECT_EQ(bounds("Softmax"), (std::vector<int>{7, 11, 13}));
  EXPECT_EQ(bounds("Reshape"), (std::vector<int>{7, 14}));
  EXPECT_EQ(bounds("Concat"), (std::vector<int>{7, 11}));
  EXPECT_EQ(bounds("Gemm"), (std::vector<int>{7, 11}));
  EXPECT_EQ(bounds("BatchNormalization"), (std::vector<int>{7, 9, 14}));
  EXPECT_EQ(bounds("MaxPool"), (std::vector<int>{7, 8, 10, 12}));
  EXPECT_EQ(bounds("Sigmoid"), (std::vector<int>{7, 13}));
  EXPECT_EQ(bounds("Sin"), (std::vector<int>{7}));
  // The training-domain optimizers are registered in their own domain, not the default one.
  EXPECT_EQ(by_op.count({"ai.onnx.preview.training", "Adam"}), 1u);
  EXPECT_EQ(by_op.count({"", "Adam"}), 0u);
}

TEST(RefRegistryTest, DirectKernelIsThreadSafe) {
  // Build a Conv kernel directly and run it from four threads at once; every thread must get the
  // same result as a single run.
  std::mt19937 rng(31);
  const OwnedTensor x = MakeTensor<float>({1, 3, 8, 8}, RandomValues<float>(192, rng));
  const OwnedTensor w = MakeTensor<float>({4, 3, 3, 3}, RandomValues<float>(108, rng));
  const NodeDesc desc =
      OpTest("Conv", 11).Attr(IntsAttr("pads", {1, 1, 1, 1})).Input(x).Input(w).Describe();
  const KernelInfo info(desc);
  Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCpu);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  Result<std::unique_ptr<Kernel>> kernel = (*def)->create(info);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  const std::vector<Tensor> inputs = {x.view(), w.view()};

  auto compute = [&](OwnedTensor* out) {
    std::vector<OwnedTensor> outputs(1);
    KernelContext ctx(inputs, outputs);
    Status s = (*kernel)->Compute(ctx);
    if (s.ok()) *out = outputs[0];
    return s;
  };
  OwnedTensor reference;
  ASSERT_TRUE(compute(&reference).ok());
  ASSERT_EQ(reference.shape(), (Shape{1, 4, 8, 8}));
  std::vector<OwnedTensor> results(4);
  std::vector<Status> statuses(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) statuses[t] = compute(&results[t]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < 4; ++t) {
    ASSERT_TRUE(statuses[t].ok()) << statuses[t].ToString();
    ExpectTensor<float>(results[t], reference.shape(), ToVector<float>(reference));
  }
}

TEST(RefRegistryTest, MissingRequiredInputIsInvalidArgumentNotACrash) {
  // A Compute call with too few inputs (possible when a kernel is driven directly).
  const NodeDesc desc = OpTest("Add", 13)
                            .Input(MakeTensor<float>({1}, {1}))
                            .Input(MakeTensor<float>({1}, {1}))
                            .Describe();
  const KernelInfo info(desc);
  Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCpu);
  ASSERT_TRUE(def.ok());
  Result<std::unique_ptr<Kernel>> kernel = (*def)->create(info);
  ASSERT_TRUE(kernel.ok());
  const OwnedTensor a = MakeTensor<float>({1}, {1});
  const std::vector<Tensor> inputs = {a.view()};
  std::vector<OwnedTensor> outputs(1);
  KernelContext ctx(inputs, outputs);
  ExpectInvalid((*kernel)->Compute(ctx), {"Add", "required input 1 is missing"});
  // And the factory refuses a node without its second input.
  ExpectInvalid(OpTest("Add", 13).Input(MakeTensor<float>({1}, {1})).Create(),
                {"Add", "required input 1 is missing"});
}

}  // namespace
}  // namespace kiln::ref::testing
