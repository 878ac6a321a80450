// SPDX-License-Identifier: Apache-2.0
// The index ops of index_ops.cc against the reference kernels, byte for byte: Gather on every
// axis, GatherND with batch_dims, ScatterElements and ScatterND (duplicate indices, reductions
// none / add / mul, sizes that take the parallel paths), TopK (ties, NaN, signed zeros, k = 1 and
// k = axis length, every axis, FLOAT and INT64, both outputs), over many dtypes, INT32 and INT64
// indices, negative indices; out-of-range indices and bad shapes must report the reference's
// error.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/cpu/cpu_test_util.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

// One node with every input fed and `outputs` outputs, run by a chosen provider's kernel with
// the poisoned allocator (so unwritten output elements show).
class Case {
 public:
  Case(std::string op, int64_t opset) : test_(op, opset), op_(std::move(op)) {}
  Case& Attr(Attribute a) {
    test_.Attr(std::move(a));
    return *this;
  }
  Case& Input(OwnedTensor t, std::optional<DataType> declared = std::nullopt) {
    feeds_.push_back(t);
    test_.Input(std::move(t), declared);
    return *this;
  }
  Case& Outputs(int n) {
    test_.Outputs(std::vector<bool>(static_cast<size_t>(n), true));
    return *this;
  }

  std::string PickedProvider() const {
    const NodeDesc desc = test_.Describe();
    const KernelInfo info(desc);
    Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCpu);
    return def.ok() ? std::string((*def)->provider) : "error: " + def.status().ToString();
  }

  Result<std::vector<OwnedTensor>> TryRun(std::string_view provider) const {
    const NodeDesc node = test_.Describe();
    const KernelInfo info(node);
    const KernelDef* found = nullptr;
    for (const KernelDef& def : KernelRegistry::Global().defs()) {
      if (def.provider != provider || def.op_type != op_ || !def.domain.empty()) continue;
      if (node.opset < def.since_version || node.opset > def.end_version) continue;
      const DataType dt = info.input_type(def.type_input).dtype;
      if (dt != DataType::kInvalid && !(def.types & TypeBit(dt))) continue;
      found = &def;
    }
    if (found == nullptr) return Status::NotFound(fmt::format("no {} kernel", provider));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, found->create(info));
    std::vector<Tensor> inputs;
    for (const OwnedTensor& t : feeds_) inputs.push_back(t.view());
    std::vector<OwnedTensor> outputs(node.outputs.size());
    KernelContext ctx(inputs, outputs, PoisonedHostAllocator());
    KILN_RETURN_IF_ERROR(kernel->Compute(ctx));
    return outputs;
  }

  // Runs both providers and expects identical outputs (dtype, shape and bytes), or the same
  // error.
  void ExpectSameAsReference(const std::string& what, bool expect_cpu = true) const {
    if (expect_cpu) {
      EXPECT_EQ(PickedProvider(), "cpu") << what;
    }
    Result<std::vector<OwnedTensor>> got = TryRun("cpu");
    Result<std::vector<OwnedTensor>> want = TryRun("ref");
    ASSERT_EQ(got.ok(), want.ok())
        << what << ": cpu " << got.status().ToString() << ", ref " << want.status().ToString();
    if (!want.ok()) {
      EXPECT_EQ(got.status().ToString(), want.status().ToString()) << what;
      return;
    }
    ASSERT_EQ(got->size(), want->size()) << what;
    for (size_t o = 0; o < want->size(); ++o) {
      const OwnedTensor& g = (*got)[o];
      const OwnedTensor& w = (*want)[o];
      ASSERT_TRUE(g.valid() && w.valid()) << what << ": output " << o;
      ASSERT_EQ(g.dtype(), w.dtype()) << what << ": output " << o;
      ASSERT_EQ(g.shape(), w.shape()) << what << ": output " << o << " " << g.shape().ToString()
                                      << " vs " << w.shape().ToString();
      const size_t elem = DataTypeSize(w.dtype());
      const auto* gb = static_cast<const unsigned char*>(g.raw_data());
      const auto* wb = static_cast<const unsigned char*>(w.raw_data());
      for (int64_t i = 0; i < w.num_elements(); ++i) {
        if (std::memcmp(gb + static_cast<size_t>(i) * elem, wb + static_cast<size_t>(i) * elem,
                        elem) != 0) {
          ADD_FAILURE() << what << ": output " << o << " differs at element " << i;
          break;
        }
      }
    }
  }

 private:
  ref::testing::OpTest test_;
  std::string op_;
  std::vector<OwnedTensor> feeds_;
};

