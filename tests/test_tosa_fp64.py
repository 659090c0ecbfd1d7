"""In-process fp64 references and bounds against the reference model binary's precise mode."""

import numpy as np
import pytest

from hwsim.tosa import fp64
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.reference import precise

NP = {"fp32": np.float32, "fp16": np.float16}


def data(rng, shape, dt, zeros=0.25, tiny=0.1):
    """Normal values with some exact zeros and some below the type's smallest normal."""
    x = rng.normal(size=shape)
    x[rng.random(shape) < zeros] = 0
    small = rng.random(shape) < tiny
    x[small] *= 2.0 ** (-130 if dt == "fp32" else -16)
    return x.astype(NP[dt])


def both(build, inputs, dt):
    """(in-process, binary) (reference, bound) of the last operator ``build`` adds."""
    b = GraphBuilder()
    tensors = [b.input(a.shape, dt) for a in inputs]
    out = build(b, *tensors)
    graph = b.build(out)
    values = {t.name: a for t, a in zip(graph.inputs, inputs)}
    ours = fp64.reference(graph.operators[-1], values)
    assert ours is not None
    return ours, precise(graph, values)[out.name]


def assert_close(ours, theirs, rel=1e-13):
    """References and bounds agree to fp64 rounding (dot products sum in another order: within
    ``rel`` of the bound), infinities and NaNs in the same places."""
    (ref, bnd), (ref_b, bnd_b) = ours, theirs
    assert ref.shape == ref_b.shape and bnd.shape == bnd_b.shape
    for a, b in ((ref, ref_b), (bnd, bnd_b)):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        with np.errstate(invalid="ignore"):
            near = np.abs(a - b) <= rel * bnd_b
        assert np.all(same | near), np.nanmax(np.abs(a - b) / bnd_b)


CONVS = [dict(stride=(1, 1), pad=(1, 1, 1, 1), dilation=(1, 1)),
         dict(stride=(2, 1), pad=(0, 2, 1, 0), dilation=(1, 2)),
         dict(stride=(1, 2), pad=(2, 0, 0, 1), dilation=(2, 1))]


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
@pytest.mark.parametrize("local", [False, True])
@pytest.mark.parametrize("geometry", CONVS)
def test_convolutions_match_the_binary(dt, local, geometry):
    rng = np.random.default_rng(len(dt) + 2 * local + 3 * CONVS.index(geometry))
    x = data(rng, (2, 7, 8, 3), dt)
    w, bias = data(rng, (4, 3, 3, 3), dt), data(rng, (4,), dt)
    wd, bias_d = data(rng, (3, 3, 3, 2), dt), data(rng, (6,), dt)

    def conv(b, x):
        y = b.conv2d(x, b.const(w, dt), b.const(bias, dt), **geometry)
        b.operators[-1].attrs["local_bound"] = local
        return y

    def depthwise(b, x):
        y = b.depthwise_conv2d(x, b.const(wd, dt), b.const(bias_d, dt), **geometry)
        b.operators[-1].attrs["local_bound"] = local
        return y

    assert_close(*both(conv, [x], dt))
    assert_close(*both(depthwise, [x], dt))


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
@pytest.mark.parametrize("local", [False, True])
def test_infinite_inputs_propagate_as_in_the_binary(dt, local):
    """inf * 0 is NaN, inf - inf is NaN, the bound of a window with an infinity is infinite."""
    rng = np.random.default_rng(5)
    x = data(rng, (1, 5, 6, 3), dt)
    x[0, 1, 2, 0], x[0, 3, 4, 1], x[0, 3, 3, 1] = np.inf, -np.inf, np.inf
    w, bias = data(rng, (4, 3, 3, 3), dt, zeros=0.5), data(rng, (4,), dt)
    wd, bias_d = data(rng, (3, 3, 3, 1), dt, zeros=0.5), data(rng, (3,), dt)
    a, b_ = data(rng, (1, 4, 5), dt), data(rng, (1, 5, 3), dt, zeros=0.5)
    a[0, 1, 2] = np.inf

    def conv(op):
        def build(b, x):
            weight, bias_ = (w, bias) if op == "CONV2D" else (wd, bias_d)
            y = getattr(b, op.lower())(x, b.const(weight, dt), b.const(bias_, dt),
                                       pad=(1, 1, 1, 1))
            b.operators[-1].attrs["local_bound"] = local
            return y
        return build

    for op in ("CONV2D", "DEPTHWISE_CONV2D"):
        assert_close(*both(conv(op), [x], dt))
    assert_close(*both(lambda b, p, q: b.matmul(p, q), [a, b_], dt))
    assert_close(*both(lambda b, x: b.avg_pool2d(x, (3, 3), (1, 1), (1, 1, 1, 1)), [x], dt))
    assert_close(*both(lambda b, x: b.reduce("REDUCE_SUM", x, 2), [x], dt))
    assert_close(*both(lambda b, x, y: b.add(x, y), [x, -x], dt), 0)


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_dot_products_of_zeros_have_the_normal_min_bound(dt):
    """Zero inputs, weights and bias count as normal_min in the bound, never as 0."""
    x, w = np.zeros((1, 2, 2, 2), NP[dt]), np.zeros((3, 1, 1, 2), NP[dt])
    (ref, bnd), theirs = both(lambda b, x: b.conv2d(x, b.const(w, dt), b.const(
        np.zeros(3), dt)), [x], dt)
    tiny = 2.0 ** (-126 if dt == "fp32" else -14)
    assert np.all(ref == 0) and np.allclose(bnd, 2 * tiny * tiny + tiny, rtol=1e-15, atol=0)
    assert_close((ref, bnd), theirs)


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_matmul_pools_and_reductions_match_the_binary(dt):
    rng = np.random.default_rng(7)
    a, b_ = data(rng, (2, 5, 6), dt), data(rng, (2, 6, 3), dt)
    x = data(rng, (1, 6, 7, 3), dt)
    assert_close(*both(lambda b, p, q: b.matmul(p, q), [a, b_], dt))
    for kernel, stride, pad in (((2, 2), (2, 1), (0, 0, 1, 0)), ((3, 3), (1, 1), (1, 1, 1, 1)),
                                ((6, 7), (1, 1), (0, 0, 0, 0))):
        assert_close(*both(lambda b, x: b.avg_pool2d(x, kernel, stride, pad), [x], dt))
        assert_close(*both(lambda b, x: b.max_pool2d(x, kernel, stride, pad), [x], dt), 0)
    for axis in range(4):
        assert_close(*both(lambda b, x: b.reduce("REDUCE_SUM", x, axis), [x], dt))
        for op in ("REDUCE_MAX", "REDUCE_MIN"):
            assert_close(*both(lambda b, x: b.reduce(op, x, axis), [x], dt), 0)


