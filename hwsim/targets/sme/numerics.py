"""Per-element arithmetic of the SME outer products, bit-exact to the Arm ARM pseudocode.

All four floating-point behaviours SME outer products use (Arm ARM DDI0487 M.a.a;
docs/sources.md#sme-numerics lists each rule with its section):

* ``fma`` -- BFMulAdd_ZA / FPMulAdd_ZA (J1.3.3.154, .216): non-widening BFMOPA/BFMOPS (.H, BF16)
  and FMOPA/FMOPS (.S, FP32). One fused multiply-add, one rounding; FPCR.RMode, FZ, FIZ and AH
  honoured; default NaN forced (FPCR.DN ignored); no flags, no traps (D22.6).
* ``dot_add`` -- FPDotAdd_ZA (J1.3.3.203) and BFDotAdd with FPCR.EBF=1 (J1.3.3.143): widening
  FMOPA (FP16 -> FP32) and BFMOPA with EBF=1. The two products are summed exactly and rounded once
  to FP32 (FPDot), then added to the accumulator with a second rounding (FPAdd). FP16 inputs
  flush per FZ16, BF16 inputs per FZ/FIZ, FP32 values per FZ/FIZ.
* ``bf16_dot_add`` -- BFDotAdd with FPCR.EBF=0 (A1.5.11): widening BFMOPA by default. Each
  product (BFMulH), their sum and the accumulation (FPAdd_BF16) round to FP32 with Round to Odd,
  denormal inputs and outputs flush to zero, overflow gives infinity, FPCR ignored.
* integer outer products need no helper (exact, wrapping to 32 bits) and live in ``kernels``.

Every function takes the FPCR as a small control array built once per instruction by
``controls``. Numbers are Arm's bit patterns (uint16 BF16/FP16, uint32 FP32) throughout.
"""

from __future__ import annotations

import numpy as np

from hwsim.targets.floats import (FINITE, FLUSH_AFTER, FLUSH_BEFORE, INF, NAN, OVERFLOW, RDN,
                                  RNE, ROD, RTZ, RUP, ZERO, exact_sum, infinity, jit, round_pack,
                                  unpack)
from hwsim.targets.sme.state import FPCR

# Indices into the control array, and its length.
MODE, FLUSH_IN, FLUSH16_IN, FLUSH_OUT, DN_SIGN, SOP_DN_SIGN = range(6)
CONTROLS = 6
_RMODE = (RNE, RUP, RDN, RTZ)   # FPCR.RMode 0b00 RN, 0b01 RP, 0b10 RM, 0b11 RZ
# Formats and flags as typed arguments, not literals: numba compiles a callee once per distinct
# argument types, and each literal value is a type of its own.
E5, M10, E8, M7, M23 = (np.int64(v) for v in (5, 10, 8, 7, 23))
NO, YES = np.bool_(False), np.bool_(True)


def controls(fpcr: int, feat_afp: bool, sop_dn: str) -> np.ndarray:
    """The control array for one instruction from FPCR.

    ``feat_afp``: FEAT_AFP implemented (else AH and FIZ read as zero). ``sop_dn``: the sign of the
    default NaN of the EBF=0 BF16 sum-of-products, where the Arm ARM's text ("as if FPCR.AH is 0",
    A1.5.11) and its pseudocode (FPDefaultNaN(fpcr) with the caller's AH, J1.3.3.155/.163) differ:
    "pseudocode" follows AH (as QEMU does), "text" is always positive.
    """
    ctl = np.zeros(CONTROLS, dtype=np.int64)
    fill_controls(fpcr, feat_afp, sop_dn == "pseudocode", ctl)
    return ctl


# the lowest bit of each field read here
_AH, _FIZ, _FZ, _FZ16, _RMODE_AT = (FPCR.fields[name].pieces[-1][1]
                                    for name in ("AH", "FIZ", "FZ", "FZ16", "RMode"))


@jit
def fill_controls(fpcr, feat_afp, sop_follows_ah, ctl):
    """``controls`` into ``ctl``, for compiled callers (``sop_follows_ah``: "pseudocode")."""
    fpcr = np.int64(fpcr)
    ah = feat_afp and (fpcr >> _AH) & 1 == 1
    fiz = feat_afp and (fpcr >> _FIZ) & 1 == 1
    fz = (fpcr >> _FZ) & 1 == 1
    ctl[MODE] = _RMODE[(fpcr >> _RMODE_AT) & 3]
    ctl[FLUSH_IN] = (fz and not ah) or fiz
    ctl[FLUSH16_IN] = (fpcr >> _FZ16) & 1
    ctl[FLUSH_OUT] = (FLUSH_AFTER if ah else FLUSH_BEFORE) if fz else 0
    ctl[DN_SIGN] = ah
    ctl[SOP_DN_SIGN] = ah and sop_follows_ah


