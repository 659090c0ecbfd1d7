"""SME outer-product numerics against an independent exact-rational oracle.

The oracle below is written from the Arm ARM rules (docs/sources.md#sme-numerics)
with Python fractions and ``tests.oracle`` only; it shares no code with hwsim.targets.sme.
"""

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hwsim.targets.sme import kernels, numerics
from tests import oracle
from tests.oracle import RDN, RNE, ROD, RTZ, RUP
from tests.profiles import examples

BF16, FP16, FP32 = (8, 7), (5, 10), (8, 23)
MODES = (RNE, RUP, RDN, RTZ)  # FPCR.RMode 0..3


@dataclass(frozen=True)
class Fpcr:
    rmode: int = 0
    fz: bool = False
    fiz: bool = False
    ah: bool = False
    fz16: bool = False
    dn: bool = False   # ignored by every ZA-targeting instruction: tests set it at random

    @property
    def bits(self) -> int:
        return (self.dn << 25 | self.fz << 24 | self.rmode << 22 | self.fz16 << 19 | self.ah << 1
                | self.fiz)

    def ctl(self, sop_dn="pseudocode"):
        return numerics.controls(self.bits, True, sop_dn)


# -- the oracle ---------------------------------------------------------------------------------

def value(bits, fmt, flush):
    """(kind, sign, exact value) with kind nan/inf/zero/num; denormals become zero if flush."""
    e, m = fmt
    sign = bits >> (e + m) & 1
    v = oracle.fmt_value(bits, e, m)
    if v == "nan":
        return "nan", sign, None
    if isinstance(v, float):
        return "inf", sign, None
    if v == 0 or (flush and bits >> m & ((1 << e) - 1) == 0):
        return "zero", sign, Fraction(0)
    return "num", sign, abs(v)


def default_nan(sign, fmt):
    e, m = fmt
    return sign << (e + m) | ((1 << e) - 1) << m | 1 << (m - 1)


def inf(sign, fmt):
    return sign << sum(fmt) | ((1 << fmt[0]) - 1) << fmt[1]


def rounded(x, fmt, f: Fpcr):
    mode = MODES[f.rmode]
    if x == 0:
        return (mode == RDN) << sum(fmt)
    return oracle.round_to(x, *fmt, mode, "after" if f.fz and f.ah else f.fz)


def o_fma(c, a, b, fmt, f: Fpcr):
    flush = (f.fz and not f.ah) or f.fiz
    (kc, sc, vc), (ka, sa, va), (kb, sb, vb) = (value(x, fmt, flush) for x in (c, a, b))
    sp = sa ^ sb
    if "nan" in (kc, ka, kb) or {ka, kb} == {"inf", "zero"}:
        return default_nan(f.ah, fmt)
    if kc == "inf" and "inf" in (ka, kb) and sc != sp:
        return default_nan(f.ah, fmt)
    if kc == "inf":
        return inf(sc, fmt)
    if "inf" in (ka, kb):
        return inf(sp, fmt)
    if kc == "zero" and "zero" in (ka, kb) and sc == sp:
        return sc << sum(fmt)
    return rounded((-1) ** sc * vc + (-1) ** sp * va * vb, fmt, f)


def o_add32(x, y, f: Fpcr):
    flush = (f.fz and not f.ah) or f.fiz
    (kx, sx, vx), (ky, sy, vy) = value(x, FP32, flush), value(y, FP32, flush)
    if "nan" in (kx, ky) or (kx == ky == "inf" and sx != sy):
        return default_nan(f.ah, FP32)
    if "inf" in (kx, ky):
        return inf(sx if kx == "inf" else sy, FP32)
    if kx == ky == "zero" and sx == sy:
        return sx << 31
    return rounded((-1) ** sx * vx + (-1) ** sy * vy, FP32, f)


def o_dot(a0, a1, b0, b1, fmt, flush, f: Fpcr):
    terms = [(value(a, fmt, flush), value(b, fmt, flush)) for a, b in ((a0, b0), (a1, b1))]
    if any("nan" in (x[0], y[0]) for x, y in terms) or any(
            {x[0], y[0]} == {"inf", "zero"} for x, y in terms):
        return default_nan(f.ah, FP32)
    signs = [x[1] ^ y[1] for x, y in terms]
    infs = [("inf" in (x[0], y[0])) for x, y in terms]
    if all(infs) and signs[0] != signs[1]:
        return default_nan(f.ah, FP32)
    if any(infs):
        return inf(signs[infs.index(True)], FP32)
    zeros = [("zero" in (x[0], y[0])) for x, y in terms]
    if all(zeros) and signs[0] == signs[1]:
        return signs[0] << 31
    total = sum((-1) ** s * x[2] * y[2] for s, (x, y) in zip(signs, terms))
    return rounded(total, FP32, f)