ELEMENTWISE = {
    "ADD": lambda b, x, y: b.add(x, y), "SUB": lambda b, x, y: b.sub(x, y),
    "MUL": lambda b, x, y: b.mul(x, y),
    "MAXIMUM": lambda b, x, y: b._binary("MAXIMUM", x, y, nan_mode="PROPAGATE"),
    "MINIMUM": lambda b, x, y: b._binary("MINIMUM", x, y, nan_mode="PROPAGATE"),
    "CONCAT": lambda b, x, y: b.concat([x, y], 1),
    "RECIPROCAL": lambda b, x, y: b.unary("RECIPROCAL", x),
    "EXP": lambda b, x, y: b.unary("EXP", x), "SIGMOID": lambda b, x, y: b.unary("SIGMOID", x),
    "TANH": lambda b, x, y: b.unary("TANH", x), "IDENTITY": lambda b, x, y: b.unary("IDENTITY", x),
    "CLAMP": lambda b, x, y: b.clamp(x, -0.5, 0.75),
    "RESHAPE": lambda b, x, y: b.reshape(x, (4, 3, 5)),
    "TRANSPOSE": lambda b, x, y: b.transpose(x, (2, 0, 1)),
    "SLICE": lambda b, x, y: b.slice(x, (1, 0, 2), (2, 4, 3)),
    "PAD": lambda b, x, y: b.pad(x, (1, 0, 0, 2, 1, 1), 0.5),
}


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_and_data_movement_match_the_binary(dt, name):
    rng = np.random.default_rng(11)
    x, y = data(rng, (3, 4, 5), dt), data(rng, (3, 1, 5), dt)
    if name == "CONCAT":
        y = data(rng, (3, 2, 5), dt)
    (ref, bnd), (ref_b, bnd_b) = both(lambda b, p, q: ELEMENTWISE[name](b, p, q), [x, y], dt)
    # the same fp64 operations; numpy's exp and tanh within two fp64 ulps of the C library's
    tol = 4 * 2 ** -53 if name in ("EXP", "SIGMOID", "TANH") else 0
    np.testing.assert_allclose(ref, ref_b, rtol=tol, atol=0)
    np.testing.assert_allclose(bnd, bnd_b, rtol=tol, atol=0)


def test_every_operator_is_tested():
    tested = {"CONV2D", "DEPTHWISE_CONV2D", "MATMUL", "AVG_POOL2D", "MAX_POOL2D", "REDUCE_SUM",
              "REDUCE_MAX", "REDUCE_MIN"} | set(ELEMENTWISE)
    assert tested == set(fp64.OPERATORS)


