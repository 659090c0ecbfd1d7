"""HVX arithmetic, copies and the DMA fence: kernels against exact oracles and their twins,
the instructions in traces, their costs and their errors."""

from fractions import Fraction
from pathlib import Path

import gmpy2
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import hwsim
from hwsim.errors import Location, ProgramError
from hwsim.isa.hmx import Multiply, format_item, parse_program
from hwsim.targets.hmx import hvx_kernels as K
from hwsim.traces.reader import parse_trace, read_trace
from tests import oracle
from tests.profiles import examples

ALL_FP16 = np.arange(1 << 16, dtype=np.uint16)
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "hmx"


def fp16_value(bits: int):
    v = oracle.fmt_value(int(bits), 5, 10)
    return None if v == "nan" else v


def fp16_bits(x: Fraction) -> int:
    """The exact rational rounded once to FP16 (overflow to infinity)."""
    return oracle.round_to(x, 5, 10) if x != 0 else 0


def fp32_add(a: Fraction, b: Fraction) -> Fraction:
    """IEEE single addition of two FP32 values, as an exact rational."""
    total = a + b
    return Fraction(0) if total == 0 else oracle.fmt_value(oracle.round_to(total, 8, 23), 8, 23)


def run_kernel(kernel, a, out_dtype=np.uint16):
    out = np.empty(a.shape, dtype=out_dtype)
    kernel(a, out)
    return out


@pytest.mark.slow
def test_exp_is_correctly_rounded_for_every_fp16():
    got = run_kernel(K.fp16_exp, ALL_FP16)
    assert (got == run_kernel(K.fp16_exp_twin, ALL_FP16)).all()
    for bits in ALL_FP16.tolist():
        x = fp16_value(bits)
        if x is None:
            want = K.FP16_NAN
        elif isinstance(x, float):  # infinities
            want = 0x7C00 if x > 0 else 0
        elif x > 12:
            want = 0x7C00  # exp(12) > 65520: overflows
        elif x < -18:
            want = 0  # exp(-18) < 2^-25: below half the smallest subnormal
        else:
            with gmpy2.context(precision=110):
                y = gmpy2.exp(gmpy2.mpq(x.numerator, x.denominator))
            want = fp16_bits(Fraction(*map(int, y.as_integer_ratio())))
        assert got[bits] == want, hex(bits)


@pytest.mark.slow
def test_reciprocal_is_correctly_rounded_for_every_fp16():
    got = run_kernel(K.fp16_recip, ALL_FP16)
    assert (got == run_kernel(K.fp16_recip_twin, ALL_FP16)).all()
    for bits in ALL_FP16.tolist():
        x = fp16_value(bits)
        negative = bits >> 15
        if x is None:
            want = K.FP16_NAN
        elif isinstance(x, float):
            want = negative << 15
        elif x == 0:
            want = negative << 15 | 0x7C00
        else:
            want = fp16_bits(1 / x)
        assert got[bits] == want, hex(bits)


def test_casts_between_fp32_and_fp16():
    wide = run_kernel(K.f16_to_f32, ALL_FP16, np.uint32)
    assert (wide == run_kernel(K.f16_to_f32_twin, ALL_FP16, np.uint32)).all()
    finite = ~np.isnan(ALL_FP16.view(np.float16))
    assert (wide.view(np.float32)[finite] == ALL_FP16.view(np.float16)[finite]).all()
    rng = np.random.default_rng(5)
    bits = np.concatenate([rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32),
                           np.array([0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001, 0x7F800001,
                                     0xFF800000, 0x80000000], dtype=np.uint32)])
    narrow = run_kernel(K.f32_to_f16, bits)
    assert (narrow == run_kernel(K.f32_to_f16_twin, bits)).all()
    for b, got in zip(bits.tolist(), narrow.tolist()):
        x = oracle.fmt_value(b, 8, 23)
        if x == "nan":
            assert got == K.FP16_NAN
        elif isinstance(x, float):
            assert got == (0xFC00 if x < 0 else 0x7C00)
        else:
            assert got == (fp16_bits(x) if x else b >> 31 << 15), hex(b)