// Random contents of any fixed-width dtype: random bytes (BOOL: 0 or 1).
OwnedTensor RandomOf(DataType dt, const Shape& shape, std::mt19937& rng) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(dt, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  auto* p = static_cast<unsigned char*>(t->raw_data());
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < t->size_bytes(); ++i) {
    p[i] = static_cast<unsigned char>(dt == DataType::kBool ? byte(rng) & 1 : byte(rng));
  }
  return std::move(t).value();
}

// Indices in [lo, hi] as INT64 or INT32.
OwnedTensor Indices(const Shape& shape, int64_t lo, int64_t hi, bool i64, std::mt19937& rng) {
  std::vector<int64_t> v = ref::testing::RandomValues<int64_t>(
      shape.NumElements(), rng, static_cast<double>(lo), static_cast<double>(hi));
  if (i64) return MakeTensor<int64_t>(shape, v);
  return MakeTensor<int32_t>(shape, std::vector<int32_t>(v.begin(), v.end()));
}

const DataType kMoveTypes[] = {DataType::kFloat32, DataType::kInt64,   DataType::kUint8,
                               DataType::kFloat16, DataType::kBool,    DataType::kFloat64,
                               DataType::kInt16,   DataType::kBFloat16};

// --- Gather --------------------------------------------------------------------------------------

