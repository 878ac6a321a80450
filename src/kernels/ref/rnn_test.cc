// SPDX-License-Identifier: Apache-2.0
// Tests for the reference RNN / GRU / LSTM (rnn.cc): hand-checked single-unit steps of each
// cell, sequence_lens, and structural identities on random weights (reverse == forward on the
// reversed sequence; bidirectional == forward and reverse stacked; layout 1 == transposed
// layout 0), plus error paths.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

TEST(RnnTest, HandCheckedRnnAndSequenceLens) {
  // hidden 1, input 1, W = 0.5, R = 2, B = [Wb 0.1, Rb 0.2], Relu so values stay exact:
  //   batch 0 x = {1, 2}: h1 = relu(0.5 + 0 + 0.3) = 0.8; h2 = relu(1 + 1.6 + 0.3) = 2.9.
  //   batch 1 x = {3, 9}, seq_len 1: h1 = relu(1.5 + 0.3) = 1.8; Y[1] = 0.
  Result<std::vector<OwnedTensor>> r = OpTest("RNN", 14)
                                           .Attr(IntAttr("hidden_size", 1))
                                           .Attr(StringsAttr("activations", {"Relu"}))
                                           .Input(MakeTensor<float>({2, 2, 1}, {1, 3, 2, 9}))
                                           .Input(MakeTensor<float>({1, 1, 1}, {0.5f}))
                                           .Input(MakeTensor<float>({1, 1, 1}, {2}))
                                           .Input(MakeTensor<float>({1, 2}, {0.1f, 0.2f}))
                                           .Input(MakeTensor<int32_t>({2}, {2, 1}))
                                           .Outputs({true, true})
                                           .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<float>(r->at(0), {2, 1, 2, 1}, {0.8f, 1.8f, 2.9f, 0}, 1e-6);
  ExpectTensor<float>(r->at(1), {1, 2, 1}, {2.9f, 1.8f}, 1e-6);
}

TEST(RnnTest, HandCheckedGru) {
  // hidden 1, input 1, one step from h0 = 1 with x = 1, W = {z 0, r 0, h 1}, R = {0, 0, 1}, no
  // bias: z = sigmoid(0) = 0.5, r = 0.5; default (reset before): h~ = tanh(1 + 1 * (0.5 * 1)) =
  // tanh(1.5); linear_before_reset: tanh(1 + 0.5 * (1 * 1)) = tanh(1.5) too, so use R_h = 2:
  //   before: tanh(1 + 2 * 0.5) = tanh(2); after: tanh(1 + 0.5 * 2) = tanh(2). Both equal when
  //   there is no bias; a recurrent bias Rbh = 1 separates them:
  //   before: tanh(1 + (2 * 0.5 + 1)) = tanh(3); after: tanh(1 + 0.5 * (2 + 1)) = tanh(2.5).
  //   H = 0.5 * h~ + 0.5 * 1.
  for (int64_t lbr : {0, 1}) {
    OwnedTensor y = OpTest("GRU", 14)
                        .Attr(IntAttr("hidden_size", 1))
                        .Attr(IntAttr("linear_before_reset", lbr))
                        .Input(MakeTensor<float>({1, 1, 1}, {1}))
                        .Input(MakeTensor<float>({1, 3, 1}, {0, 0, 1}))
                        .Input(MakeTensor<float>({1, 3, 1}, {0, 0, 2}))
                        .Input(MakeTensor<float>({1, 6}, {0, 0, 0, 0, 0, 1}))
                        .OmittedInput()
                        .Input(MakeTensor<float>({1, 1, 1}, {1}))
                        .RunOne();
    const double ht = lbr ? std::tanh(2.5) : std::tanh(3.0);
    ExpectTensor<float>(y, {1, 1, 1, 1}, {static_cast<float>(0.5 * ht + 0.5)}, 1e-6);
  }
}

