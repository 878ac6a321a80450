// SPDX-License-Identifier: Apache-2.0
// The harness's cases (test_cases.h) for the elementwise CUDA kernels (elementwise.cc): every row
// of ElementwiseKernelDefs in each float type it declares, and in its integer / BOOL types where
// it has them. The shapes cover both broadcast walks of elementwise.cu (equal shapes and scalars:
// the flat walk; anything else: the strided one), odd sizes, size-1 and zero-size dims, and
// inputs of 70,000 elements and more (the grid-stride loops). Names read "<op> o<opset>
// <variant> <dtype>".

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/test_cases.h"

namespace kiln::cuda::testing {
namespace {

using ref::testing::FloatAttr;
using ref::testing::FloatsAttr;
using ref::testing::IntAttr;
using ref::testing::MakeTensor;
using ref::testing::RandomValues;
using ref::testing::StringAttr;

constexpr DataType kF32 = DataType::kFloat32;
constexpr DataType kF16 = DataType::kFloat16;
constexpr DataType kBF16 = DataType::kBFloat16;
constexpr DataType kF64 = DataType::kFloat64;
constexpr DataType kI32 = DataType::kInt32;
constexpr DataType kI64 = DataType::kInt64;
constexpr DataType kI8 = DataType::kInt8;
constexpr DataType kU8 = DataType::kUint8;
constexpr DataType kBool = DataType::kBool;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using Types = std::vector<DataType>;
const Types kOld = {kF32, kF16};  // the float types before an op takes BF16
const Types kFloats = {kF32, kF16, kBF16};
const Types kOldInts = {kF32, kF16, kI32, kI64};
const Types kNumeric = {kF32, kF16, kBF16, kI32, kI64};

std::string Suffix(DataType t) {
  switch (t) {
    case kF32:
      return "f32";
    case kF16:
      return "f16";
    case kBF16:
      return "bf16";
    case kF64:
      return "f64";
    case kI32:
      return "i32";
    case kI64:
      return "i64";
    case kI8:
      return "i8";
    case kU8:
      return "u8";
    case kBool:
      return "bool";
    default:
      return "other";
  }
}

bool IsFloat(DataType t) { return t == kF32 || t == kF16 || t == kBF16; }

OwnedTensor Bools(const Shape& shape, std::mt19937& rng) {
  std::bernoulli_distribution coin(0.5);
  std::vector<bool> v(static_cast<size_t>(shape.NumElements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = coin(rng);
  return MakeTensor<bool>(shape, v);
}

// An operand of type t: FP32 values in [lo, hi) for the float types (the harness rounds them to
// FP16 / BF16), integers in [ilo, ihi] otherwise, random BOOLs.
OwnedTensor Values(DataType t, const Shape& shape, std::mt19937& rng, double lo = -2.0,
                   double hi = 2.0, int64_t ilo = -100, int64_t ihi = 100) {
  switch (t) {
    case kI32:
      return RandomInts<int32_t>(shape, rng, ilo, ihi);
    case kI64:
      return RandomInts<int64_t>(shape, rng, ilo, ihi);
    case kI8:
      return RandomInts<int8_t>(shape, rng, std::max<int64_t>(ilo, -128),
                                std::min<int64_t>(ihi, 127));
    case kU8:
      return RandomInts<uint8_t>(shape, rng, std::max<int64_t>(ilo, 0),
                                 std::min<int64_t>(ihi, 255));
    case kBool:
      return Bools(shape, rng);
    case kF64:
      return MakeTensor<double>(shape, RandomValues<double>(shape.NumElements(), rng, lo, hi));
    default:
      return Random(shape, rng, lo, hi);
  }
}

// Integral values (as FP32 for the float types), so that comparisons meet equal elements.
OwnedTensor SmallInts(DataType t, const Shape& shape, std::mt19937& rng) {
  if (!IsFloat(t)) return Values(t, shape, rng, 0, 0, -3, 3);
  std::uniform_int_distribution<int> dist(-3, 3);
  std::vector<float> v(static_cast<size_t>(shape.NumElements()));
  for (float& x : v) x = static_cast<float>(dist(rng));
  return MakeTensor<float>(shape, v);
}

// Magnitudes in [lo, hi) with random signs (divisors, reciprocals); nonzero integers in
// [-9, 9].
OwnedTensor AwayFromZero(DataType t, const Shape& shape, std::mt19937& rng, double lo = 0.5,
                         double hi = 2.0) {
  std::bernoulli_distribution coin(0.5);
  std::uniform_int_distribution<int> digit(1, 9);
  const size_t n = static_cast<size_t>(shape.NumElements());
  if (t == kI32 || t == kI64) {
    std::vector<int64_t> v(n);
    for (int64_t& x : v) x = coin(rng) ? digit(rng) : -digit(rng);
    if (t == kI64) return MakeTensor<int64_t>(shape, v);
    return MakeTensor<int32_t>(shape, std::vector<int32_t>(v.begin(), v.end()));
  }
  std::vector<float> v = RandomValues<float>(static_cast<int64_t>(n), rng, lo, hi);
  for (float& x : v) x = coin(rng) ? x : -x;
  return MakeTensor<float>(shape, v);
}

// Multiples of 0.5 in [-5, 5]: Round's ties, Floor / Ceil / Sign on integers and zero.
OwnedTensor Halves(const Shape& shape, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-10, 10);
  std::vector<float> v(static_cast<size_t>(shape.NumElements()));
  for (float& x : v) x = 0.5f * static_cast<float>(dist(rng));
  return MakeTensor<float>(shape, v);
}

OwnedTensor ShapeInput(const std::vector<int64_t>& dims) {
  return MakeTensor<int64_t>(Shape({static_cast<int64_t>(dims.size())}), dims);
}

using Make = std::function<void(CaseInputs&, std::mt19937&, DataType)>;

class CaseList {
 public:
  // One case per type in `types`, named "<name> <type>".
  void Add(const std::string& name, const std::string& op, int64_t opset, const Types& types,
           const Make& make, double tolerance = 0.0, const std::string& domain = "") {
    for (DataType t : types) {
      CudaCase c;
      c.name = name + " " + Suffix(t);
      c.op = op;
      c.domain = domain;
      c.opset = opset;
      c.dtype = t;
      c.make = [make, t](CaseInputs& in, std::mt19937& rng) { make(in, rng, t); };
      c.tolerance = tolerance;
      cases_.push_back(std::move(c));
    }
  }
  std::vector<CudaCase> Take() { return std::move(cases_); }

 private:
  std::vector<CudaCase> cases_;
};

std::string Name(const std::string& op, int64_t opset, const std::string& variant) {
  return op + " o" + std::to_string(opset) + " " + variant;
}

// ---- Binary ops ---------------------------------------------------------------------------------

// Two operands of the given shapes: `a` for the first, `b` for the second (type t).
Make Pair(Shape sa, Shape sb, std::function<OwnedTensor(DataType, const Shape&, std::mt19937&)> a,
          std::function<OwnedTensor(DataType, const Shape&, std::mt19937&)> b) {
  return [=](CaseInputs& in, std::mt19937& rng, DataType t) {
    in.Input(a(t, sa, rng)).Input(b(t, sb, rng));
  };
}

OwnedTensor Num(DataType t, const Shape& s, std::mt19937& rng) { return Values(t, s, rng); }

// The broadcast layouts of the binary cases: name, first shape, second shape.
struct Layout {
  const char* name;
  Shape a, b;
};
const std::vector<Layout>& Layouts() {
  static const std::vector<Layout> layouts = {
      {"equal", {3, 5, 7}, {3, 5, 7}},
      {"row", {4, 33}, {33}},
      {"column", {4, 33}, {4, 1}},
      {"outer", {4, 1}, {1, 5}},
      {"scalar", {2, 3, 5}, {}},
      {"scalar first", {}, {2, 3, 5}},
      {"nchw bias", {2, 3, 4, 5}, {3, 1, 1}},
      {"size1 dims", {1, 6, 1, 5}, {6, 1, 1}},
      {"rank5", {2, 1, 3, 1, 4}, {1, 2, 3, 5, 1}},
      {"zero size", {0, 3}, {3}},
      {"large", {70001}, {70001}},
      {"large strided", {9, 7919}, {9, 1}},
  };
  return layouts;
}

void AddArithmetic(CaseList& list) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    const bool div = std::string(op) == "Div";
    auto divisor = [div](DataType t, const Shape& s, std::mt19937& rng) {
      return div ? AwayFromZero(t, s, rng) : Values(t, s, rng);
    };
    list.Add(Name(op, 7, "equal"), op, 7, kOldInts, Pair({3, 5, 7}, {3, 5, 7}, Num, divisor));
    list.Add(Name(op, 12, "row"), op, 12, kOldInts, Pair({4, 33}, {33}, Num, divisor));
    for (const Layout& l : Layouts()) {
      list.Add(Name(op, 14, l.name), op, 14, kNumeric, Pair(l.a, l.b, Num, divisor));
    }
  }
  // Integer edge cases: wrap-around, truncation toward zero, INT_MIN / -1.
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  list.Add(Name("Add", 14, "wrap"), "Add", 14, {kI32},
           [=](CaseInputs& in, std::mt19937&, DataType) {
             in.Input(MakeTensor<int32_t>({4}, {kMax32, kMin32, 5, -5}))
                 .Input(MakeTensor<int32_t>({4}, {1, -1, kMax32, kMin32}));
           });
  list.Add(Name("Mul", 14, "wrap"), "Mul", 14, {kI64},
           [=](CaseInputs& in, std::mt19937&, DataType) {
             in.Input(MakeTensor<int64_t>({4}, {kMax64, kMin64, int64_t{1} << 40, -3}))
                 .Input(MakeTensor<int64_t>({4}, {2, -1, int64_t{1} << 40, kMax64}));
           });
  list.Add(Name("Div", 14, "truncation"), "Div", 14, {kI32},
           [=](CaseInputs& in, std::mt19937&, DataType) {
             in.Input(MakeTensor<int32_t>({6}, {kMin32, -7, 7, -7, kMax32, 0}))
                 .Input(MakeTensor<int32_t>({6}, {-1, 2, -2, -2, -1, 5}));
           });
  list.Add(Name("Div", 14, "truncation"), "Div", 14, {kI64},
           [=](CaseInputs& in, std::mt19937&, DataType) {
             in.Input(MakeTensor<int64_t>({6}, {kMin64, -7, 7, -7, kMax64, 0}))
                 .Input(MakeTensor<int64_t>({6}, {-1, 2, -2, -2, -1, 5}));
           });
}

void AddPow(CaseList& list) {
  auto base = [](DataType t, const Shape& s, std::mt19937& rng) {
    return Values(t, s, rng, 0.5, 2.0);
  };
  auto exponent = [](DataType t, const Shape& s, std::mt19937& rng) {
    return Values(t, s, rng, -2.0, 3.0);
  };
  // Before 12 the exponent has the base's dtype.
  list.Add(Name("Pow", 7, "equal"), "Pow", 7, kOld, Pair({3, 5, 7}, {3, 5, 7}, base, exponent));
  list.Add(Name("Pow", 12, "row fp32 exponent"), "Pow", 12, kOld,
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Input(Values(t, {4, 9}, rng, 0.5, 2.0)).KeepInput(Random({9}, rng, -2.0, 3.0));
           });
  for (const Layout& l : Layouts()) {
    list.Add(Name("Pow", 15, l.name), "Pow", 15, kFloats, Pair(l.a, l.b, base, exponent));
  }
  list.Add(Name("Pow", 15, "fp32 exponent"), "Pow", 15, kFloats,
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Input(Values(t, {4, 9}, rng, 0.5, 2.0)).KeepInput(Random({4, 1}, rng, -2.0, 3.0));
           });
  // Integer exponents take negative bases.
  list.Add(
      Name("Pow", 15, "int32 exponent"), "Pow", 15, kFloats,
      [](CaseInputs& in, std::mt19937& rng, DataType t) {
        in.Input(Values(t, {5, 6}, rng, -2.0, 2.0)).KeepInput(RandomInts<int32_t>({6}, rng, -3, 3));
      });
  list.Add(Name("Pow", 15, "int64 scalar exponent"), "Pow", 15, kFloats,
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Input(Values(t, {2, 3, 7}, rng, -2.0, 2.0)).KeepInput(MakeTensor<int64_t>({}, {3}));
           });
}

