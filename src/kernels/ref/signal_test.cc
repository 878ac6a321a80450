// SPDX-License-Identifier: Apache-2.0
// Tests for the reference signal kernels (signal.cc): windows (periodic and symmetric, output
// dtypes), MelWeightMatrix shape and triangle, DFT (forward, inverse round trip, onesided,
// dft_length, random against a direct sum), STFT framing, and error paths.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

TEST(SignalTest, Windows) {
  // Hann, periodic, size 4: 0.5 - 0.5 cos(2 pi n / 4) = {0, 0.5, 1, 0.5}.
  ExpectTensor<float>(OpTest("HannWindow", 17).Input(MakeTensor<int64_t>({}, {4})).RunOne(), {4},
                      {0, 0.5f, 1, 0.5f}, 1e-6);
  // Symmetric size 3 (N = 2): {0, 1, 0}.
  ExpectTensor<float>(OpTest("HannWindow", 17)
                          .Attr(IntAttr("periodic", 0))
                          .Input(MakeTensor<int32_t>({}, {3}))
                          .RunOne(),
                      {3}, {0, 1, 0}, 1e-6);
  // Hamming, periodic, size 2: a0 - a1 cos(pi n) = {a0 - a1, a0 + a1} = {4/46, 1}, as FP64.
  ExpectTensor<double>(OpTest("HammingWindow", 17)
                           .Attr(IntAttr("output_datatype", 11))
                           .Input(MakeTensor<int64_t>({}, {2}))
                           .RunOne(),
                       {2}, {4.0 / 46.0, 1.0}, 1e-12);
  // Blackman, periodic, size 2: {0.42 - 0.5 + 0.08, 0.42 + 0.5 + 0.08} = {0, 1}.
  ExpectTensor<float>(OpTest("BlackmanWindow", 17).Input(MakeTensor<int64_t>({}, {2})).RunOne(),
                      {2}, {0, 1}, 1e-6);
  ExpectInvalid(OpTest("HannWindow", 17).Input(MakeTensor<int64_t>({}, {-1})).RunStatus(),
                {"HannWindow", "size"});
  ExpectInvalid(OpTest("HannWindow", 17)
                    .Attr(IntAttr("output_datatype", 8))
                    .Input(MakeTensor<int64_t>({}, {2}))
                    .Create(),
                {"HannWindow", "output_datatype"});
}

TEST(SignalTest, MelWeightMatrix) {
  // 1 mel bin, dft_length 8 (5 spectrogram bins), 8000 Hz, 0..4000 Hz. mel(4000) = 2146.06;
  // step = 2146.06 / 3; edges at mel 0, 715.35, 1430.7 -> 0, 620.6, 1791.3 Hz -> bins
  // floor(9 * hz / 8000) = 0, 0, 2. Left edge == center: output[0][0] = 1; right slope from
  // bin 0 to 2: output[j][0] = (2 - j) / 2 for j in {0, 1} -> 1, 0.5.
  ExpectTensor<float>(OpTest("MelWeightMatrix", 17)
                          .Input(MakeTensor<int64_t>({}, {1}))
                          .Input(MakeTensor<int64_t>({}, {8}))
                          .Input(MakeTensor<int64_t>({}, {8000}))
                          .Input(MakeTensor<float>({}, {0}))
                          .Input(MakeTensor<float>({}, {4000}))
                          .RunOne(),
                      {5, 1}, {1, 0.5f, 0, 0, 0});
  ExpectInvalid(OpTest("MelWeightMatrix", 17)
                    .Input(MakeTensor<int64_t>({}, {1}))
                    .Input(MakeTensor<int64_t>({}, {8}))
                    .Input(MakeTensor<int64_t>({}, {8000}))
                    .Input(MakeTensor<float>({}, {100}))
                    .Input(MakeTensor<float>({}, {50}))
                    .RunStatus(),
                {"MelWeightMatrix", "upper_edge_hertz"});
}

TEST(SignalTest, DftHandChecked) {
  // DFT of the real signal {1, 2, 3, 4}: X0 = 10, X1 = -2 + 2i, X2 = -2, X3 = -2 - 2i.
  OwnedTensor x = MakeTensor<float>({1, 4, 1}, {1, 2, 3, 4});
  ExpectTensor<float>(OpTest("DFT", 17).Input(x).RunOne(), {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2},
                      1e-5);
  // Onesided keeps bins 0..2.
  ExpectTensor<float>(OpTest("DFT", 17).Attr(IntAttr("onesided", 1)).Input(x).RunOne(), {1, 3, 2},
                      {10, 0, -2, 2, -2, 0}, 1e-5);
  // dft_length 2 truncates to {1, 2}: {3, -1}.
  ExpectTensor<float>(OpTest("DFT", 17).Input(x).Input(MakeTensor<int64_t>({}, {2})).RunOne(),
                      {1, 2, 2}, {3, 0, -1, 0}, 1e-5);
  // Inverse of the spectrum gives the signal back (complex, zero imaginary part).
  ExpectTensor<float>(OpTest("DFT", 17)
                          .Attr(IntAttr("inverse", 1))
                          .Input(MakeTensor<float>({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}))
                          .RunOne(),
                      {1, 4, 2}, {1, 0, 2, 0, 3, 0, 4, 0}, 1e-5);
}

