"""HVX arithmetic on FP16 (and FP32) bit patterns: the kernels behind the ``hvx_*`` lines.

Elementwise add, multiply and clamp; exp, reciprocal, reductions, average pooling and FP32
casts, which the scheduler needs for the non-matrix operators of float graphs (softmax, pooling,
the FP32 interface of a graph). IEEE 754 binary16 with subnormals; NaN results are the quiet NaN
0x7E00 (FP32: 0x7FC00000). Real HVX code has several numeric modes (qfloat or IEEE) and
approximations; these are the documented choices:

* ``fp16_binary``: a + b or a * b, one rounding to nearest even. ``fp16_clamp``: min(max(x, lo),
  hi) with -0 below +0; a NaN stays NaN.
* ``fp16_exp``: exp(x) correctly rounded to FP16: the float64 ``exp`` rounded once more to
  FP16, exhaustively checked against a 110-bit ``gmpy2`` value in the tests, so the double
  rounding never bites for any FP16 input. A real HVX routine is a polynomial with a few ULP of
  error: this is the idealised routine.
* ``fp16_recip``: 1/x correctly rounded, from an exact integer division (one rounding).
* ``fp16_reduce_sum``: the sum in FP32, IEEE single additions in index order (HVX's IEEE FP32
  mode), then rounded once to FP16. ``fp16_reduce_max``: the maximum, -0 below +0, NaN wins.
* ``fp16_avg_pool``: per window, the valid (not padding) inputs summed in FP32 in row-major
  order, divided by their count in FP32, rounded to FP16 (TOSA AVG_POOL2D divides by the count
  of valid inputs).
* ``f32_to_f16``: round to nearest even, overflow to infinity; ``f16_to_f32``: exact.
* ``pack_act``/``unpack_act``: the crouton layout, straight from and to the VTCM's words.

Each numba kernel has a numpy twin (``*_twin``, same signature; for the layouts, the
``layouts.pack_nhwc``/``unpack_nhwc`` pair) used by the tests.
"""

from __future__ import annotations

import math

import numpy as np

from hwsim.targets.floats import FINITE, INF, NAN, RNE, ZERO, jit, round_pack, unpack
from hwsim.targets.hmx.exact64 import finite_value, round_two_sum
from hwsim.targets.hmx.numerics import E5, M10, NO_STICKY, exact_add

FP16_NAN = 0x7E00  # the quiet NaN HVX results carry
FP32_NAN = 0x7FC00000
E8, M23 = np.int64(8), np.int64(23)  # FP32, typed (``numerics.E5``)


def fp16_binary(a, b, out, mul):
    """``out = a + b`` (``mul`` false) or ``a * b`` on FP16 bits, one rounding each. Finite
    operands with a normal result: the float64 sum or product, which is exact (at most 52
    bits), rounded once (``round_two_sum``, in ``_binary_usual``); the rest by exact integers
    (``_binary_rest``, compiled only when first needed)."""
    pending = np.empty(a.size, dtype=np.bool_)
    if _binary_usual(a, b, out, mul, pending):
        _binary_rest(a, b, out, mul, pending)


@jit
def _binary_usual(a, b, out, mul, pending):
    """The elements of ``fp16_binary`` it computes in float64; the others are marked in
    ``pending`` and counted in the result."""
    e5, m16 = E5, M10
    waiting = 0
    for i in range(a.size):
        ok_a, x = finite_value(np.int64(a[i]), e5, m16)
        ok_b, y = finite_value(np.int64(b[i]), e5, m16)
        done = False
        if ok_a and ok_b:
            v = x * y if mul else x + y
            if v == 0.0:
                out[i] = 0x8000 if math.copysign(1.0, v) < 0.0 else 0
                done = True
            else:
                done, bits, _ = round_two_sum(v, 0.0, e5, m16, np.int64(30))
                if done:
                    out[i] = bits
        pending[i] = not done
        if not done:
            waiting += 1
    return waiting


@jit
def _binary_rest(a, b, out, mul, pending):
    """The ``pending`` elements of ``_binary_usual``, by exact integers."""
    for i in range(a.size):
        if pending[i]:
            out[i] = _fp16_binary_exact(a[i], b[i], mul)