def o_dot_add(acc, a0, a1, b0, b1, fmt, f: Fpcr):
    flush = f.fz16 if fmt == FP16 else (f.fz and not f.ah) or f.fiz
    return o_add32(acc, o_dot(a0, a1, b0, b1, fmt, flush, f), f)


def _round_odd(x):
    """BFRound: Round to Odd to FP32, tiny -> zero, |x| >= 2**128 -> infinity."""
    if abs(x) >= Fraction(2) ** 128:
        return inf(int(x < 0), FP32)
    return oracle.round_to(x, 8, 23, ROD, True)


def o_bf16_sop(acc, a0, a1, b0, b1, dn_sign):
    dn = default_nan(dn_sign, FP32)

    def mul(x, y):
        (kx, sx, vx), (ky, sy, vy) = value(x, BF16, True), value(y, BF16, True)
        if "nan" in (kx, ky) or {kx, ky} == {"inf", "zero"}:
            return dn
        if "inf" in (kx, ky):
            return inf(sx ^ sy, FP32)
        if "zero" in (kx, ky):
            return (sx ^ sy) << 31
        return _round_odd((-1) ** (sx ^ sy) * vx * vy)

    def add(x, y):
        (kx, sx, vx), (ky, sy, vy) = value(x, FP32, True), value(y, FP32, True)
        if "nan" in (kx, ky) or (kx == ky == "inf" and sx != sy):
            return dn
        if "inf" in (kx, ky):
            return inf(sx if kx == "inf" else sy, FP32)
        if kx == ky == "zero" and sx == sy:
            return sx << 31
        total = (-1) ** sx * vx + (-1) ** sy * vy
        return 0 if total == 0 else _round_odd(total)
    return add(acc, add(mul(a0, b0), mul(a1, b1)))


# -- strategies ---------------------------------------------------------------------------------

def specials(fmt):
    e, m = fmt
    top = (1 << e) - 1
    magnitudes = [0, 1, (1 << m) - 1, 1 << m, (top - 1) << m | ((1 << m) - 1), top << m,
                  top << m | 1, top << m | 1 << (m - 1), (top >> 1) << m, (top >> 1) << m | 1]
    return [s << (e + m) | x for s in (0, 1) for x in magnitudes]


def numbers(fmt, lo, hi):
    """Bit patterns: any, special, or with a biased exponent in [lo, hi] so that terms meet."""
    e, m = fmt
    clustered = st.builds(lambda s, x, f: s << (e + m) | x << m | f, st.integers(0, 1),
                          st.integers(lo, hi), st.integers(0, (1 << m) - 1))
    return st.one_of(st.integers(0, (1 << (1 + e + m)) - 1), st.sampled_from(specials(fmt)),
                     clustered, clustered)


fpcrs = st.builds(Fpcr, st.integers(0, 3), st.booleans(), st.booleans(), st.booleans(),
                  st.booleans(), st.booleans())


# -- element tests ------------------------------------------------------------------------------

@settings(max_examples=examples(2500), deadline=None)
@given(c=numbers(BF16, 118, 136), a=numbers(BF16, 120, 134), b=numbers(BF16, 120, 134), f=fpcrs)
def test_bf16_fma_single_rounding(c, a, b, f):
    assert numerics.fma(c, a, b, 8, 7, f.ctl()) == o_fma(c, a, b, BF16, f)


@settings(max_examples=examples(1000), deadline=None)
@given(c=numbers(BF16, 0, 6), a=numbers(BF16, 60, 68), b=numbers(BF16, 60, 68), f=fpcrs)
def test_bf16_fma_near_underflow(c, a, b, f):
    assert numerics.fma(c, a, b, 8, 7, f.ctl()) == o_fma(c, a, b, BF16, f)


@settings(max_examples=examples(2000), deadline=None)
@given(c=numbers(FP32, 110, 150), a=numbers(FP32, 115, 140), b=numbers(FP32, 115, 140), f=fpcrs)
def test_fp32_fma_single_rounding(c, a, b, f):
    assert numerics.fma(c, a, b, 8, 23, f.ctl()) == o_fma(c, a, b, FP32, f)