void AddPRelu(CaseList& list) {
  list.Add(Name("PRelu", 9, "channels"), "PRelu", 9, kOld, Pair({2, 3, 4, 5}, {3, 1, 1}, Num, Num));
  list.Add(Name("PRelu", 16, "channels"), "PRelu", 16, kFloats,
           Pair({2, 3, 4, 5}, {3, 1, 1}, Num, Num));
  list.Add(Name("PRelu", 16, "last dim"), "PRelu", 16, kFloats, Pair({3, 4, 7}, {7}, Num, Num));
  list.Add(Name("PRelu", 16, "scalar slope"), "PRelu", 16, kFloats, Pair({5, 9}, {1}, Num, Num));
  list.Add(Name("PRelu", 16, "equal"), "PRelu", 16, kFloats, Pair({5, 9}, {5, 9}, Num, Num));
  list.Add(Name("PRelu", 16, "large"), "PRelu", 16, kFloats,
           Pair({2, 16, 2200}, {16, 1}, Num, Num));
}

void AddComparisons(CaseList& list) {
  const Make same = Pair({4, 9}, {4, 9}, SmallInts, SmallInts);
  const Make row = Pair({3, 5, 7}, {7}, SmallInts, SmallInts);
  const Make outer = Pair({6, 1}, {1, 5}, SmallInts, SmallInts);
  const Make scalar = Pair({2, 11}, {}, SmallInts, SmallInts);
  const Make large = Pair({7, 11000}, {7, 1}, SmallInts, SmallInts);
  list.Add(Name("Equal", 7, "equal"), "Equal", 7, {kI32, kI64, kBool}, same);
  list.Add(Name("Equal", 7, "row"), "Equal", 7, {kI32, kI64, kBool}, row);
  list.Add(Name("Equal", 11, "equal"), "Equal", 11, {kF32, kF16, kI32, kI64, kBool}, same);
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    const bool equal = std::string(op) == "Equal";
    const bool or_equal = std::string(op).find("OrEqual") != std::string::npos;
    Types latest = kNumeric;
    if (equal) latest.push_back(kBool);
    const int64_t opset = or_equal ? 16 : 13;
    list.Add(Name(op, opset, "equal"), op, opset, latest, same);
    list.Add(Name(op, opset, "row"), op, opset, latest, row);
    list.Add(Name(op, opset, "outer"), op, opset, latest, outer);
    list.Add(Name(op, opset, "scalar"), op, opset, latest, scalar);
    list.Add(Name(op, opset, "large"), op, opset, {kF32, kI64}, large);
    if (!equal) {
      if (or_equal) {
        list.Add(Name(op, 12, "row"), op, 12, kOldInts, row);
      } else {
        list.Add(Name(op, 7, "row"), op, 7, kOld, row);
        list.Add(Name(op, 9, "row"), op, 9, kOldInts, row);
      }
    }
  }
  // NaN compares false (and unequal).
  for (const char* op : {"Equal", "Less", "GreaterOrEqual"}) {
    list.Add(Name(op, 16, "nan"), op, 16, kFloats, [](CaseInputs& in, std::mt19937&, DataType) {
      in.Input(MakeTensor<float>({5}, {kNaN, 1.0f, kNaN, kInf, -kInf}))
          .Input(MakeTensor<float>({5}, {kNaN, kNaN, 2.0f, kInf, 0.0f}));
    });
  }
}