TEST(SignalTest, DftRandomAlongAxis2) {
  // [2, 3, 5, 2] complex input, DFT along axis 2 against a direct sum written here.
  std::mt19937 rng(5);
  const std::vector<double> v = RandomValues<double>(2 * 3 * 5 * 2, rng);
  std::vector<double> want(v.size());
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t k = 0; k < 5; ++k) {
        double re = 0, im = 0;
        for (int64_t n = 0; n < 5; ++n) {
          const size_t at = static_cast<size_t>(((b * 3 + i) * 5 + n) * 2);
          const double ang = -2 * std::numbers::pi * static_cast<double>(k * n) / 5;
          re += v[at] * std::cos(ang) - v[at + 1] * std::sin(ang);
          im += v[at] * std::sin(ang) + v[at + 1] * std::cos(ang);
        }
        const size_t o = static_cast<size_t>(((b * 3 + i) * 5 + k) * 2);
        want[o] = re;
        want[o + 1] = im;
      }
    }
  }
  ExpectTensor<double>(OpTest("DFT", 17)
                           .Attr(IntAttr("axis", 2))
                           .Input(MakeTensor<double>({2, 3, 5, 2}, v))
                           .RunOne(),
                       {2, 3, 5, 2}, want, 1e-9);
}

TEST(SignalTest, Stft) {
  // Signal {1, 2, 3, 4, 5}, frame 2, step 2 -> frames {1,2}, {3,4}; onesided bins 0..1:
  //   {3, 0, -1, 0}, {7, 0, -1, 0}. With window {1, 0}: {1, 0, 1, 0}, {3, 0, 3, 0}.
  OwnedTensor x = MakeTensor<float>({1, 5, 1}, {1, 2, 3, 4, 5});
  ExpectTensor<float>(OpTest("STFT", 17)
                          .Input(x)
                          .Input(MakeTensor<int64_t>({}, {2}))
                          .OmittedInput()
                          .Input(MakeTensor<int64_t>({}, {2}))
                          .RunOne(),
                      {1, 2, 2, 2}, {3, 0, -1, 0, 7, 0, -1, 0}, 1e-5);
  ExpectTensor<float>(OpTest("STFT", 17)
                          .Input(x)
                          .Input(MakeTensor<int64_t>({}, {2}))
                          .Input(MakeTensor<float>({2}, {1, 0}))
                          .RunOne(),
                      {1, 2, 2, 2}, {1, 0, 1, 0, 3, 0, 3, 0}, 1e-5);
  ExpectInvalid(OpTest("STFT", 17).Input(x).Input(MakeTensor<int64_t>({}, {0})).RunStatus(),
                {"STFT"});
  ExpectInvalid(OpTest("STFT", 17)
                    .Input(x)
                    .Input(MakeTensor<int64_t>({}, {1}))
                    .OmittedInput()
                    .Input(MakeTensor<int64_t>({}, {9}))
                    .RunStatus(),
                {"STFT", "frame length"});
}

TEST(SignalTest, DftErrors) {
  ExpectInvalid(OpTest("DFT", 17).Input(MakeTensor<float>({4, 1}, {1, 2, 3, 4})).RunStatus(),
                {"DFT", "rank"});
  ExpectInvalid(OpTest("DFT", 17)
                    .Attr(IntAttr("axis", 2))
                    .Input(MakeTensor<float>({1, 2, 1}, {1, 2}))
                    .RunStatus(),
                {"DFT", "axis"});
  ExpectInvalid(OpTest("DFT", 17)
                    .Input(MakeTensor<float>({1, 2, 1}, {1, 2}))
                    .Input(MakeTensor<int64_t>({}, {0}))
                    .RunStatus(),
                {"DFT", "dft_length"});
  ExpectInvalid(OpTest("DFT", 17)
                    .Attr(IntAttr("inverse", 1))
                    .Attr(IntAttr("onesided", 1))
                    .Input(MakeTensor<float>({1, 2, 1}, {1, 2}))
                    .Create(),
                {"DFT", "onesided"});
}

}  // namespace
}  // namespace kiln::ref::testing
