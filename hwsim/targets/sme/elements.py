"""One ZA tile element of each floating-point outer product, in the host's binary32 arithmetic.

Each function computes one element the fast way and says whether the result may differ from the
Arm ARM's (``numerics``): it returns ``(bits, flag)``; a flagged element must be recomputed by the
exact ``numerics`` function. The fast way is IEEE binary32 arithmetic (``hwsim.targets.ieee``)
where it provably equals Arm's; flagged is everything else:

* infinities and NaNs anywhere (Arm's default-NaN rules differ from IEEE's);
* under an FPCR flush mode (``fin``: inputs flush, ``fout``: outputs flush), denormal inputs and
  results and results at the smallest normal (which may have been rounded up from a tiny value);
* BF16 results rounded twice onto a midpoint, and products that were not exact.

Per format (all rounding to nearest, the only mode of these paths):

* ``fma32``: FMOPA FP32 is FPMulAdd, one fused multiply-add with one rounding: ``fma32`` itself.
* ``fma_bf16``: non-widening BFMOPA: ``fma32`` then to nearest BF16; the double rounding is wrong
  only when the FP32 result is a BF16 midpoint (flagged).
* ``dot``: widening FMOPA (FP16) and BFMOPA with FPCR.EBF=1: the second product is exact in FP32
  (FP16 always; BF16 unless it underflows, flagged), so ``fma32(a0, b0, a1 * b1)`` is FPDot's one
  rounding, and an FP32 add is FPAdd's.
* ``sop``: widening BFMOPA with EBF=0 (any FPCR): the BF16 products are exact or tiny (flushed,
  as Arm does), and each sum is an FP32 sum plus its exact error (TwoSum), from which round to odd
  (and the flush of tiny results) follows.

For the directed rounding modes of FMOPA/BFMOPA, ``directed`` works in float64: the sum with its
TwoSum error, rounded to odd at 53 bits, then once to the format (53 >= 24 + 2, so the double
rounding is innocuous); it flags inputs and results that are not normal or zero.

Everything here inlines into the kernels' loops (``inline``), which vectorise.
"""

from __future__ import annotations

import numba
import numpy as np

from hwsim.targets.floats import RDN, RNE, RUP, jit
from hwsim.targets.ieee import (add32, and32, bits32, bits64, f32, f64, fma32, shl32, shr32,
                                sub32)

inline = numba.njit(cache=True, nogil=True, inline="always")
MAX = np.float32(3.4028234663852886e38)   # the largest finite FP32
MIN = np.float32(2.0 ** -126)             # the smallest normal FP32


@inline
def small(x):
    """x below the smallest normal (zero included); False for NaN."""
    return abs(x) < MIN


@inline
def subnormal(x):
    return (abs(x) < MIN) & (x != 0)


@inline
def flush(x):
    """A denormal becomes the zero of its sign."""
    return x * np.float32(0) if abs(x) < MIN else x


@inline
def _doubtful(r, fout):
    """A result an output flush could change: denormal, or the smallest normal."""
    return fout & ((small(r) & (r != 0)) | (abs(r) == MIN))


@inline
def fma32_element(x, a, b, fin, fout):
    """FPMulAdd: addend bits ``x`` (FP32) plus ``a * b``."""
    c = f32(np.uint32(x))
    r = fma32(a, b, c)
    return bits32(r), (not abs(r) <= MAX) | (fin & subnormal(c)) | _doubtful(r, fout)


@inline
def fma_bf16_element(x, a, b, fin, fout):
    """BFMulAdd: addend bits ``x`` (BF16) plus ``a * b`` (BF16 values as FP32)."""
    c = f32(shl32(np.uint32(x), np.uint32(16)))
    rf = fma32(a, b, c)
    r = bits32(rf)
    odd = and32(shr32(r, np.uint32(16)), np.uint32(1))
    rounded = and32(add32(r, add32(np.uint32(0x7FFF), odd)), np.uint32(0xFFFF0000))
    v = f32(rounded)
    flag = (not abs(rf) <= MAX) | (not abs(v) <= MAX) | (
        and32(r, np.uint32(0xFFFF)) == np.uint32(0x8000)) | (fin & subnormal(c)) | _doubtful(
        v, fout)
    return shr32(rounded, np.uint32(16)), flag


@inline
def dot_element(x, a0, a1, b0, b1, lossy, fin, fout):
    """FPDotAdd_ZA, or BFDotAdd with EBF=1 (``lossy``: BF16 products may underflow FP32)."""
    p1 = a1 * b1                    # exact unless a BF16 product underflows (flagged)
    d = fma32(a0, b0, p1)           # FPDot: one rounding
    c = f32(np.uint32(x))
    c = flush(c) if fin else c
    r = c + d                       # FPAdd
    flag = (not abs(r) <= MAX) | (lossy & small(p1) & (a1 != 0) & (b1 != 0)) | (
        (fin | fout) & subnormal(d)) | _doubtful(d, fout) | _doubtful(r, fout)
    return bits32(r), flag


@inline
def round_odd(s, err):
    """s + err (s the nearest FP32, err its exact error) rounded to odd, then flushed if tiny."""
    b = bits32(s)
    odd = (err != 0) & (and32(b, np.uint32(1)) == np.uint32(0))
    away = (err > 0) == (s > 0)
    return flush(f32(sub32(add32(b, np.uint32(odd & away)), np.uint32(odd & (not away)))))


