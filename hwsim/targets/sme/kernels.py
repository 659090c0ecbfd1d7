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
vectors themselves, and allocates its scratch when given none. Both call the exact per-element
functions through their addresses (``exact``), never linked in: a kernel that linked them would
compile them again, for seconds, besides the copies the interpreter calls.

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

import functools

import numpy as np
from numba import carray, cfunc, types

from hwsim.targets.floats import RNE, jit
from hwsim.targets.ieee import add32, and32, bits32, f32, mul32, shl32, sub32, xor32
from hwsim.targets.native import caller, pointer
from hwsim.targets.sme.elements import (directed, dot_element, fma32_element, fma_bf16_element,
                                        half, inline, sop_element, subnormal)
from hwsim.targets.sme.numerics import (CONTROLS, FLUSH16_IN, FLUSH_IN, FLUSH_OUT, MODE,
                                        bf16_dot_add, dot_add, fma)

B0, B1, OLD = range(3)   # scratch rows: the column operands (or int8 sources), a row's old values

# Compiled apart, called through pointers: the exact per-element functions (compiling one takes
# seconds), so that a kernel neither inlines them nor compiles one it does not use, and the kernels
# themselves (``outer``), so that the interpreter compiles only the ones a program uses. One
# signature each: EXACT(x, a0, a1, b0, b1, variant, controls), OUTER below.
EXACT = types.uint64(types.uint64, types.uint64, types.uint64, types.uint64, types.uint64,
                     types.int64, types.voidptr)
_NIL = np.uint64(0)   # an unused EXACT argument
_call_exact = caller(EXACT)


def _exact_fma(x, a, _, b, __, mbits, ctl):
    """FPMulAdd (``mbits`` 23) or BFMulAdd (7)."""
    return fma(x, a, b, 8, mbits, carray(ctl, CONTROLS, np.int64))


def _exact_dot(acc, a0, a1, b0, b1, mode, ctl):
    """FPDotAdd_ZA (``mode`` 0) or BFDotAdd with EBF=1 (1)."""
    return dot_add(acc, a0, a1, b0, b1, mode == 1, carray(ctl, CONTROLS, np.int64))


def _exact_sop(acc, a0, a1, b0, b1, mode, ctl):
    """BFDotAdd with EBF=0."""
    return bf16_dot_add(acc, a0, a1, b0, b1, carray(ctl, CONTROLS, np.int64))


def _absent(x, a0, a1, b0, b1, variant, ctl):
    return np.uint64(0)


_EXACT = {"fma": _exact_fma, "dot": _exact_dot, "sop": _exact_sop}


@functools.cache
def exact(name: str, needed: bool = True):
    """The exact function ``name`` (``fma``, ``dot``, ``sop``), compiled on first use;
    ``needed=False``: a stand-in of the same type for a caller that will not call it."""
    return cfunc(EXACT, cache=True)(_EXACT[name] if needed else _absent)


@jit
def scratch(svl_bytes):
    """Working memory for any kernel at this vector length."""
    return np.zeros((3, max(svl_bytes, 16)), np.uint32)


# predicate bits (one bool byte each) read 8 at a time: those governing elements of each size
_EVERY = np.array([0, 0x0101010101010101, 0x0001000100010001, 0, 0x0000000100000001, 0, 0, 0,
                   0x0000000000000001], np.uint64)


@inline
def whole(p64, pg, esize):
    """Whether predicate ``pg`` (of ``p64``: the predicates as uint64 words) makes every
    ``esize``-byte element active."""
    every = _EVERY[esize]
    result = True
    for w in range(p64.shape[1]):
        result &= (p64[pg, w] & every) == every
    return result


@jit
def _operands(zn, zm, pn, pm, za, given):
    """The tile kernels' arguments for two source vectors and two predicates."""
    predicates = np.stack((pn, pm))
    words = scratch(4 * za.shape[1]) if given is None else given
    return np.stack((zn, zm)), predicates, predicates.view(np.uint64), words


# -- non-widening: FMOPA (FP32), BFMOPA (BF16) -------------------------------------------------

