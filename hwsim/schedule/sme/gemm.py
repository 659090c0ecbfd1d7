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

from hwsim.isa import sme
from hwsim.targets.sme import layouts


@dataclass(frozen=True)
class Mode:
    name: str
    tile_bytes: int      # ZA tile element bytes (4: .S, 2: .H)
    src: str             # panel element dtype (hwsim.isa.sme_vector)
    depth: int           # K values per tile element (Arm's pairs and quads)
    mopa: str            # outer-product form, with {t} {w} {x}
    load: str            # LD1 mnemonic and element suffix
    channel_tiles: int   # tiles along the channels of a block
    acc: str             # tile element dtype stored to C


MODES = {m.name: m for m in (
    Mode("fp32", 4, "f32", 1, "fmopa za{t}.s, p0/m, p0/m, z{w}.s, z{x}.s", "ld1w s", 2, "f32"),
    Mode("bf16-widening", 4, "bf16", 2, "bfmopa za{t}.s, p0/m, p0/m, z{w}.h, z{x}.h", "ld1h h",
         2, "f32"),
    Mode("bf16", 2, "bf16", 1, "bfmopa za{t}.h, p0/m, p0/m, z{w}.h, z{x}.h", "ld1h h", 1,
         "bf16"),
    Mode("int8", 4, "i8", 4, "smopa za{t}.s, p0/m, p0/m, z{w}.b, z{x}.b", "ld1b b", 2, "i32"),
)}
PIXEL_TILES = 2
SLICE_OFFSETS = {4: 4, 2: 8}     # ST1W/ST1H slice offsets: 0..3 for .S, 0..7 for .H
STORE = {4: "st1w {{za{t}v.s[w12, {o}]}}, p{p}, [x8, x9, lsl #2]",
         2: "st1h {{za{t}v.h[w12, {o}]}}, p{p}, [x8, x9, lsl #1]"}
STREAM_REGISTERS = (0, 1, 2, 3)