TEST(CpuGatherTest, EveryAxisDtypeAndIndexShape) {
  std::mt19937 rng(2);
  const std::vector<std::vector<int64_t>> data_shapes = {{1},       {7},          {30, 17},
                                                         {4, 5, 6}, {2, 3, 4, 5}, {3, 0, 2}};
  const std::vector<std::vector<int64_t>> index_shapes = {{}, {6}, {2, 3}, {0}};
  int n = 0;
  for (const auto& ds : data_shapes) {
    const int64_t rank = static_cast<int64_t>(ds.size());
    for (int64_t axis = -rank; axis < rank; ++axis) {
      const int64_t dim = ds[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
      for (const auto& is : index_shapes) {
        if (dim == 0 && S(is).NumElements() > 0) continue;
        const DataType dt = kMoveTypes[n % std::size(kMoveTypes)];
        const bool i64 = n % 3 != 0;
        ++n;
        Case c("Gather", 13);
        c.Input(RandomOf(dt, S(ds), rng)).Input(Indices(S(is), -dim, dim - 1, i64, rng));
        c.Attr(IntAttr("axis", axis));
        c.ExpectSameAsReference(fmt::format("Gather [{}] axis {} indices [{}] {} i64 {}",
                                            fmt::join(ds, ","), axis, fmt::join(is, ","),
                                            DataTypeName(dt), i64));
      }
    }
  }
}

TEST(CpuGatherTest, LargeGathersTakeTheParallelPaths) {
  std::mt19937 rng(3);
  struct G {
    std::vector<int64_t> data, indices;
    int64_t axis;
  };
  for (const G& g : std::vector<G>{{{30000, 8}, {5000}, 0},
                                   {{64, 1000}, {3, 300}, 1},
                                   {{8, 300, 64}, {500}, 1},
                                   {{50000}, {40000}, 0}}) {
    for (DataType dt : {DataType::kFloat32, DataType::kInt64, DataType::kUint8}) {
      const int64_t dim = g.data[static_cast<size_t>(g.axis)];
      Case c("Gather", 11);
      c.Input(RandomOf(dt, S(g.data), rng)).Input(Indices(S(g.indices), -dim, dim - 1, true, rng));
      c.Attr(IntAttr("axis", g.axis));
      c.ExpectSameAsReference(
          fmt::format("Gather [{}] axis {} {}", fmt::join(g.data, ","), g.axis, DataTypeName(dt)));
    }
  }
}

TEST(CpuGatherTest, ErrorsAndOtherInputsAreTheReferences) {
  std::mt19937 rng(4);
  for (int64_t bad : {4, -5, 100}) {
    Case c("Gather", 13);
    c.Input(RandomOf(DataType::kFloat32, S({4, 2}), rng))
        .Input(MakeTensor<int64_t>(S({2}), {0, bad}));
    c.ExpectSameAsReference(fmt::format("out-of-range index {}", bad));
    Result<std::vector<OwnedTensor>> r = c.TryRun("cpu");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  {
    Case c("Gather", 13);
    c.Input(RandomOf(DataType::kFloat32, S({4, 2}), rng))
        .Input(MakeTensor<int64_t>(S({1}), {1}))
        .Attr(IntAttr("axis", 2));
    c.ExpectSameAsReference("axis out of range");
  }
  {
    // BYTES data reaching the cpu kernel through an unknown declared type: the reference's.
    Case c("Gather", 13);
    c.Input(MakeTensor<std::string>(S({3}), {"a", "bb", "ccc"}), DataType::kInvalid)
        .Input(MakeTensor<int64_t>(S({2}), {2, -3}));
    Result<std::vector<OwnedTensor>> got = c.TryRun("cpu");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(ref::testing::ToVector<std::string>((*got)[0]),
              (std::vector<std::string>{"ccc", "a"}));
  }
}

// --- GatherND ------------------------------------------------------------------------------------

TEST(CpuGatherNDTest, MatchesReference) {
  std::mt19937 rng(5);
  struct G {
    std::vector<int64_t> data, indices;  // indices: leading dims + [k]
    int64_t batch_dims;
  };
  const std::vector<G> cases = {
      {{5}, {3, 1}, 0},
      {{4, 6}, {2}, 0},
      {{4, 6}, {5, 2}, 0},
      {{4, 6}, {2, 3, 1}, 0},
      {{3, 4, 5}, {7, 2}, 0},
      {{3, 4, 5}, {3}, 0},
      {{2, 4, 5}, {2, 3, 1}, 1},
      {{2, 4, 5}, {2, 2}, 1},
      {{2, 3, 4, 5}, {2, 3, 6, 1}, 2},
      {{2, 3, 4, 5}, {2, 4, 2}, 1},
      {{300, 64}, {2000, 1}, 0},
      {{4, 0, 3}, {2, 1}, 0},
  };
  int n = 0;
  for (const G& g : cases) {
    const DataType dt = kMoveTypes[n % std::size(kMoveTypes)];
    const bool i64 = n % 2 == 0;
    ++n;
    // Index j of a tuple addresses data dim batch_dims + j: draw each in [-dim, dim).
    const int64_t k = g.indices.back();
    const int64_t count = S(g.indices).NumElements();
    std::vector<int64_t> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t dim = g.data[static_cast<size_t>(g.batch_dims + i % k)];
      v[static_cast<size_t>(i)] =
          dim == 0 ? 0 : std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng);
    }
    OwnedTensor idx =
        i64 ? MakeTensor<int64_t>(S(g.indices), v)
            : MakeTensor<int32_t>(S(g.indices), std::vector<int32_t>(v.begin(), v.end()));
    Case c("GatherND", 13);
    c.Input(RandomOf(dt, S(g.data), rng)).Input(std::move(idx));
    if (g.batch_dims != 0) c.Attr(IntAttr("batch_dims", g.batch_dims));
    c.ExpectSameAsReference(fmt::format("GatherND [{}] indices [{}] batch_dims {} {}",
                                        fmt::join(g.data, ","), fmt::join(g.indices, ","),
                                        g.batch_dims, DataTypeName(dt)));
  }
}