TEST(RnnTest, HandCheckedLstmWithPeepholes) {
  // hidden 1, input 1, x = 1, all W = 0 except W_c = 1; R = 0; h0 = 0, c0 = 2; P = {pi 1, po 0,
  // pf -1}: i = sigmoid(0 + 1*2) = sigmoid(2), f = sigmoid(-2), c~ = tanh(1),
  //   C = f * 2 + i * tanh(1), o = sigmoid(0) = 0.5, H = 0.5 * tanh(C).
  const double i = 1 / (1 + std::exp(-2.0)), f = 1 / (1 + std::exp(2.0));
  const double c = f * 2 + i * std::tanh(1.0), h = 0.5 * std::tanh(c);
  Result<std::vector<OwnedTensor>> r = OpTest("LSTM", 14)
                                           .Attr(IntAttr("hidden_size", 1))
                                           .Input(MakeTensor<float>({1, 1, 1}, {1}))
                                           .Input(MakeTensor<float>({1, 4, 1}, {0, 0, 0, 1}))
                                           .Input(MakeTensor<float>({1, 4, 1}, {0, 0, 0, 0}))
                                           .OmittedInput()
                                           .OmittedInput()
                                           .Input(MakeTensor<float>({1, 1, 1}, {0}))
                                           .Input(MakeTensor<float>({1, 1, 1}, {2}))
                                           .Input(MakeTensor<float>({1, 3}, {1, 0, -1}))
                                           .Outputs({false, true, true})
                                           .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<float>(r->at(0), {1, 1, 1}, {static_cast<float>(h)}, 1e-6);
  ExpectTensor<float>(r->at(1), {1, 1, 1}, {static_cast<float>(c)}, 1e-6);
}

struct Weights {
  std::vector<float> x, w, r, b;
};

// Runs `op` with direction / layout; returns {Y, Y_h}.
std::vector<OwnedTensor> RunCell(const std::string& op, int64_t gates, const std::string& dir,
                                 int64_t layout, const OwnedTensor& x, const Weights& wt,
                                 int64_t dirs, int64_t hidden, int64_t input) {
  Result<std::vector<OwnedTensor>> r =
      OpTest(op, 14)
          .Attr(IntAttr("hidden_size", hidden))
          .Attr(StringAttr("direction", dir))
          .Attr(IntAttr("layout", layout))
          .Input(x)
          .Input(MakeTensor<float>(
              {dirs, gates * hidden, input},
              std::vector<float>(wt.w.begin(), wt.w.begin() + dirs * gates * hidden * input)))
          .Input(MakeTensor<float>(
              {dirs, gates * hidden, hidden},
              std::vector<float>(wt.r.begin(), wt.r.begin() + dirs * gates * hidden * hidden)))
          .Input(MakeTensor<float>(
              {dirs, 2 * gates * hidden},
              std::vector<float>(wt.b.begin(), wt.b.begin() + dirs * 2 * gates * hidden)))
          .Outputs({true, true})
          .Run();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<OwnedTensor>{};
}

TEST(RnnTest, DirectionAndLayoutIdentities) {
  std::mt19937 rng(11);
  const int64_t seq = 3, batch = 2, input = 3, hidden = 2;
  for (auto [op, gates] : {std::pair<std::string, int64_t>{"RNN", 1}, {"GRU", 3}, {"LSTM", 4}}) {
    Weights wt;
    wt.x = RandomValues<float>(seq * batch * input, rng);
    // Two directions' worth; the forward-only runs use the first half.
    wt.w = RandomValues<float>(2 * gates * hidden * input, rng);
    wt.r = RandomValues<float>(2 * gates * hidden * hidden, rng);
    wt.b = RandomValues<float>(2 * 2 * gates * hidden, rng);
    const OwnedTensor x = MakeTensor<float>({seq, batch, input}, wt.x);
    // Reversed in time.
    std::vector<float> xr;
    for (int64_t t = seq - 1; t >= 0; --t) {
      xr.insert(xr.end(), wt.x.begin() + t * batch * input, wt.x.begin() + (t + 1) * batch * input);
    }
    const std::vector<OwnedTensor> fwd = RunCell(op, gates, "forward", 0, x, wt, 1, hidden, input);
    const std::vector<OwnedTensor> rev_of_rev = RunCell(
        op, gates, "reverse", 0, MakeTensor<float>({seq, batch, input}, xr), wt, 1, hidden, input);
    ASSERT_EQ(fwd.size(), 2u);
    ASSERT_EQ(rev_of_rev.size(), 2u);
    // Y_h equal; Y reversed in time.
    ExpectTensor<float>(rev_of_rev[1], {1, batch, hidden}, ToVector<float>(fwd[1]), 1e-6);
    const std::vector<float> yf = ToVector<float>(fwd[0]);
    std::vector<float> yr_expected;
    for (int64_t t = seq - 1; t >= 0; --t) {
      yr_expected.insert(yr_expected.end(), yf.begin() + t * batch * hidden,
                         yf.begin() + (t + 1) * batch * hidden);
    }
    ExpectTensor<float>(rev_of_rev[0], {seq, 1, batch, hidden}, yr_expected, 1e-6);

    // Bidirectional: direction 0 equals the forward run; direction 1 equals a reverse run with
    // the second half of the weights.
    Weights second;
    second.w.assign(wt.w.begin() + gates * hidden * input, wt.w.end());
    second.r.assign(wt.r.begin() + gates * hidden * hidden, wt.r.end());
    second.b.assign(wt.b.begin() + 2 * gates * hidden, wt.b.end());
    const std::vector<OwnedTensor> bi =
        RunCell(op, gates, "bidirectional", 0, x, wt, 2, hidden, input);
    const std::vector<OwnedTensor> rev =
        RunCell(op, gates, "reverse", 0, x, second, 1, hidden, input);
    std::vector<float> yh_expected = ToVector<float>(fwd[1]);
    const std::vector<float> yh_rev = ToVector<float>(rev[1]);
    yh_expected.insert(yh_expected.end(), yh_rev.begin(), yh_rev.end());
    ExpectTensor<float>(bi[1], {2, batch, hidden}, yh_expected, 1e-6);

    // Layout 1: X [batch, seq, input] gives Y [batch, seq, dirs, hidden] = transposed Y.
    std::vector<float> xt;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < seq; ++t) {
        xt.insert(xt.end(), wt.x.begin() + (t * batch + b) * input,
                  wt.x.begin() + (t * batch + b + 1) * input);
      }
    }
    const std::vector<OwnedTensor> bm = RunCell(
        op, gates, "forward", 1, MakeTensor<float>({batch, seq, input}, xt), wt, 1, hidden, input);
    std::vector<float> yt;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < seq; ++t) {
        yt.insert(yt.end(), yf.begin() + (t * batch + b) * hidden,
                  yf.begin() + (t * batch + b + 1) * hidden);
      }
    }
    ExpectTensor<float>(bm[0], {batch, seq, 1, hidden}, yt, 1e-6);
    ExpectTensor<float>(bm[1], {batch, 1, hidden}, ToVector<float>(fwd[1]), 1e-6);
  }
}

