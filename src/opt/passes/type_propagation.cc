// SPDX-License-Identifier: Apache-2.0
// type_propagation: fills in the dtype and dims that ONNX's shape inference left unknown, so the
// folding, fusion and layout passes can prove what they need on models with a symbolic batch dim.
//
// NOTE: libonnx's inference stops at a Reshape whose target shape is computed at run time
// (Shape -> Gather -> Unsqueeze -> Concat, as PyTorch exports `x.view(b, t, h, d)`), and in
// lenient mode every value after it loses its type. This pass walks the nodes in order and
// derives output types from input types, for every output of a node (Split, TopK, MaxPool's
// Indices), for the ops real exports put between their layers:
// - elementwise unary ops, broadcasting binary ops (comparisons give BOOL), Where, Cast;
// - MatMul, Gemm, ai.kiln FusedMatMul / FusedGemm / Attention, Transpose, Softmax;
// - Conv, ai.kiln FusedConv (plain layout only), ConvTranspose, MaxPool, AveragePool, LpPool and
//   the global pools: spatial dims by the kernels' own window rules (kernels/ref/spatial.h's
//   ResolveWindow, so auto_pad, ceil_mode and dilations mean what they mean at run time);
// - Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile, Pad, Slice, Split, Concat, Gather,
//   Reduce* / ArgMax / ArgMin, TopK, Resize / Upsample, ConstantOfShape, Shape, Size, Range.
// Attribute forms and input forms (opset 10 / 13 / 18 moved axes, pads, split, starts... to
// inputs) are both read; such inputs must be constants or "shape values".
//
// Shape values: small integer tensors (at most 64 elements) are tracked symbolically, element
// by element, as a known integer, a named dim ("batch") or unknown. Shape(x) gives x's dims;
// Gather, Slice, Concat, Transpose, Reshape / Squeeze / Unsqueeze / Flatten, Cast, Expand,
// ConstantOfShape, Where and the integer arithmetic PyTorch writes around them (Add, Sub, Mul,
// Div, Mod, Max, Min, Neg, Equal...) carry them, so ShuffleNet's `Div(Gather(Shape(x), 1), 2)`
// is 24 and `view(b, t, -1)` keeps the batch symbol; a -1 Reshape entry resolves when the known
// factors and symbols divide out. Arithmetic is exact or left unknown: known op known, x * 1,
// x + 0, x / 1, a division only of nonnegative knowns (floor and truncation agree there).
//
// A dim is only ever filled in, never changed: known dims, symbols and dtypes already declared
// are kept. Dims with the same symbol are taken to be equal, as ONNX's dim_param convention says.
// What a derivation proves beyond a declared symbol (ViT's class-token Expand is declared
// [unk__2, unk__3, 768] by the exporter, but provably [batch, 1, 768]) is remembered for this
// run only and used for the values after it, so those get the proven dims; the declared type
// keeps its symbol. Among two symbols, one that a graph input declares is preferred.
// An op whose output cannot be proven leaves the output type as it is.

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/ref/common.h"   // DataTypeFromOnnxNumber: Cast's `to`
#include "kernels/ref/spatial.h"  // the window rules the Conv and pool kernels apply
#include "op/slice_range.h"
#include "opt/pass.h"
#include "opt/passes/pattern.h"

namespace kiln::opt {
namespace {

using Dims = std::vector<Dim>;
using Ints = std::vector<int64_t>;

// Marks a Reshape target entry of -1 ("infer this dim"). Not a valid ONNX dim_param; it never
// leaves ReshapeDims.
const std::string kInferMarker = "<-1>";

// A Slice bound at or beyond this takes a dim of unknown size whole (PyTorch writes INT64_MAX,
// older exporters INT32_MAX). Dims are assumed to stay below it.
constexpr int64_t kWholeBound = INT32_MAX;
// Shape values are tracked up to this many elements (a Reshape target, pads, a few scalars).
constexpr int64_t kMaxShapeValue = 64;
// Constant integer inputs (axes, pads, split sizes) are read up to this many elements.
constexpr int64_t kMaxConstInts = 4096;

Dim Known(int64_t v) { return Dim{v, {}}; }
bool Is(const Dim& d, int64_t v) { return d.known() && d.value == v; }

// Merges `derived` into `type`; returns true when anything was added.
bool Refine(ValueType& type, DataType dtype, const std::optional<Dims>& dims) {
  if (!type.is_tensor()) return false;
  bool changed = false;
  if (type.dtype == DataType::kInvalid && dtype != DataType::kInvalid) {
    type.dtype = dtype;
    changed = true;
  }
  if (!dims) return changed;
  if (!type.has_shape) {
    type.has_shape = true;
    type.dims = *dims;
    return true;
  }
  if (type.dims.size() != dims->size()) return changed;  // disagreement: keep what is declared
  for (size_t i = 0; i < dims->size(); ++i) {
    Dim& d = type.dims[i];
    const Dim& n = (*dims)[i];
    if (d.known() || !d.symbol.empty()) continue;
    if (n.known() || !n.symbol.empty()) {
      d = n;
      changed = true;
    }
  }
  return changed;
}

bool Same(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.known() && b.known() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

std::optional<Dims> Broadcast(const Dims& a, const Dims& b) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim one{1, {}};
    const Dim& x = i < r - a.size() ? one : a[i - (r - a.size())];
    const Dim& y = i < r - b.size() ? one : b[i - (r - b.size())];
    // An unknown dim against a known one must be 1 or equal to it: the result is the known one,
    // unless that is 1.
    if ((x.known() && x.value == 1) || (!x.known() && y.known() && y.value != 1))
      out[i] = y;
    else if ((y.known() && y.value == 1) || Same(x, y) || (x.known() && !y.known()))
      out[i] = x;
    else if (x.known() && y.known())
      return std::nullopt;  // invalid broadcast
    else
      out[i] = Dim{};
  }
  return out;
}

// a * b where provable: known products, x * 1, x * 0.
Dim MulDim(const Dim& a, const Dim& b) {
  if (a.known() && b.known()) {
    int64_t p = 0;
    return __builtin_mul_overflow(a.value, b.value, &p) ? Dim{} : Known(p);
  }
  if (Is(a, 1)) return b;
  if (Is(b, 1)) return a;
  if (Is(a, 0) || Is(b, 0)) return Known(0);
  return Dim{};
}

// a + b where provable: known sums, x + 0.
Dim AddDim(const Dim& a, const Dim& b) {
  if (a.known() && b.known()) {
    int64_t s = 0;
    return __builtin_add_overflow(a.value, b.value, &s) || s < 0 ? Dim{} : Known(s);
  }
  if (Is(a, 0)) return b;
  if (Is(b, 0)) return a;
  return Dim{};
}

// The product of dims [begin, end) where provable.
Dim ProductDim(const Dims& d, size_t begin, size_t end) {
  Dim p = Known(1);
  for (size_t i = begin; i < end; ++i) p = MulDim(p, d[i]);
  return p;
}

std::optional<size_t> NormAxis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return std::nullopt;
  return static_cast<size_t>(axis);
}

// Normalized axes; nullopt when one is out of range or repeated.
std::optional<std::vector<size_t>> NormAxes(const Ints& axes, size_t rank) {
  std::vector<size_t> out;
  for (int64_t a : axes) {
    std::optional<size_t> n = NormAxis(a, rank);
    if (!n || std::find(out.begin(), out.end(), *n) != out.end()) return std::nullopt;
    out.push_back(*n);
  }
  return out;
}

// The Slice kernels' clamping (op/slice_range.h) for a known dim; nullopt for a step the
// kernels refuse.
std::optional<SliceRange> CheckedClampSlice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (step == 0 || step == INT64_MIN) return std::nullopt;
  return ClampSlice(start, end, step, dim);
}

// A sliced dim: its size when known; a dim of unknown size only when the slice provably takes
// it whole (0 to "infinity" by 1, or -1 to "-infinity" by -1).
std::optional<Dim> SliceDim(const Dim& d, int64_t start, int64_t end, int64_t step) {
  if (step == 0) return std::nullopt;
  if (d.known()) {
    std::optional<SliceRange> r = CheckedClampSlice(start, end, step, d.value);
    if (!r) return std::nullopt;
    return Known(r->count);
  }
  if (step == 1 && start == 0 && end >= kWholeBound) return d;
  if (step == -1 && start == -1 && end <= -kWholeBound) return d;
  return Dim{};
}

// --- Shape values ------------------------------------------------------------------------------

// One element of a shape value.
struct Sym {
  bool known = false;
  int64_t value = 0;   // when known (any sign: -1 in a Reshape target, pads, a Slice end)
  std::string symbol;  // when not known: the named dim it equals (so >= 0); empty: nothing known
};

