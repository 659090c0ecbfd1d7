"""fp64 references and dot-product bounds of floating-point operators, computed in-process.

What the reference model binary's precise mode (``--precise_mode 1``, ``reference.precise``)
returns, vectorised with numpy (a depthwise convolution in one compiled pass): ``output_ref``,
the operator in fp64 arithmetic on the inputs' values, and ``output_bnd``, its second run in
"abs mode" (TOSA 1.0 1.8.2, ``tosa_reference_check_dotproduct``, S0:L632). Its abs mode, as
the reference model (tosa-tools 2026.8) implements it and the tests check against the binary:

* dot products take ``max(|input|, normal_min)``, ``max(|weight|, normal_min)`` and
  ``max(|bias|, normal_min)`` (``normal_min`` of the input type). Without ``local_bound`` every
  input element is replaced by the largest: CONV2D's padding too, DEPTHWISE_CONV2D's stays
  zero; with it, CONV2D's padding counts as ``normal_min`` and DEPTHWISE_CONV2D's as zero.
  MATMUL (no ``local_bound`` attribute) keeps the elements; AVG_POOL2D and REDUCE_SUM sum the
  magnitudes the same way (AVG_POOL2D divides by the count of elements inside the padding, as
  its reference does);
* EXP, SIGMOID and TANH return the magnitude factor of their error bound (``2|x|``,
  ``2(1 + |x|)``, ``8|x|``);
* every other covered operator (element-wise arithmetic, CLAMP, the maximum family, data
  movement) returns its reference again.

How close: the dot products are BLAS sums in another order than the binary's Eigen loops. Both
are fp64 sums of KS products, so they differ by at most ``2 KS 2^-53`` times the bound: at most
``KS 2^-28`` (fp32) or ``KS 2^-41`` (fp16) of the unit ``bnd 2^-(1 + frac)`` in which the
dot-product test measures the error, against its limit ``ABS_BOUND = 2 ksb >= 2``; the bounds
agree as closely. Element-wise operators are the same fp64 operations (numpy's ``exp`` and
``tanh`` within two fp64 ulps of the C library's). Operators not in ``OPERATORS`` (CAST,
TRANSPOSE_CONV2D, CONV3D, RSQRT, ERF, ...), and NaN inputs (whose propagation through the
maxima of the bound is the binary's Eigen's to define), go to the binary (``references``).
"""

from __future__ import annotations

from typing import Mapping

import numba
import numpy as np
from numpy.lib.stride_tricks import as_strided

from hwsim.blas import one_thread
from hwsim.shapes import conv_out
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.reference import precise


def _windows(x: np.ndarray, kernel, stride, dilation, pad, fill: float = 0.0) -> np.ndarray:
    """[N, OH, OW, KH, KW, C] windows of an NHWC tensor padded with ``fill`` (a view)."""
    top, bottom, left, right = pad
    if any(pad):
        x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    n, h, w, c = x.shape
    kh, kw = kernel
    oh = conv_out(h, kh, 0, 0, stride[0], dilation[0])[0]        # x is padded already
    ow = conv_out(w, kw, 0, 0, stride[1], dilation[1])[0]
    sn, sh, sw, sc = x.strides
    return as_strided(x, (n, oh, ow, kh, kw, c),
                      (sn, sh * stride[0], sw * stride[1], sh * dilation[0], sw * dilation[1], sc),
                      writeable=False)


def _magnitudes(op: Operator, *arrays) -> list[np.ndarray]:
    """``max(|a|, normal_min)`` of the input type, element-wise."""
    tiny = op.inputs[0].dtype.normal_min
    out = [np.abs(a, out=np.empty_like(a)) for a in arrays]     # arrays, 0-d ones too
    for m in out:
        np.maximum(m, tiny, out=m)
    return out