@jit
def default_nan(sign, ebits, mbits):
    return (np.uint64(sign) << np.uint64(ebits + mbits)) | np.uint64(
        (((1 << ebits) - 1) << mbits) | (1 << (mbits - 1)))


@jit
def _operand(bits, ebits, mbits, flush):
    """(class, sign, sig, exp) of an input, denormals flushed to signed zero when ``flush``."""
    cls, sign, sig, exp = unpack(bits, ebits, mbits)
    if flush and cls == FINITE and sig >> mbits == 0:
        return ZERO, sign, np.int64(0), np.int64(0)
    return cls, sign, sig, exp


@jit
def _zero(sign, ebits, mbits):
    return np.uint64(sign) << np.uint64(ebits + mbits)


@jit
def _sum(sign1, sig1, exp1, sign2, sig2, exp2, ebits, mbits, mode, flush):
    """Round the exact sum of two finite values once; an exact zero is -0 only in RM."""
    sign, sig, exp, sticky = exact_sum(sign1, sig1, exp1, sign2, sig2, exp2)
    if sig == 0 and not sticky:
        return _zero(1 if mode == RDN else 0, ebits, mbits)
    return round_pack(sign, sig, exp, sticky, ebits, mbits, mode, flush, False)[0]


@jit
def fma(addend, op1, op2, ebits, mbits, ctl):
    """addend + op1 * op2 with one rounding, all in one format (BFMulAdd_ZA, FPMulAdd_ZA)."""
    ca, sa, ma, ea = _operand(addend, ebits, mbits, ctl[FLUSH_IN])
    c1, s1, m1, e1 = _operand(op1, ebits, mbits, ctl[FLUSH_IN])
    c2, s2, m2, e2 = _operand(op2, ebits, mbits, ctl[FLUSH_IN])
    sp = s1 ^ s2
    if ca == NAN or c1 == NAN or c2 == NAN or (c1 == INF and c2 == ZERO) or (
            c1 == ZERO and c2 == INF):
        return default_nan(ctl[DN_SIGN], ebits, mbits)
    product_inf = c1 == INF or c2 == INF
    if ca == INF:
        if product_inf and sa != sp:
            return default_nan(ctl[DN_SIGN], ebits, mbits)
        return infinity(sa, ebits, mbits)
    if product_inf:
        return infinity(sp, ebits, mbits)
    product_zero = c1 == ZERO or c2 == ZERO
    if ca == ZERO and product_zero and sa == sp:
        return _zero(sa, ebits, mbits)
    mp = np.int64(0) if product_zero else m1 * m2
    return _sum(sp, mp, e1 + e2, sa, ma, ea, ebits, mbits, ctl[MODE], ctl[FLUSH_OUT])


@jit
def add32(x, y, ctl):
    """FPAdd on FP32 bit patterns with the ZA-targeting rules (default NaN, no flags)."""
    cx, sx, mx, ex = _operand(x, 8, 23, ctl[FLUSH_IN])
    cy, sy, my, ey = _operand(y, 8, 23, ctl[FLUSH_IN])
    if cx == NAN or cy == NAN or (cx == INF and cy == INF and sx != sy):
        return default_nan(ctl[DN_SIGN], 8, 23)
    if cx == INF:
        return infinity(sx, 8, 23)
    if cy == INF:
        return infinity(sy, 8, 23)
    if cx == ZERO and cy == ZERO and sx == sy:
        return _zero(sx, 8, 23)
    return _sum(sx, mx, ex, sy, my, ey, 8, 23, ctl[MODE], ctl[FLUSH_OUT])


