"""Outer-product datapaths: numba kernels over a ZA tile, each with a plain twin.

A kernel updates one tile of ZA in place from two source vectors (typed rows of Z registers) and
two governing predicates (one bool per predicate bit, ``state.SmeState.p`` rows). The tile is given
as the ZA array viewed as its element type (``za``, C-contiguous, one row per ZA array row), the
tile number ``t`` and the number of tiles of that size ``step``: tile row ``i`` is array row
``i * step + t`` (Arm ARM, ZA tile mapping); a bare (dim x dim) array is ``(tile, 0, 1)``.
Inactive rows and columns leave the tile unmodified. ``neg`` selects the ...MOPS form: the first
source's active elements are negated (their sign bit flipped, BFNeg/FPNeg; the integer forms
subtract).

Each kernel comes twice. ``*_tile`` takes its sources as (register file, register number) pairs
(``zs[n]``, ``ps[pn]``: a typed Z view and the predicate array) and working memory owned by the
caller (``scratch(svl_bytes)``): it allocates nothing and makes no array views, so that the
compiled interpreter runs it without touching reference counts. ``mopa_*`` takes the source
vectors themselves, and allocates its scratch when given none.

* ``mopa_fma``: non-widening BFMOPA/BFMOPS (.H) and FMOPA/FMOPS (.S): ``numerics.fma`` per element.
* ``mopa_dot2``: widening BFMOPA/BFMOPS and FMOPA/FMOPS (16-bit pairs into .S): for each element,
  pair ``k`` (k = 0, 1) is active when row element 2*row+k and column element 2*col+k are both
  active; when neither pair is, the element is unchanged; an inactive half of a source reads as
  +0.0 (Arm ARM C9.2.43/.115 pseudocode: ``FPZero('0', 16)``).
* ``mopa_int8``: SMOPA/UMOPA/SUMOPA/USMOPA/...MOPS, 4-way int8 -> int32: each element adds the
  products of its active byte pairs, exactly, wrapping to 32 bits.

How the float kernels stay exact and fast: each tile row is computed by a branch-free loop (it
vectorises) of the ``elements`` functions, in the host's binary32 arithmetic, which flag every
element whose result may differ from Arm's; a row with a flagged element is computed again from
its old values, the flagged elements by the exact per-element ``numerics`` functions. Rows take
the fast loop when rounding to nearest (widening BF16 with EBF=0 ignores FPCR), with no FPCR flush
mode, and with every column active; otherwise every element goes through the checking path.

The twins (``*_twin``) take the same arguments and follow the Arm pseudocode per element with the
exact ``numerics`` functions (``mopa_int8_twin`` is vectorised numpy): the reference the tests
compare the kernels with.
"""

from __future__ import annotations

import numpy as np

from hwsim.targets.floats import RNE, jit
from hwsim.targets.ieee import bits32, f32
from hwsim.targets.sme.elements import (directed, dot_element, fma32_element, fma_bf16_element,
                                        half, inline, sop_element, subnormal)
from hwsim.targets.sme.numerics import (FLUSH16_IN, FLUSH_IN, FLUSH_OUT, MODE, bf16_dot_add,
                                        dot_add, fma)

B0, B1, OLD = range(3)   # scratch rows: the column operands (or int8 sources), a row's old values


@jit
def new_scratch(svl_bytes):
    return np.zeros((3, max(svl_bytes, 16)), np.uint32)


def scratch(svl_bytes: int) -> np.ndarray:
    """Working memory for any kernel at this vector length."""
    return new_scratch(svl_bytes)


@jit
def _own(scratch, za):
    if scratch is None:
        return new_scratch(4 * za.shape[1])
    return scratch


# -- non-widening: FMOPA (FP32), BFMOPA (BF16) -------------------------------------------------