@settings(max_examples=examples(1500), deadline=None)
@given(acc=numbers(FP32, 100, 150), a=st.lists(numbers(FP16, 0, 31), min_size=4, max_size=4),
       f=fpcrs)
def test_fp16_widening_dot_add(acc, a, f):
    got = numerics.dot_add(acc, a[0], a[1], a[2], a[3], False, f.ctl())
    assert got == o_dot_add(acc, a[0], a[1], a[2], a[3], FP16, f)


@settings(max_examples=examples(1500), deadline=None)
@given(acc=numbers(FP32, 110, 150), a=st.lists(numbers(BF16, 115, 140), min_size=4, max_size=4),
       f=fpcrs)
def test_bf16_widening_dot_add_with_ebf(acc, a, f):
    got = numerics.dot_add(acc, a[0], a[1], a[2], a[3], True, f.ctl())
    assert got == o_dot_add(acc, a[0], a[1], a[2], a[3], BF16, f)


@settings(max_examples=examples(2000), deadline=None)
@given(acc=numbers(FP32, 110, 150), a=st.lists(numbers(BF16, 115, 140), min_size=4, max_size=4),
       f=fpcrs, reading=st.sampled_from(["pseudocode", "text"]))
def test_bf16_widening_standard_round_to_odd(acc, a, f, reading):
    got = numerics.bf16_dot_add(acc, a[0], a[1], a[2], a[3], f.ctl(reading))
    dn_sign = f.ah and reading == "pseudocode"
    assert got == o_bf16_sop(acc, a[0], a[1], a[2], a[3], dn_sign)


EDGES = [
    (0x9359, 0x2A20, 0x51A6, Fpcr(), 0x3C4F),   # fmaf-then-narrow would give 0x3C50
    (0x3F80, 0x3B80, 0x3F80, Fpcr(), 0x3F80),   # 1 + 2**-8: a tie, to even
    (0x3F81, 0x3B80, 0x3F80, Fpcr(), 0x3F82),   # tie, to even (up)
    (0x3F80, 0x3B80, 0x3F80, Fpcr(rmode=1), 0x3F81),
    (0x7F80, 0xFF80, 0x3F80, Fpcr(), 0x7FC0),   # inf - inf: default NaN
    (0x7F80, 0xFF80, 0x3F80, Fpcr(ah=True), 0xFFC0),
    (0x7FA1, 0x3F80, 0x3F80, Fpcr(), 0x7FC0),   # a NaN payload is not propagated, DN=0 or not
    (0x8000, 0x8000, 0x3F80, Fpcr(), 0x8000),   # -0 + (-0 * 1) = -0
    (0x0000, 0x8000, 0x3F80, Fpcr(), 0x0000),   # +0 + -0 = +0 ...
    (0x0000, 0x8000, 0x3F80, Fpcr(rmode=2), 0x8000),   # ... and -0 rounding toward -inf
    (0x7F7F, 0x7F7F, 0x4000, Fpcr(), 0x7F80),   # overflow: inf ...
    (0x7F7F, 0x7F7F, 0x4000, Fpcr(rmode=3), 0x7F7F),   # ... or the largest finite value
    (0x0001, 0x0000, 0x3F80, Fpcr(), 0x0001),   # a subnormal is kept ...
    (0x0001, 0x0000, 0x3F80, Fpcr(fz=True), 0x0000),   # ... unless FZ
    (0x0001, 0x0000, 0x3F80, Fpcr(fz=True, ah=True), 0x0000),   # (output flush with AH)
    (0x0001, 0x0000, 0x3F80, Fpcr(fiz=True), 0x0000),
]


@pytest.mark.parametrize("c,a,b,f,want", EDGES)
def test_bf16_fma_edges(c, a, b, f, want):
    assert numerics.fma(c, a, b, 8, 7, f.ctl()) == want == o_fma(c, a, b, BF16, f)


@settings(max_examples=examples(400), deadline=None)
@given(c=numbers(BF16, 118, 136), a=numbers(BF16, 120, 134), b=numbers(BF16, 120, 134),
       f=fpcrs)
def test_bf16_fma_ignores_dn_fz16_ebf_and_traps(c, a, b, f):
    base = numerics.fma(c, a, b, 8, 7, f.ctl())
    noisy = f.bits | 1 << 25 | 1 << 19 | 1 << 13 | 0x9F00
    assert numerics.fma(c, a, b, 8, 7, numerics.controls(noisy & ~(f.fz16 << 19) | f.fz16 << 19,
                                                           True, "pseudocode")) == base
    assert numerics.fma(c, a, b, 8, 7, numerics.controls(f.bits ^ 1 << 25 ^ 1 << 19, True,
                                                         "pseudocode")) == base


