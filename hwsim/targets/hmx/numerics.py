"""HMX FP16 numerics: products into the 37-bit accumulator, and the convert to FP16.

The manual (chapters 2 and 5) gives the data flow, the formats and Table 7; it does not give the
rounding points. These are the choices, each a parameter where a reading is open:

* **Accumulator**: a binary float of 37 bits, sign + ``acc_exp_bits`` (default 7) + the rest
  fraction (default 29), with subnormals, infinities and NaN (one quiet NaN). Seven exponent
  bits are the width the public Hexagon QEMU model gives its FP accumulator
  (``QDSP6_MX_FP_ACC_EXP = 7`` in quic/qemu ``target/hexagon``); they cover every FP16 product
  (2^-48 .. 2^34) and sums of 1024 of them with room to spare, and leave 29 fraction bits. The
  accumulator never holds -0: an exact zero sum is +0 (a two's-complement significand, as in
  that model, has no negative zero).
* **Multiply**: FP16 products are exact; the products of ``acc_round_group`` consecutive input
  channels (0: all the channels of the instruction) are added to the accumulator exactly and the
  sum is rounded once, to nearest even. Weight deep is two such sums, one per accumulator.
* **Convert** (Figure 11, Tables 4, 5, 9): ``t = ACC + b_i`` rounded once to the accumulator
  format; ``X = shape(t)`` exactly; ``C = s * X + b_o`` (with the feedback limit applied to
  ``s`` or ``b_o``) computed exactly and rounded once, to nearest even, to FP16 (``rnd = 0``)
  or to FP16 with 4 extra mantissa bits (``rnd = 1``), overflow and Inf/NaN per Table 7.
  The feedback limit is IEEE 754-2019 ``minimum``/``maximum`` (NaN wins, -0 < +0). The write
  to VTCM (2.4) stores the FP16 part, the upper 16 bits of the convert state: the 4 extra bits
  are "internal to the convert state and only used for feedback" (chapter 5).
* **USR[20] = 0** (Inf/NaN off, Table 7): FP16 data has no Inf or NaN, the all-ones exponent is
  an ordinary binade (maxpos = 0x7FFF, 131008), for inputs (activations, weights, bias fields,
  feedback) and outputs alike, as the QEMU model does.
* Subnormals are kept everywhere (no flush to zero).

How the exact values are computed (the results do not depend on it): a multiply's sums are
float64 dot products where those are provably exact (``exact64.py``), with the operands split
in two where one float64 sum is not enough, and integer limbs (30 bits each from 2^-48) for
what is left; a sum is added to the accumulator and rounded once with TwoSum. The convert's
usual cells are float64 too (``_convert_fast``); the rest, with Inf, NaN, subnormal or
top-binade values, are the exact integer cell (``convert_cell``).

Kernels are numba functions (``cache=True``). ``multiply_twin`` is a numpy twin of the multiply
(exact Python integers); ``convert_twin`` runs the convert's kernels as plain Python.
"""

from __future__ import annotations

import math

import numpy as np

from hwsim.targets.floats import FINITE, INF, NAN, RNE, ZERO, _msb, jit, round_pack, unpack
from hwsim.targets.hmx.exact64 import (EXACT_RATIO, block_sums, finite_value, fp16_floats,
                                      round_two_sum, row_sums, split, two_sum)

EXP = 5  # exponent bits of FP16 and of its extended forms
M_FP16 = 10  # fraction bits of FP16
M_CVT = 14  # FP16 with 4 extra mantissa bits: scale, output bias, convert state (Table 4)
M_IN_BIAS = 15  # FP16 with 5 extra mantissa bits: input bias (Table 4)
LIMB_BITS = 30
LIMBS = 6  # 180 bits from 2^-48: any accumulator of up to 8 exponent bits plus a product sum
UNIT_EXP = -48  # lsb of the exact product sum: the smallest FP16 product is 2^-24 * 2^-24
SHAPE_KINDS = {"identity": 0, "min0": 1, "max0": 2, "abs": 3}
# The formats as typed arguments, not literals, and bits as uint64 or int64: numba compiles a
# callee (``unpack``, ``round_pack``, ``decode``) once per distinct argument types, and each
# literal value is a type of its own.
E5, M10, M14, M15 = (np.int64(v) for v in (EXP, M_FP16, M_CVT, M_IN_BIAS))
NO_STICKY = np.bool_(False)


def shape_table(row3: str) -> np.ndarray:
    """Table 5 as codes (4 = negate, plus a kind): rows 3 and 7 read ``x`` and ``- x`` in the
    text (manual section 2.3.1); ``row3`` = "abs" reads them as |x| and -|x|,
    "identity" as printed."""
    kinds = ["identity", "min0", "max0", row3]
    return np.array([SHAPE_KINDS[k] for k in kinds] + [4 + SHAPE_KINDS[k] for k in kinds],
                    dtype=np.int64)