@inline
def fma_tile(za, t, step, zsn, n, zsm, m, psn, pn, psm, pm, esize, neg, ebits, mbits, ctl,
             words):
    """``ebits`` must be 8 (BF16, FP32)."""
    dim = za.shape[1]
    flip = np.uint32(1 << (ebits + mbits)) if neg else np.uint32(0)
    shift = np.uint32(23 - mbits)                 # BF16 -> FP32 bits
    every = True
    for j in range(dim):
        words[B0, j] = np.uint32(zsm[m, j]) << shift
        every &= psm[pm, j * esize]
    fast = ctl[MODE] == RNE and ctl[FLUSH_IN] == 0 and ctl[FLUSH_OUT] == 0 and every
    for i in range(dim):
        if not psn[pn, i * esize]:
            continue
        abits = np.uint32(zsn[n, i]) ^ flip
        a = f32(abits << shift)
        r = i * step + t
        bad = not fast
        if fast and mbits == 7:
            for j in range(dim):
                x = za[r, j]
                value, flag = fma_bf16_element(x, a, f32(words[B0, j]), False, False)
                bad |= flag
                words[OLD, j] = x
                za[r, j] = value
        elif fast:
            for j in range(dim):
                x = za[r, j]
                value, flag = fma32_element(x, a, f32(words[B0, j]), False, False)
                bad |= flag
                words[OLD, j] = x
                za[r, j] = value
        else:
            for j in range(dim):
                words[OLD, j] = za[r, j]
        if bad:
            _fma_row(za, r, abits, zsm, m, psm, pm, esize, words, ebits, mbits, ctl)


@jit
def _fma_row(za, r, abits, zsm, m, psm, pm, esize, words, ebits, mbits, ctl):
    """Row ``r`` from its old values, each active element checked and, if flagged, exact."""
    shift = np.uint32(23 - mbits)
    mode, fin, fout = ctl[MODE], ctl[FLUSH_IN] != 0, ctl[FLUSH_OUT] != 0
    a = f32(abits << shift)
    for j in range(za.shape[1]):
        if not psm[pm, j * esize]:
            continue
        x, b = words[OLD, j], f32(words[B0, j])
        if mode != RNE:
            value, flag = directed(x, abits, zsm[m, j], mbits, mode)
        elif mbits == 7:
            value, flag = fma_bf16_element(x, a, b, fin, fout)
        else:
            value, flag = fma32_element(x, a, b, fin, fout)
        if flag or (fin and (subnormal(a) or subnormal(b))):
            value = fma(x, abits, zsm[m, j], ebits, mbits, ctl)
        za[r, j] = value


@jit
def mopa_fma(za, t, step, zn, zm, pn, pm, esize, neg, ebits, mbits, ctl, scratch=None):
    fma_tile(za, t, step, _row(zn), 0, _row(zm), 0, _row(pn), 0, _row(pm), 0, esize, neg, ebits,
             mbits, ctl, _own(scratch, za))


@jit
def _row(vector):
    return vector.reshape((1, vector.shape[0]))


def mopa_fma_twin(za, t, step, zn, zm, pn, pm, esize, neg, ebits, mbits, ctl, scratch=None):
    tile = za[t::step]
    flip = 1 << (ebits + mbits) if neg else 0
    for i in range(tile.shape[0]):
        for j in range(tile.shape[1]):
            if pn[i * esize] and pm[j * esize]:
                tile[i, j] = fma(int(tile[i, j]), int(zn[i]) ^ flip, int(zm[j]), ebits, mbits,
                                 ctl)


# -- widening: BFMOPA/FMOPA 16-bit pairs into FP32 -------------------------------------------

@jit
def _flushes_halves(mode, ctl):
    """Whether the 16-bit inputs flush: always with EBF=0, else per FZ16 (FP16) or FZ/FIZ."""
    if mode == 2:
        return True
    return ctl[FLUSH16_IN] != 0 if mode == 0 else ctl[FLUSH_IN] != 0