@jit
def _fp16_binary_exact(a, b, mul):
    """One element of ``fp16_binary`` by exact integers."""
    ca, sa, ma, ea = unpack(np.uint64(a), E5, M10)
    cb, sb, mb, eb = unpack(np.uint64(b), E5, M10)
    if mul:
        sign = sa ^ sb
        if ca == NAN or cb == NAN or (ca == INF and cb == ZERO) or (ca == ZERO and cb == INF):
            return FP16_NAN
        if ca == INF or cb == INF:
            return (sign << 15) | 0x7C00
        return round_pack(sign, ma * mb, ea + eb, NO_STICKY, E5, M10, RNE, False, False)[0]
    if ca == NAN or cb == NAN or (ca == INF and cb == INF and sa != sb):
        return FP16_NAN
    if ca == INF or cb == INF:
        return ((sa if ca == INF else sb) << 15) | 0x7C00
    sign, sig, exp, sticky = exact_add(sa, ma, ea, sb, mb, eb)
    return round_pack(sign, sig, exp, sticky, E5, M10, RNE, False, False)[0]


@jit
def _key(bits):
    """Total order of non-NaN FP16 bits by value, -0 below +0."""
    magnitude = np.int64(bits) & 0x7FFF
    return -magnitude - 1 if np.int64(bits) >> 15 else magnitude


@jit
def fp16_clamp(a, out, lo, hi):
    """``out = min(max(a, lo), hi)`` on FP16 bits; a NaN stays NaN."""
    for i in range(a.size):
        x = a[i]
        if unpack(np.uint64(x), E5, M10)[0] == NAN:
            out[i] = FP16_NAN
        else:
            y = lo if _key(np.int64(x)) < _key(lo) else x
            out[i] = hi if _key(np.int64(y)) > _key(hi) else y


def fp16_binary_twin(a, b, out, mul):
    """numpy twin of ``fp16_binary``: exact in float64, one rounding to float16."""
    x, y = a.view(np.float16).astype(np.float64), b.view(np.float16).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        result = (x * y if mul else x + y).astype(np.float16).view(np.uint16)
    out[:] = np.where(np.isnan(result.view(np.float16)), FP16_NAN, result)


def fp16_clamp_twin(a, out, lo, hi):
    """numpy twin of ``fp16_clamp``: compares as float16, -0 below +0."""
    bound = np.array([lo, hi], dtype=np.uint16)
    lo_v, hi_v = bound.view(np.float16)

    def less(x_bits, y_bits, y_value):  # x < y in value, with -0 < +0
        x = x_bits.view(np.float16)
        return (x < y_value) | ((x == 0) & (y_value == 0) & (x_bits > y_bits))

    y = np.where(less(a, bound[0], lo_v), bound[0], a)
    y = np.where(less(bound[1:].repeat(y.size), y, y.view(np.float16)), bound[1], y)
    out[:] = np.where(np.isnan(a.view(np.float16)), FP16_NAN, y)


@jit
def _fp16_of_float(v):
    """A float64 value rounded once to FP16 bits."""
    if math.isnan(v):
        return FP16_NAN
    sign = 1 if v < 0 or (v == 0 and math.copysign(1.0, v) < 0) else 0
    if math.isinf(v):
        return (sign << 15) | 0x7C00
    if v == 0:
        return sign << 15
    mant, ex = math.frexp(abs(v))
    sig = np.int64(mant * 9007199254740992.0)  # 2^53: exact
    return np.int64(round_pack(sign, sig, np.int64(ex - 53), NO_STICKY, E5, M10, RNE, False,
                               False)[0])


@jit
def _float_of_fp16(bits):
    """The exact value of FP16 bits as a float64."""
    cls, sign, sig, exp = unpack(np.uint64(bits), E5, M10)
    if cls == NAN:
        return math.nan
    if cls == INF:
        return -math.inf if sign else math.inf
    value = math.ldexp(float(sig), exp) if cls == FINITE else 0.0
    return -value if sign else value


@jit
def fp16_exp(a, out):
    """``out = exp(a)`` on FP16 bits, correctly rounded."""
    for i in range(a.size):
        cls, sign, _, _ = unpack(np.uint64(a[i]), E5, M10)
        if cls == NAN:
            out[i] = FP16_NAN
        elif cls == INF:
            out[i] = 0 if sign else 0x7C00
        else:
            out[i] = _fp16_of_float(math.exp(_float_of_fp16(a[i])))


