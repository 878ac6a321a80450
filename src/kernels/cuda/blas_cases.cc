// SPDX-License-Identifier: Apache-2.0
// Cases of the CUDA matrix products (blas.cc): MatMul, Gemm, ai.kiln FusedMatMul / FusedGemm,
// in FP32, FP16 and BF16, over the batch layouts (2-D, batched, A's batch folded into M,
// broadcast A / B / both, 1-D operands), Gemm's transposes, alpha / beta and the shapes of C,
// every fused activation, the cuBLASLt epilogues and the own one, K = 0, empty outputs, a
// 75,000-element output, and the half-precision weight forms.
//
// Tolerances. FP32 runs on TF32 tensor cores by default: both operands rounded to 11
// significant bits, so a K-term dot product of values in [-1, 1] is off by about
// 4e-4 * sqrt(K / 9) (one standard deviation) from the reference's; the cases allow six of
// those, and at least 5e-3. FP16 / BF16 products accumulate in FP32 and are rounded once to the
// output type: the default tolerance. The half-weight forms round A to the weight's type (FP16:
// 11 significant bits, as TF32; BF16: 8 bits, about 2.3e-3 per product, so a K = 48 dot product
// is off by about 5e-3: 4e-2 allowed).

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/test_cases.h"

namespace kiln::cuda::testing {
namespace {

using ref::testing::FloatAttr;
using ref::testing::FloatsAttr;
using ref::testing::IntAttr;
using ref::testing::StringAttr;

const char* Suffix(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return "f16";
    case DataType::kBFloat16:
      return "bf16";
    default:
      return "f32";
  }
}

CudaCase NewCase(std::string name, std::string op, std::string domain, int64_t opset,
                 DataType dtype) {
  CudaCase c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.domain = std::move(domain);
  c.opset = opset;
  c.dtype = dtype;
  return c;
}

// The tolerance of a K-term product at `dtype` (see the file comment); 0: the default.
double ProductTolerance(DataType dtype, int64_t k) {
  if (dtype != DataType::kFloat32) return 0.0;
  return std::max(5e-3, 8e-4 * std::sqrt(static_cast<double>(k)));
}

// `t` (FP32) converted to FP16 / BF16 (round to nearest even): a half-precision weight.
OwnedTensor ToHalf(const OwnedTensor& t, DataType dtype) {
  OwnedTensor out = OwnedTensor::Allocate(dtype, t.shape()).value();
  const float* src = t.data<const float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DataType::kFloat16) {
      out.data<Float16>()[i] = FloatToFloat16(src[i]);
    } else {
      out.data<BFloat16>()[i] = FloatToBFloat16(src[i]);
    }
  }
  return out;
}

struct Act {
  const char* name;
  std::vector<float> params;
};

// Every fused activation of op/kiln_ops.h.
const std::vector<Act>& Activations() {
  static const std::vector<Act>* acts = new std::vector<Act>{
      {"Relu", {}},
      {"Clip", {-0.5f, 0.75f}},
      {"Sigmoid", {}},
      {"SiLU", {}},
      {"HardSigmoid", {0.2f, 0.5f}},
      {"HardSwish", {}},
      {"Gelu", {}},
      {"GeluTanh", {}},
      {"Tanh", {}},
      {"LeakyRelu", {0.1f}},
  };
  return *acts;
}

void AddActivation(CaseInputs& in, const Act& act) {
  in.Attr(StringAttr("activation", act.name));
  if (!act.params.empty()) in.Attr(FloatsAttr("activation_params", act.params));
}

// MatMul of A `a` and B `b` (B constant when `const_b`).
CudaCase MatMul(const std::string& name, DataType dtype, Shape a, Shape b, bool const_b = false,
                int64_t opset = 13) {
  const int64_t k = a.dim(a.rank() - 1);
  CudaCase c = NewCase(name + " " + Suffix(dtype), "MatMul", "", opset, dtype);
  c.make = [a, b, const_b](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random(a, rng));
    if (const_b) {
      in.ConstInput(Random(b, rng));
    } else {
      in.Input(Random(b, rng));
    }
  };
  c.tolerance = ProductTolerance(dtype, k);
  return c;
}

