// SPDX-License-Identifier: Apache-2.0
// Tests for the reference random generators (random.cc) and TfIdfVectorizer (tfidf.cc):
// shapes, dtypes, value ranges and seed determinism of the random ops; hand-checked n-gram
// counts in every TfIdf mode; error paths.

#include <gtest/gtest.h>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

TEST(RandomTest, UniformShapeRangeAndSeed) {
  OpTest t("RandomUniform", 7);
  t.Attr(IntsAttr("shape", {3, 4}))
      .Attr(FloatAttr("low", 2))
      .Attr(FloatAttr("high", 3))
      .Attr(FloatAttr("seed", 5));
  OwnedTensor a = t.RunOne(), b = t.RunOne();
  ASSERT_EQ(a.shape(), (Shape{3, 4}));
  ASSERT_EQ(a.dtype(), DataType::kFloat32);
  for (float v : ToVector<float>(a)) {
    EXPECT_GE(v, 2.0f);
    EXPECT_LE(v, 3.0f);
  }
  EXPECT_EQ(ToVector<float>(a), ToVector<float>(b));  // same seed, same values
}

TEST(RandomTest, NormalLikeAndBernoulli) {
  OwnedTensor y = OpTest("RandomNormalLike", 7)
                      .Attr(IntAttr("dtype", 11))
                      .Input(MakeTensor<float>({2, 2}, {0, 0, 0, 0}))
                      .RunOne();
  ASSERT_EQ(y.dtype(), DataType::kFloat64);
  ASSERT_EQ(y.shape(), (Shape{2, 2}));
  // Probabilities 0 and 1 are deterministic.
  ExpectTensor<float>(OpTest("Bernoulli", 15).Input(MakeTensor<float>({4}, {0, 1, 0, 1})).RunOne(),
                      {4}, {0, 1, 0, 1});
  ExpectTensor<bool>(OpTest("Bernoulli", 15)
                         .Attr(IntAttr("dtype", 9))
                         .Input(MakeTensor<double>({2}, {1, 0}))
                         .RunOne(),
                     {2}, {true, false});
  ExpectTensor<int32_t>(OpTest("Bernoulli", 15)
                            .Attr(IntAttr("dtype", 6))
                            .Input(MakeTensor<float>({2}, {1, 0}))
                            .RunOne(),
                        {2}, {1, 0});
}

TEST(RandomTest, Errors) {
  ExpectInvalid(OpTest("RandomUniform", 7).Create(), {"RandomUniform", "shape"});
  ExpectInvalid(OpTest("RandomUniform", 7)
                    .Attr(IntsAttr("shape", {2}))
                    .Attr(FloatAttr("low", 3))
                    .Attr(FloatAttr("high", 1))
                    .Create(),
                {"RandomUniform", "low"});
  ExpectInvalid(OpTest("RandomNormal", 7).Attr(IntsAttr("shape", {-2})).Create(),
                {"RandomNormal", "shape"});
  ExpectInvalid(
      OpTest("RandomNormal", 7).Attr(IntsAttr("shape", {2})).Attr(IntAttr("dtype", 6)).Create(),
      {"RandomNormal", "dtype"});
  ExpectInvalid(OpTest("RandomUniformLike", 7).Input(MakeTensor<int32_t>({1}, {1})).RunStatus(),
                {"RandomUniformLike", "INT32"});
}

OpTest TfIdf(const std::string& mode, int64_t min_gram, int64_t max_gram, int64_t skip) {
  // Pool: unigrams {2}, {3}; bigrams {5, 6}, {6, 7}; output slots 0..3.
  OpTest t("TfIdfVectorizer", 9);
  t.Attr(StringAttr("mode", mode))
      .Attr(IntAttr("min_gram_length", min_gram))
      .Attr(IntAttr("max_gram_length", max_gram))
      .Attr(IntAttr("max_skip_count", skip))
      .Attr(IntsAttr("ngram_counts", {0, 2}))
      .Attr(IntsAttr("ngram_indexes", {0, 1, 2, 3}))
      .Attr(IntsAttr("pool_int64s", {2, 3, 5, 6, 6, 7}))
      .Attr(FloatsAttr("weights", {1, 2, 3, 4}));
  return t;
}