def test_standard_bf16_rounds_to_odd_and_flushes_where_rne_would_not():
    # 1 + 2**-24 exactly: RNE to FP32 would give 1.0; Round to Odd gives 1 + 2**-23
    acc, one = 0x3F800000, 0x3F80
    tiny = 0x3380   # 2**-24
    assert numerics.bf16_dot_add(acc, one, 0, tiny, 0, Fpcr().ctl()) == 0x3F800001
    # a denormal BF16 input is zero, whatever FPCR says
    assert numerics.bf16_dot_add(0, 0x0001, 0, one, 0, Fpcr().ctl()) == 0


def test_standard_bf16_default_nan_sign_follows_the_chosen_reading():
    inf_times_zero = (0, 0x7F80, 0, 0x0000, 0)
    assert numerics.bf16_dot_add(*inf_times_zero, Fpcr(ah=True).ctl("pseudocode")) == 0xFFC00000
    assert numerics.bf16_dot_add(*inf_times_zero, Fpcr(ah=True).ctl("text")) == 0x7FC00000


# -- kernels ------------------------------------------------------------------------------------

def _clustered(rng, n, fmt, lo, hi, dtype):
    e, m = fmt
    bits = (rng.integers(0, 2, n) << (e + m)) | (rng.integers(lo, hi, n) << m) | rng.integers(
        0, 1 << m, n)
    pick = rng.integers(0, 10, n)
    bits = np.where(pick == 0, rng.choice(specials(fmt), n), bits)
    bits = np.where(pick == 1, rng.integers(0, 1 << (1 + e + m), n), bits)
    return bits.astype(dtype)


@pytest.mark.parametrize("neg", [False, True])
@pytest.mark.parametrize("fmt,esize,dtype", [(BF16, 2, np.uint16), (FP32, 4, np.uint32)])
def test_mopa_fma_kernel_matches_oracle_and_twin(fmt, esize, dtype, neg):
    rng = np.random.default_rng(7 + neg)
    nbytes = 16   # SVL 128
    dim = nbytes // esize
    for f in (Fpcr(), Fpcr(rmode=1, fz=True), Fpcr(rmode=2, ah=True, fz=True), Fpcr(rmode=3)):
        tile = _clustered(rng, dim * dim, fmt, 120, 134, dtype).reshape(dim, dim)
        zn, zm = (_clustered(rng, dim, fmt, 122, 132, dtype) for _ in range(2))
        pn, pm = rng.integers(0, 2, (2, nbytes)).astype(bool)
        got, twin = tile.copy(), tile.copy()
        kernels.mopa_fma(got, 0, 1, zn, zm, pn, pm, esize, neg, *fmt, f.ctl())
        kernels.mopa_fma_twin(twin, 0, 1, zn, zm, pn, pm, esize, neg, *fmt, f.ctl())
        for i in range(dim):
            for j in range(dim):
                a = int(zn[i]) ^ (neg << sum(fmt))
                want = o_fma(int(tile[i, j]), a, int(zm[j]), fmt, f) \
                    if pn[i * esize] and pm[j * esize] else tile[i, j]
                assert got[i, j] == want, (i, j, f)
        assert np.array_equal(got, twin)


def test_mopa_fma_shortcut_agrees_with_the_exact_path_on_large_tiles():
    rng = np.random.default_rng(3)
    for fmt, esize, dtype in ((BF16, 2, np.uint16), (FP32, 4, np.uint32)):
        dim = 256 // esize
        for f in (Fpcr(), Fpcr(rmode=1), Fpcr(rmode=2, fz=True), Fpcr(rmode=3, ah=True)):
            tile = _clustered(rng, dim * dim, fmt, 100, 140, dtype).reshape(dim, dim)
            zn, zm = (_clustered(rng, dim, fmt, 110, 130, dtype) for _ in range(2))
            ones = np.ones(256, bool)
            got = tile.copy()
            kernels.mopa_fma(got, 0, 1, zn, zm, ones, ones, esize, False, *fmt, f.ctl())
            ctl = f.ctl()
            want = np.array([[numerics.fma(tile[i, j], zn[i], zm[j], *fmt, ctl)
                              for j in range(dim)] for i in range(dim)], dtype=dtype)
            assert np.array_equal(got, want)