Sym KnownSym(int64_t v) {
  Sym s;
  s.known = true;
  s.value = v;
  return s;
}

Sym SymOfDim(const Dim& d) {
  if (d.known()) return KnownSym(d.value);
  Sym s;
  s.symbol = d.symbol;
  return s;
}

bool SameSym(const Sym& a, const Sym& b) {
  if (a.known || b.known) return a.known && b.known && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

bool IsSym(const Sym& s, int64_t v) { return s.known && s.value == v; }

// A small integer tensor known element by element, row-major.
struct SymTensor {
  Ints shape;
  std::vector<Sym> v;
};

// The element count of `shape` when it is at most kMaxShapeValue.
std::optional<int64_t> SmallCount(const Ints& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxShapeValue) return std::nullopt;
    n *= d;
    if (n > kMaxShapeValue) return std::nullopt;
  }
  return n;
}

std::optional<Ints> BroadcastShape(const Ints& a, const Ints& b) {
  const size_t r = std::max(a.size(), b.size());
  Ints out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// For each element of `out` (row-major), the element of `in` numpy broadcasting reads.
// REQUIRES: `in` broadcasts to `out`.
std::vector<size_t> BroadcastIndex(const Ints& in, const Ints& out) {
  const size_t r = out.size(), off = r - in.size();
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  std::vector<size_t> idx;
  Ints coord(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    size_t k = 0;
    for (size_t d = 0; d < in.size(); ++d) {
      k = k * static_cast<size_t>(in[d]) + (in[d] == 1 ? 0 : static_cast<size_t>(coord[d + off]));
    }
    idx.push_back(k);
    for (size_t d = r; d-- > 0;) {
      if (++coord[d] < out[d]) break;
      coord[d] = 0;
    }
  }
  return idx;
}

// Row-major strides of `shape`.
Ints Strides(const Ints& shape) {
  Ints s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// One element of an integer (or BOOL) elementwise op, where provable. Symbols stand for dims,
// so they are >= 0.
Sym Arith(const std::string& op, const Sym& a, const Sym& b, bool fmod) {
  if (a.known && b.known) {
    const int64_t x = a.value, y = b.value;
    int64_t r = 0;
    if (op == "Add") {
      if (__builtin_add_overflow(x, y, &r)) return Sym{};
    } else if (op == "Sub") {
      if (__builtin_sub_overflow(x, y, &r)) return Sym{};
    } else if (op == "Mul") {
      if (__builtin_mul_overflow(x, y, &r)) return Sym{};
    } else if (op == "Div") {
      // Exact quotients, and nonnegative operands (where truncation and floor agree).
      if (y == 0 || (x == INT64_MIN && y == -1)) return Sym{};
      if (x % y != 0 && (x < 0 || y < 0)) return Sym{};
      r = x / y;
    } else if (op == "Mod") {
      if (y == 0 || (x == INT64_MIN && y == -1)) return Sym{};
      r = x % y;
      if (!fmod && r != 0 && ((r < 0) != (y < 0))) r += y;  // the divisor's sign
    } else if (op == "Max") {
      r = std::max(x, y);
    } else if (op == "Min") {
      r = std::min(x, y);
    } else if (op == "Equal") {
      r = x == y;
    } else if (op == "Less") {
      r = x < y;
    } else if (op == "LessOrEqual") {
      r = x <= y;
    } else if (op == "Greater") {
      r = x > y;
    } else if (op == "GreaterOrEqual") {
      r = x >= y;
    } else if (op == "And") {
      r = x != 0 && y != 0;
    } else if (op == "Or") {
      r = x != 0 || y != 0;
    } else {
      return Sym{};
    }
    return KnownSym(r);
  }
  if (op == "Add") {
    if (IsSym(a, 0)) return b;
    if (IsSym(b, 0)) return a;
  } else if (op == "Sub") {
    if (IsSym(b, 0)) return a;
    if (SameSym(a, b)) return KnownSym(0);
  } else if (op == "Mul") {
    if (IsSym(a, 1)) return b;
    if (IsSym(b, 1)) return a;
    if (IsSym(a, 0) || IsSym(b, 0)) return KnownSym(0);
  } else if (op == "Div") {
    if (IsSym(b, 1)) return a;
  } else if (op == "Max" || op == "Min") {
    if (SameSym(a, b)) return a;
    // A named dim against a constant <= 0.
    const Sym& c = a.known ? a : b;
    const Sym& s = a.known ? b : a;
    if (c.known && !s.symbol.empty() && c.value <= 0) return op == "Max" ? s : c;
  } else if (op == "Equal") {
    if (SameSym(a, b)) return KnownSym(1);
    const Sym& c = a.known ? a : b;
    const Sym& s = a.known ? b : a;
    if (c.known && !s.symbol.empty() && c.value < 0) return KnownSym(0);
  }
  return Sym{};
}

// ONNX type number -> dtype, kInvalid when unknown.
DataType DtypeOfOnnx(int64_t v) {
  return ref::DataTypeFromOnnxNumber(v).value_or(DataType::kInvalid);
}

bool IsIntegerOrBool(DataType t) { return IsInteger(t) || t == DataType::kBool; }

// The elements of an integer or BOOL constant as int64; nullopt for other dtypes.
std::optional<Ints> IntElements(const OwnedTensor& t, int64_t max) {
  if (t.num_elements() > max) return std::nullopt;
  Ints out;
  auto fill = [&](auto* p) {
    for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(static_cast<int64_t>(p[i]));
  };
  switch (t.dtype()) {
    case DataType::kInt64:
      fill(t.data<const int64_t>());
      break;
    case DataType::kInt32:
      fill(t.data<const int32_t>());
      break;
    case DataType::kInt16:
      fill(t.data<const int16_t>());
      break;
    case DataType::kInt8:
      fill(t.data<const int8_t>());
      break;
    case DataType::kUint8:
      fill(t.data<const uint8_t>());
      break;
    case DataType::kBool:
      fill(t.data<const bool>());
      break;
    default:
      return std::nullopt;
  }
  return out;
}

std::optional<std::vector<double>> FloatElements(const OwnedTensor& t, int64_t max) {
  if (t.num_elements() > max) return std::nullopt;
  std::vector<double> out;
  auto fill = [&](auto* p) {
    for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(static_cast<double>(p[i]));
  };
  switch (t.dtype()) {
    case DataType::kFloat32:
      fill(t.data<const float>());
      break;
    case DataType::kFloat64:
      fill(t.data<const double>());
      break;
    default:
      return std::nullopt;
  }
  return out;
}

const std::set<std::string_view> kUnary = {"Relu",
                                           "Sigmoid",
                                           "Tanh",
                                           "Erf",
                                           "Sqrt",
                                           "Neg",
                                           "Exp",
                                           "Log",
                                           "Abs",
                                           "Reciprocal",
                                           "LeakyRelu",
                                           "HardSigmoid",
                                           "HardSwish",
                                           "Clip",
                                           "Softmax",
                                           "LogSoftmax",
                                           "Hardmax",
                                           "Identity",
                                           "Dropout",
                                           "Elu",
                                           "Selu",
                                           "Celu",
                                           "Softplus",
                                           "Softsign",
                                           "Mish",
                                           "Gelu",
                                           "Floor",
                                           "Ceil",
                                           "Round",
                                           "Sign",
                                           "Sin",
                                           "Cos",
                                           "Tan",
                                           "Atan",
                                           "Asin",
                                           "Acos",
                                           "LRN",
                                           "CumSum",
                                           "Trilu",
                                           "LayerNormalization",
                                           "Shrink",
                                           "ThresholdedRelu",
                                           "BatchNormalization",
                                           "InstanceNormalization",
                                           "GroupNormalization",
                                           "MeanVarianceNormalization",
                                           "ScatterND",
                                           "ScatterElements"};
const std::set<std::string_view> kBinary = {"Add", "Sub",      "Mul", "Div", "Pow", "PRelu",
                                            "Mod", "BitShift", "Max", "Min", "Sum", "Mean"};
const std::set<std::string_view> kCompare = {"Equal",          "Less", "LessOrEqual", "Greater",
                                             "GreaterOrEqual", "And",  "Or",          "Xor"};
const std::set<std::string_view> kReduce = {
    "ReduceMean", "ReduceSum", "ReduceMax",    "ReduceMin",       "ReduceProd",
    "ReduceL1",   "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
const std::set<std::string_view> kPools = {"MaxPool", "AveragePool", "LpPool"};
// Elementwise ops a shape value passes through (they do not move or change integer elements).
const std::set<std::string_view> kSvSameElements = {"Identity", "Reshape", "Squeeze", "Unsqueeze",
                                                    "Flatten"};
const std::set<std::string_view> kSvBinary = {
    "Add",   "Sub",  "Mul",     "Div", "Mod", "Max",         "Min",
    "Equal", "Less", "Greater", "And", "Or",  "LessOrEqual", "GreaterOrEqual"};

// The derived type of one output.
struct Derived {
  DataType dtype = DataType::kInvalid;
  std::optional<Dims> dims;
};

// One run of the pass over one graph.
class Propagator {
 public:
  explicit Propagator(GraphEditor& ed) : ed_(ed) {
    for (int in : ed_.graph().inputs) {
      for (const Dim& d : ed_.value(in).type.dims) {
        if (!d.symbol.empty()) input_symbols_.insert(d.symbol);
      }
    }
  }

  int Run() {
    int changes = 0;
    for (int n : ed_.LiveNodes()) {
      const Node& node = ed_.node(n);
      if (!node.domain.empty() && node.domain != "ai.kiln") continue;
      std::vector<Derived> outs = Derive(node);
      for (size_t i = 0; i < outs.size() && i < node.outputs.size(); ++i) {
        if (node.outputs[i] != kNoValue) changes += Apply(node.outputs[i], outs[i]);
      }
      if (node.domain.empty() && !node.outputs.empty() && node.outputs[0] != kNoValue) {
        if (std::optional<SymTensor> s = Evaluate(node)) sv_[node.outputs[0]] = std::move(*s);
      }
    }
    return changes;
  }

 private:
  // How much a dim says: a known size, a symbol of a graph input, another symbol, nothing.
  int Weight(const Dim& d) const {
    if (d.known()) return 3;
    if (d.symbol.empty()) return 0;
    return input_symbols_.count(d.symbol) > 0 ? 2 : 1;
  }

  // Fills in `v`'s declared type and remembers what the derivation proves beyond it.
  int Apply(int v, const Derived& d) {
    ValueType& t = ed_.graph().mutable_value(v).type;
    const int changed = Refine(t, d.dtype, d.dims) ? 1 : 0;
    if (d.dims && t.is_tensor() && t.has_shape && t.dims.size() == d.dims->size()) {
      Dims best = t.dims;
      bool better = false;
      for (size_t i = 0; i < best.size(); ++i) {
        const Dim& n = (*d.dims)[i];
        if (Weight(n) > Weight(best[i])) {
          best[i] = n;
          better = true;
        }
      }
      if (better) best_[v] = std::move(best);
    }
    return changed;
  }

  // The dims this run knows for `v`: the declared ones, or better ones it proved.
  std::optional<Dims> DimsOf(int v) const {
    if (v == kNoValue) return std::nullopt;
    if (auto it = best_.find(v); it != best_.end()) return it->second;
    const ValueType& t = ed_.value(v).type;
    if (!t.is_tensor() || !t.has_shape) return std::nullopt;
    return t.dims;
  }

  DataType DtypeOf(int v) const { return v == kNoValue ? DataType::kInvalid : ed_.DtypeOf(v); }

  // The constant `v` holds: an initializer, or the `value` of the Constant node writing it (the
  // first round sees those before constant_folding makes them initializers).
  const OwnedTensor* ConstTensor(int v) const {
    if (v == kNoValue) return nullptr;
    if (const OwnedTensor* c = ed_.Constant(v)) return c;
    const int p = ed_.ProducerOf(v, "Constant");
    if (p < 0) return nullptr;
    const Attribute* a = ed_.node(p).FindAttribute("value");
    return a != nullptr && a->type == AttributeType::kTensor && a->t ? a->t.get() : nullptr;
  }

  std::optional<SymTensor> SvOf(int v) const {
    if (v == kNoValue) return std::nullopt;
    if (auto it = sv_.find(v); it != sv_.end()) return it->second;
    const OwnedTensor* c = ConstTensor(v);
    if (c == nullptr) return std::nullopt;
    std::optional<Ints> e = IntElements(*c, kMaxShapeValue);
    if (!e) return std::nullopt;
    SymTensor s;
    s.shape.assign(c->shape().dims().begin(), c->shape().dims().end());
    for (int64_t x : *e) s.v.push_back(KnownSym(x));
    return s;
  }

  // The integers `v` provably holds: an integer constant, or a shape value known throughout.
  std::optional<Ints> IntsOf(int v) const {
    if (v == kNoValue) return std::nullopt;
    if (const OwnedTensor* c = ConstTensor(v)) return IntElements(*c, kMaxConstInts);
    std::optional<SymTensor> s = SvOf(v);
    if (!s) return std::nullopt;
    Ints out;
    for (const Sym& x : s->v) {
      if (!x.known) return std::nullopt;
      out.push_back(x.value);
    }
    return out;
  }

  std::optional<std::vector<double>> FloatsOf(int v) const {
    const OwnedTensor* c = ConstTensor(v);
    return c == nullptr ? std::nullopt : FloatElements(*c, kMaxConstInts);
  }

  // An integer list given as input `i` (newer opsets) or as attribute `attr` (older ones);
  // `present` tells whether either was given.
  std::optional<Ints> IntsInputOrAttr(const Node& node, int i, std::string_view attr,
                                      bool* present) const {
    if (node.has_input(i)) {
      *present = true;
      return IntsOf(node.inputs[static_cast<size_t>(i)]);
    }
    *present = node.FindAttribute(attr) != nullptr;
    return node.GetInts(attr);
  }

  // The dims a 1-D shape value describes as a target (Expand, ConstantOfShape): entries not
  // known to be dims are unknown; without a shape value, as many unknown dims as its length.
  std::optional<Dims> TargetDims(int v) const {
    if (std::optional<SymTensor> s = SvOf(v); s && s->shape.size() <= 1) {
      Dims out;
      for (const Sym& x : s->v) {
        if (x.known && x.value >= 0)
          out.push_back(Known(x.value));
        else if (!x.known)
          out.push_back(Dim{-1, x.symbol});
        else
          out.push_back(Dim{});
      }
      return out;
    }
    std::optional<Dims> d = DimsOf(v);
    if (d && d->size() == 1 && (*d)[0].known() && (*d)[0].value <= 8) {
      return Dims(static_cast<size_t>((*d)[0].value), Dim{});
    }
    return std::nullopt;
  }

  std::vector<Derived> Derive(const Node& node) const;
  std::optional<Dims> Window(const Node& node, bool conv, bool transpose) const;
  std::optional<Dims> Slice(const Node& node) const;
  std::vector<Derived> Split(const Node& node) const;
  std::optional<Dims> Reduce(const Node& node, bool arg) const;
  std::optional<Dims> Resize(const Node& node) const;
  std::optional<Dims> Reshape(const Node& node) const;
  std::optional<SymTensor> Evaluate(const Node& node) const;
  std::optional<SymTensor> EvaluateSlice(const Node& node, const SymTensor& a) const;

  GraphEditor& ed_;
  std::set<std::string> input_symbols_;
  std::map<int, Dims> best_;     // proven dims beyond the declared type, by value id
  std::map<int, SymTensor> sv_;  // shape values by value id
};

std::vector<Derived> Propagator::Derive(const Node& node) const {
  const std::string& op = node.op_type;
  const bool onnx = node.domain.empty();
  std::vector<Derived> outs(node.outputs.size());
  if (outs.empty()) return outs;
  Derived& y = outs[0];
  const int x = node.inputs.empty() ? kNoValue : node.inputs[0];
  y.dtype = DtypeOf(x);
  const std::optional<Dims> a = DimsOf(x);
  if (onnx && op == "Constant") {
    y.dtype = DataType::kInvalid;
    if (const OwnedTensor* c = ConstTensor(node.outputs[0])) {
      y.dtype = c->dtype();
      y.dims = Dims();
      for (int64_t d : c->shape().dims()) y.dims->push_back(Known(d));
    }
    return outs;
  }
  if (x == kNoValue) return {};
  if ((onnx && kUnary.count(op) > 0) ||
      (!onnx && (op == "Gelu" || op == "LayerNormalization" ||
                 (op == "ChannelAffine" && node.GetInt("block", 0) == 0)))) {
    // The main output; of the others only Dropout's mask (the normalizations' saved statistics
    // have other dims).
    y.dims = a;
    outs.resize(op == "Dropout" ? std::min<size_t>(outs.size(), 2) : 1);
    if (outs.size() > 1) outs[1] = Derived{DataType::kBool, a};
  } else if (onnx && (op == "Not" || op == "IsNaN" || op == "IsInf")) {
    y.dims = a;
    y.dtype = DataType::kBool;
  } else if (onnx && op == "Cast") {
    y.dims = a;
    y.dtype = DtypeOfOnnx(node.GetInt("to", 0));
  } else if (onnx && (op == "QuantizeLinear" || op == "DequantizeLinear")) {
    y.dims = a;
    y.dtype = op == "DequantizeLinear"
                  ? DtypeOf(node.has_input(1) ? node.inputs[1] : kNoValue)
                  : (node.has_input(2) ? DtypeOf(node.inputs[2]) : DataType::kUint8);
  } else if (onnx && (kBinary.count(op) > 0 || kCompare.count(op) > 0 || op == "Where")) {
    // Variadic Max / Min / Sum / Mean broadcast all inputs; Where all three.
    std::optional<Dims> acc = a;
    for (size_t i = 1; i < node.inputs.size() && acc; ++i) {
      std::optional<Dims> b = DimsOf(node.inputs[i]);
      acc = b ? Broadcast(*acc, *b) : std::nullopt;
    }
    y.dims = acc;
    if (kCompare.count(op) > 0) {
      y.dtype = DataType::kBool;
    } else if (op == "Where") {
      y.dtype = node.inputs.size() > 1 ? DtypeOf(node.inputs[1]) : DataType::kInvalid;
      if (y.dtype == DataType::kInvalid && node.inputs.size() > 2) {
        y.dtype = DtypeOf(node.inputs[2]);
      }
    } else if (y.dtype == DataType::kInvalid && node.inputs.size() > 1) {
      y.dtype = DtypeOf(node.inputs[1]);
    }
  } else if ((onnx && op == "MatMul") || (!onnx && op == "FusedMatMul")) {
    std::optional<Dims> b = DimsOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    if (a && b && a->size() >= 2 && b->size() >= 2) {
      Dims ba(a->begin(), a->end() - 2), bb(b->begin(), b->end() - 2);
      if (std::optional<Dims> lead = Broadcast(ba, bb)) {
        y.dims = *lead;
        y.dims->push_back((*a)[a->size() - 2]);
        y.dims->push_back(b->back());
      }
    }
  } else if ((onnx && op == "Gemm") || (!onnx && op == "FusedGemm")) {
    std::optional<Dims> b = DimsOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    if (a && b && a->size() == 2 && b->size() == 2) {
      y.dims = Dims{(*a)[node.GetInt("transA", 0) != 0 ? 1 : 0],
                    (*b)[node.GetInt("transB", 0) != 0 ? 0 : 1]};
    }
  } else if (!onnx && op == "Attention") {
    // Q [..., S, D], V [..., T, Dv] -> [..., S, Dv].
    std::optional<Dims> v = DimsOf(node.inputs.size() > 2 ? node.inputs[2] : kNoValue);
    if (a && v && !a->empty() && !v->empty()) {
      y.dims = a;
      y.dims->back() = v->back();
    }
  } else if (onnx && op == "Transpose") {
    Ints perm = node.GetInts("perm");
    if (a && perm.empty()) {
      for (int64_t i = static_cast<int64_t>(a->size()) - 1; i >= 0; --i) perm.push_back(i);
    }
    if (a && perm.size() == a->size()) {
      y.dims = Dims();
      for (int64_t p : perm) {
        if (p < 0 || p >= static_cast<int64_t>(a->size())) {
          y.dims.reset();
          break;
        }
        y.dims->push_back((*a)[static_cast<size_t>(p)]);
      }
    }
  } else if (onnx && (kReduce.count(op) > 0 || op == "ArgMax" || op == "ArgMin")) {
    const bool arg = op == "ArgMax" || op == "ArgMin";
    y.dims = Reduce(node, arg);
    if (arg) y.dtype = DataType::kInt64;
  } else if (onnx && op == "Reshape") {
    y.dims = Reshape(node);
  } else if (onnx && op == "Shape") {
    y.dtype = DataType::kInt64;
    if (a) {
      const int64_t r = static_cast<int64_t>(a->size());
      int64_t b = node.GetInt("start", 0), e = node.GetInt("end", r);
      if (b < 0) b += r;
      if (e < 0) e += r;
      b = std::clamp<int64_t>(b, 0, r);
      e = std::clamp<int64_t>(e, b, r);
      y.dims = Dims{Known(e - b)};
    }
  } else if (onnx && op == "Size") {
    y.dtype = DataType::kInt64;
    y.dims = Dims();
  } else if (onnx && op == "ConstantOfShape") {
    y.dtype = DataType::kFloat32;
    if (const Attribute* v = node.FindAttribute("value");
        v != nullptr && v->type == AttributeType::kTensor && v->t) {
      y.dtype = v->t->dtype();
    }
    y.dims = TargetDims(x);
  } else if (onnx && op == "Gather") {
    // data [d0.., d_axis, ..] with indices [i..] -> [d0.., i.., ..]: the indices' dims decide.
    std::optional<Dims> idx = DimsOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    if (a && idx) {
      if (std::optional<size_t> ax = NormAxis(node.GetInt("axis", 0), a->size())) {
        y.dims = Dims(a->begin(), a->begin() + static_cast<int64_t>(*ax));
        y.dims->insert(y.dims->end(), idx->begin(), idx->end());
        y.dims->insert(y.dims->end(), a->begin() + static_cast<int64_t>(*ax) + 1, a->end());
      }
    }
  } else if (onnx && op == "GatherElements") {
    y.dims = DimsOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
  } else if (onnx && op == "Flatten") {
    if (a) {
      int64_t axis = node.GetInt("axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(a->size());
      if (axis >= 0 && axis <= static_cast<int64_t>(a->size())) {
        const size_t ax = static_cast<size_t>(axis);
        y.dims = Dims{ProductDim(*a, 0, ax), ProductDim(*a, ax, a->size())};
      }
    }
  } else if (onnx && op == "Squeeze") {
    bool present = false;
    std::optional<Ints> axes = IntsInputOrAttr(node, 1, "axes", &present);
    if (a && axes) {
      if (present) {
        if (std::optional<std::vector<size_t>> ax = NormAxes(*axes, a->size())) {
          y.dims = Dims();
          for (size_t i = 0; i < a->size(); ++i) {
            if (std::find(ax->begin(), ax->end(), i) == ax->end()) y.dims->push_back((*a)[i]);
          }
        }
      } else if (std::all_of(a->begin(), a->end(), [](const Dim& d) { return d.known(); })) {
        // No axes: every dim of size 1 goes, which needs every dim known.
        y.dims = Dims();
        for (const Dim& d : *a) {
          if (d.value != 1) y.dims->push_back(d);
        }
      }
    }
  } else if (onnx && op == "Unsqueeze") {
    bool present = false;
    std::optional<Ints> axes = IntsInputOrAttr(node, 1, "axes", &present);
    if (a && axes && present) {
      const size_t r = a->size() + axes->size();
      if (std::optional<std::vector<size_t>> ax = NormAxes(*axes, r)) {
        y.dims = Dims();
        size_t k = 0;
        for (size_t i = 0; i < r; ++i) {
          if (std::find(ax->begin(), ax->end(), i) != ax->end())
            y.dims->push_back(Known(1));
          else
            y.dims->push_back((*a)[k++]);
        }
      }
    }
  } else if (onnx && op == "Expand") {
    std::optional<Dims> t = TargetDims(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    if (a && t) y.dims = Broadcast(*a, *t);
  } else if (onnx && op == "Tile") {
    std::optional<Ints> rep = IntsOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    if (a && rep && rep->size() == a->size()) {
      y.dims = Dims();
      for (size_t i = 0; i < a->size(); ++i) {
        if ((*rep)[i] < 0) {
          y.dims.reset();
          break;
        }
        y.dims->push_back(MulDim((*a)[i], Known((*rep)[i])));
      }
    } else if (a && !rep) {
      y.dims = Dims(a->size(), Dim{});  // computed repeats: only the rank
    }
  } else if (onnx && op == "GatherND") {
    // data [d...] (rank r), indices [i..., k]: [i..., d[batch_dims + k]...].
    std::optional<Dims> idx = DimsOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    const int64_t b = node.GetInt("batch_dims", 0);
    if (a && idx && !idx->empty() && idx->back().known() && b >= 0) {
      const int64_t k = idx->back().value;
      if (b + k <= static_cast<int64_t>(a->size()) && b < static_cast<int64_t>(idx->size())) {
        y.dims = Dims(idx->begin(), idx->end() - 1);
        y.dims->insert(y.dims->end(), a->begin() + b + k, a->end());
      }
    }
  } else if (onnx && op == "Pad") {
    bool present = false;
    std::optional<Ints> pads = IntsInputOrAttr(node, 1, "pads", &present);
    std::optional<Ints> axes;
    if (node.has_input(3)) {
      axes = IntsOf(node.inputs[3]);
    } else if (a) {
      axes = Ints();
      for (size_t i = 0; i < a->size(); ++i) axes->push_back(static_cast<int64_t>(i));
    }
    if (a && pads && axes && pads->size() == 2 * axes->size()) {
      if (std::optional<std::vector<size_t>> ax = NormAxes(*axes, a->size())) {
        y.dims = a;
        for (size_t i = 0; i < ax->size(); ++i) {
          Dim& d = (*y.dims)[(*ax)[i]];
          const int64_t pb = (*pads)[i], pe = (*pads)[i + ax->size()];
          if (d.known()) {
            d = AddDim(d, Known(pb + pe));
            if (!d.known()) y.dims.reset();  // a negative size: invalid
            if (!y.dims) break;
          } else if (pb != 0 || pe != 0) {
            d = Dim{};
          }
        }
      }
    } else if (a && !pads) {
      // Computed pads: the rank stays, the padded axes are unknown (all of them, unless the
      // axes input says which).
      y.dims = Dims(a->size(), Dim{});
    }
  } else if (onnx && op == "Slice") {
    y.dims = Slice(node);
  } else if (onnx && op == "Split") {
    std::vector<Derived> s = Split(node);
    if (!s.empty()) return s;
  } else if (onnx && op == "Concat") {
    // The axis dim is the sum (where provable); the others are equal in every input.
    std::optional<size_t> rank;
    for (int in : node.inputs) {
      if (std::optional<Dims> d = DimsOf(in)) {
        if (rank && *rank != d->size()) return outs;
        rank = d->size();
      }
    }
    std::optional<size_t> ax = rank ? NormAxis(node.GetInt("axis", 0), *rank) : std::nullopt;
    if (ax) {
      Dims out(*rank, Dim{});
      Dim sum = Known(0);
      for (int in : node.inputs) {
        std::optional<Dims> d = DimsOf(in);
        sum = d ? AddDim(sum, (*d)[*ax]) : Dim{};
        if (!d) continue;
        for (size_t i = 0; i < *rank; ++i) {
          if (i != *ax && Weight((*d)[i]) > Weight(out[i])) out[i] = (*d)[i];
        }
      }
      out[*ax] = sum;
      y.dims = out;
    }
    for (size_t i = 1; i < node.inputs.size() && y.dtype == DataType::kInvalid; ++i) {
      y.dtype = DtypeOf(node.inputs[i]);
    }
  } else if ((onnx && op == "Conv") ||
             (!onnx && op == "FusedConv" && node.GetInt("x_block", 0) == 0 &&
              node.GetInt("y_block", 0) == 0)) {
    y.dims = Window(node, /*conv=*/true, /*transpose=*/false);
  } else if (onnx && op == "ConvTranspose") {
    y.dims = Window(node, /*conv=*/true, /*transpose=*/true);
  } else if (onnx && kPools.count(op) > 0) {
    y.dims = Window(node, /*conv=*/false, /*transpose=*/false);
    if (op == "MaxPool" && outs.size() > 1) outs[1] = Derived{DataType::kInt64, y.dims};
  } else if (onnx && (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool")) {
    if (a && a->size() >= 2) {
      y.dims = Dims{(*a)[0], (*a)[1]};
      y.dims->resize(a->size(), Known(1));
    }
  } else if (onnx && (op == "Resize" || op == "Upsample")) {
    y.dims = Resize(node);
  } else if (onnx && op == "TopK") {
    // Values and indices: x's dims with k along the axis.
    std::optional<Ints> k;
    if (node.has_input(1)) {
      k = IntsOf(node.inputs[1]);
    } else if (node.FindAttribute("k") != nullptr) {
      k = Ints{node.GetInt("k", 0)};
    }
    if (a) {
      if (std::optional<size_t> ax = NormAxis(node.GetInt("axis", -1), a->size())) {
        y.dims = a;
        (*y.dims)[*ax] = k && k->size() == 1 && (*k)[0] >= 0 ? Known((*k)[0]) : Dim{};
      }
    }
    if (outs.size() > 1) outs[1] = Derived{DataType::kInt64, y.dims};
  } else if (onnx && op == "Einsum") {
    // The dtype only: einsum_lowering works out the dims it needs itself.
    y.dims.reset();
  } else if (onnx && op == "NonZero") {
    y.dtype = DataType::kInt64;
    if (a) y.dims = Dims{Known(static_cast<int64_t>(a->size())), Dim{}};
  } else if (onnx && op == "Range") {
    // A 1-D output; its length when start, limit and delta are known integers.
    y.dims = Dims{Dim{}};
    std::optional<Ints> s = IntsOf(x);
    std::optional<Ints> l = IntsOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    std::optional<Ints> d = IntsOf(node.inputs.size() > 2 ? node.inputs[2] : kNoValue);
    if (s && l && d && s->size() == 1 && l->size() == 1 && d->size() == 1 && (*d)[0] != 0) {
      const double n =
          std::ceil(static_cast<double>((*l)[0] - (*s)[0]) / static_cast<double>((*d)[0]));
      (*y.dims)[0] = Known(std::max<int64_t>(0, static_cast<int64_t>(n)));
    }
  } else {
    return {};
  }
  return outs;
}

// Conv / ConvTranspose / FusedConv (`conv`) and the pools: [N, C, spatial...] by the kernels'
// window rules, per spatial axis whose input size is known.
std::optional<Dims> Propagator::Window(const Node& node, bool conv, bool transpose) const {
  std::optional<Dims> a = DimsOf(node.inputs[0]);
  if (!a || a->size() < 3) return std::nullopt;
  const size_t rank = a->size() - 2;
  std::optional<Dims> w;
  if (conv) {
    w = DimsOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    if (!w || w->size() != a->size()) return std::nullopt;
  }
  ref::WindowAttrs wa;
  const std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    wa.auto_pad = ref::AutoPad::kNotSet;
  } else if (auto_pad == "SAME_UPPER") {
    wa.auto_pad = ref::AutoPad::kSameUpper;
  } else if (auto_pad == "SAME_LOWER") {
    wa.auto_pad = ref::AutoPad::kSameLower;
  } else if (auto_pad == "VALID") {
    wa.auto_pad = ref::AutoPad::kValid;
  } else {
    return std::nullopt;
  }
  wa.kernel_shape = node.GetInts("kernel_shape");
  wa.strides = node.GetInts("strides");
  wa.dilations = node.GetInts("dilations");
  wa.pads = node.GetInts("pads");
  wa.ceil_mode = node.GetInt("ceil_mode", 0) != 0;
  if (wa.kernel_shape.empty() && conv) {
    for (size_t d = 0; d < rank; ++d) {
      if (!(*w)[d + 2].known()) return std::nullopt;
      wa.kernel_shape.push_back((*w)[d + 2].value);
    }
  }
  // The checks ReadWindowAttrs makes; a node failing them errors at run time: left alone.
  auto sized = [&](const Ints& v, size_t n) { return v.empty() || v.size() == n; };
  if (wa.kernel_shape.size() != rank || !sized(wa.strides, rank) || !sized(wa.dilations, rank) ||
      !sized(wa.pads, 2 * rank)) {
    return std::nullopt;
  }
  auto at_least = [](const Ints& v, int64_t lo) {
    return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x >= lo && x <= INT32_MAX; });
  };
  if (!at_least(wa.kernel_shape, 1) || !at_least(wa.strides, 1) || !at_least(wa.dilations, 1) ||
      !at_least(wa.pads, 0)) {
    return std::nullopt;
  }
  if (wa.auto_pad != ref::AutoPad::kNotSet &&
      std::any_of(wa.pads.begin(), wa.pads.end(), [](int64_t p) { return p != 0; })) {
    return std::nullopt;
  }
  Dims out = {(*a)[0], (*a)[1]};
  if (conv && !transpose) out[1] = (*w)[0];
  if (transpose) out[1] = MulDim((*w)[1], Known(node.GetInt("group", 1)));
  Ints output_shape = node.GetInts("output_shape");
  if (output_shape.size() == rank + 2)
    output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  const Ints output_padding = node.GetInts("output_padding");
  if (transpose && (!sized(output_shape, rank) || !sized(output_padding, rank))) {
    return std::nullopt;
  }
  for (size_t d = 0; d < rank; ++d) {
    const Dim& in = (*a)[d + 2];
    const int64_t k = wa.kernel_shape[d];
    const int64_t s = wa.strides.empty() ? 1 : wa.strides[d];
    const int64_t dil = wa.dilations.empty() ? 1 : wa.dilations[d];
    const int64_t pb = wa.pads.empty() ? 0 : wa.pads[d];
    const int64_t pe = wa.pads.empty() ? 0 : wa.pads[d + rank];
    if (transpose) {
      // kernels/ref/conv_transpose.cc: output_shape, else in * s (SAME), else
      // s * (in - 1) + output_padding + extent - pads.
      if (!output_shape.empty()) {
        out.push_back(Known(output_shape[d]));
        continue;
      }
      const int64_t adj = output_padding.empty() ? 0 : output_padding[d];
      const bool same =
          wa.auto_pad == ref::AutoPad::kSameUpper || wa.auto_pad == ref::AutoPad::kSameLower;
      const bool valid = wa.auto_pad == ref::AutoPad::kValid;
      // out = s * (in - 1) + grow: with s = 1 and grow = 1 (or SAME) a dim of unknown size
      // stays itself.
      const int64_t grow = adj + (k - 1) * dil + 1 - (valid ? 0 : pb + pe);
      if (!in.known() || in.value < 1) {
        out.push_back(s == 1 && (same || grow == 1) ? in : Dim{});
        continue;
      }
      if (same) {
        out.push_back(Known(in.value * s));
        continue;
      }
      const int64_t o = s * (in.value - 1) + grow;
      out.push_back(o >= 0 ? Known(o) : Dim{});
      continue;
    }
    if (!in.known()) {
      // out = floor((in + pads - extent) / s) + 1, or in for SAME with s = 1: with s = 1 and
      // pads = extent - 1 (a 3x3 conv padded by 1) a dim of unknown size stays itself.
      const int64_t extent = (k - 1) * dil + 1;
      const bool same =
          wa.auto_pad == ref::AutoPad::kSameUpper || wa.auto_pad == ref::AutoPad::kSameLower;
      const int64_t pads = wa.auto_pad == ref::AutoPad::kValid ? 0 : pb + pe;
      out.push_back(s == 1 && (same || pads == extent - 1) ? in : Dim{});
      continue;
    }
    // One axis at a time through the kernels' own resolution.
    ref::WindowAttrs one;
    one.auto_pad = wa.auto_pad;
    one.ceil_mode = wa.ceil_mode;
    one.strides = {s};
    one.dilations = {dil};
    one.pads = {pb, pe};
    const int64_t in_dim[1] = {in.value}, k_dim[1] = {k};
    Result<ref::WindowGeometry> g = ref::ResolveWindow(node.op_type, one, in_dim, k_dim);
    if (!g.ok()) return std::nullopt;  // the window does not fit: an error at run time
    out.push_back(Known(g->out[0]));
  }
  return out;
}

std::optional<Dims> Propagator::Slice(const Node& node) const {
  std::optional<Dims> a = DimsOf(node.inputs[0]);
  if (!a) return std::nullopt;
  std::optional<Ints> starts, ends, axes, steps;
  if (node.inputs.size() > 1) {  // opset 10+: inputs
    starts = IntsOf(node.inputs[1]);
    ends = IntsOf(node.inputs.size() > 2 ? node.inputs[2] : kNoValue);
    if (node.has_input(3)) axes = IntsOf(node.inputs[3]);
    if (node.has_input(4)) {
      steps = IntsOf(node.inputs[4]);
      if (!steps) return Dims(a->size(), Dim{});
    }
    if (!node.has_input(3)) {
      // Axes 0..n-1 for n = the number of starts, known from a constant or the input's type.
      std::optional<Dims> sd = DimsOf(node.inputs[1]);
      int64_t n = starts ? static_cast<int64_t>(starts->size()) : -1;
      if (n < 0 && sd && sd->size() == 1 && (*sd)[0].known()) n = (*sd)[0].value;
      if (n >= 0) {
        axes = Ints();
        for (int64_t i = 0; i < n; ++i) axes->push_back(i);
      }
    }
  } else {  // opset 1-9: attributes
    starts = node.GetInts("starts");
    ends = node.GetInts("ends");
    axes = node.GetInts("axes");
    if (axes->empty()) {
      for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
    }
  }
  if (!axes) return Dims(a->size(), Dim{});  // the rank is all that is known
  std::optional<std::vector<size_t>> ax = NormAxes(*axes, a->size());
  if (!ax) return std::nullopt;
  Dims out = *a;
  if (!starts || !ends) {
    for (size_t i : *ax) out[i] = Dim{};
    return out;
  }
  if (starts->size() != ax->size() || ends->size() != ax->size() ||
      (steps && steps->size() != ax->size())) {
    return std::nullopt;
  }
  for (size_t i = 0; i < ax->size(); ++i) {
    std::optional<Dim> d =
        SliceDim((*a)[(*ax)[i]], (*starts)[i], (*ends)[i], steps ? (*steps)[i] : 1);
    if (!d) return std::nullopt;
    out[(*ax)[i]] = *d;
  }
  return out;
}

std::vector<Derived> Propagator::Split(const Node& node) const {
  std::optional<Dims> a = DimsOf(node.inputs[0]);
  if (!a) return {};
  std::optional<size_t> ax = NormAxis(node.GetInt("axis", 0), a->size());
  if (!ax) return {};
  const size_t n = node.outputs.size();
  const Dim& whole = (*a)[*ax];
  std::vector<Dim> parts(n, Dim{});
  bool present = false;
  std::optional<Ints> split = IntsInputOrAttr(node, 1, "split", &present);
  if (present && split && !split->empty()) {
    if (split->size() != n) return {};
    for (size_t i = 0; i < n; ++i) {
      if ((*split)[i] < 0) return {};
      parts[i] = Known((*split)[i]);
    }
  } else if (!present || (split && split->empty())) {
    // Equal parts (the kernel rejects a remainder).
    if (whole.known() && whole.value % static_cast<int64_t>(n) == 0) {
      std::fill(parts.begin(), parts.end(), Known(whole.value / static_cast<int64_t>(n)));
    } else if (n == 1) {
      parts[0] = whole;
    }
  }
  std::vector<Derived> outs(n);
  for (size_t i = 0; i < n; ++i) {
    outs[i].dtype = DtypeOf(node.inputs[0]);
    outs[i].dims = a;
    (*outs[i].dims)[*ax] = parts[i];
  }
  return outs;
}

std::optional<Dims> Propagator::Reduce(const Node& node, bool arg) const {
  std::optional<Dims> a = DimsOf(node.inputs[0]);
  if (!a) return std::nullopt;
  const bool keep = node.GetInt("keepdims", 1) != 0;
  Ints axes;
  if (arg) {
    axes = {node.GetInt("axis", 0)};
  } else {
    bool present = false;
    std::optional<Ints> given = IntsInputOrAttr(node, 1, "axes", &present);
    if (!given) return std::nullopt;
    axes = *given;
    if (axes.empty()) {
      if (node.GetInt("noop_with_empty_axes", 0) != 0) return a;
      for (size_t i = 0; i < a->size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
  }
  std::optional<std::vector<size_t>> ax = NormAxes(axes, a->size());
  if (!ax) return std::nullopt;
  Dims out;
  for (size_t i = 0; i < a->size(); ++i) {
    const bool reduced = std::find(ax->begin(), ax->end(), i) != ax->end();
    if (!reduced)
      out.push_back((*a)[i]);
    else if (keep)
      out.push_back(Known(1));
  }
  return out;
}

// Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) and Upsample (7-8: attribute
// scales; 9: X, scales), out = sizes or floor(scale * in) in double, as the kernels compute it.
std::optional<Dims> Propagator::Resize(const Node& node) const {
  std::optional<Dims> a = DimsOf(node.inputs[0]);
  if (!a) return std::nullopt;
  if (node.FindAttribute("axes") != nullptr ||
      node.GetString("keep_aspect_ratio_policy", "stretch") != "stretch") {
    return Dims(a->size(), Dim{});
  }
  const bool roi_input = node.op_type == "Resize" && ed_.graph().OpsetFor("") >= 11;
  const int scales_input = roi_input ? 2 : 1;
  if (roi_input && node.has_input(3)) {
    std::optional<Ints> sizes = IntsOf(node.inputs[3]);
    if (sizes && !sizes->empty()) {
      if (sizes->size() != a->size()) return std::nullopt;
      Dims out;
      for (int64_t s : *sizes) out.push_back(s >= 0 ? Known(s) : Dim{});
      return out;
    }
    if (!sizes) return Dims(a->size(), Dim{});
  }
  std::optional<std::vector<double>> scales;
  if (node.FindAttribute("scales") != nullptr) {
    std::vector<float> f = node.GetFloats("scales");
    scales = std::vector<double>(f.begin(), f.end());
  } else if (node.has_input(scales_input)) {
    scales = FloatsOf(node.inputs[static_cast<size_t>(scales_input)]);
  }
  if (!scales) return Dims(a->size(), Dim{});
  if (scales->size() != a->size()) return std::nullopt;
  Dims out;
  for (size_t d = 0; d < a->size(); ++d) {
    const double s = (*scales)[d];
    const Dim& in = (*a)[d];
    if (!(s > 0) || !std::isfinite(s)) return std::nullopt;
    if (s == 1.0) {
      out.push_back(in);  // floor(1 * in) = in, symbols included
    } else if (in.known()) {
      const double n = std::floor(s * static_cast<double>(in.value));
      if (n > 9.0e15) return std::nullopt;
      out.push_back(Known(static_cast<int64_t>(n)));
    } else {
      out.push_back(Dim{});
    }
  }
  return out;
}

std::optional<Dims> Propagator::Reshape(const Node& node) const {
  if (node.inputs.size() < 2) return std::nullopt;
  const std::optional<Dims> in = DimsOf(node.inputs[0]);
  const bool allowzero = node.GetInt("allowzero", 0) != 0;
  std::optional<SymTensor> sv = SvOf(node.inputs[1]);
  if (!sv || sv->shape.size() > 1) {
    // A computed target of known length: only the rank.
    std::optional<Dims> t = TargetDims(node.inputs[1]);
    return t ? std::optional<Dims>(Dims(t->size(), Dim{})) : std::nullopt;
  }
  Dims out;
  int minus_one = -1;
  for (size_t i = 0; i < sv->v.size(); ++i) {
    const Sym& t = sv->v[i];
    if (t.known && t.value == -1) {
      if (minus_one >= 0) return std::nullopt;  // two -1 entries: invalid
      minus_one = static_cast<int>(i);
      out.push_back(Dim{});
    } else if (t.known && t.value == 0 && !allowzero) {
      // Copies the input's dim (unknown when the input's rank is).
      if (in && i >= in->size()) return std::nullopt;
      out.push_back(in ? (*in)[i] : Dim{});
    } else if (t.known && t.value >= 0) {
      out.push_back(Known(t.value));
    } else if (!t.known && !t.symbol.empty()) {
      out.push_back(Dim{-1, t.symbol});
    } else {
      out.push_back(Dim{});  // unknown (or invalid) entry
    }
  }
  if (minus_one >= 0 && in) {
    // Known product and symbols of the input, divided by those of the other entries.
    int64_t known = 1;
    std::vector<std::string> syms;
    for (const Dim& d : *in) {
      if (d.known()) {
        if (__builtin_mul_overflow(known, d.value, &known)) return out;
      } else if (!d.symbol.empty()) {
        syms.push_back(d.symbol);
      } else {
        return out;
      }
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int>(i) == minus_one) continue;
      const Dim& d = out[i];
      if (d.known()) {
        if (d.value == 0 || known % d.value != 0) return out;
        known /= d.value;
      } else if (!d.symbol.empty()) {
        auto it = std::find(syms.begin(), syms.end(), d.symbol);
        if (it == syms.end()) return out;
        syms.erase(it);
      } else {
        return out;
      }
    }
    if (syms.empty())
      out[static_cast<size_t>(minus_one)] = Known(known);
    else if (syms.size() == 1 && known == 1)
      out[static_cast<size_t>(minus_one)] = Dim{-1, syms[0]};
  }
  return out;
}

// The shape value `node` writes (its first output), when its inputs are shape values.
std::optional<SymTensor> Propagator::Evaluate(const Node& node) const {
  const std::string& op = node.op_type;
  const int out = node.outputs[0];
  if (op == "Constant") {
    SymTensor s;
    if (const Attribute* v = node.FindAttribute("value_int")) {
      s.v.push_back(KnownSym(v->i));
      return s;
    }
    if (const Attribute* v = node.FindAttribute("value_ints");
        v != nullptr && static_cast<int64_t>(v->ints.size()) <= kMaxShapeValue) {
      s.shape = {static_cast<int64_t>(v->ints.size())};
      for (int64_t i : v->ints) s.v.push_back(KnownSym(i));
      return s;
    }
    return SvOf(out);  // the `value` tensor
  }
  if (node.inputs.empty() || node.inputs[0] == kNoValue) return std::nullopt;
  const int x = node.inputs[0];
  if (op == "Shape") {
    std::optional<Dims> d = DimsOf(x);
    if (!d) return std::nullopt;
    const int64_t r = static_cast<int64_t>(d->size());
    int64_t b = node.GetInt("start", 0), e = node.GetInt("end", r);
    if (b < 0) b += r;
    if (e < 0) e += r;
    b = std::clamp<int64_t>(b, 0, r);
    e = std::clamp<int64_t>(e, b, r);
    SymTensor s;
    s.shape = {e - b};
    for (int64_t i = b; i < e; ++i) s.v.push_back(SymOfDim((*d)[static_cast<size_t>(i)]));
    return s;
  }
  if (op == "Size") {
    std::optional<Dims> d = DimsOf(x);
    if (!d) return std::nullopt;
    SymTensor s;
    s.v.push_back(SymOfDim(ProductDim(*d, 0, d->size())));
    return s;
  }
  if (op == "ConstantOfShape") {
    std::optional<Ints> shape = IntsOf(x);
    if (!shape || !SmallCount(*shape)) return std::nullopt;
    int64_t value = 0;
    if (const Attribute* v = node.FindAttribute("value");
        v != nullptr && v->type == AttributeType::kTensor && v->t) {
      if (std::optional<Ints> i = IntElements(*v->t, 1); i && i->size() == 1) {
        value = (*i)[0];
      } else if (std::optional<std::vector<double>> f = FloatElements(*v->t, 1);
                 f && f->size() == 1 && std::floor((*f)[0]) == (*f)[0] &&
                 std::abs((*f)[0]) < 1e15) {
        value = static_cast<int64_t>((*f)[0]);
      } else {
        return std::nullopt;
      }
    }
    SymTensor s;
    s.shape = *shape;
    s.v.assign(static_cast<size_t>(*SmallCount(*shape)), KnownSym(value));
    return s;
  }
  std::optional<SymTensor> a = SvOf(x);
  if (!a) return std::nullopt;
  // The output's shape, where the shape-moving ops need it (their types are derived first).
  auto out_shape = [&]() -> std::optional<Ints> {
    std::optional<Dims> d = DimsOf(out);
    if (!d) return std::nullopt;
    Ints s;
    for (const Dim& k : *d) {
      if (!k.known()) return std::nullopt;
      s.push_back(k.value);
    }
    return s;
  };
  if (kSvSameElements.count(op) > 0) {
    std::optional<Ints> s = out_shape();
    std::optional<int64_t> n = s ? SmallCount(*s) : std::nullopt;
    if (!n || *n != static_cast<int64_t>(a->v.size())) return std::nullopt;
    a->shape = *s;
    return a;
  }
  if (op == "Cast") {
    const DataType to = DtypeOfOnnx(node.GetInt("to", 0));
    for (Sym& e : a->v) {
      if (!e.known) {
        // A dim is a nonnegative int64: only a cast to a 64-bit integer keeps it.
        if (to != DataType::kInt64 && to != DataType::kUint64) e = Sym{};
        continue;
      }
      const int64_t v = e.value;
      bool fits = false;
      switch (to) {
        case DataType::kInt64:
          fits = true;
          break;
        case DataType::kInt32:
          fits = v >= INT32_MIN && v <= INT32_MAX;
          break;
        case DataType::kUint64:
        case DataType::kUint32:
          fits = v >= 0 && (to == DataType::kUint64 || v <= UINT32_MAX);
          break;
        case DataType::kBool:
          e.value = v != 0;
          fits = true;
          break;
        case DataType::kFloat32:
          fits = v >= -(int64_t{1} << 24) && v <= (int64_t{1} << 24);  // exact in float
          break;
        case DataType::kFloat64:
          fits = v >= -(int64_t{1} << 53) && v <= (int64_t{1} << 53);
          break;
        default:
          break;
      }
      if (!fits) e = Sym{};
    }
    return a;
  }
  if (op == "Concat") {
    const size_t rank = a->shape.size();
    std::optional<size_t> ax = NormAxis(node.GetInt("axis", 0), rank);
    if (!ax) return std::nullopt;
    std::vector<SymTensor> ins;
    for (int in : node.inputs) {
      std::optional<SymTensor> s = SvOf(in);
      if (!s || s->shape.size() != rank) return std::nullopt;
      for (size_t d = 0; d < rank; ++d) {
        if (d != *ax && s->shape[d] != a->shape[d]) return std::nullopt;
      }
      ins.push_back(std::move(*s));
    }
    SymTensor r;
    r.shape = a->shape;
    r.shape[*ax] = 0;
    for (const SymTensor& s : ins) r.shape[*ax] += s.shape[*ax];
    if (!SmallCount(r.shape)) return std::nullopt;
    int64_t outer = 1;
    for (size_t d = 0; d < *ax; ++d) outer *= a->shape[d];
    for (int64_t o = 0; o < outer; ++o) {
      for (const SymTensor& s : ins) {
        const int64_t chunk = outer == 0 ? 0 : static_cast<int64_t>(s.v.size()) / outer;
        for (int64_t i = 0; i < chunk; ++i) r.v.push_back(s.v[static_cast<size_t>(o * chunk + i)]);
      }
    }
    return r;
  }
  if (op == "Gather") {
    std::optional<SymTensor> idx = SvOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    std::optional<size_t> ax = NormAxis(node.GetInt("axis", 0), a->shape.size());
    if (!idx || !ax) return std::nullopt;
    SymTensor r;
    r.shape.assign(a->shape.begin(), a->shape.begin() + static_cast<int64_t>(*ax));
    r.shape.insert(r.shape.end(), idx->shape.begin(), idx->shape.end());
    r.shape.insert(r.shape.end(), a->shape.begin() + static_cast<int64_t>(*ax) + 1, a->shape.end());
    if (!SmallCount(r.shape)) return std::nullopt;
    const int64_t dim = a->shape[*ax];
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < *ax; ++d) outer *= a->shape[d];
    for (size_t d = *ax + 1; d < a->shape.size(); ++d) inner *= a->shape[d];
    for (int64_t o = 0; o < outer; ++o) {
      for (const Sym& i : idx->v) {
        if (!i.known) return std::nullopt;
        const int64_t k = i.value < 0 ? i.value + dim : i.value;
        if (k < 0 || k >= dim) return std::nullopt;
        for (int64_t j = 0; j < inner; ++j) {
          r.v.push_back(a->v[static_cast<size_t>((o * dim + k) * inner + j)]);
        }
      }
    }
    return r;
  }
  if (op == "Slice") return EvaluateSlice(node, *a);
  if (op == "Transpose") {
    const size_t rank = a->shape.size();
    Ints perm = node.GetInts("perm");
    if (perm.empty()) {
      for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    }
    std::optional<std::vector<size_t>> p = NormAxes(perm, rank);
    if (!p || p->size() != rank) return std::nullopt;
    SymTensor r;
    for (size_t d : *p) r.shape.push_back(a->shape[d]);
    const Ints in_strides = Strides(a->shape);
    Ints coord(rank, 0);
    for (size_t i = 0; i < a->v.size(); ++i) {
      int64_t k = 0;
      for (size_t d = 0; d < rank; ++d) k += coord[d] * in_strides[(*p)[d]];
      r.v.push_back(a->v[static_cast<size_t>(k)]);
      for (size_t d = rank; d-- > 0;) {
        if (++coord[d] < r.shape[d]) break;
        coord[d] = 0;
      }
    }
    return r;
  }
  if (op == "Expand") {
    std::optional<Ints> target = IntsOf(node.inputs.size() > 1 ? node.inputs[1] : kNoValue);
    std::optional<Ints> shape = target ? BroadcastShape(a->shape, *target) : std::nullopt;
    if (!shape || !SmallCount(*shape)) return std::nullopt;
    SymTensor r;
    r.shape = *shape;
    for (size_t i : BroadcastIndex(a->shape, *shape)) r.v.push_back(a->v[i]);
    return r;
  }
  if (op == "Neg" || op == "Abs" || op == "Not" || op == "Floor" || op == "Ceil" || op == "Round") {
    for (Sym& e : a->v) {
      if (op == "Neg")
        e = e.known && e.value != INT64_MIN ? KnownSym(-e.value) : Sym{};
      else if (op == "Abs")
        e = e.known ? (e.value != INT64_MIN ? KnownSym(std::abs(e.value)) : Sym{}) : e;
      else if (op == "Not")
        e = e.known ? KnownSym(e.value == 0) : Sym{};
      // Floor / Ceil / Round of integral values change nothing.
    }
    return a;
  }
  if (kSvBinary.count(op) > 0 || op == "Where") {
    // Integer arithmetic only: a float operand (Div of floats) does not truncate.
    for (int in : node.inputs) {
      const DataType t = DtypeOf(in);
      if (op == "Where" && in == x) continue;
      if (!IsIntegerOrBool(t)) return std::nullopt;
    }
    std::vector<SymTensor> ins = {std::move(*a)};
    for (size_t i = 1; i < node.inputs.size(); ++i) {
      std::optional<SymTensor> s = SvOf(node.inputs[i]);
      if (!s) return std::nullopt;
      ins.push_back(std::move(*s));
    }
    if (ins.size() != (op == "Where" ? 3u : 2u)) return std::nullopt;
    Ints shape = ins[0].shape;
    for (size_t i = 1; i < ins.size(); ++i) {
      std::optional<Ints> b = BroadcastShape(shape, ins[i].shape);
      if (!b) return std::nullopt;
      shape = *b;
    }
    if (!SmallCount(shape)) return std::nullopt;
    std::vector<std::vector<size_t>> idx;
    for (const SymTensor& s : ins) idx.push_back(BroadcastIndex(s.shape, shape));
    SymTensor r;
    r.shape = shape;
    const bool fmod = node.GetInt("fmod", 0) != 0;
    for (size_t i = 0; i < idx[0].size(); ++i) {
      const Sym& p = ins[0].v[idx[0][i]];
      const Sym& q = ins[1].v[idx[1][i]];
      if (op != "Where") {
        r.v.push_back(Arith(op, p, q, fmod));
        continue;
      }
      const Sym& s = ins[2].v[idx[2][i]];
      if (p.known)
        r.v.push_back(p.value != 0 ? q : s);
      else
        r.v.push_back(SameSym(q, s) ? q : Sym{});
    }
    return r;
  }
  return std::nullopt;
}

std::optional<SymTensor> Propagator::EvaluateSlice(const Node& node, const SymTensor& a) const {
  if (node.inputs.size() < 3) return std::nullopt;  // only the opset 10+ form for shape values
  std::optional<Ints> starts = IntsOf(node.inputs[1]), ends = IntsOf(node.inputs[2]);
  if (!starts || !ends || starts->size() != ends->size()) return std::nullopt;
  const size_t rank = a.shape.size();
  Ints axes, steps(starts->size(), 1);
  if (node.has_input(3)) {
    std::optional<Ints> given = IntsOf(node.inputs[3]);
    if (!given) return std::nullopt;
    axes = *given;
  } else {
    for (size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (node.has_input(4)) {
    std::optional<Ints> given = IntsOf(node.inputs[4]);
    if (!given) return std::nullopt;
    steps = *given;
  }
  std::optional<std::vector<size_t>> ax = NormAxes(axes, rank);
  if (!ax || ax->size() != starts->size() || steps.size() != starts->size()) return std::nullopt;
  Ints first(rank, 0), step(rank, 1), shape = a.shape;
  for (size_t i = 0; i < ax->size(); ++i) {
    const size_t d = (*ax)[i];
    std::optional<SliceRange> r = CheckedClampSlice((*starts)[i], (*ends)[i], steps[i], a.shape[d]);
    if (!r) return std::nullopt;
    first[d] = r->start;
    step[d] = steps[i];
    shape[d] = r->count;
  }
  SymTensor out;
  out.shape = shape;
  const std::optional<int64_t> n = SmallCount(shape);
  if (!n) return std::nullopt;
  const Ints strides = Strides(a.shape);
  Ints coord(rank, 0);
  for (int64_t i = 0; i < *n; ++i) {
    int64_t k = 0;
    for (size_t d = 0; d < rank; ++d) k += (first[d] + coord[d] * step[d]) * strides[d];
    out.v.push_back(a.v[static_cast<size_t>(k)]);
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

class TypePropagationPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    return Propagator(ed).Run();
  }
};

}  // namespace

std::unique_ptr<Pass> CreateTypePropagationPass() {
  return std::make_unique<TypePropagationPass>();
}

}  // namespace kiln::opt
