"""GEMM kernels for the SME machine: C[m, n] = X[m, k] W[n, k]^T on ZA tiles, as A64 code.

The kernels compute output blocks on ZA tiles with rows = output channels (``n``) and columns =
pixels (``m``), so a vertical tile slice is one pixel's channels and stores straight into the
row-major (NHWC) output. Both operands come as panels (``hwsim.targets.sme.layouts``): the weights
packed at compile time, the activations packed at run time by a ``vec pack`` routine.

Four numeric modes (``MODES``):

=================  ==========================  ======================  ==========================
mode               outer product               block (channels x px)   per K step
=================  ==========================  ======================  ==========================
``fp32``           FMOPA .S (fp32)             2 x 2 .S tiles: 32x32   2 + 2 LD1W, 4 FMOPA
``bf16-widening``  BFMOPA .S (bf16 pairs)      2 x 2 .S tiles: 32x32   2 + 2 LD1H, 4 BFMOPA
``bf16``           BFMOPA .H (non-widening)    1 x 2 .H tiles: 32x64   1 + 2 LD1H, 2 BFMOPA
``int8``           SMOPA/SUMOPA .S (4-way)     2 x 2 .S tiles: 32x32   2 + 2 LD1B, 4 SMOPA
=================  ==========================  ======================  ==========================

(sizes at SVL 512). Each block interleaves its tiles' outer products, so four (two for .H)
independent accumulation chains keep the pipeline full: an FMOPA chain needs 4 in flight at
latency 4 and 1 per cycle, BFMOPA .H 2 at 4 cycles each and latency 8. Operand loads go through
Z registers, rotated over as many K steps as the 32 registers hold and issued that many steps
minus one ahead of their outer products (there is no register renaming; a load's 20-cycle
latency must hide behind the steps in between). The next block's first loads are issued before
this block's stores. A block starts with ZERO and ends with ST1W/ST1H of vertical tile slices,
predicated on the valid channels (WHILELT) and skipped for pixels past ``m``.

A grouped GEMM (``group`` > 0, depthwise convolution) gives each group of ``group`` channels
(one tile's rows) its own K panels of both operands; a block's two channel tiles then load their
own activations. int8 weights are signed; activations are signed (SMOPA) or, when ``unsigned``,
unsigned bytes (SUMOPA: zn signed, zm unsigned).

``gemm_words`` writes the program as an array of A64 words with numpy, not instruction by
instruction (a 512^3 GEMM is over a million): each distinct instruction is encoded once into a
table (``_grid``), a block's loads and outer products depend only on its shape and are one table
per shape (``_body``), the stores one row per tile (``_stores``), and one gather joins them
(docs/sme-lowering.md). ``tests/sme_gemm_oracle.py`` writes the same program line by line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from hwsim.isa import sme
from hwsim.isa.sme_vector import DTYPES
from hwsim.targets.sme import layouts


@dataclass(frozen=True)
class Mode:
    name: str
    tile_bytes: int      # ZA tile element bytes (4: .S, 2: .H)
    src: str             # panel element dtype (hwsim.isa.sme_vector)
    depth: int           # K values per tile element (Arm's pairs and quads)
    mopa: str            # outer-product form (hwsim.isa.sme.FORM)
    load: str            # LD1 form (scalar plus immediate)
    channel_tiles: int   # tiles along the channels of a block
    acc: str             # tile element dtype stored to C


MODES = {m.name: m for m in (
    Mode("fp32", 4, "f32", 1, "fmopa_ss", "ld1w_si", 2, "f32"),
    Mode("bf16-widening", 4, "bf16", 2, "bfmopa_sh", "ld1h_si", 2, "f32"),
    Mode("bf16", 2, "bf16", 1, "bfmopa_hh", "ld1h_si", 1, "bf16"),
    Mode("int8", 4, "i8", 4, "smopa", "ld1b_si", 2, "i32"),
)}
PIXEL_TILES = 2
STREAMS = 4             # load streams of a block at most, stream i based in register xi
TILES = 4               # ZA tiles of a block at most
REGISTERS = 32          # Z registers the operand loads rotate over
REACH = 8               # LD1's immediate reaches vectors #-8..7 (mul vl) from its base register
# by tile element size: ST1 of a vertical slice, slices per W12 value (.S 0..3, .H 0..7), and
# the element size's letter
STORE = {4: ("st1w_za", 4, "s"), 2: ("st1h_za", 8, "h")}


@dataclass(frozen=True)
class Gemm:
    """One GEMM: ``m`` pixels, ``n`` channels, ``k`` per channel (per group if grouped), the
    panels' and the output's addresses in ``mem``."""

    mode: Mode
    m: int
    n: int
    k: int
    w_addr: int
    x_addr: int
    c_addr: int
    group: int = 0
    unsigned: bool = False
    svl_bytes: int = 64

    @property
    def dim(self) -> int:
        return self.svl_bytes // self.mode.tile_bytes

    @property
    def steps(self) -> int:
        return -(-self.k // self.mode.depth)

    @property
    def groups(self) -> int:
        return -(-self.n // self.group) if self.group else 1

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k

    def w_panel(self) -> tuple:
        """(rows, vectors, depth) of the weight panels (per group if grouped)."""
        return self.dim, 1 if self.group else self.mode.channel_tiles, self.mode.depth

    def x_panel(self) -> tuple:
        """(rows, vectors, depth) of the activation panels (per group if grouped)."""
        return self.dim, PIXEL_TILES, self.mode.depth

    def panel_elements(self) -> tuple[int, int]:
        """Elements of the weight and the activation panels, all groups."""
        w = layouts.panel_elements(self.group or self.n, self.k, *self.w_panel())
        x = layouts.panel_elements(self.m, self.k, *self.x_panel())
        return self.groups * w, self.groups * x


@dataclass(frozen=True)
class _Shape:
    """What the blocks of one shape (channel tiles x pixel tiles) share: each load stream's
    vectors per K step, their stride in its panel and where it reads (panel: 0 weights, 1
    activations; channel tile), the outer products (tile, weight stream, vector, activation
    stream, vector) in issue order, and the tiles (tile, channel tile, pixel tile)."""

    counts: tuple
    strides: tuple
    streams: tuple
    products: tuple
    tiles: tuple


def _shape(g: Gemm, cts: int, pts: int) -> _Shape:
    ct_n = g.mode.channel_tiles
    pairs = [(ct, pt) for ct in range(cts) for pt in range(pts)]
    tiles = tuple((ct * PIXEL_TILES + pt if ct_n > 1 else pt, ct, pt) for ct, pt in pairs)
    if g.group:     # each channel tile is a group with its own panels
        counts, strides = (1,) * cts + (pts,) * cts, (1,) * cts + (PIXEL_TILES,) * cts
        streams = tuple((panel, ct) for panel in (0, 1) for ct in range(cts))
        uses = [(ct, 0, cts + ct, pt) for ct, pt in pairs]
    else:
        counts, strides, streams = (cts, pts), (ct_n, PIXEL_TILES), ((0, 0), (1, 0))
        uses = [(0, ct, 1, pt) for ct, pt in pairs]
    products = tuple((t[0], *u) for t, u in zip(tiles, uses))
    return _Shape(counts, strides, streams, products, tiles)


def _padded(rows: tuple, n: int) -> np.ndarray:
    """``rows`` as an [n, columns + 1] array: each row and a 1 (real), then rows of zeros."""
    out = np.zeros((n, len(rows[0]) + 1), np.int64)
    out[:len(rows)] = [(*row, 1) for row in rows]
    return out


def _columns(tables: list[np.ndarray], which: np.ndarray) -> np.ndarray:
    """The columns of ``tables[which[i]]`` for each i: [columns, len(which), rows]."""
    return np.moveaxis(np.array(tables)[which], -1, 0)


def _blocks(g: Gemm) -> tuple:
    """The output blocks in program order, as arrays: their shapes (``shapes[shape]``), their
    streams' panel addresses (stream i in register xi) [blocks, STREAMS] and their tiles
    (tile, first channel, first pixel) [blocks, TILES, 3], each with a mask of the real ones."""
    dim, ct_n, span = g.dim, g.mode.channel_tiles, g.steps * g.svl_bytes   # a vector's panel
    w_group, x_group = (e * DTYPES[g.mode.src] // g.groups for e in g.panel_elements())
    channel_tiles, pixel_tiles = -(-g.n // dim), -(-g.m // dim)
    cb, pb = (a.reshape(-1, 1) for a in np.meshgrid(
        np.arange(0, channel_tiles, ct_n), np.arange(0, pixel_tiles, PIXEL_TILES), indexing="ij"))
    sizes, shape = np.unique(np.minimum(ct_n, channel_tiles - cb) * (PIXEL_TILES + 1) +
                             np.minimum(PIXEL_TILES, pixel_tiles - pb), return_inverse=True)
    shapes = [_shape(g, *divmod(int(size), PIXEL_TILES + 1)) for size in sizes]
    shape = shape.reshape(-1)
    panel, ct, streams = _columns([_padded(s.streams, STREAMS) for s in shapes], shape)
    addrs = np.where(panel == 0, g.w_addr + (cb + ct) * (w_group if g.group else span),
                     g.x_addr + (cb + ct) * (x_group if g.group else 0) + pb * span)
    tile, tct, tpt, real = _columns([_padded(s.tiles, TILES) for s in shapes], shape)
    tiles = np.stack([tile, (cb + tct) * dim, (pb + tpt) * dim], axis=-1)
    return shapes, shape, addrs, streams == 1, tiles, real == 1


@functools.lru_cache(maxsize=None)
def _grid(form: str, **fields) -> np.ndarray:
    """The words of ``form`` for every combination of the fields given as ranges (an axis
    each, in order; the other fields fixed): each distinct instruction encoded once, then
    gathered."""
    axes = [name for name, value in fields.items() if isinstance(value, range)]
    grids = np.meshgrid(*(np.array(fields[name]) for name in axes), indexing="ij")
    words = sme.FORM[form].word.encode_array(**{**fields, **dict(zip(axes, grids))})
    words = words.astype(np.uint32)
    words.flags.writeable = False
    return words


@functools.lru_cache(maxsize=256)
def _body(mode: Mode, unsigned: bool, svl_bytes: int, steps: int,
          shape: _Shape) -> tuple[np.ndarray, np.ndarray]:
    """The code of a block of ``shape`` after its MOVs, in two parts around the previous block's
    stores: the loads of the first ``rotation - 1`` K steps, then ZERO and the K steps (the
    loads of the step ``rotation - 1`` ahead, then the outer products). The same for every
    block of this shape and GEMM shape: it holds no address."""
    counts = np.array(shape.counts)
    loads = int(counts.sum())
    rotation = REGISTERS // loads          # K steps whose operands the Z registers hold
    stream = np.repeat(np.arange(len(counts)), counts)    # of each load of a K step
    first = np.cumsum(counts) - counts                     # each stream's first load
    step = np.arange(steps)[:, None]
    turn = step % rotation * loads                         # the step's first Z register
    index = step * np.array(shape.strides)[stream] + np.arange(loads) - first[stream]
    # Every stride divides REACH, so a stream reaches each multiple of REACH: its base register
    # advances by REACH vectors (ADD) right before that vector's load.
    assert REACH % np.lcm.reduce(shape.strides) == 0
    add = _grid("add_x", rd=range(STREAMS), rn=range(STREAMS), imm12=REACH * svl_bytes)
    ld = _grid(mode.load, zt=range(REGISTERS), rn=range(STREAMS), imm=range(REACH))
    # one row per K step: ADD (if any) and LD1 of each load
    words = np.stack(np.broadcast_arrays(add[stream, stream],
                                         ld[turn + np.arange(loads), stream, index % REACH]),
                     axis=2).reshape(steps, 2 * loads)
    used = np.stack([(index % REACH == 0) & (index > 0), np.ones_like(index, bool)],
                    axis=2).reshape(words.shape)
    ahead = min(rotation - 1, steps)
    late, late_used = np.zeros_like(words), np.zeros_like(used)   # the loads of step + ahead
    late[:steps - ahead], late_used[:steps - ahead] = words[ahead:], used[ahead:]
    tile, ws, wv, xs, xv = np.array(shape.products).T
    mopa = _grid("sumopa" if unsigned else mode.mopa, zada=range(mode.tile_bytes),
                 zn=range(REGISTERS), zm=range(REGISTERS))   # ZA has tile_bytes tiles
    products = mopa[tile, turn + first[ws] + wv, turn + first[xs] + xv]
    table = np.concatenate([late, products], axis=1)
    table_used = np.concatenate([late_used, np.ones(products.shape, bool)], axis=1)
    letter = STORE[mode.tile_bytes][2]
    zero = sme.assemble("zero {" + ", ".join(f"za{t}.{letter}" for t, _, _ in shape.tiles) + "}")
    first_loads = words[:ahead][used[:ahead]]
    k_steps = np.concatenate([np.uint32([zero]), table[table_used]])
    first_loads.flags.writeable = k_steps.flags.writeable = False
    return first_loads, k_steps


def _stores(g: Gemm, tiles: np.ndarray, real: np.ndarray, channels: np.ndarray,
            moves: np.ndarray, moved: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stores of ``tiles`` (rows of tile, first channel, first pixel; the ``real`` ones)
    with their valid ``channels``, one row each: vertical slices (one pixel's channels each)
    to the row-major output, predicated on the valid channels. ``moves``/``moved``: each tile's
    MOVs of x10 (its channels) and x8 (its output), from ``sme.mov_words``. Returns the words
    in program order and each row's count."""
    form, offsets, letter = STORE[g.mode.tile_bytes]
    tile, pixels = tiles[:, 0], np.minimum(g.dim, g.m - tiles[:, 2])
    partial, real = (channels < g.dim)[:, None], real[:, None]
    whilelt, x9 = (np.full((len(tile), 1), sme.assemble(text), np.uint32)
                   for text in (f"whilelt p1.{letter}, xzr, x10", "mov x9, #0"))
    # per pixel: MOV W12 at each group of slices, x9 += n in ADD immediates of 12 bits (the high
    # part shifted by 12), ST1
    j = np.arange(g.dim)
    valid = real & (j < pixels[:, None])
    high, low = g.n >> 12, g.n & 0xFFF
    st1 = _grid(form, zat=range(g.mode.tile_bytes), off=range(offsets), pg=range(2), v=1, rn=8,
                rm=9)
    pixel = np.stack(np.broadcast_arrays(
        _grid("movz_w", rd=12, imm16=range(g.dim)), _grid("add_x", rd=9, rn=9, imm12=high, sh=1),
        _grid("add_x", rd=9, rn=9, imm12=low), st1[tile[:, None], j % offsets, partial * 1]),
        axis=2)
    pixel_used = np.stack([valid & (j % offsets == 0), valid & (j > 0) & bool(high),
                           valid & (j > 0) & bool(low), valid], axis=2)
    words = np.concatenate([moves[:, 0], whilelt, moves[:, 1], x9,
                            pixel.reshape(len(tile), -1)], axis=1)
    used = np.concatenate([moved[:, 0] & partial & real, partial & real, moved[:, 1] & real,
                           real, pixel_used.reshape(len(tile), -1)], axis=1)
    return words[used], used.sum(axis=1)


