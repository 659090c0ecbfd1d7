"""HMX numerics bit-exact against the exact-rational oracle, and the kernels against their twins."""

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from hwsim.isa.hmx import BIAS_REG, CVT_RS
from hwsim.targets.hmx import exact64 as X
from hwsim.targets.hmx import numerics as N
from tests import hmx_oracle as O
from tests.profiles import examples

SPECIAL_FP16 = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
                0x7C00, 0xFC00, 0x7E00, 0xFFFF, 0x7C01, 0x5BFF, 0x4000]
fp16 = st.one_of(st.sampled_from(SPECIAL_FP16), st.integers(0, 0xFFFF),
                 st.integers(0x3000, 0x4C00), st.integers(0xB000, 0xCC00))
ACC_FORMATS = [(6, 30), (7, 29), (8, 28)]


def fp16_matrix(n, cols):
    return st.lists(st.lists(fp16, min_size=cols, max_size=cols), min_size=n, max_size=n).map(
        lambda rows: np.array(rows, dtype=np.uint16))


@st.composite
def multiply_case(draw):
    n = draw(st.integers(1, 40))
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return dict(act=draw(fp16_matrix(n, rows)), wgt=draw(fp16_matrix(n, cols)),
                negate=draw(st.integers(0, 1)), infnan=draw(st.integers(0, 1)),
                fmt=draw(st.sampled_from(ACC_FORMATS)), group=draw(st.sampled_from([0, 1, 3, 8])))


def run_multiply(kernel, case, acc):
    acc = np.array(acc, dtype=np.uint64)
    ebits, mbits = case["fmt"]
    kernel(case["act"], case["wgt"], acc, case["negate"], case["infnan"], ebits, mbits,
           case["group"])
    return acc


@settings(max_examples=examples(300), deadline=None)
@given(case=multiply_case(), second=multiply_case())
def test_multiply_matches_oracle(case, second):
    # two multiplies in a row, so that the second adds to any accumulator the first can leave
    ebits, mbits = case["fmt"]
    zero = np.zeros((case["act"].shape[1], case["wgt"].shape[1]), dtype=np.uint64)
    acc = run_multiply(N.multiply, case, zero)
    want = O.multiply(case["act"], case["wgt"], zero, case["negate"], case["infnan"], ebits, mbits,
                      case["group"])
    assert acc.tolist() == want
    rows, cols = acc.shape
    second = dict(second, fmt=case["fmt"], act=second["act"][:, :1].repeat(rows, 1),
                  wgt=second["wgt"][:, :1].repeat(cols, 1))
    again = run_multiply(N.multiply, second, acc)
    want = O.multiply(second["act"], second["wgt"], acc, second["negate"], second["infnan"],
                      ebits, mbits, second["group"])
    assert again.tolist() == want


@settings(max_examples=examples(100), deadline=None)
@given(case=multiply_case())
def test_multiply_kernel_matches_numpy_twin(case):
    zero = np.zeros((case["act"].shape[1], case["wgt"].shape[1]), dtype=np.uint64)
    assert (run_multiply(N.multiply, case, zero) == run_multiply(N.multiply_twin, case, zero)).all()


def test_multiply_overflow_cancellation_and_subnormals():
    big = np.full((4, 1), 0x7BFF, dtype=np.uint16)  # 65504 squared: 2^32, four times
    case = dict(act=big, wgt=big, negate=0, infnan=1, fmt=(6, 30), group=0)
    acc = run_multiply(N.multiply, case, [[0]])
    assert int(acc[0, 0]) == O.inf_bits(False, 6, 30)  # beyond 6 exponent bits: +Inf
    acc7 = run_multiply(N.multiply, dict(case, fmt=(7, 29)), [[0]])
    assert O.value(int(acc7[0, 0]), 7, 29)[0] == 4 * 65504 ** 2
    # x*y - x*y is an exact +0; the smallest subnormal product 2^-48 is exact
    pair = np.array([[0x3555], [0x3555]], dtype=np.uint16)
    signs = np.array([[0x3555], [0xB555]], dtype=np.uint16)
    assert run_multiply(N.multiply, dict(case, act=pair, wgt=signs, fmt=(7, 29)), [[0]])[0, 0] == 0
    tiny = np.array([[0x0001]], dtype=np.uint16)
    acc = run_multiply(N.multiply, dict(case, act=tiny, wgt=tiny, fmt=(7, 29)), [[0]])
    assert O.value(int(acc[0, 0]), 7, 29)[0] == O.Fraction(1, 1 << 48)


