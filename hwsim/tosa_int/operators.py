"""TOSA 1.0 operators on integers: each function is one operator's integer semantics, what
GAP9's cluster kernels and SME's integer ``vec`` routines compute.

Inputs are int64 arrays holding the tensors' values, outputs int64 arrays; the machines read
and write their memories around them. Sources are the TOSA 1.0 pseudocode (docs/sources.md#tosa,
spec chapter 2): CONV2D and DEPTHWISE_CONV2D (zero points subtracted, padding contributes 0, bias
added after the sum), MATMUL, AVG_POOL2D (valid-position count, ``reciprocal_scale``),
MAX_POOL2D (padding ignored), ADD/SUB/MAXIMUM/MINIMUM (int32), MUL (with shift), TABLE,
RESCALE, CLAMP, REDUCE_SUM/MAX, ARGMAX, CLZ, shifts, CAST, and the data movement operators.
Overflow that TOSA marks unpredictable (REQUIRE) wraps at 32 bits. ``softmax`` is the operator
sequence tosa-converter-for-tflite emits for an int8 SOFTMAX (listed in its docstring).

The convolutions sum int8 products in float64 matrix products, which are exact while partial
sums stay below 2^53 (over 2^37 int8 products).
"""

from __future__ import annotations

import numpy as np

from hwsim.shapes import conv_out
from hwsim.tosa_int import helpers as ti


def conv_out_hw(hw, kernel, pad, stride, dilation=(1, 1)) -> tuple[int, int, bool]:
    """(OH, OW, whether both divide exactly) of a window operator on NHWC (``pad``: top,
    bottom, left, right)."""
    oh, ok_h = conv_out(hw[0], kernel[0], pad[0], pad[1], stride[0], dilation[0])
    ow, ok_w = conv_out(hw[1], kernel[1], pad[2], pad[3], stride[1], dilation[1])
    return oh, ow, ok_h and ok_w


def _windows(x, kernel, pad, stride, dilation, fill):
    """[N, OH, OW, KH*KW, C] windows of NHWC ``x``, padded with ``fill``."""
    n, h, w, c = x.shape
    oh, ow, _ = conv_out_hw((h, w), kernel, pad, stride, dilation)
    xp = np.full((n, h + pad[0] + pad[1], w + pad[2] + pad[3], c), fill, np.int64)
    xp[:, pad[0]:pad[0] + h, pad[2]:pad[2] + w] = x
    ky, kx = np.divmod(np.arange(kernel[0] * kernel[1]), kernel[1])
    rows = (np.arange(oh) * stride[0])[:, None] + ky[None, :] * dilation[0]
    cols = (np.arange(ow) * stride[1])[:, None] + kx[None, :] * dilation[1]
    return xp[:, rows[:, None, :], cols[None, :, :]]           # [N, OH, OW, K, C]


def conv2d(x, w, bias, pad, stride, dilation, in_zp, weight_zp):
    """CONV2D: x [N,H,W,IC], w [OC,KH,KW,IC], bias [OC] or [1] -> int32 [N,OH,OW,OC]."""
    oc, kh, kw, ic = w.shape
    win = _windows(x - in_zp, (kh, kw), pad, stride, dilation, 0)
    n, oh, ow = win.shape[:3]
    lhs = win.reshape(n * oh * ow, kh * kw * ic).astype(np.float64)
    rhs = (w - weight_zp).reshape(oc, -1).T.astype(np.float64)
    acc = (lhs @ rhs).astype(np.int64).reshape(n, oh, ow, oc)
    return ti.wrap(acc + (0 if bias is None else bias), 32)


def depthwise_conv2d(x, w, bias, pad, stride, dilation, in_zp, weight_zp):
    """DEPTHWISE_CONV2D: x [N,H,W,C], w [KH,KW,C,M] -> int32 [N,OH,OW,C*M]."""
    kh, kw, c, m = w.shape
    win = _windows(x - in_zp, (kh, kw), pad, stride, dilation, 0)     # [N,OH,OW,K,C]
    acc = np.einsum("nhwkc,kcm->nhwcm", win, (w - weight_zp).reshape(kh * kw, c, m))
    acc = acc.reshape(acc.shape[:3] + (c * m,))
    return ti.wrap(acc + (0 if bias is None else bias), 32)


def matmul(a, b, a_zp, b_zp):
    """MATMUL: a [N,H,C], b [N,C,W] -> int32 [N,H,W]."""
    acc = np.matmul((a - a_zp).astype(np.float64), (b - b_zp).astype(np.float64))
    return ti.wrap(acc.astype(np.int64), 32)


def avg_pool2d(x, kernel, pad, stride, in_zp, out_zp, out_type):
    """AVG_POOL2D (integer): mean of the valid positions, rounded by reciprocal_scale."""
    win = _windows(x - in_zp, kernel, pad, stride, (1, 1), 0)
    valid = _windows(np.ones(x.shape[:3] + (1,), np.int64), kernel, pad, stride, (1, 1), 0)
    acc, count = win.sum(axis=3), valid.sum(axis=3)
    multiplier, shift = ti.reciprocal_scale(count)
    out = ti.apply_scale_32(acc, multiplier, shift) + out_zp
    return np.clip(ti.wrap(out, 32), *ti.RANGES[out_type])