@pytest.mark.parametrize("mode,fmt", [(0, FP16), (1, BF16), (2, BF16)])
def test_mopa_dot2_kernel_pairs_and_inactive_halves(mode, fmt):
    rng = np.random.default_rng(11 + mode)
    nbytes, dim = 16, 4
    f = Fpcr(rmode=int(rng.integers(0, 4)))
    for neg in (False, True):
        tile = _clustered(rng, dim * dim, FP32, 120, 134, np.uint32).reshape(dim, dim)
        lo, hi = (5, 25) if fmt == FP16 else (118, 134)
        zn, zm = (_clustered(rng, 2 * dim, fmt, lo, hi, np.uint16) for _ in range(2))
        pn, pm = rng.integers(0, 2, (2, nbytes)).astype(bool)
        got, twin = tile.copy(), tile.copy()
        kernels.mopa_dot2(got, 0, 1, zn, zm, pn, pm, neg, mode, f.ctl())
        kernels.mopa_dot2_twin(twin, 0, 1, zn, zm, pn, pm, neg, mode, f.ctl())
        assert np.array_equal(got, twin)
        for i in range(dim):
            for j in range(dim):
                r = [bool(pn[2 * (2 * i + k)]) for k in (0, 1)]
                c = [bool(pm[2 * (2 * j + k)]) for k in (0, 1)]
                if not ((r[0] and c[0]) or (r[1] and c[1])):
                    assert got[i, j] == tile[i, j]
                    continue
                a = [int(zn[2 * i + k]) ^ (neg << 15) if r[k] else 0 for k in (0, 1)]
                b = [int(zm[2 * j + k]) if c[k] else 0 for k in (0, 1)]
                want = o_bf16_sop(int(tile[i, j]), a[0], a[1], b[0], b[1], 0) if mode == 2 else \
                    o_dot_add(int(tile[i, j]), a[0], a[1], b[0], b[1], fmt, f)
                assert got[i, j] == want


def test_widening_inactive_column_half_reads_zero_so_infinity_times_it_is_nan():
    # row half 1 active, column half 1 inactive: b1 = +0 while a1 = +inf -> default NaN
    tile = np.zeros((4, 4), np.uint32)
    zn = np.zeros(8, np.uint16)
    zn[0], zn[1], zn[2] = 0x3F80, 0x7F80, 0x3F80
    zm = np.full(8, 0x3F80, np.uint16)
    pn = np.ones(16, bool)
    pm = np.zeros(16, bool)
    pm[0] = True   # column 0: first half active, second half inactive
    kernels.mopa_dot2(tile, 0, 1, zn, zm, pn, pm, False, 2, Fpcr().ctl())
    assert tile[0, 0] == 0x7FC00000 and tile[0, 1] == 0 and tile[1, 0] == 0x3F800000