def test_multiply_rounds_once_per_group():
    # 1 + 2^-30 + 2^-30 with 29 fraction bits: rounded per channel each 2^-30 is a tie lost to
    # even; summed first and rounded once, the two make one ulp
    ops = np.array([[0x3C00], [0x0200], [0x0200]], dtype=np.uint16)  # 1, 2^-15, 2^-15
    case = dict(act=ops, wgt=ops, negate=0, infnan=1, fmt=(7, 29), group=0)
    whole = O.value(int(run_multiply(N.multiply, case, [[0]])[0, 0]), 7, 29)[0]
    single = O.value(int(run_multiply(N.multiply, dict(case, group=1), [[0]])[0, 0]), 7, 29)[0]
    assert whole == 1 + O.Fraction(1, 1 << 29) and single == 1


# -- the float64 sums of the multiply: each path against the twin ---------------------------------

def levels(act, wgt, step):
    """The paths ``multiply_into`` takes for the cells of ``act`` x ``wgt`` (without Inf/NaN):
    0 one float64 sum, 1 the act row split, 2 both split, 3 integer limbs."""
    n = act.shape[0]
    chunks = -(-n // step)
    va, vw = np.empty(act.shape), np.empty(wgt.shape)
    ra, rw = np.empty((act.shape[1], chunks)), np.empty((wgt.shape[1], chunks))
    X.fp16_floats(act, 0, 1, step, va, ra, np.zeros(act.shape[1], bool))
    X.fp16_floats(wgt, 0, 1, step, vw, rw, np.zeros(wgt.shape[1], bool))

    def pieces(x):
        hi, lo, r_hi, r_lo = np.empty(n), np.empty(n), np.empty(chunks), np.empty(chunks)
        X.split(np.ascontiguousarray(x), step, hi, lo, r_hi, r_lo)
        assert (hi + lo == x).all()
        return np.maximum(r_hi, r_lo)
    exact = X.EXACT_RATIO
    widest, w_split = rw.max(0), np.array([pieces(vw[:, o]) for o in range(wgt.shape[1])])
    found = set()
    for s in range(act.shape[1]):
        if (ra[s] * widest < exact).all():
            found.add(0)
        elif (pieces(va[:, s]) * widest < exact).all():
            found.add(1)
        else:
            both = pieces(va[:, s])[None, :] * w_split
            found |= {2 if ok else 3 for ok in (both < exact).all(1)}
    return found


def fp16_spread(rng, shape, low, high):
    """Random FP16 bits of either sign with magnitudes 2^low .. 2^high, log-uniform."""
    values = np.exp2(rng.uniform(low, high, shape)) * rng.choice([-1, 1], shape)
    return values.astype(np.float16).view(np.uint16)


def fp16_extremes(rng, shape):
    """Magnitudes 2^-2 .. 2^-1 with one 2^15 and one 2^-24 per column: the low pieces of a
    split still span 2^-1 .. 2^-24 over many values."""
    bits = fp16_spread(rng, shape, -2, -1.01)
    bits[0], bits[-1] = 0x7800, 0x0001
    return bits


SPREADS = {"narrow": (-4, 1, -7, -3), "wide act": (-24, 1, -24, 1), "wide": (-24, 8, -16, 8)}


@pytest.mark.parametrize("operands, group, expect", [
    ("narrow", 0, {0}),         # every sum one float64 dot product
    ("wide act", 0, {1}),       # the act rows need splitting
    ("wide act", 64, {0, 1}),   # rounded per 64 channels: some chunks need no split
    ("wide", 0, {2}),           # both operands split
    ("extremes", 0, {3}),       # the splits' pieces still too wide: integer limbs
    ("extremes, some wide", 0, {2, 3}),
])
def test_multiply_float64_paths_match_twin(operands, group, expect):
    rng = np.random.default_rng(1)
    shapes = (1024, 7), (1024, 5)  # 7 spatials: the last block of 4 is short
    if operands in SPREADS:
        spread = SPREADS[operands]
        act, wgt = fp16_spread(rng, shapes[0], *spread[:2]), fp16_spread(rng, shapes[1],
                                                                          *spread[2:])
    else:
        act, wgt = fp16_extremes(rng, shapes[0]), fp16_extremes(rng, shapes[1])
        if operands != "extremes":
            act[:, :3] = fp16_spread(rng, (1024, 3), -4, 1)
    assert levels(act, wgt, group or 1024) == expect
    start = rng.standard_normal((7, 5)).astype(np.float16).view(np.uint16)
    for fmt in ACC_FORMATS:
        acc = np.zeros((7, 5), dtype=np.uint64)
        N.multiply(start[:5], start[:5].T.copy(), acc, 0, 1, *fmt, 0)  # a nonzero start
        case = dict(act=act, wgt=wgt, negate=1, infnan=1, fmt=fmt, group=group)
        assert (run_multiply(N.multiply, case, acc) ==
                run_multiply(N.multiply_twin, case, acc)).all()


def test_multiply_out_leaves_the_accumulator():
    rng = np.random.default_rng(3)
    act, wgt = fp16_spread(rng, (64, 32), -8, 2), fp16_spread(rng, (64, 32), -8, 2)
    acc = np.zeros((32, 32), dtype=np.uint64)
    N.multiply(act, wgt, acc, 0, 1, 7, 29, 0)
    before, out = acc.copy(), np.zeros_like(acc)
    N.multiply_into(act, wgt, acc, out, 0, 1, 7, 29, 0)
    assert (acc == before).all()
    N.multiply(act, wgt, acc, 0, 1, 7, 29, 0)
    assert (out == acc).all()


@st.composite
def near_midpoints(draw):
    """An accumulator value and a float64 total whose exact sum sits on, or one 2^-48 from, a
    midpoint between two accumulator values: the rounding's hardest cases."""
    ebits, mbits = draw(st.sampled_from(ACC_FORMATS))
    exp = draw(st.integers(-8, 12))
    sig = draw(st.integers(1 << mbits, (2 << mbits) - 1))
    acc = O.Fraction(sig) * O.Fraction(2) ** (exp - mbits) * draw(st.sampled_from([1, -1]))
    ulp = O.Fraction(2) ** (exp - mbits)
    total = (draw(st.integers(-40, 40)) + O.Fraction(1, 2)) * ulp + \
        draw(st.sampled_from([-1, 0, 1])) * O.Fraction(1, 1 << 48)
    return O.oracle.encode(abs(acc), acc < 0, ebits, mbits), total, ebits, mbits


@settings(max_examples=examples(500), deadline=None)
@given(case=near_midpoints(), plain=st.tuples(st.integers(0, (1 << 53) - 1),
                                               st.integers(-48, 20)))
def test_accumulator_plus_an_exact_sum_rounds_once(case, plain):
    bits, total, ebits, mbits = case
    for total in (total, O.Fraction(plain[0]) * O.Fraction(2) ** plain[1]):
        assert float(total) == total  # the kernel's totals are exact float64 values
        want = O.acc_round(O.add(O.value(bits, ebits, mbits), (total, total < 0)), ebits, mbits)
        assert N._add_sum(np.uint64(bits), float(total), ebits, mbits) == want
        # the branch-free row version, in every lane of a row, agrees where it applies
        fast, _ = N._add_sum_fast(np.uint64(bits), float(total), ebits, mbits)
        cur, ok = np.full(5, bits, dtype=np.uint64), np.array([True] * 4 + [False])
        N.add_rounded(cur, np.full(5, float(total)), ok, np.int64(ebits), np.int64(mbits))
        assert ok.tolist() == [fast] * 4 + [False] and cur[4] == bits
        assert not fast or cur[:4].tolist() == [want] * 4


bias_field = st.one_of(st.integers(0, (1 << 20) - 1),
                       st.sampled_from([0, 0x3C000, 0xBC000, 0x7BFF0, 0x7C000, 0xFC000, 0x7E000,
                                        0x00001, 0x7FFFF, 0x80000]))


@st.composite
def convert_case(draw):
    ebits, mbits = draw(st.sampled_from(ACC_FORMATS))
    acc_bits = draw(st.one_of(st.integers(0, (1 << 37) - 1), st.sampled_from(
        [0, 1 << 36, ((1 << ebits) - 1) << mbits, (((1 << ebits) - 1) << mbits) | 1,
         (1 << 36) | (((1 << ebits) - 1) << mbits)])))
    bias = dict(input_bias=draw(st.one_of(st.integers(0, (1 << 21) - 1),
                                          bias_field.map(lambda v: v << 1))),
                shape=draw(st.integers(0, 7)), scale=draw(bias_field),
                output_bias=draw(bias_field))
    rs = dict(rnd=draw(st.integers(0, 1)), ovf=draw(st.integers(0, 1)),
              fb_op=draw(st.integers(0, 1)), fb_dest=draw(st.integers(0, 2)))
    return dict(acc=acc_bits, bias=bias, prev=draw(bias_field), rs=rs, fmt=(ebits, mbits),
                usr20=draw(st.integers(0, 1)), usr21=draw(st.integers(0, 1)),
                row3=draw(st.sampled_from(["abs", "identity"])))


def run_convert(kernel, case):
    ebits, mbits = case["fmt"]
    b, rs = case["bias"], case["rs"]
    out = np.zeros((1, 1), dtype=np.uint32)
    kernel(np.array([[case["acc"]]], dtype=np.uint64), *(np.array([b[f]], dtype=np.int64) for f in
           ("input_bias", "shape", "scale", "output_bias")),
           np.array([[case["prev"]]], dtype=np.uint32), out, N.shape_table(case["row3"]),
           rs["fb_dest"], rs["fb_op"], rs["rnd"], rs["ovf"], case["usr20"], case["usr21"],
           ebits, mbits)
    return int(out[0, 0])


def oracle_convert(case):
    ebits, mbits = case["fmt"]
    return O.convert_cell(case["acc"], case["bias"], case["prev"], case["rs"], case["usr20"],
                          case["usr21"], ebits, mbits, case["row3"])


@settings(max_examples=examples(1500), deadline=None)
@given(case=convert_case())
@example(case=dict(acc=1 << 36, bias=dict(input_bias=0, shape=0, scale=0, output_bias=0x80000),
                   prev=0, rs=dict(rnd=0, ovf=0, fb_op=0, fb_dest=0), fmt=(6, 30), usr20=0,
                   usr21=0, row3="abs"))  # -0 + +0 is +0
def test_convert_matches_oracle(case):
    assert run_convert(N.convert, case) == oracle_convert(case)


@settings(max_examples=examples(200), deadline=None)
@given(case=convert_case())
def test_convert_kernel_matches_plain_twin(case):
    assert run_convert(N.convert, case) == run_convert(N.convert_twin, case)


def test_convert_float64_path_matches_the_exact_cell():
    # usual operands (normal accumulators and fields, every shape, both rnd) and constructed
    # ties: the float64 path, where it applies, is bit-exact against the integer one
    rng = np.random.default_rng(4)
    shapes = N.shape_table("abs")

    def field(mbits, n, low=1, high=30):
        return (rng.integers(0, 2, n) << (5 + mbits) | rng.integers(low, high, n) << mbits |
                rng.integers(0, 1 << mbits, n))
    n, taken = 20000, 0
    for ebits, mbits in ACC_FORMATS:
        bias = (1 << (ebits - 1)) - 1
        accs = (rng.integers(0, 2, n) << (ebits + mbits) | rng.integers(bias - 30, bias + 9, n)
                << mbits | rng.integers(0, 1 << mbits, n))
        cases = zip(accs, field(15, n), rng.integers(0, 8, n), field(14, n, 10, 20), field(14, n),
                    rng.integers(0, 2, n), rng.integers(0, 2, n))
        # ties: t + b_o on an FP16 midpoint, decided by a product far below (2^-14 * 2^-46)
        tiny = O.oracle.encode(O.Fraction(1, 1 << 46), False, ebits, mbits)
        ties = [(tiny, 0, 0, 0x0400 << 4, (0x3C00 << 4) | 8 | up, 0, 1) for up in (0, 8)]
        ties += [(O.oracle.encode(O.Fraction(2049, 2048), False, ebits, mbits), 0, 0,
                  0x3C00 << 4, 0, 0, 1)]
        for acc, b_i, shape, scale, b_o, rnd, usr20 in list(cases) + ties:
            m_out = N.M_CVT if rnd else N.M_FP16
            values = [X.finite_value(v, *fmt) for v, fmt in ((acc, (ebits, mbits)),
                                                             (b_i, (5, 15)), (scale, (5, 14)),
                                                             (b_o, (5, 14)))]
            assert all(ok for ok, _ in values)  # finite: the float64 path's operands
            ok, y = N._convert_fast(*[v for _, v in values[:2]], shapes[shape],
                                    *[v for _, v in values[2:]], ebits, mbits, m_out, usr20)
            want = N.convert_cell(np.uint64(acc), b_i, shapes[shape], scale, b_o, ebits, mbits,
                                  rnd, 0, usr20, 0)
            taken += ok
            assert not ok or (y if rnd else y << 4) == want, (acc, b_i, shape, scale, b_o, rnd)
    assert taken > 0.95 * 3 * n  # the rest: results beyond 2^15 or below 2^-14


def convert_of(value_bits, usr20=1, usr21=0, ovf=0, rnd=0, shape=0, scale=0x3C000, row3="abs"):
    """Convert one accumulator value (37-bit bits, (7, 29)) with scale 1 and no biases."""
    case = dict(acc=value_bits, bias=dict(input_bias=0, shape=shape, scale=scale,
                                          output_bias=0),
                prev=0, rs=dict(rnd=rnd, ovf=ovf, fb_op=0, fb_dest=0), fmt=(7, 29),
                usr20=usr20, usr21=usr21, row3=row3)
    got = run_convert(N.convert, case)
    assert got == oracle_convert(case)
    return got >> 4 if not rnd else got


ACC_INF, ACC_NAN = 0x7F << 29, (0x7F << 29) | 1


@pytest.mark.parametrize("usr20, ovf, usr21, pos_inf, neg_inf, nan", [
    (0, 0, 0, 0x7FFF, 0xFFFF, 0xFFFF), (0, 1, 1, 0x7FFF, 0xFFFF, 0xFFFF),  # Table 7, rows 1-3
    (1, 0, 0, 0x7C00, 0xFC00, 0xFFFF), (1, 0, 1, 0x7C00, 0xFC00, 0xFFFF),  # rows 4-6
    (1, 1, 0, 0x7BFF, 0xFBFF, 0xFBFF),  # rows 7-9
    (1, 1, 1, 0x7BFF, 0xFBFF, 0xFFFF),  # rows 10-12
])
def test_table7_saturation(usr20, ovf, usr21, pos_inf, neg_inf, nan):
    modes = dict(usr20=usr20, ovf=ovf, usr21=usr21)
    assert convert_of(ACC_INF, **modes) == pos_inf
    assert convert_of(ACC_INF | 1 << 36, **modes) == neg_inf
    assert convert_of(ACC_NAN, **modes) == nan
    finite_overflow = O.oracle.encode(O.Fraction(200000), False, 7, 29)
    assert convert_of(finite_overflow, **modes) == pos_inf


def test_inf_nan_off_makes_the_top_binade_finite():
    # USR[20] = 0: 65520 rounds to 65536 = 0x7C00 as a finite value, 131008 is maxpos
    v = lambda x: O.oracle.encode(O.Fraction(x), False, 7, 29)
    assert convert_of(v(65520), usr20=0) == 0x7C00
    assert convert_of(v(131008), usr20=0) == 0x7FFF
    assert convert_of(v(65520), usr20=1) == 0x7C00  # IEEE: that is +Inf
    assert convert_of(v(65520), usr20=1, ovf=1) == 0x7BFF


def test_subnormal_output_and_rnd_keeps_four_bits():
    tiny = O.oracle.encode(O.Fraction(3, 1 << 26), False, 7, 29)  # 0.75 * 2^-24
    assert convert_of(tiny) == 0x0001  # rounds to the smallest subnormal
    # s * X + b_o far below the smallest subnormal of a wide intermediate: still one rounding
    case = dict(acc=0, bias=dict(input_bias=458588, shape=0, scale=16, output_bias=1), prev=0,
                rs=dict(rnd=0, ovf=1, fb_op=0, fb_dest=0), fmt=(6, 30), usr20=1, usr21=1,
                row3="abs")
    assert run_convert(N.convert, case) == oracle_convert(case) == 0x0001 << 4
    third = O.oracle.round_to(O.Fraction(1, 3), 7, 29)
    assert convert_of(third, rnd=1) == (0x3555 << 4) | 0x5  # 1/3 to 14 fraction bits


@pytest.mark.parametrize("row3, expect3, expect7", [("abs", 0x4000, 0xC000),
                                                    ("identity", 0xC000, 0x4000)])
def test_shape_rows_3_and_7_both_readings(row3, expect3, expect7):
    minus_two = O.oracle.encode(O.Fraction(2), True, 7, 29)
    assert convert_of(minus_two, shape=3, row3=row3) == expect3
    assert convert_of(minus_two, shape=7, row3=row3) == expect7
    assert convert_of(minus_two, shape=1) == 0xC000 and convert_of(minus_two, shape=2) == 0
    # -max(-2, 0) is -0; plus the output bias +0 it is +0
    assert convert_of(minus_two, shape=5) == 0x4000 and convert_of(minus_two, shape=6) == 0


def test_feedback_scale_max_uses_the_four_extra_bits():
    # chapter 5: first convert keeps ACC with rnd = 1; the second uses max(s, C') as the scale
    acc = O.oracle.round_to(O.Fraction(1) + O.Fraction(3, 1 << 13), 7, 29)  # 1 + 3 * 2^-13
    first = dict(acc=acc, bias=dict(input_bias=0, shape=0, scale=0x3C000, output_bias=0),
                 prev=0, rs=dict(rnd=1, ovf=0, fb_op=0, fb_dest=0), fmt=(7, 29), usr20=1,
                 usr21=0, row3="abs")
    c1 = run_convert(N.convert, first)
    assert c1 == (0x3C00 << 4) | 0x6  # 1 + 6 * 2^-14: exact with 14 fraction bits
    second = dict(first, prev=c1, rs=dict(rnd=0, ovf=0, fb_op=1, fb_dest=2))
    c2 = run_convert(N.convert, second)
    assert c2 == oracle_convert(second)
    exact = (1 + O.Fraction(6, 1 << 14)) * (1 + O.Fraction(3, 1 << 13))
    assert c2 >> 4 == O.oracle.round_to(exact, 5, 10)
    # the same with rnd = 0 on the first convert loses the extra bits: max(1, 1.0) = 1
    c1_plain = run_convert(N.convert, dict(first, rs=dict(first["rs"], rnd=0)))
    c2_plain = run_convert(N.convert, dict(second, prev=c1_plain))
    assert c2_plain >> 4 == O.oracle.round_to(O.Fraction(1) + O.Fraction(3, 1 << 13), 5, 10)


def test_convert_fields_come_from_the_register_tables():
    # the convert's Rs word and the bias register word decode as the kernels expect
    assert CVT_RS.decode((1 << 12) | (1 << 4) | (2 << 2)) == dict(
        bias_sel=1, rnd=0, ovf=0, fb_op=1, fb_dest=2, acc=0)
    word = BIAS_REG.encode(scale=0x3C000 | 0x5, output_bias=0xBC000, input_bias=0x1F_FFFF, shape=3)
    assert word & 0xFFFF == 0x3C00 and word >> 32 & 0xF == 0x5 and word >> 40 & 7 == 3
