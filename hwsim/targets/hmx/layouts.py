"""HMX VTCM layouts as pack/unpack pairs: croutons, weights, bias register sets.

Each layout is a pair of plain numpy functions, inverse to each other, used by the machine, by
the HVX layout instructions and by the scheduler to place real tensors in VTCM:

* **crouton** (Figures 4 and 19; ``write_act_vtcm`` in section 3.1): 32 spatials x 32 channels
  of FP16 in 2048 bytes; each 128-byte vector holds two spatials, channel-major inside the
  vector: the FP16 at index ``(s // 2) * 64 + c * 2 + s % 2`` is spatial ``s``, channel ``c``.
  Activations and results (convert state written out) share it.
* **spatial mask** (section 2.2.1): five bits, one per bit of the spatial index; a set bit is a
  Y bit, a clear bit an X bit. Mask ``0b11100`` makes a crouton 4 wide and 8 tall, spatial
  ``s = y * 4 + x``. ``pack_nhwc``/``unpack_nhwc`` tile an NHWC tensor into croutons with it.
* **weights** (Figures 7 and 8; ``write_wgt_vtcm``): 128-byte vectors of 2 input channels x 32
  output channels, the FP16 at index ``o * 2 + i`` is output ``o``, input ``2 * vector + i``;
  the vectors of one 32-filter group follow each other in input-channel order.
* **bias** (Figure 13, Table 4): a 256-byte set per 32 output channels, the low 32 bits of the
  64-bit registers in the first vector and the high 32 bits in the second.

Not modelled: other data types (FP8, integer) and their layouts.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from hwsim.isa.hmx import (BIAS_REG, BIAS_SET_BYTES, CROUTON_BYTES, VECTOR_BYTES,
                           spatial_split)

SPATIALS = 32
CHANNELS = 32  # channels per crouton, and filters per weight group


def _as_fp16_bits(array) -> np.ndarray:
    array = np.asarray(array)
    if array.dtype == np.float16:
        return array.view(np.uint16)
    if array.dtype == np.uint16:
        return array
    raise TypeError(f"expected float16 values or uint16 FP16 bits, found {array.dtype}")


def _bytes_as_u16(data) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(data)).reshape(-1).view(np.uint16)


def check_mask(mask: int) -> None:
    if not 0 <= mask < 32:
        raise ValueError(f"spatial mask {mask:#x}: expected 5 bits")


@lru_cache(maxsize=None)
def spatial_grid(mask: int) -> np.ndarray:
    """``(ny, nx)`` array whose ``[y, x]`` is the spatial index at (x, y) under ``mask``
    (read-only: one per mask, shared)."""
    check_mask(mask)
    ny = 1 << bin(mask).count("1")
    grid = np.zeros((ny, SPATIALS // ny), dtype=np.int64)
    for s in range(SPATIALS):
        x, y = spatial_split(s, mask)
        grid[y, x] = s
    grid.flags.writeable = False
    return grid


# -- croutons (Figures 4 and 19) ----------------------------------------------------------------

def crouton_order() -> np.ndarray:
    """``[s, c]`` -> index of the FP16 cell in the 1024-element crouton."""
    s = np.arange(SPATIALS)[:, None]
    c = np.arange(CHANNELS)[None, :]
    return (s // 2) * 64 + c * 2 + s % 2


_ORDER = crouton_order()


def pack_crouton(cells) -> np.ndarray:
    """``[s, c]`` (32 x 32 FP16, spatial by channel) -> 2048 crouton bytes."""
    cells = _as_fp16_bits(cells)
    if cells.shape != (SPATIALS, CHANNELS):
        raise ValueError(f"crouton cells: expected shape (32, 32), found {cells.shape}")
    out = np.empty(SPATIALS * CHANNELS, dtype=np.uint16)
    out[_ORDER] = cells
    return out.view(np.uint8)


def unpack_crouton(data) -> np.ndarray:
    """2048 crouton bytes -> ``[s, c]`` FP16 bits (uint16)."""
    words = _bytes_as_u16(data)
    if words.size != SPATIALS * CHANNELS:
        raise ValueError(f"crouton: expected {CROUTON_BYTES} bytes, found {words.size * 2}")
    return words[_ORDER]


def crouton_grid(h: int, w: int, c: int, mask: int) -> tuple[int, int, int]:
    """Croutons needed for an (h, w, c) tensor: (tiles down, tiles across, channel groups)."""
    ny, nx = spatial_grid(mask).shape
    return -(-h // ny), -(-w // nx), -(-c // CHANNELS)


def pack_nhwc(tensor, mask: int) -> np.ndarray:
    """An (H, W, C) FP16 tensor (one image of NHWC) -> croutons, zero-padded.

    Croutons are ordered (tile row, tile column, channel group), so the channel groups of one
    spatial tile are contiguous (an activation-deep operand) and the tile below is
    ``tiles across * channel groups`` croutons further (the single's dY).
    """
    bits = _as_fp16_bits(tensor)
    if bits.ndim != 3:
        raise ValueError(f"expected an (H, W, C) tensor, found shape {bits.shape}")
    h, w, c = bits.shape
    grid = spatial_grid(mask)
    ny, nx = grid.shape
    th, tw, groups = crouton_grid(h, w, c, mask)
    padded = np.zeros((th * ny, tw * nx, groups * CHANNELS), dtype=np.uint16)
    padded[:h, :w, :c] = bits
    # (tile row, y, tile col, x, group, channel) -> (tile row, tile col, group, spatial, channel)
    tiles = padded.reshape(th, ny, tw, nx, groups, CHANNELS).transpose(0, 2, 4, 1, 3, 5)
    cells = np.empty((th, tw, groups, SPATIALS, CHANNELS), dtype=np.uint16)
    cells[:, :, :, grid.reshape(-1), :] = tiles.reshape(th, tw, groups, ny * nx, CHANNELS)
    out = np.empty((th, tw, groups, SPATIALS * CHANNELS), dtype=np.uint16)
    out[..., _ORDER] = cells
    return out.reshape(-1).view(np.uint8)


def unpack_nhwc(data, h: int, w: int, c: int, mask: int) -> np.ndarray:
    """Croutons laid out by ``pack_nhwc`` -> the (h, w, c) FP16 tensor (as float16)."""
    grid = spatial_grid(mask)
    ny, nx = grid.shape
    th, tw, groups = crouton_grid(h, w, c, mask)
    words = _bytes_as_u16(data)
    if words.size != th * tw * groups * SPATIALS * CHANNELS:
        raise ValueError(f"expected {th * tw * groups} croutons "
                         f"({th * tw * groups * CROUTON_BYTES} bytes), found {words.size * 2}")
    cells = words.reshape(th, tw, groups, SPATIALS * CHANNELS)[..., _ORDER]
    tiles = cells[:, :, :, grid.reshape(-1), :].reshape(th, tw, groups, ny, nx, CHANNELS)
    full = tiles.transpose(0, 3, 1, 4, 2, 5).reshape(th * ny, tw * nx, groups * CHANNELS)
    return np.ascontiguousarray(full[:h, :w, :c]).view(np.float16)


# -- weights (Figures 7 and 8) -------------------------------------------------------------------

def weight_vectors(k_in: int) -> int:
    """128-byte vectors per 32-filter group: input channels padded to a multiple of 8."""
    return -(-k_in // 8) * 4


def pack_weights(weights) -> np.ndarray:
    """OI weights ``[k_out, k_in]`` (FP16) -> weight vectors, 32-filter groups one after the
    other; inputs zero-padded to a multiple of 8, outputs to a multiple of 32."""
    bits = _as_fp16_bits(weights)
    if bits.ndim != 2:
        raise ValueError(f"expected (k_out, k_in) weights, found shape {bits.shape}")
    k_out, k_in = bits.shape
    groups, vectors = -(-k_out // CHANNELS), weight_vectors(k_in)
    padded = np.zeros((groups * CHANNELS, vectors * 2), dtype=np.uint16)
    padded[:k_out, :k_in] = bits
    # (group, o, vector, i) -> (group, vector, o, i): element o * 2 + i of each vector
    out = padded.reshape(groups, CHANNELS, vectors, 2).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(out).reshape(-1).view(np.uint8)


def unpack_weights(data, k_out: int, k_in: int) -> np.ndarray:
    """Weight vectors laid out by ``pack_weights`` -> ``[k_out, k_in]`` float16."""
    groups, vectors = -(-k_out // CHANNELS), weight_vectors(k_in)
    words = _bytes_as_u16(data)
    if words.size != groups * vectors * VECTOR_BYTES // 2:
        raise ValueError(f"expected {groups * vectors} weight vectors, found "
                         f"{words.size * 2 / VECTOR_BYTES:g}")
    full = words.reshape(groups, vectors, CHANNELS, 2).transpose(0, 2, 1, 3)
    full = full.reshape(groups * CHANNELS, vectors * 2)
    return np.ascontiguousarray(full[:k_out, :k_in]).view(np.float16)


def weights_matrix(data) -> np.ndarray:
    """The weight vectors of one group as ``[k, o]`` FP16 bits: input channel by filter."""
    words = _bytes_as_u16(data)
    return words.reshape(-1, CHANNELS, 2).transpose(0, 2, 1).reshape(-1, CHANNELS)


# -- bias register sets (Figure 13, Table 4) -----------------------------------------------------

def pack_bias_words(words) -> np.ndarray:
    """64-bit bias registers (a multiple of 32) -> 256-byte sets: low halves, then high."""
    halves = np.asarray(words, dtype="<u8").reshape(-1, CHANNELS).view("<u4")  # low, high
    return halves.reshape(-1, CHANNELS, 2).transpose(0, 2, 1).copy().reshape(-1).view(np.uint8)


def unpack_bias_words(data) -> np.ndarray:
    """256-byte sets -> the 64-bit bias registers (uint64, 32 per set)."""
    raw = np.ascontiguousarray(np.asarray(data, dtype=np.uint8)).reshape(-1)
    if raw.size % BIAS_SET_BYTES:
        raise ValueError(f"bias: expected a multiple of {BIAS_SET_BYTES} bytes, found {raw.size}")
    halves = raw.view("<u4").reshape(-1, 2, CHANNELS).transpose(0, 2, 1).copy()
    return halves.view("<u8").reshape(-1).astype(np.uint64)


def pack_bias(scale, output_bias=0.0, input_bias=0.0, shape=0) -> np.ndarray:
    """Per-channel FP16 scale, output bias, input bias and shape code -> bias sets.

    The extra mantissa bits of the fields (Table 4) are zero; ``pack_bias_fields`` sets them.
    Channels are padded to a multiple of 32 with scale 0.
    """
    scale = np.atleast_1d(np.asarray(scale, dtype=np.float16))
    k = scale.size
    values = {"scale": scale, "output_bias": output_bias, "input_bias": input_bias}
    bits = {n: _as_fp16_bits(np.broadcast_to(np.asarray(v, dtype=np.float16), (k,))).astype(
        np.int64) for n, v in values.items()}
    return pack_bias_fields(scale=bits["scale"] << 4, output_bias=bits["output_bias"] << 4,
                            input_bias=bits["input_bias"] << 5,
                            shape=np.broadcast_to(np.asarray(shape, dtype=np.int64), (k,)))


def pack_bias_fields(**fields) -> np.ndarray:
    """Bias register fields as raw bit patterns (``input_bias`` 21 bits, ``scale`` and
    ``output_bias`` 20 bits, ``shape`` 3 bits; arrays of one length) -> bias sets."""
    k = max(np.size(v) for v in fields.values())
    padded = {}
    for name, value in fields.items():
        array = np.zeros(-(-k // CHANNELS) * CHANNELS, dtype=np.int64)
        array[:k] = np.broadcast_to(np.asarray(value, dtype=np.int64), (k,))
        padded[name] = array
    return pack_bias_words(BIAS_REG.encode_array(**padded))


def unpack_bias(data) -> dict[str, np.ndarray]:
    """Bias sets -> the raw field bit patterns of every channel (``BIAS_REG`` fields)."""
    return BIAS_REG.decode_array(unpack_bias_words(data))