TEST(TfIdfTest, HandChecked) {
  // X = {2, 5, 6, 2, 7}: unigram 2 twice, 3 never; bigram (5,6) once; (6,7) only with skip 1
  // (6 at index 2, 7 at index 4).
  OwnedTensor x = MakeTensor<int64_t>({5}, {2, 5, 6, 2, 7});
  OpTest tf = TfIdf("TF", 1, 2, 0);
  tf.Input(x);
  ExpectTensor<float>(tf.RunOne(), {4}, {2, 0, 1, 0});
  OpTest tf_skip = TfIdf("TF", 1, 2, 1);
  tf_skip.Input(x);
  ExpectTensor<float>(tf_skip.RunOne(), {4}, {2, 0, 1, 1});
  OpTest idf = TfIdf("IDF", 2, 2, 1);
  idf.Input(x);
  ExpectTensor<float>(idf.RunOne(), {4}, {0, 0, 3, 4});
  // TFIDF on a batch [2, 2] of int32: row 0 {2, 2} -> 2 * 1; row 1 {3, 2} -> 1 * 1, 1 * 2.
  OpTest tfidf = TfIdf("TFIDF", 1, 1, 0);
  tfidf.Input(MakeTensor<int32_t>({2, 2}, {2, 2, 3, 2}));
  ExpectTensor<float>(tfidf.RunOne(), {2, 4}, {2, 0, 0, 0, 1, 2, 0, 0});
}

TEST(TfIdfTest, Strings) {
  OwnedTensor x = MakeTensor<std::string>({3}, {"a", "b", "a"});
  ExpectTensor<float>(OpTest("TfIdfVectorizer", 9)
                          .Attr(StringAttr("mode", "TF"))
                          .Attr(IntAttr("min_gram_length", 1))
                          .Attr(IntAttr("max_gram_length", 1))
                          .Attr(IntAttr("max_skip_count", 0))
                          .Attr(IntsAttr("ngram_counts", {0}))
                          .Attr(IntsAttr("ngram_indexes", {1, 0}))
                          .Attr(StringsAttr("pool_strings", {"a", "b"}))
                          .Input(x)
                          .RunOne(),
                      {2}, {1, 2});
}

TEST(TfIdfTest, Errors) {
  OwnedTensor x = MakeTensor<int64_t>({1}, {1});
  ExpectInvalid(TfIdf("BM25", 1, 2, 0).Input(x).Create(), {"TfIdfVectorizer", "mode"});
  ExpectInvalid(TfIdf("TF", 3, 2, 0).Input(x).Create(), {"TfIdfVectorizer", "min_gram_length"});
  ExpectInvalid(OpTest("TfIdfVectorizer", 9)
                    .Attr(StringAttr("mode", "TF"))
                    .Attr(IntAttr("min_gram_length", 1))
                    .Attr(IntAttr("max_gram_length", 2))
                    .Attr(IntsAttr("ngram_counts", {0, 3}))
                    .Attr(IntsAttr("ngram_indexes", {0, 1, 2}))
                    .Attr(IntsAttr("pool_int64s", {1, 2, 3, 4}))
                    .Input(x)
                    .Create(),
                {"TfIdfVectorizer", "ngram_counts"});
  ExpectInvalid(TfIdf("TF", 1, 2, 0).Input(MakeTensor<std::string>({1}, {"a"})).RunStatus(),
                {"TfIdfVectorizer"});
  ExpectInvalid(TfIdf("TF", 1, 2, 0).Input(MakeTensor<int64_t>({1, 1, 1}, {1})).RunStatus(),
                {"TfIdfVectorizer", "X"});
}

}  // namespace
}  // namespace kiln::ref::testing