TEST(RnnTest, Errors) {
  auto x = MakeTensor<float>({1, 1, 1}, {1});
  auto w = MakeTensor<float>({1, 1, 1}, {1});
  ExpectInvalid(OpTest("RNN", 14)
                    .Attr(StringAttr("direction", "sideways"))
                    .Input(x)
                    .Input(w)
                    .Input(w)
                    .Create(),
                {"RNN", "direction"});
  ExpectInvalid(OpTest("RNN", 14)
                    .Attr(StringsAttr("activations", {"Gelu"}))
                    .Input(x)
                    .Input(w)
                    .Input(w)
                    .Create(),
                {"RNN", "activation"});
  ExpectInvalid(OpTest("LSTM", 14)
                    .Attr(StringsAttr("activations", {"Sigmoid"}))
                    .Input(x)
                    .Input(w)
                    .Input(w)
                    .Create(),
                {"LSTM", "activations"});
  ExpectInvalid(OpTest("RNN", 13).Attr(IntAttr("layout", 1)).Input(x).Input(w).Input(w).Create(),
                {"RNN", "layout", "opset 14"});
  ExpectInvalid(
      OpTest("RNN", 7).Attr(IntAttr("linear_before_reset", 1)).Input(x).Input(w).Input(w).Create(),
      {"RNN", "linear_before_reset", "GRU only"});
  ExpectInvalid(OpTest("RNN", 14).Attr(FloatAttr("clip", -1)).Input(x).Input(w).Input(w).Create(),
                {"RNN", "clip"});
  // W with the wrong number of gate rows (LSTM wants 4 * hidden).
  ExpectInvalid(OpTest("LSTM", 14).Input(x).Input(w).Input(w).RunStatus(), {"LSTM", "W"});
  ExpectInvalid(OpTest("RNN", 14)
                    .Input(x)
                    .Input(w)
                    .Input(w)
                    .OmittedInput()
                    .Input(MakeTensor<int32_t>({1}, {5}))
                    .RunStatus(),
                {"RNN", "sequence_lens"});
  ExpectInvalid(OpTest("RNN", 14)
                    .Input(x)
                    .Input(w)
                    .Input(w)
                    .OmittedInput()
                    .OmittedInput()
                    .Input(MakeTensor<float>({1, 2, 1}, {0, 0}))
                    .RunStatus(),
                {"RNN", "initial_h"});
}

}  // namespace
}  // namespace kiln::ref::testing