def _largest(op: Operator, x: np.ndarray) -> float:
    """The largest of ``_magnitudes(op, x)``, without making them."""
    return max(float(x.max()), -float(x.min()), op.inputs[0].dtype.normal_min)


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in fp64; with infinities, a loop that forms every product (as the reference
    model does: inf * 0 is NaN), which BLAS kernels need not."""
    if np.isfinite(a).all() and np.isfinite(b).all():
        return a @ b
    return np.einsum("...ik,...kj->...ij", a, b, optimize=False)


def _conv2d(op, x, w, b):
    kernel = w.shape[1:3]

    def conv(x, w, b, fill=0.0):
        cols = _windows(x, kernel, op.stride, op.dilation, op.pad, fill)
        n, oh, ow = cols.shape[:3]
        out = _product(cols.reshape(n * oh * ow, -1),
                       np.ascontiguousarray(w.reshape(w.shape[0], -1).T))
        return out.reshape(n, oh, ow, -1) + b

    ref = conv(x, w, b)
    wa, ba = _magnitudes(op, w, b)
    if op.local_bound:                   # the padding is magnitudes too: normal_min
        return ref, conv(*_magnitudes(op, x), wa, ba, op.inputs[0].dtype.normal_min)
    # every input element, padding included, is the largest magnitude
    return ref, np.broadcast_to(_largest(op, x) * wa.reshape(wa.shape[0], -1).sum(axis=1) + ba,
                                ref.shape).copy()


def _depthwise(op, x, w, b):
    kh, kw, c, m = w.shape
    n, h, width, _ = x.shape
    top, bottom, left, right = op.pad
    oh = conv_out(h, kh, top, bottom, op.stride[0], op.dilation[0])[0]
    ow = conv_out(width, kw, left, right, op.stride[1], op.dilation[1])[0]

    def conv(x, w, b, flat=0.0):
        out = np.empty((n, oh, ow, c * m))
        # writable arrays all (a read-only one is another signature to compile)
        _depthwise_sums(np.ascontiguousarray(x), np.ascontiguousarray(w),
                        np.broadcast_to(b, (c * m,)).copy(), op.stride[0],
                        op.stride[1], op.dilation[0], op.dilation[1], top, left, flat, out)
        return out

    wa, ba = _magnitudes(op, w, b)
    if op.local_bound:
        return conv(x, w, b), conv(*_magnitudes(op, x), wa, ba)
    return conv(x, w, b), conv(x, wa, ba, flat=_largest(op, x))     # padding stays zero


@numba.njit(cache=True, nogil=True)
def _depthwise_sums(x, w, b, sy, sx, dy, dx, top, left, flat, out):
    """``out[n, y, x, c * M + m]``: the products ``x * w`` of the taps summed from 0 in
    (ky, kx) order, then ``+ b``: the fp64 operations of adding whole tap arrays in turn, in
    one pass. A tap in the padding reads 0 and its product is formed (inf * 0 is NaN); with
    ``flat`` > 0 every other tap reads ``flat`` (the bound's largest magnitude)."""
    _, h, width, c_in = x.shape
    kh, kw, _, m_out = w.shape
    for n in range(out.shape[0]):
        for oy in range(out.shape[1]):
            for ox in range(out.shape[2]):
                row = out[n, oy, ox]
                for k in range(row.size):
                    row[k] = 0.0
                for ky in range(kh):
                    iy = oy * sy + ky * dy - top
                    for kx in range(kw):
                        ix = ox * sx + kx * dx - left
                        tap = w[ky, kx]
                        inside = 0 <= iy < h and 0 <= ix < width
                        # a pixel in range either way; read only when the tap is inside
                        pixel = x[n, min(max(iy, 0), h - 1), min(max(ix, 0), width - 1)]
                        if m_out == 1 and inside:       # contiguous: each loop vectorises
                            if flat > 0:
                                for c in range(c_in):
                                    row[c] += flat * tap[c, 0]
                            else:
                                for c in range(c_in):
                                    row[c] += pixel[c] * tap[c, 0]
                            continue
                        for c in range(c_in):
                            v = 0.0 if not inside else flat if flat > 0 else pixel[c]
                            for m in range(m_out):
                                row[c * m_out + m] += v * tap[c, m]
                for k in range(row.size):
                    row[k] += b[k]


# (kernel, a call on tiny operands that compiles it: every call's argument types are these)
PASSES = ((_depthwise_sums, lambda: _depthwise_sums(
    np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1)), np.ones(1), 1, 1, 1, 1, 0, 0, 0.0,
    np.empty((1, 1, 1, 1)))),)


def _matmul(op, a, b):
    aa, ba = _magnitudes(op, a, b)
    return _product(a, b), _product(aa, ba)


def _avg_pool2d(op, x):
    ones = np.ones((1,) + x.shape[1:3] + (1,))
    count = _windows(ones, op.kernel, op.stride, (1, 1), op.pad).sum(axis=(3, 4))

    def pool(x):
        return _windows(x, op.kernel, op.stride, (1, 1), op.pad).sum(axis=(3, 4)) / count

    return pool(x), pool(*_magnitudes(op, x))


def _reduce_sum(op, x):
    return x.sum(axis=op.axis, keepdims=True), \
        _magnitudes(op, x)[0].sum(axis=op.axis, keepdims=True)


def _max_pool2d(op, x):
    return _windows(x, op.kernel, op.stride, (1, 1), op.pad, -np.inf).max(axis=(3, 4))


def _same(fn):
    """An operator whose abs-mode run gives its reference again."""
    def rule(op, *arrays):
        ref = fn(op, *arrays)
        return ref, ref
    return rule


def _bound(fn, magnitude):
    """EXP, SIGMOID, TANH: the reference, and the magnitude factor of the error bound."""
    def rule(op, x):
        return fn(x), magnitude(np.abs(x))
    return rule


def _pad(op, x, padding, value):
    pairs = np.asarray(padding, np.int64).reshape(-1, 2)
    return np.pad(x, pairs, constant_values=float(np.reshape(value, -1)[0]))