void AddMatMulCases(std::vector<CudaCase>& cases, DataType t) {
  cases.push_back(MatMul("MatMul 2-D", t, {33, 40}, {40, 17}));
  cases.push_back(MatMul("MatMul const B", t, {5, 64}, {64, 48}, /*const_b=*/true));
  cases.push_back(MatMul("MatMul batched", t, {3, 5, 32}, {3, 32, 9}));
  cases.push_back(MatMul("MatMul folded batch", t, {2, 3, 7, 24}, {24, 20}, true));
  cases.push_back(MatMul("MatMul folded batch with 1s", t, {2, 3, 7, 24}, {1, 1, 24, 20}));
  cases.push_back(MatMul("MatMul broadcast A", t, {8, 24}, {4, 24, 12}));
  cases.push_back(MatMul("MatMul broadcast A batch 1", t, {1, 6, 16}, {4, 1, 16, 5}));
  cases.push_back(MatMul("MatMul broadcast B", t, {4, 2, 6, 16}, {2, 16, 5}));
  cases.push_back(MatMul("MatMul broadcast both", t, {2, 1, 6, 16}, {1, 3, 16, 5}));
  cases.push_back(MatMul("MatMul 1-D A", t, {24}, {3, 24, 7}));
  cases.push_back(MatMul("MatMul 1-D B", t, {2, 5, 24}, {24}));
  cases.push_back(MatMul("MatMul 1-D both", t, {24}, {24}));
  cases.push_back(MatMul("MatMul K=0", t, {3, 0}, {0, 4}));
  cases.push_back(MatMul("MatMul empty M", t, {0, 5}, {5, 3}));
  cases.push_back(MatMul("MatMul empty batch", t, {0, 4, 5}, {5, 3}));
  cases.push_back(MatMul("MatMul odd sizes", t, {1, 13, 1}, {1, 7}));
  // 75,000 outputs (a product with no epilogue; FusedMatMul's large case runs the own one).
  cases.push_back(MatMul("MatMul large", t, {300, 32}, {32, 250}, true));
  if (t != DataType::kBFloat16) {  // opsets 7-12 (BFLOAT16 from 13)
    cases.push_back(MatMul("MatMul opset 9", t, {5, 16}, {2, 16, 7}, false, 9));
  }
}

// A Gemm / FusedGemm node: A' [m, k] x B' [k, n], set up with the chained setters.
struct GemmSpec {
  std::string name;
  int64_t m = 0, k = 0, n = 0;
  bool trans_a = false, trans_b = false;
  bool set_alpha_beta = false;
  float alpha = 1.0f, beta = 1.0f;
  bool has_c = false;
  Shape c_shape;
  bool z = false;            // FusedGemm only
  const Act* act = nullptr;  // FusedGemm only
  int64_t opset = 13;        // Gemm only

  GemmSpec(std::string name_in, int64_t m_in, int64_t k_in, int64_t n_in)
      : name(std::move(name_in)), m(m_in), k(k_in), n(n_in) {}
  GemmSpec& TransA() {
    trans_a = true;
    return *this;
  }
  GemmSpec& TransB() {
    trans_b = true;
    return *this;
  }
  GemmSpec& AlphaBeta(float a, float b) {
    set_alpha_beta = true;
    alpha = a;
    beta = b;
    return *this;
  }
  GemmSpec& C(Shape shape) {
    has_c = true;
    c_shape = std::move(shape);
    return *this;
  }
  GemmSpec& Z() {
    z = true;
    return *this;
  }
  GemmSpec& Activation(const Act& a) {
    act = &a;
    return *this;
  }
  GemmSpec& Opset(int64_t v) {
    opset = v;
    return *this;
  }
};

CudaCase Gemm(const GemmSpec& s, DataType dtype) {
  CudaCase c = NewCase(s.name + " " + Suffix(dtype), "Gemm", "", s.opset, dtype);
  c.make = [s](CaseInputs& in, std::mt19937& rng) {
    if (s.trans_a) in.Attr(IntAttr("transA", 1));
    if (s.trans_b) in.Attr(IntAttr("transB", 1));
    if (s.set_alpha_beta) in.Attr(FloatAttr("alpha", s.alpha)).Attr(FloatAttr("beta", s.beta));
    in.Input(Random(s.trans_a ? Shape{s.k, s.m} : Shape{s.m, s.k}, rng));
    in.ConstInput(Random(s.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n}, rng));
    if (s.has_c) in.ConstInput(Random(s.c_shape, rng));
  };
  c.tolerance = ProductTolerance(dtype, s.k);
  return c;
}