@jit
def decode(bits, ebits, mbits, infnan):
    """``floats.unpack``; with ``infnan`` false the all-ones exponent is an ordinary binade."""
    cls, sign, sig, exp = unpack(np.uint64(bits), ebits, mbits)
    if not infnan and (cls == INF or cls == NAN):
        bias = (1 << (ebits - 1)) - 1
        return FINITE, sign, sig | (np.int64(1) << mbits), np.int64((1 << ebits) - 1 - bias - mbits)
    return cls, sign, sig, exp


@jit
def quiet_nan(ebits, mbits):
    return np.uint64((((1 << ebits) - 1) << mbits) | (1 << (mbits - 1)))


@jit
def exact_add(sa, ma, ea, sb, mb, eb):
    """(-1)^sa*ma*2^ea + (-1)^sb*mb*2^eb for ``ma, mb < 2^53``: (sign, sig, exp, sticky), exact
    or with ``2^59 <= sig < 2^62`` and a sticky bit, as ``round_pack`` takes it. Zero sums are +0
    unless both terms are -0."""
    if ma == 0:
        if mb == 0:
            return sa & sb, np.int64(0), np.int64(0), False
        return sb, mb, eb, False
    if mb == 0:
        return sa, ma, ea, False
    if _msb(mb) + eb > _msb(ma) + ea:
        sa, ma, ea, sb, mb, eb = sb, mb, eb, sa, ma, ea
    shift = 60 - _msb(ma)  # a's top bit at 60: the sum stays below 2^62, as round_pack needs
    ma <<= shift
    ea -= shift
    d = ea - eb
    sticky = False
    if d <= 0:
        mb <<= -d  # b's top bit is not above a's: mb stays below 2^61
    elif d >= 61:
        sticky, mb = True, np.int64(0)
    else:
        sticky = (mb & ((np.int64(1) << d) - 1)) != 0
        mb >>= d
    if sa == sb:
        return sa, ma + mb, ea, sticky
    diff = ma - mb
    if diff == 0:
        return 0, np.int64(0), np.int64(0), False
    sign = sa
    if diff < 0:  # equal top bits, b larger: then d <= 0 and nothing was shifted out
        sign, diff = sb, -diff
    if sticky:  # the true value is diff minus a fraction of a unit
        diff -= 1
    return sign, diff, ea, sticky


# -- multiply ------------------------------------------------------------------------------------

@jit
def _decode_operand(bits, negate, infnan, sig, exp, special):
    """FP16 ``bits[k, j]`` -> signed significands and lsb exponents + 24 as ``[j, k]``;
    ``special[j]`` marks a column holding an Inf or NaN. (The FP16 case of ``decode``, inlined:
    it runs once per operand element.)"""
    n, cols = bits.shape
    for k in range(n):
        for j in range(cols):
            b = np.int64(bits[k, j])
            biased = (b >> 10) & 31
            m = b & 1023
            if biased == 31 and infnan:
                special[j] = True
                m = 0
            elif biased:
                m |= 1024
            sig[j, k] = -m if (b >> 15) ^ negate else m
            exp[j, k] = biased - 1 if biased else 0


@jit
def _special_sum(act, wgt, s, o, negate, infnan, cur_cls, cur_sign):
    """Class (INF or NAN) and sign of a cell whose products or accumulator hold Inf/NaN."""
    pos = cur_cls == INF and cur_sign == 0
    neg = cur_cls == INF and cur_sign == 1
    nan = cur_cls == NAN
    for k in range(act.shape[0]):
        ca, sa, _, _ = decode(np.int64(act[k, s]), E5, M10, infnan)
        cw, sw, _, _ = decode(np.int64(wgt[k, o]), E5, M10, infnan)
        if ca == NAN or cw == NAN or (ca == INF and cw == ZERO) or (ca == ZERO and cw == INF):
            nan = True
        elif ca == INF or cw == INF:
            if sa ^ sw ^ negate:
                neg = True
            else:
                pos = True
    if nan or (pos and neg):
        return NAN, 0
    return INF, 1 if neg else 0


@jit
def _round_limbs(limbs, ebits, mbits):
    """The exact value sum(limbs[i] * 2^(30 i - 48)) rounded once to the accumulator format."""
    for i in range(LIMBS - 1):
        carry = limbs[i] >> LIMB_BITS
        limbs[i] -= carry << LIMB_BITS
        limbs[i + 1] += carry
    sign = 0
    if limbs[LIMBS - 1] < 0:
        sign = 1
        for i in range(LIMBS):
            limbs[i] = -limbs[i]
        for i in range(LIMBS - 1):
            carry = limbs[i] >> LIMB_BITS
            limbs[i] -= carry << LIMB_BITS
            limbs[i + 1] += carry
    top = LIMBS - 1
    while top >= 0 and limbs[top] == 0:
        top -= 1
    if top < 0:
        return np.uint64(0)
    sig = limbs[top]
    nbits = _msb(sig) + 1
    exp = LIMB_BITS * top
    i = top - 1
    while i >= 0 and nbits + LIMB_BITS <= 62:
        sig = (sig << LIMB_BITS) | limbs[i]
        nbits += LIMB_BITS
        exp -= LIMB_BITS
        i -= 1
    sticky = False
    if i >= 0:
        take = 62 - nbits
        drop = LIMB_BITS - take
        sig = (sig << take) | (limbs[i] >> drop)
        exp -= take
        sticky = (limbs[i] & ((np.int64(1) << drop) - 1)) != 0
        for j in range(i):
            sticky = sticky or limbs[j] != 0
    return round_pack(sign, sig, exp + UNIT_EXP, sticky, ebits, mbits, RNE, False, False)[0]