void AddLogic(CaseList& list) {
  for (const char* op : {"And", "Or", "Xor"}) {
    list.Add(Name(op, 7, "equal"), op, 7, {kBool}, Pair({5, 7}, {5, 7}, Num, Num));
    list.Add(Name(op, 7, "outer"), op, 7, {kBool}, Pair({3, 1}, {4}, Num, Num));
    list.Add(Name(op, 7, "scalar"), op, 7, {kBool}, Pair({}, {2, 9}, Num, Num));
    list.Add(Name(op, 7, "large"), op, 7, {kBool}, Pair({3, 25000}, {3, 1}, Num, Num));
  }
  list.Add(Name("Not", 7, "odd"), "Not", 7, {kBool},
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Input(Values(t, {3, 7, 11}, rng));
           });
  list.Add(
      Name("Not", 7, "large"), "Not", 7, {kBool},
      [](CaseInputs& in, std::mt19937& rng, DataType t) { in.Input(Values(t, {70001}, rng)); });
}

void AddWhere(CaseList& list) {
  const Types old = {kF32, kF16, kI32, kI64, kBool, kI8, kU8};
  const Types latest = {kF32, kF16, kBF16, kI32, kI64, kBool, kI8, kU8};
  struct WhereLayout {
    const char* name;
    Shape c, a, b;
  };
  const std::vector<WhereLayout> layouts = {
      {"equal", {4, 9}, {4, 9}, {4, 9}},
      {"three way", {3, 1}, {3, 4}, {4}},
      {"scalar values", {2, 3, 5}, {}, {}},
      {"scalar condition", {}, {5, 3}, {5, 3}},
      {"rank4", {2, 1, 4, 1}, {1, 3, 1, 5}, {2, 3, 4, 5}},
      {"zero size", {0, 4}, {4}, {1}},
      {"large", {70001}, {70001}, {1}},
      {"large strided", {9, 1}, {9, 7919}, {7919}},
  };
  for (const WhereLayout& l : layouts) {
    const Make make = [l](CaseInputs& in, std::mt19937& rng, DataType t) {
      in.Input(Bools(l.c, rng)).Input(Values(t, l.a, rng)).Input(Values(t, l.b, rng));
    };
    list.Add(Name("Where", 16, l.name), "Where", 16, latest, make);
  }
  list.Add(Name("Where", 9, "three way"), "Where", 9, old,
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Input(Bools({3, 1}, rng)).Input(Values(t, {3, 4}, rng)).Input(Values(t, {4}, rng));
           });
}

