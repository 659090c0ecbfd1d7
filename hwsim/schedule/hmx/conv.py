"""Convolutions, depthwise convolutions and matrix products on HMX: geometry and plans.

A layer reads an NHWC FP16 tensor in VTCM and writes one (``layer.py`` writes the program).
How it runs:

1. **Expand on HVX.** The kernel columns (and, when ``fold_y``, the kernel rows too) are folded
   into channels: an expanded tensor E holds, for each output column, the input pixels its taps
   read, side by side. A stride in y splits E into phases (input rows y = sy*r + p), so that a
   kernel row is a row offset within one phase. E is packed into activation croutons. A 1x1
   stride-1 layer packs its input directly.
2. **Multiply on HMX.** For each filter group g (32 output channels) and crouton tile: one
   multiply per kernel row (per expanded crouton when the row offset falls inside a crouton):
   the activation-deep form covers up to 32 expanded croutons in one instruction; a kernel row
   whose offset is not a whole crouton row uses the single form (the Y offset into the crouton
   dY below). Weight deep (64 filters into both accumulators) is an option for layers without
   singles.
3. **Convert with bias, scale and ReLU**, each tile's convert clearing and swapping, so that
   the next tile multiplies into the other accumulator meanwhile; then **unpack on HVX**.

Depthwise: each output group's input channels sit in their own crouton slots of E, one per
kernel tap, and the weights are block-diagonal, so the HMX does a depthwise layer as a small
dense one (exact products and one accumulator rounding, as for CONV2D), wasting the
off-diagonal MACs rather than running it in FP16 on HVX.

The expansion (fold the kernel rows or use singles, weight deep or not) is chosen by
``unit_cycles``: HVX, multiply and convert cycles from the machine's parameters, whichever unit
is busiest. Not modelled: batches above 1 (the caller repeats the layer), grouped convolutions
other than depthwise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from hwsim.schedule.hmx.program import tile_mask
from hwsim.targets.hmx import layouts

CH = 32  # channels per crouton, filters per group
MAX_DEEP = 32  # croutons one activation-deep instruction reads (dC <= 31, 4.2.1)


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

    @cached_property
    def ke(self) -> int:
        """Channels of the expanded tensor."""
        last = self.blocks[-1]
        return last.offset + (CH if self.conv.depthwise else last.count)

    @cached_property
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


# -- cost model -----------------------------------------------------------------------------------

def unit_cycles(plan: ConvPlan, timing: dict) -> dict[str, float]:
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
    vectors: dict = {}  # (first, count) -> weight vectors: most groups read the same croutons
    for g in range(c.groups):
        first, count = plan.group_croutons(g)
        if (first, count) not in vectors:
            vectors[first, count] = sum(plan.crouton_channels(first + i)
                                        for i in range(count)) // 2
        for _, r in plan.taps:
            calls = -(-count // MAX_DEEP) if r % ny == 0 else count
            mpy += th * tw * (calls * timing["mpy_setup_cycles"] +
                              vectors[first, count] * timing["mpy_cycles_per_vector"])
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
        cost = unit_cycles(plan, timing)
        if plan.weight_deep:
            cost["mpy"] += cost["cvt"]
        return max(cost.values())
    return min(options, key=busiest)