def _ragged(source: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``source[start:start + length]`` for each start and length, joined."""
    ends = np.cumsum(lengths)
    return source[np.repeat(starts - ends + lengths, lengths) + np.arange(ends[-1])]


def _starts(lengths: np.ndarray, first: int) -> np.ndarray:
    return first + np.cumsum(lengths) - lengths


def gemm_words(gemm: Gemm) -> np.ndarray:
    """The A64 words of ``gemm`` (the machine must be in streaming mode with ZA on): PTRUE,
    then per block the MOVs of its stream registers, its first loads, the previous block's
    stores, ZERO and its K steps; the last block's stores. Each distinct instruction is encoded
    once (``_grid``) and the code laid out with numpy: no Python per block or instruction."""
    shapes, shape, addrs, streams, tiles, real = _blocks(gemm)
    tiles, real = tiles.reshape(-1, 3), real.reshape(-1)
    channels = np.minimum(gemm.dim, gemm.n - tiles[:, 1])
    outputs = gemm.c_addr + (tiles[:, 2] * gemm.n + tiles[:, 1]) * gemm.mode.tile_bytes
    # every MOV at once: the blocks' stream registers, then each tile's x10 and x8
    words, used = sme.mov_words(
        np.concatenate([np.tile(np.arange(STREAMS), len(shape)), np.tile([10, 8], len(tiles))]),
        np.concatenate([addrs.reshape(-1), np.stack([channels, outputs], axis=1).reshape(-1)]))
    moved = used[:addrs.size] & streams.reshape(-1, 1)
    move_counts = moved.reshape(len(shape), -1).sum(axis=1)
    stores, store_counts = _stores(gemm, tiles, real, channels, *(
        m[addrs.size:].reshape(len(tiles), 2, -1) for m in (words, used)))
    store_counts = store_counts.reshape(len(shape), -1).sum(axis=1)
    bodies = [part for s in shapes for part in
              _body(gemm.mode, gemm.unsigned, gemm.svl_bytes, gemm.steps, s)]
    source = np.concatenate([np.uint32([sme.assemble("ptrue p0.b")]),
                             words[:addrs.size][moved], stores, *bodies])
    body_lengths = np.array([len(part) for part in bodies])
    body_starts = _starts(body_lengths, 1 + move_counts.sum() + len(stores))
    store_starts = _starts(store_counts, 1 + move_counts.sum())
    previous = np.concatenate([[0], store_counts[:-1]])       # the previous block's stores
    starts = np.stack([_starts(move_counts, 1), body_starts[2 * shape],
                       store_starts - previous, body_starts[2 * shape + 1]], axis=1)
    lengths = np.stack([move_counts, body_lengths[2 * shape], previous,
                        body_lengths[2 * shape + 1]], axis=1)
    return _ragged(source, np.concatenate([[0], starts.reshape(-1), store_starts[-1:]]),
                   np.concatenate([[1], lengths.reshape(-1), store_counts[-1:]]))