void AddVariadic(CaseList& list) {
  struct VariadicLayout {
    const char* name;
    std::vector<Shape> shapes;
  };
  const std::vector<VariadicLayout> layouts = {
      {"one input", {{3, 5, 7}}},
      {"two equal", {{3, 5, 7}, {3, 5, 7}}},
      {"two row", {{4, 33}, {33}}},
      {"three broadcast", {{3, 1, 5}, {4, 1}, {}}},
      {"three equal", {{2, 9}, {2, 9}, {2, 9}}},
      {"zero size", {{0, 3}, {3}}},
      {"large", {{70001}, {70001}, {70001}}},
      {"large strided", {{9, 7919}, {9, 1}, {7919}}},
  };
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    const bool minmax = std::string(op) == "Max" || std::string(op) == "Min";
    const Types latest = minmax ? kNumeric : kFloats;
    for (const VariadicLayout& l : layouts) {
      const Make make = [l](CaseInputs& in, std::mt19937& rng, DataType t) {
        for (const Shape& s : l.shapes) in.Input(Values(t, s, rng));
      };
      list.Add(Name(op, 13, l.name), op, 13, latest, make);
    }
    const Make equal = [](CaseInputs& in, std::mt19937& rng, DataType t) {
      in.Input(Values(t, {4, 9}, rng)).Input(Values(t, {4, 9}, rng));
    };
    const Make broadcast = [](CaseInputs& in, std::mt19937& rng, DataType t) {
      in.Input(Values(t, {4, 9}, rng)).Input(Values(t, {9}, rng)).Input(Values(t, {4, 1}, rng));
    };
    list.Add(Name(op, 7, "equal"), op, 7, kOld, equal);  // no broadcasting at 7
    list.Add(Name(op, 8, "broadcast"), op, 8, kOld, broadcast);
    if (minmax) list.Add(Name(op, 12, "broadcast"), op, 12, kOldInts, broadcast);
  }
  // NaN propagates through Max / Min (whichever side it is on).
  for (const char* op : {"Max", "Min"}) {
    list.Add(Name(op, 13, "nan"), op, 13, kFloats, [](CaseInputs& in, std::mt19937&, DataType) {
      in.Input(MakeTensor<float>({4}, {kNaN, 1.0f, -1.0f, kNaN}))
          .Input(MakeTensor<float>({4}, {0.0f, kNaN, 2.0f, kNaN}))
          .Input(MakeTensor<float>({4}, {3.0f, -3.0f, kNaN, 1.0f}));
    });
  }
}

// ---- Cast, Expand -------------------------------------------------------------------------------

