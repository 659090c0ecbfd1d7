"""The cluster's CONV2D and MATMUL kernels compiled: integer sums in numba loops.

``conv2d`` and ``matmul`` compute exactly what ``hwsim.tosa_int.operators.conv2d`` and
``matmul`` (their numpy twins, compared by the tests) compute: zero points subtracted, padding
contributing 0, the bias added after the sum, the result wrapped to int32. The twins sum in
float64 matrix products; these sum in int64 loops, the same integers without a BLAS call (on
these small matrices a multi-threaded BLAS costs far more than the arithmetic, and on a loaded
machine its threads wait for each other: 30 ms for a 36x128x128 product measured here, against
0.04 ms on one thread). The operands, int8 values less their zero points, go in as int32: the
loops run 2-3x faster on them than on int64 (measured), and numba multiplies and sums them in
int64 all the same.
"""

from __future__ import annotations

import numba
import numpy as np

from hwsim.tosa_int import helpers as ti
from hwsim.tosa_int.operators import conv_out_hw


@numba.njit(cache=True, nogil=True)
def _conv(x, w, pad_top, pad_left, stride, dilation, out):
    """``out`` [N, OH, OW, OC] += the sums of ``x`` [N, H, W, IC] times ``w`` [OC, KH, KW, IC]
    over each window (positions outside ``x`` are padding and add nothing)."""
    n_count, h, width, ic = x.shape
    oc, kh, kw, _ = w.shape
    oh, ow = out.shape[1], out.shape[2]
    for n in range(n_count):
        for i in range(oh):
            for j in range(ow):
                for ky in range(kh):
                    r = i * stride[0] - pad_top + ky * dilation[0]
                    if r < 0 or r >= h:
                        continue
                    for kx in range(kw):
                        c = j * stride[1] - pad_left + kx * dilation[1]
                        if c < 0 or c >= width:
                            continue
                        xv = x[n, r, c]
                        for o in range(oc):
                            wv = w[o, ky, kx]
                            acc = np.int64(0)
                            for k in range(ic):
                                acc += xv[k] * wv[k]
                            out[n, i, j, o] += acc


def conv2d(x, w, bias, pad, stride, dilation, in_zp, weight_zp):
    """CONV2D: x [N,H,W,IC], w [OC,KH,KW,IC], bias [OC] or [1] -> int32 [N,OH,OW,OC]."""
    oh, ow, _ = conv_out_hw(x.shape[1:3], w.shape[1:3], pad, stride, dilation)
    acc = np.zeros((x.shape[0], oh, ow, w.shape[0]), np.int64)
    _conv(_less(x, in_zp), _less(w, weight_zp), pad[0], pad[2], np.asarray(stride, np.int64),
          np.asarray(dilation, np.int64), acc)
    return ti.wrap(acc + (0 if bias is None else bias), 32)


def matmul(a, b, a_zp, b_zp):
    """MATMUL: a [N,H,C], b [N,C,W] -> int32 [N,H,W] (a 1x1 convolution of each batch)."""
    n, h, c = a.shape
    w = _less(b.transpose(0, 2, 1), b_zp)                                  # [N, W, C]
    acc = np.zeros((n, 1, h, w.shape[1]), np.int64)
    x = _less(a, a_zp)
    for i in range(n):
        _conv(x[i].reshape(1, 1, h, c), w[i].reshape(-1, 1, 1, c), 0, 0,
              np.ones(2, np.int64), np.ones(2, np.int64), acc[i:i + 1])
    return ti.wrap(acc.reshape(n, h, -1), 32)


def _less(values: np.ndarray, zero_point: int) -> np.ndarray:
    """int8 ``values`` less ``zero_point``, contiguous, as int32 (module docstring), or int64 for
    a zero point a trace set beyond int32's range."""
    dtype = np.int32 if abs(zero_point) < 2 ** 31 - 128 else np.int64
    return np.ascontiguousarray(np.subtract(values, zero_point, dtype=dtype))
