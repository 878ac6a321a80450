// SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/dnnl_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>

#include "base/check.h"
#include "kernels/cpu/half_kernels.h"
#include "kernels/cpu/parallel.h"

namespace kiln::cpu {

int CurrentThreads() { return ParallelThreads(); }

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* const engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

namespace {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

struct ScratchBuffer {
  std::unique_ptr<void, AlignedFree> data;
  size_t bytes = 0;
};

}  // namespace

void* ThreadScratch(ScratchSlot slot, size_t bytes) {
  thread_local std::array<ScratchBuffer, static_cast<size_t>(ScratchSlot::kCount)> buffers;
  ScratchBuffer& b = buffers[static_cast<size_t>(slot)];
  if (bytes > b.bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) throw std::bad_alloc();
    b.data.reset(p);
    b.bytes = rounded;
  }
  return b.data.get();
}

bool CpuComputesBf16() {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & bf16) == bf16;
}

bool CpuHasInt8DotProducts() {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const auto avx512_vnni = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_vnni);
  const auto avx2_vnni = static_cast<unsigned>(dnnl_cpu_isa_avx2_vnni);
  return (isa & avx512_vnni) == avx512_vnni || (isa & avx2_vnni) == avx2_vnni;
}

dnnl::memory::dims ToDims(std::span<const int64_t> dims) {
  return dnnl::memory::dims(dims.begin(), dims.end());
}

dnnl::memory::format_tag PlainTag(int rank) {
  using tag = dnnl::memory::format_tag;
  switch (rank) {
    case 1:
      return tag::a;
    case 2:
      return tag::ab;
    case 3:
      return tag::abc;
    case 4:
      return tag::abcd;
    case 5:
      return tag::abcde;
    case 6:
      return tag::abcdef;
    default:
      return tag::undef;
  }
}

dnnl::memory::format_tag BlockedTag(int rank, int64_t block) {
  using tag = dnnl::memory::format_tag;
  const bool b16 = block == 16;
  switch (rank) {
    case 3:
      return b16 ? tag::aBc16b : tag::aBc8b;
    case 4:
      return b16 ? tag::aBcd16b : tag::aBcd8b;
    case 5:
      return b16 ? tag::aBcde16b : tag::aBcde8b;
    default:
      return tag::undef;
  }
}

bool AppendActivation(dnnl::post_ops& ops, const Activation& act) {
  using alg = dnnl::algorithm;
  switch (act.kind) {
    case ActivationKind::kNone:
      return true;
    case ActivationKind::kRelu:
      ops.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f);
      return true;
    case ActivationKind::kLeakyRelu:
      ops.append_eltwise(1.0f, alg::eltwise_relu, act.p0, 0.0f);
      return true;
    case ActivationKind::kClip:
      ops.append_eltwise(1.0f, alg::eltwise_clip, act.p0, act.p1);
      return true;
    case ActivationKind::kSigmoid:
      ops.append_eltwise(1.0f, alg::eltwise_logistic, 0, 0);
      return true;
    case ActivationKind::kSilu:
      ops.append_eltwise(1.0f, alg::eltwise_swish, 1.0f, 0);
      return true;
    case ActivationKind::kHardSigmoid:
      ops.append_eltwise(1.0f, alg::eltwise_linear, act.p0, act.p1);
      ops.append_eltwise(1.0f, alg::eltwise_clip, 0.0f, 1.0f);
      return true;
    case ActivationKind::kHardSwish:
      ops.append_eltwise(1.0f, alg::eltwise_hardswish, 0, 0);
      return true;
    case ActivationKind::kGelu:
      ops.append_eltwise(1.0f, alg::eltwise_gelu_erf, 0, 0);
      return true;
    case ActivationKind::kGeluTanh:
      ops.append_eltwise(1.0f, alg::eltwise_gelu_tanh, 0, 0);
      return true;
    case ActivationKind::kTanh:
      ops.append_eltwise(1.0f, alg::eltwise_tanh, 0, 0);
      return true;
    case ActivationKind::kErf:
    case ActivationKind::kExp:
      return false;
  }
  return false;
}