def max_pool2d(x, kernel, pad, stride, in_type):
    """MAX_POOL2D: padded positions never win (they hold the type minimum)."""
    return _windows(x, kernel, pad, stride, (1, 1), ti.RANGES[in_type][0]).max(axis=3)


def binary(op, a, b, shift=0):
    """ADD, SUB, MAXIMUM, MINIMUM (int32) and MUL with TOSA broadcasting."""
    if op == "add":
        return ti.wrap(a + b, 32)
    if op == "sub":
        return ti.wrap(a - b, 32)
    if op == "maximum":
        return np.maximum(a, b)
    if op == "minimum":
        return np.minimum(a, b)
    if shift > 0:        # MUL int32 with shift: round half up, then 32 bits
        return ti.wrap((a * b + (1 << (shift - 1))) >> shift, 32)
    return ti.wrap(a * b, 32)


def table(x, tab, in_type):
    """TABLE: int8 -> direct lookup; int16 -> interpolated int32 (16.7)."""
    if in_type == "i8":
        return tab[x + 128]
    return ti.lookup_i16(tab, x)


def reduce(op, x, axis):
    """REDUCE_SUM (int32, wraps) / REDUCE_MAX / ARGMAX (first index of the maximum)."""
    if op == "reduce_sum":
        return ti.wrap(x.sum(axis=axis, keepdims=True), 32)
    if op == "reduce_max":
        return x.max(axis=axis, keepdims=True)
    return np.argmax(x, axis=axis)


def transpose(x, perms):
    return np.transpose(x, perms)


def pad(x, padding, value):
    widths = [(padding[2 * i], padding[2 * i + 1]) for i in range(x.ndim)]
    return np.pad(x, widths, constant_values=value)


def slice_(x, start, size):
    return x[tuple(slice(s, s + n) for s, n in zip(start, size))]


# Constants of the int8 SOFTMAX lowering emitted by tosa-converter-for-tflite (the TFLite
# reference algorithm): table left shifts, the rounding shifts, and the Newton-Raphson
# reciprocal (48/17 and -32/17 in Q2.29, one = 2^29, three iterations).
SOFTMAX_TABLE_SHIFTS = (17, 9, 1)
SOFTMAX_LAST_TABLE_SHIFT = 7
SOFTMAX_SUM_SHIFT = 12
SOFTMAX_NR = (-1010580540, 1515870810, 536870912, 4)
SOFTMAX_NR_STEPS = 3
SOFTMAX_OUT_SHIFT = 35


def softmax(x, tables, in_zp, diff_mult, diff_shift, out_zp):
    """int8 softmax along the last axis as the TOSA operator sequence:

    RESCALE(x, 1<<30, 30, in_zp) -> i32; SUB(it, REDUCE_MAX); RESCALE(diff_mult, diff_shift)
    -> i16; four TABLEs, LOGICAL_LEFT_SHIFT by 17, 9, 1 and ARITHMETIC_RIGHT_SHIFT(round) by 7,
    ADD them: e; ARITHMETIC_RIGHT_SHIFT(e, 12, round), REDUCE_SUM: s; z = CLZ(s);
    n = s << (z - 1); Newton-Raphson for 1/n (MUL shift 31 / ADD / SUB); MUL(e, r, 30);
    ARITHMETIC_RIGHT_SHIFT(round) by 35 - z; RESCALE(1<<30, 30, out_zp) -> i8.
    """
    one = 1 << 30
    v = ti.rescale(x, one, 30, in_zp, 0, "i32")
    v = binary("sub", v, v.max(axis=-1, keepdims=True))
    v = ti.rescale(v, diff_mult, diff_shift, 0, 0, "i16")
    parts = [ti.lookup_i16(t, v) for t in tables]
    shifted = [ti.logical_left_shift(p, s, 32) for p, s in zip(parts, SOFTMAX_TABLE_SHIFTS)]
    shifted.append(ti.arithmetic_right_shift(parts[3], SOFTMAX_LAST_TABLE_SHIFT, 32, True))
    e = shifted[0]
    for term in shifted[1:]:
        e = binary("add", e, term)
    s = ti.wrap(ti.arithmetic_right_shift(e, SOFTMAX_SUM_SHIFT, 32, True).sum(axis=-1,
                                                                              keepdims=True), 32)
    z = ti.clz32(s)
    n = ti.logical_left_shift(s, binary("sub", z, 1), 32)
    c_a, c_b, c_one, four = SOFTMAX_NR
    r = binary("add", binary("mul", n, c_a, 31), c_b)
    for _ in range(SOFTMAX_NR_STEPS):
        err = binary("sub", c_one, binary("mul", r, n, 31))
        r = binary("add", r, binary("mul", binary("mul", r, err, 31), four))
    out = ti.arithmetic_right_shift(binary("mul", e, r, 30), binary("sub", SOFTMAX_OUT_SHIFT, z),
                                    32, True)
    return ti.rescale(out, one, 30, 0, out_zp, "i8")
