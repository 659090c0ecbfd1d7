"""The Hexagon HMX machine (V81 HMX PRM, FP16): state, semantics and timing.

State is real storage: VTCM and DDR as byte arrays, and the HMX's own registers (``state.py``:
accumulators, bias sets, convert state, USR).

Semantics, one function per instruction kind (``BUILDERS``), from chapters 2-5: multiplies
(activation plain, deep with dC + 1 contiguous croutons, single with the Y offset into a second
crouton dY away; channel start/stop; weight negate; weight deep writing both accumulators; too
few weights read as zeros, too many cost flush cycles), bias load/store with their index, the
convert with bias select, rnd, ovf, feedback and retain vs clear-and-swap, the write of the
convert state with its spatial mask, clear accumulators, USR writes; plus the HVX layout and
elementwise operations (``hvx.py``) and DMA between DDR and VTCM.

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
from typing import Any, Callable

import numpy as np

from hwsim.errors import ConfigError, HwsimError
from hwsim.isa.hmx import (BIAS_SET_BYTES, CROUTON_BYTES, USR, VECTOR_BYTES, Instr, Multiply,
                           check_instr, parse_program, spatial_split)
from hwsim.memory import AddressSpace, Copy, Dma
from hwsim.targets.base import Machine
from hwsim.targets.hmx import datapath, hvx, layouts, numerics
from hwsim.targets.hmx.params import PARAMS
from hwsim.targets.hmx.state import CELLS, HmxState
from hwsim.timing.optable import OpBuilder, PortSpec, UnitSpec

@dataclass
class MpyPlan:
    """A multiply as the VTCM it reads: croutons (address, first and last channel), the
    single's row map into its two croutons, weights, and what they cost."""

    croutons: list
    rows: np.ndarray | None
    channels: int
    wgt_addr: int
    given: int  # weight vectors the range dW spans
    needed: int  # weight vectors the activation uses (both filter groups for weight deep)
    deep_weights: bool
    negate: int
    operands: tuple = ()  # the VTCM offsets as ``datapath.multiply_vtcm`` takes them


