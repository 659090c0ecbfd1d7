"""Each operator the GAP9 lowering supports, lowered, simulated and judged by the reference.

Every graph runs with ``check=True``: the verdicts come from the TOSA reference model on the
simulator's own inputs, so an exact verdict is an independent check of the lowering (formats,
zero-point folding, layouts, tiling, kernels, NE16 jobs). Exact mode must be bit-exact; the
NE16-native mode may differ by the rounding of its 8-bit scales (at most 1 LSB here).
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from hwsim.errors import ScheduleError
from hwsim.schedule import estimate
from hwsim.tosa.builder import GraphBuilder
from tests.profiles import examples

RNG = np.random.default_rng(7)


def weights(*shape):
    return RNG.integers(-100, 101, shape).astype(np.int8)


def requant(b, acc, scale=1 / 600, zp=-5, channels=None):
    scales = scale * (1 + 0.3 * RNG.random(channels)) if channels else scale
    return b.rescale(acc, scales, "int8", output_zp=zp)


def conv_graph(shape, out_ch, kernel, stride=(1, 1), pad=(0, 0, 0, 0), depthwise=False,
               input_zp=3, weight_zp=0, clamp=(-128, 127), dilation=(1, 1), multiplier=1):
    b = GraphBuilder("conv")
    x = b.input(shape, "int8")
    if depthwise:
        w = b.const(weights(*kernel, shape[3], multiplier), "int8")
        channels = shape[3] * multiplier
        acc = b.depthwise_conv2d(x, w, b.const(RNG.integers(-900, 900, channels), "int32"),
                                 stride, pad, dilation, input_zp, weight_zp)
    else:
        w = b.const(weights(out_ch, *kernel, shape[3]), "int8")
        channels = out_ch
        acc = b.conv2d(x, w, b.const(RNG.integers(-900, 900, out_ch), "int32"), stride, pad,
                       dilation, input_zp, weight_zp)
    y = requant(b, acc, channels=channels)
    if clamp is not None:
        y = b.clamp(y, *clamp)
    return b.build(y)


def check(graph, mode="exact", **options):
    report = estimate(graph, "gap9", mode=mode, check=True, **options)
    verdicts = [r.verdict for r in report.layers] + list(report.output_verdicts.values())
    if mode == "exact":
        bad = [str(v) for v in verdicts if v.status != "exact"]
        assert not bad, bad
    else:
        assert max(v.max_err for v in verdicts) <= 1, [str(v) for v in verdicts]
    return report


NE16_CONVS = {
    "3x3": dict(shape=(1, 7, 9, 20), out_ch=40, kernel=(3, 3), pad=(1, 1, 1, 1)),
    "3x3 valid, weight zp": dict(shape=(1, 6, 5, 16), out_ch=8, kernel=(3, 3), weight_zp=7),
    "3x3 pad 2": dict(shape=(1, 5, 5, 8), out_ch=16, kernel=(3, 3), pad=(2, 1, 2, 0)),
    "3x3 stride 2": dict(shape=(1, 9, 8, 12), out_ch=10, kernel=(3, 3), stride=(2, 2),
                         pad=(1, 1, 0, 1)),
    "depthwise": dict(shape=(1, 6, 7, 40), out_ch=0, kernel=(3, 3), pad=(1, 1, 1, 1),
                      depthwise=True),
    "depthwise stride 2": dict(shape=(1, 8, 8, 24), out_ch=0, kernel=(3, 3), stride=(2, 2),
                               pad=(0, 1, 0, 1), depthwise=True, input_zp=-128),
    "1x1": dict(shape=(1, 5, 6, 24), out_ch=48, kernel=(1, 1)),
    "linear": dict(shape=(1, 1, 1, 300), out_ch=70, kernel=(1, 1), input_zp=-20),
    "narrow clamp": dict(shape=(1, 4, 4, 16), out_ch=16, kernel=(3, 3), pad=(1, 1, 1, 1),
                         clamp=(-128, 40)),
}


@pytest.mark.parametrize("name", NE16_CONVS)
@pytest.mark.parametrize("mode", ["exact", "ne16"])
def test_ne16_convolutions_match_the_reference(name, mode):
    report = check(conv_graph(**NE16_CONVS[name]), mode)
    assert "ne16" in report.layers[0].units


CLUSTER_CONVS = {
    "10x4 stride 2": dict(shape=(1, 13, 10, 1), out_ch=8, kernel=(10, 4), stride=(2, 2),
                          pad=(4, 5, 1, 1)),
    "1x1 stride 2": dict(shape=(1, 7, 7, 16), out_ch=32, kernel=(1, 1), stride=(2, 2)),
    "dilated": dict(shape=(1, 8, 8, 4), out_ch=4, kernel=(3, 3), dilation=(2, 2)),
    "depthwise multiplier 2": dict(shape=(1, 5, 5, 4), out_ch=0, kernel=(3, 3),
                                   depthwise=True, multiplier=2),
}


@pytest.mark.parametrize("name", CLUSTER_CONVS)
def test_convolutions_ne16_cannot_run_go_to_the_cluster(name):
    report = check(conv_graph(**CLUSTER_CONVS[name]))
    assert report.layers[0].units == ("cluster", "dma") or "ne16" not in report.layers[0].units


def test_matmul_with_constant_b_runs_on_ne16_and_with_two_activations_on_the_cluster():
    b = GraphBuilder("mm")
    a = b.input((1, 5, 20), "int8")
    y = requant(b, b.matmul(a, b.const(weights(1, 20, 12), "int8"), a_zp=4, b_zp=2))
    report = check(b.build(y))
    assert "ne16" in report.layers[0].units
    b = GraphBuilder("mm2")
    a, c = b.input((2, 3, 8), "int8"), b.input((2, 8, 5), "int8")
    report = check(b.build(requant(b, b.matmul(a, c))))
    assert "ne16" not in report.layers[0].units


def test_pools_and_elementwise_chains():
    b = GraphBuilder("pools")
    x = b.input((1, 9, 9, 8), "int8")
    avg = b.avg_pool2d(x, (3, 3), (2, 2), (1, 1, 1, 1), input_zp=5, output_zp=-3)
    mx = b.max_pool2d(x, (3, 3), (2, 2), (1, 1, 1, 1))
    wide = [b.rescale(t, s, "int32", input_zp=z) for t, s, z in ((avg, 0.5, -3), (mx, 0.25, 0))]
    total = b.add(wide[0], wide[1])
    diff = b.op("MAXIMUM", [b.sub(wide[0], wide[1]), total], total.shape, "int32",
                nan_mode="PROPAGATE")
    prod = b.mul(diff, b.const(np.full((1, 1, 1, 8), 3, np.int32), "int32"), shift=1)
    y = b.clamp(b.rescale(prod, 0.3, "int8", output_zp=2), -100, 90)
    check(b.build(y))


def test_tables_shifts_reductions_and_casts():
    b = GraphBuilder("misc")
    x = b.input((1, 3, 17), "int8")
    t8 = b.table(x, RNG.integers(-128, 128, 256))
    x16 = b.cast(x, "int16")
    t16 = b.table(b.rescale(x16, 100.0, "int16"), RNG.integers(-2000, 2000, 513))
    shifted = b.arithmetic_right_shift(t16, b.const(np.full((1, 1, 1), 3, np.int32), "int32"))
    left = b.logical_left_shift(shifted, b.const(np.full((1, 1, 1), 2, np.int32), "int32"))
    zeros = b.unary("CLZ", left)
    total = b.reduce("REDUCE_SUM", left, 2)
    top = b.reduce("REDUCE_MAX", t8, 1)
    narrow = b.cast(total, "int8")
    check(b.build(zeros, narrow, top))


def test_data_movement_operators():
    b = GraphBuilder("moves")
    x = b.input((1, 6, 5, 4), "int8")
    t = b.transpose(x, (0, 2, 1, 3))
    p = b.pad(t, (0, 0, 1, 2, 0, 1, 0, 0), value=-7)
    s = b.slice(p, (0, 1, 1, 0), (1, 6, 5, 4))
    c = b.concat([s, b.slice(x, (0, 0, 0, 0), (1, 6, 5, 4)), s], 3)
    r = b.reshape(c, (1, 30, 12))
    check(b.build(r))


def test_offset_binary_formats_are_converted_where_readers_need_them():
    # a conv output read by NE16 (offset-binary), a max pool (signed) and a RESCALE (either)
    b = GraphBuilder("formats")
    x = b.input((1, 6, 6, 16), "int8")
    y = b.clamp(requant(b, b.conv2d(x, b.const(weights(16, 3, 3, 16), "int8"),
                                    b.const(np.zeros(16, np.int32), "int32"), pad=(1, 1, 1, 1))),
                -128, 127)
    z = b.clamp(requant(b, b.conv2d(y, b.const(weights(16, 1, 1, 16), "int8"),
                                    b.const(np.zeros(16, np.int32), "int32"))), -128, 127)
    pooled = b.max_pool2d(y, (2, 2), (2, 2))
    wide = b.rescale(y, 0.5, "int32", input_zp=-5)
    check(b.build(z, pooled, wide))


def test_tiles_and_l2_when_l1_is_small():
    graph = conv_graph((1, 24, 24, 32), 64, (3, 3), pad=(1, 1, 1, 1))
    for mode in ("exact", "ne16"):
        report = check(graph, mode, params={"l1_size": 24576})
        layer = report.layers[0]
        assert layer.bytes["L2"] > 2 * 24 * 24 * 32          # input and output through L2
    big = estimate(graph, "gap9")
    assert big.layers[0].bytes["L2"] < report.layers[0].bytes["L2"]


def test_weights_in_k_blocks_when_they_do_not_fit():
    graph = conv_graph((1, 1, 1, 640), 128, (1, 1))
    report = check(graph, params={"l1_size": 32768})
    assert report.layers[0].bytes["MRAM"] >= 640 * 128


@pytest.mark.parametrize("bits", [2, 4, 6])
def test_fewer_weight_bits_are_faster_on_3x3(bits):
    graph = conv_graph((1, 12, 12, 32), 32, (3, 3), pad=(1, 1, 1, 1))
    eight = estimate(graph, "gap9", mode="ne16")
    fewer = estimate(graph, "gap9", mode="ne16", weight_bits=bits, check=True)
    assert fewer.layers[0].cycles < eight.layers[0].cycles
    assert any("requantised" in n for n in fewer.layers[0].notes)


def test_an_unsupported_operator_fails_before_simulation_naming_it():
    b = GraphBuilder("float")
    x = b.input((1, 4), "fp32")
    graph = b.build(b.unary("EXP", x))
    with pytest.raises(ScheduleError, match=r"EXP\[exp_2\]: cannot run on gap9"):
        estimate(graph, "gap9")
    b = GraphBuilder("wide")
    x = b.input((1, 4, 4, 8), "int16")
    acc = b.conv2d(x, b.const(weights(4, 1, 1, 8), "int8"), b.const(np.zeros(4, np.int64),
                                                                     "int48"))
    with pytest.raises(ScheduleError, match=r"CONV2D\[conv2d_\d+\]: cannot run on gap9: "
                                            r"tensor .* is int48"):
        estimate(b.build(acc), "gap9")


def test_batches_run_whole_or_tiled_by_batch():
    b = GraphBuilder("batch")
    x = b.input((3, 6, 6, 8), "int8")
    y = b.avg_pool2d(x, (2, 2), (2, 2), input_zp=1, output_zp=-1)
    acc = b.conv2d(y, b.const(weights(4, 3, 3, 8), "int8"), b.const(np.zeros(4, np.int32),
                                                                     "int32"), pad=(1, 1, 1, 1))
    z = b.add(b.rescale(requant(b, acc), 1.0, "int32"), b.const(np.ones((1, 1, 1, 4),
                                                                         np.int32), "int32"))
    report = check(b.build(z), params={"l1_size": 8192})
    assert all("ne16" not in r.units for r in report.layers)


@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_random_convolution_layers_are_exact(data):
    draw = data.draw
    kernel = draw(st.sampled_from([(1, 1), (3, 3), (3, 3), (2, 3), (5, 5)]))
    depthwise = kernel == (3, 3) and draw(st.booleans())
    stride = draw(st.sampled_from([(1, 1), (2, 2), (1, 2)]))
    pad = tuple(draw(st.integers(0, min(2, k - 1))) for k in (kernel[0], kernel[0], kernel[1],
                                                              kernel[1]))
    channels = draw(st.integers(1, 32))
    h = draw(st.integers(kernel[0], 11))
    w = draw(st.integers(kernel[1], 11))
    # TOSA needs the strided windows to divide exactly: trim the input to fit
    h -= (h + pad[0] + pad[1] - kernel[0]) % stride[0]
    w -= (w + pad[2] + pad[3] - kernel[1]) % stride[1]
    graph = conv_graph((1, h, w, channels), draw(st.integers(1, 32)), kernel, stride, pad,
                       depthwise, input_zp=draw(st.integers(-128, 127)),
                       weight_zp=draw(st.sampled_from([0, 0, 5])))
    l1 = draw(st.sampled_from([128 << 10, 40 << 10]))     # small: tiles through L2
    check(graph, draw(st.sampled_from(["exact", "ne16"])), params={"l1_size": l1})


@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_random_pools_and_chains_in_tiles_are_exact(data):
    draw = data.draw
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad = (draw(st.integers(0, k[0] - 1)), draw(st.integers(0, k[0] - 1)),
           draw(st.integers(0, k[1] - 1)), draw(st.integers(0, k[1] - 1)))
    # input sizes that give whole windows: (out - 1) * stride + kernel - padding
    h = (draw(st.integers(1, 14)) - 1) * s[0] + k[0] - pad[0] - pad[1]
    w = (draw(st.integers(1, 5)) - 1) * s[1] + k[1] - pad[2] - pad[3]
    assume(h >= 1 and w >= 1)
    b = GraphBuilder("pool")
    x = b.input((1, h, w, draw(st.integers(1, 24))), "int8")
    if draw(st.booleans()):
        y = b.avg_pool2d(x, k, s, pad, input_zp=draw(st.integers(-128, 127)), output_zp=3)
    else:
        y = b.max_pool2d(x, k, s, pad)
    wide = b.rescale(y, draw(st.floats(0.01, 4.0)), "int32", input_zp=3)
    z = b.rescale(b.sub(wide, b.const(np.full((1, 1, 1, 1), 7, np.int32), "int32")), 0.7,
                  "int8", output_zp=draw(st.integers(-20, 20)))
    check(b.build(z), params={"l1_size": draw(st.sampled_from([128 << 10, 4096]))})
