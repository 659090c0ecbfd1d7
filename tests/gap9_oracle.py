"""An independent model of NE16 arithmetic for the tests: plain convolution + normquant.

Written from the pulp-nnx functional model's description (sources.md#gap9 "NE16 numerics": conv in
wide integers wrapped to int32; times the scale; optional bias added to the product truncated to
int32; optional ReLU; arithmetic right shift; saturate to the output type). It shares no code
with hwsim: no registers, no layouts, no subtiles; signed weights, a padded input, loops.
"""

from __future__ import annotations

import numpy as np


def wrap32(v):
    v = np.asarray(v, dtype=object)
    return np.vectorize(lambda a: ((int(a) + (1 << 31)) % (1 << 32)) - (1 << 31),
                        otypes=[np.int64])(v)


def conv(x, w, stride=1, padding=(0, 0, 0, 0), pad_value=0, depthwise=False, taps=None):
    """x: (H, W, C) unsigned; w: (K, C, kh, kw) signed ((C, 1, kh, kw) depthwise).
    ``taps``: optional (kh, kw) 0/1 mask of enabled filter taps. Returns int64 (Ho, Wo, K)."""
    top, bottom, left, right = padding
    h, wd, c = x.shape
    xp = np.full((h + top + bottom, wd + left + right, c), pad_value, dtype=np.int64)
    xp[top:top + h, left:left + wd] = x
    k, _, kh, kw = w.shape
    mask = np.ones((kh, kw), np.int64) if taps is None else np.asarray(taps, np.int64)
    ho, wo = (xp.shape[0] - kh) // stride + 1, (xp.shape[1] - kw) // stride + 1
    out = np.zeros((ho, wo, k), dtype=np.int64)
    for oy in range(ho):
        for ox in range(wo):
            patch = xp[oy * stride:oy * stride + kh, ox * stride:ox * stride + kw, :]
            for o in range(k):
                if depthwise:
                    out[oy, ox, o] = int((patch[:, :, o] * w[o, 0] * mask).sum())
                else:
                    out[oy, ox, o] = int((patch.transpose(2, 0, 1) * w[o] * mask).sum())
    return out


def linear(x, w):
    """x: (C,) unsigned; w: (K, C) signed."""
    return np.array([int(np.dot(np.asarray(x, np.int64), np.asarray(row, np.int64)))
                     for row in w], dtype=np.int64)


def normquant(acc, scale, bias, shift, relu, out_bits, bias_saturates=False):
    """Per output channel (last axis): the functional model's norm/quant."""
    out = np.empty(acc.shape, dtype=np.int64)
    flat, res = acc.reshape(-1, acc.shape[-1]), out.reshape(-1, acc.shape[-1])
    for idx in np.ndindex(flat.shape):
        ch = idx[-1]
        v = int(wrap32(flat[idx])) * int(scale[ch])
        if bias is not None:
            v = int(wrap32(v)) + int(bias[ch])
            v = max(-(1 << 31), min((1 << 31) - 1, v)) if bias_saturates else int(wrap32(v))
        if relu:
            v = max(v, 0)
        v >>= int(shift[ch] if np.ndim(shift) else shift)
        lo, hi = (0, (1 << out_bits) - 1) if relu else (-(1 << (out_bits - 1)),
                                                         (1 << (out_bits - 1)) - 1)
        res[idx] = min(max(v, lo), hi)
    return out