// ONNX TensorProto.DataType numbers.
int64_t OnnxNumber(DataType t) {
  switch (t) {
    case kF32:
      return 1;
    case kU8:
      return 2;
    case kI8:
      return 3;
    case kI32:
      return 6;
    case kI64:
      return 7;
    case kBool:
      return 9;
    case kF16:
      return 10;
    case kF64:
      return 11;
    case kBF16:
      return 16;
    default:
      return 0;
  }
}

// A Cast source of type t: floats in [-300, 300) (fractions, and beyond INT8 / UINT8), integers
// over most of their range.
OwnedTensor CastSource(DataType t, const Shape& s, std::mt19937& rng) {
  switch (t) {
    case kI32:
    case kI64:
      return Values(t, s, rng, 0, 0, -100000, 100000);
    case kI8:
      return Values(t, s, rng, 0, 0, -128, 127);
    case kU8:
      return Values(t, s, rng, 0, 0, 0, 255);
    default:
      return Values(t, s, rng, -300.0, 300.0);
  }
}

void AddCast(CaseList& list) {
  const Types all = {kF32, kF16, kBF16, kF64, kI32, kI64, kI8, kU8, kBool};
  for (DataType to : all) {
    const Make make = [to](CaseInputs& in, std::mt19937& rng, DataType t) {
      in.Attr(IntAttr("to", OnnxNumber(to))).Input(CastSource(t, {3, 7, 5}, rng));
    };
    list.Add(Name("Cast", 13, "to " + Suffix(to)), "Cast", 13, all, make);
    if (to != kBF16) {
      list.Add(Name("Cast", 9, "to " + Suffix(to)), "Cast", 9, {kF32, kF16, kI64, kBool}, make);
    }
  }
  // Specials: NaN, infinities, values beyond INT32, ties and negative zero.
  const Make specials = [](CaseInputs& in, std::mt19937&, DataType) {
    in.Input(MakeTensor<float>(
        {12}, {kNaN, kInf, -kInf, 3e9f, -3e9f, 0.5f, -0.5f, -0.0f, 2.5f, -2.5f, 1e20f, 65519.0f}));
  };
  for (DataType to : {kI8, kU8, kI32, kI64, kBool, kF16, kBF16, kF64}) {
    list.Add(Name("Cast", 13, "specials to " + Suffix(to)), "Cast", 13, {kF32},
             [specials, to](CaseInputs& in, std::mt19937& rng, DataType t) {
               specials(in, rng, t);
               in.Attr(IntAttr("to", OnnxNumber(to)));
             });
  }
  // Wide integers to the narrow floats, where rounding through FP64 / FP32 matters.
  constexpr int64_t kBig = (int64_t{1} << 62) + (int64_t{1} << 54) + 1;
  for (DataType to : {kF32, kF16, kBF16, kF64}) {
    list.Add(Name("Cast", 13, "wide ints to " + Suffix(to)), "Cast", 13, {kI64},
             [to](CaseInputs& in, std::mt19937&, DataType) {
               in.Attr(IntAttr("to", OnnxNumber(to)))
                   .Input(MakeTensor<int64_t>(
                       {6}, {kBig, -kBig, (int64_t{1} << 53) + 1, 16777217, -16777219, 65520}));
             });
    list.Add(Name("Cast", 13, "wide ints to " + Suffix(to)), "Cast", 13, {kI32},
             [to](CaseInputs& in, std::mt19937&, DataType) {
               in.Attr(IntAttr("to", OnnxNumber(to)))
                   .Input(MakeTensor<int32_t>({5}, {16777217, -16777219, 2147483647, 65520, 2049}));
             });
  }
  list.Add(Name("Cast", 13, "large to f16"), "Cast", 13, {kF32, kBF16},
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Attr(IntAttr("to", 10)).Input(CastSource(t, {70001}, rng));
           });
  list.Add(Name("Cast", 13, "zero size to i64"), "Cast", 13, {kF32},
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Attr(IntAttr("to", 7)).Input(CastSource(t, {0, 4}, rng));
           });
}

void AddExpand(CaseList& list) {
  const Types latest = {kF32, kF16, kBF16, kI32, kI64, kBool, kI8, kU8};
  struct ExpandLayout {
    const char* name;
    Shape x;
    std::vector<int64_t> shape;
  };
  const std::vector<ExpandLayout> layouts = {
      {"column", {3, 1}, {2, 1, 4}},    {"scalar", {}, {5, 6}},
      {"both ways", {2, 1, 3}, {4, 1}}, {"shorter shape", {2, 3}, {3}},
      {"empty shape", {2, 3}, {}},      {"same", {4, 5}, {4, 5}},
      {"zero size", {0, 3}, {2, 1, 1}}, {"large", {1, 1000}, {71, 1000}},
  };
  for (const ExpandLayout& l : layouts) {
    const Make make = [l](CaseInputs& in, std::mt19937& rng, DataType t) {
      in.Input(Values(t, l.x, rng)).KeepConstInput(ShapeInput(l.shape));
    };
    list.Add(Name("Expand", 13, l.name), "Expand", 13, latest, make);
  }
  list.Add(Name("Expand", 8, "column"), "Expand", 8, {kF32, kF16, kI64},
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Input(Values(t, {3, 1}, rng)).KeepConstInput(ShapeInput({2, 3, 4}));
           });
}

