// SPDX-License-Identifier: Apache-2.0
// Tests for the reference MatMul and Gemm (matmul.cc): hand-checked products, 1-D promotion,
// batch broadcasting and Gemm's transposes/alpha/beta/C against naive loops in double, integer
// types, and error cases.

#include <gtest/gtest.h>

#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

TEST(MatMulTest, TwoByThreeTimesThreeByTwo) {
  // [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]]:
  //   row 0: 1*7+2*9+3*11 = 58, 1*8+2*10+3*12 = 64
  //   row 1: 4*7+5*9+6*11 = 139, 4*8+5*10+6*12 = 154
  OwnedTensor y = OpTest("MatMul", 13)
                      .Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}))
                      .Input(MakeTensor<float>({3, 2}, {7, 8, 9, 10, 11, 12}))
                      .RunOne();
  ExpectTensor<float>(y, {2, 2}, {58, 64, 139, 154});
}

TEST(MatMulTest, VectorsArePromotedAndDropped) {
  // [1,2,3] . [4,5,6] = 4 + 10 + 18 = 32, a scalar.
  ExpectTensor<double>(OpTest("MatMul", 13)
                           .Input(MakeTensor<double>({3}, {1, 2, 3}))
                           .Input(MakeTensor<double>({3}, {4, 5, 6}))
                           .RunOne(),
                       {}, {32});
  // [1,2] x [[1,2,3],[4,5,6]] = [1+8, 2+10, 3+12] = [9,12,15], shape [3].
  ExpectTensor<double>(OpTest("MatMul", 13)
                           .Input(MakeTensor<double>({2}, {1, 2}))
                           .Input(MakeTensor<double>({2, 3}, {1, 2, 3, 4, 5, 6}))
                           .RunOne(),
                       {3}, {9, 12, 15});
  // [[1,2,3],[4,5,6]] x [1,0,-1] = [1-3, 4-6] = [-2,-2], shape [2].
  ExpectTensor<double>(OpTest("MatMul", 13)
                           .Input(MakeTensor<double>({2, 3}, {1, 2, 3, 4, 5, 6}))
                           .Input(MakeTensor<double>({3}, {1, 0, -1}))
                           .RunOne(),
                       {2}, {-2, -2});
}

TEST(MatMulTest, BatchedWithBroadcastB) {
  // A [2,1,2] = {[1,2]}, {[3,4]}; B [2,1] = [[5],[6]] shared by both batches:
  //   1*5+2*6 = 17, 3*5+4*6 = 39.
  ExpectTensor<float>(OpTest("MatMul", 9)
                          .Input(MakeTensor<float>({2, 1, 2}, {1, 2, 3, 4}))
                          .Input(MakeTensor<float>({2, 1}, {5, 6}))
                          .RunOne(),
                      {2, 1, 1}, {17, 39});
}

TEST(MatMulTest, Integers) {
  // [[1,-2],[3,4]] x [[5],[6]] = [[5-12],[15+24]] = [[-7],[39]].
  ExpectTensor<int32_t>(OpTest("MatMul", 9)
                            .Input(MakeTensor<int32_t>({2, 2}, {1, -2, 3, 4}))
                            .Input(MakeTensor<int32_t>({2, 1}, {5, 6}))
                            .RunOne(),
                        {2, 1}, {-7, 39});
  ExpectTensor<int64_t>(OpTest("MatMul", 13)
                            .Input(MakeTensor<int64_t>({1, 2}, {1LL << 40, 1}))
                            .Input(MakeTensor<int64_t>({2, 1}, {2, 3}))
                            .RunOne(),
                        {1, 1}, {(1LL << 41) + 3});
  // Integer MatMul exists from opset 9.
  ExpectInvalid(OpTest("MatMul", 8)
                    .Input(MakeTensor<int32_t>({1, 1}, {1}))
                    .Input(MakeTensor<int32_t>({1, 1}, {1}))
                    .Create(),
                {"op MatMul (opset 8) is not supported for dtype INT32"});
}

