// SPDX-License-Identifier: Apache-2.0
#include "llm/llm_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"

namespace kiln::llm {
namespace {

namespace simd = llm_ops_internal::avx2;

bool UseAvx2() { return cpu::ActiveIsa() >= cpu::Isa::kAvx2; }

// Rows per ParallelFor chunk: about 16K elements each (smaller work runs inline).
int64_t RowGrain(int64_t row_elems) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(row_elems, 1));
}

void CheckRope(const float* x, int64_t ldx, const int32_t* positions, int64_t T, int heads,
               int head_dim, int n_rot) {
  KILN_CHECK(T >= 0 && heads >= 1 && head_dim >= 2 && n_rot >= 2 && n_rot % 2 == 0 &&
                 n_rot <= head_dim && ldx >= int64_t{heads} * head_dim,
             "Rope: T ", T, " heads ", heads, " head_dim ", head_dim, " n_rot ", n_rot, " ldx ",
             ldx);
  KILN_CHECK(T == 0 || (x != nullptr && positions != nullptr), "Rope: null input");
}

// The rotation of one token's heads given the pair angles' cos and sin (n_rot / 2 each).
void RotateToken(float* row, int heads, int head_dim, int n_rot, bool neox, const float* cs,
                 const float* sn, bool avx2, float* cs2, float* sn2) {
  const int half = n_rot / 2;
  if (!neox && avx2) {
    for (int i = 0; i < half; ++i) {
      cs2[2 * i] = cs2[2 * i + 1] = cs[i];
      sn2[2 * i] = -sn[i];
      sn2[2 * i + 1] = sn[i];
    }
  }
  for (int h = 0; h < heads; ++h) {
    float* x = row + int64_t{h} * head_dim;
    if (avx2) {
      if (neox) {
        simd::RotateNeox(x, cs, sn, half);
      } else {
        simd::RotateNormal(x, cs2, sn2, n_rot);
      }
      continue;
    }
    for (int i = 0; i < half; ++i) {
      const int i0 = neox ? i : 2 * i;
      const int i1 = neox ? i + half : 2 * i + 1;
      const float x0 = x[i0], x1 = x[i1];
      x[i0] = x0 * cs[i] - x1 * sn[i];
      x[i1] = x0 * sn[i] + x1 * cs[i];
    }
  }
}

// Angles of one position, for Rope (kInvFreq) or RopeGgml (kGgml).
struct Angles {
  const float* inv_freq = nullptr;  // Rope
  float theta_scale = 1, freq_scale = 1;
  const float* freq_factors = nullptr;
  bool ggml = false;

  void Compute(int32_t pos, int half, float* cs, float* sn) const {
    if (!ggml) {
      for (int i = 0; i < half; ++i) {
        const float theta = static_cast<float>(pos) * inv_freq[i];
        cs[i] = std::cos(theta);
        sn[i] = std::sin(theta);
      }
      return;
    }
    float theta = static_cast<float>(pos);
    for (int i = 0; i < half; ++i) {
      const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
      const float t = freq_scale * (theta / ff);
      cs[i] = std::cos(t);
      sn[i] = std::sin(t);
      theta *= theta_scale;
    }
  }
};

void RopeImpl(float* x, int64_t ldx, const int32_t* positions, int64_t T, int heads, int head_dim,
              int n_rot, const Angles& angles, bool neox) {
  const bool avx2 = UseAvx2();
  const int half = n_rot / 2;
  cpu::ParallelFor(T, RowGrain(int64_t{heads} * n_rot), [&](int64_t b, int64_t e) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(2 * half + 2 * n_rot));
    float* cs = buf.data();
    float* sn = cs + half;
    float* cs2 = sn + half;
    float* sn2 = cs2 + n_rot;
    for (int64_t t = b; t < e; ++t) {
      angles.Compute(positions[t], half, cs, sn);
      RotateToken(x + t * ldx, heads, head_dim, n_rot, neox, cs, sn, avx2, cs2, sn2);
    }
  });
}

}  // namespace

void RmsNorm(const float* x, const float* weight, float eps, int64_t n, int64_t T, float* out) {
  KILN_CHECK(n >= 1 && T >= 0, "RmsNorm n ", n, " T ", T);
  const bool avx2 = UseAvx2();
  cpu::ParallelFor(T, RowGrain(n), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* xr = x + t * n;
      float* yr = out + t * n;
      double sum = 0;
      if (avx2) {
        sum = simd::SumSquares(xr, n);
      } else {
        for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(xr[i] * xr[i]);
      }
      const float mean = static_cast<float>(sum / static_cast<double>(n));
      const float scale = 1.0f / std::sqrt(mean + eps);
      if (avx2) {
        simd::ScaleMul(xr, scale, weight, yr, n);
      } else if (weight != nullptr) {
        for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * scale) * weight[i];
      } else {
        for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale;
      }
    }
  });
}

void Rope(float* x, const int32_t* positions, int64_t T, int heads, int head_dim, int n_rot,
          const float* inv_freq, bool neox) {
  const int64_t ldx = int64_t{heads} * head_dim;
  CheckRope(x, ldx, positions, T, heads, head_dim, n_rot);
  KILN_CHECK(inv_freq != nullptr, "Rope: null inv_freq");
  Angles a;
  a.inv_freq = inv_freq;
  RopeImpl(x, ldx, positions, T, heads, head_dim, n_rot, a, neox);
}