// ---- Unary ops ----------------------------------------------------------------------------------

// One input over [lo, hi) of the given shape.
Make Unary(double lo, double hi, Shape shape = {3, 7, 11}) {
  return [=](CaseInputs& in, std::mt19937& rng, DataType t) {
    in.Input(Values(t, shape, rng, lo, hi));
  };
}

// The same with attributes.
Make UnaryWith(std::vector<Attribute> attrs, double lo, double hi) {
  return [=](CaseInputs& in, std::mt19937& rng, DataType t) {
    for (const Attribute& a : attrs) in.Attr(a);
    in.Input(Values(t, {3, 7, 11}, rng, lo, hi));
  };
}

void AddUnary(CaseList& list) {
  // Ops with FP32 / FP16 rows before 13 and a BF16 row from 13: op, range.
  struct Spec {
    const char* op;
    double lo, hi;
    int64_t first;  // the first opset
  };
  const std::vector<Spec> split = {
      {"Relu", -1, 1, 7},   {"Sigmoid", -8, 8, 7}, {"Tanh", -3, 3, 7},  {"Exp", -5, 5, 7},
      {"Log", 0.01, 10, 7}, {"Sqrt", 0, 10, 7},    {"Floor", -5, 5, 7}, {"Ceil", -5, 5, 7},
      {"Abs", -5, 5, 7},    {"Neg", -5, 5, 7},     {"Erf", -3, 3, 9},   {"Sign", -2, 2, 9},
  };
  for (const Spec& s : split) {
    const bool ints = std::string(s.op) == "Abs" || std::string(s.op) == "Neg";
    list.Add(Name(s.op, s.first, "odd"), s.op, s.first, ints ? kOldInts : kOld, Unary(s.lo, s.hi));
    list.Add(Name(s.op, 13, "odd"), s.op, 13, ints ? kNumeric : kFloats, Unary(s.lo, s.hi));
  }
  list.Add(Name("Reciprocal", 7, "odd"), "Reciprocal", 7, kOld,
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Input(AwayFromZero(t, {3, 7, 11}, rng, 0.1, 10.0));
           });
  list.Add(Name("Reciprocal", 13, "odd"), "Reciprocal", 13, kFloats,
           [](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Input(AwayFromZero(t, {3, 7, 11}, rng, 0.1, 10.0));
           });
  // Ties, integers and zeros.
  for (const char* op : {"Round", "Floor", "Ceil", "Sign"}) {
    const bool round = std::string(op) == "Round";
    list.Add(Name(op, 13, "halves"), op, 13, round ? kOld : kFloats,
             [](CaseInputs& in, std::mt19937& rng, DataType) {
               in.Input(Halves({5, 9}, rng));
             });
  }
  list.Add(Name("Round", 11, "odd"), "Round", 11, kOld, Unary(-5, 5));
  list.Add(Name("Sign", 13, "specials"), "Sign", 13, kFloats,
           [](CaseInputs& in, std::mt19937&, DataType) {
             in.Input(MakeTensor<float>({5}, {kNaN, -0.0f, 0.0f, kInf, -kInf}));
           });
  list.Add(Name("Relu", 14, "nan"), "Relu", 14, kFloats,
           [](CaseInputs& in, std::mt19937&, DataType) {
             in.Input(MakeTensor<float>({4}, {kNaN, -kInf, kInf, -0.0f}));
           });
  list.Add(Name("Abs", 13, "int min"), "Abs", 13, {kI32},
           [](CaseInputs& in, std::mt19937&, DataType) {
             in.Input(MakeTensor<int32_t>({3}, {std::numeric_limits<int32_t>::min(), -5, 7}));
           });
  list.Add(Name("Neg", 13, "int min"), "Neg", 13, {kI64},
           [](CaseInputs& in, std::mt19937&, DataType) {
             in.Input(MakeTensor<int64_t>({3}, {std::numeric_limits<int64_t>::min(), -5, 7}));
           });
  // Large inputs and a zero-size one.
  list.Add(Name("Relu", 14, "large"), "Relu", 14, kFloats, Unary(-1, 1, {70001}));
  list.Add(Name("Sigmoid", 13, "large"), "Sigmoid", 13, kFloats, Unary(-10, 10, {7, 10007}));
  list.Add(Name("Neg", 13, "large"), "Neg", 13, {kI64}, Unary(0, 0, {70001}));
  list.Add(Name("Exp", 13, "zero size"), "Exp", 13, kFloats, Unary(-1, 1, {0, 5}));

  // FP32 / FP16 only.
  const std::vector<Spec> old_only = {
      {"Sin", -4, 4, 7},        {"Cos", -4, 4, 7},         {"Tan", -1.2, 1.2, 7},
      {"Asin", -1, 1, 7},       {"Acos", -1, 1, 7},        {"Atan", -5, 5, 7},
      {"Sinh", -3, 3, 9},       {"Cosh", -3, 3, 9},        {"Asinh", -5, 5, 9},
      {"Acosh", 1, 5, 9},       {"Atanh", -0.95, 0.95, 9}, {"HardSwish", -5, 5, 14},
      {"Softplus", -10, 10, 7}, {"Softsign", -5, 5, 7},
  };
  for (const Spec& s : old_only) {
    list.Add(Name(s.op, 17, "odd"), s.op, 17, kOld, Unary(s.lo, s.hi));
    list.Add(Name(s.op, s.first, "odd"), s.op, s.first, kOld, Unary(s.lo, s.hi));
  }

  // IsNaN, IsInf.
  const Make specials = [](CaseInputs& in, std::mt19937& rng, DataType) {
    std::vector<float> v = RandomValues<float>(12, rng, -2.0, 2.0);
    v[1] = kNaN;
    v[4] = kInf;
    v[7] = -kInf;
    v[10] = kNaN;
    in.Input(MakeTensor<float>({3, 4}, v));
  };
  list.Add(Name("IsNaN", 9, "specials"), "IsNaN", 9, kOld, specials);
  list.Add(Name("IsNaN", 13, "specials"), "IsNaN", 13, kFloats, specials);
  list.Add(Name("IsInf", 10, "specials"), "IsInf", 10, {kF32}, specials);
  list.Add(Name("IsInf", 10, "positive only"), "IsInf", 10, {kF32},
           [specials](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Attr(IntAttr("detect_negative", 0));
             specials(in, rng, t);
           });
  list.Add(Name("IsInf", 10, "negative only"), "IsInf", 10, {kF32},
           [specials](CaseInputs& in, std::mt19937& rng, DataType t) {
             in.Attr(IntAttr("detect_positive", 0));
             specials(in, rng, t);
           });

  // Activations with attributes.
  list.Add(Name("LeakyRelu", 7, "default"), "LeakyRelu", 7, kOld, Unary(-2, 2));
  list.Add(Name("LeakyRelu", 16, "default"), "LeakyRelu", 16, kFloats, Unary(-2, 2));
  list.Add(Name("LeakyRelu", 16, "alpha"), "LeakyRelu", 16, kFloats,
           UnaryWith({FloatAttr("alpha", 0.2f)}, -2, 2));
  list.Add(Name("Elu", 7, "default"), "Elu", 7, kOld, Unary(-3, 3));
  list.Add(Name("Elu", 17, "alpha"), "Elu", 17, kOld, UnaryWith({FloatAttr("alpha", 0.5f)}, -3, 3));
  list.Add(Name("Selu", 7, "default"), "Selu", 7, kOld, Unary(-3, 3));
  list.Add(Name("Selu", 17, "alpha gamma"), "Selu", 17, kOld,
           UnaryWith({FloatAttr("alpha", 1.5f), FloatAttr("gamma", 2.0f)}, -3, 3));
  list.Add(Name("Celu", 12, "default"), "Celu", 12, {kF32}, Unary(-3, 3));
  list.Add(Name("Celu", 17, "alpha"), "Celu", 17, {kF32},
           UnaryWith({FloatAttr("alpha", 2.5f)}, -3, 3));
  list.Add(Name("HardSigmoid", 7, "default"), "HardSigmoid", 7, kOld, Unary(-5, 5));
  list.Add(Name("HardSigmoid", 17, "alpha beta"), "HardSigmoid", 17, kOld,
           UnaryWith({FloatAttr("alpha", 0.3f), FloatAttr("beta", 0.6f)}, -5, 5));
  list.Add(Name("ThresholdedRelu", 10, "default"), "ThresholdedRelu", 10, kOld, Unary(-3, 3));
  list.Add(Name("ThresholdedRelu", 17, "alpha"), "ThresholdedRelu", 17, kOld,
           UnaryWith({FloatAttr("alpha", 0.3f)}, -3, 3));
  list.Add(Name("Shrink", 9, "default"), "Shrink", 9, kOld, Unary(-2, 2));
  list.Add(Name("Shrink", 17, "lambd bias"), "Shrink", 17, kOld,
           UnaryWith({FloatAttr("lambd", 1.0f), FloatAttr("bias", 0.3f)}, -2, 2));
}