@inline
def dot2_tile(za, t, step, zsn, n, zsm, m, psn, pn, psm, pm, neg, mode, ctl, words):
    """``mode``: 0 FP16 (FPDotAdd_ZA), 1 BF16 with EBF=1, 2 BF16 with EBF=0 (Round to Odd)."""
    dim = za.shape[1]
    fp16 = mode == 0
    flip = np.uint32(0x8000) if neg else np.uint32(0)
    flushing = _flushes_halves(mode, ctl)
    every = mode == 2 or (ctl[MODE] == RNE and ctl[FLUSH_IN] == 0 and ctl[FLUSH_OUT] == 0)
    for j in range(dim):
        c0, c1 = psm[pm, 4 * j], psm[pm, 4 * j + 2]
        every &= c0 & c1
        words[B0, j] = bits32(half(zsm[m, 2 * j] if c0 else 0, fp16, flushing))
        words[B1, j] = bits32(half(zsm[m, 2 * j + 1] if c1 else 0, fp16, flushing))
    for i in range(dim):
        r0, r1 = psn[pn, 4 * i], psn[pn, 4 * i + 2]
        if not (r0 or r1):
            continue
        h0 = (np.uint32(zsn[n, 2 * i]) ^ flip) if r0 else np.uint32(0)
        h1 = (np.uint32(zsn[n, 2 * i + 1]) ^ flip) if r1 else np.uint32(0)
        a0, a1 = half(h0, fp16, flushing), half(h1, fp16, flushing)
        r = i * step + t
        fast = every and r0 and r1
        bad = not fast
        if fast and mode == 2:
            for j in range(dim):
                x = za[r, j]
                value, flag = sop_element(x, a0, a1, f32(words[B0, j]), f32(words[B1, j]))
                bad |= flag
                words[OLD, j] = x
                za[r, j] = value
        elif fast:
            for j in range(dim):
                x = za[r, j]
                value, flag = dot_element(x, a0, a1, f32(words[B0, j]), f32(words[B1, j]),
                                          mode == 1, False, False)
                bad |= flag
                words[OLD, j] = x
                za[r, j] = value
        else:
            for j in range(dim):
                words[OLD, j] = za[r, j]
        if bad:
            _dot2_row(za, r, h0, h1, zsm, m, psm, pm, r0, r1, words, mode, ctl)


@jit
def _dot2_row(za, r, h0, h1, zsm, m, psm, pm, r0, r1, words, mode, ctl):
    """Row ``r`` from its old values, each active element checked and, if flagged, exact."""
    fin, fout = ctl[FLUSH_IN] != 0, ctl[FLUSH_OUT] != 0
    exact = mode != 2 and ctl[MODE] != RNE
    flushing = _flushes_halves(mode, ctl)
    a0, a1 = half(h0, mode == 0, flushing), half(h1, mode == 0, flushing)
    for j in range(za.shape[1]):
        c0, c1 = psm[pm, 4 * j], psm[pm, 4 * j + 2]
        if not ((r0 and c0) or (r1 and c1)):
            continue
        x, b0, b1 = words[OLD, j], f32(words[B0, j]), f32(words[B1, j])
        if mode == 2:
            value, flag = sop_element(x, a0, a1, b0, b1)
        else:
            value, flag = dot_element(x, a0, a1, b0, b1, mode == 1, fin, fout)
        if flag or exact:
            g0 = np.uint64(zsm[m, 2 * j]) if c0 else np.uint64(0)
            g1 = np.uint64(zsm[m, 2 * j + 1]) if c1 else np.uint64(0)
            if mode == 2:
                value = bf16_dot_add(x, h0, h1, g0, g1, ctl)
            else:
                value = dot_add(x, h0, h1, g0, g1, mode == 1, ctl)
        za[r, j] = value