@jit
def fp16_recip(a, out):
    """``out = 1 / a`` on FP16 bits, correctly rounded: 2^-e / m by an exact integer division."""
    for i in range(a.size):
        cls, sign, sig, exp = unpack(np.uint64(a[i]), E5, M10)
        if cls == NAN:
            out[i] = FP16_NAN
        elif cls == INF:
            out[i] = sign << 15
        elif cls == ZERO:
            out[i] = (sign << 15) | 0x7C00
        else:
            num = np.int64(1) << 60
            quotient = num // sig
            sticky = quotient * sig != num
            out[i] = round_pack(sign, quotient, -60 - exp, sticky, E5, M10, RNE, False, False)[0]


@jit
def fp16_reduce_sum(a, out):
    """``a``: [outer, n, inner] FP16 bits -> ``out``: [outer, inner], summed in FP32."""
    for o in range(a.shape[0]):
        for j in range(a.shape[2]):
            acc = np.float32(0.0)
            for k in range(a.shape[1]):
                acc = np.float32(acc + np.float32(_float_of_fp16(a[o, k, j])))
            out[o, j] = _fp16_of_float(np.float64(acc))  # exact: one specialisation


@jit
def fp16_reduce_max(a, out):
    """``a``: [outer, n, inner] FP16 bits -> ``out``: [outer, inner]; a NaN wins."""
    for o in range(a.shape[0]):
        for j in range(a.shape[2]):
            best = a[o, 0, j]
            for k in range(a.shape[1]):
                x = a[o, k, j]
                if unpack(np.uint64(x), E5, M10)[0] == NAN:
                    best = FP16_NAN
                    break
                if _key(np.int64(x)) > _key(np.int64(best)):
                    best = x
            out[o, j] = best


@jit
def fp16_avg_pool(a, out, kh, kw, sh, sw, pad_top, pad_left):
    """``a``: [h, w, c] FP16 bits -> ``out``: [oh, ow, c]; windows at stride (sh, sw) from
    (-pad_top, -pad_left); each the mean of its valid inputs, in FP32."""
    h, w, c = a.shape
    for oy in range(out.shape[0]):
        for ox in range(out.shape[1]):
            for ch in range(c):
                acc = np.float32(0.0)
                count = 0
                for ky in range(kh):
                    y = oy * sh + ky - pad_top
                    for kx in range(kw):
                        x = ox * sw + kx - pad_left
                        if 0 <= y < h and 0 <= x < w:
                            acc = np.float32(acc + np.float32(_float_of_fp16(a[y, x, ch])))
                            count += 1
                out[oy, ox, ch] = _fp16_of_float(np.float64(np.float32(acc / np.float32(count))))


@jit
def _reformat(a, out, ebits, mbits, to_ebits, to_mbits, nan):
    """Float bits in one binary format -> another, to nearest even (exact when it widens)."""
    for i in range(a.size):
        cls, sign, sig, exp = unpack(np.uint64(a[i]), ebits, mbits)
        if cls == NAN:
            out[i] = nan
        elif cls == INF:
            out[i] = (sign << (to_ebits + to_mbits)) | (((1 << to_ebits) - 1) << to_mbits)
        else:
            out[i] = round_pack(sign, sig, exp, NO_STICKY, to_ebits, to_mbits, RNE, False, False)[0]


def f32_to_f16(a, out):
    """FP32 bits (uint32) -> FP16 bits, to nearest even."""
    _reformat(a, out, E8, M23, E5, M10, np.int64(FP16_NAN))


def f16_to_f32(a, out):
    """FP16 bits -> FP32 bits (uint32), exactly."""
    _reformat(a, out, E5, M10, E8, M23, np.int64(FP32_NAN))