void AddClip(CaseList& list) {
  // Before 11: attributes.
  list.Add(Name("Clip", 7, "min max"), "Clip", 7, kOld,
           UnaryWith({FloatAttr("min", -0.5f), FloatAttr("max", 0.5f)}, -1, 1));
  list.Add(Name("Clip", 10, "min only"), "Clip", 10, kOld,
           UnaryWith({FloatAttr("min", -0.25f)}, -1, 1));
  list.Add(Name("Clip", 10, "max only"), "Clip", 10, kOld,
           UnaryWith({FloatAttr("max", 0.25f)}, -1, 1));
  list.Add(Name("Clip", 10, "no bounds"), "Clip", 10, kOld, Unary(-1, 1));
  // From 11: constant inputs of X's dtype, omitted where absent.
  struct Bounds {
    const char* name;
    bool lo, hi;
    float lo_value, hi_value;
  };
  const std::vector<Bounds> bounds = {
      {"min max", true, true, -0.5f, 0.5f},       {"min only", true, false, -0.25f, 0.0f},
      {"max only", false, true, 0.0f, 0.25f},     {"no bounds", false, false, 0.0f, 0.0f},
      {"min above max", true, true, 0.5f, -0.5f},
  };
  for (const Bounds& b : bounds) {
    const Make make = [b](CaseInputs& in, std::mt19937& rng, DataType t) {
      in.Input(Values(t, {3, 7, 11}, rng, -1.0, 1.0));
      if (b.lo) {
        in.ConstInput(MakeTensor<float>({}, {b.lo_value}));
      } else if (b.hi) {
        in.OmittedInput();
      }
      if (b.hi) in.ConstInput(MakeTensor<float>({1}, {b.hi_value}));
    };
    list.Add(Name("Clip", 11, b.name), "Clip", 11, kOld, make);
    list.Add(Name("Clip", 13, b.name), "Clip", 13, kFloats, make);
  }
  list.Add(
      Name("Clip", 13, "nan and large"), "Clip", 13, kFloats,
      [](CaseInputs& in, std::mt19937& rng, DataType t) {
        std::vector<float> v = RandomValues<float>(70001, rng, -2.0, 2.0);
        v[3] = kNaN;
        v[5] = kInf;
        v[8] = -kInf;
        in.Input(MakeTensor<float>({70001}, v));
        (void)t;
        in.ConstInput(MakeTensor<float>({}, {-1.0f})).ConstInput(MakeTensor<float>({}, {1.0f}));
      });
}

