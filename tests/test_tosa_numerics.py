"""Judging numerics: ULP and bound checks, the dot-product test and per-layer verdicts, each on
constructed cases whose answer is known from the spec text."""

import ml_dtypes
import numpy as np
import pytest

from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.compliance import (DotProductRule, abs_error_bound, calc_abs_error_bound,
                                   check_cast_fp, check_dot_product, check_fp, check_fp_bnd,
                                   reference_ulp, ulp_error)
from hwsim.tosa.dtypes import dtype
from hwsim.tosa.judge import exact_count, judge, judge_layer, statistics
from hwsim.tosa.models import model, sample_input
from hwsim.tosa.reference import goldens, reference_fp64

FP32, FP16, BF16, E4M3 = (dtype(n) for n in ("fp32", "fp16", "bf16", "fp8e4m3"))


def test_reference_ulp():
    got = reference_ulp(np.array([1.0, 1.5, -3.0, 0.0, np.inf, 2.0 ** -130]), FP32)
    assert got.tolist() == [2.0 ** -23, 2.0 ** -23, 2.0 ** -22, 0.0, 0.0, 2.0 ** -149]
    assert reference_ulp(1.0, FP16) == 2.0 ** -10 and reference_ulp(1.0, BF16) == 2.0 ** -7
    assert reference_ulp(2.0 ** -20, FP16) == 2.0 ** -24      # below normal_min: fixed step


def test_check_fp_ulp_bounds():
    one_up = 1 + 2.0 ** -23
    assert check_fp([one_up], [1.0], 1, FP32).tolist() == [True]
    assert check_fp([one_up], [1.0], 0.5, FP32).tolist() == [False]
    assert check_fp([1.0], [1 + 0.4 * 2.0 ** -23], 0.5, FP32).tolist() == [True]
    assert check_fp([1.0], [1 + 0.6 * 2.0 ** -23], 0.5, FP32).tolist() == [False]
    assert check_fp([-one_up], [-1.0], 1, FP32).tolist() == [True]     # sign handled
    assert check_fp([one_up], [-1.0], 1, FP32).tolist() == [False]


def test_check_fp_bnd_special_cases():
    nan, inf = np.nan, np.inf
    cases = [  # test, ref, bound, dtype, expected
        (nan, nan, 0.0, FP32, True), (1.0, nan, 0.0, FP32, False), (nan, 1.0, 1.0, FP32, False),
        (5.0, 1.0, inf, FP32, True),                       # no bound, nothing to check
        (0.0, 2.0 ** -130, 0.0, FP32, True),               # subnormal result flushed to zero
        (-0.0, 0.0, 0.0, FP32, True),                      # sign of zero is free
        (inf, 65504.0 * 1.5, 1.0, FP16, True),             # overflow must be inf
        (65504.0, 65504.0 * 1.5, 1.0, FP16, False),
        (nan, 500.0, 1.0, E4M3, True),                     # e4m3 has no inf: NaN on overflow
        (nan, 100.0, 1.0, E4M3, False),
    ]
    for test, ref, bound, dt, expected in cases:
        assert check_fp_bnd([test], [ref], bound, dt).tolist() == [expected], (test, ref, dt)


def test_calc_abs_error_bound_for_exp():
    ref, x = np.array([1.0, 1e-40]), np.array([0.0, -70.0])
    bound = calc_abs_error_bound(ref, 3 + 2 * np.abs(x), 0, 1, FP32)
    assert bound[0] == 3 * 2.0 ** -23
    assert bound[1] == 143 * 2.0 ** -126 * 2.0 ** -23     # magnitude floored at normal_min
    low = calc_abs_error_bound(np.array([0.0]), np.array([4.0]), 0.5, 1, FP32)
    assert low[0] == 0.5 * 2.0 ** -23                      # the 0.5 lower bound of TANH
    assert abs_error_bound("EXP", ref, x, FP32).tolist() == bound.tolist()
    assert abs_error_bound("EXP", ref, x, FP16)[0] == 1 * 2.0 ** -10     # err_base 1 for fp16


