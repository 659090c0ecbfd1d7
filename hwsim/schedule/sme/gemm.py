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

``gemm_words`` writes the program as an array of A64 words, not instruction by instruction (a
512^3 GEMM is over a million): each distinct instruction is encoded once into a table
(``_tables``), and a compiled walk over the blocks lays the code out from them (``_write``;
docs/sme-lowering.md). ``tests/sme_gemm_oracle.py`` writes the same program line by line,
through the assembler.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numba
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


@functools.lru_cache(maxsize=None)
def _words(*texts: str) -> np.ndarray:
    return np.array([sme.assemble(text) for text in texts], np.uint32)


@functools.lru_cache(maxsize=64)
def _tables(mode: Mode, unsigned: bool, svl_bytes: int, n: int) -> tuple:
    """Every word ``_write`` lays out, encoded once (``_grid``): by register and immediate,
    and the few single ones."""
    form, offsets, letter = STORE[mode.tile_bytes]
    dim = svl_bytes // mode.tile_bytes
    zeros = np.zeros((mode.channel_tiles + 1, PIXEL_TILES + 1), np.uint32)  # by (cts, pts)
    for cts in range(1, mode.channel_tiles + 1):
        for pts in range(1, PIXEL_TILES + 1):
            tiles = [ct * PIXEL_TILES + pt if mode.channel_tiles > 1 else pt
                     for ct in range(cts) for pt in range(pts)]
            zeros[cts, pts] = _words("zero {" + ", ".join(f"za{t}.{letter}" for t in tiles)
                                     + "}")[0]
    high, low = n >> 12, n & 0xFFF
    singles = np.concatenate([_words("ptrue p0.b", f"whilelt p1.{letter}, xzr, x10",
                                     "mov x9, #0"),
                              [_grid("add_x", rd=9, rn=9, imm12=high, sh=1) if high else 0,
                               _grid("add_x", rd=9, rn=9, imm12=low) if low else 0]])
    moves = np.stack([_grid(f"mov{op}_x", rd=range(32), hw=range(4), imm16=0)
                      for op in "znk"])
    return (np.diagonal(_grid("add_x", rd=range(STREAMS), rn=range(STREAMS),
                              imm12=REACH * svl_bytes)).copy(),
            _grid(mode.load, zt=range(REGISTERS), rn=range(STREAMS), imm=range(REACH)),
            _grid("sumopa" if unsigned else mode.mopa, zada=range(mode.tile_bytes),
                  zn=range(REGISTERS), zm=range(REGISTERS)),
            _grid(form, zat=range(mode.tile_bytes), off=range(offsets), pg=range(2), v=1,
                  rn=8, rm=9),
            _grid("movz_w", rd=12, imm16=range(dim)), zeros, singles.astype(np.uint32),
            moves, sme.FORM["movz_x"].word.fields["imm16"].pieces[0][1])