@jit
def mopa_dot2(za, t, step, zn, zm, pn, pm, neg, mode, ctl, scratch=None):
    dot2_tile(za, t, step, _row(zn), 0, _row(zm), 0, _row(pn), 0, _row(pm), 0, neg, mode, ctl,
              _own(scratch, za))


def mopa_dot2_twin(za, t, step, zn, zm, pn, pm, neg, mode, ctl, scratch=None):
    tile = za[t::step]
    flip = 0x8000 if neg else 0
    for i in range(tile.shape[0]):
        r0, r1 = pn[4 * i], pn[4 * i + 2]
        a0 = (int(zn[2 * i]) ^ flip) if r0 else 0
        a1 = (int(zn[2 * i + 1]) ^ flip) if r1 else 0
        for j in range(tile.shape[1]):
            c0, c1 = pm[4 * j], pm[4 * j + 2]
            if not ((r0 and c0) or (r1 and c1)):
                continue
            b0 = int(zm[2 * j]) if c0 else 0
            b1 = int(zm[2 * j + 1]) if c1 else 0
            if mode == 2:
                tile[i, j] = bf16_dot_add(int(tile[i, j]), a0, a1, b0, b1, ctl)
            else:
                tile[i, j] = dot_add(int(tile[i, j]), a0, a1, b0, b1, mode == 1, ctl)


# -- integer: SMOPA/UMOPA/SUMOPA/USMOPA -----------------------------------------------------

@inline
def int8_tile(za, t, step, zsn, n, zsm, m, psn, pn, psm, pm, neg, unsigned_n, unsigned_m, words):
    dim = za.shape[1]
    sign = np.int32(-1) if neg else np.int32(1)
    for e in range(4 * dim):   # row B0: the first source; row B1: the second, transposed
        x = np.int32(zsn[n, e]) if unsigned_n else np.int32(np.int8(zsn[n, e]))
        y = np.int32(zsm[m, e]) if unsigned_m else np.int32(np.int8(zsm[m, e]))
        words[B0, e] = np.uint32(sign * x * np.int32(psn[pn, e]))
        words[B1, (e & 3) * dim + (e >> 2)] = np.uint32(y * np.int32(psm[pm, e]))
    for i in range(dim):
        a0, a1 = np.int32(words[B0, 4 * i]), np.int32(words[B0, 4 * i + 1])
        a2, a3 = np.int32(words[B0, 4 * i + 2]), np.int32(words[B0, 4 * i + 3])
        if a0 == 0 and a1 == 0 and a2 == 0 and a3 == 0:
            continue   # adds nothing
        r = i * step + t
        for j in range(dim):
            total = (a0 * np.int32(words[B1, j]) + a1 * np.int32(words[B1, dim + j])
                     + a2 * np.int32(words[B1, 2 * dim + j])
                     + a3 * np.int32(words[B1, 3 * dim + j]))   # |total| <= 2**17
            za[r, j] = np.uint32((np.int64(za[r, j]) + total) & 0xFFFFFFFF)


@jit
def mopa_int8(za, t, step, zn, zm, pn, pm, neg, unsigned_n, unsigned_m, scratch=None):
    int8_tile(za, t, step, _row(zn), 0, _row(zm), 0, _row(pn), 0, _row(pm), 0, neg, unsigned_n,
              unsigned_m, _own(scratch, za))


def mopa_int8_twin(za, t, step, zn, zm, pn, pm, neg, unsigned_n, unsigned_m, scratch=None):
    tile = za[t::step]
    dim = tile.shape[1]
    a = zn.view(np.uint8 if unsigned_n else np.int8).astype(np.int64) * pn[:4 * dim]
    b = zm.view(np.uint8 if unsigned_m else np.int8).astype(np.int64) * pm[:4 * dim]
    products = a.reshape(dim, 4) @ b.reshape(dim, 4).T
    acc = tile.view(np.int32).astype(np.int64) + (-products if neg else products)
    tile[...] = (acc & 0xFFFFFFFF).astype(np.uint32)