def test_cast_allows_round_to_zero_and_nearest_only():
    ref = np.array([1 + 3 * 2.0 ** -9, 1 + 3 * 2.0 ** -9, 1 + 2.0 ** -6, -(1 + 3 * 2.0 ** -9)])
    test = np.array([1.0, 1 + 2.0 ** -7, 1.0, -(1 + 2.0 ** -7)])
    assert check_cast_fp(test, ref, BF16).tolist() == [True, True, False, True]
    assert check_cast_fp([np.inf, 3e38], [1e39, 1e39], BF16).tolist() == [True, False]
    assert check_cast_fp([-1.0], [1.0], BF16).tolist() == [False]


def dot_case(k, size=100):
    ref = np.linspace(-3, 3, size)
    bnd = np.full(size, 1.0)
    return ref + k * 2.0 ** -24, ref, bnd                  # k error units for fp32 out


def test_dot_product_absolute_and_variance_bounds():
    assert check_dot_product(*dot_case(1.2), FP32, ksb=1).passed            # 1.44 <= 1.6
    result = check_dot_product(*dot_case(1.3), FP32, ksb=1)                 # 1.69 > 1.6
    assert not result.passed and "sum err^2" in result.reason
    assert not check_dot_product(*dot_case(2.5), FP32, ksb=1).passed        # |err| > 2
    imp, ref, bnd = dot_case(0)
    imp[0] += 2 * 2.0 ** -24                                                # one at the bound
    result = check_dot_product(imp, ref, bnd, FP32, ksb=1)
    assert result.passed and result.max_err == 2.0
    imp[0] += 2.0 ** -24
    assert "ABS_BOUND 2" in check_dot_product(imp, ref, bnd, FP32, ksb=1).reason
    relaxed = DotProductRule(fp32_abs_factor=3)
    assert check_dot_product(imp, ref, bnd, FP32, ksb=1, fp32=True, rule=relaxed).passed


def test_dot_product_special_elements():
    imp, ref, bnd = dot_case(0, 4)
    assert not check_dot_product(np.where([1, 0, 0, 0], 0.0, imp), np.where([1, 0, 0, 0],
                                 np.nan, ref), bnd, FP32, 1).passed    # NaN ref needs NaN
    bnd[1], ref[1], imp[1] = 0.0, 0.0, 1e-30
    assert "zero bound" in check_dot_product(imp, ref, bnd, FP32, 1).reason
    imp, ref, bnd = dot_case(0, 4)
    bnd[2], imp[2] = 3.3e38, 1e30                          # the bound overflows: unchecked
    assert check_dot_product(imp, ref, bnd, FP32, 1).passed
    biased = check_dot_product(*dot_case(1.0, 1000), FP32, ksb=4, test_set=3)
    assert not biased.passed and "sum too large" in biased.reason
    assert check_dot_product(*dot_case(1.0, 1000), FP32, ksb=4).passed


def _ulp_error_arrays(sim, golden, dt, scale=None):
    """``ulp_error`` as whole-array formulas (the twin of its compiled pass)."""
    s, g = np.asarray(sim, np.float64), np.asarray(golden, np.float64)
    same = (s == g) | (np.isnan(s) & np.isnan(g))
    at = np.where(g != 0, np.abs(g), np.abs(s)) if scale is None else np.maximum(
        np.abs(g), np.abs(np.asarray(scale, np.float64)))
    ulp = reference_ulp(at, dt)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        err = np.where(ulp > 0, np.abs(s - g) / np.where(ulp > 0, ulp, 1.0), np.inf)
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


def _dot_errors_arrays(imp, ref, bnd, out, abs_bound):
    """The dot-product test's errors as whole-array formulas, with its two refusals (the
    twin of its compiled pass): (NaN reference with a non-NaN result, zero bound with a
    non-zero result, errors)."""
    nan_ref = bool(np.any(np.isnan(ref) & ~np.isnan(imp)))
    with np.errstate(over="ignore", invalid="ignore"):
        limit = (bnd * (1 + abs_bound * 2.0 ** (-1 - out.frac))).astype(out.np)
        skip = np.isnan(ref) | np.isnan(bnd) | np.isinf(np.asarray(limit, np.float64))
    zero = ~skip & (bnd == 0)
    zero_bad = bool(np.any(zero & ((ref != 0) | (imp != 0))))
    live = ~skip & ~zero
    err = np.zeros_like(ref)
    with np.errstate(invalid="ignore"):
        err[live] = (imp[live] - ref[live]) / np.maximum(bnd[live] * 2.0 ** (-1 - out.frac),
                                                         out.normal_min)
    return nan_ref, zero_bad, err


