"""Exact arithmetic in float64: when a float64 sum or dot product of FP16 values is exact, and
how to round such an exact value once to a narrower binary format.

Every FP16 value, and every product of two, is exact in float64 (11 x 11 significant bits,
2^-48 .. 2^34). A sum of such products is exact in any order if every partial sum is: all
are multiples of ``U`` = (the operands' smallest lsbs multiplied), and by Cauchy-Schwarz every
partial sum is at most ``|a| |w|``, so ``|a| |w| < 2^53 U`` is enough. ``fp16_floats`` gives
each operand vector's ``|a| / lsb`` (its exactness ratio) and the product of two ratios decides
(``EXACT_RATIO`` keeps a bit of slack for the rounding of the ratios themselves). ``split``
cuts a vector in two exact pieces, each with a smaller ratio, for operands too wide for one.
``row_sums`` and ``block_sums`` are the dot products (four spatials at a time: the loop over
filters vectorises).

``two_sum`` and ``round_two_sum`` round an exact sum of two float64 values once: ``x + y = s +
err`` exactly (Knuth), ``s``'s extra bits decide, and ``err`` only breaks a tie. Both, and
``finite_value``, are branch-free, so that the loops calling them vectorise.

These are numba functions (``cache=True``) used by ``numerics.py`` and ``hvx_kernels.py``; the
tests check them through those kernels against the exact-rational oracle and the twins.
"""

from __future__ import annotations

import math

import numpy as np

from hwsim.targets.floats import jit

EXACT_RATIO = 2.0 ** 52  # float64 sums below 2^53 units are exact; one bit for rounding slack


@jit
def fp16_floats(bits, negate, infnan, step, values, ratio, special):
    """FP16 ``bits[k, j]`` -> float64 ``values[k, j]`` (negated with ``negate``; Inf/NaN as 0
    and ``special[j]`` set), and per ``j`` and chunk of ``step`` channels the exactness ratio
    ``sqrt(sum v^2) / (smallest lsb)`` (0: all zero). Branch-free over ``j``, so that the loop
    vectorises."""
    n, cols = bits.shape
    ones = np.zeros(cols, dtype=np.int64)  # the OR of the values in units of 2^-24: its lowest
    squares = np.zeros(cols)               # set bit is the smallest lsb
    for c in range(ratio.shape[1]):
        ones[:] = 0
        squares[:] = 0.0
        for k in range(c * step, min(n, (c + 1) * step)):
            for j in range(cols):
                b = np.int64(bits[k, j])
                biased = (b >> 10) & 31
                normal = np.int64(biased != 0)
                inf_nan = np.int64(biased == 31) & infnan
                units = ((b & 1023) | (normal << 10)) << (biased - normal)
                units &= inf_nan - 1  # Inf/NaN -> 0
                special[j] |= inf_nan != 0
                ones[j] |= units
                v = units * 5.9604644775390625e-08  # 2^-24: exact
                squares[j] += v * v
                values[k, j] = -v if (b >> 15) ^ negate else v
        for j in range(cols):
            lsb = (ones[j] & -ones[j]) * 5.9604644775390625e-08
            ratio[j, c] = math.sqrt(squares[j]) / lsb if ones[j] else 0.0


@jit
def split(x, step, hi, lo, ratio_hi, ratio_lo):
    """Per chunk of ``step``: ``x = hi + lo`` exactly, ``hi`` the values truncated to 17 bits
    below the chunk's largest magnitude, and the exactness ratios of both."""
    n = x.shape[0]
    for c in range(ratio_hi.shape[0]):
        k0, k1 = c * step, min(n, (c + 1) * step)
        largest = 0.0
        for k in range(k0, k1):
            largest = max(largest, abs(x[k]))
        quantum = math.ldexp(1.0, math.frexp(largest)[1] - 17) if largest > 0.0 else 1.0
        inverse = 1.0 / quantum
        for k in range(k0, k1):
            hi[k] = float(np.int64(x[k] * inverse)) * quantum  # toward zero
            lo[k] = x[k] - hi[k]
        ratio_hi[c] = exactness_ratio(hi[k0:k1])
        ratio_lo[c] = exactness_ratio(lo[k0:k1])


@jit
def exactness_ratio(v):
    """sqrt(sum v^2) / (the smallest lsb of a nonzero v), 0 when all are zero."""
    squares, lsb = 0.0, np.inf
    for x in v:
        if x != 0.0:
            squares += x * x
            bits = np.float64(x).view(np.int64)
            biased = (bits >> 52) & 0x7FF  # x is normal: a multiple of 2^-48 (or of 2^-24)
            sig = (bits & 0xFFFFFFFFFFFFF) | 0x10000000000000
            unit = np.int64((biased - 52) << 52).view(np.float64)  # 2^(biased - 1075)
            lsb = min(lsb, float(sig & -sig) * unit)
    return math.sqrt(squares) / lsb if squares > 0.0 else 0.0


