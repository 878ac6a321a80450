# SPDX-License-Identifier: Apache-2.0
"""NumPy quantize / dequantize of ggml tensor types, bit-exact to llama.cpp's block layouts.

Types: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q8_K. Layouts (ggml-common.h; all little-endian,
blocks packed without padding; a row of n elements is n / block_elements consecutive blocks):

  Q8_0 (32 elements, 34 bytes): f16 d; int8 qs[32].              x[j] = d * qs[j]
  Q4_0 (32 elements, 18 bytes): f16 d; uint8 qs[16].             x[j]      = d * ((qs[j] & 15) - 8)
                                                                x[j + 16] = d * ((qs[j] >> 4) - 8)
  Q4_K (256, 144 bytes): f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]. Eight sub-blocks of
      32 with a 6-bit scale sc and 6-bit min m each, packed in scales[12]: sub-block j < 4 has
      sc = scales[j] & 63, m = scales[j + 4] & 63; j >= 4 has sc = (scales[j + 4] & 15) |
      ((scales[j - 4] >> 6) << 4), m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4).
      Element 64c + l (c = 0..3, l < 32) is the low nibble of qs[32c + l] (sub-block 2c),
      element 64c + 32 + l its high nibble (sub-block 2c + 1).
      x = (d * sc) * q - (dmin * m)
  Q6_K (256, 210 bytes): uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d. Element e uses
      scales[e / 16]. For half h (128 elements) and l < 32, with ql' = ql + 64h, qh' = qh + 32h:
        e = 128h + l:      (ql'[l] & 15)      | ((qh'[l] >> 0) & 3) << 4
        e = 128h + 32 + l: (ql'[l + 32] & 15) | ((qh'[l] >> 2) & 3) << 4
        e = 128h + 64 + l: (ql'[l] >> 4)      | ((qh'[l] >> 4) & 3) << 4
        e = 128h + 96 + l: (ql'[l + 32] >> 4) | ((qh'[l] >> 6) & 3) << 4
      q = that - 32; x = (d * scales[e / 16]) * q
  Q8_K (256, 292 bytes): f32 d; int8 qs[256]; int16 bsums[16] (sums of 16 consecutive qs).
      x = d * qs. (The activation type of llama.cpp's K-quant dot products.)
  BF16: the upper 16 bits of the f32; F16: IEEE binary16.

Dequantization computes exactly ggml's dequantize_row_* formulas in float32, one rounding per
operation in the order written above (no fused multiply-add: a C compiler that contracts
`d1 * q - m1` into an FMA can differ by one ulp in Q4_K).

Quantization follows ggml's reference quantizers where they are simple:
  Q8_0: d = amax / 127, q = roundf(x / d) (round half away from zero), d stored as f16;
  Q4_0: d = max / -8 with max the signed element of largest magnitude, q = min(15,
        trunc(x / d + 8.5)); Q8_K: iscale = -127 / max, q = min(127, rint(iscale * x)),
        d = 1 / iscale; F16 round-to-nearest-even; BF16 as ggml (nearest-even, NaN quieted).
  Q4_K and Q6_K use a scale search of the same kind as ggml's make_qkx2_quants /
        make_qx_quants (candidate inverse scales around nmax / range, a weighted least-squares
        fit for each, the best kept), vectorized; the scales are then quantized to 6 / 8 bits
        against the super-block's largest and the quants recomputed with the stored scales, as
        ggml does. The bytes need not equal ggml's quantizer's; only the layout is exact.

API: quantize(x, type) -> uint8 array [..., row_bytes]; dequantize(raw, type, n) -> float32
array; type is a ggml type name ("Q4_K", "f16", ...) or number. `python3 quants.py` runs the
self-test (error bounds per type, hand-built Q4_K and Q6_K blocks, Q8_0/Q4_0 hand vectors).
"""
import sys

import numpy as np

from gguf_writer import QK_K, ggml_type

F32 = np.float32


def _f16_bits(x):
    return np.asarray(x, dtype=F32).astype("<f2").view("<u2")


def _f16_value(bits):
    return np.asarray(bits, dtype="<u2").view("<f2").astype(F32)


def fp32_to_bf16_bits(x):
    """ggml_compute_fp32_to_bf16: round to nearest even; NaN -> quiet NaN."""
    u = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (u >> 16) | 64, rounded).astype("<u2")


