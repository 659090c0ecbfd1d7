"""Convolutions, depthwise convolutions and matrix products on HMX, with bias and ReLU fused.

A layer reads an NHWC FP16 tensor in VTCM and writes one. The lowering:

1. **Expand on HVX.** The kernel columns (and, when ``fold_y``, the kernel rows too) are folded
   into channels: an expanded tensor E holds, for each output column, the input pixels its taps
   read, side by side (``hvx_copy`` rows, after an ``hvx_fill`` with zeros when padding or
   channel slots leave holes). A stride in y splits E into phases (input rows y = sy*r + p), so
   that a kernel row is a row offset within one phase. E is packed into activation croutons
   (``hvx_pack_act``) one crouton row at a time. A 1x1 stride-1 layer packs its input directly.
2. **Multiply on HMX.** For each filter group g (32 output channels) and crouton tile: one
   multiply per kernel row (per expanded crouton when the row offset falls inside a crouton):
   the activation-deep form covers all expanded channels in one instruction; a kernel row whose
   offset is not a whole crouton row uses the single form (the Y offset into the crouton dY
   below). Weight deep (64 filters into both accumulators) is an option for layers without
   singles.
3. **Convert with bias and ReLU.** The bias goes into the input-bias field of the bias
   registers (FP16 with 5 more mantissa bits), ReLU is the shape max(x, 0); each tile's convert
   clears and swaps, so the next tile multiplies into the other accumulator meanwhile.
4. **Unpack on HVX**, per filter group and crouton row, into the NHWC output (through a band
   buffer and an ``hvx_copy`` into the channel slice when there are several groups).

Depthwise: each output group's input channels sit in their own crouton slots of E, one per
kernel tap, and the weights are block-diagonal, so the HMX does a depthwise layer as a small
dense one (exact products and one accumulator rounding, as for CONV2D), wasting the off-diagonal
MACs rather than running it in FP16 on HVX. Weights and bias sets are packed on the host (as a
compiler does), placed in DDR and streamed through two VTCM buffers (``WeightStream``).

The expansion (fold the kernel rows or use singles, weight deep or not) is chosen by
``estimate``: HVX, multiply and convert cycles from the machine's parameters, whichever unit is
busiest. Not modelled: batches above 1 (the caller loops), grouped convolutions other than
depthwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable

import numpy as np

from hwsim.errors import ScheduleError
from hwsim.isa.hmx import BIAS_SET_BYTES, CROUTON_BYTES, VECTOR_BYTES
from hwsim.schedule.hmx.program import Arena, Program, WeightStream, tile_mask
from hwsim.targets.floats import RNE, round_pack
from hwsim.targets.hmx import layouts

CH = 32  # channels per crouton, filters per group
MAX_DEEP = 32  # croutons one activation-deep instruction reads (dC <= 31, 4.2.1)
SHAPE_MAX0 = 2  # Table 5: max(x, 0)
FP16_LIMIT = 65504.0 * (1 + 2.0 ** -11)  # values at or beyond round to infinity


@dataclass(frozen=True)
class Conv:
    """A convolution of one (h, w, c) image: ``weight`` is OHWI (k_out, kh, kw, c) or, for a
    depthwise layer, HWCM (kh, kw, c, m) with k_out = c * m; ``bias`` has k_out values."""

    h: int
    w: int
    c: int
    k_out: int
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, bottom, left, right
    dilation: tuple[int, int] = (1, 1)
    depthwise: bool = False
    relu: bool = False

    @property
    def h_out(self) -> int:
        return (self.h + self.pad[0] + self.pad[1] - (self.kernel[0] - 1) * self.dilation[0]
                - 1) // self.stride[0] + 1

    @property
    def w_out(self) -> int:
        return (self.w + self.pad[2] + self.pad[3] - (self.kernel[1] - 1) * self.dilation[1]
                - 1) // self.stride[1] + 1

    @property
    def groups(self) -> int:
        return -(-self.k_out // CH)

    @property
    def macs(self) -> int:
        per_output = self.kernel[0] * self.kernel[1] * (1 if self.depthwise else self.c)
        return self.h_out * self.w_out * self.k_out * per_output


@dataclass(frozen=True)
class Block:
    """Expanded channels [offset, offset + count) hold input channels [c0, c0 + count) at
    kernel tap (ky, kx); ``ky`` is None when kernel rows are not folded."""

    offset: int
    count: int
    c0: int
    ky: int | None
    kx: int


@dataclass
class ConvPlan:
    """How a ``Conv`` runs: tile geometry, the expanded channel layout, the multiplies."""

    conv: Conv
    fold_y: bool
    weight_deep: bool = False

    @cached_property
    def mask(self) -> int:
        return tile_mask(self.conv.h_out, self.conv.w_out)

    @cached_property
    def grid(self) -> tuple[int, int]:
        """(ny, nx): crouton height and width."""
        return tuple(layouts.spatial_grid(self.mask).shape)

    @property
    def tiles(self) -> tuple[int, int]:
        ny, nx = self.grid
        return -(-self.conv.h_out // ny), -(-self.conv.w_out // nx)

    @cached_property
    def slots(self) -> list[tuple[int | None, int]]:
        """The (ky, kx) taps folded into channels."""
        kh, kw = self.conv.kernel
        return [(ky, kx) for ky in range(kh) for kx in range(kw)] if self.fold_y else \
            [(None, kx) for kx in range(kw)]

    @cached_property
    def blocks(self) -> list[Block]:
        c = self.conv
        if not c.depthwise:
            return [Block(i * c.c, c.c, 0, ky, kx) for i, (ky, kx) in enumerate(self.slots)]
        m = c.k_out // c.c
        out = []
        for g in range(c.groups):  # one crouton slot per tap for each group's input channels
            c0, c1 = g * CH // m, (min(c.k_out, (g + 1) * CH) - 1) // m
            out += [Block((g * len(self.slots) + i) * CH, c1 - c0 + 1, c0, ky, kx)
                    for i, (ky, kx) in enumerate(self.slots)]
        return out

    @property
    def ke(self) -> int:
        """Channels of the expanded tensor."""
        last = self.blocks[-1]
        return last.offset + (CH if self.conv.depthwise else last.count)

    @property
    def croutons_e(self) -> int:
        return -(-self.ke // CH)

    def group_croutons(self, g: int) -> tuple[int, int]:
        """(first, count) of the expanded croutons filter group g multiplies."""
        if self.conv.depthwise:
            return g * len(self.slots), len(self.slots)
        return 0, self.croutons_e

    def crouton_channels(self, i: int) -> int:
        """Channels of expanded crouton i that a multiply reads (a multiple of 8)."""
        if self.conv.depthwise:
            count = self.blocks[i].count
        else:
            count = min(CH, self.ke - i * CH)
        return -(-count // 8) * 8

    @cached_property
    def taps(self) -> list[tuple[int, int]]:
        """(phase, row offset in that phase) of each multiplied kernel row."""
        if self.fold_y:
            return [(0, 0)]
        (kh, _), (sy, _), (dy, _) = self.conv.kernel, self.conv.stride, self.conv.dilation
        return [((ky * dy) % sy, (ky * dy) // sy) for ky in range(kh)]

    @property
    def phases(self) -> int:
        return 1 if self.fold_y else self.conv.stride[0]

    def phase_rows(self, p: int) -> int:
        """Rows of expanded phase p: the output rows (folded) or the input rows y = sy*r + p."""
        c = self.conv
        if self.fold_y:
            return c.h_out
        return max(0, -(-(c.h + c.pad[0] + c.pad[1] - p) // c.stride[0]))

    @property
    def phase_tile_rows(self) -> int:
        """Crouton rows to allocate per phase: the output's, plus the furthest row offset, plus
        one for the second crouton of a single."""
        ny = self.grid[0]
        return self.tiles[0] + max(r for _, r in self.taps) // ny + int(self.singles())

    @property
    def identity(self) -> bool:
        """The expanded tensor is the input itself (1x1, stride 1, no padding)."""
        c = self.conv
        return not c.depthwise and c.kernel == (1, 1) and c.stride == (1, 1) and \
            not any(c.pad)

    def singles(self) -> bool:
        return any(r % self.grid[0] for _, r in self.taps)


# -- host-side constants ---------------------------------------------------------------------------

def weight_matrices(plan: ConvPlan, weight: np.ndarray) -> list[list[np.ndarray]]:
    """Per filter group, per tap: the [32, K] matrix of the group's expanded croutons
    (float64, zeros where no tap reads)."""
    c = plan.conv
    weight = np.asarray(weight, dtype=np.float64)
    out = []
    for g in range(c.groups):
        first, count = plan.group_croutons(g)
        k = CH * (count - 1) + plan.crouton_channels(first + count - 1)
        mats = [np.zeros((CH, k)) for _ in plan.taps]
        for block in plan.blocks:
            col = block.offset - first * CH
            if not 0 <= col < k:
                continue
            for t, ky in enumerate([None] if plan.fold_y else range(c.kernel[0])):
                ky = block.ky if plan.fold_y else ky
                _fill_block(mats[t], c, weight, g, block, col, ky)
        out.append(mats)
    return out


def _fill_block(mat, c: Conv, weight, g: int, block: Block, col: int, ky: int) -> None:
    outs = np.arange(g * CH, min(c.k_out, (g + 1) * CH))
    if c.depthwise:
        m = c.k_out // c.c
        ch = outs // m
        mat[outs - g * CH, col + ch - block.c0] = weight[ky, block.kx, ch, outs % m]
    else:
        mat[outs - g * CH, col:col + block.count] = weight[outs, ky, block.kx, :]


def ext_fp16_bits(values, mbits: int) -> np.ndarray:
    """Values rounded once to FP16 with ``mbits`` fraction bits (10 + extra), as bit patterns;
    a value beyond the FP16 range is an error (the bias fields have no room for it)."""
    out = np.zeros(np.size(values), dtype=np.int64)
    for i, v in enumerate(np.asarray(values, dtype=np.float64).reshape(-1)):
        if not abs(v) < FP16_LIMIT:
            raise ScheduleError(f"bias register value {v:g} is outside the FP16 range")
        if v != 0:
            mant, exp = math.frexp(abs(v))
            out[i] = int(round_pack(int(v < 0), int(mant * 2.0 ** 53), exp - 53, False, 5, mbits,
                                    RNE, False, False)[0])
    return out


def fits_fp16(values) -> bool:
    return bool(np.all(np.abs(np.asarray(values, np.float64)) < FP16_LIMIT))


def bias_sets(bias, relu: bool, scale=None) -> np.ndarray:
    """Bias sets computing ``scale * shape(acc + bias)``: b_i = the bias (FP16 + 5 bits), shape
    max(x, 0) for ReLU, s = the scale (FP16 + 4 bits, default 1). A bias beyond the FP16 range
    (an integer accumulator's, dequantised) goes in as b_o = scale * bias instead, which the
    caller may only do without ReLU."""
    k = np.size(bias)
    scale = np.ones(k) if scale is None else np.broadcast_to(np.asarray(scale, np.float64), (k,))
    bias = np.asarray(bias, np.float64)
    inside = fits_fp16(bias)
    if not inside and relu:
        raise ScheduleError("a ReLU needs the bias before the scale; it is outside FP16")
    return layouts.pack_bias_fields(
        input_bias=ext_fp16_bits(bias if inside else np.zeros(k), 15),
        shape=np.full(k, SHAPE_MAX0 if relu else 0), scale=ext_fp16_bits(scale, 14),
        output_bias=ext_fp16_bits(np.zeros(k) if inside else scale * bias, 14))


def group_chunk(plan: ConvPlan, mats: list[np.ndarray], bias_set: np.ndarray) -> np.ndarray:
    """One filter group's constants: the packed weights of each tap, then its bias set."""
    parts = [layouts.pack_weights(m.astype(np.float16)) for m in mats]
    return np.concatenate(parts + [bias_set])


def pair_chunk(mats_a: list[np.ndarray], mats_b: list[np.ndarray],
               sets: np.ndarray) -> np.ndarray:
    """Two filter groups for weight deep: per tap the 64-filter vectors, then both bias sets."""
    parts = [layouts.pack_weights(np.concatenate([a, b]).astype(np.float16))
             for a, b in zip(mats_a, mats_b)]
    return np.concatenate(parts + [sets])


# -- cost model -----------------------------------------------------------------------------------

def estimate(plan: ConvPlan, timing: dict) -> dict[str, float]:
    """Busy cycles of HVX, the multiplier and the converter for a plan (no stalls)."""
    c, (th, tw), ny = plan.conv, plan.tiles, plan.grid[0]
    e_rows = sum(plan.phase_rows(p) for p in range(plan.phases))
    copies = 0 if plan.identity else e_rows * len(plan.blocks) * c.w_out
    packed = sum(-(-plan.phase_rows(p) // ny) for p in range(plan.phases)) * tw * plan.croutons_e
    out = th * tw * c.groups
    hvx = (copies * timing["hvx_copy_cycles_per_vector"]
           + packed * 16 * timing["hvx_act_pack_cycles_per_vector"]
           + out * 16 * timing["hvx_act_unpack_cycles_per_vector"])
    mpy = 0.0
    for g in range(c.groups):
        first, count = plan.group_croutons(g)
        vectors = sum(plan.crouton_channels(first + i) for i in range(count)) // 2
        for _, r in plan.taps:
            calls = -(-count // MAX_DEEP) if r % ny == 0 else count
            mpy += th * tw * (calls * timing["mpy_setup_cycles"] +
                              vectors * timing["mpy_cycles_per_vector"])
    if plan.weight_deep:
        mpy -= th * tw * (c.groups // 2) * len(plan.taps) * timing["mpy_setup_cycles"]
    cvt = out * (timing["cvt_cycles"] + timing["cvt_write_cycles"])
    return {"hvx": hvx, "mpy": mpy, "cvt": cvt}


def choose(conv: Conv, timing: dict) -> ConvPlan:
    """The plan whose busiest unit (HVX, multiplier or converter) has the least work; with
    weight deep the multiplier also waits for both converts, so they add to it."""
    options = [ConvPlan(conv, fold_y) for fold_y in (False, True)]
    options += [replace(p, weight_deep=True) for p in options
                if not conv.depthwise and conv.groups > 1 and not p.singles()
                and p.croutons_e <= MAX_DEEP]

    def busiest(plan: ConvPlan) -> float:
        cost = estimate(plan, timing)
        if plan.weight_deep:
            cost["mpy"] += cost["cvt"]
        return max(cost.values())
    return min(options, key=busiest)


# -- emission -------------------------------------------------------------------------------------

@dataclass
class ConvLayer:
    """A planned layer: its plan, constants in the weight stream and VTCM buffers."""

    plan: ConvPlan
    chunks: list[tuple[int, list[int]]]  # (stream chunk, the groups in it)
    group_bytes: int  # constants of one group (or pair) in a chunk


def prepare(program: Program, stream: WeightStream, plan: ConvPlan, weight, bias,
            chunk_bytes: int = 64 << 10, name: str = "conv", scale=None) -> ConvLayer:
    """Pack the layer's constants on the host and add them to the stream, as many filter
    groups (or pairs, with weight deep) to a chunk as fit in ``chunk_bytes``. ``scale``
    (per output channel) multiplies the results in the convert."""
    c = plan.conv
    mats = weight_matrices(plan, weight)
    sets = bias_sets(np.broadcast_to(np.asarray(bias, np.float64), (c.k_out,)), c.relu, scale)
    step = 2 if plan.weight_deep else 1
    units = []
    for g in range(0, c.groups, step):
        if step == 2 and g + 1 < c.groups:
            units.append(([g, g + 1], pair_chunk(mats[g], mats[g + 1],
                                                 sets[g * BIAS_SET_BYTES:(g + 2) * BIAS_SET_BYTES])))
        else:
            units.append(([g], group_chunk(plan, mats[g],
                                           sets[g * BIAS_SET_BYTES:(g + 1) * BIAS_SET_BYTES])))
    size = max(u.size for _, u in units)
    per_chunk = max(1, chunk_bytes // size)
    chunks = []
    for i in range(0, len(units), per_chunk):
        part = units[i:i + per_chunk]
        data = np.concatenate([np.pad(u, (0, size - u.size)) for _, u in part])
        index = stream.add(program, data, f"{name} constants {len(chunks)}")
        chunks.append((index, [g for groups, _ in part for g in groups]))
    return ConvLayer(plan, chunks, size)


def emit(program: Program, vtcm: Arena, stream: WeightStream, layer: ConvLayer, x: int,
         y: int, unpacked: Callable[[int, int], None] | None = None) -> None:
    """The layer from the NHWC FP16 tensor at VTCM ``x`` to the one at ``y``; ``unpacked(g,
    ty)`` is called once filter group g's crouton row ty is in ``y``."""
    plan = layer.plan
    phases = _expand(program, vtcm, plan, x)
    outputs = vtcm.alloc(plan.tiles[0] * plan.tiles[1] * plan.conv.groups * CROUTON_BYTES,
                         "output croutons")
    band = vtcm.alloc(plan.grid[0] * plan.conv.w_out * CH * 2, "band") \
        if plan.conv.groups > 1 else None
    for chunk, groups in layer.chunks:
        base = stream.use(program, chunk)
        for i, g in enumerate(groups):
            unit = base + (i // (2 if plan.weight_deep else 1)) * layer.group_bytes
            if plan.weight_deep and i % 2:
                continue
            pair = plan.weight_deep and g + 1 < plan.conv.groups
            _emit_groups(program, plan, phases, unit, [g, g + 1] if pair else [g], outputs)
            for h in ([g, g + 1] if pair else [g]):
                for ty in range(plan.tiles[0]):
                    _unpack(program, plan, outputs, band, h, ty, y)
                    if unpacked is not None:
                        unpacked(h, ty)
    for addr in phases + [outputs] + ([band] if band is not None else []):
        vtcm.free(addr)


def _expand(program: Program, vtcm: Arena, plan: ConvPlan, x: int) -> list[int]:
    """Build and pack the expanded phases; their crouton addresses."""
    c, (ny, _), (_, tw) = plan.conv, plan.grid, plan.tiles
    size = plan.phase_tile_rows * tw * plan.croutons_e * CROUTON_BYTES
    out = []
    for p in range(plan.phases):
        rows = plan.phase_rows(p)
        croutons = vtcm.alloc(size, f"expanded phase {p}")
        src = x if plan.identity else _gather(program, vtcm, plan, p, x)
        for ty in range(-(-rows // ny)):
            _pack_row(program, plan, croutons + ty * tw * plan.croutons_e * CROUTON_BYTES,
                      src + ty * ny * c.w_out * plan.ke * 2, min(ny, rows - ty * ny))
        if src != x:
            vtcm.free(src)
        out.append(croutons)
    return out


def _pack_row(program: Program, plan: ConvPlan, dst: int, src: int, h: int) -> None:
    """Pack one crouton row of the expanded tensor; a row one pixel tall (mask 0) tile by
    tile, so that the multiplies of the first tiles need not wait for the whole row."""
    w, ke, nx = plan.conv.w_out, plan.ke, plan.grid[1]
    if h > 1:
        program.hvx("pack_act", dst, src, h, w, ke, plan.mask)
        return
    for tx in range(plan.tiles[1]):
        program.hvx("pack_act", dst + tx * plan.croutons_e * CROUTON_BYTES,
                    src + tx * nx * ke * 2, 1, min(nx, w - tx * nx), ke, plan.mask)


def _gather(program: Program, vtcm: Arena, plan: ConvPlan, p: int, x: int) -> int:
    """The NHWC expanded phase p, by strided copies from the input (zeros where nothing is
    copied: padding and unused channel slots)."""
    c = plan.conv
    (sy, sx), (dy, dx), (top, _, left, _) = c.stride, c.dilation, c.pad
    rows, ke = plan.phase_rows(p), plan.ke
    e = vtcm.alloc(rows * c.w_out * ke * 2, "expanded tensor", VECTOR_BYTES)
    copies, covered = [], 0
    for r in range(rows):
        for b in plan.blocks:
            y_in = (r * sy + b.ky * dy if plan.fold_y else r * sy + p) - top
            x_lo, x_hi = _valid(c.w_out, sx, b.kx * dx - left, c.w)
            if not 0 <= y_in < c.h or x_lo > x_hi:
                continue
            x_in = x_lo * sx + b.kx * dx - left
            copies.append((e + ((r * c.w_out + x_lo) * ke + b.offset) * 2,
                           x + ((y_in * c.w + x_in) * c.c + b.c0) * 2, b.count * 2,
                           x_hi - x_lo + 1, ke * 2, sx * c.c * 2))
            covered += b.count * (x_hi - x_lo + 1)
    if covered < rows * c.w_out * ke:
        program.hvx("fill", e, rows * c.w_out * ke, 0)
    for args in copies:
        program.hvx("copy", *args)
    return e


def _valid(w_out: int, sx: int, shift: int, w: int) -> tuple[int, int]:
    """Output columns x whose input column x * sx + shift is inside 0..w-1."""
    lo = max(0, -(-(-shift) // sx))
    hi = min(w_out - 1, (w - 1 - shift) // sx)
    return lo, hi


def _emit_groups(program: Program, plan: ConvPlan, phases: list[int], unit: int,
                 groups: list[int], outputs: int) -> None:
    """Multiplies, converts and writes of one filter group (two with weight deep)."""
    c, (ny, _), (th, tw), ce = plan.conv, plan.grid, plan.tiles, plan.croutons_e
    first, count = plan.group_croutons(groups[0])
    vectors = (CH * (count - 1) + plan.crouton_channels(first + count - 1)) // 2
    block = vectors * len(groups) * VECTOR_BYTES
    sets = unit + len(plan.taps) * block
    for i, g in enumerate(groups):
        program.bias_load(sets + i * BIAS_SET_BYTES, g % 4)
    for ty in range(th):
        for tx in range(tw):
            for t, (p, r) in enumerate(plan.taps):
                row, off = divmod(r, ny)
                base = phases[p] + (((ty + row) * tw + tx) * ce + first) * CROUTON_BYTES
                weights = unit + t * block
                if off == 0:
                    _deep(program, plan, base, weights, first, count, len(groups))
                    continue
                for i in range(count):
                    chans = plan.crouton_channels(first + i)
                    program.act_single(base + i * CROUTON_BYTES, plan.mask, chans - 1,
                                       tw * ce * CROUTON_BYTES, off)
                    program.wgt(weights + i * CH // 2 * VECTOR_BYTES, chans // 2)
            for g in groups:
                program.convert(g % 4)
                program.write(outputs + ((g * th + ty) * tw + tx) * CROUTON_BYTES, plan.mask)


def _deep(program: Program, plan: ConvPlan, base: int, weights: int, first: int, count: int,
          groups: int) -> None:
    """Activation-deep multiplies over ``count`` croutons, at most 32 at a time."""
    if groups == 2 and count > MAX_DEEP:
        raise ScheduleError(f"weight deep over {count} croutons: at most {MAX_DEEP}")
    for start in range(0, count, MAX_DEEP):
        n = min(MAX_DEEP, count - start)
        chans = plan.crouton_channels(first + start + n - 1)
        program.act(base + start * CROUTON_BYTES, plan.mask, chans - 1, n)
        vectors = (CH * (n - 1) + chans) // 2
        program.wgt(weights + start * CH // 2 * VECTOR_BYTES, vectors * groups, deep=groups == 2)


def _unpack(program: Program, plan: ConvPlan, outputs: int, band: int | None, g: int, ty: int,
            y: int) -> None:
    """Filter group g's crouton row ty to its channels of the NHWC output."""
    c, (ny, _), (th, tw) = plan.conv, plan.grid, plan.tiles
    chans = min(CH, c.k_out - g * CH)
    h = min(ny, c.h_out - ty * ny)
    src = outputs + (g * th + ty) * tw * CROUTON_BYTES
    row = y + ty * ny * c.w_out * c.k_out * 2
    if band is None:
        program.hvx("unpack_act", row, src, h, c.w_out, chans, plan.mask)
        return
    program.hvx("unpack_act", band, src, h, c.w_out, chans, plan.mask)
    program.hvx("copy", row + g * CH * 2, band, chans * 2, h * c.w_out, c.k_out * 2,
                chans * 2)