def gemm_words(gemm: Gemm) -> np.ndarray:
    """The A64 words of ``gemm`` (the machine must be in streaming mode with ZA on): PTRUE,
    then per block the MOVs of its stream registers, its first loads, the previous block's
    stores, ZERO and its K steps; the last block's stores. Each distinct instruction is encoded
    once (``_tables``) and the compiled ``_write`` lays the code out from those tables: no
    Python per block or instruction."""
    g, mode = gemm, gemm.mode
    # every stride divides REACH, so a stream reaches each multiple of REACH: its base register
    # advances by REACH vectors (ADD) right before that vector's load
    assert REACH % mode.channel_tiles == 0 and REACH % PIXEL_TILES == 0
    w_group, x_group = (e * DTYPES[mode.src] // g.groups for e in g.panel_elements())
    args = (g.steps, g.m, g.n, g.dim, mode.channel_tiles, g.group > 0, g.w_addr, g.x_addr,
            g.c_addr, w_group, x_group, g.steps * g.svl_bytes, mode.tile_bytes,
            STORE[mode.tile_bytes][1], *_tables(mode, g.unsigned, g.svl_bytes, g.n))
    out = np.empty(_write(np.empty(0, np.uint32), *args), np.uint32)
    _write(out, *args)
    return out


@numba.njit(cache=True)
def _write(out, steps, m, n, dim, ct_n, grouped, w_addr, x_addr, c_addr, w_group, x_group, span,
           tile_bytes, offsets, add, ld, mopa, st1, movz_w12, zeros, singles, moves, imm_at):
    """Lay out ``gemm_words``' program in ``out``, or only count its words when ``out`` is
    empty (the walk of ``tests/sme_gemm_oracle.py``, from the tables); returns the count.
    ``singles``: PTRUE, WHILELT, MOV x9 #0, the ADDs of x9 to the next pixel (0: none);
    ``moves``: MOVZ, MOVN, MOVK by register and halfword, ``imm16`` at bit ``imm_at``. One
    function, each part written once, because numba compiles that fastest."""
    fill = len(out) > 0
    # arguments of one type at every call of a helper: each type is one more compile
    k, x8, x10 = np.int64(0), np.int64(8), np.int64(10)
    k = _put(out, fill, k, singles[0])
    count = np.zeros(STREAMS, np.int64)       # vectors per K step of each load stream
    stride = np.zeros(STREAMS, np.int64)      # and its stride in the stream's panel
    first = np.zeros(STREAMS, np.int64)       # its first register in a K step's loads
    offset = np.zeros(STREAMS, np.int64)      # the vector its base register points at
    # by block parity, this block's and the previous one's: its tiles (tile, first channel,
    # first pixel) and their outer products (tile, weight stream and vector, activation ...)
    tiles = np.zeros((2, TILES, 3), np.int64)
    products = np.zeros((TILES, 5), np.int64)
    n_tiles = np.zeros(2, np.int64)
    channel_tiles, pixel_tiles = -(-n // dim), -(-m // dim)
    across = -(-pixel_tiles // PIXEL_TILES)          # blocks per row of channel tiles
    blocks = -(-channel_tiles // ct_n) * across
    for b in range(blocks + 1):                      # the last pass stores the last block
        now, before = b % 2, 1 - b % 2
        n_tiles[now] = streams = loads = ahead = cts = pts = 0
        rotation = 1
        if b < blocks:
            cb, pb = b // across * ct_n, b % across * PIXEL_TILES
            cts, pts = min(ct_n, channel_tiles - cb), min(PIXEL_TILES, pixel_tiles - pb)
            streams = 2 * cts if grouped else 2
            for i in range(streams):
                if i < (cts if grouped else 1):      # weights
                    addr = w_addr + (cb + i) * w_group if grouped else w_addr + cb * span
                    count[i] = 1 if grouped else cts
                    stride[i] = 1 if grouped else ct_n
                else:           # grouped: each channel tile a group, with its own panels
                    addr = x_addr + pb * span + ((cb + i - cts) * x_group if grouped else 0)
                    count[i], stride[i] = pts, PIXEL_TILES
                k = _mov(out, fill, k, i, addr, moves, imm_at)
                first[i], offset[i] = loads, 0
                loads += count[i]
            rotation = REGISTERS // loads
            ahead = min(rotation - 1, steps)         # K steps loaded before the first
            for ct in range(cts):
                for pt in range(pts):
                    t = n_tiles[now]
                    tile = ct * PIXEL_TILES + pt if ct_n > 1 else pt
                    tiles[now, t, 0], tiles[now, t, 1] = tile, (cb + ct) * dim
                    tiles[now, t, 2] = (pb + pt) * dim
                    products[t, 0] = tile
                    products[t, 1] = ct if grouped else 0
                    products[t, 2] = 0 if grouped else ct
                    products[t, 3] = cts + ct if grouped else 1
                    products[t, 4] = pt
                    n_tiles[now] += 1
        for q in range(-ahead, steps if b < blocks else 1):
            if q == 0:      # the previous block's stores, then ZERO
                for t in range(n_tiles[before]):
                    tile, c0, m0 = tiles[before, t, 0], tiles[before, t, 1], tiles[before, t, 2]
                    partial = 1 if n - c0 < dim else 0
                    if partial:
                        k = _mov(out, fill, k, x10, n - c0, moves, imm_at)
                        k = _put(out, fill, k, singles[1])
                    k = _mov(out, fill, k, x8, c_addr + (m0 * n + c0) * tile_bytes, moves,
                             imm_at)
                    k = _put(out, fill, k, singles[2])
                    for j in range(min(dim, m - m0)):
                        if j % offsets == 0:
                            k = _put(out, fill, k, movz_w12[j])
                        for a in range(3, 5):       # x9 += n
                            if j and singles[a]:
                                k = _put(out, fill, k, singles[a])
                        k = _put(out, fill, k, st1[tile, j % offsets, partial])
                if b == blocks:
                    break
                k = _put(out, fill, k, zeros[cts, pts])
            step = q + ahead        # the loads of K step q + ahead: per stream, an ADD of its
            if step < steps:        # base register when the immediate runs out, LD1s
                turn = step % rotation * loads
                for i in range(streams):
                    for v in range(count[i]):
                        index = step * stride[i] + v
                        if index - offset[i] >= REACH:
                            k = _put(out, fill, k, add[i])
                            offset[i] = index
                        k = _put(out, fill, k, ld[turn + first[i] + v, i, index - offset[i]])
            if q >= 0:
                turn = q % rotation * loads
                for p in range(n_tiles[now]):
                    k = _put(out, fill, k, mopa[products[p, 0],
                                                turn + first[products[p, 1]] + products[p, 2],
                                                turn + first[products[p, 3]] + products[p, 4]])
    return k


@numba.njit(cache=True)
def _put(out, fill, k, word):
    if fill:
        out[k] = word
    return k + 1


@numba.njit(cache=True)
def _mov(out, fill, k, rd, value, moves, imm_at):
    """``mov Xrd, #value`` as ``sme.mov_words`` expands it: MOVZ (or MOVN, when fewer
    halfwords differ from 0xFFFF than from 0) of the first halfword that needs one, then a
    MOVK per other; one MOVZ #0 for 0."""
    chunks = np.empty(4, np.int64)
    nonzero = nonones = 0
    for hw in range(4):
        chunks[hw] = (value >> (16 * hw)) & 0xFFFF
        nonzero += chunks[hw] != 0
        nonones += chunks[hw] != 0xFFFF
    invert = nonones < nonzero
    skipped, needed = (0xFFFF, nonones) if invert else (0, nonzero)
    started = False
    for hw in range(4):
        if chunks[hw] == skipped and (needed or hw):
            continue
        if started:
            op, imm = 2, chunks[hw]
        else:
            op, imm = (1, chunks[hw] ^ 0xFFFF) if invert else (0, chunks[hw])
            started = True
        k = _put(out, fill, k, np.uint32(moves[op, rd, hw] | (imm << imm_at)))
    return k
