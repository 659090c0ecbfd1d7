"""TOSA integer helpers, vectorised: the exact semantics the machines' integer kernels implement.

Each function follows the TOSA 1.0 pseudocode (docs/sources.md#tosa): section 4.5.5 for the
scale helpers, 1.12.5 for the lookup, 2.13.2 for RESCALE, 2.5.2 for ARITHMETIC_RIGHT_SHIFT.
Arithmetic is int64 numpy; every intermediate the spec keeps in int64 or int48 fits. Where the
spec says REQUIRE (a result the graph leaves unpredictable) the helpers compute the two's
complement result instead of failing: 32-bit additions wrap. ``rescale``, which whole layers go
through, is one compiled pass over the elements with the same int64 steps (``rescale_np`` is its
numpy twin).
"""

from __future__ import annotations

import numba
import numpy as np

RANGES = {"i8": (-128, 127), "u8": (0, 255), "i16": (-32768, 32767), "u16": (0, 65535),
          "i32": (-(1 << 31), (1 << 31) - 1)}
STORAGE = {"i8": np.int8, "u8": np.uint8, "i16": np.dtype("<i2"), "u16": np.dtype("<u2"),
           "i32": np.dtype("<i4")}


def wrap(values, bits: int) -> np.ndarray:
    """Two's complement wrap of int64 values to ``bits`` bits."""
    half = 1 << (bits - 1)
    return ((np.asarray(values, np.int64) + half) & ((1 << bits) - 1)) - half


def apply_scale_32(value, multiplier, shift, double_round: bool = False) -> np.ndarray:
    value, multiplier, shift = (np.asarray(a, np.int64) for a in (value, multiplier, shift))
    rnd = np.left_shift(np.int64(1), shift - 1)
    if double_round:
        big = shift > 31
        rnd = rnd + np.where(big & (value >= 0), 1 << 30, 0) - np.where(big & (value < 0),
                                                                            1 << 30, 0)
    return wrap((value * multiplier + rnd) >> shift, 32)


def apply_scale_16(value, multiplier, shift) -> np.ndarray:
    value, multiplier, shift = (np.asarray(a, np.int64) for a in (value, multiplier, shift))
    return wrap((value * multiplier + np.left_shift(np.int64(1), shift - 1)) >> shift, 32)


def reciprocal_scale(count) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) with multiplier * 2^-shift ~ 1/count (spec reciprocal_scale)."""
    count = np.asarray(count, np.int64)
    k = 32 - clz32(count - 1)
    multiplier = (((1 << 30) + 1) << k) // count
    return multiplier, 30 + k


def clz32(value) -> np.ndarray:
    """Leading zeros of int32 values (CLZ(0) = 32); frexp is exact for 32-bit integers."""
    v = (np.asarray(value, np.int64) & 0xFFFFFFFF).astype(np.float64)
    return 32 - np.frexp(v)[1].astype(np.int64)


def lookup_i16(table, value) -> np.ndarray:
    """TABLE int16: 513-entry table, 9.7 index, linear interpolation -> int32 (16.7)."""
    table = np.asarray(table, np.int64)
    x = np.clip(np.asarray(value, np.int64), -32768, 32767)
    index = (x + 32768) >> 7
    fraction = x & 0x7F
    base, nxt = table[index], table[np.minimum(index + 1, 512)]
    return (base << 7) + (nxt - base) * fraction


def arithmetic_right_shift(value, shift, bits: int, rnd: bool) -> np.ndarray:
    value, shift = np.asarray(value, np.int64), np.asarray(shift, np.int64)
    result = value >> shift
    if rnd:
        last = (value >> np.maximum(shift - 1, 0)) & 1
        result = result + np.where((shift > 0) & (last != 0), 1, 0)
    return wrap(result, bits)


def logical_left_shift(value, shift, bits: int) -> np.ndarray:
    return wrap(np.left_shift(np.asarray(value, np.int64), np.asarray(shift, np.int64)), bits)


def rescale(value, multiplier, shift, input_zp: int, output_zp: int, out_type: str,
            scale32: bool = True, double_round: bool = False, input_unsigned: bool = False,
            in_bits: int = 32) -> np.ndarray:
    """TOSA RESCALE of ``value`` (int64, signed view of the input) along its last axis.

    ``multiplier``/``shift`` have one entry (per tensor) or one per channel. ``out_type`` is the
    result's type after the unsigned flags: i8/u8/i16/u16/i32. Returns int64 values in range.
    One compiled pass (``_rescale``); ``rescale_np`` is its numpy twin, which also takes the
    shapes the pass does not (any other broadcast).
    """
    v = np.asarray(value, np.int64)
    mult = np.asarray(multiplier, np.int64).reshape(-1)
    sh = np.asarray(shift, np.int64).reshape(-1)
    channels = v.shape[-1] if v.ndim else 0
    if not channels or mult.size not in (1, channels) or sh.size not in (1, channels):
        return rescale_np(value, multiplier, shift, input_zp, output_zp, out_type, scale32,
                          double_round, input_unsigned, in_bits)
    lo, hi = RANGES[out_type]
    out = np.empty(v.shape, np.int64)
    _rescale(np.ascontiguousarray(v).reshape(-1, channels), mult, sh, int(input_zp),
             int(output_zp), lo, hi, scale32, double_round, input_unsigned, in_bits,
             out.reshape(-1, channels))
    return out


@numba.njit(cache=True, inline="always")
def _shl(value, shift):
    """numpy's int64 left shift: 0 for a shift outside 0..63."""
    return value << shift if 0 <= shift < 64 else np.int64(0)


