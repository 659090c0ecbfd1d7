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
    vectors per K step and their stride in its panel, the outer products (tile, weight stream,
    vector, activation stream, vector) in issue order, and the tiles (tile, channel tile, pixel
    tile within the block)."""

    counts: tuple
    strides: tuple
    products: tuple
    tiles: tuple


def _shape(g: Gemm, cts: int, pts: int) -> _Shape:
    ct_n = g.mode.channel_tiles
    pairs = [(ct, pt) for ct in range(cts) for pt in range(pts)]
    tiles = tuple((ct * PIXEL_TILES + pt if ct_n > 1 else pt, ct, pt) for ct, pt in pairs)
    if g.group:     # each channel tile is a group with its own panels
        counts, strides = (1,) * cts + (pts,) * cts, (1,) * cts + (PIXEL_TILES,) * cts
        uses = [(ct, 0, cts + ct, pt) for ct, pt in pairs]
    else:
        counts, strides = (cts, pts), (ct_n, PIXEL_TILES)
        uses = [(0, ct, 1, pt) for ct, pt in pairs]
    return _Shape(counts, strides, tuple((t[0], *u) for t, u in zip(tiles, uses)), tiles)


def _blocks(g: Gemm) -> list[tuple[_Shape, list[int], list[tuple]]]:
    """Each output block: its shape, its streams' panel addresses (stream i in register xi)
    and its tiles (tile, first channel, first pixel)."""
    dim, vb, ct_n = g.dim, g.svl_bytes, g.mode.channel_tiles
    elem = DTYPES[g.mode.src]
    w_group, x_group = (e * elem // g.groups for e in g.panel_elements())
    channel_tiles, pixel_tiles = -(-g.n // dim), -(-g.m // dim)
    shapes: dict = {}
    blocks = []
    for cb in range(0, channel_tiles, ct_n):
        cts = min(ct_n, channel_tiles - cb)
        for pb in range(0, pixel_tiles, PIXEL_TILES):
            pts = min(PIXEL_TILES, pixel_tiles - pb)
            if (cts, pts) not in shapes:
                shapes[cts, pts] = _shape(g, cts, pts)
            shape = shapes[cts, pts]
            x_off = pb * g.steps * vb
            if g.group:
                addrs = [g.w_addr + (cb + ct) * w_group for ct in range(cts)] + [
                    g.x_addr + (cb + ct) * x_group + x_off for ct in range(cts)]
            else:
                addrs = [g.w_addr + cb * g.steps * vb, g.x_addr + x_off]
            tiles = [(t, (cb + ct) * dim, (pb + pt) * dim) for t, ct, pt in shape.tiles]
            blocks.append((shape, addrs, tiles))
    return blocks


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


def _stores(g: Gemm, tiles: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """The stores of ``tiles`` (tile, first channel, first pixel), one row each: vertical slices
    (one pixel's channels each) to the row-major output, predicated on the valid channels.
    Returns the words in program order and each tile's count."""
    form, offsets, letter = STORE[g.mode.tile_bytes]
    tile, c0, m0 = np.array(tiles, np.int64).T
    rows = len(tile)
    channels, pixels = np.minimum(g.dim, g.n - c0), np.minimum(g.dim, g.m - m0)
    partial = channels < g.dim
    moves, moved = sme.mov_words([10, 8], np.stack(
        [channels, g.c_addr + (m0 * g.n + c0) * g.mode.tile_bytes], axis=1))
    whilelt, x9 = (np.full((rows, 1), sme.assemble(text), np.uint32)
                   for text in (f"whilelt p1.{letter}, xzr, x10", "mov x9, #0"))
    # per pixel: MOV W12 at each group of slices, x9 += n in ADD immediates of 12 bits (the high
    # part shifted by 12), ST1
    j = np.arange(g.dim)
    valid = j < pixels[:, None]
    high, low = g.n >> 12, g.n & 0xFFF
    st1 = _grid(form, zat=range(g.mode.tile_bytes), off=range(offsets), pg=range(2), v=1, rn=8,
                rm=9)
    pixel = np.stack(np.broadcast_arrays(
        _grid("movz_w", rd=12, imm16=range(g.dim)), _grid("add_x", rd=9, rn=9, imm12=high, sh=1),
        _grid("add_x", rd=9, rn=9, imm12=low), st1[tile[:, None], j % offsets, partial[:, None] * 1]),
        axis=2)
    pixel_used = np.stack([valid & (j % offsets == 0), valid & (j > 0) & bool(high),
                           valid & (j > 0) & bool(low), valid], axis=2)
    words = np.concatenate([moves[:, 0], whilelt, moves[:, 1], x9, pixel.reshape(rows, -1)],
                           axis=1)
    used = np.concatenate([moved[:, 0] & partial[:, None], partial[:, None], moved[:, 1],
                           np.ones((rows, 1), bool), pixel_used.reshape(rows, -1)], axis=1)
    return words[used], used.sum(axis=1)


def _by_block(words: np.ndarray, counts: np.ndarray, rows: list[int]) -> list[np.ndarray]:
    """Code made of rows (``counts`` words each) cut into blocks of ``rows`` rows each."""
    ends = np.cumsum(counts)[np.cumsum(rows) - 1]
    return np.split(words, ends[:-1])


def gemm_words(gemm: Gemm) -> np.ndarray:
    """The A64 words of ``gemm`` (the machine must be in streaming mode with ZA on): PTRUE,
    then per block the MOVs of its stream registers, its first loads, the previous block's
    stores, ZERO and its K steps; the last block's stores. Each distinct instruction is encoded
    once (``_grid``) and the code laid out with numpy: no Python per instruction."""
    blocks = _blocks(gemm)
    bodies = {shape: _body(gemm.mode, gemm.unsigned, gemm.svl_bytes, gemm.steps, shape)
              for shape in {shape for shape, _, _ in blocks}}
    registers = [reg for _, addrs, _ in blocks for reg in range(len(addrs))]
    words, used = sme.mov_words(registers, [a for _, addrs, _ in blocks for a in addrs])
    moves = _by_block(words[used], used.sum(axis=1), [len(addrs) for _, addrs, _ in blocks])
    stores = _by_block(*_stores(gemm, [t for *_, tiles in blocks for t in tiles]),
                       [len(tiles) for *_, tiles in blocks])
    pieces = [np.uint32([sme.assemble("ptrue p0.b")])]
    for i, (shape, _, _) in enumerate(blocks):
        first_loads, k_steps = bodies[shape]
        pieces += [moves[i], first_loads, *stores[i - 1:i], k_steps]   # stores: the previous
    pieces.append(stores[-1])
    return np.concatenate(pieces)
