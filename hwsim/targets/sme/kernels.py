"""Outer-product datapaths: numba kernels over a ZA tile, each with a plain twin.

A kernel updates one tile of ZA in place from two source vectors (typed rows of Z registers) and
two governing predicates (one bool per predicate bit, ``state.SmeState.p`` rows). The tile is given
as the ZA array viewed as its element type (``za``, C-contiguous, one row per ZA array row), the
tile number ``t`` and the number of tiles of that size ``step``: tile row ``i`` is array row
``i * step + t`` (Arm ARM, ZA tile mapping); a bare (dim x dim) array is ``(tile, 0, 1)``. Keeping
the array contiguous lets numba vectorise. Inactive rows and columns leave the tile unmodified.
``neg`` selects the ...MOPS form: the first source's active elements are negated (their sign bit
flipped, BFNeg/FPNeg; the integer forms subtract).

* ``mopa_fma``: non-widening BFMOPA/BFMOPS (.H) and FMOPA/FMOPS (.S): ``numerics.fma`` per element.
* ``mopa_dot2``: widening BFMOPA/BFMOPS and FMOPA/FMOPS (16-bit pairs into .S): for each element,
  pair ``k`` (k = 0, 1) is active when row element 2*row+k and column element 2*col+k are both
  active; when neither pair is, the element is unchanged; an inactive half of a source reads as
  +0.0 (Arm ARM C9.2.43/.115 pseudocode: ``FPZero('0', 16)``).
* ``mopa_int8``: SMOPA/UMOPA/SUMOPA/USMOPA/...MOPS, 4-way int8 -> int32: each element adds the
  products of its active byte pairs, exactly, wrapping to 32 bits.

The twins (``*_twin``) take the same arguments: ``mopa_int8_twin`` is a vectorised numpy
computation; the float twins run the same code uncompiled (``.py_func``), for debugging and so that
the tests can compare compiled and interpreted behaviour.
"""

from __future__ import annotations

import numpy as np

from hwsim.targets.floats import RDN, RNE, RUP, jit
from hwsim.targets.sme.numerics import MODE, bf16_dot_add, dot_add, fma


@jit
def _to_f64_bits(x, mbits):
    """float64 bits of a BF16/FP32 value that is normal or zero (anything else: garbage)."""
    x = np.uint64(x)
    exp = (x >> np.uint64(mbits)) & np.uint64(0xFF)
    body = ((exp + np.uint64(1023 - 127)) << np.uint64(52)) | (
        (x & np.uint64((1 << mbits) - 1)) << np.uint64(52 - mbits))
    return ((x >> np.uint64(8 + mbits)) << np.uint64(63)) | (body * np.uint64(exp != 0))


@jit
def _usable(x, mbits):
    """1 for an input the shortcut takes (normal or zero), else 0; without branches."""
    x = np.uint64(x)
    e = (x >> np.uint64(mbits)) & np.uint64(0xFF)
    return np.uint64(e != 255) & (np.uint64(e != 0) | np.uint64(x << np.uint64(64 - 8 - mbits)
                                                                   == 0))