void RopeGgml(float* x, const int32_t* positions, int64_t T, int heads, int head_dim, int n_rot,
              float freq_base, float freq_scale, const float* freq_factors, bool neox) {
  const int64_t ldx = int64_t{heads} * head_dim;
  CheckRope(x, ldx, positions, T, heads, head_dim, n_rot);
  Angles a;
  a.ggml = true;
  a.theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  a.freq_scale = freq_scale;
  a.freq_factors = freq_factors;
  RopeImpl(x, ldx, positions, T, heads, head_dim, n_rot, a, neox);
}

void RopeInvFreq(float freq_base, int n_rot, const float* freq_factors, float* inv_freq) {
  for (int i = 0; i < n_rot / 2; ++i) {
    double f = 1.0 / std::pow(static_cast<double>(freq_base), 2.0 * i / n_rot);
    if (freq_factors != nullptr) f /= freq_factors[i];
    inv_freq[i] = static_cast<float>(f);
  }
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n, int64_t T) {
  KILN_CHECK(n >= 0 && T >= 0, "SwiGLU n ", n, " T ", T);
  const bool avx2 = UseAvx2();
  cpu::ParallelFor(T, RowGrain(n), [&](int64_t b, int64_t e) {
    if (avx2) {
      simd::SwiGlu(gate + b * n, up + b * n, out + b * n, (e - b) * n);
      return;
    }
    for (int64_t i = b * n; i < e * n; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  });
}

void Add(const float* a, const float* b, float* out, int64_t n) {
  KILN_CHECK(n >= 0, "Add n ", n);
  const bool avx2 = UseAvx2();
  constexpr int64_t kChunk = 4096;
  cpu::ParallelFor((n + kChunk - 1) / kChunk, 16, [&](int64_t cb, int64_t ce) {
    const int64_t begin = cb * kChunk, end = std::min(n, ce * kChunk);
    if (avx2) {
      simd::Add(a + begin, b + begin, out + begin, end - begin);
      return;
    }
    for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
  });
}

namespace ref {

void RmsNorm(const float* x, const float* weight, float eps, int64_t n, int64_t T, float* out) {
  for (int64_t t = 0; t < T; ++t) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[t * n + i] * x[t * n + i]);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i) {
      const float y = x[t * n + i] * scale;
      out[t * n + i] = weight != nullptr ? y * weight[i] : y;
    }
  }
}

namespace {
void RotateRef(float* x, int64_t ldx, int64_t T, int heads, int head_dim, int n_rot, bool neox,
               const std::vector<double>& cs, const std::vector<double>& sn) {
  // cs/sn: [T][n_rot / 2]
  const int half = n_rot / 2;
  for (int64_t t = 0; t < T; ++t) {
    for (int h = 0; h < heads; ++h) {
      float* v = x + t * ldx + int64_t{h} * head_dim;
      for (int i = 0; i < half; ++i) {
        const int i0 = neox ? i : 2 * i;
        const int i1 = neox ? i + half : 2 * i + 1;
        const double x0 = v[i0], x1 = v[i1];
        const double c = cs[t * half + i], s = sn[t * half + i];
        v[i0] = static_cast<float>(x0 * c - x1 * s);
        v[i1] = static_cast<float>(x0 * s + x1 * c);
      }
    }
  }
}
}  // namespace

void Rope(float* x, const int32_t* positions, int64_t T, int heads, int head_dim, int n_rot,
          const float* inv_freq, bool neox) {
  const int64_t ldx = int64_t{heads} * head_dim;
  CheckRope(x, ldx, positions, T, heads, head_dim, n_rot);
  const int half = n_rot / 2;
  std::vector<double> cs(static_cast<size_t>(T * half)), sn(cs.size());
  for (int64_t t = 0; t < T; ++t) {
    for (int i = 0; i < half; ++i) {
      const float theta = static_cast<float>(positions[t]) * inv_freq[i];  // the contract's angle
      cs[t * half + i] = std::cos(static_cast<double>(theta));
      sn[t * half + i] = std::sin(static_cast<double>(theta));
    }
  }
  RotateRef(x, ldx, T, heads, head_dim, n_rot, neox, cs, sn);
}

void RopeGgml(float* x, const int32_t* positions, int64_t T, int heads, int head_dim, int n_rot,
              float freq_base, float freq_scale, const float* freq_factors, bool neox) {
  const int64_t ldx = int64_t{heads} * head_dim;
  CheckRope(x, ldx, positions, T, heads, head_dim, n_rot);
  const int half = n_rot / 2;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  std::vector<double> cs(static_cast<size_t>(T * half)), sn(cs.size());
  for (int64_t t = 0; t < T; ++t) {
    float theta = static_cast<float>(positions[t]);
    for (int i = 0; i < half; ++i) {
      const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
      const float angle = freq_scale * (theta / ff);
      cs[t * half + i] = std::cos(static_cast<double>(angle));
      sn[t * half + i] = std::sin(static_cast<double>(angle));
      theta *= theta_scale;
    }
  }
  RotateRef(x, ldx, T, heads, head_dim, n_rot, neox, cs, sn);
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n, int64_t T) {
  for (int64_t i = 0; i < n * T; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void Add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace ref
}  // namespace kiln::llm