@numba.njit(cache=True, inline="always")
def _shr(value, shift):
    """numpy's int64 right shift: the sign for a shift outside 0..63."""
    if 0 <= shift < 64:
        return value >> shift
    return np.int64(-1) if value < 0 else np.int64(0)


@numba.njit(cache=True)
def _rescale(v, mult, sh, input_zp, output_zp, lo, hi, scale32, double_round, input_unsigned,
             in_bits, out):
    """``rescale_np`` element by element: the same int64 steps, wrapping where numpy wraps."""
    mask = (np.int64(1) << in_bits) - 1
    zp = input_zp & mask if input_unsigned else np.int64(input_zp)
    per_channel_mult, per_channel_shift = mult.size > 1, sh.size > 1
    for r in range(v.shape[0]):
        for c in range(v.shape[1]):
            m = mult[c] if per_channel_mult else mult[0]
            s = sh[c] if per_channel_shift else sh[0]
            x = (v[r, c] & mask if input_unsigned else v[r, c]) - zp
            rnd = _shl(np.int64(1), s - 1)
            if scale32 and double_round and s > 31:
                rnd += np.int64(1 << 30) if x >= 0 else -np.int64(1 << 30)
            y = _shr(x * m + rnd, s)
            y = (((y << 32) >> 32) + output_zp) << 32 >> 32       # wrap to 32 bits, twice
            out[r, c] = min(max(y, lo), hi)


def rescale_np(value, multiplier, shift, input_zp: int, output_zp: int, out_type: str,
               scale32: bool = True, double_round: bool = False, input_unsigned: bool = False,
               in_bits: int = 32) -> np.ndarray:
    """``rescale`` in numpy, any broadcast of ``multiplier``/``shift`` against ``value``."""
    v = np.asarray(value, np.int64)
    zp = np.int64(input_zp)
    if input_unsigned:
        mask = (1 << in_bits) - 1
        v, zp = v & mask, zp & mask
    v = v - zp
    if scale32:
        out = apply_scale_32(v, multiplier, shift, double_round)
    else:
        out = apply_scale_16(v, multiplier, shift)
    lo, hi = RANGES[out_type]
    return np.clip(wrap(out + output_zp, 32), lo, hi)


def store(values, dtype: str) -> np.ndarray:
    """In-range values as the bytes of a tensor of ``dtype`` (u8 in an i8 tensor wraps): a
    cast between integer types keeps the low bits, the two's complement wrap of ``wrap``."""
    values = np.asarray(values)
    if values.dtype.kind not in "iu":
        values = values.astype(np.int64)
    return values.astype(STORAGE["i" + dtype[1:]])
