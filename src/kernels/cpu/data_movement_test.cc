// SPDX-License-Identifier: Apache-2.0
// The data movement kernels (data_movement.cc) against the reference kernels, byte for byte:
// Slice, Concat, Split, Expand, Tile, Pad, Where and Cast over random shapes of rank 0 to 5 with
// size-0 and size-1 dims, FLOAT / INT64 / UINT8 / FLOAT16 / BOOL data, sizes large enough for
// the parallel paths, Cast's special values at every ISA level, and errors (which the fast
// kernels hand to the reference) with the reference's status.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_test_util.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

// A tensor of `dtype` with random contents: random bytes (any bit pattern, NaNs included, which
// the byte comparison handles), 0/1 for BOOL.
OwnedTensor RandomOf(DataType dtype, const std::vector<int64_t>& dims, std::mt19937& rng) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(dtype, S(dims));
  KILN_CHECK(t.ok(), t.status().ToString());
  auto* p = static_cast<uint8_t*>(t->raw_data());
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < t->size_bytes(); ++i) {
    p[i] = static_cast<uint8_t>(dtype == DataType::kBool ? byte(rng) & 1 : byte(rng));
  }
  return std::move(t).value();
}

OwnedTensor Ints(const std::vector<int64_t>& v, bool i32 = false) {
  const std::vector<int64_t> dims = {static_cast<int64_t>(v.size())};
  if (i32) return MakeTensor<int32_t>(S(dims), std::vector<int32_t>(v.begin(), v.end()));
  return MakeTensor<int64_t>(S(dims), v);
}

// One node: inputs fed (or constant, or omitted), run on a provider's kernel with every output
// taken from the poisoned allocator.
class Node {
 public:
  Node(std::string op, int64_t opset) : test_(op, opset), op_(std::move(op)), opset_(opset) {}

  Node& Attr(Attribute a) {
    test_.Attr(std::move(a));
    return *this;
  }
  Node& Input(OwnedTensor t, std::optional<DataType> declared = std::nullopt) {
    inputs_.push_back(t);
    test_.Input(std::move(t), declared);
    return *this;
  }
  Node& Const(OwnedTensor t) {
    inputs_.push_back(t);
    test_.ConstInput(std::move(t));
    return *this;
  }
  Node& Omitted() {
    inputs_.emplace_back();
    test_.OmittedInput();
    return *this;
  }
  Node& Outputs(int n) {
    outputs_ = n;
    test_.Outputs(std::vector<bool>(static_cast<size_t>(n), true));
    return *this;
  }

  // The provider the registry picks for the node.
  std::string Picked() const {
    const NodeDesc desc = test_.Describe();
    Result<const KernelDef*> def =
        KernelRegistry::Global().Find(KernelInfo(desc), DeviceType::kCpu);
    return def.ok() ? std::string((*def)->provider) : "error: " + def.status().ToString();
  }

  // The kernel `provider` registers for the node.
  Result<std::unique_ptr<Kernel>> Build(std::string_view provider) const {
    const NodeDesc desc = test_.Describe();
    const KernelInfo info(desc);
    const KernelDef* found = nullptr;
    for (const KernelDef& def : KernelRegistry::Global().defs()) {
      if (def.provider != provider || def.op_type != op_ || !def.domain.empty()) continue;
      if (opset_ < def.since_version || opset_ > def.end_version) continue;
      const DataType dt = info.input_type(def.type_input).dtype;
      if (dt != DataType::kInvalid && !(def.types & TypeBit(dt))) continue;
      found = &def;
    }
    if (found == nullptr)
      return Status::NotFound(fmt::format("no {} kernel for {}", provider, op_));
    return found->create(info);
  }

  Result<std::vector<OwnedTensor>> Execute(const Kernel& kernel) const {
    std::vector<Tensor> views;
    for (const OwnedTensor& t : inputs_) views.push_back(t.valid() ? t.view() : Tensor());
    std::vector<OwnedTensor> outputs(static_cast<size_t>(outputs_));
    KernelContext ctx(views, outputs, PoisonedHostAllocator());
    KILN_RETURN_IF_ERROR(kernel.Compute(ctx));
    return outputs;
  }

  Result<std::vector<OwnedTensor>> Run(std::string_view provider) const {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, Build(provider));
    return Execute(*k);
  }

 private:
  ref::testing::OpTest test_;
  std::string op_;
  int64_t opset_;
  std::vector<OwnedTensor> inputs_;
  int outputs_ = 1;
};

// Same dtype, shape and bytes.
void ExpectSameBytes(const OwnedTensor& actual, const OwnedTensor& expected,
                     const std::string& what) {
  ASSERT_TRUE(actual.valid()) << what;
  ASSERT_TRUE(expected.valid()) << what;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape())
      << what << ": " << actual.shape().ToString() << " vs " << expected.shape().ToString();
  const size_t elem = DataTypeSize(actual.dtype());
  const auto* a = static_cast<const uint8_t*>(actual.raw_data());
  const auto* e = static_cast<const uint8_t*>(expected.raw_data());
  for (int64_t i = 0; i < actual.num_elements(); ++i) {
    const size_t at = static_cast<size_t>(i) * elem;
    if (std::memcmp(a + at, e + at, elem) != 0) {
      uint64_t av = 0, ev = 0;
      std::memcpy(&av, a + at, elem);
      std::memcpy(&ev, e + at, elem);
      ADD_FAILURE() << what << ": element " << i << " is 0x" << std::hex << av << ", expected 0x"
                    << ev;
      return;
    }
  }
}

