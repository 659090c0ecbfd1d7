"""The SME GEMM kernels written instruction by instruction, as assembly text through the
assembler: the independent oracle of ``hwsim.schedule.sme.gemm.gemm_words`` (which builds the
same program as arrays). Slow (microseconds per instruction) and plain on purpose."""

from __future__ import annotations

from dataclasses import dataclass

from hwsim.isa import sme
from hwsim.isa.sme_vector import DTYPES
from hwsim.schedule.sme.gemm import PIXEL_TILES, Gemm

MOPA = {"fp32": "fmopa za{t}.s, p0/m, p0/m, z{w}.s, z{x}.s",
        "bf16-widening": "bfmopa za{t}.s, p0/m, p0/m, z{w}.h, z{x}.h",
        "bf16": "bfmopa za{t}.h, p0/m, p0/m, z{w}.h, z{x}.h",
        "int8": "smopa za{t}.s, p0/m, p0/m, z{w}.b, z{x}.b"}
LOAD = {"fp32": "ld1w s", "bf16-widening": "ld1h h", "bf16": "ld1h h", "int8": "ld1b b"}
SLICE_OFFSETS = {4: 4, 2: 8}
STORE = {4: "st1w {{za{t}v.s[w12, {o}]}}, p{p}, [x8, x9, lsl #2]",
         2: "st1h {{za{t}v.h[w12, {o}]}}, p{p}, [x8, x9, lsl #1]"}


@dataclass
class _Stream:
    addr: int
    count: int
    stride: int
    reg: int = 0
    offset: int = 0


@dataclass
class _Block:
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
            if g.group:
                streams = [_Stream(g.w_addr + (cb + ct) * w_group, 1, 1) for ct in cts] + [
                    _Stream(g.x_addr + (cb + ct) * x_group + x_off, len(pts), PIXEL_TILES)
                    for ct in cts]
                uses = [(ct, 0, len(cts) + ct, pt) for ct, pt in pairs]
            else:
                streams = [_Stream(g.w_addr + cb * g.steps * vb, len(cts), ct_n),
                           _Stream(g.x_addr + x_off, len(pts), PIXEL_TILES)]
                uses = [(0, ct, 1, pt) for ct, pt in pairs]
            for reg, stream in enumerate(streams):
                stream.reg = reg
            products = [(tile[0], *use) for tile, use in zip(tiles, uses)]
            blocks.append(_Block(streams, products, tiles))
    return blocks


class _Writer:
    def __init__(self, gemm: Gemm, out: list):
        self.g, self.out = gemm, out
        mopa = MOPA[gemm.mode.name]
        self.mopa = mopa.replace("smopa", "sumopa") if gemm.unsigned else mopa

    def asm(self, text: str) -> None:
        self.out.extend(sme.parse_line(text))

    def write(self) -> None:
        self.asm("ptrue p0.b")
        pending = None
        for block in _blocks(self.g):
            loads = sum(s.count for s in block.streams)
            rotation = 32 // loads
            self._start(block.streams, rotation)
            if pending:
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
        first = (step % rotation) * sum(s.count for s in streams)
        regs = []
        for s in streams:
            regs.append(list(range(first, first + s.count)))
            first += s.count
        return regs

    def _start(self, streams, rotation: int) -> None:
        for s in streams:
            self.out.extend(sme.assemble_program(f"mov x{s.reg}, #{s.addr}"))
            s.offset = 0
        for step in range(min(rotation - 1, self.g.steps)):
            self._loads(streams, step, rotation)

    def _loads(self, streams, step: int, rotation: int) -> None:
        mnemonic, suffix = LOAD[self.g.mode.name].split()
        vb = self.g.svl_bytes
        for s, regs in zip(streams, self._registers(streams, step, rotation)):
            for v, z in enumerate(regs):
                index = step * s.stride + v
                if index - s.offset > 7:
                    self.asm(f"add x{s.reg}, x{s.reg}, #{(index - s.offset) * vb}")
                    s.offset = index
                imm = index - s.offset
                where = f"[x{s.reg}, #{imm}, mul vl]" if imm else f"[x{s.reg}]"
                self.asm(f"{mnemonic} {{z{z}.{suffix}}}, p0/z, {where}")

    def _stores(self, tiles) -> None:
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
        n = self.g.n
        if n >> 12:
            self.asm(f"add x9, x9, #{n >> 12}, lsl #12")
        if n & 0xFFF:
            self.asm(f"add x9, x9, #{n & 0xFFF}")


def gemm_text_words(gemm: Gemm) -> list[int]:
    """The words of ``gemm``'s program, written line by line through the assembler."""
    out: list = []
    _Writer(gemm, out).write()
    return [ins.word for ins in out]
