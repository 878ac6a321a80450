// SPDX-License-Identifier: Apache-2.0
// The CUDA kernel harness: every kernel of the CUDA table against the reference kernel, over the
// cases of test_cases.h (test-backend-ops style). Without a GPU the table is still checked: each
// kernel (and each float type it declares) has cases, the cases pick CUDA kernels, and the
// factories build them; the runs against the reference skip, saying so.
//
// KILN_CUDA_TEST_SEED=N reruns with the inputs of a failed run (each failure prints its seed).

#include "kernels/cuda/cuda_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "kernels/cuda/test_cases.h"
#include "kernels/ref/ref_test_util.h"

namespace kiln::cuda::testing {

double DefaultTolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return 1e-5;
    case DataType::kFloat16:
      return 2e-3;
    case DataType::kBFloat16:
      return 1.6e-2;
    default:
      return 0.0;
  }
}

namespace {

std::vector<CudaCase> AllCases() {
  std::vector<CudaCase> all;
  for (auto part : {&ElementwiseCases, &ReduceCases, &DataCases, &BlasCases, &DnnCases}) {
    std::vector<CudaCase> c = part();
    all.insert(all.end(), c.begin(), c.end());
  }
  return all;
}

const std::vector<CudaCase>& Cases() {
  static const std::vector<CudaCase>* cases = new std::vector<CudaCase>(AllCases());
  return *cases;
}

// FP32 `t` converted to `dtype` (FP16 / BF16, round to nearest even), or rounded through it and
// back to FP32 (`widen`).
OwnedTensor ConvertFloat(const OwnedTensor& t, DataType dtype, bool widen) {
  const int64_t n = t.num_elements();
  const float* src = t.data<const float>();
  if (widen) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      v[i] = dtype == DataType::kFloat16 ? Float16ToFloat(FloatToFloat16(src[i]))
                                         : BFloat16ToFloat(FloatToBFloat16(src[i]));
    }
    return ref::testing::MakeTensor<float>(t.shape(), v);
  }
  OwnedTensor out = OwnedTensor::Allocate(dtype, t.shape()).value();
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DataType::kFloat16) {
      out.data<Float16>()[i] = FloatToFloat16(src[i]);
    } else {
      out.data<BFloat16>()[i] = FloatToBFloat16(src[i]);
    }
  }
  return out;
}

// The FP32 values of a floating tensor (FP32, FP16, BF16, FP64).
std::vector<double> Widen(const OwnedTensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (t.dtype()) {
      case DataType::kFloat16:
        v[i] = Float16ToFloat(t.data<const Float16>()[i]);
        break;
      case DataType::kBFloat16:
        v[i] = BFloat16ToFloat(t.data<const BFloat16>()[i]);
        break;
      case DataType::kFloat64:
        v[i] = t.data<const double>()[i];
        break;
      default:
        v[i] = t.data<const float>()[i];
        break;
    }
  }
  return v;
}

// The node twice: as the reference runs it (FP32 rounded through the case's dtype) and as the
// CUDA kernel runs it (converted to the dtype).
struct BuiltCase {
  ref::testing::OpTest ref;
  ref::testing::OpTest dev;
  std::vector<OwnedTensor> dev_inputs;  // invalid where omitted
};

BuiltCase Build(const CudaCase& c, std::mt19937& rng) {
  CaseInputs in;
  c.make(in, rng);
  BuiltCase b{ref::testing::OpTest(c.op, c.domain.empty() ? c.opset : 17),
              ref::testing::OpTest(c.op, c.domain.empty() ? c.opset : 17),
              {}};
  if (!c.domain.empty()) {
    b.ref.Domain(c.domain, c.opset);
    b.dev.Domain(c.domain, c.opset);
  }
  for (const Attribute& a : in.attributes) {
    b.ref.Attr(a);
    b.dev.Attr(a);
  }
  const bool half = c.dtype == DataType::kFloat16 || c.dtype == DataType::kBFloat16;
  for (const CaseInputs::In& i : in.inputs) {
    if (!i.tensor.valid()) {
      b.ref.OmittedInput();
      b.dev.OmittedInput();
      b.dev_inputs.emplace_back();
      continue;
    }
    OwnedTensor r = i.tensor, d = i.tensor;
    if (half && !i.keep && i.tensor.dtype() == DataType::kFloat32) {
      r = ConvertFloat(i.tensor, c.dtype, /*widen=*/true);
      d = ConvertFloat(i.tensor, c.dtype, /*widen=*/false);
    }
    if (i.constant) {
      b.ref.ConstInput(r);
      b.dev.ConstInput(d);
    } else {
      b.ref.Input(r);
      b.dev.Input(d);
    }
    b.dev_inputs.push_back(d);
  }
  b.ref.Outputs(std::vector<bool>(static_cast<size_t>(in.num_outputs), true));
  b.dev.Outputs(std::vector<bool>(static_cast<size_t>(in.num_outputs), true));
  return b;
}