@jit
def _dot(sa, ea, sw, ew, limbs):
    """Exact sum of the products into limbs 0 and 1 (lsb 2^-48 and 2^-18); each product is
    below 2^52 after its shift, so 1024 of them fit an int64 limb."""
    high = np.int64(0)
    low = np.int64(0)
    for k in range(sa.shape[0]):
        product = sa[k] * sw[k]
        e = ea[k] + ew[k]
        if e >= LIMB_BITS:
            high += product << (e - LIMB_BITS)
        else:
            low += product << e
    limbs[0] += low
    limbs[1] += high


@jit
def _add_to_limbs(limbs, bits, ebits, mbits):
    """Add the accumulator value ``bits`` (finite, a multiple of 2^-48) to the limbs."""
    cls, sign, sig, exp = unpack(bits, ebits, mbits)
    if cls != FINITE:
        return
    shift = exp - UNIT_EXP
    if shift < 0:  # a subnormal of a narrow exponent: its low bits are zeros
        if sig & ((np.int64(1) << -shift) - 1):
            raise ValueError("accumulator value not a multiple of 2^-48: not from a multiply")
        sig >>= -shift
        shift = 0
    q, r = shift // LIMB_BITS, shift % LIMB_BITS
    value = sig << r
    limbs[q] += -value if sign else value


@jit
def _add_sum(cur, total, ebits, mbits):
    """The accumulator ``cur`` (finite) plus the exact float64 ``total``, rounded once:
    ``_add_sum_fast`` where it applies, else ``_add_sum_exact``."""
    ok, bits = _add_sum_fast(cur, total, ebits, mbits)
    return bits if ok else _add_sum_exact(cur, total, ebits, mbits)


@jit
def _add_sum_fast(cur, total, ebits, mbits):
    """``(ok, bits)``: ``cur`` plus the exact ``total`` by ``two_sum`` and ``round_two_sum``,
    ``ok`` when ``cur`` is finite and the result zero (+0) or normal. Branch-free, so that
    ``add_rounded``'s loop vectorises."""
    finite, x = finite_value(cur, ebits, mbits)
    s, err = two_sum(x, total)
    rounded, bits, _ = round_two_sum(s, err, ebits, mbits, (np.int64(1) << ebits) - 2)
    zero = s == 0.0
    return finite & (zero | rounded), np.uint64(0) if zero else bits


@jit
def add_rounded(cur, totals, ok, ebits, mbits):
    """``_add_sum_fast`` over a row, where ``ok``: ``cur[o]`` plus ``totals[o]`` rounded once;
    ``ok[o]`` stays true only where that applied, and the other lanes keep their ``cur``."""
    for o in range(cur.shape[0]):
        fast, bits = _add_sum_fast(cur[o], totals[o], ebits, mbits)
        lane = ok[o] & fast
        cur[o] = bits if lane else cur[o]
        ok[o] = lane


@jit
def _add_sum_exact(cur, total, ebits, mbits):
    """``_add_sum`` for any finite ``cur`` and result: exact sum, one ``round_pack``."""
    cls, sign, sig, exp = unpack(cur, ebits, mbits)
    if total == 0.0:
        return np.uint64(0) if cls == ZERO else cur
    if cls == ZERO:
        sign, sig, exp = 0, np.int64(0), np.int64(0)
    frac, e = math.frexp(abs(total))
    sign, sig, exp, sticky = exact_add(sign, sig, exp, 1 if total < 0 else 0,
                                       np.int64(frac * 9007199254740992.0), e - 53)  # 2^53
    return round_pack(sign, sig, exp, sticky, ebits, mbits, RNE, False, False)[0]


