// SPDX-License-Identifier: Apache-2.0
#pragma once
// The decoder's small row-wise operations on F32 activations [T, n] (row-major, contiguous):
// RMSNorm (also per head: qwen3's Q/K norm is RmsNorm over T * heads rows of head_dim), rotary
// position embedding (normal and NeoX pairing, angles as llama.cpp computes them), SwiGLU, and
// the residual add. Each has a plain ref:: version (the test oracle) and a fast one (AVX2 where
// ActiveIsa() allows, threaded over rows with ParallelFor when large enough).
//
// Numerics, against llama.cpp's CPU backend (ggml-cpu):
//  - RmsNorm: out = (x * (1 / sqrt(mean(x^2) + eps))) * weight, as ggml's rms_norm followed by
//    mul, with ggml's rounding: squares in float summed in double, mean and scale in float.
//  - Rope angles. ggml (ggml_rope_cache_init) computes theta for pair i of position p as
//    theta_0 = p, theta_{i+1} = theta_i * theta_scale, in float (so rounding accumulates along
//    i), then divides by the freq factor (Llama-3 scaling's rope_freqs) and multiplies by
//    freq_scale, and rotates with cosf / sinf. RopeGgml reproduces that angle bit for bit (same
//    float operations in the same order), so with the same libm the rotation matches llama.cpp.
//    Rope (the inv_freq form) computes theta = (float) p * inv_freq[i] in one float multiply,
//    which is within a few ulp of ggml's angle (~1e-5 rad at p ~ 1000), enough for greedy
//    agreement in practice, but RopeGgml is the one to use for llama.cpp agreement.
//  - SwiGLU: silu(g) * u with silu(g) = g / (1 + exp(-g)); the fast path's exp is a polynomial
//    (~2 ulp), ggml's vectorized silu is its own approximation: both within ~1e-6 relative.
//
// Thread safety: all functions are reentrant; they run on the calling thread's OpenMP team.

#include <cstdint>

namespace kiln::llm {

// out[t, i] = x[t, i] * rsqrt(mean_i(x[t, :]^2) + eps) * (weight ? weight[i] : 1), for T rows of
// n. out may equal x (in place). REQUIRES: n >= 1, T >= 0.
void RmsNorm(const float* x, const float* weight, float eps, int64_t n, int64_t T, float* out);

// Rotary embedding in place on x [T, heads * head_dim] (contiguous rows): for each token t and
// head, the first n_rot dims are rotated by angles theta_i = (float) positions[t] * inv_freq[i], i
// < n_rot / 2; dims [n_rot, head_dim) are left as they are. Pairing: neox ? (i, i + n_rot / 2)
// (llama.cpp mode 2, NeoX / HF rotate_half) : (2i, 2i + 1) (mode 0, "normal"/GPT-J interleaved).
// The pair (x0, x1) becomes (x0 cos - x1 sin, x0 sin + x1 cos). REQUIRES: n_rot even, 2 <= n_rot <=
// head_dim; inv_freq has n_rot / 2 entries.
void Rope(float* x, const int32_t* positions, int64_t T, int heads, int head_dim, int n_rot,
          const float* inv_freq, bool neox);

// The same rotation with llama.cpp's angles: theta_i = ((...((float) p * s) * s ...) * s) (i
// multiplications by s = theta_scale = powf(freq_base, -2.0f / n_rot), in float), then
// theta_i / freq_factors[i] when freq_factors is given, then freq_scale * that; cos/sin by cosf
// and sinf. (YaRN's ext_factor and attn_factor are not supported: ext_factor 0, mscale 1.)
void RopeGgml(float* x, const int32_t* positions, int64_t T, int heads, int head_dim, int n_rot,
              float freq_base, float freq_scale, const float* freq_factors, bool neox);

// inv_freq[i] = 1 / freq_base^(2i / n_rot) for i < n_rot / 2, computed in double (HF's
// formula), optionally divided by freq_factors[i]. For Rope.
void RopeInvFreq(float freq_base, int n_rot, const float* freq_factors, float* inv_freq);

// out[t, i] = silu(gate[t, i]) * up[t, i] for T rows of n. out may equal gate or up.
void SwiGlu(const float* gate, const float* up, float* out, int64_t n, int64_t T);

// out[i] = a[i] + b[i] for n elements. out may equal a or b.
void Add(const float* a, const float* b, float* out, int64_t n);

namespace ref {
void RmsNorm(const float* x, const float* weight, float eps, int64_t n, int64_t T, float* out);
void Rope(float* x, const int32_t* positions, int64_t T, int heads, int head_dim, int n_rot,
          const float* inv_freq, bool neox);
void RopeGgml(float* x, const int32_t* positions, int64_t T, int heads, int head_dim, int n_rot,
              float freq_base, float freq_scale, const float* freq_factors, bool neox);
void SwiGlu(const float* gate, const float* up, float* out, int64_t n, int64_t T);
void Add(const float* a, const float* b, float* out, int64_t n);
}  // namespace ref

// Not API: the AVX2 row kernels behind the fast versions.
namespace llm_ops_internal::avx2 {
// Returns the sum over i < n of (double) (x[i] * x[i]) (each square rounded to float, as ggml).
double SumSquares(const float* x, int64_t n);
// out[i] = (x[i] * scale) * (weight ? weight[i] : 1).
void ScaleMul(const float* x, float scale, const float* weight, float* out, int64_t n);
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);
void Add(const float* a, const float* b, float* out, int64_t n);
// Rotates one head's first n_rot dims with per-pair cos/sin (n_rot / 2 each).
void RotateNeox(float* x, const float* cos, const float* sin, int half);
// Interleaved: cs2 = (c0, c0, c1, c1, ...), sn2 = (-s0, s0, -s1, s1, ...), n_rot entries each.
void RotateNormal(float* x, const float* cs2, const float* sn2, int n_rot);
}  // namespace llm_ops_internal::avx2

}  // namespace kiln::llm