@inline
def sop_element(x, a0, a1, b0, b1):
    """BFDotAdd with EBF=0: every step rounded to odd, denormals flushed."""
    p0, p1 = flush(a0 * b0), flush(a1 * b1)   # BFMulH: exact, or tiny and flushed
    s = p0 + p1
    v = s - p0
    total = round_odd(s, (p0 - (s - v)) + (p1 - v))    # TwoSum: p0 + p1 == s + error
    c = flush(f32(np.uint32(x)))
    r = c + total
    v = r - c
    result = round_odd(r, (c - (r - v)) + (total - v))
    flag = (not abs(p0) <= MAX) | (not abs(p1) <= MAX) | (not abs(s) <= MAX) | (
        not abs(r) <= MAX)
    return bits32(result), flag


@jit
def half(h, fp16, flushing):
    """A BF16 or FP16 (``fp16``) value as FP32; denormals become signed zero when ``flushing``."""
    h = np.uint32(h)
    if not fp16:
        x = f32(h << np.uint32(16))
        return flush(x) if flushing else x
    sign = (h >> np.uint32(15)) << np.uint32(31)
    e, frac = (h >> np.uint32(10)) & np.uint32(0x1F), h & np.uint32(0x3FF)
    if e == 31:
        return f32(np.uint32(sign | np.uint32(0x7F800000) | (frac << np.uint32(13))))
    if e == 0:
        tiny = np.float32(0) if flushing else np.float32(frac) * np.float32(2.0 ** -24)  # exact
        return f32(np.uint32(sign | bits32(tiny)))
    return f32(np.uint32(sign | ((e + np.uint32(112)) << np.uint32(23)) | (frac << np.uint32(13))))


# -- directed rounding, through float64 ---------------------------------------------------------

@jit
def _to_f64(x, mbits):
    """A BF16/FP32 value that is normal or zero as float64 (anything else: garbage)."""
    x = np.uint64(x)
    exp = (x >> np.uint64(mbits)) & np.uint64(0xFF)
    body = ((exp + np.uint64(1023 - 127)) << np.uint64(52)) | (
        (x & np.uint64((1 << mbits) - 1)) << np.uint64(52 - mbits))
    return f64(((x >> np.uint64(8 + mbits)) << np.uint64(63)) | (body * np.uint64(exp != 0)))


@jit
def _usable(x, mbits):
    """1 for an input the float64 path takes (normal or zero), else 0."""
    x = np.uint64(x)
    e = (x >> np.uint64(mbits)) & np.uint64(0xFF)
    return np.uint64(e != 255) & (np.uint64(e != 0) | np.uint64(x << np.uint64(64 - 8 - mbits)
                                                                   == 0))


@jit
def _round_f64(bits, err, mbits, rne, directed, want, zero_sign_b, usable):
    """The sum ``bits`` (float64 bits, rounded to nearest, with rounding error ``err``) rounded
    once to the 8-bit-exponent format. Returns (result, ok)."""
    one = np.uint64(1)
    odd = np.uint64(err != 0.0) & (~bits & one)
    away = np.uint64((err > 0.0) == (bits >> np.uint64(63) == 0))
    bits = bits + (odd & away) - (odd & (one - away))   # round to odd at 53 bits
    sign = bits >> np.uint64(63)
    e = np.int64((bits >> np.uint64(52)) & np.uint64(0x7FF)) - (1023 - 127)
    shift = np.uint64(52 - mbits)
    half_ulp = one << (shift - one)
    keep = (bits & np.uint64((1 << 52) - 1)) >> shift
    rest = bits & ((one << shift) - one)
    up = (rne & (np.uint64(rest > half_ulp) | (np.uint64(rest == half_ulp) & keep))) | (
        directed & np.uint64(rest != 0) & np.uint64(sign == want))
    keep = keep + (up & one)
    rounded_e = e + np.int64(keep >> np.uint64(mbits))
    zero = np.uint64(bits << one == 0)
    # e >= 1 before rounding: the exact value is normal, so no flush applies in any mode
    fine = usable & (zero | (np.uint64(e >= 1) & np.uint64(rounded_e <= 254)))
    normal = (sign << np.uint64(8 + mbits)) | (np.uint64(rounded_e & 0xFF) << np.uint64(mbits)) | (
        keep & np.uint64((1 << mbits) - 1))
    return normal * (one - zero) | (zero_sign_b << np.uint64(8 + mbits)) * zero, fine


@jit
def directed(x, abits, bbits, mbits, mode):
    """(result bits, flag) of addend ``x`` plus ``a * b`` (BF16 or FP32 bits) in any rounding
    mode."""
    one = np.uint64(1)
    top = np.uint64(8 + mbits)
    want = np.uint64(mode == RDN)
    x, abits, bbits = np.uint64(x), np.uint64(abits), np.uint64(bbits)
    c = _to_f64(x, mbits)
    p = _to_f64(abits, mbits) * _to_f64(bbits, mbits)
    s = c + p
    r = s - c
    err = (c - (s - r)) + (p - r)
    differ = ((x ^ abits ^ bbits) >> top) & one
    zero_sign = ((x >> top) & (one - differ)) | (want & differ)
    usable = _usable(abits, mbits) & _usable(bbits, mbits) & _usable(x, mbits)
    value, fine = _round_f64(bits64(s), err, mbits, np.uint64(mode == RNE),
                             np.uint64(mode == RUP or mode == RDN), want, zero_sign, usable)
    return np.uint32(value), fine == 0
