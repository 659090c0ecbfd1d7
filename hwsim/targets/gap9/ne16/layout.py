"""NE16 data layouts in L1, as pack functions with inverses (used by the scheduler and tests).

* Activations: HWC, channels contiguous; 8-bit unsigned, or 16-bit unsigned little-endian.
* Convolution weights (3x3, 3x3 depthwise, 1x1): stored unsigned (``w - WEIGHT_OFFSET``) as
  bit-planes. From (cout, cin, kh, kw): pad cin to a multiple of the channel group (16 channels in
  8-bit mode, 8 in 16-bit mode), then (cout, cin/group, bits, kh*kw, group/8 bytes): each byte
  holds one bit of 8 channels, LSB first (pulp-nnx ``test/Ne16Weight.py``; 16-bit mode: GVSoC
  ``ne16_matrixvec.cpp`` reads one byte per tap and bit-plane). Depthwise swaps cout and cin
  first, so its 16 channels share one bit-plane word.
* Linear weights: (cout, bits, cin/8 bytes) with cin padded to a multiple of 16: one bit-plane
  row of the whole input vector per output channel and bit (GVSoC linear streamer: bit-planes
  ``2 * k_in`` bytes apart, 32 bytes per 256-channel subtile).
* Normalisation: scale as unsigned 8/16/32-bit per output channel, bias int32, shift one byte,
  each a contiguous little-endian array over all output channels.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from hwsim.errors import ProgramError


def channel_group(mode16: bool) -> int:
    """Input channels per bit-plane word: 16 in 8-bit mode, 8 in 16-bit mode."""
    return 8 if mode16 else 16


def weight_offset(bits: int) -> int:
    """The WEIGHT_OFFSET that makes signed ``bits``-bit weights unsigned: -2^(bits-1)."""
    return -(1 << (bits - 1))


def to_unsigned(weights: np.ndarray, bits: int) -> np.ndarray:
    """Signed weights in [-2^(bits-1), 2^(bits-1)) as the unsigned values NE16 stores."""
    w = np.asarray(weights, dtype=np.int64)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if w.size and (w.min() < lo or w.max() > hi):
        raise ProgramError(f"weights outside the signed {bits}-bit range {lo}..{hi}")
    return (w - weight_offset(bits)).astype(np.uint8)


@numba.njit(cache=True, nogil=True)
def _bit_planes(words, bits, out):
    """out[r, b, g]: bit b of the 8 bytes of ``words[r, g]``, byte i as bit i. Each word's 8x8
    bit transpose is the three masked swaps of Hacker's Delight "transpose8" (on the
    little-endian word, byte i bit j -> byte j bit i), byte b of the result being plane b."""
    m1, m2, m3 = np.uint64(0x00AA00AA00AA00AA), np.uint64(0x0000CCCC0000CCCC), \
        np.uint64(0x00000000F0F0F0F0)
    k1, k2, k3 = np.uint64(0xAA55AA55AA55AA55), np.uint64(0xCCCC3333CCCC3333), \
        np.uint64(0xF0F0F0F00F0F0F0F)
    s1, s2, s3, byte = np.uint64(7), np.uint64(14), np.uint64(28), np.uint64(0xFF)
    row = np.empty(words.shape[1], np.uint64)
    for r in range(words.shape[0]):
        for g in range(words.shape[1]):
            x = words[r, g]
            x = (x & k1) | ((x & m1) << s1) | ((x >> s1) & m1)
            x = (x & k2) | ((x & m2) << s2) | ((x >> s2) & m2)
            row[g] = (x & k3) | ((x & m3) << s3) | ((x >> s3) & m3)
        for b in range(bits):           # plane by plane: the stores are sequential
            shift = np.uint64(8 * b)
            for g in range(words.shape[1]):
                out[r, b, g] = np.uint8((row[g] >> shift) & byte)


def _padded(weights: np.ndarray, bits: int, group: int, zero: int) -> np.ndarray:
    """Unsigned ``bits``-bit weights (channels on axis 1) as bytes, the channels padded to a
    multiple of ``group`` with the code ``zero``."""
    w = np.asarray(weights)
    if (w.size and (int(w.max()) >> bits or int(w.min()) < 0)) or not 0 <= zero < 1 << bits:
        raise ProgramError(f"weights do not fit {bits} unsigned bits")
    padded = np.full((w.shape[0], w.shape[1] + -w.shape[1] % group) + w.shape[2:], zero,
                     np.uint8)
    padded[:, :w.shape[1]] = w
    return padded


def _planes(values: np.ndarray, bits: int) -> np.ndarray:
    """(..., channels) bytes of unsigned ``bits``-bit values -> (..., bits, channels/8) bytes,
    LSB first."""
    lead, channels = values.shape[:-1], values.shape[-1]
    words = np.ascontiguousarray(values).view("<u8").reshape(math.prod(lead), channels // 8)
    out = np.empty((words.shape[0], bits, channels // 8), np.uint8)
    _bit_planes(words, bits, out)
    return out.reshape(lead + (bits, channels // 8))


def _unplanes(data: np.ndarray) -> np.ndarray:
    """(..., bits, nbytes) -> (..., nbytes*8) unsigned values."""
    planes = np.unpackbits(data, axis=-1, bitorder="little").astype(np.int64)
    weights = np.arange(planes.shape[-2])[:, None]
    return (planes << weights).sum(axis=-2)


def pack_conv_weights(weights: np.ndarray, bits: int, mode16: bool = False,
                      depthwise: bool = False, zero: int = 0) -> np.ndarray:
    """Unsigned (cout, cin, kh, kw) weights (depthwise: (c, 1, 3, 3)) -> NE16 bytes; padded
    channels get the code ``zero`` (``-WEIGHT_OFFSET`` makes them contribute nothing)."""
    w = np.asarray(weights)
    if w.ndim != 4:
        raise ProgramError(f"conv weights: expected (cout, cin, kh, kw), found shape {w.shape}")
    if depthwise:
        w = w.transpose(1, 0, 2, 3)
    cout, _, kh, kw = w.shape
    group = channel_group(mode16)
    w = _padded(w, bits, group, zero).reshape(cout, -1, group, kh * kw).transpose(
        0, 1, 3, 2)                                                     # (cout, cmaj, taps, g)
    planes = _planes(w, bits)                                      # (cout, cmaj, taps, bits, g/8)
    return np.ascontiguousarray(planes.transpose(0, 1, 3, 2, 4)).reshape(-1)


def unpack_conv_weights(data: np.ndarray, bits: int, cout: int, cin: int, kh: int, kw: int,
                        mode16: bool = False, depthwise: bool = False) -> np.ndarray:
    """Inverse of ``pack_conv_weights``: NE16 bytes -> unsigned (cout, cin, kh, kw)."""
    group = channel_group(mode16)
    rows, cols = (cin, cout) if depthwise else (cout, cin)
    cmaj = -(-cols // group)
    data = np.asarray(data, dtype=np.uint8).reshape(rows, cmaj, bits, kh * kw, group // 8)
    w = _unplanes(data.transpose(0, 1, 3, 2, 4))                   # (rows, cmaj, taps, group)
    w = w.transpose(0, 1, 3, 2).reshape(rows, cmaj * group, kh, kw)[:, :cols]
    w = w.transpose(1, 0, 2, 3) if depthwise else w
    return w.astype(np.uint8)


def pack_linear_weights(weights: np.ndarray, bits: int, zero: int = 0) -> np.ndarray:
    """Unsigned (cout, cin) weights -> (cout, bits, ceil(cin/16)*2) bit-plane rows. Linear mode
    loads whole 16-channel words, so padded channels should get ``zero = -WEIGHT_OFFSET``."""
    return _planes(_padded(weights, bits, 16, zero), bits).reshape(-1)


def unpack_linear_weights(data: np.ndarray, bits: int, cout: int, cin: int) -> np.ndarray:
    row = -(-cin // 16) * 2
    data = np.asarray(data, dtype=np.uint8).reshape(cout, bits, row)
    return _unplanes(data)[:, :cin].astype(np.uint8)


def conv_weight_bytes(cout: int, cin: int, taps: int, bits: int, mode16: bool = False) -> int:
    group = channel_group(mode16)
    return cout * -(-cin // group) * bits * taps * group // 8


NORM_DTYPES = {8: np.uint8, 16: np.dtype("<u2"), 32: np.dtype("<u4")}


def pack_scale(scale: np.ndarray, bits: int) -> np.ndarray:
    """Per-channel unsigned scales as NE16 reads them (``bits`` = 8, 16 or 32)."""
    s = np.asarray(scale, dtype=np.int64)
    if s.size and (s.min() < 0 or s.max() >> bits):
        raise ProgramError(f"scales do not fit {bits} unsigned bits")
    return s.astype(NORM_DTYPES[bits]).view(np.uint8)


def unpack_scale(data: np.ndarray, bits: int) -> np.ndarray:
    return np.asarray(data, dtype=np.uint8).view(NORM_DTYPES[bits]).astype(np.int64)


def pack_bias(bias: np.ndarray) -> np.ndarray:
    return np.asarray(bias, dtype="<i4").view(np.uint8)


def pack_shift(shift: np.ndarray) -> np.ndarray:
    s = np.asarray(shift, dtype=np.int64)
    if s.size and (s.min() < 0 or s.max() > 63):
        raise ProgramError("per-channel shifts must be 0..63 (the RTL uses 6 bits)")
    return s.astype(np.uint8)