@inline
def fma_tile(za, t, step, zs, n, m, ps, ps64, pn, pm, esize, neg, ebits, mbits, ctl, words,
             exact_fma):
    """Sources ``zs[n]``, ``zs[m]`` under ``ps[pn]``, ``ps[pm]`` (``ps64``: ``ps`` as uint64
    words). ``ebits`` must be 8 (BF16, FP32); ``exact_fma``: the address of ``exact("fma")``."""
    dim = za.shape[1]
    flip = np.uint32(1 << (ebits + mbits)) if neg else np.uint32(0)
    shift = np.uint32(23 - mbits)                 # BF16 -> FP32 bits
    fast = ctl[MODE] == RNE and ctl[FLUSH_IN] == 0 and ctl[FLUSH_OUT] == 0 and whole(
        ps64, pm, esize)
    for i in range(dim):
        if not ps[pn, i * esize]:
            continue
        abits = np.uint32(zs[n, i]) ^ flip
        a = f32(abits << shift)
        r = i * step + t
        bad = not fast
        if fast and mbits == 7:
            for j in range(dim):
                x = za[r, j]
                value, flag = fma_bf16_element(x, a, f32(shl32(np.uint32(zs[m, j]), shift)),
                                               False, False)
                bad |= flag
                words[OLD, j] = x
                za[r, j] = value
        elif fast:
            for j in range(dim):
                x = za[r, j]
                value, flag = fma32_element(x, a, f32(np.uint32(zs[m, j])), False, False)
                bad |= flag
                words[OLD, j] = x
                za[r, j] = value
        else:
            for j in range(dim):
                words[OLD, j] = za[r, j]
        if bad:
            _fma_row(za, r, abits, zs, m, ps, pm, esize, words, mbits, ctl, exact_fma)


@jit
def _fma_row(za, r, abits, zs, m, ps, pm, esize, words, mbits, ctl, exact_fma):
    """Row ``r`` from its old values, each active element checked and, if flagged, exact."""
    shift = np.uint32(23 - mbits)
    mode, fin, fout = ctl[MODE], ctl[FLUSH_IN] != 0, ctl[FLUSH_OUT] != 0
    a = f32(abits << shift)
    for j in range(za.shape[1]):
        if not ps[pm, j * esize]:
            continue
        x, b = words[OLD, j], f32(np.uint32(zs[m, j]) << shift)
        if mode != RNE:
            value, flag = directed(x, abits, zs[m, j], mbits, mode)
        elif mbits == 7:
            value, flag = fma_bf16_element(x, a, b, fin, fout)
        else:
            value, flag = fma32_element(x, a, b, fin, fout)
        if flag or (fin and (subnormal(a) or subnormal(b))):
            value = _call_exact(exact_fma, (np.uint64(x), np.uint64(abits), _NIL,
                                            np.uint64(zs[m, j]), _NIL, np.int64(mbits),
                                            pointer(ctl.ctypes.data)))
        za[r, j] = value


def mopa_fma(za, t, step, zn, zm, pn, pm, esize, neg, ebits, mbits, ctl, scratch=None):
    _mopa_fma(za, t, step, zn, zm, pn, pm, esize, neg, ebits, mbits, ctl, scratch,
              exact("fma").address)


@jit
def _mopa_fma(za, t, step, zn, zm, pn, pm, esize, neg, ebits, mbits, ctl, scratch, exact_fma):
    zs, ps, ps64, words = _operands(zn, zm, pn, pm, za, scratch)
    fma_tile(za, t, step, zs, 0, 1, ps, ps64, 0, 1, esize, neg, ebits, mbits, ctl, words,
             exact_fma)


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
def dot2_tile(za, t, step, zs, n, m, ps, ps64, pn, pm, neg, mode, ctl, words, exact_dot):
    """``mode``: 0 FP16 (FPDotAdd_ZA), 1 BF16 with EBF=1, 2 BF16 with EBF=0 (Round to Odd);
    ``exact_dot``: the address of ``exact("sop")`` for mode 2, else of ``exact("dot")``."""
    dim = za.shape[1]
    fp16 = mode == 0
    flip = np.uint32(0x8000) if neg else np.uint32(0)
    flushing = _flushes_halves(mode, ctl)
    every = (mode == 2 or (ctl[MODE] == RNE and ctl[FLUSH_IN] == 0 and ctl[FLUSH_OUT] == 0)) \
        and whole(ps64, pm, 2)
    for j in range(dim):
        c0, c1 = ps[pm, 4 * j], ps[pm, 4 * j + 2]
        words[B0, j] = bits32(half(zs[m, 2 * j] if c0 else 0, fp16, flushing))
        words[B1, j] = bits32(half(zs[m, 2 * j + 1] if c1 else 0, fp16, flushing))
    for i in range(dim):
        r0, r1 = ps[pn, 4 * i], ps[pn, 4 * i + 2]
        if not (r0 or r1):
            continue
        h0 = (np.uint32(zs[n, 2 * i]) ^ flip) if r0 else np.uint32(0)
        h1 = (np.uint32(zs[n, 2 * i + 1]) ^ flip) if r1 else np.uint32(0)
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
            _dot2_row(za, r, h0, h1, zs, m, ps, pm, r0, r1, words, mode, ctl, exact_dot)


