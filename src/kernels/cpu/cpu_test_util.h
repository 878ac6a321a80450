// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helpers for the fast CPU kernels: run one node through a chosen provider's kernel ("ref"
// or "cpu", looked up in KernelRegistry::Global() by op, domain, opset and dtype) and compare
// outputs elementwise.
//
//   KernelCase c("Conv", 13);
//   c.Input(RandomTensor({1, 3, 7, 7}, rng)).ConstInput(RandomTensor({4, 3, 3, 3}, rng));
//   ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-4);

#include <gtest/gtest.h>

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/ref/ref_test_util.h"
#include "kernels/registry.h"

namespace kiln::cpu::testing {

// Host memory filled with 0xFF bytes (a NaN in every float) before it is handed out: a kernel that
// takes its output with AllocateOutputForOverwrite but leaves elements unwritten then fails the
// comparison with the reference instead of passing on memory that happened to be zero.
class PoisonAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    KILN_ASSIGN_OR_RETURN(void* p, HostAllocator().Allocate(bytes, alignment));
    std::memset(p, 0xFF, bytes);
    return p;
  }
  void Free(void* ptr, size_t bytes) override { HostAllocator().Free(ptr, bytes); }
  Device device() const override { return HostAllocator().device(); }
};

inline Allocator& PoisonedHostAllocator() {
  static PoisonAllocator allocator;
  return allocator;
}

using ref::testing::FloatAttr;
using ref::testing::FloatsAttr;
using ref::testing::IntAttr;
using ref::testing::IntsAttr;
using ref::testing::MakeTensor;
using ref::testing::StringAttr;

inline OwnedTensor RandomTensor(const Shape& shape, std::mt19937& rng, double lo = -1.0,
                                double hi = 1.0) {
  return MakeTensor<float>(shape,
                           ref::testing::RandomValues<float>(shape.NumElements(), rng, lo, hi));
}

// Every dispatch level of kiln's own kernels this machine runs, lowest first (scalar, then AVX2
// and AVX-512 where DetectedIsa() reaches them): tests that compare a fast path with the
// reference loop over them under ScopedMaxIsa.
inline std::vector<Isa> IsaLevels() {
  std::vector<Isa> levels;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (static_cast<int>(i) <= static_cast<int>(DetectedIsa())) levels.push_back(i);
  }
  return levels;
}

// One node; inputs are fed directly to the kernel (no Session), constants are initializers.
class KernelCase {
 public:
  KernelCase(std::string op, int64_t opset) : test_(op, opset), op_(std::move(op)) {}

  KernelCase& Domain(std::string domain, int64_t version) {
    test_.Domain(domain, version);
    domain_ = std::move(domain);
    return *this;
  }
  KernelCase& Attr(Attribute a) {
    test_.Attr(std::move(a));
    return *this;
  }
  KernelCase& Input(OwnedTensor t) {
    feeds_.push_back(t);
    test_.Input(std::move(t));
    kinds_.push_back(kFeed);
    return *this;
  }
  KernelCase& ConstInput(OwnedTensor t) {
    test_.ConstInput(std::move(t));
    kinds_.push_back(kConst);
    return *this;
  }
  KernelCase& OmittedInput() {
    test_.OmittedInput();
    kinds_.push_back(kOmitted);
    return *this;
  }

  // The provider of the kernel the registry picks for this node.
  std::string PickedProvider() const {
    const NodeDesc desc = test_.Describe();
    const KernelInfo info(desc);
    Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCpu);
    return def.ok() ? std::string((*def)->provider) : "error: " + def.status().ToString();
  }

  // Output 0 of the node run by `provider`'s kernel; an invalid tensor (and a test failure) on
  // error.
  OwnedTensor Run(std::string_view provider) const {
    Result<OwnedTensor> r = TryRun(provider);
    EXPECT_TRUE(r.ok()) << op_ << " (" << provider << "): " << r.status().ToString();
    return r.ok() ? std::move(r).value() : OwnedTensor();
  }

  // A kernel built for this node by `provider`, with the description it was built from.
  struct Prepared {
    NodeDesc node;
    std::unique_ptr<Kernel> kernel;
  };
  Result<Prepared> Prepare(std::string_view provider) const {
    Prepared p;
    p.node = test_.Describe();
    const int64_t opset = p.node.opset;
    const KernelInfo info(p.node);
    const KernelDef* found = nullptr;
    for (const KernelDef& def : KernelRegistry::Global().defs()) {
      if (def.provider != provider || def.op_type != op_ || def.domain != domain_) continue;
      if (opset < def.since_version || opset > def.end_version) continue;
      const DataType dt = info.input_type(def.type_input).dtype;
      if (!(def.types & TypeBit(dt))) continue;
      found = &def;
    }
    if (found == nullptr) {
      return Status::NotFound("no " + std::string(provider) + " kernel for " + op_);
    }
    KILN_ASSIGN_OR_RETURN(p.kernel, found->create(info));
    return p;
  }

  // Runs a prepared kernel on this case's inputs (thread-safe: Compute is const).
  Result<OwnedTensor> Execute(const Prepared& p) const {
    std::vector<Tensor> inputs;
    size_t feed = 0;
    for (size_t i = 0; i < kinds_.size(); ++i) {
      switch (kinds_[i]) {
        case kFeed:
          inputs.push_back(feeds_[feed++].view());
          break;
        case kConst:
          inputs.push_back(p.node.inputs[i].constant->view());
          break;
        case kOmitted:
          inputs.emplace_back();
          break;
      }
    }
    std::vector<OwnedTensor> outputs(p.node.outputs.size());
    KernelContext ctx(inputs, outputs, PoisonedHostAllocator());
    KILN_RETURN_IF_ERROR(p.kernel->Compute(ctx));
    return outputs[0];
  }

  Result<OwnedTensor> TryRun(std::string_view provider) const {
    KILN_ASSIGN_OR_RETURN(Prepared p, Prepare(provider));
    return Execute(p);
  }

 private:
  enum Kind { kFeed, kConst, kOmitted };
  ref::testing::OpTest test_;
  std::string op_;
  std::string domain_;
  std::vector<OwnedTensor> feeds_;
  std::vector<Kind> kinds_;
};