finite_fp16 = st.integers(0, 0xFFFF).filter(lambda b: b & 0x7C00 != 0x7C00)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(finite_fp16, min_size=6, max_size=48), st.integers(1, 3))
@example([0, 0x8000, 0, 0, 0x8000, 0], 3)   # a column of -0 sums to +0 (TOSA: acc = 0)
def test_reductions_against_fp32_oracle(values, inner):
    n = len(values) // inner
    a = np.array(values[:n * inner], dtype=np.uint16).reshape(1, n, inner)
    total, maximum = (np.empty((1, inner), np.uint16) for _ in range(2))
    K.fp16_reduce_sum(a, total)
    K.fp16_reduce_max(a, maximum)
    twin_total, twin_max = (np.empty((1, inner), np.uint16) for _ in range(2))
    K.fp16_reduce_sum_twin(a, twin_total)
    K.fp16_reduce_max_twin(a, twin_max)
    assert (total == twin_total).all() and (maximum == twin_max).all()
    for j in range(inner):
        acc = Fraction(0)
        for k in range(n):
            acc = fp32_add(acc, fp16_value(a[0, k, j]))
        assert total[0, j] == (fp16_bits(acc) if acc else 0)
        column = [fp16_value(b) for b in a[0, :, j]]
        assert fp16_value(maximum[0, j]) == max(column)


def test_reduce_max_propagates_nan_and_orders_zeros():
    a = np.array([[[0x8000, 0x0000], [0x0000, 0x7E01]]], dtype=np.uint16)  # -0, +0 | +0, NaN
    out = np.empty((1, 2), np.uint16)
    K.fp16_reduce_max(a.transpose(0, 2, 1).copy(), out)
    assert out.tolist() == [[0x0000, K.FP16_NAN]]


@pytest.mark.parametrize("kernel, stride, pad", [((3, 3), (2, 2), (1, 1)), ((2, 3), (1, 2), (0, 2)),
                                                 ((4, 4), (4, 4), (0, 0))])
def test_average_pool_against_fp32_oracle(kernel, stride, pad):
    rng = np.random.default_rng(sum(kernel + stride + pad))
    a = rng.normal(0, 3, (5, 6, 3)).astype(np.float16).view(np.uint16)
    (kh, kw), (sh, sw), (pt, pl) = kernel, stride, pad
    oh, ow = (5 + 2 * pt - kh) // sh + 1, (6 + 2 * pl - kw) // sw + 1
    out, twin = np.empty((oh, ow, 3), np.uint16), np.empty((oh, ow, 3), np.uint16)
    K.fp16_avg_pool(a, out, kh, kw, sh, sw, pt, pl)
    K.fp16_avg_pool_twin(a, twin, kh, kw, sh, sw, pt, pl)
    assert (out == twin).all()
    for oy, ox, c in np.ndindex(out.shape):
        acc, count = Fraction(0), 0
        for ky, kx in np.ndindex(kh, kw):
            y, x = oy * sh + ky - pt, ox * sw + kx - pl
            if 0 <= y < 5 and 0 <= x < 6:
                acc, count = fp32_add(acc, fp16_value(a[y, x, c])), count + 1
        mean = oracle.fmt_value(oracle.round_to(acc / count, 8, 23), 8, 23) if acc else 0
        assert out[oy, ox, c] == (fp16_bits(mean) if mean else 0)


# -- the instructions ------------------------------------------------------------------------------