// The cpu kernel is picked (unless `expect_cpu` is false) and gives the reference's outputs, or
// its error.
void ExpectMatches(const Node& node, const std::string& what, bool expect_cpu = true) {
  if (expect_cpu) {
    EXPECT_EQ(node.Picked(), "cpu") << what;
  }
  Result<std::vector<OwnedTensor>> ref = node.Run("ref");
  Result<std::vector<OwnedTensor>> cpu = node.Run("cpu");
  ASSERT_EQ(cpu.ok(), ref.ok()) << what << ": cpu " << (cpu.ok() ? "OK" : cpu.status().ToString())
                                << ", ref " << (ref.ok() ? "OK" : ref.status().ToString());
  if (!ref.ok()) {
    EXPECT_EQ(cpu.status().ToString(), ref.status().ToString()) << what;
    return;
  }
  ASSERT_EQ(cpu->size(), ref->size()) << what;
  for (size_t i = 0; i < ref->size(); ++i) {
    ExpectSameBytes((*cpu)[i], (*ref)[i], fmt::format("{} output {}", what, i));
  }
}

const std::vector<DataType> kTypes = {DataType::kFloat32, DataType::kInt64, DataType::kUint8,
                                      DataType::kFloat16, DataType::kBool};

// Random dims of `rank`: mostly 1..6, sometimes 1, rarely 0.
std::vector<int64_t> RandomDims(int rank, std::mt19937& rng, int64_t max_dim = 6) {
  std::vector<int64_t> dims;
  std::uniform_int_distribution<int> kind(0, 19);
  std::uniform_int_distribution<int64_t> size(1, max_dim);
  for (int i = 0; i < rank; ++i) {
    const int k = kind(rng);
    dims.push_back(k == 0 ? 0 : k < 4 ? 1 : size(rng));
  }
  return dims;
}

std::string Str(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

// ---- Slice -----------------------------------------------------------------------------------

TEST(CpuSliceTest, RandomMatchesReference) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> rank_dist(1, 5), coin(0, 1), pick(0, 9);
  const std::vector<int64_t> step_choices = {1, 1, 1, 2, 3, -1, -1, -2, -3, 1};
  for (int iter = 0; iter < 600; ++iter) {
    const int rank = rank_dist(rng);
    const std::vector<int64_t> dims = RandomDims(rank, rng, 7);
    const DataType dtype = kTypes[static_cast<size_t>(iter) % kTypes.size()];
    const bool i32 = coin(rng) == 1;
    // A random subset of axes, in random order, sometimes negative.
    std::vector<int64_t> axes(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i) axes[static_cast<size_t>(i)] = i;
    std::shuffle(axes.begin(), axes.end(), rng);
    axes.resize(static_cast<size_t>(std::uniform_int_distribution<int>(0, rank)(rng)));
    std::vector<int64_t> starts, ends, steps;
    for (int64_t& a : axes) {
      const int64_t d = dims[static_cast<size_t>(a)];
      std::uniform_int_distribution<int64_t> pos(-d - 2, d + 2);
      const int64_t big = i32 ? std::numeric_limits<int32_t>::max() : INT64_MAX;
      const int64_t small = i32 ? std::numeric_limits<int32_t>::min() : INT64_MIN;
      const int k = pick(rng);
      starts.push_back(k == 0 ? small : k == 1 ? big : pos(rng));
      const int m = pick(rng);
      ends.push_back(m == 0 ? big : m == 1 ? small : pos(rng));
      steps.push_back(step_choices[static_cast<size_t>(pick(rng))]);
      if (coin(rng) == 1) a -= rank;
    }
    // Steps need the axes input before them; without axes the entries apply to axes 0.. in
    // order.
    const bool with_steps = coin(rng) == 1;
    const bool with_axes = with_steps || coin(rng) == 1;
    Node node("Slice", iter % 3 == 0 ? 10 : 13);
    node.Input(RandomOf(dtype, dims, rng)).Input(Ints(starts, i32)).Input(Ints(ends, i32));
    if (with_axes) node.Input(Ints(axes, i32));
    if (with_steps) node.Input(Ints(steps, i32));
    ExpectMatches(node, fmt::format("Slice {} {} starts {} ends {} axes {} steps {}",
                                    DataTypeName(dtype), Str(dims), Str(starts), Str(ends),
                                    Str(axes), with_steps ? Str(steps) : "-"));
  }
}

