"""HMX lowering building blocks, each run on the HMX machine against an independent numpy model.

Convolutions (any kernel, stride, padding, dilation; depthwise; fused bias and ReLU; folded or
single-based kernel rows; weight deep) must be within the bound that FP16 data and the 37-bit
accumulator allow: |sim - ref| <= half an FP16 ulp of |ref| + d, plus d, where d = 2^-24 *
sum|a*w| covers the accumulator roundings (29 fraction bits, at most 32 per output) and 2^-16
|b| the bias rounded to FP16 + 5 bits; ref is exact (float64) on the FP16 inputs. HVX operators
are compared bit for bit with numpy.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hwsim
from hwsim.errors import ScheduleError
from hwsim.isa.hmx import spatial_split
from hwsim.schedule.hmx import conv as C
from hwsim.schedule.hmx import layer as L
from hwsim.schedule.hmx import vector as V
from hwsim.schedule.hmx.program import Arena, HmxProgram, WeightStream, spatial_offset, tile_mask
from tests.profiles import examples

VTCM_BASE, DDR_BASE = 0, 0x8000_0000


def conv_reference(conv: C.Conv, x, w, b, relu=None):
    """Exact (float64) convolution of the FP16 inputs, written from the TOSA definition."""
    (pt, pb, pl, pr), (kh, kw) = conv.pad, conv.kernel
    (sy, sx), (dy, dx) = conv.stride, conv.dilation
    xp = np.zeros((conv.h + pt + pb, conv.w + pl + pr, conv.c))
    xp[pt:pt + conv.h, pl:pl + conv.w] = x
    out = np.zeros((conv.h_out, conv.w_out, conv.k_out)) + b
    for oy, ox in np.ndindex(conv.h_out, conv.w_out):
        for ky, kx in np.ndindex(kh, kw):
            pixel = xp[oy * sy + ky * dy, ox * sx + kx * dx]
            if conv.depthwise:
                out[oy, ox] += np.repeat(pixel, conv.k_out // conv.c) * w[ky, kx].reshape(-1)
            else:
                out[oy, ox] += w[:, ky, kx, :] @ pixel
    return np.maximum(out, 0) if (conv.relu if relu is None else relu) else out


def fp16_half_ulp(x):
    x = np.maximum(np.abs(x), 2.0 ** -14)
    return 2.0 ** (np.floor(np.log2(x)) - 11)


def run_conv(conv: C.Conv, plan: C.ConvPlan | None = None, seed: int = 0, chunk_bytes=64 << 10,
             inputs: bool = False):
    """Run a random layer; (simulated, exact, bound, result, plan) and with ``inputs`` the
    FP16 input, FP16 weights and FP32 bias too."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((conv.h, conv.w, conv.c)).astype(np.float16)
    shape = ((conv.kernel + (conv.c, conv.k_out // conv.c)) if conv.depthwise else
             (conv.k_out,) + conv.kernel + (conv.c,))
    w = (rng.standard_normal(shape) / 3).astype(np.float16)
    b = rng.standard_normal(conv.k_out).astype(np.float32)
    m = hwsim.machine("hmx")
    plan = plan or C.choose(conv, m.params.as_dict())
    program = HmxProgram()
    vtcm, ddr = Arena("vtcm", VTCM_BASE, 8 << 20), Arena("ddr", DDR_BASE, 64 << 20)
    stream = WeightStream(ddr, vtcm)
    xa, ya = vtcm.alloc(x.nbytes, "x"), vtcm.alloc(conv.h_out * conv.w_out * conv.k_out * 2, "y")
    program.place("vtcm", xa, x, "x")
    program.usr(infnan_propagate=1)
    program.clear_accumulators()
    layer = L.prepare(program, stream, plan, w, b, chunk_bytes)
    stream.open(program)
    L.emit(program, vtcm, stream, layer, xa, ya)
    result = program.run(m)
    got = m.memory("vtcm").read(ya, conv.h_out * conv.w_out * conv.k_out * 2).view(np.float16)
    got = got.reshape(conv.h_out, conv.w_out, conv.k_out).astype(np.float64)
    args = (x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    want = conv_reference(conv, *args)
    magnitude = conv_reference(conv, np.abs(args[0]), np.abs(args[1]), np.abs(args[2]), False)
    slack = 2.0 ** -24 * magnitude + 2.0 ** -16 * np.abs(args[2])
    bound = fp16_half_ulp(np.abs(want) + slack) + slack
    return (got, want, bound, result, plan) + (((x, w, b),) if inputs else ())


convs = st.builds(
    lambda h, w, c, k, kernel, stride, dil, pads, depthwise, relu, m: C.Conv(
        h, w, c, c * m if depthwise else k, kernel, stride,
        tuple(min(p, kernel[i // 2] - 1) for i, p in enumerate(pads)), dil, depthwise, relu),
    st.integers(3, 12), st.integers(3, 12), st.integers(1, 40), st.integers(1, 70),
    st.tuples(st.integers(1, 3), st.integers(1, 3)),
    st.tuples(st.integers(1, 2), st.integers(1, 2)),
    st.tuples(st.integers(1, 2), st.integers(1, 2)), st.tuples(*[st.integers(0, 2)] * 4),
    st.booleans(), st.booleans(), st.integers(1, 2))


@pytest.mark.slow
@settings(max_examples=examples(25), deadline=None)
@given(conv=convs.filter(lambda c: c.h_out > 0 and c.w_out > 0), fold=st.booleans())
def test_convolutions_within_the_fp16_bound(conv, fold):
    got, want, bound, _, _ = run_conv(conv, C.ConvPlan(conv, fold))
    assert (np.abs(got - want) <= bound).all()


@pytest.mark.parametrize("conv, fold, deep", [
    (C.Conv(8, 8, 32, 96, relu=True), False, True),             # weight deep, a lone group
    (C.Conv(6, 40, 16, 16, (3, 3), pad=(1, 1, 1, 1)), False, False),   # singles for y taps
    (C.Conv(4, 4, 1200, 8), False, False),                        # deep over 38 croutons
    (C.Conv(5, 5, 64, 64, (3, 3), pad=(1, 1, 1, 1), depthwise=True), True, False),
])
def test_layer_forms(conv, fold, deep):
    plan = C.ConvPlan(conv, fold, deep)
    got, want, bound, result, _ = run_conv(conv, plan, chunk_bytes=4096)
    assert (np.abs(got - want) <= bound).all()
    labels = [label for u in result.unit_names for _, _, label, _ in result.log(u)]
    if deep:
        assert any("64f" in label for label in labels)
    if conv.w == 40:
        assert plan.singles() and any("single" in label for label in labels)


def test_single_offsets_and_masks():
    assert spatial_offset(5, 0b11100) == 5 << 2 and spatial_offset(3, 0b10101) == 0b00101
    for mask in (0b11100, 0b10101, 0b00011):
        for y in range(1 << bin(mask).count("1")):
            assert spatial_split(spatial_offset(y, mask), mask) == (0, y)
    with pytest.raises(ScheduleError, match="does not fit the 3 Y bits"):
        spatial_offset(8, 0b11100)
    assert tile_mask(1, 256) == 0 and tile_mask(32, 32) == 0 and tile_mask(8, 4) == 0b11100
    assert tile_mask(96, 3) == 0b11111 and tile_mask(48, 6) == 0b11110  # 9 and 12 croutons


def test_convert_overlaps_multiply_and_dma_overlaps_compute():
    conv = C.Conv(1, 256, 256, 256)
    got, want, bound, result, _ = run_conv(conv, chunk_bytes=16 << 10)
    assert (np.abs(got - want) <= bound).all()
    logs = {u: result.log(u) for u in result.unit_names}
    mpy = [(s, s + c) for s, c, _, _ in logs["mpy"]]
    cvt = [(s, s + c) for s, c, label, _ in logs["cvt"] if label.startswith("cvt acc")]
    assert sum(any(c0 < m1 and m0 < c1 for m0, m1 in mpy) for c0, c1 in cvt) > len(cvt) // 2
    dma = [(s, s + c) for s, c, label, _ in logs["dma"] if label.startswith("dma ddr")]
    assert len(dma) > 2 and any(d0 < m1 and m0 < d1 for d0, d1 in dma[1:] for m0, m1 in mpy)


def test_choose_prefers_the_less_busy_plan():
    timing = hwsim.machine("hmx").params.as_dict()

    def busiest(plan):
        cost = C.unit_cycles(plan, timing)
        return max(cost["hvx"], cost["mpy"] + (cost["cvt"] if plan.weight_deep else 0),
                   cost["cvt"])
    for conv in (C.Conv(32, 32, 3, 16, (3, 3), pad=(1, 1, 1, 1)), C.Conv(8, 8, 64, 64, (3, 3)),
                 C.Conv(16, 16, 64, 128), C.Conv(12, 12, 32, 32, (5, 5), depthwise=True)):
        chosen = C.choose(conv, timing)
        for fold in (False, True):
            assert busiest(chosen) <= busiest(C.ConvPlan(conv, fold))
        assert min(C.unit_cycles(chosen, timing).values()) > 0


# -- HVX operators ---------------------------------------------------------------------------------

def run_hvx(emit, inputs, out_shape, out_dtype=np.float16):
    """Place ``inputs`` (arrays) in VTCM, emit with their addresses, return the output."""
    m, program, vtcm = hwsim.machine("hmx"), HmxProgram(), Arena("vtcm", VTCM_BASE, 8 << 20)
    addrs = []
    for array in inputs:
        addrs.append(vtcm.alloc(array.nbytes, "in", 128))
        program.place("vtcm", addrs[-1], array, "in")
    out = vtcm.alloc(math.prod(out_shape) * np.dtype(out_dtype).itemsize, "out", 128)
    emit(program, vtcm, out, *addrs)
    program.run(m)
    data = m.memory("vtcm").read(out, math.prod(out_shape) * np.dtype(out_dtype).itemsize)
    return data.view(out_dtype).reshape(out_shape)


def fp16(shape, seed=0, scale=2.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float16)


@pytest.mark.parametrize("op, fn", [("ADD", np.add), ("SUB", np.subtract), ("MUL", np.multiply)])
@pytest.mark.parametrize("sa, sb", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (1, 1, 4)),
                                    ((1, 10), (1, 1)), ((2, 1, 4), (1, 3, 1))])
def test_binary_with_broadcast(op, fn, sa, sb):
    a, b = fp16(sa, 1), fp16(sb, 2)
    shape = tuple(max(x, y) for x, y in zip(sa, sb))
    got = run_hvx(lambda p, v, out, ia, ib: V.binary(p, v, op, out, ia, ib, sa, sb, shape),
                  [a, b], shape)
    want = fn(a.astype(np.float64), b.astype(np.float64)).astype(np.float16)
    assert (got.view(np.uint16) == want.view(np.uint16)).all()


@pytest.mark.slow
def test_unary_reduce_pool_and_casts():
    x = fp16((2, 5, 6, 3), 3)
    flat = x.reshape(-1)
    got = run_hvx(lambda p, v, out, a: V.unary(p, "EXP", out, a, flat.size), [x], flat.shape)
    assert (got == np.exp(flat.astype(np.float64)).astype(np.float16)).all()
    got = run_hvx(lambda p, v, out, a: V.unary(p, "CLAMP", out, a, flat.size, -1.0, 1e30),
                  [x], flat.shape)
    assert (got == np.maximum(flat, np.float16(-1))).all()
    got = run_hvx(lambda p, v, out, a: V.reduce(p, "REDUCE_MAX", out, a, x.shape, 2), [x],
                  (2, 5, 1, 3))
    assert (got == x.max(axis=2, keepdims=True)).all()
    got = run_hvx(lambda p, v, out, a: V.reduce(p, "REDUCE_SUM", out, a, x.shape, 1), [x],
                  (2, 1, 6, 3))
    want = np.cumsum(x.astype(np.float32), axis=1, dtype=np.float32)[:, -1:].astype(np.float16)
    assert (got == want).all()
    got = run_hvx(lambda p, v, out, a: V.avg_pool(p, out, a, x.shape, (5, 6), (1, 1),
                                                  (0, 0, 0, 0)), [x], (2, 1, 1, 3))
    sums = np.cumsum(x.astype(np.float32).reshape(2, 30, 3), axis=1, dtype=np.float32)[:, -1]
    assert (got.reshape(2, 3) == (sums / np.float32(30)).astype(np.float16)).all()
    wide = np.random.default_rng(4).standard_normal(40).astype(np.float32)
    got = run_hvx(lambda p, v, out, a: V.cast(p, out, a, 40, True), [wide], (40,))
    assert (got == wide.astype(np.float16)).all()
    back = run_hvx(lambda p, v, out, a: V.cast(p, out, a, 40, False), [got], (40,), np.float32)
    assert (back == got.astype(np.float32)).all()


def test_data_movement():
    x = fp16((1, 4, 5, 6), 5)
    y = fp16((1, 4, 2, 6), 6)
    got = run_hvx(lambda p, v, out, a: V.slice_(p, out, a, x.shape, (0, 1, 2, 1), (1, 3, 2, 4)),
                  [x], (1, 3, 2, 4))
    assert (got == x[:, 1:4, 2:4, 1:5]).all()
    padding = (0, 0, 1, 2, 0, 1, 3, 0)
    got = run_hvx(lambda p, v, out, a: V.pad(p, out, a, x.shape, padding, -1.5), [x],
                  (1, 7, 6, 9))
    assert (got == np.pad(x, [(0, 0), (1, 2), (0, 1), (3, 0)], constant_values=-1.5)).all()
    got = run_hvx(lambda p, v, out, a, b: V.concat(p, out, [a, b], [x.shape, y.shape], 2),
                  [x, y], (1, 4, 7, 6))
    assert (got == np.concatenate([x, y], axis=2)).all()
    got = run_hvx(lambda p, v, out, a: V.transpose(p, out, a, x.shape, (0, 3, 1, 2)), [x],
                  (1, 6, 4, 5))
    assert (got == x.transpose(0, 3, 1, 2)).all()
    with pytest.raises(ScheduleError, match="cannot broadcast"):
        run_hvx(lambda p, v, out, a: V.broadcast_to(p, v, a, (2, 3), (4, 3)), [x], (4, 3))


def test_bias_fields_round_once_against_the_oracle():
    from fractions import Fraction
    from tests import oracle
    rng = np.random.default_rng(9)
    values = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-6, 4, 200),
                             [65504.0, 65519.0, -1e-9, 0.1, 3.0e-5, 0.0, -0.0, 2.0 ** -14,
                              -(2.0 ** -14) * (1 - 2.0 ** -16), 2.0 ** -40]])
    for mbits in (14, 15):  # and ties at both rounding points, normal and subnormal
        ties = [(2 * k + 1) * 2.0 ** (e - mbits - 1) for k in (0, 1, 2 ** mbits - 1)
                for e in (-14, -3, 0, 9, 15)]
        ties += [(2 * k + 1) * 2.0 ** (-14 - mbits - 1) for k in (0, 3, 2 ** mbits - 1)]
        values = np.concatenate([values, ties, np.negative(ties)])
        got = L.ext_fp16_bits(values, mbits)
        for v, bits in zip(values, got.tolist()):
            assert bits == oracle.round_to(Fraction(float(v)), 5, mbits), (v, mbits)
    with pytest.raises(ScheduleError, match="outside the FP16 range"):
        L.ext_fp16_bits([70000.0], 15)
    sets = L.bias_sets(np.array([1e5, -2.0]), relu=False, scale=[0.5, 0.25])
    fields = L.layouts.unpack_bias(sets)  # an out-of-range bias goes in as b_o = s * b
    assert fields["input_bias"][:2].tolist() == [0, 0]
    assert fields["output_bias"][:2].tolist() == L.ext_fp16_bits([5e4, -0.5], 14).tolist()