@jit
def _dot2_row(za, r, h0, h1, zs, m, ps, pm, r0, r1, words, mode, ctl, exact_dot):
    """Row ``r`` from its old values, each active element checked and, if flagged, exact."""
    fin, fout = ctl[FLUSH_IN] != 0, ctl[FLUSH_OUT] != 0
    exact = mode != 2 and ctl[MODE] != RNE
    flushing = _flushes_halves(mode, ctl)
    a0, a1 = half(h0, mode == 0, flushing), half(h1, mode == 0, flushing)
    for j in range(za.shape[1]):
        c0, c1 = ps[pm, 4 * j], ps[pm, 4 * j + 2]
        if not ((r0 and c0) or (r1 and c1)):
            continue
        x, b0, b1 = words[OLD, j], f32(words[B0, j]), f32(words[B1, j])
        if mode == 2:
            value, flag = sop_element(x, a0, a1, b0, b1)
        else:
            value, flag = dot_element(x, a0, a1, b0, b1, mode == 1, fin, fout)
        if flag or exact:
            g0 = np.uint64(zs[m, 2 * j]) if c0 else np.uint64(0)
            g1 = np.uint64(zs[m, 2 * j + 1]) if c1 else np.uint64(0)
            value = _call_exact(exact_dot, (np.uint64(x), np.uint64(h0), np.uint64(h1), g0, g1,
                                            np.int64(mode), pointer(ctl.ctypes.data)))
        za[r, j] = value


def mopa_dot2(za, t, step, zn, zm, pn, pm, neg, mode, ctl, scratch=None):
    _mopa_dot2(za, t, step, zn, zm, pn, pm, neg, mode, ctl, scratch,
               exact("sop" if mode == 2 else "dot").address)


@jit
def _mopa_dot2(za, t, step, zn, zm, pn, pm, neg, mode, ctl, scratch, exact_dot):
    zs, ps, ps64, words = _operands(zn, zm, pn, pm, za, scratch)
    dot2_tile(za, t, step, zs, 0, 1, ps, ps64, 0, 1, neg, mode, ctl, words, exact_dot)


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
def _byte(x, sign_bit, active):
    """A source byte as a 32-bit two's complement value: sign-extended when ``sign_bit`` is 0x80
    (0 for unsigned), zero when not ``active``."""
    value = sub32(xor32(np.uint32(x), sign_bit), sign_bit)
    return and32(value, sub32(np.uint32(0), np.uint32(active)))


@inline
def int8_tile(za, t, step, zs, n, m, ps, ps64, pn, pm, neg, unsigned_n, unsigned_m, words):
    """All arithmetic in 32-bit two's complement (``ieee.add32``...), which wraps as Arm's does
    and vectorises."""
    dim = za.shape[1]
    sign_n = np.uint32(0) if unsigned_n else np.uint32(0x80)
    sign_m = np.uint32(0) if unsigned_m else np.uint32(0x80)
    scale = np.uint32(0xFFFFFFFF) if neg else np.uint32(1)   # -1 or 1
    for j in range(dim):   # row B1: the second source transposed, its inactive bytes zero
        e = 4 * j
        words[B1, j] = _byte(zs[m, e], sign_m, ps[pm, e])
        words[B1, dim + j] = _byte(zs[m, e + 1], sign_m, ps[pm, e + 1])
        words[B1, 2 * dim + j] = _byte(zs[m, e + 2], sign_m, ps[pm, e + 2])
        words[B1, 3 * dim + j] = _byte(zs[m, e + 3], sign_m, ps[pm, e + 3])
    for i in range(dim):
        e = 4 * i
        a0 = mul32(scale, _byte(zs[n, e], sign_n, ps[pn, e]))
        a1 = mul32(scale, _byte(zs[n, e + 1], sign_n, ps[pn, e + 1]))
        a2 = mul32(scale, _byte(zs[n, e + 2], sign_n, ps[pn, e + 2]))
        a3 = mul32(scale, _byte(zs[n, e + 3], sign_n, ps[pn, e + 3]))
        if a0 == 0 and a1 == 0 and a2 == 0 and a3 == 0:
            continue   # adds nothing
        r = i * step + t
        for j in range(dim):
            total = add32(add32(mul32(a0, words[B1, j]), mul32(a1, words[B1, dim + j])),
                          add32(mul32(a2, words[B1, 2 * dim + j]),
                                mul32(a3, words[B1, 3 * dim + j])))
            za[r, j] = add32(np.uint32(za[r, j]), total)