def multiply_into(act, wgt, acc, out, negate, infnan, ebits, mbits, group):
    """``out[s, o] = acc[s, o] + sum_k act[k, s] * wgt[k, o]`` with the rounding described
    above (``out`` may be ``acc``).

    ``act``, ``wgt``: FP16 bits, input channel by spatial / by filter (uint16); ``acc``, ``out``:
    the accumulator's 37-bit cells (uint64, spatial by filter); ``negate``: use -W (Table 2);
    ``infnan``: USR[20]; ``group``: channels per rounding (0: all).

    The operands decoded to float64 (``operand_floats``), then two kernels: ``multiply_floats``
    does the usual cells and marks the others, ``multiply_rest`` does those (it is compiled
    only when first needed).
    """
    (n, rows), cols = act.shape, wgt.shape[1]
    chunks = -(-n // (n if group <= 0 else group))
    floats = []
    for bits, neg in ((act, 0), (wgt, negate)):
        values, ratio = np.empty(bits.shape), np.empty((bits.shape[1], chunks))
        special = np.zeros(bits.shape[1], dtype=np.bool_)
        operand_floats(bits, neg, infnan, group, values, ratio, special)
        floats += [values, ratio, special]
    pending = np.zeros((rows, cols), dtype=np.bool_)
    if multiply_floats(*floats, acc, out, ebits, mbits, group, pending):
        multiply_rest(act, wgt, *floats, acc, out, negate, infnan, ebits, mbits, group, pending)


@jit
def operand_floats(bits, negate, infnan, group, values, ratio, special):
    """An operand's float64 values, exactness ratios per chunk and Inf/NaN columns, as
    ``multiply_floats`` takes them (``exact64.fp16_floats``; act: ``negate`` 0)."""
    special.fill(False)   # not a slice assignment: those compile slowly
    fp16_floats(bits, negate, infnan, bits.shape[0] if group <= 0 else group, values, ratio,
                special)


@jit
def multiply_floats(values_a, ratio_a, special_a, values_w, ratio_w, special_w, acc, out, ebits,
                    mbits, group, pending):
    """The usual cells of ``multiply_into`` from the decoded operands (``operand_floats``):
    each chunk's sum a float64 dot product known exact, added to the accumulator with one
    rounding (``add_rounded``, a row at a time). A chunk's sum is exact when every product is a
    multiple of ``U`` = (the smallest lsb of the act row) * (of the weight column) and ``|a|
    |w| < 2^53 U`` (Cauchy-Schwarz bounds every partial sum), whatever the order. The other
    cells (operands too wide, Inf or NaN, results not normal) are left to ``multiply_rest``:
    marked in ``pending``, and counted in the result."""
    n, rows = values_a.shape
    cols = values_w.shape[1]
    step = n if group <= 0 else group
    chunks = -(-n // step)
    widest = _widest(ratio_w)
    sums = np.empty((4, chunks, cols))
    cur, ok = np.empty(cols, dtype=np.uint64), np.empty(cols, dtype=np.bool_)
    waiting = 0
    for s in range(rows):
        if s % 4 == 0:
            block_sums(values_a, values_w, s, step, sums)
        usual = not special_a[s] and _passes(ratio_a[s], widest)
        for o in range(cols):
            cur[o], ok[o] = acc[s, o], usual and not special_w[o]
        if usual:
            for c in range(chunks):
                add_rounded(cur, sums[s % 4, c], ok, ebits, mbits)
        for o in range(cols):
            pending[s, o] = not ok[o]
            if ok[o]:
                out[s, o] = cur[o]
            else:
                waiting += 1
    return waiting


@jit
def multiply_rest(act, wgt, values_a, ratio_a, special_a, values_w, ratio_w, special_w, acc, out,
                  negate, infnan, ebits, mbits, group, pending):
    """The ``pending`` cells of ``multiply_floats``, exactly: Inf/NaN by their class, rows too
    wide for one float64 sum split in two (and the weights too if that is not enough,
    ``_split_row``), the rest, and what the splits leave, in integer limbs."""
    n, rows = act.shape
    cols = wgt.shape[1]
    step = n if group <= 0 else group
    chunks = -(-n // step)
    widest = _widest(ratio_w)
    w_pieces, ratio_wp = np.empty((2, n, cols)), np.empty((2, cols, chunks))
    w_split = False
    sums = np.empty((chunks, cols))
    for s in range(rows):
        if not pending[s].any():
            continue
        if _passes(ratio_a[s], widest):
            row_sums(values_a[:, s].copy(), values_w, step, sums)
            _add_sums(act, wgt, acc, out, s, sums, special_a[s], special_w, negate, infnan,
                      ebits, mbits, pending[s])
            continue
        a_pieces, ratio_ap = np.empty((2, n)), np.empty((2, chunks))
        split(values_a[:, s], step, a_pieces[0], a_pieces[1], ratio_ap[0], ratio_ap[1])
        if _passes(ratio_ap[0], widest) and _passes(ratio_ap[1], widest):
            _split_row(act, wgt, acc, out, s, a_pieces, ratio_ap, values_w.reshape(1, n, cols),
                       ratio_w.reshape(1, cols, chunks), special_a[s], special_w, negate,
                       infnan, ebits, mbits, step, pending[s])
            continue
        if not w_split:
            for o in range(cols):
                split(values_w[:, o], step, w_pieces[0, :, o], w_pieces[1, :, o],
                      ratio_wp[0, o], ratio_wp[1, o])
            w_split = True
        _split_row(act, wgt, acc, out, s, a_pieces, ratio_ap, w_pieces, ratio_wp, special_a[s],
                   special_w, negate, infnan, ebits, mbits, step, pending[s])


@jit
def _widest(ratio_w):
    """Per chunk, the largest exactness ratio of the weight columns."""
    widest = np.zeros(ratio_w.shape[1])
    for o in range(ratio_w.shape[0]):
        for c in range(ratio_w.shape[1]):
            widest[c] = max(widest[c], ratio_w[o, c])
    return widest


@jit
def _passes(ratio_row, widest):
    """Every chunk's sum with every weight column is known exact."""
    for c in range(widest.shape[0]):
        if ratio_row[c] * widest[c] >= EXACT_RATIO:
            return False
    return True


@jit
def _add_sums(act, wgt, acc, out, s, sums, special_s, special_w, negate, infnan, ebits, mbits,
              cells):
    """The ``cells`` of row ``s`` of ``multiply_into`` from its exact float64 chunk sums."""
    for o in range(sums.shape[1]):
        if not cells[o]:
            continue
        cur = acc[s, o]
        if special_s or special_w[o] or _is_special(cur, ebits, mbits):
            out[s, o] = _special_cell(act, wgt, s, o, negate, infnan, cur, ebits, mbits)
            continue
        for c in range(sums.shape[0]):
            cur = _add_sum(cur, sums[c, o], ebits, mbits)
            if _is_special(cur, ebits, mbits):
                break  # an overflow to Inf stays Inf
        out[s, o] = cur


@jit
def _split_row(act, wgt, acc, out, s, a_pieces, ratio_ap, w_pieces, ratio_wp, special_s,
               special_w, negate, infnan, ebits, mbits, step, cells):
    """The ``cells`` of row ``s`` of ``multiply_into`` from the float64 sums of each act piece
    with each weight piece, where all are known exact, added in integer limbs; else
    ``_add_exact``."""
    n, cols = w_pieces.shape[1], w_pieces.shape[2]
    chunks = ratio_ap.shape[1]
    parts = np.empty((2, w_pieces.shape[0], chunks, cols))
    for i in range(2):
        for j in range(w_pieces.shape[0]):
            row_sums(a_pieces[i], w_pieces[j], step, parts[i, j])
    limbs = np.zeros(LIMBS, dtype=np.int64)
    for o in range(cols):
        if not cells[o]:
            continue
        cur = acc[s, o]
        if special_s or special_w[o] or _is_special(cur, ebits, mbits):
            out[s, o] = _special_cell(act, wgt, s, o, negate, infnan, cur, ebits, mbits)
            continue
        for c in range(chunks):
            exact = True
            for j in range(w_pieces.shape[0]):
                exact = exact and max(ratio_ap[0, c], ratio_ap[1, c]) * ratio_wp[j, o, c] < \
                    EXACT_RATIO
            if exact:
                limbs.fill(0)
                for i in range(2):
                    for j in range(w_pieces.shape[0]):
                        _add_float_to_limbs(limbs, parts[i, j, c, o])
                _add_to_limbs(limbs, cur, ebits, mbits)
                cur = _round_limbs(limbs, ebits, mbits)
            else:
                cur = _add_exact(cur, act, wgt, s, o, c * step, min(n, (c + 1) * step), negate,
                                 infnan, ebits, mbits)
            if _is_special(cur, ebits, mbits):
                break
        out[s, o] = cur


@jit
def _add_exact(cur, act, wgt, s, o, k0, k1, negate, infnan, ebits, mbits):
    """``cur`` plus the dot product of channels k0..k1-1 of act column ``s`` and weight column
    ``o`` (finite), exact in integer limbs and rounded once."""
    sa, ea = np.empty((1, k1 - k0), np.int64), np.empty((1, k1 - k0), np.int64)
    sw, ew = np.empty((1, k1 - k0), np.int64), np.empty((1, k1 - k0), np.int64)
    special = np.zeros(1, dtype=np.bool_)
    _decode_operand(act[k0:k1, s:s + 1], 0, infnan, sa, ea, special)
    _decode_operand(wgt[k0:k1, o:o + 1], negate, infnan, sw, ew, special)
    limbs = np.zeros(LIMBS, dtype=np.int64)
    _dot(sa[0], ea[0], sw[0], ew[0], limbs)
    _add_to_limbs(limbs, cur, ebits, mbits)
    return _round_limbs(limbs, ebits, mbits)


@jit
def _add_float_to_limbs(limbs, x):
    """Add the float64 ``x``, a multiple of 2^-48, to the limbs (30 bits each from 2^-48)."""
    if x == 0.0:
        return
    frac, e = math.frexp(abs(x))
    sig = np.int64(frac * 9007199254740992.0)  # x = sig * 2^(e - 53)
    shift = e - 53 - UNIT_EXP
    if shift < 0:
        sig >>= -shift  # only zeros: x is a multiple of 2^-48
        shift = 0
    q, r = shift // LIMB_BITS, shift % LIMB_BITS
    negative = x < 0.0
    low = (sig & ((np.int64(1) << (LIMB_BITS - r)) - 1)) << r
    limbs[q] += -low if negative else low
    sig >>= LIMB_BITS - r
    while sig:
        q += 1
        low = sig & ((np.int64(1) << LIMB_BITS) - 1)
        limbs[q] += -low if negative else low
        sig >>= LIMB_BITS


@jit
def _is_special(cur, ebits, mbits):
    """The accumulator bits hold Inf or NaN."""
    top = (np.int64(1) << ebits) - 1
    return (np.int64(cur >> np.uint64(mbits)) & top) == top


@jit
def _special_cell(act, wgt, s, o, negate, infnan, cur, ebits, mbits):
    """A cell whose products or accumulator hold Inf/NaN: its Inf or the quiet NaN."""
    cls, sign, _, _ = unpack(cur, ebits, mbits)
    kind, sign = _special_sum(act, wgt, s, o, negate, infnan, cls, sign)
    if kind == NAN:
        return quiet_nan(ebits, mbits)
    return (np.uint64(sign) << np.uint64(ebits + mbits)) | np.uint64(((1 << ebits) - 1) << mbits)


def multiply(act, wgt, acc, negate, infnan, ebits, mbits, group):
    """``multiply_into`` in place: ``acc[s, o] += sum_k act[k, s] * wgt[k, o]``."""
    multiply_into(act, wgt, acc, acc, negate, infnan, ebits, mbits, group)


def multiply_twin(act, wgt, acc, negate, infnan, ebits, mbits, group):
    """numpy twin of ``multiply`` (same signature): exact sums as Python integers in units of
    2^-48, rounded with ``round_pack``; Inf/NaN by numpy masks."""
    act_v = _fp16_values(act, infnan)
    wgt_v = _fp16_values(wgt, infnan) * (-1 if negate else 1)
    n = act.shape[0]
    step = n if group <= 0 else group
    for s in range(act.shape[1]):
        with np.errstate(invalid="ignore"):  # 0 * Inf is NaN, as it should be
            products = act_v[:, s, None] * wgt_v  # [k, o] exact integers in units of 2^-48
        for o in range(wgt.shape[1]):
            cur = int(acc[s, o])
            for k0 in range(0, n, step):
                cur = _twin_round(cur, products[k0:k0 + step, o], ebits, mbits)
            acc[s, o] = cur


def _fp16_values(bits, infnan):
    """FP16 bits -> object array of exact values as (integer in units of 2^-24) or float inf/nan."""
    out = np.empty(bits.shape, dtype=object)
    for index, b in np.ndenumerate(bits):
        cls, sign, sig, exp = (int(v) for v in decode.py_func(int(b), EXP, M_FP16, infnan))
        if cls == NAN:
            out[index] = float("nan")
        elif cls == INF:
            out[index] = -float("inf") if sign else float("inf")
        else:
            out[index] = (-1) ** sign * (sig << (exp + 24))
    return out


def _twin_round(cur: int, terms, ebits, mbits) -> int:
    cls, sign, sig, exp = (int(v) for v in unpack.py_func(cur, ebits, mbits))
    floats_ = [t for t in terms if isinstance(t, float)]
    if cls in (INF, NAN) or floats_:
        total = sum(floats_) + (float("nan") if cls == NAN else
                                (-1) ** sign * float("inf") if cls == INF else 0.0)
        if total != total:
            return int(quiet_nan.py_func(ebits, mbits))
        return (int(total < 0) << (ebits + mbits)) | (((1 << ebits) - 1) << mbits)
    exact = sum(int(t) for t in terms)  # units of 2^-48
    if cls == FINITE:
        shift = exp - UNIT_EXP  # narrow-exponent subnormals sit below 2^-48 with zero low bits
        exact += (-1) ** sign * (sig << shift if shift >= 0 else sig >> -shift)
    if exact == 0:
        return 0
    magnitude = abs(exact)
    drop = max(0, magnitude.bit_length() - 62)
    bits, _ = round_pack.py_func(int(exact < 0), magnitude >> drop, UNIT_EXP + drop,
                                 magnitude & ((1 << drop) - 1) != 0, ebits, mbits, RNE, False,
                                 False)
    return int(bits)


# -- convert -------------------------------------------------------------------------------------

@jit
def special_out(nan, sign, mbits, usr20, usr21, ovf):
    """Table 7: the (5, mbits) bits for an Inf (``nan`` false) or NaN result."""
    ones = (1 << mbits) - 1
    top = 1 << (EXP + mbits)
    if usr20 == 0:
        return (top if nan or sign else 0) | (31 << mbits) | ones
    if ovf == 0:
        return (top | (31 << mbits) | ones) if nan else ((top if sign else 0) | (31 << mbits))
    if nan:
        return top | ((31 if usr21 else 30) << mbits) | ones
    return (top if sign else 0) | (30 << mbits) | ones


@jit
def round_out(sign, sig, exp, sticky, mbits, usr20, ovf):
    """Round a finite value once to (5, mbits), overflow per Table 7. With USR[20] = 0 the
    all-ones exponent is one more binade: values from 2^15 up round as half their value (the
    same relative rounding) one binade higher, saturating at 0x7FFF."""
    if usr20 == 0 and sig != 0 and _msb(sig) + exp >= 15:  # 2^15 and up: the top two binades
        bits, _ = round_pack(sign, sig, exp - 1, sticky, E5, mbits, RNE, False, np.bool_(True))
        return np.int64(bits) + (np.int64(1) << mbits)
    bits, _ = round_pack(sign, sig, exp, sticky, E5, mbits, RNE, False, usr20 == 1 and ovf == 1)
    return np.int64(bits)


@jit
def _order_key(bits, mbits):
    """Total order of non-NaN (5, mbits) bits by value, -0 below +0."""
    magnitude = np.int64(bits) & ((np.int64(1) << (EXP + mbits)) - 1)
    return -magnitude - 1 if (np.int64(bits) >> (EXP + mbits)) & 1 else magnitude


@jit
def limit(bits, prev, fb_op, infnan):
    """min (fb_op 0) or max (1) of two FP16+4 values, IEEE 754-2019: a NaN wins."""
    if decode(bits, E5, M14, infnan)[0] == NAN:
        return bits
    if decode(prev, E5, M14, infnan)[0] == NAN:
        return prev
    prev_larger = _order_key(prev, M14) > _order_key(bits, M14)
    return prev if prev_larger == (fb_op == 1) else bits


@jit
def _shape(cls, sign, kind):
    """Table 5 on (class, sign): kinds 0 x, 1 min(x, 0), 2 max(x, 0), 3 |x|; +4 negates."""
    if cls == NAN:
        return cls, sign
    base = kind & 3
    if (base == 1 and sign == 0) or (base == 2 and sign == 1):
        cls, sign = ZERO, 0
    elif base == 3:
        sign = 0
    if kind >= 4:
        sign ^= 1
    return cls, sign


@jit
def convert_cell(acc_bits, in_bias, kind, scale, out_bias, ebits, mbits, rnd, ovf, usr20, usr21):
    """One cell of the convert: the (5, 14) bits of s * shape(ACC + b_i) + b_o."""
    m_out = M_CVT if rnd else M_FP16
    ca, sa, ma, ea = unpack(np.uint64(acc_bits), ebits, mbits)
    cb, sb, mb, eb = decode(np.int64(in_bias), E5, M15, usr20)
    if ca == NAN or cb == NAN or (ca == INF and cb == INF and sa != sb):
        ct, st, mt, et = NAN, 0, np.int64(0), np.int64(0)
    elif ca == INF or cb == INF:
        ct, st, mt, et = INF, sa if ca == INF else sb, np.int64(0), np.int64(0)
    elif ca == FINITE and cb == ZERO:  # x + 0 is x, already in the accumulator format
        ct, st, mt, et = ca, sa, ma, ea
    else:
        sign, sig, exp, sticky = exact_add(sa, ma, ea, sb, mb, eb)
        t = round_pack(sign, sig, exp, sticky, ebits, mbits, RNE, False, False)[0]
        ct, st, mt, et = unpack(t, ebits, mbits)
    ct, st = _shape(ct, st, kind)
    cs, ss, ms, es = decode(np.int64(scale), E5, M14, usr20)
    co, so, mo, eo = decode(np.int64(out_bias), E5, M14, usr20)
    cp, sp = NAN, ss ^ st
    if cs != NAN and ct != NAN:
        if cs == INF or ct == INF:
            cp = NAN if cs == ZERO or ct == ZERO else INF
        else:
            cp = ZERO if cs == ZERO or ct == ZERO else FINITE
    if cp == NAN or co == NAN or (cp == INF and co == INF and sp != so):
        y = special_out(np.bool_(True), np.int64(0), m_out, usr20, usr21, ovf)
    elif cp == INF or co == INF:
        y = special_out(np.bool_(False), sp if cp == INF else so, m_out, usr20, usr21, ovf)
    else:
        mp = ms * mt if cp == FINITE else np.int64(0)
        sign, sig, exp, sticky = exact_add(sp, mp, es + et, so, mo, eo)
        if sig == 0:
            y = np.int64(sign) << (EXP + m_out)
        else:
            y = round_out(sign, sig, exp, sticky, m_out, usr20, ovf)
    return y if rnd else y << 4


@jit
def _convert_fast(x, b, kind, sc, ob, ebits, mbits, m_out, usr20):
    """``convert_cell`` (before the shift for ``rnd = 0``) in float64 for the usual cells, from
    the accumulator ``x``, the input bias ``b``, the scale ``sc`` and the output bias ``ob``
    (finite values): ``(ok, bits)``, ``ok`` false unless ``t`` is zero or normal and the result
    zero or normal below the top binade. ``t`` and the result are each one ``two_sum`` rounded
    once (``round_two_sum``); ``s * X`` is exact (15 x 30 bits); IEEE signed zeros give Table
    5's and the sums' zero signs."""
    t = x + b  # exact when b is zero, with IEEE's sign of x + b for a zero x
    if b != 0.0:
        s, err = two_sum(x, b)
        t = 0.0
        if s != 0.0:
            ok, _, t = round_two_sum(s, err, ebits, mbits, (1 << ebits) - 2)
            if not ok:
                return False, np.int64(0)
    base = kind & 3
    negative = math.copysign(1.0, t) < 0.0
    if (base == 1 and not negative) or (base == 2 and negative):
        t = 0.0
    elif base == 3:
        t = abs(t)
    if kind >= 4:
        t = -t
    s, err = two_sum(sc * t, ob)
    if s == 0.0:
        return True, np.int64(1 << (EXP + m_out)) if math.copysign(1.0, s) < 0.0 else \
            np.int64(0)
    ok, y, _ = round_two_sum(s, err, np.int64(EXP), m_out, np.int64(30 if usr20 else 29))
    return ok, np.int64(y)


def convert(acc, in_bias, shape, scale, out_bias, prev, out, shapes, fb_dest, fb_op, rnd, ovf,
            usr20, usr21, ebits, mbits):
    """The convert transfer (section 2.3, chapter 5) of one accumulator into ``out``.

    ``acc``: accumulator cells (uint64, spatial by filter); ``in_bias``, ``shape``, ``scale``,
    ``out_bias``: the bias register fields of the 32 filters (raw bits, Table 4); ``prev``: the
    convert state before (feedback C'); ``out``: the new convert state, (5, 14) bits (uint32);
    ``shapes``: ``shape_table``; the rest are the convert Rs fields and USR[20], USR[21].

    Two kernels: ``convert_usual`` does the cells with finite values in float64 and marks the
    others, ``convert_rest`` does those by the exact cell (it is compiled only when first
    needed). ``convert_twin`` is the same in plain Python.
    """
    _convert_with(convert_usual, convert_rest, acc, in_bias, shape, scale, out_bias, prev, out,
                  shapes, fb_dest, fb_op, rnd, ovf, usr20, usr21, ebits, mbits)


def convert_twin(acc, in_bias, shape, scale, out_bias, prev, out, shapes, fb_dest, fb_op, rnd,
                 ovf, usr20, usr21, ebits, mbits):
    """``convert`` by the plain Python functions of its kernels (same signature)."""
    _convert_with(convert_usual.py_func, convert_rest.py_func, acc, in_bias, shape, scale,
                  out_bias, prev, out, shapes, fb_dest, fb_op, rnd, ovf, usr20, usr21, ebits,
                  mbits)


def _convert_with(usual, rest, acc, in_bias, shape, scale, out_bias, prev, out, shapes, fb_dest,
                  fb_op, rnd, ovf, usr20, usr21, ebits, mbits):
    pending = np.empty(acc.shape, dtype=np.bool_)
    if usual(acc, in_bias, shape, scale, out_bias, prev, out, shapes, fb_dest, fb_op, rnd,
             usr20, ebits, mbits, pending):
        rest(acc, in_bias, shape, scale, out_bias, prev, out, shapes, fb_dest, fb_op, rnd, ovf,
             usr20, usr21, ebits, mbits, pending)


@jit
def _fed_back(field, prev, fb_op, usr20):
    """The scale or output bias field under feedback: ``limit`` of it and the state before."""
    return limit(np.int64(field), np.int64(prev), fb_op, usr20)


@jit
def convert_usual(acc, in_bias, shape, scale, out_bias, prev, out, shapes, fb_dest, fb_op, rnd,
                  usr20, ebits, mbits, pending):
    """The cells of ``convert`` with finite values, by ``_convert_fast``: the filters' fields
    decoded to float64 once (and the one under feedback per cell). The cells it declines are
    marked in ``pending`` (and counted in the result)."""
    e5, m_cvt = E5, M14
    m_out = np.int64(M_CVT if rnd else M_FP16)
    cols = acc.shape[1]
    values, ok = np.empty((3, cols)), np.zeros((3, cols), dtype=np.bool_)
    for o in range(cols):
        ok[0, o], values[0, o] = finite_value(np.int64(in_bias[o]), e5, M15)
        ok[1, o], values[1, o] = finite_value(np.int64(scale[o]), e5, m_cvt)
        ok[2, o], values[2, o] = finite_value(np.int64(out_bias[o]), e5, m_cvt)
    waiting = 0
    for s in range(acc.shape[0]):
        for o in range(cols):
            ok_s, sc_value, ok_o, ob_value = ok[1, o], values[1, o], ok[2, o], values[2, o]
            if fb_dest == 1:
                ok_o, ob_value = finite_value(_fed_back(out_bias[o], prev[s, o], fb_op, usr20),
                                              e5, m_cvt)
            elif fb_dest == 2:
                ok_s, sc_value = finite_value(_fed_back(scale[o], prev[s, o], fb_op, usr20), e5,
                                              m_cvt)
            done, x = finite_value(np.int64(acc[s, o]), ebits, mbits)
            y = np.int64(0)
            if done and ok[0, o] and ok_s and ok_o:
                done, y = _convert_fast(x, values[0, o], shapes[shape[o]], sc_value, ob_value,
                                        ebits, mbits, m_out, usr20)
            else:
                done = False
            pending[s, o] = not done
            if done:
                out[s, o] = y if rnd else y << 4
            else:
                waiting += 1
    return waiting


@jit
def convert_rest(acc, in_bias, shape, scale, out_bias, prev, out, shapes, fb_dest, fb_op, rnd,
                 ovf, usr20, usr21, ebits, mbits, pending):
    """The ``pending`` cells of ``convert_usual``, by the exact cell (``convert_cell``)."""
    for s in range(acc.shape[0]):
        for o in range(acc.shape[1]):
            if not pending[s, o]:
                continue
            sc, ob = np.int64(scale[o]), np.int64(out_bias[o])
            if fb_dest == 1:
                ob = _fed_back(ob, prev[s, o], fb_op, usr20)
            elif fb_dest == 2:
                sc = _fed_back(sc, prev[s, o], fb_op, usr20)
            out[s, o] = convert_cell(acc[s, o], in_bias[o], shapes[shape[o]], sc, ob, ebits,
                                     mbits, rnd, ovf, usr20, usr21)