TEST(CpuSliceTest, RealisticShapes) {
  std::mt19937 rng(12);
  struct Case {
    std::vector<int64_t> dims, starts, ends, axes, steps;
  };
  const std::vector<Case> cases = {
      {{4, 256, 64, 64}, {16}, {208}, {1}, {1}},  // channel slice (parallel)
      {{2, 64, 64, 64}, {0, 1}, {INT64_MAX, INT64_MAX}, {2, 3}, {2, 2}},  // space-to-depth
      {{1, 3, 256, 256}, {-1}, {INT64_MIN}, {-1}, {-1}},                  // reverse the last axis
      {{4, 128, 96}, {0}, {32}, {-1}, {1}},                               // split heads by hand
      {{8, 3, 85}, {4}, {5}, {2}, {1}},                                   // detection score column
      {{4}, {1}, {3}, {0}, {1}},                                          // a shape vector
      {{1, 1, 1}, {0}, {1}, {1}, {1}},
      {{3, 1000001}, {1}, {-1}, {1}, {1}},  // parallel chunks that start mid-row
  };
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::kFloat32, DataType::kInt64}) {
      Node node("Slice", 13);
      node.Input(RandomOf(dtype, c.dims, rng))
          .Const(Ints(c.starts))
          .Const(Ints(c.ends))
          .Const(Ints(c.axes))
          .Const(Ints(c.steps));
      ExpectMatches(
          node, fmt::format("Slice {} {} axes {}", DataTypeName(dtype), Str(c.dims), Str(c.axes)));
    }
  }
}

// ---- Concat, Split ---------------------------------------------------------------------------

TEST(CpuConcatTest, RandomMatchesReference) {
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> rank_dist(1, 5), count(1, 4), coin(0, 1);
  std::uniform_int_distribution<int64_t> axis_dim(0, 5);
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = rank_dist(rng);
    const std::vector<int64_t> dims = RandomDims(rank, rng);
    const int64_t axis = std::uniform_int_distribution<int64_t>(0, rank - 1)(rng);
    const bool negative = coin(rng) == 1;
    const DataType dtype = kTypes[static_cast<size_t>(iter) % kTypes.size()];
    Node node("Concat", negative ? 13 : (iter % 2 == 0 ? 7 : 11));
    node.Attr(IntAttr("axis", negative ? axis - rank : axis));
    const int n = count(rng);
    std::vector<int64_t> sizes;
    for (int i = 0; i < n; ++i) {
      std::vector<int64_t> d = dims;
      d[static_cast<size_t>(axis)] = axis_dim(rng);
      sizes.push_back(d[static_cast<size_t>(axis)]);
      node.Input(RandomOf(dtype, d, rng));
    }
    ExpectMatches(node, fmt::format("Concat {} {} axis {} sizes {}", DataTypeName(dtype), Str(dims),
                                    axis, Str(sizes)));
  }
}

TEST(CpuConcatTest, LargeSlabsAndRows) {
  std::mt19937 rng(22);
  // Four [1,160,64,64] on the channel axis (few large slabs: segments), [2048,64,8] pieces on the
  // last axis (many rows), [3,...] on axis 0: all above the parallel grain.
  struct Case {
    std::vector<std::vector<int64_t>> inputs;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{{1, 160, 64, 64}, {1, 160, 64, 64}, {1, 160, 64, 64}, {1, 160, 64, 64}}, 1},
      {{{2048, 64, 8}, {2048, 64, 16}}, 2},
      {{{2048, 64, 8}, {2048, 64, 16}}, -1},
      {{{3, 1000, 500}, {1, 1000, 500}, {2, 1000, 500}}, 0},
      {{{2, 40, 30, 30}, {2, 24, 30, 30}}, 1},
      {{{1, 137, 110, 114}, {1, 80, 110, 114}}, 1},
  };
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::kFloat32, DataType::kUint8}) {
      Node node("Concat", 13);
      node.Attr(IntAttr("axis", c.axis));
      for (const auto& d : c.inputs) node.Input(RandomOf(dtype, d, rng));
      ExpectMatches(
          node, fmt::format("Concat {} {} axis {}", DataTypeName(dtype), Str(c.inputs[0]), c.axis));
    }
  }
}

TEST(CpuSplitTest, RandomMatchesReference) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> rank_dist(1, 5), count(1, 4), form(0, 3), coin(0, 1);
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = rank_dist(rng);
    std::vector<int64_t> dims = RandomDims(rank, rng);
    const int64_t axis = std::uniform_int_distribution<int64_t>(0, rank - 1)(rng);
    const int n = count(rng);
    const DataType dtype = kTypes[static_cast<size_t>(iter) % kTypes.size()];
    // Uneven sizes summing to the axis (some 0), or equal parts.
    std::vector<int64_t> sizes;
    int64_t total = 0;
    for (int i = 0; i < n; ++i) {
      sizes.push_back(std::uniform_int_distribution<int64_t>(0, 4)(rng));
      total += sizes.back();
    }
    const int f = form(rng);
    if (f == 0) {
      dims[static_cast<size_t>(axis)] = n * std::uniform_int_distribution<int64_t>(0, 3)(rng);
    } else {
      dims[static_cast<size_t>(axis)] = total;
    }
    const int64_t a = coin(rng) == 1 ? axis - rank : axis;
    // f 0: equal parts (no sizes), 1: `split` attribute (opset 11), 2/3: split input (13).
    Node node("Split", f == 1 ? 11 : 13);
    node.Attr(IntAttr("axis", a)).Outputs(n).Input(RandomOf(dtype, dims, rng));
    if (f == 1) node.Attr(IntsAttr("split", sizes));
    if (f >= 2) node.Input(Ints(sizes, f == 3));
    ExpectMatches(node, fmt::format("Split {} {} axis {} form {} sizes {}", DataTypeName(dtype),
                                    Str(dims), a, f, Str(sizes)));
  }
}

