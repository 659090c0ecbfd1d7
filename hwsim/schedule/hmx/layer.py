"""A planned convolution (``conv.py``) as a program: constants packed on the host, then the
HVX expansion, HMX multiplies and converts, and the HVX unpacking.

Constants: per filter group the packed weights of each multiplied kernel row (Figure 8), then
the group's bias set: b_i = the bias (FP16 + 5 mantissa bits), shape max(x, 0) for a fused
ReLU, s = a fused per-channel scale (FP16 + 4 bits); a bias beyond the FP16 range (a dequantised
integer accumulator's) goes in as b_o = s * bias instead. Groups are streamed from DDR through
two VTCM buffers (``WeightStream``), as many to a chunk as fit.

HmxProgram: the expanded tensor is built by ``hvx_copy`` rows (after an ``hvx_fill`` with zeros
when padding or channel slots leave holes) and packed a crouton row at a time (a one-pixel-tall
row tile by tile, so that the first multiplies need not wait for all of it); for each filter
group (pair, with weight deep) and tile: the multiplies, the convert with the group's bias set
(clear and swap), the write of the output crouton; then the group's crouton rows are unpacked
into the NHWC output (through a band buffer and an ``hvx_copy`` into the channel slice when
there are several groups).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hwsim.errors import ScheduleError
from hwsim.isa.hmx import BIAS_SET_BYTES, CROUTON_BYTES, VECTOR_BYTES
from hwsim.schedule.hmx.conv import CH, MAX_DEEP, ConvPlan
from hwsim.schedule.hmx.program import Arena, HmxProgram, WeightStream
from hwsim.targets.hmx import layouts

SHAPE_MAX0 = 2  # Table 5: max(x, 0)
FP16_LIMIT = 65504.0 * (1 + 2.0 ** -11)  # values at or beyond round to infinity


# -- host-side constants ---------------------------------------------------------------------------

def packed_weights(plan: ConvPlan, weight: np.ndarray) -> list[list[np.ndarray]]:
    """Per filter group, per tap: the weight vectors (Figure 8) of the [32, K] matrix over the
    group's expanded croutons (FP16, rounded once from the given values; zeros where no tap
    reads)."""
    c = plan.conv
    taps = [None] if plan.fold_y else range(c.kernel[0])
    if not c.depthwise:  # every group reads all expanded croutons: one matrix per tap for all
        first, count = plan.group_croutons(0)
        k = CH * (count - 1) + plan.crouton_channels(first + count - 1)
        full = [np.zeros((c.groups * CH, k), dtype=np.float16) for _ in taps]
        for block in plan.blocks:
            for t, ky in enumerate(taps):
                ky = block.ky if plan.fold_y else ky
                full[t][:c.k_out, block.offset:block.offset + block.count] = \
                    weight[:, ky, block.kx, :]
        packed = [layouts.pack_weights(m) for m in full]  # the groups one after the other
        size = packed[0].size // c.groups
        return [[p[g * size:(g + 1) * size] for p in packed] for g in range(c.groups)]
    out = []
    for g in range(c.groups):
        first, count = plan.group_croutons(g)
        k = CH * (count - 1) + plan.crouton_channels(first + count - 1)
        mats = [np.zeros((CH, k), dtype=np.float16) for _ in taps]
        outs = np.arange(g * CH, min(c.k_out, (g + 1) * CH))
        m = c.k_out // c.c
        rows, channel, multiple = outs - g * CH, outs // m, outs % m
        for block in plan.blocks[first:first + count]:  # a block per crouton, the group's
            cols = channel + (block.offset - first * CH - block.c0)
            for t, ky in enumerate(taps):
                ky = block.ky if plan.fold_y else ky
                mats[t][rows, cols] = weight[ky, block.kx, channel, multiple]
        out.append([layouts.pack_weights(m) for m in mats])
    return out


def ext_fp16_bits(values, mbits: int) -> np.ndarray:
    """Values rounded once to FP16 with ``mbits`` fraction bits (10 + extra), to nearest even,
    as bit patterns (zeros as +0); a value beyond the FP16 range is an error (the bias fields
    have no room for it)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    outside = ~(np.abs(v) < FP16_LIMIT)
    if outside.any():
        raise ScheduleError(f"bias register value {v[outside][0]:g} is outside the FP16 range")
    magnitude = np.abs(v)
    top = np.frexp(magnitude)[1] - 1  # the exponent of the leading bit
    quantum = np.maximum(top, -14) - mbits  # the last bit's, subnormals included
    units = np.rint(np.ldexp(magnitude, -quantum)).astype(np.int64)  # exact scaling, RNE
    # a normal's units are 2^mbits..2^(mbits+1): adding the biased exponent carries correctly
    bits = np.where(top >= -14, ((top + 15) << mbits) + units - (1 << mbits), units)
    return np.where(v == 0, 0, bits | (v < 0).astype(np.int64) << (5 + mbits))


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


def group_chunk(packed: list[np.ndarray], bias_set: np.ndarray) -> np.ndarray:
    """One filter group's constants: the packed weights of each tap, then its bias set."""
    return np.concatenate(packed + [bias_set])


def pair_chunk(packed_a: list[np.ndarray], packed_b: list[np.ndarray],
               sets: np.ndarray) -> np.ndarray:
    """Two filter groups for weight deep: per tap the 64-filter vectors (the first group's,
    then the second's), then both bias sets."""
    return np.concatenate([part for a, b in zip(packed_a, packed_b) for part in (a, b)] + [sets])