uint32_t Seed() {
  if (const char* s = std::getenv("KILN_CUDA_TEST_SEED"))
    return static_cast<uint32_t>(std::atoll(s));
  return std::random_device{}();
}

class CudaKernelTable : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(RegisterCudaKernels().ok()); }
};

TEST_F(CudaKernelTable, CaseNamesAreUnique) {
  std::set<std::string> names;
  for (const CudaCase& c : Cases()) EXPECT_TRUE(names.insert(c.name).second) << c.name;
}

// Each case's node is taken by a CUDA kernel (placement would put it on the GPU), and that
// kernel's factory builds it without a GPU.
TEST_F(CudaKernelTable, CasesPickCudaKernels) {
  std::mt19937 rng(Seed());
  for (const CudaCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    BuiltCase b = Build(c, rng);
    const NodeDesc desc = b.dev.Describe();
    const KernelInfo info(desc);
    Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCuda);
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    EXPECT_EQ((*def)->provider, "cuda");
    Result<std::unique_ptr<Kernel>> kernel = (*def)->create(info);
    EXPECT_TRUE(kernel.ok()) << kernel.status().ToString();
  }
}

// Every kernel of the table is picked by some case, for each float type it declares (and for
// some integer type when it declares integers).
TEST_F(CudaKernelTable, EveryKernelAndFloatTypeHasCases) {
  std::mt19937 rng(Seed());
  std::map<const KernelDef*, std::set<DataType>> covered;
  for (const CudaCase& c : Cases()) {
    BuiltCase b = Build(c, rng);
    const NodeDesc desc = b.dev.Describe();
    const KernelInfo info(desc);
    Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCuda);
    if (!def.ok()) continue;  // CasesPickCudaKernels reports it
    const KernelDef& d = **def;
    const DataType t =
        d.type_input >= 0 ? info.input_type(d.type_input).dtype : info.output_type(0).dtype;
    covered[&d].insert(t);
  }
  const std::span<const KernelDef> table = CudaKernelDefs();
  EXPECT_FALSE(table.empty());
  for (const KernelDef& d : KernelRegistry::Global().defs()) {
    if (d.device != DeviceType::kCuda) continue;
    const std::string name = std::string(d.domain.empty() ? "" : "ai.kiln.") +
                             std::string(d.op_type) + " (opset " + std::to_string(d.since_version) +
                             "-" + std::to_string(d.end_version) + ")";
    auto it = covered.find(&d);
    if (it == covered.end()) {
      ADD_FAILURE() << name << ": no case picks this CUDA kernel";
      continue;
    }
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
      if ((d.types & TypeBit(t)) && !it->second.count(t)) {
        ADD_FAILURE() << name << ": no case in " << DataTypeName(t);
      }
    }
    const DataTypeMask ints = TypeMask(
        {DataType::kInt32, DataType::kInt64, DataType::kInt8, DataType::kUint8, DataType::kBool});
    if ((d.types & ints) != 0) {
      bool any = false;
      for (DataType t : it->second) any = any || (TypeBit(t) & ints) != 0;
      if (!any) ADD_FAILURE() << name << ": declares integer types but no case uses one";
    }
  }
  std::printf("%zu CUDA kernel definitions, %zu cases\n", table.size(), Cases().size());
}

// Device memory filled with 0xFF bytes (a NaN in every float) when handed out, so that an element
// a kernel leaves unwritten fails the comparison.
class PoisonDeviceAllocator final : public Allocator {
 public:
  explicit PoisonDeviceAllocator(Allocator& base) : base_(base) {}
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    KILN_ASSIGN_OR_RETURN(void* p, base_.Allocate(bytes, alignment));
    KILN_RETURN_IF_ERROR(base_.Fill(p, 0xFF, bytes));
    return p;
  }
  void Free(void* ptr, size_t bytes) override { base_.Free(ptr, bytes); }
  Device device() const override { return base_.device(); }
  Status Fill(void* ptr, int value, size_t bytes) override { return base_.Fill(ptr, value, bytes); }

 private:
  Allocator& base_;
};