@jit
def pack_act(words, start, h, w, c, grid, out):
    """The (h, w, c) FP16 tensor at word ``start`` of ``words`` -> croutons in ``out`` (uint16,
    ``layouts.pack_nhwc``'s order and zero padding): spatial s, channel ch of a crouton is
    word ``(s // 2) * 64 + ch * 2 + s % 2``."""
    ny, nx = grid.shape
    th, tw, groups = -(-h // ny), -(-w // nx), -(-c // 32)
    out[:] = 0
    for ty in range(th):
        for tx in range(tw):
            for g in range(groups):
                base = ((ty * tw + tx) * groups + g) * 1024
                for y in range(min(ny, h - ty * ny)):
                    for x in range(min(nx, w - tx * nx)):
                        s = grid[y, x]
                        at = base + (s // 2) * 64 + s % 2
                        pixel = start + ((ty * ny + y) * w + tx * nx + x) * c + g * 32
                        for ch in range(min(32, c - g * 32)):
                            out[at + ch * 2] = words[pixel + ch]


@jit
def unpack_act(words, start, h, w, c, grid, out):
    """Croutons at word ``start`` of ``words`` (``pack_act``'s layout) -> the (h, w, c) FP16
    tensor in ``out`` (uint16, flat NHWC)."""
    ny, nx = grid.shape
    th, tw, groups = -(-h // ny), -(-w // nx), -(-c // 32)
    for ty in range(th):
        for tx in range(tw):
            for g in range(groups):
                base = start + ((ty * tw + tx) * groups + g) * 1024
                for y in range(min(ny, h - ty * ny)):
                    for x in range(min(nx, w - tx * nx)):
                        s = grid[y, x]
                        at = base + (s // 2) * 64 + s % 2
                        pixel = ((ty * ny + y) * w + tx * nx + x) * c + g * 32
                        for ch in range(min(32, c - g * 32)):
                            out[pixel + ch] = words[at + ch * 2]


# -- numpy twins ----------------------------------------------------------------------------------

def _nan_canonical(result: np.ndarray) -> np.ndarray:
    """float16 values -> their bits, every NaN as FP16_NAN."""
    return np.where(np.isnan(result), FP16_NAN, result.view(np.uint16)).astype(np.uint16)


def fp16_exp_twin(a, out):
    with np.errstate(over="ignore", invalid="ignore"):     # a signalling NaN is invalid
        out[:] = _nan_canonical(np.exp(a.view(np.float16).astype(np.float64)).astype(np.float16))


def fp16_recip_twin(a, out):
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        out[:] = _nan_canonical((1.0 / a.view(np.float16).astype(np.float64)).astype(np.float16))


def fp16_reduce_sum_twin(a, out):
    values = a.view(np.float16).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.cumsum(values, axis=1, dtype=np.float32)[:, -1, :]  # sequential, in FP32
        total += np.float32(0.0)   # TOSA's acc starts at +0: -0 + -0 + ... ends +0
        out[:] = _nan_canonical(total.astype(np.float16))


def fp16_reduce_max_twin(a, out):
    values = a.view(np.float16)
    keys = np.where(a >> 15, -(a.astype(np.int64) & 0x7FFF) - 1, a.astype(np.int64) & 0x7FFF)
    best = np.take_along_axis(a, np.argmax(keys, axis=1)[:, None, :], axis=1)[:, 0, :]
    out[:] = np.where(np.isnan(values).any(axis=1), FP16_NAN, best)


def fp16_avg_pool_twin(a, out, kh, kw, sh, sw, pad_top, pad_left):
    values = a.view(np.float16).astype(np.float32)
    h, w, _ = a.shape
    for oy, ox in np.ndindex(out.shape[:2]):
        acc = np.zeros(a.shape[2], np.float32)
        count = 0
        for ky, kx in np.ndindex(kh, kw):
            y, x = oy * sh + ky - pad_top, ox * sw + kx - pad_left
            if 0 <= y < h and 0 <= x < w:
                acc = (acc + values[y, x]).astype(np.float32)
                count += 1
        with np.errstate(over="ignore", invalid="ignore"):
            out[oy, ox] = _nan_canonical((acc / np.float32(count)).astype(np.float16))


def f32_to_f16_twin(a, out):
    with np.errstate(over="ignore"):
        out[:] = _nan_canonical(a.view(np.float32).astype(np.float16))


def f16_to_f32_twin(a, out):
    values = a.view(np.float16).astype(np.float32)
    out[:] = np.where(np.isnan(values), np.uint32(FP32_NAN), values.view(np.uint32))