def test_what_it_leaves_to_the_binary():
    b = GraphBuilder()
    x = b.input((2, 3), "fp32")
    g = b.build(b.unary("EXP", x), b.cast(x, "fp16"))
    exp, cast = g.operators
    assert fp64.reference(exp, {x.name: np.array([[0, 1, np.nan]] * 2, np.float32)}) is None
    assert fp64.reference(cast, {x.name: np.ones((2, 3), np.float32)}) is None   # not covered
    b = GraphBuilder()
    x = b.input((2, 3), "int32")
    g = b.build(b.add(x, x))
    assert fp64.reference(g.operators[0], {x.name: np.ones((2, 3), np.int32)}) is None


def test_references_send_the_rest_to_the_binary_in_one_run(monkeypatch):
    """Covered operators in-process; CAST and a NaN input through one precise-mode run."""
    rng = np.random.default_rng(9)
    b = GraphBuilder()
    x, y = b.input((1, 4, 4, 2), "fp32"), b.input((1, 4, 4, 2), "fp32")
    w = b.const(data(rng, (3, 1, 1, 2), "fp32"), "fp32")
    conv_x = b.conv2d(x, w, b.const(np.zeros(3), "fp32"))
    conv_y = b.conv2d(y, w, b.const(np.zeros(3), "fp32"))
    g = b.build(conv_x, conv_y, b.cast(x, "fp16"))
    values = {x.name: data(rng, x.shape, "fp32"), y.name: data(rng, y.shape, "fp32")}
    nan = dict(values)
    nan[y.name] = values[y.name].copy()
    nan[y.name][0, 1, 1, 0] = np.nan
    items = [(g.operators[0], values), (g.operators[1], nan), (g.operators[2], values)]
    runs = []
    monkeypatch.setattr(fp64, "precise", lambda *a: runs.append(a) or precise(*a))
    found = fp64.references(items)
    assert len(runs) == 1 and len(runs[0][0].operators) == 2
    for (op, given), pair in zip(items, found):
        single = g.operator_graph(op)
        assert_close(pair, precise(single, {t.name: given[t.name] for t in single.inputs})[
            op.output.name])


def _depthwise_by_taps(op, x, w, b):
    """The depthwise reference and bound as whole-array sums, tap after tap: the fp64
    operations ``fp64._depthwise`` does in one compiled pass."""
    kh, kw, c, m = w.shape

    def conv(x, w, b):
        cols = fp64._windows(x, (kh, kw), op.stride, op.dilation, op.pad)
        out = np.zeros(cols.shape[:3] + (c, m))
        for ky in range(kh):
            for kx in range(kw):
                out += cols[:, :, :, ky, kx, :, None] * w[ky, kx]
        return out.reshape(out.shape[:3] + (c * m,)) + b

    xa, wa, ba = fp64._magnitudes(op, x, w, b)
    if not op.local_bound:
        xa = np.full_like(xa, xa.max())
    return conv(x, w, b), conv(xa, wa, ba)


@pytest.mark.parametrize("local", [False, True])
@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("geometry", CONVS + [dict(stride=(2, 2), pad=(0, 1, 0, 1),
                                                   dilation=(1, 1))])
def test_depthwise_sums_are_the_tap_by_tap_sums_bit_for_bit(local, multiplier, geometry):
    """Signed zeros, infinities in the input and the weights (inf * 0 is NaN in the padding
    too), both depth multipliers' loops and each magnitude reading."""
    rng = np.random.default_rng(CONVS.index(geometry) if geometry in CONVS else 9)
    b = GraphBuilder()
    x = data(rng, (2, 9, 8, 5), "fp32").astype(np.float64)
    x[0, 1, 2, 3], x[1, 4, 4, 0], x[0, 0, 0, 1] = np.inf, -np.inf, -0.0
    w = data(rng, (3, 3, 5, multiplier), "fp32", zeros=0.3).astype(np.float64)
    w[1, 1, 2, 0], w[0, 0, 1, 0] = -0.0, np.inf
    bias = rng.normal(size=5 * multiplier)
    b.depthwise_conv2d(b.input(x.shape, "fp32"), b.const(w.astype(np.float32), "fp32"),
                       b.const(bias.astype(np.float32), "fp32"), **geometry)
    op = b.operators[-1]
    op.attrs["local_bound"] = local
    with np.errstate(invalid="ignore"):
        want, got = _depthwise_by_taps(op, x, w, bias), fp64._depthwise(op, x, w, bias)
    for a, c in zip(want, got):
        assert a.shape == c.shape and a.tobytes() == c.tobytes()
    assert np.isnan(got[0]).any() and np.isinf(got[1]).any()