// numpy matmul computed independently: explicit batch coordinates, triple loop in double.
std::vector<double> NaiveMatMul(const std::vector<double>& a, std::vector<int64_t> ad,
                                const std::vector<double>& b, std::vector<int64_t> bd,
                                std::vector<int64_t>* out_dims) {
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  const std::vector<int64_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  const size_t rank = std::max(ab.size(), bb.size());
  std::vector<int64_t> batch(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - ab.size() ? 1 : ab[i - (rank - ab.size())];
    const int64_t db = i < rank - bb.size() ? 1 : bb[i - (rank - bb.size())];
    batch[i] = da == 1 ? db : da;
  }
  *out_dims = batch;
  if (!a_vec) out_dims->push_back(m);
  if (!b_vec) out_dims->push_back(n);
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;
  std::vector<double> y;
  for (int64_t bi = 0; bi < batches; ++bi) {
    const std::vector<int64_t> c = Unravel(bi, batch);
    // Flat matrix index of A and B for this batch coordinate.
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < ab.size(); ++d) {
      ia = ia * ab[d] + (ab[d] == 1 ? 0 : c[d + rank - ab.size()]);
    }
    for (size_t d = 0; d < bb.size(); ++d) {
      ib = ib * bb[d] + (bb[d] == 1 ? 0 : c[d + rank - bb.size()]);
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          s += a[static_cast<size_t>(ia * m * k + i * k + p)] *
               b[static_cast<size_t>(ib * k * n + p * n + j)];
        }
        y.push_back(s);
      }
    }
  }
  return y;
}

TEST(MatMulTest, RandomBatchedMatchesNaive) {
  std::mt19937 rng(3);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3, 4}, {4, 5}},    {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {3, 4, 2}},    {{4}, {2, 4, 3}},
      {{2, 3, 4}, {4}},    {{5}, {5}},          {{1, 2, 3}, {4, 3, 2}},       {{2, 0, 3}, {3, 4}},
      {{2, 3, 0}, {0, 4}}, {{17, 33}, {33, 9}}, {{1, 1, 1, 1, 2, 3}, {3, 1}},
  };
  for (const auto& [ad, bd] : cases) {
    SCOPED_TRACE(Shape(ad).ToString() + " x " + Shape(bd).ToString());
    const std::vector<double> a = RandomValues<double>(Shape(ad).NumElements(), rng);
    const std::vector<double> b = RandomValues<double>(Shape(bd).NumElements(), rng);
    std::vector<int64_t> od;
    const std::vector<double> expected = NaiveMatMul(a, ad, b, bd, &od);
    ExpectTensor<double>(OpTest("MatMul", 13)
                             .Input(MakeTensor<double>(Shape(ad), a))
                             .Input(MakeTensor<double>(Shape(bd), b))
                             .RunOne(),
                         Shape(od), expected, 1e-12);
    // FP32 inputs, accumulated in double inside the kernel: within float rounding.
    std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());
    std::vector<double> a2(af.begin(), af.end()), b2(bf.begin(), bf.end());
    const std::vector<double> expected_f = NaiveMatMul(a2, ad, b2, bd, &od);
    ExpectTensor<float>(OpTest("MatMul", 13)
                            .Input(MakeTensor<float>(Shape(ad), af))
                            .Input(MakeTensor<float>(Shape(bd), bf))
                            .RunOne(),
                        Shape(od), std::vector<float>(expected_f.begin(), expected_f.end()), 1e-6);
  }
}

