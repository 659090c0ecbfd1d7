"""Cluster kernels, run on the machine, against the TOSA reference model (bit-exact)."""

import numpy as np
import pytest

import hwsim
from hwsim.isa.arguments import TensorRef
from hwsim.isa.gap9 import Program
from hwsim.targets.gap9 import cluster_conv
from hwsim.tosa_int import helpers as tosa_int
from hwsim.tosa_int import operators as kernel_ops
from tests.gap9_tosa_ref import Graph

L1 = 0x10000000
rng = np.random.default_rng(2024)


def machine_kernel(name, inputs, out_shape, out_dtype, **attrs):
    """Place ``inputs`` ({arg: (array, dtype)}) in L1, run kernel ``name``, return its output."""
    m = hwsim.machine("gap9")
    addr, args = L1, {}
    for arg, (array, dtype) in inputs.items():
        data = tosa_int.store(np.asarray(array).reshape(-1), dtype)
        m.memory("l1").write(addr, data)
        args[arg] = TensorRef("l1", addr, dtype, tuple(np.shape(array)) or (1,))
        addr += -(-data.nbytes // 64) * 64
    out = TensorRef("l1", addr, out_dtype, tuple(out_shape))
    p = Program()
    p.cluster(name, **args, out=out, **attrs)
    p.barrier()
    result = m.run(p)
    assert result.stats["units"]["cluster"]["busy"] > 0
    raw = m.memory("l1").read(out.addr, out.nbytes)
    return raw.view(tosa_int.STORAGE[out_dtype]).reshape(out_shape).astype(np.int64)


def ints(dtype, shape, lo=None, hi=None):
    a, b = tosa_int.RANGES[dtype]
    return rng.integers(a if lo is None else lo, (b if hi is None else hi) + 1, shape)


def arr(values):
    return f"array<i64: {', '.join(map(str, values))}>"


def test_conv2d_with_fused_per_channel_rescale():
    x, w = ints("i8", (1, 8, 6, 5)), ints("i8", (4, 3, 3, 5))
    bias, mult = ints("i32", (4,), -5000, 5000), ints("i32", (4,), 1 << 29, (1 << 31) - 1)
    shift = ints("i8", (4,), 36, 40)
    pad, stride, dil = (1, 0, 2, 1), (2, 1), (1, 2)
    g = Graph()
    xin = g.input(x, "i8")
    acc = g.op("conv2d", [xin, g.const(w, "i8"), g.const(bias, "i32"), g.const([3], "i8"),
                          g.const([-2], "i8")], (1, 4, 5, 4), "i32",
               f"acc_type = i32, dilation = {arr(dil)}, pad = {arr(pad)}, stride = {arr(stride)}")
    out = g.op("rescale", [acc, g.const(mult, "i32"), g.const(shift, "i8"), g.const([0], "i32"),
                           g.const([-7], "i8")], (1, 4, 5, 4), "i8",
               "input_unsigned = false, output_unsigned = false, per_channel = true, "
               "rounding_mode = DOUBLE_ROUND, scale32 = true")
    want = g.run(out)
    got = machine_kernel("conv2d", {"in": (x, "i8"), "weight": (w, "i8"), "bias": (bias, "i32"),
                                    "mult": (mult, "i32"), "shift": (shift, "i8")},
                         (1, 4, 5, 4), "i8", pad=pad, stride=stride, dilation=dil, in_zp=3,
                         weight_zp=-2, out_zp=-7, rounding="double")
    assert np.array_equal(got, want)


def test_depthwise_conv2d():
    x, w, bias = ints("i8", (1, 5, 5, 3)), ints("i8", (3, 3, 3, 2)), ints("i32", (6,), -99, 99)
    g = Graph()
    acc = g.op("depthwise_conv2d", [g.input(x, "i8"), g.const(w, "i8"), g.const(bias, "i32"),
                                    g.const([-1], "i8"), g.const([0], "i8")], (1, 5, 5, 6),
               "i32", f"acc_type = i32, dilation = {arr((1, 1))}, pad = {arr((1, 1, 1, 1))}, "
                      f"stride = {arr((1, 1))}")
    got = machine_kernel("depthwise_conv2d", {"in": (x, "i8"), "weight": (w, "i8"),
                                              "bias": (bias, "i32")}, (1, 5, 5, 6), "i32",
                         pad=(1, 1, 1, 1), in_zp=-1)
    assert np.array_equal(got, g.run(acc))


def test_matmul():
    a, b = ints("i8", (2, 3, 7)), ints("i8", (2, 7, 4))
    g = Graph()
    out = g.op("matmul", [g.input(a, "i8"), g.const(b, "i8"), g.const([5], "i8"),
                          g.const([-3], "i8")], (2, 3, 4), "i32")
    got = machine_kernel("matmul", {"a": (a, "i8"), "b": (b, "i8")}, (2, 3, 4), "i32",
                         a_zp=5, b_zp=-3)
    assert np.array_equal(got, g.run(out))


@pytest.mark.parametrize("dtype", ["i8", "i16"])
def test_pooling(dtype):
    x = ints(dtype, (1, 7, 5, 3))
    attrs = f"kernel = {arr((3, 2))}, pad = {arr((1, 1, 1, 0))}, stride = {arr((2, 1))}"
    zp = 4 if dtype == "i8" else 0
    g = Graph()
    xin = g.input(x, dtype)
    avg = g.op("avg_pool2d", [xin, g.const([zp], dtype), g.const([-zp], dtype)], (1, 4, 5, 3),
               dtype, f"acc_type = i32, {attrs}")
    want_avg = g.run(avg)
    g = Graph()
    mx = g.op("max_pool2d", [g.input(x, dtype)], (1, 4, 5, 3), dtype, attrs)
    want_max = g.run(mx)
    kw = dict(kernel=(3, 2), pad=(1, 1, 1, 0), stride=(2, 1))
    assert np.array_equal(machine_kernel("avg_pool2d", {"in": (x, dtype)}, (1, 4, 5, 3), dtype,
                                         in_zp=zp, out_zp=-zp, **kw), want_avg)
    assert np.array_equal(machine_kernel("max_pool2d", {"in": (x, dtype)}, (1, 4, 5, 3), dtype,
                                         **kw), want_max)


@pytest.mark.parametrize("op, dtype, shift", [("add", "i32", 0), ("sub", "i32", 0),
                                              ("maximum", "i32", 0), ("minimum", "i32", 0),
                                              ("mul", "i8", 0), ("mul", "i16", 0),
                                              ("mul", "i32", 31)])
def test_elementwise(op, dtype, shift):
    # TOSA leaves int32 overflow unpredictable: keep sums and products in range
    lo, hi = (-(1 << 30), 1 << 30) if dtype == "i32" else (None, None)
    a, b = ints(dtype, (2, 3, 4), lo, hi), ints(dtype, (2, 1, 4), lo, hi)
    g = Graph()
    ops = [g.input(a, dtype), g.const(b, dtype)]
    if op == "mul":
        ops.append(g.const([shift], "i8"))
    want = g.run(g.op(op, ops, (2, 3, 4), "i32"))
    extra = {"mul_shift": shift} if op == "mul" else {}
    assert np.array_equal(machine_kernel(op, {"a": (a, dtype), "b": (b, dtype)}, (2, 3, 4),
                                         "i32", **extra), want)


def test_add_with_fused_output_rescale():
    a, b = ints("i32", (3, 8), -1 << 20, 1 << 20), ints("i32", (3, 8), -1 << 20, 1 << 20)
    g = Graph()
    s = g.op("add", [g.input(a, "i32"), g.const(b, "i32")], (3, 8), "i32")
    out = g.op("rescale", [s, g.const([1 << 30], "i32"), g.const([40], "i8"),
                           g.const([0], "i32"), g.const([5], "i8")], (3, 8), "i8",
               "input_unsigned = false, output_unsigned = false, per_channel = false, "
               "rounding_mode = SINGLE_ROUND, scale32 = true")
    got = machine_kernel("add", {"a": (a, "i32"), "b": (b, "i32"), "mult": ([1 << 30], "i32"),
                                 "shift": ([40], "i8")}, (3, 8), "i8", out_zp=5)
    assert np.array_equal(got, g.run(out))


@pytest.mark.parametrize("in_t, out_t, scale32, rounding, per_channel, unsigned", [
    ("i8", "i32", True, "SINGLE_ROUND", False, None),
    ("i32", "i16", True, "DOUBLE_ROUND", True, None),
    ("i16", "i8", False, "SINGLE_ROUND", True, None),
    ("i8", "i8", True, "SINGLE_ROUND", False, "input"),
    ("i8", "i8", True, "DOUBLE_ROUND", False, "output"),
])
def test_rescale(in_t, out_t, scale32, rounding, per_channel, unsigned):
    # apply_scale_32 REQUIREs |value| < 2^(shift - 1): keep int32 inputs below 2^19
    x = ints(in_t, (4, 5), -(1 << 19), 1 << 19) if in_t == "i32" else ints(in_t, (4, 5))
    n = 5 if per_channel else 1
    mult = ints("i32", (n,), 1 << 28, (1 << 31) - 1) if scale32 else ints("i16", (n,), 1, 32767)
    shift = ints("i8", (n,), 20 if scale32 else 5, 40 if scale32 else 18)
    in_zp = {"input": 128, None: 3 if in_t == "i8" else 0, "output": -4}[unsigned]
    out_zp = {"output": 100, None: -6 if out_t == "i8" else 0, "input": 2}[unsigned]
    zp_type = lambda t: "i32" if t == "i32" else ("i16" if t == "i16" else "i8")   # noqa: E731
    g = Graph()
    out = g.op("rescale", [g.input(x, in_t), g.const(mult, "i32" if scale32 else "i16"),
                           g.const(shift, "i8"), g.const([in_zp if unsigned != "input" else
                                                          in_zp - 256], zp_type(in_t)),
                           g.const([out_zp], zp_type(out_t))], (4, 5), out_t,
               f"input_unsigned = {str(unsigned == 'input').lower()}, "
               f"output_unsigned = {str(unsigned == 'output').lower()}, "
               f"per_channel = {str(per_channel).lower()}, rounding_mode = {rounding}, "
               f"scale32 = {str(scale32).lower()}")
    want = g.run(out)
    got = machine_kernel("rescale", {"in": (x, in_t), "mult": (mult, "i32" if scale32 else "i16"),
                                     "shift": (shift, "i8")}, (4, 5), out_t, in_zp=in_zp,
                         out_zp=out_zp, scale32=int(scale32),
                         rounding="double" if rounding == "DOUBLE_ROUND" else "single",
                         input_unsigned=int(unsigned == "input"),
                         output_unsigned=int(unsigned == "output"))
    assert np.array_equal(tosa_int.wrap(got, int(out_t[1:])), want)


@pytest.mark.parametrize("dtype", ["i8", "i16"])
def test_table(dtype):
    x = ints(dtype, (6, 7))
    size = 256 if dtype == "i8" else 513
    lo, hi = (-128, 127) if dtype == "i8" else (-20000, 20000)     # i16 slopes stay in range
    tab = np.sort(ints(dtype, (size,), lo, hi))
    out_t = "i8" if dtype == "i8" else "i32"
    g = Graph()
    want = g.run(g.op("table", [g.input(x, dtype), g.const(tab, dtype)], (6, 7), out_t))
    assert np.array_equal(machine_kernel("table", {"in": (x, dtype), "table": (tab, dtype)},
                                         (6, 7), out_t), want)


@pytest.mark.parametrize("name, tosa, dtype, out_shape, out_t, attrs, tosa_attrs", [
    ("clamp", "clamp", "i8", (3, 9), "i8", dict(min=-20, max=33),
     "max_val = 33 : i8, min_val = -20 : i8"),
    ("reduce_sum", "reduce_sum", "i32", (1, 9), "i32", dict(axis=0), "axis = 0 : i32"),
    ("reduce_max", "reduce_max", "i16", (3, 1), "i16", dict(axis=1), "axis = 1 : i32"),
    ("argmax", "argmax", "i8", (3,), "i32", dict(axis=1), "axis = 1 : i32"),
    ("clz", "clz", "i32", (3, 9), "i32", {}, ""),
    ("cast", "cast", "i32", (3, 9), "i8", {}, ""),
    ("cast", "cast", "i8", (3, 9), "i32", {}, ""),
    ("transpose", "transpose", "i16", (9, 3), "i16", dict(perms=(1, 0)),
     "perms = array<i32: 1, 0>"),
])
def test_unary(name, tosa, dtype, out_shape, out_t, attrs, tosa_attrs):
    x = ints(dtype, (3, 9), -(1 << 28), 1 << 28) if name == "reduce_sum" else ints(dtype, (3, 9))
    if name == "clz":
        x = x >> rng.integers(0, 31, x.shape)
    g = Graph()
    want = g.run(g.op(tosa, [g.input(x, dtype)], out_shape, out_t, tosa_attrs))
    assert np.array_equal(machine_kernel(name, {"in": (x, dtype)}, out_shape, out_t, **attrs),
                          want)


@pytest.mark.parametrize("rnd", [False, True])
def test_shifts(rnd):
    a, b = ints("i32", (4, 6)), ints("i32", (1, 6), 0, 31)
    g = Graph()
    want = g.run(g.op("arithmetic_right_shift", [g.input(a, "i32"), g.const(b, "i32")], (4, 6),
                      "i32", f"round = {str(rnd).lower()}"))
    got = machine_kernel("arithmetic_right_shift", {"a": (a, "i32"), "b": (b, "i32")}, (4, 6),
                         "i32", round=int(rnd))
    assert np.array_equal(got, want)
    g = Graph()
    want = g.run(g.op("logical_left_shift", [g.input(a, "i32"), g.const(b, "i32")], (4, 6),
                      "i32"))
    assert np.array_equal(machine_kernel("logical_left_shift", {"a": (a, "i32"),
                                                                "b": (b, "i32")}, (4, 6), "i32"),
                          want)


def test_data_movement():
    x, y = ints("i8", (2, 3, 4)), ints("i8", (2, 2, 4))
    g = Graph()
    want = g.run(g.op("pad", [g.input(x, "i8"), g.shape([0, 1, 2, 0, 1, 1]), g.const([-5], "i8")],
                      (3, 5, 6), "i8"))
    assert np.array_equal(machine_kernel("pad", {"in": (x, "i8")}, (3, 5, 6), "i8",
                                         padding=(0, 1, 2, 0, 1, 1), value=-5), want)
    g = Graph()
    want = g.run(g.op("slice", [g.input(x, "i8"), g.shape([1, 0, 1]), g.shape([1, 2, 3])],
                      (1, 2, 3), "i8"))
    assert np.array_equal(machine_kernel("slice", {"in": (x, "i8")}, (1, 2, 3), "i8",
                                         start=(1, 0, 1), size=(1, 2, 3)), want)
    g = Graph()
    want = g.run(g.op("concat", [g.input(x, "i8"), g.const(y, "i8")], (2, 5, 4), "i8",
                      "axis = 1 : i32"))
    assert np.array_equal(machine_kernel("concat", {"in0": (x, "i8"), "in1": (y, "i8")},
                                         (2, 5, 4), "i8", axis=1), want)
    g = Graph()
    want = g.run(g.op("reshape", [g.input(x, "i8"), g.shape([4, 6])], (4, 6), "i8"))
    assert np.array_equal(machine_kernel("reshape", {"in": (x, "i8")}, (4, 6), "i8"), want)


def softmax_graph(x, tables, in_zp, diff_mult, diff_shift):
    """The int8 SOFTMAX sequence tosa-converter-for-tflite emits, written out op by op."""
    g = Graph()
    shape, row = x.shape, x.shape[:-1] + (1,)
    c = lambda v: g.const([[v]] if len(shape) == 2 else v, "i32")                 # noqa: E731
    one, s30 = g.const([1 << 30], "i32"), g.const([30], "i8")
    rs = ("input_unsigned = false, output_unsigned = false, per_channel = false, "
          "rounding_mode = SINGLE_ROUND, scale32 = true")
    v = g.op("rescale", [g.input(x, "i8"), one, s30, g.const([in_zp], "i8"),
                         g.const([0], "i32")], shape, "i32", rs)
    v = g.op("sub", [v, g.op("reduce_max", [v], row, "i32", "axis = 1 : i32")], shape, "i32")
    v = g.op("rescale", [v, g.const([diff_mult], "i32"), g.const([diff_shift], "i8"),
                         g.const([0], "i32"), g.const([0], "i16")], shape, "i16", rs)
    t = [g.op("table", [v, g.const(tab, "i16")], shape, "i32") for tab in tables]
    parts = [g.op("logical_left_shift", [t[i], c(s)], shape, "i32")
             for i, s in enumerate((17, 9, 1))]
    parts.append(g.op("arithmetic_right_shift", [t[3], c(7)], shape, "i32", "round = true"))
    e = parts[0]
    for p in parts[1:]:
        e = g.op("add", [e, p], shape, "i32")
    s = g.op("reduce_sum", [g.op("arithmetic_right_shift", [e, c(12)], shape, "i32",
                                 "round = true")], row, "i32", "axis = 1 : i32")
    z = g.op("clz", [s], row, "i32")
    n = g.op("logical_left_shift", [s, g.op("sub", [z, c(1)], row, "i32")], row, "i32")
    s31 = g.const([31], "i8")
    r = g.op("add", [g.op("mul", [n, c(-1010580540), s31], row, "i32"), c(1515870810)], row,
             "i32")
    for _ in range(3):
        err = g.op("sub", [c(536870912), g.op("mul", [r, n, s31], row, "i32")], row, "i32")
        step = g.op("mul", [g.op("mul", [r, err, s31], row, "i32"), c(4), g.const([0], "i8")],
                    row, "i32")
        r = g.op("add", [r, step], row, "i32")
    out = g.op("arithmetic_right_shift", [g.op("mul", [e, r, s30], shape, "i32"),
                                          g.op("sub", [c(35), z], row, "i32")], shape, "i32",
               "round = true")
    return g.run(g.op("rescale", [out, one, s30, g.const([0], "i32"), g.const([-128], "i8")],
                      shape, "i8", rs))


def test_softmax_is_the_tosa_sequence():
    x = ints("i8", (3, 10))
    # four 513-entry tables whose pieces add up like the converter's exp tables without
    # overflowing (e stays below 2^23): coarse, middle and fine parts of a decreasing curve
    curve = np.exp(np.linspace(-8, 0, 513))
    tables = [np.round(curve * top).astype(np.int64) for top in (15, 255, 32767, 32767)]
    want = softmax_graph(x, tables, in_zp=-3, diff_mult=1 << 30, diff_shift=23)
    got = machine_kernel("softmax", {"in": (x, "i8"), **{f"t{i}": (t, "i16") for i, t in
                                                         enumerate(tables)}},
                         (3, 10), "i8", in_zp=-3, diff_mult=1 << 30, diff_shift=23)
    assert np.array_equal(got, want)
    assert np.array_equal(kernel_ops.softmax(x, tables, -3, 1 << 30, 23, -128), want)


def test_scale_helpers_match_the_spec_vectors():
    # derived from the spec's pseudocode (docs/sources.md#tosa)
    m, s = tosa_int.reciprocal_scale([1, 2, 3, 4, 9, 25, 49])
    assert m.tolist() == [1073741825, 1073741825, 1431655766, 1073741825, 1908874355,
                          1374389536, 1402438302]
    assert s.tolist() == [30, 31, 32, 32, 34, 35, 36]
    assert tosa_int.apply_scale_32([-5, -3, -1, 1, 3, 5], 1 << 30, 31).tolist() == \
        [-2, -1, 0, 1, 2, 3]
    v = [-1536, -512, 512, 1535]
    assert tosa_int.apply_scale_32(v, 1 << 30, 40).tolist() == [-1, 0, 1, 1]
    assert tosa_int.apply_scale_32(v, 1 << 30, 40, True).tolist() == [-2, -1, 1, 2]
    assert tosa_int.clz32([0, 1, -1, 0x7FFFFFFF]).tolist() == [32, 31, 0, 1]


@pytest.mark.parametrize("scale32, double_round", [(True, False), (True, True), (False, False)])
@pytest.mark.parametrize("unsigned", [False, True])
def test_compiled_rescale_matches_its_numpy_twin(scale32, double_round, unsigned):
    """Any values, multipliers and shifts (also outside what TOSA allows: the numpy shifts'
    edge behaviour), per tensor and per channel, and a broadcast only the twin takes."""
    x = rng.integers(-(1 << 40), 1 << 40, (3, 5, 7))
    for mult, shift in ((rng.integers(-(1 << 31), 1 << 31, 7), rng.integers(-70, 70, 7)),
                        ([1 << 30], [35]), (rng.integers(0, 1 << 15, 7), rng.integers(2, 50, 7)),
                        (rng.integers(0, 1 << 30, (5, 1)), [31])):
        for out_t in ("i8", "u16", "i32"):
            args = (x, mult, shift, -7, 3, out_t, scale32, double_round, unsigned, 16)
            assert np.array_equal(tosa_int.rescale(*args), tosa_int.rescale_np(*args))


def test_compiled_conv2d_and_matmul_match_their_numpy_twins():
    """Random shapes, padding, strides, dilations, zero points and biases (also a bias that
    wraps int32), and batched matrix products."""
    checked = 0
    while checked < 200:
        n, h, w, ic, oc = rng.integers(1, 3), *rng.integers(1, 9, 2), *rng.integers(1, 20, 2)
        kernel = tuple(int(k) for k in rng.integers(1, 4, 2))
        pad = tuple(int(p) for p in rng.integers(0, 3, 4))
        stride, dilation = (tuple(int(s) for s in rng.integers(1, 3, 2)) for _ in range(2))
        oh, ow, _ = kernel_ops.conv_out_hw((h, w), kernel, pad, stride, dilation)
        if oh < 1 or ow < 1:
            continue
        x, weights = ints("i8", (n, h, w, ic)), ints("i8", (oc, *kernel, ic))
        bias = ints("i32", (oc,)) if checked % 2 else None
        zps = tuple(int(z) for z in ints("i8", 2))
        args = (x, weights, bias, pad, stride, dilation, *zps)
        assert np.array_equal(cluster_conv.conv2d(*args), kernel_ops.conv2d(*args))
        a, b = ints("i8", (n, h, ic)), ints("i8", (n, ic, oc))
        assert np.array_equal(cluster_conv.matmul(a, b, *zps), kernel_ops.matmul(a, b, *zps))
        checked += 1


@pytest.mark.parametrize("zp", [2 ** 31 - 129, -(2 ** 31 - 129), 2 ** 31, -(2 ** 40)])
def test_compiled_conv2d_with_zero_points_near_and_past_int32(zp):
    """A trace may give any zero point: the operands leave int32 when it would not hold them
    (checked against exact Python integers, wrapped to int32 as CONV2D's accumulator is)."""
    x = np.array([-128, 127]).reshape(1, 1, 2, 1)
    weights = np.array([127, -128]).reshape(2, 1, 1, 1)
    got = cluster_conv.conv2d(x, weights, None, (0, 0, 0, 0), (1, 1), (1, 1), zp, 3)
    want = [[(int(a) - zp) * (int(w) - 3) for w in weights.reshape(-1)] for a in x.reshape(-1)]
    wrapped = (np.array(want, object) + 2 ** 31) % 2 ** 32 - 2 ** 31
    assert got.reshape(2, 2).tolist() == wrapped.tolist()
