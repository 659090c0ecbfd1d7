"""Operand layouts of the SME GEMM kernels, each a pack function with its inverse.

An outer product reads one Z register per operand: ``rows`` rows of a matrix, each with
``depth`` consecutive values along K (``depth`` = 1 for FMOPA fp32 and non-widening BFMOPA, 2
for widening BFMOPA, 4 for SMOPA/SUMOPA: the Arm ARM's element pairs and quads). A *panel*
stores a matrix ``[R, K]`` so that a kernel loads those registers with consecutive vector loads:
``vectors`` registers per K step (the row tiles of one block), K steps in order, blocks of
``rows * vectors`` rows one after the other:

    panel[b][s][v][r][q] = mat[(b * vectors + v) * rows + r, s * depth + q]

with R padded to whole blocks and K to whole steps by ``fill``. ``im2col`` turns an NHWC
activation into the ``[pixels, KH * KW * C]`` matrix of a convolution (k ordered (ky, kx, c),
as TOSA's [OC, KH, KW, IC] weights), padding with a value; ``depthwise_rows`` builds the
per-channel-group matrices of a depthwise convolution run as a GEMM with block-diagonal weights.
``bf16_bits``/``bf16_values`` convert fp32 to BF16 (round to nearest even, NaN kept quiet: BFCVT
with the default FPCR) and back (exact).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


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


def im2col(x: np.ndarray, kernel, stride, pad, dilation=(1, 1), fill=0) -> np.ndarray:
    """The ``[N * OH * OW, KH * KW * C]`` matrix of a convolution over NHWC ``x``."""
    win = windows(x, kernel, stride, pad, dilation, fill)
    return win.reshape(-1, win.shape[3] * win.shape[4] * win.shape[5])


def depthwise_rows(cols: np.ndarray, channels: int, group: int, taps_padded: int,
                   fill=0) -> list[np.ndarray]:
    """Per channel group, the ``[pixels, group * taps_padded]`` matrix of a depthwise
    convolution from its im2col matrix ``cols [pixels, taps * channels]``: k = (channel in the
    group, tap), each channel's taps padded to ``taps_padded`` with ``fill``."""
    pixels = cols.shape[0]
    per_tap = cols.reshape(pixels, -1, channels)                      # [P, taps, C]
    taps = per_tap.shape[1]
    out = []
    for g in range(0, channels, group):
        block = np.full((pixels, group, taps_padded), fill, dtype=cols.dtype)
        chunk = per_tap[:, :, g:g + group].transpose(0, 2, 1)         # [P, c, taps]
        block[:, :chunk.shape[1], :taps] = chunk
        out.append(block.reshape(pixels, group * taps_padded))
    return out


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