void AddGemmCases(std::vector<CudaCase>& cases, DataType t) {
  using G = GemmSpec;
  cases.push_back(Gemm(G("Gemm no C", 9, 20, 11), t));
  cases.push_back(Gemm(G("Gemm C row", 9, 20, 11).C({11}), t));
  cases.push_back(Gemm(G("Gemm C full transposes alpha beta", 9, 20, 11)
                           .TransA()
                           .TransB()
                           .AlphaBeta(0.5f, 2.0f)
                           .C({9, 11}),
                       t));
  cases.push_back(Gemm(G("Gemm C column transA", 9, 20, 11).TransA().C({9, 1}), t));
  cases.push_back(Gemm(G("Gemm C scalar", 9, 20, 11).C(Shape{}), t));
  cases.push_back(
      Gemm(G("Gemm C [1, N] beta transB", 9, 20, 11).TransB().AlphaBeta(1.0f, 0.5f).C({1, 11}), t));
  cases.push_back(Gemm(G("Gemm beta 0", 9, 20, 11).AlphaBeta(1.5f, 0.0f).C({9, 11}), t));
  cases.push_back(Gemm(G("Gemm K=0", 4, 0, 3).C({3}), t));
  cases.push_back(Gemm(G("Gemm M=1", 1, 33, 19).C({1, 19}), t));
  if (t != DataType::kBFloat16) {  // opsets 7-10 (C required) and 11-12
    cases.push_back(Gemm(G("Gemm opset 7", 6, 16, 5).C({6, 5}).Opset(7), t));
    cases.push_back(Gemm(G("Gemm opset 11", 6, 16, 5).Opset(11), t));
  }
}

// FusedMatMul: A x B (B constant) with the optional Bias [N] and Z, and an activation.
CudaCase FusedMatMul(const std::string& name, DataType dtype, Shape a, Shape b, bool bias, bool z,
                     const Act* act) {
  const int64_t k = a.dim(a.rank() - 1);
  // Y's shape, for Z and the Bias (Y's last dim).
  std::vector<int64_t> y;
  for (int i = 0; i + 2 < a.rank(); ++i) y.push_back(a.dim(i));
  if (b.rank() > 2 && y.empty()) {
    for (int i = 0; i + 2 < b.rank(); ++i) y.push_back(b.dim(i));
  }
  if (a.rank() > 1) y.push_back(a.dim(a.rank() - 2));
  if (b.rank() > 1) y.push_back(b.dim(b.rank() - 1));
  const Shape y_shape(y);
  const int64_t last = y.empty() ? 1 : y.back();
  const Act none{"", {}};
  const Act activation = act != nullptr ? *act : none;
  CudaCase c = NewCase(name + " " + Suffix(dtype), "FusedMatMul", "ai.kiln", 1, dtype);
  c.make = [=](CaseInputs& in, std::mt19937& rng) {
    if (activation.name[0] != '\0') AddActivation(in, activation);
    in.Input(Random(a, rng)).ConstInput(Random(b, rng));
    if (bias) {
      in.ConstInput(Random({last}, rng));
    } else if (z) {
      in.OmittedInput();
    }
    if (z) in.Input(Random(y_shape, rng));
  };
  c.tolerance = ProductTolerance(dtype, k);
  return c;
}