@pytest.mark.parametrize("dt", [FP32, FP16, BF16, E4M3, dtype("fp8e5m2")])
def test_compiled_error_passes_equal_the_array_formulas(dt):
    """Bit for bit, on values meant to find every branch: NaNs, infinities, signed zeros, fp64
    subnormals, both sides of the output type's overflow and of normal_min."""
    from hwsim.tosa.compliance import NAN_REFERENCE, ZERO_BOUND, _dot_errors, _infinite_from
    rng = np.random.default_rng(7)
    top = dt.max_normal
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 2.0 ** -1030, top,
                         top * (1 + 2.0 ** -(dt.frac + 1)), np.nextafter(top * (1 + 2.0 ** -(
                             dt.frac + 1)), 0), dt.normal_min, dt.normal_min / 3, 1.0, -1.0])
    n = 4000
    ref = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    imp = ref + rng.standard_normal(n) * np.abs(ref) * 2.0 ** -dt.frac * rng.integers(0, 4, n)
    bnd = np.abs(ref) * rng.uniform(1, 3, n)
    for a in (ref, imp, bnd):
        picks = rng.integers(0, n, n // 4)
        a[picks] = rng.choice(specials, picks.size)
    bnd = np.where(rng.random(n) < 0.1, 0.0, np.abs(bnd))
    same = rng.random(n) < 0.1
    imp[same] = ref[same]
    for scale in (None, bnd):
        got, want = ulp_error(imp, ref, dt, scale), _ulp_error_arrays(imp, ref, dt, scale)
        assert got.tobytes() == want.tobytes()
    abs_bound = 2.0 * 3
    nan_ref, zero_bad, want = _dot_errors_arrays(imp, ref, bnd, dt, abs_bound)
    got = np.empty(n)
    status = _dot_errors(imp, ref, bnd, 1 + abs_bound * 2.0 ** (-1 - dt.frac),
                         _infinite_from(dt.np), 2.0 ** (-1 - dt.frac), dt.normal_min, got)
    assert (bool(status & NAN_REFERENCE), bool(status & ZERO_BOUND)) == (nan_ref, zero_bad)
    assert got.tobytes() == want.tobytes()


def test_ksb_readings():
    fp16 = FP16
    real, integer = DotProductRule(), DotProductRule(ksb_exponent="integer")
    assert real.ksb(1152, FP32, fp16, False) == 13         # ceil(1152 / 2^6.5)
    assert integer.ksb(1152, FP32, fp16, False) == 18      # ceil(1152 / 2^6)
    assert real.ksb(27, FP32, FP32, True) == 28


def test_statistics_in_lsb_and_ulp():
    assert statistics(np.array([1, 5, -3], np.int8), np.array([1, 2, -3], np.int8),
                      dtype("int8")) == (2, 3.0, 1.0)
    exact, worst, mean = statistics(np.array([1.0, 1 + 2 ** -22, np.nan], np.float32),
                                    np.array([1.0, 1.0, np.nan], np.float32), FP32)
    assert (exact, worst) == (2, 2.0) and mean == pytest.approx(2 / 3)
    # a zero golden: the result's own size (2^23 ulps of 1.0); a larger scale (a dot
    # product's bound) measures against it; only an overflow or a NaN is infinite
    assert ulp_error(np.array([1.0]), np.array([0.0]), FP32).tolist() == [2.0 ** 23]
    assert ulp_error(np.array([2 ** -10, 3.0]), np.array([0.0, 3.0]), FP32,
                     scale=np.array([4.0, 4.0])).tolist() == [2.0 ** 11, 0.0]
    assert ulp_error(np.array([65504.0, np.nan]), np.array([np.inf, 1.0]),
                     FP16).tolist() == [np.inf, np.inf]
    bf = np.array([1.0, 1.0078125], ml_dtypes.bfloat16)
    assert statistics(bf, np.array([1.0, 1.0], ml_dtypes.bfloat16), BF16)[1] == 1.0


@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16", "fp8e4m3", "fp8e5m2"])
def test_nans_of_any_payload_count_as_exact_in_every_float_type(name):
    """Every NaN pattern of the type (all of them below 32 bits) against another NaN, its
    own pattern, and a number."""
    dt = dtype(name)
    size = np.dtype(dt.np).itemsize
    bits = np.arange(1 << 8 * size, dtype=f"u{size}") if size < 4 else np.array(
        [0x7FC00000, 0xFFC00001, 0x7F800001, 0xFF800001, 0x7FFFFFFF], np.uint32)
    values = bits.view(dt.np)
    with np.errstate(invalid="ignore"):
        nans = values[np.isnan(values.astype(np.float64))]
    assert nans.size
    other = np.full_like(nans, nans[0])
    number = np.zeros_like(nans)
    assert exact_count(nans, other, dt) == exact_count(nans, nans, dt) == nans.size
    assert exact_count(nans, number, dt) == exact_count(number, nans, dt) == 0


def single_op(op_name, dt):
    b = GraphBuilder()
    x = b.input((4,), dt)
    out = b.add(x, x) if op_name == "ADD" else b.unary(op_name, x)
    return b.build(out).operators[0]


def test_verdicts_on_constructed_layers():
    add = single_op("ADD", "fp32")
    golden = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    assert judge(add, golden, golden).status == "exact"
    off = golden.copy()
    off[0] = np.float32(1 + 2.0 ** -23)       # the golden rounded a tie to even, this up
    ref64 = golden.astype(np.float64) + [0.5 * 2.0 ** -23, 0, 0, 0]
    v = judge(add, off, golden, ref64=ref64)
    assert v.status == "compliant" and v.exact == 3 and v.max_err == 1.0 and v.unit == "ULP"
    v = judge(add, off, golden, ref64=golden.astype(np.float64) + [0.4 * 2.0 ** -23, 0, 0, 0])
    assert v.status == "deviates" and "1 elements outside" in str(v)
    exp = single_op("EXP", "fp32")
    with pytest.raises(Exception, match="needs the input values x"):
        judge(exp, off, golden, ref64=ref64)
    x = np.zeros(4)                                        # bound 3 ulp at exp(0) = 1
    e_ref = np.ones(4)
    assert judge(exp, np.float32([1 + 3 * 2.0 ** -23, 1, 1, 1]), np.float32(e_ref),
                 ref64=e_ref, x=x).status == "compliant"
    assert judge(exp, np.float32([1 + 4 * 2.0 ** -23, 1, 1, 1]), np.float32(e_ref),
                 ref64=e_ref, x=x).status == "deviates"
    ints = single_op("CLZ", "int32")
    v = judge(ints, np.array([1, 2, 3, 9]), np.array([1, 2, 3, 4]))
    assert (v.status, v.unit, v.max_err, v.exact) == ("deviates", "LSB", 5.0, 3)
    assert str(v).startswith("CLZ[") and "3/4 bit-exact" in str(v)


def test_judge_layer_on_a_perturbed_convolution():
    """A conv output nudged by fp32 ulps passes the dot-product test; a real error does not."""
    g = model("resnet8", dtype="fp32", width=0.25, resolution=8)
    values = goldens(g, sample_input(g))
    conv = g.operators[0]
    golden = values[conv.output.name]
    assert judge_layer(g, conv, golden, values).status == "exact"
    nudged = np.nextafter(golden, np.float32(np.inf))
    verdict = judge_layer(g, conv, nudged, values)
    assert verdict.status == "compliant" and verdict.check.startswith("dot product, ksb 28")
    wrong = golden + np.float32(0.01)
    assert judge_layer(g, conv, wrong, values).status == "deviates"


def test_a_dot_product_judged_with_its_exact_count_given_is_judged_the_same():
    g = model("resnet8", dtype="fp32", width=0.25, resolution=8)
    values = goldens(g, sample_input(g))
    conv = g.operators[0]
    golden = values[conv.output.name]
    sim = golden.copy()
    sim.flat[::3] = np.nextafter(sim.flat[::3], np.float32(np.inf))     # a third nudged
    ref64, bnd64 = reference_fp64(g, conv, values)
    exact = exact_count(sim, golden, conv.output.dtype)
    assert 0 < exact < golden.size
    given = judge(conv, sim, golden, ref64=ref64, bnd64=bnd64, exact=exact)
    assert given == judge(conv, sim, golden, ref64=ref64, bnd64=bnd64) == \
        judge_layer(g, conv, sim, values)
    assert given.exact == exact and given.status == "compliant"