@jit
def dot(a0, a1, b0, b1, ebits, mbits, flush, ctl):
    """FPDot: a0*b0 + a1*b1 of 16-bit inputs (flushed per ``flush``), rounded once to FP32."""
    ca0, sa0, ma0, ea0 = _operand(a0, ebits, mbits, flush)
    ca1, sa1, ma1, ea1 = _operand(a1, ebits, mbits, flush)
    cb0, sb0, mb0, eb0 = _operand(b0, ebits, mbits, flush)
    cb1, sb1, mb1, eb1 = _operand(b1, ebits, mbits, flush)
    dn = default_nan(ctl[DN_SIGN], 8, 23)
    if ca0 == NAN or ca1 == NAN or cb0 == NAN or cb1 == NAN:
        return dn
    if (ca0 == INF and cb0 == ZERO) or (ca0 == ZERO and cb0 == INF) or (
            ca1 == INF and cb1 == ZERO) or (ca1 == ZERO and cb1 == INF):
        return dn
    s0, s1 = sa0 ^ sb0, sa1 ^ sb1
    inf0, inf1 = ca0 == INF or cb0 == INF, ca1 == INF or cb1 == INF
    if inf0 and inf1 and s0 != s1:
        return dn
    if inf0:
        return infinity(s0, 8, 23)
    if inf1:
        return infinity(s1, 8, 23)
    zero0, zero1 = ca0 == ZERO or cb0 == ZERO, ca1 == ZERO or cb1 == ZERO
    if zero0 and zero1 and s0 == s1:
        return _zero(s0, 8, 23)
    m0 = np.int64(0) if zero0 else ma0 * mb0
    m1 = np.int64(0) if zero1 else ma1 * mb1
    return _sum(s0, m0, ea0 + eb0, s1, m1, ea1 + eb1, 8, 23, ctl[MODE], ctl[FLUSH_OUT])


@jit
def dot_add(acc, a0, a1, b0, b1, bf16, ctl):
    """FPDotAdd_ZA (FP16 inputs, ``bf16`` False) or BFDotAdd with EBF=1 (BF16 inputs)."""
    if bf16:
        prod = dot(a0, a1, b0, b1, E8, M7, ctl[FLUSH_IN], ctl)
    else:
        prod = dot(a0, a1, b0, b1, E5, M10, ctl[FLUSH16_IN], ctl)
    return add32(acc, prod, ctl)


@jit
def _round_odd32(sign, sig, exp, sticky):
    """BFRound: Round to Odd to FP32, flushing tiny values and overflowing to infinity."""
    bits, flags = round_pack(sign, sig, exp, sticky, 8, 23, ROD, FLUSH_BEFORE, False)
    if flags & OVERFLOW:
        return infinity(sign, 8, 23)
    return bits


@jit
def _bf_mul(x, y, dn):
    """BFMulH: an FP32 product of two BF16 values (denormal inputs are zero)."""
    cx, sx, mx, ex = _operand(x, E8, M7, YES)
    cy, sy, my, ey = _operand(y, E8, M7, YES)
    if cx == NAN or cy == NAN or (cx == INF and cy == ZERO) or (cx == ZERO and cy == INF):
        return dn
    if cx == INF or cy == INF:
        return infinity(sx ^ sy, 8, 23)
    if cx == ZERO or cy == ZERO:
        return _zero(sx ^ sy, 8, 23)
    return _round_odd32(sx ^ sy, mx * my, ex + ey, NO)


@jit
def _bf_add(x, y, dn):
    """FPAdd_BF16 on FP32 values: denormals are zero, Round to Odd, exact zero is +0."""
    cx, sx, mx, ex = _operand(x, E8, M23, YES)
    cy, sy, my, ey = _operand(y, E8, M23, YES)
    if cx == NAN or cy == NAN or (cx == INF and cy == INF and sx != sy):
        return dn
    if cx == INF:
        return infinity(sx, 8, 23)
    if cy == INF:
        return infinity(sy, 8, 23)
    if cx == ZERO and cy == ZERO and sx == sy:
        return _zero(sx, 8, 23)
    sign, sig, exp, sticky = exact_sum(sx, mx, ex, sy, my, ey)
    if sig == 0 and not sticky:
        return _zero(np.int64(0), 8, 23)
    return _round_odd32(sign, sig, exp, sticky)


@jit
def bf16_dot_add(acc, a0, a1, b0, b1, ctl):
    """BFDotAdd with EBF=0: acc + (a0*b0 + a1*b1), three Round-to-Odd roundings."""
    dn = default_nan(ctl[SOP_DN_SIGN], 8, 23)
    return _bf_add(acc, _bf_add(_bf_mul(a0, b0, dn), _bf_mul(a1, b1, dn), dn), dn)

