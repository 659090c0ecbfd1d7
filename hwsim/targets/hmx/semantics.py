"""The semantics of the HMX machine's instructions (V81 HMX PRM, chapters 2-5): for each kind,
a builder (``BUILDERS``) that turns one checked instruction into its op on the timeline, with
what it reads, writes and occupies, and the action that changes the state when the op runs.

Multiplies (activation plain, deep with dC + 1 contiguous croutons, single with the Y offset
into a second crouton dY away; channel start/stop; weight negate; weight deep writing both
accumulators; too few weights read as zeros, too many cost flush cycles), bias load/store with
their index, the convert with bias select, rnd, ovf, feedback and retain vs clear-and-swap, the
write of the convert state with its spatial mask, clear accumulators and USR writes; HVX
operations (``hvx.py``) and DMA between DDR and VTCM. A builder takes the machine
(``machine.HmxMachine``: its state, memories and costs), the op table being built and the
instruction (``Emit``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hwsim.isa.hmx import BIAS_SET_BYTES, CROUTON_BYTES, VECTOR_BYTES
from hwsim.targets.hmx import datapath, layouts, numerics
from hwsim.targets.hmx.state import CELLS
from hwsim.timing.optable import OpBuilder


class Issue:
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
    step: Any               # machine.CheckedItem
    issue: Issue
    actions: dict | None

    def act(self, op: int, action) -> None:
        if self.actions is not None and action is not None:
            self.actions[op] = action


_SHAPES = {"act": "", "act_deep": " deep", "act_single": " single"}


_ACCS = {(0,): (("acc", 0),), (1,): (("acc", 1),), (0, 1): (("acc", 0), ("acc", 1)),
         (1, 0): (("acc", 1), ("acc", 0))}  # the accumulator resources of the targets


def _multiply(m, b: OpBuilder, e: Emit) -> None:
    plan, state, vtcm, issue = e.step.plan, m.state, m.spaces["vtcm"], e.issue
    targets = (issue.primary, 1 - issue.primary) if plan.deep_weights else (issue.primary,)
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

    accs = _ACCS[targets]
    label = (f"mpy{_SHAPES[e.step.item.act.kind]}{' 64f' if plan.deep_weights else ''} "
             f"k={plan.channels} acc{issue.primary}")
    op = b.add("mpy", cycles, reads=accs + plan.blocks + ("usr",) + issue.waited(), writes=accs,
               transfers=((b.port("vtcm.hmx"), nbytes),), tag=e.index, label=label,
               macs=plan.channels * CELLS * CELLS * len(targets))
    e.act(op, action if m.numerics else None)


def _convert(m, b: OpBuilder, e: Emit) -> None:
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


def _write_convert(m, b: OpBuilder, e: Emit) -> None:
    addr, state, vtcm = e.step.item.fields["address"], m.state, m.spaces["vtcm"]

    def action():
        data = datapath.write_convert(state)
        return lambda: vtcm.store(addr, data)
    op = b.add("cvt", m.cycles("cvt_write_cycles"), reads=("cvt",) + e.issue.waited(),
               writes=m.blocks(addr, CROUTON_BYTES),
               transfers=((b.port("vtcm.hmx"), CROUTON_BYTES),), tag=e.index,
               label=f"write cvt -> {addr:#x}")
    e.act(op, action if m.numerics else None)


def _bias(m, b: OpBuilder, e: Emit) -> None:
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


def _clear(m, b: OpBuilder, e: Emit) -> None:
    op = b.add("mpy", m.cycles("clracc_cycles"), reads=e.issue.waited(),
               writes=(("acc", 0), ("acc", 1)), tag=e.index, label="clear acc")
    e.act(op, lambda: lambda: m.state.acc.fill(0))


def _usr(m, b: OpBuilder, e: Emit) -> None:
    value = e.step.plan
    op = b.add("cvt", m.cycles("usr_cycles"), reads=e.issue.waited(), writes=("usr",),
               tag=e.index, label=f"USR = {value:#x}")
    e.act(op, lambda: lambda: setattr(m.state, "usr", value))


def _hvx(m, b: OpBuilder, e: Emit) -> None:
    plan, vtcm = e.step.plan, m.spaces["vtcm"]
    reads, writes = m.range_blocks(plan.reads), m.range_blocks(plan.writes)
    op = b.add("hvx", m.cycles(plan.cost, plan.vectors), reads=reads + e.issue.waited(),
               writes=writes, transfers=((b.port("vtcm.hvx"), plan.moved),), tag=e.index,
               label=f"{e.step.item.spec.name} {plan.vectors}v")
    e.act(op, (lambda: plan.run(vtcm)) if m.numerics else None)


def _dma(m, b: OpBuilder, e: Emit) -> None:
    copy, issue = e.step.plan, e.issue
    token = ("dma", len(issue.dma_tokens), issue.waits)
    issue.dma_tokens.append(token)
    reads = ()
    if copy.src.name == "vtcm":  # the thread sees its earlier HMX/HVX stores before it starts
        last = copy.src_addr + (copy.rows - 1) * copy.src_stride
        reads = m.blocks(min(copy.src_addr, last), abs(last - copy.src_addr) + copy.row_bytes)
    m.dma.add(b, copy, token, e.index, e.actions if m.numerics else None, reads=reads)


def _dma_wait(m, b: OpBuilder, e: Emit) -> None:
    issue = e.issue
    issue.waits += 1
    tokens, issue.dma_tokens = tuple(issue.dma_tokens), []
    issue.sync = ("dma_wait", issue.waits)
    b.add("dma", 0, reads=tokens, writes=(issue.sync,), tag=e.index, label="dma_wait")


def _dma_fence(m, b: OpBuilder, e: Emit) -> None:
    # every HMX and HVX op since the last fence reads ``issue.fence``: writing it waits (WAR) for
    # them to start, i.e. to have read their operands; later DMAs queue behind it on the unit
    fence = e.issue.fence
    e.issue.fence = ("dma_fence", fence[1] + 1)
    b.add("dma", 0, writes=(fence,), tag=e.index, label="dma_fence")


BUILDERS: dict[str, Callable] = {
    "mpy": _multiply, "cvt": _convert, "cvt_write": _write_convert, "bias_load": _bias,
    "bias_store": _bias, "clracc": _clear, "usr": _usr, "hvx": _hvx, "dma": _dma,
    "dma_wait": _dma_wait, "dma_fence": _dma_fence,
}