TEST(CpuSplitTest, LargeAndUneven) {
  std::mt19937 rng(32);
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
    std::vector<int64_t> sizes;
  };
  const std::vector<Case> cases = {
      {{2, 128, 112, 112}, 1, {64, 32, 32}},  // few large slabs
      {{32, 128, 768}, -1, {256, 256, 256}},  // q, k, v
      {{32768, 85}, 1, {4, 1, 80}},           // boxes, score, classes: many rows
      {{1, 200, 110, 114}, 1, {74, 80, 46}},  // odd slabs: chunks start inside a slab
      {{6, 40, 40}, 0, {1, 2, 3}},
  };
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
      Node node("Split", 13);
      node.Attr(IntAttr("axis", c.axis))
          .Outputs(static_cast<int>(c.sizes.size()))
          .Input(RandomOf(dtype, c.dims, rng))
          .Const(Ints(c.sizes));
      ExpectMatches(node,
                    fmt::format("Split {} {} axis {}", DataTypeName(dtype), Str(c.dims), c.axis));
    }
  }
}

// ---- Expand, Tile ----------------------------------------------------------------------------

TEST(CpuExpandTest, RandomMatchesReference) {
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> rank_dist(0, 4), extra(0, 2), kind(0, 3);
  std::uniform_int_distribution<int64_t> size(1, 5);
  for (int iter = 0; iter < 300; ++iter) {
    const std::vector<int64_t> out = RandomDims(rank_dist(rng), rng, 5);
    // x: trailing dims of `out`, each kept or made 1; the target: out with rank growth, some
    // dims 1 where x has them (multidirectional broadcast).
    std::vector<int64_t> x_dims;
    const int drop = std::uniform_int_distribution<int>(0, static_cast<int>(out.size()))(rng);
    for (size_t i = static_cast<size_t>(drop); i < out.size(); ++i) {
      x_dims.push_back(kind(rng) == 0 ? 1 : out[i]);
    }
    std::vector<int64_t> target;
    for (int i = extra(rng); i > 0; --i) target.push_back(size(rng));
    for (size_t i = 0; i < out.size(); ++i) {
      target.push_back(i >= static_cast<size_t>(drop) && kind(rng) == 0 ? 1 : out[i]);
    }
    const DataType dtype = kTypes[static_cast<size_t>(iter) % kTypes.size()];
    Node node("Expand", iter % 2 == 0 ? 8 : 13);
    node.Input(RandomOf(dtype, x_dims, rng)).Input(Ints(target, iter % 3 == 0));
    ExpectMatches(node,
                  fmt::format("Expand {} {} to {}", DataTypeName(dtype), Str(x_dims), Str(target)));
  }
}

TEST(CpuExpandTest, RealisticShapes) {
  std::mt19937 rng(42);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{16, 1, 1, 128}, {16, 12, 128, 128}},  // attention mask
      {{1, 1, 768}, {8, 1, 768}},             // class token over the batch
      {{64, 1}, {64, 512}},                   // column broadcast
      {{3}, {2, 3}},
      {{}, {1000}},
      {{2, 3}, {0, 2, 3}},
  };
  for (const auto& [x, shape] : cases) {
    for (DataType dtype : {DataType::kFloat32, DataType::kBool}) {
      Node node("Expand", 13);
      node.Input(RandomOf(dtype, x, rng)).Const(Ints(shape));
      ExpectMatches(node,
                    fmt::format("Expand {} {} to {}", DataTypeName(dtype), Str(x), Str(shape)));
    }
  }
}

TEST(CpuTileTest, RandomMatchesReference) {
  std::mt19937 rng(51);
  std::uniform_int_distribution<int> rank_dist(0, 4), rep(0, 6);
  for (int iter = 0; iter < 300; ++iter) {
    const std::vector<int64_t> dims = RandomDims(rank_dist(rng), rng, 5);
    std::vector<int64_t> repeats;
    for (size_t i = 0; i < dims.size(); ++i) {
      const int r = rep(rng);
      repeats.push_back(r >= 4 ? 1 : r);  // 1 often, 0 sometimes
    }
    const DataType dtype = kTypes[static_cast<size_t>(iter) % kTypes.size()];
    Node node("Tile", iter % 2 == 0 ? 7 : 13);
    node.Input(RandomOf(dtype, dims, rng)).Input(Ints(repeats, iter % 3 == 0));
    ExpectMatches(node,
                  fmt::format("Tile {} {} by {}", DataTypeName(dtype), Str(dims), Str(repeats)));
  }
  // Large: a row tiled over many rows, and a block tiled along the last axis.
  for (const auto& [dims, repeats] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{1, 256}, {9000, 1}}, {{64, 64}, {16, 40}}, {{2, 1, 3, 3}, {1, 512, 8, 8}}}) {
    Node node("Tile", 13);
    node.Input(RandomOf(DataType::kFloat32, dims, rng)).Const(Ints(repeats));
    ExpectMatches(node, fmt::format("Tile {} by {}", Str(dims), Str(repeats)));
  }
}