def bf16_bits_to_fp32(bits):
    return (np.asarray(bits, dtype="<u2").astype(np.uint32) << 16).view(F32)


def _roundf(x):
    """C roundf (half away from zero) of float32 values, exactly (via float64)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _nearest_int(x):
    """ggml's nearest_int: round half to even of a float32 (|x| < 2^22)."""
    return np.rint(np.asarray(x, dtype=F32)).astype(np.int32)


def _blocks(x, qk):
    x = np.ascontiguousarray(x, dtype=F32)
    if x.shape[-1] % qk:
        raise ValueError(f"row length {x.shape[-1]} is not a multiple of {qk}")
    return x.reshape(-1, qk)


# ----------------------------------------------------------------------------------------------
# Q8_0


def quantize_q8_0(x):
    xb = _blocks(x, 32)
    amax = np.max(np.abs(xb), axis=1)
    d = (amax / F32(127)).astype(F32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, F32(1) / d, F32(0)).astype(F32)
    q = _roundf((xb * idv[:, None]).astype(F32)).astype(np.int8)
    out = np.empty((xb.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = _f16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out


def dequantize_q8_0(blocks):
    b = blocks.reshape(-1, 34)
    d = _f16_value(b[:, 0:2].copy().view("<u2")[:, 0])
    q = b[:, 2:].view(np.int8).astype(F32)
    return (q * d[:, None]).astype(F32)


# ----------------------------------------------------------------------------------------------
# Q4_0


def quantize_q4_0(x):
    xb = _blocks(x, 32)
    idx = np.argmax(np.abs(xb), axis=1)  # the first element of largest magnitude
    mx = xb[np.arange(xb.shape[0]), idx]
    d = (mx / F32(-8)).astype(F32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, F32(1) / d, F32(0)).astype(F32)
    v = ((xb * idv[:, None]).astype(F32) + F32(8.5)).astype(F32)
    q = np.minimum(15, np.trunc(v).astype(np.int32)).astype(np.uint8)
    out = np.empty((xb.shape[0], 18), dtype=np.uint8)
    out[:, 0:2] = _f16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out


def dequantize_q4_0(blocks):
    b = blocks.reshape(-1, 18)
    d = _f16_value(b[:, 0:2].copy().view("<u2")[:, 0])
    qs = b[:, 2:]
    q = np.concatenate([(qs & 15), (qs >> 4)], axis=1).astype(np.int32) - 8
    return (q.astype(F32) * d[:, None]).astype(F32)


# ----------------------------------------------------------------------------------------------
# Q4_K


def _q4k_scale_search(x, nmax=15, rmin=-1.0, rdelta=0.1, nstep=20):
    """Per row of x [n, 32]: (scale >= 0, min >= 0) with x ~ scale * L - min, L in [0, nmax].
    Weighted least squares over candidate inverse scales, as ggml's make_qkx2_quants."""
    x = x.astype(np.float64)
    w = np.sqrt(np.mean(x * x, axis=1, keepdims=True)) + np.abs(x)
    lo = np.minimum(x.min(axis=1), 0.0)
    hi = x.max(axis=1)
    rng = hi - lo
    flat = rng <= 0
    rng = np.where(flat, 1.0, rng)
    sum_w = w.sum(axis=1)
    sum_x = (w * x).sum(axis=1)

    def fit(iscale, fixed=None):
        L = np.clip(np.rint(iscale[:, None] * (x - lo[:, None])), 0, nmax)
        if fixed is not None:
            scale, mn = fixed
        else:
            sl = (w * L).sum(axis=1)
            sl2 = (w * L * L).sum(axis=1)
            sxl = (w * L * x).sum(axis=1)
            D = sum_w * sl2 - sl * sl
            ok = D > 0
            Ds = np.where(ok, D, 1.0)
            scale = np.where(ok, (sum_w * sxl - sum_x * sl) / Ds, np.nan)
            mn = np.where(ok, (sl2 * sum_x - sl * sxl) / Ds, np.nan)
            pos = mn > 0
            scale = np.where(pos, sxl / np.where(sl2 > 0, sl2, 1.0), scale)
            mn = np.where(pos, 0.0, mn)
        err = (w * (scale[:, None] * L + mn[:, None] - x) ** 2).sum(axis=1)
        return np.where(np.isnan(err), np.inf, err), scale, mn

    best_err, best_scale, best_min = fit(nmax / rng, (rng / nmax, lo))
    for k in range(nstep + 1):
        err, scale, mn = fit((rmin + rdelta * k + nmax) / rng)
        better = err < best_err
        best_err = np.where(better, err, best_err)
        best_scale = np.where(better, scale, best_scale)
        best_min = np.where(better, mn, best_min)
    best_scale = np.where(flat, 0.0, best_scale)
    best_min = np.where(flat, -lo, best_min)
    return np.maximum(best_scale, 0.0), np.maximum(-best_min, 0.0)


def pack_q4_k(d_bits, dmin_bits, sc, m, L):
    """Assembles Q4_K blocks from f16 bits of d and dmin [n], 6-bit scales and mins [n, 8] and
    4-bit quants L [n, 256] (element order). Returns uint8 [n, 144]."""
    n = L.shape[0]
    sc = sc.astype(np.uint8)
    m = m.astype(np.uint8)
    scales = np.empty((n, 12), dtype=np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    Lc = L.astype(np.uint8).reshape(n, 4, 2, 32)
    qs = (Lc[:, :, 0, :] | (Lc[:, :, 1, :] << 4)).reshape(n, 128)
    out = np.empty((n, 144), dtype=np.uint8)
    out[:, 0:2] = np.asarray(d_bits, dtype="<u2").view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = np.asarray(dmin_bits, dtype="<u2").view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = scales
    out[:, 16:] = qs
    return out


def unpack_q4_k_scales(scales):
    """scales [n, 12] -> (sc [n, 8], m [n, 8]) as ggml's get_scale_min_k4."""
    s = scales.astype(np.int32)
    sc = np.empty((s.shape[0], 8), dtype=np.int32)
    m = np.empty_like(sc)
    sc[:, 0:4] = s[:, 0:4] & 63
    m[:, 0:4] = s[:, 4:8] & 63
    sc[:, 4:8] = (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)
    m[:, 4:8] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc, m


def quantize_q4_k(x):
    xb = _blocks(x, QK_K)
    n = xb.shape[0]
    sub = xb.reshape(n * 8, 32)
    scale, mn = _q4k_scale_search(sub)
    scale = scale.reshape(n, 8).astype(F32)
    mn = mn.reshape(n, 8).astype(F32)
    max_scale = scale.max(axis=1)
    max_min = mn.max(axis=1)
    with np.errstate(divide="ignore"):
        inv_scale = np.where(max_scale > 0, F32(63) / max_scale, F32(0)).astype(F32)
        inv_min = np.where(max_min > 0, F32(63) / max_min, F32(0)).astype(F32)
    ls = np.minimum(63, _nearest_int(inv_scale[:, None] * scale))
    lm = np.minimum(63, _nearest_int(inv_min[:, None] * mn))
    d_bits = _f16_bits((max_scale / F32(63)).astype(F32))
    dmin_bits = _f16_bits((max_min / F32(63)).astype(F32))
    d_eff = (_f16_value(d_bits)[:, None] * ls.astype(F32)).astype(F32)
    dm_eff = (_f16_value(dmin_bits)[:, None] * lm.astype(F32)).astype(F32)
    xs = xb.reshape(n, 8, 32)
    with np.errstate(divide="ignore", invalid="ignore"):
        Lf = ((xs + dm_eff[:, :, None]).astype(F32) / d_eff[:, :, None]).astype(F32)
    L = np.where(d_eff[:, :, None] != 0, np.clip(_nearest_int(np.nan_to_num(Lf)), 0, 15), 0)
    return pack_q4_k(d_bits, dmin_bits, ls, lm, L.reshape(n, 256))


def dequantize_q4_k(blocks):
    b = blocks.reshape(-1, 144)
    n = b.shape[0]
    d = _f16_value(b[:, 0:2].copy().view("<u2")[:, 0])
    dmin = _f16_value(b[:, 2:4].copy().view("<u2")[:, 0])
    sc, m = unpack_q4_k_scales(b[:, 4:16])
    d1 = (d[:, None] * sc.astype(F32)).astype(F32)     # [n, 8]
    m1 = (dmin[:, None] * m.astype(F32)).astype(F32)
    qs = b[:, 16:].reshape(n, 4, 32)
    q = np.stack([qs & 15, qs >> 4], axis=2).reshape(n, 8, 32).astype(F32)
    y = (d1[:, :, None] * q).astype(F32) - m1[:, :, None]
    return y.astype(F32).reshape(n, 256)


# ----------------------------------------------------------------------------------------------
# Q6_K


def _q6k_scale_search(x, nmax=32):
    """Per row of x [n, 16]: the (signed) scale of ggml's make_qx_quants(n, 32, rmse_type 1)."""
    x = x.astype(np.float64)
    idx = np.argmax(np.abs(x), axis=1)
    mx = x[np.arange(x.shape[0]), idx]
    zero = np.abs(mx) < 1e-15
    mx = np.where(zero, 1.0, mx)
    w = x * x
    best = np.full(x.shape[0], -np.inf)
    best_scale = np.zeros(x.shape[0])
    for k in [0] + [k for k in range(-9, 10) if k]:
        iscale = -(nmax + 0.1 * k) / mx
        L = np.clip(np.rint(iscale[:, None] * x), -nmax, nmax - 1)
        slx = (w * x * L).sum(axis=1)
        sl2 = (w * L * L).sum(axis=1)
        ok = sl2 > 0
        merit = np.where(ok, slx * slx / np.where(ok, sl2, 1.0), -np.inf)
        better = merit > best
        best = np.where(better, merit, best)
        best_scale = np.where(better, slx / np.where(ok, sl2, 1.0), best_scale)
    return np.where(zero, 0.0, best_scale)


def pack_q6_k(d_bits, scales, L):
    """Assembles Q6_K blocks from f16 bits of d [n], int8 scales [n, 16] and 6-bit quants
    L [n, 256] in 0..63 (q + 32, element order). Returns uint8 [n, 210]."""
    n = L.shape[0]
    Lh = L.astype(np.uint8).reshape(n, 2, 4, 32)  # half, quarter, l
    ql = np.empty((n, 2, 64), dtype=np.uint8)
    ql[:, :, 0:32] = (Lh[:, :, 0] & 15) | ((Lh[:, :, 2] & 15) << 4)
    ql[:, :, 32:64] = (Lh[:, :, 1] & 15) | ((Lh[:, :, 3] & 15) << 4)
    qh = ((Lh[:, :, 0] >> 4) | ((Lh[:, :, 1] >> 4) << 2) | ((Lh[:, :, 2] >> 4) << 4)
          | ((Lh[:, :, 3] >> 4) << 6))
    out = np.empty((n, 210), dtype=np.uint8)
    out[:, 0:128] = ql.reshape(n, 128)
    out[:, 128:192] = qh.reshape(n, 64)
    out[:, 192:208] = np.asarray(scales, dtype=np.int8).view(np.uint8)
    out[:, 208:210] = np.asarray(d_bits, dtype="<u2").view(np.uint8).reshape(-1, 2)
    return out


def quantize_q6_k(x):
    xb = _blocks(x, QK_K)
    n = xb.shape[0]
    scales = _q6k_scale_search(xb.reshape(n * 16, 16)).reshape(n, 16).astype(F32)
    idx = np.argmax(np.abs(scales), axis=1)
    max_scale = scales[np.arange(n), idx]
    zero = np.abs(max_scale) < 1e-15
    with np.errstate(divide="ignore"):
        iscale = np.where(zero, F32(0), F32(-128) / np.where(zero, F32(1), max_scale)).astype(F32)
        d = np.where(zero, F32(0), F32(1) / np.where(zero, F32(1), iscale)).astype(F32)
    d_bits = _f16_bits(d)
    sq = np.minimum(127, _nearest_int(iscale[:, None] * scales)).astype(np.int8)
    sq = np.where(zero[:, None], 0, sq).astype(np.int8)
    deff = (_f16_value(d_bits)[:, None] * sq.astype(F32)).astype(F32)  # [n, 16]
    xs = xb.reshape(n, 16, 16)
    with np.errstate(divide="ignore", invalid="ignore"):
        Lf = (xs / deff[:, :, None]).astype(F32)
    L = np.where(deff[:, :, None] != 0, np.clip(_nearest_int(np.nan_to_num(Lf)), -32, 31), 0) + 32
    return pack_q6_k(d_bits, sq, L.reshape(n, 256))


def dequantize_q6_k(blocks):
    b = blocks.reshape(-1, 210)
    n = b.shape[0]
    ql = b[:, 0:128].reshape(n, 2, 64).astype(np.int32)
    qh = b[:, 128:192].reshape(n, 2, 32).astype(np.int32)
    sc = b[:, 192:208].view(np.int8).astype(F32)
    d = _f16_value(b[:, 208:210].copy().view("<u2")[:, 0])
    q = np.empty((n, 2, 4, 32), dtype=np.int32)
    q[:, :, 0] = (ql[:, :, 0:32] & 15) | (((qh >> 0) & 3) << 4)
    q[:, :, 1] = (ql[:, :, 32:64] & 15) | (((qh >> 2) & 3) << 4)
    q[:, :, 2] = (ql[:, :, 0:32] >> 4) | (((qh >> 4) & 3) << 4)
    q[:, :, 3] = (ql[:, :, 32:64] >> 4) | (((qh >> 6) & 3) << 4)
    q = (q - 32).reshape(n, 16, 16).astype(F32)
    ds = (d[:, None] * sc).astype(F32)
    return (ds[:, :, None] * q).astype(F32).reshape(n, 256)


# ----------------------------------------------------------------------------------------------
# Q8_K


def quantize_q8_k(x):
    xb = _blocks(x, QK_K)
    n = xb.shape[0]
    idx = np.argmax(np.abs(xb), axis=1)
    mx = xb[np.arange(n), idx]
    zero = mx == 0
    iscale = np.where(zero, F32(0), F32(-127) / np.where(zero, F32(1), mx)).astype(F32)
    q = np.minimum(127, _nearest_int((iscale[:, None] * xb).astype(F32))).astype(np.int8)
    q = np.where(zero[:, None], 0, q).astype(np.int8)
    d = np.where(zero, F32(0), F32(1) / np.where(zero, F32(1), iscale)).astype("<f4")
    bsums = q.astype(np.int32).reshape(n, 16, 16).sum(axis=2).astype("<i2")
    out = np.empty((n, 292), dtype=np.uint8)
    out[:, 0:4] = d.view(np.uint8).reshape(n, 4)
    out[:, 4:260] = q.view(np.uint8)
    out[:, 260:292] = bsums.view(np.uint8).reshape(n, 32)
    return out


def dequantize_q8_k(blocks):
    b = blocks.reshape(-1, 292)
    d = b[:, 0:4].copy().view("<f4")[:, 0]
    q = b[:, 4:260].view(np.int8).astype(F32)
    return (d[:, None] * q).astype(F32)


# ----------------------------------------------------------------------------------------------
# Dispatch

_QUANT = {
    "Q8_0": (quantize_q8_0, dequantize_q8_0),
    "Q4_0": (quantize_q4_0, dequantize_q4_0),
    "Q4_K": (quantize_q4_k, dequantize_q4_k),
    "Q6_K": (quantize_q6_k, dequantize_q6_k),
    "Q8_K": (quantize_q8_k, dequantize_q8_k),
}
SUPPORTED = ("F32", "F16", "BF16") + tuple(_QUANT)
_CHUNK_ELEMENTS = 1 << 20


def quantize(x, gtype):
    """float array [..., n] -> uint8 [..., row_bytes] in ggml type `gtype` (name or number)."""
    gt = ggml_type(gtype)
    x = np.asarray(x, dtype=F32)
    lead = x.shape[:-1]
    rb = gt.row_bytes(x.shape[-1])
    if gt.name == "F32":
        raw = np.ascontiguousarray(x, dtype="<f4").view(np.uint8)
    elif gt.name == "F16":
        raw = np.ascontiguousarray(x.astype("<f2")).view(np.uint8)
    elif gt.name == "BF16":
        raw = np.ascontiguousarray(fp32_to_bf16_bits(x)).view(np.uint8)
    elif gt.name in _QUANT:
        # Blocks are independent: quantize a bounded number at a time (memory stays small for
        # multi-gigabyte tensors).
        xb = np.ascontiguousarray(x).reshape(-1, gt.block_elements)
        step = max(1, _CHUNK_ELEMENTS // gt.block_elements)
        raw = np.concatenate([_QUANT[gt.name][0](xb[i:i + step]) for i in range(0, len(xb), step)])
    else:
        raise ValueError(f"quantize: type {gt.name} is not supported ({', '.join(SUPPORTED)})")
    return raw.reshape(*lead, rb)


def dequantize(raw, gtype, n=None):
    """uint8 bytes of whole rows of type `gtype` -> float32. With n (elements per row) the
    result has shape [rows, n]; without, it is flat."""
    gt = ggml_type(gtype)
    raw = np.ascontiguousarray(np.asarray(raw, dtype=np.uint8)).reshape(-1)
    if len(raw) % gt.block_bytes:
        raise ValueError(f"{len(raw)} bytes is not whole {gt.name} blocks of {gt.block_bytes}")
    if gt.name == "F32":
        y = raw.view("<f4").astype(F32)
    elif gt.name == "F16":
        y = raw.view("<f2").astype(F32)
    elif gt.name == "BF16":
        y = bf16_bits_to_fp32(raw.view("<u2"))
    elif gt.name in _QUANT:
        y = _QUANT[gt.name][1](raw.reshape(-1, gt.block_bytes)).reshape(-1)
    else:
        raise ValueError(f"dequantize: type {gt.name} is not supported ({', '.join(SUPPORTED)})")
    return y if n is None else y.reshape(-1, n)


# ----------------------------------------------------------------------------------------------
# Self-test


def _selftest():
    rng = np.random.default_rng(1)
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    # Round trips: relative RMS error bounds per type (Gaussian rows of 1024).
    x = rng.standard_normal((64, 1024)).astype(F32)
    bounds = {"F32": 0.0, "F16": 1e-3, "BF16": 8e-3, "Q8_0": 0.01, "Q8_K": 0.01,
              "Q6_K": 0.03, "Q4_0": 0.14, "Q4_K": 0.11}
    for t, bound in bounds.items():
        raw = quantize(x, t)
        gt = ggml_type(t)
        y = dequantize(raw, t, 1024)
        rel = float(np.sqrt(np.mean((y - x) ** 2) / np.mean(x ** 2)))
        check(raw.shape == (64, gt.row_bytes(1024)) and rel <= bound,
              f"{t}: round trip relative RMS error {rel:.5f} <= {bound}")
    # Per-element bounds of the simple types: |err| <= d / 2 (Q8_0), <= d (Q4_0, incl. clamp).
    # (d is rounded to f16 after the quants are chosen: Q8_0 adds up to 127 * 2^-11 d.)
    for t, qk, half in (("Q8_0", 32, 0.57), ("Q4_0", 32, 1.0)):
        raw = quantize(x, t).reshape(-1, ggml_type(t).block_bytes)
        d = np.abs(_f16_value(raw[:, 0:2].copy().view("<u2")[:, 0]))
        err = np.abs(dequantize(raw, t, qk) - x.reshape(-1, qk)).max(axis=1)
        check(bool(np.all(err <= half * d * 1.01 + 1e-6)), f"{t}: every element within {half} d")
    for t in ("Q4_K", "Q6_K", "Q8_0", "Q4_0", "BF16", "F16"):
        z = np.zeros((2, 256), dtype=F32)
        check(bool(np.all(dequantize(quantize(z, t), t) == 0)), f"{t}: zeros stay zeros")

    # Hand vectors (computed by hand from ggml's formulas).
    # Q8_0: block of 32 with x[0] = 127 -> d = 1, q = x rounded half away from zero.
    xv = np.zeros(32, dtype=F32)
    xv[:4] = [127, -2.5, 2.5, 0.49]
    raw = quantize(xv, "Q8_0").reshape(1, -1)
    check(raw[0].tolist()[:6] == [0x00, 0x3C, 127, 0xFD, 3, 0], "Q8_0: hand block bytes")
    # Q4_0: max element -8 -> d = 1; q = trunc(x + 8.5) clamped to 15; x = 7.9 -> 15 (clamp).
    xv = np.zeros(32, dtype=F32)
    xv[0], xv[1], xv[16], xv[17] = -8, 7.9, 3, -1.2
    raw = quantize(xv, "Q4_0").reshape(1, -1)
    b = raw[0].tolist()
    check(b[0:2] == [0x00, 0x3C] and b[2] == (0 | (11 << 4)) and b[3] == (15 | (7 << 4))
          and b[4] == (8 | (8 << 4)), "Q4_0: hand block bytes")
    check(dequantize(raw, "Q4_0")[[0, 1, 16, 17]].tolist() == [-8, 7, 3, -1], "Q4_0: hand values")

    # Q4_K: a hand-built block. d = 0.5, dmin = 0.25 (exact in f16); sub-block j has scale
    # sc_j = 3 + 8j (j=7: 59) and min m_j = 60 - 7j; quant of element e is e % 16.
    d_bits = _f16_bits(np.array([0.5], dtype=F32))
    dmin_bits = _f16_bits(np.array([0.25], dtype=F32))
    sc = np.array([[3 + 8 * j for j in range(8)]])
    mm = np.array([[60 - 7 * j for j in range(8)]])
    L = (np.arange(256) % 16)[None, :]
    raw = pack_q4_k(d_bits, dmin_bits, sc, mm, L)
    check(raw.shape == (1, 144), "Q4_K: block is 144 bytes")
    # Byte-level expectations from the layout: scales[0] = sc0 | (sc4 >> 4) << 6 = 3 | 2 << 6
    # (sc4 = 35 = 0b100011); scales[8] = (sc4 & 15) | (m4 & 15) << 4 = 3 | (32 & 15) << 4 = 3.
    check(raw[0, 4] == (3 | (2 << 6)) and raw[0, 12] == (3 | (0 << 4))
          and raw[0, 8] == (60 | (2 << 6)), "Q4_K: packed scale bytes")
    # qs[0] = L[0] | L[32] << 4 = 0 | 0 << 4; qs[1] = 1 | 1 << 4; qs[32] = L[64] | L[96] << 4.
    check(raw[0, 16] == 0 and raw[0, 17] == 0x11 and raw[0, 48] == 0x00, "Q4_K: packed quants")
    y = dequantize(raw, "Q4_K")
    expect = np.array([0.5 * (3 + 8 * (e // 32)) * (e % 16) - 0.25 * (60 - 7 * (e // 32))
                       for e in range(256)], dtype=np.float64)
    check(np.array_equal(y.astype(np.float64), expect), "Q4_K: hand block dequantizes exactly")
    sc2, m2 = unpack_q4_k_scales(raw[:, 4:16])
    check(sc2.tolist() == sc.tolist() and m2.tolist() == mm.tolist(), "Q4_K: scale round trip")

    # Q6_K: hand-built block. d = 0.125; scales[s] = s - 8 (negative ones too); quant of
    # element e is (e * 7) % 64 - 32.
    qv = (np.arange(256) * 7) % 64
    scl = np.arange(16) - 8
    raw = pack_q6_k(_f16_bits(np.array([0.125], dtype=F32)), scl[None, :], qv[None, :])
    check(raw.shape == (1, 210), "Q6_K: block is 210 bytes")
    # ql[0] = (q[0] & 15) | (q[64] & 15) << 4; q[64] = 448 % 64 = 0. qh[0] = q0>>4 | q32>>4<<2
    # | q64>>4<<4 | q96>>4<<6 with q32 = 224 % 64 = 32, q96 = 672 % 64 = 32 -> 0 | 2<<2 | 0 | 2<<6.
    check(raw[0, 0] == 0 and raw[0, 128] == ((2 << 2) | (2 << 6)), "Q6_K: packed bytes")
    check(raw[0, 192:208].view(np.int8).tolist() == scl.tolist(), "Q6_K: scales stored as int8")
    y = dequantize(raw, "Q6_K")
    expect = np.array([0.125 * (e // 16 - 8) * ((e * 7) % 64 - 32) for e in range(256)])
    check(np.array_equal(y.astype(np.float64), expect), "Q6_K: hand block dequantizes exactly")

    # Q8_K: bsums and d.
    xv = rng.standard_normal(256).astype(F32)
    raw = quantize(xv, "Q8_K").reshape(1, -1)
    q = raw[0, 4:260].view(np.int8).astype(np.int32)
    check(raw[0, 260:292].view("<i2").tolist() == q.reshape(16, 16).sum(axis=1).tolist(),
          "Q8_K: bsums are the sums of 16 quants")
    check(int(np.abs(q).max()) == 127, "Q8_K: the largest magnitude maps to 127")

    # BF16 rounding: 1 + 2^-8 is a tie -> even (1.0); 1 + 3 * 2^-8 rounds up; NaN stays NaN.
    v = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, np.nan, -2.0], dtype=F32)
    bits = fp32_to_bf16_bits(v)
    check(bits[0] == 0x3F80 and bits[1] == 0x3F82 and (bits[2] & 0x7FC0) == 0x7FC0
          and bits[3] == 0xC000, "BF16: round to nearest even, NaN quiet")

    print("quants self-test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(_selftest())