TEST(CpuGatherNDTest, ErrorsAreTheReferences) {
  std::mt19937 rng(6);
  Case a("GatherND", 13);
  a.Input(RandomOf(DataType::kFloat32, S({4, 6}), rng))
      .Input(MakeTensor<int64_t>(S({2, 2}), {0, 1, 4, 0}));
  a.ExpectSameAsReference("index out of range");
  Case b("GatherND", 13);
  b.Input(RandomOf(DataType::kFloat32, S({4, 6}), rng))
      .Input(MakeTensor<int64_t>(S({1, 3}), {0, 1, 1}));
  b.ExpectSameAsReference("tuple longer than the rank");
  Case d("GatherND", 13);
  d.Input(RandomOf(DataType::kFloat32, S({2, 6}), rng))
      .Input(MakeTensor<int64_t>(S({3, 1}), {0, 1, 1}))
      .Attr(IntAttr("batch_dims", 1));
  d.ExpectSameAsReference("batch dims differ");
}

// --- ScatterElements -----------------------------------------------------------------------------

// Typed random values for the reductions (floats in [-2, 2], integers across their range).
OwnedTensor Values(DataType dt, const Shape& shape, std::mt19937& rng) {
  const int64_t n = shape.NumElements();
  switch (dt) {
    case DataType::kFloat32:
      return MakeTensor<float>(shape, ref::testing::RandomValues<float>(n, rng, -2, 2));
    case DataType::kFloat64:
      return MakeTensor<double>(shape, ref::testing::RandomValues<double>(n, rng, -2, 2));
    case DataType::kInt8:
      return MakeTensor<int8_t>(shape, ref::testing::RandomValues<int8_t>(n, rng, -128, 127));
    case DataType::kInt32:
      return MakeTensor<int32_t>(shape, ref::testing::RandomValues<int32_t>(n, rng, -3e9, 3e9));
    case DataType::kInt64:
      return MakeTensor<int64_t>(shape, ref::testing::RandomValues<int64_t>(n, rng, -1e18, 1e18));
    case DataType::kUint16:
      return MakeTensor<uint16_t>(shape, ref::testing::RandomValues<uint16_t>(n, rng, 0, 65535));
    default:
      return RandomOf(dt, shape, rng);
  }
}

TEST(CpuScatterElementsTest, MatchesReferenceWithDuplicatesAndReductions) {
  std::mt19937 rng(7);
  struct Sc {
    std::vector<int64_t> data, indices;
  };
  const std::vector<Sc> shapes = {
      {{5}, {3}},
      {{5}, {9}},
      {{4, 6}, {4, 6}},
      {{4, 6}, {2, 3}},
      {{4, 6}, {7, 2}},
      {{3, 4, 5}, {2, 4, 3}},
      {{2, 3, 4, 5}, {2, 2, 4, 3}},
      {{3, 4}, {0, 4}},
  };
  const DataType reduce_types[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt8,
                                   DataType::kInt32,   DataType::kInt64,   DataType::kUint16,
                                   DataType::kFloat16, DataType::kBool};
  int n = 0;
  for (const Sc& sc : shapes) {
    const int64_t rank = static_cast<int64_t>(sc.data.size());
    for (int64_t axis = -rank; axis < rank; ++axis) {
      const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
      // The indices may be longer than data along `axis` (duplicates), not elsewhere.
      bool fits = true;
      for (size_t d = 0; d < sc.data.size(); ++d) {
        if (d != a && sc.indices[d] > sc.data[d]) fits = false;
      }
      if (!fits) continue;
      const int64_t dim = sc.data[a];
      for (const char* reduction : {"none", "add", "mul", ""}) {
        const DataType dt = reduce_types[n % std::size(reduce_types)];
        const bool i64 = n % 3 != 1;
        ++n;
        if (dt == DataType::kBool && std::string(reduction) != "none" &&
            std::string(reduction) != "") {
          continue;  // reductions are not defined on BOOL
        }
        Case c(n % 5 == 0 && reduction[0] == '\0' ? "Scatter" : "ScatterElements",
               reduction[0] == '\0' ? 11 : 16);
        c.Input(Values(dt, S(sc.data), rng))
            .Input(Indices(S(sc.indices), -dim, dim - 1, i64, rng))
            .Input(Values(dt, S(sc.indices), rng))
            .Attr(IntAttr("axis", axis));
        if (reduction[0] != '\0') c.Attr(StringAttr("reduction", reduction));
        c.ExpectSameAsReference(fmt::format("ScatterElements [{}] indices [{}] axis {} {} {}",
                                            fmt::join(sc.data, ","), fmt::join(sc.indices, ","),
                                            axis, reduction, DataTypeName(dt)));
      }
    }
  }
}