@dataclass
class Step:
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

    def parse(self, lines) -> list[Step]:
        return [self.plan(item) for item in parse_program(lines)]

    def plan(self, item) -> Step:
        """Check an item against the machine (VTCM bounds, HVX and DMA arguments)."""
        if isinstance(item, Step):
            return item
        if isinstance(item, Multiply):
            check_instr(item.act)
            return Step(item, self._plan_multiply(item))
        check_instr(item)
        kind, f = item.kind, item.fields
        if kind not in BUILDERS:
            raise item.error("an activation and its weight form one multiply: pair them with "
                             "hwsim.isa.hmx.Multiply (parse_program does)")
        if kind in ("bias_load", "bias_store"):
            self._in_vtcm(item, f["address"], BIAS_SET_BYTES, 0)
        elif kind == "cvt_write":
            self._in_vtcm(item, f["address"], CROUTON_BYTES, 0)
        elif kind == "hvx":
            hvx.check(item)
            plan = hvx.PLANS[item.spec.name](f)
            for addr, nbytes in plan.reads + plan.writes:
                self._in_vtcm(item, addr, nbytes, 0)
            return Step(item, plan)
        elif kind == "dma":
            return Step(item, self._plan_dma(item))
        elif kind == "usr":
            return Step(item, USR.encode(**f))
        return Step(item)

    def _in_vtcm(self, item, addr: int, nbytes: int, arg: int, what: str = "") -> None:
        try:
            self.spaces["vtcm"].offset(addr, nbytes)
        except HwsimError as exc:
            raise item.error(f"{what}{exc}", arg) from None

    def _plan_multiply(self, item: Multiply) -> MpyPlan:
        act, wgt = item.act.fields, item.wgt.fields
        addr, start, stop = act["address"], act["channel_start"], act["channel_stop"]
        rows = None
        if item.act.kind == "act_deep":
            last = act["dc"]
            croutons = [(addr + i * CROUTON_BYTES, start if i == 0 else 0,
                         stop if i == last else 31) for i in range(last + 1)]
        elif item.act.kind == "act_single":
            croutons = [(addr, start, stop), (addr + act["dy"], start, stop)]
            rows = single_rows(act["offset"], act["spatial_mask"])
        else:
            croutons = [(addr, start, stop)]
        for i, (a, _, _) in enumerate(croutons):
            self._in_vtcm(item.act, a, CROUTON_BYTES, 0 if i == 0 else 1, f"crouton {i}: ")
        channels = sum(hi - lo + 1 for _, lo, hi in croutons[:1 if rows is not None else None])
        deep = item.wgt.kind == "wgt_deep"
        given = wgt["dw"] // VECTOR_BYTES + 1
        self._in_vtcm(item.wgt, wgt["address"], given * VECTOR_BYTES, 1, "weight range: ")
        return MpyPlan(croutons, rows, channels, wgt["address"], given,
                       channels // 2 * (2 if deep else 1), deep, wgt["negate"],
                       datapath.operands(croutons, rows, wgt["address"], self.spaces["vtcm"].base))

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
        self._costs: dict[str, float] = {}
        self.numerics = numerics
        self.dma = Dma("dma", {"vtcm": b.port("vtcm.dma"), "ddr": b.port("ddr")},
                       t.dma_setup_cycles)
        issue = _Issue(self.state.primary)
        effects: dict = {}
        for index, step in enumerate(program):
            step = self.plan(step)
            BUILDERS[step.item.kind](self, b, Emit(index, step, issue, effects if actions
                                                   else None))
        return b.table(), effects

    def peak_macs_per_cycle(self) -> float:
        return CELLS * CELLS * 2 / self.timing.mpy_cycles_per_vector

    def blocks(self, addr: int, nbytes: int) -> tuple:
        """The 2 KB VTCM blocks of a range: the resources HMX and HVX order their accesses by."""
        first = (addr - self.spaces["vtcm"].base) // CROUTON_BYTES
        last = (addr + nbytes - 1 - self.spaces["vtcm"].base) // CROUTON_BYTES
        return self._blocks[first:last + 1]

    def cycles(self, name: str, count: float = 1.0) -> int:
        """Cycles of ``count`` times the cost parameter ``name`` (read once per run)."""
        cost = self._costs.get(name)
        if cost is None:
            cost = self._costs[name] = getattr(self.timing, name)
        return math.ceil(cost * count)


DMA_QUEUE = 16   # assumption: descriptors the DMA engine buffers ahead of the thread


class _Issue:
    """What the op stream knows in program order: the primary accumulator, the DMA transfers
    not yet waited for, the latest wait every later op depends on, and the fence that the HMX
    and HVX ops since the last ``dma_fence()`` are read by."""

    def __init__(self, primary: int):
        self.primary = primary
        self.dma_tokens: list = []
        self.sync = None
        self.waits = 0
        self.fence = ("dma_fence", 0)

    def waited(self) -> tuple:
        """What every HMX and HVX op reads: the fence, and the last DMA wait."""
        return (self.fence,) if self.sync is None else (self.fence, self.sync)


@dataclass
class Emit:
    """One instruction being turned into its op: its index (the op's tag), the checked step,
    the issue state, and where its action goes (None: no actions wanted)."""

    index: int
    step: Step
    issue: _Issue
    actions: dict | None

    def act(self, op: int, action) -> None:
        if self.actions is not None and action is not None:
            self.actions[op] = action