// ---- Pad -------------------------------------------------------------------------------------

TEST(CpuPadTest, RandomMatchesReference) {
  std::mt19937 rng(61);
  std::uniform_int_distribution<int> rank_dist(1, 4), mode_dist(0, 2), coin(0, 1);
  std::uniform_int_distribution<int64_t> pad(-2, 4);
  const char* modes[] = {"constant", "reflect", "edge"};
  for (int iter = 0; iter < 400; ++iter) {
    const int rank = rank_dist(rng);
    const std::vector<int64_t> dims = RandomDims(rank, rng, 6);
    std::vector<int64_t> pads;
    for (int i = 0; i < 2 * rank; ++i) pads.push_back(coin(rng) == 1 ? 0 : pad(rng));
    const char* mode = modes[mode_dist(rng)];
    const DataType dtype = kTypes[static_cast<size_t>(iter) % kTypes.size()];
    Node node("Pad", iter % 2 == 0 ? 11 : 13);
    node.Attr(StringAttr("mode", mode)).Input(RandomOf(dtype, dims, rng)).Input(Ints(pads));
    const int value = std::uniform_int_distribution<int>(0, 2)(rng);
    if (value == 1) node.Input(RandomOf(dtype, {}, rng));
    if (value == 2) node.Omitted();
    ExpectMatches(node, fmt::format("Pad {} {} {} pads {} value {}", mode, DataTypeName(dtype),
                                    Str(dims), Str(pads), value));
  }
}

TEST(CpuPadTest, RealisticShapes) {
  std::mt19937 rng(62);
  struct Case {
    std::vector<int64_t> dims, pads;
  };
  const std::vector<Case> cases = {
      {{1, 512, 64, 64}, {0, 0, 1, 1, 0, 0, 1, 1}},   // 3x3 conv padding (parallel)
      {{1, 16, 56, 56}, {0, 0, 3, 3, 0, 0, 3, 3}},    // 7x7 reflection padding
      {{1, 8, 30, 30}, {0, 0, -1, -2, 0, 0, 2, -1}},  // crop and pad
      {{2, 3, 5}, {0, 1, 0, 0, 2, 0}},                // a padded middle dim only
      {{4, 64}, {0, 7, 0, 100}},                      // pads beyond the dim (reflect folds)
  };
  for (const Case& c : cases) {
    for (const char* mode : {"constant", "reflect", "edge"}) {
      Node node("Pad", 13);
      node.Attr(StringAttr("mode", mode))
          .Input(RandomOf(DataType::kFloat32, c.dims, rng))
          .Const(Ints(c.pads))
          .Const(MakeTensor<float>(Shape{}, {0.5f}));
      ExpectMatches(node, fmt::format("Pad {} {} pads {}", mode, Str(c.dims), Str(c.pads)));
    }
  }
}

// ---- Where -----------------------------------------------------------------------------------

TEST(CpuWhereTest, RandomMatchesReference) {
  std::mt19937 rng(71);
  std::uniform_int_distribution<int> rank_dist(0, 5), kind(0, 3);
  // Each operand: trailing dims of the output, each kept or made 1.
  auto operand = [&](const std::vector<int64_t>& out) {
    std::vector<int64_t> d;
    const int drop = std::uniform_int_distribution<int>(0, static_cast<int>(out.size()))(rng);
    for (size_t i = static_cast<size_t>(drop); i < out.size(); ++i) {
      d.push_back(kind(rng) == 0 ? 1 : out[i]);
    }
    return d;
  };
  for (int iter = 0; iter < 400; ++iter) {
    const std::vector<int64_t> out = RandomDims(rank_dist(rng), rng, 6);
    const std::vector<int64_t> c = operand(out), a = operand(out), b = operand(out);
    const DataType dtype = kTypes[static_cast<size_t>(iter) % kTypes.size()];
    Node node("Where", 16);
    node.Input(RandomOf(DataType::kBool, c, rng))
        .Input(RandomOf(dtype, a, rng))
        .Input(RandomOf(dtype, b, rng));
    ExpectMatches(
        node, fmt::format("Where {} c {} a {} b {}", DataTypeName(dtype), Str(c), Str(a), Str(b)));
  }
  // Large: same shape, a scalar operand, a row mask.
  const std::vector<std::vector<std::vector<int64_t>>> large = {
      {{16, 128, 384}, {16, 128, 384}, {16, 128, 384}},
      {{8, 1, 128, 128}, {8, 12, 128, 128}, {}},
      {{128}, {}, {8192, 128}},
      {{3, 1}, {1, 200003}, {3, 200003}},  // chunks that start mid-row
  };
  for (const auto& shapes : large) {
    Node node("Where", 9);
    node.Input(RandomOf(DataType::kBool, shapes[0], rng))
        .Input(RandomOf(DataType::kFloat32, shapes[1], rng))
        .Input(RandomOf(DataType::kFloat32, shapes[2], rng));
    ExpectMatches(
        node, fmt::format("Where c {} a {} b {}", Str(shapes[0]), Str(shapes[1]), Str(shapes[2])));
  }
}