def _slice(op, x, start, size):
    return x[tuple(slice(int(s), int(s) + int(n)) for s, n in zip(start, size))]


# operator -> its rule on the fp64 values of its inputs (constants included, in input order)
OPERATORS = {
    "CONV2D": lambda op, x, w, b, *zps: _conv2d(op, x, w, b),
    "DEPTHWISE_CONV2D": lambda op, x, w, b, *zps: _depthwise(op, x, w, b),
    "MATMUL": lambda op, a, b, *zps: _matmul(op, a, b),
    "AVG_POOL2D": lambda op, x, *zps: _avg_pool2d(op, x),
    "REDUCE_SUM": _reduce_sum,
    "ADD": _same(lambda op, a, b: a + b),
    "SUB": _same(lambda op, a, b: a - b),
    "MUL": _same(lambda op, a, b, shift: a * b),
    "MAXIMUM": _same(lambda op, a, b: np.maximum(a, b)),
    "MINIMUM": _same(lambda op, a, b: np.minimum(a, b)),
    "RECIPROCAL": _same(lambda op, x: 1.0 / x),
    "EXP": _bound(np.exp, lambda ax: 2 * ax),
    "SIGMOID": _bound(lambda x: 1 / (1 + np.exp(-x)), lambda ax: 2 * (1 + ax)),
    "TANH": _bound(np.tanh, lambda ax: 8 * ax),
    "CLAMP": _same(lambda op, x: np.clip(x, op.min_val, op.max_val)),
    "MAX_POOL2D": _same(_max_pool2d),
    "REDUCE_MAX": _same(lambda op, x: x.max(axis=op.axis, keepdims=True)),
    "REDUCE_MIN": _same(lambda op, x: x.min(axis=op.axis, keepdims=True)),
    "IDENTITY": _same(lambda op, x: x),
    "RESHAPE": _same(lambda op, x, shape: x),
    "TRANSPOSE": _same(lambda op, x: x.transpose(op.perms)),
    "SLICE": _same(_slice),
    "PAD": _same(_pad),
    "CONCAT": _same(lambda op, *xs: np.concatenate(xs, axis=op.axis)),
}


def _arrays(op: Operator, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The operator's inputs in order: constants from the graph, the rest from ``values``,
    float ones as fp64."""
    out = []
    for t in op.inputs:
        a = np.asarray(t.data if t.is_const else values[t.name])
        out.append(np.asarray(a, t.dtype.np).astype(np.float64) if t.dtype.is_float else a)
    return out


def reference(op: Operator, values: Mapping[str, np.ndarray]) \
        -> tuple[np.ndarray, np.ndarray] | None:
    """(fp64 reference, bound) of ``op``'s output on the named input values, as the reference
    model's precise mode gives them (module docstring); None when this module does not cover
    the operator (not in ``OPERATORS``, not a float result, or a NaN input)."""
    if op.op not in OPERATORS or not op.output.dtype.is_float:
        return None
    arrays = _arrays(op, values)
    if any(np.isnan(a).any() for t, a in zip(op.inputs, arrays) if t.dtype.is_float):
        return None
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ref, bnd = OPERATORS[op.op](op, *arrays)
    shape = op.output.shape
    return (np.asarray(ref, np.float64).reshape(shape),
            np.asarray(bnd, np.float64).reshape(shape))


def references(items: list) -> list[tuple[np.ndarray, np.ndarray]]:
    """(fp64 reference, bound) of each (operator, its input values by name) in ``items``:
    in-process where ``reference`` covers it, the rest from one run of the reference model
    binary in precise mode. BLAS runs on one thread (``hwsim.blas``)."""
    with one_thread():
        found = [reference(op, values) for op, values in items]
    rest = [i for i, r in enumerate(found) if r is None]
    if rest:
        for i, pair in zip(rest, from_binary([items[i] for i in rest])):
            found[i] = pair
    return found


def from_binary(items: list) -> list[tuple[np.ndarray, np.ndarray]]:
    """(reference, bound) of each (operator, its input values by name) from one run of the
    reference model binary in precise mode, on a graph holding a copy of each operator with
    its non-constant tensors renamed apart: the fallback of ``references`` and the oracle of
    the tests and ``benchmarks/bench_check.py``."""
    ops, inputs, values = [], [], {}
    for i, (op, given) in enumerate(items):
        renamed = {t.name: Tensor(f"P{i}:{t.name}", t.shape, t.dtype)
                   for t in op.inputs + op.outputs if not t.is_const}
        ops.append(op.on([renamed.get(t.name, t) for t in op.inputs],
                         [renamed[t.name] for t in op.outputs]))
        for t in dict.fromkeys(t for t in op.inputs if not t.is_const):
            inputs.append(renamed[t.name])
            values[renamed[t.name].name] = given[t.name]
    found = precise(Graph(ops, inputs, [op.output for op in ops], "precise"), values)
    return [tuple(np.asarray(a, np.float64) for a in found[op.output.name]) for op in ops]