@functools.lru_cache(maxsize=1 << 16)
def instructions(text: str) -> tuple:
    """The instruction(s) of one assembly line, parsed once (they are immutable)."""
    return tuple(sme.parse_line(text))


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
    def w_vectors(self) -> int:
        return 1 if self.group else self.mode.channel_tiles

    def w_panel(self, r: int) -> tuple:
        """(rows, vectors, depth) of the weight panels."""
        return self.dim, self.w_vectors, self.mode.depth

    def x_panel(self) -> tuple:
        return self.dim, PIXEL_TILES, self.mode.depth

    def panel_elements(self) -> tuple[int, int]:
        """Elements of the weight and the activation panels (all groups)."""
        groups = self.groups
        rows = self.group or self.n
        w = layouts.panel_elements(rows, self.k, *self.w_panel(rows))
        x = layouts.panel_elements(self.m, self.k, *self.x_panel())
        return groups * w, groups * x

    @property
    def groups(self) -> int:
        return -(-self.n // self.group) if self.group else 1

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k


@dataclass
class _Stream:
    """Vectors of one panel: a base register, the first ``per_step`` of the ``stride``
    vectors of each K step."""

    reg: int
    addr: int
    per_step: int
    stride: int
    offset: int = 0     # the vector the register points at


class GemmWriter:
    """Emits a GEMM's instructions into ``out`` (a list)."""

    def __init__(self, gemm: Gemm, out: list):
        self.g, self.out = gemm, out
        self.vector_bytes = gemm.svl_bytes
        self.elem = {"f32": 4, "bf16": 2, "i8": 1}[gemm.mode.src]
        mopa = gemm.mode.mopa
        self.mopa = mopa.replace("smopa", "sumopa") if gemm.unsigned else mopa

    def asm(self, text: str) -> None:
        self.out.extend(instructions(text))

    def mov(self, reg: str, value: int) -> None:
        self.out.extend(sme.assemble_program(f"mov {reg}, #{value}"))

    # -- the block schedule ------------------------------------------------------------------
    def blocks(self) -> list[tuple[list[_Stream], list[tuple], list[tuple]]]:
        """Per output block: its load streams, its outer products (tile, stream, vector,
        stream, vector) and its tiles (tile, first channel, first pixel)."""
        g, dim = self.g, self.g.dim
        steps, vb = g.steps, self.vector_bytes
        ct_n = g.mode.channel_tiles
        w_group, x_group = (e * self.elem for e in g.panel_elements())
        w_group //= g.groups
        x_group //= g.groups
        out = []
        channel_tiles = -(-g.n // dim)
        for cb in range(0, channel_tiles, ct_n):
            cts = range(min(ct_n, channel_tiles - cb))
            for pb in range(-(-g.m // (dim * PIXEL_TILES))):
                pts = range(min(PIXEL_TILES, -(-(g.m - pb * dim * PIXEL_TILES) // dim)))
                x_off = pb * steps * PIXEL_TILES * vb
                tiles = [(2 * ct + pt if g.mode.tile_bytes == 4 else pt,
                          (cb + ct) * dim, (pb * PIXEL_TILES + pt) * dim)
                         for ct in cts for pt in pts]
                if g.group:
                    streams = [_Stream(0, g.w_addr + (cb + ct) * w_group, 1, 1)
                               for ct in cts] + \
                        [_Stream(0, g.x_addr + (cb + ct) * x_group + x_off, len(pts),
                                 PIXEL_TILES) for ct in cts]
                    mopas = [(ct, pt) for ct in cts for pt in pts]
                    products = [(tiles[i][0], ct, 0, len(cts) + ct, pt)
                                for i, (ct, pt) in enumerate(mopas)]
                else:
                    w_off = cb // ct_n * steps * ct_n * vb
                    streams = [_Stream(0, g.w_addr + w_off, len(cts), ct_n),
                               _Stream(0, g.x_addr + x_off, len(pts), PIXEL_TILES)]
                    products = [(tiles[i][0], 0, ct, 1, pt) for i, (ct, pt) in
                                enumerate((ct, pt) for ct in cts for pt in pts)]
                for reg, s in zip(STREAM_REGISTERS, streams):
                    s.reg = reg
                out.append((streams, products, tiles))
        return out

    def write(self) -> None:
        self.asm("ptrue p0.b")
        blocks = self.blocks()
        pending = None
        for streams, products, tiles in blocks:
            loads_per_step = sum(s.per_step for s in streams)
            rotation = 32 // loads_per_step
            ahead = rotation - 1
            self._loads_setup(streams, ahead, rotation)
            if pending:
                self._stores(pending)
            self.asm("zero {" + ", ".join(self._tile_name(t) for t, _, _ in tiles) + "}")
            for step in range(self.g.steps):
                if step + ahead < self.g.steps:
                    self._loads(streams, step + ahead, rotation)
                regs = self._registers(streams, step, rotation)
                for tile, ws, wv, xs, xv in products:
                    self.asm(self.mopa.format(t=tile, w=regs[ws][wv], x=regs[xs][xv]))
            pending = tiles
        if pending:
            self._stores(pending)

    def _tile_name(self, tile: int) -> str:
        return f"za{tile}.{'s' if self.g.mode.tile_bytes == 4 else 'h'}"

    def _registers(self, streams, step: int, rotation: int) -> list[list[int]]:
        """Z registers of each stream's vectors at ``step``."""
        per = sum(s.per_step for s in streams)
        base = (step % rotation) * per
        regs, first = [], base
        for s in streams:
            regs.append(list(range(first, first + s.per_step)))
            first += s.per_step
        return regs

    def _loads_setup(self, streams, ahead: int, rotation: int) -> None:
        for s in streams:
            self.mov(f"x{s.reg}", s.addr)
            s.offset = 0
        for step in range(min(ahead, self.g.steps)):
            self._loads(streams, step, rotation)

    def _loads(self, streams, step: int, rotation: int) -> None:
        mnemonic, suffix = self.g.mode.load.split()
        regs = self._registers(streams, step, rotation)
        for s, rs in zip(streams, regs):
            for v, z in enumerate(rs):
                index = step * s.stride + v
                if index - s.offset > 7:
                    self.asm(f"add x{s.reg}, x{s.reg}, #{(index - s.offset) * self.vector_bytes}")
                    s.offset = index
                imm = index - s.offset
                where = f"[x{s.reg}, #{imm}, mul vl]" if imm else f"[x{s.reg}]"
                self.asm(f"{mnemonic} {{z{z}.{suffix}}}, p0/z, {where}")

    def _stores(self, tiles) -> None:
        g = self.g
        esize = g.mode.tile_bytes
        acc_bytes = esize
        offsets = SLICE_OFFSETS[esize]
        suffix = "s" if esize == 4 else "h"
        for tile, c0, m0 in tiles:
            channels, pixels = min(g.dim, g.n - c0), min(g.dim, g.m - m0)
            pred = 0
            if channels < g.dim:
                self.mov("x10", channels)
                self.asm(f"whilelt p1.{suffix}, xzr, x10")
                pred = 1
            self.mov("x8", g.c_addr + (m0 * g.n + c0) * acc_bytes)
            self.mov("x9", 0)
            for j in range(pixels):
                if j % offsets == 0:
                    self.mov("w12", j)
                if j:
                    self._bump_index(g.n)
                self.asm(STORE[esize].format(t=tile, o=j % offsets, p=pred))

    def _bump_index(self, n: int) -> None:
        if n <= 4095:
            self.asm(f"add x9, x9, #{n}")
        else:
            self.asm(f"add x9, x9, #{n >> 12}, lsl #12")
            if n & 0xFFF:
                self.asm(f"add x9, x9, #{n & 0xFFF}")


def gemm_program(gemm: Gemm) -> list:
    """The instructions of ``gemm`` (the machine must be in streaming mode with ZA on)."""
    out: list = []
    GemmWriter(gemm, out).write()
    return out