@pytest.mark.parametrize("unsigned", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("neg", [False, True])
def test_int8_outer_product_exact_with_wraparound(unsigned, neg):
    rng = np.random.default_rng(5)
    nbytes, dim = 64, 16
    tile = rng.integers(0, 1 << 32, (dim, dim), dtype=np.uint64).astype(np.uint32)
    tile[0, 0] = 0x7FFFFFFF  # wraps with a positive product
    zn, zm = rng.integers(0, 256, (2, nbytes)).astype(np.uint8)
    zn[:4], zm[:4] = (255 if unsigned[0] else 127), (255 if unsigned[1] else 127)
    pn, pm = rng.integers(0, 2, (2, nbytes)).astype(bool)
    pn[:4] = pm[:4] = True
    got, twin = tile.copy(), tile.copy()
    kernels.mopa_int8(got, 0, 1, zn, zm, pn, pm, neg, *unsigned)
    kernels.mopa_int8_twin(twin, 0, 1, zn, zm, pn, pm, neg, *unsigned)
    signed = [lambda v: v - 256 if v > 127 else v, lambda v: v][0]
    for i in range(dim):
        for j in range(dim):
            total = 0
            for k in range(4):
                if pn[4 * i + k] and pm[4 * j + k]:
                    x = int(zn[4 * i + k]) if unsigned[0] else signed(int(zn[4 * i + k]))
                    y = int(zm[4 * j + k]) if unsigned[1] else signed(int(zm[4 * j + k]))
                    total += x * y
            assert got[i, j] == (int(tile[i, j]) + (-total if neg else total)) % (1 << 32)
    assert np.array_equal(got, twin)


@pytest.mark.parametrize("rmode", range(4))
def test_mopa_fma_zero_results_take_arm_signs(rmode):
    f = Fpcr(rmode=rmode)
    for fmt, esize, dtype in ((BF16, 2, np.uint16), (FP32, 4, np.uint32)):
        one = 0x3F80 if fmt == BF16 else 0x3F800000
        sign = 1 << sum(fmt)
        values = [0, sign, one, one | sign]
        dim = 16 // esize
        for c in values:
            for a in values:
                for b in values:
                    tile = np.full((dim, dim), c, dtype)
                    ones = np.ones(16, bool)
                    kernels.mopa_fma(tile, 0, 1, np.full(dim, a, dtype), np.full(dim, b, dtype),
                                     ones, ones, esize, False, *fmt, f.ctl())
                    assert np.all(tile == o_fma(c, a, b, fmt, f)), (c, a, b)


# -- kernels against the oracle, element by element ---------------------------------------------
# Tiles at SVL 128 drawn like the element tests' operands; every column active (the kernels' fast
# loops, whose flagged elements go the exact way) or drawn predicates (the checking path).

KERNEL_FORMATS = {BF16: (2, np.uint16, (118, 136)), FP32: (4, np.uint32, (110, 150))}


def _vector(data, fmt, size, lo, hi, dtype):
    return np.array(data.draw(st.lists(numbers(fmt, lo, hi), min_size=size, max_size=size)),
                    dtype)


def _predicate(data, whole):
    return np.ones(16, bool) if whole else np.array(
        data.draw(st.lists(st.booleans(), min_size=16, max_size=16)), bool)


@settings(max_examples=examples(60), deadline=None)
@given(fmt=st.sampled_from([BF16, FP32]), data=st.data(), f=fpcrs, whole=st.booleans(),
       neg=st.booleans())
def test_fma_kernel_against_the_oracle(fmt, data, f, whole, neg):
    esize, dtype, (lo, hi) = KERNEL_FORMATS[fmt]
    dim = 16 // esize
    tile = _vector(data, fmt, dim * dim, lo, hi, dtype).reshape(dim, dim)
    zn, zm = (_vector(data, fmt, dim, lo + 4, hi - 4, dtype) for _ in range(2))
    pn, pm = _predicate(data, True), _predicate(data, whole)
    got = tile.copy()
    kernels.mopa_fma(got, 0, 1, zn, zm, pn, pm, esize, neg, *fmt, f.ctl())
    for i in range(dim):
        for j in range(dim):
            a = int(zn[i]) ^ (neg << sum(fmt))
            want = o_fma(int(tile[i, j]), a, int(zm[j]), fmt, f) if pm[j * esize] else tile[i, j]
            assert got[i, j] == want, (i, j)


@settings(max_examples=examples(60), deadline=None)
@given(mode=st.sampled_from([0, 1, 2]), data=st.data(), f=fpcrs, whole=st.booleans(),
       neg=st.booleans())
def test_widening_kernel_against_the_oracle(mode, data, f, whole, neg):
    fmt, (lo, hi) = (FP16, (0, 31)) if mode == 0 else (BF16, (115, 140))
    tile = _vector(data, FP32, 16, 110, 150, np.uint32).reshape(4, 4)
    zn, zm = (_vector(data, fmt, 8, lo, hi, np.uint16) for _ in range(2))
    pn, pm = _predicate(data, True), _predicate(data, whole)
    got = tile.copy()
    kernels.mopa_dot2(got, 0, 1, zn, zm, pn, pm, neg, mode, f.ctl())
    for i in range(4):
        for j in range(4):
            c = [bool(pm[4 * j + 2 * k]) for k in (0, 1)]
            if not (c[0] or c[1]):
                assert got[i, j] == tile[i, j]
                continue
            a = [int(zn[2 * i + k]) ^ (neg << 15) for k in (0, 1)]
            b = [int(zm[2 * j + k]) if c[k] else 0 for k in (0, 1)]
            want = o_bf16_sop(int(tile[i, j]), a[0], a[1], b[0], b[1], f.ah) if mode == 2 else \
                o_dot_add(int(tile[i, j]), a[0], a[1], b[0], b[1], fmt, f)
            assert got[i, j] == want, (i, j)


@pytest.mark.parametrize("c,a,b,f,want", EDGES)
def test_fma_kernel_edges_through_its_fast_loop(c, a, b, f, want):
    tile = np.full((8, 8), c, np.uint16)
    ones = np.ones(16, bool)
    kernels.mopa_fma(tile, 0, 1, np.full(8, a, np.uint16), np.full(8, b, np.uint16), ones, ones,
                     2, False, *BF16, f.ctl())
    assert np.all(tile == want)
