"""The Hexagon HMX machine (V81 HMX PRM, FP16): the wiring of state, semantics and timing.

State is real storage: VTCM and DDR as byte arrays, and the HMX's own registers (``state.py``:
accumulators, bias sets, convert state, USR). Each instruction is checked against the machine
here (VTCM bounds, HVX and DMA arguments) and becomes its op through its kind's builder
(``semantics.py``, chapters 2-5).

Timing: units ``mpy`` (multiplies, clear), ``cvt`` (bias, convert, write), ``hvx`` and ``dma``;
ports ``vtcm.hmx`` (shared by mpy and cvt), ``vtcm.hvx``, ``vtcm.dma`` and ``ddr``. The two
accumulators are separate dependency resources (``acc0``, ``acc1``), so a convert of one
overlaps multiplies into the other after a clear-and-swap. HMX and HVX accesses to VTCM are
ordered as the issuing thread's program order requires, at 2 KB block granularity, and a DMA out
of VTCM starts after the earlier stores to its source. What a DMA writes is not ordered with
anything: a program waits for it with ``dma_wait()`` (later ops wait for every DMA issued
before), and one that does not reads stale bytes, as on silicon. The other direction is
``dma_fence()``: later DMAs start only once every earlier HMX and HVX instruction has started
(read its operands), so that a DMA may refill a buffer those instructions read (double
buffering); without it a DMA can overwrite operands before they are read.

A timing-only run (``engine.numerics`` false) costs every instruction the same but computes
nothing: no datapath, no VTCM data, no bias or convert state.

Not modelled: data types other than FP16, HMX exceptions and their reporting, VTCM bank
conflicts, the cost of HVX instructions one by one (``hvx.py``), and the per-launch warm-up.
The spatial mask of the write (Table 8) names the crouton's geometry; the convert state row s is
stored at crouton spatial s (Figure 18) whatever the mask, so it moves no data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from hwsim.errors import ConfigError, HwsimError
from hwsim.isa.hmx import (BIAS_SET_BYTES, CROUTON_BYTES, USR, VECTOR_BYTES, Instr, Multiply,
                           check_instr, parse_program, spatial_split)
from hwsim.memory import AddressSpace, Copy, Dma
from hwsim.targets.base import Machine
from hwsim.targets.hmx import datapath, hvx, layouts, numerics
from hwsim.targets.hmx.params import PARAMS
from hwsim.targets.hmx.semantics import BUILDERS, Emit, Issue, Rows
from hwsim.targets.hmx.state import CELLS, HmxState
from hwsim.timing.optable import OpBuilder, PortSpec, UnitSpec

@dataclass(slots=True)
class MpyPlan:
    """A multiply as the VTCM it reads: ``count`` croutons from ``addr``, ``step`` bytes apart
    (the deep's follow each other; the single's two are dY apart), channels from ``start`` of
    the first to ``stop`` of the last (the single's: of both), the single's row map into its
    two croutons, weights, and what they cost."""

    addr: int
    step: int
    count: int
    start: int
    stop: int
    rows: np.ndarray | None
    channels: int
    wgt_addr: int
    given: int  # weight vectors the range dW spans
    needed: int  # weight vectors the activation uses (both filter groups for weight deep)
    deep_weights: bool
    negate: int
    operands: tuple = ()  # the VTCM offsets as ``datapath.multiply_vtcm`` takes them
    blocks: tuple = ()  # the 2 KB VTCM blocks it reads: (first, last) ranges of block indices

    @property
    def croutons(self) -> list[tuple[int, int, int]]:
        """(address, first channel, last channel) of each crouton."""
        if self.rows is not None:
            return [(self.addr + i * self.step, self.start, self.stop) for i in range(2)]
        last = self.count - 1
        return [(self.addr + i * self.step, self.start if i == 0 else 0,
                 self.stop if i == last else 31) for i in range(self.count)]


@dataclass
class CheckedItem:
    """A checked program item and what checking derived from it (a plan, or a DMA copy)."""

    item: Any
    plan: Any = None


class HmxMachine(Machine):
    name = "hmx"
    description = "Qualcomm Hexagon V81 HMX (FP16): VTCM, accumulators, convert, HVX and DMA"
    PARAMS = PARAMS
    STATE = ("spaces", "state")

    # -- state and program -------------------------------------------------------------------
    def make_state(self) -> None:
        p = self.params
        if p.vtcm_base % CROUTON_BYTES or p.vtcm_size % CROUTON_BYTES:
            raise ConfigError(f"vtcm_base {p.vtcm_base:#x} and vtcm_size {p.vtcm_size:#x}: "
                              f"expected multiples of {CROUTON_BYTES}")
        self.spaces = {"vtcm": AddressSpace("vtcm", p.vtcm_size, p.vtcm_base),
                       "ddr": AddressSpace("ddr", p.ddr_size, p.ddr_base)}
        self.state = HmxState()
        self._blocks = tuple(("vtcm", b) for b in range(p.vtcm_size // CROUTON_BYTES))
        self.acc_format = (p.acc_exp_bits, 36 - p.acc_exp_bits)
        self.acc_round_group = p.acc_round_group
        self.shapes = numerics.shape_table(p.shape_row3)
        self.buffers = datapath.MpyBuffers()
        self.cvt_out = np.empty((CELLS, CELLS), dtype=np.uint32)

    def parse(self, lines) -> list[CheckedItem]:
        return [self.plan(item) for item in parse_program(lines)]

    def plan(self, item) -> CheckedItem:
        """Check an item against the machine (VTCM bounds, HVX and DMA arguments)."""
        if isinstance(item, CheckedItem):
            return item
        if isinstance(item, Multiply):
            check_instr(item.act)
            return CheckedItem(item, self._plan_multiply(item))
        check_instr(item)
        planner = _PLANNERS.get(item.spec.kind)
        if planner is None:
            raise item.error("an activation and its weight form one multiply: pair them with "
                             "hwsim.isa.hmx.Multiply (parse_program does)")
        return CheckedItem(item, planner(self, item))

    def _in_vtcm(self, item, addr: int, nbytes: int, arg: int, what: str = "") -> None:
        vtcm = self.spaces["vtcm"]
        if vtcm.base <= addr and 0 <= nbytes and addr + nbytes <= vtcm.end:
            return
        try:
            vtcm.offset(addr, nbytes)
        except HwsimError as exc:
            raise item.error(f"{what}{exc}", arg) from None

    def _plan_bias(self, item: Instr) -> None:
        self._in_vtcm(item, item.fields["address"], BIAS_SET_BYTES, 0)

    def _plan_write(self, item: Instr) -> None:
        self._in_vtcm(item, item.fields["address"], CROUTON_BYTES, 0)

    def _plan_hvx(self, item: Instr) -> hvx.HvxPlan:
        hvx.check(item)
        plan = hvx.PLANS[item.spec.name](item.fields)
        for addr, nbytes in plan.reads:
            self._in_vtcm(item, addr, nbytes, 0)
        for addr, nbytes in plan.writes:
            self._in_vtcm(item, addr, nbytes, 0)
        return plan

    def _plan_multiply(self, item: Multiply) -> MpyPlan:
        act, wgt = item.act.fields, item.wgt.fields
        addr, start, stop = act["address"], act["channel_start"], act["channel_stop"]
        kind, rows, step = item.act.kind, None, CROUTON_BYTES
        if kind == "act_deep":
            count = act["dc"] + 1
            channels = 32 * (count - 1) + stop + 1 - start
        elif kind == "act_single":
            count, step = 2, act["dy"]
            rows = single_rows(act["offset"], act["spatial_mask"])
            channels = stop + 1 - start
        else:
            count, channels = 1, stop + 1 - start
        vtcm = self.spaces["vtcm"]
        if rows is not None or not vtcm.base <= addr <= vtcm.end - count * CROUTON_BYTES:
            for i in range(count):  # the error names the crouton outside
                self._in_vtcm(item.act, addr + i * step, CROUTON_BYTES, 0 if i == 0 else 1,
                              f"crouton {i}: ")
        deep = item.wgt.kind == "wgt_deep"
        wgt_addr, given = wgt["address"], wgt["dw"] // VECTOR_BYTES + 1
        self._in_vtcm(item.wgt, wgt_addr, given * VECTOR_BYTES, 1, "weight range: ")
        base = vtcm.base
        first = (addr - base) // CROUTON_BYTES
        # a deep activation's croutons follow each other (one range), a single's are dY apart
        blocks = ((first, first + count - 1),) if rows is None else \
            ((first, first), (first + step // CROUTON_BYTES,) * 2)
        blocks += (self.block_range(wgt_addr, given * VECTOR_BYTES),)
        operands = ((addr - base) // 2, step // 2, count, start, stop,
                    _NO_ROWS if rows is None else rows, (wgt_addr - base) // 2)
        return MpyPlan(addr, step, count, start, stop, rows, channels, wgt_addr, given,
                       channels // 2 * (2 if deep else 1), deep, wgt["negate"], operands, blocks)

    def _plan_dma(self, item: Instr) -> Copy:
        f = item.fields
        src, dst = (("ddr", "vtcm") if "ddr_to_vtcm" in item.spec.name else ("vtcm", "ddr"))
        rows = f.get("rows", 1)
        row_bytes = f.get("row_bytes", f.get("nbytes"))
        for i, name in enumerate(item.spec.ints[2:], start=2):
            if f[name] <= 0 and "stride" not in name:
                raise item.error(f"{name} = {f[name]}: expected a positive size", i)
        copy = Copy(self.spaces[src], f["src"], self.spaces[dst], f["dst"], row_bytes, rows,
                    f.get("src_stride", 0), f.get("dst_stride", 0))
        try:
            copy.check()
        except HwsimError as exc:
            raise item.error(str(exc)) from None
        return copy

    # -- timing ------------------------------------------------------------------------------
    def compile(self, program, numerics: bool, actions: bool):
        t = self.timing
        latency = t.vtcm_latency_cycles
        ports = [PortSpec("vtcm.hmx", t.vtcm_hmx_bytes_per_cycle, latency),
                 PortSpec("vtcm.hvx", t.vtcm_hvx_bytes_per_cycle, latency),
                 PortSpec("vtcm.dma", t.vtcm_dma_bytes_per_cycle, latency),
                 PortSpec("ddr", t.ddr_bytes_per_cycle, t.ddr_latency_cycles)]
        units = [UnitSpec("mpy", t.hmx_queue_depth, peak_macs=self.peak_macs_per_cycle()),
                 UnitSpec("cvt", t.hmx_queue_depth), UnitSpec("hvx", t.hvx_queue_depth),
                 UnitSpec("dma", DMA_QUEUE, in_flight=t.dma_channels)]
        b = OpBuilder(units, ports)
        self._costs: dict[tuple, int] = {}
        self.numerics = numerics
        self.dma = Dma("dma", {"vtcm": b.port("vtcm.dma"), "ddr": b.port("ddr")},
                       t.dma_setup_cycles)
        self.hmx_port, self.hvx_port = b.port("vtcm.hmx"), b.port("vtcm.hvx")
        issue = Issue(self.state.primary)
        effects: dict = {}
        rows = Rows(b, self.spaces["vtcm"].base, len(self._blocks))
        emit = Emit(0, None, issue, effects if actions else None)
        for index, step in enumerate(program):
            emit.index, emit.step = index, self.plan(step)
            BUILDERS[emit.step.item.kind](self, rows, emit)
        rows.flush()
        return b.table(), effects

    def peak_macs_per_cycle(self) -> float:
        return CELLS * CELLS * 2 / self.timing.mpy_cycles_per_vector

    def blocks(self, addr: int, nbytes: int) -> tuple:
        """The 2 KB VTCM blocks of a range: the resources HMX and HVX order their accesses by."""
        first = (addr - self.spaces["vtcm"].base) // CROUTON_BYTES
        last = (addr + nbytes - 1 - self.spaces["vtcm"].base) // CROUTON_BYTES
        return self._blocks[first:last + 1]

    def block_range(self, addr: int, nbytes: int) -> tuple[int, int]:
        """The first and last 2 KB VTCM block of a range, as indices (``blocks``)."""
        base = self.spaces["vtcm"].base
        return (addr - base) // CROUTON_BYTES, (addr + nbytes - 1 - base) // CROUTON_BYTES

    def cycles(self, name: str, count: float = 1.0) -> int:
        """Cycles of ``count`` times the cost parameter ``name`` (each worked out once per
        run: programs repeat a few costs thousands of times)."""
        found = self._costs.get((name, count))
        if found is None:
            found = self._costs[(name, count)] = math.ceil(getattr(self.timing, name) * count)
        return found


DMA_QUEUE = 16   # assumption: descriptors the DMA engine buffers ahead of the thread

# what checking an instruction of each kind (but the multiply's) derives: its plan
_PLANNERS = {
    "bias_load": HmxMachine._plan_bias, "bias_store": HmxMachine._plan_bias,
    "cvt_write": HmxMachine._plan_write, "hvx": HmxMachine._plan_hvx,
    "dma": HmxMachine._plan_dma, "usr": lambda m, item: USR.encode(**item.fields),
    "cvt": lambda m, item: None, "clracc": lambda m, item: None,
    "dma_wait": lambda m, item: None, "dma_fence": lambda m, item: None,
}


_NO_ROWS = np.empty(0, dtype=np.int64)     # the row map of a multiply that is not a single
_NO_ROWS.flags.writeable = False


@lru_cache(maxsize=None)
def single_rows(offset: int, mask: int) -> np.ndarray:
    """For each accumulator spatial, its source among the 64 spatials of the two croutons of a
    single (the second's numbered 32..63): Y offset rows down, wrapping into the second
    (Figure 24). Read-only: one per (offset, mask), shared."""
    _, dy = spatial_split(offset, mask)
    grid = layouts.spatial_grid(mask)
    source = np.arange(grid.shape[0]) + dy
    wrapped = source >= grid.shape[0]
    rows = np.empty(CELLS, dtype=np.int64)
    rows[grid] = grid[source % grid.shape[0]] + np.where(wrapped, CELLS, 0)[:, None]
    rows.flags.writeable = False
    return rows