// A convolution problem for kernel tests: X [N, C, spatial...], M output channels, the kernel
// window, groups, strides and pads (empty: the defaults).
struct ConvShape {
  std::vector<int64_t> x;
  int64_t m;
  std::vector<int64_t> k;
  int64_t group = 1;
  std::vector<int64_t> strides{}, pads{};
};

// Same shape, and |a - e| <= tol * (1 + |e|) elementwise (NaN matches NaN, inf matches inf).
inline void ExpectClose(const OwnedTensor& actual, const OwnedTensor& expected, double tol,
                        const std::string& what = "") {
  ASSERT_TRUE(actual.valid()) << what;
  ASSERT_TRUE(expected.valid()) << what;
  ASSERT_EQ(actual.shape(), expected.shape())
      << what << ": " << actual.shape().ToString() << " vs " << expected.shape().ToString();
  const float* a = actual.data<const float>();
  const float* e = expected.data<const float>();
  int failures = 0;
  for (int64_t i = 0; i < actual.num_elements() && failures < 5; ++i) {
    const double ev = e[i], av = a[i];
    bool ok;
    if (std::isnan(ev)) {
      ok = std::isnan(av);
    } else if (std::isinf(ev)) {
      ok = av == ev;
    } else {
      ok = std::abs(av - ev) <= tol * (1 + std::abs(ev));
    }
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i << " is " << av << ", expected " << ev;
    }
  }
}

// Four threads run the prepared kernel of `c` three times each at once (Compute is const and
// must be thread-safe); every result must match `expected`.
inline void ExpectConcurrentRunsMatch(const KernelCase& c, const KernelCase::Prepared& p,
                                      const OwnedTensor& expected) {
  std::vector<std::thread> threads;
  std::vector<OwnedTensor> results(4);
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        Result<OwnedTensor> r = c.Execute(p);
        if (r.ok()) results[t] = std::move(r).value();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const OwnedTensor& r : results) ExpectClose(r, expected, 1e-4, "concurrent");
}

// Runs the cpu kernel of `k` twice (the first call builds the plan and packs the weights) and
// returns the second call's output, with oneDNN's verbose log of that call in `*log`.
inline Result<OwnedTensor> SecondRunVerbose(const KernelCase& k, std::string* log) {
  KILN_ASSIGN_OR_RETURN(KernelCase::Prepared p, k.Prepare("cpu"));
  KILN_RETURN_IF_ERROR(k.Execute(p).status());
  ::testing::internal::CaptureStdout();
  dnnl::set_verbose(1);
  Result<OwnedTensor> r = k.Execute(p);
  dnnl::set_verbose(0);
  *log = ::testing::internal::GetCapturedStdout();
  return r;
}

// Plain [N, C, S...] -> blocked [N, ceil(C/b), S..., b] (op/kiln_ops.h), zero padding, by a
// direct loop from the definition (so padding checks rely on neither kernel under test).
inline OwnedTensor Block(const OwnedTensor& x, int64_t b) {
  const int64_t n = x.shape().dim(0), c = x.shape().dim(1);
  int64_t spatial = 1;
  std::vector<int64_t> dims = {n, (c + b - 1) / b};
  for (int i = 2; i < x.shape().rank(); ++i) {
    spatial *= x.shape().dim(i);
    dims.push_back(x.shape().dim(i));
  }
  dims.push_back(b);
  const Shape shape{std::span<const int64_t>(dims)};
  std::vector<float> out(static_cast<size_t>(shape.NumElements()), 0.0f);
  const float* p = x.data<const float>();
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t ic = 0; ic < c; ++ic) {
      for (int64_t s = 0; s < spatial; ++s) {
        out[static_cast<size_t>(((in * dims[1] + ic / b) * spatial + s) * b + ic % b)] =
            p[(in * c + ic) * spatial + s];
      }
    }
  }
  return MakeTensor<float>(shape, out);
}

// Every padding channel of blocked `t` (C real channels) is exactly zero.
inline void ExpectZeroPadding(const OwnedTensor& t, int64_t c, const std::string& what) {
  ASSERT_TRUE(t.valid()) << what;
  const int64_t b = t.shape().dim(t.shape().rank() - 1);
  const float* p = t.data<const float>();
  int bad = 0;
  for (int64_t i = 0; i < t.num_elements() && bad < 3; ++i) {
    const int64_t lane = i % b;
    int64_t spatial = 1;
    for (int d = 2; d < t.shape().rank() - 1; ++d) spatial *= t.shape().dim(d);
    const int64_t cblock = (i / b / spatial) % t.shape().dim(1);
    if (cblock * b + lane >= c && p[i] != 0.0f) {
      ++bad;
      ADD_FAILURE() << what << ": padding element " << i << " is " << p[i];
    }
  }
}

}  // namespace kiln::cpu::testing