def test_copy_fill_and_sub_in_a_trace():
    m = hwsim.machine("hmx")
    vtcm = m.memory("vtcm")
    x = (np.arange(48) / 4).astype(np.float16).reshape(6, 8)
    vtcm.write(0x0, x)
    r = m.run("hvx_fill(0x1000, 64, 0x3c00)\n"
              "hvx_copy(0x1000, 0x4, 6, 4, 24, 16)\n"      # rows 0-3, columns 2-4 -> stride 12
              "hvx_copy(0x2000, 0x10, 16, 3, 16, 0)\n"     # row 1 repeated: a broadcast
              "hvx_sub(0x3000, 0x0, 0x1000, 48)\n")
    ones = np.ones((4, 12), np.float16)
    ones[:, :3] = x[:4, 2:5]
    assert (vtcm.read(0x1000, 96).view(np.float16).reshape(4, 12) == ones).all()
    assert (vtcm.read(0x2000, 48).view(np.float16).reshape(3, 8) == x[1]).all()
    got = vtcm.read(0x3000, 96).view(np.float16)
    assert (got == (x.reshape(-1) - ones.reshape(-1)).astype(np.float16)).all()
    # fill 1 vector; each copy row costs a vector (4 + 3); sub: 1 vector
    assert r.stats["units"]["hvx"]["busy"] == 1 + 4 + 3 + 1


@pytest.mark.parametrize("line, message", [
    ("hvx_copy(0x0, 0x100, 8, 4, 4, 8)", "destination rows of 8 bytes overlap"),
    ("hvx_copy(0x0, 0x100, 0, 4, 8, 8)", "row_bytes = 0: expected a positive size"),
    ("hvx_avg_pool(0x0, 0x100, 4, 4, 8, 3, 3, 1, 1, 3, 0, 0, 0)", "pad_top = 3: expected 0..kh"),
    ("hvx_avg_pool(0x0, 0x100, 2, 2, 8, 3, 3, 1, 1, 0, 0, 0, 0)", "does not fit the padded"),
    ("hvx_f32_to_f16(0x0, 0x102, 8)", "src = 0x102: expected a multiple of 4"),
    ("hvx_fill(0x0, 8, 0x10000)", "value = 0x10000: expected 0..0xffff"),
    ("hvx_reduce_sum(0x0, 0x100, 1, 0, 1)", "n = 0: expected a positive size"),
])
def test_hvx_argument_errors(line, message):
    with pytest.raises(ProgramError, match=message):
        hwsim.machine("hmx").run(line + "\n")


def test_dma_fence_keeps_a_refill_behind_the_multiply_that_reads_the_buffer():
    trace = (EXAMPLES / "double_buffer.trace").read_text()
    slow = {"hvx_act_pack_cycles_per_vector": 300.0}  # the first multiply waits for its pack
    m = hwsim.machine("hmx")
    fenced = m.run(hwsim_trace(trace), params=slow)
    assert fenced.expect_failures == []
    unfenced = m.run(hwsim_trace(trace.replace("dma_fence()", "")), params=slow)
    # group 2's weights land in buffer A before group 0's multiply reads it
    assert len(unfenced.expect_failures) == 1 and "differ" in unfenced.expect_failures[0]
    fence_log = fenced.log("dma")
    mpy_log = fenced.log("mpy")
    first_fence = next(start for start, _, label, _ in fence_log if label == "dma_fence")
    assert first_fence >= mpy_log[0][0]  # it waited for the first multiply to start


def hwsim_trace(text: str):
    """Trace text with its paths relative to the examples folder."""
    return parse_trace(text, "double_buffer", EXAMPLES)


def test_every_example_item_formats_back_to_itself():
    def key(item):
        if isinstance(item, Multiply):
            return key(item.act) + key(item.wgt)
        return (item.spec.name, item.fields)
    for path in sorted(EXAMPLES.glob("*.trace")):
        items = parse_program(read_trace(path).lines)
        text = "\n".join(format_item(item) for item in items).split("\n")
        again = parse_program([(line, Location("f", n + 1, 1)) for n, line in enumerate(text)])
        assert [key(i) for i in items] == [key(i) for i in again], path.name