// ---- Cast ------------------------------------------------------------------------------------

const std::vector<DataType> kCastTypes = {
    DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
    DataType::kBFloat16, DataType::kInt8,    DataType::kUint8,
    DataType::kInt32,    DataType::kInt64,   DataType::kBool};

int OnnxNumber(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 1;
    case DataType::kUint8:
      return 2;
    case DataType::kInt8:
      return 3;
    case DataType::kInt32:
      return 6;
    case DataType::kInt64:
      return 7;
    case DataType::kBool:
      return 9;
    case DataType::kFloat16:
      return 10;
    case DataType::kFloat64:
      return 11;
    case DataType::kBFloat16:
      return 16;
    default:
      return 0;
  }
}

// Values that stress the conversions: signed zeros, halves (rounding), NaNs (quiet and
// signalling, both signs), infinities, denormals, the edges of the FLOAT16 and integer ranges and
// beyond, then random values over many magnitudes; 600000 in all (blocks and parallel chunks;
// every 16-bit pattern for the FLOAT16 / BFLOAT16 sources).
std::vector<double> SpecialValues(std::mt19937& rng) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0,
                           -0.0,
                           0.5,
                           1.5,
                           -2.5,
                           2.5,
                           -0.5,
                           0.49999997,
                           -1.0,
                           127.9,
                           -128.7,
                           255.5,
                           256.0,
                           -129.0,
                           65504.0,
                           65519.0,
                           65520.0,
                           70000.0,
                           -70000.0,
                           5.96e-8,
                           2.98e-8,
                           2.9802322387695312e-08,
                           1e-40,
                           1e-45,
                           -1e-40,
                           1e-310,
                           2147483647.0,
                           2147483648.0,
                           -2147483648.0,
                           -2147483904.0,
                           3e9,
                           -3e9,
                           4294967296.0,
                           9.2e18,
                           9.3e18,
                           -9.3e18,
                           1.9e19,
                           1e30,
                           -1e30,
                           3.5e38,
                           1e300,
                           inf,
                           -inf,
                           nan,
                           -nan,
                           1.00048828125,
                           1.000732421875,
                           0.1,
                           1e-8};
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> exp(-30, 70);
  while (v.size() < 600000) v.push_back(std::ldexp(mant(rng), exp(rng)));
  return v;
}

// A tensor of `dtype` holding `values` converted by C++ rules (only to fill inputs; the values
// the kernels see are whatever this produces).
OwnedTensor FromValues(DataType dtype, const std::vector<double>& values, std::mt19937& rng) {
  const std::vector<int64_t> dims = {static_cast<int64_t>(values.size())};
  switch (dtype) {
    case DataType::kFloat32: {
      std::vector<float> f(values.begin(), values.end());
      // A signalling NaN of each sign.
      uint32_t snan = 0x7f800001u, nsnan = 0xff800123u;
      std::memcpy(&f[3], &snan, 4);
      std::memcpy(&f[4], &nsnan, 4);
      return MakeTensor<float>(S(dims), f);
    }
    case DataType::kFloat64:
      return MakeTensor<double>(S(dims), values);
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      // Every 16-bit pattern (all NaN payloads, denormals, both zeros), then random ones.
      OwnedTensor t = RandomOf(dtype, dims, rng);
      auto* p = static_cast<uint16_t*>(t.raw_data());
      for (size_t i = 0; i < values.size() && i < 65536; ++i) p[i] = static_cast<uint16_t>(i);
      return t;
    }
    case DataType::kBool:
      return RandomOf(dtype, dims, rng);
    default: {
      // Integers: random bit patterns with the extremes at the front.
      OwnedTensor t = RandomOf(dtype, dims, rng);
      const size_t elem = DataTypeSize(dtype);
      auto* p = static_cast<uint8_t*>(t.raw_data());
      for (size_t i = 0; i < 8; ++i) {
        const uint64_t edge = i % 4 == 0   ? 0
                              : i % 4 == 1 ? ~uint64_t{0}
                              : i % 4 == 2 ? uint64_t{1} << (8 * elem - 1)
                                           : (uint64_t{1} << (8 * elem - 1)) - 1;
        std::memcpy(p + i * elem, &edge, elem);
      }
      // Small values too (the random patterns are mostly huge).
      for (size_t i = 8; i < 1000; ++i) {
        const int64_t s = static_cast<int64_t>(i) - 500;
        std::memcpy(p + i * elem, &s, elem);
      }
      return t;
    }
  }
}