@jit
def _round_f64(bits, err, mbits, rne, directed, want, zero_sign_b, usable):
    """One element of the shortcut: the sum ``bits`` (float64 bits, rounded to nearest, with
    rounding error ``err``) rounded once to the 8-bit-exponent format. Returns (result, ok)."""
    one = np.uint64(1)
    odd = np.uint64(err != 0.0) & (~bits & one)
    away = np.uint64((err > 0.0) == (bits >> np.uint64(63) == 0))
    bits = bits + (odd & away) - (odd & (one - away))   # round to odd at 53 bits
    sign = bits >> np.uint64(63)
    e = np.int64((bits >> np.uint64(52)) & np.uint64(0x7FF)) - (1023 - 127)
    shift = np.uint64(52 - mbits)
    half = one << (shift - one)
    keep = (bits & np.uint64((1 << 52) - 1)) >> shift
    rest = bits & ((one << shift) - one)
    up = (rne & (np.uint64(rest > half) | (np.uint64(rest == half) & keep))) | (
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
def mopa_fma(za, t, step, zn, zm, pn, pm, esize, neg, ebits, mbits, ctl):
    """``ebits`` must be 8 (BF16, FP32).

    A float64 shortcut decides most elements: for normal (or zero) BF16/FP32 inputs the product is
    exact in float64; TwoSum gives the rounded sum and its error, and moving an even sum one ulp
    towards the error rounds the exact value to odd at 53 bits, from which one rounding to 8 or 24
    bits is correct (53 >= 24 + 2). An exact zero takes the addend's sign when the product's
    agrees, else +0 (-0 rounding toward -inf), as Arm specifies. The exact ``numerics.fma``
    decides the rest (NaN, infinity, subnormal or overflowing results). The shortcut runs as
    branch-free passes over the tile so that they vectorise.
    """
    dim = za.shape[1]
    n = dim * dim
    flip = np.uint64(1) << np.uint64(ebits + mbits) if neg else np.uint64(0)
    scratch = np.empty((4, n + 2 * dim), dtype=np.uint64)
    su, out, good = scratch[0, :n], scratch[1, :n], scratch[3, :n]
    err = scratch[2, :n].view(np.float64)
    au, bu = scratch[0, n:n + dim], scratch[0, n + dim:]
    a, b = au.view(np.float64), bu.view(np.float64)
    a_ok, b_ok = scratch[1, n:n + dim], scratch[1, n + dim:]
    for k in range(dim):
        x = np.uint64(zn[k]) ^ flip
        au[k] = _to_f64_bits(x, mbits)
        a_ok[k] = _usable(x, mbits)
        bu[k] = _to_f64_bits(zm[k], mbits)
        b_ok[k] = _usable(zm[k], mbits)
    for i in range(dim):   # pass 1: the addends as float64 (in ``out`` for now)
        row = za[i * step + t]
        for j in range(dim):
            out[i * dim + j] = _to_f64_bits(row[j], mbits)
            good[i * dim + j] = a_ok[i] & b_ok[j] & _usable(row[j], mbits)
    cf, sf = out.view(np.float64), su.view(np.float64)
    for i in range(dim):   # pass 2: the rounded sum and its error (TwoSum)
        ai = a[i]
        for j in range(dim):
            k = i * dim + j
            c = cf[k]
            p = ai * b[j]
            s = c + p
            r = s - c
            err[k] = (c - (s - r)) + (p - r)
            sf[k] = s
    mode = ctl[MODE]
    rne = np.uint64(mode == RNE)
    directed = np.uint64(mode == RUP or mode == RDN)
    want = np.uint64(mode == RDN)
    for i in range(dim):   # pass 3: round once
        row = za[i * step + t]
        for j in range(dim):
            k = i * dim + j
            sc = np.uint64(row[j]) >> np.uint64(ebits + mbits)
            differ = sc ^ (au[i] >> np.uint64(63)) ^ (bu[j] >> np.uint64(63))
            zero_sign = (sc & (np.uint64(1) - differ)) | (want & differ)
            out[k], good[k] = _round_f64(su[k], err[k], mbits, rne, directed, want,
                                         zero_sign, good[k])
    for i in range(dim):   # pass 4: write the active elements back
        if not pn[i * esize]:
            continue
        row = za[i * step + t]
        for j in range(dim):
            if pm[j * esize]:
                k = i * dim + j
                if good[k]:
                    row[j] = out[k]
                else:
                    row[j] = fma(row[j], np.uint64(zn[i]) ^ flip, zm[j], ebits, mbits, ctl)


@jit
def mopa_dot2(za, t, step, zn, zm, pn, pm, neg, mode, ctl):
    """``mode``: 0 FP16 (FPDotAdd_ZA), 1 BF16 with EBF=1, 2 BF16 with EBF=0 (Round to Odd)."""
    dim = za.shape[1]
    flip = np.uint64(0x8000) if neg else np.uint64(0)
    for i in range(dim):
        r0, r1 = pn[4 * i], pn[4 * i + 2]
        if not (r0 or r1):
            continue
        a0 = (np.uint64(zn[2 * i]) ^ flip) if r0 else np.uint64(0)
        a1 = (np.uint64(zn[2 * i + 1]) ^ flip) if r1 else np.uint64(0)
        row = za[i * step + t]
        for j in range(dim):
            c0, c1 = pm[4 * j], pm[4 * j + 2]
            if not ((r0 and c0) or (r1 and c1)):
                continue
            b0 = np.uint64(zm[2 * j]) if c0 else np.uint64(0)
            b1 = np.uint64(zm[2 * j + 1]) if c1 else np.uint64(0)
            if mode == 2:
                row[j] = bf16_dot_add(row[j], a0, a1, b0, b1, ctl)
            else:
                row[j] = dot_add(row[j], a0, a1, b0, b1, mode == 1, ctl)


@jit
def mopa_int8(za, t, step, zn, zm, pn, pm, neg, unsigned_n, unsigned_m):
    dim = za.shape[1]
    for i in range(dim):
        row = za[i * step + t]
        for j in range(dim):
            acc = np.int64(row[j])
            for k in range(4):
                if pn[4 * i + k] and pm[4 * j + k]:
                    x = np.int64(zn[4 * i + k])
                    y = np.int64(zm[4 * j + k])
                    if not unsigned_n and x >= 128:
                        x -= 256
                    if not unsigned_m and y >= 128:
                        y -= 256
                    acc = acc - x * y if neg else acc + x * y
            row[j] = np.uint32(acc & 0xFFFFFFFF)


def mopa_int8_twin(za, t, step, zn, zm, pn, pm, neg, unsigned_n, unsigned_m):
    tile = za[t::step]
    dim = tile.shape[1]
    a = zn.view(np.uint8 if unsigned_n else np.int8).astype(np.int64) * pn[:4 * dim]
    b = zm.view(np.uint8 if unsigned_m else np.int8).astype(np.int64) * pm[:4 * dim]
    products = a.reshape(dim, 4) @ b.reshape(dim, 4).T
    acc = tile.view(np.int32).astype(np.int64) + (-products if neg else products)
    tile[...] = (acc & 0xFFFFFFFF).astype(np.uint32)


mopa_fma_twin = mopa_fma.py_func
mopa_dot2_twin = mopa_dot2.py_func