def single_rows(offset: int, mask: int) -> np.ndarray:
    """For each accumulator spatial, its source among the 64 spatials of the two croutons of a
    single (the second's numbered 32..63): Y offset rows down, wrapping into the second
    (Figure 24)."""
    _, dy = spatial_split(offset, mask)
    grid = layouts.spatial_grid(mask)
    ny = grid.shape[0]
    rows = np.empty(CELLS, dtype=np.int64)
    for y in range(ny):
        source = y + dy
        rows[grid[y]] = grid[source % ny] + (CELLS if source >= ny else 0)
    return rows


_SHAPES = {"act": "", "act_deep": " deep", "act_single": " single"}


def _multiply(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    plan, state, vtcm, issue = e.step.plan, m.state, m.spaces["vtcm"], e.issue
    targets = [issue.primary, 1 - issue.primary][:2 if plan.deep_weights else 1]
    cycles = m.cycles("mpy_setup_cycles") + m.cycles("mpy_cycles_per_vector", plan.needed)
    cycles += m.cycles("mpy_flush_cycles_per_vector", max(0, plan.given - plan.needed))
    nbytes = plan.channels * CELLS * 2 + plan.given * VECTOR_BYTES  # activations + weights

    def action():
        datapath.multiply(vtcm, state, plan, targets, m.acc_format, m.acc_round_group,
                          m.buffers)

        def commit():
            for index in targets:
                state.acc[index] = m.buffers.acc[index]
        return commit

    blocks = sum((m.blocks(a, CROUTON_BYTES) for a, _, _ in plan.croutons), ())
    blocks += m.blocks(plan.wgt_addr, plan.given * VECTOR_BYTES)
    accs = tuple(("acc", i) for i in targets)
    label = (f"mpy{_SHAPES[e.step.item.act.kind]}{' 64f' if plan.deep_weights else ''} "
             f"k={plan.channels} acc{issue.primary}")
    op = b.add("mpy", cycles, reads=accs + blocks + ("usr",) + issue.waited(), writes=accs,
               transfers=((b.port("vtcm.hmx"), nbytes),), tag=e.index, label=label,
               macs=plan.channels * CELLS * CELLS * len(targets))
    e.act(op, action if m.numerics else None)


def _convert(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    f, state, issue = e.step.item.fields, m.state, e.issue
    index, sel = issue.primary, f["bias_sel"]
    clear = f["acc"] == 0
    if clear:
        issue.primary = 1 - index
    ebits, mbits = m.acc_format

    def swap():
        if clear:
            state.acc[index] = 0
            state.primary = 1 - index

    def action():
        if not m.numerics:
            return swap
        bias = state.bias_fields(sel)
        numerics.convert(state.acc[index], bias["input_bias"], bias["shape"], bias["scale"],
                         bias["output_bias"], state.cvt, m.cvt_out, m.shapes, f["fb_dest"],
                         f["fb_op"], f["rnd"], f["ovf"], state.usr_field("infnan_propagate"),
                         state.usr_field("nan_propagate"),
                         ebits, mbits)

        def commit():
            state.cvt[...] = m.cvt_out
            swap()
        return commit

    reads = (("acc", index), ("bias", sel), "usr", "cvt") + issue.waited()
    writes = ("cvt", ("acc", index)) if clear else ("cvt",)
    label = f"cvt acc{index} bias{sel}" + (" clear+swap" if clear else " retain")
    op = b.add("cvt", m.cycles("cvt_cycles"), reads=reads, writes=writes, tag=e.index,
               label=label)
    e.act(op, action)


def _write_convert(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    addr, state, vtcm = e.step.item.fields["address"], m.state, m.spaces["vtcm"]

    def action():
        data = datapath.write_convert(state)
        return lambda: vtcm.store(addr, data)
    op = b.add("cvt", m.cycles("cvt_write_cycles"), reads=("cvt",) + e.issue.waited(),
               writes=m.blocks(addr, CROUTON_BYTES),
               transfers=((b.port("vtcm.hmx"), CROUTON_BYTES),), tag=e.index,
               label=f"write cvt -> {addr:#x}")
    e.act(op, action if m.numerics else None)


def _bias(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    f, state, vtcm = e.step.item.fields, m.state, m.spaces["vtcm"]
    addr, index = f["address"], f["index"]
    load = e.step.item.kind == "bias_load"

    def action():
        if load:
            words = layouts.unpack_bias_words(vtcm.view(addr, BIAS_SET_BYTES))
            return lambda: state.set_bias(index, words)
        data = layouts.pack_bias_words(state.bias[index])
        return lambda: vtcm.store(addr, data)

    blocks = m.blocks(addr, BIAS_SET_BYTES)
    resource = (("bias", index),)
    op = b.add("cvt", m.cycles("bias_cycles"),
               reads=(blocks if load else resource) + e.issue.waited(),
               writes=resource if load else blocks,
               transfers=((b.port("vtcm.hmx"), BIAS_SET_BYTES),), tag=e.index,
               label=f"bias {'load' if load else 'store'} {addr:#x} [{index}]")
    e.act(op, action if m.numerics else None)


def _clear(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    op = b.add("mpy", m.cycles("clracc_cycles"), reads=e.issue.waited(),
               writes=(("acc", 0), ("acc", 1)), tag=e.index, label="clear acc")
    e.act(op, lambda: lambda: m.state.acc.fill(0))


def _usr(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    value = e.step.plan
    op = b.add("cvt", m.cycles("usr_cycles"), reads=e.issue.waited(), writes=("usr",),
               tag=e.index, label=f"USR = {value:#x}")
    e.act(op, lambda: lambda: setattr(m.state, "usr", value))


def _hvx(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    plan, vtcm = e.step.plan, m.spaces["vtcm"]
    reads = sum((m.blocks(a, n) for a, n in plan.reads), ())
    writes = sum((m.blocks(a, n) for a, n in plan.writes), ())
    op = b.add("hvx", m.cycles(plan.cost, plan.vectors), reads=reads + e.issue.waited(),
               writes=writes, transfers=((b.port("vtcm.hvx"), plan.moved),), tag=e.index,
               label=f"{e.step.item.spec.name} {plan.vectors}v")
    e.act(op, (lambda: plan.run(vtcm)) if m.numerics else None)


def _dma(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    copy, issue = e.step.plan, e.issue
    token = ("dma", len(issue.dma_tokens), issue.waits)
    issue.dma_tokens.append(token)
    reads = ()
    if copy.src.name == "vtcm":  # the thread sees its earlier HMX/HVX stores before it starts
        last = copy.src_addr + (copy.rows - 1) * copy.src_stride
        reads = m.blocks(min(copy.src_addr, last), abs(last - copy.src_addr) + copy.row_bytes)
    m.dma.add(b, copy, token, e.index, e.actions if m.numerics else None, reads=reads)


def _dma_wait(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    issue = e.issue
    issue.waits += 1
    tokens, issue.dma_tokens = tuple(issue.dma_tokens), []
    issue.sync = ("dma_wait", issue.waits)
    b.add("dma", 0, reads=tokens, writes=(issue.sync,), tag=e.index, label="dma_wait")


def _dma_fence(m: HmxMachine, b: OpBuilder, e: Emit) -> None:
    # every HMX and HVX op since the last fence reads ``issue.fence``: writing it waits (WAR) for
    # them to start, i.e. to have read their operands; later DMAs queue behind it on the unit
    fence = e.issue.fence
    e.issue.fence = ("dma_fence", fence[1] + 1)
    b.add("dma", 0, writes=(fence,), tag=e.index, label="dma_fence")


BUILDERS: dict[str, Callable[[HmxMachine, OpBuilder, Emit], None]] = {
    "mpy": _multiply, "cvt": _convert, "cvt_write": _write_convert, "bias_load": _bias,
    "bias_store": _bias, "clracc": _clear, "usr": _usr, "hvx": _hvx, "dma": _dma,
    "dma_wait": _dma_wait, "dma_fence": _dma_fence,
}
