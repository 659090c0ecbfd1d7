"""The shared rounding helper against the exact-rational oracle."""

from fractions import Fraction

from hypothesis import given, settings, strategies as st

from hwsim.targets import floats
from tests import oracle
from tests.profiles import examples

FORMATS = [floats.FP16, floats.BF16, floats.FP32, (5, 14), (5, 15), (8, 27)]


@settings(max_examples=examples(3000), deadline=None)
@given(fmt=st.sampled_from(FORMATS), negative=st.booleans(),
       sig=st.integers(1, (1 << 60) - 1), exp=st.integers(-200, 120),
       sticky=st.booleans(), mode=st.integers(0, 5), flush=st.sampled_from([0, 1, 2]),
       sat=st.booleans())
def test_round_pack_matches_oracle(fmt, negative, sig, exp, sticky, mode, flush, sat):
    ebits, mbits = fmt
    if sticky:
        # the sticky bit stands for a nonzero tail below sig's last bit (a quarter of it here);
        # the contract: sig then reaches at least one bit below the result's last bit
        while sig.bit_length() < mbits + 3:
            sig <<= 1
            exp -= 1
    exact = Fraction(sig) * Fraction(2) ** exp + (Fraction(2) ** exp / 4 if sticky else 0)
    want = oracle.round_to(-exact if negative else exact, ebits, mbits, mode,
                           [False, True, "after"][flush], sat)
    got, _ = floats.round_pack(int(negative), sig, exp, sticky, ebits, mbits, mode, flush, sat)
    assert int(got) == want


@settings(max_examples=examples(2000), deadline=None)
@given(fmt=st.sampled_from(FORMATS), data=st.data())
def test_unpack_is_exact(fmt, data):
    ebits, mbits = fmt
    bits = data.draw(st.integers(0, (1 << (1 + ebits + mbits)) - 1))
    cls, sign, sig, exp = floats.unpack(bits, ebits, mbits)
    value = oracle.fmt_value(bits, ebits, mbits)
    if cls == floats.NAN:
        assert value == "nan"
    elif cls == floats.INF:
        assert value == (-1) ** sign * float("inf")
    else:
        assert (-1) ** sign * Fraction(int(sig)) * Fraction(2) ** int(exp) == value


def test_overflow_and_flags():
    big = (1 << 20)
    bits, flags = floats.round_pack(0, big, 0, False, 5, 10, floats.RNE, False, False)
    assert int(bits) == 0x7C00 and flags & floats.OVERFLOW
    bits, _ = floats.round_pack(1, big, 0, False, 5, 10, floats.RNE, False, True)
    assert int(bits) == 0xFBFF
    bits, flags = floats.round_pack(0, 3, 0, False, 5, 10, floats.RNE, False, False)
    assert int(bits) == 0x4200 and flags == 0


@settings(max_examples=examples(3000), deadline=None)
@given(fmt=st.sampled_from(FORMATS), signs=st.tuples(st.booleans(), st.booleans()),
       sig1=st.integers(0, (1 << 48) - 1), sig2=st.integers(0, (1 << 48) - 1),
       exp1=st.integers(-300, 200), gap=st.integers(-80, 80), mode=st.integers(0, 5))
def test_exact_sum_rounds_once_like_the_oracle(fmt, signs, sig1, sig2, exp1, gap, mode):
    ebits, mbits = fmt
    exp2 = exp1 + gap
    exact = ((-1) ** signs[0] * Fraction(sig1) * Fraction(2) ** exp1
             + (-1) ** signs[1] * Fraction(sig2) * Fraction(2) ** exp2)
    sign, sig, exp, sticky = floats.exact_sum(int(signs[0]), sig1, exp1, int(signs[1]), sig2, exp2)
    if exact == 0:
        assert sig == 0 and not sticky
        return
    got, _ = floats.round_pack(sign, sig, exp, sticky, ebits, mbits, mode, False, False)
    assert int(got) == oracle.round_to(exact, ebits, mbits, mode)


def test_flush_after_rounding_keeps_values_that_round_up_to_the_smallest_normal():
    # FP16: (2**11 - 1) * 2**-25 is just below 2**-14; RNE at 11 bits rounds it up to 2**-14
    sig, exp = (1 << 12) - 1, -26
    before, _ = floats.round_pack(0, sig, exp, False, 5, 10, floats.RNE, floats.FLUSH_BEFORE, False)
    after, _ = floats.round_pack(0, sig, exp, False, 5, 10, floats.RNE, floats.FLUSH_AFTER, False)
    assert int(before) == 0 and int(after) == 0x0400
    down, _ = floats.round_pack(0, sig, exp, False, 5, 10, floats.RTZ, floats.FLUSH_AFTER, False)
    assert int(down) == 0