TEST(CpuScatterElementsTest, LargeScattersTakeTheParallelPaths) {
  std::mt19937 rng(8);
  struct Sc {
    std::vector<int64_t> data, indices;
    int64_t axis;
  };
  for (const Sc& sc : std::vector<Sc>{{{64, 1000}, {64, 800}, 1},
                                      {{1000, 64}, {900, 64}, 0},
                                      {{3, 50, 400}, {3, 60, 400}, 1},
                                      {{40000}, {60000}, 0}}) {
    for (const char* reduction : {"none", "add"}) {
      const int64_t dim = sc.data[static_cast<size_t>(sc.axis)];
      Case c("ScatterElements", 16);
      // Few distinct targets along the axis: many duplicates.
      c.Input(Values(DataType::kFloat32, S(sc.data), rng))
          .Input(Indices(S(sc.indices), -dim, std::min<int64_t>(dim - 1, 5 - dim), true, rng))
          .Input(Values(DataType::kFloat32, S(sc.indices), rng))
          .Attr(IntAttr("axis", sc.axis))
          .Attr(StringAttr("reduction", reduction));
      c.ExpectSameAsReference(fmt::format("ScatterElements [{}] axis {} {}",
                                          fmt::join(sc.data, ","), sc.axis, reduction));
    }
  }
}

TEST(CpuScatterElementsTest, ErrorsAreTheReferences) {
  std::mt19937 rng(9);
  Case a("ScatterElements", 13);
  a.Input(Values(DataType::kFloat32, S({4, 3}), rng))
      .Input(MakeTensor<int64_t>(S({1, 2}), {1, 4}))
      .Input(Values(DataType::kFloat32, S({1, 2}), rng));
  a.ExpectSameAsReference("index out of range");
  Case b("ScatterElements", 13);
  b.Input(Values(DataType::kFloat32, S({4, 3}), rng))
      .Input(MakeTensor<int64_t>(S({1, 2}), {1, 2}))
      .Input(Values(DataType::kFloat32, S({2, 1}), rng));
  b.ExpectSameAsReference("updates shape differs");
  Case d("ScatterElements", 13);
  d.Input(Values(DataType::kFloat32, S({4, 3}), rng))
      .Input(MakeTensor<int64_t>(S({1, 4}), {1, 2, 0, 0}))
      .Input(Values(DataType::kFloat32, S({1, 4}), rng))
      .Attr(IntAttr("axis", 0));
  d.ExpectSameAsReference("indices wider than data");
}

// --- ScatterND -----------------------------------------------------------------------------------

TEST(CpuScatterNDTest, MatchesReferenceWithDuplicatesAndReductions) {
  std::mt19937 rng(10);
  struct Sc {
    std::vector<int64_t> data, indices;  // indices: leading dims + [k]
    int64_t distinct;                    // index values per dim drawn from [0, distinct)
  };
  const std::vector<Sc> cases = {
      {{10}, {4, 1}, 10},
      {{10}, {12, 1}, 3},
      {{4, 5, 6}, {3, 2}, 4},
      {{4, 5, 6}, {2, 2, 3}, 2},
      {{4, 5, 6}, {1}, 4},
      {{4, 16384}, {5, 1}, 3},
      {{100000}, {40000, 1}, 100000},
      {{50000, 2}, {30000, 1}, 1000},
      {{6, 4}, {0, 1}, 1},
  };
  const DataType types[] = {DataType::kFloat32, DataType::kInt64, DataType::kFloat64,
                            DataType::kInt8,    DataType::kUint8, DataType::kBFloat16};
  int n = 0;
  for (const Sc& sc : cases) {
    for (const char* reduction : {"none", "add", "mul", ""}) {
      const DataType dt = types[n % std::size(types)];
      const bool i64 = n % 4 != 3;
      ++n;
      const int64_t k = sc.indices.back();
      const int64_t count = S(sc.indices).NumElements();
      std::vector<int64_t> v(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        const int64_t dim = sc.data[static_cast<size_t>(i % k)];
        const int64_t x =
            std::uniform_int_distribution<int64_t>(0, std::min(dim, sc.distinct) - 1)(rng);
        v[static_cast<size_t>(i)] = (i / k) % 2 == 0 ? x : x - dim;  // some negative
      }
      std::vector<int64_t> upd_dims(sc.indices.begin(), sc.indices.end() - 1);
      upd_dims.insert(upd_dims.end(), sc.data.begin() + k, sc.data.end());
      Case c("ScatterND", reduction[0] == '\0' ? 13 : 16);
      c.Input(Values(dt, S(sc.data), rng))
          .Input(i64 ? MakeTensor<int64_t>(S(sc.indices), v)
                     : MakeTensor<int32_t>(S(sc.indices), std::vector<int32_t>(v.begin(), v.end())))
          .Input(Values(dt, S(upd_dims), rng));
      if (reduction[0] != '\0') c.Attr(StringAttr("reduction", reduction));
      c.ExpectSameAsReference(fmt::format("ScatterND [{}] indices [{}] {} {}",
                                          fmt::join(sc.data, ","), fmt::join(sc.indices, ","),
                                          reduction, DataTypeName(dt)));
    }
  }
}