TEST(CpuCastTest, EveryPairMatchesReferenceAtEveryIsa) {
  std::mt19937 rng(81);
  const std::vector<double> values = SpecialValues(rng);
  std::vector<OwnedTensor> inputs;
  for (DataType from : kCastTypes) inputs.push_back(FromValues(from, values, rng));
  for (Isa cap : IsaLevels()) {
    ScopedMaxIsa scoped(cap);
    for (size_t f = 0; f < kCastTypes.size(); ++f) {
      const DataType from = kCastTypes[f];
      for (DataType to : kCastTypes) {
        // Only the 16-bit float conversions dispatch on the ISA; the rest run at the top level.
        const bool half = from == DataType::kFloat16 || from == DataType::kBFloat16 ||
                          to == DataType::kFloat16 || to == DataType::kBFloat16;
        if (!half && cap != IsaLevels().back()) continue;
        Node node("Cast", 13);
        node.Attr(IntAttr("to", OnnxNumber(to))).Input(inputs[f]);
        ExpectMatches(node, fmt::format("Cast {} -> {} at {}", DataTypeName(from), DataTypeName(to),
                                        IsaName(cap)));
      }
    }
  }
}

TEST(CpuCastTest, ShapesAndOpsets) {
  std::mt19937 rng(82);
  // Small and odd sizes (the F16C loop's tail), an empty tensor, a scalar, opset 9.
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{}, {0}, {1}, {7}, {9}, {3, 0, 2}, {2, 3, 5}}) {
    for (auto [from, to] :
         std::vector<std::pair<DataType, DataType>>{{DataType::kFloat32, DataType::kFloat16},
                                                    {DataType::kFloat16, DataType::kFloat32},
                                                    {DataType::kInt64, DataType::kFloat32},
                                                    {DataType::kFloat32, DataType::kInt64},
                                                    {DataType::kBool, DataType::kFloat32}}) {
      Node node("Cast", 9);
      node.Attr(IntAttr("to", OnnxNumber(to))).Input(RandomOf(from, dims, rng));
      ExpectMatches(
          node, fmt::format("Cast {} {} -> {}", Str(dims), DataTypeName(from), DataTypeName(to)));
    }
  }
}

TEST(CpuCastTest, OtherTargetsRunOnTheReference) {
  // FLOAT -> UINT16 and -> STRING are outside the fast set: the cpu kernel hands them over.
  std::mt19937 rng(83);
  for (DataType to : {DataType::kUint16, DataType::kBytes}) {
    Node node("Cast", 13);
    node.Attr(IntAttr("to", to == DataType::kUint16 ? 4 : 8))
        .Input(MakeTensor<float>(Shape{4}, {1.5f, -2.0f, 70000.0f, 0.25f}));
    Result<std::unique_ptr<Kernel>> cpu = node.Build("cpu");
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    Result<std::vector<OwnedTensor>> got = node.Execute(**cpu);
    Result<std::vector<OwnedTensor>> want = node.Run("ref");
    ASSERT_TRUE(got.ok() && want.ok());
    if (to == DataType::kUint16) {
      ExpectSameBytes(got->at(0), want->at(0), "Cast FLOAT -> UINT16");
    } else {
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(got->at(0).data<const std::string>()[i],
                  want->at(0).data<const std::string>()[i]);
      }
    }
    EXPECT_EQ((*cpu)->Implementation(), "kiln ref");
  }
}

// ---- Fallbacks and errors --------------------------------------------------------------------

TEST(CpuDataMovementTest, BytesRunOnTheReference) {
  const OwnedTensor a = MakeTensor<std::string>(Shape{2}, {"a", "bc"});
  const OwnedTensor b = MakeTensor<std::string>(Shape{1}, {"def"});
  // Declared BYTES: the registry picks the reference kernel.
  Node declared("Concat", 13);
  declared.Attr(IntAttr("axis", 0)).Input(a).Input(b);
  EXPECT_EQ(declared.Picked(), "ref");
  // Undeclared dtype: the cpu kernel is picked and hands the strings to its reference kernel.
  Node unknown("Concat", 13);
  unknown.Attr(IntAttr("axis", 0)).Input(a, DataType::kInvalid).Input(b, DataType::kInvalid);
  EXPECT_EQ(unknown.Picked(), "cpu");
  Result<std::unique_ptr<Kernel>> k = unknown.Build("cpu");
  ASSERT_TRUE(k.ok());
  Result<std::vector<OwnedTensor>> out = unknown.Execute(**k);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::string* s = out->at(0).data<const std::string>();
  EXPECT_EQ(std::vector<std::string>(s, s + 3), (std::vector<std::string>{"a", "bc", "def"}));
  EXPECT_EQ((*k)->Implementation(), "kiln ref");
}