@jit
def row_sums(a, values_w, step, sums):
    """``sums[c, o]``: the dot products of the act column ``a`` (one spatial's channels) with
    each weight column, per chunk of ``step`` channels, in float64 (exact where the ratios say
    so)."""
    n, cols = values_w.shape
    row = np.empty(cols)  # a fresh local: the loop over o vectorises
    for c in range(sums.shape[0]):
        row[:] = 0.0
        for k in range(c * step, min(n, (c + 1) * step)):
            if a[k] != 0.0:
                for o in range(cols):
                    row[o] += a[k] * values_w[k, o]
        for o in range(cols):  # loops, not array assignments: their shape checks cost compiling
            sums[c, o] = row[o]


@jit
def block_sums(values_a, values_w, s0, step, sums):
    """``sums[i, c, o]``: ``row_sums`` of act columns ``s0 + i`` (i < 4, within the act), four
    at a time so that each weight row is loaded once for four."""
    n, cols = values_w.shape
    last = values_a.shape[1] - 1
    s1, s2, s3 = min(s0 + 1, last), min(s0 + 2, last), min(s0 + 3, last)
    t = np.empty((4, cols))  # a fresh local: the loop over o vectorises
    for c in range(sums.shape[1]):
        t[:] = 0.0
        for k in range(c * step, min(n, (c + 1) * step)):
            a0, a1, a2, a3 = values_a[k, s0], values_a[k, s1], values_a[k, s2], values_a[k, s3]
            for o in range(cols):
                w = values_w[k, o]
                t[0, o] += a0 * w
                t[1, o] += a1 * w
                t[2, o] += a2 * w
                t[3, o] += a3 * w
        for i in range(4):
            for o in range(cols):
                sums[i, c, o] = t[i, o]


@jit
def two_sum(x, y):
    """``x + y`` in float64 and its exact error (Knuth's TwoSum): ``x + y = s + err``."""
    s = x + y
    v = s - x
    return s, (x - (s - v)) + (y - v)


@jit
def round_two_sum(s, err, ebits, mbits, top):
    """The exact ``s + err`` (``s`` nonzero, ``|err|`` at most half an ulp of ``s``) rounded once
    to nearest even in (ebits, mbits): ``(ok, bits, value)``, ``ok`` only when the result is a
    normal number with a biased exponent up to ``top`` (``bits`` 0 otherwise). ``s``'s extra
    bits decide, and ``err`` only breaks a tie: it is below half a float64 ulp, so it can only
    move a value that sits exactly on a midpoint. Branch-free, so that a loop over values
    (``numerics.add_rounded``) vectorises."""
    bits = np.float64(s).view(np.int64)
    magnitude = bits & 0x7FFFFFFFFFFFFFFF
    drop = 52 - mbits
    low = magnitude & ((np.int64(1) << drop) - 1)
    half = np.int64(1) << (drop - 1)
    q = magnitude >> drop  # exponent and kept fraction: a carry moves into the exponent
    q += np.int64((low > half) | ((low == half) & (((err != 0.0) & ((err > 0.0) == (s > 0.0)))
                                                    | ((err == 0.0) & ((q & 1) != 0)))))
    exp = (q >> mbits) - 1023 + (1 << (ebits - 1)) - 1
    value = np.int64((bits & np.int64(-0x8000000000000000)) | (q << drop)).view(np.float64)
    ok = (exp > 0) & (exp <= top)
    fraction = q & ((np.int64(1) << mbits) - 1)
    out = (np.int64(s < 0.0) << (ebits + mbits)) | (exp << mbits) | fraction
    return ok, np.uint64(out if ok else 0), value


@jit
def finite_value(bits, ebits, mbits):
    """``(ok, value)``: (ebits, mbits) bits as a float64 (exact for significands of up to 31
    bits, converted as int32, and an exponent range inside float64's), ``ok`` false when the
    exponent is all ones (``value`` then means nothing). Branch-free, so that a loop over values
    vectorises."""
    b = np.int64(bits)
    top = (np.int64(1) << ebits) - 1
    biased = (b >> mbits) & top
    normal = np.int64(biased != 0)
    sig = (b & ((np.int64(1) << mbits) - 1)) | (normal << mbits)
    lsb = np.int64((biased + 1 - normal - (top >> 1) - mbits + 1023) << 52).view(np.float64)
    value = np.float64(np.int32(sig)) * lsb
    return biased != top, -value if (b >> (ebits + mbits)) & 1 else value
