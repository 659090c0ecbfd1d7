"""Binary floating-point formats and the one rounding helper every datapath uses.

A format is IEEE-754-like: a sign, ``ebits`` of biased exponent, ``mbits`` of fraction, subnormals,
and the all-ones exponent for infinities and NaNs. FP16 is (5, 10), BF16 (8, 7), FP32 (8, 23);
HMX's internal fields (FP16 with four or five more fraction bits) and its 37-bit accumulator are
formats of the same kind.

``round_pack`` takes an exact value ``(-1)**sign * sig * 2**exp`` (``sig`` up to 62 bits) plus a
sticky bit standing for nonzero bits below ``sig`` (``sig`` must then reach at least one bit below
the result's last bit, so that the half-way bit is explicit) and rounds it once to a format: any of six
rounding modes, flush-to-zero of tiny results (tiny before rounding, the Arm rule), and overflow
to infinity or to the largest finite value. Callers compute exact sums as integers (or keep a
sticky bit), so every result is rounded exactly once. NaN and infinity inputs are the callers'
business: their rules differ per machine.

These are numba functions (``cache=True``); ``.py_func`` is the plain-Python twin.
"""

from __future__ import annotations

import numba
import numpy as np

# Rounding modes.
RNE = 0  # to nearest, ties to even
RTZ = 1  # toward zero
RUP = 2  # toward +infinity
RDN = 3  # toward -infinity
RNA = 4  # to nearest, ties away from zero
ROD = 5  # to odd (sticky into the last bit): for exact intermediate results

# Value classes returned by ``unpack``.
ZERO, FINITE, INF, NAN = 0, 1, 2, 3

# Flags returned by ``round_pack`` (bit set).
INEXACT, UNDERFLOW, OVERFLOW = 1, 2, 4

FP16 = (5, 10)
BF16 = (8, 7)
FP32 = (8, 23)
FP64 = (11, 52)

jit = numba.njit(cache=True, nogil=True)


@jit
def _msb(x):
    """Index of the most significant set bit of x > 0 (binary search: called per rounding)."""
    n = 0
    for step in (32, 16, 8, 4, 2, 1):
        if x >> step:
            x >>= step
            n += step
    return n


@jit
def max_finite(sign, ebits, mbits):
    """Bits of the largest finite magnitude with this sign."""
    return (np.uint64(sign) << np.uint64(ebits + mbits)) | np.uint64(
        (((1 << ebits) - 2) << mbits) | ((1 << mbits) - 1))


@jit
def infinity(sign, ebits, mbits):
    return (np.uint64(sign) << np.uint64(ebits + mbits)) | np.uint64(((1 << ebits) - 1) << mbits)


@jit
def unpack(bits, ebits, mbits):
    """(class, sign, sig, exp) with value (-1)**sign * sig * 2**exp for finite numbers."""
    bits = np.uint64(bits)
    sign = np.int64((bits >> np.uint64(ebits + mbits)) & np.uint64(1))
    biased = np.int64((bits >> np.uint64(mbits)) & np.uint64((1 << ebits) - 1))
    frac = np.int64(bits & np.uint64((1 << mbits) - 1))
    bias = (1 << (ebits - 1)) - 1
    if biased == (1 << ebits) - 1:
        return (NAN if frac else INF), sign, frac, np.int64(0)
    if biased == 0:
        if frac == 0:
            return ZERO, sign, np.int64(0), np.int64(0)
        return FINITE, sign, frac, np.int64(1 - bias - mbits)
    return FINITE, sign, frac | (np.int64(1) << mbits), np.int64(biased - bias - mbits)


@jit
def round_pack(sign, sig, exp, sticky, ebits, mbits, mode, flush, saturate):
    """Round (-1)**sign * (sig + sticky*tiny) * 2**exp to the format; return (bits, flags).

    ``flush``: results tiny before rounding become signed zero. ``saturate``: overflow gives the
    largest finite value instead of infinity whatever the rounding mode.
    """
    sig = np.int64(sig)
    exp = np.int64(exp)
    sign_bits = np.uint64(sign) << np.uint64(ebits + mbits)
    if sig == 0:
        if not sticky:
            return sign_bits, 0
        # Only the sticky bit: a magnitude far below anything representable; give sig one bit
        # well below the smallest subnormal so that rounding sees "more than zero, under half".
        sig = np.int64(1)
        exp = np.int64(-(1 << (ebits - 1)) - mbits - 4)
        sticky = False
    bias = (1 << (ebits - 1)) - 1
    emin = 1 - bias
    top = _msb(sig) + exp  # unbiased exponent of the leading bit
    if flush and top < emin:
        return sign_bits, INEXACT | UNDERFLOW
    quantum = (top if top >= emin else emin) - mbits  # exponent of the result's last bit
    shift = quantum - exp
    if shift <= 0:  # exact: sig fits (a sticky bit needs sig to reach below the last bit)
        keep = sig << -shift
        rest_half = False
        rest_more = sticky
    elif shift > 62:
        keep = np.int64(0)
        rest_half = False
        rest_more = True
    else:
        keep = sig >> shift
        rest = sig & ((np.int64(1) << shift) - 1)
        half = np.int64(1) << (shift - 1)
        rest_half = rest >= half
        rest_more = (rest & (half - 1)) != 0 or sticky
    inexact = rest_half or rest_more
    up = False
    if inexact:
        if mode == RNE:
            up = rest_half and (rest_more or (keep & 1) == 1)
        elif mode == RNA:
            up = rest_half
        elif mode == RUP:
            up = sign == 0
        elif mode == RDN:
            up = sign == 1
        elif mode == ROD:
            keep |= 1
    if up:
        keep += 1
    if keep >> (mbits + 1):
        keep >>= 1
        quantum += 1
    flags = INEXACT if inexact else 0
    if keep >> mbits:
        biased = quantum + mbits + bias
        frac = keep & ((np.int64(1) << mbits) - 1)
    else:
        biased = 0
        frac = keep
        if inexact:
            flags |= UNDERFLOW
    if biased >= (1 << ebits) - 1:
        flags |= OVERFLOW | INEXACT
        to_inf = not saturate and (mode == RNE or mode == RNA or (mode == RUP and sign == 0)
                                   or (mode == RDN and sign == 1))
        if to_inf:
            return infinity(sign, ebits, mbits), flags
        return max_finite(sign, ebits, mbits), flags
    return sign_bits | np.uint64((biased << mbits) | frac), flags


@jit
def round_pack_bits(sign, sig, exp, sticky, ebits, mbits, mode, flush, saturate):
    """``round_pack`` without the flags."""
    return round_pack(sign, sig, exp, sticky, ebits, mbits, mode, flush, saturate)[0]


def to_float(bits: int, fmt: tuple[int, int]) -> float:
    """A format's bits as a Python float (exact for formats narrower than FP64)."""
    cls, sign, sig, exp = unpack.py_func(int(bits), *fmt)
    if cls == NAN:
        return float("nan")
    if cls == INF:
        return -float("inf") if sign else float("inf")
    return (-1.0) ** sign * float(sig) * 2.0 ** int(exp) if cls == FINITE else (-0.0 if sign else 0.0)