# -- emission -------------------------------------------------------------------------------------

@dataclass
class ConvLayer:
    """A planned layer: its plan, constants in the weight stream and VTCM buffers."""

    plan: ConvPlan
    chunks: list[tuple[int, list[int]]]  # (stream chunk, the groups in it)
    group_bytes: int  # constants of one group (or pair) in a chunk


def prepare(program: HmxProgram, stream: WeightStream, plan: ConvPlan, weight, bias,
            chunk_bytes: int = 64 << 10, name: str = "conv", scale=None) -> ConvLayer:
    """Pack the layer's constants on the host and add them to the stream, as many filter
    groups (or pairs, with weight deep) to a chunk as fit in ``chunk_bytes``. ``scale``
    (per output channel) multiplies the results in the convert."""
    c = plan.conv
    packed = packed_weights(plan, weight)
    sets = bias_sets(np.broadcast_to(np.asarray(bias, np.float64), (c.k_out,)), c.relu, scale)
    step = 2 if plan.weight_deep else 1
    units = []
    for g in range(0, c.groups, step):
        if step == 2 and g + 1 < c.groups:
            pair_sets = sets[g * BIAS_SET_BYTES:(g + 2) * BIAS_SET_BYTES]
            units.append(([g, g + 1], pair_chunk(packed[g], packed[g + 1], pair_sets)))
        else:
            units.append(([g], group_chunk(packed[g],
                                           sets[g * BIAS_SET_BYTES:(g + 1) * BIAS_SET_BYTES])))
    size = max(u.size for _, u in units)
    per_chunk = max(1, chunk_bytes // size)
    chunks = []
    for i in range(0, len(units), per_chunk):
        part = units[i:i + per_chunk]
        data = np.zeros((len(part), size), dtype=part[0][1].dtype)  # each unit zero-padded
        for row, (_, unit) in zip(data, part):
            row[:unit.size] = unit
        index = stream.add(program, data.reshape(-1), f"{name} constants {len(chunks)}")
        chunks.append((index, [g for groups, _ in part for g in groups]))
    return ConvLayer(plan, chunks, size)


def emit(program: HmxProgram, vtcm: Arena, stream: WeightStream, layer: ConvLayer, x: int,
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


def _expand(program: HmxProgram, vtcm: Arena, plan: ConvPlan, x: int) -> list[int]:
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


def _pack_row(program: HmxProgram, plan: ConvPlan, dst: int, src: int, h: int) -> None:
    """Pack one crouton row of the expanded tensor; a row one pixel tall (mask 0) tile by
    tile, so that the multiplies of the first tiles need not wait for the whole row."""
    w, ke, nx = plan.conv.w_out, plan.ke, plan.grid[1]
    if h > 1:
        program.hvx("pack_act", dst, src, h, w, ke, plan.mask)
        return
    for tx in range(plan.tiles[1]):
        program.hvx("pack_act", dst + tx * plan.croutons_e * CROUTON_BYTES,
                    src + tx * nx * ke * 2, 1, min(nx, w - tx * nx), ke, plan.mask)


def _gather(program: HmxProgram, vtcm: Arena, plan: ConvPlan, p: int, x: int) -> int:
    """The NHWC expanded phase p, by strided copies from the input (zeros where nothing is
    copied: padding and unused channel slots)."""
    c = plan.conv
    (sy, sx), (dy, dx), (top, _, left, _) = c.stride, c.dilation, c.pad
    rows, ke, w_out = plan.phase_rows(p), plan.ke, c.w_out
    e = vtcm.alloc(rows * w_out * ke * 2, "expanded tensor", VECTOR_BYTES)
    # each block's valid output columns: the same in every row
    columns = [(b, *_valid(w_out, sx, b.kx * dx - left, c.w)) for b in plan.blocks]
    copies, covered = [], 0
    for r in range(rows):
        for b, x_lo, x_hi in columns:
            y_in = (r * sy + b.ky * dy if plan.fold_y else r * sy + p) - top
            if not 0 <= y_in < c.h or x_lo > x_hi:
                continue
            x_in = x_lo * sx + b.kx * dx - left
            copies.append((e + ((r * w_out + x_lo) * ke + b.offset) * 2,
                           x + ((y_in * c.w + x_in) * c.c + b.c0) * 2, b.count * 2,
                           x_hi - x_lo + 1, ke * 2, sx * c.c * 2))
            covered += b.count * (x_hi - x_lo + 1)
    if covered < rows * w_out * ke:
        program.hvx("fill", e, rows * w_out * ke, 0)
    for args in copies:
        program.hvx("copy", *args)
    return e


def _valid(w_out: int, sx: int, shift: int, w: int) -> tuple[int, int]:
    """Output columns x whose input column x * sx + shift is inside 0..w-1."""
    lo = max(0, -(-(-shift) // sx))
    hi = min(w_out - 1, (w - 1 - shift) // sx)
    return lo, hi


def _emit_groups(program: HmxProgram, plan: ConvPlan, phases: list[int], unit: int,
                 groups: list[int], outputs: int) -> None:
    """Multiplies, converts and writes of one filter group (two with weight deep)."""
    (ny, _), (th, tw), ce = plan.grid, plan.tiles, plan.croutons_e
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


def _deep(program: HmxProgram, plan: ConvPlan, base: int, weights: int, first: int, count: int,
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


def _unpack(program: HmxProgram, plan: ConvPlan, outputs: int, band: int | None, g: int, ty: int,
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
