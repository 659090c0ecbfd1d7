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
from hwsim.isa.sme_vector import DTYPES
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


@dataclass
class _Stream:
    """Vectors of one panel: a base register, the first ``count`` of the ``stride`` vectors of
    each K step."""

    addr: int
    count: int
    stride: int
    reg: int = 0
    offset: int = 0     # the vector the register points at


@dataclass
class _Block:
    """One output block: its load streams, its outer products ((tile, weight stream, vector,
    activation stream, vector), in issue order) and its tiles (tile, first channel, first
    pixel)."""

    streams: list
    products: list
    tiles: list


def _blocks(g: Gemm) -> list[_Block]:
    dim, vb, ct_n = g.dim, g.svl_bytes, g.mode.channel_tiles
    elem = DTYPES[g.mode.src]
    w_group, x_group = (e * elem // g.groups for e in g.panel_elements())
    channel_tiles, pixel_tiles = -(-g.n // dim), -(-g.m // dim)
    blocks = []
    for cb in range(0, channel_tiles, ct_n):
        cts = range(min(ct_n, channel_tiles - cb))
        for pb in range(0, pixel_tiles, PIXEL_TILES):
            pts = range(min(PIXEL_TILES, pixel_tiles - pb))
            x_off = pb * g.steps * vb
            pairs = [(ct, pt) for ct in cts for pt in pts]
            tiles = [(ct * PIXEL_TILES + pt if ct_n > 1 else pt, (cb + ct) * dim, (pb + pt) * dim)
                     for ct, pt in pairs]
            if g.group:     # each channel tile is a group with its own panels
                streams = [_Stream(g.w_addr + (cb + ct) * w_group, 1, 1) for ct in cts] + [
                    _Stream(g.x_addr + (cb + ct) * x_group + x_off, len(pts), PIXEL_TILES)
                    for ct in cts]
                uses = [(ct, 0, len(cts) + ct, pt) for ct, pt in pairs]
            else:
                streams = [_Stream(g.w_addr + cb * g.steps * vb, len(cts), ct_n),
                           _Stream(g.x_addr + x_off, len(pts), PIXEL_TILES)]
                uses = [(0, ct, 1, pt) for ct, pt in pairs]
            for reg, stream in zip(STREAM_REGISTERS, streams):
                stream.reg = reg
            products = [(tile[0], *use) for tile, use in zip(tiles, uses)]
            blocks.append(_Block(streams, products, tiles))
    return blocks


class _Writer:
    """Emits a GEMM's instructions into ``out`` (a list)."""

    def __init__(self, gemm: Gemm, out: list):
        self.g, self.out = gemm, out
        mopa = gemm.mode.mopa
        self.mopa = mopa.replace("smopa", "sumopa") if gemm.unsigned else mopa

    def asm(self, text: str) -> None:
        self.out.extend(instructions(text))

    def write(self) -> None:
        self.asm("ptrue p0.b")
        pending = None
        for block in _blocks(self.g):
            loads = sum(s.count for s in block.streams)
            rotation = 32 // loads          # K steps whose operands the Z registers hold
            self._start(block.streams, rotation)
            if pending:                     # the previous block's stores, after these loads
                self._stores(pending)
            self.asm("zero {" + ", ".join(self._tile(t) for t, _, _ in block.tiles) + "}")
            for step in range(self.g.steps):
                if step + rotation - 1 < self.g.steps:
                    self._loads(block.streams, step + rotation - 1, rotation)
                regs = self._registers(block.streams, step, rotation)
                for tile, ws, wv, xs, xv in block.products:
                    self.asm(self.mopa.format(t=tile, w=regs[ws][wv], x=regs[xs][xv]))
            pending = block.tiles
        if pending:
            self._stores(pending)

    def _tile(self, tile: int) -> str:
        return f"za{tile}.{'s' if self.g.mode.tile_bytes == 4 else 'h'}"

    @staticmethod
    def _registers(streams, step: int, rotation: int) -> list[list[int]]:
        """Z registers of each stream's vectors at ``step``."""
        first = (step % rotation) * sum(s.count for s in streams)
        regs = []
        for s in streams:
            regs.append(list(range(first, first + s.count)))
            first += s.count
        return regs

    def _start(self, streams, rotation: int) -> None:
        """Point the stream registers at the block's panels; load the first steps ahead."""
        for s in streams:
            self.out.extend(sme.assemble_program(f"mov x{s.reg}, #{s.addr}"))
            s.offset = 0
        for step in range(min(rotation - 1, self.g.steps)):
            self._loads(streams, step, rotation)

    def _loads(self, streams, step: int, rotation: int) -> None:
        mnemonic, suffix = self.g.mode.load.split()
        vb = self.g.svl_bytes
        for s, regs in zip(streams, self._registers(streams, step, rotation)):
            for v, z in enumerate(regs):
                index = step * s.stride + v
                if index - s.offset > 7:    # beyond the immediate's reach (#-8..7, mul vl)
                    self.asm(f"add x{s.reg}, x{s.reg}, #{(index - s.offset) * vb}")
                    s.offset = index
                imm = index - s.offset
                where = f"[x{s.reg}, #{imm}, mul vl]" if imm else f"[x{s.reg}]"
                self.asm(f"{mnemonic} {{z{z}.{suffix}}}, p0/z, {where}")

    def _stores(self, tiles) -> None:
        """Vertical slices (one pixel's channels each) to the row-major output."""
        g = self.g
        esize = g.mode.tile_bytes
        offsets = SLICE_OFFSETS[esize]
        for tile, c0, m0 in tiles:
            channels, pixels = min(g.dim, g.n - c0), min(g.dim, g.m - m0)
            pred = 0
            if channels < g.dim:
                self.out.extend(sme.assemble_program(f"mov x10, #{channels}"))
                self.asm(f"whilelt p1.{'s' if esize == 4 else 'h'}, xzr, x10")
                pred = 1
            self.out.extend(sme.assemble_program(
                f"mov x8, #{g.c_addr + (m0 * g.n + c0) * esize}\nmov x9, #0"))
            for j in range(pixels):
                if j % offsets == 0:
                    self.asm(f"mov w12, #{j}")
                if j:
                    self._next_pixel()
                self.asm(STORE[esize].format(t=tile, o=j % offsets, p=pred))

    def _next_pixel(self) -> None:
        """x9 += n (elements), in ADD immediates of 12 bits (shifted by 12 if need be)."""
        n = self.g.n
        if n >> 12:
            self.asm(f"add x9, x9, #{n >> 12}, lsl #12")
        if n & 0xFFF:
            self.asm(f"add x9, x9, #{n & 0xFFF}")


def gemm_program(gemm: Gemm) -> list:
    """The instructions of ``gemm`` (the machine must be in streaming mode with ZA on)."""
    out: list = []
    _Writer(gemm, out).write()
    return out