DnnlWindow ToDnnlWindow(const ref::WindowGeometry& g) {
  DnnlWindow w;
  for (int d = 0; d < g.rank; ++d) {
    const size_t du = static_cast<size_t>(d);
    w.strides.push_back(g.stride[du]);
    w.dilates.push_back(g.dilation[du] - 1);
    w.pad_l.push_back(g.pad_begin[du]);
    w.pad_r.push_back(g.pad_end[du]);
  }
  return w;
}

bool PlanReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to, dnnl::reorder* out) {
  if (from == to) return false;
  const dnnl::engine& eng = CpuEngine();
  *out = dnnl::reorder(dnnl::reorder::primitive_desc(eng, from, eng, to));
  return true;
}

bool IsReferenceImpl(std::string_view impl_info) { return impl_info.starts_with("ref"); }

std::string OnednnImpl(std::string_view impl_info) { return "oneDNN " + std::string(impl_info); }

void ImplementationLog::Record(std::string_view impl) const {
  MutexLock lock(mu_);
  if (std::find(seen_.begin(), seen_.end(), impl) == seen_.end()) seen_.emplace_back(impl);
}

std::string ImplementationLog::Joined() const {
  MutexLock lock(mu_);
  std::string out;
  for (const std::string& s : seen_) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

dnnl::primitive_attr MakeAttr(const dnnl::post_ops& ops) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_post_ops(ops);
  return attr;
}

Status DnnlError(std::string_view what, const dnnl::error& e) {
  return Status::Internal(
      fmt::format("{}: oneDNN error {}: {}", what, static_cast<int>(e.status), e.what()));
}

const uint16_t* PackedWeights::GetHalf(const dnnl::memory::desc& user, const void* data,
                                       const dnnl::memory::desc& format) const {
  MutexLock lock(mu_);
  for (const HalfBuffer& b : packed_half_) {
    if (b.format == format) return b.data.get();
  }
  // Widen, reorder in FP32, narrow; the FP32 temporaries are freed on return.
  const int64_t user_n = static_cast<int64_t>(user.get_size() / sizeof(float));
  const int64_t packed_n = static_cast<int64_t>(format.get_size() / sizeof(float));
  std::vector<float> wide(static_cast<size_t>(user_n));
  HalfToFloatParallel(storage_, static_cast<const uint16_t*>(data), wide.data(), user_n);
  const dnnl::engine& eng = CpuEngine();
  dnnl::memory src(user, eng, wide.data());
  dnnl::memory packed(format, eng);
  dnnl::stream& s = ThreadStream();
  dnnl::reorder(dnnl::reorder::primitive_desc(eng, user, eng, format)).execute(s, src, packed);
  s.wait();
  HalfBuffer b;
  b.format = format;
  b.data = std::make_unique<uint16_t[]>(static_cast<size_t>(packed_n));
  FloatToHalfParallel(storage_, static_cast<const float*>(packed.get_data_handle()), b.data.get(),
                      packed_n);
  const uint16_t* out = b.data.get();
  packed_half_.push_back(std::move(b));
  resident_bytes_ += static_cast<size_t>(packed_n) * sizeof(uint16_t);
  return out;
}

dnnl::memory ExpandHalfWeights(DataType storage, const void* half, const dnnl::memory::desc& md) {
  const size_t bytes = md.get_size();
  float* wide = static_cast<float*>(ThreadScratch(ScratchSlot::kWeights, bytes));
  HalfToFloatParallel(storage, static_cast<const uint16_t*>(half), wide,
                      static_cast<int64_t>(bytes / sizeof(float)));
  return dnnl::memory(md, CpuEngine(), wide);
}

}  // namespace kiln::cpu