TEST(MatMulTest, BadShapesAreInvalidArgument) {
  ExpectInvalid(OpTest("MatMul", 13)
                    .Input(MakeTensor<float>({2, 3}, std::vector<float>(6)))
                    .Input(MakeTensor<float>({4, 2}, std::vector<float>(8)))
                    .RunStatus(),
                {"MatMul", "inner dimensions differ", "[2,3]", "[4,2]"});
  ExpectInvalid(OpTest("MatMul", 13)
                    .Input(MakeTensor<float>({2, 2, 3}, std::vector<float>(12)))
                    .Input(MakeTensor<float>({3, 3, 2}, std::vector<float>(18)))
                    .RunStatus(),
                {"MatMul", "batch dims"});
  ExpectInvalid(OpTest("MatMul", 13)
                    .Input(MakeTensor<float>({}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .RunStatus(),
                {"MatMul", "rank >= 1"});
}

TEST(GemmTest, AlphaBetaAndRowBroadcastC) {
  // A x B = [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]].
  // 2 * that + 0.5 * [1,2] (C broadcast along rows) = [[38.5,45],[86.5,101]].
  ExpectTensor<float>(OpTest("Gemm", 13)
                          .Attr(FloatAttr("alpha", 2))
                          .Attr(FloatAttr("beta", 0.5f))
                          .Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4}))
                          .Input(MakeTensor<float>({2, 2}, {5, 6, 7, 8}))
                          .Input(MakeTensor<float>({2}, {1, 2}))
                          .RunOne(),
                      {2, 2}, {38.5f, 45, 86.5f, 101});
}

TEST(GemmTest, TransposesScalarAndColumnC) {
  // A stored transposed ([[1,3],[2,4]]) and B stored transposed ([[5,7],[6,8]]) give the same
  // product [[19,22],[43,50]]; + scalar C 10 = [[29,32],[53,60]].
  ExpectTensor<double>(OpTest("Gemm", 11)
                           .Attr(IntAttr("transA", 1))
                           .Attr(IntAttr("transB", 1))
                           .Input(MakeTensor<double>({2, 2}, {1, 3, 2, 4}))
                           .Input(MakeTensor<double>({2, 2}, {5, 7, 6, 8}))
                           .Input(MakeTensor<double>({}, {10}))
                           .RunOne(),
                       {2, 2}, {29, 32, 53, 60});
  // C [M,1] = [[1],[2]] broadcasts along columns: [[20,23],[45,52]].
  ExpectTensor<float>(OpTest("Gemm", 7)
                          .Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4}))
                          .Input(MakeTensor<float>({2, 2}, {5, 6, 7, 8}))
                          .Input(MakeTensor<float>({2, 1}, {1, 2}))
                          .RunOne(),
                      {2, 2}, {20, 23, 45, 52});
}

TEST(GemmTest, OptionalCFromOpset11) {
  // Non-square: [1,2,3] as [1,3] x [[1],[1],[1]] = [[6]].
  ExpectTensor<float>(OpTest("Gemm", 11)
                          .Input(MakeTensor<float>({1, 3}, {1, 2, 3}))
                          .Input(MakeTensor<float>({3, 1}, {1, 1, 1}))
                          .RunOne(),
                      {1, 1}, {6});
  ExpectTensor<float>(OpTest("Gemm", 13)
                          .Input(MakeTensor<float>({1, 3}, {1, 2, 3}))
                          .Input(MakeTensor<float>({3, 1}, {1, 1, 1}))
                          .OmittedInput()
                          .RunOne(),
                      {1, 1}, {6});
  ExpectInvalid(OpTest("Gemm", 9)
                    .Input(MakeTensor<float>({1, 3}, {1, 2, 3}))
                    .Input(MakeTensor<float>({3, 1}, {1, 1, 1}))
                    .Create(),
                {"Gemm", "input C is required before opset 11"});
}

TEST(GemmTest, LegacyBroadcastAttributeIsRejected) {
  // Opset 6's `broadcast` is dropped by the importer's version adapter
  // (tests/onnx/version_adapter_test.cc); from opset 7 it does not exist.
  ExpectInvalid(OpTest("Gemm", 7)
                    .Attr(IntAttr("broadcast", 1))
                    .Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4}))
                    .Input(MakeTensor<float>({2, 2}, {5, 6, 7, 8}))
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .Create(),
                {"Gemm", "'broadcast'", "removed in opset 7"});
}