@jit
def mopa_int8(za, t, step, zn, zm, pn, pm, neg, unsigned_n, unsigned_m, scratch=None):
    zs, ps, ps64, words = _operands(zn, zm, pn, pm, za, scratch)
    int8_tile(za, t, step, zs, 0, 1, ps, ps64, 0, 1, neg, unsigned_n, unsigned_m, words)


def mopa_int8_twin(za, t, step, zn, zm, pn, pm, neg, unsigned_n, unsigned_m, scratch=None):
    tile = za[t::step]
    dim = tile.shape[1]
    a = zn.view(np.uint8 if unsigned_n else np.int8).astype(np.int64) * pn[:4 * dim]
    b = zm.view(np.uint8 if unsigned_m else np.int8).astype(np.int64) * pm[:4 * dim]
    products = a.reshape(dim, 4) @ b.reshape(dim, 4).T
    acc = tile.view(np.int32).astype(np.int64) + (-products if neg else products)
    tile[...] = (acc & 0xFFFFFFFF).astype(np.uint32)


# -- the kernels compiled apart, for the interpreter ------------------------------------------

OUTER = types.void(types.voidptr, types.voidptr, types.voidptr, types.voidptr, types.voidptr,
                   types.int64, types.int64, types.int64, types.int64, types.int64, types.int64,
                   types.int64, types.int64, types.int64)
call_outer = caller(OUTER)


def _outer_fp32(za, z, p, ctl, words, svl, t, n, m, pn, pm, neg, variant, exact_fma):
    fma_tile(carray(za, (svl, svl // 4), np.uint32), t, 4, carray(z, (32, svl // 4), np.uint32),
             n, m, carray(p, (16, svl), np.bool_), carray(p, (16, svl // 8), np.uint64), pn, pm,
             4, neg != 0, 8, 23, carray(ctl, CONTROLS, np.int64),
             carray(words, (3, max(svl, 16)), np.uint32), exact_fma)


def _outer_bf16(za, z, p, ctl, words, svl, t, n, m, pn, pm, neg, variant, exact_fma):
    fma_tile(carray(za, (svl, svl // 2), np.uint16), t, 2, carray(z, (32, svl // 2), np.uint16),
             n, m, carray(p, (16, svl), np.bool_), carray(p, (16, svl // 8), np.uint64), pn, pm,
             2, neg != 0, 8, 7, carray(ctl, CONTROLS, np.int64),
             carray(words, (3, max(svl, 16)), np.uint32), exact_fma)


def _outer_wide(za, z, p, ctl, words, svl, t, n, m, pn, pm, neg, mode, exact_dot):
    dot2_tile(carray(za, (svl, svl // 4), np.uint32), t, 4, carray(z, (32, svl // 2), np.uint16),
              n, m, carray(p, (16, svl), np.bool_), carray(p, (16, svl // 8), np.uint64), pn, pm,
              neg != 0, mode, carray(ctl, CONTROLS, np.int64),
              carray(words, (3, max(svl, 16)), np.uint32), exact_dot)


def _outer_int8(za, z, p, ctl, words, svl, t, n, m, pn, pm, neg, unsigned, exact):
    int8_tile(carray(za, (svl, svl // 4), np.uint32), t, 4, carray(z, (32, svl), np.uint8), n, m,
              carray(p, (16, svl), np.bool_), carray(p, (16, svl // 8), np.uint64), pn, pm,
              neg != 0, unsigned & 1 != 0, unsigned & 2 != 0,
              carray(words, (3, max(svl, 16)), np.uint32))


def _outer_absent(za, z, p, ctl, words, svl, t, n, m, pn, pm, neg, variant, exact):
    pass


_OUTER = {"fp32": _outer_fp32, "bf16": _outer_bf16, "fp16_wide": _outer_wide,
          "bf16_wide": _outer_wide, "int8": _outer_int8}


@functools.cache
def outer(dtype: str, needed: bool = True):
    """The kernel of outer products of ``dtype`` (``semantics.MOPA``) as a function of the
    machine's storage by address (OUTER: ZA, Z, P, controls, scratch, SVL in bytes, tile, Zn, Zm,
    Pn, Pm, neg, variant, the address of its exact function), compiled on first use; call it with
    ``call_outer(outer(...).address, arguments)``. ``variant``: the widening mode (``dot2_tile``),
    or for int8 unsigned_n + 2 * unsigned_m. ``needed=False``: a stand-in."""
    return cfunc(OUTER, cache=True)(_OUTER[dtype] if needed else _outer_absent)