void AddFusedMatMulCases(std::vector<CudaCase>& cases, DataType t) {
  const std::vector<Act>& acts = Activations();
  const Act& relu = acts[0];
  const Act& gelu_tanh = acts[7];
  cases.push_back(FusedMatMul("FusedMatMul bias", t, {2, 5, 24}, {24, 12}, true, false, nullptr));
  cases.push_back(
      FusedMatMul("FusedMatMul bias Relu", t, {2, 5, 24}, {24, 12}, true, false, &relu));
  cases.push_back(FusedMatMul("FusedMatMul folded bias Z GeluTanh", t, {2, 5, 24}, {24, 12}, true,
                              true, &gelu_tanh));
  cases.push_back(FusedMatMul("FusedMatMul Z", t, {7, 24}, {24, 10}, false, true, nullptr));
  cases.push_back(FusedMatMul("FusedMatMul Relu", t, {7, 24}, {24, 10}, false, false, &relu));
  cases.push_back(
      FusedMatMul("FusedMatMul Z GeluTanh", t, {7, 24}, {24, 10}, false, true, &gelu_tanh));
  // Each activation with Bias and Z (cuBLASLt's epilogue for Relu / GeluTanh, the own for the
  // others).
  for (const Act& act : acts) {
    cases.push_back(FusedMatMul(std::string("FusedMatMul bias Z ") + act.name, t, {3, 4, 16},
                                {16, 9}, true, true, &act));
  }
  cases.push_back(
      FusedMatMul("FusedMatMul batched Z SiLU", t, {3, 5, 24}, {3, 24, 12}, false, true, &acts[3]));
  cases.push_back(FusedMatMul("FusedMatMul broadcast both bias Relu", t, {2, 1, 6, 16},
                              {1, 3, 16, 5}, true, false, &relu));
  cases.push_back(FusedMatMul("FusedMatMul 1-D B bias", t, {4, 6, 24}, {24}, true, true, nullptr));
  cases.push_back(FusedMatMul("FusedMatMul 1-D A bias", t, {24}, {24, 6}, true, true, &relu));
  cases.push_back(
      FusedMatMul("FusedMatMul K=0 bias Z Sigmoid", t, {3, 0}, {0, 4}, true, true, &acts[2]));
  cases.push_back(FusedMatMul("FusedMatMul empty", t, {0, 8}, {8, 4}, true, true, &acts[2]));
  // 75,000 outputs through the own epilogue (Sigmoid, Bias and Z).
  cases.push_back(FusedMatMul("FusedMatMul large", t, {300, 32}, {32, 250}, true, true, &acts[2]));
}

CudaCase FusedGemm(const GemmSpec& s, DataType dtype) {
  CudaCase c = NewCase(s.name + " " + Suffix(dtype), "FusedGemm", "ai.kiln", 1, dtype);
  const Act none{"", {}};
  const Act activation = s.act != nullptr ? *s.act : none;
  c.make = [s, activation](CaseInputs& in, std::mt19937& rng) {
    if (activation.name[0] != '\0') AddActivation(in, activation);
    if (s.trans_a) in.Attr(IntAttr("transA", 1));
    if (s.trans_b) in.Attr(IntAttr("transB", 1));
    if (s.set_alpha_beta) in.Attr(FloatAttr("alpha", s.alpha)).Attr(FloatAttr("beta", s.beta));
    in.Input(Random(s.trans_a ? Shape{s.k, s.m} : Shape{s.m, s.k}, rng));
    in.ConstInput(Random(s.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n}, rng));
    if (s.has_c) {
      in.ConstInput(Random(s.c_shape, rng));
    } else if (s.z) {
      in.OmittedInput();
    }
    if (s.z) in.Input(Random({s.m, s.n}, rng));
  };
  c.tolerance = ProductTolerance(dtype, s.k);
  return c;
}

void AddFusedGemmCases(std::vector<CudaCase>& cases, DataType t) {
  using G = GemmSpec;
  const std::vector<Act>& acts = Activations();
  cases.push_back(FusedGemm(G("FusedGemm C row Relu", 10, 24, 14).C({14}).Activation(acts[0]), t));
  cases.push_back(FusedGemm(G("FusedGemm C row Z GeluTanh transB alpha", 10, 24, 14)
                                .TransB()
                                .AlphaBeta(0.7f, 1.0f)
                                .C({14})
                                .Z()
                                .Activation(acts[7]),
                            t));
  cases.push_back(FusedGemm(G("FusedGemm C full Z Tanh", 10, 24, 14)
                                .AlphaBeta(1.0f, 0.5f)
                                .C({10, 14})
                                .Z()
                                .Activation(acts[8]),
                            t));
  cases.push_back(FusedGemm(G("FusedGemm C full beta Relu transA", 10, 24, 14)
                                .TransA()
                                .AlphaBeta(1.0f, -1.5f)
                                .C({10, 14})
                                .Activation(acts[0]),
                            t));
  cases.push_back(FusedGemm(G("FusedGemm Z LeakyRelu", 10, 24, 14).Z().Activation(acts[9]), t));
  cases.push_back(
      FusedGemm(G("FusedGemm C column HardSwish", 10, 24, 14).C({10, 1}).Activation(acts[5]), t));
  cases.push_back(FusedGemm(G("FusedGemm C row beta Z Clip", 10, 24, 14)
                                .AlphaBeta(1.0f, 2.0f)
                                .C({1, 14})
                                .Z()
                                .Activation(acts[1]),
                            t));
  cases.push_back(FusedGemm(G("FusedGemm Gelu", 10, 24, 14).Activation(acts[6]), t));
}