TEST(CpuScatterNDTest, ErrorsAreTheReferences) {
  std::mt19937 rng(11);
  Case a("ScatterND", 13);
  a.Input(Values(DataType::kFloat32, S({4, 3}), rng))
      .Input(MakeTensor<int64_t>(S({2, 1}), {1, -5}))
      .Input(Values(DataType::kFloat32, S({2, 3}), rng));
  a.ExpectSameAsReference("index out of range");
  Case b("ScatterND", 13);
  b.Input(Values(DataType::kFloat32, S({4, 3}), rng))
      .Input(MakeTensor<int64_t>(S({2, 1}), {1, 2}))
      .Input(Values(DataType::kFloat32, S({2, 2}), rng));
  b.ExpectSameAsReference("updates shape differs");
}

// --- TopK ----------------------------------------------------------------------------------------

struct TopKCase {
  std::vector<int64_t> shape;
  int64_t axis, k;
  bool largest = true, sorted = true;
};

template <typename T>
void ExpectTopK(const TopKCase& t, std::vector<T> values, int64_t opset, const std::string& what) {
  Case c("TopK", opset);
  c.Input(MakeTensor<T>(S(t.shape), values));
  if (opset >= 10) {
    c.Input(MakeTensor<int64_t>(S({1}), {t.k}));
  } else {
    c.Attr(IntAttr("k", t.k));
  }
  c.Attr(IntAttr("axis", t.axis)).Outputs(2);
  if (opset >= 11) {
    c.Attr(IntAttr("largest", t.largest ? 1 : 0)).Attr(IntAttr("sorted", t.sorted ? 1 : 0));
  }
  c.ExpectSameAsReference(fmt::format("{} TopK [{}] axis {} k {} largest {} sorted {} opset {}",
                                      what, fmt::join(t.shape, ","), t.axis, t.k, t.largest,
                                      t.sorted, opset));
}

TEST(CpuTopKTest, FloatTiesNanSignedZerosEveryAxis) {
  std::mt19937 rng(12);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<TopKCase> cases = {
      {{17}, 0, 1},         {{17}, -1, 17},      {{3, 17}, 1, 5},     {{3, 17}, 0, 2},
      {{4, 50, 3}, 1, 10},  {{4, 50, 3}, -3, 4}, {{2, 3, 40}, 2, 40}, {{1, 20000}, 1, 1000},
      {{1, 3000}, -1, 300}, {{64, 200}, 1, 7},   {{5, 1}, 1, 1},
  };
  for (const TopKCase& base : cases) {
    for (int variant = 0; variant < 4; ++variant) {
      TopKCase t = base;
      t.largest = variant % 2 == 0;
      t.sorted = variant != 3;
      const int64_t n = S(t.shape).NumElements();
      // Values on a coarse grid (many ties), with NaN, infinities and both zeros sprinkled in.
      std::vector<float> v(static_cast<size_t>(n));
      std::uniform_int_distribution<int> q(-8, 8), pick(0, 19);
      for (float& x : v) {
        x = static_cast<float>(q(rng)) / 4;
        switch (pick(rng)) {
          case 0:
            x = nan;
            break;
          case 1:
            x = -nan;
            break;
          case 2:
            x = inf;
            break;
          case 3:
            x = -inf;
            break;
          case 4:
            x = -0.0f;
            break;
          case 5:
            x = 0.0f;
            break;
          default:
            break;
        }
      }
      ExpectTopK<float>(t, v, 11, "FLOAT");
    }
  }
  // Every opset's form of k; distinct values.
  for (int64_t opset : {9, 10, 13}) {
    TopKCase t{{6, 33}, 1, 4};
    ExpectTopK<float>(t, ref::testing::RandomValues<float>(6 * 33, rng), opset, "opsets");
  }
}