TEST(CpuDataMovementTest, ErrorsAreTheReferences) {
  std::mt19937 rng(91);
  const OwnedTensor x = RandomOf(DataType::kFloat32, {2, 3, 4}, rng);
  std::vector<std::pair<std::string, Node>> cases;
  // Out-of-range and repeated axes, a zero step.
  cases.emplace_back("Slice axis 3", Node("Slice", 13));
  cases.back().second.Input(x).Input(Ints({0})).Input(Ints({1})).Input(Ints({3}));
  cases.emplace_back("Slice axis -4", Node("Slice", 13));
  cases.back().second.Input(x).Input(Ints({0})).Input(Ints({1})).Input(Ints({-4}));
  cases.emplace_back("Slice repeated axis", Node("Slice", 13));
  cases.back().second.Input(x).Input(Ints({0, 0})).Input(Ints({1, 1})).Input(Ints({1, -2}));
  cases.emplace_back("Slice step 0", Node("Slice", 13));
  cases.back().second.Input(x).Input(Ints({0})).Input(Ints({1})).Input(Ints({0})).Input(Ints({0}));
  cases.emplace_back("Slice float starts", Node("Slice", 13));
  cases.back().second.Input(x).Input(MakeTensor<float>(Shape{1}, {0.f})).Input(Ints({1}));
  cases.emplace_back("Concat axis 3", Node("Concat", 13));
  cases.back().second.Attr(IntAttr("axis", 3)).Input(x).Input(x);
  cases.emplace_back("Concat mismatched dims", Node("Concat", 13));
  cases.back()
      .second.Attr(IntAttr("axis", 0))
      .Input(x)
      .Input(RandomOf(DataType::kFloat32, {2, 4, 4}, rng));
  cases.emplace_back("Concat mismatched dtypes", Node("Concat", 13));
  cases.back()
      .second.Attr(IntAttr("axis", 0))
      .Input(x)
      .Input(RandomOf(DataType::kInt32, {2, 3, 4}, rng));
  cases.emplace_back("Split axis -4", Node("Split", 13));
  cases.back().second.Attr(IntAttr("axis", -4)).Outputs(2).Input(x);
  cases.emplace_back("Split sizes", Node("Split", 13));
  cases.back().second.Attr(IntAttr("axis", 1)).Outputs(2).Input(x).Input(Ints({1, 1}));
  cases.emplace_back("Split unequal", Node("Split", 13));
  cases.back().second.Attr(IntAttr("axis", 2)).Outputs(3).Input(x);
  cases.emplace_back("Expand", Node("Expand", 13));
  cases.back().second.Input(x).Input(Ints({5, 4}));
  cases.emplace_back("Expand negative", Node("Expand", 13));
  cases.back().second.Input(x).Input(Ints({-1, 4}));
  cases.emplace_back("Tile rank", Node("Tile", 13));
  cases.back().second.Input(x).Input(Ints({1, 2}));
  cases.emplace_back("Tile negative", Node("Tile", 13));
  cases.back().second.Input(x).Input(Ints({1, -2, 1}));
  cases.emplace_back("Pad too negative", Node("Pad", 13));
  cases.back().second.Input(x).Input(Ints({0, -3, 0, 0, -1, 0}));
  cases.emplace_back("Pad count", Node("Pad", 13));
  cases.back().second.Input(x).Input(Ints({0, 1, 0, 0}));
  cases.emplace_back("Pad value dtype", Node("Pad", 13));
  cases.back()
      .second.Input(x)
      .Input(Ints({0, 1, 0, 0, 1, 0}))
      .Input(MakeTensor<double>(Shape{}, {1.0}));
  cases.emplace_back("Pad reflect empty", Node("Pad", 13));
  cases.back()
      .second.Attr(StringAttr("mode", "reflect"))
      .Input(RandomOf(DataType::kFloat32, {2, 0}, rng))
      .Input(Ints({0, 1, 0, 1}));
  cases.emplace_back("Where shapes", Node("Where", 16));
  cases.back().second.Input(RandomOf(DataType::kBool, {3}, rng)).Input(x).Input(x);
  cases.emplace_back("Where dtypes", Node("Where", 16));
  cases.back()
      .second.Input(RandomOf(DataType::kBool, {4}, rng))
      .Input(x)
      .Input(RandomOf(DataType::kFloat64, {2, 3, 4}, rng));
  for (const auto& [what, node] : cases) {
    Result<std::vector<OwnedTensor>> ref = node.Run("ref");
    Result<std::vector<OwnedTensor>> cpu = node.Run("cpu");
    ASSERT_FALSE(ref.ok()) << what;
    ASSERT_FALSE(cpu.ok()) << what;
    EXPECT_EQ(cpu.status().code(), ref.status().code()) << what;
    EXPECT_EQ(cpu.status().ToString(), ref.status().ToString()) << what;
  }
}

TEST(CpuDataMovementTest, ConcurrentRunsAgree) {
  // Compute is const: four threads share one kernel of each parallel path.
  std::mt19937 rng(92);
  Node node("Pad", 13);
  node.Attr(StringAttr("mode", "reflect"))
      .Input(RandomOf(DataType::kFloat32, {1, 128, 64, 64}, rng))
      .Const(Ints({0, 0, 2, 2, 0, 0, 2, 2}));
  Result<std::vector<OwnedTensor>> want = node.Run("ref");
  ASSERT_TRUE(want.ok());
  Result<std::unique_ptr<Kernel>> k = node.Build("cpu");
  ASSERT_TRUE(k.ok());
  std::vector<std::thread> threads;
  std::vector<OwnedTensor> got(4);
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      Result<std::vector<OwnedTensor>> r = node.Execute(**k);
      if (r.ok()) got[t] = r->at(0);
    });
  }
  for (std::thread& th : threads) th.join();
  for (const OwnedTensor& g : got) ExpectSameBytes(g, want->at(0), "concurrent Pad");
  EXPECT_EQ((*k)->Implementation(), "");
}

}  // namespace
}  // namespace kiln::cpu