// The half-precision weight forms: A, Bias / C, Z and Y FLOAT, B a FLOAT16 / BFLOAT16 constant.
void AddHalfWeightCases(std::vector<CudaCase>& cases) {
  const std::vector<Act>& acts = Activations();
  for (DataType w : {DataType::kFloat16, DataType::kBFloat16}) {
    const std::string ws = Suffix(w);
    const double tol = w == DataType::kFloat16 ? 5e-3 : 4e-2;
    struct MatMulSpec {
      std::string name;
      Shape a, b;
      bool bias, z;
      const Act* act;
    };
    for (const MatMulSpec& s : std::vector<MatMulSpec>{
             {"bias Relu", {2, 5, 48}, {48, 20}, true, false, &acts[0]},
             {"bias Z GeluTanh", {2, 5, 48}, {48, 20}, true, true, &acts[7]},
             {"Z Gelu", {7, 48}, {48, 20}, false, true, &acts[6]},
             {"batched B", {3, 4, 48}, {3, 48, 20}, false, false, nullptr},
         }) {
      CudaCase c = NewCase("FusedMatMul half weight " + ws + " " + s.name + " f32", "FusedMatMul",
                           "ai.kiln", 1, DataType::kFloat32);
      c.make = [s, w](CaseInputs& in, std::mt19937& rng) {
        if (s.act != nullptr) AddActivation(in, *s.act);
        in.Input(Random(s.a, rng)).KeepConstInput(ToHalf(Random(s.b, rng), w));
        const int64_t n = s.b.dim(s.b.rank() - 1);
        if (s.bias) {
          in.Input(Random({n}, rng));
        } else if (s.z) {
          in.OmittedInput();
        }
        if (s.z) {
          std::vector<int64_t> y(s.a.dims().begin(), s.a.dims().end());
          if (s.b.rank() > s.a.rank()) y.insert(y.begin(), s.b.dim(0));
          y.back() = n;
          in.Input(Random(Shape(y), rng));
        }
      };
      c.tolerance = tol;
      cases.push_back(c);
    }
    const GemmSpec g1 =
        GemmSpec("FusedGemm half weight " + ws + " transB C row Z", 7, 48, 20).TransB().C({20}).Z();
    const GemmSpec g2 = GemmSpec("FusedGemm half weight " + ws + " C full Sigmoid", 7, 48, 20)
                            .AlphaBeta(0.5f, 0.25f)
                            .C({7, 20})
                            .Activation(acts[2]);
    for (const GemmSpec& s : {g1, g2}) {
      CudaCase c = NewCase(s.name + " f32", "FusedGemm", "ai.kiln", 1, DataType::kFloat32);
      c.make = [s, w](CaseInputs& in, std::mt19937& rng) {
        if (s.act != nullptr) AddActivation(in, *s.act);
        if (s.trans_b) in.Attr(IntAttr("transB", 1));
        if (s.set_alpha_beta) in.Attr(FloatAttr("alpha", s.alpha)).Attr(FloatAttr("beta", s.beta));
        in.Input(Random({s.m, s.k}, rng));
        in.KeepConstInput(ToHalf(Random(s.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n}, rng), w));
        if (s.has_c) in.Input(Random(s.c_shape, rng));
        if (s.z) in.Input(Random({s.m, s.n}, rng));
      };
      c.tolerance = tol;
      cases.push_back(c);
    }
  }
}

}  // namespace

std::vector<CudaCase> BlasCases() {
  std::vector<CudaCase> cases;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    AddMatMulCases(cases, t);
    AddGemmCases(cases, t);
    AddFusedMatMulCases(cases, t);
    AddFusedGemmCases(cases, t);
  }
  AddHalfWeightCases(cases);
  return cases;
}

}  // namespace kiln::cuda::testing