TEST(GemmTest, RandomMatchesNaive) {
  std::mt19937 rng(5);
  // C shapes as functions of (M, N); an empty optional means no C.
  for (int trans_a = 0; trans_a < 2; ++trans_a) {
    for (int trans_b = 0; trans_b < 2; ++trans_b) {
      for (int c_kind = 0; c_kind < 5; ++c_kind) {
        const int64_t m = 1 + static_cast<int64_t>(rng() % 7), k = 1 + rng() % 9, n = 1 + rng() % 6;
        SCOPED_TRACE(::testing::Message()
                     << "transA=" << trans_a << " transB=" << trans_b << " c_kind=" << c_kind
                     << " M=" << m << " K=" << k << " N=" << n);
        const std::vector<double> a = RandomValues<double>(m * k, rng);
        const std::vector<double> b = RandomValues<double>(k * n, rng);
        std::vector<int64_t> cd;
        switch (c_kind) {
          case 1:
            cd = {};
            break;
          case 2:
            cd = {n};
            break;
          case 3:
            cd = {m, 1};
            break;
          case 4:
            cd = {m, n};
            break;
          default:
            break;
        }
        const std::vector<double> c = RandomValues<double>(Shape(cd).NumElements(), rng);
        const double alpha = 0.75, beta = -1.25;
        std::vector<double> expected;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t p = 0; p < k; ++p) {
              const double av =
                  trans_a ? a[static_cast<size_t>(p * m + i)] : a[static_cast<size_t>(i * k + p)];
              const double bv =
                  trans_b ? b[static_cast<size_t>(j * k + p)] : b[static_cast<size_t>(p * n + j)];
              s += av * bv;
            }
            double cv = 0;
            if (c_kind == 1) cv = c[0];
            if (c_kind == 2) cv = c[static_cast<size_t>(j)];
            if (c_kind == 3) cv = c[static_cast<size_t>(i)];
            if (c_kind == 4) cv = c[static_cast<size_t>(i * n + j)];
            expected.push_back(alpha * s + (c_kind == 0 ? 0 : beta * cv));
          }
        }
        OpTest t("Gemm", 13);
        t.Attr(IntAttr("transA", trans_a))
            .Attr(IntAttr("transB", trans_b))
            .Attr(FloatAttr("alpha", static_cast<float>(alpha)))
            .Attr(FloatAttr("beta", static_cast<float>(beta)))
            .Input(MakeTensor<double>(trans_a ? Shape{k, m} : Shape{m, k}, a))
            .Input(MakeTensor<double>(trans_b ? Shape{n, k} : Shape{k, n}, b));
        if (c_kind != 0) t.Input(MakeTensor<double>(Shape(cd), c));
        ExpectTensor<double>(t.RunOne(), {m, n}, expected, 1e-12);
      }
    }
  }
}

TEST(GemmTest, BadShapesAreInvalidArgument) {
  ExpectInvalid(OpTest("Gemm", 13)
                    .Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4}))
                    .Input(MakeTensor<float>({2, 2}, {5, 6, 7, 8}))
                    .Input(MakeTensor<float>({3}, {1, 2, 3}))
                    .RunStatus(),
                {"Gemm", "C [3] does not broadcast to", "[2,2]"});
  ExpectInvalid(OpTest("Gemm", 13)
                    .Input(MakeTensor<float>({1, 2, 2}, {1, 2, 3, 4}))
                    .Input(MakeTensor<float>({2, 2}, {5, 6, 7, 8}))
                    .RunStatus(),
                {"Gemm", "must be 2-D"});
  ExpectInvalid(OpTest("Gemm", 13)
                    .Attr(IntAttr("transA", 1))
                    .Input(MakeTensor<float>({3, 2}, std::vector<float>(6)))
                    .Input(MakeTensor<float>({2, 2}, {5, 6, 7, 8}))
                    .RunStatus(),
                {"Gemm", "inner dimensions differ"});
}

}  // namespace
}  // namespace kiln::ref::testing