class CudaKernelVsReference : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "needs a GPU: " << why;
    ASSERT_TRUE(RegisterCudaKernels().ok());
    ASSERT_TRUE(RegisterCudaBackends().ok());
    backend_ = BackendRegistry::Find(Device::Cuda(0));
    ASSERT_NE(backend_, nullptr);
  }
  Backend* backend_ = nullptr;
};

// One case: false (with the failures added) when the CUDA kernel's outputs differ.
void RunCase(Backend* backend, const CudaCase& c, uint32_t seed) {
  SCOPED_TRACE(c.name + " (KILN_CUDA_TEST_SEED=" + std::to_string(seed) + ")");
  std::mt19937 rng(seed);
  BuiltCase b = Build(c, rng);
  Result<std::vector<OwnedTensor>> expected = b.ref.Run();
  ASSERT_TRUE(expected.ok()) << "reference: " << expected.status().ToString();

  const NodeDesc desc = b.dev.Describe();
  const KernelInfo info(desc);
  Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCuda);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  ASSERT_EQ((*def)->provider, "cuda");
  Result<std::unique_ptr<Kernel>> kernel = (*def)->create(info);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();

  std::unique_ptr<Stream> stream = backend->CreateStream().value();
  Allocator& device = backend->buffer_type().allocator();
  PoisonDeviceAllocator poisoned(device);
  std::vector<OwnedTensor> on_device;
  std::vector<Tensor> inputs;
  for (const OwnedTensor& t : b.dev_inputs) {
    if (!t.valid()) {
      inputs.emplace_back();
      continue;
    }
    OwnedTensor d = OwnedTensor::AllocateForOverwrite(t.dtype(), t.shape(), device).value();
    stream->CopyAsync(d.raw_data(), t.raw_data(), t.size_bytes());
    inputs.push_back(d.view());
    on_device.push_back(std::move(d));
  }
  std::vector<OwnedTensor> outputs(expected->size());
  KernelContext ctx(inputs, outputs, poisoned);
  ctx.set_stream(stream.get());
  Status run = (*kernel)->Compute(ctx);
  ASSERT_TRUE(run.ok()) << run.ToString();
  std::vector<OwnedTensor> actual;
  for (const OwnedTensor& o : outputs) {
    ASSERT_TRUE(o.valid()) << "an output was not produced";
    OwnedTensor h = OwnedTensor::AllocateForOverwrite(o.dtype(), o.shape()).value();
    stream->CopyAsync(h.raw_data(), o.raw_data(), o.size_bytes());
    actual.push_back(std::move(h));
  }
  Status sync = stream->Synchronize();
  ASSERT_TRUE(sync.ok()) << sync.ToString();

  const double tol = c.tolerance > 0 ? c.tolerance : DefaultTolerance(c.dtype);
  for (size_t o = 0; o < actual.size(); ++o) {
    const OwnedTensor& a = actual[o];
    const OwnedTensor& e = (*expected)[o];
    ASSERT_EQ(a.shape(), e.shape())
        << "output " << o << ": " << a.shape().ToString() << " vs " << e.shape().ToString();
    if (!IsFloatingPoint(e.dtype())) {
      ASSERT_EQ(a.dtype(), e.dtype()) << "output " << o;
      EXPECT_EQ(std::memcmp(a.raw_data(), e.raw_data(), e.size_bytes()), 0)
          << "output " << o << " differs";
      continue;
    }
    ASSERT_TRUE(IsFloatingPoint(a.dtype())) << "output " << o << " is " << DataTypeName(a.dtype());
    const std::vector<double> av = Widen(a), ev = Widen(e);
    int failures = 0;
    for (size_t i = 0; i < av.size() && failures < 3; ++i) {
      const bool both_nan = std::isnan(av[i]) && std::isnan(ev[i]);
      if (both_nan || av[i] == ev[i]) continue;
      if (!(std::fabs(av[i] - ev[i]) <= tol * (1.0 + std::fabs(ev[i])))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": cuda " << av[i] << ", reference "
                      << ev[i] << " (tolerance " << tol << ")";
        ++failures;
      }
    }
  }
}

// Every case of every group, each on fresh random inputs (one test, so that a machine without a
// GPU skips it once; each failure names its case and seed).
TEST_F(CudaKernelVsReference, EveryCaseMatches) {
  const uint32_t seed = Seed();
  int failed = 0;
  for (const CudaCase& c : Cases()) {
    const int before =
        ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    RunCase(backend_, c, seed);
    failed +=
        ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count() >
        before;
  }
  std::printf("%zu cases, %d failed (seed %u)\n", Cases().size(), failed, seed);
}

}  // namespace
}  // namespace kiln::cuda::testing
