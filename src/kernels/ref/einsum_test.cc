// SPDX-License-Identifier: Apache-2.0
// Tests for the reference Einsum (einsum.cc): hand-checked equations (explicit and implicit
// outputs, diagonals, ellipsis broadcasting, sums, integer wrap-around), randomized comparisons
// against direct loops, and the error paths (malformed equations at load, mismatched shapes at
// run time).

#include <gtest/gtest.h>

#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

OpTest Einsum(const std::string& eq) {
  OpTest t("Einsum", 12);
  t.Attr(StringAttr("equation", eq));
  return t;
}

TEST(EinsumTest, HandChecked) {
  const OwnedTensor a = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  const OwnedTensor b = MakeTensor<float>({2, 2}, {5, 6, 7, 8});
  // Matrix product: [[1*5+2*7, 1*6+2*8], [3*5+4*7, 3*6+4*8]] = [[19, 22], [43, 50]].
  ExpectTensor<float>(Einsum("ij,jk->ik").Input(a).Input(b).RunOne(), {2, 2}, {19, 22, 43, 50});
  // Implicit output "ik" (i, k used once, sorted).
  ExpectTensor<float>(Einsum("ij,jk").Input(a).Input(b).RunOne(), {2, 2}, {19, 22, 43, 50});
  // Implicit "ba" sorts to "ab": a transpose.
  ExpectTensor<float>(Einsum("ba").Input(a).RunOne(), {2, 2}, {1, 3, 2, 4});
  // Trace and diagonal.
  ExpectTensor<float>(Einsum("ii").Input(a).RunOne(), {}, {5});
  ExpectTensor<float>(Einsum("ii->i").Input(a).RunOne(), {2}, {1, 4});
  // Row sums, total sum, inner product, outer product.
  ExpectTensor<float>(Einsum("ij->i").Input(a).RunOne(), {2}, {3, 7});
  ExpectTensor<float>(Einsum("ij->").Input(a).RunOne(), {}, {10});
  ExpectTensor<float>(Einsum("i,i")
                          .Input(MakeTensor<float>({2}, {1, 2}))
                          .Input(MakeTensor<float>({2}, {3, 4}))
                          .RunOne(),
                      {}, {11});
  ExpectTensor<float>(Einsum("i, j -> ij")
                          .Input(MakeTensor<float>({2}, {1, 2}))
                          .Input(MakeTensor<float>({2}, {3, 4}))
                          .RunOne(),
                      {2, 2}, {3, 4, 6, 8});
  // Ellipsis: batched diagonal of [2, 2, 2] = [[1,2],[3,4]] and [[5,6],[7,8]]: [[1,4],[5,8]].
  ExpectTensor<float>(
      Einsum("...ii->...i").Input(MakeTensor<float>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})).RunOne(),
      {2, 2}, {1, 4, 5, 8});
  // Ellipsis broadcasting: [2, 1] x [3] over "...,..." -> [2, 3] elementwise products.
  ExpectTensor<float>(Einsum("...,...->...")
                          .Input(MakeTensor<float>({2, 1}, {1, 2}))
                          .Input(MakeTensor<float>({3}, {1, 10, 100}))
                          .RunOne(),
                      {2, 3}, {1, 10, 100, 2, 20, 200});
  // Three operands: sum_i a_i * b_i * c_i = 1*3*5 + 2*4*6 = 63.
  ExpectTensor<float>(Einsum("i,i,i->")
                          .Input(MakeTensor<float>({2}, {1, 2}))
                          .Input(MakeTensor<float>({2}, {3, 4}))
                          .Input(MakeTensor<float>({2}, {5, 6}))
                          .RunOne(),
                      {}, {63});
  // Integers wrap: 2^31 - 1 + 1 as int32.
  ExpectTensor<int32_t>(Einsum("i->").Input(MakeTensor<int32_t>({2}, {2147483647, 1})).RunOne(), {},
                        {-2147483647 - 1});
}

TEST(EinsumTest, RandomMatchesDirectLoops) {
  std::mt19937 rng(13);
  // Batched matmul "bij,bjk->bik".
  const int64_t nb = 2, ni = 3, nj = 4, nk = 5;
  const std::vector<double> a = RandomValues<double>(nb * ni * nj, rng);
  const std::vector<double> b = RandomValues<double>(nb * nj * nk, rng);
  std::vector<double> expected;
  for (int64_t p = 0; p < nb; ++p) {
    for (int64_t i = 0; i < ni; ++i) {
      for (int64_t k = 0; k < nk; ++k) {
        double s = 0;
        for (int64_t j = 0; j < nj; ++j) {
          s += a[static_cast<size_t>((p * ni + i) * nj + j)] *
               b[static_cast<size_t>((p * nj + j) * nk + k)];
        }
        expected.push_back(s);
      }
    }
  }
  ExpectTensor<double>(Einsum("bij,bjk->bik")
                           .Input(MakeTensor<double>({nb, ni, nj}, a))
                           .Input(MakeTensor<double>({nb, nj, nk}, b))
                           .RunOne(),
                       {nb, ni, nk}, expected, 1e-12);
  // Transposing contraction "ijk,jl->lki" (j summed, output order reversed).
  const std::vector<double> c = RandomValues<double>(ni * 2, rng);
  expected.clear();
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t k = 0; k < nj; ++k) {
      for (int64_t i = 0; i < nb; ++i) {
        double s = 0;
        for (int64_t j = 0; j < ni; ++j) {
          s += a[static_cast<size_t>((i * ni + j) * nj + k)] * c[static_cast<size_t>(j * 2 + l)];
        }
        expected.push_back(s);
      }
    }
  }
  ExpectTensor<double>(Einsum("ijk,jl->lki")
                           .Input(MakeTensor<double>({nb, ni, nj}, a))
                           .Input(MakeTensor<double>({ni, 2}, c))
                           .RunOne(),
                       {2, nj, nb}, expected, 1e-12);
}

TEST(EinsumTest, Errors) {
  const OwnedTensor a = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  const OwnedTensor v3 = MakeTensor<float>({3}, {1, 2, 3});
  // Load time: malformed equations, operand count.
  ExpectInvalid(OpTest("Einsum", 12).Input(a).Create(), {"Einsum", "'equation' is required"});
  ExpectInvalid(Einsum("i1->i").Input(a).Create(), {"Einsum", "invalid character"});
  ExpectInvalid(Einsum("ij->ii").Input(a).Create(), {"Einsum", "repeats a label"});
  ExpectInvalid(Einsum("ij->k").Input(a).Create(), {"Einsum", "in no input"});
  ExpectInvalid(Einsum("i..j->ij").Input(a).Create(), {"Einsum", "ellipsis"});
  ExpectInvalid(Einsum("ij,jk->ik").Input(a).Create(), {"Einsum", "operands"});
  // Run time: rank and size mismatches, dtype mismatch, ellipsis without "..." in the output.
  ExpectInvalid(Einsum("ijk->i").Input(a).RunStatus(), {"Einsum", "does not match"});
  ExpectInvalid(Einsum("ij,j->i").Input(a).Input(v3).RunStatus(), {"Einsum", "disagree"});
  ExpectInvalid(Einsum("ij,j->i").Input(a).Input(MakeTensor<double>({2}, {1, 2})).RunStatus(),
                {"Einsum", "dtype"});
  ExpectInvalid(Einsum("...i->i").Input(a).RunStatus(), {"Einsum", "'...'"});
}

}  // namespace
}  // namespace kiln::ref::testing