// ---- ai.kiln Gelu, ChannelAffine ----------------------------------------------------------------

void AddKiln(CaseList& list) {
  const std::string kiln = "ai.kiln";
  list.Add("Gelu default", "Gelu", 1, kFloats, Unary(-6, 6), 0.0, kiln);
  list.Add("Gelu none", "Gelu", 1, kFloats, UnaryWith({StringAttr("approximate", "none")}, -6, 6),
           0.0, kiln);
  list.Add("Gelu tanh", "Gelu", 1, kFloats, UnaryWith({StringAttr("approximate", "tanh")}, -6, 6),
           0.0, kiln);
  list.Add("Gelu large", "Gelu", 1, kFloats, Unary(-8, 8, {70001}), 0.0, kiln);
  list.Add(
      "Gelu tanh large", "Gelu", 1, kFloats,
      [](CaseInputs& in, std::mt19937& rng, DataType t) {
        in.Attr(StringAttr("approximate", "tanh")).Input(Values(t, {70001}, rng, -8.0, 8.0));
      },
      0.0, kiln);

  struct Act {
    const char* name;
    std::vector<float> params;
  };
  const std::vector<Act> acts = {
      {"", {}},
      {"Relu", {}},
      {"Clip", {-0.5f, 0.5f}},
      {"LeakyRelu", {0.1f}},
      {"Sigmoid", {}},
      {"SiLU", {}},
      {"HardSigmoid", {0.2f, 0.5f}},
      {"HardSwish", {}},
      {"Gelu", {}},
      {"GeluTanh", {}},
      {"Tanh", {}},
  };
  for (const Act& a : acts) {
    const std::string act_name = a.name[0] == '\0' ? "none" : a.name;
    const Make make = [a](CaseInputs& in, std::mt19937& rng, DataType t) {
      if (a.name[0] != '\0') in.Attr(StringAttr("activation", a.name));
      if (!a.params.empty()) in.Attr(FloatsAttr("activation_params", a.params));
      in.Input(Values(t, {2, 3, 4, 5}, rng)).Input(Values(t, {3}, rng)).Input(Values(t, {3}, rng));
    };
    list.Add("ChannelAffine " + act_name, "ChannelAffine", 1, kFloats, make, 0.0, kiln);
  }
  // FP32 Scale / Bias with a half X.
  list.Add(
      "ChannelAffine fp32 params", "ChannelAffine", 1, kFloats,
      [](CaseInputs& in, std::mt19937& rng, DataType t) {
        in.Attr(StringAttr("activation", "Relu"))
            .Input(Values(t, {2, 5, 3, 7}, rng))
            .KeepInput(Random({5}, rng))
            .KeepInput(Random({5}, rng));
      },
      0.0, kiln);
  list.Add(
      "ChannelAffine rank2", "ChannelAffine", 1, kFloats,
      [](CaseInputs& in, std::mt19937& rng, DataType t) {
        in.Input(Values(t, {5, 7}, rng)).Input(Values(t, {7}, rng)).Input(Values(t, {7}, rng));
      },
      0.0, kiln);
  list.Add(
      "ChannelAffine large", "ChannelAffine", 1, kFloats,
      [](CaseInputs& in, std::mt19937& rng, DataType t) {
        in.Attr(StringAttr("activation", "Relu"))
            .Input(Values(t, {2, 16, 2300}, rng))
            .Input(Values(t, {16}, rng))
            .Input(Values(t, {16}, rng));
      },
      0.0, kiln);
  list.Add(
      "ChannelAffine zero size", "ChannelAffine", 1, kFloats,
      [](CaseInputs& in, std::mt19937& rng, DataType t) {
        in.Input(Values(t, {0, 3, 4}, rng)).Input(Values(t, {3}, rng)).Input(Values(t, {3}, rng));
      },
      0.0, kiln);
}

}  // namespace

std::vector<CudaCase> ElementwiseCases() {
  CaseList list;
  AddArithmetic(list);
  AddPow(list);
  AddPRelu(list);
  AddComparisons(list);
  AddLogic(list);
  AddWhere(list);
  AddVariadic(list);
  AddCast(list);
  AddExpand(list);
  AddUnary(list);
  AddClip(list);
  AddKiln(list);
  return list.Take();
}

}  // namespace kiln::cuda::testing