TEST(CpuTopKTest, Int64) {
  std::mt19937 rng(13);
  for (const TopKCase& base : std::vector<TopKCase>{
           {{40}, 0, 40}, {{3, 100}, 1, 9}, {{5, 6, 7}, 1, 1}, {{1, 5000}, 1, 500}}) {
    for (bool largest : {true, false}) {
      TopKCase t = base;
      t.largest = largest;
      const int64_t n = S(t.shape).NumElements();
      std::vector<int64_t> v = ref::testing::RandomValues<int64_t>(n, rng, -5, 5);
      if (!v.empty()) v[0] = std::numeric_limits<int64_t>::min();
      if (v.size() > 1) v[1] = std::numeric_limits<int64_t>::max();
      ExpectTopK<int64_t>(t, v, 11, "INT64");
    }
  }
}

TEST(CpuTopKTest, OnlyTheValuesOutputAndErrors) {
  std::mt19937 rng(14);
  Case a("TopK", 11);
  a.Input(RandomTensor(S({4, 9}), rng)).Input(MakeTensor<int64_t>(S({1}), {3}));
  a.ExpectSameAsReference("values only");
  Case b("TopK", 11);
  b.Input(RandomTensor(S({4, 9}), rng)).Input(MakeTensor<int64_t>(S({1}), {10})).Outputs(2);
  b.ExpectSameAsReference("k above the axis length");
  Case d("TopK", 11);
  d.Input(RandomTensor(S({4, 9}), rng)).Input(MakeTensor<int64_t>(S({1}), {0})).Outputs(2);
  d.ExpectSameAsReference("k = 0");
  Case e("TopK", 11);
  e.Input(RandomTensor(S({4, 9}), rng)).Input(MakeTensor<int64_t>(S({1}), {-1})).Outputs(2);
  e.ExpectSameAsReference("negative k");
}

// --- NonZero -------------------------------------------------------------------------------------

TEST(CpuNonZeroTest, MatchesReferenceForEveryDtypeAndRank) {
  // Mostly zero elements (random bytes with 3 of 4 elements cleared), a scalar, empty tensors,
  // and FLOAT's -0 (zero) and NaN (non-zero).
  std::mt19937 rng(9);
  const std::vector<std::vector<int64_t>> shapes = {{},       {0},          {7},
                                                    {30, 17}, {2, 3, 4, 5}, {3, 0, 2}};
  for (DataType dt : kMoveTypes) {
    for (const auto& shape : shapes) {
      OwnedTensor x = RandomOf(dt, S(shape), rng);
      auto* bytes = static_cast<unsigned char*>(x.raw_data());
      const size_t size = DataTypeSize(dt);
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        if (rng() % 4 != 0) std::memset(bytes + static_cast<size_t>(i) * size, 0, size);
      }
      Case c("NonZero", 13);
      c.Input(std::move(x));
      c.ExpectSameAsReference(
          fmt::format("NonZero [{}] {}", fmt::join(shape, ","), DataTypeName(dt)));
    }
  }
  Case f("NonZero", 13);
  f.Input(MakeTensor<float>(S({2, 3}), {0.0f, -0.0f, std::nanf(""), 1.0f, 0.0f, -2.0f}));
  f.ExpectSameAsReference("NonZero -0 and NaN");
}

}  // namespace
}  // namespace kiln::cpu
