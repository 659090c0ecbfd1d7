"""Operand layouts of the SME GEMM kernels, each a pack function with its inverse.

An outer product reads one Z register per operand: ``rows`` rows of a matrix, each with
``depth`` consecutive values along K (``depth`` = 1 for FMOPA fp32 and non-widening BFMOPA, 2
for widening BFMOPA, 4 for SMOPA/SUMOPA: the Arm ARM's element pairs and quads). A *panel*
stores a matrix ``[R, K]`` so that a kernel loads those registers with consecutive vector loads:
``vectors`` registers per K step (the row tiles of one block), K steps in order, blocks of
``rows * vectors`` rows one after the other:

    panel[b][s][v][r][q] = mat[(b * vectors + v) * rows + r, s * depth + q]

with R padded to whole blocks and K to whole steps by ``fill``. ``conv_panels`` packs a
convolution's activation operand straight from NHWC in one compiled pass: the ``[pixels, KH *
KW * C]`` im2col matrix (k ordered (ky, kx, c), as TOSA's [OC, KH, KW, IC] weights), or for a
depthwise convolution run as a GEMM with block-diagonal weights (``depthwise_weights``), one
``[pixels, group * taps]`` matrix per channel group (k ordered (channel, tap)), padded with
``fill`` outside the image.
``bf16_bits``/``bf16_values`` convert fp32 to BF16 (round to nearest even, NaN kept quiet: BFCVT
with the default FPCR) and back (exact).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hwsim.shapes import conv_out
from hwsim.targets.floats import jit


def padded(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def pack_panels(mat: np.ndarray, rows: int, vectors: int, depth: int, fill=0) -> np.ndarray:
    """``mat [R, K]`` -> the flat panel array (see the module docstring)."""
    r, k = mat.shape
    block = rows * vectors
    full = np.full((padded(r, block), padded(k, depth)), fill, dtype=mat.dtype)
    full[:r, :k] = mat
    nb, ns = full.shape[0] // block, full.shape[1] // depth
    return full.reshape(nb, vectors, rows, ns, depth).transpose(0, 3, 1, 2, 4).reshape(-1)


def unpack_panels(flat: np.ndarray, r: int, k: int, rows: int, vectors: int,
                  depth: int) -> np.ndarray:
    """The inverse of ``pack_panels``: the ``[r, k]`` matrix (padding dropped)."""
    block = rows * vectors
    nb, ns = padded(r, block) // block, padded(k, depth) // depth
    full = flat.reshape(nb, ns, vectors, rows, depth).transpose(0, 2, 3, 1, 4)
    return full.reshape(nb * block, ns * depth)[:r, :k]


def panel_elements(r: int, k: int, rows: int, vectors: int, depth: int) -> int:
    return padded(r, rows * vectors) * padded(k, depth)


def windows(x: np.ndarray, kernel, stride, pad, dilation=(1, 1), fill=0) -> np.ndarray:
    """``[N, OH, OW, KH, KW, C]`` windows of NHWC ``x`` padded with ``fill`` (pad is top,
    bottom, left, right, as TOSA)."""
    kh, kw = kernel
    xp = np.pad(x, ((0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)), constant_values=fill)
    span_h, span_w = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    win = sliding_window_view(xp, (span_h, span_w), axis=(1, 2))   # [N, H', W', C, sh, sw]
    win = win[:, ::stride[0], ::stride[1], :, ::dilation[0], ::dilation[1]]
    return win.transpose(0, 1, 2, 4, 5, 3)


def conv_panels(x: np.ndarray, kernel, stride, pad, dilation, group: int, rows: int,
                vectors: int, depth: int, fill=0) -> np.ndarray:
    """The flat panels of a convolution's activation operand, from NHWC ``x`` (pad is top,
    bottom, left, right, as TOSA): of its im2col matrix, or with ``group`` channels per group,
    of each group's depthwise matrix in turn (each channel's taps padded to whole steps)."""
    n, h, w, c = x.shape
    (kh, kw), (sy, sx), (dy, dx) = kernel, stride, dilation
    oh = conv_out(h, kh, pad[0], pad[1], sy, dy)[0]
    ow = conv_out(w, kw, pad[2], pad[3], sx, dx)[0]
    taps = padded(kh * kw, depth) if group else 0
    k, mats = (group * taps, -(-c // group)) if group else (kh * kw * c, 1)
    out = np.empty(mats * panel_elements(n * oh * ow, k, rows, vectors, depth), x.dtype)
    _conv_panels(np.ascontiguousarray(x), oh, ow, kh, kw, sy, sx, dy, dx, pad[0], pad[2], group,
                 taps, k, mats, rows * vectors, depth, x.dtype.type(fill), out)
    return out


@jit
def _conv_panels(x, oh, ow, kh, kw, sy, sx, dy, dx, top, left, group, taps, k, mats, block,
                 depth, fill, out):
    """``conv_panels`` into ``out``, in panel order (a block's rows in turn for each K step:
    the module docstring's v and r together are consecutive rows): element (row i, column j)
    of a matrix reads ``x.flat[base[i] + offset[j]]`` where the whole window of row i is inside
    the image (most rows), else it checks each tap."""
    n, h, w, c = x.shape
    flat = x.reshape(-1)
    r = n * oh * ow
    rp, kp = -(-r // block) * block, -(-k // depth) * depth
    y0, x0 = np.zeros(rp, np.int64), np.zeros(rp, np.int64)
    base, inside = np.zeros(rp, np.int64), np.zeros(rp, np.bool_)
    for i in range(r):
        y0[i], x0[i] = i // ow % oh * sy - top, i % ow * sx - left
        base[i] = ((i // (oh * ow) * h + y0[i]) * w + x0[i]) * c
        inside[i] = y0[i] >= 0 and x0[i] >= 0 and y0[i] + (kh - 1) * dy < h and \
            x0[i] + (kw - 1) * dx < w
    dyj, dxj, offset = np.zeros(kp, np.int64), np.zeros(kp, np.int64), np.zeros(kp, np.int64)
    live = np.zeros(kp, np.bool_)       # a column of the matrix, not of K's padding
    pos = 0
    for m in range(mats):
        for j in range(k):
            if group:
                channel, tap = m * group + j // taps, j % taps
                live[j] = tap < kh * kw and channel < c
            else:
                channel, tap = j % c, j // c
                live[j] = True
            dyj[j], dxj[j] = tap // kw * dy, tap % kw * dx
            offset[j] = (dyj[j] * w + dxj[j]) * c + channel
        for b in range(rp // block):
            for s in range(0, kp, depth):
                for i in range(b * block, (b + 1) * block):
                    for j in range(s, s + depth):
                        value = fill
                        if live[j] and i < r:
                            yy, xx = y0[i] + dyj[j], x0[i] + dxj[j]
                            if inside[i] or (0 <= yy < h and 0 <= xx < w):
                                value = flat[base[i] + offset[j]]
                        out[pos] = value
                        pos += 1


def depthwise_weights(w: np.ndarray, group: int, taps_padded: int) -> list[np.ndarray]:
    """Per channel group, the block-diagonal ``[group, group * taps_padded]`` weight matrix of
    a depthwise convolution with weights ``[KH, KW, C, 1]``: row c holds channel c's taps at
    k = c * taps_padded + tap, zeros elsewhere."""
    kh, kw, channels, _ = w.shape
    mats = np.zeros((padded(channels, group), group, taps_padded), dtype=w.dtype)
    c = np.arange(channels)
    mats[c, c % group, :kh * kw] = w.reshape(kh * kw, channels).T
    return list(mats.reshape(-1, group, group * taps_padded))


def bf16_bits(x) -> np.ndarray:
    """fp32 values -> BF16 bit patterns, rounded to nearest even (NaNs stay NaN, made quiet).
    In place on one uint32 copy: below the NaNs (replaced after) the sum stays under 2^32."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32)
    rounded = u >> 16
    rounded &= 1
    rounded += u
    rounded += 0x7FFF
    rounded >>= 16
    nan = np.isnan(x)
    if nan.any():
        rounded[nan] = (u[nan] >> 16) | 0x40
    return rounded.astype(np.uint16)


def bf16_values(bits) -> np.ndarray:
    """BF16 bit patterns -> fp32 values (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)
