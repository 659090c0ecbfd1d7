"""Outer-product datapaths: numba kernels over a ZA tile, each with a plain twin.

A kernel updates a tile view in place from two source vectors (typed rows of Z registers) and
two governing predicates (one bool per predicate bit, ``state.SmeState.p`` rows). Inactive rows
and columns leave the tile unmodified. ``neg`` selects the ...MOPS form: the first source's active
elements are negated (their sign bit flipped, BFNeg/FPNeg; the integer forms subtract).

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
    """A multiplicand the shortcut takes: normal or zero (a zero product leaves the addend)."""
    x = np.uint64(x)
    e = (x >> np.uint64(mbits)) & np.uint64(0xFF)
    return e != 255 and (e != 0 or x << np.uint64(64 - 8 - mbits) == 0)


@jit
def _fma_row(row, a, b, ok, out, scratch, mbits, mode):
    """The float64 shortcut for one tile row: out[j] = row[j] + a * b[j] rounded once, and ok[j]
    False where it cannot decide (the exact path then does).

    For normal (or zero) BF16/FP32 factors the product is exact in float64; TwoSum gives the rounded sum and
    its error, and moving an even sum one ulp towards the error rounds the exact value to odd at
    53 bits, from which one rounding to 8 or 24 bits is correct (53 >= 24 + 2). Written as plain
    loops without branches so that they vectorise.
    """
    n = row.shape[0]
    cu, su = scratch[0], scratch[1]
    cf, sf, err = cu.view(np.float64), su.view(np.float64), scratch[2].view(np.float64)
    for j in range(n):
        cu[j] = _to_f64_bits(row[j], mbits)
    for j in range(n):
        c = cf[j]
        p = a * b[j]
        s = c + p
        t = s - c
        err[j] = (c - (s - t)) + (p - t)
        sf[j] = s
    one = np.uint64(1)
    shift = np.uint64(52 - mbits)
    half = one << (shift - one)
    rne = np.uint64(mode == RNE)
    directed = np.uint64(mode == RUP or mode == RDN)
    want = np.uint64(mode == RDN)
    for j in range(n):  # bitwise and/or on 0/1 integers: no branches
        bits = su[j]
        odd = np.uint64(err[j] != 0.0) & (~bits & one)
        away = np.uint64((err[j] > 0.0) == (sf[j] > 0.0))
        bits = bits + (odd & away) - (odd & (one - away))
        sign = bits >> np.uint64(63)
        e = np.int64((bits >> np.uint64(52)) & np.uint64(0x7FF)) - (1023 - 127)
        keep = (bits & np.uint64((1 << 52) - 1)) >> shift
        rest = bits & ((one << shift) - one)
        up = (rne & (np.uint64(rest > half) | (np.uint64(rest == half) & keep))) | (
            directed & np.uint64(rest != 0) & np.uint64(sign == want))
        keep = keep + (up & one)
        rounded_e = e + np.int64(keep >> np.uint64(mbits))
        x = np.uint64(row[j])
        xe = x >> np.uint64(mbits) & np.uint64(0xFF)
        # e >= 1 before rounding: the exact value is normal, so no flush applies in any mode
        fine = np.uint64(xe != 255) & (np.uint64(xe != 0) | np.uint64(x << np.uint64(1) == 0)) \
            & np.uint64(e >= 1) & np.uint64(rounded_e <= 254)
        e = rounded_e
        ok[j] = ok[j] & (fine == 1)
        out[j] = (sign << np.uint64(8 + mbits)) | (np.uint64(e & 0xFF) << np.uint64(mbits)) | (
            keep & np.uint64((1 << mbits) - 1))


@jit
def mopa_fma(tile, zn, zm, pn, pm, esize, neg, ebits, mbits, ctl):
    """``ebits`` must be 8 (BF16, FP32): the float64 shortcut relies on it; the exact
    ``numerics.fma`` decides every element the shortcut leaves open."""
    dim = tile.shape[0]
    flip = np.uint64(1) << np.uint64(ebits + mbits) if neg else np.uint64(0)
    scratch = np.empty((5, dim), dtype=np.uint64)   # three for _fma_row, b, one
    bu = scratch[3]
    normal = np.empty(dim, dtype=np.bool_)
    ok = np.empty(dim, dtype=np.bool_)
    out = np.empty(dim, dtype=np.uint64)
    for j in range(dim):
        normal[j] = _usable(zm[j], mbits)
        bu[j] = _to_f64_bits(zm[j], mbits)
    b = bu.view(np.float64)
    one = scratch[4, :1]
    for i in range(dim):
        if not pn[i * esize]:
            continue
        a = np.uint64(zn[i]) ^ flip
        row_normal = _usable(a, mbits)
        for j in range(dim):
            ok[j] = row_normal and normal[j]
        one[0] = _to_f64_bits(a, mbits)
        _fma_row(tile[i], one.view(np.float64)[0], b, ok, out, scratch, mbits, ctl[MODE])
        for j in range(dim):
            if pm[j * esize]:
                tile[i, j] = out[j] if ok[j] else fma(tile[i, j], a, zm[j], ebits, mbits, ctl)


@jit
def mopa_dot2(tile, zn, zm, pn, pm, neg, mode, ctl):
    """``mode``: 0 FP16 (FPDotAdd_ZA), 1 BF16 with EBF=1, 2 BF16 with EBF=0 (Round to Odd)."""
    dim = tile.shape[0]
    flip = np.uint64(0x8000) if neg else np.uint64(0)
    for i in range(dim):
        r0, r1 = pn[4 * i], pn[4 * i + 2]
        if not (r0 or r1):
            continue
        a0 = (np.uint64(zn[2 * i]) ^ flip) if r0 else np.uint64(0)
        a1 = (np.uint64(zn[2 * i + 1]) ^ flip) if r1 else np.uint64(0)
        for j in range(dim):
            c0, c1 = pm[4 * j], pm[4 * j + 2]
            if not ((r0 and c0) or (r1 and c1)):
                continue
            b0 = np.uint64(zm[2 * j]) if c0 else np.uint64(0)
            b1 = np.uint64(zm[2 * j + 1]) if c1 else np.uint64(0)
            if mode == 2:
                tile[i, j] = bf16_dot_add(tile[i, j], a0, a1, b0, b1, ctl)
            else:
                tile[i, j] = dot_add(tile[i, j], a0, a1, b0, b1, mode == 1, ctl)


@jit
def mopa_int8(tile, zn, zm, pn, pm, neg, unsigned_n, unsigned_m):
    dim = tile.shape[0]
    for i in range(dim):
        for j in range(dim):
            acc = np.int64(tile[i, j])
            for k in range(4):
                if pn[4 * i + k] and pm[4 * j + k]:
                    x = np.int64(zn[4 * i + k])
                    y = np.int64(zm[4 * j + k])
                    if not unsigned_n and x >= 128:
                        x -= 256
                    if not unsigned_m and y >= 128:
                        y -= 256
                    acc = acc - x * y if neg else acc + x * y
            tile[i, j] = np.uint32(acc & 0xFFFFFFFF)


def mopa_int8_twin(tile, zn, zm, pn, pm, neg, unsigned_n, unsigned_m):
    dim = tile.shape[0]
    a = zn.view(np.uint8 if unsigned_n else np.int8).astype(np.int64) * pn[:4 * dim]
    b = zm.view(np.uint8 if unsigned_m else np.int8).astype(np.int64) * pm[:4 * dim]
    products = a.reshape(dim, 4) @ b.reshape(dim, 4).T
    acc = tile.view(np.int32).astype(np.int64) + (-products if neg else products)
    tile[...] = (acc & 0xFFFFFFFF).astype(np.uint32)


mopa_fma_twin = mopa_fma.py_func
mopa_dot2_twin = mopa_dot2.py_func
